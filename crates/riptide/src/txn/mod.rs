//! Transactions: [`Transaction`], begun with [`crate::Db::begin`].
//!
//! A transaction buffers its writes in a write set (`write_set`) and commits them as one write
//! batch, so a commit is atomic across column families and across a crash (I14). Past
//! `TransactionOptions::write_memory_limit_bytes` the write set spills to private files
//! (`spill`), and the commit installs tables at one sequence number in one manifest record
//! instead (`db/spilled_commit.rs`, I30); past a quarter of it the keys read are coarsened into
//! ranges (`note_read`). Reads look in
//! the write set first, then in the database: at the transaction's snapshot under REPEATABLE
//! READ and SERIALIZABLE, at the latest committed state under READ COMMITTED.
//!
//! Two concurrency modes: pessimistic transactions lock every key they write (and every key
//! read with `get_for_update`) in the lock manager (`lock`) and hold the locks until they end
//! (past `lock_escalation_threshold` row locks in a column family, one lock on the family);
//! optimistic ones take no locks. Both are validated at commit against the commit history
//! (`history`): under REPEATABLE READ a transaction fails with [`Error::Conflict`] when a key it
//! wrote or read for update was written by someone else after its snapshot (first committer
//! wins); under SERIALIZABLE also when a key it read, or a key in a range it scanned, was. The
//! validation runs inside the write path in write order (see `db/write.rs`), so it and the
//! commit are one atomic step. `docs/transactions.md` states what each level allows, with the
//! scenarios, and why the checks make SERIALIZABLE serializable.
//!
//! Concurrency contract: a `Transaction` is `Send + Sync`; its methods take `&self` and may be
//! called from several threads (they serialize on the transaction's mutex, which is never held
//! while waiting for a lock or reading the database). Iterators borrow the transaction, so it
//! cannot commit while one lives, and they see the transaction's writes made before they were
//! created.
//!
//! Invariants: a transaction's locks are released exactly once, when it ends (commit,
//! rollback, or drop); a validating transaction's snapshot stays registered (so compaction
//! keeps what it reads, I6) and announced to the commit history until it ends (I27).

pub(crate) mod history;
mod iter;
pub(crate) mod lock;
pub(crate) mod own_cursor;
pub(crate) mod prepared;
pub(crate) mod spill;
pub(crate) mod two_phase;
pub(crate) mod write_set;

use crate::hash::FastHashSet as HashSet;
use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::db::{ColumnFamily, DbInner, MemoryPressure};
use crate::error::{Error, Result};
use crate::memory_charge::MemoryCharge;
use crate::options::{ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use history::{CommitHistory, KeyRange, Validation};
pub use iter::TransactionIterator;
use lock::{Granted, LockKey, LockManager, LockMode, TransactionId, WaitPolicy, WaitSlot};
use write_set::WriteSet;

/// How much a transaction sees of concurrent transactions, and what its commit checks.
///
/// The levels and the anomalies each allows are in `docs/transactions.md`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum IsolationLevel {
    /// Runs as [`IsolationLevel::ReadCommitted`]: Riptide never shows uncommitted data (a
    /// transaction's writes stay in its write set until it commits), so there is nothing dirty
    /// to read. Accepted so that SQL's four levels map one to one.
    ReadUncommitted,
    /// Every read sees the latest committed data at the time of the read; no snapshot, no
    /// validation at commit. Pessimistic writes still lock.
    ReadCommitted,
    /// Snapshot isolation: every read sees the snapshot taken at `begin`; the commit fails with
    /// [`Error::Conflict`] if another writer committed a write to a key this transaction wrote
    /// (or read with `get_for_update`) after that snapshot: first committer wins.
    #[default]
    RepeatableRead,
    /// Serializable: snapshot reads as under REPEATABLE READ, and the commit also fails if a
    /// key the transaction read, or any key in a range it scanned, was written after its
    /// snapshot. Committed transactions are then equivalent to running one at a time in commit
    /// order, and read-only ones at their snapshot; write skew, read-only anomalies and phantoms
    /// cannot happen.
    Serializable,
}

/// Whether a transaction locks keys as it goes or only validates at commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConcurrencyMode {
    /// Writes and `get_for_update` take exclusive locks held until the transaction ends; a
    /// conflicting transaction waits (up to the lock timeout). Under REPEATABLE READ and
    /// SERIALIZABLE a lock on a key written by someone else after the snapshot fails at once
    /// with [`Error::Conflict`] instead of at commit. What the SQL engine uses.
    #[default]
    Pessimistic,
    /// No locks: conflicts are found only at commit, by validation. Cheaper when transactions
    /// rarely touch the same keys.
    Optimistic,
}

/// Options of one transaction, for [`crate::Db::begin`].
#[derive(Clone, Debug)]
pub struct TransactionOptions {
    /// Isolation level. Default [`IsolationLevel::RepeatableRead`].
    pub isolation: IsolationLevel,
    /// Pessimistic (locks) or optimistic (validation only). Default pessimistic.
    pub mode: ConcurrencyMode,
    /// How long a lock request may wait before failing with [`Error::LockTimeout`]; `None`
    /// waits without limit, `Some(Duration::ZERO)` never waits. Default 1 second.
    pub lock_timeout: Option<Duration>,
    /// Look for a deadlock whenever a lock request has to wait (and fail the request that would
    /// close a cycle with [`Error::Deadlock`]). Without it, deadlocks end only by lock timeouts.
    /// Default on.
    pub deadlock_detection: bool,
    /// The most row locks the transaction may hold; a request past it fails with
    /// [`Error::Busy`] (the transaction stays usable). Keys covered by a column-family lock
    /// (lock escalation) do not count. `None`: no limit. Default `None`.
    pub max_lock_count: Option<usize>,
    /// Lock escalation (pessimistic mode): once the transaction holds more than this many row
    /// locks in one column family, it tries to take the whole family with one exclusive lock and
    /// release its row locks there, which bounds the lock memory of huge transactions. While it
    /// holds the family, every lock request of other transactions on any key of it, shared or
    /// exclusive, waits for its end (with the usual timeout and deadlock detection). The attempt
    /// is refused while another transaction holds or waits for a lock in the family; the row
    /// locks are then kept and the attempt is made again after as many new ones. `None`: never.
    /// Default `Some(100_000)` (about 11 MiB of row locks with 16-byte keys).
    pub lock_escalation_threshold: Option<usize>,
    /// Sync the commit's WAL record before `commit` returns (as `WriteOptions::sync`). Default
    /// off: the commit survives a process crash, and power loss once synced.
    pub sync: bool,
    /// The most memory the transaction's writes may hold; past it they are spilled to private
    /// files in the database directory (`NNNNNN.spill`) and the commit installs them as tables
    /// instead of writing one batch, so a transaction may write far more than fits in memory
    /// (see `docs/transactions.md`, "Huge transactions"). Capped at
    /// `Options::max_batch_size_bytes`. Default 32 MiB.
    pub write_memory_limit_bytes: usize,
}

impl Default for TransactionOptions {
    fn default() -> TransactionOptions {
        TransactionOptions {
            isolation: IsolationLevel::default(),
            mode: ConcurrencyMode::default(),
            lock_timeout: Some(Duration::from_secs(1)),
            deadlock_detection: true,
            max_lock_count: None,
            lock_escalation_threshold: Some(100_000),
            sync: false,
            write_memory_limit_bytes: 32 << 20,
        }
    }
}

/// Counters of transactions, for `Db::stats`.
#[derive(Debug, Default)]
pub(crate) struct TransactionCounters {
    pub(crate) begun: AtomicU64,
    pub(crate) committed: AtomicU64,
    pub(crate) rolled_back: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    pub(crate) open: AtomicU64,
}

/// What all transactions of a database share: the lock manager, the commit history, ids and
/// counters. Part of `DbInner`.
#[derive(Default)]
pub(crate) struct TransactionShared {
    pub(crate) locks: LockManager,
    pub(crate) history: CommitHistory,
    /// Prepared transactions waiting for their decision (two-phase commit).
    pub(crate) prepared: two_phase::PreparedRegistry,
    next_id: AtomicU64,
    pub(crate) counters: TransactionCounters,
}

impl TransactionShared {
    /// A fresh transaction id.
    pub(crate) fn new_id(&self) -> TransactionId {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Memory of the lock tables and the commit history, charged to the memory cap.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.locks.memory_bytes() + self.history.memory_bytes()
    }

    /// The oldest log a prepared transaction's commit in progress needs kept.
    pub(crate) fn oldest_pinned_log(&self) -> Option<u64> {
        self.prepared.oldest_pinned_log()
    }
}

/// A key for messages: printable ASCII as is, anything else as hex.
pub(crate) fn describe_key(key: &[u8]) -> String {
    if key.iter().all(|byte| byte.is_ascii_graphic() || *byte == b' ') {
        format!("{:?}", String::from_utf8_lossy(key))
    } else {
        let hex: String = key.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("0x{hex}")
    }
}

/// Approximate bytes of one read key besides its bytes (hash table slot, allocation).
const READ_KEY_OVERHEAD_BYTES: usize = 48;

/// The least a transaction's write memory limit shrinks to under memory pressure.
const MIN_PRESSED_WRITE_MEMORY_BYTES: usize = 64 << 10;

/// Adds an empty read range (nothing read yet; an iterator widens it as it moves) and returns
/// its slot.
fn push_empty_range(reads: &mut ReadSet, column_family: u32) -> usize {
    reads.ranges.push(KeyRange { column_family, start: Bound::Excluded(Vec::new()), end: Bound::Excluded(Vec::new()) });
    reads.ranges.len() - 1
}

/// What a transaction read, for SERIALIZABLE validation and for REPEATABLE READ's
/// `get_for_update`.
#[derive(Default)]
struct ReadSet {
    /// Keys whose later writes fail the commit, besides the written keys: read keys under
    /// SERIALIZABLE, `get_for_update` keys under REPEATABLE READ and SERIALIZABLE.
    keys: HashSet<(u32, Vec<u8>)>,
    /// Ranges scanned under SERIALIZABLE (iterators update theirs in place as they move).
    ranges: Vec<KeyRange>,
    /// Approximate bytes of `keys`.
    keys_bytes: usize,
}

struct State {
    writes: WriteSet,
    reads: ReadSet,
    /// Keys this transaction holds row locks on (not those a column-family lock covers).
    locks: HashSet<LockKey>,
    /// Its row locks counted per column family, and the families it holds whole (lock
    /// escalation), kept with `locks` by `LockManager::record_new_row_lock`.
    column_family_locks: lock::ColumnFamilyLocks,
    /// Set by `prepare`: the transaction now lives in the prepared registry under this xid.
    prepared_xid: Option<Vec<u8>>,
    finished: bool,
    /// What `writes` and `reads` hold, charged to the memory cap (see `recharge`).
    memory_charge: MemoryCharge,
}

impl State {
    /// Brings the memory charge up to date with the write and read sets.
    fn recharge(&mut self) {
        let bytes = self.writes.total_memory_bytes() + self.reads.keys_bytes;
        self.memory_charge.set(bytes as u64);
    }
}

/// A transaction; see [`crate::Db::begin`] and the module documentation of `txn`.
///
/// Dropping a transaction that has not committed rolls it back.
pub struct Transaction {
    db: Arc<DbInner>,
    id: TransactionId,
    options: TransactionOptions,
    /// The snapshot of REPEATABLE READ and SERIALIZABLE transactions.
    snapshot: Option<Snapshot>,
    slot: crate::sync::Arc<WaitSlot>,
    state: Mutex<State>,
}

impl fmt::Debug for Transaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("isolation", &self.options.isolation)
            .field("mode", &self.options.mode)
            .field("snapshot", &self.snapshot.as_ref().map(Snapshot::sequence))
            .finish()
    }
}

/// Begins a transaction (see `Db::begin`).
pub(crate) fn begin(db: &Arc<DbInner>, options: &TransactionOptions) -> Result<Transaction> {
    if options.max_lock_count == Some(0) {
        return Err(Error::invalid("max_lock_count must be at least 1 (or None)"));
    }
    let shared = &db.transactions;
    let id = shared.new_id();
    let snapshot = if validates(options.isolation) {
        // Announce the transaction first, so that every write sequenced from now on is
        // recorded; then wait until the writes that were not recorded are visible, so that the
        // snapshot covers them (see `history`).
        let unrecorded_through = shared.history.begin_tracking(tracks_ranges(options.isolation));
        if let Err(error) = wait_until_visible(db, unrecorded_through) {
            shared.history.tracking_abandoned(tracks_ranges(options.isolation));
            return Err(error);
        }
        let snapshot = shared.history.start_tracking(|| {
            let snapshot = db.snapshots.acquire_current(&db.visible_sequence);
            let sequence = snapshot.sequence();
            (snapshot, sequence)
        });
        Some(snapshot)
    } else {
        None
    };
    shared.counters.begun.fetch_add(1, Ordering::Relaxed);
    shared.counters.open.fetch_add(1, Ordering::Relaxed);
    Ok(Transaction {
        db: Arc::clone(db),
        id,
        options: options.clone(),
        snapshot,
        slot: crate::sync::Arc::new(WaitSlot::default()),
        state: Mutex::new(State {
            writes: WriteSet::default(),
            reads: ReadSet::default(),
            locks: HashSet::default(),
            column_family_locks: lock::ColumnFamilyLocks::default(),
            prepared_xid: None,
            finished: false,
            memory_charge: db.memory.write_set_charge(),
        }),
    })
}

fn validates(isolation: IsolationLevel) -> bool {
    isolation >= IsolationLevel::RepeatableRead
}

/// True for the levels whose range reads are validated (and so need the commit history's
/// ordered index).
pub(crate) fn tracks_ranges(isolation: IsolationLevel) -> bool {
    isolation == IsolationLevel::Serializable
}

/// Waits until every write up to `sequence` is visible: a group in flight finishes its WAL
/// append and memtable insert in about a millisecond. Fails if writes stopped meanwhile.
fn wait_until_visible(db: &DbInner, sequence: u64) -> Result<()> {
    let mut spins = 0u32;
    while db.visible_sequence.load(Ordering::Acquire) < sequence {
        spins += 1;
        if spins < 100 {
            std::thread::yield_now();
            continue;
        }
        {
            let state = db.state.lock();
            db.check_not_stopped(&state)?;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

impl Transaction {
    /// The transaction's id: ids grow in the order transactions began (deadlock victims are
    /// chosen by it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The options it was begun with.
    pub fn options(&self) -> &TransactionOptions {
        &self.options
    }

    /// The snapshot its reads use (REPEATABLE READ and SERIALIZABLE); `None` under READ
    /// COMMITTED.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    fn serializable(&self) -> bool {
        self.options.isolation == IsolationLevel::Serializable
    }

    fn pessimistic(&self) -> bool {
        self.options.mode == ConcurrencyMode::Pessimistic
    }

    fn check_active(&self, state: &State) -> Result<()> {
        if state.finished {
            return Err(Error::invalid(format!("transaction {} has already ended", self.id)));
        }
        if let Some(xid) = &state.prepared_xid {
            return Err(Error::invalid(format!(
                "transaction {} is prepared (xid {}): only commit or rollback remain",
                self.id,
                describe_key(xid)
            )));
        }
        if self.db.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".to_string()));
        }
        Ok(())
    }

    fn family(&self, column_family: Option<&ColumnFamily>) -> Result<Arc<crate::db::ColumnFamilyShared>> {
        match column_family {
            None => Ok(Arc::clone(&self.db.default_column_family)),
            Some(family) => self.db.live_column_family(family),
        }
    }

    fn read_options(&self) -> ReadOptions {
        ReadOptions { snapshot: self.snapshot.clone(), ..ReadOptions::default() }
    }

    /// Reads `key` from the default column family: the transaction's own write if it made one,
    /// else the database at the transaction's snapshot (latest committed state under READ
    /// COMMITTED). `Ok(None)` when absent.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in(None, key)
    }

    /// [`Transaction::get`] in `column_family`.
    pub fn get_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_in(Some(column_family), key)
    }

    fn get_in(&self, column_family: Option<&ColumnFamily>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let family = self.family(column_family)?;
        {
            let mut state = self.state.lock();
            self.check_active(&state)?;
            if let Some(written) = state.writes.get(family.id, key)? {
                return Ok(written);
            }
            if self.serializable() {
                self.note_read(&mut state, family.id, key);
            }
        }
        crate::db::read::get(&self.db, &family, key, &self.read_options())
    }

    /// Reads `key` for update: locks it exclusively (pessimistic mode) and, under REPEATABLE
    /// READ and SERIALIZABLE, makes the commit fail if someone else writes it after the
    /// snapshot, as if the transaction had written it. Under a pessimistic lock that check runs
    /// at once: [`Error::Conflict`] here means the key changed since the snapshot. Returns the
    /// value as [`Transaction::get`] would.
    pub fn get_for_update(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.locking_get(None, key, LockMode::Exclusive)
    }

    /// [`Transaction::get_for_update`] in `column_family`.
    pub fn get_for_update_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.locking_get(Some(column_family), key, LockMode::Exclusive)
    }

    /// Reads `key` under a shared lock (SQL's `LOCK IN SHARE MODE`): as
    /// [`Transaction::get_for_update`], except that in pessimistic mode the lock is shared, so
    /// other transactions may share-lock and read the key too, while none can write it (or
    /// lock it for update) until this one ends. A later write or `get_for_update` of the key by
    /// this transaction upgrades the lock, waiting for the other sharers to end (two sharers
    /// that both upgrade deadlock, and one of them gets [`Error::Deadlock`]).
    pub fn get_for_share(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.locking_get(None, key, LockMode::Shared)
    }

    /// [`Transaction::get_for_share`] in `column_family`.
    pub fn get_for_share_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.locking_get(Some(column_family), key, LockMode::Shared)
    }

    fn locking_get(&self, column_family: Option<&ColumnFamily>, key: &[u8], mode: LockMode) -> Result<Option<Vec<u8>>> {
        let family = self.family(column_family)?;
        self.check_key(key)?;
        self.check_active(&self.state.lock())?;
        self.lock_key(family.id, key, mode)?;
        {
            let mut state = self.state.lock();
            if let Some(written) = state.writes.get(family.id, key)? {
                return Ok(written);
            }
            if validates(self.options.isolation) {
                self.note_read(&mut state, family.id, key);
            }
        }
        crate::db::read::get(&self.db, &family, key, &self.read_options())
    }

    /// Stores `value` under `key` in the default column family, visible to others once the
    /// transaction commits. Pessimistic: locks `key` first (may wait, and may fail with
    /// [`Error::LockTimeout`], [`Error::Deadlock`], [`Error::Busy`] or [`Error::Conflict`];
    /// the transaction is then unchanged).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_in(None, key, Some(value))
    }

    /// [`Transaction::put`] in `column_family`.
    pub fn put_cf(&self, column_family: &ColumnFamily, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_in(Some(column_family), key, Some(value))
    }

    /// Deletes `key` from the default column family when the transaction commits (locking as
    /// [`Transaction::put`] does).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.write_in(None, key, None)
    }

    /// [`Transaction::delete`] in `column_family`.
    pub fn delete_cf(&self, column_family: &ColumnFamily, key: &[u8]) -> Result<()> {
        self.write_in(Some(column_family), key, None)
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        let limit = self.db.options.max_key_size_bytes;
        if key.len() > limit {
            return Err(Error::invalid(format!("key of {} bytes exceeds max_key_size_bytes ({limit})", key.len())));
        }
        Ok(())
    }

    fn write_in(&self, column_family: Option<&ColumnFamily>, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let family = self.family(column_family)?;
        self.check_key(key)?;
        if let Some(value) = value {
            let limit = self.db.options.max_value_size_bytes;
            if value.len() > limit {
                return Err(Error::invalid(format!(
                    "value of {} bytes exceeds max_value_size_bytes ({limit})",
                    value.len()
                )));
            }
        }
        self.check_active(&self.state.lock())?;
        self.lock_key(family.id, key, LockMode::Exclusive)?;
        let mut state = self.state.lock();
        self.check_active(&state)?;
        let added_bytes = write_set::entry_size_bytes(key.len(), value.map_or(0, <[u8]>::len));
        if state.writes.memory_bytes() > 0
            && state.writes.memory_bytes() + added_bytes > self.write_memory_limit_bytes()
        {
            // The write would pass the limit: the writes in memory move to spilled runs first.
            // Should that fail, this write is not made (the layers spilled so far stay so).
            let db = &self.db;
            let options_of = |id: u32| db.column_family_handles.read().get(&id).map(|family| family.options());
            state.writes.spill(db, &options_of)?;
        }
        state.writes.write(family.id, &family.comparator, key, value.map(<[u8]>::to_vec));
        state.recharge();
        Ok(())
    }

    /// Pessimistic mode: takes a lock on `key` in `mode` (without the state mutex, since it
    /// may wait), then checks that nobody wrote it after the snapshot. A shared lock gets the
    /// same check: a locking read promises the value it returns is the key's latest, which a
    /// write committed after the snapshot would break.
    fn lock_key(&self, column_family: u32, key: &[u8], mode: LockMode) -> Result<()> {
        if !self.pessimistic() {
            return Ok(());
        }
        let lock_key: LockKey = (column_family, key.to_vec());
        {
            let state = self.state.lock();
            if let Some(limit) = self.options.max_lock_count {
                // A key of a column family held whole is covered without a row lock, so it
                // never counts against the limit.
                let covered = state.column_family_locks.holds_whole(column_family);
                if !covered && state.locks.len() >= limit && !state.locks.contains(&lock_key) {
                    return Err(Error::Busy(format!(
                        "transaction {} holds {} row locks, its max_lock_count",
                        self.id,
                        state.locks.len()
                    )));
                }
            }
        }
        let policy =
            WaitPolicy { timeout: self.options.lock_timeout, detect_deadlocks: self.options.deadlock_detection };
        let locks = &self.db.transactions.locks;
        let granted = locks.acquire(self.id, &self.slot, &lock_key, mode, policy)?;
        if granted == Granted::New {
            let mut state = self.state.lock();
            if state.finished || state.prepared_xid.is_some() {
                // Ended (or prepared, which hands the locks over) by another thread while this
                // one waited: let the lock go again, or nobody would release it.
                locks.release(self.id, &lock_key);
                return Err(Error::invalid(format!("transaction {} has already ended", self.id)));
            }
            // Escalation, when due, happens here under the state mutex: the set of row locks
            // and the lock tables then change together, and `finish` cannot release a row lock
            // that escalation releases too.
            let state = &mut *state;
            locks.record_new_row_lock(
                self.id,
                lock_key,
                self.options.lock_escalation_threshold,
                &mut state.locks,
                &mut state.column_family_locks,
            );
        }
        if granted == Granted::AlreadyHeld {
            // A key read for update was checked against the history when it was locked, and
            // nobody else can have written it since: skip the history's mutex, which every
            // transaction's locks and commits share (the write of a read-modify-write).
            let state = self.state.lock();
            if state.reads.keys.contains(&(column_family, key.to_vec())) {
                return Ok(());
            }
        }
        if let Some(snapshot) = &self.snapshot {
            let history = self.db.transactions.history.lock();
            let order_of = |id: u32| self.db.column_family_order(id);
            if let Some(sequence) = history.write_after(column_family, key, snapshot.sequence(), &order_of) {
                self.db.transactions.counters.conflicts.fetch_add(1, Ordering::Relaxed);
                return Err(history::written_after_snapshot(
                    self.id,
                    column_family,
                    key,
                    sequence,
                    snapshot.sequence(),
                ));
            }
        }
        Ok(())
    }

    /// An iterator over the default column family that merges the transaction's own writes
    /// (made before this call) with the database at the transaction's snapshot (latest state
    /// under READ COMMITTED). `options.snapshot` is ignored under REPEATABLE READ and
    /// SERIALIZABLE (the transaction's snapshot is used); bounds work as for `Db::iter`. Under
    /// SERIALIZABLE every range the iterator passes over is recorded for validation.
    pub fn iter(&self, options: &ReadOptions) -> Result<TransactionIterator<'_>> {
        self.iter_in(None, options)
    }

    /// [`Transaction::iter`] over `column_family`.
    pub fn iter_cf(&self, column_family: &ColumnFamily, options: &ReadOptions) -> Result<TransactionIterator<'_>> {
        self.iter_in(Some(column_family), options)
    }

    fn iter_in(&self, column_family: Option<&ColumnFamily>, options: &ReadOptions) -> Result<TransactionIterator<'_>> {
        let family = self.family(column_family)?;
        let mut read_options = options.clone();
        if self.snapshot.is_some() {
            read_options.snapshot = self.snapshot.clone();
        }
        let (own, range_slot) = {
            let mut state = self.state.lock();
            self.check_active(&state)?;
            let own = state.writes.cursor(
                family.id,
                &family.comparator,
                read_options.lower_bound.as_deref(),
                read_options.upper_bound.as_deref(),
            );
            let range_slot = self.serializable().then(|| push_empty_range(&mut state.reads, family.id));
            (own, range_slot)
        };
        let database = crate::db::read::new_iterator(&self.db, &family, &read_options)?;
        Ok(TransactionIterator::new(
            self,
            database,
            own,
            family.comparator.clone(),
            read_options,
            range_slot.map(|slot| (family.id, slot)),
        ))
    }

    /// Records that a SERIALIZABLE iterator read `range` (replacing what it recorded before).
    fn record_range(&self, slot: usize, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) {
        let mut state = self.state.lock();
        if let Some(range) = state.reads.ranges.get_mut(slot) {
            range.start = start;
            range.end = end;
        }
    }

    /// Adds another range read by an iterator that was repositioned; returns its slot.
    fn new_range_slot(&self, column_family: u32) -> usize {
        push_empty_range(&mut self.state.lock().reads, column_family)
    }

    /// Opens a savepoint: [`Transaction::rollback_to_savepoint`] undoes the writes made after
    /// it. Savepoints nest. Locks taken after a savepoint are kept when rolling back to it (as
    /// in InnoDB), and so are recorded reads.
    pub fn savepoint(&self) -> Result<()> {
        let mut state = self.state.lock();
        self.check_active(&state)?;
        state.writes.savepoint();
        Ok(())
    }

    /// Undoes every write made since the newest open savepoint and closes it.
    /// [`Error::InvalidArgument`] if no savepoint is open.
    pub fn rollback_to_savepoint(&self) -> Result<()> {
        let mut state = self.state.lock();
        self.check_active(&state)?;
        if !state.writes.rollback_to_savepoint() {
            return Err(Error::invalid(format!("transaction {} has no open savepoint", self.id)));
        }
        state.recharge();
        Ok(())
    }

    /// Closes the newest open savepoint, keeping its writes. [`Error::InvalidArgument`] if no
    /// savepoint is open.
    pub fn release_savepoint(&self) -> Result<()> {
        let mut state = self.state.lock();
        self.check_active(&state)?;
        if !state.writes.release_savepoint() {
            return Err(Error::invalid(format!("transaction {} has no open savepoint", self.id)));
        }
        state.recharge();
        Ok(())
    }

    /// Number of keys written so far (a key written again after its earlier write was spilled
    /// counts again).
    pub fn write_count(&self) -> usize {
        self.state.lock().writes.len()
    }

    /// Approximate memory of the transaction's writes: the in-memory ones (bounded by
    /// `TransactionOptions::write_memory_limit_bytes`) and the readers of the spilled ones.
    pub fn write_memory_bytes(&self) -> usize {
        self.state.lock().writes.total_memory_bytes()
    }

    /// Bytes of the transaction's writes spilled to files so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.state.lock().writes.spilled_bytes()
    }

    /// The in-memory limit of the write set: the option, but never past the batch limit, so a
    /// write set that did not spill always commits as one batch. Under high memory pressure
    /// (the memory cap) it shrinks to a quarter, under critical pressure to a sixteenth (never
    /// below 64 KiB unless the option is lower), so that transactions spill their writes to
    /// disk rather than hold the process above the cap.
    fn write_memory_limit_bytes(&self) -> usize {
        let configured = self.options.write_memory_limit_bytes.min(self.db.options.max_batch_size_bytes);
        let divisor = match self.db.memory.current_pressure() {
            MemoryPressure::Normal | MemoryPressure::Elevated => 1,
            MemoryPressure::High => 4,
            MemoryPressure::Critical => 16,
        };
        (configured / divisor).max(configured.min(MIN_PRESSED_WRITE_MEMORY_BYTES))
    }

    /// Commits: validates (REPEATABLE READ, SERIALIZABLE) and writes every change as one atomic
    /// batch. Durable as a `Db::write` with `sync` = the transaction's `sync` option. On
    /// [`Error::Conflict`] nothing was written and the transaction is rolled back; on other
    /// errors (I/O, a dropped column family) also nothing was acknowledged as written. The
    /// transaction's locks are released in every case.
    pub fn commit(self) -> Result<()> {
        self.commit_returning_sequence().map(|_| ())
    }

    /// [`Transaction::commit`], returning the commit's sequence number (`None` when there was
    /// nothing to write): the commit is visible to snapshots at or above it.
    pub fn commit_returning_sequence(self) -> Result<Option<u64>> {
        if let Some(xid) = self.take_prepared_xid()? {
            return two_phase::commit_prepared(&self.db, &xid).map(Some);
        }
        /// What the commit writes: one batch, or (spilled) tables from cursors over the layers.
        enum Commit {
            Batch(crate::WriteBatch, Validation, Option<(lock::TransactionId, crate::db::write::RowLocks)>),
            Spilled(crate::db::spilled_commit::SpilledCommit),
        }
        let commit = {
            let mut state = self.state.lock();
            self.check_active(&state)?;
            if state.writes.is_empty() {
                // Nothing to write. A read-only transaction needs no validation: its reads come
                // from one snapshot, and every committed writer was validated, so what it saw is
                // the state after a prefix of the commit order.
                drop(state);
                self.finish(true);
                return Ok(None);
            }
            if state.writes.spilled() {
                let mut families = Vec::new();
                for id in state.writes.column_families() {
                    let order = self
                        .db
                        .column_family_order(id)
                        .ok_or_else(|| Error::invalid(format!("column family {id} was dropped")))?;
                    families.push((id, state.writes.cursor(id, &order, None, None)));
                }
                Commit::Spilled(crate::db::spilled_commit::SpilledCommit {
                    families,
                    validation: self.validation(&state),
                })
            } else {
                // The leader releases the row locks as soon as the commit is visible (I37); the
                // column families held whole go at `finish`.
                let row_locks = (!state.locks.is_empty()).then(|| (self.id, std::mem::take(&mut state.locks)));
                Commit::Batch(state.writes.to_batch(), self.validation(&state), row_locks)
            }
        };
        let result = match commit {
            Commit::Batch(batch, validation, row_locks) => {
                let write_options = WriteOptions { sync: self.options.sync };
                crate::db::write::write_transaction(&self.db, batch, &write_options, validation, row_locks)
            }
            Commit::Spilled(request) => crate::db::spilled_commit::commit(self.db.as_ref(), request),
        };
        if matches!(result, Err(Error::Conflict(_))) {
            self.db.transactions.counters.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        self.finish(result.is_ok());
        result.map(Some)
    }

    /// Adds `key` to the keys whose later writes by others fail the commit. Past a quarter of
    /// `write_memory_limit_bytes` the keys are coarsened: each column family's become one range
    /// from its smallest to its largest (in the family's order), which covers them and bounds
    /// the read set of a huge transaction, at the price of conflicts with writes between them.
    fn note_read(&self, state: &mut State, column_family: u32, key: &[u8]) {
        if state.reads.keys.insert((column_family, key.to_vec())) {
            state.reads.keys_bytes += key.len() + READ_KEY_OVERHEAD_BYTES;
            state.recharge();
        }
        if state.reads.keys_bytes <= self.write_memory_limit_bytes() / 4 {
            return;
        }
        let mut spans: std::collections::BTreeMap<u32, (Vec<u8>, Vec<u8>)> = std::collections::BTreeMap::new();
        for (family, key) in std::mem::take(&mut state.reads.keys) {
            let Some(order) = self.db.column_family_order(family) else { continue };
            match spans.get_mut(&family) {
                None => {
                    spans.insert(family, (key.clone(), key));
                }
                Some((low, high)) => {
                    if order.compare_user_keys(&key, low).is_lt() {
                        *low = key;
                    } else if order.compare_user_keys(&key, high).is_gt() {
                        *high = key;
                    }
                }
            }
        }
        for (family, (low, high)) in spans {
            state.reads.ranges.push(KeyRange {
                column_family: family,
                start: Bound::Included(low),
                end: Bound::Included(high),
            });
        }
        state.reads.keys_bytes = 0;
        state.recharge();
    }

    /// What the commit (or prepare) checks: written keys always (against prepared
    /// transactions' guards, and under REPEATABLE READ and SERIALIZABLE against writes since
    /// the snapshot), read keys and ranges as the level requires.
    fn validation(&self, state: &State) -> Validation {
        let (read, ranges) = if self.snapshot.is_some() {
            (state.reads.keys.iter().cloned().collect(), state.reads.ranges.clone())
        } else {
            (Vec::new(), Vec::new())
        };
        Validation {
            transaction: self.id,
            snapshot: self.snapshot.as_ref().map(Snapshot::sequence),
            // A spilled commit checks its written keys as it writes them.
            written: if state.writes.spilled() { Vec::new() } else { state.writes.keys() },
            read,
            ranges,
            commits_prepared: None,
            preparing: None,
        }
    }

    /// Prepares the transaction for two-phase commit under `xid` (1 to 256 bytes, unique among
    /// prepared transactions): validates it as a commit would, then makes its writes durable
    /// (in a file of its own, synced) but invisible, and keeps its locks. After `prepare`
    /// returns the transaction can no longer fail to commit: until it is decided, commits of
    /// others that write a key it wrote or read, or into a range it scanned (SERIALIZABLE),
    /// fail with [`Error::Conflict`]. Decide it with [`Transaction::commit`] /
    /// [`Transaction::rollback`], or by xid with [`crate::Db::commit_prepared`] /
    /// [`crate::Db::rollback_prepared`] (also after the handle was dropped: dropping a prepared
    /// transaction does not roll it back). After a crash, `Db::open` recovers it (locks
    /// included) and [`crate::Db::prepared_transactions`] lists it. On error the transaction is
    /// unchanged (still active).
    pub fn prepare(&self, xid: &[u8]) -> Result<()> {
        two_phase::check_xid(xid)?;
        let mut state = self.state.lock();
        self.check_active(&state)?;
        if state.writes.spilled() {
            // The prepared transaction's file lists its runs, so every write must be in one.
            let db = &self.db;
            let options_of = |id: u32| db.column_family_handles.read().get(&id).map(|family| family.options());
            state.writes.spill(db, &options_of)?;
        }
        let request = two_phase::PrepareRequest {
            owner: self.id,
            xid: xid.to_vec(),
            validation: self.validation(&state),
            locks: state.locks.iter().cloned().collect(),
            snapshot: self.snapshot.clone(),
            tracks_ranges: tracks_ranges(self.options.isolation),
        };
        // The transaction's mutex stays held: the write set moves to the registry on success.
        two_phase::prepare(&self.db, request, &mut state.writes).inspect_err(|error| {
            if matches!(error, Error::Conflict(_)) {
                self.db.transactions.counters.conflicts.fetch_add(1, Ordering::Relaxed);
            }
        })?;
        // The registry owns the writes, the locks and the snapshot's registration now.
        state.locks.clear();
        state.writes = WriteSet::default();
        state.reads = ReadSet::default();
        state.recharge();
        state.prepared_xid = Some(xid.to_vec());
        Ok(())
    }

    /// For a prepared transaction: ends the handle and returns the xid to decide.
    fn take_prepared_xid(&self) -> Result<Option<Vec<u8>>> {
        let mut state = self.state.lock();
        if state.finished {
            return Err(Error::invalid(format!("transaction {} has already ended", self.id)));
        }
        let xid = state.prepared_xid.clone();
        if xid.is_some() {
            state.finished = true;
        }
        Ok(xid)
    }

    /// Rolls back: discards every write and releases the locks.
    pub fn rollback(self) -> Result<()> {
        if let Some(xid) = self.take_prepared_xid()? {
            return two_phase::rollback_prepared(&self.db, &xid);
        }
        let state = self.state.lock();
        self.check_active(&state)?;
        drop(state);
        self.finish(false);
        Ok(())
    }

    /// Ends the transaction once: releases its locks and its place in the commit history.
    fn finish(&self, committed: bool) {
        let (locks, holds_column_families) = {
            let mut state = self.state.lock();
            if state.finished {
                return;
            }
            state.finished = true;
            if state.prepared_xid.is_some() {
                // Prepared: the registry holds what is left, and the decision releases it.
                return;
            }
            state.writes = WriteSet::default();
            state.reads = ReadSet::default();
            state.recharge();
            let column_family_locks = std::mem::take(&mut state.column_family_locks);
            (std::mem::take(&mut state.locks), column_family_locks.holds_any_whole())
        };
        let shared = &self.db.transactions;
        shared.locks.release_all(self.id, locks);
        if holds_column_families {
            shared.locks.release_column_families(self.id);
        }
        if let Some(snapshot) = &self.snapshot {
            shared.history.tracking_ended(
                snapshot.sequence(),
                tracks_ranges(self.options.isolation),
                self.db.visible_sequence.load(Ordering::Acquire),
            );
        }
        let counter = if committed { &shared.counters.committed } else { &shared.counters.rolled_back };
        counter.fetch_add(1, Ordering::Relaxed);
        shared.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.finish(false);
    }
}
