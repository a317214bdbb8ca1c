//! The commit history: which keys recent writes changed, and at which sequence number, so that
//! transactions can be validated at commit.
//!
//! A transaction under REPEATABLE READ or SERIALIZABLE reads at a snapshot `s`. It may commit
//! only if no write with a sequence number above `s` changed a key it wrote (first committer
//! wins), and, under SERIALIZABLE, a key it read or a key inside a range it scanned. The
//! history answers that question: while at least one such transaction is open, the write
//! leader records every key of every batch it sequences (transactional or not), with the
//! batch's first sequence number, and checks each transaction's commit against the history in
//! the same step, before the transaction's batch gets its sequence numbers. Validation and
//! sequencing are thus one atomic step in the write order: whatever a check let through cannot
//! be invalidated by a write sequenced before it, and every write sequenced after it is after
//! the transaction's commit.
//!
//! A commit whose keys are not listed (a spilled transaction's, which may write millions) is
//! recorded as one *span* per column family, from its smallest to its largest key: a key inside
//! a span counts as written at the commit's sequence, and a range that meets it as written into.
//!
//! Keys are recorded in two indexes. The point index maps a 64-bit fingerprint of (column
//! family, key) to the key's newest recorded sequence: no key is copied and a lookup is one hash
//! probe, which is all REPEATABLE READ needs. Two keys with the same fingerprint (a chance of
//! about one in 2^64 per pair, with a per-process random seed) count as one key, so a collision
//! can only fail a transaction spuriously with [`Error::Conflict`], never let a conflict through.
//! The keys themselves are appended to one byte log in recording order (no allocation per key),
//! for pruning and for range checks. The ordered index (per column family, keys in bytewise
//! order) answers SERIALIZABLE's range checks in logarithmic time; it costs a key copy and a
//! tree insert per key, so it is kept only while a SERIALIZABLE transaction is announced or
//! open, and such a transaction waits at begin for the writes recorded without it
//! (`unordered_through`) to become visible, as below. A range whose snapshot is older than
//! `unordered_through` (a REPEATABLE READ transaction whose keys read for update were coarsened
//! into ranges) is checked by a scan of the log above its snapshot instead.
//!
//! Recording is skipped while no validating transaction is open, so plain writes pay for it
//! only while transactions need it. The race this opens (a transaction begins while a group
//! that skipped recording is in flight, and takes a snapshot below that group) is closed at
//! begin: a transaction waits until every unrecorded write is visible before it takes its
//! snapshot (`unrecorded_through`), so every write above its snapshot is recorded.
//!
//! Entries at or below the oldest snapshot of an open transaction (and below the visible
//! sequence) can no longer fail anyone and are pruned. The history's memory is capped
//! (`Options::transaction_history_limit_bytes`): past the cap the oldest entries are dropped
//! and `trimmed_through` remembers how far; a transaction whose snapshot is older than that
//! fails validation with [`Error::Conflict`] (it ran too long to be checked), never passes it
//! unchecked.
//!
//! Concurrency contract: one mutex guards everything. The write leader holds it while it
//! validates and sequences a group (no I/O under it); `begin`, `end` and lock-time checks take
//! it briefly.

use crate::hash::{FastHashMap as HashMap, FastHashSet as HashSet, KeyHashState};
use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;
use std::ops::Bound;

use parking_lot::{Mutex, MutexGuard};

use crate::batch::WriteBatch;
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};

/// Approximate bytes of one recorded key besides its bytes in the log: a point-index slot of two
/// words (with the map's spare capacity) and a pruning-queue entry of five.
const POINT_ENTRY_BYTES: usize = 72;
/// Approximate bytes of one recorded key in the ordered index besides its copy there: the tree
/// node's share.
const ORDERED_ENTRY_OVERHEAD_BYTES: usize = 48;
/// The key log drops the bytes of pruned keys once they are at least this many and half of it.
const KEY_LOG_COMPACTION_BYTES: usize = 64 << 10;
/// Approximate bytes of a span besides its keys.
const SPAN_OVERHEAD_BYTES: usize = 80;

/// The point index's fingerprint of `key` in `column_family`.
fn fingerprint(column_family: u32, key: &[u8]) -> u64 {
    KeyHashState::default().hash_one((column_family, key))
}

/// A range of user keys read by a scan, in its column family's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub(crate) column_family: u32,
    pub(crate) start: Bound<Vec<u8>>,
    pub(crate) end: Bound<Vec<u8>>,
}

impl KeyRange {
    /// True when `key` lies in the range under `order`.
    pub(crate) fn contains(&self, key: &[u8], order: &KeyComparator) -> bool {
        let after_start = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(start) => order.compare_user_keys(key, start).is_ge(),
            Bound::Excluded(start) => order.compare_user_keys(key, start).is_gt(),
        };
        let before_end = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(end) => order.compare_user_keys(key, end).is_le(),
            Bound::Excluded(end) => order.compare_user_keys(key, end).is_lt(),
        };
        after_start && before_end
    }

    /// True when the range holds a key from `low` to `high` (both included) under `order`, or
    /// when it cannot tell (an empty range is taken to intersect: a false conflict, never a
    /// missed one).
    pub(crate) fn intersects(&self, low: &[u8], high: &[u8], order: &KeyComparator) -> bool {
        let starts_before_high = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(start) => order.compare_user_keys(start, high).is_le(),
            Bound::Excluded(start) => order.compare_user_keys(start, high).is_lt(),
        };
        let ends_after_low = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(end) => order.compare_user_keys(low, end).is_le(),
            Bound::Excluded(end) => order.compare_user_keys(low, end).is_lt(),
        };
        starts_before_high && ends_after_low
    }
}

/// What the history keeps of a commit whose keys are not listed (a spilled transaction's, which
/// may write millions): per column family, the span from its smallest to its largest key, at
/// the commit's sequence. A key inside the span counts as written then.
#[derive(Debug)]
struct WrittenSpan {
    sequence: u64,
    column_family: u32,
    low: Vec<u8>,
    high: Vec<u8>,
}

impl WrittenSpan {
    fn memory_bytes(&self) -> usize {
        self.low.len() + self.high.len() + SPAN_OVERHEAD_BYTES
    }
}

/// The conflict of `transaction`, whose snapshot is `snapshot`, with a write of `key` at
/// `sequence` (at lock time or at commit).
pub(crate) fn written_after_snapshot(
    transaction: u64,
    column_family: u32,
    key: &[u8],
    sequence: u64,
    snapshot: u64,
) -> Error {
    Error::Conflict(format!(
        "transaction {transaction}: key {} of column family {column_family} was written at sequence {sequence}, \
         after the transaction's snapshot {snapshot}",
        super::describe_key(key),
    ))
}

/// What a transaction's commit (or prepare) must check: no write above `snapshot` to any of
/// its keys or into any of its ranges, and none of its written keys guarded by a prepared
/// transaction.
#[derive(Debug, Default)]
pub(crate) struct Validation {
    pub(crate) transaction: u64,
    /// The snapshot reads used; `None` under READ COMMITTED (only guards are checked).
    pub(crate) snapshot: Option<u64>,
    /// Keys the transaction writes.
    pub(crate) written: Vec<(u32, Vec<u8>)>,
    /// Keys it read (SERIALIZABLE) or read for update, checked like written ones.
    pub(crate) read: Vec<(u32, Vec<u8>)>,
    pub(crate) ranges: Vec<KeyRange>,
    /// Set for the commit of prepared transaction N: it was validated at prepare and is
    /// protected by its guard since, so nothing is checked, and its guard goes once its batch
    /// is sequenced.
    pub(crate) commits_prepared: Option<u64>,
    /// Set while prepared transaction N (spilled) checks its written keys after its guard is
    /// in place: its own guard does not count against them.
    pub(crate) preparing: Option<u64>,
}

/// What a prepared transaction protects until it is decided: writes by others to these keys or
/// into these ranges fail validation.
struct Guard {
    xid: Vec<u8>,
    keys: HashSet<(u32, Vec<u8>)>,
    ranges: Vec<KeyRange>,
}

/// The ordered index of one column family.
struct FamilyHistory {
    /// Newest recorded sequence of each key, in bytewise order (ranges of other orders are
    /// checked by a scan).
    keys: BTreeMap<Vec<u8>, u64>,
}

/// One recorded key, in the pruning queue; its bytes are in the key log.
struct Recorded {
    sequence: u64,
    fingerprint: u64,
    column_family: u32,
    key_length_bytes: u32,
    /// True when the key went into the ordered index too.
    ordered: bool,
}

impl Recorded {
    fn memory_bytes(&self) -> usize {
        let key_length = self.key_length_bytes as usize;
        POINT_ENTRY_BYTES + key_length + if self.ordered { key_length + ORDERED_ENTRY_OVERHEAD_BYTES } else { 0 }
    }
}

/// The recorded keys' bytes, oldest first, in one buffer: appended as keys are recorded and
/// consumed from the front as they are pruned (in the same order).
#[derive(Default)]
struct KeyLog {
    bytes: Vec<u8>,
    /// Bytes at the front of `bytes` that belong to pruned keys.
    consumed: usize,
}

impl KeyLog {
    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
    }

    /// Drops the oldest key, of `length` bytes, and returns it (valid until the next push).
    fn pop_front(&mut self, length: usize) -> &[u8] {
        if self.consumed >= KEY_LOG_COMPACTION_BYTES && self.consumed >= self.bytes.len() / 2 {
            self.bytes.drain(..self.consumed);
            self.consumed = 0;
        }
        let start = self.consumed;
        self.consumed += length;
        &self.bytes[start..self.consumed]
    }

    /// The keys of `entries` (consecutive from the oldest live one), newest last.
    fn keys<'a>(
        &'a self,
        entries: impl Iterator<Item = &'a Recorded>,
    ) -> impl Iterator<Item = (&'a Recorded, &'a [u8])> {
        let mut start = self.consumed;
        entries.map(move |recorded| {
            let end = start + recorded.key_length_bytes as usize;
            let key = &self.bytes[start..end];
            start = end;
            (recorded, key)
        })
    }
}

#[derive(Default)]
pub(crate) struct HistoryState {
    /// Snapshots of open validating transactions, with a count for each.
    open_snapshots: BTreeMap<u64, usize>,
    /// Transactions between `begin_tracking` and `tracking_started`.
    beginning: usize,
    /// SERIALIZABLE transactions announced or open: while there is one, keys also go into the
    /// ordered index.
    range_trackers: usize,
    /// Highest sequence of a write that was sequenced without being recorded.
    unrecorded_through: u64,
    /// Highest sequence of a write that was recorded in the point index only.
    unordered_through: u64,
    /// The point index: newest recorded sequence by fingerprint of (column family, key).
    points: HashMap<u64, u64>,
    /// The ordered index, by column family.
    families: HashMap<u32, FamilyHistory>,
    /// Every recorded key, oldest first, for pruning.
    order: VecDeque<Recorded>,
    /// The bytes of the keys in `order`.
    key_log: KeyLog,
    /// Spans of commits whose keys are not listed, oldest first.
    spans: VecDeque<WrittenSpan>,
    memory_bytes: usize,
    /// Entries at or below this sequence were dropped for the memory cap.
    trimmed_through: u64,
    /// Prepared transactions' guards, by the number of their file.
    guards: HashMap<u64, Guard>,
}

/// The commit history; see the module documentation.
#[derive(Default)]
pub(crate) struct CommitHistory {
    state: Mutex<HistoryState>,
}

impl CommitHistory {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HistoryState> {
        self.state.lock()
    }

    /// Announces a validating transaction that is about to take its snapshot, with
    /// `tracks_ranges` for a SERIALIZABLE one (whose range reads need the ordered index).
    /// Returns the sequence its snapshot must reach: every write above it will be recorded (in
    /// the ordered index too, with `tracks_ranges`).
    pub(crate) fn begin_tracking(&self, tracks_ranges: bool) -> u64 {
        let mut state = self.state.lock();
        state.beginning += 1;
        if tracks_ranges {
            state.range_trackers += 1;
            state.unrecorded_through.max(state.unordered_through)
        } else {
            state.unrecorded_through
        }
    }

    /// Takes the snapshot (with `take_snapshot`) of the transaction announced with
    /// `begin_tracking` and registers it. Both happen under the history's mutex, so a prune
    /// (which runs under it too, bounded by the visible sequence it reads) either sees the
    /// snapshot registered or ran before it was taken, below it.
    pub(crate) fn start_tracking<T>(&self, take_snapshot: impl FnOnce() -> (T, u64)) -> T {
        let mut state = self.state.lock();
        let (snapshot, sequence) = take_snapshot();
        state.beginning -= 1;
        *state.open_snapshots.entry(sequence).or_insert(0) += 1;
        snapshot
    }

    /// A transaction announced with `begin_tracking` (with the same `tracks_ranges`) gave up
    /// before taking a snapshot.
    pub(crate) fn tracking_abandoned(&self, tracks_ranges: bool) {
        let mut state = self.state.lock();
        state.beginning -= 1;
        if tracks_ranges {
            state.range_trackers -= 1;
        }
    }

    /// A validating transaction with snapshot `snapshot` (begun with `tracks_ranges`) ended;
    /// prunes what nobody needs.
    pub(crate) fn tracking_ended(&self, snapshot: u64, tracks_ranges: bool, visible_sequence: u64) {
        let mut state = self.state.lock();
        if tracks_ranges {
            state.range_trackers -= 1;
        }
        if let Some(count) = state.open_snapshots.get_mut(&snapshot) {
            *count -= 1;
            if *count == 0 {
                state.open_snapshots.remove(&snapshot);
            }
        }
        state.prune(visible_sequence);
    }

    /// Bytes the history holds now.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.state.lock().memory_bytes
    }
}

impl HistoryState {
    /// True while writes must be recorded.
    pub(crate) fn recording(&self) -> bool {
        self.beginning > 0 || !self.open_snapshots.is_empty()
    }

    /// Notes writes up to `last_sequence` that were sequenced without being recorded.
    pub(crate) fn skipped_through(&mut self, last_sequence: u64) {
        self.unrecorded_through = self.unrecorded_through.max(last_sequence);
    }

    /// Records every key `batch` (sequenced from `first_sequence`) writes.
    pub(crate) fn record(&mut self, batch: &WriteBatch, first_sequence: u64) {
        let ordered = self.range_trackers > 0;
        if !ordered && !batch.is_empty() {
            self.unordered_through = self.unordered_through.max(first_sequence + batch.len() as u64 - 1);
        }
        for entry in batch.entries() {
            // A commit marker of a prepared transaction is no user key.
            if entry.column_family_id == super::prepared::MARKER_COLUMN_FAMILY_ID {
                continue;
            }
            if entry.range_delete {
                // Every key of the range counts as written: a span (whose end is inclusive,
                // one key more than the range, which can only fail a transaction spuriously).
                debug_assert!(self.spans.back().is_none_or(|span| span.sequence <= first_sequence));
                let span = WrittenSpan {
                    sequence: first_sequence,
                    column_family: entry.column_family_id,
                    low: entry.key.to_vec(),
                    high: entry.value.to_vec(),
                };
                self.memory_bytes += span.memory_bytes();
                self.spans.push_back(span);
                continue;
            }
            let fingerprint = fingerprint(entry.column_family_id, entry.key);
            self.points.insert(fingerprint, first_sequence);
            if ordered {
                let family = self
                    .families
                    .entry(entry.column_family_id)
                    .or_insert_with(|| FamilyHistory { keys: BTreeMap::new() });
                match family.keys.get_mut(entry.key) {
                    Some(sequence) => *sequence = first_sequence,
                    None => {
                        family.keys.insert(entry.key.to_vec(), first_sequence);
                    }
                }
            }
            // Keys are at most MAX_KEY_SIZE_BYTES long, far below u32::MAX.
            let key_length_bytes = u32::try_from(entry.key.len()).unwrap_or(u32::MAX);
            let recorded = Recorded {
                sequence: first_sequence,
                fingerprint,
                column_family: entry.column_family_id,
                key_length_bytes,
                ordered,
            };
            self.memory_bytes += recorded.memory_bytes();
            self.key_log.push(entry.key);
            self.order.push_back(recorded);
        }
    }

    /// Checks `validation` against the recorded writes and the prepared transactions' guards.
    /// `order_of` gives a column family's key order (for ranges); a family it does not know
    /// (dropped) cannot hold a range conflict that matters, since the commit then fails on the
    /// family anyway.
    pub(crate) fn validate(
        &self,
        validation: &Validation,
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        if validation.commits_prepared.is_some() {
            return Ok(());
        }
        if let Some(snapshot) = validation.snapshot {
            self.validate_since_snapshot(validation, snapshot, order_of)?;
        }
        if !self.guards.is_empty() {
            self.validate_against_guards(validation, order_of)?;
        }
        Ok(())
    }

    fn validate_since_snapshot(
        &self,
        validation: &Validation,
        snapshot: u64,
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        if snapshot < self.trimmed_through {
            return Err(Error::Conflict(format!(
                "transaction {} read at sequence {snapshot}, older than the commit history kept for validation \
                 (trimmed through {}; see Options::transaction_history_limit_bytes)",
                validation.transaction, self.trimmed_through
            )));
        }
        for (column_family, key) in validation.written.iter().chain(&validation.read) {
            self.check_unwritten_since(validation.transaction, *column_family, key, snapshot, order_of)?;
        }
        for range in &validation.ranges {
            let Some(order) = order_of(range.column_family) else { continue };
            if let Some((key, sequence)) = self.write_in_range(range, &order, snapshot) {
                return Err(Error::Conflict(format!(
                    "transaction {}: key {} in a range it read in column family {} was written at sequence \
                     {sequence}, after the transaction's snapshot {snapshot}",
                    validation.transaction,
                    super::describe_key(&key),
                    range.column_family,
                )));
            }
        }
        Ok(())
    }

    fn validate_against_guards(
        &self,
        validation: &Validation,
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        for (column_family, key) in &validation.written {
            self.check_guards(validation, *column_family, key, order_of)?;
        }
        Ok(())
    }

    /// Fails with [`Error::Conflict`] when a recorded write to `key` lies above `snapshot`.
    fn check_unwritten_since(
        &self,
        transaction: u64,
        column_family: u32,
        key: &[u8],
        snapshot: u64,
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        match self.write_after(column_family, key, snapshot, order_of) {
            Some(sequence) => Err(written_after_snapshot(transaction, column_family, key, sequence, snapshot)),
            None => Ok(()),
        }
    }

    /// Fails when a prepared transaction's guard covers `key` of `column_family`.
    fn check_guards(
        &self,
        validation: &Validation,
        column_family: u32,
        key: &[u8],
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        let transaction = validation.transaction;
        for (number, guard) in &self.guards {
            if validation.preparing == Some(*number) {
                continue;
            }
            let in_range = || {
                guard.ranges.iter().any(|range| {
                    range.column_family == column_family
                        && order_of(column_family).is_some_and(|order| range.contains(key, &order))
                })
            };
            if guard.keys.contains(&(column_family, key.to_vec())) || in_range() {
                return Err(Error::Conflict(format!(
                    "transaction {transaction}: key {} of column family {column_family} is protected by prepared \
                     transaction {} until it commits or rolls back",
                    super::describe_key(key),
                    super::describe_key(&guard.xid),
                )));
            }
        }
        Ok(())
    }

    /// Checks one key a spilled transaction writes, as `validate` checks `validation.written`
    /// (the spilled commit streams its keys instead of listing them; `validate` has checked the
    /// rest of `validation` already, the trimmed history included).
    pub(crate) fn validate_written_key(
        &self,
        validation: &Validation,
        column_family: u32,
        key: &[u8],
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Result<()> {
        if validation.commits_prepared.is_some() {
            // Checked at prepare, and protected by its guard since.
            return Ok(());
        }
        if let Some(snapshot) = validation.snapshot {
            if snapshot < self.trimmed_through {
                return Err(Error::Conflict(format!(
                    "transaction {} read at sequence {snapshot}, older than the commit history kept for validation \
                     (trimmed through {})",
                    validation.transaction, self.trimmed_through
                )));
            }
            self.check_unwritten_since(validation.transaction, column_family, key, snapshot, order_of)?;
        }
        if !self.guards.is_empty() {
            self.check_guards(validation, column_family, key, order_of)?;
        }
        Ok(())
    }

    /// A commit at `sequence` whose keys are not listed (a spilled transaction's), given as one
    /// span per column family, `(column family, smallest key, largest key)`: a key inside a span
    /// counts as written at `sequence` for every transaction with an older snapshot.
    pub(crate) fn committed_unlisted(&mut self, sequence: u64, spans: Vec<(u32, Vec<u8>, Vec<u8>)>) {
        if !self.recording() {
            self.skipped_through(sequence);
            return;
        }
        debug_assert!(self.spans.back().is_none_or(|span| span.sequence <= sequence), "spans come in commit order");
        for (column_family, low, high) in spans {
            let span = WrittenSpan { sequence, column_family, low, high };
            self.memory_bytes += span.memory_bytes();
            self.spans.push_back(span);
        }
    }

    /// Protects what prepared transaction `number` wrote and read (see `Validation`).
    pub(crate) fn add_guard(&mut self, number: u64, xid: &[u8], keys: Vec<(u32, Vec<u8>)>, ranges: Vec<KeyRange>) {
        self.guards.insert(number, Guard { xid: xid.to_vec(), keys: keys.into_iter().collect(), ranges });
    }

    /// Lifts prepared transaction `number`'s guard (it committed or rolled back).
    pub(crate) fn remove_guard(&mut self, number: u64) {
        self.guards.remove(&number);
    }

    /// The sequence of a recorded write to `key` above `snapshot`, if there is one: a listed
    /// key, or a span that holds it (under the column family's order, from `order_of`).
    pub(crate) fn write_after(
        &self,
        column_family: u32,
        key: &[u8],
        snapshot: u64,
        order_of: &dyn Fn(u32) -> Option<KeyComparator>,
    ) -> Option<u64> {
        let listed = self.points.get(&fingerprint(column_family, key)).copied().filter(|&sequence| sequence > snapshot);
        if listed.is_some() || self.spans.is_empty() {
            return listed;
        }
        let order = order_of(column_family)?;
        self.spans
            .iter()
            .rev()
            .take_while(|span| span.sequence > snapshot)
            .find(|span| {
                span.column_family == column_family
                    && order.compare_user_keys(key, &span.low).is_ge()
                    && order.compare_user_keys(key, &span.high).is_le()
            })
            .map(|span| span.sequence)
    }

    /// A recorded write into `range` above `snapshot`, if there is one: from the ordered index
    /// when it holds every write above `snapshot`, else by a scan of the key log.
    fn write_in_range(&self, range: &KeyRange, order: &KeyComparator, snapshot: u64) -> Option<(Vec<u8>, u64)> {
        let in_span =
            self.spans.iter().rev().take_while(|span| span.sequence > snapshot).find(|span| {
                span.column_family == range.column_family && range.intersects(&span.low, &span.high, order)
            });
        if let Some(span) = in_span {
            return Some((span.low.clone(), span.sequence));
        }
        if snapshot < self.unordered_through {
            let first_above = self.order.partition_point(|recorded| recorded.sequence <= snapshot);
            return self
                .key_log
                .keys(self.order.iter())
                .skip(first_above)
                .find(|(recorded, key)| recorded.column_family == range.column_family && range.contains(key, order))
                .map(|(recorded, key)| (key.to_vec(), recorded.sequence));
        }
        let family = self.families.get(&range.column_family)?;
        let found = |(key, &sequence): (&Vec<u8>, &u64)| (sequence > snapshot).then(|| (key.clone(), sequence));
        if order.is_bytewise() {
            let bounds = (range.start.as_ref().map(Vec::as_slice), range.end.as_ref().map(Vec::as_slice));
            // BTreeMap::range panics on inverted bounds and on equal bounds unless both are
            // included; such ranges are empty.
            match bounds {
                (Bound::Included(start), Bound::Included(end)) if start > end => return None,
                (Bound::Included(start) | Bound::Excluded(start), Bound::Included(end) | Bound::Excluded(end))
                    if start >= end && !matches!(bounds, (Bound::Included(_), Bound::Included(_))) =>
                {
                    return None
                }
                _ => {}
            }
            family.keys.range::<[u8], _>(bounds).find_map(found)
        } else {
            family.keys.iter().filter(|(key, _)| range.contains(key, order)).find_map(found)
        }
    }

    /// Drops entries no open or future transaction can fail on, then, past `limit_bytes`, the
    /// oldest entries (remembering how far in `trimmed_through`).
    pub(crate) fn prune(&mut self, visible_sequence: u64) {
        let needed_above =
            self.open_snapshots.keys().next().map_or(visible_sequence, |&oldest| oldest.min(visible_sequence));
        while self.oldest_sequence().is_some_and(|sequence| sequence <= needed_above) {
            self.pop_oldest();
        }
    }

    /// Drops the oldest entries until the history holds at most `limit_bytes`.
    pub(crate) fn enforce_limit(&mut self, limit_bytes: usize) {
        while self.memory_bytes > limit_bytes {
            let Some(sequence) = self.pop_oldest() else { break };
            self.trimmed_through = self.trimmed_through.max(sequence);
        }
    }

    /// The sequence of the oldest listed key or span.
    fn oldest_sequence(&self) -> Option<u64> {
        let key = self.order.front().map(|recorded| recorded.sequence);
        let span = self.spans.front().map(|span| span.sequence);
        match (key, span) {
            (Some(key), Some(span)) => Some(key.min(span)),
            (key, span) => key.or(span),
        }
    }

    /// Drops the oldest listed key or span; returns its sequence.
    fn pop_oldest(&mut self) -> Option<u64> {
        let span_first = match (self.order.front(), self.spans.front()) {
            (Some(recorded), Some(span)) => span.sequence < recorded.sequence,
            (None, Some(_)) => true,
            _ => false,
        };
        if span_first {
            let span = self.spans.pop_front()?;
            self.memory_bytes -= span.memory_bytes();
            return Some(span.sequence);
        }
        let recorded = self.order.pop_front()?;
        self.memory_bytes -= recorded.memory_bytes();
        let sequence = recorded.sequence;
        // A newer write of the key keeps its entries.
        if self.points.get(&recorded.fingerprint) == Some(&sequence) {
            self.points.remove(&recorded.fingerprint);
        }
        let key = self.key_log.pop_front(recorded.key_length_bytes as usize);
        if recorded.ordered {
            if let Some(family) = self.families.get_mut(&recorded.column_family) {
                if family.keys.get(key) == Some(&sequence) {
                    family.keys.remove(key);
                    if family.keys.is_empty() {
                        self.families.remove(&recorded.column_family);
                    }
                }
            }
        }
        if self.order.is_empty() {
            self.key_log = KeyLog::default();
        }
        Some(sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::{BytewiseComparator, Comparator, ReverseBytewiseComparator};
    use std::sync::Arc;

    fn batch(keys: &[&str]) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for key in keys {
            batch.put(key.as_bytes(), b"v");
        }
        batch
    }

    fn bytewise(_: u32) -> Option<KeyComparator> {
        Some(KeyComparator::new(&(Arc::new(BytewiseComparator) as Arc<dyn Comparator>)))
    }

    fn range(start: Bound<&str>, end: Bound<&str>) -> KeyRange {
        let owned = |bound: Bound<&str>| bound.map(|key| key.as_bytes().to_vec());
        KeyRange { column_family: 0, start: owned(start), end: owned(end) }
    }

    #[test]
    fn keys_and_ranges_conflict_only_above_the_snapshot() {
        let history = CommitHistory::default();
        history.begin_tracking(true);
        history.start_tracking(|| ((), 10));
        let mut state = history.lock();
        state.record(&batch(&["b", "d"]), 11);
        let check = |keys: &[&str], ranges: Vec<KeyRange>, snapshot: u64| {
            let validation = Validation {
                snapshot: Some(snapshot),
                transaction: 1,
                written: keys.iter().map(|key| (0, key.as_bytes().to_vec())).collect(),
                ranges,
                ..Validation::default()
            };
            state.validate(&validation, &bytewise).is_ok()
        };
        assert!(!check(&["b"], vec![], 10));
        assert!(check(&["b"], vec![], 11), "a write the snapshot saw is no conflict");
        assert!(check(&["a", "c"], vec![], 10));
        assert!(!check(&[], vec![range(Bound::Included("c"), Bound::Excluded("e"))], 10));
        assert!(check(&[], vec![range(Bound::Excluded("b"), Bound::Excluded("d"))], 10));
        assert!(!check(&[], vec![range(Bound::Excluded("b"), Bound::Included("d"))], 10));
        assert!(!check(&[], vec![range(Bound::Unbounded, Bound::Unbounded)], 10));
        assert!(check(&[], vec![range(Bound::Included("e"), Bound::Unbounded)], 10));
    }

    #[test]
    fn ranges_follow_the_column_family_order() {
        let history = CommitHistory::default();
        history.begin_tracking(true);
        history.start_tracking(|| ((), 10));
        let mut state = history.lock();
        state.record(&batch(&["b"]), 11);
        let reverse = |_: u32| Some(KeyComparator::new(&(Arc::new(ReverseBytewiseComparator) as Arc<dyn Comparator>)));
        // In reverse order "c" comes before "b", which comes before "a".
        let validation = Validation {
            snapshot: Some(10),
            transaction: 1,
            ranges: vec![range(Bound::Included("c"), Bound::Included("a"))],
            ..Validation::default()
        };
        assert!(state.validate(&validation, &reverse).is_err());
        assert!(state.validate(&validation, &bytewise).is_ok(), "empty in bytewise order");
    }

    #[test]
    fn an_unlisted_commit_conflicts_inside_its_span_only_and_is_pruned_in_order() {
        let history = CommitHistory::default();
        history.begin_tracking(true);
        history.start_tracking(|| ((), 10));
        {
            let mut state = history.lock();
            state.record(&batch(&["a"]), 11);
            state.committed_unlisted(12, vec![(0, b"d".to_vec(), b"g".to_vec()), (3, b"a".to_vec(), b"b".to_vec())]);
            state.record(&batch(&["z"]), 13);
            assert_eq!(state.write_after(0, b"d", 10, &bytewise), Some(12));
            assert_eq!(state.write_after(0, b"e", 10, &bytewise), Some(12), "inside the span, never written");
            assert_eq!(state.write_after(0, b"g", 10, &bytewise), Some(12));
            assert_eq!(state.write_after(0, b"h", 10, &bytewise), None);
            assert_eq!(state.write_after(3, b"e", 10, &bytewise), None, "another column family's span");
            assert_eq!(state.write_after(0, b"e", 12, &bytewise), None, "a snapshot at the commit sees it");
            let scan = |start: Bound<&str>, end: Bound<&str>| Validation {
                snapshot: Some(10),
                transaction: 2,
                ranges: vec![range(start, end)],
                ..Validation::default()
            };
            let conflicts = |validation: Validation| state.validate(&validation, &bytewise).is_err();
            assert!(conflicts(scan(Bound::Included("b"), Bound::Excluded("e"))));
            assert!(conflicts(scan(Bound::Excluded("g"), Bound::Unbounded)), "z at 13");
            assert!(!conflicts(scan(Bound::Excluded("a"), Bound::Excluded("d"))));
            assert!(conflicts(scan(Bound::Included("g"), Bound::Included("h"))));
            // Pruning and the memory cap drop listed keys and spans oldest first.
            let limit_bytes = state.memory_bytes - 1;
            state.enforce_limit(limit_bytes);
            assert_eq!((state.order.len(), state.spans.len(), state.trimmed_through), (1, 2, 11));
            let limit_bytes = state.memory_bytes - 1;
            state.enforce_limit(limit_bytes);
            assert_eq!((state.order.len(), state.spans.len(), state.trimmed_through), (1, 1, 12));
            let limit_bytes = state.memory_bytes - 1;
            state.enforce_limit(limit_bytes);
            assert_eq!((state.order.len(), state.spans.len(), state.trimmed_through), (1, 0, 12));
        }
        history.tracking_ended(10, true, 13);
        assert_eq!(history.memory_bytes(), 0);
    }

    #[test]
    fn a_range_intersects_a_span_exactly_when_it_holds_a_key_of_it() {
        let order = bytewise(0).expect("an order");
        let cases = [
            (Bound::Included("a"), Bound::Included("c"), true),
            (Bound::Included("a"), Bound::Excluded("c"), false),
            (Bound::Excluded("e"), Bound::Unbounded, false),
            (Bound::Included("e"), Bound::Unbounded, true),
            (Bound::Unbounded, Bound::Unbounded, true),
            (Bound::Included("d"), Bound::Included("d"), true),
            (Bound::Excluded("c"), Bound::Excluded("e"), true),
        ];
        for (start, end, expected) in cases {
            assert_eq!(range(start, end).intersects(b"c", b"e", &order), expected, "{start:?} {end:?}");
        }
    }

    #[test]
    fn pruning_keeps_what_open_snapshots_need_and_trimming_fails_old_ones() {
        let history = CommitHistory::default();
        history.begin_tracking(false);
        history.start_tracking(|| ((), 10));
        {
            let mut state = history.lock();
            state.record(&batch(&["a"]), 11);
            state.record(&batch(&["b"]), 12);
            state.prune(12);
            assert_eq!(state.order.len(), 2, "the snapshot at 10 needs both");
        }
        history.begin_tracking(false);
        history.start_tracking(|| ((), 11));
        history.tracking_ended(10, false, 12);
        {
            let state = history.lock();
            assert_eq!(state.order.len(), 1, "only the write above 11 is still needed");
            assert_eq!(state.write_after(0, b"b", 11, &bytewise), Some(12));
        }
        {
            let mut state = history.lock();
            state.enforce_limit(0);
            let validation = Validation { snapshot: Some(11), transaction: 2, ..Validation::default() };
            assert!(matches!(state.validate(&validation, &bytewise), Err(Error::Conflict(_))));
        }
        history.tracking_ended(11, false, 12);
        assert_eq!(history.memory_bytes(), 0);
    }

    #[test]
    fn keys_go_into_the_ordered_index_only_while_a_serializable_transaction_needs_it() {
        let history = CommitHistory::default();
        assert_eq!(history.begin_tracking(false), 0);
        history.start_tracking(|| ((), 10));
        {
            let mut state = history.lock();
            state.record(&batch(&["a", "b"]), 11);
            assert!(state.families.is_empty(), "no SERIALIZABLE transaction: point index only");
            assert_eq!(state.write_after(0, b"a", 10, &bytewise), Some(11), "found by fingerprint");
            assert_eq!(state.write_after(0, b"c", 10, &bytewise), None);
            assert_eq!(state.write_after(1, b"a", 10, &bytewise), None, "the column family is part of the key");
        }
        // A SERIALIZABLE transaction must wait until the writes missing from the ordered index
        // are visible, so that its snapshot covers them.
        assert_eq!(history.begin_tracking(true), 12, "the batch's last sequence");
        history.start_tracking(|| ((), 12));
        {
            let mut state = history.lock();
            state.record(&batch(&["d"]), 13);
            let scan = Validation {
                snapshot: Some(12),
                transaction: 2,
                ranges: vec![range(Bound::Included("c"), Bound::Unbounded)],
                ..Validation::default()
            };
            assert!(state.validate(&scan, &bytewise).is_err(), "d at 13 is in the ordered index");
            assert_eq!(state.families.len(), 1);
        }
        history.tracking_ended(12, true, 13);
        history.tracking_ended(10, false, 13);
        assert_eq!(history.memory_bytes(), 0);
        let state = history.lock();
        assert!(state.points.is_empty() && state.families.is_empty() && state.order.is_empty());
        assert_eq!(state.range_trackers, 0);
    }

    #[test]
    fn ranges_older_than_the_ordered_index_are_checked_by_a_scan_of_the_key_log() {
        // A REPEATABLE READ transaction whose keys read for update were coarsened into ranges
        // has ranges but no place in the ordered index.
        let history = CommitHistory::default();
        history.begin_tracking(false);
        history.start_tracking(|| ((), 10));
        let mut state = history.lock();
        // Enough keys, pruned as they go, for the key log to compact several times.
        let keys: Vec<String> = (0..20_000).map(|number| format!("key-{number:08}")).collect();
        for (index, key) in keys.iter().enumerate() {
            state.record(&batch(&[key]), 11 + index as u64);
        }
        let scan = |snapshot: u64, start: &str, end: &str| Validation {
            snapshot: Some(snapshot),
            transaction: 2,
            ranges: vec![range(Bound::Included(start), Bound::Excluded(end))],
            ..Validation::default()
        };
        assert!(state.families.is_empty());
        assert!(state.validate(&scan(10, "key-00000005", "key-00000006"), &bytewise).is_err());
        assert!(state.validate(&scan(10, "key-", "key-00000000"), &bytewise).is_ok());
        // key-00000005 was written at 16: a snapshot at 16 sees it, one at 15 does not.
        assert!(state.validate(&scan(16, "key-00000005", "key-00000006"), &bytewise).is_ok());
        assert!(state.validate(&scan(15, "key-00000005", "key-00000006"), &bytewise).is_err());
        // Drop the oldest 15,000 keys (as if the snapshot at 10 had moved on) and look again:
        // the log's remaining keys must still be read at the right offsets.
        while state.order.front().is_some_and(|recorded| recorded.sequence < 11 + 15_000) {
            state.pop_oldest();
        }
        assert!(state.key_log.bytes.len() < keys.len() * 12, "the log dropped pruned keys");
        let last = 11 + 19_999;
        assert_eq!(
            state.write_in_range(
                &range(Bound::Included("key-00019999"), Bound::Unbounded),
                &bytewise(0).expect("order"),
                last - 1
            ),
            Some((b"key-00019999".to_vec(), last))
        );
        assert_eq!(state.write_after(0, b"key-00015000", 10, &bytewise), Some(11 + 15_000));
        assert_eq!(state.write_after(0, b"key-00014999", 10, &bytewise), None, "pruned");
        drop(state);
        history.tracking_ended(10, false, last);
        assert_eq!(history.memory_bytes(), 0);
        assert!(history.lock().key_log.bytes.is_empty());
    }

    #[test]
    fn guards_refuse_writes_to_what_a_prepared_transaction_touched() {
        let history = CommitHistory::default();
        let mut state = history.lock();
        state.add_guard(
            7,
            b"xid-7",
            vec![(0, b"read".to_vec())],
            vec![range(Bound::Included("m"), Bound::Excluded("p"))],
        );
        let writing = |key: &str| Validation {
            transaction: 1,
            written: vec![(0, key.as_bytes().to_vec())],
            ..Validation::default()
        };
        assert!(matches!(state.validate(&writing("read"), &bytewise), Err(Error::Conflict(_))));
        assert!(matches!(state.validate(&writing("n"), &bytewise), Err(Error::Conflict(_))));
        assert!(state.validate(&writing("q"), &bytewise).is_ok());
        // Reading a guarded key is no conflict: only writes are refused.
        let reading = Validation { transaction: 1, read: vec![(0, b"read".to_vec())], ..Validation::default() };
        assert!(state.validate(&reading, &bytewise).is_ok());
        // The prepared transaction's own commit is not checked.
        let own = Validation { commits_prepared: Some(7), ..writing("read") };
        assert!(state.validate(&own, &bytewise).is_ok());
        state.remove_guard(7);
        assert!(state.validate(&writing("read"), &bytewise).is_ok());
    }
}
