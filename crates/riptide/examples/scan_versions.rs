//! What a scan pays for older versions in level 0, measured on one thread: every key is written
//! `VERSIONS` times, each round flushed into its own level-0 table (compactions kept off them),
//! so that a scan passes `VERSIONS - 1` older versions at every key; full scans are timed (best
//! of three), then level 0 is compacted and the same scans timed again. The difference per key
//! and passed version is the cost that read charges weigh (`db/read_charges.rs`).
//!
//! `cargo run --release -p riptide --example scan_versions [-- KEYS VERSIONS]`

use std::time::Instant;

use riptide::{Db, Options, ReadOptions};

fn key(number: u64) -> Vec<u8> {
    format!("{:016}", number.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 1_000_000_000_000).into_bytes()
}

fn argument(position: usize, default: u64) -> u64 {
    std::env::args().nth(position).map_or(default, |text| text.parse().expect("a number"))
}

/// The best of three full scans, in nanoseconds per key; checks the number of keys.
fn time_scans(db: &Db, keys: u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
        iterator.seek_to_first();
        let mut count = 0;
        while iterator.valid() {
            count += 1;
            iterator.next();
        }
        iterator.status().expect("scan");
        assert_eq!(count, keys);
        best = best.min(started.elapsed().as_nanos() as f64 / keys as f64);
    }
    best
}

fn main() {
    let keys = argument(1, 300_000);
    let versions = argument(2, 2).max(1);
    let directory = std::env::temp_dir().join(format!("riptide-scan-versions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let options = Options {
        memtable_size_bytes: 512 << 20,
        block_cache_size_bytes: 1 << 30,
        level0_compaction_trigger_files: 64,
        level0_slowdown_writes_files: 100,
        level0_stop_writes_files: 128,
        // Read-triggered compaction would merge the tables while they are measured.
        read_compaction_bytes_per_table_seek: 0,
        ..Options::default()
    };
    let db = Db::open(&directory, options).expect("open");
    let value = vec![b'v'; 100];
    for _ in 0..versions {
        for number in 0..keys {
            db.put(&key(number), &value).expect("put");
        }
        db.flush().expect("flush");
    }
    db.wait_for_background_work().expect("idle");
    time_scans(&db, keys);
    let before = time_scans(&db, keys);
    db.compact_range(&db.default_column_family(), None, None).expect("compact");
    db.wait_for_background_work().expect("idle");
    time_scans(&db, keys);
    let after = time_scans(&db, keys);
    let passed = (versions - 1) as f64;
    println!(
        "{keys} keys, {versions} level-0 tables: {before:.1} ns per key; compacted: {after:.1} ns; \
         {:.1} ns per passed version",
        (before - after) / passed.max(1.0)
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&directory);
}
