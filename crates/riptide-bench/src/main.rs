//! The `riptide-bench` command line: `run`, `suite`, `report`, `compare` and `durability`.
//!
//! Errors are printed with their context and the process exits with status 1 (2 for usage
//! errors, from clap); `compare` exits with status 3 when it finds regressions and
//! `--fail-on-regression` is given.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use riptide_bench::compare::compare_files;
use riptide_bench::durability::{run_durability, run_writer, DurabilityOptions, WriterOptions};
use riptide_bench::error::Result;
use riptide_bench::suite::{default_plot_script, run_suite, write_report, SuiteOptions};
use riptide_bench::workload::{format_rate, run_and_record, RunParameters};

#[cfg(all(feature = "mimalloc", feature = "jemalloc"))]
compile_error!("pick one allocator: the features mimalloc and jemalloc exclude each other");

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Riptide vs RocksDB vs TidesDB, side by side: workloads, suites, reports and comparisons.
#[derive(Parser)]
#[command(name = "riptide-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one workload on one engine and print (and optionally record) its metrics.
    Run(RunParameters),
    /// Run a suite (quick, standard, large, longrun) on every engine and write a report.
    Suite(SuiteOptions),
    /// Redraw the charts and rewrite report.md of a results directory.
    Report {
        /// The results directory (e.g. bench/results/latest).
        directory: PathBuf,
        /// The chart script (default: bench/plot.py of this source tree).
        #[arg(long = "plot-script")]
        plot_script: Option<PathBuf>,
        /// Skip the charts.
        #[arg(long = "no-plots")]
        no_plots: bool,
    },
    /// The kill -9 test of unsynced writes: write, SIGKILL the writer, reopen, count lost puts.
    Durability(DurabilityOptions),
    /// The writer child of `durability` (puts and prints acknowledgements until killed).
    #[command(hide = true)]
    DurabilityWriter(WriterOptions),
    /// Compare two results.csv files: per-test ratios of the second over the first.
    Compare {
        /// The baseline (before).
        before: PathBuf,
        /// The candidate (after).
        after: PathBuf,
        /// Relative throughput change that counts as a regression or an improvement.
        #[arg(long, default_value_t = 0.05)]
        threshold: f64,
        /// Exit with status 3 when a regression is found.
        #[arg(long = "fail-on-regression")]
        fail_on_regression: bool,
    },
}

fn print_run_summary(parameters: &RunParameters) -> Result<()> {
    let output = run_and_record(parameters)?;
    let result = &output.result;
    let latency = &result.latency;
    let capped = if result.capped { " (stopped by --max-seconds)" } else { "" };
    println!(
        "  {} {}: {} ops/s over {} ops in {:.2} s{capped}; {} latency µs p50 {:.2} p99 {:.2} p99.9 {:.2}; \
         write amp {}; space amp {}; peak RSS {:.0} MiB; CPU {:.0} %",
        result.test,
        result.engine,
        format_rate(result.ops_per_second),
        result.operations_done,
        result.duration_seconds,
        result.latency_unit,
        latency.p50_us,
        latency.p99_us,
        latency.p999_us,
        result.write_amplification().map_or_else(|| "-".to_string(), |value| format!("{value:.2}")),
        result.space_amplification().map_or_else(|| "-".to_string(), |value| format!("{value:.2}")),
        result.peak_rss_bytes as f64 / (1024.0 * 1024.0),
        result.resources.cpu_percent(),
    );
    if let (Some(puts), Some(gets)) = (result.put_ops_per_second, result.get_ops_per_second) {
        println!("    mixed: {} puts/s, {} gets/s (per second of time in each)", format_rate(puts), format_rate(gets));
    }
    if let Some(counts) = &result.transactions {
        println!(
            "    transactions ({}): {} committed txn/s; {} attempts, {} committed, {} aborted ({:.2} %): {} conflicts, \
             {} deadlocks, {} lock timeouts",
            parameters.transaction_mode.as_str(),
            format_rate(result.ops_per_second),
            counts.attempts,
            counts.committed,
            counts.aborts(),
            counts.abort_rate().unwrap_or(0.0) * 100.0,
            counts.conflicts,
            counts.deadlocks,
            counts.lock_timeouts,
        );
    }
    Ok(())
}

fn execute(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(parameters) => {
            print_run_summary(&parameters)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Suite(options) => {
            run_suite(&options)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { directory, plot_script, no_plots } => {
            let script = if no_plots { None } else { Some(plot_script.unwrap_or_else(default_plot_script)) };
            write_report(&directory, script.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Durability(options) => {
            run_durability(&options)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DurabilityWriter(options) => {
            run_writer(&options)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { before, after, threshold, fail_on_regression } => {
            let (text, regressions) = compare_files(&before, &after, threshold)?;
            print!("{text}");
            if fail_on_regression && regressions > 0 {
                Ok(ExitCode::from(3))
            } else {
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("riptide-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
