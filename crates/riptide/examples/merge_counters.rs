//! What counters kept with merge operands cost, measured against counters kept by reading and
//! writing back: 100,000 counters get 10 increments each, written as `merge` operands of the
//! built-in `U64AddOperator` in one database and as get-then-put in another. The example times
//! the increments, then point reads while the operands are still apart (in the memtable and in
//! level-0 tables), and again after `compact_all` has folded them into one put per key.
//!
//! `cargo run --release -p riptide --example merge_counters [-- COUNTERS]`

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, U64AddOperator};

const INCREMENTS: u64 = 10;

fn key(number: u64) -> Vec<u8> {
    format!("counter{number:012}").into_bytes()
}

fn read(db: &Db, counters: u64) -> (f64, u64) {
    let mut rng = SmallRng::seed_from_u64(11);
    let gets = 200_000;
    let started = Instant::now();
    let mut total = 0u64;
    for _ in 0..gets {
        let value = db.get(&key(rng.gen_range(0..counters))).expect("get").expect("every counter exists");
        total += u64::from_le_bytes(value.try_into().expect("8 bytes"));
    }
    (started.elapsed().as_nanos() as f64 / gets as f64, total / gets)
}

fn main() {
    let counters: u64 = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let options =
        Options { merge_operator: Some(Arc::new(U64AddOperator)), memtable_size_bytes: 8 << 20, ..Options::default() };
    let merged = Db::open(dir.path().join("merged"), options.clone()).expect("open");
    let rewritten = Db::open(dir.path().join("rewritten"), options).expect("open");
    let one = 1u64.to_le_bytes();
    let started = Instant::now();
    for _ in 0..INCREMENTS {
        for number in 0..counters {
            merged.merge(&key(number), &one).expect("merge");
        }
    }
    let merge_ns = started.elapsed().as_nanos() as f64 / (counters * INCREMENTS) as f64;
    let started = Instant::now();
    for _ in 0..INCREMENTS {
        for number in 0..counters {
            let current = rewritten
                .get(&key(number))
                .expect("get")
                .map_or(0, |value| u64::from_le_bytes(value.try_into().expect("8 bytes")));
            rewritten.put(&key(number), &(current + 1).to_le_bytes()).expect("put");
        }
    }
    let read_modify_write_ns = started.elapsed().as_nanos() as f64 / (counters * INCREMENTS) as f64;
    println!("{counters} counters, {INCREMENTS} increments each");
    println!("increment: merge {merge_ns:.0} ns, get + put {read_modify_write_ns:.0} ns");
    merged.wait_for_background_work().expect("wait");
    rewritten.wait_for_background_work().expect("wait");
    let (apart_ns, average) = read(&merged, counters);
    assert_eq!(average, INCREMENTS);
    let (plain_ns, _) = read(&rewritten, counters);
    println!("get, operands apart: {apart_ns:.0} ns (plain values: {plain_ns:.0} ns)");
    merged.compact_all().expect("compact");
    rewritten.compact_all().expect("compact");
    let (folded_ns, average) = read(&merged, counters);
    assert_eq!(average, INCREMENTS);
    let (plain_ns, _) = read(&rewritten, counters);
    println!(
        "get, folded by compaction: {folded_ns:.0} ns (plain values: {plain_ns:.0} ns); {} operands folded",
        merged.stats().merge_operands_folded
    );
}
