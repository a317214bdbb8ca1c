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

mod compaction;
pub(crate) mod filename;
mod flush;
mod iter;
mod open;
mod read;
mod stats;
pub(crate) mod table_cache;
mod write;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

pub use iter::DbIterator;
pub use stats::{LevelStats, RecoveryStats, Stats};

use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::version::set::VersionSet;
use crate::version::tree::Version;
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
    pub(crate) version: Arc<Version>,
}

/// State guarded by the database mutex.
pub(crate) struct DbState {
    pub(crate) memtable: Arc<MemTable>,
    /// The WAL that receives writes for `memtable`.
    pub(crate) memtable_log_number: u64,
    /// Full memtables waiting for flush, oldest first.
    pub(crate) immutables: VecDeque<ImmutableMemTable>,
    pub(crate) versions: VersionSet,
    /// Once set, writes fail with this error until the database is reopened.
    pub(crate) background_error: Option<Error>,
    pub(crate) flush_running: bool,
    pub(crate) compaction_running: bool,
    /// Per level: the largest user key of the last compaction, so the next one moves on.
    pub(crate) compact_pointers: Vec<Vec<u8>>,
    pub(crate) stats: BackgroundStats,
}

/// Counters of background work.
#[derive(Clone, Debug, Default)]
pub(crate) struct BackgroundStats {
    pub(crate) flush_count: u64,
    pub(crate) flush_bytes_written: u64,
    pub(crate) compaction_count: u64,
    pub(crate) compaction_bytes_read: u64,
    pub(crate) compaction_bytes_written: u64,
    pub(crate) trivial_moves: u64,
    pub(crate) write_stall_count: u64,
    pub(crate) write_stall_micros: u64,
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
    pub(crate) work_available: Condvar,
    pub(crate) write_queue: Mutex<WriteQueue>,
    pub(crate) wal: Mutex<WalState>,
    /// Highest sequence number assigned to a write (written to the WAL). Only the write leader
    /// changes it.
    pub(crate) last_sequence: AtomicU64,
    /// Highest sequence number readers may see: every write at or below it is in a memtable.
    pub(crate) visible_sequence: AtomicU64,
    pub(crate) read_view: RwLock<Arc<ReadView>>,
    pub(crate) snapshots: Arc<SnapshotList>,
    pub(crate) table_cache: Arc<TableCache>,
    pub(crate) block_cache: Arc<BlockCache>,
    pub(crate) shutting_down: AtomicBool,
    /// Logical bytes users wrote (encoded batch sizes).
    pub(crate) user_bytes_written: AtomicU64,
    /// Bytes appended to write-ahead logs.
    pub(crate) wal_bytes_written: AtomicU64,
    /// What recovery found at open.
    pub(crate) recovery: stats::RecoveryStats,
}

impl DbInner {
    /// Publishes a new read view after the memtables or the version changed. Called with the
    /// state mutex held, so views are installed in the order of the changes.
    pub(crate) fn install_read_view(&self, state: &DbState) {
        let view = ReadView {
            memtable: Arc::clone(&state.memtable),
            immutables: state.immutables.iter().rev().map(|imm| Arc::clone(&imm.memtable)).collect(),
            version: state.versions.current(),
        };
        *self.read_view.write() = Arc::new(view);
    }

    /// Records a background failure: writes stop until reopen, waiters wake up.
    pub(crate) fn set_background_error(&self, state: &mut DbState, error: Error) {
        if state.background_error.is_none() {
            state.background_error = Some(error);
        }
        self.background_done.notify_all();
        self.work_available.notify_all();
    }

    /// The read view and the sequence to read at, taken together under the view lock so that
    /// every write at or below the sequence is in the view (see `read.rs`).
    pub(crate) fn view_and_sequence(&self, snapshot: Option<&Snapshot>) -> (Arc<ReadView>, u64) {
        let guard = self.read_view.read();
        let sequence = match snapshot {
            Some(snapshot) => snapshot.sequence(),
            None => self.visible_sequence.load(Ordering::Acquire),
        };
        (Arc::clone(&guard), sequence)
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
    /// Opens (or creates, with `create_if_missing`) the database in directory `path`.
    ///
    /// Recovery replays the write-ahead logs into new level-0 tables, so when `open` returns
    /// every write that was durable before a crash is readable. A second open of the same
    /// directory, from this process or another, fails with [`Error::Busy`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(path.as_ref(), options)
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

    /// Applies a batch atomically: after a crash either all of it or none of it is present.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch atomically with explicit write options.
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
        read::get(&self.inner, key, options)
    }

    /// An iterator over user keys at one consistent point of the write history.
    pub fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        self.check_open()?;
        read::new_iterator(&self.inner, options)
    }

    /// A snapshot of the current state; pass it in [`ReadOptions::snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire_current(&self.inner.visible_sequence)
    }

    /// Writes every memtable to level-0 tables and waits until that is done. Afterwards the
    /// write-ahead logs hold nothing that the tables do not.
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
    /// compaction policy allows). Useful before measuring space, and in tests.
    pub fn compact_all(&self) -> Result<()> {
        self.check_open()?;
        write::flush(&self.inner)?;
        compaction::compact_all(&self.inner)
    }

    /// Number of table files per level.
    pub fn level_file_counts(&self) -> Vec<usize> {
        self.inner.read_view.read().version.levels.iter().map(Vec::len).collect()
    }

    /// A snapshot of the engine's statistics. Its `Display` is a human-readable dump.
    pub fn stats(&self) -> Stats {
        stats::collect(&self.inner)
    }

    /// Changes the block cache capacity while the database runs; shrinking evicts at once.
    pub fn set_block_cache_capacity_bytes(&self, capacity_bytes: usize) {
        self.inner.block_cache.set_capacity_bytes(capacity_bytes);
    }

    /// Approximate bytes of table data holding user keys in `[start, end)`; data still in
    /// memtables is not counted. Cheap: it reads only in-memory indexes.
    pub fn approximate_size_bytes(&self, start: &[u8], end: &[u8]) -> Result<u64> {
        self.check_open()?;
        read::approximate_size_bytes(&self.inner, start, end)
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
