//! What a memtable insert costs at the sizes a 64 MiB memtable reaches: `ENTRIES` random
//! 16-byte keys with 100-byte values inserted from `THREADS` threads into a fresh memtable,
//! best of five fills, nanoseconds per insert; then as many random gets of present keys.
//!
//! `cargo run --release -p riptide --example memtable_fill [-- ENTRIES THREADS]`

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::internals::memtable::MemTable;

fn argument(position: usize, default: usize) -> usize {
    std::env::args().nth(position).map_or(default, |text| text.parse().expect("a number"))
}

fn main() {
    let entries = argument(1, 450_000);
    let threads = argument(2, 1);
    let mut rng = SmallRng::seed_from_u64(7);
    let keys: Vec<[u8; 16]> = (0..entries).map(|_| rng.gen()).collect();
    let value = [0x5au8; 100];
    let mut best_insert = f64::MAX;
    let mut best_get = f64::MAX;
    for _ in 0..5 {
        let table = MemTable::new(64 << 20);
        let share = entries.div_ceil(threads);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for (thread, slice) in keys.chunks(share).enumerate() {
                let table = &table;
                scope.spawn(move || {
                    for (index, key) in slice.iter().enumerate() {
                        table.put(key, (thread * share + index + 1) as u64, &value);
                    }
                });
            }
        });
        best_insert = best_insert.min(start.elapsed().as_nanos() as f64 / entries as f64);
        let start = Instant::now();
        let mut found = 0usize;
        for _ in 0..entries {
            let key = &keys[rng.gen_range(0..entries)];
            found += usize::from(table.get(key, u64::MAX >> 8).is_some());
        }
        assert_eq!(found, entries, "every key present");
        best_get = best_get.min(start.elapsed().as_nanos() as f64 / entries as f64);
    }
    println!("entries {entries} threads {threads}: insert {best_insert:.0} ns, get {best_get:.0} ns");
}
