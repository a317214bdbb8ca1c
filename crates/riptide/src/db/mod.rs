//! The database: the public [`Db`] handle and the shared state behind it.
//!
//! The handle owns an `Arc<DbInner>` shared with the background threads (flush, compaction and,
//! with [`crate::SyncMode::Interval`], WAL sync). The parts of the engine live in submodules:
//! `open` (recovery), `write` (group commit and memtable switches), `read` (point reads and
//! iterators), `flush` and `compaction` (background work).
//!
//! Concurrency contract: `Db` is `Send + Sync`; share it with `Arc<Db>`. The state mutex guards
//! the memtable list, the version set and the background bookkeeping; it is never held during
//! table I/O. Readers take no mutex: they clone the current [`ReadView`] under a read lock.
//!
//! Durability contract (I1 in `docs/invariants.md`): when a write returns `Ok`, it has been
//! handed to the operating system (it survives a process crash). With `WriteOptions::sync` or
//! `SyncMode::Full` it has also been synced (it survives power loss). With
//! `SyncMode::Interval` it is synced within the interval.

mod checkpoint;
mod column_family;
mod compaction;
pub(crate) mod filename;
mod flush;
mod iter;
mod memory;
mod open;
mod publication;
pub(crate) mod read;
mod read_charges;
mod self_service;
pub(crate) mod spilled_commit;
mod stats;
mod sync_stage;
pub(crate) mod table_cache;
pub(crate) mod write;
mod write_queue;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

pub use column_family::ColumnFamily;
pub use iter::DbIterator;
pub use read::RangeStats;
pub use stats::{ColumnFamilyStats, LevelStats, MemoryPressure, RecoveryStats, Stats, TransactionStats};

use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::version::set::VersionSet;
use crate::version::tree::Version;
pub(crate) use column_family::ColumnFamilyShared;
use column_family::ColumnFamilyState;
use table_cache::TableCache;
use write::{WalState, WriteQueue};

/// A memtable that is full and waits to be flushed, with the WAL that holds its data.
pub(crate) struct ImmutableMemTable {
    pub(crate) memtable: Arc<MemTable>,
    pub(crate) log_number: u64,
}

/// What a reader needs: the memtables and the version, pinned together.
pub(crate) struct ReadView {
    pub(crate) memtable: Arc<MemTable>,
    /// Immutable memtables, newest first.
    pub(crate) immutables: Vec<Arc<MemTable>>,
    /// Through the shim's `Arc`, as versions are shared (see `version::tree`).
    pub(crate) version: crate::sync::Arc<Version>,
}

/// A compaction in progress, so that parallel jobs never share files or write overlapping
/// key ranges into the same level.
pub(crate) struct RunningJob {
    pub(crate) column_family: u32,
    pub(crate) job: crate::compaction::picker::RunningCompaction,
}

/// State guarded by the database mutex.
pub(crate) struct DbState {
    /// Live column families by id; the default one (id 0) always exists.
    pub(crate) column_families: BTreeMap<u32, ColumnFamilyState>,
    pub(crate) versions: VersionSet,
    /// Once set, writes fail with this error until the database is reopened.
    pub(crate) background_error: Option<Error>,
    pub(crate) running_compactions: Vec<RunningJob>,
    /// Write-ahead logs on disk, oldest first; the last is the one being written.
    pub(crate) live_logs: VecDeque<u64>,
    pub(crate) stats: BackgroundStats,
}

/// Counters of background work.
#[derive(Clone, Debug, Default)]
pub(crate) struct BackgroundStats {
    pub(crate) flush_count: u64,
    pub(crate) compaction_count: u64,
    pub(crate) trivial_moves: u64,
    /// Per output level: bytes written by compactions (level 0: by flushes).
    pub(crate) level_bytes_written: [u64; crate::version::tree::NUM_LEVELS],
    /// Per input level: bytes read by compactions.
    pub(crate) level_bytes_read: [u64; crate::version::tree::NUM_LEVELS],
    /// Per output level: jobs that wrote into it (level 0: flushes, trivial moves excluded).
    pub(crate) level_jobs: [u64; crate::version::tree::NUM_LEVELS],
    /// Per output level: bytes of the input level's files that compactions brought into it.
    pub(crate) level_bytes_brought_in: [u64; crate::version::tree::NUM_LEVELS],
    pub(crate) write_stall_count: u64,
    /// Write groups stalled right now.
    pub(crate) write_stalls_in_progress: u64,
    pub(crate) write_stall_micros: u64,
    pub(crate) write_slowdown_count: u64,
    pub(crate) write_slowdown_micros: u64,
    pub(crate) tombstone_compactions: u64,
    /// Level-0 compactions paid for by seeks (`read_charges`).
    pub(crate) read_triggered_compactions: u64,
    /// Memtable switches paid for by scans passing older versions in it (`read_charges`).
    pub(crate) read_triggered_flushes: u64,
    /// Tables removed whole by a flush because a range tombstone covered them.
    pub(crate) range_delete_dropped_files: u64,
    /// Compactions started to drop entries range tombstones cover.
    pub(crate) range_delete_compactions: u64,
    /// Compactions that dropped expired entries (`compaction/expiry.rs`).
    pub(crate) expiry_compactions: u64,
    /// Merge operands flushes and compactions folded into other entries.
    pub(crate) merge_operands_folded: u64,
    pub(crate) manual_compactions: u64,
    pub(crate) subcompactions: u64,
    pub(crate) memory_flushes: u64,
}

/// Everything the handle and the background threads share.
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) file_system: Arc<dyn FileSystem>,
    lock: Mutex<Option<Box<dyn FileLock>>>,
    pub(crate) state: Mutex<DbState>,
    /// Signalled when a flush or compaction finishes or a background error is set.
    pub(crate) background_done: Condvar,
    /// Signalled when there may be work for the background threads.
    pub(crate) work_available: Arc<Condvar>,
    /// Signalled (with the state mutex) when the database closes, for threads that otherwise
    /// wait out a timer.
    pub(crate) shutdown_signal: Condvar,
    pub(crate) write_queue: WriteQueue,
    /// Small unsynced writes that do their own work instead of queueing (see `self_service`).
    pub(crate) self_service: self_service::SelfService,
    pub(crate) wal: Mutex<WalState>,
    /// Replaced logs that still hold unsynced appends, oldest first (see `write::ClosedLog`).
    /// Lock order: state, then WAL, then this.
    pub(crate) closed_logs: Mutex<Vec<write::ClosedLog>>,
    /// Highest sequence number assigned to a write (its record staged or written to the WAL).
    /// Changed by write leaders, and by self-service writes under the WAL stage's mutex.
    pub(crate) last_sequence: AtomicU64,
    /// Highest sequence number readers may see: every write at or below it is in a memtable.
    pub(crate) visible_sequence: AtomicU64,
    pub(crate) default_column_family: Arc<ColumnFamilyShared>,
    /// Live column families by id, for the write path's checks and for lookups by name.
    pub(crate) column_family_handles: RwLock<HashMap<u32, Arc<ColumnFamilyShared>>>,
    /// Manual compactions in progress (`compact_range`); each gets its own id.
    pub(crate) manual_compactions: Mutex<compaction::ManualCompactions>,
    /// Memory accounting and pressure levels (see `memory.rs`).
    pub(crate) memory: memory::MemoryGovernor,
    pub(crate) snapshots: Arc<SnapshotList>,
    /// Lock tables, commit history and counters of transactions (see `txn`).
    pub(crate) transactions: crate::txn::TransactionShared,
    pub(crate) table_cache: Arc<TableCache>,
    pub(crate) block_cache: Arc<BlockCache>,
    /// Chunks of flushed memtables kept for the next memtables (`memtable::ChunkPool`).
    pub(crate) chunk_pool: Arc<crate::memtable::ChunkPool>,
    pub(crate) shutting_down: AtomicBool,
    /// Logical bytes users wrote (encoded batch sizes).
    pub(crate) user_bytes_written: AtomicU64,
    /// Bytes appended to write-ahead logs.
    pub(crate) wal_bytes_written: AtomicU64,
    /// What recovery found at open.
    pub(crate) recovery: stats::RecoveryStats,
}

impl DbInner {
    /// Publishes a new read view of column family `id` after its memtables or version changed.
    /// Called with the state mutex held, so views are installed in the order of the changes.
    pub(crate) fn install_read_view(&self, state: &DbState, id: u32) {
        let Some(family) = state.column_families.get(&id) else { return };
        let view = ReadView {
            memtable: Arc::clone(&family.memtable),
            immutables: family.immutables.iter().rev().map(|imm| Arc::clone(&imm.memtable)).collect(),
            version: state.versions.current(id),
        };
        family.shared.install_view(view);
    }

    /// Raises the version set's last sequence (written with the next manifest edit) to every
    /// sequence number assigned so far. Called before the edits that let logs go while the
    /// database runs, a flush's (it moves a column family's log number) and a column family
    /// drop's (the family's memtables stop pinning logs), so that the manifest's last sequence
    /// is at least the sequence of every record in a log that is no longer replayed (records of
    /// dropped column families included): recovery checks the first record it replays against
    /// it (I12). Called with the state mutex held; the write leader's store of `last_sequence`
    /// happens before the switch that closed the log, and so before this.
    pub(crate) fn record_assigned_sequences(&self, state: &mut DbState) {
        let assigned = self.last_sequence.load(Ordering::Acquire);
        if assigned > state.versions.last_sequence() {
            state.versions.set_last_sequence(assigned);
        }
    }

    /// Why work that waits on the background threads must give up now: a background failure
    /// (reported first, as the cause), or a close in progress. Called with the state mutex held.
    pub(crate) fn check_not_stopped(&self, state: &DbState) -> Result<()> {
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".to_string()));
        }
        Ok(())
    }

    /// Records a background failure: writes stop until reopen, waiters wake up.
    pub(crate) fn set_background_error(&self, state: &mut DbState, error: Error) {
        if state.background_error.is_none() {
            state.background_error = Some(error);
        }
        self.background_done.notify_all();
        self.work_available.notify_all();
    }

    /// The key order of live column family `id`.
    pub(crate) fn column_family_order(&self, id: u32) -> Option<crate::comparator::KeyComparator> {
        self.column_family_handles.read().get(&id).map(|shared| shared.comparator.clone())
    }

    /// The shared part of a live column family, or `InvalidArgument` if it was dropped.
    pub(crate) fn live_column_family(&self, column_family: &ColumnFamily) -> Result<Arc<ColumnFamilyShared>> {
        if column_family.is_dropped() {
            return Err(Error::invalid(format!("column family {:?} was dropped", column_family.name())));
        }
        match self.column_family_handles.read().get(&column_family.id()) {
            Some(shared) if Arc::ptr_eq(shared, &column_family.shared) => Ok(Arc::clone(shared)),
            _ => Err(Error::invalid(format!(
                "column family {:?} does not belong to this database",
                column_family.name()
            ))),
        }
    }
}

/// An open Riptide database.
///
/// Open with [`Db::open`]; all methods take `&self` and may be called from many threads.
/// Dropping the handle closes the database; [`Db::close`] does the same and reports errors.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Every stored version of `user_key` in `column_family`'s current view, with the sequence
    /// number reads see now (see `internals::debug`).
    pub(crate) fn key_versions(
        &self,
        column_family: &ColumnFamily,
        user_key: &[u8],
    ) -> Result<(u64, Vec<read::StoredVersion>)> {
        let shared = self.inner.live_column_family(column_family)?;
        read::key_versions(&self.inner, &shared, user_key)
    }

    /// Every stored version of `user_key` in the sources `iterator` reads, with its read
    /// sequence (see `internals::debug`).
    pub(crate) fn iterator_key_versions(
        &self,
        iterator: &DbIterator,
        user_key: &[u8],
    ) -> Result<(u64, Vec<read::StoredVersion>)> {
        iterator.stored_versions(&self.inner.table_cache, user_key)
    }

    /// Opens (or creates, with `create_if_missing`) the database in directory `path`.
    ///
    /// Recovery replays the write-ahead logs into new level-0 tables, so when `open` returns
    /// every write that was durable before a crash is readable. A second open of the same
    /// directory, from this process or another, fails with [`Error::Busy`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(path.as_ref(), options)
    }

    /// Opens the database like [`Db::open`], giving options for column families by name. A
    /// listed column family that does not exist is created; one that exists gets the listed
    /// options (column family options are not stored in the database, so a reopen may change
    /// them, all but the comparator). Column families that are not listed use
    /// `options.column_family_options()`. Every column family must be opened with the
    /// comparator it was created with (compared by name), listed or not; otherwise the open
    /// fails with [`Error::InvalidArgument`] and changes nothing.
    pub fn open_with_column_families(
        path: impl AsRef<Path>,
        options: Options,
        column_families: Vec<(String, ColumnFamilyOptions)>,
    ) -> Result<Db> {
        open::open_with_column_families(path.as_ref(), options, column_families)
    }

    /// Stores `value` under `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Stores `value` under `key` with explicit write options.
    pub fn put_opt(&self, key: &[u8], value: &[u8], options: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_opt(batch, options)
    }

    /// Stores `value` under `key` in `column_family`.
    pub fn put_cf(&self, column_family: &ColumnFamily, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_cf(column_family, key, value);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Stores `value` under `key` until `ttl` from now by the database's clock
    /// ([`Options::clock`]): from then on reads see the key as deleted and compaction drops the
    /// value. The expiry is fixed when the call is made and survives a crash and reopen as
    /// written. A zero `ttl` is [`Error::InvalidArgument`].
    pub fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl: std::time::Duration) -> Result<()> {
        let expires_at_us = self.expiry_after(ttl)?;
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(key, value, expires_at_us);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Stores `value` under `key` in `column_family` until `ttl` from now (see
    /// [`Db::put_with_ttl`]).
    pub fn put_with_ttl_cf(
        &self,
        column_family: &ColumnFamily,
        key: &[u8],
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<()> {
        let expires_at_us = self.expiry_after(ttl)?;
        let mut batch = WriteBatch::new();
        batch.put_with_expiry_cf(column_family, key, value, expires_at_us);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// The current time by the database's clock, in microseconds since the Unix epoch: the
    /// time expiries ([`WriteBatch::put_with_expiry`]) are compared with. A clock stepped
    /// back reads as the latest time recorded (at most a millisecond before a time returned
    /// earlier).
    pub fn now_us(&self) -> u64 {
        self.inner.snapshots.clock().now_us()
    }

    fn expiry_after(&self, ttl: std::time::Duration) -> Result<u64> {
        if ttl.is_zero() {
            return Err(Error::invalid("a time to live must be longer than zero"));
        }
        Ok(self.now_us().saturating_add(crate::ttl::duration_us(ttl)))
    }

    /// Adds a merge operand for `key` (see [`WriteBatch::merge`]): reads combine it with the
    /// operands before it and the value beneath them through [`Options::merge_operator`]. As
    /// durable as a put.
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge(key, operand);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Adds a merge operand for `key` in `column_family`.
    pub fn merge_cf(&self, column_family: &ColumnFamily, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge_cf(column_family, key, operand);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Deletes `key` (a no-op if it is absent).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with explicit write options.
    pub fn delete_opt(&self, key: &[u8], options: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write_opt(batch, options)
    }

    /// Deletes `key` from `column_family`.
    pub fn delete_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_cf(column_family, key);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Deletes `key`, which must have been written at most once since it was last deleted:
    /// flush and compaction drop the single delete together with the put it meets instead of
    /// carrying a tombstone to the last level (see [`WriteBatch::single_delete`] for the
    /// contract). Durable like any write under the default options.
    pub fn single_delete(&self, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.single_delete(key);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Single-deletes `key` from `column_family` (see [`Db::single_delete`]).
    pub fn single_delete_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.single_delete_cf(column_family, key);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Deletes every key from `start` (inclusive) to `end` (exclusive) with one range tombstone:
    /// the call writes one record whatever the number of keys, and reads after it cost what
    /// they cost before (see `docs/range_deletes.md`). A range whose start is not below its end
    /// deletes nothing. Durable like any write under the default options (in the operating
    /// system when the call returns; see [`WriteOptions`]).
    pub fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// Deletes every key in `[start, end)` with explicit write options.
    pub fn delete_range_opt(&self, start: &[u8], end: &[u8], options: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write_opt(batch, options)
    }

    /// Deletes every key in `[start, end)` (in the column family's order) from `column_family`.
    pub fn delete_range_cf(&self, column_family: &ColumnFamily, start: &[u8], end: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(column_family, start, end);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch atomically: after a crash either all of it or none of it is present,
    /// across every column family it writes to.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch atomically with explicit write options. A batch that names a column
    /// family that does not exist (or was dropped) fails with `InvalidArgument` and writes
    /// nothing.
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        self.check_open()?;
        write::write(&self.inner, batch, options)
    }

    /// Reads the value of `key`; `Ok(None)` when it is absent.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// Reads the value of `key` with explicit read options (e.g. at a snapshot).
    pub fn get_opt(&self, key: &[u8], options: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        read::get(&self.inner, &self.inner.default_column_family, key, options)
    }

    /// Reads the value of `key` in `column_family`.
    pub fn get_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(column_family, key, &ReadOptions::default())
    }

    /// Reads the value of `key` in `column_family` with explicit read options.
    pub fn get_cf_opt(
        &self,
        column_family: &ColumnFamily,
        key: &[u8],
        options: &ReadOptions,
    ) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let shared = self.inner.live_column_family(column_family)?;
        read::get(&self.inner, &shared, key, options)
    }

    /// An iterator over user keys at one consistent point of the write history.
    pub fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        self.check_open()?;
        read::new_iterator(&self.inner, &self.inner.default_column_family, options)
    }

    /// An iterator over the user keys of `column_family`.
    pub fn iter_cf(&self, column_family: &ColumnFamily, options: &ReadOptions) -> Result<DbIterator> {
        self.check_open()?;
        let shared = self.inner.live_column_family(column_family)?;
        read::new_iterator(&self.inner, &shared, options)
    }

    /// A snapshot of the current state of every column family; pass it in
    /// [`ReadOptions::snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire_current(&self.inner.visible_sequence)
    }

    /// Begins a transaction (see [`crate::Transaction`] and `docs/transactions.md`).
    ///
    /// ```
    /// use riptide::{Db, Error, IsolationLevel, Options, TransactionOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"balance", b"10").unwrap();
    /// let options = TransactionOptions { isolation: IsolationLevel::Serializable, ..Default::default() };
    /// loop {
    ///     let transaction = db.begin(&options).unwrap();
    ///     let balance: u64 = match transaction.get_for_update(b"balance") {
    ///         Ok(value) => String::from_utf8(value.unwrap()).unwrap().parse().unwrap(),
    ///         Err(error) if error.is_retryable() => continue,
    ///         Err(error) => panic!("{error}"),
    ///     };
    ///     transaction.put(b"balance", (balance + 5).to_string().as_bytes()).unwrap();
    ///     match transaction.commit() {
    ///         Ok(()) => break,
    ///         Err(error) if error.is_retryable() => continue,
    ///         Err(error) => panic!("{error}"),
    ///     }
    /// }
    /// assert_eq!(db.get(b"balance").unwrap(), Some(b"15".to_vec()));
    /// ```
    pub fn begin(&self, options: &crate::TransactionOptions) -> Result<crate::Transaction> {
        self.check_open()?;
        crate::txn::begin(&self.inner, options)
    }

    /// The xids of the prepared transactions waiting for a decision (two-phase commit), in byte
    /// order: those prepared since open whose handles were dropped or are still held, and
    /// those recovered at open (with their locks). See [`crate::Transaction::prepare`].
    pub fn prepared_transactions(&self) -> Vec<Vec<u8>> {
        self.inner.transactions.prepared.xids()
    }

    /// Commits the prepared transaction `xid`: its writes become visible atomically, durably
    /// (the commit record is synced) when this returns. `InvalidArgument` if no transaction is
    /// prepared under `xid`.
    pub fn commit_prepared(&self, xid: &[u8]) -> Result<()> {
        self.check_open()?;
        crate::txn::two_phase::commit_prepared(&self.inner, xid).map(|_| ())
    }

    /// Rolls back the prepared transaction `xid`, durably. `InvalidArgument` if no transaction
    /// is prepared under `xid`.
    pub fn rollback_prepared(&self, xid: &[u8]) -> Result<()> {
        self.check_open()?;
        crate::txn::two_phase::rollback_prepared(&self.inner, xid)
    }

    /// Creates a column family with its own options. Names are 1 to 255 bytes and unique.
    /// Durable when it returns: the manifest records it, with its comparator's name.
    pub fn create_column_family(&self, name: &str, options: ColumnFamilyOptions) -> Result<ColumnFamily> {
        self.check_open()?;
        write::create_column_family(&self.inner, name, options)
    }

    /// Drops a column family: it disappears from the manifest at once (durably), later
    /// operations through any of its handles fail, and its files are deleted once no reader
    /// holds them. The default column family cannot be dropped.
    pub fn drop_column_family(&self, column_family: &ColumnFamily) -> Result<()> {
        self.check_open()?;
        write::drop_column_family(&self.inner, column_family)
    }

    /// Renames a column family (durably). Handles keep working.
    pub fn rename_column_family(&self, column_family: &ColumnFamily, new_name: &str) -> Result<()> {
        self.check_open()?;
        write::rename_column_family(&self.inner, column_family, new_name)
    }

    /// The names of the live column families, the default one first, then by id.
    pub fn list_column_families(&self) -> Vec<String> {
        let state = self.inner.state.lock();
        state.column_families.values().map(|family| family.shared.name.read().clone()).collect()
    }

    /// A handle to the live column family named `name`, if there is one.
    pub fn column_family(&self, name: &str) -> Option<ColumnFamily> {
        let state = self.inner.state.lock();
        state
            .column_families
            .values()
            .find(|family| *family.shared.name.read() == name)
            .map(|family| ColumnFamily { shared: Arc::clone(&family.shared) })
    }

    /// A handle to the default column family (the one `put`, `get` and `iter` use).
    pub fn default_column_family(&self) -> ColumnFamily {
        ColumnFamily { shared: Arc::clone(&self.inner.default_column_family) }
    }

    /// The options a column family uses now.
    pub fn column_family_options(&self, column_family: &ColumnFamily) -> Result<ColumnFamilyOptions> {
        let shared = self.inner.live_column_family(column_family)?;
        Ok(shared.options().as_ref().clone())
    }

    /// Changes a column family's options while the database runs. Every option but the
    /// comparator may change: memtable sizes apply from the next memtable, table options to
    /// tables written from now on, level and trigger options to the next compaction decisions.
    /// A comparator of another name than the column family's is refused with
    /// [`Error::InvalidArgument`] (one of the same name is taken to be the same order, and the
    /// column family keeps the instance it has). Invalid options are rejected and nothing
    /// changes.
    pub fn set_column_family_options(
        &self,
        column_family: &ColumnFamily,
        mut options: ColumnFamilyOptions,
    ) -> Result<()> {
        self.check_open()?;
        options.validate()?;
        let shared = self.inner.live_column_family(column_family)?;
        let _state = self.inner.state.lock();
        let current = shared.options();
        // I25: the order is fixed at creation; memtables, tables and versions all follow it.
        if options.comparator.name() != current.comparator.name() {
            return Err(Error::invalid(format!(
                "the comparator of column family {:?} cannot change (from {:?} to {:?})",
                column_family.name(),
                current.comparator.name(),
                options.comparator.name()
            )));
        }
        options.comparator = Arc::clone(&current.comparator);
        shared.set_options(options);
        self.inner.work_available.notify_all();
        self.inner.background_done.notify_all();
        Ok(())
    }

    /// Writes a checkpoint of the database into `dir`, a directory that must not exist: an
    /// openable copy of the database as of one point in its write order (every write
    /// acknowledged before the call, and possibly some made during it, each wholly or not at
    /// all), taken while reads and writes go on. Tables and blob files are hard-linked where the
    /// file system allows (costing no space until the database moves on), the write-ahead logs
    /// are copied up to that point, and a new manifest describes it; open the directory with
    /// `Db::open` and the same options (and column families). Everything is synced before the
    /// call returns. Fails with `InvalidArgument` if `dir` exists and with `Busy` while a
    /// prepared transaction is undecided (two-phase commit); a failed checkpoint leaves no
    /// openable directory behind.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.check_open()?;
        checkpoint::checkpoint(&self.inner, dir.as_ref())
    }

    /// Writes every memtable of every column family to level-0 tables and waits until that is
    /// done. Afterwards the write-ahead logs hold nothing that the tables do not.
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        write::flush(&self.inner)
    }

    /// Waits until no flush or compaction is pending or running.
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.check_open()?;
        compaction::wait_until_idle(&self.inner)
    }

    /// Flushes memtables, then compacts until every table is in one level (or as few as the
    /// compaction policy allows). Useful before measuring space, and in tests. Column families
    /// dropped meanwhile are passed over.
    pub fn compact_all(&self) -> Result<()> {
        self.check_open()?;
        write::flush(&self.inner)?;
        let families: Vec<ColumnFamily> = {
            let state = self.inner.state.lock();
            state.column_families.values().map(|family| ColumnFamily { shared: Arc::clone(&family.shared) }).collect()
        };
        for family in &families {
            match compaction::compact_range(&self.inner, family, None, None) {
                // A family dropped since the listing has nothing left to compact; the caller
                // asked for the database, not for that family, so this is no failure.
                Err(Error::InvalidArgument(_)) if family.is_dropped() => {}
                result => result?,
            }
        }
        Ok(())
    }

    /// Compacts the user keys in `[start, end]` (inclusive, in the column family's order;
    /// `None` is unbounded) of `column_family` down through the levels, rewriting every table that holds such keys, so
    /// that deleted and overwritten data in the range gives its space back. Memtables are
    /// flushed first. Returns when done; fails with `Error::Closed` when the database closes
    /// and with `Error::Cancelled` when [`Db::cancel_manual_compactions`] is called meanwhile
    /// (jobs already installed stay).
    pub fn compact_range(&self, column_family: &ColumnFamily, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.check_open()?;
        self.inner.live_column_family(column_family)?;
        write::flush(&self.inner)?;
        compaction::compact_range(&self.inner, column_family, start, end)
    }

    /// Stops every `compact_range` in progress: they return `Error::Cancelled` before their
    /// next job, and a job that is running stops within 1,024 entries (its partial outputs are
    /// removed). Automatic compactions go on.
    pub fn cancel_manual_compactions(&self) {
        compaction::cancel_manual_compactions(&self.inner);
    }

    /// Number of table files per level of the default column family.
    pub fn level_file_counts(&self) -> Vec<usize> {
        self.inner.default_column_family.read_view.load().version.levels.iter().map(Vec::len).collect()
    }

    /// A snapshot of the engine's statistics. Its `Display` is a human-readable dump.
    pub fn stats(&self) -> Stats {
        stats::collect(&self.inner)
    }

    /// Changes the block cache capacity while the database runs; shrinking evicts at once.
    pub fn set_block_cache_capacity_bytes(&self, capacity_bytes: usize) {
        self.inner.memory.set_block_cache_capacity_bytes(&self.inner.block_cache, capacity_bytes);
    }

    /// Approximate bytes of table data holding user keys in `[start, end)` (in the column family's
    /// order) of the default column family; data still in memtables is not counted. Cheap: it reads
    /// only in-memory indexes.
    pub fn approximate_size_bytes(&self, start: &[u8], end: &[u8]) -> Result<u64> {
        self.check_open()?;
        read::approximate_size_bytes(&self.inner, &self.inner.default_column_family, start, end)
    }

    /// Approximate bytes and number of entries with user keys in `[start, end)` (in the column
    /// family's order) of `column_family`, memtables included (what a query optimizer needs to cost a range).
    /// Cheap: it reads in-memory indexes and table properties, and counts memtable entries only
    /// up to a bound.
    pub fn approximate_range_stats(
        &self,
        column_family: &ColumnFamily,
        start: &[u8],
        end: &[u8],
    ) -> Result<RangeStats> {
        self.check_open()?;
        let shared = self.inner.live_column_family(column_family)?;
        read::approximate_range_stats(&self.inner, &shared, start, end)
    }

    /// The directory of this database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Closes the database: stops background work, syncs the write-ahead log and releases the
    /// directory lock. Returns the first error met (a background error included).
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closed".to_string()));
        }
        Ok(())
    }

    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.shutting_down.store(true, Ordering::Release);
        {
            let _state = self.inner.state.lock();
            self.inner.work_available.notify_all();
            self.inner.background_done.notify_all();
            self.inner.shutdown_signal.notify_all();
        }
        for handle in self.threads.lock().drain(..) {
            let _ = handle.join();
        }
        let sync_result = write::sync_wal_at_close(&self.inner);
        let background_error = self.inner.state.lock().background_error.as_ref().map(Error::duplicate);
        *self.inner.lock.lock() = None;
        sync_result?;
        match background_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
