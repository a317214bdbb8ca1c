//! RocksDB behind the [`Engine`] interface, configured as a fair peer of Riptide.
//!
//! The options mirror Riptide's (see [`super::rocksdb_settings_text`] for the list): LZ4,
//! full bloom filters at 10 bits per key, a block cache of the same size, 4 KiB blocks,
//! 64 MiB write buffers with up to two immutable ones, 2 background jobs on this 2-core
//! machine, dynamic level sizes, WAL on and synced only with `--sync`. Beyond the aligned sizes
//! RocksDB gets what its tuning guide recommends and measured faster here ([`RocksDbTuning`]:
//! the HyperClockCache and pipelined writes); `ROCKSDB_BENCH_TUNING` overrides those choices for measurements
//! (`bench/rocksdb-tuning.sh`, results in bench/README.md).
//!
//! For the transaction workload the same options open a `TransactionDB` (pessimistic) or an
//! `OptimisticTransactionDB` instead of a plain `DB` (see
//! [`super::rocksdb_transaction_settings_text`]): every transaction sets its snapshot at begin
//! and reads at it, so that, like Riptide's REPEATABLE READ, a key written or read for update by
//! someone else after the snapshot fails the transaction (first committer wins). Plain puts, batches, gets and scans (the populate
//! phase) go through whichever handle is open. A session holds at most one transaction, with
//! read options pointing at that transaction's snapshot; errors that concurrency control
//! causes are told apart by [`super::rocksdb_status::classify_rocksdb_error`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, Cache, DBAccess, DBCompressionType, DBRawIteratorWithThreadMode, DataBlockIndexType,
    MultiThreaded, OptimisticTransactionDB, OptimisticTransactionOptions, Options, ReadOptions, Transaction,
    TransactionDBOptions, TransactionOptions, WaitForCompactOptions, WriteBatch, WriteBatchWithTransaction,
    WriteBufferManager, WriteOptions, DB,
};

use super::rocksdb_properties::{
    parse_cumulative_stall_micros, parse_stall_condition_counts, CF_WRITE_STALL_PROPERTY, DB_STATS_PROPERTY,
};
use super::rocksdb_status::classify_rocksdb_error;
use super::{
    rocksdb_settings_text, Engine, EngineSettings, ScanCapture, ScanOutcome, Scanner, Session, TransactionError,
    TransactionMode, WriteStalls, BLOCK_SIZE_BYTES, BLOOM_BITS_PER_KEY, ROCKSDB_BACKGROUND_JOBS,
    TRANSACTION_LOCK_TIMEOUT,
};
use crate::bail;
use crate::error::{BenchError, Context, Result};

/// How often settling a `TransactionDB` looks whether flushes and compactions are done (it has
/// no `wait_for_compact`).
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The integer properties that are all zero once no flush or compaction is pending or running.
const BACKGROUND_WORK_PROPERTIES: [&str; 4] = [
    "rocksdb.mem-table-flush-pending",
    "rocksdb.num-running-flushes",
    "rocksdb.compaction-pending",
    "rocksdb.num-running-compactions",
];

/// The environment variable holding tuning overrides for experiments, e.g.
/// `cache=lru,pipelined_write=true`; the report's configuration shows what a run used.
pub const TUNING_VARIABLE: &str = "ROCKSDB_BENCH_TUNING";

/// The RocksDB settings beyond the aligned sizes that the benchtool chooses (see
/// [`super::rocksdb_settings_text`] for what each was measured to do).
#[derive(Clone, Debug, PartialEq)]
pub struct RocksDbTuning {
    /// HyperClockCache (RocksDB's recommended block cache) instead of the LRU cache.
    pub hyper_clock_cache: bool,
    /// `enable_pipelined_write`: the WAL write and the memtable insert of write groups overlap.
    pub pipelined_write: bool,
    /// `allow_concurrent_memtable_write` (RocksDB's default: on).
    pub concurrent_memtable_write: bool,
    /// `enable_write_thread_adaptive_yield` (RocksDB's default: on).
    pub adaptive_yield: bool,
    /// `bytes_per_sync` (0: RocksDB's default, off).
    pub bytes_per_sync: u64,
    /// A hash index in data blocks for point lookups (`kDataBlockBinaryAndHash`).
    pub data_block_hash_index: bool,
}

impl Default for RocksDbTuning {
    fn default() -> RocksDbTuning {
        RocksDbTuning {
            hyper_clock_cache: true,
            pipelined_write: true,
            concurrent_memtable_write: true,
            adaptive_yield: true,
            bytes_per_sync: 0,
            data_block_hash_index: false,
        }
    }
}

impl RocksDbTuning {
    /// The defaults with the overrides of [`TUNING_VARIABLE`] applied.
    pub fn from_environment() -> Result<RocksDbTuning> {
        let mut tuning = RocksDbTuning::default();
        if let Ok(text) = std::env::var(TUNING_VARIABLE) {
            tuning.apply(&text).with_context(|| format!("reading {TUNING_VARIABLE}={text:?}"))?;
        }
        Ok(tuning)
    }

    /// Applies comma-separated `name=value` overrides; an unknown name or value is an error,
    /// so a typo never measures the defaults.
    pub fn apply(&mut self, text: &str) -> Result<()> {
        for setting in text.split(',').map(str::trim).filter(|setting| !setting.is_empty()) {
            let (name, value) =
                setting.split_once('=').ok_or_else(|| BenchError::new(format!("{setting:?} is not name=value")))?;
            let flag = || match value {
                "true" | "1" | "on" => Ok(true),
                "false" | "0" | "off" => Ok(false),
                _ => Err(BenchError::new(format!("{name}: {value:?} is not true or false"))),
            };
            match name {
                "cache" => {
                    self.hyper_clock_cache = match value {
                        "hyper_clock" => true,
                        "lru" => false,
                        _ => bail!("cache: {value:?} is neither hyper_clock nor lru"),
                    }
                }
                "pipelined_write" => self.pipelined_write = flag()?,
                "concurrent_memtable_write" => self.concurrent_memtable_write = flag()?,
                "adaptive_yield" => self.adaptive_yield = flag()?,
                "data_block_hash_index" => self.data_block_hash_index = flag()?,
                "bytes_per_sync" => {
                    self.bytes_per_sync =
                        value.parse().map_err(|_| BenchError::new(format!("bytes_per_sync: {value:?}")))?
                }
                _ => bail!("unknown tuning option {name:?}"),
            }
        }
        Ok(())
    }
}

/// The pessimistic transaction database. Its thread mode only decides how column family handles
/// are shared (the runs use the default column family alone), but the `rocksdb` crate gives
/// the properties (`property_value`, `property_int_value`) to the multi-threaded mode only.
type TransactionDB = rocksdb::TransactionDB<MultiThreaded>;

/// The open database: a plain `DB`, or one opened for transactions in one mode together with
/// the options of every transaction.
enum Handle {
    Plain(DB),
    Pessimistic(TransactionDB, TransactionOptions),
    Optimistic(OptimisticTransactionDB, OptimisticTransactionOptions),
}

/// Evaluates `$body` with `$db` bound to whichever database `$handle` holds (the three types
/// share the methods used here, but no trait).
macro_rules! with_db {
    ($handle:expr, $db:ident => $body:expr) => {
        match $handle {
            Handle::Plain($db) => $body,
            Handle::Pessimistic($db, _) => $body,
            Handle::Optimistic($db, _) => $body,
        }
    };
}

/// The lock timeout in milliseconds, as RocksDB's options take it.
fn lock_timeout_ms() -> i64 {
    i64::try_from(TRANSACTION_LOCK_TIMEOUT.as_millis()).unwrap_or(i64::MAX)
}

/// An open RocksDB database.
pub struct RocksDbEngine {
    db: Handle,
    path: PathBuf,
    settings: EngineSettings,
    tuning: RocksDbTuning,
    write_options: WriteOptions,
    // The cache (and the write buffer manager charging it) must outlive the database.
    _cache: Cache,
    _write_buffer_manager: Option<WriteBufferManager>,
}

impl RocksDbEngine {
    /// Opens (creating) the database in `path`.
    pub fn open(path: &Path, settings: &EngineSettings) -> Result<RocksDbEngine> {
        // Under a memory budget, the cache has the whole budget as its capacity, memtables are
        // charged to it by a write buffer manager (which stalls writers past its limit), and
        // index and filter blocks live in it: RocksDB's way of bounding memory by one number.
        let tuning = RocksDbTuning::from_environment()?;
        let budget = settings.max_memory_bytes;
        let capacity = if budget > 0 { budget } else { settings.block_cache_size_bytes };
        // An estimated entry charge of 0 picks the HyperClockCache that sizes its table itself
        // (RocksDB's recommendation when the charge is not known, as with a write buffer
        // manager charging memtables to the cache).
        let cache = if tuning.hyper_clock_cache {
            Cache::new_hyper_clock_cache(capacity, 0)
        } else {
            Cache::new_lru_cache(capacity)
        };
        let write_buffer_manager = (budget > 0)
            .then(|| WriteBufferManager::new_write_buffer_manager_with_cache(budget / 2, true, cache.clone()));
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_size(BLOCK_SIZE_BYTES);
        table_options.set_block_cache(&cache);
        if budget > 0 {
            table_options.set_cache_index_and_filter_blocks(true);
        }
        if settings.bloom {
            table_options.set_bloom_filter(f64::from(BLOOM_BITS_PER_KEY), false);
        }
        if tuning.data_block_hash_index {
            table_options.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        }
        let mut options = Options::default();
        options.create_if_missing(true);
        options.increase_parallelism(ROCKSDB_BACKGROUND_JOBS);
        options.set_max_background_jobs(ROCKSDB_BACKGROUND_JOBS);
        options.set_level_compaction_dynamic_level_bytes(true);
        options.set_write_buffer_size(settings.memtable_size_bytes);
        options.set_max_write_buffer_number(3);
        options.set_compression_type(DBCompressionType::Lz4);
        options.set_max_open_files(1000);
        options.set_block_based_table_factory(&table_options);
        if let Some(manager) = &write_buffer_manager {
            options.set_write_buffer_manager(manager);
        }
        if let Some(min_blob_size_bytes) = settings.min_blob_size_bytes {
            // RocksDB's integrated BlobDB: values of at least this size go to blob files at
            // flush, compaction moves references (blob garbage collection is off by default).
            options.set_enable_blob_files(true);
            options.set_min_blob_size(min_blob_size_bytes as u64);
            // Compressed like Riptide's blob values and TidesDB's value log in the same runs
            // (RocksDB's own default is none).
            options.set_blob_compression_type(DBCompressionType::Lz4);
        }
        options.set_enable_pipelined_write(tuning.pipelined_write);
        options.set_allow_concurrent_memtable_write(tuning.concurrent_memtable_write);
        options.set_enable_write_thread_adaptive_yield(tuning.adaptive_yield);
        if tuning.bytes_per_sync > 0 {
            options.set_bytes_per_sync(tuning.bytes_per_sync);
        }
        let opening = || format!("opening RocksDB in {}", path.display());
        let db = match settings.transactions {
            None => Handle::Plain(DB::open(&options, path).with_context(opening)?),
            Some(TransactionMode::Pessimistic) => {
                let mut database_options = TransactionDBOptions::default();
                database_options.set_txn_lock_timeout(lock_timeout_ms());
                let mut transaction_options = TransactionOptions::default();
                transaction_options.set_snapshot(true);
                transaction_options.set_deadlock_detect(true);
                transaction_options.set_lock_timeout(lock_timeout_ms());
                let db = TransactionDB::open(&options, &database_options, path).with_context(opening)?;
                Handle::Pessimistic(db, transaction_options)
            }
            Some(TransactionMode::Optimistic) => {
                let mut transaction_options = OptimisticTransactionOptions::default();
                transaction_options.set_snapshot(true);
                Handle::Optimistic(
                    OptimisticTransactionDB::open(&options, path).with_context(opening)?,
                    transaction_options,
                )
            }
        };
        let mut write_options = WriteOptions::default();
        write_options.set_sync(settings.sync);
        Ok(RocksDbEngine {
            db,
            path: path.to_path_buf(),
            settings: settings.clone(),
            tuning,
            write_options,
            _cache: cache,
            _write_buffer_manager: write_buffer_manager,
        })
    }

    /// The newest `OPTIONS-*` file RocksDB wrote: its complete effective configuration.
    fn options_file_text(&self) -> Option<String> {
        let mut newest: Option<(u64, PathBuf)> = None;
        for entry in std::fs::read_dir(&self.path).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(number) = name.strip_prefix("OPTIONS-").and_then(|rest| rest.parse::<u64>().ok()) {
                if newest.as_ref().is_none_or(|(best, _)| number > *best) {
                    newest = Some((number, entry.path()));
                }
            }
        }
        std::fs::read_to_string(newest?.1).ok()
    }
}

impl Engine for RocksDbEngine {
    type Session<'a> = RocksDbSession<'a>;

    fn session(&self) -> Result<RocksDbSession<'_>> {
        let batch = match &self.db {
            Handle::Plain(_) => PendingBatch::Plain(WriteBatch::default()),
            Handle::Pessimistic(..) | Handle::Optimistic(..) => PendingBatch::Transactional(Default::default()),
        };
        Ok(RocksDbSession { engine: self, batch, read_options: ReadOptions::default(), transaction: None })
    }

    fn settle(&self) -> Result<()> {
        with_db!(&self.db, db => db.flush()).context("flushing RocksDB")?;
        let mut wait_options = WaitForCompactOptions::default();
        wait_options.set_flush(true);
        match &self.db {
            Handle::Plain(db) => db.wait_for_compact(&wait_options),
            Handle::Optimistic(db, _) => db.wait_for_compact(&wait_options),
            Handle::Pessimistic(db, _) => {
                // The `TransactionDB` wrapper has no `wait_for_compact`: wait until the same
                // work it waits for shows as none pending or running.
                loop {
                    let mut busy = false;
                    for property in BACKGROUND_WORK_PROPERTIES {
                        let value = db.property_int_value(property).with_context(|| format!("reading {property}"))?;
                        busy |= value.is_some_and(|value| value > 0);
                    }
                    if !busy {
                        break Ok(());
                    }
                    std::thread::sleep(SETTLE_POLL_INTERVAL);
                }
            }
        }
        .context("waiting for RocksDB's compactions")?;
        Ok(())
    }

    fn configuration(&self) -> String {
        let mut text = format!("rocksdb crate 0.25 (RocksDB 11.8.1)\n{}", rocksdb_settings_text(&self.settings));
        if self.tuning != RocksDbTuning::default() {
            text.push_str(&format!("\n{TUNING_VARIABLE} overrides in force: {:?}", self.tuning));
        }
        if let Some(options_file) = self.options_file_text() {
            text.push_str("\n\nEffective options (RocksDB's OPTIONS file):\n");
            text.push_str(&options_file);
        }
        text
    }

    fn statistics(&self) -> String {
        match with_db!(&self.db, db => db.property_value("rocksdb.stats")) {
            Ok(Some(text)) => text,
            Ok(None) => "RocksDB returned no rocksdb.stats".to_string(),
            Err(error) => format!("reading rocksdb.stats failed: {error}"),
        }
    }

    fn write_stalls(&self) -> Option<WriteStalls> {
        // Both figures come from properties RocksDB keeps anyway; enabling its statistics object
        // would give the same stall time but would also change what is being measured.
        let db_stats = with_db!(&self.db, db => db.property_value(DB_STATS_PROPERTY)).ok()??;
        let stall_micros = parse_cumulative_stall_micros(&db_stats)?;
        let stall_text = with_db!(&self.db, db => db.property_value(CF_WRITE_STALL_PROPERTY)).ok()??;
        let counts = parse_stall_condition_counts(&stall_text)?;
        Some(WriteStalls { stall_micros, stall_count: counts.delays + counts.stops })
    }

    fn close(self) -> Result<()> {
        // RocksDB closes when the handle is dropped; it reports no error there.
        drop(self.db);
        Ok(())
    }
}

/// The batch a session is filling: the transaction databases take batches of another type.
enum PendingBatch {
    Plain(WriteBatch),
    Transactional(WriteBatchWithTransaction<true>),
}

/// An open transaction with the read options that read at its snapshot.
struct SnapshotTransaction<'a, D> {
    transaction: Transaction<'a, D>,
    /// Points at the snapshot the transaction took at begin, which the transaction owns and
    /// keeps until it is dropped; the read options are dropped with it and never used after.
    read_options: ReadOptions,
}

impl<'a, D> SnapshotTransaction<'a, D> {
    fn new(transaction: Transaction<'a, D>) -> SnapshotTransaction<'a, D> {
        let mut read_options = ReadOptions::default();
        // The wrapper `snapshot()` returns is a copy of the transaction's snapshot pointer,
        // freed at the end of this block; the read options keep the pointer itself.
        read_options.set_snapshot(&transaction.snapshot());
        SnapshotTransaction { transaction, read_options }
    }

    fn read(&self, key: &[u8], for_update: bool, value: &mut Vec<u8>) -> std::result::Result<bool, TransactionError> {
        let found = if for_update {
            self.transaction.get_pinned_for_update_opt(key, true, &self.read_options)
        } else {
            self.transaction.get_pinned_opt(key, &self.read_options)
        };
        match found.map_err(classify)? {
            Some(bytes) => {
                value.clear();
                value.extend_from_slice(&bytes);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The open transaction of a session, of the database's type.
enum OpenTransaction<'a> {
    Pessimistic(SnapshotTransaction<'a, TransactionDB>),
    Optimistic(SnapshotTransaction<'a, OptimisticTransactionDB>),
}

/// A RocksDB error of a transaction operation as the workload counts it.
fn classify(error: rocksdb::Error) -> TransactionError {
    match classify_rocksdb_error(error.as_ref()) {
        Some(kind) => TransactionError::Abort(kind),
        None => TransactionError::Failed(BenchError::new(format!("RocksDB transaction: {error}"))),
    }
}

fn no_open_transaction() -> TransactionError {
    TransactionError::Failed(BenchError::new("no transaction is open"))
}

/// A thread's handle on a [`RocksDbEngine`].
pub struct RocksDbSession<'a> {
    engine: &'a RocksDbEngine,
    batch: PendingBatch,
    read_options: ReadOptions,
    transaction: Option<OpenTransaction<'a>>,
}

impl Session for RocksDbSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let write_options = &self.engine.write_options;
        with_db!(&self.engine.db, db => db.put_opt(key, value, write_options)).context("RocksDB put")
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let write_options = &self.engine.write_options;
        with_db!(&self.engine.db, db => db.delete_opt(key, write_options)).context("RocksDB delete")
    }

    fn batch_put(&mut self, key: &[u8], value: &[u8]) {
        match &mut self.batch {
            PendingBatch::Plain(batch) => batch.put(key, value),
            PendingBatch::Transactional(batch) => batch.put(key, value),
        }
    }

    fn batch_delete(&mut self, key: &[u8]) {
        match &mut self.batch {
            PendingBatch::Plain(batch) => batch.delete(key),
            PendingBatch::Transactional(batch) => batch.delete(key),
        }
    }

    fn commit_batch(&mut self) -> Result<()> {
        let write_options = &self.engine.write_options;
        match (&self.engine.db, &mut self.batch) {
            (Handle::Plain(db), PendingBatch::Plain(batch)) => db.write_opt(std::mem::take(batch), write_options),
            (Handle::Pessimistic(db, _), PendingBatch::Transactional(batch)) => {
                db.write_opt(std::mem::take(batch), write_options)
            }
            (Handle::Optimistic(db, _), PendingBatch::Transactional(batch)) => {
                db.write_opt(std::mem::take(batch), write_options)
            }
            _ => bail!("internal error: the pending batch does not fit the RocksDB handle"),
        }
        .context("RocksDB write")
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let read_options = &self.read_options;
        // A pinned read lends the value from the block cache or memtable; the copy into the
        // caller's reused buffer is the one copy a caller that keeps the value pays.
        let found = with_db!(&self.engine.db, db => db.get_pinned_opt(key, read_options).map(|pinned| match pinned {
            Some(bytes) => {
                value.clear();
                value.extend_from_slice(&bytes);
                true
            }
            None => false,
        }));
        found.context("RocksDB get")
    }

    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        with_db!(&self.engine.db, db => {
            let mut iterator = db.raw_iterator_opt(ReadOptions::default());
            scan_with(&mut iterator, start, limit, capture)
        })
    }

    fn with_reseeked_iterator(&mut self, body: &mut dyn FnMut(&mut dyn Scanner) -> Result<()>) -> Result<()> {
        with_db!(&self.engine.db, db => {
            let mut scanner = RocksDbScanner { iterator: db.raw_iterator_opt(ReadOptions::default()) };
            body(&mut scanner)
        })
    }

    fn begin_transaction(&mut self) -> Result<()> {
        if self.transaction.is_some() {
            bail!("a transaction is already open in this session");
        }
        let engine = self.engine;
        let write_options = &engine.write_options;
        self.transaction = Some(match &engine.db {
            Handle::Plain(_) => {
                bail!("RocksDB was opened without transactions (only the transaction workload uses them)")
            }
            Handle::Pessimistic(db, options) => {
                OpenTransaction::Pessimistic(SnapshotTransaction::new(db.transaction_opt(write_options, options)))
            }
            Handle::Optimistic(db, options) => {
                OpenTransaction::Optimistic(SnapshotTransaction::new(db.transaction_opt(write_options, options)))
            }
        });
        Ok(())
    }

    fn transaction_read(
        &mut self,
        key: &[u8],
        for_update: bool,
        value: &mut Vec<u8>,
    ) -> std::result::Result<bool, TransactionError> {
        match &self.transaction {
            Some(OpenTransaction::Pessimistic(open)) => open.read(key, for_update, value),
            Some(OpenTransaction::Optimistic(open)) => open.read(key, for_update, value),
            None => Err(no_open_transaction()),
        }
    }

    fn transaction_put(&mut self, key: &[u8], value: &[u8]) -> std::result::Result<(), TransactionError> {
        match &self.transaction {
            Some(OpenTransaction::Pessimistic(open)) => open.transaction.put(key, value).map_err(classify),
            Some(OpenTransaction::Optimistic(open)) => open.transaction.put(key, value).map_err(classify),
            None => Err(no_open_transaction()),
        }
    }

    fn commit_transaction(&mut self) -> std::result::Result<(), TransactionError> {
        // A failed commit leaves nothing written; dropping the transaction then rolls it back.
        match self.transaction.take() {
            Some(OpenTransaction::Pessimistic(open)) => open.transaction.commit().map_err(classify),
            Some(OpenTransaction::Optimistic(open)) => open.transaction.commit().map_err(classify),
            None => Err(no_open_transaction()),
        }
    }

    fn rollback_transaction(&mut self) -> Result<()> {
        match self.transaction.take() {
            Some(OpenTransaction::Pessimistic(open)) => open.transaction.rollback(),
            Some(OpenTransaction::Optimistic(open)) => open.transaction.rollback(),
            None => Ok(()),
        }
        .context("rolling back a RocksDB transaction")
    }
}

/// Seeks `iterator` to `start` and reads up to `limit` entries (RocksDB documents re-seeking a
/// raw iterator as its intended use; it reads at the snapshot it was created with).
fn scan_with<D: DBAccess>(
    iterator: &mut DBRawIteratorWithThreadMode<'_, D>,
    start: &[u8],
    limit: usize,
    capture: &mut ScanCapture,
) -> Result<ScanOutcome> {
    iterator.seek(start);
    let mut outcome = ScanOutcome::default();
    while let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
        if outcome.visit(key, value, capture, limit) {
            break;
        }
        iterator.next();
    }
    iterator.status().context("RocksDB iterator")?;
    Ok(outcome)
}

/// A thread's one raw iterator, re-seeked for every scan.
struct RocksDbScanner<'a, D: DBAccess> {
    iterator: DBRawIteratorWithThreadMode<'a, D>,
}

impl<D: DBAccess> Scanner for RocksDbScanner<'_, D> {
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        scan_with(&mut self.iterator, start, limit, capture)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_overrides_parse_and_typos_fail() {
        let mut tuning = RocksDbTuning::default();
        assert!(tuning.hyper_clock_cache && tuning.pipelined_write && !tuning.data_block_hash_index);
        tuning.apply("cache=lru, pipelined_write=false,bytes_per_sync=1048576,data_block_hash_index=1").unwrap();
        assert!(!tuning.hyper_clock_cache && !tuning.pipelined_write && tuning.data_block_hash_index);
        assert_eq!(tuning.bytes_per_sync, 1 << 20);
        assert!(tuning.apply("cache=clock").is_err());
        assert!(tuning.apply("pipelined_writes=true").is_err());
        assert!(tuning.apply("adaptive_yield=maybe").is_err());
        assert!(tuning.apply("bytes_per_sync").is_err());
    }
}
