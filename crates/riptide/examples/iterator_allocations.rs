//! How many heap allocations a fresh iterator costs: a point of a SQL engine's or a benchmark's
//! seek with a new iterator each time. Keys are written in random order and flushed into
//! `TABLES` overlapping level-0 tables (compactions kept off them); then a new iterator seeks an
//! existing key and is dropped, `SEEKS` times, under a global allocator that counts calls. Prints
//! allocations and bytes per seek, and the same for one iterator re-seeked.
//!
//! `cargo run --release -p riptide --example iterator_allocations [-- KEYS TABLES]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, ReadOptions, WriteBatch};

/// The system allocator, counting allocations (and reallocations) and their bytes.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed unchanged to the system allocator; the counters have no effect
// on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(pointer, layout) }
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn key(number: u64) -> Vec<u8> {
    format!("{:016}", number).into_bytes()
}

fn argument(position: usize, default: u64) -> u64 {
    std::env::args().nth(position).map_or(default, |text| text.parse().expect("a number"))
}

/// Runs `body` `count` times and returns the allocations and bytes per call.
fn per_call(count: u64, mut body: impl FnMut()) -> (f64, f64) {
    let (allocations, bytes) = (ALLOCATIONS.load(Ordering::Relaxed), ALLOCATED_BYTES.load(Ordering::Relaxed));
    for _ in 0..count {
        body();
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations;
    let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes;
    (allocations as f64 / count as f64, bytes as f64 / count as f64)
}

fn main() {
    let keys = argument(1, 100_000);
    let tables = argument(2, 2);
    let directory = tempfile::tempdir().expect("a temporary directory");
    let options = Options {
        level0_compaction_trigger_files: 64,
        level0_slowdown_writes_files: 100,
        level0_stop_writes_files: 128,
        // Read-triggered compaction would merge the tables while they are measured.
        read_compaction_bytes_per_table_seek: 0,
        ..Options::default()
    };
    let db = Db::open(directory.path(), options).expect("open");
    let mut rng = SmallRng::seed_from_u64(7);
    let mut numbers: Vec<u64> = (0..keys).collect();
    for _ in 0..tables {
        numbers.shuffle(&mut rng);
        for chunk in numbers.chunks(1000) {
            let mut batch = WriteBatch::new();
            for &number in chunk {
                batch.put(&key(number), &[b'v'; 100]);
            }
            db.write(batch).expect("write");
        }
        db.flush().expect("flush");
    }
    let seeks = 20_000;
    let read_options = ReadOptions::default();
    // Warm the block cache and the table cache first.
    for number in 0..keys {
        let mut iterator = db.iter(&read_options).expect("iterator");
        iterator.seek(&key(number));
    }
    let (allocations, bytes) = per_call(seeks, || {
        let number = rng.gen_range(0..keys);
        let mut iterator = db.iter(&read_options).expect("iterator");
        iterator.seek(&key(number));
        assert_eq!(iterator.key(), key(number).as_slice());
    });
    println!("fresh iterator per seek over {tables} tables: {allocations:.1} allocations, {bytes:.0} bytes per seek");
    let mut iterator = db.iter(&read_options).expect("iterator");
    let (allocations, bytes) = per_call(seeks, || {
        let number = rng.gen_range(0..keys);
        iterator.seek(&key(number));
        assert_eq!(iterator.key(), key(number).as_slice());
    });
    println!("one iterator re-seeked: {allocations:.1} allocations, {bytes:.0} bytes per seek");
    drop(iterator);
    db.close().expect("close");
}
