//! Memtable throughput: inserts of 16-byte keys with 100-byte values from one and two threads,
//! and point gets (independent ones, and a chain where each depends on the one before), for the
//! arena skiplist and for a `Mutex<BTreeMap>` baseline.
//!
//! Each insert iteration fills a fresh memtable with `ENTRIES` entries and times only the inserts
//! (not construction or drop). Keys are random, so inserts land all over the list as they would
//! for a real workload without locality, except in the sequential case, which inserts them sorted.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::internals::memtable::MemTable;

/// Entries per insert iteration and in the table the get benchmarks read.
const ENTRIES: usize = 100_000;
const KEY_BYTES: usize = 16;
const VALUE_BYTES: usize = 100;
/// The flush threshold the engine uses by default; sizes arena chunks.
const CAPACITY_HINT_BYTES: usize = 64 << 20;

fn random_keys(count: usize, seed: u64) -> Vec<[u8; KEY_BYTES]> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count).map(|_| rng.gen()).collect()
}

/// The baseline: one lock around a B-tree keyed by `user_key ++ !sequence` (big endian), which
/// sorts newer versions first like internal keys do. Every entry costs two heap allocations.
#[derive(Default)]
struct LockedBTree {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl LockedBTree {
    fn put(&self, user_key: &[u8], sequence: u64, value: &[u8]) {
        let mut key = Vec::with_capacity(user_key.len() + 8);
        key.extend_from_slice(user_key);
        key.extend_from_slice(&(!sequence).to_be_bytes());
        let value = value.to_vec();
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(key, value);
    }

    fn get(&self, user_key: &[u8], sequence: u64) -> Option<Vec<u8>> {
        let mut lookup = Vec::with_capacity(user_key.len() + 8);
        lookup.extend_from_slice(user_key);
        lookup.extend_from_slice(&(!sequence).to_be_bytes());
        let map = self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (key, value) = map.range(lookup..).next()?;
        (key.len() == user_key.len() + 8 && key.starts_with(user_key)).then(|| value.clone())
    }
}

/// Times `iterations` rounds of filling a fresh table built by `make` with `keys`, split across
/// `threads` threads.
fn time_fills<T: Sync>(
    iterations: u64,
    threads: usize,
    keys: &[[u8; KEY_BYTES]],
    make: impl Fn() -> T,
    put: impl Fn(&T, &[u8], u64, &[u8]) + Sync,
) -> Duration {
    let value = [0x5au8; VALUE_BYTES];
    let mut total = Duration::ZERO;
    for _ in 0..iterations {
        let table = make();
        let share = keys.len().div_ceil(threads);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for (thread, slice) in keys.chunks(share).enumerate() {
                let table = &table;
                let put = &put;
                scope.spawn(move || {
                    let base = (thread * share) as u64;
                    for (index, key) in slice.iter().enumerate() {
                        put(table, key, base + index as u64 + 1, &value);
                    }
                });
            }
        });
        total += start.elapsed();
        drop(black_box(table));
    }
    total
}

fn inserts(criterion: &mut Criterion) {
    let keys = random_keys(ENTRIES, 1);
    let mut group = criterion.benchmark_group("memtable_insert");
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.sample_size(10);
    for threads in [1usize, 2] {
        group.bench_function(format!("skiplist/{threads}_threads"), |bencher| {
            bencher.iter_custom(|iterations| {
                time_fills(
                    iterations,
                    threads,
                    &keys,
                    || MemTable::new(CAPACITY_HINT_BYTES),
                    |table, key, sequence, value| table.put(key, sequence, value),
                )
            })
        });
        group.bench_function(format!("mutex_btreemap/{threads}_threads"), |bencher| {
            bencher.iter_custom(|iterations| {
                time_fills(iterations, threads, &keys, LockedBTree::default, |table, key, sequence, value| {
                    table.put(key, sequence, value)
                })
            })
        });
    }
    // Ascending keys, as in a bulk load: each insert lands right after the previous one.
    let mut sequential_keys = keys.clone();
    sequential_keys.sort_unstable();
    group.bench_function("skiplist/1_threads_sequential", |bencher| {
        bencher.iter_custom(|iterations| {
            time_fills(
                iterations,
                1,
                &sequential_keys,
                || MemTable::new(CAPACITY_HINT_BYTES),
                |table, key, sequence, value| table.put(key, sequence, value),
            )
        })
    });
    group.finish();
}

fn gets(criterion: &mut Criterion) {
    let keys = random_keys(ENTRIES, 2);
    let value = [0x5au8; VALUE_BYTES];
    let memtable = MemTable::new(CAPACITY_HINT_BYTES);
    let baseline = LockedBTree::default();
    for (index, key) in keys.iter().enumerate() {
        memtable.put(key, index as u64 + 1, &value);
        baseline.put(key, index as u64 + 1, &value);
    }
    // Probe in a different order than insertion so consecutive gets touch unrelated nodes.
    let mut rng = SmallRng::seed_from_u64(3);
    let probes: Vec<usize> = (0..ENTRIES).map(|_| rng.gen_range(0..ENTRIES)).collect();

    let mut group = criterion.benchmark_group("memtable_get");
    group.throughput(Throughput::Elements(1));
    let mut cursor = 0usize;
    group.bench_function("skiplist/hit", |bencher| {
        bencher.iter(|| {
            cursor = (cursor + 1) % probes.len();
            black_box(memtable.get(&keys[probes[cursor]], u64::MAX >> 8))
        })
    });
    group.bench_function("mutex_btreemap/hit", |bencher| {
        bencher.iter(|| {
            cursor = (cursor + 1) % probes.len();
            black_box(baseline.get(&keys[probes[cursor]], u64::MAX >> 8))
        })
    });
    // The same probes with each one depending on the previous answer, as when a caller acts
    // on what a get returned before issuing the next: the gets cannot overlap their cache
    // misses, so this measures one search's latency rather than the throughput of several.
    let mut carry = 0usize;
    group.bench_function("skiplist/hit_dependent", |bencher| {
        bencher.iter(|| {
            cursor = (cursor + 1) % probes.len();
            let found = memtable.get(&keys[(probes[cursor] + carry) % ENTRIES], u64::MAX >> 8);
            carry = found.map_or(1, |value| value.len() & 1);
        })
    });
    let absent = random_keys(1024, 4);
    group.bench_function("skiplist/miss", |bencher| {
        bencher.iter(|| {
            cursor = (cursor + 1) % absent.len();
            black_box(memtable.get(&absent[cursor], u64::MAX >> 8))
        })
    });
    group.finish();
}

criterion_group!(benches, inserts, gets);
criterion_main!(benches);
