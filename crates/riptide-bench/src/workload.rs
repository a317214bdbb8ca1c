//! One run: a workload on one engine, measured, in this process.
//!
//! A run opens the engine on a fresh directory, populates it first when the workload reads,
//! deletes or runs transactions (batched, timed separately, not part of the measurement), waits
//! for background work, then measures its own phase with every thread on a disjoint share of the
//! operation indexes.
//! After the phase it settles the engine (flushes memtables and waits for flushes and
//! compactions, the same for every engine) and closes it; CPU time and disk bytes cover the
//! phase plus that settling, so deferred work is charged to the run that caused it, while
//! ops/s and latencies cover the phase only. Peak RSS is reset after populating, so it is the
//! peak of the measured part. The database size is taken after close, then the directory is
//! deleted; live logical bytes are counted by replaying the key streams into a bitmap, after
//! every measurement, so the bitmap does not inflate the peak RSS.
//!
//! The transaction workload ([`crate::transaction`]) populates its own key space
//! (`--transaction-keys`, every key once, values starting with a zero counter) and measures
//! `--operations` transaction attempts; its operations done, ops/s and latencies are those of
//! committed transactions, and the run's [`TransactionCounts`] say how every attempt ended.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;

use crate::bail;
use crate::engine::{
    with_engine, Engine, EngineKind, EngineSettings, EngineUser, ScanCapture, ScanIterator, ScanOutcome, Scanner,
    Session, TransactionMode, WriteStalls,
};
use crate::error::{BenchError, Context, Result};
use crate::keys::{check_key_size, encode_key, KeyCursor, KeyPattern, KeySpace, SplitMix64, ValuePool};
use crate::metrics::{
    directory_size_bytes, merge_histogram, new_histogram, peak_rss_bytes, ratio, reset_peak_rss, LatencySummary,
    ProcessSnapshot, ResourceUse,
};
use crate::transaction::{
    TransactionCounts, TransactionOutcome, TransactionWorker, COUNTER_BYTES, DEFAULT_TRANSACTION_KEY_COUNT,
    KEYS_PER_TRANSACTION,
};
use crate::verify::{Checker, PopulatedKeys, Verdicts, FULL_CHECK_INTERVAL};

/// What the measured phase does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Puts (in batches of `--batch-size`).
    Write,
    /// Point gets of populated keys.
    Read,
    /// Half puts, half gets of keys the thread already wrote, alternating batch by batch.
    Mixed,
    /// Deletes of populated keys (in batches).
    Delete,
    /// A `seek` and one entry read, per operation (`--scan-iterator`: a new iterator per seek,
    /// or one per thread re-seeked).
    Seek,
    /// A `seek` and `--range-size` entries read, per operation (`--scan-iterator` as for seeks).
    Range,
    /// Read-modify-write transactions over a populated key space (`--transaction-keys`): each
    /// reads 4 keys and writes them back incremented (`--transaction-mode`); aborts are counted,
    /// not retried.
    Transaction,
}

impl Workload {
    /// The name used on the command line and in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Write => "write",
            Workload::Read => "read",
            Workload::Mixed => "mixed",
            Workload::Delete => "delete",
            Workload::Seek => "seek",
            Workload::Range => "range",
            Workload::Transaction => "transaction",
        }
    }

    /// True when the database is populated before the measured phase.
    pub fn populates(self) -> bool {
        matches!(self, Workload::Read | Workload::Delete | Workload::Seek | Workload::Range | Workload::Transaction)
    }
}

/// Batch size of the populate phase (not measured).
pub const POPULATE_BATCH_SIZE: usize = 1000;
/// Seed of the key streams; fixed so that every engine sees the same keys.
pub const DEFAULT_SEED: u64 = 0x7269_7074_6964_6521;

/// The parameters of one run (the options of `riptide-bench run`).
#[derive(Args, Clone, Debug, PartialEq)]
pub struct RunParameters {
    /// Engine to run.
    #[arg(short = 'e', long, value_enum, default_value = "riptide")]
    pub engine: EngineKind,
    /// Operations in the measured phase (for range: scans; for transaction: transactions
    /// attempted; otherwise also the number of populated keys).
    #[arg(short = 'o', long, default_value_t = 100_000)]
    pub operations: u64,
    /// Key size in bytes (fixed-width hexadecimal key numbers).
    #[arg(short = 'k', long = "key-size", default_value_t = 16)]
    pub key_size_bytes: usize,
    /// Value size in bytes.
    #[arg(short = 'v', long = "value-size", default_value_t = 100)]
    pub value_size_bytes: usize,
    /// Worker threads.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Operations per write batch (1: single puts or deletes).
    #[arg(short = 'b', long = "batch-size", default_value_t = 1)]
    pub batch_size: usize,
    /// Directory under which a fresh database directory is created (default: the temp dir).
    #[arg(short = 'd', long = "db-path")]
    pub db_path: Option<PathBuf>,
    /// Key pattern.
    #[arg(short = 'p', long, value_enum, default_value = "random")]
    pub pattern: KeyPattern,
    /// Workload of the measured phase.
    #[arg(short = 'w', long, value_enum, default_value = "write")]
    pub workload: Workload,
    /// Entries read per range scan.
    #[arg(long = "range-size", default_value_t = 100)]
    pub range_size: usize,
    /// Seeks and range scans: a new iterator per scan (fresh, what a SQL engine does per query)
    /// or one iterator per thread re-seeked for every scan (reseek).
    #[arg(long = "scan-iterator", value_enum, default_value = "fresh")]
    pub scan_iterator: ScanIterator,
    /// Transaction workload: locks (pessimistic: `get_for_update`, RocksDB's `TransactionDB`) or
    /// validation at commit (optimistic: `get`, RocksDB's `OptimisticTransactionDB`).
    #[arg(long = "transaction-mode", value_enum, default_value = "pessimistic")]
    pub transaction_mode: TransactionMode,
    /// Transaction workload: keys of the key space, all populated first (the pattern, uniform
    /// or zipfian, draws from them).
    #[arg(long = "transaction-keys", default_value_t = DEFAULT_TRANSACTION_KEY_COUNT)]
    pub transaction_key_count: u64,
    /// Sync the WAL on every write (durable writes).
    #[arg(long)]
    pub sync: bool,
    /// Memtable (write buffer) size, e.g. 64M.
    #[arg(long = "memtable-size", value_parser = parse_size_bytes, default_value = "64M")]
    pub memtable_size_bytes: u64,
    /// Block cache size, e.g. 64M.
    #[arg(long = "block-cache-size", value_parser = parse_size_bytes, default_value = "64M")]
    pub block_cache_size_bytes: u64,
    /// A memory budget for the whole engine, e.g. 128M (0: none, each engine's default). Riptide:
    /// `max_memory_bytes`; RocksDB: a write buffer manager charging memtables to a block cache
    /// of this size (see `rocksdb_settings_text`).
    #[arg(long = "max-memory", value_parser = parse_size_bytes, default_value = "0")]
    pub max_memory_bytes: u64,
    /// Key-value separation: values of at least this many bytes go to blob files, e.g. 4K (0:
    /// off, the default). Riptide: `min_blob_size_bytes`; RocksDB: `enable_blob_files` with
    /// `min_blob_size` (its integrated BlobDB); TidesDB: `value_separation_threshold` (its
    /// value log, which at 0 stays at TidesDB's default of 1 KiB).
    #[arg(long = "min-blob-size", value_parser = parse_size_bytes, default_value = "0")]
    pub min_blob_size_bytes: u64,
    /// Turn bloom filters off (on by default, 10 bits per key).
    #[arg(long = "no-bloom")]
    pub no_bloom: bool,
    /// Fraction of each value's bytes that is random (0.5 compresses to about half).
    #[arg(long = "value-compressibility", default_value_t = 0.5)]
    pub value_compressibility: f64,
    /// Stop the measured phase after this many seconds (0: never); the row says when it did.
    #[arg(long = "max-seconds", default_value_t = 0.0)]
    pub max_seconds: f64,
    /// Seed of the key streams.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Test name for the CSV row (default: derived from the parameters).
    #[arg(long = "test-name")]
    pub test_name: Option<String>,
    /// Append the result row to this CSV file (header written when the file is new).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write a Markdown report of this run to this file.
    #[arg(short = 'r', long)]
    pub report: Option<PathBuf>,
    /// Append throughput-over-time samples (one per second) to this CSV file.
    #[arg(long)]
    pub timeseries: Option<PathBuf>,
    /// Write the engine's full configuration to this file.
    #[arg(long = "config-dump")]
    pub config_dump: Option<PathBuf>,
    /// Write the engine's own statistics (after the run settled) to this file.
    #[arg(long = "stats-dump")]
    pub stats_dump: Option<PathBuf>,
    /// Keep the database directory after the run.
    #[arg(long = "keep-db")]
    pub keep_db: bool,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long = "progress-seconds", default_value_t = 5.0)]
    pub progress_seconds: f64,
}

impl Default for RunParameters {
    fn default() -> RunParameters {
        RunParameters {
            engine: EngineKind::Riptide,
            operations: 100_000,
            key_size_bytes: 16,
            value_size_bytes: 100,
            threads: 1,
            batch_size: 1,
            db_path: None,
            pattern: KeyPattern::Random,
            workload: Workload::Write,
            range_size: 100,
            scan_iterator: ScanIterator::Fresh,
            transaction_mode: TransactionMode::Pessimistic,
            transaction_key_count: DEFAULT_TRANSACTION_KEY_COUNT,
            sync: false,
            memtable_size_bytes: 64 << 20,
            block_cache_size_bytes: 64 << 20,
            max_memory_bytes: 0,
            min_blob_size_bytes: 0,
            no_bloom: false,
            value_compressibility: 0.5,
            max_seconds: 0.0,
            seed: DEFAULT_SEED,
            test_name: None,
            csv: None,
            report: None,
            timeseries: None,
            config_dump: None,
            stats_dump: None,
            keep_db: false,
            progress_seconds: 5.0,
        }
    }
}

impl RunParameters {
    /// The test name: the one given, or one derived from the parameters.
    pub fn effective_test_name(&self) -> String {
        if let Some(name) = &self.test_name {
            return name.clone();
        }
        // Transaction tests name their mode after the workload, and their key space when it is
        // not the default one.
        let workload = match self.workload {
            Workload::Transaction => format!("transaction_{}", self.transaction_mode.as_str()),
            other => other.as_str().to_string(),
        };
        let mut name =
            format!("{workload}_{}_{}_t{}", self.pattern.as_str(), operations_label(self.operations), self.threads);
        if self.workload == Workload::Transaction && self.transaction_key_count != DEFAULT_TRANSACTION_KEY_COUNT {
            name.push_str(&format!("_keys{}", operations_label(self.transaction_key_count)));
        }
        if self.workload == Workload::Range {
            name.push_str(&format!("_r{}", self.range_size));
        }
        if matches!(self.workload, Workload::Seek | Workload::Range) && self.scan_iterator == ScanIterator::Reseek {
            name.push_str("_reseek");
        }
        if matches!(self.workload, Workload::Write | Workload::Mixed | Workload::Delete) {
            name.push_str(&format!("_b{}", self.batch_size));
        }
        if self.key_size_bytes != 16 || self.value_size_bytes != 100 {
            name.push_str(&format!("_k{}_v{}", self.key_size_bytes, self.value_size_bytes));
        }
        if self.sync {
            name.push_str("_sync");
        }
        if self.max_memory_bytes > 0 {
            name.push_str(&capped_suffix(self.max_memory_bytes));
        }
        if self.min_blob_size_bytes > 0 {
            name.push_str(&format!("_blob{}", self.min_blob_size_bytes));
        }
        name
    }

    /// The engine settings these parameters describe.
    pub fn engine_settings(&self) -> Result<EngineSettings> {
        Ok(EngineSettings {
            memtable_size_bytes: usize::try_from(self.memtable_size_bytes).context("memtable size")?,
            block_cache_size_bytes: usize::try_from(self.block_cache_size_bytes).context("block cache size")?,
            max_memory_bytes: usize::try_from(self.max_memory_bytes).context("memory budget")?,
            min_blob_size_bytes: match self.min_blob_size_bytes {
                0 => None,
                size => Some(usize::try_from(size).context("minimum blob size")?),
            },
            bloom: !self.no_bloom,
            sync: self.sync,
            transactions: (self.workload == Workload::Transaction).then_some(self.transaction_mode),
        })
    }

    /// Checks the parameters before anything is opened.
    pub fn validate(&self) -> Result<()> {
        if self.operations == 0 {
            bail!("--operations must be positive");
        }
        if self.threads == 0 || self.batch_size == 0 || self.range_size == 0 {
            bail!("--threads, --batch-size and --range-size must be positive");
        }
        if self.value_size_bytes == 0 {
            bail!("--value-size must be positive");
        }
        if !self.max_seconds.is_finite() || self.max_seconds < 0.0 {
            bail!("--max-seconds must be 0 or positive");
        }
        if !self.engine.is_available() {
            bail!(
                "engine {} is not compiled into this binary (build with `--features {}`)",
                self.engine.as_str(),
                self.engine.feature().unwrap_or("")
            );
        }
        if self.workload == Workload::Transaction {
            if !matches!(self.pattern, KeyPattern::Uniform | KeyPattern::Zipfian) {
                bail!("the transaction workload draws its keys: use --pattern uniform or zipfian");
            }
            if self.transaction_key_count < KEYS_PER_TRANSACTION as u64 {
                bail!("--transaction-keys must be at least {KEYS_PER_TRANSACTION}, the keys of one transaction");
            }
            if self.value_size_bytes < COUNTER_BYTES {
                bail!(
                    "the transaction workload keeps a {COUNTER_BYTES}-byte counter in each value: use --value-size \
                     {COUNTER_BYTES} or more"
                );
            }
        }
        // The measured phase draws from the populated key numbers (or, for writes, from the same
        // pattern over as many), so the populate space's bound is every run's bound.
        check_key_size(self.key_size_bytes, populate_space(self).key_number_bound())?;
        Ok(())
    }

    /// These parameters as `riptide-bench run` arguments (what the suite passes to a child).
    pub fn to_arguments(&self) -> Vec<String> {
        let mut arguments = vec![
            "--engine".to_string(),
            self.engine.as_str().to_string(),
            "--operations".to_string(),
            self.operations.to_string(),
            "--key-size".to_string(),
            self.key_size_bytes.to_string(),
            "--value-size".to_string(),
            self.value_size_bytes.to_string(),
            "--threads".to_string(),
            self.threads.to_string(),
            "--batch-size".to_string(),
            self.batch_size.to_string(),
            "--pattern".to_string(),
            self.pattern.as_str().to_string(),
            "--workload".to_string(),
            self.workload.as_str().to_string(),
            "--range-size".to_string(),
            self.range_size.to_string(),
            "--scan-iterator".to_string(),
            self.scan_iterator.as_str().to_string(),
            "--transaction-mode".to_string(),
            self.transaction_mode.as_str().to_string(),
            "--transaction-keys".to_string(),
            self.transaction_key_count.to_string(),
            "--memtable-size".to_string(),
            self.memtable_size_bytes.to_string(),
            "--block-cache-size".to_string(),
            self.block_cache_size_bytes.to_string(),
            "--max-memory".to_string(),
            self.max_memory_bytes.to_string(),
            "--min-blob-size".to_string(),
            self.min_blob_size_bytes.to_string(),
            "--value-compressibility".to_string(),
            self.value_compressibility.to_string(),
            "--max-seconds".to_string(),
            self.max_seconds.to_string(),
            "--seed".to_string(),
            self.seed.to_string(),
            "--progress-seconds".to_string(),
            self.progress_seconds.to_string(),
            "--test-name".to_string(),
            self.effective_test_name(),
        ];
        let flags = [(self.sync, "--sync"), (self.no_bloom, "--no-bloom"), (self.keep_db, "--keep-db")];
        arguments.extend(flags.iter().filter(|(on, _)| *on).map(|(_, flag)| flag.to_string()));
        let paths = [
            ("--db-path", &self.db_path),
            ("--csv", &self.csv),
            ("--report", &self.report),
            ("--timeseries", &self.timeseries),
            ("--config-dump", &self.config_dump),
            ("--stats-dump", &self.stats_dump),
        ];
        for (flag, path) in paths {
            if let Some(path) = path {
                arguments.push(flag.to_string());
                arguments.push(path.display().to_string());
            }
        }
        arguments
    }
}

/// The suffix of a test run under a memory budget: `_cap128M` (MiB) or `_cap<bytes>B`.
pub fn capped_suffix(max_memory_bytes: u64) -> String {
    if max_memory_bytes.is_multiple_of(1 << 20) {
        format!("_cap{}M", max_memory_bytes >> 20)
    } else {
        format!("_cap{max_memory_bytes}B")
    }
}

/// "10M", "500K" or the plain number: the operation counts in test names.
pub fn operations_label(operations: u64) -> String {
    if operations >= 1_000_000 && operations.is_multiple_of(1_000_000) {
        format!("{}M", operations / 1_000_000)
    } else if operations >= 1_000_000 && operations.is_multiple_of(100_000) {
        format!("{:.1}M", operations as f64 / 1e6)
    } else if operations >= 1000 && operations.is_multiple_of(1000) {
        format!("{}K", operations / 1000)
    } else {
        operations.to_string()
    }
}

/// Parses a byte size with an optional K, M or G suffix (powers of 1024).
pub fn parse_size_bytes(text: &str) -> std::result::Result<u64, String> {
    let trimmed = text.trim();
    let (digits, multiplier) = match trimmed.char_indices().last() {
        Some((index, 'K' | 'k')) => (&trimmed[..index], 1u64 << 10),
        Some((index, 'M' | 'm')) => (&trimmed[..index], 1u64 << 20),
        Some((index, 'G' | 'g')) => (&trimmed[..index], 1u64 << 30),
        _ => (trimmed, 1),
    };
    let number: u64 = digits.parse().map_err(|_| format!("not a size: {text:?} (use e.g. 65536, 64K, 64M, 1G)"))?;
    number.checked_mul(multiplier).ok_or_else(|| format!("size too large: {text}"))
}

/// Everything a run measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// The test name.
    pub test: String,
    /// The engine's name.
    pub engine: String,
    /// The parameters of the run.
    pub parameters: RunParameters,
    /// Operations completed in the measured phase.
    pub operations_done: u64,
    /// True when `--max-seconds` stopped the phase early.
    pub capped: bool,
    /// Wall time of the measured phase.
    pub duration_seconds: f64,
    /// Operations per second of the measured phase.
    pub ops_per_second: f64,
    /// Mixed runs: puts per second of put time.
    pub put_ops_per_second: Option<f64>,
    /// Mixed runs: gets per second of get time.
    pub get_ops_per_second: Option<f64>,
    /// "op" or "batch": what one latency sample covers.
    pub latency_unit: String,
    /// Latencies of the phase's writes (mixed) or of its operations.
    pub latency: LatencySummary,
    /// Mixed runs: latencies of the gets.
    pub get_latency: Option<LatencySummary>,
    /// Reads, seeks and scans that found a key.
    pub found: u64,
    /// Populate phase wall time (0 when there was none).
    pub populate_seconds: f64,
    /// Time to flush and wait for background work after the phase.
    pub settle_seconds: f64,
    /// Resources over the phase, the settling and the close.
    pub resources: ResourceUse,
    /// True peak RSS of the measured part.
    pub peak_rss_bytes: u64,
    /// False when the peak could not be reset after populating (then it includes populating).
    pub peak_rss_reset: bool,
    /// Key plus value bytes written in the phase (key bytes for deletes).
    pub logical_write_bytes: u64,
    /// Key plus value bytes returned by the phase's reads.
    pub logical_read_bytes: u64,
    /// Database size on disk after the run.
    pub db_size_bytes: u64,
    /// Key plus value bytes of the live keys after the run.
    pub live_logical_bytes: u64,
    /// Live keys after the run.
    pub live_keys: u64,
    /// Write stalls during the measured phase, as the engine counts them (`None`: not known).
    pub write_stalls: Option<WriteStalls>,
    /// Transaction runs: how the attempted transactions ended.
    pub transactions: Option<TransactionCounts>,
    /// Answers of gets and scans checked against what was written (`crate::verify`).
    pub answers_checked: u64,
    /// Answers that were wrong (a run with any fails).
    pub wrong_answers: u64,
    /// The first wrong answers, described.
    pub wrong_examples: Vec<String>,
}

impl RunResult {
    /// Bytes that reached (or will reach) storage per logical byte written: the bytes the
    /// process dirtied minus those the kernel dropped unwritten because their file was deleted
    /// or truncated first (a write-ahead log deleted before writeback costs the disk nothing).
    pub fn write_amplification(&self) -> Option<f64> {
        ratio(self.resources.device_write_bytes(), self.logical_write_bytes)
    }

    /// Bytes the process dirtied per logical byte written, whether or not they reached storage.
    pub fn write_amplification_dirtied(&self) -> Option<f64> {
        ratio(self.resources.write_bytes, self.logical_write_bytes)
    }

    /// Disk bytes read per logical byte read.
    pub fn read_amplification(&self) -> Option<f64> {
        ratio(self.resources.read_bytes, self.logical_read_bytes)
    }

    /// Database size per live logical byte.
    pub fn space_amplification(&self) -> Option<f64> {
        ratio(self.db_size_bytes, self.live_logical_bytes)
    }
}

/// A run's result and its throughput samples.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Everything the run measured.
    pub result: RunResult,
    /// Operations per one-second interval of the measured phase.
    pub samples: Vec<Sample>,
}

/// Runs the workload described by `parameters` and returns what it measured.
pub fn run(parameters: &RunParameters) -> Result<RunOutput> {
    parameters.validate()?;
    let base = match &parameters.db_path {
        Some(path) => path.clone(),
        None => std::env::temp_dir(),
    };
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let test = parameters.effective_test_name();
    let directory = base.join(format!("{}-{}-{}", test, parameters.engine.as_str(), std::process::id()));
    if directory.exists() {
        bail!("{} already exists; a run needs a fresh directory", directory.display());
    }
    std::fs::create_dir_all(&directory).with_context(|| format!("creating {}", directory.display()))?;
    let outcome = run_in_directory(parameters, &test, &directory);
    if !parameters.keep_db {
        if let Err(error) = std::fs::remove_dir_all(&directory) {
            eprintln!("warning: could not delete {}: {error}", directory.display());
        }
    }
    outcome
}

fn run_in_directory(parameters: &RunParameters, test: &str, directory: &Path) -> Result<RunOutput> {
    let settings = parameters.engine_settings()?;
    let pool = ValuePool::new(parameters.value_size_bytes, parameters.value_compressibility, parameters.seed)?;
    let measured = with_engine(parameters.engine, directory, &settings, MeasuredRun { parameters, test, pool: &pool })?;
    let db_size_bytes = directory_size_bytes(directory)?;
    let (live_keys, live_logical_bytes) = count_live(parameters, &measured);
    let phase = &measured.phase;
    let puts_or_ops = if parameters.workload == Workload::Mixed { phase.puts } else { phase.operations_done };
    let entry_bytes = (parameters.key_size_bytes + parameters.value_size_bytes) as u64;
    let logical_write_bytes = match parameters.workload {
        Workload::Write | Workload::Mixed => puts_or_ops * entry_bytes,
        Workload::Delete => puts_or_ops * parameters.key_size_bytes as u64,
        // Only committed transactions write, each every key it read.
        Workload::Transaction => phase.transactions.committed * KEYS_PER_TRANSACTION as u64 * entry_bytes,
        Workload::Read | Workload::Seek | Workload::Range => 0,
    };
    let duration_seconds = phase.duration_seconds;
    let rate = |count: u64, busy_seconds: f64| {
        (busy_seconds > 0.0).then(|| count as f64 / (busy_seconds / parameters.threads as f64))
    };
    let mixed = parameters.workload == Workload::Mixed;
    let result = RunResult {
        test: test.to_string(),
        engine: parameters.engine.as_str().to_string(),
        parameters: parameters.clone(),
        operations_done: phase.operations_done,
        capped: phase.capped,
        duration_seconds,
        ops_per_second: if duration_seconds > 0.0 { phase.operations_done as f64 / duration_seconds } else { 0.0 },
        put_ops_per_second: if mixed { rate(phase.puts, phase.put_busy_seconds) } else { None },
        get_ops_per_second: if mixed { rate(phase.gets, phase.get_busy_seconds) } else { None },
        latency_unit: latency_unit(parameters).to_string(),
        latency: LatencySummary::from_histogram(&phase.histogram),
        get_latency: mixed.then(|| LatencySummary::from_histogram(&phase.get_histogram)),
        found: phase.found,
        populate_seconds: measured.populate_seconds,
        settle_seconds: measured.settle_seconds,
        resources: measured.resources,
        peak_rss_bytes: measured.peak_rss_bytes,
        peak_rss_reset: measured.peak_rss_reset,
        logical_write_bytes,
        logical_read_bytes: phase.logical_read_bytes,
        db_size_bytes,
        live_logical_bytes,
        live_keys,
        write_stalls: measured.write_stalls,
        transactions: (parameters.workload == Workload::Transaction).then_some(phase.transactions),
        answers_checked: phase.verdicts.checked,
        wrong_answers: phase.verdicts.wrong,
        wrong_examples: phase.verdicts.examples.clone(),
    };
    Ok(RunOutput { result, samples: measured.samples })
}

/// What one latency sample covers in this run.
fn latency_unit(parameters: &RunParameters) -> &'static str {
    match parameters.workload {
        Workload::Write | Workload::Mixed | Workload::Delete if parameters.batch_size > 1 => "batch",
        Workload::Transaction => "txn",
        _ => "op",
    }
}

/// What the measured part of a run produced, before the database size and live bytes.
struct Measured {
    phase: PhaseOutcome,
    populate: Option<PhaseOutcome>,
    populate_seconds: f64,
    settle_seconds: f64,
    resources: ResourceUse,
    peak_rss_bytes: u64,
    peak_rss_reset: bool,
    samples: Vec<Sample>,
    write_stalls: Option<WriteStalls>,
}

struct MeasuredRun<'a> {
    parameters: &'a RunParameters,
    test: &'a str,
    pool: &'a ValuePool,
}

impl EngineUser for MeasuredRun<'_> {
    type Output = Measured;

    fn run<E: Engine>(self, engine: E) -> Result<Measured> {
        let parameters = self.parameters;
        let label = format!("{} {}", self.test, parameters.engine.as_str());
        let mut populate = None;
        let mut populate_seconds = 0.0;
        if parameters.workload.populates() {
            let started = Instant::now();
            let spec = populate_spec(parameters, &label);
            populate = Some(run_phase(&engine, parameters, self.pool, &spec, None)?);
            engine.settle()?;
            populate_seconds = started.elapsed().as_secs_f64();
        }
        // The keys the populate wrote, to check the answers of the reads; made before the peak
        // RSS is reset, so its few bytes per key count for every engine alike.
        let populated = populate.as_ref().map(|outcome| populated_keys(parameters, outcome));
        let peak_rss_reset = reset_peak_rss();
        let before = ProcessSnapshot::now()?;
        let spec = measured_spec(parameters, &label);
        // The engines' stall counters run from open; the difference keeps the populate phase's
        // stalls and the settling flush out of the measured phase's figure.
        let stalls_before = engine.write_stalls();
        let phase = run_phase(&engine, parameters, self.pool, &spec, populated.as_ref())?;
        let write_stalls = stalls_before.zip(engine.write_stalls()).map(|(before, after)| after.since(&before));
        let settle_started = Instant::now();
        engine.settle()?;
        let settle_seconds = settle_started.elapsed().as_secs_f64();
        let configuration = engine.configuration();
        let statistics = engine.statistics();
        engine.close()?;
        let after = ProcessSnapshot::now()?;
        let peak_rss_bytes = peak_rss_bytes()?;
        if let Some(path) = &parameters.config_dump {
            std::fs::write(path, &configuration).with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &parameters.stats_dump {
            std::fs::write(path, &statistics).with_context(|| format!("writing {}", path.display()))?;
        }
        let samples = phase.samples.clone();
        Ok(Measured {
            phase,
            populate,
            populate_seconds,
            settle_seconds,
            resources: after.since(&before),
            peak_rss_bytes,
            peak_rss_reset,
            samples,
            write_stalls,
        })
    }
}

/// Cursor streams: populate threads use `POPULATE_STREAM + thread`, measured threads
/// `MEASURED_STREAM + thread`, and mixed-run gets `GET_STREAM + thread`.
const POPULATE_STREAM: u64 = 0;
const MEASURED_STREAM: u64 = 1 << 20;
const GET_STREAM: u64 = 2 << 20;

/// The keys written by the populate phase: for transactions every key of their space once, in
/// a `random` order; otherwise the run's pattern over `operations` keys.
fn populate_space(parameters: &RunParameters) -> KeySpace {
    if parameters.workload == Workload::Transaction {
        KeySpace::new(KeyPattern::Random, parameters.transaction_key_count, parameters.seed)
    } else {
        KeySpace::new(parameters.pattern, parameters.operations, parameters.seed)
    }
}

/// The keys of the measured phase: for reads, seeks, scans and deletes after a `random`
/// populate, another permutation (same keys, another order); for transactions, draws of the
/// run's pattern (uniform or zipfian) over the populated space; otherwise the populate space,
/// so that `zipfian` reads find the same hot keys with fresh draws.
fn measured_space(parameters: &RunParameters) -> KeySpace {
    if parameters.workload == Workload::Transaction {
        KeySpace::new(parameters.pattern, parameters.transaction_key_count, parameters.seed)
    } else if parameters.workload.populates() && parameters.pattern == KeyPattern::Random {
        KeySpace::new(parameters.pattern, parameters.operations, parameters.seed ^ 0x9e37_79b9_7f4a_7c15)
    } else {
        populate_space(parameters)
    }
}

/// The populate phase of a run that populates (its progress lines say `label populate`).
fn populate_spec(parameters: &RunParameters, label: &str) -> PhaseSpec {
    let space = populate_space(parameters);
    PhaseSpec {
        kind: PhaseKind::Write,
        operations: space.operations(),
        space,
        stream_base: POPULATE_STREAM,
        batch_size: POPULATE_BATCH_SIZE,
        zero_counters: parameters.workload == Workload::Transaction,
        deadline: None,
        label: format!("{label} populate"),
    }
}

/// The measured phase of a run; its time limit starts now.
fn measured_spec(parameters: &RunParameters, label: &str) -> PhaseSpec {
    let space = measured_space(parameters);
    PhaseSpec {
        kind: match parameters.workload {
            Workload::Write => PhaseKind::Write,
            Workload::Read => PhaseKind::Read,
            Workload::Mixed => PhaseKind::Mixed,
            Workload::Delete => PhaseKind::Delete,
            Workload::Seek => PhaseKind::Scan { limit: 1, iterator: parameters.scan_iterator },
            Workload::Range => PhaseKind::Scan { limit: parameters.range_size, iterator: parameters.scan_iterator },
            Workload::Transaction => PhaseKind::Transaction { mode: parameters.transaction_mode },
        },
        // Transactions draw their keys from a space of their own size; every other phase has an
        // operation per index of its space.
        operations: if parameters.workload == Workload::Transaction {
            parameters.operations
        } else {
            space.operations()
        },
        space,
        stream_base: MEASURED_STREAM,
        batch_size: parameters.batch_size,
        zero_counters: false,
        deadline: (parameters.max_seconds > 0.0)
            .then(|| Instant::now() + Duration::from_secs_f64(parameters.max_seconds)),
        label: label.to_string(),
    }
}

/// The operation indexes `[start, end)` of thread `thread` out of `threads`.
pub fn thread_share(operations: u64, threads: usize, thread: usize) -> (u64, u64) {
    let threads = threads as u128;
    let start = (operations as u128 * thread as u128 / threads) as u64;
    let end = (operations as u128 * (thread as u128 + 1) / threads) as u64;
    (start, end)
}

/// Adds (`present`) or removes the keys `done[thread]` operations of each thread consumed of
/// `space`'s stream `stream_base + thread`.
fn mark_keys(keys: &mut PopulatedKeys, space: &KeySpace, stream_base: u64, done: &[u64], present: bool) {
    for (thread, &count) in done.iter().enumerate() {
        let (start, _) = thread_share(space.operations(), done.len(), thread);
        let mut cursor = space.cursor(stream_base + thread as u64);
        for offset in 0..count {
            keys.set(cursor.key_number(start + offset), present);
        }
    }
}

/// The keys a populate phase wrote, replayed from its key streams.
fn populated_keys(parameters: &RunParameters, populate: &PhaseOutcome) -> PopulatedKeys {
    let space = populate_space(parameters);
    let mut keys = PopulatedKeys::new(space.key_number_bound().max(measured_space(parameters).key_number_bound()));
    mark_keys(&mut keys, &space, POPULATE_STREAM, &populate.written_per_thread, true);
    keys
}

/// Counts the live keys after the run by replaying every key stream into a bitmap.
fn count_live(parameters: &RunParameters, measured: &Measured) -> (u64, u64) {
    let phase_space = measured_space(parameters);
    let bound = populate_space(parameters).key_number_bound().max(phase_space.key_number_bound());
    let mut keys = PopulatedKeys::new(bound);
    if let Some(populate) = &measured.populate {
        mark_keys(&mut keys, &populate_space(parameters), POPULATE_STREAM, &populate.written_per_thread, true);
    }
    match parameters.workload {
        Workload::Write | Workload::Mixed => {
            mark_keys(&mut keys, &phase_space, MEASURED_STREAM, &measured.phase.written_per_thread, true)
        }
        Workload::Delete => {
            mark_keys(&mut keys, &phase_space, MEASURED_STREAM, &measured.phase.written_per_thread, false)
        }
        // Transactions rewrite populated keys only.
        Workload::Read | Workload::Seek | Workload::Range | Workload::Transaction => {}
    }
    let live_keys = keys.len();
    (live_keys, live_keys * (parameters.key_size_bytes + parameters.value_size_bytes) as u64)
}

/// The operations of a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PhaseKind {
    Write,
    Delete,
    Read,
    Mixed,
    Scan { limit: usize, iterator: ScanIterator },
    Transaction { mode: TransactionMode },
}

struct PhaseSpec {
    kind: PhaseKind,
    /// Operation indexes of the phase, shared out among the threads.
    operations: u64,
    space: KeySpace,
    stream_base: u64,
    batch_size: usize,
    /// Writes put a zero transaction counter at the start of every value (the populate phase of
    /// the transaction workload).
    zero_counters: bool,
    deadline: Option<Instant>,
    label: String,
}

/// One throughput sample: operations completed in the interval ending at `elapsed_seconds`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since the phase started, at the end of the interval.
    pub elapsed_seconds: f64,
    /// Length of the interval (1 s except for the last).
    pub interval_seconds: f64,
    /// Operations completed in the interval.
    pub operations: u64,
}

/// What a phase produced.
struct PhaseOutcome {
    duration_seconds: f64,
    operations_done: u64,
    /// Per thread: how many keys of its write (put or delete) stream it consumed.
    written_per_thread: Vec<u64>,
    capped: bool,
    histogram: Histogram<u64>,
    get_histogram: Histogram<u64>,
    puts: u64,
    gets: u64,
    put_busy_seconds: f64,
    get_busy_seconds: f64,
    found: u64,
    logical_read_bytes: u64,
    samples: Vec<Sample>,
    transactions: TransactionCounts,
    verdicts: Verdicts,
}

/// What one worker thread produced.
struct WorkerOutcome {
    operations_done: u64,
    written: u64,
    capped: bool,
    histogram: Histogram<u64>,
    get_histogram: Histogram<u64>,
    puts: u64,
    gets: u64,
    put_busy_seconds: f64,
    get_busy_seconds: f64,
    found: u64,
    logical_read_bytes: u64,
    transactions: TransactionCounts,
    verdicts: Verdicts,
}

/// A progress counter on its own cache line, written by one thread and read by the sampler.
#[repr(align(128))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

fn run_phase<E: Engine>(
    engine: &E,
    parameters: &RunParameters,
    pool: &ValuePool,
    spec: &PhaseSpec,
    populated: Option<&PopulatedKeys>,
) -> Result<PhaseOutcome> {
    let threads = parameters.threads;
    let counters: Vec<PaddedCounter> = (0..threads).map(|_| PaddedCounter::default()).collect();
    let stop = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let total = spec.operations;
    let (duration_seconds, outcomes, samples) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let context = WorkerContext {
                    engine,
                    parameters,
                    pool,
                    spec,
                    populated,
                    thread,
                    counter: &counters[thread].0,
                    stop: &stop,
                };
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let outcome = run_worker(&context);
                    if outcome.is_err() {
                        context.stop.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let (counters, finished) = (&counters, &finished);
        let sampler = scope.spawn(move || {
            sample_progress(counters, finished, started, total, &spec.label, parameters.progress_seconds)
        });
        let outcomes: Vec<Result<WorkerOutcome>> = workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|_| Err(BenchError::new("a worker thread panicked"))))
            .collect();
        let duration_seconds = started.elapsed().as_secs_f64();
        finished.store(true, Ordering::Release);
        let mut samples = sampler.join().unwrap_or_default();
        // The last interval ends when the last worker ended.
        let sampled_operations: u64 = samples.iter().map(|sample| sample.operations).sum();
        let sampled_seconds = samples.last().map_or(0.0, |sample| sample.elapsed_seconds);
        let total_done: u64 = counters.iter().map(|counter| counter.0.load(Ordering::Relaxed)).sum();
        if duration_seconds > sampled_seconds {
            samples.push(Sample {
                elapsed_seconds: duration_seconds,
                interval_seconds: duration_seconds - sampled_seconds,
                operations: total_done.saturating_sub(sampled_operations),
            });
        }
        (duration_seconds, outcomes, samples)
    });
    let mut histogram = new_histogram()?;
    let mut get_histogram = new_histogram()?;
    let mut phase = PhaseOutcome {
        duration_seconds,
        operations_done: 0,
        written_per_thread: Vec::with_capacity(threads),
        capped: false,
        histogram: new_histogram()?,
        get_histogram: new_histogram()?,
        puts: 0,
        gets: 0,
        put_busy_seconds: 0.0,
        get_busy_seconds: 0.0,
        found: 0,
        logical_read_bytes: 0,
        samples,
        transactions: TransactionCounts::default(),
        verdicts: Verdicts::default(),
    };
    for outcome in outcomes {
        let outcome = outcome?;
        merge_histogram(&mut histogram, &outcome.histogram)?;
        merge_histogram(&mut get_histogram, &outcome.get_histogram)?;
        phase.operations_done += outcome.operations_done;
        phase.written_per_thread.push(outcome.written);
        phase.capped |= outcome.capped;
        phase.puts += outcome.puts;
        phase.gets += outcome.gets;
        phase.put_busy_seconds += outcome.put_busy_seconds;
        phase.get_busy_seconds += outcome.get_busy_seconds;
        phase.found += outcome.found;
        phase.logical_read_bytes += outcome.logical_read_bytes;
        phase.transactions.add(&outcome.transactions);
        phase.verdicts.add(&outcome.verdicts);
    }
    phase.histogram = histogram;
    phase.get_histogram = get_histogram;
    Ok(phase)
}

/// Records throughput once a second and prints progress every `progress_seconds`, until the
/// workers finish; returns the full one-second samples (the caller adds the last partial one).
fn sample_progress(
    counters: &[PaddedCounter],
    finished: &AtomicBool,
    started: Instant,
    total: u64,
    label: &str,
    progress_seconds: f64,
) -> Vec<Sample> {
    let sum = || counters.iter().map(|counter| counter.0.load(Ordering::Relaxed)).sum::<u64>();
    let mut samples = Vec::new();
    let mut last_count = 0u64;
    let mut last_elapsed = 0.0f64;
    let mut next_sample = 1.0f64;
    let mut next_progress = if progress_seconds > 0.0 { progress_seconds } else { f64::INFINITY };
    let mut progress_base = (0.0f64, 0u64);
    loop {
        if finished.load(Ordering::Acquire) {
            return samples;
        }
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed >= next_sample {
            let count = sum();
            samples.push(Sample {
                elapsed_seconds: elapsed,
                interval_seconds: elapsed - last_elapsed,
                operations: count.saturating_sub(last_count),
            });
            last_count = count;
            last_elapsed = elapsed;
            next_sample += 1.0;
        }
        if elapsed >= next_progress {
            let count = sum();
            let recent_rate = (count - progress_base.1) as f64 / (elapsed - progress_base.0).max(1e-9);
            eprintln!(
                "  [{label}] {:.0} s: {count}/{total} ops ({:.1} %), {} ops/s recently",
                elapsed,
                count as f64 * 100.0 / total.max(1) as f64,
                format_rate(recent_rate)
            );
            progress_base = (elapsed, count);
            next_progress += progress_seconds;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A rate with thousands separators and no decimals.
pub fn format_rate(rate: f64) -> String {
    group_thousands(rate.round() as u64)
}

/// `1234567` as `1,234,567`.
pub fn group_thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (position, character) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(character);
    }
    grouped
}

struct WorkerContext<'a, E> {
    engine: &'a E,
    parameters: &'a RunParameters,
    pool: &'a ValuePool,
    spec: &'a PhaseSpec,
    /// The keys the populate phase wrote (`None` when the run populated nothing).
    populated: Option<&'a PopulatedKeys>,
    thread: usize,
    counter: &'a AtomicU64,
    stop: &'a AtomicBool,
}

fn nanos_since(start: Instant, end: Instant) -> u64 {
    (end.duration_since(start).as_nanos() as u64).max(1)
}

fn run_worker<E: Engine>(context: &WorkerContext<'_, E>) -> Result<WorkerOutcome> {
    let parameters = context.parameters;
    let spec = context.spec;
    let mut session = context.engine.session()?;
    let (start, end) = thread_share(spec.operations, parameters.threads, context.thread);
    let mut cursor = spec.space.cursor(spec.stream_base + context.thread as u64);
    let mut get_cursor = spec.space.cursor(GET_STREAM + context.thread as u64);
    let mut choice = SplitMix64::new(parameters.seed ^ ((context.thread as u64) << 32));
    let mut key = vec![0u8; parameters.key_size_bytes];
    let value_size = parameters.value_size_bytes;
    let pool = context.pool;
    // The reused buffer gets return their value in, and the checks of what they return.
    let mut value = Vec::with_capacity(value_size);
    let mut checker = Checker::new(context.populated, pool, parameters.key_size_bytes, value_size);
    // Values of the transaction populate: a pool value with a zero counter at its start.
    let mut counter_value = Vec::with_capacity(value_size);
    let mut transactions = match spec.kind {
        PhaseKind::Transaction { mode } => Some(TransactionWorker::new(mode, parameters.key_size_bytes)),
        _ => None,
    };
    let batch_size = spec.batch_size as u64;
    let mut outcome = WorkerOutcome {
        operations_done: 0,
        written: 0,
        capped: false,
        histogram: new_histogram()?,
        get_histogram: new_histogram()?,
        puts: 0,
        gets: 0,
        put_busy_seconds: 0.0,
        get_busy_seconds: 0.0,
        found: 0,
        logical_read_bytes: 0,
        transactions: TransactionCounts::default(),
        verdicts: Verdicts::default(),
    };
    if let PhaseKind::Scan { limit, iterator } = spec.kind {
        let mut scans = ScanShare { context, start, end, limit, cursor, outcome, checker };
        match iterator {
            ScanIterator::Fresh => scans.run(&mut FreshScans(&mut session))?,
            ScanIterator::Reseek => session.with_reseeked_iterator(&mut |scanner| scans.run(scanner))?,
        }
        let mut outcome = scans.outcome;
        outcome.verdicts = scans.checker.verdicts;
        return Ok(outcome);
    }
    let mut index = start;
    // Mixed runs alternate a batch of puts (consuming write indexes) and a batch of gets.
    let mut mixed_turn_is_put = true;
    let mut last_check = Instant::now();
    while index < end {
        if context.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(deadline) = spec.deadline {
            if last_check >= deadline {
                outcome.capped = true;
                break;
            }
        }
        let chunk = batch_size.min(end - index);
        match spec.kind {
            PhaseKind::Write | PhaseKind::Delete => {
                let is_write = spec.kind == PhaseKind::Write;
                let began = Instant::now();
                if chunk == 1 && batch_size == 1 {
                    let number = cursor.key_number(index);
                    encode_key(number, &mut key);
                    if is_write {
                        session.put(&key, pool.value_for_key(number, value_size))?;
                    } else {
                        session.delete(&key)?;
                    }
                } else {
                    for offset in 0..chunk {
                        let number = cursor.key_number(index + offset);
                        encode_key(number, &mut key);
                        if is_write && spec.zero_counters {
                            counter_value.clear();
                            counter_value.extend_from_slice(pool.value_for_key(number, value_size));
                            crate::transaction::write_counter(0, &mut counter_value)?;
                            session.batch_put(&key, &counter_value);
                        } else if is_write {
                            session.batch_put(&key, pool.value_for_key(number, value_size));
                        } else {
                            session.batch_delete(&key);
                        }
                    }
                    session.commit_batch()?;
                }
                let ended = Instant::now();
                outcome.histogram.saturating_record(nanos_since(began, ended));
                last_check = ended;
                index += chunk;
                outcome.operations_done += chunk;
                outcome.written += chunk;
            }
            PhaseKind::Read => {
                let number = cursor.key_number(index);
                encode_key(number, &mut key);
                let began = Instant::now();
                let found = session.get(&key, &mut value)?;
                let ended = Instant::now();
                outcome.histogram.saturating_record(nanos_since(began, ended));
                last_check = ended;
                checker.check_get(number, found.then_some(value.as_slice()), false);
                if found {
                    outcome.found += 1;
                    outcome.logical_read_bytes += (key.len() + value.len()) as u64;
                }
                index += 1;
                outcome.operations_done += 1;
            }
            PhaseKind::Scan { .. } => bail!("internal error: scans run in their own loop"),
            PhaseKind::Mixed => {
                if mixed_turn_is_put {
                    // Puts take the next write indexes of this thread's share.
                    let write_index = start + outcome.written;
                    let puts = chunk.min(end - write_index);
                    let began = Instant::now();
                    if puts == 1 && batch_size == 1 {
                        let number = cursor.key_number(write_index);
                        encode_key(number, &mut key);
                        session.put(&key, pool.value_for_key(number, value_size))?;
                    } else {
                        for offset in 0..puts {
                            let number = cursor.key_number(write_index + offset);
                            encode_key(number, &mut key);
                            session.batch_put(&key, pool.value_for_key(number, value_size));
                        }
                        session.commit_batch()?;
                    }
                    let ended = Instant::now();
                    outcome.histogram.saturating_record(nanos_since(began, ended));
                    outcome.put_busy_seconds += ended.duration_since(began).as_secs_f64();
                    last_check = ended;
                    outcome.written += puts;
                    outcome.puts += puts;
                    outcome.operations_done += puts;
                    index += puts;
                } else {
                    let gets = chunk;
                    let began_all = Instant::now();
                    for _ in 0..gets {
                        // Injective patterns read a key this thread already wrote (so it must be
                        // found); zipfian and uniform take a fresh draw of their distribution.
                        let injective = spec.space.pattern().is_injective();
                        let number = if injective {
                            cursor.key_number(start + choice.next_below(outcome.written.max(1)))
                        } else {
                            get_cursor.key_number(0)
                        };
                        encode_key(number, &mut key);
                        let began = Instant::now();
                        let found = session.get(&key, &mut value)?;
                        let ended = Instant::now();
                        outcome.get_histogram.saturating_record(nanos_since(began, ended));
                        checker.check_get(number, found.then_some(value.as_slice()), injective && outcome.written > 0);
                        if found {
                            outcome.found += 1;
                            outcome.logical_read_bytes += (key.len() + value.len()) as u64;
                        }
                    }
                    let ended = Instant::now();
                    outcome.get_busy_seconds += ended.duration_since(began_all).as_secs_f64();
                    last_check = ended;
                    outcome.gets += gets;
                    outcome.operations_done += gets;
                    index += gets;
                }
                mixed_turn_is_put = !mixed_turn_is_put;
            }
            PhaseKind::Transaction { .. } => {
                let Some(worker) = transactions.as_mut() else {
                    bail!("internal error: a transaction phase without its worker state");
                };
                worker.draw_keys(&mut cursor, index)?;
                let began = Instant::now();
                let ended_as = worker.run(&mut session)?;
                let ended = Instant::now();
                // Only committed transactions are operations done, timed and sampled: the
                // throughput of this workload is committed transactions per second.
                if ended_as == TransactionOutcome::Committed {
                    outcome.histogram.saturating_record(nanos_since(began, ended));
                    outcome.operations_done += 1;
                }
                last_check = ended;
                index += 1;
            }
        }
        context.counter.store(outcome.operations_done, Ordering::Relaxed);
    }
    if let Some(worker) = transactions {
        outcome.transactions = worker.counts;
        outcome.logical_read_bytes += worker.read_bytes;
    }
    outcome.verdicts = checker.verdicts;
    Ok(outcome)
}

/// A session's scans, each with an iterator of its own (the fresh form).
struct FreshScans<'s, S>(&'s mut S);

impl<S: Session> Scanner for FreshScans<'_, S> {
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        self.0.scan(start, limit, capture)
    }
}

/// A worker's share of a seek or range phase, run through whichever iterator form it uses.
struct ScanShare<'c, 'a, E> {
    context: &'c WorkerContext<'a, E>,
    start: u64,
    end: u64,
    limit: usize,
    cursor: KeyCursor<'a>,
    outcome: WorkerOutcome,
    checker: Checker<'a>,
}

impl<E> ScanShare<'_, '_, E> {
    /// Runs the share's scans through `scanner`, each timed alone and then checked.
    fn run(&mut self, scanner: &mut dyn Scanner) -> Result<()> {
        let context = self.context;
        let mut key = vec![0u8; context.parameters.key_size_bytes];
        let mut capture = ScanCapture::default();
        let mut last_check = Instant::now();
        for index in self.start..self.end {
            if context.stop.load(Ordering::Relaxed) {
                break;
            }
            if context.spec.deadline.is_some_and(|deadline| last_check >= deadline) {
                self.outcome.capped = true;
                break;
            }
            let number = self.cursor.key_number(index);
            encode_key(number, &mut key);
            capture.clear(index % FULL_CHECK_INTERVAL == 0);
            let began = Instant::now();
            let scan = scanner.scan(&key, self.limit, &mut capture)?;
            let ended = Instant::now();
            self.outcome.histogram.saturating_record(nanos_since(began, ended));
            last_check = ended;
            self.checker.check_scan(number, self.limit, scan.entries, &capture);
            self.outcome.found += u64::from(scan.entries > 0);
            self.outcome.logical_read_bytes += scan.bytes;
            self.outcome.operations_done += 1;
            context.counter.store(self.outcome.operations_done, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Appends the throughput samples of a run to a CSV file (header when new).
pub fn append_timeseries(path: &Path, test: &str, engine: &str, samples: &[Sample]) -> Result<()> {
    use std::io::Write;
    let is_new = std::fs::metadata(path).map(|metadata| metadata.len() == 0).unwrap_or(true);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut text = String::new();
    if is_new {
        text.push_str("test,engine,elapsed_seconds,interval_seconds,operations,ops_per_second\n");
    }
    for sample in samples {
        let rate = if sample.interval_seconds > 0.0 { sample.operations as f64 / sample.interval_seconds } else { 0.0 };
        let numbers = [
            format!("{:.3}", sample.elapsed_seconds),
            format!("{:.3}", sample.interval_seconds),
            sample.operations.to_string(),
            format!("{rate:.1}"),
        ];
        // Quoted like results.csv, so a test name with a comma still reads back as one field.
        let fields = [test, engine].into_iter().chain(numbers.iter().map(String::as_str));
        text.push_str(&crate::csv::format_line(fields));
        text.push('\n');
    }
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Runs `parameters` and writes the outputs it asks for (CSV row, samples, report); fails,
/// after recording them, when any answer of the engine was wrong.
pub fn run_and_record(parameters: &RunParameters) -> Result<RunOutput> {
    let output = run(parameters)?;
    if let Some(path) = &parameters.csv {
        crate::csv::append_result(path, &output.result)?;
    }
    if let Some(path) = &parameters.timeseries {
        append_timeseries(path, &output.result.test, &output.result.engine, &output.samples)?;
    }
    if let Some(path) = &parameters.report {
        let rows = vec![crate::csv::Row::from_result(&output.result)];
        let text = crate::report::single_run_report(&rows);
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let result = &output.result;
    if result.wrong_answers > 0 {
        bail!(
            "{} on {}: {} of {} answers checked were wrong; first: {}",
            result.test,
            result.engine,
            result.wrong_answers,
            result.answers_checked,
            result.wrong_examples.join("; ")
        );
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_amplification_leaves_out_bytes_the_kernel_dropped_unwritten() {
        let result = RunResult {
            logical_write_bytes: 100,
            resources: crate::metrics::ResourceUse {
                write_bytes: 500,
                cancelled_write_bytes: 200,
                ..Default::default()
            },
            ..crate::csv::tests::sample_result("amp", 1.0)
        };
        assert_eq!(result.write_amplification(), Some(3.0));
        assert_eq!(result.write_amplification_dirtied(), Some(5.0));
        let odd = RunResult {
            resources: crate::metrics::ResourceUse { write_bytes: 10, cancelled_write_bytes: 50, ..Default::default() },
            ..result
        };
        assert_eq!(odd.write_amplification(), Some(0.0), "more cancelled than dirtied saturates at zero");
    }

    #[test]
    fn thread_shares_are_disjoint_and_cover_everything() {
        for (operations, threads) in [(10u64, 3usize), (1_000_003, 8), (5, 8)] {
            let mut next = 0;
            for thread in 0..threads {
                let (start, end) = thread_share(operations, threads, thread);
                assert_eq!(start, next);
                assert!(end >= start);
                next = end;
            }
            assert_eq!(next, operations);
        }
    }

    #[test]
    fn labels_and_sizes() {
        assert_eq!(operations_label(10_000_000), "10M");
        assert_eq!(operations_label(2_500_000), "2.5M");
        assert_eq!(operations_label(500_000), "500K");
        assert_eq!(operations_label(1234), "1234");
        assert_eq!(parse_size_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("1g"), Ok(1 << 30));
        assert!(parse_size_bytes("lots").is_err());
        assert_eq!(group_thousands(1_234_567), "1,234,567");
        assert_eq!(group_thousands(999), "999");
    }

    /// The sum of the transaction counters of every key in the transaction key space.
    fn counter_sum(db: &riptide::Db, parameters: &RunParameters) -> u64 {
        let mut key = vec![0u8; parameters.key_size_bytes];
        let mut sum = 0;
        for number in 0..parameters.transaction_key_count {
            encode_key(number, &mut key);
            let value = db.get(&key).unwrap().expect("every key of the space is populated");
            assert_eq!(value.len(), parameters.value_size_bytes, "transactions keep the value size");
            sum += crate::transaction::read_counter(&value).unwrap();
        }
        sum
    }

    fn transaction_parameters(mode: TransactionMode, pattern: KeyPattern, keys: u64) -> RunParameters {
        RunParameters {
            workload: Workload::Transaction,
            transaction_mode: mode,
            pattern,
            transaction_key_count: keys,
            operations: 2000,
            threads: 4,
            progress_seconds: 0.0,
            ..RunParameters::default()
        }
    }

    /// The sum of the transaction counters read through an engine's session.
    fn session_counter_sum<E: Engine>(engine: &E, parameters: &RunParameters) -> u64 {
        let mut session = engine.session().unwrap();
        let mut key = vec![0u8; parameters.key_size_bytes];
        let mut value = Vec::new();
        let mut sum = 0;
        for number in 0..parameters.transaction_key_count {
            encode_key(number, &mut key);
            assert!(session.get(&key, &mut value).unwrap(), "every key of the space is populated");
            sum += crate::transaction::read_counter(&value).unwrap();
        }
        sum
    }

    #[cfg(feature = "tidesdb")]
    #[test]
    fn tidesdb_optimistic_transactions_add_up_and_lose_no_update() {
        use crate::engine::tidesdb_engine::TidesDbEngine;
        for pattern in [KeyPattern::Zipfian, KeyPattern::Uniform] {
            let parameters = transaction_parameters(TransactionMode::Optimistic, pattern, 16);
            let directory = std::env::temp_dir().join(format!(
                "riptide-bench-tidesdb-transactions-{}-{}",
                pattern.as_str(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&directory);
            std::fs::create_dir_all(&directory).unwrap();
            let engine = TidesDbEngine::open(&directory, &parameters.engine_settings().unwrap()).unwrap();
            let pool = ValuePool::new(parameters.value_size_bytes, parameters.value_compressibility, 1).unwrap();
            run_phase(&engine, &parameters, &pool, &populate_spec(&parameters, "test"), None).unwrap();
            engine.settle().unwrap();
            assert_eq!(session_counter_sum(&engine, &parameters), 0);
            let phase = run_phase(&engine, &parameters, &pool, &measured_spec(&parameters, "test"), None).unwrap();
            let counts = phase.transactions;
            assert_eq!(counts.committed + counts.aborts(), counts.attempts, "{counts:?}");
            assert!(counts.committed > 0, "{counts:?}");
            assert_eq!(counts.deadlocks + counts.lock_timeouts, 0, "TidesDB has no locks: {counts:?}");
            // Each commit added 4, each abort nothing: no lost update, no leaked abort.
            assert_eq!(session_counter_sum(&engine, &parameters), 4 * counts.committed, "{counts:?}");
            engine.close().unwrap();
            std::fs::remove_dir_all(&directory).unwrap();
        }
        let pessimistic = transaction_parameters(TransactionMode::Pessimistic, KeyPattern::Uniform, 16);
        let directory = std::env::temp_dir().join(format!("riptide-bench-tidesdb-pessimistic-{}", std::process::id()));
        assert!(TidesDbEngine::open(&directory, &pessimistic.engine_settings().unwrap()).is_err());
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn riptide_transactions_add_up_and_lose_no_update() {
        use crate::engine::riptide_engine::RiptideEngine;
        // Sixteen keys under four threads: conflicts (and in pessimistic mode deadlocks) happen,
        // and every one of them must be counted once and leave no write behind.
        for (mode, pattern) in [
            (TransactionMode::Pessimistic, KeyPattern::Zipfian),
            (TransactionMode::Optimistic, KeyPattern::Zipfian),
            (TransactionMode::Pessimistic, KeyPattern::Uniform),
            (TransactionMode::Optimistic, KeyPattern::Uniform),
        ] {
            let parameters = transaction_parameters(mode, pattern, 16);
            parameters.validate().unwrap();
            let directory = std::env::temp_dir().join(format!(
                "riptide-bench-transactions-{}-{}-{}",
                mode.as_str(),
                pattern.as_str(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&directory);
            let engine = RiptideEngine::open(&directory, &parameters.engine_settings().unwrap()).unwrap();
            let pool = ValuePool::new(parameters.value_size_bytes, parameters.value_compressibility, 1).unwrap();
            let populate = run_phase(&engine, &parameters, &pool, &populate_spec(&parameters, "test"), None).unwrap();
            assert_eq!(populate.operations_done, 16);
            engine.settle().unwrap();
            assert_eq!(counter_sum(engine.db(), &parameters), 0, "the populate writes zero counters");
            let phase = run_phase(&engine, &parameters, &pool, &measured_spec(&parameters, "test"), None).unwrap();
            let counts = phase.transactions;
            let context = format!("{mode:?} {pattern:?}: {counts:?}");
            assert_eq!(counts.attempts, parameters.operations, "{context}");
            assert_eq!(counts.committed + counts.aborts(), counts.attempts, "{context}");
            assert!(counts.committed > 0, "{context}");
            assert_eq!(phase.operations_done, counts.committed, "{context}");
            assert_eq!(phase.histogram.len(), counts.committed, "only commits are timed: {context}");
            assert_eq!(phase.logical_read_bytes % (16 + 100) as u64, 0);
            assert!(phase.logical_read_bytes >= counts.committed * 4 * (16 + 100), "{context}");
            // Each commit added 4, each abort nothing: no lost update, no leaked abort.
            assert_eq!(counter_sum(engine.db(), &parameters), 4 * counts.committed, "{context}");
            assert_eq!(session_counter_sum(&engine, &parameters), 4 * counts.committed, "{context}");
            // The engine saw the same transactions end the same ways.
            let stats = engine.db().stats().transactions;
            assert_eq!(stats.begun, counts.attempts, "{context}");
            assert_eq!(stats.committed, counts.committed, "{context}");
            assert_eq!(stats.conflicts, counts.conflicts, "{context}");
            assert_eq!(stats.deadlocks, counts.deadlocks, "{context}");
            assert_eq!(stats.lock_timeouts, counts.lock_timeouts, "{context}");
            assert_eq!(stats.open, 0, "{context}");
            engine.close().unwrap();
            std::fs::remove_dir_all(&directory).unwrap();
        }
    }

    #[test]
    fn a_transaction_run_reports_its_counts() {
        let parameters = RunParameters {
            operations: 400,
            threads: 2,
            csv: Some(std::env::temp_dir().join(format!("riptide-bench-transaction-run-{}.csv", std::process::id()))),
            ..transaction_parameters(TransactionMode::Optimistic, KeyPattern::Zipfian, 1000)
        };
        if let Some(path) = &parameters.csv {
            let _ = std::fs::remove_file(path);
        }
        let output = run_and_record(&parameters).unwrap();
        let result = &output.result;
        let counts = result.transactions.unwrap();
        assert_eq!(result.test, "transaction_optimistic_zipfian_400_t2_keys1K");
        assert_eq!(counts.attempts, 400);
        assert_eq!(counts.committed + counts.aborts(), 400);
        assert_eq!(result.operations_done, counts.committed);
        assert_eq!(result.latency_unit, "txn");
        assert_eq!(result.latency.count, counts.committed);
        assert_eq!(result.logical_write_bytes, counts.committed * 4 * 116);
        // Transactions rewrite populated keys: the live keys are the key space.
        assert_eq!(result.live_keys, 1000);
        let path = parameters.csv.as_ref().unwrap();
        let rows = crate::csv::read_rows(path).unwrap();
        std::fs::remove_file(path).unwrap();
        assert_eq!(rows[0].number("transaction_attempts"), Some(400.0));
        assert_eq!(rows[0].number("transaction_committed"), Some(counts.committed as f64));
        assert_eq!(rows[0].text("transaction_mode"), "optimistic");
    }

    #[test]
    fn transaction_parameters_are_checked() {
        let valid = transaction_parameters(TransactionMode::Pessimistic, KeyPattern::Uniform, 100_000);
        assert!(valid.validate().is_ok());
        assert_eq!(valid.effective_test_name(), "transaction_pessimistic_uniform_2K_t4");
        let settings = valid.engine_settings().unwrap();
        assert_eq!(settings.transactions, Some(TransactionMode::Pessimistic));
        assert_eq!(RunParameters::default().engine_settings().unwrap().transactions, None);
        for (parameters, reason) in [
            (RunParameters { pattern: KeyPattern::Random, ..valid.clone() }, "pattern"),
            (RunParameters { transaction_key_count: 3, ..valid.clone() }, "transaction-keys"),
            (RunParameters { value_size_bytes: 7, ..valid.clone() }, "value-size"),
            (RunParameters { key_size_bytes: 4, ..valid.clone() }, "key"),
        ] {
            let error = parameters.validate().unwrap_err().to_string();
            assert!(error.contains(reason), "{reason}: {error}");
        }
    }

    #[test]
    fn derived_test_names() {
        let parameters = RunParameters {
            operations: 10_000_000,
            threads: 8,
            batch_size: 1000,
            pattern: KeyPattern::Seq,
            ..RunParameters::default()
        };
        assert_eq!(parameters.effective_test_name(), "write_seq_10M_t8_b1000");
        let range = RunParameters { workload: Workload::Range, operations: 500_000, ..RunParameters::default() };
        assert_eq!(range.effective_test_name(), "range_random_500K_t1_r100");
    }
}
