//! Suites: seed 004's benchmark cases, each run on every engine in a child process, then reports.
//!
//! `standard` reproduces seed 004's 8-thread suite case by case (writes, reads, mixed, deletes,
//! value sizes, batch sizes, seeks, range scans; seeks and scans each with a new iterator per
//! scan and with one iterator per thread re-seeked) plus synced random writes at 1, 4, 8 and 16
//! threads and read-modify-write transactions (pessimistic and optimistic, uniform and zipfian
//! keys over 100,000 populated keys); `large` runs the same cases at 16 threads with 4x the
//! operations; `quick` runs the standard cases with a tenth of the operations; `longrun` writes
//! uniformly drawn keys far beyond the memtable budget for a time budget (10 minutes per engine
//! by default), so that throughput over time, write stalls and write amplification of sustained
//! writing show.
//! Every (case, engine) pair runs in a fresh
//! child process of this binary (`riptide-bench run ...`) on a fresh directory, one after
//! another, so that peak RSS, CPU time and I/O counters belong to that run alone. The children
//! append their rows to `results.csv`; the suite then draws charts with `bench/plot.py` (when
//! Python and matplotlib are there) and writes `report.md` into `bench/results/<timestamp>/`,
//! pointing `bench/results/latest` at it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use clap::{Args, ValueEnum};

use crate::bail;
use crate::csv::{parse_records, read_rows, Row};
use crate::engine::{describe_settings, EngineKind, ScanIterator, TransactionMode};
use crate::error::{Context, Result};
use crate::keys::KeyPattern;
use crate::report::{suite_report, utc_timestamps, ReportContext};
use crate::system::{commit_description, load_average, rustc_version, BuildInfo, MachineInfo};
use crate::timeline::read_timelines_if_present;
use crate::workload::{operations_label, RunParameters, Workload};

/// The predefined suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SuiteName {
    /// The standard cases with a tenth of the operations (minutes on 2 cores).
    Quick,
    /// Seed 004's 8-thread suite, case by case.
    Standard,
    /// The standard cases at 16 threads with 4x the operations.
    Large,
    /// One long random-write run per engine, stopped by the time budget (10 minutes each).
    Longrun,
}

/// Keys the long run may write when `--operations` does not say: 200 million puts of 116 bytes
/// are 21.6 GiB of keys and values, more than this 2-core machine sustains in 10 minutes, so the
/// time budget, not the key count, ends the run and both engines write for equally long.
pub const LONGRUN_DEFAULT_OPERATIONS: u64 = 200_000_000;
/// Writer threads of the long run: one per core, so the engines' background work competes with
/// the writers as it would on a busy server of this size.
pub const LONGRUN_THREADS: usize = 2;
/// Puts per write batch of the long run.
pub const LONGRUN_BATCH_SIZE: usize = 100;
/// The memory budget of the capped twin of a write case (Riptide `max_memory_bytes`, RocksDB a
/// write buffer manager charging its cache): tight next to the 64 MiB memtable and 64 MiB cache
/// the uncapped runs may use. The report compares each capped run with its uncapped twin.
pub const TIGHT_CAP_BYTES: u64 = 128 << 20;

/// Transactions attempted by each transaction case of the standard suite: about 15 s of
/// Riptide on 2 cores at 8 threads; the quick suite's tenth keeps its four cases, on both
/// engines, within a minute.
pub const TRANSACTIONS_PER_CASE: u64 = 500_000;

/// `case` again under the tight memory budget (its name gets `_cap128M`).
fn capped_twin(case: &RunParameters) -> RunParameters {
    let mut twin = case.clone();
    twin.max_memory_bytes = TIGHT_CAP_BYTES;
    if let Some(name) = &case.test_name {
        twin.test_name = Some(format!("{name}{}", crate::workload::capped_suffix(TIGHT_CAP_BYTES)));
    }
    twin
}

/// `case` with key-value separation on for values of its value size and more (its name gets
/// `_blob<size>`); TidesDB, which has no such option, skips it.
fn blob_twin(case: &RunParameters) -> RunParameters {
    let mut twin = case.clone();
    twin.min_blob_size_bytes = case.value_size_bytes as u64;
    if let Some(name) = &case.test_name {
        twin.test_name = Some(format!("{name}_blob{}", case.value_size_bytes));
    }
    twin
}

/// `case` (a seek or scan with a new iterator per scan) with one iterator per thread re-seeked
/// instead (its name gets `_reseek`).
fn reseeked_twin(case: &RunParameters) -> RunParameters {
    let mut twin = case.clone();
    twin.scan_iterator = ScanIterator::Reseek;
    if let Some(name) = &case.test_name {
        twin.test_name = Some(format!("{name}_reseek"));
    }
    twin
}

impl SuiteName {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SuiteName::Quick => "quick",
            SuiteName::Standard => "standard",
            SuiteName::Large => "large",
            SuiteName::Longrun => "longrun",
        }
    }

    /// The default time limit of one measured phase, in seconds (0: none).
    pub fn default_max_seconds(self) -> f64 {
        match self {
            SuiteName::Quick => 60.0,
            SuiteName::Standard => 600.0,
            SuiteName::Large => 0.0,
            SuiteName::Longrun => 600.0,
        }
    }
}

/// Options of `riptide-bench suite`.
#[derive(Args, Clone, Debug)]
pub struct SuiteOptions {
    /// Which suite to run.
    #[arg(long, value_enum, default_value = "quick")]
    pub suite: SuiteName,
    /// Engines to run, comma-separated (default: every engine compiled in).
    #[arg(long, value_delimiter = ',')]
    pub engines: Vec<EngineKind>,
    /// Where result directories are created.
    #[arg(long = "results-dir", default_value = "bench/results")]
    pub results_dir: PathBuf,
    /// Directory under which each run creates (and deletes) its database directory.
    #[arg(short = 'd', long = "db-path")]
    pub db_path: Option<PathBuf>,
    /// Run only the tests whose name contains one of these strings (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Time limit of each measured phase in seconds (default: 60 quick, 600 standard and longrun,
    /// none large).
    #[arg(long = "max-seconds")]
    pub max_seconds: Option<f64>,
    /// Keys the longrun suite may write (default: 200000000, more than its time budget allows);
    /// the other suites have fixed counts.
    #[arg(long)]
    pub operations: Option<u64>,
    /// The chart script (default: bench/plot.py of this source tree).
    #[arg(long = "plot-script")]
    pub plot_script: Option<PathBuf>,
    /// Skip the charts.
    #[arg(long = "no-plots")]
    pub no_plots: bool,
    /// Seconds between progress lines of the runs (0: none).
    #[arg(long = "progress-seconds", default_value_t = 5.0)]
    pub progress_seconds: f64,
    /// Print the cases and exit without running them.
    #[arg(long = "list")]
    pub list: bool,
    /// Rounds of every test (each engine once per round, engines interleaved, the order rotated
    /// by one engine per round: see [`round_order`]); the report shows each engine's median run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub repeat: u32,
}

/// The long random-write run: `operations` puts of uniformly drawn keys (with replacement, so
/// later writes overwrite earlier ones and compactions drop them), 16-byte keys, 100-byte
/// values, batches of 100, 2 threads, the default 64 MiB memtables and block cache; then the
/// same under the tight memory budget ([`TIGHT_CAP_BYTES`]).
pub fn longrun_cases(operations: u64) -> Vec<RunParameters> {
    let uncapped = RunParameters {
        test_name: Some(format!(
            "longrun_write_uniform_{}_t{LONGRUN_THREADS}_b{LONGRUN_BATCH_SIZE}",
            operations_label(operations)
        )),
        workload: Workload::Write,
        pattern: KeyPattern::Uniform,
        operations,
        threads: LONGRUN_THREADS,
        batch_size: LONGRUN_BATCH_SIZE,
        ..RunParameters::default()
    };
    let capped = capped_twin(&uncapped);
    vec![uncapped, capped]
}

/// The cases `options` ask for: the suite's own, with the long run's key count overridden.
pub fn selected_cases(options: &SuiteOptions) -> Result<Vec<RunParameters>> {
    match (options.suite, options.operations) {
        (_, Some(0)) => bail!("--operations must be positive"),
        (SuiteName::Longrun, operations) => Ok(longrun_cases(operations.unwrap_or(LONGRUN_DEFAULT_OPERATIONS))),
        (suite, Some(_)) => bail!(
            "--operations applies to the longrun suite only; the {} suite's counts are fixed (quick, standard and \
             large scale them)",
            suite.as_str()
        ),
        (suite, None) => Ok(suite_cases(suite)),
    }
}

/// The cases of a suite (engine-independent: the engine field is set per run).
pub fn suite_cases(suite: SuiteName) -> Vec<RunParameters> {
    let (numerator, denominator, threads) = match suite {
        SuiteName::Quick => (1, 10, 8),
        SuiteName::Standard => (1, 1, 8),
        SuiteName::Large => (4, 1, 16),
        SuiteName::Longrun => return longrun_cases(LONGRUN_DEFAULT_OPERATIONS),
    };
    let scaled = |base: u64| base * numerator / denominator;
    let case =
        |name: String, workload: Workload, pattern: KeyPattern, operations: u64, batch_size: usize| RunParameters {
            test_name: Some(name),
            workload,
            pattern,
            operations,
            threads,
            batch_size,
            ..RunParameters::default()
        };
    let mut cases = Vec::new();
    let ten = scaled(10_000_000);
    let five = scaled(5_000_000);
    let label = |operations: u64| operations_label(operations);
    // Writes, reads and mixed (seed 004, sections 1 to 5).
    cases.push(case(format!("write_seq_{}_t{threads}_b1000", label(ten)), Workload::Write, KeyPattern::Seq, ten, 1000));
    let write_random =
        case(format!("write_random_{}_t{threads}_b1000", label(ten)), Workload::Write, KeyPattern::Random, ten, 1000);
    // The same writes under a tight memory budget: what the cap costs, and the memory it keeps.
    let write_random_capped = capped_twin(&write_random);
    cases.push(write_random);
    cases.push(write_random_capped);
    cases.push(case(format!("read_random_{}_t{threads}", label(ten)), Workload::Read, KeyPattern::Random, ten, 1));
    cases.push(case(
        format!("mixed_random_{}_t{threads}_b1000", label(five)),
        Workload::Mixed,
        KeyPattern::Random,
        five,
        1000,
    ));
    cases.push(case(
        format!("write_zipfian_{}_t{threads}_b1000", label(five)),
        Workload::Write,
        KeyPattern::Zipfian,
        five,
        1000,
    ));
    cases.push(case(
        format!("mixed_zipfian_{}_t{threads}_b1000", label(five)),
        Workload::Mixed,
        KeyPattern::Zipfian,
        five,
        1000,
    ));
    // Deletes (section 6).
    cases.push(case(
        format!("delete_random_{}_t{threads}_b1000", label(five)),
        Workload::Delete,
        KeyPattern::Random,
        five,
        1000,
    ));
    // Value sizes (sections 7 and 8).
    let large_values = scaled(1_000_000);
    let large_values_case = RunParameters {
        key_size_bytes: 256,
        value_size_bytes: 4096,
        ..case(
            format!("write_large_values_{}_k256_v4096_t{threads}_b1000", label(large_values)),
            Workload::Write,
            KeyPattern::Random,
            large_values,
            1000,
        )
    };
    // The same writes with key-value separation on at the value size: Riptide's blob files
    // against RocksDB's integrated BlobDB (`enable_blob_files`, the same `min_blob_size`).
    cases.push(blob_twin(&large_values_case));
    cases.insert(cases.len() - 1, large_values_case);
    let small_values = scaled(50_000_000);
    cases.push(RunParameters {
        value_size_bytes: 64,
        ..case(
            format!("write_small_values_{}_k16_v64_t{threads}_b1000", label(small_values)),
            Workload::Write,
            KeyPattern::Random,
            small_values,
            1000,
        )
    });
    // Batch sizes (section 9).
    for batch in [1usize, 10, 100, 1000, 10_000] {
        cases.push(case(
            format!("batch_{batch}_{}_t{threads}", label(ten)),
            Workload::Write,
            KeyPattern::Random,
            ten,
            batch,
        ));
    }
    // Delete batch sizes (section 10).
    for batch in [1usize, 100, 1000] {
        cases.push(case(
            format!("delete_batch_{batch}_{}_t{threads}", label(five)),
            Workload::Delete,
            KeyPattern::Random,
            five,
            batch,
        ));
    }
    // Seeks (section 11), each with a new iterator per seek and again with one iterator per
    // thread re-seeked (`_reseek`).
    for pattern in [KeyPattern::Random, KeyPattern::Seq, KeyPattern::Zipfian] {
        let fresh =
            case(format!("seek_{}_{}_t{threads}", pattern.as_str(), label(five)), Workload::Seek, pattern, five, 1);
        let reseeked = reseeked_twin(&fresh);
        cases.push(fresh);
        cases.push(reseeked);
    }
    // Range scans (section 12).
    for (pattern, range_size, base) in [
        (KeyPattern::Random, 100usize, 1_000_000u64),
        (KeyPattern::Random, 1000, 500_000),
        (KeyPattern::Seq, 100, 1_000_000),
    ] {
        let operations = scaled(base);
        let fresh = RunParameters {
            range_size,
            ..case(
                format!("range_{}_{range_size}_{}_t{threads}", pattern.as_str(), label(operations)),
                Workload::Range,
                pattern,
                operations,
                1,
            )
        };
        let reseeked = reseeked_twin(&fresh);
        cases.push(fresh);
        cases.push(reseeked);
    }
    // Read-modify-write transactions of 4 keys over the default 100,000 populated keys (the same
    // key space in every suite, so that contention does not change with the scale), each
    // concurrency mode under uniform and zipfian draws.
    let transactions = scaled(TRANSACTIONS_PER_CASE);
    for pattern in [KeyPattern::Uniform, KeyPattern::Zipfian] {
        for mode in [TransactionMode::Pessimistic, TransactionMode::Optimistic] {
            cases.push(RunParameters {
                transaction_mode: mode,
                ..case(
                    format!("transaction_{}_{}_{}_t{threads}", mode.as_str(), pattern.as_str(), label(transactions)),
                    Workload::Transaction,
                    pattern,
                    transactions,
                    1,
                )
            });
        }
    }
    // Synced random writes (one put per write, each synced) at 1, 4, 8 and 16 threads.
    let synced = scaled(200_000);
    for sync_threads in [1usize, 4, 8, 16] {
        cases.push(RunParameters {
            threads: sync_threads,
            sync: true,
            ..case(
                format!("sync_write_random_{}_t{sync_threads}_b1", label(synced)),
                Workload::Write,
                KeyPattern::Random,
                synced,
                1,
            )
        });
    }
    cases
}

/// Chart files the plot script writes, with their titles.
pub const CHARTS: [(&str, &str); 6] = [
    ("speedup.png", "Speedup, Riptide / RocksDB and Riptide / TidesDB"),
    ("throughput.png", "Throughput per test"),
    ("latency.png", "Latency percentiles"),
    ("amplification.png", "Write and space amplification"),
    ("resources.png", "Peak RSS and CPU"),
    ("throughput_over_time.png", "Throughput over time (longest write runs)"),
];

/// Runs a suite and writes its results directory; returns that directory.
pub fn run_suite(options: &SuiteOptions) -> Result<PathBuf> {
    let engines = if options.engines.is_empty() { EngineKind::available() } else { options.engines.clone() };
    for engine in &engines {
        if !engine.is_available() {
            bail!(
                "engine {} is not compiled into this binary; build with `--features {}` (make bench does)",
                engine.as_str(),
                engine.feature().unwrap_or("")
            );
        }
    }
    let max_seconds = options.max_seconds.unwrap_or_else(|| options.suite.default_max_seconds());
    let cases: Vec<RunParameters> = selected_cases(options)?
        .into_iter()
        .map(|case| RunParameters { max_seconds, progress_seconds: options.progress_seconds, ..case })
        .filter(|case| {
            let name = case.effective_test_name();
            options.filter.is_empty() || options.filter.iter().any(|part| name.contains(part.as_str()))
        })
        .collect();
    if options.list {
        for case in &cases {
            println!("{}  riptide-bench run {}", case.effective_test_name(), case.to_arguments().join(" "));
        }
        return Ok(options.results_dir.clone());
    }
    if cases.is_empty() {
        bail!("no test of the {} suite matches the filter {:?}", options.suite.as_str(), options.filter);
    }
    let started_at = SystemTime::now();
    let started = Instant::now();
    let (stamp, readable_start) = utc_timestamps(started_at);
    let directory = options.results_dir.join(&stamp);
    std::fs::create_dir_all(&directory).with_context(|| format!("creating {}", directory.display()))?;
    point_latest_at(&options.results_dir, &stamp)?;
    let db_path = options.db_path.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&db_path).with_context(|| format!("creating {}", db_path.display()))?;
    let executable = std::env::current_exe().context("finding this executable")?;
    let statistics_directory = directory.join("engine-stats");
    std::fs::create_dir_all(&statistics_directory)
        .with_context(|| format!("creating {}", statistics_directory.display()))?;
    let runs_case = |case: &RunParameters, engine: EngineKind| runs_case(case, engine);
    let rounds = options.repeat.max(1);
    let total_runs: usize =
        cases.iter().map(|case| engines.iter().filter(|&&engine| runs_case(case, engine)).count()).sum::<usize>()
            * rounds as usize;
    println!(
        "Suite {}: {} tests on {} engines, {rounds} round(s), {total_runs} runs; results in {}; databases under {}",
        options.suite.as_str(),
        cases.len(),
        engines.len(),
        directory.display(),
        db_path.display()
    );
    let mut failures: Vec<(String, String, String)> = Vec::new();
    let mut run_number = 0;
    // The load average before each run: above the CPU count, other processes competed with it.
    let load_at_start = load_average().unwrap_or(0.0);
    let mut load_highest = load_at_start;
    for (case, round) in cases.iter().flat_map(|case| (1..=rounds).map(move |round| (case, round))) {
        for engine in round_order(&engines, round).into_iter().filter(|&engine| runs_case(case, engine)) {
            run_number += 1;
            // Each round's engine statistics get their own file.
            let stats_name = if rounds > 1 {
                format!("{}-{}-{round}.txt", case.effective_test_name(), engine.as_str())
            } else {
                format!("{}-{}.txt", case.effective_test_name(), engine.as_str())
            };
            let parameters = RunParameters {
                engine,
                db_path: Some(db_path.clone()),
                csv: Some(directory.join("results.csv")),
                timeseries: Some(directory.join("timeseries.csv")),
                config_dump: Some(directory.join(format!("config-{}.txt", engine.as_str()))),
                stats_dump: Some(statistics_directory.join(stats_name)),
                ..case.clone()
            };
            let test = parameters.effective_test_name();
            // The previous run's files are deleted, but the kernel may still be writing back
            // their dirty pages (or another program's); a run starts with none pending.
            write_back_dirty_pages();
            load_highest = load_highest.max(load_average().unwrap_or(0.0));
            let round_label = if rounds > 1 { format!(", round {round}/{rounds}") } else { String::new() };
            println!(
                "[{run_number}/{total_runs}] {test} on {}{round_label} ({:.1} min elapsed)",
                engine.as_str(),
                started.elapsed().as_secs_f64() / 60.0
            );
            let status = Command::new(&executable)
                .arg("run")
                .args(parameters.to_arguments())
                .stdin(Stdio::null())
                .status()
                .with_context(|| format!("starting {}", executable.display()))?;
            if !status.success() {
                let reason = format!("the run exited with {status}");
                eprintln!("  FAILED: {reason}");
                failures.push((test, engine.as_str().to_string(), reason));
            }
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let metadata = [
        ("suite", options.suite.as_str().to_string()),
        ("started", readable_start),
        ("wall_seconds", format!("{wall_seconds:.1}")),
        ("commit", commit_description(Path::new("."))),
        ("db_path", db_path.display().to_string()),
        ("build", BuildInfo::current().describe()),
        ("load_at_start", format!("{load_at_start:.2}")),
        ("load_highest", format!("{:.2}", load_highest.max(load_average().unwrap_or(0.0)))),
        ("rustc", rustc_version().unwrap_or_else(|| "unknown".to_string())),
    ];
    let metadata_text: String = metadata.iter().map(|(key, value)| format!("{key}={value}\n")).collect();
    std::fs::write(directory.join("suite.txt"), metadata_text).context("writing suite.txt")?;
    let failure_text: String = std::iter::once("test,engine,reason\n".to_string())
        .chain(failures.iter().map(|(test, engine, reason)| {
            crate::csv::format_line([test.as_str(), engine.as_str(), reason.as_str()].into_iter()) + "\n"
        }))
        .collect();
    std::fs::write(directory.join("failures.csv"), failure_text).context("writing failures.csv")?;
    let plot_script =
        if options.no_plots { None } else { Some(options.plot_script.clone().unwrap_or_else(default_plot_script)) };
    write_report(&directory, plot_script.as_deref())?;
    point_latest_at(&options.results_dir, &stamp)?;
    if !failures.is_empty() {
        bail!("{} of {total_runs} runs failed (see {})", failures.len(), directory.join("report.md").display());
    }
    Ok(directory)
}

/// The engines in the order round `round` (from 1) runs them: the list rotated by one place per
/// round, so that over as many rounds as engines each engine runs once in every position.
///
/// Why it matters: a run's freed memory (the deleted files of the run before, whose page cache
/// goes back to the free lists) is cheap for the next run to write into, and on a virtual
/// machine that hands free memory back to its host (free page reporting, as on the machines this
/// suite was measured on), memory that has been handed back costs several times as much to write
/// into the first time: a `dd` of 2 GB into new page cache ran at 0.6 GB/s, right after another
/// file's deletion at 4.7 GB/s. In a fixed order the same engine would always follow the same
/// engine's deletion; rotating spreads that luck over all of them.
pub fn round_order(engines: &[EngineKind], round: u32) -> Vec<EngineKind> {
    let mut order = engines.to_vec();
    if !order.is_empty() {
        let places = (round.max(1) - 1) as usize % order.len();
        order.rotate_left(places);
    }
    order
}

/// Writes back every dirty page of the machine (`sync`), waiting until done; a failure only
/// costs the run its clean start, so it is reported and ignored.
fn write_back_dirty_pages() {
    match Command::new("sync").status() {
        Ok(status) if status.success() => {}
        Ok(status) => eprintln!("warning: sync exited with {status}"),
        Err(error) => eprintln!("warning: could not run sync: {error}"),
    }
}

/// False for a pair whose engine cannot run the case as asked, which the suite leaves out:
/// TidesDB has no pessimistic transactions (the report says so under the transaction table) and
/// no engine-wide memory budget in its binding, so it skips the `_cap128M` twins. (It runs the
/// `_blob` twins with its value separation threshold set to theirs.)
pub fn runs_case(case: &RunParameters, engine: EngineKind) -> bool {
    let transactions_map =
        case.workload != Workload::Transaction || engine.supports_transactions(case.transaction_mode);
    let budget_maps = case.max_memory_bytes == 0 || engine != EngineKind::Tidesdb;
    transactions_map && budget_maps
}

/// bench/plot.py of the source tree this binary was built from.
pub fn default_plot_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/plot.py")
}

/// Points `results_dir/latest` at `stamp` (a relative symbolic link).
fn point_latest_at(results_dir: &Path, stamp: &str) -> Result<()> {
    let link = results_dir.join("latest");
    if std::fs::symlink_metadata(&link).is_ok() {
        std::fs::remove_file(&link).with_context(|| format!("replacing {}", link.display()))?;
    }
    std::os::unix::fs::symlink(stamp, &link).with_context(|| format!("creating {}", link.display()))
}

/// Reads `key=value` lines.
fn read_metadata(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('=').map(|(key, value)| (key.to_string(), value.to_string())))
        .collect()
}

/// Draws the charts (when a script is given) and writes `report.md` of a results directory.
pub fn write_report(directory: &Path, plot_script: Option<&Path>) -> Result<PathBuf> {
    let results = directory.join("results.csv");
    let rows: Vec<Row> = if results.exists() { read_rows(&results)? } else { Vec::new() };
    let metadata = read_metadata(&directory.join("suite.txt"));
    let lookup = |key: &str| metadata.iter().find(|(name, _)| name == key).map(|(_, value)| value.clone());
    let chart_note = match plot_script {
        Some(script) if !rows.is_empty() => draw_charts(script, directory).err(),
        Some(_) => None,
        None => Some("Charts skipped (`--no-plots`).".to_string()),
    };
    let charts = CHARTS
        .iter()
        .filter(|(file, _)| directory.join(file).exists())
        .map(|(file, title)| (file.to_string(), title.to_string()))
        .collect();
    let mut engine_configurations = Vec::new();
    for engine in EngineKind::ALL {
        let dumped = std::fs::read_to_string(directory.join(format!("config-{}.txt", engine.as_str()))).ok();
        let ran = rows.iter().any(|row| row.text("engine") == engine.as_str());
        let text = match dumped {
            Some(text) => Some(text),
            None if ran => Some(describe_settings(engine, &RunParameters::default().engine_settings()?)),
            None => None,
        };
        if let Some(text) = text {
            engine_configurations.push((engine.as_str().to_string(), text));
        }
    }
    let failures = std::fs::read_to_string(directory.join("failures.csv"))
        .ok()
        .and_then(|text| parse_records(&text).ok())
        .map(|records| {
            records
                .into_iter()
                .skip(1)
                .filter(|record| record.len() == 3)
                .map(|record| (record[0].clone(), record[1].clone(), record[2].clone()))
                .collect()
        })
        .unwrap_or_default();
    let db_path = lookup("db_path").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let context = ReportContext {
        suite: lookup("suite").unwrap_or_else(|| "custom".to_string()),
        started: lookup("started").unwrap_or_else(|| "unknown".to_string()),
        wall_seconds: lookup("wall_seconds").and_then(|text| text.parse().ok()).unwrap_or(0.0),
        commit: lookup("commit").unwrap_or_else(|| "unknown".to_string()),
        machine: MachineInfo::collect(&db_path),
        build: lookup("build"),
        rustc: lookup("rustc"),
        engine_configurations,
        charts,
        chart_note,
        failures,
        load: lookup("load_at_start").zip(lookup("load_highest")),
        // Damaged samples cost the over-time table, not the whole report.
        timelines: read_timelines_if_present(&directory.join("timeseries.csv")).unwrap_or_else(|error| {
            eprintln!("warning: {error}; the report leaves out throughput over time");
            Vec::new()
        }),
    };
    let report = suite_report(&context, &rows);
    let path = directory.join("report.md");
    std::fs::write(&path, report).with_context(|| format!("writing {}", path.display()))?;
    println!("Report: {}", path.display());
    Ok(path)
}

/// Runs the chart script; on failure returns the note the report prints instead of charts.
fn draw_charts(script: &Path, directory: &Path) -> std::result::Result<(), String> {
    let rerun = format!(
        "then `python3 {} {}` and `riptide-bench report {}` redraw them",
        script.display(),
        directory.display(),
        directory.display()
    );
    if !script.exists() {
        return Err(format!("Charts not drawn: {} is missing.", script.display()));
    }
    let output = Command::new("python3").arg(script).arg(directory).output();
    match output {
        Err(error) => Err(format!(
            "Charts not drawn: python3 could not be started ({error}); install Python 3 and matplotlib, {rerun}."
        )),
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let reason = stderr.lines().last().unwrap_or("unknown error").to_string();
            eprintln!("{stderr}");
            Err(format!("Charts not drawn: {reason} (install with `python3 -m pip install matplotlib`, {rerun})."))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_suite_matches_seed_004() {
        let cases = suite_cases(SuiteName::Standard);
        let names: Vec<String> = cases.iter().map(RunParameters::effective_test_name).collect();
        for expected in [
            "write_seq_10M_t8_b1000",
            "write_random_10M_t8_b1000",
            "write_random_10M_t8_b1000_cap128M",
            "read_random_10M_t8",
            "mixed_random_5M_t8_b1000",
            "write_zipfian_5M_t8_b1000",
            "mixed_zipfian_5M_t8_b1000",
            "delete_random_5M_t8_b1000",
            "write_large_values_1M_k256_v4096_t8_b1000",
            "write_large_values_1M_k256_v4096_t8_b1000_blob4096",
            "write_small_values_50M_k16_v64_t8_b1000",
            "batch_1_10M_t8",
            "batch_10000_10M_t8",
            "delete_batch_1_5M_t8",
            "delete_batch_1000_5M_t8",
            "seek_random_5M_t8",
            "seek_seq_5M_t8",
            "seek_zipfian_5M_t8",
            "range_random_100_1M_t8",
            "range_random_1000_500K_t8",
            "range_seq_100_1M_t8",
            "seek_random_5M_t8_reseek",
            "range_random_100_1M_t8_reseek",
            "range_random_1000_500K_t8_reseek",
            "range_seq_100_1M_t8_reseek",
            "sync_write_random_200K_t1_b1",
            "sync_write_random_200K_t16_b1",
            "transaction_pessimistic_uniform_500K_t8",
            "transaction_optimistic_uniform_500K_t8",
            "transaction_pessimistic_zipfian_500K_t8",
            "transaction_optimistic_zipfian_500K_t8",
        ] {
            assert!(names.iter().any(|name| name == expected), "missing {expected}");
        }
        assert_eq!(cases.len(), 39);
        for case in cases.iter().filter(|case| matches!(case.workload, Workload::Seek | Workload::Range)) {
            let reseeks = case.effective_test_name().ends_with("_reseek");
            assert_eq!(case.scan_iterator == ScanIterator::Reseek, reseeks);
        }
        let transactions: Vec<&RunParameters> =
            cases.iter().filter(|case| case.workload == Workload::Transaction).collect();
        assert_eq!(transactions.len(), 4);
        for case in transactions {
            assert_eq!(case.transaction_key_count, crate::transaction::DEFAULT_TRANSACTION_KEY_COUNT);
            assert_eq!(case.threads, 8);
            assert!(case.validate().is_ok());
            let settings = case.engine_settings().unwrap();
            assert_eq!(settings.transactions, Some(case.transaction_mode));
            assert!(case.effective_test_name().contains(case.transaction_mode.as_str()));
        }
        let capped = cases.iter().find(|case| case.max_memory_bytes > 0).unwrap();
        assert_eq!(capped.max_memory_bytes, TIGHT_CAP_BYTES);
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "test names must be unique");
        let large_values = cases.iter().find(|case| case.key_size_bytes == 256).unwrap();
        assert_eq!(large_values.value_size_bytes, 4096);
        let range = cases.iter().find(|case| case.effective_test_name() == "range_random_1000_500K_t8").unwrap();
        assert_eq!((range.range_size, range.operations), (1000, 500_000));
        assert!(cases.iter().filter(|case| case.sync).all(|case| case.batch_size == 1));
    }

    #[test]
    fn each_round_starts_with_the_next_engine() {
        let engines = [EngineKind::Riptide, EngineKind::Rocksdb, EngineKind::Tidesdb];
        assert_eq!(round_order(&engines, 1), engines.to_vec());
        assert_eq!(round_order(&engines, 2), vec![EngineKind::Rocksdb, EngineKind::Tidesdb, EngineKind::Riptide]);
        assert_eq!(round_order(&engines, 3), vec![EngineKind::Tidesdb, EngineKind::Riptide, EngineKind::Rocksdb]);
        assert_eq!(round_order(&engines, 4), engines.to_vec());
        // Over three rounds every engine holds every position once.
        for position in 0..engines.len() {
            let mut seen: Vec<EngineKind> = (1..=3).map(|round| round_order(&engines, round)[position]).collect();
            seen.sort_by_key(|engine| engine.as_str());
            seen.dedup();
            assert_eq!(seen.len(), engines.len());
        }
        assert_eq!(round_order(&[EngineKind::Riptide], 5), vec![EngineKind::Riptide]);
        assert!(round_order(&[], 2).is_empty());
    }

    #[test]
    fn tidesdb_skips_the_cases_it_cannot_run_as_asked() {
        let cases = suite_cases(SuiteName::Quick);
        let skipped: Vec<String> = cases
            .iter()
            .filter(|case| !runs_case(case, EngineKind::Tidesdb))
            .map(RunParameters::effective_test_name)
            .collect();
        assert_eq!(
            skipped,
            vec![
                "write_random_1M_t8_b1000_cap128M",
                "transaction_pessimistic_uniform_50K_t8",
                "transaction_pessimistic_zipfian_50K_t8"
            ]
        );
        assert!(cases.iter().all(|case| runs_case(case, EngineKind::Riptide) && runs_case(case, EngineKind::Rocksdb)));
    }

    #[test]
    fn quick_is_a_tenth_and_large_is_four_times_at_16_threads() {
        let standard = suite_cases(SuiteName::Standard);
        let quick = suite_cases(SuiteName::Quick);
        let large = suite_cases(SuiteName::Large);
        assert_eq!(quick.len(), standard.len());
        assert_eq!(large.len(), standard.len());
        for ((standard, quick), large) in standard.iter().zip(&quick).zip(&large) {
            assert_eq!(quick.operations * 10, standard.operations);
            assert_eq!(large.operations, standard.operations * 4);
            assert_eq!(quick.threads, standard.threads);
            if !standard.sync {
                assert_eq!(large.threads, 16);
            }
            assert_eq!(
                (quick.workload, quick.pattern, quick.batch_size),
                (standard.workload, standard.pattern, standard.batch_size)
            );
            // Transactions scale their attempts, never their key space (contention stays put).
            assert_eq!(
                (quick.transaction_mode, quick.transaction_key_count, large.transaction_key_count),
                (standard.transaction_mode, standard.transaction_key_count, standard.transaction_key_count)
            );
        }
        assert!(quick.iter().any(|case| case.effective_test_name() == "write_seq_1M_t8_b1000"));
        assert!(large.iter().any(|case| case.effective_test_name() == "write_seq_40M_t16_b1000"));
        assert!(quick.iter().any(|case| case.effective_test_name() == "transaction_optimistic_zipfian_50K_t8"));
    }

    fn longrun_options(operations: Option<u64>) -> SuiteOptions {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            options: SuiteOptions,
        }
        let mut arguments = vec!["suite".to_string(), "--suite".to_string(), "longrun".to_string()];
        if let Some(operations) = operations {
            arguments.extend(["--operations".to_string(), operations.to_string()]);
        }
        Wrapper::try_parse_from(arguments).unwrap().options
    }

    #[test]
    fn longrun_writes_uniform_keys_for_ten_minutes() {
        let cases = selected_cases(&longrun_options(None)).unwrap();
        assert_eq!(cases.len(), 2, "the long run and its capped twin");
        assert_eq!(cases[1].effective_test_name(), "longrun_write_uniform_200M_t2_b100_cap128M");
        assert_eq!((cases[1].max_memory_bytes, cases[0].max_memory_bytes), (TIGHT_CAP_BYTES, 0));
        let case = &cases[0];
        assert_eq!(case.effective_test_name(), "longrun_write_uniform_200M_t2_b100");
        assert_eq!((case.workload, case.pattern), (Workload::Write, KeyPattern::Uniform));
        assert_eq!((case.threads, case.batch_size), (2, 100));
        assert_eq!((case.key_size_bytes, case.value_size_bytes), (16, 100));
        assert_eq!((case.memtable_size_bytes, case.block_cache_size_bytes), (64 << 20, 64 << 20));
        assert!(!case.sync);
        assert_eq!(SuiteName::Longrun.default_max_seconds(), 600.0);
        // Several GiB of keys and values even at a modest sustained rate.
        assert!(case.operations * 116 > 16 << 30);
        assert_eq!(suite_cases(SuiteName::Longrun), cases);
    }

    #[test]
    fn longrun_key_count_is_overridable_and_only_there() {
        let cases = selected_cases(&longrun_options(Some(5_000_000))).unwrap();
        assert_eq!(cases[0].operations, 5_000_000);
        assert_eq!(cases[0].effective_test_name(), "longrun_write_uniform_5M_t2_b100");
        assert!(selected_cases(&longrun_options(Some(0))).is_err());
        let quick = SuiteOptions { suite: SuiteName::Quick, ..longrun_options(Some(1000)) };
        let error = selected_cases(&quick).unwrap_err().to_string();
        assert!(error.contains("longrun suite only"), "{error}");
        let quick = SuiteOptions { operations: None, ..quick };
        assert_eq!(selected_cases(&quick).unwrap(), suite_cases(SuiteName::Quick));
    }

    #[test]
    fn case_arguments_parse_back() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            parameters: RunParameters,
        }
        for case in suite_cases(SuiteName::Quick).into_iter().chain(suite_cases(SuiteName::Longrun)) {
            let arguments = case.to_arguments();
            let parsed = Wrapper::try_parse_from(std::iter::once("run".to_string()).chain(arguments)).unwrap();
            let expected = RunParameters { test_name: Some(case.effective_test_name()), ..case.clone() };
            assert_eq!(parsed.parameters, expected);
        }
    }
}
