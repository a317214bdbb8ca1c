//! Iterators over internal keys, and the user-facing iterator built on them.
//!
//! Every source of entries (memtable, SSTable, a level of SSTables) exposes an
//! [`InternalIterator`]: a bidirectional cursor over internal keys in internal-key order
//! (`crate::key::compare_internal_keys`). A [`merge::MergingIterator`] combines many sources into
//! one ordered stream, and [`db_iter::UserIterator`] turns that stream into user keys at one
//! snapshot, hiding tombstones and shadowed versions and honouring bounds.
//!
//! Concurrency contract: an iterator is used by one thread at a time; it keeps the memtables and
//! table files it reads alive by holding `Arc`s, so flushes and compactions may run meanwhile.

pub(crate) mod db_iter;
pub(crate) mod level;
pub(crate) mod merge;
pub(crate) mod merge_fold;
pub(crate) mod single_delete;

use crate::error::Result;

/// A bidirectional cursor over internal keys.
///
/// Contract: `key()` and `value()` may only be called while `valid()` is true. When an I/O or
/// corruption error occurs the iterator becomes invalid and `status()` returns the error; once an
/// error is reported it stays reported.
pub(crate) trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The internal key of the current entry.
    fn key(&self) -> &[u8];
    /// The value of the current entry (empty for tombstones).
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
    /// Moves to the first entry whose internal key is `>= target`, where `target` is not before
    /// the current entry and the last movement went forward (a seek counts). The result is that of
    /// `seek`; sources may get there faster from where they stand, which is what a scan
    /// stepping over many versions of one key needs (a memtable searches from its last search
    /// path instead of from its head). The default seeks.
    fn seek_forward(&mut self, target: &[u8]) {
        self.seek(target);
    }
    /// `seek_forward` to pass the older versions of the entry just read (`target` sorts after
    /// every version of its user key), returning how many of the sources it moved hold
    /// versions that a compaction of level 0 would have merged away: the work that read
    /// charges count against level 0 (`db::read_charges`). The default counts none.
    fn seek_forward_past_versions(&mut self, target: &[u8]) -> u64 {
        self.seek_forward(target);
        0
    }
    /// How many keys' older versions this source passed inside the active memtable since the
    /// last call (a memtable iterator's `seek_forward` over a key with several versions; a
    /// merge passes on its active memtable child's count), and starts counting again: the
    /// work that read charges count towards a flush of the memtable (`db::read_charges`). The
    /// default counts none.
    fn take_skipped_versions(&mut self) -> u64 {
        0
    }
    /// Positions like `seek` (like `seek_forward` when `from_here`, under its contract) for a
    /// caller that will often read only the entry it lands on, as a user's seek does: a
    /// merging iterator may then leave sources that hold no entry of the target's user key
    /// unpositioned until the stream moves (`MergingIterator::seek_for_entry`, I49). The
    /// result is that of `seek`. The default positions the source as asked.
    fn seek_for_entry(&mut self, target: &[u8], from_here: bool) {
        if from_here {
            self.seek_forward(target);
        } else {
            self.seek(target);
        }
    }
    /// False when the source certainly holds no entry of `user_key` (its bloom filter or its
    /// key range says so), true when it may. It never moves the iterator. A source that grows
    /// while it is read (the active memtable) answers for what it holds now, and gains only
    /// entries newer than every reader's sequence (I48), which no seek of a reader lands on
    /// before the entries it already holds. The default cannot tell.
    fn may_contain_user_key(&self, _user_key: &[u8]) -> bool {
        true
    }
    /// True when `seek_forward(target)` from the current position stays within data the
    /// source already holds (a table's current block), so that it costs less than asking a
    /// filter about the target's key; a merge then moves the source rather than asking. Only
    /// under `seek_forward`'s contract. The default says no.
    fn reaches_cheaply(&self, _target: &[u8]) -> bool {
        false
    }
    /// A hint after a covered entry while moving forward (range tombstones, I38): sources
    /// whose every entry is older than `older_than` may move straight to their first entry at
    /// or after the internal key `target`, because every entry they would pass is covered by a
    /// tombstone of sequence `older_than`. Iterators that cannot tell the age of their entries
    /// ignore it (the default); the stream stays correct either way, only slower.
    fn skip_older_forward(&mut self, _older_than: u64, _target: &[u8]) {}
    /// The same hint while moving backward: sources whose every entry is older than
    /// `older_than` may move straight to their last entry before the internal key `target`.
    fn skip_older_backward(&mut self, _older_than: u64, _target: &[u8]) {}
}

/// An iterator over an in-memory sorted vector of entries; used by tests across the crate and
/// as the iterator of small immutable collections.
/// An iterator over entries held in a vector, sorted by internal key in `order`: the
/// transaction's in-memory writes (`txn::own_cursor`) and tests.
#[derive(Debug)]
pub(crate) struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    position: Option<usize>,
    order: crate::comparator::KeyComparator,
}

impl VecIterator {
    /// Creates an iterator in bytewise order; `entries` must already be sorted by internal key.
    #[cfg(test)]
    pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIterator {
        VecIterator::with_order(entries, crate::comparator::KeyComparator::Bytewise)
    }

    /// Creates an iterator over `entries`, sorted by internal key in `order`.
    pub(crate) fn with_order(entries: Vec<(Vec<u8>, Vec<u8>)>, order: crate::comparator::KeyComparator) -> VecIterator {
        debug_assert!(entries.windows(2).all(|w| order.compare_internal_keys(&w[0].0, &w[1].0).is_lt()));
        VecIterator { entries, position: None, order }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.position.is_some()
    }
    fn seek_to_first(&mut self) {
        self.position = if self.entries.is_empty() { None } else { Some(0) };
    }
    fn seek_to_last(&mut self) {
        self.position = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let order = &self.order;
        let index = self.entries.partition_point(|(key, _)| order.compare_internal_keys(key, target).is_lt());
        self.position = (index < self.entries.len()).then_some(index);
    }
    fn next(&mut self) {
        self.position = self.position.and_then(|p| (p + 1 < self.entries.len()).then_some(p + 1));
    }
    fn prev(&mut self) {
        self.position = self.position.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.position.map_or(&[][..], |p| &self.entries[p].0)
    }
    fn value(&self) -> &[u8] {
        self.position.map_or(&[][..], |p| &self.entries[p].1)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}
