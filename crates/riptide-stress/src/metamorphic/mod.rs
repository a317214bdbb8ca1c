//! Metamorphic tests: one random operation sequence, generated up front from a seed, runs
//! against a `BTreeMap` model and against the engine under several option sets (block sizes,
//! every compression, tiny memtables and files that push data down many levels, restart
//! intervals, bloom filters on and off, no block cache, few open tables, sync modes). Every
//! observation (point reads, bounded scans in both directions, seeks, snapshot reads) must be
//! identical in all of them.
//!
//! Options change how data is laid out, never what it means; so a difference between two option
//! sets is a bug even where the model would be hard to get right, and the model catches a bug
//! every option set shares.
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads, whose
//! timing does not change any observation.
//!
//! Invariants: each run starts from an empty `MemFileSystem`; the sequence never depends on
//! what a run observes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::MemFileSystem;
use riptide::{Compression, Db, Options, ReadOptions, Snapshot, SyncMode, WriteBatch};

/// Slots for snapshots held at once.
const SNAPSHOT_SLOTS: usize = 3;

/// One operation of the sequence. Keys and values are indices into the run's pools.
#[derive(Clone, Debug)]
pub enum Operation {
    /// Put key, value.
    Put(usize, usize),
    /// Delete key.
    Delete(usize),
    /// An atomic batch: (key, Some(value)) puts, (key, None) deletes.
    Batch(Vec<(usize, Option<usize>)>),
    /// Point read, at a snapshot slot or the latest state.
    Get(usize, Option<usize>),
    /// A scan: bounds (key indices), direction, entry limit, snapshot slot.
    Scan {
        /// Lower bound (inclusive).
        lower: Option<usize>,
        /// Upper bound (exclusive).
        upper: Option<usize>,
        /// Forward or backward.
        forward: bool,
        /// Entries to read at most.
        limit: usize,
        /// Snapshot slot.
        snapshot: Option<usize>,
    },
    /// Seek to a key, then step `steps` times forward; or `seek_for_prev` and step backward.
    Seek {
        /// The target key.
        target: usize,
        /// True for `seek_for_prev`.
        for_prev: bool,
        /// Steps after the seek.
        steps: usize,
    },
    /// Take a snapshot into a slot (replacing what it held).
    TakeSnapshot(usize),
    /// Release a slot's snapshot.
    ReleaseSnapshot(usize),
    /// `Db::flush`.
    Flush,
    /// `Db::compact_all`.
    CompactAll,
    /// `Db::wait_for_background_work`.
    WaitForBackgroundWork,
    /// Close and reopen (snapshots are released first).
    Reopen,
}

/// What one operation showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Nothing to compare (a write, a flush...).
    Done,
    /// A point read's answer.
    Value(Option<Vec<u8>>),
    /// Entries a scan or a seek returned, in order.
    Entries(Vec<(Vec<u8>, Vec<u8>)>),
}

/// A generated sequence with its key and value pools.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// Distinct keys, some prefixes of others, some binary, one empty.
    pub keys: Vec<Vec<u8>>,
    /// Values of many lengths.
    pub values: Vec<Vec<u8>>,
    /// The operations.
    pub operations: Vec<Operation>,
}

/// Generates the sequence of `seed`.
pub fn generate(seed: u64, steps: usize) -> Sequence {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
    for number in 0..120u32 {
        keys.push(format!("k{number:03}").into_bytes());
        if number % 4 == 0 {
            keys.push(format!("k{number:03}/child").into_bytes());
        }
        if number % 10 == 0 {
            keys.push(vec![0, (number % 256) as u8, 0xff]);
            keys.push(vec![0xff; 1 + (number as usize % 40)]);
        }
    }
    keys.sort();
    keys.dedup();
    let values: Vec<Vec<u8>> = (0..200)
        .map(|index| {
            let length = match index % 20 {
                0 => 0,
                1 => 6000,
                _ => rng.gen_range(1..300),
            };
            (0..length).map(|position| ((index * 31 + position * 7) % 251) as u8).collect()
        })
        .collect();
    let key_count = keys.len();
    let value_count = values.len();
    let mut operations = Vec::with_capacity(steps);
    for _ in 0..steps {
        let snapshot = if rng.gen_bool(0.25) { Some(rng.gen_range(0..SNAPSHOT_SLOTS)) } else { None };
        let operation = match rng.gen_range(0..1000) {
            0..=329 => Operation::Put(rng.gen_range(0..key_count), rng.gen_range(0..value_count)),
            330..=419 => Operation::Delete(rng.gen_range(0..key_count)),
            420..=499 => Operation::Batch(
                (0..rng.gen_range(1..16))
                    .map(|_| {
                        let key = rng.gen_range(0..key_count);
                        (key, rng.gen_bool(0.75).then(|| rng.gen_range(0..value_count)))
                    })
                    .collect(),
            ),
            500..=699 => Operation::Get(rng.gen_range(0..key_count), snapshot),
            700..=799 => Operation::Scan {
                lower: rng.gen_bool(0.6).then(|| rng.gen_range(0..key_count)),
                upper: rng.gen_bool(0.6).then(|| rng.gen_range(0..key_count)),
                forward: rng.gen_bool(0.5),
                limit: rng.gen_range(1..80),
                snapshot,
            },
            800..=859 => Operation::Seek {
                target: rng.gen_range(0..key_count),
                for_prev: rng.gen_bool(0.5),
                steps: rng.gen_range(0..6),
            },
            860..=899 => Operation::TakeSnapshot(rng.gen_range(0..SNAPSHOT_SLOTS)),
            900..=929 => Operation::ReleaseSnapshot(rng.gen_range(0..SNAPSHOT_SLOTS)),
            930..=959 => Operation::Flush,
            960..=969 => Operation::CompactAll,
            970..=984 => Operation::WaitForBackgroundWork,
            _ => Operation::Reopen,
        };
        operations.push(operation);
    }
    Sequence { keys, values, operations }
}

/// The option sets every sequence runs under, by name.
pub fn option_sets() -> Vec<(&'static str, Options)> {
    let base = Options { block_cache_size_bytes: 1 << 20, ..Options::default() };
    vec![
        ("defaults", base.clone()),
        (
            "tiny-uncompressed",
            Options {
                memtable_size_bytes: 4096,
                block_size_bytes: 256,
                block_restart_interval: 1,
                bloom_bits_per_key: 0,
                compression: Compression::None,
                target_file_size_bytes: 4096,
                level0_compaction_trigger_files: 2,
                level0_slowdown_writes_files: 5,
                level0_stop_writes_files: 6,
                ..base.clone()
            },
        ),
        (
            "lz4-small",
            Options {
                memtable_size_bytes: 16 << 10,
                block_size_bytes: 1024,
                block_restart_interval: 4,
                bloom_bits_per_key: 10,
                compression: Compression::Lz4,
                target_file_size_bytes: 16 << 10,
                level0_compaction_trigger_files: 2,
                ..base.clone()
            },
        ),
        (
            "zstd-no-cache",
            Options {
                memtable_size_bytes: 8 << 10,
                block_size_bytes: 4096,
                block_restart_interval: 16,
                bloom_bits_per_key: 5,
                compression: Compression::Zstd,
                block_cache_size_bytes: 0,
                target_file_size_bytes: 64 << 10,
                ..base.clone()
            },
        ),
        (
            "snappy-few-tables",
            Options {
                memtable_size_bytes: 32 << 10,
                block_size_bytes: 512,
                block_restart_interval: 2,
                bloom_bits_per_key: 20,
                compression: Compression::Snappy,
                target_file_size_bytes: 8 << 10,
                level0_compaction_trigger_files: 3,
                max_open_tables: 16,
                wal_sync_mode: SyncMode::Full,
                ..base.clone()
            },
        ),
        (
            "interval-sync-long-restarts",
            Options {
                memtable_size_bytes: 12 << 10,
                block_size_bytes: 2048,
                block_restart_interval: 64,
                compression: Compression::Lz4,
                target_file_size_bytes: 4096,
                level0_compaction_trigger_files: 2,
                wal_sync_mode: SyncMode::Interval { interval_us: 1000 },
                ..base
            },
        ),
    ]
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn in_bounds(key: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    lower.is_none_or(|lower| key >= lower) && upper.is_none_or(|upper| key < upper)
}

/// Runs the sequence against the model.
pub fn run_model(sequence: &Sequence) -> Vec<Observation> {
    let mut model = Model::new();
    let mut snapshots: Vec<Option<Model>> = vec![None; SNAPSHOT_SLOTS];
    let key = |index: usize| sequence.keys[index].clone();
    let value = |index: usize| sequence.values[index].clone();
    let mut observations = Vec::with_capacity(sequence.operations.len());
    for operation in &sequence.operations {
        let observation = match operation {
            Operation::Put(k, v) => {
                model.insert(key(*k), value(*v));
                Observation::Done
            }
            Operation::Delete(k) => {
                model.remove(&key(*k));
                Observation::Done
            }
            Operation::Batch(writes) => {
                for (k, v) in writes {
                    match v {
                        Some(v) => model.insert(key(*k), value(*v)),
                        None => model.remove(&key(*k)),
                    };
                }
                Observation::Done
            }
            Operation::Get(k, slot) => {
                let source = slot.and_then(|slot| snapshots[slot].as_ref()).unwrap_or(&model);
                Observation::Value(source.get(&key(*k)).cloned())
            }
            Operation::Scan { lower, upper, forward, limit, snapshot } => {
                let source = snapshot.and_then(|slot| snapshots[slot].as_ref()).unwrap_or(&model);
                let lower = lower.map(key);
                let upper = upper.map(key);
                let matching = source.iter().filter(|(k, _)| in_bounds(k, lower.as_deref(), upper.as_deref()));
                let entries: Vec<(Vec<u8>, Vec<u8>)> = if *forward {
                    matching.take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                } else {
                    matching.rev().take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Observation::Entries(entries)
            }
            Operation::Seek { target, for_prev, steps } => {
                let target = key(*target);
                let entries: Vec<(Vec<u8>, Vec<u8>)> = if *for_prev {
                    model.range(..=target).rev().take(steps + 1).map(|(k, v)| (k.clone(), v.clone())).collect()
                } else {
                    model.range(target..).take(steps + 1).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Observation::Entries(entries)
            }
            Operation::TakeSnapshot(slot) => {
                snapshots[*slot] = Some(model.clone());
                Observation::Done
            }
            Operation::ReleaseSnapshot(slot) => {
                snapshots[*slot] = None;
                Observation::Done
            }
            Operation::Reopen => {
                snapshots.iter_mut().for_each(|slot| *slot = None);
                Observation::Done
            }
            Operation::Flush | Operation::CompactAll | Operation::WaitForBackgroundWork => Observation::Done,
        };
        observations.push(observation);
    }
    observations.push(Observation::Entries(model.into_iter().collect()));
    observations
}

/// Runs the sequence against the engine with `options` on a fresh in-memory file system.
pub fn run_engine(sequence: &Sequence, options: &Options) -> Result<Vec<Observation>, String> {
    let path = Path::new("/metamorphic");
    let options = Options { file_system: Arc::new(MemFileSystem::new()), ..options.clone() };
    let mut db = Db::open(path, options.clone()).map_err(|error| format!("open: {error}"))?;
    let mut snapshots: Vec<Option<Snapshot>> = vec![None; SNAPSHOT_SLOTS];
    let key = |index: usize| sequence.keys[index].clone();
    let mut observations = Vec::with_capacity(sequence.operations.len() + 1);
    for (step, operation) in sequence.operations.iter().enumerate() {
        let fail = |error: riptide::Error| format!("step {step} ({operation:?}): {error}");
        let read_options = |slot: Option<usize>| ReadOptions {
            snapshot: slot.and_then(|slot| snapshots[slot].clone()),
            ..ReadOptions::default()
        };
        let observation = match operation {
            Operation::Put(k, v) => {
                db.put(&key(*k), &sequence.values[*v]).map_err(fail)?;
                Observation::Done
            }
            Operation::Delete(k) => {
                db.delete(&key(*k)).map_err(fail)?;
                Observation::Done
            }
            Operation::Batch(writes) => {
                let mut batch = WriteBatch::new();
                for (k, v) in writes {
                    match v {
                        Some(v) => batch.put(&key(*k), &sequence.values[*v]),
                        None => batch.delete(&key(*k)),
                    }
                }
                db.write(batch).map_err(fail)?;
                Observation::Done
            }
            Operation::Get(k, slot) => Observation::Value(db.get_opt(&key(*k), &read_options(*slot)).map_err(fail)?),
            Operation::Scan { lower, upper, forward, limit, snapshot } => {
                let options =
                    ReadOptions { lower_bound: lower.map(key), upper_bound: upper.map(key), ..read_options(*snapshot) };
                let mut iterator = db.iter(&options).map_err(fail)?;
                if *forward {
                    iterator.seek_to_first();
                } else {
                    iterator.seek_to_last();
                }
                let mut entries = Vec::new();
                while iterator.valid() && entries.len() < *limit {
                    entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
                    if *forward {
                        iterator.next();
                    } else {
                        iterator.prev();
                    }
                }
                iterator.status().map_err(fail)?;
                Observation::Entries(entries)
            }
            Operation::Seek { target, for_prev, steps } => {
                let mut iterator = db.iter(&ReadOptions::default()).map_err(fail)?;
                if *for_prev {
                    iterator.seek_for_prev(&key(*target));
                } else {
                    iterator.seek(&key(*target));
                }
                let mut entries = Vec::new();
                while iterator.valid() && entries.len() <= *steps {
                    entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
                    if *for_prev {
                        iterator.prev();
                    } else {
                        iterator.next();
                    }
                }
                iterator.status().map_err(fail)?;
                Observation::Entries(entries)
            }
            Operation::TakeSnapshot(slot) => {
                snapshots[*slot] = Some(db.snapshot());
                Observation::Done
            }
            Operation::ReleaseSnapshot(slot) => {
                snapshots[*slot] = None;
                Observation::Done
            }
            Operation::Flush => {
                db.flush().map_err(fail)?;
                Observation::Done
            }
            Operation::CompactAll => {
                db.compact_all().map_err(fail)?;
                Observation::Done
            }
            Operation::WaitForBackgroundWork => {
                db.wait_for_background_work().map_err(fail)?;
                Observation::Done
            }
            Operation::Reopen => {
                snapshots.iter_mut().for_each(|slot| *slot = None);
                db.close().map_err(fail)?;
                db = Db::open(path, options.clone()).map_err(fail)?;
                Observation::Done
            }
        };
        observations.push(observation);
    }
    let mut iterator = db.iter(&ReadOptions::default()).map_err(|error| format!("final scan: {error}"))?;
    let mut entries = Vec::new();
    iterator.seek_to_first();
    while iterator.valid() {
        entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.next();
    }
    iterator.status().map_err(|error| format!("final scan: {error}"))?;
    observations.push(Observation::Entries(entries));
    drop(iterator);
    snapshots.clear();
    db.close().map_err(|error| format!("close: {error}"))?;
    Ok(observations)
}

/// Shortens an observation for messages.
fn summarize(observation: &Observation) -> String {
    match observation {
        Observation::Done => "done".to_string(),
        Observation::Value(None) => "absent".to_string(),
        Observation::Value(Some(value)) => format!("a value of {} bytes", value.len()),
        Observation::Entries(entries) => {
            let keys: Vec<String> =
                entries.iter().take(6).map(|(key, _)| format!("{:?}", String::from_utf8_lossy(key))).collect();
            format!("{} entries starting [{}]", entries.len(), keys.join(", "))
        }
    }
}

/// Runs seed `seed` under every option set; `Err` names the first difference from the model.
pub fn check_seed(seed: u64, steps: usize) -> Result<(), String> {
    let sequence = generate(seed, steps);
    let expected = run_model(&sequence);
    for (name, options) in option_sets() {
        let actual =
            run_engine(&sequence, &options).map_err(|error| format!("seed {seed}, options {name}: {error}"))?;
        if let Some(step) = (0..expected.len()).find(|&step| actual.get(step) != expected.get(step)) {
            let operation =
                sequence.operations.get(step).map_or("final scan".to_string(), |operation| format!("{operation:?}"));
            return Err(format!(
                "seed {seed}, options {name}: step {step} ({operation}) showed {} where the model shows {}",
                actual.get(step).map_or("nothing".to_string(), summarize),
                summarize(&expected[step])
            ));
        }
    }
    Ok(())
}

/// What a soak did.
#[derive(Clone, Debug, Default)]
pub struct SoakReport {
    /// Seeds covered, `first..last`.
    pub seeds: String,
    /// Sequences run (each under every option set).
    pub runs: u64,
    /// Failures.
    pub failures: Vec<String>,
}

/// Runs seeds from `first_seed` on until `duration` has passed (one seed when `None`).
pub fn soak(first_seed: u64, duration: Option<Duration>, steps: usize) -> SoakReport {
    let started = Instant::now();
    let mut report = SoakReport::default();
    let mut seed = first_seed;
    loop {
        report.runs += 1;
        if let Err(failure) = check_seed(seed, steps) {
            report.failures.push(failure);
            break;
        }
        if duration.is_none_or(|duration| started.elapsed() >= duration) {
            break;
        }
        seed += 1;
    }
    report.seeds = format!("{first_seed}..{seed}");
    report
}
