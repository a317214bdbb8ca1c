//! Single-delete pairing: the forward stream a flush or compaction writes, with each single
//! delete dropped together with the put it meets.
//!
//! A single delete (`ValueKind::SingleDelete`) promises that its key was written at most once
//! since it was last deleted. When the entry right after it in the stream is an older put or
//! blob index of the same key, and no reader reads between the two (no read point in
//! `[put, single delete)`), neither is visible to anyone, and since nothing older than that put
//! exists (the promise) nothing can reappear: both go. A plain delete could not be dropped so
//! early, because older versions may lie in deeper levels; it travels to the bottom.
//!
//! Anything else passes through unchanged: a single delete followed by another key, by a
//! delete or by another single delete, or with a reader between, stays (and meets its put in a
//! later compaction, or is dropped at the bottom by the version filter like a delete). A
//! broken promise (two puts, then a single delete) can only bring the older put of that key
//! back; other keys are never touched.
//!
//! Concurrency contract: used by one thread, forward only (`seek`, `seek_to_first`, `next`).
//!
//! Invariants: when valid, the current entry is the inner iterator's current one, or the held
//! single delete (then the inner iterator sits on the entry after it); the entries dropped in
//! pairs are exactly those the module documentation describes (I41 in `docs/invariants.md`).

use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{parse_internal_key, ValueKind};
use crate::snapshot::ReadPoints;

/// See the module documentation.
pub(crate) struct SingleDeletePairs<I: InternalIterator> {
    inner: I,
    read_points: ReadPoints,
    /// The single delete being returned while the inner iterator has moved past it.
    held_key: Vec<u8>,
    holding: bool,
    /// Dropped puts whose values are blob references, as (internal key, reference), for the
    /// caller's blob garbage accounting.
    dropped_blob_references: Vec<(Vec<u8>, Vec<u8>)>,
    /// Pairs dropped so far.
    dropped_pairs: u64,
}

impl<I: InternalIterator> SingleDeletePairs<I> {
    pub(crate) fn new(inner: I, read_points: ReadPoints) -> SingleDeletePairs<I> {
        SingleDeletePairs {
            inner,
            read_points,
            held_key: Vec::new(),
            holding: false,
            dropped_blob_references: Vec::new(),
            dropped_pairs: 0,
        }
    }

    pub(crate) fn valid(&self) -> bool {
        self.holding || self.inner.valid()
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.holding = false;
        self.inner.seek_to_first();
        self.settle();
    }

    pub(crate) fn seek(&mut self, target: &[u8]) {
        self.holding = false;
        self.inner.seek(target);
        self.settle();
    }

    pub(crate) fn next(&mut self) {
        if self.holding {
            // The inner iterator already sits on the entry after the held single delete.
            self.holding = false;
        } else {
            self.inner.next();
        }
        self.settle();
    }

    pub(crate) fn key(&self) -> &[u8] {
        if self.holding {
            &self.held_key
        } else {
            self.inner.key()
        }
    }

    pub(crate) fn value(&self) -> &[u8] {
        if self.holding {
            &[]
        } else {
            self.inner.value()
        }
    }

    pub(crate) fn status(&self) -> Result<()> {
        self.inner.status()
    }

    /// Takes the blob references of the puts dropped since the last call.
    pub(crate) fn take_dropped_blob_references(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        std::mem::take(&mut self.dropped_blob_references)
    }

    #[cfg(test)]
    pub(crate) fn dropped_pairs(&self) -> u64 {
        self.dropped_pairs
    }

    /// From the inner position on, drops single-delete pairs until the current entry is one to
    /// return.
    fn settle(&mut self) {
        while self.inner.valid() {
            // The kind is checked first, so that the common entry costs one comparison here.
            if !crate::key::has_kind(self.inner.key(), ValueKind::SingleDelete) {
                return;
            }
            let Some(single_delete) = parse_internal_key(self.inner.key()) else { return };
            let sequence = single_delete.sequence;
            self.held_key.clear();
            self.held_key.extend_from_slice(self.inner.key());
            self.inner.next();
            let paired = self.inner.valid()
                && parse_internal_key(self.inner.key()).is_some_and(|older| {
                    // Keys that compare equal are byte-identical (the comparator's contract).
                    older.user_key == crate::key::user_key(&self.held_key)
                        && matches!(older.kind, ValueKind::Put | ValueKind::BlobIndex | ValueKind::PutWithExpiry)
                        && !self.read_points.any_between(older.sequence, sequence)
                });
            if !paired {
                self.holding = true;
                return;
            }
            if parse_internal_key(self.inner.key()).is_some_and(|older| older.kind == ValueKind::BlobIndex) {
                self.dropped_blob_references.push((self.inner.key().to_vec(), self.inner.value().to_vec()));
            }
            self.dropped_pairs += 1;
            self.inner.next();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::make_internal_key;

    fn entry(key: &[u8], sequence: u64, kind: ValueKind) -> (Vec<u8>, Vec<u8>) {
        let value = if kind == ValueKind::Put {
            format!("{}@{sequence}", String::from_utf8_lossy(key)).into_bytes()
        } else {
            Vec::new()
        };
        (make_internal_key(key, sequence, kind), value)
    }

    fn run(entries: Vec<(Vec<u8>, Vec<u8>)>, read_points: &[u64]) -> Vec<(Vec<u8>, u64, ValueKind)> {
        let mut pairs = SingleDeletePairs::new(VecIterator::new(entries), ReadPoints::from_points(read_points));
        pairs.seek_to_first();
        let mut out = Vec::new();
        while pairs.valid() {
            let parsed = parse_internal_key(pairs.key()).unwrap();
            out.push((parsed.user_key.to_vec(), parsed.sequence, parsed.kind));
            pairs.next();
        }
        out
    }

    #[test]
    fn a_single_delete_and_the_put_it_meets_go_together() {
        use ValueKind::{Delete, Put, SingleDelete};
        let entries = vec![
            entry(b"a", 9, SingleDelete),
            entry(b"a", 4, Put),
            entry(b"b", 8, SingleDelete),
            entry(b"c", 7, Put),
            entry(b"d", 6, SingleDelete),
            entry(b"d", 5, Delete),
            entry(b"e", 3, SingleDelete),
        ];
        let out = run(entries, &[100]);
        assert_eq!(
            out,
            vec![
                (b"b".to_vec(), 8, SingleDelete),
                (b"c".to_vec(), 7, Put),
                (b"d".to_vec(), 6, SingleDelete),
                (b"d".to_vec(), 5, Delete),
                (b"e".to_vec(), 3, SingleDelete),
            ]
        );
    }

    #[test]
    fn a_reader_between_keeps_both() {
        use ValueKind::{Put, SingleDelete};
        let entries = vec![entry(b"a", 9, SingleDelete), entry(b"a", 4, Put), entry(b"b", 2, Put)];
        // A snapshot at 5 reads the put.
        let out = run(entries.clone(), &[5, 100]);
        assert_eq!(out.len(), 3);
        // One at 9 reads the single delete, one at 3 neither: both go.
        let out = run(entries, &[3, 9, 100]);
        assert_eq!(out, vec![(b"b".to_vec(), 2, Put)]);
    }

    #[test]
    fn consecutive_pairs_and_a_held_single_delete_at_the_end() {
        use ValueKind::{Put, SingleDelete};
        let entries = vec![
            entry(b"a", 9, SingleDelete),
            entry(b"a", 8, Put),
            entry(b"b", 7, SingleDelete),
            entry(b"b", 6, Put),
            entry(b"c", 5, SingleDelete),
        ];
        let mut pairs = SingleDeletePairs::new(VecIterator::new(entries), ReadPoints::from_points(&[100]));
        pairs.seek_to_first();
        assert!(pairs.valid());
        assert_eq!(parse_internal_key(pairs.key()).unwrap().user_key, b"c");
        assert!(pairs.value().is_empty());
        pairs.next();
        assert!(!pairs.valid());
        assert_eq!(pairs.dropped_pairs(), 2);
    }
}
