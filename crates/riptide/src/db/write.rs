//! The write path: limits, group commit, WAL append and sync, memtable insert, memtable switch.
//!
//! Writers queue up; the first in line becomes the leader. The leader takes every waiting
//! writer (up to a byte budget) as one group, assigns the group a contiguous range of sequence
//! numbers, appends one WAL record per batch with a single `write` (and a single sync when any
//! member asked for one or the sync mode is `Full`), has the batches inserted into the memtable
//! (by itself for small groups; for groups of several writers with at least
//! `PARALLEL_INSERT_MIN_ENTRIES` entries, each member inserts its own batch while the leader
//! waits, so both cores work), publishes the new visible sequence, and wakes the members with
//! the shared result. Then it hands leadership to the next waiting writer. Waiting writers spin
//! briefly before they sleep. Only the leader touches the WAL writer, the sequence counter and
//! the memtable switch, so they need no lock of their own beyond the queue discipline (the WAL
//! sits behind a mutex only for the interval-sync thread and close). `flush` takes leadership
//! through a token writer that no group ever absorbs.
//!
//! Invariant I8: sequence numbers are assigned in WAL order, and the visible sequence only
//! moves forward, to the end of a group whose batches are all in the memtable.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::filename::log_path;
use super::{DbInner, DbState, ImmutableMemTable};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{ValueKind, MAX_SEQUENCE_NUMBER};
use crate::memtable::MemTable;
use crate::options::{SyncMode, WriteOptions};
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
}

enum WriterStatus {
    Waiting,
    Lead,
    /// Insert your own batch (its sequence is stamped) into the group's memtable.
    Insert(Arc<GroupInsert>),
    Done(Result<()>),
}

/// A group whose members insert their own batches into the memtable in parallel, so that both
/// cores work on large groups. The leader waits until `remaining` reaches zero before it
/// publishes the group's sequence numbers.
struct GroupInsert {
    memtable: Arc<MemTable>,
    remaining: AtomicUsize,
    finished: Mutex<bool>,
    all_inserted: Condvar,
}

impl GroupInsert {
    fn member_finished(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.finished.lock() = true;
            self.all_inserted.notify_one();
        }
    }

    fn wait(&self) {
        let mut finished = self.finished.lock();
        while !*finished {
            self.all_inserted.wait(&mut finished);
        }
    }
}

struct Writer {
    /// Locked by the leader (to stamp the sequence and append it to the WAL) and, in a parallel
    /// group, afterwards by its own writer to insert it; never by two at once.
    batch: Mutex<WriteBatch>,
    /// Encoded size, read without the lock when forming a group.
    size_bytes: usize,
    /// True for the placeholder `flush` queues to obtain leadership; it carries no write and is
    /// never taken into another leader's group.
    is_flush_token: bool,
    sync: bool,
    status: Mutex<WriterStatus>,
    /// Set when `status` changes, so a waiter can spin on it without the mutex.
    has_news: AtomicBool,
    wake: Condvar,
}

impl Writer {
    fn set_status(&self, status: WriterStatus) {
        let mut current = self.status.lock();
        *current = status;
        self.has_news.store(true, Ordering::Release);
        drop(current);
        self.wake.notify_one();
    }

    /// Waits for a status other than `Waiting` and takes it. With `spin`, it busy-waits briefly
    /// first: the leader usually finishes within microseconds, and a futex sleep plus wake-up
    /// costs more than that. Spinning only pays when the spinner does not take a core from the
    /// leader, so callers spin only when no other writer is queued ahead of them: with
    /// more writers than cores, spinners would starve the leader and throughput collapses.
    fn wait_for_news(&self, spin: bool) -> WriterStatus {
        let spin_iterations = if spin { SPIN_ITERATIONS } else { 0 };
        for _ in 0..spin_iterations {
            if self.has_news.load(Ordering::Acquire) {
                break;
            }
            std::hint::spin_loop();
        }
        let mut status = self.status.lock();
        loop {
            let taken = std::mem::replace(&mut *status, WriterStatus::Waiting);
            if !matches!(taken, WriterStatus::Waiting) {
                self.has_news.store(false, Ordering::Relaxed);
                return taken;
            }
            self.wake.wait(&mut status);
        }
    }
}

/// Busy-wait iterations before a waiting writer sleeps: about 25 microseconds (a PAUSE takes
/// about 27 ns on the machines measured), about one group's WAL write and insert. Measured on
/// 2 cores with 2 and 8 writers of single puts: 200 iterations gave half the throughput of
/// 1,000, and 2,000 no more than 1,000.
const SPIN_ITERATIONS: usize = 1000;

/// A leader runs up to this many groups in a row while writers keep queueing, so that the
/// queue does not wait for a sleeping writer to wake up and take over after every group. Its
/// own write is in the first group; later groups only delay its return a little.
const MAX_GROUPS_PER_LEADER: usize = 16;

/// Writers waiting for the leader, and whether a leader is active.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pending: VecDeque<Arc<Writer>>,
    leader_active: bool,
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

/// Applies `batch`; returns when it is in the WAL (synced if asked) and visible to readers.
pub(crate) fn write(inner: &DbInner, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
    check_limits(inner, &batch)?;
    if batch.is_empty() {
        return Ok(());
    }
    let sync = options.sync || inner.options.wal_sync_mode == SyncMode::Full;
    let writer = Arc::new(Writer {
        size_bytes: batch.size_bytes(),
        is_flush_token: false,
        batch: Mutex::new(batch),
        sync,
        status: Mutex::new(WriterStatus::Waiting),
        has_news: AtomicBool::new(false),
        wake: Condvar::new(),
    });
    {
        let mut queue = inner.write_queue.lock();
        let queued_ahead = queue.pending.len();
        queue.pending.push_back(Arc::clone(&writer));
        if queue.leader_active {
            drop(queue);
            // Only a writer with nobody queued ahead spins, so at most one spins beside the
            // leader: on two cores, a second spinner would take the leader's core.
            let spin = queued_ahead == 0;
            loop {
                match writer.wait_for_news(spin) {
                    WriterStatus::Waiting => {}
                    WriterStatus::Done(result) => return result,
                    WriterStatus::Lead => break,
                    WriterStatus::Insert(job) => {
                        insert_batch(&job.memtable, &writer.batch.lock());
                        job.member_finished();
                    }
                }
            }
        } else {
            queue.leader_active = true;
        }
    }
    lead(inner, &writer)
}

/// Hands write leadership to the writer at the front of the queue, or marks the queue
/// leaderless when nobody waits. Called by the leader with the queue locked.
fn pass_leadership(queue: &mut WriteQueue) {
    match queue.pending.front() {
        Some(next) => next.set_status(WriterStatus::Lead),
        None => queue.leader_active = false,
    }
}

/// Runs the group with `own` at its head, and further groups while writers keep queueing (up
/// to `MAX_GROUPS_PER_LEADER`), then passes leadership on.
fn lead(inner: &DbInner, own: &Arc<Writer>) -> Result<()> {
    let mut own_result = None;
    for round in 0..MAX_GROUPS_PER_LEADER {
        let group: Vec<Arc<Writer>> = {
            let mut queue = inner.write_queue.lock();
            debug_assert!(round > 0 || queue.pending.front().is_some_and(|w| Arc::ptr_eq(w, own)));
            let mut group = Vec::new();
            let mut group_bytes = 0;
            while let Some(front) = queue.pending.front() {
                let size = front.size_bytes;
                // A flush token is no write: it must leave the queue only as a leader (see
                // `flush`), so it ends a group and is never the head of a later round.
                if front.is_flush_token && (round > 0 || !group.is_empty()) {
                    break;
                }
                if !group.is_empty() && group_bytes + size > MAX_GROUP_SIZE_BYTES {
                    break;
                }
                group_bytes += size;
                if let Some(writer) = queue.pending.pop_front() {
                    group.push(writer);
                }
            }
            group
        };
        if group.is_empty() {
            break;
        }
        let result = write_group(inner, &group);
        for member in &group {
            if Arc::ptr_eq(member, own) {
                continue;
            }
            member.set_status(WriterStatus::Done(match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(error.duplicate()),
            }));
        }
        if round == 0 {
            own_result = Some(result);
        }
    }
    pass_leadership(&mut inner.write_queue.lock());
    own_result.unwrap_or_else(|| Err(Error::Closed("write leader formed no group".to_string())))
}

fn write_group(inner: &DbInner, group: &[Arc<Writer>]) -> Result<()> {
    let mut batches: Vec<parking_lot::MutexGuard<'_, WriteBatch>> = group.iter().map(|w| w.batch.lock()).collect();
    let entry_count: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let sync = group.iter().any(|w| w.sync);
    let memtable = {
        let mut state = inner.state.lock();
        make_room_for_write(inner, &mut state, false)?;
        Arc::clone(&state.memtable)
    };
    let first_sequence = inner.last_sequence.load(Ordering::Relaxed) + 1;
    if first_sequence + entry_count > MAX_SEQUENCE_NUMBER {
        return Err(Error::invalid("sequence numbers exhausted"));
    }
    // Assign sequence numbers and append every batch to the WAL in one write.
    let mut next_sequence = first_sequence;
    for batch in batches.iter_mut() {
        batch.set_sequence(next_sequence);
        next_sequence += batch.len() as u64;
    }
    let last_sequence = next_sequence - 1;
    {
        let mut wal = inner.wal.lock();
        let appended = append_to_wal(&mut wal, &batches, sync);
        if let Err(error) = appended {
            drop(wal);
            let mut state = inner.state.lock();
            inner.set_background_error(&mut state, error.duplicate());
            return Err(error);
        }
    }
    inner.last_sequence.store(last_sequence, Ordering::Relaxed);
    let batch_bytes: usize = batches.iter().map(|b| b.size_bytes()).sum();
    inner.user_bytes_written.fetch_add(batch_bytes as u64, Ordering::Relaxed);
    inner
        .wal_bytes_written
        .fetch_add((batch_bytes + batches.len() * crate::wal::RECORD_HEADER_SIZE_BYTES) as u64, Ordering::Relaxed);
    let parallel = group.len() > 1
        && entry_count >= PARALLEL_INSERT_MIN_ENTRIES
        && entry_count >= PARALLEL_INSERT_MIN_AVERAGE_ENTRIES * group.len() as u64;
    if parallel {
        // The members lock their own batches, so release them first.
        drop(batches);
        let job = Arc::new(GroupInsert {
            memtable: Arc::clone(&memtable),
            remaining: AtomicUsize::new(group.len() - 1),
            finished: Mutex::new(false),
            all_inserted: Condvar::new(),
        });
        for member in &group[1..] {
            member.set_status(WriterStatus::Insert(Arc::clone(&job)));
        }
        insert_batch(&memtable, &group[0].batch.lock());
        job.wait();
    } else {
        for batch in &batches {
            insert_batch(&memtable, batch);
        }
        drop(batches);
    }
    inner.visible_sequence.store(last_sequence, Ordering::Release);
    Ok(())
}

fn append_to_wal(wal: &mut WalState, batches: &[parking_lot::MutexGuard<'_, WriteBatch>], sync: bool) -> Result<()> {
    let writer = wal.writer.as_mut().ok_or_else(|| Error::Closed("the write-ahead log is closed".to_string()))?;
    for batch in batches {
        writer.add_record(batch.data())?;
    }
    // Hand the bytes to the OS on every group: a process crash then loses nothing.
    writer.flush()?;
    wal.unsynced = true;
    if sync {
        writer.sync()?;
        wal.unsynced = false;
    }
    Ok(())
}

/// Inserts a batch whose sequence is set into a memtable.
///
/// Large batches are inserted in key order: each thread's skiplist insert starts its search
/// from where its previous insert linked, so sorted keys skip most of the upper levels and their
/// cache misses. The order of insertion does not matter for correctness: every entry has its
/// own sequence number, and the memtable orders entries by (key, sequence).
pub(crate) fn insert_batch(memtable: &MemTable, batch: &WriteBatch) {
    let insert = |(kind, key, value): (ValueKind, &[u8], &[u8]), sequence: u64| {
        memtable.insert_uncounted(key, sequence, kind, if kind == ValueKind::Put { value } else { &[] });
    };
    let count = batch.len();
    if count >= SORTED_INSERT_MIN_ENTRIES {
        let mut entries: Vec<(BatchEntryRef<'_>, u64)> = batch.entries().zip(batch.sequence()..).collect();
        entries.sort_unstable_by(|a, b| a.0 .1.cmp(b.0 .1));
        for (entry, sequence) in entries {
            insert(entry, sequence);
        }
    } else {
        for (entry, sequence) in batch.entries().zip(batch.sequence()..) {
            insert(entry, sequence);
        }
    }
    if count > 0 {
        memtable.count_inserted(count, batch.sequence() + count as u64 - 1);
    }
}

/// One decoded batch entry: kind, key and value.
type BatchEntryRef<'a> = (ValueKind, &'a [u8], &'a [u8]);

/// Batches with at least this many entries are sorted before they are inserted.
const SORTED_INSERT_MIN_ENTRIES: usize = 32;

/// Makes sure the active memtable has room, switching to a new one (and a new WAL) when it is
/// full, and stalls while flushes or level-0 compactions are too far behind. With `force`, the
/// active memtable is switched if it holds anything. Called by the write leader (or `flush`,
/// which takes leadership first) with the state mutex held.
pub(crate) fn make_room_for_write(
    inner: &DbInner,
    state: &mut parking_lot::MutexGuard<'_, DbState>,
    mut force: bool,
) -> Result<()> {
    let options = &inner.options;
    let mut stall_started: Option<Instant> = None;
    let result = loop {
        if let Some(error) = &state.background_error {
            break Err(error.duplicate());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            break Err(Error::Closed("the database is closing".to_string()));
        }
        let level0_files = state.versions.current().levels[0].len();
        if level0_files >= options.level0_stop_writes_files {
            stall_started.get_or_insert_with(Instant::now);
            inner.work_available.notify_all();
            inner.background_done.wait_for(state, Duration::from_millis(100));
            continue;
        }
        let memtable = &state.memtable;
        if memtable.is_empty() || (!force && memtable.approximate_memory_bytes() < options.memtable_size_bytes) {
            break Ok(());
        }
        if state.immutables.len() >= options.max_immutable_memtables {
            stall_started.get_or_insert_with(Instant::now);
            inner.work_available.notify_all();
            inner.background_done.wait_for(state, Duration::from_millis(100));
            continue;
        }
        if let Err(error) = switch_memtable(inner, state) {
            inner.set_background_error(state, error.duplicate());
            break Err(error);
        }
        force = false;
    };
    if let Some(started) = stall_started {
        state.stats.write_stall_count += 1;
        state.stats.write_stall_micros += started.elapsed().as_micros() as u64;
    }
    result
}

/// Starts a new WAL and memtable; the old memtable joins the flush queue.
fn switch_memtable(inner: &DbInner, state: &mut DbState) -> Result<()> {
    let mut wal = inner.wal.lock();
    // Sync the old log first, so that what survives a power loss stays a prefix of the history
    // (a later synced write in the new log must not outlive unsynced writes of the old one),
    // and so that only the newest log can ever end in a torn record.
    if let Some(old) = wal.writer.as_mut() {
        old.sync()?;
    }
    wal.unsynced = false;
    let new_log_number = state.versions.new_file_number();
    let path = log_path(&inner.dir, new_log_number);
    let file = inner.file_system.create(&path)?;
    // The new log's name must be durable before any synced write lands in it.
    inner.file_system.sync_dir(&inner.dir)?;
    {
        wal.writer = Some(LogWriter::new(file, path));
        wal.number = new_log_number;
    }
    drop(wal);
    let full = std::mem::replace(&mut state.memtable, Arc::new(MemTable::new(inner.options.memtable_size_bytes)));
    let old_log_number = std::mem::replace(&mut state.memtable_log_number, new_log_number);
    state.immutables.push_back(ImmutableMemTable { memtable: full, log_number: old_log_number });
    inner.install_read_view(state);
    inner.work_available.notify_all();
    Ok(())
}

/// Switches the active memtable (if it holds anything) and waits until every immutable memtable
/// is flushed. Takes write leadership so that no group is between WAL and memtable meanwhile.
pub(crate) fn flush(inner: &DbInner) -> Result<()> {
    let token = Arc::new(Writer {
        batch: Mutex::new(WriteBatch::new()),
        size_bytes: 0,
        is_flush_token: true,
        sync: false,
        status: Mutex::new(WriterStatus::Waiting),
        has_news: AtomicBool::new(false),
        wake: Condvar::new(),
    });
    {
        let mut queue = inner.write_queue.lock();
        queue.pending.push_back(Arc::clone(&token));
        if queue.leader_active {
            drop(queue);
            while !matches!(token.wait_for_news(false), WriterStatus::Lead) {}
        } else {
            queue.leader_active = true;
        }
    }
    let switched = {
        let mut state = inner.state.lock();
        make_room_for_write(inner, &mut state, true)
    };
    {
        let mut queue = inner.write_queue.lock();
        queue.pending.pop_front();
        pass_leadership(&mut queue);
    }
    switched?;
    let mut state = inner.state.lock();
    loop {
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        if state.immutables.is_empty() {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".to_string()));
        }
        inner.work_available.notify_all();
        inner.background_done.wait_for(&mut state, Duration::from_millis(100));
    }
}

/// Syncs the WAL once more at close, so a clean close leaves nothing unsynced.
pub(crate) fn sync_wal_at_close(inner: &DbInner) -> Result<()> {
    let mut wal = inner.wal.lock();
    let unsynced = wal.unsynced;
    if let Some(writer) = wal.writer.as_mut() {
        if unsynced {
            writer.sync()?;
        }
    }
    wal.unsynced = false;
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
        if !wal.unsynced {
            continue;
        }
        let result = match wal.writer.as_mut() {
            Some(writer) => writer.sync(),
            None => Ok(()),
        };
        match result {
            Ok(()) => wal.unsynced = false,
            Err(error) => {
                drop(wal);
                let mut state = inner.state.lock();
                inner.set_background_error(&mut state, error);
                return;
            }
        }
    }
}
