//! Merge folding: the forward stream a flush or compaction writes, with each run of merge
//! operands that no reader can see apart folded into one entry (I43).
//!
//! A key's entries come newest first. From a merge operand at sequence `top`, the entries of
//! the same key below it that no read point separates from it (no read point in
//! `[entry, top)`) are seen by nobody on their own: every reader that sees one of them sees
//! `top` and applies them through it. So they fold:
//! - down to a put: `full_merge(put, operands)` is written as a put at `top`, and the put goes;
//! - down to a delete, a single delete, an expired put (at the expiry horizon) or a range
//!   tombstone between the entry and `top`, or past the key's last entry when the output is the
//!   bottommost data of its range: `full_merge(nothing, operands)` is written as a put at `top`
//!   (the delete stays, shadowed, for the version filter to drop);
//! - otherwise (a read point in between, a blob value or a put not yet expired beneath, or
//!   older entries that may lie in deeper levels): the operands become one operand through
//!   `partial_merge` when the operator offers it, or stay as they are.
//!
//! An operator that fails leaves the operands as they are: compaction never loses data for it,
//! and the read reports the failure. Without a merge operator nothing is folded.
//!
//! Concurrency contract: used by one thread, forward only (`seek`, `seek_to_first`, `next`).
//!
//! Invariants: when valid, the current entry is the front of `pending`, or else the inner
//! stream's current entry; the entries of `pending` sort before the inner stream's current one
//! and after everything returned before them.

use std::collections::VecDeque;
use std::sync::Arc;

use super::single_delete::SingleDeletePairs;
use super::InternalIterator;
use crate::error::Result;
use crate::key::{append_internal_key, parse_internal_key, ValueKind};
use crate::merge_operator::MergeOperator;
use crate::range_tombstone::FragmentedTombstones;
use crate::snapshot::ReadPoints;

/// See the module documentation.
pub(crate) struct MergeFold<I: InternalIterator> {
    inner: SingleDeletePairs<I>,
    operator: Option<Arc<dyn MergeOperator>>,
    read_points: ReadPoints,
    tombstones: Option<Arc<FragmentedTombstones>>,
    /// The output holds the bottommost data of its key range: nothing older lies below.
    bottommost: bool,
    /// Entries (internal key, value) to return before the inner stream's current one.
    pending: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Operands folded away so far.
    folded_operands: u64,
}

/// How the entries below a run of operands end it.
enum RunEnd {
    /// At the value beneath the operands (`None`: nothing), which a full merge can take.
    /// `consume` when the entry holding it goes with the fold.
    Base { value: Option<Vec<u8>>, consume: bool },
    /// Where a full merge cannot be made.
    Open,
}

impl<I: InternalIterator> MergeFold<I> {
    pub(crate) fn new(
        inner: SingleDeletePairs<I>,
        read_points: ReadPoints,
        operator: Option<Arc<dyn MergeOperator>>,
        tombstones: Option<Arc<FragmentedTombstones>>,
        bottommost: bool,
    ) -> MergeFold<I> {
        MergeFold { inner, operator, read_points, tombstones, bottommost, pending: VecDeque::new(), folded_operands: 0 }
    }

    pub(crate) fn valid(&self) -> bool {
        !self.pending.is_empty() || self.inner.valid()
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.pending.clear();
        self.inner.seek_to_first();
        self.settle();
    }

    pub(crate) fn seek(&mut self, target: &[u8]) {
        self.pending.clear();
        self.inner.seek(target);
        self.settle();
    }

    pub(crate) fn next(&mut self) {
        if self.pending.pop_front().is_none() {
            self.inner.next();
        }
        self.settle();
    }

    pub(crate) fn key(&self) -> &[u8] {
        match self.pending.front() {
            Some((key, _)) => key,
            None => self.inner.key(),
        }
    }

    pub(crate) fn value(&self) -> &[u8] {
        match self.pending.front() {
            Some((_, value)) => value,
            None => self.inner.value(),
        }
    }

    pub(crate) fn status(&self) -> Result<()> {
        self.inner.status()
    }

    /// Takes the blob references of the puts the single-delete pairing dropped since the last
    /// call (see [`SingleDeletePairs::take_dropped_blob_references`]).
    pub(crate) fn take_dropped_blob_references(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner.take_dropped_blob_references()
    }

    /// Operands folded away so far.
    pub(crate) fn folded_operands(&self) -> u64 {
        self.folded_operands
    }

    /// Folds the run of operands that starts at the inner stream's current entry, if it is an
    /// operand and nothing is pending.
    fn settle(&mut self) {
        if self.operator.is_none() || !self.pending.is_empty() || !self.inner.valid() {
            return;
        }
        if crate::key::has_kind(self.inner.key(), ValueKind::Merge) {
            self.fold();
        }
    }

    /// True when a range tombstone newer than `sequence` and at most `top` holds `user_key`:
    /// every reader of `top` sees the entry at `sequence` deleted.
    fn deleted_below(&self, user_key: &[u8], sequence: u64, top: u64) -> bool {
        self.tombstones
            .as_ref()
            .and_then(|tombstones| tombstones.fragment_at(user_key))
            .and_then(|fragment| fragment.oldest_covering_above(sequence))
            .is_some_and(|covering| covering <= top)
    }

    fn fold(&mut self) {
        let Some(top) = parse_internal_key(self.inner.key()).map(|parsed| (parsed.user_key.to_vec(), parsed.sequence))
        else {
            return;
        };
        let (user_key, top_sequence) = top;
        // The run, newest first, as (internal key, value).
        let mut run: Vec<(Vec<u8>, Vec<u8>)> = vec![(self.inner.key().to_vec(), self.inner.value().to_vec())];
        self.inner.next();
        let end = loop {
            if !self.inner.valid() {
                let whole = self.bottommost && self.inner.status().is_ok();
                break if whole { RunEnd::Base { value: None, consume: false } } else { RunEnd::Open };
            }
            let Some(parsed) = parse_internal_key(self.inner.key()) else { break RunEnd::Open };
            if parsed.user_key != user_key.as_slice() {
                break if self.bottommost { RunEnd::Base { value: None, consume: false } } else { RunEnd::Open };
            }
            if self.read_points.any_between(parsed.sequence, top_sequence) {
                break RunEnd::Open;
            }
            if self.deleted_below(parsed.user_key, parsed.sequence, top_sequence) {
                break RunEnd::Base { value: None, consume: false };
            }
            match parsed.kind {
                ValueKind::Merge => {
                    run.push((self.inner.key().to_vec(), self.inner.value().to_vec()));
                    self.inner.next();
                }
                ValueKind::Put => break RunEnd::Base { value: Some(self.inner.value().to_vec()), consume: true },
                ValueKind::Delete | ValueKind::SingleDelete => break RunEnd::Base { value: None, consume: false },
                ValueKind::PutWithExpiry => {
                    let horizon = self.read_points.expiry_horizon_us();
                    let expired = crate::ttl::split_expiring(self.inner.value())
                        .is_some_and(|(expires_at_us, _)| crate::ttl::is_expired(expires_at_us, horizon));
                    break if expired { RunEnd::Base { value: None, consume: false } } else { RunEnd::Open };
                }
                ValueKind::BlobIndex => break RunEnd::Open,
            }
        };
        let Some(operator) = self.operator.clone() else { return };
        let operands: Vec<&[u8]> = run.iter().rev().map(|(_, value)| value.as_slice()).collect();
        let folded = match &end {
            RunEnd::Base { value, .. } => {
                operator.full_merge(&user_key, value.as_deref(), &operands).map(|merged| (ValueKind::Put, merged))
            }
            RunEnd::Open if run.len() > 1 => {
                operator.partial_merge(&user_key, &operands).map(|merged| (ValueKind::Merge, merged))
            }
            RunEnd::Open => None,
        };
        match folded {
            Some((kind, merged)) => {
                let mut key = Vec::with_capacity(user_key.len() + crate::key::TRAILER_SIZE_BYTES);
                append_internal_key(&mut key, &user_key, top_sequence, kind);
                self.folded_operands += run.len() as u64 - u64::from(kind == ValueKind::Merge);
                self.pending.push_back((key, merged));
                if let RunEnd::Base { consume: true, .. } = end {
                    // The put beneath became part of the folded value.
                    self.inner.next();
                }
            }
            // Unfoldable (a failed merge, or no partial merge): the operands stay as they were.
            None => self.pending.extend(run),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::make_internal_key;
    use crate::merge_operator::U64AddOperator;

    fn le(value: u64) -> Vec<u8> {
        value.to_le_bytes().to_vec()
    }

    fn entry(key: &[u8], sequence: u64, kind: ValueKind, value: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(key, sequence, kind), value)
    }

    /// The stream `entries` folded with the u64 adder (`partial` false: an adder without partial
    /// merges), as (user key, sequence, kind, value).
    fn fold(
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        read_points: &[u64],
        bottommost: bool,
        partial: bool,
    ) -> Vec<(Vec<u8>, u64, ValueKind, Vec<u8>)> {
        #[derive(Debug)]
        struct FullOnly;
        impl MergeOperator for FullOnly {
            fn name(&self) -> &str {
                "full-only"
            }
            fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
                U64AddOperator.full_merge(key, existing, operands)
            }
        }
        let operator: Arc<dyn MergeOperator> = if partial { Arc::new(U64AddOperator) } else { Arc::new(FullOnly) };
        let pairs = SingleDeletePairs::new(VecIterator::new(entries), ReadPoints::from_points(read_points));
        let mut folded = MergeFold::new(pairs, ReadPoints::from_points(read_points), Some(operator), None, bottommost);
        folded.seek_to_first();
        let mut out = Vec::new();
        while folded.valid() {
            let parsed = parse_internal_key(folded.key()).unwrap();
            out.push((parsed.user_key.to_vec(), parsed.sequence, parsed.kind, folded.value().to_vec()));
            folded.next();
        }
        out
    }

    #[test]
    fn operands_fold_into_the_put_beneath_them() {
        let entries = vec![
            entry(b"a", 9, ValueKind::Merge, le(2)),
            entry(b"a", 7, ValueKind::Merge, le(3)),
            entry(b"a", 5, ValueKind::Put, le(10)),
            entry(b"a", 2, ValueKind::Put, le(99)),
            entry(b"b", 4, ValueKind::Put, le(1)),
        ];
        let out = fold(entries, &[20], false, false);
        assert_eq!(
            out,
            vec![
                (b"a".to_vec(), 9, ValueKind::Put, le(15)),
                (b"a".to_vec(), 2, ValueKind::Put, le(99)),
                (b"b".to_vec(), 4, ValueKind::Put, le(1)),
            ]
        );
    }

    #[test]
    fn a_delete_beneath_folds_to_a_put_of_the_operands_alone_and_stays() {
        let entries = vec![
            entry(b"a", 9, ValueKind::Merge, le(2)),
            entry(b"a", 7, ValueKind::Delete, Vec::new()),
            entry(b"a", 5, ValueKind::Put, le(10)),
        ];
        let out = fold(entries, &[20], false, false);
        assert_eq!(out[0], (b"a".to_vec(), 9, ValueKind::Put, le(2)));
        assert_eq!(out[1].2, ValueKind::Delete);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn a_read_point_between_stops_the_run() {
        let entries = vec![
            entry(b"a", 9, ValueKind::Merge, le(2)),
            entry(b"a", 7, ValueKind::Merge, le(3)),
            entry(b"a", 5, ValueKind::Merge, le(4)),
            entry(b"a", 3, ValueKind::Put, le(10)),
        ];
        // A reader at 6 sees the operand at 5 over the put; one at 20 sees them all. The run from
        // 9 stops above 5 and folds partially; the run from 5 folds into the put.
        let out = fold(entries.clone(), &[6, 20], false, true);
        assert_eq!(out, vec![(b"a".to_vec(), 9, ValueKind::Merge, le(5)), (b"a".to_vec(), 5, ValueKind::Put, le(14))]);
        // Without partial merges the upper run stays as it was.
        let out = fold(entries, &[6, 20], false, false);
        assert_eq!(
            out.iter().map(|(_, sequence, kind, _)| (*sequence, *kind)).collect::<Vec<_>>(),
            vec![(9, ValueKind::Merge), (7, ValueKind::Merge), (5, ValueKind::Put)]
        );
    }

    #[test]
    fn operands_alone_fold_fully_only_at_the_bottom() {
        let entries = vec![entry(b"a", 9, ValueKind::Merge, le(2)), entry(b"a", 7, ValueKind::Merge, le(3))];
        assert_eq!(fold(entries.clone(), &[20], true, false), vec![(b"a".to_vec(), 9, ValueKind::Put, le(5))]);
        assert_eq!(fold(entries.clone(), &[20], false, true), vec![(b"a".to_vec(), 9, ValueKind::Merge, le(5))]);
        assert_eq!(fold(entries, &[20], false, false).len(), 2, "older entries may lie deeper: kept");
    }

    #[test]
    fn a_failing_merge_keeps_every_entry() {
        let entries = vec![
            entry(b"a", 9, ValueKind::Merge, b"not a number".to_vec()),
            entry(b"a", 7, ValueKind::Merge, le(3)),
            entry(b"a", 5, ValueKind::Put, le(10)),
        ];
        let out = fold(entries, &[20], true, true);
        assert_eq!(
            out.iter().map(|(_, sequence, kind, _)| (*sequence, *kind)).collect::<Vec<_>>(),
            vec![(9, ValueKind::Merge), (7, ValueKind::Merge), (5, ValueKind::Put)]
        );
    }
}
