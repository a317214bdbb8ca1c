//! The merging iterator: one ordered stream of internal keys built from many sorted sources.
//!
//! [`MergingIterator`] owns its children (memtable, table and level iterators, newest source
//! first) and yields the union of their entries in internal-key order under the column family's
//! comparator, which every child follows too. It keeps a binary heap of
//! child indexes: a min-heap while moving forward and a max-heap while moving backward, so each
//! step costs one child step plus `O(log n)` comparisons of borrowed key slices and allocates
//! nothing. Changing direction repositions every other child around the current key, which costs
//! one seek per child and a single copy of the current key into a reused buffer.
//!
//! Concurrency contract: like every [`InternalIterator`], it is used by one thread at a time.
//!
//! Invariants: the stream is totally ordered by `(internal key, child index)`, so the rare case of
//! an internal key present in two sources yields the earlier (newer) child first when moving
//! forward and last when moving backward, and both directions visit the same sequence. While
//! valid, the heap holds exactly the valid children that are not pending, its top is the current
//! entry, and every other child is positioned on its first entry after (forward) or last entry
//! before (backward) the current one. A pending child (left unpositioned by `seek_for_entry`,
//! only while moving forward) holds no entry of the current user key at or after the seek's
//! target, or only entries older than the current one, and is positioned before the stream
//! moves (I49). Once a child reports an error the
//! merging iterator becomes invalid for good and `status()` returns that error: skipping the
//! failed source silently could resurrect deleted keys.

use std::cmp::Ordering;
use std::ops::Range;

use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{self, TRAILER_SIZE_BYTES};

use smallvec::SmallVec;

/// The direction of the last movement, which decides how the heap is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// Merges sorted children into one sorted stream; see the module documentation.
pub(crate) struct MergingIterator {
    /// The sources, newest first.
    children: Vec<Box<dyn InternalIterator>>,
    /// Indexes of the valid children, heap-ordered for `direction`; the top is the current entry.
    heap: SmallVec<[usize; INLINE_CHILDREN]>,
    direction: Direction,
    /// The current key, copied when the direction changes; kept to reuse its allocation.
    saved_key: Vec<u8>,
    /// The first child error met; once set the iterator stays invalid.
    error: Option<Error>,
    /// The order of the children's keys.
    comparator: KeyComparator,
    /// The largest sequence number each child can hold, for `skip_older_forward` and for the
    /// sources a landed `seek_for_entry` leaves pending as older (I49); empty when unknown
    /// (then no child is skipped or left pending for its age).
    child_max_sequences: SequenceBounds,
    /// Children `seek_for_entry` left unpositioned (I49), each with whether its position is
    /// still one `seek_forward` may start from; they are positioned at `pending_target` (or a
    /// later target) before the stream moves. Empty while moving backward.
    pending: ChildList,
    /// The target of the `seek_for_entry` that left children pending.
    pending_target: Vec<u8>,
    /// Scratch list of the children a `seek_for_entry` moves, kept for its allocation.
    movers: ChildList,
    /// How well asking filters first has paid lately, from 0 to [`PROBE_CREDIT_MAX`]:
    /// `seek_for_entry` asks them only while it is positive. It rises when a seek landed on
    /// its key and the next seek came before any movement (children left pending were never
    /// positioned), and falls when the stream moved after such a seek (they had to be
    /// positioned after all) or when a seek's key was in no child (every filter was asked for
    /// nothing). Scans and seeks of absent keys then pay no probes.
    probe_credit: u8,
    /// The last `seek_for_entry` landed on its key and nothing has moved the stream since.
    seek_landed: bool,
    /// The children whose entries a compaction of level 0 merges (the level-0 tables and the
    /// level it writes into), for [`InternalIterator::seek_forward_past_versions`]; empty
    /// unless the caller says.
    compactable: Range<usize>,
    /// The child that reads the active memtable, whose passed versions are counted
    /// ([`InternalIterator::take_skipped_versions`]); `None` unless the caller says.
    memtable_child: Option<usize>,
    /// The memtable child's passed versions gathered by `seek_forward_counting`.
    skipped_versions: u64,
    /// The child the last `next` stepped from: the source of the entry read before it.
    stepped_from: Option<usize>,
}

/// Children a merge keeps its per-child lists for without allocating: a merge is built per
/// query, and each list allocated on the heap measured as a percent or more of a fresh seek.
const INLINE_CHILDREN: usize = 8;

/// The largest sequence number each child of a merge can hold, in child order.
pub(crate) type SequenceBounds = SmallVec<[u64; INLINE_CHILDREN]>;

/// A list of children with, for each, whether its position is one `seek_forward` may start
/// from.
type ChildList = SmallVec<[(usize, bool); INLINE_CHILDREN]>;

/// The most credit `probe_credit` holds; a new iterator starts with one.
const PROBE_CREDIT_MAX: u8 = 3;

impl MergingIterator {
    /// Creates an unpositioned iterator over `children`, which are ordered newest source first
    /// and each sorted by `comparator`.
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>, comparator: KeyComparator) -> MergingIterator {
        let heap = SmallVec::with_capacity(children.len());
        MergingIterator {
            children,
            heap,
            direction: Direction::Forward,
            saved_key: Vec::new(),
            error: None,
            comparator,
            child_max_sequences: SequenceBounds::default(),
            pending: ChildList::new(),
            pending_target: Vec::new(),
            movers: ChildList::new(),
            probe_credit: 1,
            seek_landed: false,
            compactable: 0..0,
            memtable_child: None,
            skipped_versions: 0,
            stepped_from: None,
        }
    }

    /// Names the child that reads the active memtable, so that the older versions it passes
    /// inside itself are counted (`take_skipped_versions`).
    pub(crate) fn set_memtable_child(&mut self, child: usize) {
        debug_assert!(child < self.children.len());
        self.memtable_child = Some(child);
    }

    /// Names the children whose entries a compaction of level 0 would merge (the level-0
    /// tables and the level below them), so that passing older versions held by them is
    /// counted (`seek_forward_past_versions`).
    pub(crate) fn set_compactable_children(&mut self, compactable: Range<usize>) {
        debug_assert!(compactable.end <= self.children.len());
        self.compactable = compactable;
    }

    /// `seek_forward`, returning how many of the children it moved are compactable.
    fn seek_forward_counting(&mut self, target: &[u8]) -> u64 {
        if self.error.is_some() {
            return 0;
        }
        if self.direction != Direction::Forward {
            self.seek(target);
            return 0;
        }
        self.note_movement();
        if !self.pending.is_empty() {
            self.position_pending(Some(target));
        }
        let mut compactable_moved = 0;
        // Only the children still before the target move, each once and from where it stands
        // (every other child is already at its first entry at or after the target); the heap is
        // repaired after each, so its top is always the least child left to move.
        while let Some(&top) = self.heap.first() {
            if self.comparator.compare_internal_keys(self.children[top].key(), target).is_ge() {
                break;
            }
            if self.compactable.contains(&top) {
                compactable_moved += 1;
            }
            self.children[top].seek_forward(target);
            if self.memtable_child == Some(top) {
                self.skipped_versions += self.children[top].take_skipped_versions();
            }
            self.repair_top();
        }
        compactable_moved
    }

    /// Called when the stream moves or is positioned otherwise than by `seek_for_entry`: if the
    /// last such seek landed on its key, leaving children pending did not spare them. (Children
    /// are pending only while `seek_landed` is set.)
    #[inline]
    fn note_movement(&mut self) {
        if self.seek_landed {
            self.seek_landed = false;
            self.probe_credit = self.probe_credit.saturating_sub(1);
        }
    }

    /// Tells the iterator the largest sequence number each child (in order) can hold, so that
    /// `skip_older_forward` can move the children that only hold older entries, and a seek that
    /// lands on its key can leave them unpositioned (`position_for_entry`).
    pub(crate) fn set_child_max_sequences(&mut self, max_sequences: SequenceBounds) {
        debug_assert_eq!(max_sequences.len(), self.children.len());
        self.child_max_sequences = max_sequences;
    }

    /// Records the error of `child` if it has one and no earlier error was recorded.
    fn note_child_status(&mut self, child: usize) {
        if self.error.is_none() {
            if let Err(error) = self.children[child].status() {
                self.error = Some(error);
            }
        }
    }

    /// Rebuilds the heap from every valid child after a seek or a change of direction
    /// (pending children stay out of it).
    fn rebuild_heap(&mut self, direction: Direction) {
        self.direction = direction;
        self.heap.clear();
        for child in 0..self.children.len() {
            if self.pending.iter().any(|&(pending, _)| pending == child) {
                continue;
            }
            if self.children[child].valid() {
                self.heap.push(child);
            } else {
                self.note_child_status(child);
            }
        }
        if self.error.is_some() {
            self.heap.clear();
            return;
        }
        for position in (0..self.heap.len() / 2).rev() {
            sift_down(&mut self.heap, &self.children, &self.comparator, direction, position);
        }
    }

    /// Positions `child` at its first entry at or after `target`, from where it stands when
    /// `from_here` (the caller keeps `seek_forward`'s contract).
    fn position_child(&mut self, child: usize, target: &[u8], from_here: bool) {
        let iterator = &mut self.children[child];
        if from_here {
            iterator.seek_forward(target);
        } else {
            iterator.seek(target);
        }
    }

    /// Positions the children `seek_for_entry` left pending at their first entry at or after
    /// `target` (the pending target when `None`; a later target must not be before the current
    /// entry), then rebuilds the heap. Their entries all come after the current one (I49), so
    /// the current entry stays on top.
    fn position_pending(&mut self, target: Option<&[u8]>) {
        let target_buffer = std::mem::take(&mut self.pending_target);
        let target = target.unwrap_or(&target_buffer);
        // By index: the list lives inline, and taking it out would copy it twice.
        for index in 0..self.pending.len() {
            let (child, from_here) = self.pending[index];
            self.position_child(child, target, from_here);
        }
        self.pending.clear();
        self.pending_target = target_buffer;
        self.rebuild_heap(Direction::Forward);
    }

    /// `seek_for_entry` from where the merge stands with nothing pending: the children still
    /// before the target move in heap order, as in `seek_forward`, except those whose filters
    /// rule the key out (when `probe`), which leave the heap and become pending.
    fn advance_for_entry(&mut self, target: &[u8], user_key: &[u8], probe: bool) {
        while let Some(&top) = self.heap.first() {
            let iterator = &self.children[top];
            if self.comparator.compare_internal_keys(iterator.key(), target).is_ge() {
                break;
            }
            if probe && rules_out(iterator.as_ref(), target, user_key, true) {
                self.remove_top();
                self.pending.push((top, true));
                continue;
            }
            self.children[top].seek_forward(target);
            self.repair_top();
        }
    }

    /// `seek_for_entry` as a seek of every child (or, `from_here`, of the pending children and
    /// those still before the target), positioning first those that may hold the key: the
    /// others (when `probe`) become pending.
    ///
    /// Newest sources go first: once one lands on an entry of the key, a source whose entries
    /// are all older than it (`child_max_sequences`) holds nothing the seek reads first, whatever
    /// its filter says (an older version of the key comes after the one found), so it becomes
    /// pending without a probe. A key rewritten often, in several level-0 tables, then costs
    /// the search of one table instead of each.
    fn position_for_entry(&mut self, target: &[u8], user_key: &[u8], probe: bool, from_here: bool) {
        // The list of movers is used in place (by index below): it lives inline, and taking it
        // out of `self` would copy it twice.
        self.movers.clear();
        if from_here {
            self.movers.extend(self.pending.drain(..));
            for &child in &self.heap {
                if self.comparator.compare_internal_keys(self.children[child].key(), target).is_lt() {
                    self.movers.push((child, true));
                }
            }
            self.movers.sort_unstable_by_key(|&(child, _)| child);
        } else {
            self.pending.clear();
            self.movers.extend((0..self.children.len()).map(|child| (child, false)));
        }
        // The sequence of the newest entry of the key a positioned source stands on.
        let mut landed_sequence: Option<u64> = None;
        for index in 0..self.movers.len() {
            let (child, child_from_here) = self.movers[index];
            if probe {
                let older = landed_sequence
                    .is_some_and(|landed| self.child_max_sequences.get(child).is_some_and(|&max| max < landed));
                if older || rules_out(self.children[child].as_ref(), target, user_key, child_from_here) {
                    self.pending.push((child, child_from_here));
                    continue;
                }
            }
            self.position_child(child, target, child_from_here);
            if probe && !self.child_max_sequences.is_empty() {
                let iterator = &self.children[child];
                if iterator.valid() && key::user_key(iterator.key()) == user_key {
                    let sequence = key::sequence(iterator.key());
                    landed_sequence = Some(landed_sequence.map_or(sequence, |landed| landed.max(sequence)));
                }
            }
        }
        self.rebuild_heap(Direction::Forward);
    }

    /// Restores the heap after the current (top) child has moved one step.
    fn repair_top(&mut self) {
        let top = self.heap[0];
        if self.children[top].valid() {
            sift_down(&mut self.heap, &self.children, &self.comparator, self.direction, 0);
            return;
        }
        self.note_child_status(top);
        if self.error.is_some() {
            self.heap.clear();
            return;
        }
        self.remove_top();
    }

    /// Takes the top child out of the heap (exhausted, or left pending) and restores the heap.
    fn remove_top(&mut self) {
        self.heap.swap_remove(0);
        if !self.heap.is_empty() {
            sift_down(&mut self.heap, &self.children, &self.comparator, self.direction, 0);
        }
    }

    /// `skip_older_forward` and `skip_older_backward`: while moving in `direction`, every child
    /// whose entries are all older than `older_than` and that has not yet passed `target` moves
    /// to its first entry at or after `target` (forward) or its last entry before it
    /// (backward). Every valid child then still sits on the caller's side of the entry it stood
    /// on (children only move further in `direction`), so a heap rebuilt for `direction` keeps
    /// the invariants.
    fn skip_older(&mut self, direction: Direction, older_than: u64, target: &[u8]) {
        if self.error.is_some() || self.direction != direction || self.child_max_sequences.is_empty() {
            return;
        }
        self.note_movement();
        if !self.pending.is_empty() {
            self.position_pending(None);
        }
        let mut moved = false;
        for position in 0..self.heap.len() {
            let child = self.heap[position];
            let older = self.child_max_sequences.get(child).is_some_and(|&max| max < older_than);
            if !older {
                continue;
            }
            let order = self.comparator.compare_internal_keys(self.children[child].key(), target);
            let iterator = &mut self.children[child];
            match direction {
                Direction::Forward if order.is_lt() => iterator.seek(target),
                Direction::Backward if order.is_ge() => {
                    // The last entry before `target`: a seek lands on the first at or after it.
                    iterator.seek(target);
                    if iterator.valid() {
                        iterator.prev();
                    } else if iterator.status().is_ok() {
                        iterator.seek_to_last();
                    }
                }
                _ => continue,
            }
            moved = true;
        }
        if moved {
            self.rebuild_heap(direction);
        }
    }

    /// Copies the current key into `saved_key` so children can be repositioned around it.
    fn save_current_key(&mut self, current: usize) {
        self.saved_key.clear();
        self.saved_key.extend_from_slice(self.children[current].key());
    }

    /// Positions every child other than `current` on its first entry after the current one in
    /// the `(key, child index)` order, then rebuilds the heap for forward movement.
    fn switch_to_forward(&mut self, current: usize) {
        if self.children.len() > 1 {
            self.save_current_key(current);
            for child in 0..self.children.len() {
                if child == current {
                    continue;
                }
                let iterator = &mut self.children[child];
                iterator.seek(&self.saved_key);
                // An equal key in an earlier child sorts before the current entry, so it has
                // already been visited; in a later child it sorts after, so it comes next.
                if child < current
                    && iterator.valid()
                    && self.comparator.compare_internal_keys(iterator.key(), &self.saved_key) == Ordering::Equal
                {
                    iterator.next();
                }
            }
        }
        self.rebuild_heap(Direction::Forward);
    }

    /// Positions every child other than `current` on its last entry before the current one in
    /// the `(key, child index)` order, then rebuilds the heap for backward movement.
    ///
    /// A child is positioned with a seek to the current key and steps back until it is before
    /// the current entry: usually one step, but the active memtable can gain entries between
    /// the seek and the step (writers insert while readers read), and the step back can then
    /// land on a new entry above the current key. Stopping there would leave the child ahead
    /// of the current entry, so the heap's top would not be the child `prev` moves and the
    /// stream would go out of order (the regression test
    /// `turning_backward_stays_below_the_current_entry_when_a_source_grows` tells the story; I26).
    /// Each further step back goes strictly lower, so the loop ends.
    fn switch_to_backward(&mut self, current: usize) {
        if self.children.len() > 1 {
            self.save_current_key(current);
            for child in 0..self.children.len() {
                if child == current {
                    continue;
                }
                let iterator = &mut self.children[child];
                iterator.seek(&self.saved_key);
                if !iterator.valid() {
                    iterator.seek_to_last();
                }
                while iterator.valid() {
                    // An equal key in an earlier child sorts before the current entry, so it is
                    // the child's last entry before it; in a later child it sorts after.
                    let order = self.comparator.compare_internal_keys(iterator.key(), &self.saved_key);
                    if order == Ordering::Less || (order == Ordering::Equal && child < current) {
                        break;
                    }
                    iterator.prev();
                }
            }
        }
        self.rebuild_heap(Direction::Backward);
    }
}

/// True when `seek_for_entry` may leave `child` pending: its filter rules out `user_key`. A
/// child moving `from_here` that reaches `target` within its current block is moved instead,
/// since the step costs less than the probe.
fn rules_out(child: &dyn InternalIterator, target: &[u8], user_key: &[u8], from_here: bool) -> bool {
    if from_here && child.reaches_cheaply(target) {
        return false;
    }
    !child.may_contain_user_key(user_key)
}

/// True when child `a` must be yielded before child `b` when moving in `direction`.
#[inline]
fn comes_first(
    children: &[Box<dyn InternalIterator>],
    comparator: &KeyComparator,
    direction: Direction,
    a: usize,
    b: usize,
) -> bool {
    let order = comparator.compare_internal_keys(children[a].key(), children[b].key()).then(a.cmp(&b));
    match direction {
        Direction::Forward => order == Ordering::Less,
        Direction::Backward => order == Ordering::Greater,
    }
}

/// Moves the entry at `position` down until both of its heap children come after it.
fn sift_down(
    heap: &mut [usize],
    children: &[Box<dyn InternalIterator>],
    comparator: &KeyComparator,
    direction: Direction,
    mut position: usize,
) {
    loop {
        let left = 2 * position + 1;
        if left >= heap.len() {
            return;
        }
        let right = left + 1;
        let mut first = left;
        if right < heap.len() && comes_first(children, comparator, direction, heap[right], heap[left]) {
            first = right;
        }
        if !comes_first(children, comparator, direction, heap[first], heap[position]) {
            return;
        }
        heap.swap(position, first);
        position = first;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.note_movement();
        self.pending.clear();
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.note_movement();
        self.pending.clear();
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.rebuild_heap(Direction::Backward);
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        self.note_movement();
        self.pending.clear();
        for child in &mut self.children {
            child.seek(target);
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn next(&mut self) {
        assert!(self.valid(), "MergingIterator::next called on an invalid iterator");
        // Children are pending only after a seek that landed (I49): one test on the step path.
        debug_assert!(self.pending.is_empty() || self.seek_landed);
        if self.seek_landed {
            self.note_movement();
            if !self.pending.is_empty() {
                self.position_pending(None);
                // A pending child's error ends the stream.
                if self.heap.is_empty() {
                    return;
                }
            }
        }
        let current = self.heap[0];
        if self.direction == Direction::Backward {
            self.switch_to_forward(current);
            // The current child is still on the current entry and now at the heap top, because
            // every other child sits after it; moving it is the step itself.
            if self.heap.is_empty() {
                return;
            }
            debug_assert_eq!(self.heap[0], current);
        }
        self.stepped_from = Some(current);
        self.children[current].next();
        self.repair_top();
    }

    fn prev(&mut self) {
        assert!(self.valid(), "MergingIterator::prev called on an invalid iterator");
        self.note_movement();
        let current = self.heap[0];
        if self.direction == Direction::Forward {
            // Turning positions every other child anew, pending ones included.
            self.pending.clear();
            self.switch_to_backward(current);
            if self.heap.is_empty() {
                return;
            }
            // Every other child now sits before the current entry (see `switch_to_backward`).
            debug_assert_eq!(self.heap[0], current);
        }
        self.children[current].prev();
        self.repair_top();
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        self.heap.first().map_or(&[][..], |&child| self.children[child].key())
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        self.heap.first().map_or(&[][..], |&child| self.children[child].value())
    }

    fn seek_forward(&mut self, target: &[u8]) {
        self.seek_forward_counting(target);
    }

    fn take_skipped_versions(&mut self) -> u64 {
        std::mem::take(&mut self.skipped_versions)
    }

    fn seek_forward_past_versions(&mut self, target: &[u8]) -> u64 {
        let stepped_from = self.stepped_from.take();
        let moved = self.seek_forward_counting(target);
        // A compaction leaves one version of the key in its output: when the version read came
        // from elsewhere (a memtable, a deeper level), one of those passed here would remain.
        if stepped_from.is_some_and(|child| self.compactable.contains(&child)) {
            moved
        } else {
            moved.saturating_sub(1)
        }
    }

    /// A seek (or, when `from_here`, a `seek_forward`) that positions first the children that
    /// may hold the target's user key, asking the others' filters. When a child lands on that
    /// user key, the children whose filters ruled it out stay pending: every entry they hold
    /// at or after the target has a larger user key, so it comes after the entry found, and
    /// they are positioned only if the stream moves (I49). A seek that only reads the entry it
    /// lands on (a point lookup through an index, a read of one key) then positions the
    /// sources that hold the key and no others.
    fn seek_for_entry(&mut self, target: &[u8], from_here: bool) {
        if self.error.is_some() {
            return;
        }
        if self.seek_landed {
            // The last seek read only the entry it landed on.
            self.probe_credit = (self.probe_credit + 1).min(PROBE_CREDIT_MAX);
            self.seek_landed = false;
        }
        let from_here = from_here && self.direction == Direction::Forward;
        // A target the current entry's source reaches within its block (the next key of an
        // ascending walk): the other sources are near it too, and steps cost less than probes.
        let near = from_here && self.heap.first().is_some_and(|&top| self.children[top].reaches_cheaply(target));
        let probe = self.probe_credit > 0 && !near;
        let user_key = &target[..target.len().saturating_sub(TRAILER_SIZE_BYTES)];
        if near && self.pending.is_empty() {
            // Nothing to learn or leave pending: move as `seek_forward` does.
            self.advance_for_entry(target, user_key, false);
            return;
        }
        // Sources that say how new their entries are move newest first (`position_for_entry`),
        // so that a landing spares the older ones; otherwise they move in heap order.
        let newest_first = probe && !self.child_max_sequences.is_empty();
        if from_here && self.pending.is_empty() && !newest_first {
            self.advance_for_entry(target, user_key, probe);
        } else {
            self.position_for_entry(target, user_key, probe, from_here);
        }
        // Pending children hold no entry of the key, so a positioned child on the key would be
        // on top. Keys that compare equal are byte-identical (the comparator's contract).
        let found = self.heap.first().is_some_and(|&top| key::user_key(self.children[top].key()) == user_key);
        if !self.pending.is_empty() {
            if found {
                self.pending_target.clear();
                self.pending_target.extend_from_slice(target);
            } else {
                // Nothing stands on the key: the first entry may come from any child.
                self.position_pending(Some(target));
            }
        }
        self.seek_landed = found;
        if !found {
            self.probe_credit = self.probe_credit.saturating_sub(1);
        }
    }

    fn skip_older_forward(&mut self, older_than: u64, target: &[u8]) {
        self.skip_older(Direction::Forward, older_than, target);
    }

    fn skip_older_backward(&mut self, older_than: u64, target: &[u8]) {
        self.skip_older(Direction::Backward, older_than, target);
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(error) => Err(error.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // Test tables of entries are clearer spelled out.
pub(crate) mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::{compare_internal_keys, make_internal_key, ValueKind, MAX_SEQUENCE_NUMBER};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// An iterator over sorted entries that fails with a corruption error after a given number
    /// of positioning calls, to test error propagation.
    pub(crate) struct FailingIterator {
        inner: VecIterator,
        calls_before_failure: usize,
        failed: bool,
    }

    impl FailingIterator {
        pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>, calls_before_failure: usize) -> FailingIterator {
            FailingIterator { inner: VecIterator::new(entries), calls_before_failure, failed: false }
        }

        /// Counts one positioning call and reports whether the iterator has now failed.
        fn tick(&mut self) -> bool {
            if self.calls_before_failure == 0 {
                self.failed = true;
            } else {
                self.calls_before_failure -= 1;
            }
            self.failed
        }
    }

    impl InternalIterator for FailingIterator {
        fn valid(&self) -> bool {
            !self.failed && self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            if !self.tick() {
                self.inner.seek_to_first();
            }
        }
        fn seek_to_last(&mut self) {
            if !self.tick() {
                self.inner.seek_to_last();
            }
        }
        fn seek(&mut self, target: &[u8]) {
            if !self.tick() {
                self.inner.seek(target);
            }
        }
        fn next(&mut self) {
            if !self.tick() {
                self.inner.next();
            }
        }
        fn prev(&mut self) {
            if !self.tick() {
                self.inner.prev();
            }
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            if self.failed {
                Err(Error::corruption("failing-test-iterator", 7, "injected failure"))
            } else {
                Ok(())
            }
        }
    }

    /// A random internal key over a small alphabet so that sources share user keys.
    pub(crate) fn random_internal_key(rng: &mut SmallRng) -> Vec<u8> {
        let length = rng.gen_range(0..=3);
        let user_key: Vec<u8> = (0..length).map(|_| b"abc"[rng.gen_range(0..3)]).collect();
        let kind = if rng.gen_bool(0.5) { ValueKind::Put } else { ValueKind::Delete };
        make_internal_key(&user_key, rng.gen_range(0..20), kind)
    }

    /// Drives `iterator` through `steps` random operations and checks every position against
    /// `expected`, a sorted vector of the entries the iterator must yield (duplicates allowed).
    pub(crate) fn walk_and_compare(
        iterator: &mut dyn InternalIterator,
        expected: &[(Vec<u8>, Vec<u8>)],
        rng: &mut SmallRng,
        steps: usize,
    ) {
        let mut position: Option<usize> = None;
        // Whether the last movement went forward (a seek counts), which `seek_forward` needs.
        let mut moving_forward = false;
        for step in 0..steps {
            let choice = rng.gen_range(0..12);
            let operation;
            if position.is_some() && choice < 4 {
                operation = "next";
                iterator.next();
                position = position.and_then(|p| (p + 1 < expected.len()).then_some(p + 1));
                moving_forward = true;
            } else if position.is_some() && choice < 7 {
                operation = "prev";
                iterator.prev();
                position = position.and_then(|p| p.checked_sub(1));
                moving_forward = false;
            } else if let (Some(current), true, true) = (position, moving_forward, choice < 10) {
                operation = "seek_forward";
                // A target at or after the current entry: a later entry's key (usually a near
                // one, as a scan skipping versions asks for), or just past its user key's
                // versions (a byte appended to the user key).
                let index = (current + rng.gen_range(0..12)).min(expected.len() - 1);
                let mut target = expected[index].0.clone();
                // Strictly after the current entry: with a key present in two sources, the
                // current entry may be the second of the pair.
                if rng.gen_bool(0.3) || compare_internal_keys(&target, &expected[current].0).is_le() {
                    let split = target.len() - crate::key::TRAILER_SIZE_BYTES;
                    target.insert(split, 0);
                }
                if rng.gen_bool(0.5) {
                    iterator.seek_forward(&target);
                } else {
                    iterator.seek_for_entry(&target, true);
                }
                let found = expected.partition_point(|(key, _)| compare_internal_keys(key, &target).is_lt());
                position = (found < expected.len()).then_some(found);
            } else if choice < 10 {
                operation = "seek";
                moving_forward = true;
                let target = if !expected.is_empty() && rng.gen_bool(0.5) {
                    expected[rng.gen_range(0..expected.len())].0.clone()
                } else {
                    random_internal_key(rng)
                };
                if rng.gen_bool(0.5) {
                    iterator.seek(&target);
                } else {
                    iterator.seek_for_entry(&target, false);
                }
                let index = expected.partition_point(|(key, _)| compare_internal_keys(key, &target).is_lt());
                position = (index < expected.len()).then_some(index);
            } else if rng.gen_bool(0.5) {
                operation = "seek_to_first";
                iterator.seek_to_first();
                position = (!expected.is_empty()).then_some(0);
                moving_forward = true;
            } else {
                operation = "seek_to_last";
                iterator.seek_to_last();
                position = expected.len().checked_sub(1);
                moving_forward = false;
            }
            assert_eq!(iterator.valid(), position.is_some(), "validity after {operation} at step {step}");
            if let Some(index) = position {
                assert_eq!(iterator.key(), &expected[index].0[..], "key after {operation} at step {step}");
                assert_eq!(iterator.value(), &expected[index].1[..], "value after {operation} at step {step}");
            }
            assert!(iterator.status().is_ok());
        }
    }

    /// Builds `source_count` sorted sources from random keys; with `allow_duplicates` a key may
    /// appear in several sources. Returns the sources and the expected merged stream, ordered by
    /// key and then by source index.
    fn random_sources(
        rng: &mut SmallRng,
        source_count: usize,
        allow_duplicates: bool,
    ) -> (Vec<Vec<(Vec<u8>, Vec<u8>)>>, Vec<(Vec<u8>, Vec<u8>)>) {
        let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(0..60)).map(|_| random_internal_key(rng)).collect();
        keys.sort_by(|a, b| compare_internal_keys(a, b));
        keys.dedup();
        let mut sources = vec![Vec::new(); source_count];
        let mut union = Vec::new();
        for (key_index, key) in keys.iter().enumerate() {
            let single_source = rng.gen_range(0..source_count);
            for (source_index, source) in sources.iter_mut().enumerate() {
                let chosen = if allow_duplicates { rng.gen_bool(0.4) } else { source_index == single_source };
                if chosen {
                    let value = format!("{source_index}:{key_index}").into_bytes();
                    source.push((key.clone(), value.clone()));
                    union.push((source_index, key.clone(), value));
                }
            }
        }
        union.sort_by(|a, b| compare_internal_keys(&a.1, &b.1).then(a.0.cmp(&b.0)));
        let expected = union.into_iter().map(|(_, key, value)| (key, value)).collect();
        (sources, expected)
    }

    /// A source with a filter, counting the seeks it is given: it answers
    /// `may_contain_user_key` exactly, or (with `false_positives`) also says "maybe" for user
    /// keys of even length it does not hold, as a bloom filter may, and claims to reach every
    /// target cheaply.
    pub(crate) struct FilteredIterator {
        inner: VecIterator,
        user_keys: std::collections::BTreeSet<Vec<u8>>,
        false_positives: bool,
        seeks: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl FilteredIterator {
        pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>, false_positives: bool) -> FilteredIterator {
            let user_keys = entries.iter().map(|(key, _)| crate::key::user_key(key).to_vec()).collect();
            FilteredIterator {
                inner: VecIterator::new(entries),
                user_keys,
                false_positives,
                seeks: std::sync::Arc::default(),
            }
        }
    }

    impl InternalIterator for FilteredIterator {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.inner.seek_to_first();
        }
        fn seek_to_last(&mut self) {
            self.inner.seek_to_last();
        }
        fn seek(&mut self, target: &[u8]) {
            self.seeks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.seek(target);
        }
        fn seek_forward(&mut self, target: &[u8]) {
            self.seeks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Only from a position before the target, reached moving forward.
            assert!(!self.inner.valid() || compare_internal_keys(self.inner.key(), target).is_le());
            self.inner.seek(target);
        }
        fn next(&mut self) {
            self.inner.next();
        }
        fn prev(&mut self) {
            self.inner.prev();
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            self.inner.status()
        }
        fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
            self.user_keys.contains(user_key) || (self.false_positives && user_key.len().is_multiple_of(2))
        }
        fn reaches_cheaply(&self, _target: &[u8]) -> bool {
            // Sources with false positives also step rather than answer, whenever they can.
            self.false_positives && self.inner.valid()
        }
    }

    /// A merge of `sources`, some with filters; half the time it is also told each source's
    /// largest sequence (the true one, a larger bound, or no bound at all), so that seeks leave
    /// sources older than the entry they land on pending.
    fn filtered_merge_of(sources: Vec<Vec<(Vec<u8>, Vec<u8>)>>, rng: &mut SmallRng) -> MergingIterator {
        let max_sequences: Vec<u64> = sources
            .iter()
            .map(|entries| {
                let largest = entries.iter().map(|(key, _)| crate::key::sequence(key)).max().unwrap_or(0);
                match rng.gen_range(0..4) {
                    0 => u64::MAX,
                    1 => largest + rng.gen_range(1..5),
                    _ => largest,
                }
            })
            .collect();
        let children: Vec<Box<dyn InternalIterator>> = sources
            .into_iter()
            .map(|entries| match rng.gen_range(0..3) {
                0 => Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>,
                choice => Box::new(FilteredIterator::new(entries, choice == 2)),
            })
            .collect();
        let mut merge = MergingIterator::new(children, KeyComparator::Bytewise);
        if rng.gen_bool(0.5) {
            merge.set_child_max_sequences(max_sequences.into());
        }
        merge
    }

    /// Sources that answer for their keys make seeks leave some of them pending (I49); every
    /// movement after such a seek (next, prev, a seek forward, another seek) must read as if
    /// all had been positioned, with and without keys in several sources.
    #[test]
    fn random_walks_with_filtered_sources_match_reference() {
        let mut rng = SmallRng::seed_from_u64(15);
        for round in 0..1200 {
            let source_count = rng.gen_range(1..7);
            let (sources, expected) = random_sources(&mut rng, source_count, round % 2 == 0);
            let mut merge = filtered_merge_of(sources, &mut rng);
            walk_and_compare(&mut merge, &expected, &mut rng, 80);
        }
    }

    /// A put of `user_key` at `sequence` whose value names both ("b@9").
    fn labelled_entry(user_key: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        let value = format!("{}@{sequence}", user_key[0] as char).into_bytes();
        (make_internal_key(user_key, sequence, ValueKind::Put), value)
    }

    type SeekCounters = Vec<std::sync::Arc<std::sync::atomic::AtomicUsize>>;

    /// A merge of `sources`, each behind an exact filter, and the counters of the seeks each
    /// source is given.
    fn counted_merge(sources: Vec<Vec<(Vec<u8>, Vec<u8>)>>) -> (MergingIterator, SeekCounters) {
        let children: Vec<FilteredIterator> =
            sources.into_iter().map(|entries| FilteredIterator::new(entries, false)).collect();
        let counters = children.iter().map(|child| std::sync::Arc::clone(&child.seeks)).collect();
        let boxed = children.into_iter().map(|child| Box::new(child) as Box<dyn InternalIterator>).collect();
        (MergingIterator::new(boxed, KeyComparator::Bytewise), counters)
    }

    fn seek_counts(counters: &SeekCounters) -> Vec<usize> {
        counters.iter().map(|counter| counter.load(std::sync::atomic::Ordering::Relaxed)).collect()
    }

    /// A seek for an entry positions only the sources that may hold its key when one of them
    /// does, and the rest as soon as the stream moves; once seeks stop paying for the filter
    /// probes (the stream moves after them, or the key is absent) it positions every source,
    /// and it probes again after a seek that read only its entry.
    #[test]
    fn a_seek_for_an_entry_positions_only_the_sources_that_may_hold_its_key() {
        let entry = labelled_entry;
        let sources =
            vec![vec![entry(b"b", 9), entry(b"d", 8)], vec![entry(b"a", 3), entry(b"c", 2)], vec![entry(b"e", 1)]];
        let (mut merge, counters) = counted_merge(sources);
        let seeks = || seek_counts(&counters);
        let target = |user_key: &[u8]| make_internal_key(user_key, MAX_SEQUENCE_NUMBER, ValueKind::Put);

        merge.seek_for_entry(&target(b"c"), false);
        assert_eq!(merge.value(), b"c@2");
        assert_eq!(seeks(), vec![0, 1, 0], "only the source holding c was positioned");
        merge.next();
        assert_eq!(merge.value(), b"d@8");
        assert_eq!(seeks(), vec![1, 1, 1], "moving on positions the others");
        merge.next();
        assert_eq!(merge.value(), b"e@1");

        // The stream moved after the seek: the next seek asks no filter.
        merge.seek_for_entry(&target(b"c"), false);
        assert_eq!(merge.value(), b"c@2");
        assert_eq!(seeks(), vec![2, 2, 2]);
        // That seek read only its entry: this one asks the filters again. From where the
        // merge stands, only sources before the target that may hold its key move.
        merge.seek_for_entry(&target(b"d"), true);
        assert_eq!(merge.value(), b"d@8");
        assert_eq!(seeks(), vec![2, 2, 2], "d's source already stood on it; c's was left pending");
        merge.prev();
        assert_eq!(merge.value(), b"c@2", "turning back positions the pending source");
        merge.prev();
        assert_eq!(merge.value(), b"b@9");
        assert_eq!(seeks(), vec![2, 3, 3], "turning back positions every source but the current one");

        // A key no source holds: every source is positioned, the seek lands after it, and the
        // filters are not asked again until a seek reads only its entry.
        merge.seek_for_entry(&target(b"a"), false);
        merge.seek_for_entry(&target(b"bb"), false);
        assert_eq!(merge.value(), b"c@2");
        merge.seek_for_entry(&target(b"e"), false);
        assert_eq!(merge.value(), b"e@1");
        assert_eq!(seeks(), vec![5, 6, 6]);
        merge.seek_for_entry(&target(b"b"), false);
        assert_eq!(merge.value(), b"b@9");
        assert_eq!(seeks(), vec![6, 6, 6]);
    }

    /// A key rewritten in several sources: a seek for it positions the newest source that may
    /// hold it and, once that one lands on the key, none of the sources whose entries are all
    /// older, although their filters say they hold the key too; moving on positions them, and
    /// the older versions follow the one found.
    #[test]
    fn a_seek_that_lands_in_a_newer_source_leaves_the_older_ones_pending() {
        let entry = labelled_entry;
        let sources = vec![
            vec![entry(b"a", 30)],
            vec![entry(b"b", 22), entry(b"c", 21)],
            vec![entry(b"b", 12), entry(b"d", 11)],
            vec![entry(b"b", 2), entry(b"c", 1)],
        ];
        let max_sequences = vec![u64::MAX, 22, 12, 2];
        let (mut merge, counters) = counted_merge(sources);
        merge.set_child_max_sequences(max_sequences.into());
        let seeks = || seek_counts(&counters);
        let target = |user_key: &[u8], sequence: u64| make_internal_key(user_key, sequence, ValueKind::Put);

        merge.seek_for_entry(&target(b"b", MAX_SEQUENCE_NUMBER), false);
        assert_eq!(merge.value(), b"b@22");
        assert_eq!(seeks(), vec![0, 1, 0, 0], "the sources older than b@22 were left pending");
        let mut rest = Vec::new();
        merge.next();
        while merge.valid() {
            rest.push(String::from_utf8(merge.value().to_vec()).unwrap());
            merge.next();
        }
        assert_eq!(rest, ["b@12", "b@2", "c@21", "c@1", "d@11"]);
        assert_eq!(seeks(), vec![1, 1, 1, 1], "moving on positioned the others");

        // The stream moved after that seek, so the next one asks no filter and positions every
        // source; it reads only its entry, so the one after asks again. At a snapshot that
        // cannot see b@22, it lands on b@12: the source of b@22 is positioned (it is newer),
        // the source of b@2 is not.
        merge.seek_for_entry(&target(b"b", MAX_SEQUENCE_NUMBER), false);
        assert_eq!(seeks(), vec![2, 2, 2, 2]);
        merge.seek_for_entry(&target(b"b", 15), false);
        assert_eq!(merge.value(), b"b@12");
        assert_eq!(seeks(), vec![2, 3, 3, 2]);
        merge.next();
        assert_eq!(merge.value(), b"b@2");

        // Without the sequences, every source whose filter says yes is positioned.
        let children: Vec<Box<dyn InternalIterator>> = vec![
            Box::new(FilteredIterator::new(vec![entry(b"b", 22)], false)),
            Box::new(FilteredIterator::new(vec![entry(b"b", 12)], false)),
        ];
        let mut merge = MergingIterator::new(children, KeyComparator::Bytewise);
        merge.seek_for_entry(&target(b"b", MAX_SEQUENCE_NUMBER), false);
        assert_eq!(merge.value(), b"b@22");
        merge.next();
        assert_eq!(merge.value(), b"b@12");
    }

    fn merge_of(sources: Vec<Vec<(Vec<u8>, Vec<u8>)>>) -> MergingIterator {
        let children: Vec<Box<dyn InternalIterator>> = sources
            .into_iter()
            .map(|entries| Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>)
            .collect();
        MergingIterator::new(children, KeyComparator::Bytewise)
    }

    #[test]
    fn no_children_is_always_invalid() {
        let mut merge = MergingIterator::new(Vec::new(), KeyComparator::Bytewise);
        merge.seek_to_first();
        assert!(!merge.valid());
        merge.seek_to_last();
        assert!(!merge.valid());
        merge.seek(&make_internal_key(b"a", 1, ValueKind::Put));
        assert!(!merge.valid());
        assert!(merge.status().is_ok());
    }

    #[test]
    fn forward_scan_matches_sorted_union() {
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..300 {
            let source_count = rng.gen_range(1..6);
            let (sources, expected) = random_sources(&mut rng, source_count, false);
            let mut merge = merge_of(sources);
            let mut seen = Vec::new();
            merge.seek_to_first();
            while merge.valid() {
                seen.push((merge.key().to_vec(), merge.value().to_vec()));
                merge.next();
            }
            assert_eq!(seen, expected);
            let mut seen_backward = Vec::new();
            merge.seek_to_last();
            while merge.valid() {
                seen_backward.push((merge.key().to_vec(), merge.value().to_vec()));
                merge.prev();
            }
            seen_backward.reverse();
            assert_eq!(seen_backward, expected);
        }
    }

    #[test]
    fn random_walks_match_reference() {
        let mut rng = SmallRng::seed_from_u64(12);
        for _ in 0..600 {
            let source_count = rng.gen_range(1..7);
            let (sources, expected) = random_sources(&mut rng, source_count, false);
            let mut merge = merge_of(sources);
            walk_and_compare(&mut merge, &expected, &mut rng, 80);
        }
    }

    #[test]
    fn duplicate_keys_prefer_earlier_child_in_both_directions() {
        let mut rng = SmallRng::seed_from_u64(13);
        for _ in 0..600 {
            let source_count = rng.gen_range(1..5);
            let (sources, expected) = random_sources(&mut rng, source_count, true);
            let mut merge = merge_of(sources);
            walk_and_compare(&mut merge, &expected, &mut rng, 80);
        }
    }

    #[test]
    fn next_prev_alternation_on_every_entry() {
        let mut rng = SmallRng::seed_from_u64(14);
        for _ in 0..100 {
            let (sources, expected) = random_sources(&mut rng, 3, false);
            let mut merge = merge_of(sources);
            for index in 0..expected.len() {
                merge.seek(&expected[index].0);
                assert_eq!(merge.key(), &expected[index].0[..]);
                merge.prev();
                if index == 0 {
                    assert!(!merge.valid());
                    continue;
                }
                assert_eq!(merge.key(), &expected[index - 1].0[..]);
                merge.next();
                assert_eq!(merge.value(), &expected[index].1[..]);
                merge.next();
                assert_eq!(merge.valid(), index + 1 < expected.len());
                if merge.valid() {
                    assert_eq!(merge.value(), &expected[index + 1].1[..]);
                    merge.prev();
                    assert_eq!(merge.value(), &expected[index].1[..]);
                }
            }
        }
    }

    #[test]
    fn child_error_invalidates_and_is_reported() {
        let entries = |user_keys: &[&[u8]]| -> Vec<(Vec<u8>, Vec<u8>)> {
            user_keys.iter().map(|key| (make_internal_key(key, 1, ValueKind::Put), key.to_vec())).collect()
        };
        let healthy: Box<dyn InternalIterator> = Box::new(VecIterator::new(entries(&[b"a", b"c", b"e"])));
        // The failing child survives seek_to_first and one next, then fails on its next call.
        let failing: Box<dyn InternalIterator> = Box::new(FailingIterator::new(entries(&[b"b", b"d", b"f"]), 2));
        let mut merge = MergingIterator::new(vec![healthy, failing], KeyComparator::Bytewise);
        merge.seek_to_first();
        let mut values = Vec::new();
        while merge.valid() {
            values.push(merge.value().to_vec());
            merge.next();
        }
        // Stepping off "d" fails, so "e" and "f" are never yielded.
        assert_eq!(values, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
        let error = merge.status().expect_err("the child failure must surface");
        assert!(error.is_corruption());
        merge.seek_to_first();
        assert!(!merge.valid(), "an error is sticky");
        assert!(merge.status().is_err());
    }

    #[test]
    fn child_error_during_seek_is_reported() {
        let entries = vec![(make_internal_key(b"a", 1, ValueKind::Put), b"x".to_vec())];
        let healthy: Box<dyn InternalIterator> = Box::new(VecIterator::new(entries.clone()));
        let failing: Box<dyn InternalIterator> = Box::new(FailingIterator::new(entries, 0));
        let mut merge = MergingIterator::new(vec![healthy, failing], KeyComparator::Bytewise);
        merge.seek(&make_internal_key(b"a", 5, ValueKind::Put));
        assert!(!merge.valid());
        assert!(merge.status().is_err());
    }

    /// A sorted source that gains entries while it is read, as the active memtable does under
    /// concurrent writers: right after each `seek` it inserts the next entry of `arrivals`
    /// (if any). Like the memtable's iterator it remembers its position by key, so `prev`
    /// finds the last entry below the current key at the moment it is called.
    struct GrowingIterator {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        arrivals: std::collections::VecDeque<Option<(Vec<u8>, Vec<u8>)>>,
        current: Option<Vec<u8>>,
    }

    impl GrowingIterator {
        fn position_of(&self, key: &[u8]) -> usize {
            self.entries.partition_point(|(entry, _)| compare_internal_keys(entry, key).is_lt())
        }

        fn set(&mut self, index: Option<usize>) {
            self.current = index.and_then(|index| self.entries.get(index)).map(|(key, _)| key.clone());
        }

        fn entry(&self) -> &(Vec<u8>, Vec<u8>) {
            let key = self.current.as_ref().expect("positioned");
            &self.entries[self.position_of(key)]
        }
    }

    impl InternalIterator for GrowingIterator {
        fn valid(&self) -> bool {
            self.current.is_some()
        }
        fn seek_to_first(&mut self) {
            self.set(Some(0));
        }
        fn seek_to_last(&mut self) {
            self.set(self.entries.len().checked_sub(1));
        }
        fn seek(&mut self, target: &[u8]) {
            let index = self.position_of(target);
            self.set(Some(index));
            if let Some(Some(arrival)) = self.arrivals.pop_front() {
                let at = self.position_of(&arrival.0);
                self.entries.insert(at, arrival);
            }
        }
        fn next(&mut self) {
            let key = self.current.clone().expect("positioned");
            let index = self.entries.partition_point(|(entry, _)| compare_internal_keys(entry, &key).is_le());
            self.set(Some(index));
        }
        fn prev(&mut self) {
            let key = self.current.clone().expect("positioned");
            self.set(self.position_of(&key).checked_sub(1));
        }
        fn key(&self) -> &[u8] {
            &self.entry().0
        }
        fn value(&self) -> &[u8] {
            &self.entry().1
        }
        fn status(&self) -> Result<()> {
            Ok(())
        }
    }

    fn put(user_key: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(user_key, sequence, ValueKind::Put), user_key.to_vec())
    }

    /// Regression: the stress driver's scans, backward from an upper bound, sometimes missed a
    /// key just below the bound or returned an older version of it, while a repeat of the same
    /// scan was right. Turning backward, the merge positioned each other child with a seek to
    /// the current key and one step back. Between the two, a writer could link a memtable
    /// entry above the current key, and the step back landed on it: the child was then ahead
    /// of the current entry, the heap's top was no longer the child that moves, and the
    /// stream went out of order (an older version of a key after its newer one, or a key
    /// replacing the smaller one being read).
    #[test]
    fn turning_backward_stays_below_the_current_entry_when_a_source_grows() {
        // Child 0 is the memtable: "g" at first, and "f" arrives right after the seek that
        // repositions it for the turn (its second seek).
        let memtable = GrowingIterator {
            entries: vec![put(b"g", 9)],
            arrivals: [None, Some(put(b"f", 20))].into_iter().collect(),
            current: None,
        };
        let table: Box<dyn InternalIterator> =
            Box::new(VecIterator::new(vec![put(b"b", 1), put(b"c", 1), put(b"e", 1)]));
        let mut merge = MergingIterator::new(vec![Box::new(memtable), table], KeyComparator::Bytewise);
        merge.seek(&make_internal_key(b"d", MAX_SEQUENCE_NUMBER, ValueKind::Put));
        assert_eq!(merge.key(), &put(b"e", 1).0[..]);
        merge.prev();
        assert_eq!(merge.key(), &put(b"c", 1).0[..], "the step back went above the entry it left");
        merge.prev();
        assert_eq!(merge.key(), &put(b"b", 1).0[..]);
        merge.prev();
        assert!(!merge.valid());
    }

    /// The same property at random: whatever a growing source gains at each seek, every
    /// backward pass after a turn descends strictly and visits every entry of the fixed
    /// sources below the turning point.
    #[test]
    fn backward_passes_over_a_growing_source_stay_ordered_and_complete() {
        let mut rng = SmallRng::seed_from_u64(21);
        for case in 0..2000 {
            let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(1..40)).map(|_| random_internal_key(&mut rng)).collect();
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            keys.dedup();
            let mut sources: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); 3];
            for key in &keys {
                sources[rng.gen_range(0..3)].push((key.clone(), b"v".to_vec()));
            }
            // Arrivals use sequence numbers no fixed key has, so every internal key is unique.
            let arrivals = (0..8)
                .map(|_| {
                    rng.gen_bool(0.7).then(|| {
                        let user_key: Vec<u8> =
                            (0..rng.gen_range(1..=3)).map(|_| b"abc"[rng.gen_range(0..3)]).collect();
                        (make_internal_key(&user_key, 100 + rng.gen_range(0..1000), ValueKind::Put), b"new".to_vec())
                    })
                })
                .collect();
            let fixed: Vec<Vec<u8>> = sources[1].iter().chain(&sources[2]).map(|(key, _)| key.clone()).collect();
            let growing = GrowingIterator { entries: std::mem::take(&mut sources[0]), arrivals, current: None };
            let children: Vec<Box<dyn InternalIterator>> = vec![
                Box::new(growing),
                Box::new(VecIterator::new(std::mem::take(&mut sources[1]))),
                Box::new(VecIterator::new(std::mem::take(&mut sources[2]))),
            ];
            let mut merge = MergingIterator::new(children, KeyComparator::Bytewise);
            let target = random_internal_key(&mut rng);
            merge.seek(&target);
            if !merge.valid() {
                continue;
            }
            let turning_key = merge.key().to_vec();
            let mut previous = turning_key.clone();
            let mut visited = Vec::new();
            merge.prev();
            while merge.valid() {
                let key = merge.key().to_vec();
                assert!(compare_internal_keys(&key, &previous).is_lt(), "case {case}: out of order going backward");
                visited.push(key.clone());
                previous = key;
                merge.prev();
            }
            for key in fixed.iter().filter(|key| compare_internal_keys(key, &turning_key).is_lt()) {
                assert!(visited.contains(key), "case {case}: a fixed entry was skipped");
            }
        }
    }
}
