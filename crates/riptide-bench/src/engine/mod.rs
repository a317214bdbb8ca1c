//! The engines under test, behind one interface, configured alike.
//!
//! [`Engine`] is what a run needs from a database: per-thread [`Session`]s that put, delete,
//! write batches, get and scan (with a new iterator per scan, or one iterator per thread that
//! every scan seeks again: [`Session::with_reseeked_iterator`]), plus `settle` (flush memtables
//! and wait for background work, the same for every engine before sizes are measured) and
//! `close`. Riptide, RocksDB (cargo feature `rocksdb`) and TidesDB (cargo feature `tidesdb`) take
//! one [`EngineSettings`] so that the comparison is like for like: LZ4, bloom filters at 10 bits
//! per key (TidesDB: the 1 % false-positive rate they give), the same block cache size, 64 MiB
//! memtables / write buffers, WAL on and synced per write only with `--sync`, and a write batch
//! (TidesDB: a transaction) per batch. Gets hand back the value and scans note what they visit
//! ([`ScanCapture`]) so that every engine's answers can be checked (`crate::verify`).
//!
//! For the transaction workload, [`EngineSettings::transactions`] opens each engine for
//! transactions in one [`TransactionMode`]: Riptide's own transactions, pessimistic or
//! optimistic; RocksDB's `TransactionDB` or `OptimisticTransactionDB`; TidesDB's SNAPSHOT
//! isolation, optimistic only ([`EngineKind::supports_transactions`]). All run at snapshot
//! isolation (REPEATABLE READ: a snapshot per transaction, first committer wins on the keys it
//! writes or reads for update), with the same lock timeout ([`TRANSACTION_LOCK_TIMEOUT`]) and
//! deadlock detection on where there are locks. A session holds at most one open transaction at
//! a time; a failed transaction operation reports a [`TransactionError`]: an [`AbortKind`] when
//! the failure is one that concurrency control causes (the caller rolls back and counts it),
//! anything else as an error that ends the run.

pub mod riptide_engine;
#[cfg(feature = "rocksdb")]
pub mod rocksdb_engine;
pub mod rocksdb_properties;
pub mod rocksdb_status;
#[cfg(feature = "tidesdb")]
pub mod tidesdb_engine;

use std::path::Path;
use std::time::Duration;

use clap::ValueEnum;

use crate::error::{BenchError, Result};

/// Which engine a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum EngineKind {
    /// Riptide, this repository's engine.
    Riptide,
    /// RocksDB through the `rocksdb` crate (needs the `rocksdb` cargo feature).
    Rocksdb,
    /// TidesDB through the `tidesdb` crate (needs the `tidesdb` cargo feature).
    Tidesdb,
}

impl EngineKind {
    /// The name used on the command line and in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Riptide => "riptide",
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Tidesdb => "tidesdb",
        }
    }

    /// Parses a name written by [`EngineKind::as_str`].
    pub fn parse(name: &str) -> Option<EngineKind> {
        match name {
            "riptide" => Some(EngineKind::Riptide),
            "rocksdb" => Some(EngineKind::Rocksdb),
            "tidesdb" => Some(EngineKind::Tidesdb),
            _ => None,
        }
    }

    /// True when this binary was built with the engine.
    pub fn is_available(self) -> bool {
        match self {
            EngineKind::Riptide => true,
            EngineKind::Rocksdb => cfg!(feature = "rocksdb"),
            EngineKind::Tidesdb => cfg!(feature = "tidesdb"),
        }
    }

    /// Every engine the benchtool knows, Riptide first (the order of report columns).
    pub const ALL: [EngineKind; 3] = [EngineKind::Riptide, EngineKind::Rocksdb, EngineKind::Tidesdb];

    /// The engine's name as reports print it.
    pub fn display_name(self) -> &'static str {
        match self {
            EngineKind::Riptide => "Riptide",
            EngineKind::Rocksdb => "RocksDB",
            EngineKind::Tidesdb => "TidesDB",
        }
    }

    /// The cargo feature that compiles the engine in (`None`: always there).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            EngineKind::Riptide => None,
            EngineKind::Rocksdb => Some("rocksdb"),
            EngineKind::Tidesdb => Some("tidesdb"),
        }
    }

    /// True when the engine can run the transaction workload in `mode`.
    pub fn supports_transactions(self, mode: TransactionMode) -> bool {
        match self {
            EngineKind::Riptide | EngineKind::Rocksdb => true,
            // TidesDB validates at commit and has no locks.
            EngineKind::Tidesdb => mode == TransactionMode::Optimistic,
        }
    }

    /// Every engine compiled into this binary, Riptide first.
    pub fn available() -> Vec<EngineKind> {
        EngineKind::ALL.into_iter().filter(|kind| kind.is_available()).collect()
    }
}

/// The settings both engines are configured from.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineSettings {
    /// Memtable (write buffer) size.
    pub memtable_size_bytes: usize,
    /// Block cache capacity.
    pub block_cache_size_bytes: usize,
    /// A memory budget for the whole engine (0: none). See `RunParameters::max_memory_bytes`.
    pub max_memory_bytes: usize,
    /// Key-value separation threshold (`None`: off). See `RunParameters::min_blob_size_bytes`.
    pub min_blob_size_bytes: Option<usize>,
    /// Bloom filters on (10 bits per key) or off.
    pub bloom: bool,
    /// Sync the WAL on every write.
    pub sync: bool,
    /// Open for transactions in this mode (`None`: plain reads and writes only).
    pub transactions: Option<TransactionMode>,
}

/// Bloom filter bits per key when filters are on (about 1 % false positives).
pub const BLOOM_BITS_PER_KEY: u32 = 10;
/// Uncompressed data block size for both engines.
pub const BLOCK_SIZE_BYTES: usize = 4096;
/// Background threads RocksDB may use for flushes and compactions (the machine has 2 cores).
pub const ROCKSDB_BACKGROUND_JOBS: i32 = 2;

impl Default for EngineSettings {
    fn default() -> EngineSettings {
        EngineSettings {
            memtable_size_bytes: 64 << 20,
            block_cache_size_bytes: 64 << 20,
            max_memory_bytes: 0,
            min_blob_size_bytes: None,
            bloom: true,
            sync: false,
            transactions: None,
        }
    }
}

/// How the transaction workload controls concurrency, on either engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, ValueEnum)]
pub enum TransactionMode {
    /// Locks: reads for update and writes lock their key until the transaction ends (Riptide's
    /// pessimistic transactions, RocksDB's `TransactionDB`).
    #[default]
    Pessimistic,
    /// No locks: the keys written are validated against the snapshot at commit (Riptide's
    /// optimistic transactions, RocksDB's `OptimisticTransactionDB`).
    Optimistic,
}

impl TransactionMode {
    /// The name used on the command line and in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            TransactionMode::Pessimistic => "pessimistic",
            TransactionMode::Optimistic => "optimistic",
        }
    }
}

/// How long a transaction's lock request may wait, on both engines, before it fails.
pub const TRANSACTION_LOCK_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a transaction ended without committing, when concurrency control ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortKind {
    /// A key it wrote (or read for update) was written by another transaction after its
    /// snapshot, found when locking or at commit (Riptide's `Error::Conflict`; RocksDB's `Busy`
    /// without a deadlock, and `TryAgain`, the validation that could not be done).
    Conflict,
    /// It was the victim of a deadlock among lock waiters (Riptide's `Error::Deadlock`,
    /// RocksDB's `Busy` with the `Deadlock` subcode).
    Deadlock,
    /// A lock request waited [`TRANSACTION_LOCK_TIMEOUT`] (Riptide's `Error::LockTimeout`,
    /// RocksDB's `TimedOut`).
    LockTimeout,
}

/// A transaction operation that failed.
#[derive(Debug)]
pub enum TransactionError {
    /// Concurrency control aborted the transaction; the caller rolls it back and goes on.
    Abort(AbortKind),
    /// Anything else (an I/O error, a closed database, a broken invariant): the run stops.
    Failed(BenchError),
}

impl From<BenchError> for TransactionError {
    fn from(error: BenchError) -> TransactionError {
        TransactionError::Failed(error)
    }
}

/// What a scan saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Entries visited.
    pub entries: u64,
    /// Key plus value bytes of those entries.
    pub bytes: u64,
}

impl ScanOutcome {
    /// Counts one visited entry and hands it to `capture`; true once `limit` entries are in
    /// (the scan stops there). Every engine's scan loop calls it for every entry.
    pub fn visit(&mut self, key: &[u8], value: &[u8], capture: &mut ScanCapture, limit: usize) -> bool {
        capture.record(self.entries, key, value);
        self.entries += 1;
        self.bytes += (key.len() + value.len()) as u64;
        self.entries >= limit as u64
    }
}

/// What a scan hands back for checking: the first entry's key and value, and, when asked for,
/// every key it visited (concatenated, in the order visited).
///
/// Engines call [`ScanCapture::record`] for every entry they visit; it copies the first entry
/// and then only keys, and only when `all_keys` is set, so the checks cost a measured scan
/// little (the workload asks for every key of a sample of scans, see `crate::verify`).
#[derive(Clone, Debug, Default)]
pub struct ScanCapture {
    /// Record every key visited, not only the first.
    pub all_keys: bool,
    /// The first entry's key, then (with `all_keys`) every further key, back to back.
    pub keys: Vec<u8>,
    /// The byte length of each key in `keys`.
    pub key_lengths: Vec<usize>,
    /// The first entry's value.
    pub first_value: Vec<u8>,
}

impl ScanCapture {
    /// Empties the capture for the next scan.
    pub fn clear(&mut self, all_keys: bool) {
        self.all_keys = all_keys;
        self.keys.clear();
        self.key_lengths.clear();
        self.first_value.clear();
    }

    /// Notes entry number `position` (0 for the first) of the scan.
    #[inline]
    pub fn record(&mut self, position: u64, key: &[u8], value: &[u8]) {
        if position == 0 {
            self.first_value.extend_from_slice(value);
        } else if !self.all_keys {
            return;
        }
        self.keys.extend_from_slice(key);
        self.key_lengths.push(key.len());
    }
}

/// How a workload's scans get their iterator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, ValueEnum)]
pub enum ScanIterator {
    /// A new iterator for every scan, as a SQL engine creates one per query.
    #[default]
    Fresh,
    /// One iterator per thread for the whole phase, positioned anew by a seek for every scan.
    Reseek,
}

impl ScanIterator {
    /// The name used on the command line and in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanIterator::Fresh => "fresh",
            ScanIterator::Reseek => "reseek",
        }
    }
}

/// One iterator that scans again and again (see [`Session::with_reseeked_iterator`]).
pub trait Scanner {
    /// Seeks to the first key `>= start` and reads up to `limit` entries, noting them in
    /// `capture`.
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome>;
}

/// How long writes waited for flushes and compactions, as the engine itself counts it.
///
/// Both engines count the time a writer (the leader of a write group) spent waiting before its
/// batch could go into the memtable. The counts differ in kind: Riptide counts writes that
/// waited; RocksDB counts how often a column family entered or stayed in a delayed or stopped
/// condition (each flush or compaction that finished while it held), which is why reports show
/// them apart from the time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStalls {
    /// Total time writers waited, in microseconds.
    pub stall_micros: u64,
    /// Stalls in the engine's own unit (see above).
    pub stall_count: u64,
}

impl WriteStalls {
    /// What accumulated between `earlier` and `self` (both cumulative since the engine opened).
    pub fn since(&self, earlier: &WriteStalls) -> WriteStalls {
        WriteStalls {
            stall_micros: self.stall_micros.saturating_sub(earlier.stall_micros),
            stall_count: self.stall_count.saturating_sub(earlier.stall_count),
        }
    }

    /// The stall time in seconds.
    pub fn stall_seconds(&self) -> f64 {
        self.stall_micros as f64 / 1e6
    }
}

/// A database opened for a run.
pub trait Engine: Sync + Sized {
    /// A per-thread handle (owns the thread's reusable buffers and options).
    type Session<'a>: Session
    where
        Self: 'a;

    /// A session for the calling thread.
    fn session(&self) -> Result<Self::Session<'_>>;

    /// Flushes memtables and waits until no flush or compaction is pending or running.
    fn settle(&self) -> Result<()>;

    /// The engine's full effective configuration, for the report.
    fn configuration(&self) -> String;

    /// The engine's own statistics dump (levels, flushes, compactions, stalls), for diagnosis.
    fn statistics(&self) -> String;

    /// The write stalls since the database opened; `None` when the engine would not say.
    fn write_stalls(&self) -> Option<WriteStalls>;

    /// Closes the database, reporting errors.
    fn close(self) -> Result<()>;
}

/// The operations a worker thread issues.
pub trait Session {
    /// Stores one key (a batch of one, as the engine's own `put` does).
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes one key.
    fn delete(&mut self, key: &[u8]) -> Result<()>;
    /// Adds a put to the pending batch.
    fn batch_put(&mut self, key: &[u8], value: &[u8]);
    /// Adds a delete to the pending batch.
    fn batch_delete(&mut self, key: &[u8]);
    /// Writes the pending batch atomically and starts a new one.
    fn commit_batch(&mut self) -> Result<()>;
    /// Reads a key into `value` (replacing its contents); returns false when the key is absent.
    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;
    /// Creates an iterator, positions it at the first key `>= start` and reads up to `limit`
    /// entries, noting them in `capture`.
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome>;
    /// Creates one iterator and lends it to `body`, which scans with it as often as it likes
    /// (each scan a seek, then `next`); the iterator lives until `body` returns.
    fn with_reseeked_iterator(&mut self, body: &mut dyn FnMut(&mut dyn Scanner) -> Result<()>) -> Result<()>;
    /// Begins a transaction (with its snapshot taken now) in the mode the engine was opened
    /// with; fails when the engine was opened without transactions or one is already open.
    fn begin_transaction(&mut self) -> Result<()>;
    /// Reads `key` at the open transaction's snapshot into `value` (its own writes first);
    /// with `for_update`, locks the key exclusively first (pessimistic mode) and makes it count
    /// as written for the validation. Returns false when the key is absent.
    fn transaction_read(
        &mut self,
        key: &[u8],
        for_update: bool,
        value: &mut Vec<u8>,
    ) -> std::result::Result<bool, TransactionError>;
    /// Writes `key` in the open transaction (pessimistic mode locks it first).
    fn transaction_put(&mut self, key: &[u8], value: &[u8]) -> std::result::Result<(), TransactionError>;
    /// Commits the open transaction; it is over whether or not the commit succeeded.
    fn commit_transaction(&mut self) -> std::result::Result<(), TransactionError>;
    /// Rolls the open transaction back (releasing its locks); nothing to do when none is open.
    fn rollback_transaction(&mut self) -> Result<()>;
}

/// The settings an engine is opened with, as the report prints them (the engine's own dump
/// follows when a run has written it).
pub fn describe_settings(kind: EngineKind, settings: &EngineSettings) -> String {
    match kind {
        EngineKind::Riptide => match riptide_engine::options(settings) {
            Ok(options) => format!("{options:#?}"),
            Err(error) => format!("invalid Riptide options: {error}"),
        },
        EngineKind::Rocksdb => rocksdb_settings_text(settings),
        EngineKind::Tidesdb => tidesdb_settings_text(settings),
    }
}

/// The TidesDB settings the benchtool sets (everything else is TidesDB's default; a run's
/// configuration dump adds the full effective configuration).
pub fn tidesdb_settings_text(settings: &EngineSettings) -> String {
    let bloom = if settings.bloom {
        "bloom filters on, false-positive rate 0.01 (what 10 bits per key give)"
    } else {
        "bloom filters off"
    };
    let mut lines = vec![
        "one column family (\"bench\") holding every key".to_string(),
        format!(
            "memtable_write_buffer_size = {} bytes (one memtable shared by the column families)",
            settings.memtable_size_bytes
        ),
        format!("block_cache_size = {} bytes", settings.block_cache_size_bytes),
        "encoding pipeline = [LZ4] (key log and separated values)".to_string(),
        bloom.to_string(),
        if settings.sync {
            "memtable_sync_mode = FULL (the WAL is synced by every commit)".to_string()
        } else {
            "memtable_sync_mode = NONE (WAL on, no sync per commit)".to_string()
        },
        "log_level = WARN (INFO logs every flush and compaction on stderr)".to_string(),
        match settings.min_blob_size_bytes {
            Some(min_blob_size_bytes) => format!(
                "value_separation_threshold = {min_blob_size_bytes} bytes (values of at least this size go to the \
                 value log, as the other engines' blob files take them in this run)"
            ),
            None => "value_separation_threshold = TidesDB's default, 1024 bytes (values of 1 KiB or more go to the \
                     value log; the other engines keep every value inline in this run)"
                .to_string(),
        },
        "everything else TidesDB's default (flush and compaction threads, level ratio, klog block size, stall \
         thresholds)"
            .to_string(),
        "writes: a put, delete or batch is one READ COMMITTED transaction, reset and reused per session".to_string(),
        "reads: a get or scan reads in a READ COMMITTED transaction reset for it; scans: a new iterator per scan, \
         or in _reseek tests one per thread (in a transaction reset once) sought again per scan"
            .to_string(),
    ];
    if settings.max_memory_bytes > 0 {
        lines.push(format!(
            "memory budget {} bytes: not applied (the binding exposes no engine-wide memory limit)",
            settings.max_memory_bytes
        ));
    }
    if settings.transactions.is_some() {
        lines.push(
            "transactions: SNAPSHOT isolation (frozen snapshot, written keys first-committer-wins at commit), the \
             optimistic mode only"
                .to_string(),
        );
    }
    lines.join("\n")
}

/// The RocksDB options the benchtool sets (everything else is RocksDB's default).
pub fn rocksdb_settings_text(settings: &EngineSettings) -> String {
    let bloom = if settings.bloom {
        format!("bloom filter {BLOOM_BITS_PER_KEY} bits/key (full filter)")
    } else {
        "no filter".to_string()
    };
    let lines = [
        "create_if_missing = true".to_string(),
        format!("increase_parallelism({ROCKSDB_BACKGROUND_JOBS})"),
        format!("max_background_jobs = {ROCKSDB_BACKGROUND_JOBS}"),
        "level_compaction_dynamic_level_bytes = true".to_string(),
        format!("write_buffer_size = {} bytes", settings.memtable_size_bytes),
        "max_write_buffer_number = 3 (one active and two immutable, like Riptide's max_immutable_memtables = 2)"
            .to_string(),
        "compression = LZ4 (all levels)".to_string(),
        "max_open_files = 1000 (Riptide's max_open_tables)".to_string(),
        format!("block_based_table: block_size = {BLOCK_SIZE_BYTES} bytes, {bloom}"),
        if settings.max_memory_bytes > 0 {
            format!(
                "memory budget {} bytes: block_cache = HyperClockCache of that size, memtables charged to it by a \
                 WriteBufferManager with buffer_size = half the budget and allow_stall = true, \
                 cache_index_and_filter_blocks = true",
                settings.max_memory_bytes
            )
        } else {
            format!(
                "block_based_table: block_cache = HyperClockCache of {} bytes (estimated_entry_charge 0: it sizes its \
                 table itself; RocksDB's recommended cache, instead of the LRU cache)",
                settings.block_cache_size_bytes
            )
        },
        "enable_pipelined_write = true (the tuning guide's choice for concurrent writers: batches of 1,000 from 8 \
         threads, median of 7 paired runs, 604K vs 481K ops/s; single puts 186K vs 173K, within the noise); \
         allow_concurrent_memtable_write and enable_write_thread_adaptive_yield stay on (RocksDB's defaults); \
         unordered_write off (not equal semantics); data block hash index and bytes_per_sync off (not faster \
         here; bench/README.md)"
            .to_string(),
        "write options: WAL on; WriteOptions.sync = true only in --sync runs (the sync_* tests)".to_string(),
        "reads: get_pinned_opt with one ReadOptions per thread; scans: a raw iterator per scan, or in _reseek tests \
         one per thread sought again per scan"
            .to_string(),
    ];
    let mut text = lines.join("\n");
    if let Some(min_blob_size_bytes) = settings.min_blob_size_bytes {
        text.push_str(&format!(
            "\nenable_blob_files = true, min_blob_size = {min_blob_size_bytes} bytes, blob_compression_type = LZ4 \
             (integrated BlobDB; compressed as Riptide's blob values and TidesDB's value log are; blob garbage \
             collection off, RocksDB's default)"
        ));
    }
    if let Some(mode) = settings.transactions {
        text.push('\n');
        text.push_str(&rocksdb_transaction_settings_text(mode));
    }
    text
}

/// The transaction settings of a RocksDB run in `mode` (see [`rocksdb_settings_text`]).
pub fn rocksdb_transaction_settings_text(mode: TransactionMode) -> String {
    let lock_timeout_ms = TRANSACTION_LOCK_TIMEOUT.as_millis();
    match mode {
        TransactionMode::Pessimistic => format!(
            "transactions: TransactionDB (write-committed); TransactionDBOptions.transaction_lock_timeout = \
             {lock_timeout_ms} ms; TransactionOptions: set_snapshot = true, deadlock_detect = true, lock_timeout = \
             {lock_timeout_ms} ms; reads: get_for_update (exclusive) with ReadOptions at the transaction's snapshot; \
             populate batches through TransactionDB::Write"
        ),
        TransactionMode::Optimistic => "transactions: OptimisticTransactionDB; OptimisticTransactionOptions: \
                                        set_snapshot = true (written keys validated at commit against the snapshot); \
                                        reads: get with ReadOptions at the transaction's snapshot"
            .to_string(),
    }
}

/// Opens `kind` in `path` and calls `body` with it (dispatching to the concrete type).
pub fn with_engine<T>(
    kind: EngineKind,
    path: &Path,
    settings: &EngineSettings,
    body: impl EngineUser<Output = T>,
) -> Result<T> {
    match kind {
        EngineKind::Riptide => body.run(riptide_engine::RiptideEngine::open(path, settings)?),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => body.run(rocksdb_engine::RocksDbEngine::open(path, settings)?),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => crate::bail!(
            "this binary was built without RocksDB; rebuild with `--features rocksdb` (as `make bench` does)"
        ),
        #[cfg(feature = "tidesdb")]
        EngineKind::Tidesdb => body.run(tidesdb_engine::TidesDbEngine::open(path, settings)?),
        #[cfg(not(feature = "tidesdb"))]
        EngineKind::Tidesdb => crate::bail!(
            "this binary was built without TidesDB; rebuild with `--features tidesdb` (as `make bench` does)"
        ),
    }
}

/// Code that runs against any engine (a generic closure, which Rust closures cannot be).
pub trait EngineUser {
    /// What the code returns.
    type Output;
    /// Runs against the opened engine, which it must close.
    fn run<E: Engine>(self, engine: E) -> Result<Self::Output>;
}
