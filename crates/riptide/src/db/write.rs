//! The write path: limits, group commit, WAL append and sync, memtable insert, memtable switch.
//!
//! Writers queue up; the first in line becomes the leader. The leader takes every waiting
//! writer (up to a byte budget) as one group, assigns the group a contiguous range of sequence
//! numbers, appends one WAL record per batch with a single `write` (and a single sync when any
//! member asked for one or the sync mode is `Full`), has the batches inserted into the memtable
//! (by itself for small groups; for groups of several writers with at least
//! `PARALLEL_INSERT_MIN_ENTRIES` entries, each member inserts its own batch while the leader
//! waits, so both cores work), publishes the new visible sequence, and wakes the members with
//! the shared result. Then it hands leadership to the next waiting writer. The queue and its
//! hand-offs are `write_queue`'s ([`WriteQueue`], model-checked with loom); this module says what
//! a group does. `flush` takes leadership through a token writer that no group ever absorbs;
//! so does dropping a column family.
//!
//! Small writes (transaction commits included; synced ones while at most four are in flight)
//! do not queue at all: they sequence, log, insert and publish themselves (`self_service`;
//! synced ones share syncs in `sync_stage`), and fall back to the queue only when their
//! memtables need a switch, a stall or a delay. A group, and every holder of leadership,
//! holds the write gate exclusively, so it runs with no self-service write in flight: then only
//! it touches the sequence counter, the WAL writer and the memtable switch.
//!
//! A group's batches may write to several column families: the leader makes room in each
//! memtable they name (one WAL serves all column families, so a memtable switch of any column
//! family starts a new WAL) and inserts each record into its column family's memtable.
//!
//! Invariant I8: sequence numbers are assigned in WAL order, and the visible sequence only
//! moves forward, to the end of a group whose batches are all in the memtable.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::column_family::{ColumnFamily, ColumnFamilyShared, ColumnFamilyState};
use super::filename::log_path;
use super::stats::MemoryPressure;
use super::write_queue::{self, Writer};
use super::{DbInner, DbState, ImmutableMemTable, ReadView};
use crate::batch::{RecordRef, WriteBatch, DEFAULT_COLUMN_FAMILY_ID};
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::key::{ValueKind, MAX_SEQUENCE_NUMBER};
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, SyncMode, WriteOptions};
use crate::txn::history::{HistoryState, Validation};
use crate::txn::lock::{LockKey, TransactionId};
use crate::version::edit::VersionEdit;
use crate::version::tree::Version;
use crate::wal::LogWriter;

/// A group never grows past this many bytes, so one huge batch does not delay the small ones
/// behind it for long and a group's WAL write stays a reasonable size. Large enough that
/// several batches of 4 KiB values (about 4 MiB per 1,000) still form one group and insert in
/// parallel: with 1 MiB, such batches went one at a time on one core (about 15 % slower in
/// the loader with 8 writers).
const MAX_GROUP_SIZE_BYTES: usize = 8 << 20;

/// Groups with at least this many entries (and more than one writer) insert in parallel; for
/// smaller groups the extra wake-ups cost more than the inserts.
const PARALLEL_INSERT_MIN_ENTRIES: u64 = 64;

/// ... and at least this many entries per writer on average: waking every member twice (to
/// insert, then to return) costs more than inserting a few entries each.
const PARALLEL_INSERT_MIN_AVERAGE_ENTRIES: u64 = 32;

/// The WAL currently written, behind a mutex shared with the interval-sync thread.
pub(crate) struct WalState {
    pub(crate) writer: Option<LogWriter>,
    pub(crate) number: u64,
    /// True when bytes were appended since the last sync.
    pub(crate) unsynced: bool,
    /// True when the current log's name has not been made durable yet (it was created by a
    /// switch; a sync of the directory comes with the first sync of the log).
    pub(crate) name_unsynced: bool,
}

/// A log that was replaced by a newer one while it still held unsynced appends.
///
/// Such logs are not synced at the switch. They are synced only when something needs them
/// durable: a sync of the current log (a synced write, the interval thread, close), which
/// first syncs every closed log so that what survives a power loss stays a prefix of the write
/// history (I12); and a flush while several column families exist, so that a table never holds
/// one family's half of a batch whose other half, still only in a log, could be lost. A log
/// whose data all reached tables first is deleted unsynced: its pages usually never reach the
/// disk at all (the kernel drops dirty pages of a deleted file), which saves a write of every
/// byte users write.
pub(crate) struct ClosedLog {
    pub(crate) number: u64,
    pub(crate) writer: LogWriter,
    /// True when its name has not been made durable yet.
    pub(crate) name_unsynced: bool,
}

/// The memtables a write group inserts into: the default column family's, and those of the
/// other column families its batches name.
pub(crate) struct GroupMemTables {
    default: Arc<MemTable>,
    others: Vec<(u32, Arc<MemTable>)>,
}

impl GroupMemTables {
    pub(crate) fn get(&self, id: u32) -> Option<&MemTable> {
        if id == DEFAULT_COLUMN_FAMILY_ID {
            return Some(&self.default);
        }
        self.others.iter().find(|(other, _)| *other == id).map(|(_, memtable)| memtable.as_ref())
    }
}

/// A write waiting in the queue: its batch and what the leader needs to know about it.
pub(crate) struct PendingWrite {
    /// Locked by the leader (to stamp the sequence and append it to the WAL) and, in a parallel
    /// group, afterwards by its own writer to insert it; never by two at once.
    batch: Mutex<WriteBatch>,
    /// The column families other than the default one that the batch writes to, sorted.
    column_family_ids: Vec<u32>,
    sync: bool,
    /// Set for a transaction's commit: what the leader validates before sequencing it.
    commit: Option<TransactionCommit>,
}

/// A transaction's commit as the write leader sees it: the checks against the commit history
/// (see `txn::history`), run in write order just before the batch gets its sequence numbers,
/// and where a failed check is reported (the batch is then dropped from the group: nothing of
/// it reaches the WAL or a memtable).
pub(crate) struct TransactionCommit {
    pub(crate) validation: Validation,
    pub(crate) rejection: Arc<Mutex<Option<Error>>>,
    /// The first sequence number of the committed batch, set once it is sequenced.
    pub(crate) sequence: Arc<std::sync::atomic::AtomicU64>,
    /// The transaction's row locks (pessimistic mode), released by the leader as soon as the
    /// group is visible (I37). Otherwise the transaction's waiters would wait, beside the
    /// group's write, for the committing thread to be woken and scheduled again, which with
    /// more threads than cores can take longer than the write itself. Whatever the leader did
    /// not release (the group failed) `write_transaction` releases before it returns.
    pub(crate) row_locks: Arc<Mutex<Option<(TransactionId, RowLocks)>>>,
}

/// A transaction's row locks, as its state holds them.
pub(crate) type RowLocks = crate::hash::FastHashSet<LockKey>;

impl PendingWrite {
    /// The write of the token `with_write_leadership` queues: nothing, and no group takes it.
    fn token() -> PendingWrite {
        PendingWrite { batch: Mutex::new(WriteBatch::new()), column_family_ids: Vec::new(), sync: false, commit: None }
    }
}

/// The write queue of a database: batches, with memtables shared by parallel inserts.
pub(crate) type WriteQueue = write_queue::WriteQueue<PendingWrite, GroupMemTables>;

/// One write in the queue, as a group's leader sees it.
type QueuedWriter = Writer<PendingWrite, GroupMemTables>;

/// The write queue of a freshly opened database.
pub(crate) fn new_write_queue() -> WriteQueue {
    WriteQueue::new(MAX_GROUP_SIZE_BYTES)
}

fn check_limits(inner: &DbInner, batch: &WriteBatch) -> Result<()> {
    let options = &inner.options;
    if batch.max_key_bytes() > options.max_key_size_bytes {
        return Err(Error::invalid(format!(
            "key of {} bytes exceeds max_key_size_bytes ({})",
            batch.max_key_bytes(),
            options.max_key_size_bytes
        )));
    }
    if batch.max_value_bytes() > options.max_value_size_bytes {
        return Err(Error::invalid(format!(
            "value of {} bytes exceeds max_value_size_bytes ({})",
            batch.max_value_bytes(),
            options.max_value_size_bytes
        )));
    }
    if batch.size_bytes() > options.max_batch_size_bytes {
        return Err(Error::invalid(format!(
            "batch of {} bytes exceeds max_batch_size_bytes ({})",
            batch.size_bytes(),
            options.max_batch_size_bytes
        )));
    }
    Ok(())
}

/// The column families other than the default one that `batch` writes to, sorted.
fn referenced_column_families(batch: &WriteBatch) -> Vec<u32> {
    if !batch.has_column_family_records() {
        return Vec::new();
    }
    let mut ids: Vec<u32> = batch
        .entries()
        .map(|record| record.column_family_id)
        // A prepared transaction's commit marker names no column family (no memtable takes it).
        .filter(|&id| id != DEFAULT_COLUMN_FAMILY_ID && id != crate::txn::prepared::MARKER_COLUMN_FAMILY_ID)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `InvalidArgument` naming the first of `ids` that is not a live column family.
pub(crate) fn check_column_families_live(inner: &DbInner, ids: &[u32]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let handles = inner.column_family_handles.read();
    match ids.iter().find(|id| !handles.contains_key(id)) {
        Some(id) => Err(Error::invalid(format!("the batch writes to column family {id}, which does not exist"))),
        None => Ok(()),
    }
}

/// Applies `batch`; returns when it is in the WAL (synced if asked) and visible to readers.
pub(crate) fn write(inner: &DbInner, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
    write_pending(inner, batch, options, None)
}

/// Commits a transaction's batch: validated against the commit history in write order, then
/// written like any batch (one WAL record). Returns the batch's first sequence number;
/// [`Error::Conflict`] when validation failed (nothing was written).
pub(crate) fn write_transaction(
    inner: &DbInner,
    batch: WriteBatch,
    options: &WriteOptions,
    validation: Validation,
    row_locks: Option<(TransactionId, RowLocks)>,
) -> Result<u64> {
    let rejection = Arc::new(Mutex::new(None));
    let sequence = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let row_locks = Arc::new(Mutex::new(row_locks));
    let commit = TransactionCommit {
        validation,
        rejection: Arc::clone(&rejection),
        sequence: Arc::clone(&sequence),
        row_locks: Arc::clone(&row_locks),
    };
    let written = write_pending(inner, batch, options, Some(commit));
    if let Some((owner, locks)) = row_locks.lock().take() {
        inner.transactions.locks.release_all(owner, locks);
    }
    written?;
    if let Some(error) = rejection.lock().take() {
        return Err(error);
    }
    Ok(sequence.load(Ordering::Acquire))
}

fn write_pending(
    inner: &DbInner,
    batch: WriteBatch,
    options: &WriteOptions,
    commit: Option<TransactionCommit>,
) -> Result<()> {
    check_limits(inner, &batch)?;
    if batch.is_empty() {
        return Ok(());
    }
    let column_family_ids = referenced_column_families(&batch);
    check_column_families_live(inner, &column_family_ids)?;
    let mut batch = with_column_family_ttls(inner, batch, &column_family_ids);
    let sync = options.sync || inner.options.wal_sync_mode == SyncMode::Full;
    let synced_write = sync.then(|| inner.self_service.enter_synced_write());
    if super::self_service::qualifies(&batch, synced_write.as_ref().map(|write| write.in_flight)) {
        if let Some(result) = super::self_service::write(inner, &mut batch, &column_family_ids, sync, commit.as_ref()) {
            return result;
        }
    }
    let size_bytes = batch.size_bytes();
    let write = PendingWrite { batch: Mutex::new(batch), column_family_ids, sync, commit };
    inner.write_queue.write(
        write,
        size_bytes,
        |write, memtables| insert_batch(&write.batch.lock(), |id| memtables.get(id)),
        // A column family dropped after the writer checked it: fail this batch alone (drops
        // take leadership, so none can happen while the group forms).
        |write| check_column_families_live(inner, &write.column_family_ids),
        |group| write_group(inner, group),
    )
}

/// `batch` with every plain put into a column family with a `ttl` turned into a put that
/// expires `ttl` from now (I42). The expiry is fixed here, before the batch is logged, so that
/// recovery replays the very same expiries. Batches that write no such column family pass
/// through untouched; the check costs one atomic load per column family written.
fn with_column_family_ttls(inner: &DbInner, batch: WriteBatch, column_family_ids: &[u32]) -> WriteBatch {
    let mut ttls: Vec<(u32, u64)> = Vec::new();
    if let Some(ttl) = inner.default_column_family.ttl_us() {
        ttls.push((DEFAULT_COLUMN_FAMILY_ID, ttl));
    }
    if !column_family_ids.is_empty() {
        // One look at the handles for every family the batch names.
        let handles = inner.column_family_handles.read();
        for &id in column_family_ids {
            if let Some(ttl) = handles.get(&id).and_then(|shared| shared.ttl_us()) {
                ttls.push((id, ttl));
            }
        }
    }
    if ttls.is_empty() {
        return batch;
    }
    let now = inner.snapshots.clock().now_us();
    let mut stamped = WriteBatch::new();
    for record in batch.entries() {
        let ttl = ttls.iter().find(|(id, _)| *id == record.column_family_id).map(|(_, ttl)| *ttl);
        match (record.kind, ttl) {
            _ if record.range_delete => stamped.delete_range_in(record.column_family_id, record.key, record.value),
            (ValueKind::Put, Some(ttl)) => {
                stamped.put_with_expiry_in(record.column_family_id, record.key, record.value, now.saturating_add(ttl))
            }
            (ValueKind::Put, None) => stamped.put_in(record.column_family_id, record.key, record.value),
            (ValueKind::PutWithExpiry, _) => {
                let (expires_at_us, value) = crate::ttl::split_expiring(record.value).unwrap_or((0, &[]));
                stamped.put_with_expiry_in(record.column_family_id, record.key, value, expires_at_us)
            }
            (ValueKind::SingleDelete, _) => stamped.single_delete_in(record.column_family_id, record.key),
            (ValueKind::Merge, _) => stamped.merge_in(record.column_family_id, record.key, record.value),
            (ValueKind::Delete | ValueKind::BlobIndex, _) => stamped.delete_in(record.column_family_id, record.key),
        }
    }
    stamped
}

/// Runs one group for its leader: makes room in the memtables, assigns the sequence numbers,
/// appends to the WAL, inserts (in parallel for large groups) and publishes the sequence.
fn write_group(inner: &DbInner, group: &[crate::sync::Arc<QueuedWriter>]) -> Result<()> {
    // No self-service write is in flight while the group runs (they sequence themselves too).
    let _exclusive = inner.self_service.exclusive();
    let mut batches: Vec<parking_lot::MutexGuard<'_, WriteBatch>> =
        group.iter().map(|w| w.write().batch.lock()).collect();
    let entry_count: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let sync = group.iter().any(|w| w.write().sync);
    let memtables = {
        let mut ids = vec![DEFAULT_COLUMN_FAMILY_ID];
        for member in group {
            ids.extend_from_slice(&member.write().column_family_ids);
        }
        ids.sort_unstable();
        ids.dedup();
        let mut state = inner.state.lock();
        make_room_for_write(inner, &mut state, &ids, false)?;
        group_memtables(&state, &ids)?
    };
    let first_sequence = inner.last_sequence.load(Ordering::Relaxed) + 1;
    if first_sequence + entry_count > MAX_SEQUENCE_NUMBER {
        return Err(Error::invalid("sequence numbers exhausted"));
    }
    // Validate transactions and assign sequence numbers in one step under the commit history's
    // mutex (see `txn::history`), then append every batch to the WAL in one write.
    let mut next_sequence = first_sequence;
    {
        let mut history = inner.transactions.history.lock();
        let recording = history.recording();
        if recording {
            history.prune(inner.visible_sequence.load(Ordering::Acquire));
        }
        for (member, batch) in group.iter().zip(batches.iter_mut()) {
            if !sequence_batch(inner, &mut history, recording, batch, member.write().commit.as_ref(), next_sequence) {
                // Dropped from the group: an empty batch is neither logged nor inserted.
                batch.clear();
                continue;
            }
            next_sequence += batch.len() as u64;
        }
        if recording {
            history.enforce_limit(inner.options.transaction_history_limit_bytes);
        } else {
            history.skipped_through(next_sequence - 1);
        }
    }
    let last_sequence = next_sequence - 1;
    {
        let mut wal = inner.wal.lock();
        let appended = append_to_wal(inner, &mut wal, &batches, sync);
        if let Err(error) = appended {
            drop(wal);
            let mut state = inner.state.lock();
            inner.set_background_error(&mut state, error.duplicate());
            return Err(error);
        }
    }
    inner.last_sequence.store(last_sequence, Ordering::Release);
    let logged = batches.iter().filter(|b| !b.is_empty());
    let batch_bytes: usize = logged.clone().map(|b| b.size_bytes()).sum();
    let record_count = logged.count();
    inner.user_bytes_written.fetch_add(batch_bytes as u64, Ordering::Relaxed);
    inner
        .wal_bytes_written
        .fetch_add((batch_bytes + record_count * crate::wal::RECORD_HEADER_SIZE_BYTES) as u64, Ordering::Relaxed);
    let parallel = group.len() > 1
        && entry_count >= PARALLEL_INSERT_MIN_ENTRIES
        && entry_count >= PARALLEL_INSERT_MIN_AVERAGE_ENTRIES * group.len() as u64;
    if parallel {
        // The members lock their own batches, so release them first.
        drop(batches);
        WriteQueue::insert_in_parallel(group, memtables, |write, memtables| {
            insert_batch(&write.batch.lock(), |id| memtables.get(id))
        });
    } else {
        for batch in &batches {
            insert_batch(batch, |id| memtables.get(id));
        }
        drop(batches);
    }
    inner.visible_sequence.store(last_sequence, Ordering::Release);
    // I37: row locks go only once the commit is visible, so that the next holder of a lock
    // reads (or is validated against) the write it waited for.
    for member in group {
        if let Some(commit) = &member.write().commit {
            if let Some((owner, locks)) = commit.row_locks.lock().take() {
                debug_assert!(
                    inner.visible_sequence.load(Ordering::Acquire) >= commit.sequence.load(Ordering::Acquire),
                    "I37: row locks released before the commit is visible"
                );
                inner.transactions.locks.release_all(owner, locks);
            }
        }
    }
    Ok(())
}

/// Sequences one batch at `sequence` under the commit history's mutex, for a write group's
/// leader and for a self-service writer alike: a transaction's `commit` is validated first (a
/// rejection is set in the commit, the batch is left as it was and the result is false), then
/// the batch is stamped and, while the history is `recording`, recorded in it. Validation and
/// sequencing are one step (I27).
pub(crate) fn sequence_batch(
    inner: &DbInner,
    history: &mut HistoryState,
    recording: bool,
    batch: &mut WriteBatch,
    commit: Option<&TransactionCommit>,
    sequence: u64,
) -> bool {
    if let Some(commit) = commit {
        if let Err(error) = history.validate(&commit.validation, &|id| inner.column_family_order(id)) {
            *commit.rejection.lock() = Some(error);
            return false;
        }
        if let Some(number) = commit.validation.commits_prepared {
            history.remove_guard(number);
        }
        commit.sequence.store(sequence, Ordering::Release);
    }
    batch.set_sequence(sequence);
    if recording {
        history.record(batch, sequence);
    }
    true
}

pub(crate) fn append_to_wal(
    inner: &DbInner,
    wal: &mut WalState,
    batches: &[parking_lot::MutexGuard<'_, WriteBatch>],
    sync: bool,
) -> Result<()> {
    let writer = wal.writer.as_mut().ok_or_else(|| Error::Closed("the write-ahead log is closed".to_string()))?;
    // I9: a batch dropped from its group (a transaction that failed validation) is empty and
    // not logged.
    for batch in batches.iter().filter(|batch| !batch.is_empty()) {
        writer.add_record(batch.data())?;
    }
    // Hand the bytes to the OS on every group: a process crash then loses nothing.
    writer.flush()?;
    wal.unsynced = true;
    if sync {
        sync_wal(inner, wal)?;
    }
    Ok(())
}

/// Makes every write appended so far durable: syncs the closed logs (oldest first), the
/// directory if the current log's name is not durable yet, then the current log. Called with
/// the WAL mutex held (lock order: state, WAL, closed logs). Every sync of the current log goes
/// through here, so no synced write can outlive an earlier unsynced one (I12).
pub(crate) fn sync_wal(inner: &DbInner, wal: &mut WalState) -> Result<()> {
    sync_closed_logs(inner)?;
    if wal.name_unsynced {
        inner.file_system.sync_dir(&inner.dir)?;
        wal.name_unsynced = false;
    }
    if wal.unsynced {
        if let Some(writer) = wal.writer.as_mut() {
            writer.sync()?;
        }
        wal.unsynced = false;
    }
    Ok(())
}

/// Syncs the closed logs that still hold unsynced appends, oldest first, then the directory if
/// any of their names is new, and forgets them. On a failure none is forgotten; the caller
/// must treat it as a background error, since a failed sync is never retried as if it could
/// succeed (I10).
pub(crate) fn sync_closed_logs(inner: &DbInner) -> Result<()> {
    let mut closed = inner.closed_logs.lock();
    for log in closed.iter_mut() {
        log.writer.sync()?;
    }
    if closed.iter().any(|log| log.name_unsynced) {
        inner.file_system.sync_dir(&inner.dir)?;
    }
    closed.clear();
    Ok(())
}

/// The active memtables of the column families `ids` (which include the default one).
pub(crate) fn group_memtables(state: &DbState, ids: &[u32]) -> Result<GroupMemTables> {
    let mut default = None;
    let mut others = Vec::with_capacity(ids.len().saturating_sub(1));
    for &id in ids {
        let family = state
            .column_families
            .get(&id)
            .ok_or_else(|| Error::invalid(format!("column family {id} does not exist")))?;
        if id == DEFAULT_COLUMN_FAMILY_ID {
            default = Some(Arc::clone(&family.memtable));
        } else {
            others.push((id, Arc::clone(&family.memtable)));
        }
    }
    let default = default.ok_or_else(|| Error::invalid("the default column family is missing"))?;
    Ok(GroupMemTables { default, others })
}

/// Inserts a batch whose sequence is set into memtables; `memtable_of` gives the memtable of a
/// column family id, or `None` to skip the column family's records (recovery does so for
/// column families that were dropped or whose tables already hold the log).
///
/// Large batches are inserted in key order: each thread's skiplist insert starts its search
/// from where its previous insert linked, so sorted keys skip most of the upper levels and their
/// cache misses. The order of insertion does not matter for correctness: every entry has its
/// own sequence number, and the memtable orders entries by (key, sequence) under its own
/// comparator whatever order they arrive in. A batch of the default column family alone is
/// sorted in that column family's order; a batch spanning column families is sorted bytewise
/// within each, which helps bytewise column families and only costs the others the speed-up.
pub(crate) fn insert_batch<'a>(batch: &WriteBatch, memtable_of: impl Fn(u32) -> Option<&'a MemTable>) {
    let count = batch.len();
    if count == 0 {
        return;
    }
    let insert = |memtable: &MemTable, record: RecordRef<'_>, sequence: u64| {
        if record.range_delete {
            memtable.insert_range_tombstone(record.key, record.value, sequence);
            return;
        }
        let value = if matches!(record.kind, ValueKind::Put | ValueKind::PutWithExpiry | ValueKind::Merge) {
            record.value
        } else {
            &[]
        };
        memtable.insert_uncounted(record.key, sequence, record.kind, value);
    };
    if !batch.has_column_family_records() {
        let Some(memtable) = memtable_of(DEFAULT_COLUMN_FAMILY_ID) else { return };
        if count >= SORTED_INSERT_MIN_ENTRIES {
            let mut entries: Vec<(RecordRef<'_>, u64)> = batch.entries().zip(batch.sequence()..).collect();
            match memtable.comparator() {
                KeyComparator::Bytewise => entries.sort_unstable_by(|a, b| a.0.key.cmp(b.0.key)),
                KeyComparator::Custom(comparator) => {
                    entries.sort_unstable_by(|a, b| comparator.compare(a.0.key, b.0.key))
                }
            }
            for (record, sequence) in entries {
                insert(memtable, record, sequence);
            }
        } else {
            for (record, sequence) in batch.entries().zip(batch.sequence()..) {
                insert(memtable, record, sequence);
            }
        }
        // I48: counted before the caller publishes the batch's sequences.
        memtable.count_inserted(count, batch.sequence() + count as u64 - 1);
        return;
    }
    let mut entries: Vec<(RecordRef<'_>, u64)> = batch.entries().zip(batch.sequence()..).collect();
    if count >= SORTED_INSERT_MIN_ENTRIES {
        // Bytewise within each column family whatever its comparator: the order only speeds
        // inserts up (see above), it never changes what the memtables hold.
        entries.sort_unstable_by(|a, b| a.0.column_family_id.cmp(&b.0.column_family_id).then(a.0.key.cmp(b.0.key)));
    }
    // Per column family: how many entries went in and the largest sequence among them.
    let mut inserted: Vec<(u32, usize, u64)> = Vec::new();
    for (record, sequence) in entries {
        let Some(memtable) = memtable_of(record.column_family_id) else { continue };
        insert(memtable, record, sequence);
        match inserted.iter_mut().find(|(id, _, _)| *id == record.column_family_id) {
            Some(counts) => {
                counts.1 += 1;
                counts.2 = counts.2.max(sequence);
            }
            None => inserted.push((record.column_family_id, 1, sequence)),
        }
    }
    for (id, entries, largest_sequence) in inserted {
        if let Some(memtable) = memtable_of(id) {
            memtable.count_inserted(entries, largest_sequence);
        }
    }
}

/// Batches with at least this many entries are sorted before they are inserted.
const SORTED_INSERT_MIN_ENTRIES: usize = 32;

/// Delay per write group while a column family's level 0 is at or above its slowdown trigger,
/// for each file above it (capped at `MAX_SLOWDOWN_MICROS`).
const SLOWDOWN_MICROS_PER_FILE: u64 = 1000;
const MAX_SLOWDOWN_MICROS: u64 = 20_000;

/// Delays per write group at elevated and high memory pressure.
const ELEVATED_MEMORY_DELAY_MICROS: u64 = 100;
const HIGH_MEMORY_DELAY_MICROS: u64 = 1000;

/// Makes sure the active memtables of column families `ids` have room, switching to a new
/// memtable (and a new WAL) when one is full, and applies back-pressure: graduated delays when
/// level 0 fills up or memory nears its cap, a stall when level 0 reaches its stop trigger, the
/// immutable memtables their limit, or memory its critical mark. With `force`, every non-empty
/// memtable of `ids` is switched. Called by the write leader (or a holder of leadership, see
/// `with_write_leadership`) with the state mutex held.
///
/// Stalls wait on `background_done` with a timeout and re-check everything, so they end when
/// flush or compaction catch up, on a background error, or at close; never a deadlock.
pub(crate) fn make_room_for_write(
    inner: &DbInner,
    state: &mut parking_lot::MutexGuard<'_, DbState>,
    ids: &[u32],
    force: bool,
) -> Result<()> {
    let mut stall_started: Option<Instant> = None;
    let mut delayed = false;
    let mut switched: Vec<u32> = Vec::new();
    let result = 'outer: loop {
        if let Err(error) = inner.check_not_stopped(state) {
            break Err(error);
        }
        // Level 0: stop, or slow down in proportion to the excess.
        let mut slowdown_micros = 0;
        for &id in ids {
            let Some(family) = state.column_families.get(&id) else {
                break 'outer Err(Error::invalid(format!("column family {id} does not exist")));
            };
            let options = family.shared.options();
            let level0_files = state.versions.current(id).levels[0].len();
            if level0_files >= options.level0_stop_writes_files {
                begin_stall(state, &mut stall_started);
                inner.work_available.notify_all();
                inner.background_done.wait_for(state, Duration::from_millis(100));
                continue 'outer;
            }
            if level0_files >= options.level0_slowdown_writes_files {
                let excess = (level0_files - options.level0_slowdown_writes_files + 1) as u64;
                slowdown_micros = slowdown_micros.max((excess * SLOWDOWN_MICROS_PER_FILE).min(MAX_SLOWDOWN_MICROS));
            }
        }
        // Memory: the pressure level decides between nothing, early flushes, forced flushes
        // with delays, and blocking.
        let pressure = refresh_memory_pressure(inner, state);
        if pressure >= MemoryPressure::Elevated {
            if let Some(id) = memory_flush_candidate(state, pressure) {
                if let Err(error) = switch_memtable(inner, state, id) {
                    inner.set_background_error(state, error.duplicate());
                    break Err(error);
                }
                state.stats.memory_flushes += 1;
                continue;
            }
        }
        if pressure == MemoryPressure::Critical && memory_reclaimable(state) {
            let started = Instant::now();
            inner.work_available.notify_all();
            inner.background_done.wait_for(state, Duration::from_millis(10));
            inner.memory.blocks.fetch_add(1, Ordering::Relaxed);
            inner.memory.block_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            continue;
        }
        if pressure == MemoryPressure::Critical {
            inner.memory.unreclaimable_critical_writes.fetch_add(1, Ordering::Relaxed);
        }
        if !delayed {
            let memory_delay_micros = match pressure {
                MemoryPressure::Elevated => ELEVATED_MEMORY_DELAY_MICROS,
                MemoryPressure::High | MemoryPressure::Critical => HIGH_MEMORY_DELAY_MICROS,
                MemoryPressure::Normal => 0,
            };
            if memory_delay_micros > 0 {
                inner.memory.delays.fetch_add(1, Ordering::Relaxed);
                inner.memory.delay_micros.fetch_add(memory_delay_micros, Ordering::Relaxed);
            }
            let delay_micros = slowdown_micros.max(memory_delay_micros);
            if delay_micros > 0 {
                delayed = true;
                if slowdown_micros > 0 {
                    state.stats.write_slowdown_count += 1;
                    state.stats.write_slowdown_micros += slowdown_micros;
                }
                inner.work_available.notify_all();
                parking_lot::MutexGuard::unlocked(state, || std::thread::sleep(Duration::from_micros(delay_micros)));
                continue;
            }
        }
        // Room in each memtable, or a switch to a new one.
        let mut switch = None;
        for &id in ids {
            let Some(family) = state.column_families.get(&id) else { continue };
            let memtable = &family.memtable;
            let options = family.shared.options();
            let full = memtable.approximate_memory_bytes() >= options.memtable_size_bytes;
            let forced = force && !switched.contains(&id);
            if memtable.is_empty() || !(full || forced) {
                continue;
            }
            if family.immutables.len() >= options.max_immutable_memtables {
                begin_stall(state, &mut stall_started);
                inner.work_available.notify_all();
                inner.background_done.wait_for(state, Duration::from_millis(100));
                continue 'outer;
            }
            switch = Some(id);
            break;
        }
        let Some(id) = switch else { break Ok(()) };
        if let Err(error) = switch_memtable(inner, state, id) {
            inner.set_background_error(state, error.duplicate());
            break Err(error);
        }
        switched.push(id);
    };
    if let Some(started) = stall_started {
        state.stats.write_stalls_in_progress -= 1;
        state.stats.write_stall_count += 1;
        state.stats.write_stall_micros += started.elapsed().as_micros() as u64;
    }
    result
}

/// Records the memtables' total with the memory governor, fits the block cache to the room
/// left, and returns the pressure level: what every write group, and every self-service write,
/// does before it writes.
pub(crate) fn refresh_memory_pressure(inner: &DbInner, state: &DbState) -> MemoryPressure {
    let pressure = inner.memory.update_memtables(memtable_memory_bytes(inner, state));
    super::memory::fit_chunk_pool(inner, pressure);
    inner.memory.fit_block_cache(&inner.block_cache);
    pressure
}

/// The memory of every column family's memtables, and of the memtable chunks pooled for the
/// next ones (they count as memtable memory until they are given back).
pub(crate) fn memtable_memory_bytes(inner: &DbInner, state: &DbState) -> u64 {
    let memtables: u64 = state.column_families.values().map(|family| family.memtable_memory_bytes() as u64).sum();
    memtables + inner.chunk_pool.pooled_bytes() as u64
}

/// Marks the start of a stall of this write group (once per group), counted as in progress
/// until `make_room_for_write` ends it.
fn begin_stall(state: &mut DbState, stall_started: &mut Option<Instant>) {
    if stall_started.is_none() {
        *stall_started = Some(Instant::now());
        state.stats.write_stalls_in_progress += 1;
    }
}

/// Under memory pressure, the memtable to switch for an early flush: at high pressure or above
/// the largest of any column family, at elevated pressure one that is at least half full. Only
/// memtables whose column family may queue another immutable memtable qualify.
fn memory_flush_candidate(state: &DbState, pressure: MemoryPressure) -> Option<u32> {
    let (id, bytes, family) = state
        .column_families
        .values()
        .filter(|family| {
            !family.memtable.is_empty() && family.immutables.len() < family.shared.options().max_immutable_memtables
        })
        .map(|family| (family.id(), family.memtable.approximate_memory_bytes(), family))
        .max_by_key(|(_, bytes, _)| *bytes)?;
    let memtable_size_bytes = family.shared.options().memtable_size_bytes;
    let worth_it = match pressure {
        MemoryPressure::Normal => false,
        MemoryPressure::Elevated => bytes >= memtable_size_bytes / 2,
        // Switching a nearly empty memtable frees nothing; wait for the ones in flight.
        MemoryPressure::High | MemoryPressure::Critical => bytes >= (64 << 10).min(memtable_size_bytes / 4),
    };
    worth_it.then_some(id)
}

/// True when flushes in flight will free memory: some column family has an immutable memtable.
/// Writers block on memory only while this holds (I24).
fn memory_reclaimable(state: &DbState) -> bool {
    state.column_families.values().any(|family| !family.immutables.is_empty())
}

/// Starts a new WAL; column family `id`'s memtable joins its flush queue and a new one takes
/// its place.
fn switch_memtable(inner: &DbInner, state: &mut DbState, id: u32) -> Result<()> {
    let mut wal = inner.wal.lock();
    let new_log_number = state.versions.new_file_number();
    let path = log_path(&inner.dir, new_log_number);
    let file = inner.file_system.create(&path)?;
    // The old log is not synced here (see `ClosedLog`): if it holds unsynced appends, it waits
    // among the closed logs until a sync needs it or its data is all in tables. The new log's
    // name becomes durable with its first sync, before any synced write in it is acknowledged.
    let new_writer = LogWriter::with_preallocation(file, path, inner.options.wal_preallocate_bytes);
    let old_writer = wal.writer.replace(new_writer);
    let old_number = std::mem::replace(&mut wal.number, new_log_number);
    if let Some(writer) = old_writer {
        if wal.unsynced {
            let name_unsynced = wal.name_unsynced;
            inner.closed_logs.lock().push(ClosedLog { number: old_number, writer, name_unsynced });
        }
    }
    wal.unsynced = false;
    wal.name_unsynced = true;
    drop(wal);
    state.live_logs.push_back(new_log_number);
    for family in state.column_families.values_mut() {
        if family.id() == id {
            let memtable_size_bytes = family.shared.options().memtable_size_bytes;
            let full = std::mem::replace(&mut family.memtable, family.shared.new_memtable(memtable_size_bytes));
            let old_log_number = std::mem::replace(&mut family.memtable_log_number, new_log_number);
            family.immutables.push_back(ImmutableMemTable { memtable: full, log_number: old_log_number });
        } else if family.memtable.is_empty() {
            // An empty memtable has nothing in older logs, so they need not be kept for it.
            family.memtable_log_number = new_log_number;
        }
    }
    if let Some(family) = state.column_families.get(&id) {
        family.shared.read_charges.reset_memtable();
    }
    inner.install_read_view(state, id);
    inner.work_available.notify_all();
    Ok(())
}

/// Switches column family `id`'s active memtable because reads paid for its flush
/// (`db::read_charges`), if the writers' leadership and the self-service gate are free now and
/// the switch needs no stall; returns whether it switched. For the flush threads, which must
/// never wait for writers (a writer stalled for room waits for them). Takes the state lock.
pub(crate) fn switch_memtable_for_reads(inner: &DbInner, id: u32) -> Result<bool> {
    let switched = inner.write_queue.try_with_leadership(PendingWrite::token(), || {
        let Some(_exclusive) = inner.self_service.try_exclusive() else { return Ok(false) };
        let mut state = inner.state.lock();
        inner.check_not_stopped(&state)?;
        if !state.column_families.get(&id).is_some_and(super::flush::wants_read_flush) {
            return Ok(false);
        }
        if let Err(error) = switch_memtable(inner, &mut state, id) {
            inner.set_background_error(&mut state, error.duplicate());
            return Err(error);
        }
        state.stats.read_triggered_flushes += 1;
        Ok(true)
    });
    switched.unwrap_or(Ok(false))
}

/// Runs `action` while holding write leadership, so that no write group is between the WAL
/// and the memtables meanwhile (flush, dropping a column family). The token used to queue is
/// never absorbed into a write group.
pub(crate) fn with_write_leadership<T>(inner: &DbInner, action: impl FnOnce() -> T) -> T {
    inner.write_queue.with_leadership(PendingWrite::token(), || {
        let _exclusive = inner.self_service.exclusive();
        action()
    })
}

/// Switches every non-empty active memtable and waits until every immutable memtable is
/// flushed.
pub(crate) fn flush(inner: &DbInner) -> Result<()> {
    with_write_leadership(inner, || {
        let mut state = inner.state.lock();
        let ids: Vec<u32> = state.column_families.keys().copied().collect();
        make_room_for_write(inner, &mut state, &ids, true)
    })?;
    let mut state = inner.state.lock();
    let ids: Vec<u32> = state.column_families.keys().copied().collect();
    wait_until_flushed(inner, &mut state, &ids)
}

/// Waits until the column families `ids` (those still live) have no immutable memtable left,
/// or a background error or a close stops the wait.
pub(crate) fn wait_until_flushed(
    inner: &DbInner,
    state: &mut parking_lot::MutexGuard<'_, DbState>,
    ids: &[u32],
) -> Result<()> {
    loop {
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        let flushed =
            ids.iter().all(|id| state.column_families.get(id).is_none_or(|family| family.immutables.is_empty()));
        if flushed {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".to_string()));
        }
        inner.work_available.notify_all();
        inner.background_done.wait_for(state, Duration::from_millis(100));
    }
}

/// Longest accepted column family name.
const MAX_COLUMN_FAMILY_NAME_BYTES: usize = 255;

/// `InvalidArgument` unless `name` is 1 to 255 bytes long (also for names listed at open).
pub(crate) fn check_column_family_name_length(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_COLUMN_FAMILY_NAME_BYTES {
        return Err(Error::invalid(format!(
            "column family names must be 1 to {MAX_COLUMN_FAMILY_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    Ok(())
}

fn check_column_family_name(state: &DbState, name: &str) -> Result<()> {
    check_column_family_name_length(name)?;
    if state.column_families.values().any(|family| *family.shared.name.read() == name) {
        return Err(Error::invalid(format!("a column family named {name:?} exists")));
    }
    Ok(())
}

/// Creates a column family; durable in the manifest when it returns.
pub(crate) fn create_column_family(inner: &DbInner, name: &str, options: ColumnFamilyOptions) -> Result<ColumnFamily> {
    options.validate()?;
    let mut state = inner.state.lock();
    if let Some(error) = &state.background_error {
        return Err(error.duplicate());
    }
    check_column_family_name(&state, name)?;
    let id = state.versions.new_column_family_id();
    // The new column family has no data in any log, so the current one is its oldest.
    let log_number = inner.wal.lock().number;
    let edit = VersionEdit {
        column_family: id,
        add_column_family: Some(name.to_string()),
        log_number: Some(log_number),
        ..VersionEdit::default()
    };
    let comparator = KeyComparator::new(&options.comparator);
    if let Err(error) = state.versions.add_column_family(edit, comparator.clone()) {
        return Err(stop_after_failed_manifest_write(inner, &mut state, error));
    }
    let memtable = Arc::new(MemTable::new(options.memtable_size_bytes, comparator));
    let view =
        ReadView { memtable: Arc::clone(&memtable), immutables: Vec::new(), version: state.versions.current(id) };
    let shared = Arc::new(ColumnFamilyShared::new(
        id,
        name.to_string(),
        options,
        view,
        Arc::clone(&inner.work_available),
        Arc::clone(&inner.chunk_pool),
    ));
    state.column_families.insert(id, ColumnFamilyState::new(Arc::clone(&shared), memtable, log_number));
    inner.column_family_handles.write().insert(id, Arc::clone(&shared));
    Ok(ColumnFamily { shared })
}

/// Makes a failed manifest write of a column family change stop every later write (I10).
///
/// The change's record may have reached the manifest even though its sync failed, so a
/// restart may replay it although memory says it failed: a dropped family would vanish with
/// writes acknowledged after the failure. Only a reopen, which rebuilds memory from what is on
/// disk, makes the two agree again, as after a failed flush or compaction install. Errors that
/// are not I/O (a change refused before anything was written) change nothing.
fn stop_after_failed_manifest_write(inner: &DbInner, state: &mut DbState, error: Error) -> Error {
    if error.is_io() || matches!(error, Error::Corruption { .. }) {
        inner.set_background_error(state, error.duplicate());
    }
    error
}

/// Drops a column family. Holds write leadership, so no write group is inserting into its
/// memtable; later batches naming it fail when their group forms.
pub(crate) fn drop_column_family(inner: &DbInner, column_family: &ColumnFamily) -> Result<()> {
    let shared = inner.live_column_family(column_family)?;
    if shared.id == DEFAULT_COLUMN_FAMILY_ID {
        return Err(Error::invalid("the default column family cannot be dropped"));
    }
    with_write_leadership(inner, || {
        let mut state = inner.state.lock();
        // After a failed manifest write, memory and the manifest may disagree until a reopen:
        // no change may be acknowledged on top of that (I10), as `create_column_family` refuses.
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        if !state.column_families.contains_key(&shared.id) {
            return Err(Error::invalid(format!("column family {:?} was dropped", column_family.name())));
        }
        let edit = VersionEdit { column_family: shared.id, drop_column_family: true, ..VersionEdit::default() };
        // The drop lets this family's logs go (below); the manifest's last sequence must cover
        // their records first, or recovery would take the next log's first record for one
        // after a gap and stop there (I12, I22).
        inner.record_assigned_sequences(&mut state);
        if let Err(error) = state.versions.log_and_apply(edit) {
            return Err(stop_after_failed_manifest_write(inner, &mut state, error));
        }
        state.column_families.remove(&shared.id);
        shared.dropped.store(true, Ordering::Release);
        inner.column_family_handles.write().remove(&shared.id);
        // Handles outlive the drop and hold the shared part, so its last read view would keep
        // the memtables and the tables (and their files) alive as long as any handle does.
        // Readers that took the view before keep it through their own reference.
        let empty_view = ReadView {
            memtable: shared.new_memtable(DROPPED_MEMTABLE_SIZE_BYTES),
            immutables: Vec::new(),
            version: crate::sync::Arc::new(Version::empty(shared.comparator.clone())),
        };
        shared.install_view(empty_view);
        // Its memtables no longer pin logs.
        delete_obsolete_logs(inner, &mut state);
        inner.background_done.notify_all();
        inner.work_available.notify_all();
        Ok(())
    })
}

/// The capacity hint of the empty memtable a dropped column family's handles keep: the
/// smallest valid memtable size, since nothing is ever written to it.
const DROPPED_MEMTABLE_SIZE_BYTES: usize = 4096;

/// Renames a column family; durable in the manifest when it returns.
pub(crate) fn rename_column_family(inner: &DbInner, column_family: &ColumnFamily, new_name: &str) -> Result<()> {
    let shared = inner.live_column_family(column_family)?;
    if shared.id == DEFAULT_COLUMN_FAMILY_ID {
        return Err(Error::invalid("the default column family cannot be renamed"));
    }
    let mut state = inner.state.lock();
    // Checked before the no-op case too: a rename to the name memory holds would otherwise be
    // acknowledged while a replayed failed rename could still give the family another (I10).
    if let Some(error) = &state.background_error {
        return Err(error.duplicate());
    }
    if *shared.name.read() == new_name {
        return Ok(());
    }
    check_column_family_name(&state, new_name)?;
    let edit = VersionEdit {
        column_family: shared.id,
        rename_column_family: Some(new_name.to_string()),
        ..VersionEdit::default()
    };
    if let Err(error) = state.versions.log_and_apply(edit) {
        return Err(stop_after_failed_manifest_write(inner, &mut state, error));
    }
    *shared.name.write() = new_name.to_string();
    Ok(())
}

/// Deletes the WALs that no column family needs any more: those older than the oldest log any
/// memtable still has data in (or than the current log when every memtable is empty). The
/// manifest may name an older log number for a column family whose memtables are empty; its
/// records are all in tables, and recovery skips missing logs (I22).
pub(crate) fn delete_obsolete_logs(inner: &DbInner, state: &mut DbState) {
    let current = state.live_logs.back().copied().unwrap_or(0);
    // A prepared transaction's commit pins the log its marker goes to until its file is gone
    // (see `txn::prepared`).
    let pinned = inner.transactions.oldest_pinned_log().unwrap_or(current);
    let oldest_needed = state
        .column_families
        .values()
        .filter_map(ColumnFamilyState::oldest_needed_log)
        .min()
        .unwrap_or(current)
        .min(current)
        .min(pinned);
    // Obsolete logs are deleted without a sync: their data is in tables.
    inner.closed_logs.lock().retain(|log| log.number >= oldest_needed);
    while let Some(&oldest) = state.live_logs.front() {
        if oldest >= oldest_needed {
            break;
        }
        // Logs go oldest first, and a log whose removal failed stays listed, stopping the
        // newer ones: what is on disk stays an unbroken run of logs. An old log left behind
        // with newer ones gone would put a hole in the sequence numbers recovery reads, which
        // it must take for lost writes (I12), and it would drop every later record. The next
        // call tries again.
        if inner.file_system.remove(&log_path(&inner.dir, oldest)).is_err() {
            break;
        }
        state.live_logs.pop_front();
    }
}

/// Syncs the WAL (closed logs included) once more at close, so a clean close leaves nothing
/// unsynced.
pub(crate) fn sync_wal_at_close(inner: &DbInner) -> Result<()> {
    let mut wal = inner.wal.lock();
    sync_wal(inner, &mut wal)?;
    wal.writer = None;
    Ok(())
}

/// Background thread body for `SyncMode::Interval`.
pub(crate) fn interval_sync_loop(inner: Arc<DbInner>, interval: Duration) {
    // Sleep in short steps so that close never waits a whole long interval.
    let step = interval.min(Duration::from_millis(50));
    let mut slept = Duration::ZERO;
    while !inner.shutting_down.load(Ordering::Acquire) {
        std::thread::sleep(step);
        slept += step;
        if slept < interval {
            continue;
        }
        slept = Duration::ZERO;
        let mut wal = inner.wal.lock();
        if !wal.unsynced && inner.closed_logs.lock().is_empty() {
            continue;
        }
        match sync_wal(inner.as_ref(), &mut wal) {
            Ok(()) => {}
            Err(error) => {
                drop(wal);
                let mut state = inner.state.lock();
                inner.set_background_error(&mut state, error);
                return;
            }
        }
    }
}
