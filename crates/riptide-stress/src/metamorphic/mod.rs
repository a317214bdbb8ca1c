//! Metamorphic tests: one random operation sequence, generated up front from a seed, runs
//! against a `BTreeMap` model and against the engine under several option sets (block sizes,
//! every compression, tiny memtables and files that push data down many levels, restart
//! intervals, bloom filters on and off, no block cache, few open tables, sync modes). Every
//! observation (point reads, bounded scans in both directions, seeks, snapshot reads, and the
//! column families and contents at the end) must be identical in all of them.
//!
//! Time is part of the sequence: puts with an expiry (before or after the time they are
//! written) and steps of a `ManualClock` that every run and the model move alike, so that
//! entries expire between reads, flushes and compactions, and snapshots keep their read time.
//!
//! The sequence spans column families: the default one and `FAMILY_SLOTS - 1` others that are
//! created, dropped and re-created under the same name as it goes, with batches across them
//! and snapshots that outlive a family's drop.
//!
//! Options change how data is laid out, never what it means; so a difference between two option
//! sets is a bug even where the model would be hard to get right, and the model catches a bug
//! every option set shares.
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads, whose
//! timing does not change any observation.
//!
//! Invariants: each run starts from an empty `MemFileSystem`; the sequence never depends on
//! what a run observes, and names only live column families (liveness follows from the
//! sequence alone).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{Compression, Options, SyncMode};

mod engine;
mod model;

pub use engine::run_engine;
pub use model::run_model;

/// The merge operator of every run: the value beneath, then the operands, joined by `|`.
#[derive(Debug)]
pub struct AppendOperator;

/// `base` and `operands` joined as [`AppendOperator`] joins them.
pub fn append(base: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = base.into_iter().collect();
    parts.extend_from_slice(operands);
    parts.join(&b"|"[..])
}

impl riptide::MergeOperator for AppendOperator {
    fn name(&self) -> &str {
        "metamorphic.append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(append(existing, operands))
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(append(None, operands))
    }
}

/// The time every run's clock starts at (an arbitrary moment of 2026), in microseconds.
pub const CLOCK_START_US: u64 = 1_790_000_000_000_000;

/// Slots for snapshots held at once.
const SNAPSHOT_SLOTS: usize = 3;

/// Column family slots: 0 is the default column family, the others hold a family or none.
pub const FAMILY_SLOTS: usize = 3;

/// The name of the column family in `slot` (a re-created one takes the same name again).
pub fn family_name(slot: usize) -> String {
    if slot == 0 {
        "default".to_string()
    } else {
        format!("family-{slot}")
    }
}

/// One operation of the sequence. Keys and values are indices into the run's pools; families
/// are slots.
#[derive(Clone, Debug)]
pub enum Operation {
    /// Put family, key, value.
    Put(usize, usize, usize),
    /// Put family, key, value with an expiry this many microseconds from the clock's current
    /// time (negative: already expired).
    PutWithExpiry(usize, usize, usize, i64),
    /// Move the clock forward by this many microseconds.
    AdvanceClock(u64),
    /// Merge operand family, key, value (for [`AppendOperator`]).
    Merge(usize, usize, usize),
    /// Delete family, key.
    Delete(usize, usize),
    /// Range delete in family: every key from the first key (inclusive) to the second
    /// (exclusive), bytewise.
    DeleteRange(usize, usize, usize),
    /// Single delete family, key: generated only where its contract holds (the key put at
    /// most once since its last single delete, never deleted with a plain delete).
    SingleDelete(usize, usize),
    /// An atomic batch, possibly across families: (family, key, Some(value)) puts,
    /// (family, key, None) deletes.
    Batch(Vec<(usize, usize, Option<usize>)>),
    /// Point read: family, key, and a snapshot slot or the latest state.
    Get(usize, usize, Option<usize>),
    /// A scan: family, bounds (key indices), direction, entry limit, snapshot slot.
    Scan {
        /// The family.
        family: usize,
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
        /// The family.
        family: usize,
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
    /// Create the column family of an empty slot.
    CreateFamily(usize),
    /// Drop the column family of a slot.
    DropFamily(usize),
    /// `Db::flush`.
    Flush,
    /// `Db::compact_all`.
    CompactAll,
    /// `Db::compact_range` over a whole family.
    CompactFamily(usize),
    /// `Db::wait_for_background_work`.
    WaitForBackgroundWork,
    /// Close and reopen (snapshots are released first).
    Reopen,
}

/// Entries in order, as `(key, value)`.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// What one operation showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Nothing to compare (a write, a flush...).
    Done,
    /// A point read's answer.
    Value(Option<Vec<u8>>),
    /// Entries a scan or a seek returned, in order.
    Entries(Entries),
    /// The live column families at the end, by name, each with all its entries.
    Families(Vec<(String, Entries)>),
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

/// A live family slot, the default one half of the time.
fn random_family(rng: &mut SmallRng, live: &[bool; FAMILY_SLOTS]) -> usize {
    if rng.gen_bool(0.5) {
        return 0;
    }
    let others: Vec<usize> = (1..FAMILY_SLOTS).filter(|&slot| live[slot]).collect();
    if others.is_empty() {
        0
    } else {
        others[rng.gen_range(0..others.len())]
    }
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
    let mut live = [false; FAMILY_SLOTS];
    live[0] = true;
    // One other family from the start, so that batches span families early.
    let mut operations = vec![Operation::CreateFamily(1)];
    live[1] = true;
    // Per (family, key): puts since the last single delete, and whether a plain delete touched
    // it; a single delete is generated only where the contract holds.
    let mut single_delete_state: std::collections::HashMap<(usize, usize), (u32, bool)> =
        std::collections::HashMap::new();
    for _ in 1..steps {
        let snapshot = if rng.gen_bool(0.25) { Some(rng.gen_range(0..SNAPSHOT_SLOTS)) } else { None };
        let family = random_family(&mut rng, &live);
        let operation = match rng.gen_range(0..1000) {
            0..=279 => Operation::Put(family, rng.gen_range(0..key_count), rng.gen_range(0..value_count)),
            280..=319 => Operation::PutWithExpiry(
                family,
                rng.gen_range(0..key_count),
                rng.gen_range(0..value_count),
                rng.gen_range(-1_000_000..5_000_000),
            ),
            320..=329 => Operation::AdvanceClock(rng.gen_range(0..2_000_000)),
            330..=359 => Operation::Merge(family, rng.gen_range(0..key_count), rng.gen_range(0..value_count)),
            360..=379 => Operation::Delete(family, rng.gen_range(0..key_count)),
            380..=404 => {
                let key = rng.gen_range(0..key_count);
                match single_delete_state.get(&(family, key)) {
                    Some(&(puts, plainly_deleted)) if puts > 1 || plainly_deleted => Operation::Delete(family, key),
                    _ => Operation::SingleDelete(family, key),
                }
            }
            405..=419 => Operation::DeleteRange(family, rng.gen_range(0..key_count), rng.gen_range(0..key_count)),
            420..=499 => Operation::Batch(
                (0..rng.gen_range(1..16))
                    .map(|_| {
                        let family = random_family(&mut rng, &live);
                        let key = rng.gen_range(0..key_count);
                        (family, key, rng.gen_bool(0.75).then(|| rng.gen_range(0..value_count)))
                    })
                    .collect(),
            ),
            500..=699 => Operation::Get(family, rng.gen_range(0..key_count), snapshot),
            700..=799 => Operation::Scan {
                family,
                lower: rng.gen_bool(0.6).then(|| rng.gen_range(0..key_count)),
                upper: rng.gen_bool(0.6).then(|| rng.gen_range(0..key_count)),
                forward: rng.gen_bool(0.5),
                limit: rng.gen_range(1..80),
                snapshot,
            },
            800..=859 => Operation::Seek {
                family,
                target: rng.gen_range(0..key_count),
                for_prev: rng.gen_bool(0.5),
                steps: rng.gen_range(0..6),
            },
            860..=899 => Operation::TakeSnapshot(rng.gen_range(0..SNAPSHOT_SLOTS)),
            900..=924 => Operation::ReleaseSnapshot(rng.gen_range(0..SNAPSHOT_SLOTS)),
            925..=949 => Operation::Flush,
            950..=957 => Operation::CompactAll,
            958..=962 => Operation::CompactFamily(family),
            963..=977 => Operation::WaitForBackgroundWork,
            978..=989 => {
                // A slot other than the default one changes state: created when empty,
                // dropped when live.
                let slot = rng.gen_range(1..FAMILY_SLOTS);
                live[slot] = !live[slot];
                if live[slot] {
                    Operation::CreateFamily(slot)
                } else {
                    Operation::DropFamily(slot)
                }
            }
            _ => Operation::Reopen,
        };
        track_single_delete_contract(&mut single_delete_state, &operation);
        operations.push(operation);
    }
    Sequence { keys, values, operations }
}

/// Updates the per-(family, key) state that decides where a single delete keeps its contract.
fn track_single_delete_contract(
    state: &mut std::collections::HashMap<(usize, usize), (u32, bool)>,
    operation: &Operation,
) {
    match operation {
        Operation::Put(family, key, _)
        | Operation::PutWithExpiry(family, key, _, _)
        | Operation::Merge(family, key, _) => state.entry((*family, *key)).or_default().0 += 1,
        Operation::Delete(family, key) => state.entry((*family, *key)).or_default().1 = true,
        Operation::SingleDelete(family, key) => state.entry((*family, *key)).or_default().0 = 0,
        Operation::Batch(writes) => {
            for (family, key, value) in writes {
                let entry = state.entry((*family, *key)).or_default();
                match value {
                    Some(_) => entry.0 += 1,
                    None => entry.1 = true,
                }
            }
        }
        // A dropped family's keys start afresh in the family created in its slot.
        Operation::DropFamily(slot) => state.retain(|(family, _), _| family != slot),
        _ => {}
    }
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
                wal_preallocate_bytes: 1024,
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
                wal_preallocate_bytes: 0,
                ..base.clone()
            },
        ),
        (
            "blob-files",
            Options {
                memtable_size_bytes: 8 << 10,
                block_size_bytes: 1024,
                compression: Compression::Lz4,
                target_file_size_bytes: 8 << 10,
                level0_compaction_trigger_files: 2,
                min_blob_size_bytes: Some(24),
                blob_garbage_collection_ratio: 0.25,
                blob_garbage_collection_age_cutoff: 0.5,
                blob_file_size_bytes: 8 << 10,
                ..base.clone()
            },
        ),
        (
            // The blob files above store their values LZ4-compressed (the default); these
            // store them as they are, or with Zstandard.
            "blob-files-uncompressed",
            Options {
                memtable_size_bytes: 8 << 10,
                block_size_bytes: 1024,
                target_file_size_bytes: 8 << 10,
                min_blob_size_bytes: Some(24),
                blob_compression: Compression::None,
                blob_garbage_collection_ratio: 0.25,
                blob_file_size_bytes: 8 << 10,
                ..base.clone()
            },
        ),
        (
            "blob-files-zstd",
            Options {
                memtable_size_bytes: 16 << 10,
                min_blob_size_bytes: Some(100),
                blob_compression: Compression::Zstd,
                blob_file_size_bytes: 4 << 10,
                ..base
            },
        ),
    ]
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
        Observation::Families(families) => {
            let families: Vec<String> =
                families.iter().map(|(name, entries)| format!("{name}: {} entries", entries.len())).collect();
            format!("column families [{}]", families.join(", "))
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
