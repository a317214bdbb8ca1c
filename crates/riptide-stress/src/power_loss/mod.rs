//! Simulated power loss at every mutating file-system call of small canonical workloads.
//!
//! Each workload (see `workloads`) is a script of steps (writes with and without sync,
//! flushes, `compact_all`, reopens that switch the manifest, column family create, drop and
//! rename, transaction commits, prepares and decisions of prepared transactions) run on a `FaultFileSystem` over a `MemFileSystem`, from the creation of the
//! database on. A first run counts the mutating calls; then, for every call number N and every
//! `PowerLossMode`, the script runs again with the process "dying" after N calls (every later
//! call fails), the machine loses power, and the database is reopened on the bare file system.
//! It must open, and hold exactly the state after some prefix of the attempted writes that
//! includes every write known to be durable (acknowledged with `sync`, or followed by an
//! acknowledged `flush`, `compact_all` or `close`), in the column families left by some prefix
//! of the lifecycle steps that includes every acknowledged one (see `history`). Then it must
//! accept a synced write and survive a clean reopen. Prepared transactions must be listed
//! exactly when the history allows (`check_prepared`: every acknowledged prepare without a
//! decision, nothing decided, a commit cut by the crash either applied or still prepared). Each state is also checked with the first
//! recovery itself crashing part way and power failing again before the checked reopen.
//!
//! Background flushes and compactions make call numbering depend on timing, so a case replays
//! the same script and crash point, not always the same interleaving.
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads.
//!
//! Invariants: the state after recovery is a prefix of the history (I12, I14), at least as long
//! as the durable part (I1, I2, I13).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use riptide::fs::{FaultFileSystem, FileSystem, MemFileSystem, PowerLossMode};
use riptide::{ColumnFamily, Db, Options, ReadOptions, Transaction, TransactionOptions, WriteBatch, WriteOptions};

mod history;
mod workloads;

pub use history::{
    matching_prefixes, Decision, FailedStep, History, Model, PreparedHistory, State, MAX_FAILED_LIFECYCLE_STEPS,
};
pub use workloads::{canonical_workloads, FamilyIndex, Operation, Step, Workload, Write, CLOCK_US};

fn with_file_system(options: &Options, file_system: Arc<dyn FileSystem>) -> Options {
    Options { file_system, ..options.clone() }
}

/// Why a step failed.
struct StepFailure {
    /// A transaction failed before its commit (a write that spilled to a private file failed):
    /// it wrote nothing, by contract, so it leaves the history.
    before_commit: bool,
}

impl From<riptide::Error> for StepFailure {
    fn from(_: riptide::Error) -> StepFailure {
        StepFailure { before_commit: false }
    }
}

/// Runs one step on `db`; `Err` once the file system refuses. `handles` maps the live
/// families to their handles.
fn run_step(
    db: &Db,
    options: &Options,
    handles: &mut BTreeMap<FamilyIndex, ColumnFamily>,
    step: &Step,
) -> Result<(), StepFailure> {
    let handle = |family: &FamilyIndex| handles.get(family).cloned().expect("the script names a live family");
    let result = match step {
        Step::Write { write, sync } => {
            let mut batch = WriteBatch::new();
            for operation in write {
                let family = handle(&operation.family);
                match (&operation.value, &operation.range_end) {
                    (Some(operand), _) if operation.merge => batch.merge_cf(&family, &operation.key, operand),
                    (Some(value), _) => match operation.expires_at_us {
                        Some(expiry) => batch.put_with_expiry_cf(&family, &operation.key, value, expiry),
                        None => batch.put_cf(&family, &operation.key, value),
                    },
                    (None, Some(end)) => batch.delete_range_cf(&family, &operation.key, end),
                    (None, None) if operation.single_delete => batch.single_delete_cf(&family, &operation.key),
                    (None, None) => batch.delete_cf(&family, &operation.key),
                }
            }
            db.write_opt(batch, &WriteOptions { sync: *sync })
        }
        Step::Transaction { write, sync, spill } => {
            let mut transaction_options = TransactionOptions { sync: *sync, ..TransactionOptions::default() };
            if *spill {
                transaction_options.write_memory_limit_bytes = 1;
            }
            let transaction = db.begin(&transaction_options)?;
            if apply_to_transaction(&transaction, handles, write).is_err() {
                return Err(StepFailure { before_commit: true });
            }
            transaction.commit()
        }
        Step::Prepare { write, xid, spill } => {
            let mut transaction_options = TransactionOptions::default();
            if *spill {
                transaction_options.write_memory_limit_bytes = 1;
            }
            let transaction = db.begin(&transaction_options)?;
            apply_to_transaction(&transaction, handles, write)?;
            // The handle may go: a prepared transaction waits in the database for its decision.
            transaction.prepare(xid)
        }
        Step::CommitPrepared { xid } => db.commit_prepared(xid),
        Step::RollbackPrepared { xid } => db.rollback_prepared(xid),
        Step::Flush => db.flush(),
        Step::CompactAll => db.compact_all(),
        Step::CreateFamily { family, name, memtable_size_bytes } => {
            let mut family_options = options.column_family_options();
            family_options.memtable_size_bytes = *memtable_size_bytes;
            handles.insert(*family, db.create_column_family(name, family_options)?);
            Ok(())
        }
        Step::DropFamily { family } => {
            db.drop_column_family(&handle(family))?;
            handles.remove(family);
            Ok(())
        }
        Step::RenameFamily { family, name } => db.rename_column_family(&handle(family), name),
        Step::Reopen => unreachable!("reopen replaces the database; run_script handles it"),
    };
    result.map_err(StepFailure::from)
}

/// Makes a write's operations in `transaction`.
fn apply_to_transaction(
    transaction: &Transaction,
    handles: &BTreeMap<FamilyIndex, ColumnFamily>,
    write: &Write,
) -> riptide::Result<()> {
    for operation in write {
        let family = handles.get(&operation.family).expect("the script names a live family");
        if operation.range_end.is_some()
            || operation.expires_at_us.is_some()
            || operation.merge
            || operation.single_delete
        {
            return Err(riptide::Error::InvalidArgument(
                "a script put a range delete, an expiry, a merge or a single delete in a transaction".to_string(),
            ));
        }
        match &operation.value {
            Some(value) => transaction.put_cf(family, &operation.key, value)?,
            None => transaction.delete_cf(family, &operation.key)?,
        }
    }
    Ok(())
}

/// Whether a script goes on after a lifecycle step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterLifecycleFailure {
    /// Stop there, like at any other error (a crash: every later call fails anyway).
    Stop,
    /// Go on, up to `MAX_FAILED_LIFECYCLE_STEPS` failures: an application may retry or carry
    /// on after a failed create, drop or rename, and the engine must stay consistent (it
    /// writes a whole new manifest at its next change). Steps that name a family whose
    /// creation failed are left out (writes keep their other operations).
    GoOn,
}

/// `step` without what names a family in `missing`, or `None` when nothing is left. A prepared
/// transaction left with nothing is dropped with its decision: its xid joins `dropped_xids`.
///
/// Regression (found by `make soak`, io-errors sweep, seed 681853, once WAL preallocation
/// added a file operation and moved the faults): prepared transactions were not filtered, so
/// one naming a family whose creation had failed reached the transaction code, which panicked
/// on the unknown family.
fn without_missing_families(
    step: &Step,
    missing: &BTreeSet<FamilyIndex>,
    dropped_xids: &mut BTreeSet<Vec<u8>>,
) -> Option<Step> {
    match step {
        Step::Prepare { write, xid, spill } => {
            let write: Write = write.iter().filter(|operation| !missing.contains(&operation.family)).cloned().collect();
            if write.is_empty() {
                dropped_xids.insert(xid.clone());
                return None;
            }
            Some(Step::Prepare { write, xid: xid.clone(), spill: *spill })
        }
        Step::CommitPrepared { xid } | Step::RollbackPrepared { xid } if dropped_xids.contains(xid) => None,
        Step::Write { write, sync } => {
            let write: Write = write.iter().filter(|operation| !missing.contains(&operation.family)).cloned().collect();
            (!write.is_empty()).then_some(Step::Write { write, sync: *sync })
        }
        Step::Transaction { write, sync, spill } => {
            let write: Write = write.iter().filter(|operation| !missing.contains(&operation.family)).cloned().collect();
            (!write.is_empty()).then_some(Step::Transaction { write, sync: *sync, spill: *spill })
        }
        Step::DropFamily { family } | Step::RenameFamily { family, .. } if missing.contains(family) => None,
        other => Some(other.clone()),
    }
}

/// Runs `workload` from the creation of the database on `file_system`, stopping at the first
/// error (after a crash point every mutating call fails), or, with `GoOn`, at the first error
/// of a step that is no lifecycle step. Returns what was attempted and the database, still
/// open, unless opening it failed.
pub(crate) fn run_script(
    workload: &Workload,
    file_system: Arc<dyn FileSystem>,
    path: &Path,
    after_lifecycle_failure: AfterLifecycleFailure,
) -> (History, Option<Db>) {
    let options = with_file_system(&workload.options, file_system);
    let mut history = History::default();
    let Ok(mut db) = Db::open(path, options.clone()) else { return (history, None) };
    let mut handles = BTreeMap::from([(0, db.default_column_family())]);
    // Families whose creation failed, and prepared transactions dropped for naming only them.
    let mut missing = BTreeSet::new();
    let mut dropped_xids = BTreeSet::new();
    for step in &workload.steps {
        if let Step::Reopen = step {
            // After a failed lifecycle step the reopened database may show it or not, so the
            // script's own view of the families ends here; the check after it covers both.
            if !history.failed_lifecycle.is_empty() {
                return (history, Some(db));
            }
            if db.close().is_err() {
                return (history, None);
            }
            history.durable_writes = history.writes.len();
            db = match Db::open(path, options.clone()) {
                Ok(reopened) => reopened,
                Err(_) => return (history, None),
            };
            // Handles do not outlive their database: look every live family up by name.
            let live = history::live_families(&history.acknowledged_lifecycle());
            handles.clear();
            for (family, name) in live {
                match db.column_family(&name) {
                    Some(handle) => handles.insert(family, handle),
                    None => {
                        history.anomaly = Some(format!("column family {name} is missing after a clean reopen"));
                        return (history, Some(db));
                    }
                };
            }
            continue;
        }
        let Some(step) = without_missing_families(step, &missing, &mut dropped_xids) else { continue };
        match &step {
            Step::Write { write, .. } | Step::Transaction { write, .. } => history.writes.push(write.clone()),
            Step::Prepare { write, xid, .. } => history.prepared.push(PreparedHistory {
                xid: xid.clone(),
                write: write.clone(),
                acknowledged: false,
                decision: None,
            }),
            Step::CommitPrepared { xid } | Step::RollbackPrepared { xid } => {
                let commit = matches!(step, Step::CommitPrepared { .. });
                let write_index = history.writes.len();
                let prepared = history.prepared.iter_mut().find(|prepared| &prepared.xid == xid);
                let prepared = prepared.expect("the script decides only transactions it prepared");
                if commit {
                    history.writes.push(prepared.write.clone());
                }
                prepared.decision = Some(Decision { commit, write_index, acknowledged: false });
            }
            step if step.is_lifecycle() => history.lifecycle.push(step.clone()),
            _ => {}
        }
        if let Err(failure) = run_step(&db, &options, &mut handles, &step) {
            if failure.before_commit {
                history.writes.pop();
                return (history, Some(db));
            }
            if !step.is_lifecycle() {
                return (history, Some(db));
            }
            history
                .failed_lifecycle
                .push(FailedStep { position: history.lifecycle.len() - 1, writes_before: history.writes.len() });
            if let Step::CreateFamily { family, .. } = step {
                missing.insert(family);
            }
            let go_on = after_lifecycle_failure == AfterLifecycleFailure::GoOn
                && history.failed_lifecycle.len() < MAX_FAILED_LIFECYCLE_STEPS;
            if !go_on {
                return (history, Some(db));
            }
            continue;
        }
        if let Step::Write { .. } | Step::Transaction { .. } | Step::CommitPrepared { .. } = step {
            history.acknowledged_writes = history.writes.len();
        }
        // A prepared transaction's commit is synced, and a sync covers every earlier write.
        if let Step::Write { sync: true, .. }
        | Step::Transaction { sync: true, .. }
        // A spilled commit is durable when it returns (its manifest record is synced).
        | Step::Transaction { spill: true, .. }
        | Step::CommitPrepared { .. }
        | Step::Flush
        | Step::CompactAll = step
        {
            history.durable_writes = history.writes.len();
        }
        match &step {
            Step::Prepare { xid, .. } => {
                if let Some(prepared) = history.prepared.iter_mut().find(|prepared| &prepared.xid == xid) {
                    prepared.acknowledged = true;
                }
            }
            Step::CommitPrepared { xid } | Step::RollbackPrepared { xid } => {
                let prepared = history.prepared.iter_mut().find(|prepared| &prepared.xid == xid);
                if let Some(decision) = prepared.and_then(|prepared| prepared.decision.as_mut()) {
                    decision.acknowledged = true;
                }
            }
            _ => {}
        }
    }
    (history, Some(db))
}

/// Every live column family's keys and values.
pub fn dump(db: &Db) -> Result<State, riptide::Error> {
    let mut state = State::new();
    for name in db.list_column_families() {
        let Some(family) = db.column_family(&name) else {
            return Err(riptide::Error::InvalidArgument(format!("listed column family {name} has no handle")));
        };
        let mut iterator = db.iter_cf(&family, &ReadOptions::default())?;
        let mut model = Model::new();
        iterator.seek_to_first();
        while iterator.valid() {
            model.insert(iterator.key().to_vec(), iterator.value().to_vec());
            iterator.next();
        }
        iterator.status()?;
        state.insert(name, model);
    }
    Ok(state)
}

/// The three power-loss modes, seeded.
pub fn modes(seed: u64) -> [PowerLossMode; 3] {
    [
        PowerLossMode::DropUnsynced,
        PowerLossMode::KeepUnsyncedPrefix { seed },
        PowerLossMode::TornTail { seed: seed ^ 0x5eed },
    ]
}

/// The same mode with another seed, for a second power cut.
fn reseeded(mode: PowerLossMode) -> PowerLossMode {
    match mode {
        PowerLossMode::DropUnsynced => PowerLossMode::DropUnsynced,
        PowerLossMode::KeepUnsyncedPrefix { seed } => PowerLossMode::KeepUnsyncedPrefix { seed: seed.wrapping_add(1) },
        PowerLossMode::TornTail { seed } => PowerLossMode::TornTail { seed: seed.wrapping_add(1) },
    }
}

/// Counts the mutating calls of one clean run of `workload`.
pub fn count_operations(workload: &Workload) -> u64 {
    let fault = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
    drop(run_script(workload, Arc::new(fault.clone()), Path::new("/power"), AfterLifecycleFailure::Stop));
    fault.mutating_operation_count()
}

/// One crash state: run `workload` with the process dying after `crash_after` mutating calls,
/// cut power in `mode`, and reopen and check. With `recovery_crash` set to `Some(n)`, the first
/// recovery itself dies after `n` mutating calls and power is cut again (same mode, another
/// seed) before the checked reopen: an interrupted recovery must lose nothing either. `Err`
/// describes the failure.
pub fn crash_case(
    workload: &Workload,
    crash_after: u64,
    mode: PowerLossMode,
    recovery_crash: Option<u64>,
) -> Result<(), String> {
    let path = Path::new("/power");
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    fault.crash_after(Some(crash_after));
    let (history, db) = run_script(workload, Arc::new(fault.clone()), path, AfterLifecycleFailure::Stop);
    drop(db);
    memory.simulate_power_loss(mode);
    if let Some(recovery_calls) = recovery_crash {
        let recovery = FaultFileSystem::new(Arc::new(memory.clone()));
        recovery.crash_after(Some(recovery_calls));
        // The interrupted open may fail or succeed; either way the machine loses power again.
        drop(Db::open(path, with_file_system(&workload.options, Arc::new(recovery))));
        memory.simulate_power_loss(reseeded(mode));
    }
    let describe = |what: &str| {
        let recovery = recovery_crash.map_or(String::new(), |calls| format!(", recovery crashed after call {calls}"));
        format!("workload {} crash after call {crash_after} {mode:?}{recovery}: {what}", workload.name)
    };
    check_recovery(workload, &history, &memory, path).map_err(|failure| describe(&failure))
}

/// Reopens the database in `memory` on the bare file system and checks it against `history`:
/// it must open and show a legal state, then take a synced write and show the same state plus
/// that write after a clean reopen. `Err` describes the failure.
pub(crate) fn check_recovery(
    workload: &Workload,
    history: &History,
    memory: &MemFileSystem,
    path: &Path,
) -> Result<(), String> {
    let bare: Arc<dyn FileSystem> = Arc::new(memory.clone());
    let db = Db::open(path, with_file_system(&workload.options, Arc::clone(&bare)))
        .map_err(|error| format!("reopen failed: {error}"))?;
    let actual = dump(&db).map_err(|error| format!("reading after recovery failed: {error}"))?;
    if let Some(anomaly) = &history.anomaly {
        return Err(anomaly.clone());
    }
    check_prepared(history, &db, &actual)?;
    if matching_prefixes(history, &actual).is_none() {
        let keys: usize = actual.values().map(Model::len).sum();
        return Err(format!(
            "the recovered state ({} column families {:?}, {keys} keys) is no prefix of the {} attempted writes \
             that keeps the first {} (durable), with the {} lifecycle steps but for some of the failed ones \
             ({:?}); {}",
            actual.len(),
            actual.keys().collect::<Vec<_>>(),
            history.writes.len(),
            history.durable_writes,
            history.lifecycle.len(),
            history.failed_lifecycle,
            history::describe_difference(history, &actual)
        ));
    }
    // Decide the transactions still prepared (rollback is always legal), so that the rest of
    // the check sees a plain database.
    for xid in db.prepared_transactions() {
        db.rollback_prepared(&xid)
            .map_err(|error| format!("rolling back a recovered prepared transaction failed: {error}"))?;
    }
    db.put_opt(b"after-recovery", b"ok", &WriteOptions { sync: true })
        .map_err(|error| format!("a write after recovery failed: {error}"))?;
    db.close().map_err(|error| format!("close after recovery failed: {error}"))?;
    let db = Db::open(path, with_file_system(&workload.options, bare))
        .map_err(|error| format!("second reopen failed: {error}"))?;
    let mut expected = actual;
    expected.entry("default".to_string()).or_default().insert(b"after-recovery".to_vec(), b"ok".to_vec());
    let again = dump(&db).map_err(|error| format!("reading after the second reopen failed: {error}"))?;
    if again != expected {
        return Err("the second reopen changed the contents".to_string());
    }
    Ok(())
}

/// Checks the prepared transactions recovery lists against what the script did: every
/// acknowledged prepare without a decision is listed; nothing acknowledged as decided is; no
/// unknown xid is; a commit in flight either shows its writes (and is not listed) or is listed
/// (and does not show them). `actual` is the recovered state.
fn check_prepared(history: &History, db: &Db, actual: &State) -> Result<(), String> {
    let listed: BTreeSet<Vec<u8>> = db.prepared_transactions().into_iter().collect();
    let show = |xid: &[u8]| String::from_utf8_lossy(xid).into_owned();
    for xid in &listed {
        if !history.prepared.iter().any(|prepared| &prepared.xid == xid) {
            return Err(format!("recovery lists prepared transaction {} that was never prepared", show(xid)));
        }
    }
    for prepared in &history.prepared {
        let is_listed = listed.contains(&prepared.xid);
        match prepared.decision {
            None if prepared.acknowledged && !is_listed => {
                return Err(format!(
                    "acknowledged prepared transaction {} is not listed after recovery",
                    show(&prepared.xid)
                ));
            }
            Some(decision) if decision.acknowledged && is_listed => {
                return Err(format!("transaction {} was decided but is listed as prepared", show(&prepared.xid)));
            }
            Some(Decision { commit: true, write_index, acknowledged: false }) => {
                // In flight: listed and not applied, or applied and not listed.
                let mut bounded = history.clone();
                if is_listed {
                    bounded.writes.truncate(write_index);
                    bounded.acknowledged_writes = bounded.acknowledged_writes.min(write_index);
                    bounded.durable_writes = bounded.durable_writes.min(write_index);
                } else {
                    bounded.durable_writes = bounded.durable_writes.max(write_index + 1);
                }
                if matching_prefixes(&bounded, actual).is_none() {
                    return Err(format!(
                        "the commit of prepared transaction {} was cut, and the state does not match its being {}",
                        show(&prepared.xid),
                        if is_listed { "still prepared (not applied)" } else { "committed (applied)" }
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What a sweep did.
#[derive(Clone, Debug, Default)]
pub struct SweepReport {
    /// Seeds covered, as `first..last`.
    pub seeds: String,
    /// Crash states checked.
    pub crash_states: u64,
    /// Failures, each naming its seed, workload, call number and mode.
    pub failures: Vec<String>,
}

/// Checks every call number of every canonical workload of `seed` in every mode, each once
/// with a clean recovery and once with a recovery that itself crashes (after a call number
/// drawn from the crash point); `stride` > 1 checks every stride-th call only (offset by the
/// seed), for quicker rounds.
pub fn sweep_seed(seed: u64, stride: u64, report: &mut SweepReport) {
    for workload in canonical_workloads(seed) {
        let total = count_operations(&workload);
        for crash_after in (seed % stride.max(1)..=total).step_by(stride.max(1) as usize) {
            let mode_seed = seed.wrapping_mul(7919).wrapping_add(crash_after);
            for mode in modes(mode_seed) {
                // Recovery makes a few dozen calls; some draws let it finish.
                let recovery_calls = mode_seed.wrapping_mul(0x9e37_79b9).rotate_left(17) % 48;
                for recovery_crash in [None, Some(recovery_calls)] {
                    report.crash_states += 1;
                    if let Err(failure) = crash_case(&workload, crash_after, mode, recovery_crash) {
                        report.failures.push(format!("seed {seed}: {failure}"));
                    }
                }
            }
        }
    }
}

/// Sweeps seeds from `first_seed` on until `duration` has passed (one seed when `None`).
pub fn soak(first_seed: u64, duration: Option<Duration>) -> SweepReport {
    soak_seeds(first_seed, duration, |seed, report| sweep_seed(seed, 1, report))
}

/// Runs `sweep` for seed after seed from `first_seed` on, until `duration` has passed (one
/// seed when `None`) or a seed failed, and names the seeds covered in the report.
pub(crate) fn soak_seeds(
    first_seed: u64,
    duration: Option<Duration>,
    mut sweep: impl FnMut(u64, &mut SweepReport),
) -> SweepReport {
    let started = Instant::now();
    let mut report = SweepReport::default();
    let mut seed = first_seed;
    loop {
        sweep(seed, &mut report);
        if !report.failures.is_empty() || duration.is_none_or(|duration| started.elapsed() >= duration) {
            break;
        }
        seed += 1;
    }
    report.seeds = format!("{first_seed}..{seed}");
    report
}
