//! The stress driver: many threads run random operations against one database on the real file
//! system, checking every answer against the expected state, until told to stop or killed.
//!
//! A run opens the database, takes what it holds as the initial state (the crash parent has
//! already verified it), writes `ready` to the journal and starts the threads. When its
//! duration is over it stops them, checks every key against the legal final values, closes,
//! reopens and checks again, and writes `end`. A watchdog reports a hang when no operation
//! completes for a while.
//!
//! Concurrency contract: one driver per database directory (the engine's lock enforces it). The
//! threads share a [`Shared`]; see `operations.rs` for what they may do concurrently.
//!
//! Invariants: every failure is reported with the run's seed and cycle, so a run can be
//! repeated (thread interleavings differ, the operation choices do not).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{ColumnFamily, Compression, Db, Options, ReadOptions, SyncMode};

use crate::journal::Journal;
use crate::model::{describe, parse_value, ExpectedState, KeySpace, ValueId};
use crate::operations::{choose, default_mix, Failure, OperationMix, Shared, ThreadContext};

/// How a driver run is set up.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// The database directory.
    pub path: PathBuf,
    /// Seeds the options and every thread's choices.
    pub seed: u64,
    /// This run's generation (part of every value id); a crash parent counts its cycles here.
    pub cycle: u64,
    /// Worker threads.
    pub threads: usize,
    /// How long to run; `None` runs until killed.
    pub duration: Option<Duration>,
    /// Runs past `duration` until every operation kind with a weight has completed at least
    /// once, so that a test can require every kind to run however slow the machine is.
    pub until_every_operation_ran: bool,
    /// The keys written.
    pub space: KeySpace,
    /// Operation weights to override, as `name=weight,...`.
    pub weights: String,
    /// Seconds without any completed operation after which the run is declared hung.
    pub hang_seconds: u64,
}

/// What a finished run did.
#[derive(Clone, Debug, Default)]
pub struct DriverReport {
    /// Operations completed, by kind.
    pub operations: Vec<(String, u64)>,
    /// The first failure, if any.
    pub failure: Option<Failure>,
}

impl DriverReport {
    /// Total operations completed.
    pub fn total_operations(&self) -> u64 {
        self.operations.iter().map(|(_, count)| count).sum()
    }
}

/// Options drawn from `seed`: small memtables, files and blocks so that a short run flushes,
/// compacts and reaches deeper levels, with every compression and sync mode in turn.
pub fn options_for_seed(seed: u64) -> Options {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0bad_5eed);
    let compressions = [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy];
    let sync_mode = match rng.gen_range(0..10) {
        0..=5 => SyncMode::None,
        6..=7 => SyncMode::Interval { interval_us: 2000 },
        _ => SyncMode::Full,
    };
    Options {
        memtable_size_bytes: [16 << 10, 64 << 10, 256 << 10][rng.gen_range(0..3)],
        block_size_bytes: [256, 1024, 4096][rng.gen_range(0..3)],
        block_restart_interval: [1, 4, 16][rng.gen_range(0..3)],
        bloom_bits_per_key: [0, 10][rng.gen_range(0..2)],
        compression: compressions[rng.gen_range(0..compressions.len())],
        block_cache_size_bytes: [0, 64 << 10, 8 << 20][rng.gen_range(0..3)],
        target_file_size_bytes: [16 << 10, 64 << 10, 256 << 10][rng.gen_range(0..3)],
        level0_compaction_trigger_files: rng.gen_range(2..5),
        // The stop must exceed the slowdown, whose default (20 since 2026-12-07) is above it:
        // the driver keeps the limits it was written with.
        level0_slowdown_writes_files: 12,
        level0_stop_writes_files: 16,
        max_open_tables: [16, 64][rng.gen_range(0..2)],
        wal_sync_mode: sync_mode,
        wal_preallocate_bytes: [0, 4096, 64 << 10][rng.gen_range(0..3)],
        // Drawn last, so that the other options of every seed stay what they were. A third of
        // the runs separate values of 64 bytes and more into blob files.
        min_blob_size_bytes: [None, None, Some(64)][rng.gen_range(0..3)],
        merge_operator: Some(std::sync::Arc::new(LastOperandOperator)),
        ..Options::default()
    }
}

/// The driver's merge operator: a key's value is its newest operand, whatever lies beneath.
/// So a merge of a value reads exactly as a put of it, and the expected state needs no other
/// rule, while the operand still takes the merge paths: the log, reads that combine, folding
/// in flush and compaction, recovery (`merge-put`).
#[derive(Debug)]
pub struct LastOperandOperator;

impl riptide::MergeOperator for LastOperandOperator {
    fn name(&self) -> &str {
        "stress.last-operand"
    }
    fn full_merge(&self, _key: &[u8], _existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.last().map(|operand| operand.to_vec())
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.last().map(|operand| operand.to_vec())
    }
}

/// A handle to column family `family` of the key space.
pub fn family_handle(db: &Db, family: usize) -> Result<ColumnFamily, Failure> {
    match KeySpace::family_name(family) {
        None => Ok(db.default_column_family()),
        Some(name) => db.column_family(&name).ok_or_else(|| Failure(format!("column family {name} is missing"))),
    }
}

/// Reads every key of the space from `db`, family by family, and returns its value ids,
/// checking that the database holds nothing else (no other column family, and a full scan of
/// each family) and that the scan agrees with point lookups.
pub fn read_all(db: &Db, space: KeySpace) -> Result<Vec<Option<ValueId>>, Failure> {
    let mut live = db.list_column_families();
    live.sort();
    let mut expected: Vec<String> = (0..space.column_families)
        .map(|family| KeySpace::family_name(family).unwrap_or_else(|| db.default_column_family().name()))
        .collect();
    expected.sort();
    if live != expected {
        return Err(Failure(format!("the live column families are {live:?}, not {expected:?}")));
    }
    let mut values = vec![None; space.total_keys()];
    for family in 0..space.column_families {
        let handle = family_handle(db, family)?;
        let mut iterator = db.iter_cf(&handle, &ReadOptions::default())?;
        iterator.seek_to_first();
        while iterator.valid() {
            let index = space.parse_key(family, iterator.key()).ok_or_else(|| {
                Failure(format!(
                    "family {family}: a key nobody wrote is present: {:?}",
                    String::from_utf8_lossy(iterator.key())
                ))
            })?;
            let id = parse_value(index, iterator.value())
                .map_err(|reason| Failure(format!("key {index}: never-written value: {reason}")))?;
            values[index] = Some(id);
            iterator.next();
        }
        iterator.status()?;
        for index in space.family_range(family) {
            let value = db.get_cf(&handle, &space.key(index))?;
            let id = match value {
                Some(bytes) => {
                    Some(parse_value(index, &bytes).map_err(|reason| Failure(format!("key {index}: get: {reason}")))?)
                }
                None => None,
            };
            if id != values[index] {
                return Err(Failure(format!(
                    "key {index}: the scan read {} but get read {}",
                    describe(values[index]),
                    describe(id)
                )));
            }
        }
    }
    Ok(values)
}

/// Checks a database with no write in flight against the legal final values, and that every
/// atomic group is whole.
pub fn verify_quiescent(db: &Db, state: &ExpectedState, when: &str) -> Result<(), Failure> {
    let space = state.space();
    let values = read_all(db, space).map_err(|failure| Failure(format!("{when}: {failure}")))?;
    verify_values(&values, state).map_err(|failure| Failure(format!("{when}: {failure}")))
}

/// Checks values read after every writer stopped (or died) against the legal final values.
pub fn verify_values(values: &[Option<ValueId>], state: &ExpectedState) -> Result<(), Failure> {
    let space = state.space();
    for (index, value) in values.iter().enumerate() {
        let legal = state.final_values(index);
        if !legal.contains(value) {
            let legal: Vec<String> = legal.into_iter().map(describe).collect();
            let lost = if state.has_unfinished_write(index) { "" } else { " (no write of it was in flight)" };
            return Err(Failure(format!(
                "key {index} holds {}; legal: [{}]{lost}",
                describe(*value),
                legal.join(", ")
            )));
        }
    }
    for group in 0..space.total_groups() {
        // A group and the groups linked to it were written by one batch each time.
        let first = values[space.group_member(group, 0)];
        for linked in space.linked_groups(group) {
            for member in 0..space.group_size {
                let value = values[space.group_member(linked, member)];
                if value != first {
                    return Err(Failure(format!(
                        "group {group} is torn: member 0 holds {} and member {member} of group {linked} holds {}",
                        describe(first),
                        describe(value)
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Opens the database with every column family of `space`, creating those that are missing
/// (a droppable one may have been dropped just before a crash).
///
/// A family found under its temporary name (`rename-family` was killed between its two renames)
/// is given its name back: the open created an empty family under the name, which is dropped
/// first. Both steps are idempotent, so a kill in the middle of this repair is repaired by the
/// next open the same way.
pub fn open_database(path: &Path, options: Options, space: KeySpace) -> Result<Db, riptide::Error> {
    let families = (1..space.column_families)
        .filter_map(KeySpace::family_name)
        .map(|name| (name, options.column_family_options()))
        .collect();
    let db = Db::open_with_column_families(path, options, families)?;
    for name in (1..space.column_families).filter_map(KeySpace::family_name) {
        if let Some(moved) = db.column_family(&KeySpace::temporary_family_name(&name)) {
            if let Some(created) = db.column_family(&name) {
                db.drop_column_family(&created)?;
            }
            db.rename_column_family(&moved, &name)?;
        }
    }
    Ok(db)
}

/// Opens the database, retrying briefly while a killed predecessor's lock is being released.
pub fn open_with_retry(path: &Path, options: Options, space: KeySpace) -> Result<Db, riptide::Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match open_database(path, options.clone(), space) {
            Err(riptide::Error::Busy(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => return other,
        }
    }
}

/// Runs the driver; the journal receives every write. Returns the report (with the first
/// failure, if any) or an error that kept the run from starting.
pub fn run(config: &DriverConfig, journal: Journal) -> Result<DriverReport, Failure> {
    let options = options_for_seed(config.seed);
    let db = open_with_retry(&config.path, options.clone(), config.space)
        .map_err(|error| Failure(format!("open failed: {error}")))?;
    let initial = read_all(&db, config.space).map_err(|failure| Failure(format!("at open: {failure}")))?;
    let mut mix: OperationMix = default_mix();
    crate::operations::apply_weights(&mut mix, &config.weights).map_err(Failure)?;
    let shared = Shared {
        db: RwLock::new(Some(db)),
        path: config.path.clone(),
        options,
        state: ExpectedState::new(config.space, &initial),
        journal,
        cycle: config.cycle,
        stop: AtomicBool::new(false),
        progress: AtomicU64::new(0),
        sync_per_thousand: 100,
        family_locks: (0..config.space.column_families).map(|_| RwLock::new(())).collect(),
    };
    shared.journal.line(&format!("ready {}", config.cycle)).map_err(|error| Failure(format!("journal: {error}")))?;
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    // Bit `k` is set once operation kind `k` has completed.
    let kinds_done = AtomicU64::new(0);
    let kinds_wanted = if config.until_every_operation_ran {
        assert!(mix.len() <= 64, "more than 64 operation kinds");
        mix.iter().enumerate().filter(|(_, (weight, _))| *weight > 0).fold(0u64, |bits, (kind, _)| bits | 1 << kind)
    } else {
        0
    };
    let counts: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|thread| {
                let shared = &shared;
                let mix = &mix;
                let failure = &failure;
                let kinds_done = &kinds_done;
                let seed = config.seed.wrapping_mul(1_000_003).wrapping_add(thread as u64);
                scope.spawn(move || worker(shared, mix, failure, kinds_done, seed, thread as u64))
            })
            .collect();
        watch(&shared, config, || kinds_done.load(Ordering::Relaxed) & kinds_wanted == kinds_wanted);
        workers.into_iter().map(|worker| worker.join().unwrap_or_default()).collect()
    });
    let mut report = DriverReport {
        operations: mix
            .iter()
            .enumerate()
            .map(|(kind, (_, operation))| {
                (
                    operation.name().to_string(),
                    counts.iter().map(|per_thread| per_thread.get(kind).copied().unwrap_or(0)).sum(),
                )
            })
            .collect(),
        failure: failure.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()),
    };
    if report.failure.is_none() {
        report.failure = finish(&shared).err();
    }
    if report.failure.is_none() {
        shared.journal.line(&format!("end {}", config.cycle)).map_err(|error| Failure(format!("journal: {error}")))?;
    }
    Ok(report)
}

/// One worker thread: runs operations until stopped; returns its counts per kind and marks each
/// kind it completed in `kinds_done`.
fn worker(
    shared: &Shared,
    mix: &OperationMix,
    failure: &Mutex<Option<Failure>>,
    kinds_done: &AtomicU64,
    seed: u64,
    thread: u64,
) -> Vec<u64> {
    let mut counts = vec![0u64; mix.len()];
    let mut context = ThreadContext::new(shared, SmallRng::seed_from_u64(seed), thread);
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(kind) = choose(mix, &mut context.rng) else { break };
        let operation = &mix[kind].1;
        match operation.run(&mut context) {
            Ok(()) => {
                if counts[kind] == 0 && kind < 64 {
                    kinds_done.fetch_or(1 << kind, Ordering::Relaxed);
                }
                counts[kind] += 1;
                shared.progress.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                let mut slot = failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if slot.is_none() {
                    *slot = Some(Failure(format!("thread {thread}, {}: {error}", operation.name())));
                }
                shared.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    counts
}

/// Waits for the run's end (its duration once `may_stop` holds, or a failure) and reports a
/// hang when no operation completes for `hang_seconds`.
fn watch(shared: &Shared, config: &DriverConfig, may_stop: impl Fn() -> bool) {
    let started = Instant::now();
    let mut last_progress = shared.progress.load(Ordering::Relaxed);
    let mut last_change = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if config.duration.is_some_and(|duration| started.elapsed() >= duration) && may_stop() {
            shared.stop.store(true, Ordering::Relaxed);
            break;
        }
        let progress = shared.progress.load(Ordering::Relaxed);
        if progress != last_progress {
            last_progress = progress;
            last_change = Instant::now();
        } else if last_change.elapsed() >= Duration::from_secs(config.hang_seconds) {
            let message = format!("hang: no operation completed for {} s", config.hang_seconds);
            eprintln!("FAIL seed {} cycle {}: {message}", config.seed, config.cycle);
            // The threads are stuck inside the engine and cannot be joined.
            std::process::exit(4);
        }
    }
}

/// After the threads stopped: verify, close, reopen, verify again.
fn finish(shared: &Shared) -> Result<(), Failure> {
    let mut guard = shared.db.write().map_err(|_| Failure("a thread panicked holding the database".to_string()))?;
    let db = guard.take().ok_or_else(|| Failure("database is closed".to_string()))?;
    verify_quiescent(&db, &shared.state, "at the end of the run")?;
    db.close().map_err(|error| Failure(format!("close failed: {error}")))?;
    let db = open_database(&shared.path, shared.options.clone(), shared.state.space())
        .map_err(|error| Failure(format!("final reopen failed: {error}")))?;
    verify_quiescent(&db, &shared.state, "after the final reopen")?;
    db.close().map_err(|error| Failure(format!("final close failed: {error}")))
}
