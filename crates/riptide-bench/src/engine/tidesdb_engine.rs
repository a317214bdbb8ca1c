//! TidesDB behind the [`Engine`] interface, configured as seed 004 configured it.
//!
//! TidesDB 10.2.1 through its official Rust binding (the `tidesdb` crate 1.0.0, which builds the
//! bundled C source): one column family holding every key; LZ4 on the key log, bloom filters on
//! (a 1 % false-positive rate, what 10 bits per key give), the run's memtable (write buffer) and
//! block cache sizes, the write-ahead log on without a sync per commit ([`SyncMode::None`]) or
//! with one (`SyncMode::Full`) when the run asks for synced writes; every other setting is
//! TidesDB's own default (see [`super::tidesdb_settings_text`]).
//!
//! Every TidesDB read and write goes through a transaction, as its API documents: a put, a
//! delete or a batch is one transaction committed at READ COMMITTED; a get or a scan reads in a
//! READ COMMITTED transaction begun for it. A session keeps one transaction object per purpose
//! and resets it (`Transaction::reset`, the binding's way to reuse one) instead of allocating a
//! new one per operation. For the transaction workload the optimistic mode maps onto TidesDB's
//! SNAPSHOT isolation (a frozen snapshot, written keys claimed first-committer-wins at commit,
//! which is what RocksDB's `OptimisticTransactionDB` and Riptide's optimistic transactions
//! check); TidesDB has no locks, so the pessimistic mode is refused.

use std::path::Path;
use std::time::Duration;

use tidesdb::{
    ColumnFamily, ColumnFamilyConfig, CompressionAlgorithm, Config, ErrorCode, IsolationLevel, Iterator, LogLevel,
    SyncMode, TidesDB, Transaction,
};

use super::{
    tidesdb_settings_text, AbortKind, Engine, EngineSettings, ScanCapture, ScanOutcome, Scanner, Session,
    TransactionError, TransactionMode, WriteStalls,
};
use crate::bail;
use crate::error::{BenchError, Result};

/// The column family every run writes to (TidesDB has no default one).
pub const COLUMN_FAMILY: &str = "bench";

/// The bloom filter false-positive rate, the rate 10 bits per key give the other engines.
pub const TIDESDB_BLOOM_FPR: f64 = 0.01;

/// How often settling looks whether flushes and compactions are done (TidesDB has no call that
/// waits for them).
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The database configuration for `settings`.
pub fn database_config(path: &Path, settings: &EngineSettings) -> Config {
    let config = Config::new(path)
        .memtable_write_buffer_size(settings.memtable_size_bytes)
        .block_cache_size(settings.block_cache_size_bytes)
        .memtable_sync_mode(if settings.sync { SyncMode::Full } else { SyncMode::None })
        // Info logs a line per flush and compaction on stderr, between the suite's progress lines.
        .log_level(LogLevel::Warn);
    // TidesDB separates values of at least its threshold (1 KiB by default) into its value log
    // in every run; `--min-blob-size` moves that threshold to the one the other engines get.
    match settings.min_blob_size_bytes {
        Some(min_blob_size_bytes) => config.value_separation_threshold(min_blob_size_bytes),
        None => config,
    }
}

/// The column family configuration for `settings`.
pub fn column_family_config(settings: &EngineSettings) -> ColumnFamilyConfig {
    ColumnFamilyConfig::default()
        .compression_algorithm(CompressionAlgorithm::Lz4)
        .enable_bloom_filter(settings.bloom)
        .bloom_fpr(TIDESDB_BLOOM_FPR)
}

/// A TidesDB error as the benchtool reports it.
fn failed(context: &str, error: tidesdb::Error) -> BenchError {
    BenchError::new(format!("{context}: {error}"))
}

/// An open TidesDB database.
pub struct TidesDbEngine {
    db: TidesDB,
    settings: EngineSettings,
    /// The isolation level of the transaction workload's transactions, when the run has them.
    transaction_isolation: Option<IsolationLevel>,
}

impl TidesDbEngine {
    /// Opens (creating) the database in `path`.
    pub fn open(path: &Path, settings: &EngineSettings) -> Result<TidesDbEngine> {
        let transaction_isolation = match settings.transactions {
            None => None,
            Some(TransactionMode::Optimistic) => Some(IsolationLevel::Snapshot),
            Some(TransactionMode::Pessimistic) => bail!(
                "TidesDB has no lock-based (pessimistic) transactions; its transactions validate at commit, so \
                 only --transaction-mode optimistic maps onto them"
            ),
        };
        if !CompressionAlgorithm::Lz4.is_available() {
            bail!("this TidesDB was built without LZ4 (the benchtool enables the tidesdb crate's `lz4` feature)");
        }
        let db = TidesDB::open(database_config(path, settings))
            .map_err(|error| failed(&format!("opening TidesDB in {}", path.display()), error))?;
        // A reopened database (the kill -9 test's) has its column family already.
        if db.get_column_family(COLUMN_FAMILY).is_err() {
            db.create_column_family(COLUMN_FAMILY, column_family_config(settings))
                .map_err(|error| failed("creating TidesDB's column family", error))?;
        }
        Ok(TidesDbEngine { db, settings: settings.clone(), transaction_isolation })
    }

    fn column_family(&self) -> Result<ColumnFamily<'_>> {
        self.db.get_column_family(COLUMN_FAMILY).map_err(|error| failed("opening TidesDB's column family", error))
    }

    /// True while a flush or compaction is pending or running.
    fn busy(&self, family: &ColumnFamily<'_>) -> Result<bool> {
        let stats = self.db.get_db_stats().map_err(|error| failed("reading TidesDB's statistics", error))?;
        Ok(self.db.is_flushing()
            || family.is_compacting()
            || stats.immutable_memtable_count > 0
            || stats.compaction_pending_count > 0)
    }
}

impl Engine for TidesDbEngine {
    type Session<'a> = TidesDbSession<'a>;

    fn session(&self) -> Result<TidesDbSession<'_>> {
        let begin = |purpose: &str| {
            self.db
                .begin_transaction_with_isolation(IsolationLevel::ReadCommitted)
                .map_err(|error| failed(&format!("beginning TidesDB's {purpose} transaction"), error))
        };
        Ok(TidesDbSession {
            engine: self,
            family: self.column_family()?,
            writer: begin("write")?,
            reader: begin("read")?,
            batch_error: None,
            transaction: None,
        })
    }

    fn settle(&self) -> Result<()> {
        self.db.flush_memtable().map_err(|error| failed("flushing TidesDB", error))?;
        let family = self.column_family()?;
        while self.busy(&family)? {
            std::thread::sleep(SETTLE_POLL_INTERVAL);
        }
        Ok(())
    }

    fn configuration(&self) -> String {
        let mut text = format!(
            "tidesdb crate 1.0.0 (TidesDB {})\n{}",
            tidesdb::TIDESDB_LINKED_VERSION,
            tidesdb_settings_text(&self.settings)
        );
        // The binding reads every default from the C library, so these are the values in force.
        let database = database_config(Path::new("<run directory>"), &self.settings);
        text.push_str(&format!("\n\nEffective database configuration: {database:#?}"));
        match self.column_family().and_then(|family| {
            family.get_stats().map_err(|error| failed("reading the column family's statistics", error))
        }) {
            Ok(stats) => text.push_str(&format!("\nEffective column family configuration: {:#?}", stats.config)),
            Err(_) => {
                let family = column_family_config(&self.settings);
                text.push_str(&format!("\nColumn family configuration: {family:#?}"));
            }
        }
        text
    }

    fn statistics(&self) -> String {
        let mut text = String::new();
        match self.db.get_db_stats() {
            Ok(stats) => text.push_str(&format!("{stats:#?}\n")),
            Err(error) => text.push_str(&format!("reading TidesDB's database statistics failed: {error}\n")),
        }
        if let Ok(family) = self.column_family() {
            match family.get_stats() {
                Ok(stats) => text.push_str(&format!("{stats:#?}\n")),
                Err(error) => text.push_str(&format!("reading the column family's statistics failed: {error}\n")),
            }
        }
        match self.db.get_cache_stats() {
            Ok(stats) => text.push_str(&format!("{stats:#?}\n")),
            Err(error) => text.push_str(&format!("reading TidesDB's cache statistics failed: {error}\n")),
        }
        match self.db.get_stall_stats() {
            Ok(stats) => text.push_str(&format!("{stats:#?}\n")),
            Err(error) => text.push_str(&format!("reading TidesDB's stall statistics failed: {error}\n")),
        }
        text
    }

    fn write_stalls(&self) -> Option<WriteStalls> {
        // Writers wait for the backlog of unflushed memtables (admission) and for memtable
        // rotations others perform: the waits RocksDB's and Riptide's stall figures count. The
        // log append waits are the log's own cost, like theirs, and are left out.
        let stats = self.db.get_stall_stats().ok()?;
        let held = [stats.admission, stats.rotate_lock, stats.rotate_work];
        Some(WriteStalls {
            stall_micros: held.iter().map(|stall| stall.total_us).sum(),
            stall_count: held.iter().map(|stall| stall.count).sum(),
        })
    }

    fn close(self) -> Result<()> {
        // The binding closes the database when the handle is dropped and reports no error there.
        drop(self.db);
        Ok(())
    }
}

/// A thread's handle on a [`TidesDbEngine`].
pub struct TidesDbSession<'a> {
    engine: &'a TidesDbEngine,
    family: ColumnFamily<'a>,
    /// The transaction of single writes and batches, reset after each commit.
    writer: Transaction<'a>,
    /// The transaction of gets and scans, reset before each.
    reader: Transaction<'a>,
    /// The first error of a put or delete added to the pending batch (reported at its commit).
    batch_error: Option<tidesdb::Error>,
    /// The open transaction of the transaction workload.
    transaction: Option<Transaction<'a>>,
}

impl TidesDbSession<'_> {
    /// Commits the writer's transaction and readies it for the next write.
    fn commit_writer(&mut self) -> Result<()> {
        let committed = self.writer.commit().map_err(|error| failed("TidesDB commit", error));
        self.writer.reset(IsolationLevel::ReadCommitted).map_err(|error| failed("TidesDB transaction reset", error))?;
        committed
    }

    /// Readies the reader's transaction for a read of the newest committed data.
    fn fresh_reader(&mut self) -> Result<()> {
        self.reader.reset(IsolationLevel::ReadCommitted).map_err(|error| failed("TidesDB transaction reset", error))
    }
}

/// A TidesDB error of a transaction operation as the workload counts it: a commit that lost to
/// another (`Conflict`) is an abort; everything else fails the run.
fn classify(error: tidesdb::Error) -> TransactionError {
    if error.code() == Some(ErrorCode::Conflict) {
        TransactionError::Abort(AbortKind::Conflict)
    } else {
        TransactionError::Failed(failed("TidesDB transaction", error))
    }
}

fn no_open_transaction() -> TransactionError {
    TransactionError::Failed(BenchError::new("no transaction is open"))
}

/// True when `error` says the key is absent.
fn is_not_found(error: &tidesdb::Error) -> bool {
    error.code() == Some(ErrorCode::NotFound)
}

impl Session for TidesDbSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writer.put(&self.family, key, value).map_err(|error| failed("TidesDB put", error))?;
        self.commit_writer()
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.writer.delete(&self.family, key).map_err(|error| failed("TidesDB delete", error))?;
        self.commit_writer()
    }

    fn batch_put(&mut self, key: &[u8], value: &[u8]) {
        if let Err(error) = self.writer.put(&self.family, key, value) {
            self.batch_error.get_or_insert(error);
        }
    }

    fn batch_delete(&mut self, key: &[u8]) {
        if let Err(error) = self.writer.delete(&self.family, key) {
            self.batch_error.get_or_insert(error);
        }
    }

    fn commit_batch(&mut self) -> Result<()> {
        if let Some(error) = self.batch_error.take() {
            self.writer.reset(IsolationLevel::ReadCommitted).map_err(|error| failed("TidesDB reset", error))?;
            return Err(failed("TidesDB batch", error));
        }
        self.commit_writer()
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        self.fresh_reader()?;
        // The binding returns an owned copy of the value: moving it in costs no further copy.
        match self.reader.get(&self.family, key) {
            Ok(found) => {
                *value = found;
                Ok(true)
            }
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(failed("TidesDB get", error)),
        }
    }

    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        self.fresh_reader()?;
        let mut iterator = self.reader.new_iterator(&self.family).map_err(|error| failed("TidesDB iterator", error))?;
        scan_with(&mut iterator, start, limit, capture)
    }

    fn with_reseeked_iterator(&mut self, body: &mut dyn FnMut(&mut dyn Scanner) -> Result<()>) -> Result<()> {
        self.fresh_reader()?;
        let iterator = self.reader.new_iterator(&self.family).map_err(|error| failed("TidesDB iterator", error))?;
        let mut scanner = TidesDbScanner { iterator };
        body(&mut scanner)
    }

    fn begin_transaction(&mut self) -> Result<()> {
        let Some(isolation) = self.engine.transaction_isolation else {
            bail!("TidesDB was opened without transactions (only the transaction workload uses them)");
        };
        if self.transaction.is_some() {
            bail!("a transaction is already open in this session");
        }
        let transaction = self
            .engine
            .db
            .begin_transaction_with_isolation(isolation)
            .map_err(|error| failed("beginning a TidesDB transaction", error))?;
        self.transaction = Some(transaction);
        Ok(())
    }

    fn transaction_read(
        &mut self,
        key: &[u8],
        _for_update: bool,
        value: &mut Vec<u8>,
    ) -> std::result::Result<bool, TransactionError> {
        // Only optimistic runs open TidesDB for transactions, and they read without locking.
        let transaction = self.transaction.as_ref().ok_or_else(no_open_transaction)?;
        match transaction.get(&self.family, key) {
            Ok(bytes) => {
                *value = bytes;
                Ok(true)
            }
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(classify(error)),
        }
    }

    fn transaction_put(&mut self, key: &[u8], value: &[u8]) -> std::result::Result<(), TransactionError> {
        let transaction = self.transaction.as_ref().ok_or_else(no_open_transaction)?;
        transaction.put(&self.family, key, value).map_err(classify)
    }

    fn commit_transaction(&mut self) -> std::result::Result<(), TransactionError> {
        // A failed commit leaves nothing written; dropping the transaction rolls it back.
        let mut transaction = self.transaction.take().ok_or_else(no_open_transaction)?;
        transaction.commit().map_err(classify)
    }

    fn rollback_transaction(&mut self) -> Result<()> {
        match self.transaction.take() {
            Some(mut transaction) => {
                transaction.rollback().map_err(|error| failed("rolling back a TidesDB transaction", error))
            }
            None => Ok(()),
        }
    }
}

/// Seeks `iterator` to `start` and reads up to `limit` entries.
fn scan_with(
    iterator: &mut Iterator<'_>,
    start: &[u8],
    limit: usize,
    capture: &mut ScanCapture,
) -> Result<ScanOutcome> {
    iterator.seek(start).map_err(|error| failed("TidesDB seek", error))?;
    let mut outcome = ScanOutcome::default();
    while iterator.is_valid() {
        // The binding copies the key and value out of the C library into new vectors.
        let (key, value) = iterator.key_value().map_err(|error| failed("TidesDB iterator entry", error))?;
        if outcome.visit(&key, &value, capture, limit) {
            break;
        }
        iterator.next().map_err(|error| failed("TidesDB next", error))?;
    }
    Ok(outcome)
}

/// A thread's one iterator (over its reader transaction's snapshot), re-seeked for every scan.
struct TidesDbScanner<'a> {
    iterator: Iterator<'a>,
}

impl Scanner for TidesDbScanner<'_> {
    fn scan(&mut self, start: &[u8], limit: usize, capture: &mut ScanCapture) -> Result<ScanOutcome> {
        scan_with(&mut self.iterator, start, limit, capture)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blob_threshold_becomes_the_value_separation_threshold() {
        let path = Path::new("/nonexistent/riptide-bench");
        let separated = EngineSettings { min_blob_size_bytes: Some(4096), ..EngineSettings::default() };
        assert_eq!(database_config(path, &separated).value_separation_threshold, 4096);
        // Without the flag TidesDB keeps its own threshold.
        let default = database_config(path, &EngineSettings::default());
        assert_eq!(default.value_separation_threshold, Config::new(path).value_separation_threshold);
    }
}
