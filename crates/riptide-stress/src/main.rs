//! `riptide-stress`: the command-line face of the reliability harness.
//!
//! - `run`: the stress driver (also the crash parent's child); writes its journal to stdout.
//! - `crash`: the SIGKILL loop.
//! - `power-loss`, `io-errors`, `metamorphic`: the simulated harnesses with random seeds, for
//!   soaking.
//! - `isolation`: the isolation history checker, for a while under each level and mode.
//! - `seed-corpus`: writes the fuzz targets' generated seed inputs.
//!
//! Each soak command ends with one `LEDGER` line (see `riptide_stress::ledger_line`). Exit
//! codes: 0 success, 1 a harness found failures, 2 bad arguments or set-up, 3 the driver found
//! a failure, 4 the driver hung.
//!
//! Concurrency contract: one command per process; see the library for the harnesses' own.
//!
//! Invariants: every failure printed names the seed that replays it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use riptide_stress::crash::{self, CrashConfig};
use riptide_stress::driver::{self, DriverConfig};
use riptide_stress::journal::Journal;
use riptide_stress::model::KeySpace;
use riptide_stress::{io_errors, isolation, ledger_line, metamorphic, power_loss};

#[derive(Parser)]
#[command(name = "riptide-stress", about = "Riptide's reliability harness")]
struct Arguments {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the multi-threaded stress driver against one database directory.
    Run {
        #[arg(long)]
        path: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Generation number, part of every value id (the crash parent passes its cycle).
        #[arg(long, default_value_t = 1)]
        cycle: u64,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Milliseconds to run; 0 runs until killed.
        #[arg(long, default_value_t = 0)]
        duration_ms: u64,
        #[arg(long, default_value_t = KeySpace::default().plain_keys)]
        plain_keys: usize,
        #[arg(long, default_value_t = KeySpace::default().groups)]
        groups: usize,
        #[arg(long, default_value_t = KeySpace::default().group_size)]
        group_size: usize,
        /// Column families, the default one included (1 to 64).
        #[arg(long, default_value_t = KeySpace::default().column_families)]
        column_families: usize,
        /// Operation weights to override, as `name=weight,...` (put, delete, batch, group, get,
        /// scan, snapshot, drop-family, rename-family, flush, compact, reopen, delete-range,
        /// expiring-put, merge-put).
        #[arg(long, default_value = "")]
        weights: String,
        /// Where the journal goes: `stdout`, `none`, or a file path.
        #[arg(long, default_value = "stdout")]
        journal: String,
        /// Also journal every read (a history for an isolation checker).
        #[arg(long)]
        record_reads: bool,
        #[arg(long, default_value_t = 120)]
        hang_seconds: u64,
    },
    /// Kills the driver with SIGKILL at random moments, reopens and verifies, again and again.
    Crash {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        cycles: Option<u64>,
        #[arg(long)]
        minutes: Option<f64>,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, default_value_t = 400)]
        max_run_ms: u64,
        /// The directory to keep the database in (a temporary one otherwise).
        #[arg(long)]
        path: Option<PathBuf>,
    },
    /// Simulated power loss at every file-system call of the canonical workloads, with seeds
    /// from `seed` on, for `minutes` (or one round).
    PowerLoss {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        minutes: Option<f64>,
    },
    /// EIO and ENOSPC, once and persistent, at every file-system operation of the canonical
    /// workloads, then a restart or a power cut, with seeds from `seed` on, for `minutes` (or
    /// one round).
    IoErrors {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        minutes: Option<f64>,
    },
    /// The isolation history checker: list-append transactions under every isolation level
    /// and concurrency mode, with seeds from `seed` on, for `seconds` per level and mode (at
    /// least one run each).
    Isolation {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Writes the generated seed inputs of every fuzz target under `out/<target>/`.
    SeedCorpus {
        #[arg(long, default_value = "fuzz/corpus")]
        out: PathBuf,
    },
    /// Metamorphic runs with seeds from `seed` on, for `minutes` (or one seed).
    Metamorphic {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        minutes: Option<f64>,
        #[arg(long, default_value_t = 1500)]
        steps: usize,
    },
}

fn minutes(value: Option<f64>) -> Option<Duration> {
    value.map(|minutes| Duration::from_secs_f64(minutes.max(0.0) * 60.0))
}

fn main() -> ExitCode {
    match Arguments::parse().command {
        Command::Run {
            path,
            seed,
            cycle,
            threads,
            duration_ms,
            plain_keys,
            groups,
            group_size,
            column_families,
            weights,
            journal,
            record_reads,
            hang_seconds,
        } => {
            let sink: Option<Box<dyn std::io::Write + Send>> = match journal.as_str() {
                "stdout" => Some(Box::new(std::io::stdout())),
                "none" => None,
                file => match std::fs::File::create(file) {
                    Ok(file) => Some(Box::new(file)),
                    Err(error) => {
                        eprintln!("cannot create the journal {file}: {error}");
                        return ExitCode::from(2);
                    }
                },
            };
            let config = DriverConfig {
                path,
                seed,
                cycle,
                threads: threads.max(1),
                duration: (duration_ms > 0).then(|| Duration::from_millis(duration_ms)),
                until_every_operation_ran: false,
                space: KeySpace {
                    plain_keys,
                    groups,
                    group_size: group_size.max(1),
                    column_families: column_families.clamp(1, 64),
                },
                weights,
                hang_seconds,
            };
            match driver::run(&config, Journal::new(sink, record_reads)) {
                Ok(report) => {
                    let counts: Vec<String> =
                        report.operations.iter().map(|(name, count)| format!("{name}={count}")).collect();
                    eprintln!(
                        "run: seed {seed} cycle {cycle}: {} operations ({})",
                        report.total_operations(),
                        counts.join(" ")
                    );
                    match report.failure {
                        None => ExitCode::SUCCESS,
                        Some(failure) => {
                            eprintln!("FAIL seed {seed} cycle {cycle}: {failure}");
                            ExitCode::from(3)
                        }
                    }
                }
                Err(failure) => {
                    eprintln!("FAIL seed {seed} cycle {cycle}: {failure}");
                    ExitCode::from(3)
                }
            }
        }
        Command::Crash { seed, cycles, minutes: run_minutes, threads, max_run_ms, path } => {
            let executable = match std::env::current_exe() {
                Ok(executable) => executable,
                Err(error) => {
                    eprintln!("cannot find this executable: {error}");
                    return ExitCode::from(2);
                }
            };
            let config = CrashConfig {
                executable,
                seed,
                cycles: cycles.or(if run_minutes.is_none() { Some(100) } else { None }),
                duration: minutes(run_minutes),
                threads,
                max_run_ms,
                path,
                space: KeySpace::default(),
            };
            let report = crash::run(&config);
            println!(
                "crash: seed {seed}: {} cycles, {} acknowledged writes, {} writes in flight at a kill, {} kills during open, {} failures",
                report.cycles,
                report.acknowledged_writes,
                report.writes_in_flight_at_kill,
                report.kills_during_open,
                report.failures.len()
            );
            for failure in &report.failures {
                println!("FAIL {failure}");
            }
            if let Some(path) = &report.kept_path {
                println!("database kept at {}", path.display());
            }
            println!(
                "{}",
                ledger_line(
                    "crash-kill9",
                    &seed.to_string(),
                    &format!("{} cycles", report.cycles),
                    report.failures.len()
                )
            );
            exit_for(report.failures.len())
        }
        Command::PowerLoss { seed, minutes: run_minutes } => {
            sweep_summary("power-loss", "crash states", &power_loss::soak(seed, minutes(run_minutes)))
        }
        Command::IoErrors { seed, minutes: run_minutes } => {
            sweep_summary("io-errors", "fault cases", &io_errors::soak(seed, minutes(run_minutes)))
        }
        Command::Isolation { seed, seconds } => {
            let report = isolation::soak(seed, Duration::from_secs_f64(seconds.max(0.0)));
            for counts in &report.configurations {
                println!("isolation: {}", counts.summary());
            }
            println!(
                "isolation: seeds {}: {} transactions, {} failures",
                report.seeds,
                report.transactions(),
                report.failures.len()
            );
            for failure in &report.failures {
                println!("FAIL {failure}");
            }
            println!(
                "{}",
                ledger_line(
                    "isolation-histories",
                    &report.seeds,
                    &format!("{} transactions", report.transactions()),
                    report.failures.len()
                )
            );
            exit_for(report.failures.len())
        }
        Command::SeedCorpus { out } => {
            let seeds = riptide_stress::fuzz_bodies::seed_corpus();
            for (target, name, data) in &seeds {
                let directory = out.join(target);
                let file_name: String = name
                    .chars()
                    .map(
                        |character| if character.is_ascii_alphanumeric() || character == '-' { character } else { '_' },
                    )
                    .collect();
                if let Err(error) = std::fs::create_dir_all(&directory)
                    .and_then(|()| std::fs::write(directory.join(format!("seed-{file_name}")), data))
                {
                    eprintln!("cannot write a seed under {}: {error}", directory.display());
                    return ExitCode::from(2);
                }
            }
            println!("wrote {} seeds under {}", seeds.len(), out.display());
            ExitCode::SUCCESS
        }
        Command::Metamorphic { seed, minutes: run_minutes, steps } => {
            let report = metamorphic::soak(seed, minutes(run_minutes), steps);
            println!("metamorphic: seeds {}: {} runs, {} failures", report.seeds, report.runs, report.failures.len());
            for failure in &report.failures {
                println!("FAIL {failure}");
            }
            println!(
                "{}",
                ledger_line("metamorphic", &report.seeds, &format!("{} runs", report.runs), report.failures.len())
            );
            exit_for(report.failures.len())
        }
    }
}

/// Prints a sweep's summary, its failures and its ledger line; the exit code says whether it
/// failed.
fn sweep_summary(harness: &str, unit: &str, report: &power_loss::SweepReport) -> ExitCode {
    println!("{harness}: seeds {}: {} {unit}, {} failures", report.seeds, report.crash_states, report.failures.len());
    for failure in &report.failures {
        println!("FAIL {failure}");
    }
    println!(
        "{}",
        ledger_line(harness, &report.seeds, &format!("{} {unit}", report.crash_states), report.failures.len())
    );
    exit_for(report.failures.len())
}

fn exit_for(failures: usize) -> ExitCode {
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
