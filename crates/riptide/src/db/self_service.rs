//! Self-service writes: a small write does its own work instead of queueing for a group
//! leader.
//!
//! With more writer threads than cores, every write that queues for a leader (`write_queue`)
//! costs its thread a sleep and a wake-up, and those dominate the cost of a single put. A
//! self-service write sleeps only when it has to: it takes the write gate shared, sequences
//! itself and frames its WAL record into the stage (one short critical section), makes sure
//! the stage reaches the operating system (whoever gets the WAL first writes every record
//! staged so far with one `write`, so a flush serves all the writers that staged meanwhile),
//! inserts its entries into the memtable, completes its ticket (`publication`: the visible
//! sequence advances over every completed prefix of tickets), lets the gate go and waits until
//! its write is visible.
//!
//! A synced write does the same, except that between its flush and its insert it asks the sync
//! stage (`sync_stage`) for a sync covering its record: while one writer's sync waits for the
//! device, the next writers hand their records over and queue for the following sync, which
//! serves them all, and no leader has to be woken to move the log on.
//!
//! What qualifies: transaction commits included (validated against the commit history under
//! the stage's mutex, in the very order of sequencing, as a group's leader validates its
//! members), at most [`MAX_SELF_SERVICE_BATCH_BYTES`] and a sixteenth of each memtable it
//! writes to, memtables with room at normal memory pressure with level 0 below its slowdown
//! trigger, and for a synced write at most [`MAX_SELF_SERVICE_SYNCED_WRITERS`] synced writes in
//! flight. Anything else, and any write that finds the ring of tickets full, goes through the
//! queue, whose leaders switch memtables, stall and delay.
//!
//! Durability is the queue's: when the call returns, the write's record was handed to the
//! operating system (it survives `kill -9`), and so was every record sequenced before it; a
//! synced write's record, and every one before it, was also synced (I50), and the write was
//! not visible before that.
//!
//! Concurrency contract: self-service writers hold the write gate shared from before they look for
//! room until their ticket is complete; a write group of the queue and every holder of write
//! leadership hold it exclusively, so they run with no self-service write in flight: the stage is
//! empty and flushed, and every ticket is published. A synced writer keeps the gate through
//! its sync, so the log it syncs stays the current one. Lock order: gate, then state; gate,
//! then stage, then commit history; WAL, then the flush buffer, then stage; WAL, then closed
//! logs (the sync action); the sync stage's mutex is never held while taking another.
//!
//! Invariants: I8 holds as for groups (the stage frames records in ticket order, which is
//! sequence order, and flushes write the stage in order); I47: a write is visible only once its
//! record, and every record sequenced before it, was handed to the operating system; I50: a
//! synced write is inserted and returns only after a sync that began once its record was
//! handed over succeeded.

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::publication::Publication;
use super::stats::MemoryPressure;
use super::sync_stage::SyncStage;
use super::write::{
    check_column_families_live, group_memtables, insert_batch, refresh_memory_pressure, sequence_batch,
    TransactionCommit,
};
use super::{DbInner, DbState};
use crate::batch::{WriteBatch, DEFAULT_COLUMN_FAMILY_ID};
use crate::error::{Error, Result};
use crate::key::MAX_SEQUENCE_NUMBER;
use crate::wal::{encode_record, RECORD_HEADER_SIZE_BYTES};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Larger batches go through the queue: inserting one takes long enough that a group's
/// hand-offs cost little beside it. Up to this size, self-service pays: batches of 1,000
/// entries (about 130 KiB) from 8 writers on 2 cores went from 497,000-589,000 to
/// 601,000-743,000 puts/s (three interleaved pairs), as each writer inserts its own batch on
/// whichever core it runs.
pub(crate) const MAX_SELF_SERVICE_BATCH_BYTES: usize = 1 << 20;

/// ... and at most this fraction of each memtable it writes to, so that the writes in flight
/// between two looks for room overshoot a memtable's size by little.
const MEMTABLE_FRACTION_PER_BATCH: usize = 16;

/// Synced writes go through the sync stage while at most this many are in flight, and
/// through the queue's groups when more are: there one leader writes, syncs and inserts for a
/// whole group, and with many writers that packs more writes into each sync than writers that
/// each hand over their own record.
const MAX_SELF_SERVICE_SYNCED_WRITERS: usize = 4;

/// Busy-wait iterations (about 30 microseconds) for another writer's flush before a writer
/// sleeps on the WAL's mutex: several times a small flush's `write`, so that a flush in progress
/// finishes within it unless its writer was preempted. 100 to 10,000 measured alike.
const FLUSH_SPIN_ITERATIONS: usize = 1000;

/// Records framed but not yet handed to the operating system, in sequence order.
struct Stage {
    records: Vec<u8>,
    /// Bytes ever staged (since open): the end of the last record staged.
    staged_end_bytes: u64,
    /// The ticket the next self-service write gets.
    next_ticket: u64,
}

/// The state self-service writes share; one per database.
pub(crate) struct SelfService {
    gate: RwLock<()>,
    stage: Mutex<Stage>,
    /// Bytes of the stage handed to the operating system so far (a prefix of `staged_end_bytes`).
    flushed_end_bytes: AtomicU64,
    /// The buffer a flush swaps with the stage's, so neither allocates again. Locked only by
    /// the holder of the WAL mutex.
    flushing: Mutex<Vec<u8>>,
    publication: Publication,
    /// Where synced self-service writes share their syncs.
    sync_stage: SyncStage,
    /// Synced writes in flight, through either path.
    synced_writers: AtomicUsize,
}

/// Exclusive hold of the write gate: no self-service write is in flight while it lives.
pub(crate) struct ExclusiveWrites<'a> {
    _gate: parking_lot::RwLockWriteGuard<'a, ()>,
}

impl SelfService {
    pub(crate) fn new() -> SelfService {
        SelfService {
            gate: RwLock::new(()),
            stage: Mutex::new(Stage { records: Vec::new(), staged_end_bytes: 0, next_ticket: 1 }),
            flushed_end_bytes: AtomicU64::new(0),
            flushing: Mutex::new(Vec::new()),
            publication: Publication::new(),
            sync_stage: SyncStage::new(),
            synced_writers: AtomicUsize::new(0),
        }
    }

    /// Counts a synced write from its start to its return, so that [`qualifies`] can send
    /// synced writes to the queue when many are in flight.
    pub(crate) fn enter_synced_write(&self) -> SyncedWrite<'_> {
        let in_flight = self.synced_writers.fetch_add(1, Ordering::Relaxed) + 1;
        SyncedWrite { writers: &self.synced_writers, in_flight }
    }

    /// Waits until no self-service write is in flight and keeps new ones out until the result
    /// is dropped. For write groups and holders of write leadership.
    pub(crate) fn exclusive(&self) -> ExclusiveWrites<'_> {
        let guard = self.gate.write();
        if cfg!(debug_assertions) {
            let stage = self.stage.lock();
            debug_assert!(stage.records.is_empty(), "self-service records left unflushed");
            debug_assert_eq!(
                self.publication.published_ticket() + 1,
                stage.next_ticket,
                "I46: unpublished self-service tickets"
            );
            // `last_sequence` may be ahead of `visible_sequence` here, but only after a spilled
            // commit failed between storing the one and the other (the database is stopped
            // then): every self-service write published what it sequenced.
        }
        ExclusiveWrites { _gate: guard }
    }

    /// `exclusive` only if no self-service write is in flight now (`None` otherwise), for a
    /// thread that must not wait for writers.
    pub(crate) fn try_exclusive(&self) -> Option<ExclusiveWrites<'_>> {
        let guard = self.gate.try_write()?;
        Some(ExclusiveWrites { _gate: guard })
    }
}

/// Whether `batch` may be written by its own writer (see the module documentation); for a
/// synced write, `synced_writers` is how many synced writes are in flight, its own included.
pub(crate) fn qualifies(batch: &WriteBatch, synced_writers: Option<usize>) -> bool {
    batch.size_bytes() <= MAX_SELF_SERVICE_BATCH_BYTES
        && synced_writers.is_none_or(|count| count <= MAX_SELF_SERVICE_SYNCED_WRITERS)
}

/// Counts a synced write in flight while it lives (see [`SelfService::enter_synced_write`]).
pub(crate) struct SyncedWrite<'a> {
    writers: &'a AtomicUsize,
    /// Synced writes in flight when this one began, itself included.
    pub(crate) in_flight: usize,
}

impl Drop for SyncedWrite<'_> {
    fn drop(&mut self) {
        self.writers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Writes `batch` (to the column families `column_family_ids` besides the default one) by its
/// own writer; for a transaction's `commit`, after validating it (a rejection is set in the
/// commit, and the result is `Ok` with nothing written). The caller releases the commit's row
/// locks after this returns, when the write is visible (I37). `None` when the write must go
/// through the queue after all (nothing of it was done); otherwise the write's result,
/// returned once it is visible.
pub(crate) fn write(
    inner: &DbInner,
    batch: &mut WriteBatch,
    column_family_ids: &[u32],
    sync: bool,
    commit: Option<&TransactionCommit>,
) -> Option<Result<()>> {
    let service = &inner.self_service;
    let gate: RwLockReadGuard<'_, ()> = service.gate.read();
    let mut ids = Vec::with_capacity(column_family_ids.len() + 1);
    ids.push(DEFAULT_COLUMN_FAMILY_ID);
    ids.extend_from_slice(column_family_ids);
    ids.sort_unstable();
    ids.dedup();
    // A column family dropped since the writer checked it: drops hold the gate exclusively, so
    // none happens from here on.
    if let Err(error) = check_column_families_live(inner, column_family_ids) {
        return Some(Err(error));
    }
    let memtables = {
        let state = inner.state.lock();
        if !has_room(inner, &state, &ids, batch.size_bytes()) {
            return None;
        }
        match group_memtables(&state, &ids) {
            Ok(memtables) => memtables,
            Err(error) => return Some(Err(error)),
        }
    };
    let (ticket, last_sequence, staged_end_bytes) = {
        let mut stage = service.stage.lock();
        let ticket = stage.next_ticket;
        if !service.publication.has_room(ticket) {
            return None;
        }
        let first_sequence = inner.last_sequence.load(Ordering::Relaxed) + 1;
        let entry_count = batch.len() as u64;
        if first_sequence + entry_count > MAX_SEQUENCE_NUMBER {
            return Some(Err(Error::invalid("sequence numbers exhausted")));
        }
        let last_sequence = first_sequence + entry_count - 1;
        let staged_before = stage.records.len();
        // The record is framed first, so that a refused one leaves no trace in the history; a
        // rejected commit takes its record back out of the stage.
        batch.set_sequence(first_sequence);
        if let Err(error) = encode_record(&mut stage.records, batch.data()) {
            return Some(Err(error));
        }
        {
            // As in a group: a commit is validated against the history right before it is
            // sequenced, and every write joins the history in sequence order, so that later
            // commits validate against it.
            let mut history = inner.transactions.history.lock();
            let recording = history.recording();
            if recording {
                history.prune(inner.visible_sequence.load(Ordering::Acquire));
            }
            if !sequence_batch(inner, &mut history, recording, batch, commit, first_sequence) {
                // Rejected: nothing is written, and `write_transaction` reports why.
                stage.records.truncate(staged_before);
                return Some(Ok(()));
            }
            if recording {
                history.enforce_limit(inner.options.transaction_history_limit_bytes);
            } else {
                history.skipped_through(last_sequence);
            }
        }
        inner.last_sequence.store(last_sequence, Ordering::Release);
        stage.next_ticket += 1;
        stage.staged_end_bytes += (stage.records.len() - staged_before) as u64;
        (ticket, last_sequence, stage.staged_end_bytes)
    };
    let mut logged = flush_through(inner, staged_end_bytes);
    if sync && logged.is_ok() {
        // I50: durable before it is inserted, so that a synced write is never visible before
        // it is durable, as through a group. The gate stays held, so no memtable switch starts
        // another log meanwhile.
        logged = service.sync_stage.sync_through(staged_end_bytes, || sync_log(inner));
    }
    if logged.is_ok() {
        insert_batch(batch, |id| memtables.get(id));
        let batch_bytes = batch.size_bytes() as u64;
        inner.user_bytes_written.fetch_add(batch_bytes, Ordering::Relaxed);
        inner.wal_bytes_written.fetch_add(batch_bytes + RECORD_HEADER_SIZE_BYTES as u64, Ordering::Relaxed);
    }
    // A write whose record failed to reach the log (or to become durable) completes too, with
    // nothing inserted, so that the tickets after it (whose flushes and syncs fail the same
    // way) are not held up forever.
    service.publication.complete(ticket, last_sequence, &inner.visible_sequence);
    drop(gate);
    if logged.is_ok() {
        service.publication.wait_until_visible(last_sequence, &inner.visible_sequence);
    }
    Some(logged)
}

/// The sync stage's action: makes every record flushed so far durable and returns the stage
/// position that covers. Called with the write gate held shared, so the current log stays the
/// current log. When closed logs or the current log's name still need a sync, or the log was
/// never synced (its first sync starts its preallocation), it syncs under the WAL mutex like
/// any sync of the log; otherwise through the log's syncer, without the mutex, so that other
/// writers flush their records while the device works. A failure stops the database (I10).
fn sync_log(inner: &DbInner) -> Result<u64> {
    let mut wal = inner.wal.lock();
    // Flushes move this under the WAL mutex, after their `write`: all of it is in the log.
    let target = inner.self_service.flushed_end_bytes.load(Ordering::Acquire);
    let name_unsynced = wal.name_unsynced;
    let Some(writer) = wal.writer.as_mut() else {
        return Err(Error::Closed("the write-ahead log is closed".to_string()));
    };
    let syncer = if writer.has_synced() && !name_unsynced && inner.closed_logs.lock().is_empty() {
        writer.syncer()
    } else {
        None
    };
    let synced = match syncer {
        Some(syncer) => {
            drop(wal);
            let synced = syncer.sync();
            if let Err(error) = &synced {
                // Before anybody else syncs the log, so no later sync is taken to cover what
                // this one may have lost.
                if let Some(writer) = inner.wal.lock().writer.as_mut() {
                    writer.poison_after_failed_sync(error);
                }
            }
            synced
        }
        None => {
            let synced = super::write::sync_wal(inner, &mut wal);
            drop(wal);
            synced
        }
    };
    match synced {
        Ok(()) => Ok(target),
        Err(error) => {
            let mut state = inner.state.lock();
            inner.set_background_error(&mut state, error.duplicate());
            Err(error)
        }
    }
}

/// Whether the memtables of `ids` take a write of `batch_bytes` without a switch, a stall or a
/// delay: the checks of `make_room_for_write` that would make it act, made without acting; and
/// whether the batch is small beside each memtable.
fn has_room(inner: &DbInner, state: &DbState, ids: &[u32], batch_bytes: usize) -> bool {
    if inner.check_not_stopped(state).is_err() {
        return false;
    }
    for &id in ids {
        let Some(family) = state.column_families.get(&id) else { return false };
        let (level0_slowdown_writes_files, memtable_size_bytes) = family.shared.write_room_limits();
        let level0_files =
            state.versions.column_families().get(&id).map_or(0, |version| version.current.levels[0].len());
        if level0_files >= level0_slowdown_writes_files
            || family.memtable.approximate_memory_bytes() >= memtable_size_bytes
            || batch_bytes > memtable_size_bytes / MEMTABLE_FRACTION_PER_BATCH
        {
            return false;
        }
    }
    refresh_memory_pressure(inner, state) == MemoryPressure::Normal
}

/// Returns once the stage's first `end_bytes` bytes are with the operating system, writing
/// everything staged so far itself when nobody has yet. A failed write stops the database (a
/// background error): the log's contents past it are unknown.
fn flush_through(inner: &DbInner, end_bytes: u64) -> Result<()> {
    let service = &inner.self_service;
    if service.flushed_end_bytes.load(Ordering::Acquire) >= end_bytes {
        return Ok(());
    }
    // The holder of the WAL is usually flushing on the other core, and its flush often covers
    // this record too: wait for it spinning. Sleeping on the mutex instead (parking_lot yields,
    // then parks) cost a context switch per write: 8 writers of single puts on 2 cores went from
    // about 250,000 puts/s to 360,000-410,000 with the spin.
    let mut spins = 0;
    let mut wal = loop {
        if service.flushed_end_bytes.load(Ordering::Acquire) >= end_bytes {
            return Ok(());
        }
        if spins >= FLUSH_SPIN_ITERATIONS {
            break inner.wal.lock();
        }
        if let Some(wal) = inner.wal.try_lock() {
            break wal;
        }
        spins += 1;
        std::hint::spin_loop();
    };
    if service.flushed_end_bytes.load(Ordering::Acquire) >= end_bytes {
        return Ok(());
    }
    let mut records = service.flushing.lock();
    let staged_end_bytes = {
        let mut stage = service.stage.lock();
        std::mem::swap(&mut stage.records, &mut *records);
        stage.staged_end_bytes
    };
    let written = match wal.writer.as_mut() {
        Some(writer) => writer.append_encoded_and_flush(&records),
        None => Err(Error::Closed("the write-ahead log is closed".to_string())),
    };
    records.clear();
    drop(records);
    match written {
        Ok(()) => {
            wal.unsynced = true;
            service.flushed_end_bytes.store(staged_end_bytes, Ordering::Release);
            Ok(())
        }
        Err(error) => {
            drop(wal);
            let mut state = inner.state.lock();
            inner.set_background_error(&mut state, error.duplicate());
            Err(error)
        }
    }
}
