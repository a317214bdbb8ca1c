//! The transaction iterator: the database merged with the transaction's own writes.
//!
//! Two sorted sources: a [`DbIterator`] at the transaction's snapshot, and a cursor over the
//! write set's entries of one column family within the bounds (`own_cursor`: the in-memory
//! ones copied when the iterator is created, the spilled ones read from their runs).
//! At equal keys the transaction's entry wins; its deletes hide the key. Both directions work;
//! a change of direction re-seeks both sources to the current key.
//!
//! Under SERIALIZABLE the iterator records the key range it has passed over since its last
//! seek (from the seek target to the last key it reached, or to the bound or the end when it
//! ran out), in place in the transaction's read set after every move, so that a commit
//! validates exactly what was read, phantoms included.
//!
//! Concurrency contract: an iterator is used by one thread; it borrows its transaction, which
//! therefore cannot commit while the iterator lives.

use std::cmp::Ordering;
use std::ops::Bound;

use super::own_cursor::OwnCursor;
use super::Transaction;
use crate::comparator::KeyComparator;
use crate::db::DbIterator;
use crate::error::Result;
use crate::options::ReadOptions;

/// Which source the iterator's current entry comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Own,
    Database,
    /// Both hold the key; the transaction's entry wins.
    Both,
}

/// The range a SERIALIZABLE iterator has read since its last seek.
struct ReadRange {
    slot: usize,
    used: bool,
    low: Bound<Vec<u8>>,
    high: Bound<Vec<u8>>,
}

/// An iterator over a transaction's view of one column family; see the module documentation.
///
/// Used like [`DbIterator`]: position it with `seek_to_first`, `seek`, `seek_to_last` or
/// `seek_for_prev`, then read `key` and `value` while `valid`, and check `status` when it
/// becomes invalid.
pub struct TransactionIterator<'a> {
    transaction: &'a Transaction,
    database: DbIterator,
    own: OwnCursor,
    order: KeyComparator,
    forward: bool,
    current: Option<Source>,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    column_family: u32,
    read_range: Option<ReadRange>,
    started: bool,
    error_reported: bool,
}

impl<'a> TransactionIterator<'a> {
    pub(super) fn new(
        transaction: &'a Transaction,
        database: DbIterator,
        own: OwnCursor,
        order: KeyComparator,
        options: ReadOptions,
        range_slot: Option<(u32, usize)>,
    ) -> TransactionIterator<'a> {
        TransactionIterator {
            transaction,
            database,
            own,
            order,
            forward: true,
            current: None,
            lower_bound: options.lower_bound,
            upper_bound: options.upper_bound,
            column_family: range_slot.map_or(0, |(family, _)| family),
            read_range: range_slot.map(|(_, slot)| ReadRange {
                slot,
                used: false,
                low: Bound::Unbounded,
                high: Bound::Unbounded,
            }),
            started: false,
            error_reported: false,
        }
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// The current key. Panics when not [`valid`](Self::valid).
    pub fn key(&self) -> &[u8] {
        match self.current {
            Some(Source::Own | Source::Both) => self.own.current().map_or(&[][..], |(key, _)| key),
            Some(Source::Database) => self.database.key(),
            None => panic!("TransactionIterator::key called while not valid"),
        }
    }

    /// The current value. Panics when not [`valid`](Self::valid).
    pub fn value(&self) -> &[u8] {
        match self.current {
            Some(Source::Own | Source::Both) => {
                self.own.current().and_then(|(_, written)| written.as_deref()).unwrap_or_default()
            }
            Some(Source::Database) => self.database.value(),
            None => panic!("TransactionIterator::value called while not valid"),
        }
    }

    /// An I/O or corruption error that ended iteration early, if any.
    pub fn status(&self) -> Result<()> {
        self.own.status()?;
        self.database.status()
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        self.position_first();
        let low = self.lower_bound.clone().map_or(Bound::Unbounded, Bound::Included);
        self.start_run(low.clone(), low);
        self.extend_high_to_current();
    }

    /// Positions at the first key at or after `target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.position_at(target);
        self.start_run(Bound::Included(target.to_vec()), Bound::Included(target.to_vec()));
        self.extend_high_to_current();
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.database.seek_to_last();
        self.own.seek_to_last();
        self.forward = false;
        self.settle_backward();
        let high = self.upper_bound.clone().map_or(Bound::Unbounded, Bound::Excluded);
        self.start_run(high.clone(), high);
        self.extend_low_to_current();
    }

    /// Positions at the last key at or before `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.position_at_or_before(target);
        self.start_run(Bound::Included(target.to_vec()), Bound::Included(target.to_vec()));
        self.extend_low_to_current();
    }

    /// Moves to the next key. Panics when not [`valid`](Self::valid).
    pub fn next(&mut self) {
        assert!(self.valid(), "TransactionIterator::next called while not valid");
        if !self.forward {
            let key = self.key().to_vec();
            self.position_at(&key);
        }
        match self.current {
            Some(Source::Own) => self.own.next(),
            Some(Source::Database) => self.database.next(),
            Some(Source::Both) => {
                self.own.next();
                self.database.next();
            }
            None => {}
        }
        self.settle_forward();
        self.extend_high_to_current();
    }

    /// Moves to the previous key. Panics when not [`valid`](Self::valid).
    pub fn prev(&mut self) {
        assert!(self.valid(), "TransactionIterator::prev called while not valid");
        if self.forward {
            let key = self.key().to_vec();
            self.position_at_or_before(&key);
        }
        match self.current {
            Some(Source::Own) => self.own.prev(),
            Some(Source::Database) => self.database.prev(),
            Some(Source::Both) => {
                self.own.prev();
                self.database.prev();
            }
            None => {}
        }
        self.settle_backward();
        self.extend_low_to_current();
    }

    fn position_first(&mut self) {
        self.database.seek_to_first();
        self.own.seek_to_first();
        self.forward = true;
        self.settle_forward();
    }

    fn position_at(&mut self, target: &[u8]) {
        self.database.seek(target);
        self.own.seek(target);
        self.forward = true;
        self.settle_forward();
    }

    fn position_at_or_before(&mut self, target: &[u8]) {
        self.database.seek_for_prev(target);
        self.own.seek_for_prev(target);
        self.forward = false;
        self.settle_backward();
    }

    /// Picks the smaller of the two candidates, skipping the transaction's deletes.
    fn settle_forward(&mut self) {
        loop {
            let source = self.pick(Ordering::Less);
            let Some(source) = source else {
                self.current = None;
                return;
            };
            let deleted =
                source != Source::Database && self.own.current().is_some_and(|(_, written)| written.is_none());
            if !deleted {
                self.current = Some(source);
                return;
            }
            self.own.next();
            if source == Source::Both {
                self.database.next();
            }
        }
    }

    /// Picks the larger of the two candidates, skipping the transaction's deletes.
    fn settle_backward(&mut self) {
        loop {
            let Some(source) = self.pick(Ordering::Greater) else {
                self.current = None;
                return;
            };
            let deleted =
                source != Source::Database && self.own.current().is_some_and(|(_, written)| written.is_none());
            if !deleted {
                self.current = Some(source);
                return;
            }
            self.own.prev();
            if source == Source::Both {
                self.database.prev();
            }
        }
    }

    /// The source whose candidate comes first in the direction given by `first` (`Less`:
    /// forward).
    fn pick(&self, first: Ordering) -> Option<Source> {
        let own = self.own.current().map(|(key, _)| key);
        let database = self.database.valid().then(|| self.database.key());
        match (own, database) {
            (None, None) => None,
            (Some(_), None) => Some(Source::Own),
            (None, Some(_)) => Some(Source::Database),
            (Some(own), Some(database)) => {
                let ordering = self.order.compare_user_keys(own, database);
                Some(if ordering == Ordering::Equal {
                    Source::Both
                } else if ordering == first {
                    Source::Own
                } else {
                    Source::Database
                })
            }
        }
    }

    /// Begins a new read range (SERIALIZABLE) at a seek.
    fn start_run(&mut self, low: Bound<Vec<u8>>, high: Bound<Vec<u8>>) {
        self.started = true;
        let Some(range) = &mut self.read_range else { return };
        if range.used {
            range.slot = self.transaction.new_range_slot(self.column_family);
        }
        range.used = true;
        range.low = low;
        range.high = high;
    }

    /// After a forward move: the range now reaches the current key, or the end.
    fn extend_high_to_current(&mut self) {
        self.extend_to_current(Ordering::Greater);
    }

    /// After a backward move: the range now reaches back to the current key, or the start.
    fn extend_low_to_current(&mut self) {
        self.extend_to_current(Ordering::Less);
    }

    /// Widens the read range to the current position in `direction` (`Greater`: its high end,
    /// `Less`: its low end), or to the bound or the end of the keys when the iterator ran out.
    fn extend_to_current(&mut self, direction: Ordering) {
        if self.read_range.is_none() {
            return;
        }
        let reached = if self.valid() {
            Bound::Included(self.key().to_vec())
        } else if direction == Ordering::Greater {
            self.upper_bound.clone().map_or(Bound::Unbounded, Bound::Excluded)
        } else {
            self.lower_bound.clone().map_or(Bound::Unbounded, Bound::Included)
        };
        let order = self.order.clone();
        if let Some(range) = &mut self.read_range {
            let end = if direction == Ordering::Greater { &mut range.high } else { &mut range.low };
            if reaches_further(&reached, end, direction, &order) {
                *end = reached;
            }
        }
        self.publish_range();
    }

    fn publish_range(&self) {
        if let Some(range) = &self.read_range {
            self.transaction.record_range(range.slot, range.low.clone(), range.high.clone());
        }
    }
}

/// True when range end `candidate` reaches further than `current` in `direction` (`Greater`:
/// an upper end reaching higher, `Less`: a lower end reaching lower).
fn reaches_further(
    candidate: &Bound<Vec<u8>>,
    current: &Bound<Vec<u8>>,
    direction: Ordering,
    order: &KeyComparator,
) -> bool {
    match (candidate, current) {
        (_, Bound::Unbounded) => false,
        (Bound::Unbounded, _) => true,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            match order.compare_user_keys(a, b) {
                // At the same key an included end reaches further than an excluded one.
                Ordering::Equal => matches!(candidate, Bound::Included(_)) && matches!(current, Bound::Excluded(_)),
                ordering => ordering == direction,
            }
        }
    }
}

impl Iterator for TransactionIterator<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    /// Forward iteration from the first key (when not positioned yet); ends with the error if
    /// one occurs.
    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.seek_to_first();
        } else if self.valid() {
            TransactionIterator::next(self);
        }
        if self.valid() {
            return Some(Ok((self.key().to_vec(), self.value().to_vec())));
        }
        match self.status() {
            Err(error) if !self.error_reported => {
                self.error_reported = true;
                Some(Err(error))
            }
            _ => None,
        }
    }
}
