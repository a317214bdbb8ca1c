//! What reads cost after a large range delete, measured: a million keys are written and
//! compacted, then the middle 98% is deleted with one `delete_range`; point reads of the keys
//! left, short scans and a full scan are timed before the delete, right after it (the tombstone
//! in the memtable, the tables untouched), after the flush that moves the tombstone into the
//! version (which drops the tables it covers whole), and after the flush with a snapshot held
//! from before the delete (so every table stays and reads must pass over the deleted range).
//!
//! `cargo run --release -p riptide --example range_delete_reads [-- KEYS]`

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, ReadOptions, WriteBatch};

fn key(number: u64) -> Vec<u8> {
    format!("{number:016}").into_bytes()
}

/// The keys the delete leaves: the first and last 1% of the key space.
fn live_key(rng: &mut SmallRng, keys: u64) -> u64 {
    let edge = keys / 100;
    let pick = rng.gen_range(0..2 * edge);
    if pick < edge {
        pick
    } else {
        keys - 2 * edge + pick
    }
}

struct Timings {
    get_ns: f64,
    scan_us: f64,
    full_scan_ms: f64,
    full_scan_keys: usize,
}

fn measure(db: &Db, keys: u64, options: &ReadOptions) -> Timings {
    let mut rng = SmallRng::seed_from_u64(7);
    let gets = 200_000;
    let started = Instant::now();
    let mut found = 0;
    for _ in 0..gets {
        if db.get_opt(&key(live_key(&mut rng, keys)), options).expect("get").is_some() {
            found += 1;
        }
    }
    let get_ns = started.elapsed().as_nanos() as f64 / gets as f64;
    assert!(found > 0);
    // Short scans that start just below the deleted range, so each must pass over it.
    let scans = 2_000;
    let started = Instant::now();
    let mut iterator = db.iter(options).expect("iterator");
    for _ in 0..scans {
        let start = keys / 100 - rng.gen_range(1..50);
        iterator.seek(&key(start));
        let mut read = 0;
        while iterator.valid() && read < 100 {
            read += 1;
            iterator.next();
        }
    }
    iterator.status().expect("scan");
    drop(iterator);
    let scan_us = started.elapsed().as_nanos() as f64 / 1000.0 / scans as f64;
    let started = Instant::now();
    let mut iterator = db.iter(options).expect("iterator");
    iterator.seek_to_first();
    let mut full_scan_keys = 0;
    while iterator.valid() {
        full_scan_keys += 1;
        iterator.next();
    }
    iterator.status().expect("full scan");
    let full_scan_ms = started.elapsed().as_secs_f64() * 1000.0;
    Timings { get_ns, scan_us, full_scan_ms, full_scan_keys }
}

fn report(label: &str, timings: &Timings, db: &Db) {
    let stats = db.stats();
    let tables: usize = stats.levels.iter().map(|level| level.files).sum();
    println!(
        "| {label} | {:.0} | {:.1} | {:.1} ({} keys) | {tables} |",
        timings.get_ns, timings.scan_us, timings.full_scan_ms, timings.full_scan_keys
    );
}

fn main() {
    let keys: u64 = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(1_000_000);
    for held_snapshot in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        // 4 MiB tables, so that the data spans tens of tables and the flush can drop the ones
        // the delete covers whole.
        let options = Options { target_file_size_bytes: 4 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options).expect("open");
        // Incompressible values, so that the tables are as many as the bytes say.
        let mut value_rng = SmallRng::seed_from_u64(11);
        for chunk in (0..keys).collect::<Vec<_>>().chunks(1000) {
            let mut batch = WriteBatch::new();
            for &number in chunk {
                let value: Vec<u8> = (0..100).map(|_| value_rng.gen()).collect();
                batch.put(&key(number), &value);
            }
            db.write(batch).expect("write");
        }
        db.compact_all().expect("compact");
        println!(
            "\n{keys} keys, delete of [{}, {}){}",
            keys / 100,
            keys - keys / 100,
            if held_snapshot { ", a snapshot from before the delete held" } else { "" }
        );
        println!("| state | get ns | 100-key scan µs | full scan ms | tables |");
        println!("|---|---:|---:|---:|---:|");
        let latest = ReadOptions::default();
        report("before the delete", &measure(&db, keys, &latest), &db);
        let snapshot = held_snapshot.then(|| db.snapshot());
        db.delete_range(&key(keys / 100), &key(keys - keys / 100)).expect("delete_range");
        report("after, tombstone in the memtable", &measure(&db, keys, &latest), &db);
        db.flush().expect("flush");
        report("after the flush", &measure(&db, keys, &latest), &db);
        db.wait_for_background_work().expect("wait");
        drop(snapshot);
        db.compact_all().expect("compact");
        report("after compaction", &measure(&db, keys, &latest), &db);
        db.close().expect("close");
    }
}
