//! The user iterator: the view of one snapshot through a stream of internal keys.
//!
//! [`UserIterator`] wraps an internal iterator (normally a merge of memtables and tables) and
//! yields user keys with their values as of one sequence number: versions newer than the
//! snapshot are invisible, only the newest visible version of each user key counts, a tombstone
//! hides its key, and keys outside `[lower_bound, upper_bound)` are never returned. Keys, bounds
//! and seek targets are compared in the column family's order (its comparator).
//!
//! Concurrency contract: used by one thread at a time; it owns the internal iterator, which keeps
//! its sources alive.
//!
//! Invariants, by direction:
//! - Forward: when valid, the inner iterator is on the newest visible `Put` of the current user
//!   key, so `key()`/`value()` borrow from it. `saved_key` is scratch space holding the user key
//!   whose remaining versions must be skipped.
//! - Reverse: when valid, `saved_key`/`saved_value` hold the current entry and the inner iterator
//!   is on the last entry whose user key is below it (or exhausted at the front). Moving backward
//!   reads a key's versions oldest first, so the value must be copied until the newest visible
//!   version has been passed; the buffers are reused, so steps do not allocate once they have
//!   grown. A key with many versions is not read that way: after
//!   [`REVERSE_VERSIONS_BEFORE_SEEK`] of them the iterator seeks forward to the key's newest
//!   visible version, reads it there, and seeks back to before the key, so a backward scan over
//!   a row updated a thousand times costs a few seeks, not a thousand steps (each of which,
//!   in a memtable, is a search from the top of the skiplist).
//!
//! A version covered by a visible range tombstone (I38) reads as deleted. Moving forward, the
//! iterator then lets sources older than the tombstone jump to the end of its fragment
//! ([`InternalIterator::skip_older_forward`]), and moving backward below its start
//! ([`InternalIterator::skip_older_backward`]), so a scan over a deleted range does not step
//! through every deleted entry of the older tables.
//!
//! An entry of kind `BlobIndex` holds a reference to a value in a blob file; the iterator reads
//! that value (through [`BlobSource`]) only when it stops on the entry, never for versions or
//! keys it skips, and an error reading it ends iteration like any other (I36).
//!
//! Scanning never reads more than one entry beyond a bound. The first error (from the inner
//! iterator, or a malformed internal key reported as corruption) makes the iterator invalid for
//! good and is returned by `status()`.

use std::sync::Arc;

use crate::blob::BlobFiles;
use crate::cache::BlockCache;
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{append_internal_key, parse_internal_key, ValueKind, MAX_SEQUENCE_NUMBER, TRAILER_SIZE_BYTES};
use crate::range_tombstone::{Fragment, FragmentedTombstones};

/// The direction of the last movement, which decides where the inner iterator sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Moving backward, the versions of one user key the iterator steps over before it reads the
/// key's newest visible version with a forward seek instead (and seeks back to before the key).
/// The jump costs two seeks of every source; a step costs one step of one source, but a step
/// back in a memtable is a search from the top of the skiplist. RocksDB steps over 8 versions
/// in either direction before it seeks (`max_sequential_skip_in_iterations`).
pub(crate) const REVERSE_VERSIONS_BEFORE_SEEK: usize = 8;

/// What reading a key's newest visible version with a seek found (backward scans).
enum NewestVersion {
    /// The key is live: the iterator holds its key and value.
    Live,
    /// The key has no visible live version.
    Gone,
    /// Reading failed; the error is recorded.
    Failed,
}

/// Where an iterator reads the values its blob references name: the blob files of the version
/// it reads, and the cache they go through.
pub(crate) struct BlobSource {
    pub(crate) files: BlobFiles,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) fill_cache: bool,
    /// The scan's readahead in the blob files (`BlobFile::read_value_ahead`), when asked for
    /// (`ReadOptions::blob_readahead`). In a cell: the iterator resolves values from methods
    /// that borrow its other fields, and it is used by one thread at a time.
    pub(crate) readahead: Option<std::cell::RefCell<crate::blob::BlobReadahead>>,
}

/// The sequence of the newest tombstone of the sets `tombstones` visible at `snapshot` that
/// covers the entry (`user_key`, `sequence`), with the fragment holding it in its set; `None`
/// when no tombstone covers the entry.
fn covering_tombstone<'a>(
    tombstones: &'a [Arc<FragmentedTombstones>],
    snapshot: u64,
    user_key: &[u8],
    sequence: u64,
) -> Option<(u64, &'a Fragment)> {
    let mut newest: Option<(u64, &'a Fragment)> = None;
    for set in tombstones {
        if let Some(fragment) = set.fragment_at(user_key) {
            let covering = fragment.covering_sequence(snapshot);
            if covering > sequence && newest.is_none_or(|(best, _)| covering > best) {
                newest = Some((covering, fragment));
            }
        }
    }
    newest
}

/// The user-visible view of an internal stream at one snapshot; see the module documentation.
pub(crate) struct UserIterator {
    inner: Box<dyn InternalIterator>,
    /// The order of user keys (the one `inner` is sorted by).
    comparator: KeyComparator,
    /// The snapshot: entries with a larger sequence number are invisible.
    sequence: u64,
    /// Inclusive lower bound on user keys.
    lower_bound: Option<Vec<u8>>,
    /// Exclusive upper bound on user keys.
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward: the user key being skipped. Reverse: the current user key.
    saved_key: Vec<u8>,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    /// Scratch space for the internal keys that seeks are made with.
    seek_key: Vec<u8>,
    /// The first error met; once set the iterator stays invalid.
    error: Option<Error>,
    /// The blob files of the version read; `None` for streams without tables.
    blobs: Option<BlobSource>,
    /// The current value when the iterator made it: read from a blob file, or merged.
    owned_value: Vec<u8>,
    /// Whether the current value is `owned_value`.
    value_is_owned: bool,
    /// The range tombstone sets of the sources (I38); empty when there are none.
    tombstones: Vec<Arc<FragmentedTombstones>>,
    /// Scratch space: the internal key a backward jump over a tombstone started from.
    skip_probe: Vec<u8>,
    /// The read time: entries expiring at or before it read as deleted (I42). 0 (nothing
    /// expires) unless set.
    read_time_us: u64,
    /// Forward: where the user's value starts in the inner value (after an expiry).
    value_offset: usize,
    /// The merge operator of the column family read (I43); without it, a merge operand is an
    /// error.
    merge_operator: Option<Arc<dyn crate::merge_operator::MergeOperator>>,
    /// Forward: the current key's value was merged from several entries, so the inner iterator
    /// has moved past its newest one: the key is `saved_key`, the value `owned_value`.
    forward_merged: bool,
    /// Reverse: versions of one key stepped over before a seek reads it instead
    /// ([`REVERSE_VERSIONS_BEFORE_SEEK`]; tests vary it).
    reverse_versions_before_seek: usize,
    /// Older versions passed moving forward that a compaction of level 0 would have merged
    /// away, since the owner last took the count (read charges, `db::read_charges`).
    passed_compactable_versions: u64,
    /// Keys whose older versions the active memtable held and a forward move passed, since the
    /// owner last took the count (read charges towards a flush).
    passed_memtable_versions: u64,
}

impl UserIterator {
    /// Creates an unpositioned iterator over `inner` (sorted by `comparator`) as of snapshot
    /// `sequence`, returning only user keys in `[lower_bound, upper_bound)` (each bound
    /// optional).
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        comparator: KeyComparator,
        sequence: u64,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
    ) -> UserIterator {
        UserIterator {
            inner,
            comparator,
            // Every stored sequence number fits in 56 bits, so clamping changes no visibility and
            // keeps seek keys well formed.
            sequence: sequence.min(MAX_SEQUENCE_NUMBER),
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            seek_key: Vec::new(),
            error: None,
            blobs: None,
            owned_value: Vec::new(),
            value_is_owned: false,
            tombstones: Vec::new(),
            skip_probe: Vec::new(),
            read_time_us: 0,
            value_offset: 0,
            merge_operator: None,
            forward_merged: false,
            reverse_versions_before_seek: REVERSE_VERSIONS_BEFORE_SEEK,
            passed_compactable_versions: 0,
            passed_memtable_versions: 0,
        }
    }

    /// Keys whose older versions in the active memtable forward moves passed, since the last
    /// call.
    pub(crate) fn take_passed_memtable_versions(&mut self) -> u64 {
        std::mem::take(&mut self.passed_memtable_versions)
    }

    /// The older versions passed moving forward that a compaction of level 0 would have
    /// merged away, since the last call.
    pub(crate) fn take_passed_compactable_versions(&mut self) -> u64 {
        std::mem::take(&mut self.passed_compactable_versions)
    }

    /// Combines merge operands through `operator` (I43).
    pub(crate) fn set_merge_operator(&mut self, operator: Option<Arc<dyn crate::merge_operator::MergeOperator>>) {
        self.merge_operator = operator;
    }

    /// Reads entries with an expiry as of `read_time_us` (I42).
    pub(crate) fn set_read_time(&mut self, read_time_us: u64) {
        self.read_time_us = read_time_us;
    }

    /// The time entries with an expiry are read as of (0: none are checked).
    pub(crate) fn read_time_us(&self) -> u64 {
        self.read_time_us
    }

    /// The bounds keys are returned within, `[lower, upper)`.
    pub(crate) fn bounds(&self) -> (Option<&[u8]>, Option<&[u8]>) {
        (self.lower_bound.as_deref(), self.upper_bound.as_deref())
    }

    /// Hides entries covered by a tombstone of the sets `tombstones` visible at the iterator's
    /// sequence.
    pub(crate) fn set_range_tombstones(&mut self, tombstones: Vec<Arc<FragmentedTombstones>>) {
        self.tombstones = tombstones;
    }

    /// Resolves blob references through `blobs` (a stream over tables needs it; without it a
    /// reference is reported as corruption).
    pub(crate) fn set_blob_source(&mut self, blobs: BlobSource) {
        self.blobs = Some(blobs);
    }

    /// The value the blob reference `encoded_reference` of `user_key` names.
    fn resolve_blob(&self, user_key: &[u8], encoded_reference: &[u8]) -> Result<Vec<u8>> {
        let table = std::path::Path::new("<iterator input>");
        match &self.blobs {
            Some(blobs) => crate::blob::resolve(
                &blobs.files,
                user_key,
                encoded_reference,
                Some(&blobs.cache),
                blobs.fill_cache,
                table,
                blobs.readahead.as_ref().map(std::cell::RefCell::borrow_mut).as_deref_mut(),
            ),
            None => Err(Error::corruption(table, 0, "a blob reference in a stream without blob files")),
        }
    }

    /// `key`'s value from `operands` (oldest first) over `base` through the merge operator.
    fn full_merge(&self, key: &[u8], base: Option<&[u8]>, operands: &[Vec<u8>]) -> Result<Vec<u8>> {
        let Some(operator) = &self.merge_operator else {
            return Err(Error::invalid(format!(
                "key {:?} has merge operands, but its column family has no merge operator",
                String::from_utf8_lossy(key)
            )));
        };
        let operands: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        operator.full_merge(key, base, &operands).ok_or_else(|| {
            Error::corruption(
                "<merge>",
                0,
                format!(
                    "merge operator {} failed for key {:?} ({} operands)",
                    operator.name(),
                    String::from_utf8_lossy(key),
                    operands.len()
                ),
            )
        })
    }

    /// Forward, on the newest visible entry of a key, a merge operand: collects it and the
    /// older entries of the key down to the value beneath them (a put, a blob value or an
    /// expiry not yet reached), or to nothing (a delete, an expired put, a range tombstone, no
    /// older entry), and makes the key's value from them. The inner iterator is left past the
    /// entries read.
    fn merge_forward(&mut self, user_key: &[u8]) {
        self.saved_key.clear();
        self.saved_key.extend_from_slice(user_key);
        // Newest first while collecting.
        let mut operands: Vec<Vec<u8>> = vec![self.inner.value().to_vec()];
        let mut base: Option<Vec<u8>> = None;
        self.inner.next();
        let result: Result<()> = loop {
            if !self.inner.valid() {
                break self.inner.status();
            }
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.fail_corrupt();
                return;
            };
            if parsed.user_key != self.saved_key.as_slice()
                || covering_tombstone(&self.tombstones, self.sequence, parsed.user_key, parsed.sequence).is_some()
            {
                break Ok(());
            }
            match parsed.kind {
                ValueKind::Merge => {
                    operands.push(self.inner.value().to_vec());
                    self.inner.next();
                    continue;
                }
                ValueKind::Put => base = Some(self.inner.value().to_vec()),
                ValueKind::PutWithExpiry => match crate::ttl::split_expiring(self.inner.value()) {
                    Some((expires_at_us, value)) => {
                        if !crate::ttl::is_expired(expires_at_us, self.read_time_us) {
                            base = Some(value.to_vec());
                        }
                    }
                    None => {
                        self.fail_short_expiring();
                        return;
                    }
                },
                ValueKind::BlobIndex => match self.resolve_blob(parsed.user_key, self.inner.value()) {
                    Ok(value) => base = Some(value),
                    Err(error) => break Err(error),
                },
                ValueKind::Delete | ValueKind::SingleDelete => {}
            }
            break Ok(());
        };
        operands.reverse();
        match result.and_then(|()| self.full_merge(&self.saved_key, base.as_deref(), &operands)) {
            Ok(value) => {
                self.owned_value = value;
                self.value_is_owned = true;
                self.forward_merged = true;
                self.valid = true;
            }
            Err(error) => {
                self.error = Some(error);
                self.valid = false;
            }
        }
    }

    /// Reads the value that the blob reference of the current entry (or, when
    /// `user_key_is_saved`, of `saved_key` in `saved_value`) names into `owned_value`; on
    /// failure records the error and invalidates.
    fn load_blob_value(&mut self, user_key_is_saved: bool) {
        let result = if user_key_is_saved {
            self.resolve_blob(&self.saved_key, &self.saved_value)
        } else {
            let internal_key = self.inner.key();
            let user_key = &internal_key[..internal_key.len().saturating_sub(TRAILER_SIZE_BYTES)];
            self.resolve_blob(user_key, self.inner.value())
        };
        match result {
            Ok(value) => {
                self.owned_value = value;
                self.value_is_owned = true;
            }
            Err(error) => {
                self.error = Some(error);
                self.valid = false;
                self.value_is_owned = false;
            }
        }
    }

    /// True when positioned on a visible entry.
    /// The sequence number it reads at.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Requires `valid()`.
    pub(crate) fn key(&self) -> &[u8] {
        debug_assert!(self.valid);
        match self.direction {
            Direction::Forward if self.forward_merged => &self.saved_key,
            Direction::Forward => {
                // The entry was parsed when the iterator stopped on it, so it has a trailer.
                let internal_key = self.inner.key();
                &internal_key[..internal_key.len().saturating_sub(TRAILER_SIZE_BYTES)]
            }
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Requires `valid()`.
    pub(crate) fn value(&self) -> &[u8] {
        debug_assert!(self.valid);
        if self.value_is_owned {
            return &self.owned_value;
        }
        match self.direction {
            Direction::Forward => self.inner.value().get(self.value_offset..).unwrap_or_default(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met, if any.
    pub(crate) fn status(&self) -> Result<()> {
        match &self.error {
            Some(error) => Err(error.duplicate()),
            None => Ok(()),
        }
    }

    /// Positions at the first visible key, starting from the lower bound.
    pub(crate) fn seek_to_first(&mut self) {
        match self.lower_bound.take() {
            Some(lower) => {
                self.seek(&lower);
                self.lower_bound = Some(lower);
            }
            None => {
                if self.error.is_some() {
                    return;
                }
                self.direction = Direction::Forward;
                self.inner.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    /// Positions at the last visible key below the upper bound.
    pub(crate) fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.direction = Direction::Reverse;
        match &self.upper_bound {
            Some(upper) => {
                // The first internal key of `upper` precedes every entry of it, so the seek lands
                // on the first entry at or above the bound and the step back on the last below.
                self.seek_key.clear();
                append_internal_key(&mut self.seek_key, upper, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
                self.position_before_seek_key();
            }
            None => self.inner.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first visible key `>= target` (clamped to the bounds).
    pub(crate) fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let was_forward = self.direction == Direction::Forward;
        self.direction = Direction::Forward;
        self.valid = false;
        let start = match &self.lower_bound {
            Some(lower) if self.comparator.compare_user_keys(target, lower).is_lt() => lower.as_slice(),
            _ => target,
        };
        if self.upper_bound.as_deref().is_some_and(|upper| self.comparator.compare_user_keys(start, upper).is_ge()) {
            return;
        }
        // Seeking with the snapshot's sequence number skips the invisible newer versions.
        self.seek_key.clear();
        append_internal_key(&mut self.seek_key, start, self.sequence, ValueKind::FOR_SEEK);
        // A re-seek ahead of where the sources stand, after moving forward (the next key of an
        // ascending walk, as a SQL engine's lookups in index order make): the sources move on
        // from their positions, a step or a search within the block they hold, instead of
        // searching their indexes from the top (`seek_forward`'s contract holds: the inner
        // position is at or before the target and its last movement went forward).
        let ahead = was_forward
            && self.inner.valid()
            && self.comparator.compare_internal_keys(self.inner.key(), &self.seek_key).is_le();
        // A user's seek often reads only the key it lands on: a merge may leave sources that
        // cannot hold it unpositioned until the iterator moves (I49).
        self.inner.seek_for_entry(&self.seek_key, ahead);
        self.find_next_user_entry(false);
    }

    /// Positions at the last visible key `<= target` (clamped to the bounds).
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.upper_bound.as_deref().is_some_and(|upper| self.comparator.compare_user_keys(target, upper).is_ge()) {
            self.seek_to_last();
            return;
        }
        self.direction = Direction::Reverse;
        self.valid = false;
        if self.lower_bound.as_deref().is_some_and(|lower| self.comparator.compare_user_keys(target, lower).is_lt()) {
            return;
        }
        // The internal key of the target with the smallest trailer (sequence 0, a delete) is
        // the last one of the target in every order: the seek lands on it if it is stored,
        // and otherwise on the first entry above the target, whose predecessor is the last
        // entry at or below the target.
        self.seek_key.clear();
        append_internal_key(&mut self.seek_key, target, 0, ValueKind::Delete);
        self.inner.seek(&self.seek_key);
        let on_target =
            self.inner.valid() && parse_internal_key(self.inner.key()).is_some_and(|parsed| parsed.user_key == target);
        if !on_target {
            self.step_back_from_seek();
        }
        self.find_prev_user_entry();
    }

    /// Moves to the next visible key. Requires `valid()`.
    pub(crate) fn next(&mut self) {
        assert!(self.valid, "UserIterator::next called on an invalid iterator");
        if self.direction == Direction::Reverse {
            // The inner iterator sits just before the entries of the current key (`saved_key`):
            // step into them and let the forward scan skip them.
            self.direction = Direction::Forward;
            if self.inner.valid() {
                self.inner.next();
            } else {
                self.inner.seek_to_first();
            }
        } else if self.forward_merged {
            // The merge read past the key's entries already; `saved_key` holds the key.
            self.forward_merged = false;
        } else {
            let internal_key = self.inner.key();
            self.saved_key.clear();
            self.saved_key.extend_from_slice(&internal_key[..internal_key.len().saturating_sub(TRAILER_SIZE_BYTES)]);
            self.inner.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous visible key. Requires `valid()`.
    pub(crate) fn prev(&mut self) {
        assert!(self.valid, "UserIterator::prev called on an invalid iterator");
        if self.direction == Direction::Forward && self.forward_merged {
            // The merge read past the key's entries: go back to just before the first of them.
            self.forward_merged = false;
            self.seek_key.clear();
            append_internal_key(&mut self.seek_key, &self.saved_key, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
            self.position_before_seek_key();
        } else if self.direction == Direction::Forward {
            // The current entry is the newest visible version of its key, so the entries before
            // it that share its key are newer than the snapshot: the backward scan skips them
            // as invisible and needs no separate pass.
            self.inner.prev();
        }
        self.find_prev_user_entry();
    }

    /// Seeks the inner iterator to `seek_key`, then steps to the entry before it (the last entry
    /// when nothing is at or after it).
    fn position_before_seek_key(&mut self) {
        self.inner.seek(&self.seek_key);
        self.step_back_from_seek();
    }

    /// After a seek, steps to the entry before the inner position (the last entry when the
    /// seek found nothing).
    fn step_back_from_seek(&mut self) {
        if self.inner.valid() {
            self.inner.prev();
        } else if self.inner.status().is_ok() {
            self.inner.seek_to_last();
        }
    }

    /// Scans forward from the inner position to the newest visible `Put` of a user key, skipping
    /// the user key in `saved_key` when `skipping`, and stops at the upper bound.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        self.forward_merged = false;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.fail_corrupt();
                return;
            };
            if self
                .upper_bound
                .as_deref()
                .is_some_and(|upper| self.comparator.compare_user_keys(parsed.user_key, upper).is_ge())
            {
                break;
            }
            if parsed.sequence > self.sequence {
                // Newer than the snapshot, and so may be the versions after it: go to the key's
                // newest visible version (a target after this entry, so the scan moves on).
                self.seek_key.clear();
                append_internal_key(&mut self.seek_key, parsed.user_key, self.sequence, ValueKind::FOR_SEEK);
                self.inner.seek_forward(&self.seek_key);
                continue;
            } else {
                // Entries of a skipped key sort before larger keys, so "not after" means "the
                // same key".
                let hidden = skipping && self.comparator.compare_user_keys(parsed.user_key, &self.saved_key).is_le();
                if hidden && !(parsed.sequence == 0 && parsed.kind == ValueKind::Delete) {
                    // An older version of the key passed: go past all of them at once (the
                    // smallest trailer, sequence 0 and kind 0, sorts after every other version;
                    // an entry with that very trailer is stepped over instead, since a seek to
                    // it would not move).
                    self.seek_key.clear();
                    append_internal_key(&mut self.seek_key, &self.saved_key, 0, ValueKind::Delete);
                    self.passed_compactable_versions += self.inner.seek_forward_past_versions(&self.seek_key);
                    self.passed_memtable_versions += self.inner.take_skipped_versions();
                    continue;
                }
                if !hidden {
                    let tombstones = &self.tombstones;
                    if let Some((covering, fragment)) =
                        covering_tombstone(tombstones, self.sequence, parsed.user_key, parsed.sequence)
                    {
                        let fragment_end = fragment.end.as_slice();
                        // The newest visible version is covered by a range tombstone: the key
                        // is deleted. Sources older than the tombstone hold nothing visible
                        // up to the fragment's end, so they jump there.
                        self.seek_key.clear();
                        append_internal_key(&mut self.seek_key, fragment_end, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        skipping = true;
                        self.inner.skip_older_forward(covering, &self.seek_key);
                        // The current entry may have moved; look again.
                        continue;
                    }
                }
                match parsed.kind {
                    ValueKind::Delete | ValueKind::SingleDelete => {
                        // The tombstone is the newest visible version: skip the key's older ones.
                        if !hidden {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            skipping = true;
                        }
                    }
                    ValueKind::Put | ValueKind::BlobIndex => {
                        if !hidden {
                            self.valid = true;
                            self.value_is_owned = false;
                            self.value_offset = 0;
                            if parsed.kind == ValueKind::BlobIndex {
                                self.load_blob_value(false);
                            }
                            return;
                        }
                    }
                    ValueKind::Merge => {
                        if !hidden {
                            // I43: the value combines this operand with older entries.
                            let user_key = parsed.user_key.to_vec();
                            self.merge_forward(&user_key);
                            return;
                        }
                    }
                    ValueKind::PutWithExpiry => {
                        if !hidden {
                            let Some((expires_at_us, _)) = crate::ttl::split_expiring(self.inner.value()) else {
                                self.fail_short_expiring();
                                return;
                            };
                            if crate::ttl::is_expired(expires_at_us, self.read_time_us) {
                                // I42: expired, the key reads as deleted at this version.
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(parsed.user_key);
                                skipping = true;
                            } else {
                                self.valid = true;
                                self.value_is_owned = false;
                                self.value_offset = crate::ttl::EXPIRY_PREFIX_BYTES;
                                return;
                            }
                        }
                    }
                }
            }
            self.inner.next();
        }
        self.valid = false;
        self.check_inner_status();
    }

    /// Scans backward from the inner position, collecting into `saved_key`/`saved_value` the
    /// newest visible version of the nearest user key that is not deleted, and stops at the lower
    /// bound. Leaves the inner iterator on the entry before that key's entries. Once it has
    /// stepped over more than `reverse_versions_before_seek` visible versions of the key it is
    /// reading, it reads the key's newest visible version with a seek instead.
    fn find_prev_user_entry(&mut self) {
        self.direction = Direction::Reverse;
        self.forward_merged = false;
        // Visible versions of `saved_key` read since it was found live.
        let mut versions_stepped = 0usize;
        // Whether `saved_key`/`saved_value` hold the newest visible version seen so far of the
        // key being read; a newer tombstone clears it.
        let mut found = false;
        let mut found_in_blob = false;
        // The merge operands read since the key's last full version, oldest first (I43), and
        // whether `saved_value` holds the value beneath them.
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut base_present = false;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.fail_corrupt();
                return;
            };
            if self
                .lower_bound
                .as_deref()
                .is_some_and(|lower| self.comparator.compare_user_keys(parsed.user_key, lower).is_lt())
            {
                break;
            }
            if parsed.sequence <= self.sequence {
                if !found {
                    versions_stepped = 0;
                } else if self.comparator.compare_user_keys(parsed.user_key, &self.saved_key).is_lt() {
                    // Every version of the saved key has been read, and it is live.
                    break;
                } else {
                    // A newer version of the saved key (moving backward, keys never grow).
                    versions_stepped += 1;
                    if versions_stepped > self.reverse_versions_before_seek {
                        // The key has many versions: read its newest visible one from the
                        // front instead of stepping over the rest.
                        match self.read_newest_visible_by_seek() {
                            NewestVersion::Live => {
                                self.valid = true;
                                if !self.inner.valid() {
                                    self.check_inner_status();
                                }
                                return;
                            }
                            NewestVersion::Gone => {
                                found = false;
                                found_in_blob = false;
                                operands.clear();
                                continue;
                            }
                            NewestVersion::Failed => {
                                self.valid = false;
                                return;
                            }
                        }
                    }
                }
                let covered = covering_tombstone(&self.tombstones, self.sequence, parsed.user_key, parsed.sequence);
                if parsed.kind != ValueKind::Merge || covered.is_some() {
                    // A full version (or a deleted one): operands read so far lay beneath it.
                    operands.clear();
                }
                match parsed.kind {
                    ValueKind::Delete | ValueKind::SingleDelete => found = false,
                    // A version covered by a range tombstone reads as deleted (I38). Sources
                    // older than the tombstone hold nothing visible down to the fragment's
                    // start, so they jump below it; newer ones are read on.
                    ValueKind::Put | ValueKind::BlobIndex | ValueKind::PutWithExpiry | ValueKind::Merge
                        if covered.is_some() =>
                    {
                        found = false;
                        if let Some((covering, fragment)) = covered {
                            self.seek_key.clear();
                            append_internal_key(
                                &mut self.seek_key,
                                &fragment.start,
                                MAX_SEQUENCE_NUMBER,
                                ValueKind::FOR_SEEK,
                            );
                            self.skip_probe.clear();
                            self.skip_probe.extend_from_slice(self.inner.key());
                            self.inner.skip_older_backward(covering, &self.seek_key);
                            if !(self.inner.valid() && self.inner.key() == self.skip_probe.as_slice()) {
                                // The current entry's source moved: look at the new one.
                                continue;
                            }
                        }
                    }
                    ValueKind::PutWithExpiry => {
                        let Some((expires_at_us, value)) = crate::ttl::split_expiring(self.inner.value()) else {
                            self.fail_short_expiring();
                            return;
                        };
                        // I42: an expired version reads as a delete.
                        found = !crate::ttl::is_expired(expires_at_us, self.read_time_us);
                        if found {
                            found_in_blob = false;
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            self.saved_value.clear();
                            self.saved_value.extend_from_slice(value);
                        }
                    }
                    ValueKind::Put | ValueKind::BlobIndex => {
                        found = true;
                        found_in_blob = parsed.kind == ValueKind::BlobIndex;
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.inner.value());
                    }
                    ValueKind::Merge => {
                        if operands.is_empty() {
                            base_present = found;
                        }
                        operands.push(self.inner.value().to_vec());
                        found = true;
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                    }
                }
            }
            self.inner.prev();
        }
        self.valid = found;
        self.value_is_owned = false;
        if !self.inner.valid() {
            self.check_inner_status();
        }
        if self.valid && !operands.is_empty() {
            let base = match (base_present, found_in_blob) {
                (false, _) => Ok(None),
                (true, false) => Ok(Some(std::mem::take(&mut self.saved_value))),
                (true, true) => self.resolve_blob(&self.saved_key, &self.saved_value).map(Some),
            };
            match base.and_then(|base| self.full_merge(&self.saved_key, base.as_deref(), &operands)) {
                Ok(value) => {
                    self.owned_value = value;
                    self.value_is_owned = true;
                }
                Err(error) => {
                    self.error = Some(error);
                    self.valid = false;
                }
            }
        } else if self.valid && found_in_blob {
            self.load_blob_value(true);
        }
    }

    /// Backward, for the key in `saved_key`: reads its newest visible version with a seek to it
    /// at the snapshot (resolving a merge, an expiry, a blob reference or a covering range
    /// tombstone as a forward read would), then leaves the inner iterator on the entry before
    /// the key's entries. `saved_key` keeps the key; on [`NewestVersion::Live`] the value is in
    /// `saved_value` (or in `owned_value`, with `value_is_owned`).
    fn read_newest_visible_by_seek(&mut self) -> NewestVersion {
        self.seek_key.clear();
        append_internal_key(&mut self.seek_key, &self.saved_key, self.sequence, ValueKind::FOR_SEEK);
        self.inner.seek(&self.seek_key);
        self.value_is_owned = false;
        let outcome = self.read_newest_visible_at_inner();
        if matches!(outcome, NewestVersion::Failed) {
            return outcome;
        }
        self.seek_key.clear();
        append_internal_key(&mut self.seek_key, &self.saved_key, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
        self.position_before_seek_key();
        outcome
    }

    /// [`UserIterator::read_newest_visible_by_seek`]'s read, with the inner iterator at the
    /// first entry at or after (`saved_key`, the snapshot).
    fn read_newest_visible_at_inner(&mut self) -> NewestVersion {
        if !self.inner.valid() {
            return match self.inner.status() {
                Ok(()) => NewestVersion::Gone,
                Err(error) => {
                    self.error = Some(error);
                    NewestVersion::Failed
                }
            };
        }
        let Some(parsed) = parse_internal_key(self.inner.key()) else {
            self.fail_corrupt();
            return NewestVersion::Failed;
        };
        if !self.comparator.compare_user_keys(parsed.user_key, &self.saved_key).is_eq() {
            return NewestVersion::Gone;
        }
        debug_assert!(parsed.sequence <= self.sequence, "a seek at the snapshot lands on a visible entry");
        // A forward read's rule. From `find_prev_user_entry` it never fires: the versions it
        // stepped over were live, so no tombstone covers this newer one.
        if covering_tombstone(&self.tombstones, self.sequence, parsed.user_key, parsed.sequence).is_some() {
            return NewestVersion::Gone;
        }
        let kind = parsed.kind;
        match kind {
            ValueKind::Delete | ValueKind::SingleDelete => NewestVersion::Gone,
            ValueKind::Put | ValueKind::BlobIndex => {
                self.saved_value.clear();
                self.saved_value.extend_from_slice(self.inner.value());
                if kind == ValueKind::BlobIndex {
                    self.load_blob_value(true);
                    if self.error.is_some() {
                        return NewestVersion::Failed;
                    }
                }
                NewestVersion::Live
            }
            ValueKind::PutWithExpiry => {
                let Some((expires_at_us, value)) = crate::ttl::split_expiring(self.inner.value()) else {
                    self.fail_short_expiring();
                    return NewestVersion::Failed;
                };
                if crate::ttl::is_expired(expires_at_us, self.read_time_us) {
                    return NewestVersion::Gone;
                }
                self.saved_value.clear();
                self.saved_value.extend_from_slice(value);
                NewestVersion::Live
            }
            ValueKind::Merge => {
                // I43: combine this operand with the entries beneath it, read forward.
                // `merge_forward` copies the key it is given back into `saved_key`.
                let user_key = std::mem::take(&mut self.saved_key);
                self.merge_forward(&user_key);
                self.forward_merged = false;
                if self.error.is_some() {
                    NewestVersion::Failed
                } else {
                    NewestVersion::Live
                }
            }
        }
    }

    /// Records the inner iterator's error, if any, and invalidates.
    fn check_inner_status(&mut self) {
        if let Err(error) = self.inner.status() {
            self.error = Some(error);
            self.valid = false;
        }
    }

    /// Records an entry with an expiry too short to hold it as corruption and invalidates.
    fn fail_short_expiring(&mut self) {
        let length = self.inner.value().len();
        self.error =
            Some(Error::corruption("<iterator>", 0, format!("an entry with an expiry has a {length}-byte value")));
        self.valid = false;
    }

    /// Records a malformed internal key as corruption and invalidates.
    fn fail_corrupt(&mut self) {
        let length = self.inner.key().len();
        self.error = Some(Error::corruption("<iterator>", 0, format!("malformed internal key of {length} bytes")));
        self.valid = false;
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // Test tables of entries are clearer spelled out.
mod tests {
    use super::*;
    use crate::iterator::level::{FileFilter, FileOpener, FileRange, LevelIterator};
    use crate::iterator::merge::tests::FailingIterator;
    use crate::iterator::merge::MergingIterator;
    use crate::iterator::VecIterator;
    use crate::key::{compare_internal_keys, make_internal_key};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
    use std::sync::Arc;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// One write of the model: `None` is a delete.
    struct Write {
        user_key: Vec<u8>,
        sequence: u64,
        value: Option<Vec<u8>>,
    }

    fn internal_entry(write: &Write) -> (Vec<u8>, Vec<u8>) {
        let kind = if write.value.is_some() { ValueKind::Put } else { ValueKind::Delete };
        (make_internal_key(&write.user_key, write.sequence, kind), write.value.clone().unwrap_or_default())
    }

    fn sorted(mut entries: Entries) -> Entries {
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        entries
    }

    /// A level iterator over `entries`, cut into files of random sizes.
    fn level_source(entries: Entries, rng: &mut SmallRng) -> Box<dyn InternalIterator> {
        let mut files: Vec<Entries> = Vec::new();
        let mut start = 0;
        while start < entries.len() {
            let take = rng.gen_range(1..=(entries.len() - start).min(5));
            files.push(entries[start..start + take].to_vec());
            start += take;
        }
        let ranges = files
            .iter()
            .map(|file| FileRange { smallest: file[0].0.clone(), largest: file[file.len() - 1].0.clone() })
            .collect();
        // Every file's exact filter, so that seeks may leave the level pending (I49).
        let user_keys: Vec<std::collections::BTreeSet<Vec<u8>>> =
            files.iter().map(|file| file.iter().map(|(key, _)| crate::key::user_key(key).to_vec()).collect()).collect();
        let filter: FileFilter = Arc::new(move |index, user_key| user_keys[index].contains(user_key));
        let opener: FileOpener =
            Arc::new(move |index| Ok(Box::new(VecIterator::new(files[index].clone())) as Box<dyn InternalIterator>));
        Box::new(LevelIterator::new(ranges, opener, KeyComparator::Bytewise).with_filter(filter))
    }

    /// A memtable holding `entries`, whose iterator jumps over versions with searches from its
    /// last search path (`seek_forward`).
    fn memtable_source(entries: &Entries) -> Box<dyn InternalIterator> {
        let memtable = Arc::new(crate::memtable::MemTable::new(64 << 10, KeyComparator::Bytewise));
        for (internal_key, value) in entries {
            let parsed = parse_internal_key(internal_key).expect("well-formed key");
            memtable.insert(parsed.user_key, parsed.sequence, parsed.kind, value);
        }
        Box::new(memtable.iter())
    }

    /// Splits the writes among `source_count` sources (some of them levels) under a merge.
    fn merged_sources(writes: &[Write], source_count: usize, rng: &mut SmallRng) -> Box<dyn InternalIterator> {
        let mut sources: Vec<Entries> = vec![Vec::new(); source_count];
        for write in writes {
            sources[rng.gen_range(0..source_count)].push(internal_entry(write));
        }
        let children = sources
            .into_iter()
            .map(|entries| {
                let entries = sorted(entries);
                match rng.gen_range(0..10) {
                    0..=2 => level_source(entries, rng),
                    3..=5 => memtable_source(&entries),
                    _ => Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>,
                }
            })
            .collect();
        Box::new(MergingIterator::new(children, KeyComparator::Bytewise))
    }

    /// The user view the model expects: newest visible write per key, live, within bounds.
    fn expected_view(writes: &[Write], sequence: u64, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Entries {
        let mut newest: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
        for write in writes.iter().filter(|write| write.sequence <= sequence) {
            let slot = newest.entry(write.user_key.clone()).or_insert((0, None));
            if write.sequence >= slot.0 {
                *slot = (write.sequence, write.value.clone());
            }
        }
        newest
            .into_iter()
            .filter(|(key, _)| lower.is_none_or(|lower| key.as_slice() >= lower))
            .filter(|(key, _)| upper.is_none_or(|upper| key.as_slice() < upper))
            .filter_map(|(key, (_, value))| value.map(|value| (key, value)))
            .collect()
    }

    /// How many versions backward scans step over before they seek: mostly small, so that the
    /// models' few versions per key take the seeking path as often as the stepping one.
    fn random_reverse_threshold(rng: &mut SmallRng) -> usize {
        match rng.gen_range(0..4) {
            0 => REVERSE_VERSIONS_BEFORE_SEEK,
            1 => usize::MAX,
            _ => rng.gen_range(0..3),
        }
    }

    fn random_user_key(rng: &mut SmallRng) -> Vec<u8> {
        let length = rng.gen_range(0..=3);
        (0..length).map(|_| b"abc"[rng.gen_range(0..3)]).collect()
    }

    /// Random writes with increasing sequence numbers starting at 1.
    fn random_writes(rng: &mut SmallRng, count: usize) -> Vec<Write> {
        let key_pool: Vec<Vec<u8>> = (0..rng.gen_range(1..12)).map(|_| random_user_key(rng)).collect();
        let delete_probability = rng.gen_range(0.0..0.7);
        (1..=count as u64)
            .map(|sequence| {
                let user_key = key_pool[rng.gen_range(0..key_pool.len())].clone();
                let value = (!rng.gen_bool(delete_probability)).then(|| format!("v{sequence}").into_bytes());
                Write { user_key, sequence, value }
            })
            .collect()
    }

    fn assert_position(iterator: &UserIterator, expected: &Entries, position: Option<usize>, context: &str) {
        assert!(iterator.status().is_ok(), "{context}: {:?}", iterator.status());
        assert_eq!(iterator.valid(), position.is_some(), "{context}: validity");
        if let Some(index) = position {
            assert_eq!(iterator.key(), &expected[index].0[..], "{context}: key");
            assert_eq!(iterator.value(), &expected[index].1[..], "{context}: value");
        }
    }

    /// Runs a random walk over `iterator` and checks each step against `expected`.
    fn walk(iterator: &mut UserIterator, expected: &Entries, rng: &mut SmallRng, steps: usize, case: usize) {
        let mut position: Option<usize> = None;
        for step in 0..steps {
            let choice = rng.gen_range(0..12);
            let description;
            if position.is_some() && choice < 4 {
                description = "next".to_string();
                iterator.next();
                position = position.and_then(|p| (p + 1 < expected.len()).then_some(p + 1));
            } else if position.is_some() && choice < 8 {
                description = "prev".to_string();
                iterator.prev();
                position = position.and_then(|p| p.checked_sub(1));
            } else if choice % 4 == 0 {
                let target = random_user_key(rng);
                description = format!("seek({target:?})");
                iterator.seek(&target);
                let index = expected.partition_point(|(key, _)| key.as_slice() < target.as_slice());
                position = (index < expected.len()).then_some(index);
            } else if choice % 4 == 1 {
                let target = random_user_key(rng);
                description = format!("seek_for_prev({target:?})");
                iterator.seek_for_prev(&target);
                let index = expected.partition_point(|(key, _)| key.as_slice() <= target.as_slice());
                position = index.checked_sub(1);
            } else if choice % 4 == 2 {
                description = "seek_to_first".to_string();
                iterator.seek_to_first();
                position = (!expected.is_empty()).then_some(0);
            } else {
                description = "seek_to_last".to_string();
                iterator.seek_to_last();
                position = expected.len().checked_sub(1);
            }
            assert_position(iterator, expected, position, &format!("case {case} step {step} {description}"));
        }
    }

    #[test]
    fn model_random_walks() {
        let mut rng = SmallRng::seed_from_u64(31);
        for case in 0..4000 {
            let write_count = rng.gen_range(0..50);
            let writes = random_writes(&mut rng, write_count);
            let sequence = match rng.gen_range(0..10) {
                0 => u64::MAX,
                1 => 0,
                _ => rng.gen_range(0..=write_count as u64 + 1),
            };
            let lower = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
            let upper = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
            let expected = expected_view(&writes, sequence, lower.as_deref(), upper.as_deref());
            let source_count = rng.gen_range(1..5);
            let inner = merged_sources(&writes, source_count, &mut rng);
            let mut iterator = UserIterator::new(inner, KeyComparator::Bytewise, sequence, lower, upper);
            iterator.reverse_versions_before_seek = random_reverse_threshold(&mut rng);
            walk(&mut iterator, &expected, &mut rng, 60, case);
        }
    }

    #[test]
    fn model_full_scans_and_alternation() {
        let mut rng = SmallRng::seed_from_u64(32);
        for case in 0..1500 {
            let write_count = rng.gen_range(0..40);
            let writes = random_writes(&mut rng, write_count);
            let sequence = rng.gen_range(0..=write_count as u64 + 1);
            let lower = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
            let upper = rng.gen_bool(0.3).then(|| random_user_key(&mut rng));
            let expected = expected_view(&writes, sequence, lower.as_deref(), upper.as_deref());
            let source_count = rng.gen_range(1..4);
            let inner = merged_sources(&writes, source_count, &mut rng);
            let mut iterator = UserIterator::new(inner, KeyComparator::Bytewise, sequence, lower, upper);
            iterator.reverse_versions_before_seek = random_reverse_threshold(&mut rng);
            check_scans_and_alternation(&mut iterator, &expected, case);
        }
    }

    /// Full scans both ways, then from every position: prev, next, next, prev, alternating on
    /// every step.
    fn check_scans_and_alternation(iterator: &mut UserIterator, expected: &Entries, case: usize) {
        let mut forward = Vec::new();
        iterator.seek_to_first();
        while iterator.valid() {
            forward.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.next();
        }
        assert!(iterator.status().is_ok());
        assert_eq!(&forward, expected, "case {case}: forward scan");
        let mut backward = Vec::new();
        iterator.seek_to_last();
        while iterator.valid() {
            backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.prev();
        }
        backward.reverse();
        assert_eq!(&backward, expected, "case {case}: backward scan");
        for index in 0..expected.len() {
            let context = format!("case {case} alternation at {index}");
            iterator.seek(&expected[index].0);
            assert_position(iterator, expected, Some(index), &context);
            iterator.prev();
            assert_position(iterator, expected, index.checked_sub(1), &context);
            if index == 0 {
                continue;
            }
            iterator.next();
            assert_position(iterator, expected, Some(index), &context);
            iterator.next();
            let after = (index + 1 < expected.len()).then_some(index + 1);
            assert_position(iterator, expected, after, &context);
            if after.is_some() {
                iterator.prev();
                assert_position(iterator, expected, Some(index), &context);
            }
        }
        // Alternate on every step while walking forward from the first key.
        iterator.seek_to_first();
        let mut index = 0;
        while iterator.valid() {
            iterator.next();
            if !iterator.valid() {
                break;
            }
            iterator.prev();
            assert_position(iterator, expected, Some(index), &format!("case {case} zigzag at {index}"));
            iterator.next();
            index += 1;
            assert_position(iterator, expected, Some(index), &format!("case {case} zigzag at {index}"));
        }
        assert_eq!(index + 1, expected.len().max(1), "case {case}: zigzag reached the end");
    }

    /// A user iterator over one sorted source built from (user key, sequence, value) triples,
    /// where a `None` value is a delete.
    fn iterator_over(
        writes: &[(&[u8], u64, Option<&[u8]>)],
        sequence: u64,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> UserIterator {
        let entries = writes
            .iter()
            .map(|&(user_key, sequence, value)| {
                internal_entry(&Write { user_key: user_key.to_vec(), sequence, value: value.map(<[u8]>::to_vec) })
            })
            .collect();
        let inner = Box::new(VecIterator::new(sorted(entries)));
        UserIterator::new(
            inner,
            KeyComparator::Bytewise,
            sequence,
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
        )
    }

    fn collect(iterator: &mut UserIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries = Vec::new();
        iterator.seek_to_first();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.next();
        }
        entries
    }

    fn pair(key: &[u8], value: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (key.to_vec(), value.to_vec())
    }

    #[test]
    fn empty_input() {
        let mut iterator = iterator_over(&[], 10, None, None);
        iterator.seek_to_first();
        assert!(!iterator.valid());
        iterator.seek_to_last();
        assert!(!iterator.valid());
        iterator.seek(b"a");
        assert!(!iterator.valid());
        iterator.seek_for_prev(b"z");
        assert!(!iterator.valid());
        assert!(iterator.status().is_ok());
    }

    #[test]
    fn all_deleted() {
        let writes: &[(&[u8], u64, Option<&[u8]>)] =
            &[(b"a", 1, Some(b"1")), (b"b", 2, Some(b"2")), (b"a", 3, None), (b"b", 4, None), (b"c", 5, None)];
        let mut iterator = iterator_over(writes, 10, None, None);
        assert!(collect(&mut iterator).is_empty());
        iterator.seek_to_last();
        assert!(!iterator.valid());
        iterator.seek(b"a");
        assert!(!iterator.valid());
        iterator.seek_for_prev(b"c");
        assert!(!iterator.valid());
        // At an older snapshot the puts are visible again.
        let mut iterator = iterator_over(writes, 2, None, None);
        assert_eq!(collect(&mut iterator), vec![pair(b"a", b"1"), pair(b"b", b"2")]);
    }

    #[test]
    fn bounds_excluding_everything() {
        let writes: &[(&[u8], u64, Option<&[u8]>)] = &[(b"b", 1, Some(b"1")), (b"c", 2, Some(b"2"))];
        for (lower, upper) in [
            (Some(&b"d"[..]), None),
            (None, Some(&b"b"[..])),
            (Some(&b"c"[..]), Some(&b"c"[..])),
            (Some(&b"c"[..]), Some(&b"b"[..])),
            (Some(&b"bb"[..]), Some(&b"c"[..])),
        ] {
            let mut iterator = iterator_over(writes, 10, lower, upper);
            assert!(collect(&mut iterator).is_empty(), "bounds {lower:?}..{upper:?}");
            iterator.seek_to_last();
            assert!(!iterator.valid());
            iterator.seek(b"");
            assert!(!iterator.valid());
            iterator.seek_for_prev(b"zzz");
            assert!(!iterator.valid());
            assert!(iterator.status().is_ok());
        }
    }

    #[test]
    fn bounds_clamp_seeks_and_stop_movement() {
        let writes: &[(&[u8], u64, Option<&[u8]>)] =
            &[(b"a", 1, Some(b"a")), (b"b", 2, Some(b"b")), (b"c", 3, Some(b"c")), (b"d", 4, Some(b"d"))];
        let mut iterator = iterator_over(writes, 10, Some(b"b"), Some(b"d"));
        iterator.seek(b"a");
        assert_eq!(iterator.key(), b"b");
        iterator.prev();
        assert!(!iterator.valid(), "prev stops at the lower bound");
        iterator.seek_for_prev(b"z");
        assert_eq!(iterator.key(), b"c");
        iterator.next();
        assert!(!iterator.valid(), "next stops at the upper bound");
        iterator.seek(b"d");
        assert!(!iterator.valid());
        iterator.seek_for_prev(b"a");
        assert!(!iterator.valid());
        iterator.seek_to_last();
        assert_eq!(iterator.key(), b"c");
        iterator.prev();
        assert_eq!(iterator.key(), b"b");
        iterator.next();
        assert_eq!(iterator.key(), b"c");
    }

    /// Counts the entries an iterator steps over, to check that scans stop at the bounds.
    struct CountingIterator {
        inner: VecIterator,
        steps: Arc<AtomicUsize>,
    }

    impl InternalIterator for CountingIterator {
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
            self.inner.seek(target);
        }
        fn next(&mut self) {
            self.steps.fetch_add(1, AtomicOrdering::Relaxed);
            self.inner.next();
        }
        fn prev(&mut self) {
            self.steps.fetch_add(1, AtomicOrdering::Relaxed);
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
    }

    #[test]
    fn scans_stop_at_the_bounds() {
        let entries: Entries =
            (b'a'..=b'z').map(|letter| (make_internal_key(&[letter], 1, ValueKind::Put), vec![letter])).collect();
        let steps = Arc::new(AtomicUsize::new(0));
        let inner = Box::new(CountingIterator { inner: VecIterator::new(entries), steps: Arc::clone(&steps) });
        let mut iterator =
            UserIterator::new(inner, KeyComparator::Bytewise, 10, Some(b"m".to_vec()), Some(b"p".to_vec()));
        assert_eq!(collect(&mut iterator), vec![pair(b"m", b"m"), pair(b"n", b"n"), pair(b"o", b"o")]);
        assert_eq!(steps.swap(0, AtomicOrdering::Relaxed), 3, "m to n, n to o, o to the bound p");
        iterator.seek_to_last();
        while iterator.valid() {
            iterator.prev();
        }
        // The seek lands on p; one step back reaches o, then one step per key down to l.
        assert_eq!(steps.swap(0, AtomicOrdering::Relaxed), 4);
    }

    #[test]
    fn single_key() {
        let mut iterator = iterator_over(&[(b"k", 1, Some(b"v"))], 1, None, None);
        iterator.seek_to_first();
        assert_eq!((iterator.key(), iterator.value()), (&b"k"[..], &b"v"[..]));
        iterator.next();
        assert!(!iterator.valid());
        iterator.seek_to_last();
        assert_eq!(iterator.key(), b"k");
        iterator.prev();
        assert!(!iterator.valid());
        iterator.seek(b"k");
        assert_eq!(iterator.key(), b"k");
        iterator.seek(b"j");
        assert_eq!(iterator.key(), b"k");
        iterator.seek(b"k\0");
        assert!(!iterator.valid());
        iterator.seek_for_prev(b"k");
        assert_eq!(iterator.key(), b"k");
        iterator.seek_for_prev(b"j");
        assert!(!iterator.valid());
        // A snapshot before the write sees nothing.
        let mut iterator = iterator_over(&[(b"k", 1, Some(b"v"))], 0, None, None);
        assert!(collect(&mut iterator).is_empty());
    }

    #[test]
    fn prev_from_first_and_next_from_last() {
        let writes: &[(&[u8], u64, Option<&[u8]>)] = &[(b"a", 1, Some(b"1")), (b"b", 2, Some(b"2"))];
        let mut iterator = iterator_over(writes, 10, None, None);
        iterator.seek_to_first();
        iterator.prev();
        assert!(!iterator.valid());
        iterator.seek_to_last();
        iterator.next();
        assert!(!iterator.valid());
        // The same from positions reached in the other direction.
        iterator.seek_for_prev(b"a");
        assert_eq!(iterator.key(), b"a");
        iterator.prev();
        assert!(!iterator.valid());
        iterator.seek(b"b");
        iterator.next();
        assert!(!iterator.valid());
    }

    #[test]
    fn newest_visible_version_wins_in_both_directions() {
        let writes: &[(&[u8], u64, Option<&[u8]>)] = &[
            (b"a", 1, Some(b"a1")),
            (b"b", 2, Some(b"b2")),
            (b"b", 3, None),
            (b"b", 4, Some(b"b4")),
            (b"b", 9, Some(b"b9")),
            (b"c", 5, Some(b"c5")),
            (b"c", 6, None),
            (b"d", 7, Some(b"d7")),
        ];
        let mut iterator = iterator_over(writes, 7, None, None);
        assert_eq!(collect(&mut iterator), vec![pair(b"a", b"a1"), pair(b"b", b"b4"), pair(b"d", b"d7")]);
        iterator.seek_to_last();
        assert_eq!(iterator.value(), b"d7");
        iterator.prev();
        assert_eq!(iterator.value(), b"b4", "the tombstoned key is skipped and b's newest visible version found");
        iterator.prev();
        assert_eq!(iterator.value(), b"a1");
        iterator.next();
        assert_eq!(iterator.value(), b"b4");
        iterator.next();
        assert_eq!(iterator.value(), b"d7");
        iterator.prev();
        assert_eq!(iterator.value(), b"b4");
    }

    #[test]
    fn malformed_internal_key_is_corruption() {
        let mut bad_key = make_internal_key(b"b", 1, ValueKind::Put);
        let kind_position = bad_key.len() - TRAILER_SIZE_BYTES;
        bad_key[kind_position] = 7;
        let entries = vec![(make_internal_key(b"a", 1, ValueKind::Put), b"1".to_vec()), (bad_key, b"2".to_vec())];
        let mut iterator =
            UserIterator::new(Box::new(VecIterator::new(entries)), KeyComparator::Bytewise, 10, None, None);
        iterator.seek_to_first();
        assert_eq!(iterator.key(), b"a");
        iterator.next();
        assert!(!iterator.valid());
        assert!(iterator.status().expect_err("corruption").is_corruption());
        iterator.seek_to_first();
        assert!(!iterator.valid(), "the error is sticky");
    }

    #[test]
    fn inner_error_is_reported() {
        let entries: Entries =
            [b"a", b"b", b"c"].iter().map(|key| (make_internal_key(*key, 1, ValueKind::Put), key.to_vec())).collect();
        let mut iterator = UserIterator::new(
            Box::new(FailingIterator::new(entries.clone(), 2)),
            KeyComparator::Bytewise,
            10,
            None,
            None,
        );
        iterator.seek_to_first();
        iterator.next();
        assert_eq!(iterator.key(), b"b");
        iterator.next();
        assert!(!iterator.valid());
        assert!(iterator.status().is_err());

        // Two calls succeed: the seek, and the step back that finds "c" complete.
        let mut iterator =
            UserIterator::new(Box::new(FailingIterator::new(entries, 2)), KeyComparator::Bytewise, 10, None, None);
        iterator.seek_to_last();
        assert_eq!(iterator.key(), b"c");
        iterator.prev();
        assert!(!iterator.valid());
        assert!(iterator.status().is_err());
    }
}
