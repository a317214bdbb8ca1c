//! Riptide behind the [`Engine`] interface.
//!
//! Options: the memtable and block cache sizes of the run, LZ4, 10 bloom bits per key (or no
//! filter), 4 KiB blocks, WAL without background sync ([`SyncMode::None`]); `--sync` makes every
//! write a synced write (`WriteOptions { sync: true }`), shared by group commit.
//!
//! Transactions (the transaction workload): REPEATABLE READ, pessimistic or optimistic as the
//! run asks, [`TRANSACTION_LOCK_TIMEOUT`], deadlock detection on, no lock limit, commits synced
//! only with `--sync` ([`transaction_options`]). Each session holds at most one transaction;
//! [`classify_error`] tells the aborts (conflict, deadlock, lock timeout) from real failures.
//!
//! For tuning experiments, the environment variable `RIPTIDE_BENCH_TUNING` overrides compaction,
//! background and table block options, e.g. `max_background_compactions=1,compaction_priority=round_robin`;
//! the report's configuration dump shows the options a run really used.

use std::path::Path;

use riptide::{
    CompactionPriority, Compression, ConcurrencyMode, Db, DbIterator, IsolationLevel, Options, ReadOptions, SyncMode,
    Transaction, TransactionOptions, WriteBatch, WriteOptions,
};

use super::{
    AbortKind, Engine, EngineSettings, ScanCapture, ScanOutcome, Scanner, Session, TransactionError, TransactionMode,
    WriteStalls, BLOCK_SIZE_BYTES, BLOOM_BITS_PER_KEY, TRANSACTION_LOCK_TIMEOUT,
};
use crate::bail;
use crate::error::{BenchError, Context, Result};

/// The environment variable holding tuning overrides (see the module documentation).
pub const TUNING_VARIABLE: &str = "RIPTIDE_BENCH_TUNING";

/// The Riptide options for `settings`, with the overrides of [`TUNING_VARIABLE`] applied.
pub fn options(settings: &EngineSettings) -> Result<Options> {
    let mut options = Options {
        memtable_size_bytes: settings.memtable_size_bytes,
        block_cache_size_bytes: settings.block_cache_size_bytes,
        max_memory_bytes: settings.max_memory_bytes as u64,
        min_blob_size_bytes: settings.min_blob_size_bytes,
        bloom_bits_per_key: if settings.bloom { BLOOM_BITS_PER_KEY } else { 0 },
        block_size_bytes: BLOCK_SIZE_BYTES,
        compression: Compression::Lz4,
        // Like the other engines' in `_blob` runs: RocksDB's blob files and TidesDB's value log
        // are LZ4-compressed as well.
        blob_compression: Compression::Lz4,
        wal_sync_mode: SyncMode::None,
        ..Options::default()
    };
    if let Ok(tuning) = std::env::var(TUNING_VARIABLE) {
        apply_tuning(&mut options, &tuning).with_context(|| format!("reading {TUNING_VARIABLE}={tuning:?}"))?;
    }
    Ok(options)
}

/// The options of every transaction of a run in `mode`: REPEATABLE READ (snapshot isolation,
/// as RocksDB's transactions with a snapshot set), the common lock timeout, deadlock detection,
/// no lock limit and no lock escalation (RocksDB's TransactionDB has none; a transaction of the
/// workload locks a handful of keys anyway), and commits synced only when the run syncs its
/// writes.
pub fn transaction_options(mode: TransactionMode, sync: bool) -> TransactionOptions {
    TransactionOptions {
        isolation: IsolationLevel::RepeatableRead,
        mode: match mode {
            TransactionMode::Pessimistic => ConcurrencyMode::Pessimistic,
            TransactionMode::Optimistic => ConcurrencyMode::Optimistic,
        },
        lock_timeout: Some(TRANSACTION_LOCK_TIMEOUT),
        deadlock_detection: true,
        max_lock_count: None,
        lock_escalation_threshold: None,
        sync,
        // A transaction of the workload writes four keys: it never comes near spilling.
        write_memory_limit_bytes: TransactionOptions::default().write_memory_limit_bytes,
    }
}

/// A Riptide error of a transaction operation as the workload counts it: conflicts, deadlocks
/// and lock timeouts are aborts; everything else (including `Busy`, which only a lock limit
/// causes, and no run sets one) fails the run.
pub fn classify_error(error: riptide::Error) -> TransactionError {
    match error {
        riptide::Error::Conflict(_) => TransactionError::Abort(AbortKind::Conflict),
        riptide::Error::Deadlock(_) => TransactionError::Abort(AbortKind::Deadlock),
        riptide::Error::LockTimeout(_) => TransactionError::Abort(AbortKind::LockTimeout),
        other => TransactionError::Failed(BenchError::from(other)),
    }
}

/// Applies comma-separated `name=value` overrides to `options`; an unknown name or a value
/// that does not parse is an error, so a typo never runs a benchmark with the defaults.
fn apply_tuning(options: &mut Options, tuning: &str) -> Result<()> {
    for setting in tuning.split(',').map(str::trim).filter(|setting| !setting.is_empty()) {
        let (name, value) =
            setting.split_once('=').ok_or_else(|| BenchError::new(format!("{setting:?} is not name=value")))?;
        let number = || value.parse::<u64>().map_err(|_| BenchError::new(format!("{name}: {value:?} is not a number")));
        match name {
            "max_background_compactions" => options.max_background_compactions = number()? as usize,
            "max_background_flushes" => options.max_background_flushes = number()? as usize,
            "max_immutable_memtables" => options.max_immutable_memtables = number()? as usize,
            "max_subcompactions" => options.max_subcompactions = number()? as usize,
            "level_size_ratio" => options.level_size_ratio = number()?,
            "base_level_size_bytes" => options.base_level_size_bytes = number()?,
            "target_file_size_bytes" => options.target_file_size_bytes = number()?,
            "block_size_bytes" => options.block_size_bytes = number()? as usize,
            "block_restart_interval" => options.block_restart_interval = number()? as usize,
            "level0_compaction_trigger_files" => options.level0_compaction_trigger_files = number()? as usize,
            "level0_slowdown_writes_files" => options.level0_slowdown_writes_files = number()? as usize,
            "level0_stop_writes_files" => options.level0_stop_writes_files = number()? as usize,
            "read_compaction_bytes_per_table_seek" => options.read_compaction_bytes_per_table_seek = number()?,
            // Percent, so that the one number parser serves: 100 moves only wholly garbage
            // files' values, which is to say never (such files are deleted anyway).
            "blob_compression" => {
                options.blob_compression = match value {
                    "none" => Compression::None,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    "snappy" => Compression::Snappy,
                    _ => return Err(BenchError::new(format!("blob_compression: unknown {value:?}"))),
                }
            }
            "blob_garbage_collection_ratio_percent" => {
                options.blob_garbage_collection_ratio = number()? as f64 / 100.0;
            }
            "compaction_priority" => {
                options.compaction_priority = match value {
                    "min_overlapping_ratio" => CompactionPriority::MinOverlappingRatio,
                    "round_robin" => CompactionPriority::RoundRobin,
                    _ => return Err(BenchError::new(format!("compaction_priority: unknown {value:?}"))),
                }
            }
            _ => return Err(BenchError::new(format!("unknown tuning option {name:?}"))),
        }
    }
    Ok(())
}

/// An open Riptide database.
pub struct RiptideEngine {
    db: Db,
    options: Options,
    write_options: WriteOptions,
    /// The options of every transaction, when the run uses transactions.
    transaction_options: Option<TransactionOptions>,
}

impl RiptideEngine {
    /// Opens (creating) the database in `path`.
    pub fn open(path: &Path, settings: &EngineSettings) -> Result<RiptideEngine> {
        let options = options(settings)?;
        let db = Db::open(path, options.clone()).with_context(|| format!("opening Riptide in {}", path.display()))?;
        Ok(RiptideEngine {
            db,
            options,
            write_options: WriteOptions { sync: settings.sync },
            transaction_options: settings.transactions.map(|mode| transaction_options(mode, settings.sync)),
        })
    }

    /// The underlying database (for tests).
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for RiptideEngine {
    type Session<'a> = RiptideSession<'a>;

    fn session(&self) -> Result<RiptideSession<'_>> {
        Ok(RiptideSession {
            engine: self,
            batch: WriteBatch::new(),
            read_options: ReadOptions::default(),
            transaction: None,
        })
    }

    fn settle(&self) -> Result<()> {
        self.db.flush().context("flushing Riptide")?;
        self.db.wait_for_background_work().context("waiting for Riptide's background work")?;
        Ok(())
    }

    fn configuration(&self) -> String {
        let mut text = format!(
            "riptide {}\n{:#?}\nwrite options: WAL on; WriteOptions {{ sync: true }} only in --sync runs (the sync_* \
             tests); one WriteBatch per batch, put/delete for batches of one",
            env!("CARGO_PKG_VERSION"),
            self.options
        );
        if let Some(options) = &self.transaction_options {
            text.push_str(&format!(
                "\ntransactions: {options:#?}\nreads: get_for_update in pessimistic mode, get in optimistic mode (both \
                 at the transaction's snapshot)"
            ));
        }
        text
    }

    fn statistics(&self) -> String {
        self.db.stats().to_string()
    }

    fn write_stalls(&self) -> Option<WriteStalls> {
        // Riptide counts each write that waited for a memtable slot or for level 0 to shrink
        // (stops), and each write group it delayed once level 0 reached its slowdown trigger;
        // both are time writes were held back, as RocksDB's cumulative stall counts both.
        let stats = self.db.stats();
        Some(WriteStalls {
            stall_micros: stats.write_stall_micros + stats.write_slowdown_micros,
            stall_count: stats.write_stall_count + stats.write_slowdown_count,
        })
    }

    fn close(self) -> Result<()> {
        self.db.close().context("closing Riptide")
    }
}

/// A thread's handle on a [`RiptideEngine`].
pub struct RiptideSession<'a> {
    engine: &'a RiptideEngine,
    batch: WriteBatch,
    read_options: ReadOptions,
    /// The open transaction, if any.
    transaction: Option<Transaction>,
}

impl RiptideSession<'_> {
    /// The open transaction, or the error of a call made without one.
    fn open_transaction(&self) -> std::result::Result<&Transaction, TransactionError> {
        self.transaction.as_ref().ok_or_else(|| TransactionError::Failed(BenchError::new("no transaction is open")))
    }
}

impl Session for RiptideSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.engine.db.put_opt(key, value, &self.engine.write_options)?)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        Ok(self.engine.db.delete_opt(key, &self.engine.write_options)?)
    }

    fn batch_put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
    }

    fn batch_delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }

    fn commit_batch(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        Ok(self.engine.db.write_opt(batch, &self.engine.write_options)?)
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        // Riptide's get returns an owned value: moving it in costs no copy.
        match self.engine.db.get_opt(key, &self.read_options)? {
            Some(found) => {
                *value = found;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        let mut iterator: DbIterator = self.engine.db.iter(&self.read_options)?;
        scan_with(&mut iterator, start, limit, capture)
    }

    fn with_reseeked_iterator(&mut self, body: &mut dyn FnMut(&mut dyn Scanner) -> Result<()>) -> Result<()> {
        let mut scanner = RiptideScanner { iterator: self.engine.db.iter(&self.read_options)? };
        body(&mut scanner)
    }

    fn begin_transaction(&mut self) -> Result<()> {
        let Some(options) = &self.engine.transaction_options else {
            bail!("Riptide was opened without transactions (only the transaction workload uses them)");
        };
        if self.transaction.is_some() {
            bail!("a transaction is already open in this session");
        }
        self.transaction = Some(self.engine.db.begin(options).context("beginning a Riptide transaction")?);
        Ok(())
    }

    fn transaction_read(
        &mut self,
        key: &[u8],
        for_update: bool,
        value: &mut Vec<u8>,
    ) -> std::result::Result<bool, TransactionError> {
        let transaction = self.open_transaction()?;
        let found = if for_update { transaction.get_for_update(key) } else { transaction.get(key) };
        match found.map_err(classify_error)? {
            Some(bytes) => {
                *value = bytes;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn transaction_put(&mut self, key: &[u8], value: &[u8]) -> std::result::Result<(), TransactionError> {
        self.open_transaction()?.put(key, value).map_err(classify_error)
    }

    fn commit_transaction(&mut self) -> std::result::Result<(), TransactionError> {
        let transaction = self
            .transaction
            .take()
            .ok_or_else(|| TransactionError::Failed(BenchError::new("no transaction is open")))?;
        transaction.commit().map_err(classify_error)
    }

    fn rollback_transaction(&mut self) -> Result<()> {
        match self.transaction.take() {
            Some(transaction) => transaction.rollback().context("rolling back a Riptide transaction"),
            None => Ok(()),
        }
    }
}

/// Seeks `iterator` to `start` and reads up to `limit` entries (Riptide's iterators may be
/// positioned again by a seek at any time).
fn scan_with(iterator: &mut DbIterator, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
    iterator.seek(start);
    let mut outcome = ScanOutcome::default();
    while iterator.valid() {
        if outcome.visit(iterator.key(), iterator.value(), capture, limit) {
            break;
        }
        iterator.next();
    }
    iterator.status()?;
    Ok(outcome)
}

/// A thread's one iterator, re-seeked for every scan.
struct RiptideScanner {
    iterator: DbIterator,
}

impl Scanner for RiptideScanner {
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        scan_with(&mut self.iterator, start, limit, capture)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn riptide_aborts_are_conflicts_deadlocks_and_timeouts_only() {
        let abort = |error: riptide::Error| match classify_error(error) {
            TransactionError::Abort(kind) => Some(kind),
            TransactionError::Failed(_) => None,
        };
        assert_eq!(abort(riptide::Error::Conflict("x".to_string())), Some(AbortKind::Conflict));
        assert_eq!(abort(riptide::Error::Deadlock("x".to_string())), Some(AbortKind::Deadlock));
        assert_eq!(abort(riptide::Error::LockTimeout("x".to_string())), Some(AbortKind::LockTimeout));
        // No run sets a lock limit, so a lock-table-full error is a failure, not an abort.
        assert_eq!(abort(riptide::Error::Busy("x".to_string())), None);
        assert_eq!(abort(riptide::Error::Closed("x".to_string())), None);
        assert_eq!(abort(riptide::Error::InvalidArgument("x".to_string())), None);
        // Every abort kind is one that Riptide calls retryable.
        for error in [riptide::Error::Conflict(String::new()), riptide::Error::Deadlock(String::new())] {
            assert!(error.is_retryable());
        }
    }

    #[test]
    fn transactions_run_at_repeatable_read_with_the_common_lock_settings() {
        for (mode, expected) in [
            (TransactionMode::Pessimistic, ConcurrencyMode::Pessimistic),
            (TransactionMode::Optimistic, ConcurrencyMode::Optimistic),
        ] {
            let options = transaction_options(mode, false);
            assert_eq!(options.mode, expected);
            assert_eq!(options.isolation, IsolationLevel::RepeatableRead);
            assert_eq!(options.lock_timeout, Some(TRANSACTION_LOCK_TIMEOUT));
            assert!(options.deadlock_detection);
            assert_eq!(options.max_lock_count, None);
            assert!(!options.sync);
        }
        assert!(transaction_options(TransactionMode::Optimistic, true).sync);
    }
}
