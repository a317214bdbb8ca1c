//! The workload: threads running list-append transactions against one database under one
//! isolation level and concurrency mode, recording the [`History`] the checker reads.
//!
//! Every transaction makes one to six micro-operations on a small key space, so that
//! contention is real: point reads (`get`, sometimes `get_for_update` or `get_for_share`), appends (`get` of the
//! transaction's own view, then `put` of that list with a new element at the end), and, in some
//! transactions, a range read with an iterator (forward or backward, within bounds); some
//! transactions open a savepoint around some of their operations and roll back to it or
//! release it. A
//! transaction the engine refuses (a retryable error during an operation or at commit) is
//! rolled back and recorded as aborted; one in twenty is rolled back on purpose. After every
//! thread has stopped, the final list of every key is read (by `get`, and cross-checked with a
//! full scan that must hold nothing else).
//!
//! Contention is forced without the clock (see `crates/riptide/tests/README.md`): the threads
//! run in rounds, and each round ends with one synchronized transaction per thread, begun by
//! every thread before any of them makes its first operation (a barrier after `begin`) and
//! ended by every thread before any begins the next round (a barrier after the commit). So in
//! each round the synchronized transactions are all concurrent: under REPEATABLE READ and
//! SERIALIZABLE, two of them appending to the same key cannot both commit, and under
//! [`Shape::WriteSkew`] two that read the same pair of keys and append to different keys of it
//! both commit under REPEATABLE READ (write skew) and cannot under SERIALIZABLE, whatever the
//! scheduler does. The plans come from the seed alone; between the synchronized transactions,
//! free ones run as the scheduler lets them.
//!
//! Concurrency contract: one database per run, opened here and closed at the end; each thread
//! owns its transactions and its records; the threads share only the database, the two
//! barriers, the element counter and the failure slot. A synchronized transaction takes no lock
//! before the first barrier and holds none at the second, so a lock wait never blocks a barrier.
//!
//! Invariants: elements are unique across a run (one atomic counter); every thread reaches
//! every barrier of every round even after a failure, which only makes the remaining rounds
//! idle; a failure (an error that is not retryable, or an answer that breaks the API's
//! contract, such as a scan out of order) ends the run with a message that names the seed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{
    ColumnFamily, ConcurrencyMode, Db, IsolationLevel, Options, ReadOptions, Snapshot, SyncMode, Transaction,
    TransactionIterator, TransactionOptions,
};

use super::history::{
    decode_list, encode_list, key_name, parse_key_name, Element, History, Operation, Outcome, ReadLock,
    TransactionRecord,
};

/// What the transactions do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Random reads, appends and range reads, with free transactions between the synchronized
    /// ones.
    Mixed,
    /// Only synchronized transactions, each reading both keys of a pair (keys `p` and
    /// `p + keys / 2`, in different column families when there are two) and appending to one of
    /// them: the classic write skew.
    WriteSkew,
}

/// One run's parameters.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// Draws every transaction's plan.
    pub seed: u64,
    /// The isolation level of every transaction.
    pub isolation: IsolationLevel,
    /// Pessimistic or optimistic, for every transaction.
    pub mode: ConcurrencyMode,
    /// What the transactions do.
    pub shape: Shape,
    /// Threads running transactions.
    pub threads: usize,
    /// Keys (lists).
    pub keys: usize,
    /// Column families the keys are spread over, in contiguous blocks of key indices (the
    /// first is the default column family, the others `lists-<n>`), so that transactions
    /// commit across families; a range read stays within one.
    pub families: usize,
    /// Rounds each thread runs (one synchronized transaction each, plus free ones for
    /// [`Shape::Mixed`]).
    pub rounds: usize,
    /// The transactions' lock timeout (`TransactionOptions::lock_timeout`).
    pub lock_timeout: Option<Duration>,
    /// Whether lock waits look for deadlocks (`TransactionOptions::deadlock_detection`).
    pub deadlock_detection: bool,
}

impl WorkloadConfig {
    /// The default run of `seed`: four to eight threads and, for [`Shape::Mixed`], five to ten
    /// keys, drawn from the seed; sixty rounds (about two transactions per thread and round).
    /// [`Shape::WriteSkew`]: four keys (two pairs, so most rounds put two threads on one pair)
    /// and forty rounds. Two column families; the default lock timeout (one second) and
    /// deadlock detection.
    pub fn new(seed: u64, isolation: IsolationLevel, mode: ConcurrencyMode, shape: Shape) -> WorkloadConfig {
        let (keys, rounds) = match shape {
            Shape::Mixed => (5 + (seed / 5 % 6) as usize, 60),
            Shape::WriteSkew => (4, 40),
        };
        let defaults = TransactionOptions::default();
        WorkloadConfig {
            seed,
            isolation,
            mode,
            shape,
            threads: 4 + (seed % 5) as usize,
            keys,
            families: 2,
            rounds,
            lock_timeout: defaults.lock_timeout,
            deadlock_detection: defaults.deadlock_detection,
        }
    }

    /// The run for messages.
    pub fn describe(&self) -> String {
        let timeout = match self.lock_timeout {
            Some(timeout) => format!("lock timeout {timeout:?}"),
            None => "no lock timeout".to_string(),
        };
        let detection = if self.deadlock_detection { "deadlock detection" } else { "no deadlock detection" };
        format!(
            "seed {} {:?} {:?} {:?} ({} threads, {} keys in {} column families, {} rounds, {timeout}, {detection})",
            self.seed, self.isolation, self.mode, self.shape, self.threads, self.keys, self.families, self.rounds
        )
    }

    /// The column family of key `key`.
    fn family_of(&self, key: usize) -> usize {
        key * self.families / self.keys
    }

    /// The key indices of column family `family`.
    fn family_keys(&self, family: usize) -> std::ops::Range<usize> {
        // `family_of(key) == family` exactly when family * keys <= key * families <
        // (family + 1) * keys.
        (family * self.keys).div_ceil(self.families)..((family + 1) * self.keys).div_ceil(self.families)
    }
}

/// One planned micro-operation.
#[derive(Clone, Copy, Debug)]
enum Step {
    Read(usize),
    ReadForUpdate(usize),
    ReadForShare(usize),
    Append(usize),
    Scan { start: usize, end: usize, reverse: bool },
    Savepoint,
    RollbackToSavepoint,
    ReleaseSavepoint,
}

/// One planned transaction.
struct Plan {
    steps: Vec<Step>,
    roll_back: bool,
}

fn plan_mixed(rng: &mut SmallRng, config: &WorkloadConfig) -> Plan {
    let keys = config.keys;
    let count = rng.gen_range(1..=6);
    let scans = rng.gen_bool(0.3);
    let mut steps: Vec<Step> = (0..count)
        .map(|_| {
            let roll = rng.gen_range(0..100);
            let key = rng.gen_range(0..keys);
            if scans && roll < 20 {
                let range = config.family_keys(rng.gen_range(0..config.families));
                let start = rng.gen_range(range.clone());
                let end = rng.gen_range(start + 1..=range.end);
                Step::Scan { start, end, reverse: rng.gen_bool(0.5) }
            } else if roll < 60 {
                Step::Append(key)
            } else if roll < 65 {
                Step::ReadForUpdate(key)
            } else if roll < 70 {
                Step::ReadForShare(key)
            } else {
                Step::Read(key)
            }
        })
        .collect();
    if rng.gen_bool(0.2) {
        // A savepoint around some of the steps, rolled back to or released.
        let open = rng.gen_range(0..=steps.len());
        let close = rng.gen_range(open..=steps.len());
        let closing = if rng.gen_ratio(2, 3) { Step::RollbackToSavepoint } else { Step::ReleaseSavepoint };
        steps.insert(close, closing);
        steps.insert(open, Step::Savepoint);
    }
    Plan { steps, roll_back: rng.gen_ratio(1, 20) }
}

fn plan_write_skew(rng: &mut SmallRng, keys: usize) -> Plan {
    let pairs = (keys / 2).max(1);
    let pair = rng.gen_range(0..pairs);
    let (first, second) = if rng.gen_bool(0.5) { (pair, pair + pairs) } else { (pair + pairs, pair) };
    let target = if rng.gen_bool(0.5) { first } else { second };
    Plan { steps: vec![Step::Read(first), Step::Read(second), Step::Append(target)], roll_back: false }
}

/// What ended a step early.
enum StepError {
    /// A retryable error: the transaction is aborted.
    Retryable(String),
    /// Anything else ends the run.
    Failure(String),
}

fn engine_error(error: riptide::Error, what: &str) -> StepError {
    if error.is_retryable() {
        StepError::Retryable(error.to_string())
    } else {
        StepError::Failure(format!("{what}: {error}"))
    }
}

/// What the threads share.
struct Shared<'a> {
    db: &'a Db,
    /// Handles of the column families, by number (the default one first).
    families: Vec<ColumnFamily>,
    config: &'a WorkloadConfig,
    options: TransactionOptions,
    /// `options` with a one-byte write memory limit: every write spills, and the commit installs
    /// tables at one sequence number (`db/spilled_commit.rs`). One free transaction in eight.
    spilling_options: TransactionOptions,
    /// Every thread has begun its synchronized transaction.
    begun: Barrier,
    /// Every thread has ended its synchronized transaction.
    ended: Barrier,
    next_element: AtomicU64,
    failure: Mutex<Option<String>>,
    stopped: AtomicBool,
}

impl Shared<'_> {
    fn fail(&self, message: String) {
        let mut slot = self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if slot.is_none() {
            *slot = Some(format!("{}: {message}", self.config.describe()));
        }
        self.stopped.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// The handle of `key`'s column family; `None` for the default one, which the
    /// transactions reach through the plain methods (the others through the `_cf` forms).
    fn handle(&self, key: usize) -> Option<&ColumnFamily> {
        match self.config.family_of(key) {
            0 => None,
            family => self.families.get(family),
        }
    }

    fn get(&self, transaction: &Transaction, key: usize) -> riptide::Result<Option<Vec<u8>>> {
        match self.handle(key) {
            None => transaction.get(&key_name(key)),
            Some(family) => transaction.get_cf(family, &key_name(key)),
        }
    }

    fn get_for_update(&self, transaction: &Transaction, key: usize) -> riptide::Result<Option<Vec<u8>>> {
        match self.handle(key) {
            None => transaction.get_for_update(&key_name(key)),
            Some(family) => transaction.get_for_update_cf(family, &key_name(key)),
        }
    }

    fn get_for_share(&self, transaction: &Transaction, key: usize) -> riptide::Result<Option<Vec<u8>>> {
        match self.handle(key) {
            None => transaction.get_for_share(&key_name(key)),
            Some(family) => transaction.get_for_share_cf(family, &key_name(key)),
        }
    }

    fn put(&self, transaction: &Transaction, key: usize, value: &[u8]) -> riptide::Result<()> {
        match self.handle(key) {
            None => transaction.put(&key_name(key), value),
            Some(family) => transaction.put_cf(family, &key_name(key), value),
        }
    }

    /// An iterator over the column family of `key`.
    fn iter<'t>(
        &self,
        transaction: &'t Transaction,
        key: usize,
        options: &ReadOptions,
    ) -> riptide::Result<TransactionIterator<'t>> {
        match self.handle(key) {
            None => transaction.iter(options),
            Some(family) => transaction.iter_cf(family, options),
        }
    }
}

/// The name of column family `family` (not the default one).
fn family_name(family: usize) -> String {
    format!("lists-{family}")
}

/// Database options: small memtables and files, so that a run flushes and compacts and reads
/// come from every layer; no WAL sync, since durability is not what this harness checks.
fn database_options() -> Options {
    Options {
        memtable_size_bytes: 32 << 10,
        target_file_size_bytes: 64 << 10,
        level0_compaction_trigger_files: 2,
        wal_sync_mode: SyncMode::None,
        ..Options::default()
    }
}

/// Runs the workload on a new database at `path` and returns the history; `Err` describes a
/// failure (with the seed).
pub fn run(config: &WorkloadConfig, path: &Path) -> Result<History, String> {
    let threads = config.threads.max(1);
    let keys = config.keys.max(2);
    let families = config.families.clamp(1, keys);
    let config = &WorkloadConfig { threads, keys, families, ..config.clone() };
    let options = database_options();
    let named = (1..families).map(|family| (family_name(family), options.column_family_options())).collect();
    let db = Db::open_with_column_families(path, options, named)
        .map_err(|error| format!("{}: open: {error}", config.describe()))?;
    let mut handles = vec![db.default_column_family()];
    for family in 1..families {
        let handle = db
            .column_family(&family_name(family))
            .ok_or_else(|| format!("{}: column family {} is missing", config.describe(), family_name(family)))?;
        handles.push(handle);
    }
    let shared = Shared {
        db: &db,
        families: handles,
        config,
        options: TransactionOptions {
            isolation: config.isolation,
            mode: config.mode,
            lock_timeout: config.lock_timeout,
            deadlock_detection: config.deadlock_detection,
            ..TransactionOptions::default()
        },
        spilling_options: TransactionOptions {
            isolation: config.isolation,
            mode: config.mode,
            lock_timeout: config.lock_timeout,
            deadlock_detection: config.deadlock_detection,
            write_memory_limit_bytes: 1,
            ..TransactionOptions::default()
        },
        begun: Barrier::new(threads),
        ended: Barrier::new(threads),
        next_element: AtomicU64::new(1),
        failure: Mutex::new(None),
        stopped: AtomicBool::new(false),
    };
    let per_thread: Vec<Vec<TransactionRecord>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let shared = &shared;
                scope.spawn(move || worker(shared, thread))
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap_or_default()).collect()
    });
    if let Some(failure) = shared.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
        return Err(failure);
    }
    let final_lists = read_final_state(&shared).map_err(|message| format!("{}: {message}", config.describe()))?;
    drop(shared);
    db.close().map_err(|error| format!("{}: close: {error}", config.describe()))?;
    Ok(History { transactions: per_thread.into_iter().flatten().collect(), final_lists })
}

/// One thread: its rounds, and the records of its transactions.
fn worker(shared: &Shared<'_>, thread: usize) -> Vec<TransactionRecord> {
    let config = shared.config;
    let mut rng = SmallRng::seed_from_u64(config.seed.wrapping_mul(1_000_003).wrapping_add(thread as u64));
    let mut records = Vec::new();
    for _ in 0..config.rounds {
        if config.shape == Shape::Mixed {
            for _ in 0..rng.gen_range(0..=2) {
                let plan = plan_mixed(&mut rng, config);
                let spill = rng.gen_range(0..8) == 0;
                if !shared.stopped() {
                    records.extend(run_transaction(shared, thread, plan, spill));
                }
            }
        }
        let plan = match config.shape {
            Shape::Mixed => plan_mixed(&mut rng, config),
            Shape::WriteSkew => plan_write_skew(&mut rng, config.keys),
        };
        let transaction = if shared.stopped() {
            None
        } else {
            match shared.db.begin(&shared.options) {
                Ok(transaction) => Some(transaction),
                Err(error) => {
                    shared.fail(format!("thread {thread}: begin: {error}"));
                    None
                }
            }
        };
        shared.begun.wait();
        if let Some(transaction) = transaction {
            records.extend(finish_transaction(shared, thread, transaction, plan));
        }
        shared.ended.wait();
    }
    records
}

/// Begins and runs a free transaction, spilling its writes if `spill`.
fn run_transaction(shared: &Shared<'_>, thread: usize, plan: Plan, spill: bool) -> Option<TransactionRecord> {
    let options = if spill { &shared.spilling_options } else { &shared.options };
    match shared.db.begin(options) {
        Ok(transaction) => finish_transaction(shared, thread, transaction, plan),
        Err(error) => {
            shared.fail(format!("thread {thread}: begin: {error}"));
            None
        }
    }
}

/// Runs `plan` in `transaction` and ends it; the record, or `None` after a failure.
fn finish_transaction(
    shared: &Shared<'_>,
    thread: usize,
    transaction: Transaction,
    plan: Plan,
) -> Option<TransactionRecord> {
    let snapshot = transaction.snapshot().map(Snapshot::sequence);
    let mut record = TransactionRecord {
        thread,
        operations: Vec::new(),
        outcome: Outcome::Committed,
        commit_sequence: None,
        snapshot,
    };
    for step in &plan.steps {
        match perform(shared, &transaction, *step, &mut record.operations) {
            Ok(()) => {}
            Err(StepError::Retryable(reason)) => {
                if let Err(error) = transaction.rollback() {
                    shared.fail(format!("thread {thread}: rollback after {reason}: {error}"));
                    return None;
                }
                record.outcome = Outcome::Aborted(reason);
                return Some(record);
            }
            Err(StepError::Failure(message)) => {
                shared.fail(format!("thread {thread}: {message}"));
                return None;
            }
        }
    }
    if plan.roll_back {
        if let Err(error) = transaction.rollback() {
            shared.fail(format!("thread {thread}: rollback: {error}"));
            return None;
        }
        record.outcome = Outcome::RolledBack;
        return Some(record);
    }
    match transaction.commit_returning_sequence() {
        Ok(sequence) => record.commit_sequence = sequence,
        Err(error) if error.is_retryable() => record.outcome = Outcome::Aborted(error.to_string()),
        Err(error) => {
            shared.fail(format!("thread {thread}: commit: {error}"));
            return None;
        }
    }
    Some(record)
}

/// Decodes what a read returned (absent: the empty list).
fn list_of(value: Option<Vec<u8>>, key: usize) -> Result<Vec<Element>, StepError> {
    match value {
        None => Ok(Vec::new()),
        Some(bytes) => decode_list(&bytes).map_err(|reason| StepError::Failure(format!("key {key} holds {reason}"))),
    }
}

/// Makes one micro-operation and records it.
fn perform(
    shared: &Shared<'_>,
    transaction: &Transaction,
    step: Step,
    operations: &mut Vec<Operation>,
) -> Result<(), StepError> {
    match step {
        Step::Read(key) => {
            let value = shared.get(transaction, key).map_err(|error| engine_error(error, "get"))?;
            operations.push(Operation::Read { key, list: list_of(value, key)?, lock: ReadLock::None });
        }
        Step::ReadForUpdate(key) => {
            let value =
                shared.get_for_update(transaction, key).map_err(|error| engine_error(error, "get_for_update"))?;
            operations.push(Operation::Read { key, list: list_of(value, key)?, lock: ReadLock::ForUpdate });
        }
        Step::ReadForShare(key) => {
            let value = shared.get_for_share(transaction, key).map_err(|error| engine_error(error, "get_for_share"))?;
            operations.push(Operation::Read { key, list: list_of(value, key)?, lock: ReadLock::ForShare });
        }
        Step::Append(key) => {
            let value = shared.get(transaction, key).map_err(|error| engine_error(error, "get"))?;
            let read = list_of(value, key)?;
            let element = shared.next_element.fetch_add(1, Ordering::Relaxed);
            let mut written = read.clone();
            written.push(element);
            if let Err(error) = shared.put(transaction, key, &encode_list(&written)) {
                // The read happened; the write did not.
                operations.push(Operation::Read { key, list: read, lock: ReadLock::None });
                return Err(engine_error(error, "put"));
            }
            operations.push(Operation::Append { key, element, read });
        }
        Step::Scan { start, end, reverse } => {
            let lists = scan(shared, transaction, start, end, reverse)?;
            operations.push(Operation::RangeRead { start, end, reverse, lists });
        }
        Step::Savepoint => {
            transaction.savepoint().map_err(|error| engine_error(error, "savepoint"))?;
            operations.push(Operation::Savepoint);
        }
        Step::RollbackToSavepoint => {
            transaction.rollback_to_savepoint().map_err(|error| engine_error(error, "rollback_to_savepoint"))?;
            operations.push(Operation::RollbackToSavepoint);
        }
        Step::ReleaseSavepoint => {
            transaction.release_savepoint().map_err(|error| engine_error(error, "release_savepoint"))?;
            operations.push(Operation::ReleaseSavepoint);
        }
    }
    Ok(())
}

/// Reads keys `start..end` (all in one column family) with one iterator, checking that it
/// stays in its bounds and in order; every key of the range with its list (empty when the
/// iterator did not show it).
fn scan(
    shared: &Shared<'_>,
    transaction: &Transaction,
    start: usize,
    end: usize,
    reverse: bool,
) -> Result<Vec<(usize, Vec<Element>)>, StepError> {
    let options =
        ReadOptions { lower_bound: Some(key_name(start)), upper_bound: Some(key_name(end)), ..ReadOptions::default() };
    let mut iterator = shared.iter(transaction, start, &options).map_err(|error| engine_error(error, "iter"))?;
    // Backward scans use the positioning methods; forward ones the `Iterator` implementation,
    // which positions itself and reports an error as its last item.
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if reverse {
        iterator.seek_to_last();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.prev();
        }
        iterator.status().map_err(|error| engine_error(error, "scan"))?;
    } else {
        for entry in &mut iterator {
            entries.push(entry.map_err(|error| engine_error(error, "scan"))?);
        }
    }
    drop(iterator);
    let mut seen: Vec<(usize, Vec<Element>)> = Vec::new();
    for (key, value) in entries {
        let index = parse_key_name(&key).filter(|index| (start..end).contains(index)).ok_or_else(|| {
            StepError::Failure(format!("a scan of {start}..{end} returned key {:?}", String::from_utf8_lossy(&key)))
        })?;
        if let Some((previous, _)) = seen.last() {
            if (reverse && index >= *previous) || (!reverse && index <= *previous) {
                return Err(StepError::Failure(format!(
                    "a {} scan of {start}..{end} returned key {index} after key {previous}",
                    if reverse { "backward" } else { "forward" }
                )));
            }
        }
        let list = decode_list(&value)
            .map_err(|reason| StepError::Failure(format!("a scan showed key {index} holding {reason}")))?;
        seen.push((index, list));
    }
    Ok((start..end)
        .map(|key| {
            let list = seen.iter().find(|(seen_key, _)| *seen_key == key).map(|(_, list)| list.clone());
            (key, list.unwrap_or_default())
        })
        .collect())
}

/// The final list of every key, by `get`, checked against a full scan of every column family.
fn read_final_state(shared: &Shared<'_>) -> Result<Vec<Vec<Element>>, String> {
    let (db, config) = (shared.db, shared.config);
    let keys = config.keys;
    let mut lists = Vec::with_capacity(keys);
    for key in 0..keys {
        let family = &shared.families[config.family_of(key)];
        let value = db.get_cf(family, &key_name(key)).map_err(|error| format!("final get of key {key}: {error}"))?;
        lists.push(match value {
            None => Vec::new(),
            Some(bytes) => decode_list(&bytes).map_err(|reason| format!("key {key} finally holds {reason}"))?,
        });
    }
    let mut scanned = vec![Vec::new(); keys];
    for (number, family) in shared.families.iter().enumerate() {
        let mut iterator =
            db.iter_cf(family, &ReadOptions::default()).map_err(|error| format!("final scan: {error}"))?;
        iterator.seek_to_first();
        while iterator.valid() {
            let key = parse_key_name(iterator.key()).filter(|key| config.family_keys(number).contains(key));
            let key = key.ok_or_else(|| {
                format!(
                    "the final scan of column family {number} shows a key nobody wrote there: {:?}",
                    String::from_utf8_lossy(iterator.key())
                )
            })?;
            scanned[key] =
                decode_list(iterator.value()).map_err(|reason| format!("the final scan: key {key}: {reason}"))?;
            iterator.next();
        }
        iterator.status().map_err(|error| format!("final scan: {error}"))?;
    }
    if let Some(key) = (0..keys).find(|&key| scanned[key] != lists[key]) {
        return Err(format!("key {key}: the final scan shows {:?} but get shows {:?}", scanned[key], lists[key]));
    }
    Ok(lists)
}
