//! Read-triggered flushes: scans that pass older versions of keys held in the active memtable
//! pay for switching it (and so flushing it), with no write to fill it
//! (`read_compaction_bytes_per_table_seek`, `db::read_charges`). The story: sysbench's
//! read-only transactions right after a read-write burst ran at 60 % of their speed on a
//! server just restarted, because every range scan stepped over the burst's versions in the
//! memtable, which nothing flushed until the next writes filled it. The tests fill a memtable
//! with several versions of every key, scan, and check that the memtable is switched once the
//! scans paid for it and not before, never without passed versions or with the rule off, and
//! that what the scans read never changes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, Options, ReadOptions};

use common::{dump, key, value};

const KEYS: u64 = 2000;

fn options(bytes_per_table_seek: u64) -> Options {
    Options {
        file_system: Arc::new(MemFileSystem::new()),
        // Far more than the tests write: no write ever switches the memtable.
        memtable_size_bytes: 64 << 20,
        read_compaction_bytes_per_table_seek: bytes_per_table_seek,
        ..Options::default()
    }
}

/// Writes `versions` versions of every key into the memtable; returns the newest values.
fn write_versions(db: &Db, versions: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for version in 1..=versions {
        for number in 0..KEYS {
            db.put(&key(number), &value(number, version, 40)).expect("put");
            model.insert(key(number), value(number, version, 40));
        }
    }
    model
}

fn read_flushes(db: &Db) -> u64 {
    db.stats().read_triggered_flushes
}

/// Scans the whole key range up to `max_scans` times, checking every answer, until a
/// read-triggered flush has happened; returns the scans. Each scan's iterator adds its charges
/// when dropped, and `wait_for_background_work` counts a memtable marked for a flush as pending
/// work, so the count does not depend on timing.
fn scan_until_flushed(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, max_scans: u64) -> u64 {
    for scans in 1..=max_scans {
        assert_eq!(&dump(db, &ReadOptions::default()), model, "scan {scans} read wrong entries");
        db.wait_for_background_work().expect("idle");
        if read_flushes(db) > 0 {
            return scans;
        }
    }
    max_scans + 1
}

#[test]
fn scans_over_memtable_versions_flush_it_once_they_paid_for_it() {
    let db = Db::open("/db", options(128)).expect("open");
    let model = write_versions(&db, 4);
    assert_eq!(db.stats().levels[0].files, 0);
    // The memtable's bytes at 128 bytes per 16 units, 2 units per key passed: each scan
    // passes every key (three older versions each), so tens to hundreds of scans pay for it.
    let scans = scan_until_flushed(&db, &model, 2000);
    assert!(scans <= 2000, "no read-triggered flush after 2,000 scans");
    assert!(scans > 1, "one scan cannot pay for a whole memtable");
    assert_eq!(read_flushes(&db), 1);
    let stats = db.stats();
    assert_eq!(stats.levels[0].files, 1, "the memtable became one level-0 table");
    // The flush kept one version per key, and every read still sees the newest.
    assert_eq!(dump(&db, &ReadOptions::default()), model);
    // Scans over the flushed data pass no memtable versions: no second flush.
    for _ in 0..scans {
        assert_eq!(dump(&db, &ReadOptions::default()), model);
    }
    db.wait_for_background_work().expect("idle");
    assert_eq!(read_flushes(&db), 1);
}

#[test]
fn a_memtable_with_one_version_per_key_is_never_flushed_by_reads() {
    let db = Db::open("/db", options(128)).expect("open");
    let model = write_versions(&db, 1);
    let scans = scan_until_flushed(&db, &model, 300);
    assert_eq!(scans, 301, "scans passed no older version, yet the memtable was flushed");
    assert_eq!(db.stats().levels[0].files, 0);
}

#[test]
fn zero_turns_read_triggered_flushes_off() {
    let db = Db::open("/db", options(0)).expect("open");
    let model = write_versions(&db, 4);
    let scans = scan_until_flushed(&db, &model, 300);
    assert_eq!(scans, 301, "the rule is off, yet reads flushed the memtable");
    assert_eq!(db.stats().levels[0].files, 0);
}

#[test]
fn the_scan_count_follows_the_memtable_size_and_the_rate() {
    // At a quarter of the bytes per charge, a memtable is paid for in about four times fewer
    // scans (within the batching of charges per iterator).
    let count_at = |bytes_per_table_seek: u64| {
        let db = Db::open("/db", options(bytes_per_table_seek)).expect("open");
        let model = write_versions(&db, 4);
        scan_until_flushed(&db, &model, 4000)
    };
    let slow = count_at(128);
    let fast = count_at(512);
    assert!(slow <= 4000 && fast <= 4000, "no flush: {slow} and {fast} scans");
    assert!(fast * 2 < slow, "512 bytes per charge took {fast} scans against {slow} at 128");
}
