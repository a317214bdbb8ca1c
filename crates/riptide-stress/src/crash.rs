//! The crash parent: runs the driver as a child process again and again on one database, kills
//! it with SIGKILL at a random moment (sometimes while it is still recovering), rebuilds the
//! expected state from the child's journal, reopens the database and verifies it.
//!
//! What a kill may and may not do: with `sync: false` a write that returned `Ok` was handed to
//! the operating system, which still has it after the process dies, so every acknowledged write
//! must survive, synced or not. A write in flight at the kill may or may not have taken effect
//! (atomically, for a batch). Nothing that was never written may appear.
//!
//! Concurrency contract: one parent per database directory; the child is the only other
//! process using it, and the parent touches the database only while no child runs.
//!
//! Invariants: after each verified cycle, the parent's base state is exactly what the database
//! holds, so the next cycle's legal values start from it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::driver::{open_with_retry, options_for_seed, read_all, verify_values};
use crate::journal::{parse_line, replay, Event};
use crate::model::{ExpectedState, KeySpace, ValueId};

/// How a crash loop is set up.
#[derive(Clone, Debug)]
pub struct CrashConfig {
    /// The `riptide-stress` executable to run as the child.
    pub executable: PathBuf,
    /// Seeds the kill moments and each cycle's child seed.
    pub seed: u64,
    /// Stop after this many cycles ...
    pub cycles: Option<u64>,
    /// ... or once this much time has passed (whichever comes first).
    pub duration: Option<Duration>,
    /// Threads in each child.
    pub threads: usize,
    /// The longest time a child runs after opening before it is killed, in milliseconds.
    pub max_run_ms: u64,
    /// The database directory; a temporary one when `None` (kept on failure).
    pub path: Option<PathBuf>,
    /// The keys written.
    pub space: KeySpace,
}

/// What a crash loop did.
#[derive(Clone, Debug, Default)]
pub struct CrashReport {
    /// Cycles completed (kill, reopen, verify).
    pub cycles: u64,
    /// Writes the children acknowledged, over all cycles.
    pub acknowledged_writes: u64,
    /// Writes still in flight when their child was killed.
    pub writes_in_flight_at_kill: u64,
    /// Cycles whose child was killed before it finished opening.
    pub kills_during_open: u64,
    /// Failures, each with the seed and cycle that found it (the loop stops at the first).
    pub failures: Vec<String>,
    /// Where the database was, when it was kept for inspection.
    pub kept_path: Option<PathBuf>,
}

/// The child's seed for one cycle.
pub fn cycle_seed(seed: u64, cycle: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(cycle.wrapping_mul(0xd1b5_4a32_d192_ed03))
}

/// Runs the loop.
pub fn run(config: &CrashConfig) -> CrashReport {
    let temporary = match &config.path {
        Some(_) => None,
        None => match tempfile::Builder::new().prefix("riptide-crash-").tempdir() {
            Ok(directory) => Some(directory),
            Err(error) => {
                return CrashReport {
                    failures: vec![format!("cannot create a temporary directory: {error}")],
                    ..CrashReport::default()
                }
            }
        },
    };
    let root = match (&config.path, &temporary) {
        (Some(path), _) => path.clone(),
        (None, Some(directory)) => directory.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory exists when no path was given"),
    };
    if let Err(error) = std::fs::create_dir_all(&root) {
        return CrashReport {
            failures: vec![format!("cannot create {}: {error}", root.display())],
            ..CrashReport::default()
        };
    }
    let database = root.join("db");
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let mut report = CrashReport::default();
    let mut base: Vec<Option<ValueId>> = vec![None; config.space.total_keys()];
    let started = Instant::now();
    let mut cycle = 0u64;
    loop {
        if config.cycles.is_some_and(|cycles| cycle >= cycles)
            || config.duration.is_some_and(|duration| started.elapsed() >= duration)
        {
            break;
        }
        cycle += 1;
        match run_cycle(config, &root, &database, cycle, &mut rng, &base, &mut report) {
            Ok(values) => {
                base = values;
                report.cycles += 1;
            }
            Err(message) => {
                report.failures.push(format!(
                    "seed {} cycle {cycle} (child seed {}): {message}",
                    config.seed,
                    cycle_seed(config.seed, cycle)
                ));
                break;
            }
        }
    }
    if !report.failures.is_empty() {
        if let Some(directory) = temporary {
            report.kept_path = Some(directory.keep());
        } else {
            report.kept_path = Some(root);
        }
    }
    report
}

/// One cycle: spawn, kill, replay the journal, verify. Returns what the database holds.
fn run_cycle(
    config: &CrashConfig,
    root: &Path,
    database: &Path,
    cycle: u64,
    rng: &mut SmallRng,
    base: &[Option<ValueId>],
    report: &mut CrashReport,
) -> Result<Vec<Option<ValueId>>, String> {
    let child_seed = cycle_seed(config.seed, cycle);
    let stderr_path = root.join("child-stderr.txt");
    let stderr =
        std::fs::File::create(&stderr_path).map_err(|error| format!("cannot create {stderr_path:?}: {error}"))?;
    let mut child = Command::new(&config.executable)
        .arg("run")
        .arg("--path")
        .arg(database)
        .args(["--seed", &child_seed.to_string(), "--cycle", &cycle.to_string()])
        .args(["--threads", &config.threads.to_string()])
        .args(["--plain-keys", &config.space.plain_keys.to_string(), "--groups", &config.space.groups.to_string()])
        .args(["--group-size", &config.space.group_size.to_string()])
        .args(["--column-families", &config.space.column_families.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .spawn()
        .map_err(|error| format!("cannot start the child: {error}"))?;
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let (sender, receiver) = std::sync::mpsc::channel::<Event>();
    let reader = std::thread::spawn(move || {
        let mut torn_lines = 0u32;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match parse_line(&line) {
                Some(event) => {
                    if sender.send(event).is_err() {
                        break;
                    }
                }
                // Only the last line can be cut short by the kill.
                None => torn_lines += 1,
            }
        }
        torn_lines
    });
    // Most kills land during the workload; some while the child is still recovering.
    let kill_during_open = rng.gen_range(0..10) == 0;
    let mut events = Vec::new();
    let mut exited_by_itself = None;
    if kill_during_open {
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..60)));
    } else {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match receiver.recv_timeout(Duration::from_millis(10)) {
                Ok(event) => {
                    let ready = event == Event::Ready;
                    events.push(event);
                    if ready {
                        break;
                    }
                }
                Err(_) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        exited_by_itself = Some(status);
                        break;
                    }
                    if Instant::now() >= deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err("the child did not open the database within 60 s".to_string());
                    }
                }
            }
        }
        let run_until = Instant::now() + Duration::from_millis(rng.gen_range(0..=config.max_run_ms));
        while exited_by_itself.is_none() && Instant::now() < run_until {
            while let Ok(event) = receiver.try_recv() {
                events.push(event);
            }
            if let Ok(Some(status)) = child.try_wait() {
                exited_by_itself = Some(status);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    if exited_by_itself.is_none() {
        // `Child::kill` sends SIGKILL on Unix.
        child.kill().map_err(|error| format!("SIGKILL failed: {error}"))?;
    }
    let status = child.wait().map_err(|error| format!("waiting for the child failed: {error}"))?;
    let torn_lines = reader.join().unwrap_or(0);
    events.extend(receiver.try_iter());
    // A killed child has no exit code; one with a code stopped by itself, which only a failure
    // (or a hang) makes it do.
    if exited_by_itself.is_some() || status.code().is_some() {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Err(format!("the child exited by itself ({status}) before the kill:\n{stderr}"));
    }
    if torn_lines > 1 {
        return Err(format!("{torn_lines} journal lines could not be parsed"));
    }
    if !events.contains(&Event::Ready) {
        report.kills_during_open += 1;
    }
    let state = ExpectedState::new(config.space, base);
    replay(&state, &events);
    let mut begun = std::collections::HashSet::new();
    for event in &events {
        match event {
            Event::Begin { tick, .. } => {
                begun.insert(*tick);
            }
            Event::End { begin, acknowledged, .. } => {
                begun.remove(begin);
                if *acknowledged {
                    report.acknowledged_writes += 1;
                }
            }
            _ => {}
        }
    }
    report.writes_in_flight_at_kill += begun.len() as u64;
    let db = open_with_retry(database, options_for_seed(rng.gen()), config.space)
        .map_err(|error| format!("reopen after SIGKILL failed: {error}"))?;
    let values = read_all(&db, config.space).map_err(|failure| format!("after SIGKILL: {failure}"))?;
    verify_values(&values, &state).map_err(|failure| format!("after SIGKILL: {failure}"))?;
    db.close().map_err(|error| format!("close after verification failed: {error}"))?;
    Ok(values)
}
