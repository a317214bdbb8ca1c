//! Crash tests over the fault-injecting file system: run a random workload (puts, deletes and
//! range deletes), crash it at a
//! random file-system operation (every later mutation fails), drop what a power loss would
//! drop, reopen, and check that
//! - the database always reopens;
//! - its contents equal the model after some prefix of the attempted writes (nothing that was
//!   never written appears, and no write survives while an earlier one is lost);
//! - that prefix includes every write acknowledged with `sync` (or before an acknowledged
//!   `flush`).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::{FaultFileSystem, MemFileSystem, PowerLossMode};
use riptide::{Db, Options, ReadOptions, SyncMode, WriteBatch, WriteOptions};

use common::{dump, key, small_options, value};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// One attempted write: puts (`Some`) and deletes (`None`), and range deletes
/// (`Op::DeleteRange`), applied in order.
type Write = Vec<Op>;

enum Op {
    Set(Vec<u8>, Option<Vec<u8>>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

fn apply(model: &mut Model, write: &Write) {
    for op in write {
        match op {
            Op::Set(k, Some(v)) => {
                model.insert(k.clone(), v.clone());
            }
            Op::Set(k, None) => {
                model.remove(k);
            }
            Op::DeleteRange(start, end) => model.retain(|k, _| !(k >= start && k < end)),
        }
    }
}

struct Outcome {
    /// Every write attempted, in order (the last may have failed).
    history: Vec<Write>,
    /// Writes `[0, durable)` must survive.
    durable: usize,
}

/// What a workload writes: keys `0..keys`, and in `scan_percent` of its steps a full scan
/// (which, over keys with many versions in the memtable, pays for read-triggered flushes).
#[derive(Clone, Copy)]
struct Shape {
    keys: u64,
    scan_percent: u32,
}

const PLAIN: Shape = Shape { keys: 150, scan_percent: 0 };

fn workload(db: &Db, rng: &mut SmallRng, steps: usize, shape: Shape) -> Outcome {
    let mut history = Vec::new();
    let mut durable = 0;
    for step in 0..steps {
        if rng.gen_range(0..100) < shape.scan_percent {
            // Reads mutate nothing themselves; a crashed file system fails only the flush
            // the scans may start, in the background.
            let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
            iterator.seek_to_first();
            while iterator.valid() {
                iterator.next();
            }
            continue;
        }
        if rng.gen_range(0..100) < 3 {
            if db.flush().is_ok() {
                durable = history.len();
            } else {
                break;
            }
            continue;
        }
        let mut write: Write = Vec::new();
        let mut batch = WriteBatch::new();
        for _ in 0..rng.gen_range(1..4) {
            let n = rng.gen_range(0..shape.keys);
            if rng.gen_bool(0.8) {
                let v = value(n, step as u64, rng.gen_range(0..100));
                batch.put(&key(n), &v);
                write.push(Op::Set(key(n), Some(v)));
            } else if rng.gen_bool(0.15) {
                let (start, end) = (key(n), key(n + rng.gen_range(1..30)));
                batch.delete_range(&start, &end);
                write.push(Op::DeleteRange(start, end));
            } else {
                batch.delete(&key(n));
                write.push(Op::Set(key(n), None));
            }
        }
        let sync = rng.gen_bool(0.3);
        history.push(write);
        match db.write_opt(batch, &WriteOptions { sync }) {
            Ok(()) => {
                if sync {
                    durable = history.len();
                }
            }
            Err(_) => break,
        }
    }
    Outcome { history, durable }
}

/// Finds a prefix of `history`, at least `durable` long, whose model equals `actual`.
fn matching_prefix(history: &[Write], durable: usize, actual: &Model) -> Option<usize> {
    let mut model = Model::new();
    for (index, write) in history.iter().enumerate() {
        if index >= durable && &model == actual {
            return Some(index);
        }
        apply(&mut model, write);
    }
    (&model == actual).then_some(history.len())
}

fn crash_case(seed: u64, options_for: impl Fn(Arc<dyn riptide::fs::FileSystem>) -> Options, shape: Shape) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let path = Path::new("/crash");
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let options = options_for(Arc::new(fault.clone()));
    let db = Db::open(path, options).expect("first open");
    let budget = fault.mutating_operation_count() + rng.gen_range(1..1500);
    fault.crash_after(Some(budget));
    let outcome = workload(&db, &mut rng, 600, shape);
    drop(db);
    let mode = match seed % 3 {
        0 => PowerLossMode::DropUnsynced,
        1 => PowerLossMode::KeepUnsyncedPrefix { seed },
        _ => PowerLossMode::TornTail { seed },
    };
    memory.simulate_power_loss(mode);
    let reopened = Db::open(path, options_for(Arc::new(memory.clone())))
        .unwrap_or_else(|error| panic!("seed {seed}: reopen after crash failed: {error}"));
    let actual = dump(&reopened, &ReadOptions::default());
    let prefix = matching_prefix(&outcome.history, outcome.durable, &actual);
    assert!(
        prefix.is_some(),
        "seed {seed}: state after crash is no prefix of the history at or after the {} durable writes \
         ({} attempted, {} keys recovered)",
        outcome.durable,
        outcome.history.len(),
        actual.len()
    );
    // The recovered database keeps working and survives a clean reopen.
    reopened.put(b"after-crash", b"ok").expect("write after recovery");
    reopened.close().expect("close");
    let again = Db::open(path, options_for(Arc::new(memory.clone()))).expect("second reopen");
    assert_eq!(again.get(b"after-crash").expect("get").as_deref(), Some(&b"ok"[..]));
}

#[test]
fn crash_at_random_points_small_tables() {
    for seed in 0..600 {
        crash_case(seed, small_options, PLAIN);
    }
}

#[test]
fn crash_at_random_points_sync_modes() {
    for seed in 1000..1200 {
        let options = |fs| Options {
            wal_sync_mode: if seed % 2 == 0 { SyncMode::Full } else { SyncMode::Interval { interval_us: 500 } },
            ..small_options(fs)
        };
        crash_case(seed, options, PLAIN);
    }
}

/// Read-triggered flushes under crashes. The story: a flush thread switches the memtable on
/// its own when scans have paid for it (`db::read_charges`), at moments no writer chose, with
/// writers going on around it; these cases crash at random points of workloads whose scans
/// pass many versions of a few hot keys, so that crashes land in those switches and flushes.
fn read_flush_options(file_system: Arc<dyn riptide::fs::FileSystem>) -> Options {
    Options {
        // Writes alone rarely fill a memtable here: the scans switch most of them.
        memtable_size_bytes: 256 << 10,
        read_compaction_bytes_per_table_seek: 65536,
        ..small_options(file_system)
    }
}

const HOT_KEYS: Shape = Shape { keys: 16, scan_percent: 10 };

#[test]
fn crash_during_read_triggered_flushes() {
    // The workload does trigger the flushes it is here for (a run without a crash).
    let db = Db::open("/no-crash", read_flush_options(Arc::new(MemFileSystem::new()))).expect("open");
    workload(&db, &mut SmallRng::seed_from_u64(7), 600, HOT_KEYS);
    db.wait_for_background_work().expect("idle");
    assert!(db.stats().read_triggered_flushes > 0, "no read-triggered flush: {}", db.stats());
    for seed in 2000..2150 {
        crash_case(seed, read_flush_options, HOT_KEYS);
    }
}

/// Walks the crash point through every mutating operation of a short workload with flushes,
/// so that each step of flush and manifest switching is interrupted at least once.
#[test]
fn crash_at_every_operation_of_a_short_workload() {
    let path = Path::new("/every");
    let run = |crash_at: Option<u64>, memory: &MemFileSystem| -> (Vec<Write>, usize, u64) {
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        let db = Db::open(path, small_options(Arc::new(fault.clone()))).expect("open");
        let start = fault.mutating_operation_count();
        fault.crash_after(crash_at.map(|n| start + n));
        let mut history = Vec::new();
        let mut durable = 0;
        for i in 0..120u64 {
            let sync = i % 7 == 0;
            // Every 25th write deletes a range, so that a crash also lands in the flush that
            // moves a range tombstone into the manifest.
            let written = if i % 25 == 24 {
                history.push(vec![Op::DeleteRange(key(i % 40), key(i % 40 + 12))]);
                db.delete_range_opt(&key(i % 40), &key(i % 40 + 12), &WriteOptions { sync })
            } else {
                let v = value(i % 40, i, 300);
                history.push(vec![Op::Set(key(i % 40), Some(v.clone()))]);
                db.put_opt(&key(i % 40), &v, &WriteOptions { sync })
            };
            if written.is_err() {
                break;
            }
            if sync {
                durable = history.len();
            }
            if i % 30 == 29 {
                if db.flush().is_err() {
                    break;
                }
                durable = history.len();
            }
        }
        let used = fault.mutating_operation_count() - start;
        drop(db);
        (history, durable, used)
    };
    let (_, _, total) = run(None, &MemFileSystem::new());
    assert!(total > 50, "workload too small: {total} operations");
    for crash_at in 0..total {
        let memory = MemFileSystem::new();
        let (history, durable, _) = run(Some(crash_at), &memory);
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        let db = Db::open(path, small_options(Arc::new(memory.clone())))
            .unwrap_or_else(|error| panic!("crash at {crash_at}: reopen failed: {error}"));
        let actual = dump(&db, &ReadOptions::default());
        assert!(
            matching_prefix(&history, durable, &actual).is_some(),
            "crash at operation {crash_at}: recovered state is not a valid prefix"
        );
    }
}
