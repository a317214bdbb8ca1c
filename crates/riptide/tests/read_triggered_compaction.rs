//! Read-triggered compaction: seeks that merge several level-0 tables pay, table by table, for
//! a compaction of level 0 below its file-count trigger (`read_compaction_bytes_per_table_seek`),
//! and so do scans for the older versions they pass in those tables. The tests build a level 0
//! of overlapping files that the file-count trigger leaves alone, then check that enough seeks
//! or scans compact it (and only enough), that seeks reading their blocks from the file pay
//! sooner than seeks finding them cached, that the rule can be turned off and on again, that a
//! column family's own setting applies, and that nothing read changes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, Options, ReadOptions, Stats};

use common::{dump, key, level0_keeping_options, value};

/// Keys per level-0 file; every file holds a new version of all of them, so the files overlap.
const KEYS: u64 = 3000;

/// Level-0 files the tests build, under the file-count trigger of 8.
const LEVEL0_FILES: u64 = 3;

fn options(bytes_per_table_seek: u64) -> Options {
    Options {
        read_compaction_bytes_per_table_seek: bytes_per_table_seek,
        ..level0_keeping_options(Arc::new(MemFileSystem::new()))
    }
}

/// Writes `LEVEL0_FILES` overlapping level-0 files and returns what the database holds.
fn build_level0(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for version in 1..=LEVEL0_FILES {
        for number in 0..KEYS {
            db.put(&key(number), &value(number, version, 60)).expect("put");
            model.insert(key(number), value(number, version, 60));
        }
        db.flush().expect("flush");
    }
    db.wait_for_background_work().expect("idle");
    model
}

fn level0_files(stats: &Stats) -> u64 {
    stats.levels[0].files as u64
}

/// Seeks `count` times with one iterator, to keys spread over the range, checking each answer.
fn seek(db: &Db, count: u64) {
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    for index in 0..count {
        let number = (index * 7919) % KEYS;
        iterator.seek(&key(number));
        assert!(iterator.valid(), "seek to key {number}");
        assert_eq!(iterator.key(), key(number).as_slice());
    }
    iterator.status().expect("iterator status");
}

/// Charges come in units: an extra level-0 table a seek positions in costs two when its block
/// is cached, and each block a level-0 table reads from the file during a seek adds 14; 16
/// units are worth `bytes_per_table_seek` bytes of compaction.
const UNITS_PER_TABLE_SEEK: u64 = 16;
const MISS_UNITS: u64 = 14;
const CACHED_TABLE_UNITS: u64 = 2;
/// Every forward step also charges a unit per five rows per extra level-0 table (the merge's
/// heap moves over each of them at every row).
const STEPPED_ROW_TABLES_PER_UNIT: u64 = 5;

/// The units a scan's `KEYS` forward steps charge over `extra` extra level-0 tables.
fn step_units(extra: u64) -> u64 {
    KEYS * extra / STEPPED_ROW_TABLES_PER_UNIT
}

/// Reads every entry once, so that every block is cached, and returns the units this charged:
/// its one seek positions in every level-0 table (all but one extra when level 0 is alone),
/// each reading its first block from the file; its steps move over the extra tables; and they
/// pass, at every key, the older versions the other level-0 files hold (see [`units_per_scan`]).
fn warm_cache(db: &Db) -> u64 {
    let stats = db.stats();
    let files = level0_files(&stats);
    let deeper = stats.levels.iter().skip(1).any(|level| level.files > 0);
    dump(db, &ReadOptions::default());
    let extra = if deeper { files } else { files - 1 };
    // Every file holds every key, and so does the deeper level when there is one.
    let older_versions_per_key = files - 1 + u64::from(deeper);
    extra * CACHED_TABLE_UNITS
        + files * MISS_UNITS
        + step_units(extra)
        + KEYS * older_versions_per_key * CACHED_TABLE_UNITS
}

/// What a full scan with cached blocks charges over `LEVEL0_FILES` files that each hold a
/// version of every key and no deeper level: its seek positions in all but one of them (two
/// units each), its steps move over those tables, and at every key it passes the older
/// versions of the other files (two units each).
fn units_per_scan() -> u64 {
    (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS
        + step_units(LEVEL0_FILES - 1)
        + KEYS * (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS
}

/// The job's units at `bytes_per_table_seek`: level 0 and the shallowest deeper level holding
/// files.
fn threshold_units(db: &Db, bytes_per_table_seek: u64) -> u64 {
    let stats = db.stats();
    let below = stats.levels.iter().skip(1).map(|level| level.size_bytes).find(|&bytes| bytes > 0);
    let job_bytes = stats.levels[0].size_bytes + below.unwrap_or(0);
    (job_bytes * UNITS_PER_TABLE_SEEK).div_ceil(bytes_per_table_seek)
}

/// The seeks with cached blocks that pay for the compaction at `bytes_per_table_seek`, after
/// `charged` units: the job's units (level 0 and the shallowest deeper level holding files)
/// over the units one seek makes (two per extra level-0 table).
fn seeks_to_pay(db: &Db, bytes_per_table_seek: u64, charged: u64) -> u64 {
    let stats = db.stats();
    let below = stats.levels.iter().skip(1).map(|level| level.size_bytes).find(|&bytes| bytes > 0);
    let job_bytes = stats.levels[0].size_bytes + below.unwrap_or(0);
    let extra_tables = if below.is_some() { level0_files(&stats) } else { level0_files(&stats) - 1 };
    let units_per_seek = extra_tables * CACHED_TABLE_UNITS;
    let threshold = (job_bytes * UNITS_PER_TABLE_SEEK).div_ceil(bytes_per_table_seek);
    (threshold - charged).div_ceil(units_per_seek)
}

/// Full scans with cached blocks, each charging `per_scan` units, after `charged` units: the
/// job's `threshold` needs several of them; one scan short of it level 0 stays as it is, and
/// the last one has read-triggered compaction merge it away; every scan reads `model`.
fn check_scans_pay_for_the_job(
    db: &Db,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    charged: u64,
    per_scan: u64,
    threshold: u64,
) {
    assert!(charged < threshold, "warming the cache alone paid for the job ({charged} of {threshold} units)");
    let scans = (threshold - charged).div_ceil(per_scan);
    assert!(scans >= 3, "the test needs several scans before the threshold, got {scans}");
    for _ in 0..scans - 1 {
        assert_eq!(dump(db, &ReadOptions::default()), *model);
    }
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), LEVEL0_FILES, "{} scans of {scans} compacted level 0:\n{stats}", scans - 1);
    assert_eq!(stats.read_triggered_compactions, 0);

    assert_eq!(dump(db, &ReadOptions::default()), *model);
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), 0, "level 0 was not compacted after {scans} scans:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 1, "{stats}");
    assert_eq!(dump(db, &ReadOptions::default()), *model, "the compaction changed what is read");
}

#[test]
fn seeks_compact_level0_once_they_paid_for_it_and_not_before() {
    let db = Db::open("/read-triggered", options(128)).expect("open");
    let model = build_level0(&db);
    let stats = db.stats();
    assert_eq!(level0_files(&stats), LEVEL0_FILES, "the file-count trigger must leave level 0 alone:\n{stats}");
    let charged = warm_cache(&db);
    let needed = seeks_to_pay(&db, 128, charged);
    assert!(needed > 300, "the test needs a threshold well above one flush of charges, got {needed} seeks");

    // Just short of the threshold (several iterators, each adding its charges when dropped):
    // nothing happens.
    let short = needed - 1;
    seek(&db, short / 2);
    seek(&db, short - short / 2);
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), LEVEL0_FILES, "{short} seeks of {needed} compacted level 0:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 0);

    // One more seek pays for it.
    seek(&db, 1);
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), 0, "level 0 was not compacted after {needed} seeks:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 1, "{stats}");
    assert!(stats.to_string().contains("1 read-triggered"), "{stats}");
    assert_eq!(dump(&db, &ReadOptions::default()), model, "the compaction changed what is read");

    // With level 0 gone, seeks charge nothing and start no further job.
    seek(&db, 5 * needed);
    db.wait_for_background_work().expect("idle");
    assert_eq!(db.stats().compaction_count, stats.compaction_count);
    db.close().expect("close");
}

/// A single level-0 file over a deeper level also costs every seek a table, which a job
/// merging it down removes; and the charges start again after each job that takes level 0.
#[test]
fn a_single_level0_file_over_a_deeper_level_is_charged() {
    let db = Db::open("/read-triggered-single", options(128)).expect("open");
    let mut model = build_level0(&db);
    seek(&db, 100_000);
    db.wait_for_background_work().expect("idle");
    assert_eq!(level0_files(&db.stats()), 0);
    for number in 0..KEYS {
        db.put(&key(number), &value(number, 9, 60)).expect("put");
        model.insert(key(number), value(number, 9, 60));
    }
    db.flush().expect("flush");
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), 1, "{stats}");
    // One unit per seek with cached blocks: the level-0 table.
    let charged = warm_cache(&db);
    let needed = seeks_to_pay(&db, 128, charged);
    seek(&db, needed - 1);
    db.wait_for_background_work().expect("idle");
    assert_eq!(level0_files(&db.stats()), 1, "{} seeks of {needed} compacted level 0", needed - 1);
    seek(&db, 1);
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), 0, "{stats}");
    assert_eq!(stats.read_triggered_compactions, 2, "{stats}");
    assert_eq!(dump(&db, &ReadOptions::default()), model);
    db.close().expect("close");
}

#[test]
fn zero_turns_the_rule_off_and_set_options_turns_it_on() {
    let db = Db::open("/read-triggered-off", options(0)).expect("open");
    build_level0(&db);
    seek(&db, 50_000);
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), LEVEL0_FILES, "the rule is off:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 0);

    let family = db.default_column_family();
    let mut on = db.column_family_options(&family).expect("options");
    on.read_compaction_bytes_per_table_seek = 128;
    db.set_column_family_options(&family, on).expect("set options");
    seek(&db, seeks_to_pay(&db, 128, 0));
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert_eq!(level0_files(&stats), 0, "{stats}");
    assert_eq!(stats.read_triggered_compactions, 1);
    db.close().expect("close");
}

/// A seek whose level-0 tables read their blocks from the file costs a whole charge per table,
/// not an eighth: with no block cache level 0 is compacted after far fewer seeks, and the
/// same seeks over cached blocks leave it alone.
#[test]
fn seeks_that_read_blocks_from_the_file_pay_sooner() {
    let uncached =
        Db::open("/read-triggered-uncached", Options { block_cache_size_bytes: 0, ..options(128) }).expect("open");
    build_level0(&uncached);
    // Every seek is charged for the two extra tables; it reads one block from the file: each
    // table holds every key, so the newest lands on it and the older two, holding only older
    // versions, are left unpositioned (I49).
    let units_per_seek = (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS + MISS_UNITS;
    let stats = uncached.stats();
    let threshold = (stats.levels[0].size_bytes * UNITS_PER_TABLE_SEEK).div_ceil(128);
    let needed = threshold.div_ceil(units_per_seek);
    assert!(needed > 300, "the test needs a threshold well above one flush of charges, got {needed} seeks");
    seek(&uncached, needed - 1);
    uncached.wait_for_background_work().expect("idle");
    assert_eq!(level0_files(&uncached.stats()), LEVEL0_FILES, "{} uncached seeks of {needed}", needed - 1);
    seek(&uncached, 1);
    uncached.wait_for_background_work().expect("idle");
    let stats = uncached.stats();
    assert_eq!(level0_files(&stats), 0, "{needed} uncached seeks did not compact level 0:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 1);
    uncached.close().expect("close");

    let cached = Db::open("/read-triggered-cached", options(128)).expect("open");
    build_level0(&cached);
    warm_cache(&cached);
    seek(&cached, needed);
    cached.wait_for_background_work().expect("idle");
    let stats = cached.stats();
    assert_eq!(level0_files(&stats), LEVEL0_FILES, "{needed} cached seeks compacted level 0:\n{stats}");
    assert_eq!(stats.read_triggered_compactions, 0);
    cached.close().expect("close");
}

/// Point lookups probe level-0 files through their bloom filters and charge nothing.
#[test]
fn point_lookups_do_not_charge() {
    let db = Db::open("/read-triggered-gets", options(1)).expect("open");
    let model = build_level0(&db);
    for round in 0..3 {
        for (key, value) in &model {
            assert_eq!(db.get(key).expect("get").as_ref(), Some(value), "round {round}");
        }
    }
    db.wait_for_background_work().expect("idle");
    assert_eq!(level0_files(&db.stats()), LEVEL0_FILES);
    db.close().expect("close");
}

/// Scans over keys rewritten since level 0 was compacted pass, at every key, the older versions
/// that the other level-0 files hold: work a compaction of level 0 removes, so they pay for it
/// as seeks do. (sysbench's range scans after its write workloads met two level-0 files per
/// table this way: read-only transactions ran 19 % faster once they were compacted.)
#[test]
fn scans_passing_older_versions_in_level0_pay_for_its_compaction() {
    // A cheaper charge than the default, so that the job takes several scans to pay for.
    let db = Db::open("/read-triggered-scans", options(32)).expect("open");
    let model = build_level0(&db);
    let charged = warm_cache(&db);
    check_scans_pay_for_the_job(&db, &model, charged, units_per_scan(), threshold_units(&db, 32));
    db.close().expect("close");
}

/// Scans over overlapping level-0 files that share no key pass no older version, but the
/// merge still moves its heap over every file at every row: the steps alone pay for the job.
/// (100-key random scans over 1M keys in three such files cost 24 us of CPU each against 14.8
/// us over the one table their compaction left, and paid for it only after nine-tenths of a
/// 12-second benchtool run when steps charged nothing.)
#[test]
fn scans_over_interleaved_level0_files_pay_for_their_steps() {
    let db = Db::open("/read-triggered-interleaved", options(32)).expect("open");
    // Each file holds every third key, so all three span the whole range.
    let mut model = BTreeMap::new();
    for file in 0..LEVEL0_FILES {
        for number in (file..KEYS).step_by(LEVEL0_FILES as usize) {
            db.put(&key(number), &value(number, 1, 60)).expect("put");
            model.insert(key(number), value(number, 1, 60));
        }
        db.flush().expect("flush");
    }
    db.wait_for_background_work().expect("idle");
    assert_eq!(level0_files(&db.stats()), LEVEL0_FILES);
    // The first scan reads the first block of each file from the file during its seek.
    assert_eq!(dump(&db, &ReadOptions::default()), model);
    let extra = LEVEL0_FILES - 1;
    let charged = extra * CACHED_TABLE_UNITS + LEVEL0_FILES * MISS_UNITS + step_units(extra);
    let per_scan = extra * CACHED_TABLE_UNITS + step_units(extra);
    check_scans_pay_for_the_job(&db, &model, charged, per_scan, threshold_units(&db, 32));
    db.close().expect("close");
}

/// Older versions that a compaction of level 0 would keep are not charged: when the newest
/// version of every key is in the memtable and each level-0 file holds one older version, the
/// job would leave one of those per key, so a scan over two files pays for one of them.
#[test]
fn versions_a_compaction_keeps_are_not_charged() {
    let db = Db::open("/read-triggered-memtable", options(32)).expect("open");
    let mut model = build_level0(&db);
    // A newer version of every key in the memtable.
    for number in 0..KEYS {
        db.put(&key(number), &value(number, 99, 60)).expect("put");
        model.insert(key(number), value(number, 99, 60));
    }
    let charged = warm_cache_with_memtable(&db);
    // Each scan: a seek over the level-0 files (two extra), steps over them, and per key the
    // older versions of the three files passed, of which a compaction would remove two.
    let per_scan = (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS
        + step_units(LEVEL0_FILES - 1)
        + KEYS * (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS;
    check_scans_pay_for_the_job(&db, &model, charged, per_scan, threshold_units(&db, 32));
    db.close().expect("close");
}

/// [`warm_cache`] with the newest version of every key in the memtable: one seek (two extra
/// level-0 tables, each reading its first block), steps over the two extra tables, and per key
/// two of the three older versions.
fn warm_cache_with_memtable(db: &Db) -> u64 {
    dump(db, &ReadOptions::default());
    (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS
        + LEVEL0_FILES * MISS_UNITS
        + step_units(LEVEL0_FILES - 1)
        + KEYS * (LEVEL0_FILES - 1) * CACHED_TABLE_UNITS
}
