//! The memtable: the in-memory, sorted buffer that receives every write before it is flushed to
//! an SSTable.
//!
//! A [`MemTable`] is a lock-free-insert skiplist ([`skiplist::SkipList`]) ordered by internal key
//! under its column family's comparator ([`KeyComparator`]) whose entries live in a per-memtable arena
//! ([`arena::Arena`]): each entry costs one bump allocation holding its tower, its internal key
//! and its value contiguously, and all of it is freed at once when the last `Arc<MemTable>` is
//! dropped.
//!
//! Concurrency contract: a memtable is shared as `Arc<MemTable>`. Any number of threads may call
//! `insert` concurrently with each other and with `get` and iterators; no operation takes a lock
//! except the rare arena chunk refill. Readers never block and never observe a partially written
//! entry. An iterator holds an `Arc` to its memtable, so it outlives any other handle; entries
//! inserted after an iterator was created may or may not be seen by it, depending on where it is
//! positioned when they are linked, but everything it returns is a complete entry in order.
//!
//! Invariants: entries are never removed or modified; each internal key appears at most once
//! (the engine never inserts the same (user key, sequence) twice; debug builds check);
//! `len` counts inserted entries and `largest_sequence` is the largest sequence inserted, both
//! updated right after the entry is linked (`insert`) or once after a whole batch is linked
//! (`insert_uncounted` followed by `count_inserted`, the write path's way). Every inserted user
//! key is in the key filter before its entry is linked, so the filter never hides an entry.
//!
//! Range deletes (`range_tombstone.rs`) are rare, so they are not skiplist entries: each
//! memtable keeps them in a side list behind a reader-writer lock, with their fragmented form
//! rebuilt on every insert. Reads check an atomic flag first and touch the lock only when the
//! memtable holds a range tombstone.

mod arena;
mod filter;
mod skiplist;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::comparator::KeyComparator;
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{self, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::range_tombstone::{FragmentedTombstones, RangeTombstone};
pub(crate) use arena::ChunkPool;
use filter::KeyFilter;
use skiplist::{Position, SkipList};

/// The result of a point lookup that found an entry for the user key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MemTableLookup {
    /// The newest visible entry is a put with this value.
    Value(Vec<u8>),
    /// The newest visible entry is a tombstone.
    Deleted,
    /// The newest visible entry is a put with this value until `expires_at_us` (I42).
    Expiring { expires_at_us: u64, value: Vec<u8> },
    /// The newest visible entry is a merge operand: the value takes older entries too (I43).
    Merge,
}

/// Counters every insert updates, kept on their own cache line so their write traffic does not
/// evict the read-mostly skiplist fields from other cores' caches.
#[repr(align(128))]
#[derive(Debug, Default)]
struct InsertCounters {
    /// Number of entries inserted.
    entry_count: AtomicUsize,
    /// Largest sequence number inserted (0 when empty).
    largest_sequence: AtomicU64,
}

/// A concurrent sorted map from internal key to value; see the module documentation.
#[derive(Debug)]
pub(crate) struct MemTable {
    list: SkipList,
    /// A bloom filter over the user keys inserted, so that point lookups of keys the memtable
    /// does not hold (most of them, once data outgrows one memtable) skip the skiplist search.
    filter: KeyFilter,
    counters: InsertCounters,
    /// Range deletes written into this memtable (rare: kept beside the skiplist, not in it).
    range_tombstones: RangeTombstoneList,
    /// Whether an entry with an expiry was inserted: iterators read the clock only then (I42).
    has_expiring_entries: std::sync::atomic::AtomicBool,
}

/// A memtable's range tombstones and their fragmented form. An insert only appends (the write
/// leader does it, so it must stay cheap) and forgets the fragments; the first read after it
/// rebuilds them, and later reads share them with one lock and an `Arc` clone. Reads skip even
/// that while `present` is false.
#[derive(Debug)]
struct RangeTombstoneList {
    present: std::sync::atomic::AtomicBool,
    state: parking_lot::RwLock<(Vec<RangeTombstone>, Option<Arc<FragmentedTombstones>>)>,
    memory_bytes: AtomicUsize,
}

impl MemTable {
    /// Creates an empty memtable ordered by `comparator`, expected to grow to about
    /// `capacity_hint_bytes` (the flush threshold); the hint only sizes arena chunks and is not
    /// a limit.
    pub(crate) fn new(capacity_hint_bytes: usize, comparator: KeyComparator) -> MemTable {
        MemTable::with_chunk_pool(capacity_hint_bytes, comparator, None)
    }

    /// [`MemTable::new`], its arena taking chunks from and giving them back to the database's
    /// `pool` (see [`ChunkPool`]).
    pub(crate) fn with_chunk_pool(
        capacity_hint_bytes: usize,
        comparator: KeyComparator,
        pool: Option<std::sync::Arc<ChunkPool>>,
    ) -> MemTable {
        MemTable {
            list: SkipList::with_chunk_pool(capacity_hint_bytes, comparator, pool),
            filter: KeyFilter::new(capacity_hint_bytes),
            counters: InsertCounters::default(),
            range_tombstones: RangeTombstoneList {
                present: std::sync::atomic::AtomicBool::new(false),
                state: parking_lot::RwLock::new((Vec::new(), None)),
                memory_bytes: AtomicUsize::new(0),
            },
            has_expiring_entries: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Adds a range tombstone deleting `[start, end)` at `sequence` (counted like an entry
    /// through [`MemTable::count_inserted`] by the caller). Safe to call from many threads;
    /// readers at or above `sequence` see it once the write is visible.
    pub(crate) fn insert_range_tombstone(&self, start: &[u8], end: &[u8], sequence: u64) {
        if self.comparator().compare_user_keys(start, end).is_ge() {
            // An empty range deletes nothing; keeping it would only keep it in the version.
            return;
        }
        let tombstone = RangeTombstone { start: start.to_vec(), end: end.to_vec(), sequence };
        let mut state = self.range_tombstones.state.write();
        self.range_tombstones.memory_bytes.fetch_add(tombstone.memory_bytes(), Ordering::Relaxed);
        state.0.push(tombstone);
        state.1 = None;
        self.range_tombstones.present.store(true, Ordering::Release);
    }

    /// The memtable's range tombstones, in insertion order (empty when it has none).
    pub(crate) fn range_tombstones(&self) -> Vec<RangeTombstone> {
        if !self.range_tombstones.present.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.range_tombstones.state.read().0.clone()
    }

    /// The fragmented form of the memtable's range tombstones, or `None` when it has none.
    pub(crate) fn fragmented_range_tombstones(&self) -> Option<Arc<FragmentedTombstones>> {
        if !self.range_tombstones.present.load(Ordering::Acquire) {
            return None;
        }
        if let Some(fragmented) = &self.range_tombstones.state.read().1 {
            return Some(Arc::clone(fragmented));
        }
        let mut state = self.range_tombstones.state.write();
        let (list, fragmented) = &mut *state;
        let fragmented = fragmented
            .get_or_insert_with(|| Arc::new(FragmentedTombstones::new(list.iter(), self.comparator().clone())));
        Some(Arc::clone(fragmented))
    }

    /// Adds an entry. Safe to call from many threads at once. `value` should be empty for
    /// tombstones. The engine never inserts the same (`user_key`, `sequence`) twice.
    pub(crate) fn insert(&self, user_key: &[u8], sequence: u64, kind: ValueKind, value: &[u8]) {
        self.insert_uncounted(user_key, sequence, kind, value);
        self.count_inserted(1, sequence);
    }

    /// Like [`MemTable::insert`] but leaves the entry count and largest sequence to a later
    /// [`MemTable::count_inserted`], so that a batch updates the shared counters once rather
    /// than once per entry (they sit on one cache line that every inserting core would fight
    /// over).
    pub(crate) fn insert_uncounted(&self, user_key: &[u8], sequence: u64, kind: ValueKind, value: &[u8]) {
        if kind == ValueKind::PutWithExpiry && !self.has_expiring_entries.load(Ordering::Relaxed) {
            // Set before the entry is visible: readers that can see it see the flag (the
            // visible sequence is published with release ordering after the insert).
            self.has_expiring_entries.store(true, Ordering::Release);
        }
        self.filter.insert(user_key);
        self.list.insert(user_key, key::pack_trailer(sequence, kind), value);
    }

    /// False when the memtable surely holds no entry of `user_key` (its bloom filter).
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.may_contain(user_key)
    }

    /// Whether an entry with an expiry was inserted.
    pub(crate) fn has_expiring_entries(&self) -> bool {
        self.has_expiring_entries.load(Ordering::Acquire)
    }

    /// The order of the memtable's user keys.
    pub(crate) fn comparator(&self) -> &KeyComparator {
        self.list.comparator()
    }

    /// Accounts for `entries` inserted with [`MemTable::insert_uncounted`], the largest of
    /// sequence `largest_sequence`.
    pub(crate) fn count_inserted(&self, entries: usize, largest_sequence: u64) {
        self.counters.entry_count.fetch_add(entries, Ordering::Relaxed);
        self.counters.largest_sequence.fetch_max(largest_sequence, Ordering::Relaxed);
    }

    /// The newest entry of `user_key` whose sequence is at most `sequence`, or `None` when the
    /// memtable has no such entry (the caller then looks in older sources).
    pub(crate) fn get(&self, user_key: &[u8], sequence: u64) -> Option<MemTableLookup> {
        self.get_with_sequence(user_key, sequence).map(|(found, _)| found)
    }

    /// Like [`MemTable::get`], with the sequence number of the entry found.
    pub(crate) fn get_with_sequence(&self, user_key: &[u8], sequence: u64) -> Option<(MemTableLookup, u64)> {
        // The lookup trailer carries the highest kind so that the seek lands on an entry at
        // exactly `sequence` whatever its kind. Sequences above the 56-bit limit mean "see
        // everything".
        if !self.filter.may_contain(user_key) {
            return None;
        }
        let trailer = key::pack_trailer(sequence.min(MAX_SEQUENCE_NUMBER), ValueKind::FOR_SEEK);
        let node = self.list.seek(user_key, trailer)?;
        let found = key::parse_internal_key(node.key())?;
        // Keys that compare equal are byte-identical (the comparator's contract), so a byte
        // comparison tells whether the seek stopped on this user key in every order.
        if found.user_key != user_key {
            return None;
        }
        match found.kind {
            // Memtables are filled from write batches, which hold puts and deletes only; blob
            // references exist in tables alone.
            ValueKind::Put | ValueKind::BlobIndex => {
                Some((MemTableLookup::Value(node.value().to_vec()), found.sequence))
            }
            ValueKind::Delete | ValueKind::SingleDelete => Some((MemTableLookup::Deleted, found.sequence)),
            // Write batches check that an expiring put's value holds its expiry; were it ever
            // short, the entry reads as expired long ago rather than as a wrong value.
            ValueKind::PutWithExpiry => {
                let (expires_at_us, value) = crate::ttl::split_expiring(node.value()).unwrap_or((0, &[]));
                Some((MemTableLookup::Expiring { expires_at_us, value: value.to_vec() }, found.sequence))
            }
            ValueKind::Merge => Some((MemTableLookup::Merge, found.sequence)),
        }
    }

    /// The user keys in `[start, end)` (user keys), tombstones included, each counted once
    /// however many versions it has here: what a SQL optimizer's range estimate needs from a
    /// memtable. A range of more than a few tens of entries is estimated from a walk over a few
    /// tens of nodes of the skiplist's upper levels ([`SkipList::sample_range`]: within a few
    /// tens of percent usually, a few times high in a range of hot keys); a shorter one is
    /// counted along level 0, each key's versions jumped over by their run hint (I44).
    pub(crate) fn user_keys_in_range(self: &Arc<Self>, start: &[u8], end: &[u8]) -> u64 {
        /// Keys counted one by one at most. A range that needs counting held fewer than 8
        /// oldest versions on level 1, so about 32 keys; this only bounds the unlikely.
        const EXACT_COUNT_LIMIT: u64 = 256;
        // An empty or inverted range needs no check of its own: nothing at or after `start`
        // sorts before `end`, so the sample finds no level and the count stops at once.
        let start_key = key::lookup_key(start, MAX_SEQUENCE_NUMBER);
        let end_key = key::lookup_key(end, MAX_SEQUENCE_NUMBER);
        let sample =
            self.list.sample_range(skiplist::split_internal_key(&start_key), skiplist::split_internal_key(&end_key));
        if let Some(estimate) = sample.estimated_user_keys {
            return estimate;
        }
        let mut iterator = self.iter();
        iterator.current = sample.first.map(|node| node.position());
        let mut counted = 0;
        while let Some(node) = iterator.current_node() {
            if counted == EXACT_COUNT_LIMIT
                || self.comparator().compare_user_keys(skiplist::split_internal_key(node.key()).0, end).is_ge()
            {
                break;
            }
            counted += 1;
            iterator.next_user_key();
        }
        counted
    }

    /// An iterator over all entries in internal-key order, keeping this memtable alive.
    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIterator {
        let path = self.list.path_at_head();
        MemTableIterator { memtable: Arc::clone(self), current: None, path, path_usable: false, skipped_runs: 0 }
    }

    /// Bytes of memory the memtable holds: the capacity of its arena chunks, which is what the
    /// process really pays, including the not yet used tail of the current chunk.
    pub(crate) fn approximate_memory_bytes(&self) -> usize {
        self.list.memory_usage_bytes()
            + self.filter.memory_usage_bytes()
            + self.range_tombstones.memory_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries inserted.
    pub(crate) fn len(&self) -> usize {
        self.counters.entry_count.load(Ordering::Relaxed)
    }

    /// True when nothing has been inserted.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest sequence number inserted, or 0 when empty.
    pub(crate) fn largest_sequence(&self) -> u64 {
        self.counters.largest_sequence.load(Ordering::Relaxed)
    }
}

/// A cursor over a memtable's entries; see [`MemTable::iter`]. It starts unpositioned.
#[derive(Debug)]
pub(crate) struct MemTableIterator {
    memtable: Arc<MemTable>,
    /// The current node, or `None` when not positioned on an entry.
    current: Option<Position>,
    /// Where the last seek passed through the list, for `seek_forward`.
    path: skiplist::SearchPath,
    /// True while every node of `path` precedes the current entry: after a seek (or a move to
    /// the first entry) followed by forward steps only. A step backward ends it.
    path_usable: bool,
    /// Keys whose older versions `seek_forward` passed since `take_skipped_versions` was last
    /// called: moves that started on a version of the target's own user key (the newer one was
    /// read, so this one and any after it are older versions held here).
    skipped_runs: u64,
}

impl MemTableIterator {
    /// The current node; the returned borrow ties key and value slices to `&self`.
    fn current_node(&self) -> Option<skiplist::NodeRef<'_>> {
        // SAFETY: every stored position was produced by a `NodeRef` of `self.memtable.list`, and
        // the `Arc` keeps that list alive for as long as `self`.
        self.current.map(|position| unsafe { self.memtable.list.resolve(position) })
    }

    /// Moves to the first entry of the next user key, past every version of the current one
    /// (jumping over a hot key's versions by its run hint, I44). Requires a position.
    pub(crate) fn next_user_key(&mut self) {
        let Some(node) = self.current_node() else {
            return;
        };
        // Keys that compare equal are byte-identical (the comparator's contract).
        let user_key = skiplist::split_internal_key(node.key()).0;
        let mut next = match self.memtable.list.skip_run(node, user_key, 0) {
            Some(found) => found,
            None => node.next(),
        };
        while let Some(candidate) = next {
            if skiplist::split_internal_key(candidate.key()).0 != user_key {
                break;
            }
            next = candidate.next();
        }
        self.current = next.map(|node| node.position());
    }
}

impl InternalIterator for MemTableIterator {
    fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        self.memtable.may_contain(user_key)
    }

    fn reaches_cheaply(&self, _target: &[u8]) -> bool {
        // `seek_forward` steps or searches from the last search path, touching nodes near the
        // current one rather than probing the filter's scattered bits.
        self.path_usable && self.current.is_some()
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.current = self.memtable.list.first().map(|node| node.position());
        self.path = self.memtable.list.path_at_head();
        self.path_usable = true;
    }

    fn seek_to_last(&mut self) {
        self.current = self.memtable.list.last().map(|node| node.position());
        self.path_usable = false;
    }

    fn seek(&mut self, target: &[u8]) {
        let (user_key, trailer) = skiplist::split_internal_key(target);
        self.current = self.memtable.list.seek_recording(user_key, trailer, &mut self.path).map(|node| node.position());
        self.path_usable = true;
    }

    fn seek_forward(&mut self, target: &[u8]) {
        if !self.path_usable {
            self.seek(target);
            return;
        }
        let (user_key, trailer) = skiplist::split_internal_key(target);
        // Starting on a version of the target's user key, this move passes older versions held
        // here (read charges count them towards a flush of the memtable).
        if self.current_node().is_some_and(|node| skiplist::split_internal_key(node.key()).0 == user_key) {
            self.skipped_runs += 1;
        }
        if let Some(node) = self.current_node() {
            // A hot key's versions: jump to where they end. Otherwise the target is usually the
            // next node or the one after (a key's last version or two): step there.
            let found = self
                .memtable
                .list
                .skip_run(node, user_key, trailer)
                .or_else(|| self.memtable.list.step_to(node, user_key, trailer));
            if let Some(found) = found {
                self.current = found.map(|node| node.position());
                return;
            }
        }
        // The path precedes the current entry, which precedes the target (the caller's
        // promise), so a finger search from it is exact.
        self.current = self.memtable.list.seek_from(user_key, trailer, &mut self.path).map(|node| node.position());
    }

    fn next(&mut self) {
        self.current = self.current_node().and_then(|node| node.next()).map(|node| node.position());
    }

    fn take_skipped_versions(&mut self) -> u64 {
        std::mem::take(&mut self.skipped_runs)
    }

    fn prev(&mut self) {
        self.path_usable = false;
        // Links only point forward, so the predecessor is found by a fresh O(log n) search.
        self.current =
            self.current_node().and_then(|node| self.memtable.list.before(node.key())).map(|node| node.position());
    }

    fn key(&self) -> &[u8] {
        self.current_node().map_or(&[][..], |node| node.key())
    }

    fn value(&self) -> &[u8] {
        self.current_node().map_or(&[][..], |node| node.value())
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// Thin public wrappers over the memtable for the criterion benches. Not a supported API.
#[doc(hidden)]
pub mod bench_support {
    use std::sync::Arc;

    use crate::comparator::KeyComparator;
    use crate::iterator::InternalIterator;
    use crate::key::ValueKind;

    /// A memtable handle for benchmarks.
    #[derive(Debug, Clone)]
    pub struct MemTable {
        inner: Arc<super::MemTable>,
    }

    impl MemTable {
        /// Creates an empty bytewise memtable; see the crate-internal `MemTable::new`.
        pub fn new(capacity_hint_bytes: usize) -> MemTable {
            MemTable { inner: Arc::new(super::MemTable::new(capacity_hint_bytes, KeyComparator::Bytewise)) }
        }

        /// Inserts a put entry; callable from many threads at once.
        pub fn put(&self, user_key: &[u8], sequence: u64, value: &[u8]) {
            self.inner.insert(user_key, sequence, ValueKind::Put, value);
        }

        /// Inserts a tombstone.
        pub fn delete(&self, user_key: &[u8], sequence: u64) {
            self.inner.insert(user_key, sequence, ValueKind::Delete, &[]);
        }

        /// The value of the newest put of `user_key` at or below `sequence`, or `None` when the
        /// newest such entry is a tombstone or there is none.
        pub fn get(&self, user_key: &[u8], sequence: u64) -> Option<Vec<u8>> {
            match self.inner.get(user_key, sequence)? {
                super::MemTableLookup::Value(value) | super::MemTableLookup::Expiring { value, .. } => Some(value),
                super::MemTableLookup::Deleted | super::MemTableLookup::Merge => None,
            }
        }

        /// Walks every entry in order and returns how many there were.
        pub fn scan_count(&self) -> usize {
            let mut iterator = self.inner.iter();
            iterator.seek_to_first();
            let mut count = 0;
            while iterator.valid() {
                count += 1;
                iterator.next();
            }
            count
        }

        /// Number of entries.
        pub fn len(&self) -> usize {
            self.inner.len()
        }

        /// True when empty.
        pub fn is_empty(&self) -> bool {
            self.inner.is_empty()
        }

        /// Bytes of memory held.
        pub fn approximate_memory_bytes(&self) -> usize {
            self.inner.approximate_memory_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{compare_internal_keys, make_internal_key, parse_internal_key};
    use rand::rngs::SmallRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    /// Model of the memtable: ordered exactly like internal keys.
    type Model = BTreeMap<(Vec<u8>, Reverse<u64>), Vec<u8>>;

    fn model_internal_key(entry: &(Vec<u8>, Reverse<u64>)) -> Vec<u8> {
        let mut key = entry.0.clone();
        key.extend_from_slice(&entry.1 .0.to_le_bytes());
        key
    }

    fn model_get(model: &Model, user_key: &[u8], sequence: u64) -> Option<MemTableLookup> {
        let start = (user_key.to_vec(), Reverse(key::pack_trailer(sequence, ValueKind::FOR_SEEK)));
        let ((found_user_key, Reverse(trailer)), value) = model.range(start..).next()?;
        if found_user_key.as_slice() != user_key {
            return None;
        }
        Some(if trailer & 0xff == ValueKind::Put as u64 {
            MemTableLookup::Value(value.clone())
        } else {
            MemTableLookup::Deleted
        })
    }

    fn collect_forward(iterator: &mut MemTableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries = Vec::new();
        iterator.seek_to_first();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.next();
        }
        entries
    }

    fn collect_backward(iterator: &mut MemTableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries = Vec::new();
        iterator.seek_to_last();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.prev();
        }
        entries
    }

    /// A value that names its own entry, so readers can detect torn or misattributed data.
    fn self_describing_value(user_key: &[u8], sequence: u64, padding_bytes: usize) -> Vec<u8> {
        let mut value = Vec::with_capacity(user_key.len() + 8 + padding_bytes);
        value.extend_from_slice(&sequence.to_le_bytes());
        value.extend_from_slice(user_key);
        value.extend((0..padding_bytes).map(|index| (sequence as usize + index) as u8));
        value
    }

    fn check_self_describing(internal_key: &[u8], value: &[u8]) {
        let parsed = parse_internal_key(internal_key).expect("well-formed key");
        assert!(value.len() >= 8 + parsed.user_key.len(), "short value");
        let sequence = u64::from_le_bytes(value[..8].try_into().unwrap());
        assert_eq!(sequence, parsed.sequence, "value belongs to another entry");
        let padding_bytes = value.len() - 8 - parsed.user_key.len();
        assert_eq!(value, self_describing_value(parsed.user_key, sequence, padding_bytes).as_slice());
    }

    fn user_key_for(number: u64) -> Vec<u8> {
        format!("key{number:010}").into_bytes()
    }

    #[test]
    fn range_tombstones_are_fragmented_again_after_each_insert() {
        let memtable = MemTable::new(64 << 10, KeyComparator::Bytewise);
        assert!(memtable.fragmented_range_tombstones().is_none());
        memtable.insert_range_tombstone(b"b", b"d", 5);
        memtable.insert_range_tombstone(b"x", b"a", 6); // inverted: deletes nothing, kept nowhere
        let first = memtable.fragmented_range_tombstones().expect("one tombstone");
        assert_eq!(first.covering_sequence(b"c", 10), 5);
        assert_eq!(first.covering_sequence(b"e", 10), 0);
        assert!(Arc::ptr_eq(&first, &memtable.fragmented_range_tombstones().unwrap()), "shared until an insert");
        memtable.insert_range_tombstone(b"c", b"f", 7);
        let second = memtable.fragmented_range_tombstones().unwrap();
        assert_eq!(second.covering_sequence(b"c", 10), 7);
        assert_eq!(second.covering_sequence(b"e", 10), 7);
        assert_eq!(second.covering_sequence(b"e", 6), 0, "a reader below the new tombstone does not see it");
        assert_eq!(memtable.range_tombstones().len(), 2);
        // Thousands of inserts stay cheap: fragments are built once, by the next read.
        for number in 0..5_000u32 {
            let start = format!("k{number:05}");
            let end = format!("k{number:05}~");
            memtable.insert_range_tombstone(start.as_bytes(), end.as_bytes(), 100 + u64::from(number));
        }
        let many = memtable.fragmented_range_tombstones().unwrap();
        assert_eq!(many.covering_sequence(b"k04999", u64::MAX), 5_099);
    }

    /// Random walks (forward searches included) over a memtable holding many versions of a
    /// few keys, as hot rows leave it, against the sorted list of its entries.
    #[test]
    fn random_walks_over_many_versions_match_the_sorted_entries() {
        use crate::iterator::merge::tests::walk_and_compare;
        for seed in 0..30u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let memtable = Arc::new(MemTable::new(64 << 10, KeyComparator::Bytewise));
            let mut expected = Vec::new();
            for sequence in 1..=rng.gen_range(0..600u64) {
                let length = rng.gen_range(0..=3);
                let user_key: Vec<u8> = (0..length).map(|_| b"abc"[rng.gen_range(0..3)]).collect();
                let (kind, value) = if rng.gen_bool(0.8) {
                    (ValueKind::Put, sequence.to_le_bytes().to_vec())
                } else {
                    (ValueKind::Delete, Vec::new())
                };
                memtable.insert(&user_key, sequence, kind, &value);
                expected.push((make_internal_key(&user_key, sequence, kind), value));
            }
            expected.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
            walk_and_compare(&mut memtable.iter(), &expected, &mut rng, 300);
        }
    }

    /// Memtables built on chunks recycled from earlier ones (which still hold the old entries'
    /// bytes) read exactly like the entries written: every get and a full walk, three
    /// generations over one pool, each spanning several chunks.
    #[test]
    fn memtables_on_recycled_chunks_read_what_was_written() {
        use crate::iterator::merge::tests::walk_and_compare;
        let pool = Arc::new(ChunkPool::new(64 << 20));
        for generation in 0..3u64 {
            let mut rng = SmallRng::seed_from_u64(generation);
            let memtable =
                Arc::new(MemTable::with_chunk_pool(64 << 20, KeyComparator::Bytewise, Some(Arc::clone(&pool))));
            let mut expected = Vec::new();
            for sequence in 1..=40_000u64 {
                let user_key = format!("key{:08}", rng.gen_range(0..1_000_000u32)).into_bytes();
                let value = vec![(sequence % 251) as u8; rng.gen_range(0..300)];
                memtable.insert(&user_key, sequence, ValueKind::Put, &value);
                expected.push((make_internal_key(&user_key, sequence, ValueKind::Put), value));
            }
            assert!(memtable.approximate_memory_bytes() > 8 << 20, "several chunks");
            expected.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
            for (internal_key, value) in expected.iter().step_by(97) {
                let user_key = &internal_key[..internal_key.len() - 8];
                match memtable.get(user_key, MAX_SEQUENCE_NUMBER) {
                    Some(MemTableLookup::Value(found)) => {
                        // The first entry of a user key in internal-key order is its newest.
                        let first =
                            expected.iter().find(|(key, _)| &key[..key.len() - 8] == user_key).map(|(_, value)| value);
                        assert_eq!(Some(&found), first, "generation {generation}");
                    }
                    other => panic!("generation {generation}: {other:?} for a key written with {value:?}"),
                }
            }
            walk_and_compare(&mut memtable.iter(), &expected, &mut rng, 300);
            drop(memtable);
            assert!(pool.pooled_bytes() >= 8 << 20, "the dropped memtable's chunks are pooled");
        }
    }

    #[test]
    fn empty_memtable() {
        let memtable = Arc::new(MemTable::new(4096, KeyComparator::Bytewise));
        assert!(memtable.is_empty());
        assert_eq!(memtable.len(), 0);
        assert_eq!(memtable.largest_sequence(), 0);
        assert_eq!(memtable.get(b"anything", MAX_SEQUENCE_NUMBER), None);
        let mut iterator = memtable.iter();
        assert!(!iterator.valid());
        assert_eq!(iterator.key(), b"");
        iterator.seek_to_first();
        assert!(!iterator.valid());
        iterator.seek_to_last();
        assert!(!iterator.valid());
        iterator.seek(&make_internal_key(b"a", 1, ValueKind::Put));
        assert!(!iterator.valid());
        assert!(iterator.status().is_ok());
    }

    #[test]
    fn get_respects_sequence_and_kind() {
        let memtable = MemTable::new(4096, KeyComparator::Bytewise);
        memtable.insert(b"k", 5, ValueKind::Put, b"five");
        memtable.insert(b"k", 10, ValueKind::Put, b"ten");
        memtable.insert(b"k", 7, ValueKind::Delete, b"");
        memtable.insert(b"j", 8, ValueKind::Put, b"other");
        memtable.insert(b"l", 1, ValueKind::Put, b"other");
        let value = |bytes: &[u8]| Some(MemTableLookup::Value(bytes.to_vec()));
        assert_eq!(memtable.get(b"k", 4), None);
        assert_eq!(memtable.get(b"k", 5), value(b"five"));
        assert_eq!(memtable.get(b"k", 6), value(b"five"));
        assert_eq!(memtable.get(b"k", 7), Some(MemTableLookup::Deleted));
        assert_eq!(memtable.get(b"k", 9), Some(MemTableLookup::Deleted));
        assert_eq!(memtable.get(b"k", 10), value(b"ten"));
        assert_eq!(memtable.get(b"k", MAX_SEQUENCE_NUMBER), value(b"ten"));
        assert_eq!(memtable.get(b"k", u64::MAX), value(b"ten"));
        assert_eq!(memtable.get(b"", 100), None);
        assert_eq!(memtable.get(b"kk", 100), None);
        assert_eq!(memtable.len(), 5);
        assert_eq!(memtable.largest_sequence(), 10);
    }

    #[test]
    fn matches_btreemap_model() {
        let mut rng = SmallRng::seed_from_u64(0x5eed);
        // A small key space (including the empty key and prefixes of each other) so that most
        // user keys get several versions.
        let mut user_keys: Vec<Vec<u8>> = vec![Vec::new(), b"a".to_vec(), b"ab".to_vec(), vec![0], vec![255; 3]];
        while user_keys.len() < 300 {
            let length = rng.gen_range(0..12);
            user_keys.push((0..length).map(|_| rng.gen_range(b'a'..=b'f')).collect());
        }
        let entry_count = 5000u64;
        let mut sequences: Vec<u64> = (1..=entry_count).collect();
        sequences.shuffle(&mut rng);

        let memtable = Arc::new(MemTable::new(64 << 10, KeyComparator::Bytewise));
        let mut model = Model::new();
        for &sequence in &sequences {
            let user_key = user_keys.choose(&mut rng).unwrap().clone();
            let kind = if rng.gen_bool(0.2) { ValueKind::Delete } else { ValueKind::Put };
            let value: Vec<u8> = match kind {
                ValueKind::Put | ValueKind::BlobIndex | ValueKind::PutWithExpiry | ValueKind::Merge => {
                    (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect()
                }
                ValueKind::Delete | ValueKind::SingleDelete => Vec::new(),
            };
            memtable.insert(&user_key, sequence, kind, &value);
            model.insert((user_key, Reverse(key::pack_trailer(sequence, kind))), value);
        }
        assert_eq!(memtable.len(), model.len());
        assert_eq!(memtable.largest_sequence(), entry_count);

        // Point lookups at many snapshots, for present and absent keys.
        for _ in 0..20_000 {
            let user_key = if rng.gen_bool(0.9) {
                user_keys.choose(&mut rng).unwrap().clone()
            } else {
                (0..rng.gen_range(0..12)).map(|_| rng.gen_range(b'a'..=b'g')).collect()
            };
            let sequence = match rng.gen_range(0..10) {
                0 => 0,
                1 => MAX_SEQUENCE_NUMBER,
                _ => rng.gen_range(0..=entry_count + 1),
            };
            assert_eq!(memtable.get(&user_key, sequence), model_get(&model, &user_key, sequence));
        }

        // Full scans in both directions.
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(entry, value)| (model_internal_key(entry), value.clone())).collect();
        let mut iterator = memtable.iter();
        assert_eq!(collect_forward(&mut iterator), expected);
        let mut backward = collect_backward(&mut iterator);
        backward.reverse();
        assert_eq!(backward, expected);

        // Seeks to random targets, then a few steps either way.
        let expected_keys: Vec<Vec<u8>> = expected.iter().map(|(key, _)| key.clone()).collect();
        for _ in 0..3000 {
            let user_key = user_keys.choose(&mut rng).unwrap();
            let kind = if rng.gen_bool(0.5) { ValueKind::Delete } else { ValueKind::Put };
            let target = make_internal_key(user_key, rng.gen_range(0..=entry_count + 1), kind);
            let index = expected_keys.partition_point(|key| compare_internal_keys(key, &target).is_lt());
            iterator.seek(&target);
            if index == expected_keys.len() {
                assert!(!iterator.valid());
                continue;
            }
            assert_eq!(iterator.key(), expected_keys[index].as_slice());
            assert_eq!(iterator.value(), expected[index].1.as_slice());
            if rng.gen_bool(0.5) {
                for step in 1..=3 {
                    iterator.next();
                    match expected_keys.get(index + step) {
                        Some(key) => assert_eq!(iterator.key(), key.as_slice()),
                        None => {
                            assert!(!iterator.valid());
                            break;
                        }
                    }
                }
            } else {
                for step in 1..=3 {
                    iterator.prev();
                    match index.checked_sub(step) {
                        Some(position) => assert_eq!(iterator.key(), expected_keys[position].as_slice()),
                        None => {
                            assert!(!iterator.valid());
                            break;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn seek_with_short_target_lands_on_user_key_start() {
        let memtable = Arc::new(MemTable::new(4096, KeyComparator::Bytewise));
        memtable.insert(b"abc", 3, ValueKind::Put, b"x");
        memtable.insert(b"abd", 4, ValueKind::Put, b"y");
        let mut iterator = memtable.iter();
        iterator.seek(b"abd");
        assert_eq!(iterator.key(), make_internal_key(b"abd", 4, ValueKind::Put).as_slice());
        iterator.seek(b"");
        assert_eq!(iterator.key(), make_internal_key(b"abc", 3, ValueKind::Put).as_slice());
    }

    #[test]
    fn concurrent_inserts_are_complete_and_ordered() {
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 50_000;
        let memtable = Arc::new(MemTable::new(64 << 20, KeyComparator::Bytewise));
        let writers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let memtable = Arc::clone(&memtable);
                std::thread::spawn(move || {
                    for index in 0..PER_THREAD {
                        // Interleave the threads' keys so they contend for the same splices;
                        // every fifth entry shares its user key with another thread's entry.
                        let number = index * THREADS + thread;
                        let user_key = user_key_for(number / 5 * 5);
                        let sequence = number + 1;
                        let value = self_describing_value(&user_key, sequence, (number % 17) as usize);
                        memtable.insert(&user_key, sequence, ValueKind::Put, &value);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let total = THREADS * PER_THREAD;
        assert_eq!(memtable.len() as u64, total);
        assert_eq!(memtable.largest_sequence(), total);

        let mut iterator = memtable.iter();
        let mut seen = vec![false; total as usize];
        let mut previous: Option<Vec<u8>> = None;
        let mut count = 0;
        iterator.seek_to_first();
        while iterator.valid() {
            let key = iterator.key().to_vec();
            check_self_describing(&key, iterator.value());
            if let Some(previous) = &previous {
                assert!(compare_internal_keys(previous, &key).is_lt(), "order violated");
            }
            let sequence = key::sequence(&key);
            assert!(!std::mem::replace(&mut seen[(sequence - 1) as usize], true), "duplicate entry");
            previous = Some(key);
            count += 1;
            iterator.next();
        }
        assert_eq!(count, total);
        assert!(seen.iter().all(|&present| present));
        assert_eq!(memtable.list.verify_structure() as u64, total);
        // Every user key's newest version is the one with the largest number in its group.
        for group in (0..total).step_by(5) {
            let newest = (group + 4).min(total - 1) + 1;
            match memtable.get(&user_key_for(group), MAX_SEQUENCE_NUMBER) {
                Some(MemTableLookup::Value(value)) => {
                    assert_eq!(u64::from_le_bytes(value[..8].try_into().unwrap()), newest);
                }
                other => panic!("missing key group {group}: {other:?}"),
            }
        }
    }

    #[test]
    fn sequential_and_reverse_inserts() {
        let ascending = Arc::new(MemTable::new(1 << 20, KeyComparator::Bytewise));
        let descending = Arc::new(MemTable::new(1 << 20, KeyComparator::Bytewise));
        let count = 20_000u64;
        for number in 0..count {
            let user_key = user_key_for(number);
            ascending.insert(&user_key, number + 1, ValueKind::Put, &self_describing_value(&user_key, number + 1, 3));
            // Alternate between the two lists so the thread's remembered splice keeps switching.
            let user_key = user_key_for(count - number);
            descending.insert(&user_key, number + 1, ValueKind::Put, &self_describing_value(&user_key, number + 1, 3));
        }
        for memtable in [&ascending, &descending] {
            assert_eq!(memtable.list.verify_structure() as u64, count);
            let entries = collect_forward(&mut memtable.iter());
            assert_eq!(entries.len() as u64, count);
            assert!(entries.windows(2).all(|pair| compare_internal_keys(&pair[0].0, &pair[1].0).is_lt()));
            for (key, value) in &entries {
                check_self_describing(key, value);
            }
        }
        assert_eq!(
            ascending.get(&user_key_for(777), MAX_SEQUENCE_NUMBER),
            Some(MemTableLookup::Value(self_describing_value(&user_key_for(777), 778, 3)))
        );
        // Runs of ascending keys that jump around: the splice is partly reusable.
        let jumpy = MemTable::new(1 << 20, KeyComparator::Bytewise);
        let mut rng = SmallRng::seed_from_u64(9);
        let mut sequence = 0;
        for _ in 0..500 {
            let base = rng.gen_range(0..1_000_000u64) * 100;
            for offset in 0..20 {
                sequence += 1;
                jumpy.insert(&user_key_for(base + offset), sequence, ValueKind::Put, b"");
            }
        }
        assert_eq!(jumpy.list.verify_structure() as u64, sequence);
    }

    #[test]
    fn concurrent_runs_of_nearby_keys_keep_every_level_ordered() {
        // Each thread inserts ascending runs into regions the others write too, so remembered
        // splices go stale between inserts all the time.
        const THREADS: u64 = 4;
        const RUNS: u64 = 400;
        const RUN_LENGTH: u64 = 50;
        let memtable = Arc::new(MemTable::new(1 << 20, KeyComparator::Bytewise));
        let writers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let memtable = Arc::clone(&memtable);
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread + 100);
                    for run in 0..RUNS {
                        let region = rng.gen_range(0..20u64) * 1_000_000;
                        for offset in 0..RUN_LENGTH {
                            let number = region + offset * THREADS * RUNS + run * THREADS + thread;
                            let sequence = (thread * RUNS + run) * RUN_LENGTH + offset + 1;
                            memtable.insert(&user_key_for(number), sequence, ValueKind::Put, b"v");
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let total = THREADS * RUNS * RUN_LENGTH;
        assert_eq!(memtable.len() as u64, total);
        assert_eq!(memtable.list.verify_structure() as u64, total);
    }

    #[test]
    fn readers_during_inserts_see_complete_entries() {
        const WRITERS: u64 = 2;
        const PER_WRITER: u64 = 30_000;
        let memtable = Arc::new(MemTable::new(1 << 20, KeyComparator::Bytewise));
        // How many entries each writer has finished; Release after an insert, Acquire before a
        // get, so an entry counted here must be visible.
        let progress: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let memtable = Arc::clone(&memtable);
                let progress = Arc::clone(&progress);
                std::thread::spawn(move || {
                    for index in 0..PER_WRITER {
                        let number = index * WRITERS + writer;
                        let user_key = user_key_for(number);
                        let value = self_describing_value(&user_key, number + 1, (number % 300) as usize);
                        memtable.insert(&user_key, number + 1, ValueKind::Put, &value);
                        progress[writer as usize].store(index + 1, Ordering::Release);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2u64)
            .map(|reader| {
                let memtable = Arc::clone(&memtable);
                let progress = Arc::clone(&progress);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(reader);
                    let mut scans = 0;
                    while !done.load(Ordering::Acquire) || scans < 2 {
                        // Point reads of entries known to be inserted.
                        for _ in 0..200 {
                            let writer = rng.gen_range(0..WRITERS);
                            let finished = progress[writer as usize].load(Ordering::Acquire);
                            if finished == 0 {
                                continue;
                            }
                            let number = rng.gen_range(0..finished) * WRITERS + writer;
                            let user_key = user_key_for(number);
                            match memtable.get(&user_key, MAX_SEQUENCE_NUMBER) {
                                Some(MemTableLookup::Value(value)) => check_self_describing(
                                    &make_internal_key(&user_key, number + 1, ValueKind::Put),
                                    &value,
                                ),
                                other => panic!("inserted key {number} not found: {other:?}"),
                            }
                        }
                        // A full scan (forward on even rounds, backward on odd) checking order and
                        // contents while writers keep inserting.
                        let mut iterator = memtable.iter();
                        let mut previous: Option<Vec<u8>> = None;
                        if scans % 2 == 0 {
                            iterator.seek_to_first();
                        } else {
                            iterator.seek_to_last();
                        }
                        let mut steps = 0;
                        while iterator.valid() && steps < 5000 {
                            let key = iterator.key().to_vec();
                            check_self_describing(&key, iterator.value());
                            if let Some(previous) = &previous {
                                let order = compare_internal_keys(previous, &key);
                                if scans % 2 == 0 {
                                    assert!(order.is_lt());
                                } else {
                                    assert!(order.is_gt());
                                }
                            }
                            previous = Some(key);
                            if scans % 2 == 0 {
                                iterator.next();
                            } else {
                                iterator.prev();
                            }
                            steps += 1;
                        }
                        // A seek to a random key must land on an entry not before it.
                        let target = user_key_for(rng.gen_range(0..WRITERS * PER_WRITER));
                        let target = make_internal_key(&target, MAX_SEQUENCE_NUMBER, ValueKind::Put);
                        iterator.seek(&target);
                        if iterator.valid() {
                            assert!(!compare_internal_keys(iterator.key(), &target).is_lt());
                            check_self_describing(iterator.key(), iterator.value());
                        }
                        scans += 1;
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(memtable.len() as u64, WRITERS * PER_WRITER);
        assert_eq!(collect_forward(&mut memtable.iter()).len() as u64, WRITERS * PER_WRITER);
    }

    #[test]
    fn memory_accounting_tracks_arena_chunks() {
        let memtable = MemTable::new(64 << 20, KeyComparator::Bytewise);
        // An empty memtable holds its key filter (one byte per 64 bytes of capacity), and its
        // first chunk (an eighth of the hint, at most 4 MiB) only as far as it is used: the
        // chunk is page-mapped on Unix, so its untouched pages cost nothing.
        let filter_bytes = (64 << 20) / 64;
        let first_chunk = if cfg!(unix) { 0 } else { 4 << 20 };
        let initial = memtable.approximate_memory_bytes();
        assert!(initial >= filter_bytes + first_chunk && initial <= filter_bytes + first_chunk + 4096, "{initial}");
        let mut payload_bytes = 0;
        let value = [7u8; 100];
        for number in 0..100_000u64 {
            let user_key = format!("{number:016}");
            memtable.insert(user_key.as_bytes(), number + 1, ValueKind::Put, &value);
            payload_bytes += user_key.len() + 8 + value.len();
        }
        let used = memtable.approximate_memory_bytes();
        assert!(used >= payload_bytes, "{used} < {payload_bytes}");
        // Per-entry overhead (header, tower, padding) plus at most one partly used chunk.
        assert!(used <= payload_bytes * 3 / 2 + (4 << 20) + filter_bytes, "{used} too large for {payload_bytes}");
    }

    #[test]
    fn large_values_and_empty_keys() {
        let memtable = Arc::new(MemTable::new(4 << 20, KeyComparator::Bytewise));
        let large: Vec<u8> = (0..1 << 20).map(|index: usize| (index % 251) as u8).collect();
        memtable.insert(b"big", 1, ValueKind::Put, &large);
        memtable.insert(b"", 2, ValueKind::Put, b"");
        memtable.insert(b"", 3, ValueKind::Delete, b"");
        memtable.insert(b"big", 4, ValueKind::Put, &large[..1000]);
        memtable.insert(b"small", 5, ValueKind::Put, b"v");
        // The 1 MiB value has a chunk of its own; the small entries use part of the regular one.
        assert!(memtable.approximate_memory_bytes() >= (1 << 20) + 1000);
        assert_eq!(memtable.get(b"big", 1), Some(MemTableLookup::Value(large.clone())));
        assert_eq!(memtable.get(b"big", 9), Some(MemTableLookup::Value(large[..1000].to_vec())));
        assert_eq!(memtable.get(b"", 2), Some(MemTableLookup::Value(Vec::new())));
        assert_eq!(memtable.get(b"", 3), Some(MemTableLookup::Deleted));
        assert_eq!(memtable.get(b"", 1), None);

        let entries = collect_forward(&mut memtable.iter());
        let keys: Vec<Vec<u8>> = entries.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(
            keys,
            vec![
                make_internal_key(b"", 3, ValueKind::Delete),
                make_internal_key(b"", 2, ValueKind::Put),
                make_internal_key(b"big", 4, ValueKind::Put),
                make_internal_key(b"big", 1, ValueKind::Put),
                make_internal_key(b"small", 5, ValueKind::Put),
            ]
        );
        assert_eq!(entries[3].1, large);
        assert!(entries[0].1.is_empty());
    }

    #[test]
    fn a_reverse_comparator_orders_the_whole_memtable() {
        let comparator = KeyComparator::Custom(Arc::new(crate::comparator::ReverseBytewiseComparator));
        let memtable = Arc::new(MemTable::new(1 << 20, comparator.clone()));
        let mut rng = SmallRng::seed_from_u64(5);
        let mut numbers: Vec<u64> = (0..2000).collect();
        numbers.shuffle(&mut rng);
        for (index, &number) in numbers.iter().enumerate() {
            let sequence = index as u64 + 1;
            memtable.insert(&user_key_for(number), sequence, ValueKind::Put, &sequence.to_le_bytes());
            if number % 5 == 0 {
                memtable.insert(&user_key_for(number), sequence + 10_000, ValueKind::Delete, b"");
            }
        }
        assert_eq!(memtable.list.verify_structure(), 2000 + 400);
        let forward = collect_forward(&mut memtable.iter());
        let mut backward = collect_backward(&mut memtable.iter());
        backward.reverse();
        assert_eq!(forward, backward);
        assert!(forward.windows(2).all(|pair| comparator.compare_internal_keys(&pair[0].0, &pair[1].0).is_lt()));
        // Largest user key first; a key's newest version (here a tombstone) first.
        assert_eq!(key::user_key(&forward[0].0), user_key_for(1999).as_slice());
        let first_of_1995 = forward.iter().find(|entry| key::user_key(&entry.0) == user_key_for(1995)).expect("1995");
        assert_eq!(parse_internal_key(&first_of_1995.0).map(|parsed| parsed.kind), Some(ValueKind::Delete));
        for number in [0, 5, 1234, 1999] {
            let expected = if number % 5 == 0 { Some(MemTableLookup::Deleted) } else { None };
            let found = memtable.get(&user_key_for(number), MAX_SEQUENCE_NUMBER);
            match expected {
                Some(deleted) => assert_eq!(found, Some(deleted)),
                None => assert!(matches!(found, Some(MemTableLookup::Value(_)))),
            }
        }
        // A seek between two keys lands on the next smaller one.
        let mut iterator = memtable.iter();
        let between = {
            let mut key = user_key_for(1000);
            key.push(b'!');
            make_internal_key(&key, MAX_SEQUENCE_NUMBER, ValueKind::Put)
        };
        iterator.seek(&between);
        assert_eq!(key::user_key(iterator.key()), user_key_for(1000).as_slice());
        iterator.prev();
        assert_eq!(key::user_key(iterator.key()), user_key_for(1001).as_slice());
    }

    #[test]
    fn iterator_keeps_memtable_alive_and_is_send() {
        fn assert_send_static<T: Send + 'static>(_: &T) {}
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<MemTable>();
        let memtable = Arc::new(MemTable::new(4096, KeyComparator::Bytewise));
        for number in 0..100 {
            memtable.insert(&user_key_for(number), number + 1, ValueKind::Put, b"value");
        }
        let mut iterator = memtable.iter();
        drop(memtable);
        assert_send_static(&iterator);
        let handle = std::thread::spawn(move || collect_forward(&mut iterator).len());
        assert_eq!(handle.join().unwrap(), 100);
    }

    #[test]
    fn iterator_may_see_later_inserts() {
        let memtable = Arc::new(MemTable::new(4096, KeyComparator::Bytewise));
        memtable.insert(b"a", 1, ValueKind::Put, b"1");
        let mut iterator = memtable.iter();
        iterator.seek_to_first();
        memtable.insert(b"b", 2, ValueKind::Put, b"2");
        iterator.next();
        // The new entry was linked after the cursor's node, so the cursor reaches it.
        assert!(iterator.valid());
        assert_eq!(iterator.value(), b"2");
    }

    /// Range counts of a memtable on their own (the database checks empty ranges before it
    /// asks): short ranges are exact with versions counted once, and an empty or inverted
    /// range counts nothing, in a memtable big enough to sample.
    #[test]
    fn user_key_counts_of_short_empty_and_inverted_ranges() {
        let memtable = Arc::new(MemTable::new(1 << 20, KeyComparator::Bytewise));
        let key = |n: u64| format!("key{n:06}").into_bytes();
        let mut sequence = 0;
        for n in 0..20_000u64 {
            for _ in 0..(1 + n % 3) {
                sequence += 1;
                memtable.insert(&key(n), sequence, ValueKind::Put, b"v");
            }
        }
        assert_eq!(memtable.user_keys_in_range(&key(100), &key(107)), 7);
        assert_eq!(memtable.user_keys_in_range(&key(19_995), &key(30_000)), 5);
        assert_eq!(memtable.user_keys_in_range(&key(500), &key(500)), 0);
        assert_eq!(memtable.user_keys_in_range(&key(9_000), &key(100)), 0);
        assert_eq!(memtable.user_keys_in_range(b"", b"key"), 0);
    }
}
