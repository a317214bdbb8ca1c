//! Two-phase commit: prepare, commit and roll back prepared transactions, by handle or by xid,
//! and the registry of prepared transactions (live and recovered).
//!
//! A prepared transaction leaves its handle: its write batch, locks, snapshot and file number
//! move into the database's registry, keyed by xid, at `prepare`. From then on it is decided
//! with `Transaction::commit` / `rollback` or with `Db::commit_prepared` / `rollback_prepared`
//! (also after the handle was dropped, and after a crash, when recovery rebuilt the entry). The
//! file format and the crash argument are in `prepared.rs`.
//!
//! Concurrency contract: the registry's mutex guards the map only; no I/O happens under it. An
//! xid is reserved in the registry before its file is written, so two prepares of one xid
//! cannot both succeed, and an entry leaves the registry before its commit or rollback starts,
//! so two decisions cannot both run (the loser gets `InvalidArgument`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::history::{KeyRange, Validation};
use super::lock::{LockKey, TransactionId};
use super::prepared::{self, PreparedRecord, MARKER_COLUMN_FAMILY_ID};
use super::write_set::WriteSet;
use crate::batch::WriteBatch;
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::memory_charge::MemoryCharge;
use crate::options::WriteOptions;
use crate::snapshot::Snapshot;

/// What a prepared transaction writes when it commits.
pub(crate) enum PreparedWrites {
    /// One write batch, committed as one WAL record with the commit marker.
    Batch(WriteBatch),
    /// Spilled runs, committed as tables by `db/spilled_commit.rs`.
    Spilled(WriteSet),
}

/// A prepared transaction waiting for its decision.
pub(crate) struct PreparedEntry {
    pub(crate) number: u64,
    /// The id its locks are held under.
    pub(crate) owner: TransactionId,
    pub(crate) writes: PreparedWrites,
    pub(crate) locks: Vec<LockKey>,
    /// Its snapshot (REPEATABLE READ, SERIALIZABLE), registered with the commit history until the
    /// decision; recovered transactions have none.
    pub(crate) snapshot: Option<Snapshot>,
    /// True when the snapshot was registered as a SERIALIZABLE one's (see `history`).
    pub(crate) tracks_ranges: bool,
    /// What `writes` holds in memory, charged to the memory cap until the decision.
    pub(crate) _memory_charge: MemoryCharge,
}

impl PreparedWrites {
    /// Memory the writes hold: the batch, or the spilled runs' readers.
    fn memory_bytes(&self) -> u64 {
        match self {
            PreparedWrites::Batch(batch) => batch.data().len() as u64,
            PreparedWrites::Spilled(writes) => writes.total_memory_bytes() as u64,
        }
    }
}

/// A memory charge for prepared `writes`.
fn charge_for(db: &DbInner, writes: &PreparedWrites) -> MemoryCharge {
    let mut charge = db.memory.write_set_charge();
    charge.set(writes.memory_bytes());
    charge
}

/// The registry, with the logs pinned by commits in progress.
#[derive(Default)]
pub(crate) struct PreparedRegistry {
    /// By xid; `None` while the xid's prepare is writing its file.
    entries: Mutex<BTreeMap<Vec<u8>, Option<PreparedEntry>>>,
    pinned_logs: Mutex<BTreeMap<u64, usize>>,
}

impl PreparedRegistry {
    /// Reserves `xid` for a prepare. `InvalidArgument` if it is prepared (or being prepared).
    pub(crate) fn reserve(&self, xid: &[u8]) -> Result<()> {
        let mut entries = self.entries.lock();
        if entries.contains_key(xid) {
            return Err(Error::invalid(format!("xid {} is already prepared", super::describe_key(xid))));
        }
        entries.insert(xid.to_vec(), None);
        Ok(())
    }

    /// Gives up a reservation after a failed prepare.
    pub(crate) fn unreserve(&self, xid: &[u8]) {
        let mut entries = self.entries.lock();
        if matches!(entries.get(xid), Some(None)) {
            entries.remove(xid);
        }
    }

    /// Fills a reservation, registers a recovered transaction, or puts an entry back after a
    /// decision failed before anything was decided.
    pub(crate) fn insert(&self, xid: &[u8], entry: PreparedEntry) {
        self.entries.lock().insert(xid.to_vec(), Some(entry));
    }

    /// Takes the entry of `xid` out for a decision.
    fn take(&self, xid: &[u8]) -> Result<PreparedEntry> {
        let mut entries = self.entries.lock();
        match entries.get(xid) {
            Some(Some(_)) => Ok(entries.remove(xid).flatten().expect("checked just above")),
            Some(None) => Err(Error::invalid(format!("xid {} is still being prepared", super::describe_key(xid)))),
            None => Err(Error::invalid(format!("no prepared transaction has xid {}", super::describe_key(xid)))),
        }
    }

    /// The xids of the prepared transactions, in byte order.
    pub(crate) fn xids(&self) -> Vec<Vec<u8>> {
        self.entries.lock().iter().filter(|(_, entry)| entry.is_some()).map(|(xid, _)| xid.clone()).collect()
    }

    /// Keeps log `number` and every newer one from deletion until `unpin_log` (a commit in
    /// progress, or a checkpoint copying the logs).
    pub(crate) fn pin_log(&self, number: u64) {
        *self.pinned_logs.lock().entry(number).or_insert(0) += 1;
    }

    pub(crate) fn unpin_log(&self, number: u64) {
        let mut pinned = self.pinned_logs.lock();
        if let Some(count) = pinned.get_mut(&number) {
            *count -= 1;
            if *count == 0 {
                pinned.remove(&number);
            }
        }
    }

    /// The oldest log a commit in progress pinned.
    pub(crate) fn oldest_pinned_log(&self) -> Option<u64> {
        self.pinned_logs.lock().keys().next().copied()
    }
}

/// Checks an xid's length.
pub(crate) fn check_xid(xid: &[u8]) -> Result<()> {
    if xid.is_empty() || xid.len() > prepared::MAX_XID_BYTES {
        return Err(Error::invalid(format!(
            "an xid must be 1 to {} bytes, not {}",
            prepared::MAX_XID_BYTES,
            xid.len()
        )));
    }
    Ok(())
}

/// What `prepare` needs from the transaction.
pub(crate) struct PrepareRequest {
    pub(crate) owner: TransactionId,
    pub(crate) xid: Vec<u8>,
    pub(crate) validation: Validation,
    pub(crate) locks: Vec<LockKey>,
    pub(crate) snapshot: Option<Snapshot>,
    /// As [`PreparedEntry::tracks_ranges`].
    pub(crate) tracks_ranges: bool,
}

/// Prepares: validates, guards, writes the file (durably), and registers the entry with the
/// transaction's writes, taken from `writes`: as one batch, or, when they were spilled (the
/// caller spilled every in-memory layer), as the write set itself, whose runs the file lists.
/// On error nothing changed: the xid is free again, the guard lifted, `writes` untouched; the
/// caller still owns its locks (they are handed over only on success).
pub(crate) fn prepare(db: &DbInner, request: PrepareRequest, writes: &mut WriteSet) -> Result<()> {
    let shared = &db.transactions;
    shared.prepared.reserve(&request.xid)?;
    let number = {
        let mut state = db.state.lock();
        db.check_not_stopped(&state).map(|()| state.versions.new_file_number())
    };
    let number = match number {
        Ok(number) => number,
        Err(error) => {
            shared.prepared.unreserve(&request.xid);
            return Err(error);
        }
    };
    let spilled = writes.spilled();
    let fail = |error: Error| {
        shared.history.lock().remove_guard(number);
        shared.prepared.unreserve(&request.xid);
        Err(error)
    };
    // A spilled transaction's written keys are not listed (there may be millions): its guard
    // covers, per column family, the range from the smallest to the largest key it wrote.
    let written_ranges = if spilled {
        match written_ranges(db, writes) {
            Ok(ranges) => ranges,
            Err(error) => return fail(error),
        }
    } else {
        Vec::new()
    };
    let mut guard_keys: Vec<(u32, Vec<u8>, bool)> = Vec::new();
    let mut guard_ranges = request.validation.ranges.clone();
    guard_ranges.extend(written_ranges);
    {
        let mut history = shared.history.lock();
        if let Err(error) = history.validate(&request.validation, &|id| db.column_family_order(id)) {
            drop(history);
            return fail(error);
        }
        let validation = &request.validation;
        guard_keys.extend(validation.written.iter().map(|(family, key)| (*family, key.clone(), true)));
        guard_keys.extend(validation.read.iter().map(|(family, key)| (*family, key.clone(), false)));
        history.add_guard(
            number,
            &request.xid,
            guard_keys.iter().map(|(family, key, _)| (*family, key.clone())).collect(),
            guard_ranges.clone(),
        );
    }
    if spilled {
        // With the guard in place, a commit that writes one of these keys from now on fails on
        // it; one that committed before is in the history (or the history was trimmed past the
        // snapshot, which fails too), so checking the keys one by one, outside the history's
        // mutex, misses nothing.
        let validation = Validation {
            transaction: request.validation.transaction,
            snapshot: request.validation.snapshot,
            preparing: Some(number),
            ..Validation::default()
        };
        if let Err(error) = check_written_keys(db, writes, &validation) {
            return fail(error);
        }
    }
    // Everything the transaction read is in the WAL already; it must be durable before the
    // prepare is, or a power loss could keep a prepared transaction and lose what it read (the
    // durable state must stay a prefix of the history, I12). A failed sync stops writes (I10).
    let synced = {
        let mut wal = db.wal.lock();
        crate::db::write::sync_wal(db, &mut wal)
    };
    if let Err(error) = synced {
        let mut state = db.state.lock();
        db.set_background_error(&mut state, error.duplicate());
        drop(state);
        return fail(error);
    }
    let batch = if spilled { WriteBatch::new() } else { writes.to_batch() };
    let record = PreparedRecord {
        number,
        xid: request.xid.clone(),
        batch: if spilled { Vec::new() } else { batch.data().to_vec() },
        keys: guard_keys,
        ranges: guard_ranges,
        // The runs' files were synced when written; writing this file syncs the directory,
        // which makes their names durable too.
        runs: if spilled { writes.runs() } else { Vec::new() },
    };
    if let Err(error) = prepared::write(db.file_system.as_ref(), &db.dir, &record) {
        // A file that may be half written is removed (best effort): recovery would drop it
        // anyway, as its checksum cannot match.
        let _ = db.file_system.remove(&prepared::prepared_path(&db.dir, number));
        return fail(error);
    }
    let writes = if spilled {
        // From now on the runs outlive a close of the database: only the decision removes them.
        writes.set_runs_removed_on_drop(false);
        PreparedWrites::Spilled(std::mem::take(writes))
    } else {
        PreparedWrites::Batch(batch)
    };
    let memory_charge = charge_for(db, &writes);
    shared.prepared.insert(
        &request.xid,
        PreparedEntry {
            number,
            owner: request.owner,
            writes,
            locks: request.locks,
            snapshot: request.snapshot,
            tracks_ranges: request.tracks_ranges,
            _memory_charge: memory_charge,
        },
    );
    Ok(())
}

/// Per column family written, the range from the smallest to the largest key written.
fn written_ranges(db: &DbInner, writes: &WriteSet) -> Result<Vec<KeyRange>> {
    let mut ranges = Vec::new();
    for id in writes.column_families() {
        let order = column_family_order(db, id)?;
        let mut cursor = writes.cursor(id, &order, None, None);
        cursor.seek_to_first();
        let first = cursor.current().map(|(key, _)| key.to_vec());
        cursor.seek_to_last();
        let last = cursor.current().map(|(key, _)| key.to_vec());
        cursor.status()?;
        if let (Some(first), Some(last)) = (first, last) {
            ranges.push(KeyRange { column_family: id, start: Bound::Included(first), end: Bound::Included(last) });
        }
    }
    Ok(ranges)
}

/// Checks every key a spilled transaction writes against the commit history and the other
/// prepared transactions' guards, as its commit would.
fn check_written_keys(db: &DbInner, writes: &WriteSet, validation: &Validation) -> Result<()> {
    let order_of = |id: u32| db.column_family_order(id);
    for id in writes.column_families() {
        let order = column_family_order(db, id)?;
        let mut cursor = writes.cursor(id, &order, None, None);
        cursor.seek_to_first();
        while let Some((key, _)) = cursor.current() {
            db.transactions.history.lock().validate_written_key(validation, id, key, &order_of)?;
            cursor.next();
        }
        cursor.status()?;
    }
    Ok(())
}

fn column_family_order(db: &DbInner, id: u32) -> Result<crate::comparator::KeyComparator> {
    db.column_family_order(id).ok_or_else(|| Error::invalid(format!("column family {id} was dropped")))
}

/// Commits prepared transaction `xid`: its batch and commit marker in one synced WAL record,
/// then its file removed. Returns the commit's first sequence number.
pub(crate) fn commit_prepared(db: &DbInner, xid: &[u8]) -> Result<u64> {
    let shared = &db.transactions;
    let entry = shared.prepared.take(xid)?;
    let mut batch = match &entry.writes {
        PreparedWrites::Batch(batch) => batch.clone(),
        PreparedWrites::Spilled(_) => return commit_prepared_spilled(db, xid, entry),
    };
    batch.put_in(MARKER_COLUMN_FAMILY_ID, &prepared::marker_key(entry.number), &[]);
    // Pin the log the marker goes to (this one or a later one) until the file is gone: if
    // the file survived a crash and the marker did not, recovery would take the transaction
    // for undecided although it committed.
    let pinned_log = db.wal.lock().number;
    shared.prepared.pin_log(pinned_log);
    let validation =
        Validation { transaction: entry.owner, commits_prepared: Some(entry.number), ..Validation::default() };
    let committed = crate::db::write::write_transaction(db, batch, &WriteOptions { sync: true }, validation, None);
    let sequence = match committed {
        Ok(sequence) => sequence,
        Err(error) => {
            shared.prepared.unpin_log(pinned_log);
            // The commit did not happen (writes failed before the record was acknowledged):
            // the transaction stays prepared; after such an error the database needs a reopen,
            // whose recovery finds it prepared.
            shared.prepared.insert(xid, entry);
            return Err(error);
        }
    };
    // If the removal fails the log stays pinned: the marker must outlive the file.
    prepared::remove(db.file_system.as_ref(), &db.dir, entry.number)?;
    shared.prepared.unpin_log(pinned_log);
    end(db, entry, true);
    Ok(sequence)
}

/// Commits a prepared spilled transaction: its tables installed by one manifest record that
/// names it (tag 14, the commit point: I32), then its file removed, then the runs. Returns the
/// commit's sequence number.
fn commit_prepared_spilled(db: &DbInner, xid: &[u8], entry: PreparedEntry) -> Result<u64> {
    let shared = &db.transactions;
    let PreparedWrites::Spilled(writes) = &entry.writes else { unreachable!("called for spilled transactions only") };
    let request = (|| {
        let mut families = Vec::new();
        for id in writes.column_families() {
            let order = column_family_order(db, id)?;
            families.push((id, writes.cursor(id, &order, None, None)));
        }
        Ok(crate::db::spilled_commit::SpilledCommit {
            families,
            validation: Validation {
                transaction: entry.owner,
                commits_prepared: Some(entry.number),
                ..Validation::default()
            },
        })
    })();
    let committed = request.and_then(|request| crate::db::spilled_commit::commit(db, request));
    let sequence = match committed {
        Ok(sequence) => sequence,
        Err(error) => {
            // Not committed, or (an I/O error after the manifest write) unknown until a reopen,
            // which writes stop for and whose recovery reads the manifest: it stays prepared.
            shared.prepared.insert(xid, entry);
            return Err(error);
        }
    };
    // If the removal fails, the manifest keeps naming the transaction as committed (I32), and
    // the runs stay for the next open to remove.
    prepared::remove(db.file_system.as_ref(), &db.dir, entry.number)?;
    db.state.lock().versions.forget_prepared_committed(entry.number);
    writes.set_runs_removed_on_drop(true);
    end(db, entry, true);
    Ok(sequence)
}

/// Rolls back prepared transaction `xid`: its file removed, its guard and locks released.
pub(crate) fn rollback_prepared(db: &DbInner, xid: &[u8]) -> Result<()> {
    let shared = &db.transactions;
    let entry = shared.prepared.take(xid)?;
    if let Err(error) = prepared::remove(db.file_system.as_ref(), &db.dir, entry.number) {
        shared.prepared.insert(xid, entry);
        return Err(error);
    }
    // The runs go only after the file (I32).
    if let PreparedWrites::Spilled(writes) = &entry.writes {
        writes.set_runs_removed_on_drop(true);
    }
    shared.history.lock().remove_guard(entry.number);
    end(db, entry, false);
    Ok(())
}

/// Releases what a decided transaction held.
fn end(db: &DbInner, entry: PreparedEntry, committed: bool) {
    let shared = &db.transactions;
    shared.locks.release_all(entry.owner, entry.locks);
    // The column families it held whole (lock escalation) are registered under its id.
    shared.locks.release_column_families(entry.owner);
    if let Some(snapshot) = &entry.snapshot {
        shared.history.tracking_ended(
            snapshot.sequence(),
            entry.tracks_ranges,
            db.visible_sequence.load(Ordering::Acquire),
        );
    }
    let counter = if committed { &shared.counters.committed } else { &shared.counters.rolled_back };
    counter.fetch_add(1, Ordering::Relaxed);
    shared.counters.open.fetch_sub(1, Ordering::Relaxed);
}

/// Escalates the locks of the prepared transactions recovered at open as a transaction with
/// the default options would: one that holds more than the default
/// `TransactionOptions::lock_escalation_threshold` row locks in a column family takes the
/// family whole, unless another one holds locks there too. A spilled one (whose written keys
/// are not listed, so it holds no row locks) takes whole every column family it writes where
/// no other recovered transaction holds a lock; elsewhere its guard alone protects its keys
/// (writers fail with a conflict instead of waiting). Called once every recovered transaction
/// holds its row locks again: escalating one earlier would make the recovery of a later one
/// with a key in that family fail, since recovery does not wait for locks.
pub(crate) fn escalate_recovered(db: &DbInner) {
    let Some(threshold) = super::TransactionOptions::default().lock_escalation_threshold else {
        return;
    };
    let shared = &db.transactions;
    let mut spilled = Vec::new();
    // Column families where some recovered transaction holds a lock after the first pass.
    let mut busy: BTreeSet<u32> = BTreeSet::new();
    for xid in shared.prepared.xids() {
        // Out of the registry while its locks change, so that no other lock is held meanwhile
        // (at open nobody else can decide it).
        let Ok(mut entry) = shared.prepared.take(&xid) else {
            continue;
        };
        let mut row_locks: BTreeMap<u32, usize> = BTreeMap::new();
        for (family, _) in &entry.locks {
            *row_locks.entry(*family).or_insert(0) += 1;
        }
        for (family, count) in row_locks {
            busy.insert(family);
            if count > threshold {
                let locks = &mut entry.locks;
                shared.locks.escalate(entry.owner, family, count, || {
                    let (taken, kept): (Vec<LockKey>, Vec<LockKey>) =
                        std::mem::take(locks).into_iter().partition(|(key_family, _)| *key_family == family);
                    *locks = kept;
                    taken
                });
            }
        }
        if matches!(entry.writes, PreparedWrites::Spilled(_)) {
            spilled.push(xid.clone());
        }
        shared.prepared.insert(&xid, entry);
    }
    for xid in spilled {
        let Ok(entry) = shared.prepared.take(&xid) else {
            continue;
        };
        if let PreparedWrites::Spilled(writes) = &entry.writes {
            for family in writes.column_families() {
                if busy.insert(family) {
                    shared.locks.escalate(entry.owner, family, 0, Vec::new);
                }
            }
        }
        shared.prepared.insert(&xid, entry);
    }
}

/// Re-establishes a prepared transaction found at open: a fresh owner id, its written keys
/// locked again, its guard in place, its entry in the registry.
pub(crate) fn recover(db: &DbInner, record: PreparedRecord) -> Result<()> {
    let shared = &db.transactions;
    let owner = shared.new_id();
    let slot = crate::sync::Arc::new(super::lock::WaitSlot::default());
    let no_wait = super::lock::WaitPolicy { timeout: Some(std::time::Duration::ZERO), detect_deadlocks: false };
    let mut locks = Vec::new();
    for (family, key, written) in &record.keys {
        if *written {
            let lock_key: LockKey = (*family, key.clone());
            // Prepared transactions never hold conflicting locks (locks and guards kept them
            // apart), so this never waits.
            shared.locks.acquire(owner, &slot, &lock_key, super::lock::LockMode::Exclusive, no_wait)?;
            locks.push(lock_key);
        }
    }
    let ranges: Vec<KeyRange> = record.ranges.clone();
    shared.history.lock().add_guard(
        record.number,
        &record.xid,
        record.keys.iter().map(|(family, key, _)| (*family, key.clone())).collect(),
        ranges,
    );
    let writes = if record.runs.is_empty() {
        let path = prepared::prepared_path(&db.dir, record.number);
        PreparedWrites::Batch(WriteBatch::from_data(record.batch.clone(), &path, 0)?)
    } else {
        let mut runs = Vec::with_capacity(record.runs.len());
        for run in &record.runs {
            // A run of a column family dropped since cannot be committed into it; the commit
            // writes the others.
            let Some(order) = db.column_family_order(run.column_family) else { continue };
            runs.push((run.layer, run.column_family, super::spill::open_run(db, order, run.file_number)?));
        }
        PreparedWrites::Spilled(WriteSet::from_runs(runs))
    };
    shared.counters.begun.fetch_add(1, Ordering::Relaxed);
    shared.counters.open.fetch_add(1, Ordering::Relaxed);
    let memory_charge = charge_for(db, &writes);
    shared.prepared.insert(
        &record.xid,
        PreparedEntry {
            number: record.number,
            owner,
            writes,
            locks,
            snapshot: None,
            tracks_ranges: false,
            _memory_charge: memory_charge,
        },
    );
    Ok(())
}
