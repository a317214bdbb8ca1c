//! Simulated power loss at every mutating file-system call of small canonical workloads.
//!
//! Each workload is a script of steps (writes with and without sync, flushes, `compact_all`,
//! reopens that switch the manifest) run on a `FaultFileSystem` over a `MemFileSystem`, from
//! the creation of the database on. A first run counts the mutating calls; then, for every call
//! number N and every `PowerLossMode`, the script runs again with the process "dying" after N
//! calls (every later call fails), the machine loses power, and the database is reopened on the
//! bare file system. It must open, and hold exactly the state after some prefix of the attempted
//! writes that includes every write known to be durable: acknowledged with `sync`, or followed
//! by an acknowledged `flush`, `compact_all` or `close`. Then it must accept a synced write and
//! survive a clean reopen. Each state is also checked with the first recovery itself crashing
//! part way and power failing again before the checked reopen.
//!
//! Background flushes and compactions make call numbering depend on timing, so a case replays
//! the same script and crash point, not always the same interleaving.
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads.
//!
//! Invariants: the state after recovery is a prefix of the history (I12, I14), at least as long
//! as the durable part (I1, I2, I13).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::{FaultFileSystem, FileSystem, MemFileSystem, PowerLossMode};
use riptide::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

/// A key-value model.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write: `(key, Some(value))` puts, `(key, None)` deletes; applied atomically.
pub type Write = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// One step of a workload script.
#[derive(Clone, Debug)]
pub enum Step {
    /// An atomic write, synced or not.
    Write {
        /// Its operations.
        write: Write,
        /// Whether it asks for a sync.
        sync: bool,
    },
    /// `Db::flush`.
    Flush,
    /// `Db::compact_all`.
    CompactAll,
    /// Close and open again (recovery writes a new manifest and switches `CURRENT`).
    Reopen,
}

/// A named workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its name, for reports.
    pub name: &'static str,
    /// The options it runs with (the file system is replaced).
    pub options: Options,
    /// Its steps.
    pub steps: Vec<Step>,
}

fn key(number: u64) -> Vec<u8> {
    format!("key{number:04}").into_bytes()
}

fn value(number: u64, step: usize, length_bytes: usize) -> Vec<u8> {
    let mut value = format!("v{number}.{step}:").into_bytes();
    while value.len() < length_bytes {
        value.push(b'a' + ((value.len() + step) % 26) as u8);
    }
    value
}

fn small_options() -> Options {
    Options {
        memtable_size_bytes: 8 << 10,
        block_size_bytes: 512,
        block_cache_size_bytes: 64 << 10,
        target_file_size_bytes: 8 << 10,
        level0_compaction_trigger_files: 2,
        level0_slowdown_writes_files: 7,
        level0_stop_writes_files: 8,
        max_open_tables: 16,
        ..Options::default()
    }
}

/// A random write of one to `max_operations` operations over `keys` keys.
fn random_write(rng: &mut SmallRng, step: usize, keys: u64, max_operations: usize, max_value_bytes: usize) -> Write {
    (0..rng.gen_range(1..=max_operations))
        .map(|_| {
            let number = rng.gen_range(0..keys);
            if rng.gen_bool(0.85) {
                (key(number), Some(value(number, step, rng.gen_range(0..max_value_bytes))))
            } else {
                (key(number), None)
            }
        })
        .collect()
}

/// The canonical workloads, varied by `seed`: put+sync, flush, compaction, manifest switch.
pub fn canonical_workloads(seed: u64) -> Vec<Workload> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut put_sync = Vec::new();
    for step in 0..24 {
        put_sync.push(Step::Write { write: random_write(&mut rng, step, 20, 3, 120), sync: rng.gen_bool(0.5) });
    }
    let mut flush = Vec::new();
    for step in 0..40 {
        flush.push(Step::Write { write: random_write(&mut rng, step, 40, 2, 300), sync: rng.gen_bool(0.1) });
        if step % 15 == 14 {
            flush.push(Step::Flush);
        }
    }
    let mut compaction = Vec::new();
    for step in 0..70 {
        compaction.push(Step::Write { write: random_write(&mut rng, step, 60, 2, 400), sync: false });
        if step % 20 == 19 {
            compaction.push(Step::Flush);
        }
    }
    compaction.push(Step::CompactAll);
    compaction.push(Step::Write { write: random_write(&mut rng, 70, 60, 2, 100), sync: true });
    let mut manifest_switch = Vec::new();
    for round in 0..3 {
        for step in 0..6 {
            let sync = step == 5 || rng.gen_bool(0.2);
            manifest_switch.push(Step::Write { write: random_write(&mut rng, round * 10 + step, 15, 3, 80), sync });
        }
        if round == 1 {
            manifest_switch.push(Step::Flush);
        }
        manifest_switch.push(Step::Reopen);
    }
    vec![
        Workload { name: "put-sync", options: small_options(), steps: put_sync },
        Workload { name: "flush", options: small_options(), steps: flush },
        Workload {
            name: "compaction",
            options: Options { memtable_size_bytes: 4096, ..small_options() },
            steps: compaction,
        },
        Workload { name: "manifest-switch", options: small_options(), steps: manifest_switch },
    ]
}

/// What running a script left: every write attempted, in order, and how many of the first ones
/// are known to be durable.
struct History {
    writes: Vec<Write>,
    durable: usize,
}

fn with_file_system(options: &Options, file_system: Arc<dyn FileSystem>) -> Options {
    Options { file_system, ..options.clone() }
}

/// Runs `workload` from the creation of the database on `file_system`, stopping at the first
/// error (after a crash point every mutating call fails).
fn run_script(workload: &Workload, file_system: Arc<dyn FileSystem>, path: &Path) -> History {
    let options = with_file_system(&workload.options, file_system);
    let mut history = History { writes: Vec::new(), durable: 0 };
    let Ok(mut db) = Db::open(path, options.clone()) else { return history };
    for step in &workload.steps {
        match step {
            Step::Write { write, sync } => {
                let mut batch = WriteBatch::new();
                for (key, value) in write {
                    match value {
                        Some(value) => batch.put(key, value),
                        None => batch.delete(key),
                    }
                }
                history.writes.push(write.clone());
                if db.write_opt(batch, &WriteOptions { sync: *sync }).is_err() {
                    return history;
                }
                if *sync {
                    history.durable = history.writes.len();
                }
            }
            Step::Flush => {
                if db.flush().is_err() {
                    return history;
                }
                history.durable = history.writes.len();
            }
            Step::CompactAll => {
                if db.compact_all().is_err() {
                    return history;
                }
                history.durable = history.writes.len();
            }
            Step::Reopen => {
                if db.close().is_err() {
                    return history;
                }
                history.durable = history.writes.len();
                match Db::open(path, options.clone()) {
                    Ok(reopened) => db = reopened,
                    Err(_) => return history,
                }
            }
        }
    }
    drop(db);
    history
}

fn apply(model: &mut Model, write: &Write) {
    for (key, value) in write {
        match value {
            Some(value) => model.insert(key.clone(), value.clone()),
            None => model.remove(key),
        };
    }
}

/// The length of a prefix of `writes`, at least `durable` long, whose model is `actual`.
pub fn matching_prefix(writes: &[Write], durable: usize, actual: &Model) -> Option<usize> {
    let mut model = Model::new();
    for (index, write) in writes.iter().enumerate() {
        if index >= durable && &model == actual {
            return Some(index);
        }
        apply(&mut model, write);
    }
    (&model == actual).then_some(writes.len())
}

/// Every key and value of `db`.
pub fn dump(db: &Db) -> Result<Model, riptide::Error> {
    let mut iterator = db.iter(&ReadOptions::default())?;
    let mut model = Model::new();
    iterator.seek_to_first();
    while iterator.valid() {
        model.insert(iterator.key().to_vec(), iterator.value().to_vec());
        iterator.next();
    }
    iterator.status()?;
    Ok(model)
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
    run_script(workload, Arc::new(fault.clone()), Path::new("/power"));
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
    let history = run_script(workload, Arc::new(fault.clone()), path);
    memory.simulate_power_loss(mode);
    if let Some(recovery_calls) = recovery_crash {
        let recovery = FaultFileSystem::new(Arc::new(memory.clone()));
        recovery.crash_after(Some(recovery_calls));
        // The interrupted open may fail or succeed; either way the machine loses power again.
        drop(Db::open(path, with_file_system(&workload.options, Arc::new(recovery))));
        memory.simulate_power_loss(reseeded(mode));
    }
    let bare: Arc<dyn FileSystem> = Arc::new(memory.clone());
    let describe = |what: &str| {
        let recovery = recovery_crash.map_or(String::new(), |calls| format!(", recovery crashed after call {calls}"));
        format!("workload {} crash after call {crash_after} {mode:?}{recovery}: {what}", workload.name)
    };
    let db = Db::open(path, with_file_system(&workload.options, Arc::clone(&bare)))
        .map_err(|error| describe(&format!("reopen failed: {error}")))?;
    let actual = dump(&db).map_err(|error| describe(&format!("reading after recovery failed: {error}")))?;
    if matching_prefix(&history.writes, history.durable, &actual).is_none() {
        return Err(describe(&format!(
            "the recovered state ({} keys) is no prefix of the {} attempted writes that keeps the first {} (durable)",
            actual.len(),
            history.writes.len(),
            history.durable
        )));
    }
    db.put_opt(b"after-power-loss", b"ok", &WriteOptions { sync: true })
        .map_err(|error| describe(&format!("a write after recovery failed: {error}")))?;
    db.close().map_err(|error| describe(&format!("close after recovery failed: {error}")))?;
    let db = Db::open(path, with_file_system(&workload.options, bare))
        .map_err(|error| describe(&format!("second reopen failed: {error}")))?;
    let mut expected = actual;
    expected.insert(b"after-power-loss".to_vec(), b"ok".to_vec());
    let again = dump(&db).map_err(|error| describe(&format!("reading after the second reopen failed: {error}")))?;
    if again != expected {
        return Err(describe("the second reopen changed the contents"));
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
    let started = Instant::now();
    let mut report = SweepReport::default();
    let mut seed = first_seed;
    loop {
        sweep_seed(seed, 1, &mut report);
        if !report.failures.is_empty() || duration.is_none_or(|duration| started.elapsed() >= duration) {
            break;
        }
        seed += 1;
    }
    report.seeds = format!("{first_seed}..{seed}");
    report
}
