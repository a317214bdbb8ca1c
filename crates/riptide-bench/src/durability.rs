//! The kill -9 test of unsynced writes: what an engine's acknowledged writes survive.
//!
//! `riptide-bench durability -e ENGINE` runs `--cycles` cycles. Each starts a child process of
//! this binary (`durability-writer`) on a fresh directory that puts keys 0, 1, 2, ... one write
//! each, WAL on and not synced per write (the benchmark's setting), and prints each key number
//! on stdout, flushed, once the engine acknowledged its put. After a random time the parent
//! kills the child with SIGKILL (no destructor, no close, no flush of user-space buffers runs),
//! reads every acknowledgement the child printed, reopens the database itself and checks that
//! every acknowledged key is there with its value. A process crash leaves the kernel's page
//! cache intact, so an engine that hands each write to the operating system before
//! acknowledging it loses nothing; one that keeps acknowledged writes in a user-space buffer
//! that a background thread writes later loses the writes still in that buffer.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use crate::bail;
use crate::engine::{with_engine, Engine, EngineKind, EngineSettings, EngineUser, Session};
use crate::error::{BenchError, Context, Result};
use crate::keys::{encode_key, mix64, ValuePool};
use crate::workload::DEFAULT_SEED;

/// Key size of the test's keys.
const KEY_BYTES: usize = 16;
/// Value size of the test's values (the benchmark's).
const VALUE_BYTES: usize = 100;

/// Options of `riptide-bench durability`.
#[derive(Args, Clone, Debug)]
pub struct DurabilityOptions {
    /// Engine to test.
    #[arg(short = 'e', long, value_enum)]
    pub engine: EngineKind,
    /// Kill-and-reopen cycles.
    #[arg(long, default_value_t = 20)]
    pub cycles: u32,
    /// Writer threads (thread `t` of `n` puts keys `t`, `t + n`, `t + 2n`, ...), so that writes
    /// of several threads meet in the engine's log as they do in the benchmark.
    #[arg(short = 't', long, default_value_t = 2)]
    pub threads: usize,
    /// Shortest time the writer writes before it is killed, in milliseconds.
    #[arg(long = "min-millis", default_value_t = 200)]
    pub min_millis: u64,
    /// Longest time the writer writes before it is killed, in milliseconds.
    #[arg(long = "max-millis", default_value_t = 1500)]
    pub max_millis: u64,
    /// Directory under which each cycle's database directory is created (default: the temp dir).
    #[arg(short = 'd', long = "db-path")]
    pub db_path: Option<PathBuf>,
}

/// Options of the hidden `durability-writer` child.
#[derive(Args, Clone, Debug)]
pub struct WriterOptions {
    /// Engine to write to.
    #[arg(short = 'e', long, value_enum)]
    pub engine: EngineKind,
    /// The database directory.
    #[arg(long)]
    pub directory: PathBuf,
    /// Writer threads.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
}

/// What one cycle found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleOutcome {
    /// Puts the writer acknowledged before it was killed.
    pub acknowledged: u64,
    /// Acknowledged keys missing (or with a wrong value) after reopening.
    pub lost: u64,
}

/// The engine settings of the test: the benchmark's defaults, WAL on without a sync per write.
fn settings() -> EngineSettings {
    EngineSettings { sync: false, ..EngineSettings::default() }
}

/// The values the writer puts (`value_for_key` of each key number), the benchmark's kind.
fn pool() -> Result<ValuePool> {
    ValuePool::new(VALUE_BYTES, 0.5, DEFAULT_SEED)
}

/// Puts keys from `threads` threads (thread `t` keys `t`, `t + threads`, ...) and prints each
/// key number once its put is acknowledged.
struct Writer {
    threads: usize,
}

impl EngineUser for Writer {
    type Output = ();

    fn run<E: Engine>(self, engine: E) -> Result<()> {
        let pool = pool()?;
        let threads = self.threads as u64;
        let outcomes: Vec<Result<()>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let (engine, pool) = (&engine, &pool);
                    scope.spawn(move || -> Result<()> {
                        let mut session = engine.session()?;
                        let mut key = vec![0u8; KEY_BYTES];
                        let stdout = std::io::stdout();
                        for step in 0u64.. {
                            let number = step * threads + thread;
                            encode_key(number, &mut key);
                            session.put(&key, pool.value_for_key(number, VALUE_BYTES))?;
                            // The acknowledgement leaves this process before the thread's next
                            // write begins (one line per write call, so lines never interleave).
                            let mut out = stdout.lock();
                            writeln!(out, "{number}").context("printing an acknowledgement")?;
                            out.flush().context("printing an acknowledgement")?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap_or_else(|_| Err(BenchError::new("a writer thread panicked"))))
                .collect()
        });
        outcomes.into_iter().collect()
    }
}

/// The child: writes until it is killed.
pub fn run_writer(options: &WriterOptions) -> Result<()> {
    if options.threads == 0 {
        bail!("--threads must be positive");
    }
    with_engine(options.engine, &options.directory, &settings(), Writer { threads: options.threads })
}

/// Reopens the database and counts the acknowledged keys that are missing or wrong: every key
/// of thread `t` up to the last one it acknowledged (`last_acknowledged[t]`, `None` when it
/// acknowledged none).
struct AcknowledgedCheck {
    last_acknowledged: Vec<Option<u64>>,
}

impl EngineUser for AcknowledgedCheck {
    type Output = u64;

    fn run<E: Engine>(self, engine: E) -> Result<u64> {
        let pool = pool()?;
        let mut lost = 0;
        {
            let mut session = engine.session()?;
            let mut key = vec![0u8; KEY_BYTES];
            let mut value = Vec::new();
            let threads = self.last_acknowledged.len() as u64;
            for (thread, last) in self.last_acknowledged.iter().enumerate() {
                let Some(last) = *last else {
                    continue;
                };
                for number in (thread as u64..=last).step_by(threads as usize) {
                    encode_key(number, &mut key);
                    let found = session.get(&key, &mut value)?;
                    if !found || value.as_slice() != pool.value_for_key(number, VALUE_BYTES) {
                        lost += 1;
                    }
                }
            }
        }
        engine.close()?;
        Ok(lost)
    }
}

/// One cycle on a fresh `directory`: write from `threads` threads in a child, kill it after
/// `millis`, reopen, check.
pub fn run_cycle(engine: EngineKind, directory: &Path, threads: usize, millis: u64) -> Result<CycleOutcome> {
    let executable = std::env::current_exe().context("finding this executable")?;
    let mut child = Command::new(&executable)
        .arg("durability-writer")
        .arg("--engine")
        .arg(engine.as_str())
        .arg("--directory")
        .arg(directory)
        .arg("--threads")
        .arg(threads.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", executable.display()))?;
    let stdout = child.stdout.take().ok_or_else(|| BenchError::new("the writer has no stdout"))?;
    // A thread reads the acknowledgements while the writer runs, so the pipe never fills.
    let reader = std::thread::spawn(move || -> (u64, Vec<Option<u64>>) {
        let mut acknowledged = 0;
        let mut last = vec![None; threads];
        for line in BufReader::new(stdout).lines() {
            let Some(number) = line.ok().and_then(|line| line.trim().parse::<u64>().ok()) else {
                break;
            };
            acknowledged += 1;
            let slot = &mut last[(number % threads as u64) as usize];
            *slot = Some(slot.map_or(number, |previous: u64| previous.max(number)));
        }
        (acknowledged, last)
    });
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(millis));
    if let Ok(Some(status)) = child.try_wait() {
        bail!("the writer ended by itself after {:.1} s with {status}", started.elapsed().as_secs_f64());
    }
    // `Child::kill` sends SIGKILL on Unix: the writer gets no chance to flush or close.
    child.kill().context("killing the writer")?;
    child.wait().context("waiting for the killed writer")?;
    let (acknowledged, last_acknowledged) =
        reader.join().map_err(|_| BenchError::new("the acknowledgement reader panicked"))?;
    if acknowledged == 0 {
        bail!("the writer acknowledged no write in {millis} ms; give it longer (--min-millis)");
    }
    let lost = with_engine(engine, directory, &settings(), AcknowledgedCheck { last_acknowledged })?;
    Ok(CycleOutcome { acknowledged, lost })
}

/// Runs the whole test and prints a line per cycle and a summary; returns every cycle's outcome.
pub fn run_durability(options: &DurabilityOptions) -> Result<Vec<CycleOutcome>> {
    if !options.engine.is_available() {
        bail!(
            "engine {} is not compiled into this binary (build with `--features {}`)",
            options.engine.as_str(),
            options.engine.feature().unwrap_or("")
        );
    }
    if options.cycles == 0 || options.threads == 0 || options.min_millis == 0 || options.max_millis < options.min_millis
    {
        bail!("--cycles, --threads and --min-millis must be positive and --max-millis at least --min-millis");
    }
    let base = options.db_path.clone().unwrap_or_else(std::env::temp_dir);
    let mut outcomes = Vec::new();
    let spread = options.max_millis - options.min_millis + 1;
    for cycle in 0..options.cycles {
        let directory = base.join(format!("durability-{}-{}-{cycle}", options.engine.as_str(), std::process::id()));
        if directory.exists() {
            std::fs::remove_dir_all(&directory).with_context(|| format!("clearing {}", directory.display()))?;
        }
        std::fs::create_dir_all(&directory).with_context(|| format!("creating {}", directory.display()))?;
        let millis = options.min_millis + mix64(u64::from(cycle) ^ std::process::id() as u64) % spread;
        let outcome = run_cycle(options.engine, &directory, options.threads, millis);
        if let Err(error) = std::fs::remove_dir_all(&directory) {
            eprintln!("warning: could not delete {}: {error}", directory.display());
        }
        let outcome = outcome?;
        println!(
            "{} cycle {}: killed after {millis} ms, {} puts acknowledged, {} lost",
            options.engine.as_str(),
            cycle + 1,
            outcome.acknowledged,
            outcome.lost
        );
        outcomes.push(outcome);
    }
    let acknowledged: u64 = outcomes.iter().map(|outcome| outcome.acknowledged).sum();
    let lost: u64 = outcomes.iter().map(|outcome| outcome.lost).sum();
    let cycles_with_loss = outcomes.iter().filter(|outcome| outcome.lost > 0).count();
    println!(
        "{}: {} cycles of {} writer threads, {acknowledged} acknowledged unsynced puts, {lost} lost after kill -9 \
         ({cycles_with_loss} cycles lost some)",
        options.engine.as_str(),
        outcomes.len(),
        options.threads
    );
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let options = DurabilityOptions {
            engine: EngineKind::Riptide,
            cycles: 0,
            threads: 2,
            min_millis: 200,
            max_millis: 1500,
            db_path: None,
        };
        assert!(run_durability(&options).is_err());
        let reversed = DurabilityOptions { cycles: 1, min_millis: 500, max_millis: 100, ..options };
        assert!(run_durability(&reversed).is_err());
    }
}
