//! The public iterator type.
//!
//! A [`DbIterator`] reads one consistent point of the write history: it pins the memtables and
//! table files of the view it was created on (so flushes and compactions may go on), and reads
//! at one sequence number (so later writes are invisible).

use std::sync::Arc;

use super::read::{key_versions_in_view, StoredVersion};
use super::table_cache::TableCache;
use super::ReadView;
use crate::error::Result;
use crate::iterator::db_iter::UserIterator;
use crate::snapshot::Snapshot;

/// A bidirectional cursor over user keys in the ascending order of the column family's
/// comparator (bytewise by default).
///
/// Position it with [`seek_to_first`](Self::seek_to_first), [`seek`](Self::seek) and friends, then
/// read [`key`](Self::key)/[`value`](Self::value) while [`valid`](Self::valid). When it becomes
/// invalid, check [`status`](Self::status): an I/O or corruption error ends iteration early.
///
/// It also implements [`Iterator`] for the forward case: a fresh iterator starts at the first
/// key (within the bounds) and yields `Result<(key, value)>`, ending with the error if one occurs.
pub struct DbIterator {
    inner: UserIterator,
    started: bool,
    error_reported: bool,
    view: Arc<ReadView>,
    _snapshot: Option<Snapshot>,
}

impl DbIterator {
    pub(crate) fn new(inner: UserIterator, view: Arc<ReadView>, snapshot: Option<Snapshot>) -> DbIterator {
        DbIterator { inner, started: false, error_reported: false, view, _snapshot: snapshot }
    }

    /// Every version of `user_key` in the sources this iterator reads (its tables opened
    /// through `table_cache`, the database's), with its read sequence (diagnostics; see
    /// `internals::debug`).
    pub(crate) fn stored_versions(
        &self,
        table_cache: &TableCache,
        user_key: &[u8],
    ) -> Result<(u64, Vec<StoredVersion>)> {
        Ok((self.inner.sequence(), key_versions_in_view(&self.view, table_cache, user_key)?))
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        self.started = true;
        self.inner.seek_to_first();
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.started = true;
        self.inner.seek_to_last();
    }

    /// Positions at the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.started = true;
        self.inner.seek(target);
    }

    /// Positions at the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.started = true;
        self.inner.seek_for_prev(target);
    }

    /// Moves to the next key. Does nothing when not valid.
    pub fn next(&mut self) {
        if self.inner.valid() {
            self.inner.next();
        }
    }

    /// Moves to the previous key. Does nothing when not valid.
    pub fn prev(&mut self) {
        if self.inner.valid() {
            self.inner.prev();
        }
    }

    /// The current key. Panics when not [`valid`](Self::valid) (a programming error).
    pub fn key(&self) -> &[u8] {
        assert!(self.inner.valid(), "DbIterator::key called on an invalid iterator");
        self.inner.key()
    }

    /// The current value. Panics when not [`valid`](Self::valid) (a programming error).
    pub fn value(&self) -> &[u8] {
        assert!(self.inner.valid(), "DbIterator::value called on an invalid iterator");
        self.inner.value()
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.seek_to_first();
        } else if self.inner.valid() {
            self.inner.next();
        }
        if self.inner.valid() {
            return Some(Ok((self.inner.key().to_vec(), self.inner.value().to_vec())));
        }
        match self.inner.status() {
            Err(error) if !self.error_reported => {
                self.error_reported = true;
                Some(Err(error))
            }
            _ => None,
        }
    }
}
