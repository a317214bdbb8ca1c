//! Range tombstones: deletes of every key in `[start, end)` as of one sequence number, and the
//! fragmented form reads and compactions query them in.
//!
//! A range delete is written like any other record (one sequence number, through the WAL). The
//! memtable that takes it keeps it in a side list; a flush moves it into the column family's
//! version, where the manifest records it (tag 18) until no table holds data it could hide
//! (`Version::range_tombstones`, `db/range_delete.rs`). Tombstones never live inside tables,
//! so table files keep their plain key ranges and levels stay disjoint without the boundary
//! cutting that in-table range tombstones need.
//!
//! An entry of user key `k` and sequence `s` is *covered* at snapshot `S` when some tombstone
//! `[start, end)` with sequence `t` has `start <= k < end` and `s < t <= S`: the delete is
//! visible to the reader and newer than the entry. A covered entry reads as deleted (invariant
//! I38).
//!
//! [`FragmentedTombstones`] cuts a set of possibly overlapping tombstones at every start and
//! end into non-overlapping fragments, each holding the sequence numbers of the tombstones that
//! span it (newest first). A lookup is one binary search over the fragments, so a read costs
//! the same after a delete of a million keys as before it.
//!
//! Concurrency contract: plain immutable values once built; they are shared through `Arc`.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::comparator::KeyComparator;

/// A delete of every user key in `[start, end)` (in the column family's order), at `sequence`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) sequence: u64,
}

impl RangeTombstone {
    /// Bytes of memory the tombstone accounts for.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.start.len() + self.end.len() + std::mem::size_of::<RangeTombstone>()
    }

    /// True when the tombstone's range and `[smallest, largest]` share a key.
    pub(crate) fn overlaps(&self, smallest: &[u8], largest: &[u8], comparator: &KeyComparator) -> bool {
        comparator.compare_user_keys(&self.start, &self.end).is_lt()
            && comparator.compare_user_keys(&self.start, largest).is_le()
            && comparator.compare_user_keys(smallest, &self.end).is_lt()
    }

    /// True when every key of `[smallest, largest]` lies inside the tombstone's range.
    pub(crate) fn contains_range(&self, smallest: &[u8], largest: &[u8], comparator: &KeyComparator) -> bool {
        comparator.compare_user_keys(&self.start, &self.end).is_lt()
            && comparator.compare_user_keys(&self.start, smallest).is_le()
            && comparator.compare_user_keys(largest, &self.end).is_lt()
    }
}

/// One piece of the fragmented set: `[start, end)` is covered by the tombstones whose sequence
/// numbers `sequences` lists, newest first (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    sequences: Vec<u64>,
}

impl Fragment {
    /// The newest sequence among the fragment's tombstones that is at most `snapshot`, or 0.
    pub(crate) fn covering_sequence(&self, snapshot: u64) -> u64 {
        self.sequences.iter().copied().find(|&sequence| sequence <= snapshot).unwrap_or(0)
    }

    /// The oldest of the fragment's tombstones that is newer than `sequence` (it covers an
    /// entry of that sequence), if any.
    pub(crate) fn oldest_covering_above(&self, sequence: u64) -> Option<u64> {
        self.sequences.iter().rev().copied().find(|&covering| covering > sequence)
    }
}

/// A set of range tombstones cut into sorted, non-overlapping fragments; see the module
/// documentation.
#[derive(Clone, Debug)]
pub(crate) struct FragmentedTombstones {
    fragments: Vec<Fragment>,
    comparator: KeyComparator,
}

impl FragmentedTombstones {
    /// An empty set.
    pub(crate) fn empty(comparator: KeyComparator) -> FragmentedTombstones {
        FragmentedTombstones { fragments: Vec::new(), comparator }
    }

    /// Fragments `tombstones` (in any order, overlapping or not) under `comparator`. Empty
    /// ranges (`start >= end`) cover nothing and are left out.
    pub(crate) fn new<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        comparator: KeyComparator,
    ) -> FragmentedTombstones {
        let tombstones: Vec<&RangeTombstone> = tombstones
            .into_iter()
            .filter(|tombstone| comparator.compare_user_keys(&tombstone.start, &tombstone.end).is_lt())
            .collect();
        if tombstones.is_empty() {
            return FragmentedTombstones::empty(comparator);
        }
        // Every start and end is a cut point; between two neighbouring cut points the set of
        // spanning tombstones is constant.
        let mut cuts: Vec<&[u8]> = tombstones.iter().flat_map(|t| [t.start.as_slice(), t.end.as_slice()]).collect();
        cuts.sort_by(|a, b| comparator.compare_user_keys(a, b));
        cuts.dedup_by(|a, b| comparator.compare_user_keys(a, b) == Ordering::Equal);
        let mut sequences: Vec<Vec<u64>> = vec![Vec::new(); cuts.len() - 1];
        let position = |key: &[u8]| cuts.partition_point(|cut| comparator.compare_user_keys(cut, key).is_lt());
        for tombstone in &tombstones {
            let first = position(&tombstone.start);
            let last = position(&tombstone.end);
            for spanned in &mut sequences[first..last] {
                spanned.push(tombstone.sequence);
            }
        }
        let mut fragments = Vec::new();
        for (index, mut spanning) in sequences.into_iter().enumerate() {
            if spanning.is_empty() {
                continue;
            }
            spanning.sort_unstable_by(|a, b| b.cmp(a));
            spanning.dedup();
            fragments.push(Fragment {
                start: cuts[index].to_vec(),
                end: cuts[index + 1].to_vec(),
                sequences: spanning,
            });
        }
        FragmentedTombstones { fragments, comparator }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The newest sequence of any tombstone in the set (0 when empty).
    pub(crate) fn max_sequence(&self) -> u64 {
        self.fragments.iter().filter_map(|fragment| fragment.sequences.first().copied()).max().unwrap_or(0)
    }

    /// The fragment holding `key`, if any.
    pub(crate) fn fragment_at(&self, key: &[u8]) -> Option<&Fragment> {
        let index = self.fragments.partition_point(|f| self.comparator.compare_user_keys(&f.end, key).is_le());
        self.fragments.get(index).filter(|f| self.comparator.compare_user_keys(&f.start, key).is_le())
    }

    /// The newest sequence of a tombstone holding `key` that is at most `snapshot`; 0 when no
    /// visible tombstone holds it. An entry of `key` with a smaller sequence is covered.
    pub(crate) fn covering_sequence(&self, key: &[u8], snapshot: u64) -> u64 {
        self.fragment_at(key).map_or(0, |fragment| fragment.covering_sequence(snapshot))
    }

    /// The fragments, in key order.
    #[cfg(test)]
    pub(crate) fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }
}

/// The range tombstones a column family's version holds, and their fragmented form, built once
/// per version change.
#[derive(Clone, Debug)]
pub(crate) struct VersionTombstones {
    /// In the order they were added (ascending sequence).
    list: Arc<[RangeTombstone]>,
    fragmented: Arc<FragmentedTombstones>,
}

impl VersionTombstones {
    pub(crate) fn empty(comparator: KeyComparator) -> VersionTombstones {
        VersionTombstones { list: Arc::from(Vec::new()), fragmented: Arc::new(FragmentedTombstones::empty(comparator)) }
    }

    pub(crate) fn new(mut list: Vec<RangeTombstone>, comparator: KeyComparator) -> VersionTombstones {
        list.sort_by_key(|tombstone| tombstone.sequence);
        let fragmented = Arc::new(FragmentedTombstones::new(&list, comparator));
        VersionTombstones { list: Arc::from(list), fragmented }
    }

    pub(crate) fn list(&self) -> &[RangeTombstone] {
        &self.list
    }

    pub(crate) fn fragmented(&self) -> &Arc<FragmentedTombstones> {
        &self.fragmented
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn tombstone(start: &[u8], end: &[u8], sequence: u64) -> RangeTombstone {
        RangeTombstone { start: start.to_vec(), end: end.to_vec(), sequence }
    }

    /// The answer by definition: the newest visible tombstone that holds the key.
    fn model_covering(tombstones: &[RangeTombstone], key: &[u8], snapshot: u64) -> u64 {
        tombstones
            .iter()
            .filter(|t| t.start.as_slice() <= key && key < t.end.as_slice() && t.sequence <= snapshot)
            .map(|t| t.sequence)
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn overlapping_tombstones_fragment_with_sequences_newest_first() {
        let set = FragmentedTombstones::new(
            &[tombstone(b"b", b"f", 5), tombstone(b"d", b"h", 9), tombstone(b"x", b"x", 11)],
            KeyComparator::Bytewise,
        );
        let pieces: Vec<(&[u8], &[u8], Vec<u64>)> =
            set.fragments().iter().map(|f| (&f.start[..], &f.end[..], f.sequences.clone())).collect();
        assert_eq!(
            pieces,
            vec![(&b"b"[..], &b"d"[..], vec![5]), (&b"d"[..], &b"f"[..], vec![9, 5]), (&b"f"[..], &b"h"[..], vec![9])]
        );
        assert_eq!(set.covering_sequence(b"a", 100), 0);
        assert_eq!(set.covering_sequence(b"b", 100), 5);
        assert_eq!(set.covering_sequence(b"e", 100), 9);
        assert_eq!(set.covering_sequence(b"e", 8), 5, "a snapshot below 9 sees only the older tombstone");
        assert_eq!(set.covering_sequence(b"e", 4), 0);
        assert_eq!(set.covering_sequence(b"h", 100), 0, "the end is exclusive");
        assert_eq!(set.covering_sequence(b"x", 100), 0, "an empty range covers nothing");
    }

    #[test]
    fn matches_the_definition_on_random_sets() {
        let mut rng = SmallRng::seed_from_u64(0x7a9e);
        for _ in 0..300 {
            let count = rng.gen_range(0..12);
            let tombstones: Vec<RangeTombstone> = (0..count)
                .map(|sequence| {
                    let a = vec![rng.gen_range(b'a'..=b'k')];
                    let b = vec![rng.gen_range(b'a'..=b'k')];
                    tombstone(&a, &b, sequence + 1)
                })
                .collect();
            let set = FragmentedTombstones::new(&tombstones, KeyComparator::Bytewise);
            for pair in set.fragments().windows(2) {
                assert!(pair[0].end <= pair[1].start, "fragments are sorted and disjoint");
            }
            for key in b'a'..=b'l' {
                for snapshot in 0..=count + 1 {
                    assert_eq!(
                        set.covering_sequence(&[key], snapshot),
                        model_covering(&tombstones, &[key], snapshot),
                        "key {key} snapshot {snapshot} in {tombstones:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_reverse_order_fragments_in_that_order() {
        let reverse = KeyComparator::Custom(std::sync::Arc::new(crate::comparator::ReverseBytewiseComparator));
        // In reverse order "f" comes before "b": the range from "f" to "b" holds "e".."c".
        let set = FragmentedTombstones::new(&[tombstone(b"f", b"b", 3)], reverse);
        assert_eq!(set.covering_sequence(b"d", 10), 3);
        assert_eq!(set.covering_sequence(b"f", 10), 3);
        assert_eq!(set.covering_sequence(b"b", 10), 0);
        assert_eq!(set.covering_sequence(b"g", 10), 0);
        assert!(FragmentedTombstones::new(&[tombstone(b"b", b"f", 3)], set.comparator.clone()).is_empty());
    }

    #[test]
    fn fragment_lookups() {
        let set =
            FragmentedTombstones::new(&[tombstone(b"c", b"e", 1), tombstone(b"g", b"i", 2)], KeyComparator::Bytewise);
        assert!(set.fragment_at(b"b").is_none());
        assert_eq!(set.fragment_at(b"d").map(|f| f.start.clone()), Some(b"c".to_vec()));
        assert!(set.fragment_at(b"f").is_none());
        assert_eq!(set.fragment_at(b"h").map(|f| f.end.clone()), Some(b"i".to_vec()));
        let fragment = set.fragment_at(b"h").unwrap();
        assert_eq!(fragment.oldest_covering_above(1), Some(2));
        assert_eq!(fragment.oldest_covering_above(2), None);
    }
}
