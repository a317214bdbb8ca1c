//! The public iterator type.
//!
//! A [`DbIterator`] reads one consistent point of the write history: it pins the memtables and
//! table files of the view it was created on (so flushes and compactions may go on), and reads
//! at one sequence number (so later writes are invisible).
//!
//! An iterator that is positioned again and again (a seek, or a seek to the first or last key)
//! moves to the column family's newest view when there is one, at its own sequence number, if
//! that view is certain to read exactly as the old one: when the iterator holds a snapshot
//! (compactions keep every version a snapshot reads), or when nothing was written since its
//! sequence (the newest view at the newest sequence reads what any earlier view at that sequence
//! read). Only the view changes, never what the iterator returns: a long-lived, re-seeked
//! iterator then reads the tables compactions made since it was created rather than the level-0
//! files they replaced, and stops pinning those files. Between seeks it keeps its view, so
//! `next` and `prev` never pay for the check. (RocksDB offers the same for iterators with a
//! snapshot, `auto_refresh_iterator_with_snapshot`.)
//!
//! Concurrency contract: a `DbIterator` is used by one thread at a time (`&mut self`); the
//! check for a newer view is one load of the column family's view generation. The iterator
//! holds the database only weakly: once the database is closed and dropped it keeps its view,
//! and it never keeps the database's files and threads' state alive.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::column_family::ColumnFamilyShared;
use super::read::{key_versions_in_view, user_iterator_over_view, StoredVersion};
use super::read_charges::SeekCharges;
use super::table_cache::TableCache;
use super::DbInner;
use super::ReadView;
use crate::error::Result;
use crate::iterator::db_iter::UserIterator;
use crate::options::ReadOptions;
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
    snapshot: Option<Snapshot>,
    /// Charges for the level-0 tables every seek merges (read-triggered compaction); `None`
    /// when level 0 adds none.
    seek_charges: Option<SeekCharges>,
    /// What moving to a newer view needs.
    refresh: ViewRefresh,
}

/// What an iterator needs to rebuild itself over a newer view of its column family, besides
/// what it keeps anyway (its snapshot, and its bounds in the user iterator): nothing is
/// allocated for it, since SQL engines create an iterator per query.
pub(crate) struct ViewRefresh {
    pub(crate) db: Weak<DbInner>,
    pub(crate) column_family: Arc<ColumnFamilyShared>,
    pub(crate) fill_cache: bool,
    pub(crate) verify_checksums: bool,
    pub(crate) blob_readahead: bool,
    /// The column family's view generation when the iterator last took a view.
    pub(crate) view_generation: u64,
}

impl DbIterator {
    pub(crate) fn new(
        inner: UserIterator,
        view: Arc<ReadView>,
        snapshot: Option<Snapshot>,
        seek_charges: Option<SeekCharges>,
        refresh: ViewRefresh,
    ) -> DbIterator {
        DbIterator { inner, started: false, error_reported: false, view, snapshot, seek_charges, refresh }
    }

    /// Called before every seek: moves to a newer view if there is one (see the module
    /// documentation) and charges the seek against level 0.
    #[inline]
    fn prepare_seek(&mut self) {
        self.started = true;
        if self.refresh.column_family.view_generation() != self.refresh.view_generation {
            self.move_to_newest_view();
        }
        if let Some(charges) = &mut self.seek_charges {
            charges.charge_seek();
        }
    }

    /// Called after every seek: charges the blocks its level-0 tables read from the file, and
    /// the older versions it passed.
    #[inline]
    fn finish_seek(&mut self) {
        if let Some(charges) = &mut self.seek_charges {
            charges.charge_seek_misses();
        }
        self.finish_step();
    }

    /// Called after every forward step: charges the older versions it passed that a
    /// compaction of level 0 would have merged away.
    #[inline]
    fn finish_step(&mut self) {
        if let Some(charges) = &mut self.seek_charges {
            charges.charge_passed_versions(self.inner.take_passed_compactable_versions());
            charges.charge_passed_memtable_versions(self.inner.take_passed_memtable_versions());
        }
    }

    /// Called after every forward step (not after seeks): charges the step's moves over the
    /// level-0 cursors a compaction would remove, then what [`Self::finish_step`] charges.
    #[inline]
    fn finish_forward_step(&mut self) {
        if let Some(charges) = &mut self.seek_charges {
            charges.charge_step();
        }
        self.finish_step();
    }

    /// Rebuilds the iterator over the column family's newest view when that reads exactly as
    /// its own (I45); otherwise keeps its view (and does not look again until the next change).
    #[cold]
    fn move_to_newest_view(&mut self) {
        let refresh = &mut self.refresh;
        refresh.view_generation = refresh.column_family.view_generation();
        let Some(db) = refresh.db.upgrade() else { return };
        // A dropped column family's newest view is empty; its iterators keep reading what they
        // had (the drop marks the family before it installs that view).
        if db.shutting_down.load(Ordering::Acquire)
            || refresh.column_family.dropped.load(Ordering::Acquire)
            || self.inner.status().is_err()
        {
            return;
        }
        let sequence = self.inner.sequence();
        let (view, newest_sequence, _) = refresh.column_family.view_and_sequence(&db.visible_sequence, None);
        // I45: without a snapshot, only a view of the very sequence the iterator reads at.
        if self.snapshot.is_none() && newest_sequence != sequence {
            return;
        }
        let (lower_bound, upper_bound) = self.inner.bounds();
        let options = ReadOptions {
            snapshot: self.snapshot.clone(),
            fill_cache: refresh.fill_cache,
            verify_checksums: refresh.verify_checksums,
            lower_bound: lower_bound.map(<[u8]>::to_vec),
            upper_bound: upper_bound.map(<[u8]>::to_vec),
            blob_readahead: refresh.blob_readahead,
        };
        let Ok((mut rebuilt, seek_charges)) =
            user_iterator_over_view(&db, &refresh.column_family, &view, sequence, &options)
        else {
            // A table of the new view could not be opened: keep reading the old one, which
            // holds the same data.
            return;
        };
        // The same point in time for entries with an expiry, whatever the clock says now.
        rebuilt.set_read_time(self.inner.read_time_us());
        self.inner = rebuilt;
        self.view = arc_swap::Guard::into_inner(view);
        self.seek_charges = seek_charges;
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
        self.prepare_seek();
        self.inner.seek_to_first();
        self.finish_seek();
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.prepare_seek();
        self.inner.seek_to_last();
        self.finish_seek();
    }

    /// Positions at the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.prepare_seek();
        self.inner.seek(target);
        self.finish_seek();
    }

    /// Positions at the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.prepare_seek();
        self.inner.seek_for_prev(target);
        self.finish_seek();
    }

    /// Moves to the next key. Does nothing when not valid.
    pub fn next(&mut self) {
        if self.inner.valid() {
            self.inner.next();
            self.finish_forward_step();
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
            self.finish_forward_step();
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
