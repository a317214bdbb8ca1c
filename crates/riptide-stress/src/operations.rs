//! The operations the stress driver runs, and the context they run in.
//!
//! Each operation kind is a type implementing [`Operation`]; [`default_mix`] lists them with
//! their weights. A new kind (a transaction, say) plugs in by
//! implementing `Operation` (usually a few lines on top of [`ThreadContext::write`] and
//! [`ThreadContext::check_read`]) and adding one line to `default_mix`. Every write goes
//! through the journal, so the expected state, a killed driver's parent and a recorded history
//! all learn about it the same way.
//!
//! Keys live in several column families (see `KeySpace`): writes and batches span them, scans
//! and compactions take one, snapshots and checkpoints read across all of them, `drop-family` drops a family
//! and creates it again, and `rename-family` renames one to a temporary name and back.
//!
//! Concurrency contract: operations run on many threads at once against one [`Shared`]; the
//! database handle sits in a read-write lock so that `reopen` can take it exclusively, while
//! every other operation holds a read guard for its whole duration (so a reopen never races a
//! write in flight). Inside that guard, an operation holds the locks of the families it uses
//! shared, taken in family order, and `drop-family` and `rename-family` hold their family's
//! lock exclusively.
//!
//! Invariants checked: every value read is one the key may legally hold at the time of the
//! read, in its own family; members of an atomic group (and of the groups linked to it in
//! another family) are seen with one value; an iterator returns keys of the key space, in
//! order, inside its bounds, and leaves out only keys that may legally be absent; two reads of
//! one snapshot agree; a dropped family's handle reads nothing and its successor is a new
//! family; no operation fails on a healthy file system.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use rand::rngs::SmallRng;
use rand::Rng;
use riptide::{
    ColumnFamily, Db, Error, IsolationLevel, Options, ReadOptions, Snapshot, TransactionOptions, WriteBatch,
    WriteOptions,
};

use crate::driver::family_handle;
use crate::journal::Journal;
use crate::model::{describe, parse_value, value_id, ExpectedState, KeySpace, Tick, ValueId};

/// A shared hold on one column family's lock (see [`Shared::family_locks`]).
pub type FamilyGuard<'a> = RwLockReadGuard<'a, ()>;

/// A violated expectation or an unexpected error, described for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl From<riptide::Error> for Failure {
    fn from(error: riptide::Error) -> Failure {
        Failure(format!("unexpected error: {error}"))
    }
}

/// Everything the driver's threads share.
pub struct Shared {
    /// The open database; `None` only for the moment of a reopen.
    pub db: RwLock<Option<Db>>,
    /// Where the database lives.
    pub path: PathBuf,
    /// The options it is opened with.
    pub options: Options,
    /// The legal values of every key.
    pub state: ExpectedState,
    /// The journal every write passes through.
    pub journal: Journal,
    /// This driver's generation, part of every value id.
    pub cycle: u64,
    /// Set to stop every thread.
    pub stop: AtomicBool,
    /// Operations completed, for the hang watchdog.
    pub progress: AtomicU64,
    /// Fraction (per thousand) of writes that ask for a sync.
    pub sync_per_thousand: u32,
    /// One lock per column family of the key space: every operation on a family holds it
    /// shared (taken in family order, after the database guard), and dropping and recreating
    /// the family holds it exclusively, so no operation sees a family half gone.
    pub family_locks: Vec<RwLock<()>>,
}

/// One thread's view: the shared state, its random generator and its value-id counter.
pub struct ThreadContext<'a> {
    /// The shared state.
    pub shared: &'a Shared,
    /// This thread's generator, seeded from the run's seed and the thread number.
    pub rng: SmallRng,
    /// The thread number, part of every value id it writes.
    pub thread: u64,
    counter: u64,
}

impl<'a> ThreadContext<'a> {
    /// A context for thread `thread`.
    pub fn new(shared: &'a Shared, rng: SmallRng, thread: u64) -> ThreadContext<'a> {
        ThreadContext { shared, rng, thread, counter: 0 }
    }

    /// A value id nobody has used.
    pub fn next_value_id(&mut self) -> ValueId {
        self.counter += 1;
        value_id(self.shared.cycle, self.thread, self.counter)
    }

    /// A random plain key index, in a random column family.
    pub fn random_plain_key(&mut self) -> usize {
        let space = self.shared.state.space();
        let family = self.random_family();
        // Half of the draws go to a small hot set, so keys see concurrent writers often.
        let position = if self.rng.gen_bool(0.5) {
            self.rng.gen_range(0..space.plain_keys.min(64))
        } else {
            self.rng.gen_range(0..space.plain_keys)
        };
        space.plain_key(family, position)
    }

    /// A random column family of the key space.
    pub fn random_family(&mut self) -> usize {
        self.rng.gen_range(0..self.shared.state.space().column_families)
    }

    /// Holds the locks of `families` shared, taken in family order, so that none of them is
    /// dropped while the caller uses it.
    pub fn lock_families(&self, families: impl IntoIterator<Item = usize>) -> Result<Vec<FamilyGuard<'a>>, Failure> {
        let families: std::collections::BTreeSet<usize> = families.into_iter().collect();
        families
            .into_iter()
            .map(|family| {
                self.shared
                    .family_locks
                    .get(family)
                    .ok_or_else(|| Failure(format!("no column family {family}")))?
                    .read()
                    .map_err(|_| Failure("another thread panicked holding a column family lock".to_string()))
            })
            .collect()
    }

    /// Holds the lock of `family` exclusively, so that no other operation uses the family
    /// while the caller drops or renames it.
    pub fn lock_family_exclusively(&self, family: usize) -> Result<RwLockWriteGuard<'a, ()>, Failure> {
        self.shared
            .family_locks
            .get(family)
            .ok_or_else(|| Failure(format!("no column family {family}")))?
            .write()
            .map_err(|_| Failure("another thread panicked holding a column family lock".to_string()))
    }

    /// A read guard on the database handle.
    pub fn db(&self) -> Result<RwLockReadGuard<'a, Option<Db>>, Failure> {
        self.shared.db.read().map_err(|_| Failure("another thread panicked holding the database".to_string()))
    }

    /// Writes `(key index, value)` pairs atomically in one batch (each key at most once),
    /// journaling its begin and end. Any error is a failure: the file system is healthy.
    pub fn write(&mut self, kind: &str, writes: &[(usize, Option<ValueId>)]) -> Result<(), Failure> {
        self.write_as(kind, writes, PutForm::Plain)
    }

    /// Like [`ThreadContext::write`], with the puts written in `form`. Puts that have expired
    /// when written read as deletes, so they are journaled as deletes.
    pub fn write_as(&mut self, kind: &str, writes: &[(usize, Option<ValueId>)], form: PutForm) -> Result<(), Failure> {
        let space = self.shared.state.space();
        let sync = self.rng.gen_range(0..1000) < self.shared.sync_per_thousand;
        let guard = self.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _families = self.lock_families(writes.iter().map(|&(index, _)| space.family_of(index)))?;
        let mut batch = WriteBatch::new();
        for &(index, value) in writes {
            let family = family_handle(db, space.family_of(index))?;
            let (key, bytes) = (space.key(index), value.map(|id| crate::model::value_bytes(index, id)));
            match (bytes, form) {
                (Some(bytes), PutForm::Plain) => batch.put_cf(&family, &key, &bytes),
                (Some(bytes), PutForm::NeverExpiring) => {
                    batch.put_with_expiry_cf(&family, &key, &bytes, NEVER_EXPIRES_US)
                }
                (Some(bytes), PutForm::Expired) => batch.put_with_expiry_cf(&family, &key, &bytes, EXPIRED_US),
                (Some(bytes), PutForm::MergeOperand) => batch.merge_cf(&family, &key, &bytes),
                (None, _) => batch.delete_cf(&family, &key),
            }
        }
        let journaled: Vec<(usize, Option<ValueId>)> = match form {
            PutForm::Expired => writes.iter().map(|&(index, _)| (index, None)).collect(),
            PutForm::Plain | PutForm::NeverExpiring | PutForm::MergeOperand => writes.to_vec(),
        };
        let writes = journaled.as_slice();
        let begin = self.shared.journal.begin_write(&self.shared.state, kind, writes).map_err(journal_failure)?;
        let result = db.write_opt(batch, &WriteOptions { sync });
        let keys: Vec<usize> = writes.iter().map(|(index, _)| *index).collect();
        self.shared.journal.end_write(&self.shared.state, begin, &keys, result.is_ok()).map_err(journal_failure)?;
        result.map_err(|error| Failure(format!("{kind} of {} keys failed: {error}", writes.len())))
    }

    /// Deletes plain keys `first..end` of `family` with one range delete, journaled as a delete
    /// of each of them.
    pub fn delete_range(&mut self, family: usize, first: usize, end: usize) -> Result<(), Failure> {
        let space = self.shared.state.space();
        let sync = self.rng.gen_range(0..1000) < self.shared.sync_per_thousand;
        let guard = self.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _families = self.lock_families(std::iter::once(family))?;
        let handle = family_handle(db, family)?;
        let writes: Vec<(usize, Option<ValueId>)> =
            (first..end).map(|position| (space.plain_key(family, position), None)).collect();
        // Plain keys sort before group members ("k" < "m"), so the range holds plain keys only;
        // the end bound is spelled like a plain key even past the last one.
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(&handle, &space.key(space.plain_key(family, first)), format!("k{end:05}").as_bytes());
        let begin =
            self.shared.journal.begin_write(&self.shared.state, "delete-range", &writes).map_err(journal_failure)?;
        let result = db.write_opt(batch, &WriteOptions { sync });
        let keys: Vec<usize> = writes.iter().map(|(index, _)| *index).collect();
        self.shared.journal.end_write(&self.shared.state, begin, &keys, result.is_ok()).map_err(journal_failure)?;
        result.map_err(|error| Failure(format!("delete-range of {} keys failed: {error}", writes.len())))
    }

    /// Reads key `index` through `family` and checks the answer, bracketing the call with the
    /// read's start and end ticks as `check_read` requires.
    pub fn checked_get(
        &self,
        what: &str,
        db: &Db,
        family: &ColumnFamily,
        index: usize,
    ) -> Result<Option<ValueId>, Failure> {
        let read = self.shared.state.begin_read();
        let value = db.get_cf(family, &self.shared.state.space().key(index))?;
        let end = self.shared.state.now();
        self.check_read(what, index, value.as_deref(), read.start(), end)
    }

    /// Checks that `value` (bytes read for key `index`, or absence) was legal for a read that
    /// ran between `start` and `end`, and returns its id.
    pub fn check_read(
        &self,
        what: &str,
        index: usize,
        value: Option<&[u8]>,
        start: Tick,
        end: Tick,
    ) -> Result<Option<ValueId>, Failure> {
        let observed = match value {
            Some(bytes) => Some(
                parse_value(index, bytes)
                    .map_err(|reason| Failure(format!("{what}: key {index}: never-written value: {reason}")))?,
            ),
            None => None,
        };
        let legal = self.shared.state.legal_values(index, start, end);
        if !legal.contains(&observed) {
            let legal: Vec<String> = legal.into_iter().map(describe).collect();
            return Err(Failure(format!(
                "{what}: key {index} read {} between ticks {start} and {end}; legal: [{}]",
                describe(observed),
                legal.join(", ")
            )));
        }
        self.shared.journal.read(start, end, index, observed).map_err(journal_failure)?;
        Ok(observed)
    }
}

/// Shows the bytes read for key `index` (or their absence) as a value id, or says why they are
/// no value the driver wrote.
fn show_value(index: usize, value: Option<&[u8]>) -> String {
    match value {
        Some(bytes) => parse_value(index, bytes).map(|id| describe(Some(id))).unwrap_or_else(|reason| reason),
        None => "absent".to_string(),
    }
}

/// Adds to `failure` what the engine holds for each of `indices` (every stored version, its
/// source and sequence number): in the sources `iterator` reads, when given, and in the
/// database's current view, so that a report says where a wrong value came from.
fn with_stored_versions(
    db: &Db,
    iterator: Option<&riptide::DbIterator>,
    space: crate::model::KeySpace,
    indices: &[usize],
    failure: Failure,
) -> Failure {
    use riptide::internals::debug;
    let mut message = failure.0;
    for &index in indices {
        let key = space.key(index);
        let family = match family_handle(db, space.family_of(index)) {
            Ok(family) => family,
            Err(error) => {
                message.push_str(&format!("\n  key {index}: {error}"));
                continue;
            }
        };
        let mut listings = vec![("now", debug::key_versions(db, &family, &key))];
        if let Some(iterator) = iterator {
            listings.insert(0, ("in the iterator's view", debug::iterator_key_versions(db, iterator, &key)));
        }
        for (when, listing) in listings {
            match listing {
                Ok((sequence, versions)) => {
                    message.push_str(&format!(
                        "\n  key {index} (family {}) {when} (reads at sequence {sequence}):",
                        space.family_of(index)
                    ));
                    for version in versions {
                        let value = if version.is_delete {
                            "delete".to_string()
                        } else {
                            show_value(index, Some(&version.value))
                        };
                        message.push_str(&format!("\n    {} seq {} {value}", version.source, version.sequence));
                    }
                }
                Err(error) => message.push_str(&format!("\n  key {index} {when}: versions unreadable: {error}")),
            }
        }
    }
    Failure(message)
}

/// How [`ThreadContext::write_as`] writes its puts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutForm {
    /// Plain puts.
    Plain,
    /// Puts with an expiry so far ahead that it never comes.
    NeverExpiring,
    /// Puts with an expiry in the past: they read as deletes from the start.
    Expired,
    /// Merge operands, which the driver's operator (`LastOperandOperator`) makes read as puts.
    MergeOperand,
}

/// The expiry of [`PutForm::NeverExpiring`] puts: far beyond any clock.
const NEVER_EXPIRES_US: u64 = u64::MAX / 2;
/// The expiry of [`PutForm::Expired`] puts: one microsecond after the epoch.
const EXPIRED_US: u64 = 1;

fn journal_failure(error: std::io::Error) -> Failure {
    Failure(format!("journal write failed (parent gone?): {error}"))
}

/// One kind of operation.
pub trait Operation: Send + Sync {
    /// A short name, used in the journal and in counts.
    fn name(&self) -> &'static str;
    /// Runs the operation once.
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure>;
}

/// Operation kinds with their relative weights.
pub type OperationMix = Vec<(u32, Box<dyn Operation>)>;

/// The default mix. Add a kind here with its weight.
pub fn default_mix() -> OperationMix {
    vec![
        (30, Box::new(Put)),
        (8, Box::new(Delete)),
        (2, Box::new(DeleteRange)),
        (3, Box::new(ExpiringPut)),
        (3, Box::new(MergePut)),
        (10, Box::new(Batch)),
        (6, Box::new(GroupWrite)),
        (6, Box::new(TransactionWrite)),
        (25, Box::new(Get)),
        (8, Box::new(Scan)),
        (4, Box::new(SnapshotReads)),
        (1, Box::new(DropFamily { per_thousand: 100 })),
        (1, Box::new(RenameFamily { per_thousand: 100 })),
        (1, Box::new(Flush)),
        (1, Box::new(CompactAll { per_thousand: 150 })),
        (1, Box::new(Reopen { per_thousand: 60 })),
        (1, Box::new(Checkpoint { per_thousand: 100 })),
    ]
}

/// Replaces weights by name (`put=10,reopen=0`); unknown names are an error.
pub fn apply_weights(mix: &mut OperationMix, spec: &str) -> Result<(), String> {
    for part in spec.split(',').filter(|part| !part.is_empty()) {
        let (name, weight) = part.split_once('=').ok_or_else(|| format!("bad weight {part:?}"))?;
        let weight: u32 = weight.parse().map_err(|_| format!("bad weight {part:?}"))?;
        let entry = mix
            .iter_mut()
            .find(|(_, operation)| operation.name() == name)
            .ok_or_else(|| format!("unknown operation {name:?}"))?;
        entry.0 = weight;
    }
    Ok(())
}

/// Picks an operation by weight; returns its position in `mix`.
pub fn choose(mix: &OperationMix, rng: &mut SmallRng) -> Option<usize> {
    let total: u32 = mix.iter().map(|(weight, _)| weight).sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.gen_range(0..total);
    for (position, (weight, _)) in mix.iter().enumerate() {
        if draw < *weight {
            return Some(position);
        }
        draw -= weight;
    }
    None
}

struct Put;

impl Operation for Put {
    fn name(&self) -> &'static str {
        "put"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let index = context.random_plain_key();
        let id = context.next_value_id();
        context.write("put", &[(index, Some(id))])
    }
}

struct Delete;

impl Operation for Delete {
    fn name(&self) -> &'static str {
        "delete"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let index = context.random_plain_key();
        context.write("delete", &[(index, None)])
    }
}

/// A range delete of consecutive plain keys of one family: one record that the journal and
/// the expected state see as a delete of each key in the range.
struct DeleteRange;

impl Operation for DeleteRange {
    fn name(&self) -> &'static str {
        "delete-range"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let space = context.shared.state.space();
        let family = context.random_family();
        let first = context.rng.gen_range(0..space.plain_keys);
        let longest = if context.rng.gen_bool(0.1) { 400 } else { 24 };
        let end = (first + context.rng.gen_range(1..=longest)).min(space.plain_keys);
        context.delete_range(family, first, end)
    }
}

/// A put with an expiry (I42): far in the future, so that it reads as a put, or already past,
/// so that it reads (and is journaled) as a delete. Both go through the expiring entry's whole
/// life: the log, flush (which writes the past one as a delete), compaction and recovery.
struct ExpiringPut;

impl Operation for ExpiringPut {
    fn name(&self) -> &'static str {
        "expiring-put"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let index = context.random_plain_key();
        let id = context.next_value_id();
        let form = if context.rng.gen_bool(0.7) { PutForm::NeverExpiring } else { PutForm::Expired };
        context.write_as("expiring-put", &[(index, Some(id))], form)
    }
}

/// A merge operand of one or more plain keys in one batch (I43), which the driver's operator
/// makes read as a put of the operand.
struct MergePut;

impl Operation for MergePut {
    fn name(&self) -> &'static str {
        "merge-put"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let mut writes: BTreeMap<usize, Option<ValueId>> = BTreeMap::new();
        for _ in 0..context.rng.gen_range(1..4) {
            let index = context.random_plain_key();
            writes.insert(index, Some(context.next_value_id()));
        }
        let writes: Vec<(usize, Option<ValueId>)> = writes.into_iter().collect();
        context.write_as("merge-put", &writes, PutForm::MergeOperand)
    }
}

/// A batch of puts and deletes of distinct plain keys.
struct Batch;

impl Operation for Batch {
    fn name(&self) -> &'static str {
        "batch"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let mut writes: BTreeMap<usize, Option<ValueId>> = BTreeMap::new();
        for _ in 0..context.rng.gen_range(2..12) {
            let index = context.random_plain_key();
            let value = if context.rng.gen_bool(0.8) { Some(context.next_value_id()) } else { None };
            writes.insert(index, value);
        }
        let writes: Vec<(usize, Option<ValueId>)> = writes.into_iter().collect();
        context.write("batch", &writes)
    }
}

/// Writes (or deletes) every member of one atomic group with one value, and of the groups
/// linked to it in other column families.
struct GroupWrite;

impl Operation for GroupWrite {
    fn name(&self) -> &'static str {
        "group"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let space = context.shared.state.space();
        if space.groups == 0 {
            return Ok(());
        }
        let group = context.rng.gen_range(0..space.total_groups());
        let value = if context.rng.gen_bool(0.85) { Some(context.next_value_id()) } else { None };
        // Every member gets the same id; values still differ since they name their key. A
        // linked group's twin in the other family is written by the same batch.
        let writes: Vec<(usize, Option<ValueId>)> = space
            .linked_groups(group)
            .into_iter()
            .flat_map(|linked| (0..space.group_size).map(move |member| (space.group_member(linked, member), value)))
            .collect();
        context.write("group", &writes)
    }
}

/// A pessimistic READ COMMITTED transaction over distinct plain keys: puts and deletes, some
/// undone by a rollback to a savepoint, then a commit (journaled like a batch: it must be
/// atomic and, once acknowledged, survive a kill) or, one time in eight, a rollback (which
/// must leave nothing). One time in four it spills every write (a one-byte write memory
/// limit), so its commit installs tables at one sequence number. Lock waits are short: a timeout or a deadlock against another thread's
/// transaction rolls this one back, which is no failure.
struct TransactionWrite;

impl Operation for TransactionWrite {
    fn name(&self) -> &'static str {
        "transaction"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let space = context.shared.state.space();
        let mut planned: BTreeMap<usize, Option<ValueId>> = BTreeMap::new();
        for _ in 0..context.rng.gen_range(2..10) {
            let index = context.random_plain_key();
            let value = if context.rng.gen_bool(0.8) { Some(context.next_value_id()) } else { None };
            planned.insert(index, value);
        }
        let planned: Vec<(usize, Option<ValueId>)> = planned.into_iter().collect();
        // Writes from this position on come after a savepoint, and half the time are undone.
        let savepoint_at = context.rng.gen_range(0..=planned.len());
        let undo_after_savepoint = context.rng.gen_bool(0.5);
        let roll_back = context.rng.gen_range(0..8) == 0;
        let sync = context.rng.gen_range(0..1000) < context.shared.sync_per_thousand;
        let spill = context.rng.gen_range(0..4) == 0;
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _families = context.lock_families(planned.iter().map(|&(index, _)| space.family_of(index)))?;
        let options = TransactionOptions {
            isolation: IsolationLevel::ReadCommitted,
            lock_timeout: Some(std::time::Duration::from_millis(50)),
            sync,
            write_memory_limit_bytes: if spill { 1 } else { TransactionOptions::default().write_memory_limit_bytes },
            ..TransactionOptions::default()
        };
        let transaction = db.begin(&options).map_err(|error| Failure(format!("begin failed: {error}")))?;
        for (position, &(index, value)) in planned.iter().enumerate() {
            if position == savepoint_at {
                transaction.savepoint().map_err(|error| Failure(format!("savepoint failed: {error}")))?;
            }
            let family = family_handle(db, space.family_of(index))?;
            let written = match value {
                Some(id) => transaction.put_cf(&family, &space.key(index), &crate::model::value_bytes(index, id)),
                None => transaction.delete_cf(&family, &space.key(index)),
            };
            match written {
                Ok(()) => {}
                // Another thread's transaction holds the key: give up this one.
                Err(Error::LockTimeout(_)) | Err(Error::Deadlock(_)) => {
                    return transaction.rollback().map_err(|error| Failure(format!("rollback failed: {error}")));
                }
                Err(error) => return Err(Failure(format!("transaction write failed: {error}"))),
            }
        }
        let mut effective = planned.clone();
        if savepoint_at < planned.len() && undo_after_savepoint {
            transaction
                .rollback_to_savepoint()
                .map_err(|error| Failure(format!("rollback to savepoint failed: {error}")))?;
            effective.truncate(savepoint_at);
        }
        if roll_back || effective.is_empty() {
            return transaction.rollback().map_err(|error| Failure(format!("rollback failed: {error}")));
        }
        let begin = context
            .shared
            .journal
            .begin_write(&context.shared.state, "transaction", &effective)
            .map_err(journal_failure)?;
        let result = transaction.commit();
        let keys: Vec<usize> = effective.iter().map(|(index, _)| *index).collect();
        context
            .shared
            .journal
            .end_write(&context.shared.state, begin, &keys, result.is_ok())
            .map_err(journal_failure)?;
        result.map_err(|error| Failure(format!("commit of {} keys failed: {error}", effective.len())))
    }
}

struct Get;

impl Operation for Get {
    fn name(&self) -> &'static str {
        "get"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let space = context.shared.state.space();
        let index = if context.rng.gen_bool(0.9) {
            context.random_plain_key()
        } else {
            context.rng.gen_range(0..space.total_keys())
        };
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _family_guard = context.lock_families([space.family_of(index)])?;
        let family = family_handle(db, space.family_of(index))?;
        context
            .checked_get("get", db, &family, index)
            .map_err(|failure| with_stored_versions(db, None, space, &[index], failure))?;
        Ok(())
    }
}

/// One iterator pass as `check_window` ran it, for a failure report.
struct ScanShape<'s> {
    family: &'s ColumnFamily,
    options: &'s ReadOptions,
    forward: bool,
}

/// Describes a failed scan for the report: its family, direction and options, and what a
/// repeat of the same scan, and a seek to the key, return now (so a report tells a
/// deterministic read error from a race).
fn rescan_report(db: &Db, scan: &ScanShape<'_>, space: crate::model::KeySpace, index: usize) -> String {
    let text = |bound: &Option<Vec<u8>>| {
        bound.as_ref().map_or("none".to_string(), |b| String::from_utf8_lossy(b).into_owned())
    };
    let options = scan.options;
    let mut report = format!(
        "\n  scan of family {} {} lower {} upper {} fill_cache {} snapshot {:?}",
        space.family_of(index),
        direction(scan.forward),
        text(&options.lower_bound),
        text(&options.upper_bound),
        options.fill_cache,
        options.snapshot.as_ref().map(Snapshot::sequence)
    );
    let key = space.key(index);
    match db.iter_cf(scan.family, options) {
        Ok(mut iterator) => {
            if scan.forward {
                iterator.seek_to_first();
            } else {
                iterator.seek_to_last();
            }
            let mut found = None;
            while iterator.valid() {
                if iterator.key() == key.as_slice() {
                    found = Some(iterator.value().to_vec());
                }
                if scan.forward {
                    iterator.next();
                } else {
                    iterator.prev();
                }
            }
            report.push_str(&format!("\n  the same scan again: key {index} {}", show_value(index, found.as_deref())));
            iterator.seek(&key);
            let at = iterator.valid() && iterator.key() == key.as_slice();
            report.push_str(&format!("; a seek to it: {}", show_value(index, at.then(|| iterator.value()))));
        }
        Err(error) => report.push_str(&format!("\n  repeat failed: {error}")),
    }
    report
}

/// Completes the report of a failed scan: the scan and its repeat (for the last of `indices`),
/// then the stored versions of each of `indices` in `iterator`'s view and now.
fn scan_failure(
    db: &Db,
    iterator: &riptide::DbIterator,
    scan: &ScanShape<'_>,
    space: crate::model::KeySpace,
    indices: &[usize],
    failure: Failure,
) -> Failure {
    let rescan = indices.last().map_or(String::new(), |&index| rescan_report(db, scan, space, index));
    with_stored_versions(db, Some(iterator), space, indices, Failure(failure.0 + &rescan))
}

/// Checks one iterator pass over key indices `[low, high)` of column family `family` (as
/// bounds, or with a bound left open when the window touches that end of the family),
/// forward or backward, optionally at a snapshot whose point lies between `start` and `end`
/// (otherwise the iterator's own creation decides the point, and `start` and `end` are taken
/// around it). The caller holds the family's lock.
fn check_window(
    context: &mut ThreadContext<'_>,
    db: &Db,
    snapshot: Option<(&Snapshot, Tick, Tick)>,
    family: usize,
    (low, high): (usize, usize),
) -> Result<(), Failure> {
    let space = context.shared.state.space();
    let range = space.family_range(family);
    debug_assert!(range.start <= low && low < high && high <= range.end);
    let handle = family_handle(db, family)?;
    let lower_bound = (low > range.start || context.rng.gen_bool(0.8)).then(|| space.key(low));
    let upper_bound = (high < range.end || context.rng.gen_bool(0.8)).then(|| space.key(high.min(range.end - 1)));
    // Without an upper bound, the window runs to the end of the family.
    let high = if upper_bound.is_some() { high.min(range.end - 1) } else { range.end };
    let options = ReadOptions {
        snapshot: snapshot.map(|(snapshot, _, _)| snapshot.clone()),
        lower_bound,
        upper_bound,
        fill_cache: context.rng.gen_bool(0.8),
        ..ReadOptions::default()
    };
    let read = context.shared.state.begin_read();
    let mut iterator = db.iter_cf(&handle, &options)?;
    let (start, end) = match snapshot {
        Some((_, start, end)) => (start, end),
        None => (read.start(), context.shared.state.now()),
    };
    let forward = context.rng.gen_bool(0.6);
    let scan = ScanShape { family: &handle, options: &options, forward };
    let mut seen: Vec<(usize, Option<ValueId>)> = Vec::new();
    if forward {
        iterator.seek_to_first();
    } else {
        iterator.seek_to_last();
    }
    while iterator.valid() {
        let key = iterator.key().to_vec();
        let index = space.parse_key(family, &key).ok_or_else(|| {
            Failure(format!("scan: key {:?} is not one the driver writes", String::from_utf8_lossy(&key)))
        })?;
        if index < low || index >= high {
            return Err(Failure(format!("scan: key {index} is outside the bounds [{low}, {high})")));
        }
        if let Some(&(previous, _)) = seen.last() {
            let ordered = if forward { previous < index } else { previous > index };
            if !ordered {
                let failure = Failure(format!(
                    "scan: key {index} follows key {previous} going {} (reads at {})",
                    direction(forward),
                    if snapshot.is_some() { "a snapshot" } else { "the iterator's creation" },
                ));
                return Err(scan_failure(db, &iterator, &scan, space, &[previous, index], failure));
            }
        }
        let observed = context
            .check_read("scan", index, Some(iterator.value()), start, end)
            .map_err(|failure| scan_failure(db, &iterator, &scan, space, &[index], failure))?;
        seen.push((index, observed));
        if forward {
            iterator.next();
        } else {
            iterator.prev();
        }
    }
    iterator.status()?;
    // Keys of the window the iterator skipped must be allowed to be absent.
    let returned: BTreeMap<usize, Option<ValueId>> = seen.iter().copied().collect();
    for index in low..high {
        if !returned.contains_key(&index) {
            context
                .check_read("scan (absent key)", index, None, start, end)
                .map_err(|failure| scan_failure(db, &iterator, &scan, space, &[index], failure))?;
        }
    }
    // An iterator reads one point in time: the members of a group it returned agree.
    let mut group_values: BTreeMap<usize, Option<ValueId>> = BTreeMap::new();
    for index in low..high {
        if let Some(group) = space.group_of(index) {
            let first = space.group_member(group, 0);
            let last = space.group_member(group, space.group_size - 1);
            if first < low || last >= high {
                continue;
            }
            let value = returned.get(&index).copied().flatten();
            if let Some(previous) = group_values.insert(group, value) {
                if previous != value {
                    return Err(Failure(format!(
                        "scan: group {group} is torn: members read {} and {}",
                        describe(previous),
                        describe(value)
                    )));
                }
            }
        }
    }
    drop(read);
    Ok(())
}

fn direction(forward: bool) -> &'static str {
    if forward {
        "forward"
    } else {
        "backward"
    }
}

/// A random window of key indices of family `family`, at most 200 wide, sometimes touching an
/// end of the family.
fn random_window(context: &mut ThreadContext<'_>, family: usize) -> (usize, usize) {
    let range = context.shared.state.space().family_range(family);
    let total = range.len();
    let width = context.rng.gen_range(1..200).min(total);
    let low = match context.rng.gen_range(0..10) {
        0 => 0,
        1 => total - width,
        _ => context.rng.gen_range(0..=total - width),
    };
    (range.start + low, range.start + low + width)
}

struct Scan;

impl Operation for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let family = context.random_family();
        let _family_guard = context.lock_families([family])?;
        let window = random_window(context, family);
        check_window(context, db, None, family, window)
    }
}

/// Takes a snapshot, reads keys of every family and a group (with the groups linked to it)
/// through it, lets other threads write, reads again and scans one family: everything must be
/// one point in time.
struct SnapshotReads;

impl Operation for SnapshotReads {
    fn name(&self) -> &'static str {
        "snapshot"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let space = context.shared.state.space();
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _family_guards = context.lock_families(0..space.column_families)?;
        let families: Vec<ColumnFamily> =
            (0..space.column_families).map(|family| family_handle(db, family)).collect::<Result<_, _>>()?;
        let read = context.shared.state.begin_read();
        let snapshot = db.snapshot();
        let (start, end) = (read.start(), context.shared.state.now());
        let options = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
        let read_at_snapshot =
            |index: usize| db.get_cf_opt(&families[space.family_of(index)], &space.key(index), &options);
        let keys: Vec<usize> = (0..8).map(|_| context.random_plain_key()).collect();
        let mut first_reads = Vec::new();
        for &index in &keys {
            let value = read_at_snapshot(index)?;
            first_reads.push(context.check_read("snapshot get", index, value.as_deref(), start, end)?);
        }
        check_random_group_whole(context, "snapshot", &read_at_snapshot, start, end)?;
        std::thread::yield_now();
        for (&index, first) in keys.iter().zip(&first_reads) {
            let value = read_at_snapshot(index)?;
            let again = context.check_read("snapshot reread", index, value.as_deref(), start, end)?;
            if again != *first {
                return Err(Failure(format!(
                    "snapshot: key {index} read {} then {}",
                    describe(*first),
                    describe(again)
                )));
            }
        }
        let family = context.random_family();
        let window = random_window(context, family);
        check_window(context, db, Some((&snapshot, start, end)), family, window)?;
        drop(read);
        Ok(())
    }
}

/// Now and then (per thousand of its draws) drops a droppable column family and creates it
/// again under the same name (a new family, empty), holding its lock exclusively. To the
/// expected state this is one write that deletes every key of the family: a crash in between
/// leaves the family either whole or empty (a family missing at open is created empty).
struct DropFamily {
    per_thousand: u32,
}

impl Operation for DropFamily {
    fn name(&self) -> &'static str {
        "drop-family"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        if context.rng.gen_range(0..1000) >= self.per_thousand {
            return Ok(());
        }
        let space = context.shared.state.space();
        let droppable: Vec<usize> = (0..space.column_families).filter(|&f| KeySpace::family_is_droppable(f)).collect();
        if droppable.is_empty() {
            return Ok(());
        }
        let family = droppable[context.rng.gen_range(0..droppable.len())];
        let name =
            KeySpace::family_name(family).ok_or_else(|| Failure("the default family is not droppable".into()))?;
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _exclusive = context.lock_family_exclusively(family)?;
        let handle = family_handle(db, family)?;
        let writes: Vec<(usize, Option<ValueId>)> = space.family_range(family).map(|index| (index, None)).collect();
        let keys: Vec<usize> = space.family_range(family).collect();
        let shared = context.shared;
        let begin = shared.journal.begin_write(&shared.state, "drop-family", &writes).map_err(journal_failure)?;
        let result = db
            .drop_column_family(&handle)
            .and_then(|()| db.create_column_family(&name, shared.options.column_family_options()));
        shared.journal.end_write(&shared.state, begin, &keys, result.is_ok()).map_err(journal_failure)?;
        let recreated = result.map_err(|error| Failure(format!("dropping and recreating {name} failed: {error}")))?;
        // The old handle now fails; the new family is empty.
        if db.get_cf(&handle, &space.key(space.family_range(family).start)).is_ok() {
            return Err(Failure(format!("a read through a dropped handle of {name} succeeded")));
        }
        if recreated.id() == handle.id() {
            return Err(Failure(format!("{name} was recreated with its old id {}", handle.id())));
        }
        Ok(())
    }
}

/// Now and then (per thousand of its draws) renames a column family other than the default one
/// to a temporary name and back, holding its lock exclusively. In between, reads through the
/// handle must see the family's keys unchanged, the old name must be free, and sometimes a
/// flush writes the family's memtable out under the temporary name. No key changes, so the
/// expected state learns nothing; a kill between the renames leaves the family under the
/// temporary name, which the next open repairs (see `driver::open_database`), and the crash
/// parent's check then finds every key of the family where it was.
struct RenameFamily {
    per_thousand: u32,
}

impl Operation for RenameFamily {
    fn name(&self) -> &'static str {
        "rename-family"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        if context.rng.gen_range(0..1000) >= self.per_thousand {
            return Ok(());
        }
        let space = context.shared.state.space();
        if space.column_families < 2 {
            return Ok(());
        }
        let family = context.rng.gen_range(1..space.column_families);
        let name = KeySpace::family_name(family).ok_or_else(|| Failure("the default family has no name".into()))?;
        let temporary = KeySpace::temporary_family_name(&name);
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let _exclusive = context.lock_family_exclusively(family)?;
        let handle = family_handle(db, family)?;
        db.rename_column_family(&handle, &temporary)
            .map_err(|error| Failure(format!("renaming {name} to {temporary} failed: {error}")))?;
        if db.column_family(&name).is_some() {
            return Err(Failure(format!("{name} is still found by name after its rename to {temporary}")));
        }
        match db.column_family(&temporary) {
            Some(found) if found.id() == handle.id() => {}
            other => {
                return Err(Failure(format!(
                    "{temporary} names {:?} after the rename, not family id {}",
                    other.map(|found| found.id()),
                    handle.id()
                )))
            }
        }
        if context.rng.gen_bool(0.3) {
            db.flush().map_err(|error| Failure(format!("flush with {name} renamed failed: {error}")))?;
        }
        for _ in 0..8 {
            let index = space.family_range(family).start + context.rng.gen_range(0..space.family_keys());
            context.checked_get("get while renamed", db, &handle, index)?;
        }
        db.rename_column_family(&handle, &name)
            .map_err(|error| Failure(format!("renaming {temporary} back to {name} failed: {error}")))?;
        if db.column_family(&temporary).is_some() {
            return Err(Failure(format!("{temporary} is still found by name after the rename back")));
        }
        Ok(())
    }
}

/// Reads every member of a random atomic group, and of the groups linked to it, with `read` (a
/// view of one point in time: a snapshot, a checkpoint) and checks that each value is legal
/// during `start..=end` and that all of them show the same write.
fn check_random_group_whole(
    context: &mut ThreadContext<'_>,
    what: &str,
    read: &dyn Fn(usize) -> Result<Option<Vec<u8>>, Error>,
    start: Tick,
    end: Tick,
) -> Result<(), Failure> {
    let space = context.shared.state.space();
    if space.groups == 0 {
        return Ok(());
    }
    let group = context.rng.gen_range(0..space.total_groups());
    let mut seen = None;
    for linked in space.linked_groups(group) {
        for member in 0..space.group_size {
            let index = space.group_member(linked, member);
            let value = read(index)?;
            let observed = context.check_read(&format!("{what} group get"), index, value.as_deref(), start, end)?;
            if seen.is_some_and(|previous| previous != observed) {
                return Err(Failure(format!("{what}: group {group} (member {member} of {linked}) is torn")));
            }
            seen = Some(observed);
        }
    }
    Ok(())
}

/// Now and then (per thousand of its draws) takes a checkpoint while the other threads write,
/// opens it as a database of its own, and checks it like a snapshot: every key read holds a
/// value legal at some time during the checkpoint call, and no atomic group is torn. The
/// checkpoint is removed afterwards (a killed driver leaves it behind under a name no later
/// cycle uses). A checkpoint refused with `Busy` (a prepared transaction undecided) is no
/// failure.
struct Checkpoint {
    per_thousand: u32,
}

impl Operation for Checkpoint {
    fn name(&self) -> &'static str {
        "checkpoint"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        if context.rng.gen_range(0..1000) >= self.per_thousand {
            return Ok(());
        }
        let shared = context.shared;
        let space = shared.state.space();
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        // No family is dropped or renamed half-way through the checkpoint.
        let _family_guards = context.lock_families(0..space.column_families)?;
        let unique = context.next_value_id();
        let name = format!("checkpoint-{}-{}-{unique}", shared.cycle, context.thread);
        let target = shared.path.with_file_name(format!(
            "{}.{name}",
            shared.path.file_name().map_or("db".into(), |name| name.to_string_lossy())
        ));
        let read = shared.state.begin_read();
        let start = read.start();
        match db.checkpoint(&target) {
            Ok(()) => {}
            Err(Error::Busy(_)) => return Ok(()),
            Err(error) => return Err(Failure(format!("checkpoint into {} failed: {error}", target.display()))),
        }
        let end = shared.state.now();
        let copy = crate::driver::open_database(&target, shared.options.clone(), space)
            .map_err(|error| Failure(format!("opening checkpoint {} failed: {error}", target.display())))?;
        let families: Vec<ColumnFamily> =
            (0..space.column_families).map(|family| family_handle(&copy, family)).collect::<Result<_, _>>()?;
        let read_copy = |index: usize| copy.get_cf(&families[space.family_of(index)], &space.key(index));
        for _ in 0..32 {
            let index = context.random_plain_key();
            let value = read_copy(index)?;
            context.check_read("checkpoint get", index, value.as_deref(), start, end)?;
        }
        check_random_group_whole(context, "checkpoint", &read_copy, start, end)?;
        drop(read);
        drop(families);
        copy.close().map_err(|error| Failure(format!("closing checkpoint failed: {error}")))?;
        shared.options.file_system.remove_dir_and_files(&target);
        Ok(())
    }
}

struct Flush;

impl Operation for Flush {
    fn name(&self) -> &'static str {
        "flush"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        db.flush().map_err(|error| Failure(format!("flush failed: {error}")))
    }
}

/// `compact_all` or `compact_range` over part of one family, or (more often) waiting for
/// background work, chosen per thousand.
struct CompactAll {
    per_thousand: u32,
}

impl Operation for CompactAll {
    fn name(&self) -> &'static str {
        "compact"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        let guard = context.db()?;
        let db = guard.as_ref().ok_or_else(|| Failure("database is closed".to_string()))?;
        let draw = context.rng.gen_range(0..1000);
        if draw < self.per_thousand / 2 {
            db.compact_all().map_err(|error| Failure(format!("compact_all failed: {error}")))
        } else if draw < self.per_thousand {
            // A key range of one family, bounds sometimes open.
            let space = context.shared.state.space();
            let family = context.random_family();
            let _family_guard = context.lock_families([family])?;
            let handle = family_handle(db, family)?;
            let (low, high) = random_window(context, family);
            let start = context.rng.gen_bool(0.8).then(|| space.key(low));
            let end = context.rng.gen_bool(0.8).then(|| space.key(high - 1));
            db.compact_range(&handle, start.as_deref(), end.as_deref())
                .map_err(|error| Failure(format!("compact_range of family {family} failed: {error}")))
        } else {
            db.wait_for_background_work()
                .map_err(|error| Failure(format!("waiting for background work failed: {error}")))
        }
    }
}

/// Closes and reopens the database (per thousand of its draws), then checks every key while no
/// write is in flight.
struct Reopen {
    per_thousand: u32,
}

impl Operation for Reopen {
    fn name(&self) -> &'static str {
        "reopen"
    }
    fn run(&self, context: &mut ThreadContext<'_>) -> Result<(), Failure> {
        if context.rng.gen_range(0..1000) >= self.per_thousand {
            return Ok(());
        }
        let shared = context.shared;
        let mut guard =
            shared.db.write().map_err(|_| Failure("another thread panicked holding the database".to_string()))?;
        if let Some(db) = guard.take() {
            db.close().map_err(|error| Failure(format!("close before reopen failed: {error}")))?;
        }
        let db = crate::driver::open_database(&shared.path, shared.options.clone(), shared.state.space())
            .map_err(|error| Failure(format!("reopen failed: {error}")))?;
        let result = crate::driver::verify_quiescent(&db, &shared.state, "after reopen");
        *guard = Some(db);
        result
    }
}
