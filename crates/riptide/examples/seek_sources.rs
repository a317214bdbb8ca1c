//! What a seek costs over several sources, measured on one thread: keys are written in random
//! order and flushed into `TABLES` overlapping level-0 tables (compactions kept off them), with
//! `MEMTABLE_PERCENT` of the keys rewritten into the memtable afterwards; then seeks of existing
//! keys (one iterator re-seeked at random keys and at ascending ones, and a new iterator per
//! seek), seeks of absent keys and 100-key scans are timed, each the best of three passes. Every seek checks the key it lands on.
//!
//! `cargo run --release -p riptide --example seek_sources [-- KEYS TABLES MEMTABLE_PERCENT]`

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, ReadOptions, WriteBatch};

/// Keys are even numbers, so that odd ones are absent keys between them.
fn key(number: u64) -> Vec<u8> {
    format!("{:016}", number * 2).into_bytes()
}

fn absent_key(number: u64) -> Vec<u8> {
    format!("{:016}", number * 2 + 1).into_bytes()
}

fn argument(position: usize, default: u64) -> u64 {
    std::env::args().nth(position).map_or(default, |text| text.parse().expect("a number"))
}

/// Times `operations` calls of `body` three times; returns the best nanoseconds per call.
fn best_of_three(operations: u64, mut body: impl FnMut(&mut SmallRng)) -> f64 {
    let mut best = f64::MAX;
    for pass in 0..3 {
        let mut rng = SmallRng::seed_from_u64(pass);
        let started = Instant::now();
        for _ in 0..operations {
            body(&mut rng);
        }
        best = best.min(started.elapsed().as_nanos() as f64 / operations as f64);
    }
    best
}

fn main() {
    let keys = argument(1, 500_000);
    let tables = argument(2, 2).max(1);
    let memtable_percent = argument(3, 0);
    let directory = std::env::temp_dir().join(format!("riptide-seek-sources-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let options = Options {
        memtable_size_bytes: 512 << 20,
        level0_compaction_trigger_files: 64,
        level0_slowdown_writes_files: 100,
        level0_stop_writes_files: 128,
        // Read-triggered compaction would merge the tables while they are measured.
        read_compaction_bytes_per_table_seek: 0,
        ..Options::default()
    };
    let db = Db::open(&directory, options).expect("open");
    let value = vec![b'v'; 100];
    let mut order: Vec<u64> = (0..keys).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(1));
    for chunk in order.chunks(order.len().div_ceil(tables as usize)) {
        for group in chunk.chunks(1000) {
            let mut batch = WriteBatch::new();
            for &number in group {
                batch.put(&key(number), &value);
            }
            db.write(batch).expect("write");
        }
        db.flush().expect("flush");
    }
    let mut batch = WriteBatch::new();
    for &number in order.iter().take((keys * memtable_percent / 100) as usize) {
        batch.put(&key(number), &value);
    }
    db.write(batch).expect("write");
    println!("{keys} keys in {tables} level-0 tables, {memtable_percent}% rewritten into the memtable");

    let read_options = ReadOptions::default();
    let operations = 500_000;
    let mut iterator = db.iter(&read_options).expect("iterator");
    let reseeked = best_of_three(operations, |rng| {
        let target = key(rng.gen_range(0..keys));
        iterator.seek(&target);
        assert!(iterator.valid() && iterator.key() == target.as_slice() && iterator.value().len() == 100);
    });
    let mut next_number = 0;
    let ascending = best_of_three(operations, |_| {
        next_number = (next_number + 1) % keys;
        let target = key(next_number);
        iterator.seek(&target);
        assert!(iterator.valid() && iterator.key() == target.as_slice());
    });
    let fresh = best_of_three(operations, |rng| {
        let target = key(rng.gen_range(0..keys));
        let mut iterator = db.iter(&read_options).expect("iterator");
        iterator.seek(&target);
        assert!(iterator.valid() && iterator.key() == target.as_slice());
    });
    let absent = best_of_three(operations, |rng| {
        let number = rng.gen_range(0..keys - 1);
        iterator.seek(&absent_key(number));
        assert!(iterator.valid() && iterator.key() == key(number + 1).as_slice());
    });
    let scans = best_of_three(operations / 20, |rng| {
        let number = rng.gen_range(0..keys - 100);
        iterator.seek(&key(number));
        for _ in 0..99 {
            iterator.next();
        }
        assert!(iterator.valid() && iterator.key() == key(number + 99).as_slice());
    });
    println!("seek, re-seeked iterator: {reseeked:.0} ns");
    println!("seek, ascending keys:     {ascending:.0} ns");
    println!("seek, new iterator:       {fresh:.0} ns");
    println!("seek of an absent key:    {absent:.0} ns");
    println!("100-key scan:             {:.2} us", scans / 1000.0);
    drop(iterator);
    db.close().expect("close");
    let _ = std::fs::remove_dir_all(&directory);
}
