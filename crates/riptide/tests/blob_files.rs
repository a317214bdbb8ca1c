//! Key-value separation (blob files): a model test against a `BTreeMap` with flushes,
//! compactions, snapshots and reopens; corruption and loss of a blob file reported with file
//! and offset; garbage collection giving space back; snapshots and iterators keeping old blob
//! values readable; transactions reading separated values; old databases opening unchanged.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::{FileSystem, MemFileSystem};
use riptide::{Compression, Db, Error, Options, ReadOptions, TransactionOptions};

use common::{dump, key, small_options, value};

/// Values of this many bytes and more go to blob files in these tests.
const THRESHOLD_BYTES: usize = 200;

fn blob_options(file_system: Arc<dyn FileSystem>) -> Options {
    Options { min_blob_size_bytes: Some(THRESHOLD_BYTES), ..small_options(file_system) }
}

/// The blob options with values stored in blob files compressed with `compression`.
fn blob_options_compressed(file_system: Arc<dyn FileSystem>, compression: Compression) -> Options {
    Options { blob_compression: compression, ..blob_options(file_system) }
}

/// The compressions the model test moves between at its reopens, so that blob files of every
/// form live side by side and garbage collection moves values from one form to another.
const COMPRESSIONS: [Compression; 4] = [Compression::Lz4, Compression::None, Compression::Zstd, Compression::Snappy];

fn blob_file_names(file_system: &MemFileSystem, dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        file_system.file_names(dir).into_iter().filter(|name| name.ends_with(".blob")).collect();
    names.sort();
    names
}

fn blob_bytes(file_system: &MemFileSystem, dir: &Path) -> u64 {
    blob_file_names(file_system, dir).iter().map(|name| file_system.file_size(&dir.join(name)).expect("size")).sum()
}

/// A value of `length` bytes that names its key and version.
fn sized_value(number: u64, version: u64, length: usize) -> Vec<u8> {
    value(number, version, length)
}

fn check_against_model(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, options: &ReadOptions, context: &str) {
    assert_eq!(&dump(db, options), model, "{context}: forward scan");
    let mut iterator = db.iter(options).expect("iterator");
    iterator.seek_to_last();
    for (expected_key, expected_value) in model.iter().rev() {
        assert!(iterator.valid(), "{context}: reverse scan ended early");
        assert_eq!(
            (iterator.key(), iterator.value()),
            (expected_key.as_slice(), expected_value.as_slice()),
            "{context}"
        );
        iterator.prev();
    }
    assert!(!iterator.valid());
    iterator.status().expect("reverse status");
    for (stored_key, stored_value) in model.iter().step_by(7) {
        assert_eq!(
            db.get_opt(stored_key, options).expect("get").as_deref(),
            Some(stored_value.as_slice()),
            "{context}"
        );
    }
}

#[test]
fn model_with_flushes_compactions_snapshots_and_reopens() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-model");
    let mut rng = SmallRng::seed_from_u64(19);
    let mut db = Db::open(&dir, blob_options(file_system.clone())).expect("open");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snapshots = Vec::new();
    for step in 0..4_000u64 {
        let number = rng.gen_range(0..300);
        match rng.gen_range(0..100) {
            0..=59 => {
                // Half the values are large enough to be separated, some exactly at the threshold.
                let length = match rng.gen_range(0..4) {
                    0 => THRESHOLD_BYTES,
                    1 => THRESHOLD_BYTES - 1,
                    2 => rng.gen_range(THRESHOLD_BYTES..3_000),
                    _ => rng.gen_range(10..100),
                };
                let written = sized_value(number, step, length);
                db.put(&key(number), &written).expect("put");
                model.insert(key(number), written);
            }
            60..=74 => {
                db.delete(&key(number)).expect("delete");
                model.remove(&key(number));
            }
            75..=89 => {
                let expected = model.get(&key(number)).cloned();
                assert_eq!(db.get(&key(number)).expect("get"), expected, "get at step {step}");
            }
            90..=93 => db.flush().expect("flush"),
            94..=95 => db.compact_all().expect("compact"),
            96..=97 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    let (snapshot, frozen) = snapshots.remove(rng.gen_range(0..snapshots.len()));
                    let options = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
                    check_against_model(&db, &frozen, &options, &format!("snapshot at step {step}"));
                }
            }
            _ => {
                snapshots.clear();
                db.close().expect("close");
                let compression = COMPRESSIONS[(step % 4) as usize];
                db = Db::open(&dir, blob_options_compressed(file_system.clone(), compression)).expect("reopen");
                let readahead = ReadOptions { blob_readahead: step % 2 == 0, ..ReadOptions::default() };
                check_against_model(&db, &model, &readahead, &format!("reopen at step {step}"));
            }
        }
    }
    for (snapshot, frozen) in snapshots.drain(..) {
        let options = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
        check_against_model(&db, &frozen, &options, "final snapshot");
    }
    db.flush().expect("flush");
    db.compact_all().expect("compact");
    check_against_model(&db, &model, &ReadOptions::default(), "end");
    // Scans that read blob files ahead (`blob_readahead`) see exactly the same.
    check_against_model(&db, &model, &ReadOptions { blob_readahead: true, ..ReadOptions::default() }, "readahead");
    assert!(!blob_file_names(&file_system, &dir).is_empty(), "large values went to blob files");
    db.close().expect("close");
    let db = Db::open(&dir, blob_options(file_system.clone())).expect("reopen");
    check_against_model(&db, &model, &ReadOptions::default(), "after the last reopen");
    // Separation off: the references written before stay readable.
    db.close().expect("close");
    let db = Db::open(&dir, small_options(file_system)).expect("reopen without separation");
    check_against_model(&db, &model, &ReadOptions::default(), "separation turned off");
}

/// Writes `count` large values and flushes them into one blob file; returns its path.
fn one_blob_file(file_system: &Arc<MemFileSystem>, dir: &Path, count: u64) -> (Db, PathBuf) {
    let db = Db::open(dir, blob_options(file_system.clone())).expect("open");
    for number in 0..count {
        db.put(&key(number), &sized_value(number, 1, 1_000)).expect("put");
    }
    db.flush().expect("flush");
    let names = blob_file_names(file_system, dir);
    assert_eq!(names.len(), 1, "one flush, one blob file: {names:?}");
    (db, dir.join(&names[0]))
}

#[test]
fn a_corrupt_blob_record_is_corruption_naming_the_file_and_the_record() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-corrupt");
    let (db, blob_path) = one_blob_file(&file_system, &dir, 5);
    db.close().expect("close");
    // Records follow a 20-byte header in key order; each is 13 bytes of framing, the key and
    // the value as stored (LZ4-compressed: these values repeat). Damage the stored value of
    // the second key.
    let file = riptide::internals::decode::blob_file(&file_system.read_all(&blob_path).expect("read")).expect("decode");
    let second = &file.records[1];
    assert_eq!(second.key, key(1));
    assert!(second.value_type == 1 && second.stored.len() < 1_000, "the value was stored compressed");
    let second_record = second.offset;
    let stored_middle = second_record + 13 + key(1).len() as u64 + second.stored.len() as u64 / 2;
    file_system.corrupt_byte(&blob_path, stored_middle).expect("corrupt");
    let db = Db::open(&dir, blob_options(file_system.clone())).expect("open");
    assert_eq!(db.get(&key(0)).expect("intact").as_deref(), Some(sized_value(0, 1, 1_000).as_slice()));
    match db.get(&key(1)) {
        Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (blob_path.clone(), second_record)),
        other => panic!("expected corruption of the blob record, got {other:?}"),
    }
    // An iterator stops at the damaged value with the same error, and never yields other bytes.
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    iterator.seek_to_first();
    assert_eq!(iterator.key(), key(0).as_slice());
    iterator.next();
    assert!(!iterator.valid(), "the damaged value is not returned");
    match iterator.status() {
        Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (blob_path, second_record)),
        other => panic!("expected corruption from the iterator, got {other:?}"),
    }
}

#[test]
fn a_missing_blob_file_fails_open_as_corruption() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-missing");
    let (db, blob_path) = one_blob_file(&file_system, &dir, 3);
    db.close().expect("close");
    file_system.remove(&blob_path).expect("remove");
    match Db::open(&dir, blob_options(file_system.clone())) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, blob_path),
        Err(other) => panic!("expected corruption, got {other:?}"),
        Ok(_) => panic!("a database whose blob file is gone must not open"),
    }
    // A truncated one too.
    let dir = PathBuf::from("/blob-truncated");
    let (db, blob_path) = one_blob_file(&file_system, &dir, 3);
    db.close().expect("close");
    let size = file_system.file_size(&blob_path).expect("size");
    file_system.truncate(&blob_path, size - 1).expect("truncate");
    assert!(matches!(Db::open(&dir, blob_options(file_system.clone())), Err(Error::Corruption { .. })));
}

#[test]
fn garbage_collection_gives_space_back_after_overwrites() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-gc");
    // Memtables large enough for a round, and no compaction before `compact_all`, so that each
    // round's values are one blob file.
    // Values stored as they are, so that file sizes count value bytes (these values repeat and
    // would compress to almost nothing; the model test collects garbage of compressed ones).
    let options = Options {
        blob_compression: Compression::None,
        blob_garbage_collection_ratio: 0.25,
        memtable_size_bytes: 4 << 20,
        level0_compaction_trigger_files: 20,
        level0_slowdown_writes_files: 30,
        level0_stop_writes_files: 40,
        ..blob_options(file_system.clone())
    };
    let db = Db::open(&dir, options.clone()).expect("open");
    const KEYS: u64 = 200;
    const VALUE_BYTES: usize = 2_000;
    const ROUNDS: u64 = 8;
    let live_bytes = KEYS * VALUE_BYTES as u64;
    // Round 0 writes every key; round r > 0 every key but those with `number % 8 == r - 1`. So
    // round 7's file keeps the values of keys `7 mod 8` live (a seventh of it) while the rest
    // is garbage: only moving those values out can give its space back.
    let last_round = |number: u64| (0..ROUNDS).rev().find(|&round| round == 0 || number % 8 != round - 1).unwrap_or(0);
    for round in 0..ROUNDS {
        for number in (0..KEYS).filter(|&number| round == 0 || number % 8 != round - 1) {
            db.put(&key(number), &sized_value(number, round, VALUE_BYTES)).expect("put");
        }
        db.flush().expect("flush");
    }
    let before = blob_bytes(&file_system, &dir);
    assert_eq!(blob_file_names(&file_system, &dir).len() as u64, ROUNDS);
    assert!(before > 6 * live_bytes, "overwrites left garbage behind: {before} bytes of blob files");
    db.compact_all().expect("compact");
    db.wait_for_background_work().expect("settle");
    let after = blob_bytes(&file_system, &dir);
    // The statistics count exactly the blob files on disk.
    let stats = db.stats();
    let family = &stats.column_families[0];
    assert_eq!(family.blob_files, blob_file_names(&file_system, &dir).len());
    assert_eq!(family.blob_file_bytes, after);
    assert!(family.blob_garbage_bytes <= family.blob_file_bytes);
    assert!(
        after <= live_bytes + live_bytes / 2,
        "blob files hold {after} bytes for {live_bytes} live bytes (before: {before})"
    );
    let expected: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..KEYS).map(|number| (key(number), sized_value(number, last_round(number), VALUE_BYTES))).collect();
    assert_eq!(dump(&db, &ReadOptions::default()), expected);
    db.close().expect("close");
    let db = Db::open(&dir, options).expect("reopen");
    assert_eq!(dump(&db, &ReadOptions::default()), expected);
}

#[test]
fn snapshots_and_iterators_keep_old_blob_values_readable() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-snapshots");
    let options = Options { blob_garbage_collection_ratio: 0.0, ..blob_options(file_system.clone()) };
    let db = Db::open(&dir, options).expect("open");
    for number in 0..50 {
        db.put(&key(number), &sized_value(number, 1, 500)).expect("put");
    }
    db.flush().expect("flush");
    let old_files = blob_file_names(&file_system, &dir);
    let snapshot = db.snapshot();
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    for number in 0..50 {
        db.put(&key(number), &sized_value(number, 2, 500)).expect("overwrite");
    }
    db.flush().expect("flush");
    db.compact_all().expect("compact");
    db.wait_for_background_work().expect("settle");
    // The iterator's version still names the old blob file: it is still there and readable.
    for name in &old_files {
        assert!(file_system.exists(&dir.join(name)), "{name} deleted while an iterator needs it");
    }
    iterator.seek_to_first();
    for number in 0..50 {
        assert!(iterator.valid());
        assert_eq!(iterator.value(), sized_value(number, 1, 500).as_slice());
        iterator.next();
    }
    iterator.status().expect("status");
    drop(iterator);
    let at_snapshot = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    for number in 0..50 {
        assert_eq!(db.get_opt(&key(number), &at_snapshot).expect("get").unwrap(), sized_value(number, 1, 500));
        assert_eq!(db.get(&key(number)).expect("get").unwrap(), sized_value(number, 2, 500));
    }
    drop(at_snapshot);
    drop(snapshot);
    // Without readers, compaction drops the old versions and the old file goes.
    db.compact_all().expect("compact");
    db.wait_for_background_work().expect("settle");
    for name in &old_files {
        assert!(!file_system.exists(&dir.join(name)), "{name} outlived every reference");
    }
    for number in 0..50 {
        assert_eq!(db.get(&key(number)).expect("get").unwrap(), sized_value(number, 2, 500));
    }
}

#[test]
fn transactions_read_separated_values() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-transactions");
    let db = Db::open(&dir, blob_options(file_system)).expect("open");
    for number in 0..20 {
        db.put(&key(number), &sized_value(number, 1, 800)).expect("put");
    }
    db.flush().expect("flush");
    let transaction = db.begin(&TransactionOptions::default()).expect("begin");
    assert_eq!(transaction.get(&key(3)).expect("get").unwrap(), sized_value(3, 1, 800));
    assert_eq!(transaction.get_for_update(&key(4)).expect("get").unwrap(), sized_value(4, 1, 800));
    transaction.put(&key(5), b"small").expect("put");
    let seen: Vec<(Vec<u8>, Vec<u8>)> =
        transaction.iter(&ReadOptions::default()).expect("iter").map(|entry| entry.expect("entry")).collect();
    assert_eq!(seen.len(), 20);
    assert_eq!(seen[3].1, sized_value(3, 1, 800));
    assert_eq!(seen[5].1, b"small".to_vec());
    transaction.commit().expect("commit");
}

#[test]
fn an_old_database_opens_and_gains_blob_files() {
    let file_system = Arc::new(MemFileSystem::new());
    let dir = PathBuf::from("/blob-upgrade");
    let db = Db::open(&dir, small_options(file_system.clone())).expect("open");
    for number in 0..100 {
        db.put(&key(number), &sized_value(number, 1, 400)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    assert!(blob_file_names(&file_system, &dir).is_empty());
    let db = Db::open(&dir, blob_options(file_system.clone())).expect("open with separation");
    for number in 50..150 {
        db.put(&key(number), &sized_value(number, 2, 400)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_all().expect("compact");
    assert!(!blob_file_names(&file_system, &dir).is_empty());
    for number in 0..150 {
        let version = if number < 50 { 1 } else { 2 };
        assert_eq!(db.get(&key(number)).expect("get").unwrap(), sized_value(number, version, 400));
    }
}

#[test]
fn backward_scans_over_many_versions_read_the_newest_blob_value() {
    // A backward scan that meets many versions of a key reads the newest visible one with a
    // seek (REVERSE_VERSIONS_BEFORE_SEEK in iterator/db_iter.rs). Here those versions are in a
    // table, kept by snapshots, with their values in blob files: the seek must read the value
    // its reference names, not return the reference.
    let file_system = Arc::new(MemFileSystem::new());
    let db = Db::open(Path::new("/blob-versions"), blob_options(file_system)).expect("open");
    let mut snapshots = Vec::new();
    for version in 0..30u64 {
        for number in 0..3u64 {
            db.put(&key(number), &sized_value(number, version, THRESHOLD_BYTES + 50)).expect("put");
        }
        snapshots.push(db.snapshot());
    }
    db.flush().expect("flush");
    let model: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..3u64).map(|number| (key(number), sized_value(number, 29, THRESHOLD_BYTES + 50))).collect();
    check_against_model(&db, &model, &ReadOptions::default(), "latest");
    // An older snapshot sees the versions of its time, also through the seek.
    let old: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..3u64).map(|number| (key(number), sized_value(number, 19, THRESHOLD_BYTES + 50))).collect();
    let options = ReadOptions { snapshot: Some(snapshots[19].clone()), ..ReadOptions::default() };
    check_against_model(&db, &old, &options, "snapshot at version 19");
}

#[test]
fn blob_values_are_stored_compressed_unless_compression_is_off() {
    // The same values, compressible and not, written with each blob compression: every one
    // reads back, the compressible ones take less room unless compression is off, and the
    // files decode whole.
    let file_system = Arc::new(MemFileSystem::new());
    let mut rng = SmallRng::seed_from_u64(5);
    let random_values: Vec<Vec<u8>> = (0..20).map(|_| (0..2_000).map(|_| rng.gen::<u8>()).collect()).collect();
    let mut sizes = Vec::new();
    for compression in COMPRESSIONS {
        let dir = PathBuf::from(format!("/blob-compression-{compression:?}"));
        let db = Db::open(&dir, blob_options_compressed(file_system.clone(), compression)).expect("open");
        for number in 0..20u64 {
            db.put(&key(number), &sized_value(number, 1, 4_000)).expect("put");
            db.put(&key(100 + number), &random_values[number as usize]).expect("put");
        }
        db.flush().expect("flush");
        for number in 0..20u64 {
            assert_eq!(db.get(&key(number)).expect("get"), Some(sized_value(number, 1, 4_000)), "{compression:?}");
            assert_eq!(db.get(&key(100 + number)).expect("get").as_ref(), Some(&random_values[number as usize]));
        }
        let mut records = Vec::new();
        for name in blob_file_names(&file_system, &dir) {
            let data = file_system.read_all(&dir.join(&name)).expect("read");
            let file = riptide::internals::decode::blob_file(&data).expect("the file decodes whole");
            assert_eq!(file.format_version, 2);
            records.extend(file.records);
        }
        assert_eq!(records.len(), 40, "{compression:?}");
        for record in &records {
            let random = record.key >= key(100);
            // Random bytes never save an eighth: they are stored as they are.
            let expected_type = match (random, compression) {
                (true, _) | (false, Compression::None) => 0,
                (false, Compression::Lz4) => 1,
                (false, Compression::Zstd) => 2,
                (false, _) => 3,
            };
            assert_eq!(record.value_type, expected_type, "{compression:?}");
        }
        sizes.push((compression, blob_bytes(&file_system, &dir)));
        db.close().expect("close");
        let db = Db::open(&dir, blob_options(file_system.clone())).expect("reopen");
        assert_eq!(db.get(&key(7)).expect("get"), Some(sized_value(7, 1, 4_000)));
        db.close().expect("close");
    }
    let uncompressed = sizes.iter().find(|(compression, _)| *compression == Compression::None).map(|(_, size)| *size);
    for (compression, size) in &sizes {
        if *compression != Compression::None {
            // 20 values of 4,000 bytes shrink to a few dozen bytes each; 40,000 random bytes stay.
            assert!(*size < uncompressed.unwrap() - 60_000, "{compression:?}: {size} bytes against {uncompressed:?}");
        }
    }
}
