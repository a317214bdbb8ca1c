//! Simulated power loss at every mutating file-system call of small canonical workloads.
//!
//! Each workload (see `workloads`) is a script of steps (writes with and without sync,
//! flushes, `compact_all`, reopens that switch the manifest, column family create, drop and
//! rename) run on a `FaultFileSystem` over a `MemFileSystem`, from the creation of the
//! database on. A first run counts the mutating calls; then, for every call number N and every
//! `PowerLossMode`, the script runs again with the process "dying" after N calls (every later
//! call fails), the machine loses power, and the database is reopened on the bare file system.
//! It must open, and hold exactly the state after some prefix of the attempted writes that
//! includes every write known to be durable (acknowledged with `sync`, or followed by an
//! acknowledged `flush`, `compact_all` or `close`), in the column families left by some prefix
//! of the lifecycle steps that includes every acknowledged one (see `history`). Then it must
//! accept a synced write and survive a clean reopen. Each state is also checked with the first
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
use riptide::{ColumnFamily, Db, Options, ReadOptions, WriteBatch, WriteOptions};

mod history;
mod workloads;

pub use history::{matching_prefixes, FailedStep, History, Model, State, MAX_FAILED_LIFECYCLE_STEPS};
pub use workloads::{canonical_workloads, FamilyIndex, Operation, Step, Workload, Write};

fn with_file_system(options: &Options, file_system: Arc<dyn FileSystem>) -> Options {
    Options { file_system, ..options.clone() }
}

/// Runs one step on `db`; `Err` once the file system refuses. `handles` maps the live
/// families to their handles.
fn run_step(
    db: &Db,
    options: &Options,
    handles: &mut BTreeMap<FamilyIndex, ColumnFamily>,
    step: &Step,
) -> riptide::Result<()> {
    let handle = |family: &FamilyIndex| handles.get(family).cloned().expect("the script names a live family");
    match step {
        Step::Write { write, sync } => {
            let mut batch = WriteBatch::new();
            for operation in write {
                let family = handle(&operation.family);
                match &operation.value {
                    Some(value) => batch.put_cf(&family, &operation.key, value),
                    None => batch.delete_cf(&family, &operation.key),
                }
            }
            db.write_opt(batch, &WriteOptions { sync: *sync })
        }
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
    }
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

/// `step` without what names a family in `missing`, or `None` when nothing is left.
fn without_missing_families(step: &Step, missing: &BTreeSet<FamilyIndex>) -> Option<Step> {
    match step {
        Step::Write { write, sync } => {
            let write: Write = write.iter().filter(|operation| !missing.contains(&operation.family)).cloned().collect();
            (!write.is_empty()).then_some(Step::Write { write, sync: *sync })
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
    // Families whose creation failed.
    let mut missing = BTreeSet::new();
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
        let Some(step) = without_missing_families(step, &missing) else { continue };
        match &step {
            Step::Write { write, .. } => history.writes.push(write.clone()),
            step if step.is_lifecycle() => history.lifecycle.push(step.clone()),
            _ => {}
        }
        if run_step(&db, &options, &mut handles, &step).is_err() {
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
        if let Step::Write { .. } = step {
            history.acknowledged_writes = history.writes.len();
        }
        if let Step::Write { sync: true, .. } | Step::Flush | Step::CompactAll = step {
            history.durable_writes = history.writes.len();
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
