//! The level iterator: one cursor over all the table files of a sorted level.
//!
//! A level at depth one or more holds files whose internal-key ranges are sorted (in the column
//! family's order) and do not overlap, so their concatenation is sorted. [`LevelIterator`] walks
//! that concatenation while keeping at most one file open: it opens files lazily through a
//! caller-supplied opener, finds the file for a seek by binary search over the files' largest keys,
//! and steps into the neighbouring file when the current one is exhausted, skipping files that
//! yield no entries.
//!
//! Concurrency contract: used by one thread at a time, like every [`InternalIterator`]. The opener
//! is shared (`Arc`) and may be called from any thread; it must keep whatever it opens alive
//! through the returned iterator.
//!
//! Invariants: `files` is sorted by internal key and the ranges are disjoint (checked in debug
//! builds). When valid, the open iterator belongs to `files[file_index]` and is positioned on an
//! entry. The first error met (from the opener or from a file iterator) is kept, makes the
//! iterator invalid for good and is returned by `status()`.

use std::sync::Arc;

use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key;

/// The internal-key range covered by one file of a level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileRange {
    /// The smallest internal key in the file.
    pub(crate) smallest: Vec<u8>,
    /// The largest internal key in the file.
    pub(crate) largest: Vec<u8>,
}

/// Opens the iterator of the file at an index into the level's file list.
pub(crate) type FileOpener = Arc<dyn Fn(usize) -> Result<Box<dyn InternalIterator>> + Send + Sync>;

/// Answers whether the file at an index into the level's file list may hold entries of a user
/// key (its bloom filter); true when it cannot tell.
pub(crate) type FileFilter = Arc<dyn Fn(usize, &[u8]) -> bool + Send + Sync>;

/// Concatenates the files of one level, opening each lazily; see the module documentation.
pub(crate) struct LevelIterator {
    /// Shared with the version the files belong to, so creating an iterator copies no keys.
    files: Arc<[FileRange]>,
    opener: FileOpener,
    /// The files' filters, for `may_contain_user_key`; `None` when there are none to ask.
    filter: Option<FileFilter>,
    /// The index in `files` of the file `file_iterator` reads; meaningless when it is `None`.
    file_index: usize,
    file_iterator: Option<Box<dyn InternalIterator>>,
    /// The first error met; once set the iterator stays invalid.
    error: Option<Error>,
    /// The order of the level's keys.
    comparator: KeyComparator,
}

impl LevelIterator {
    /// Creates an unpositioned iterator; `files` must be sorted by `comparator` and
    /// non-overlapping, and `opener(index)` must return an iterator over the entries of
    /// `files[index]`.
    pub(crate) fn new(files: Arc<[FileRange]>, opener: FileOpener, comparator: KeyComparator) -> LevelIterator {
        debug_assert!(files.iter().all(|file| comparator.compare_internal_keys(&file.smallest, &file.largest).is_le()));
        debug_assert!(files
            .windows(2)
            .all(|pair| comparator.compare_internal_keys(&pair[0].largest, &pair[1].smallest).is_lt()));
        LevelIterator { files, opener, filter: None, file_index: 0, file_iterator: None, error: None, comparator }
    }

    /// Lets `may_contain_user_key` ask the files' filters (`filter(index, user_key)`) besides
    /// their key ranges.
    pub(crate) fn with_filter(mut self, filter: FileFilter) -> LevelIterator {
        self.filter = Some(filter);
        self
    }

    /// Makes `files[index]` the open file, reusing the open iterator when it is already that
    /// file. Returns false (with the error recorded) when the opener fails.
    fn open_file(&mut self, index: usize) -> bool {
        if self.file_iterator.is_some() && self.file_index == index {
            return true;
        }
        // Close the previous file first so that at most one file is held open.
        self.file_iterator = None;
        match (self.opener)(index) {
            Ok(iterator) => {
                self.file_index = index;
                self.file_iterator = Some(iterator);
                true
            }
            Err(error) => {
                self.error = Some(error);
                false
            }
        }
    }

    /// Records the error of an exhausted file iterator; returns true when there was one.
    fn take_file_error(&mut self) -> bool {
        let Some(iterator) = &self.file_iterator else { return false };
        match iterator.status() {
            Ok(()) => false,
            Err(error) => {
                self.error = Some(error);
                self.file_iterator = None;
                true
            }
        }
    }

    /// While the open file is exhausted, moves to the start of the following file.
    fn skip_exhausted_files_forward(&mut self) {
        while self.file_iterator.as_ref().is_some_and(|iterator| !iterator.valid()) {
            if self.take_file_error() || self.file_index + 1 >= self.files.len() {
                return;
            }
            if !self.open_file(self.file_index + 1) {
                return;
            }
            if let Some(iterator) = &mut self.file_iterator {
                iterator.seek_to_first();
            }
        }
    }

    /// While the open file is exhausted, moves to the end of the preceding file.
    fn skip_exhausted_files_backward(&mut self) {
        while self.file_iterator.as_ref().is_some_and(|iterator| !iterator.valid()) {
            if self.take_file_error() || self.file_index == 0 {
                return;
            }
            if !self.open_file(self.file_index - 1) {
                return;
            }
            if let Some(iterator) = &mut self.file_iterator {
                iterator.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.file_iterator.as_ref().is_some_and(|iterator| iterator.valid())
    }

    fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        // The one file whose user-key range can hold the key: the first whose largest user key
        // is not below it. (When a key's versions end one file and begin the next, that first
        // file holds the key, so its filter answers "maybe".)
        let comparator = &self.comparator;
        let index = self
            .files
            .partition_point(|file| comparator.compare_user_keys(key::user_key(&file.largest), user_key).is_lt());
        let Some(file) = self.files.get(index) else { return false };
        if comparator.compare_user_keys(user_key, key::user_key(&file.smallest)).is_lt() {
            return false;
        }
        self.filter.as_ref().is_none_or(|filter| filter(index, user_key))
    }

    fn reaches_cheaply(&self, target: &[u8]) -> bool {
        self.valid()
            && self.comparator.compare_internal_keys(&self.files[self.file_index].largest, target).is_ge()
            && self.file_iterator.as_ref().is_some_and(|iterator| iterator.reaches_cheaply(target))
    }

    fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        if self.files.is_empty() || !self.open_file(0) {
            return;
        }
        if let Some(iterator) = &mut self.file_iterator {
            iterator.seek_to_first();
        }
        self.skip_exhausted_files_forward();
    }

    fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        if self.files.is_empty() || !self.open_file(self.files.len() - 1) {
            return;
        }
        if let Some(iterator) = &mut self.file_iterator {
            iterator.seek_to_last();
        }
        self.skip_exhausted_files_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // The only file that can hold the first entry >= target is the first whose largest key
        // is >= target; files before it end below the target.
        let comparator = &self.comparator;
        let index = self.files.partition_point(|file| comparator.compare_internal_keys(&file.largest, target).is_lt());
        if index == self.files.len() {
            // Every entry of the level is below the target. Closing the file makes the
            // iterator invalid without a separate "unpositioned" flag.
            self.file_iterator = None;
            return;
        }
        if !self.open_file(index) {
            return;
        }
        if let Some(iterator) = &mut self.file_iterator {
            iterator.seek(target);
        }
        self.skip_exhausted_files_forward();
    }

    fn seek_forward(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // Within the open file when the target is too: that file moves on from where it stands.
        let within_open_file =
            self.valid() && self.comparator.compare_internal_keys(&self.files[self.file_index].largest, target).is_ge();
        if !within_open_file {
            self.seek(target);
            return;
        }
        if let Some(iterator) = &mut self.file_iterator {
            iterator.seek_forward(target);
        }
        self.skip_exhausted_files_forward();
    }

    fn next(&mut self) {
        assert!(self.valid(), "LevelIterator::next called on an invalid iterator");
        if let Some(iterator) = &mut self.file_iterator {
            iterator.next();
        }
        self.skip_exhausted_files_forward();
    }

    fn prev(&mut self) {
        assert!(self.valid(), "LevelIterator::prev called on an invalid iterator");
        if let Some(iterator) = &mut self.file_iterator {
            iterator.prev();
        }
        self.skip_exhausted_files_backward();
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        self.file_iterator.as_ref().map_or(&[][..], |iterator| iterator.key())
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        self.file_iterator.as_ref().map_or(&[][..], |iterator| iterator.value())
    }

    fn status(&self) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.duplicate());
        }
        self.file_iterator.as_ref().map_or(Ok(()), |iterator| iterator.status())
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // Test tables of entries are clearer spelled out.
mod tests {
    use super::*;
    use crate::iterator::merge::tests::{walk_and_compare, FailingIterator};
    use crate::iterator::VecIterator;
    use crate::key::{make_internal_key, ValueKind};
    use parking_lot::Mutex;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn entry(user_key: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(user_key, sequence, ValueKind::Put), user_key.to_vec())
    }

    /// Builds a level from per-file entries. A file with no entries still needs a range, which
    /// `empty_ranges` supplies in order (an empty file arises when its range was declared but
    /// its entries were all filtered away). The returned log records every opener call.
    fn level_of(
        files: Vec<Entries>,
        empty_ranges: Vec<FileRange>,
        failing_file: Option<usize>,
    ) -> (LevelIterator, Arc<Mutex<Vec<usize>>>) {
        let mut empty_ranges = empty_ranges.into_iter();
        let ranges: Vec<FileRange> = files
            .iter()
            .map(|entries| match (entries.first(), entries.last()) {
                (Some(first), Some(last)) => FileRange { smallest: first.0.clone(), largest: last.0.clone() },
                _ => empty_ranges.next().expect("a range for every empty file"),
            })
            .collect();
        let opened = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&opened);
        let opener: FileOpener = Arc::new(move |index| {
            log.lock().push(index);
            if failing_file == Some(index) {
                return Err(Error::corruption("000042.sst", 0, "cannot open"));
            }
            Ok(Box::new(VecIterator::new(files[index].clone())) as Box<dyn InternalIterator>)
        });
        (LevelIterator::new(ranges.into(), opener, KeyComparator::Bytewise), opened)
    }

    fn range(smallest: &[u8], largest: &[u8]) -> FileRange {
        FileRange {
            smallest: make_internal_key(smallest, 1, ValueKind::Put),
            largest: make_internal_key(largest, 1, ValueKind::Put),
        }
    }

    fn collect_forward(level: &mut LevelIterator) -> Vec<Vec<u8>> {
        let mut values = Vec::new();
        level.seek_to_first();
        while level.valid() {
            values.push(level.value().to_vec());
            level.next();
        }
        values
    }

    fn collect_backward(level: &mut LevelIterator) -> Vec<Vec<u8>> {
        let mut values = Vec::new();
        level.seek_to_last();
        while level.valid() {
            values.push(level.value().to_vec());
            level.prev();
        }
        values
    }

    fn gapped_files() -> Vec<Entries> {
        vec![
            vec![entry(b"b", 1), entry(b"c", 1)],
            Vec::new(),
            vec![entry(b"f", 1), entry(b"g", 1)],
            Vec::new(),
            Vec::new(),
            vec![entry(b"m", 1)],
        ]
    }

    fn gapped_empty_ranges() -> Vec<FileRange> {
        vec![range(b"d", b"d"), range(b"h", b"i"), range(b"j", b"k")]
    }

    #[test]
    fn opens_nothing_until_positioned() {
        let (mut level, opened) = level_of(gapped_files(), gapped_empty_ranges(), None);
        assert!(!level.valid());
        assert!(opened.lock().is_empty());
        level.seek(&make_internal_key(b"f", 9, ValueKind::Put));
        assert_eq!(level.value(), b"f");
        assert_eq!(*opened.lock(), vec![2]);
    }

    #[test]
    fn scans_across_gaps_and_empty_files_in_both_directions() {
        let (mut level, _) = level_of(gapped_files(), gapped_empty_ranges(), None);
        let forward = collect_forward(&mut level);
        assert_eq!(forward, vec![b"b".to_vec(), b"c".to_vec(), b"f".to_vec(), b"g".to_vec(), b"m".to_vec()]);
        let mut backward = collect_backward(&mut level);
        backward.reverse();
        assert_eq!(backward, forward);
        assert!(level.status().is_ok());
    }

    #[test]
    fn seeks_before_between_and_after_files() {
        let (mut level, _) = level_of(gapped_files(), gapped_empty_ranges(), None);
        let seek_value = |level: &mut LevelIterator, user_key: &[u8]| {
            level.seek(&make_internal_key(user_key, 5, ValueKind::Put));
            level.valid().then(|| level.value().to_vec())
        };
        assert_eq!(seek_value(&mut level, b"a"), Some(b"b".to_vec()), "before the first file");
        assert_eq!(seek_value(&mut level, b"c"), Some(b"c".to_vec()), "inside a file");
        assert_eq!(seek_value(&mut level, b"d"), Some(b"f".to_vec()), "inside an empty file's range");
        assert_eq!(seek_value(&mut level, b"e"), Some(b"f".to_vec()), "in a gap");
        assert_eq!(seek_value(&mut level, b"h"), Some(b"m".to_vec()), "over two empty files");
        assert_eq!(seek_value(&mut level, b"m"), Some(b"m".to_vec()), "the last key");
        assert_eq!(seek_value(&mut level, b"n"), None, "after the last file");
        // A version of "c" older than the stored one sorts after it, so the seek moves on.
        level.seek(&make_internal_key(b"c", 0, ValueKind::Delete));
        assert_eq!(level.value(), b"f");
    }

    #[test]
    fn prev_crosses_back_into_earlier_files() {
        let (mut level, _) = level_of(gapped_files(), gapped_empty_ranges(), None);
        level.seek(&make_internal_key(b"m", 5, ValueKind::Put));
        level.prev();
        assert_eq!(level.value(), b"g");
        level.prev();
        assert_eq!(level.value(), b"f");
        level.prev();
        assert_eq!(level.value(), b"c");
        level.next();
        assert_eq!(level.value(), b"f");
        level.prev();
        level.prev();
        assert_eq!(level.value(), b"b");
        level.prev();
        assert!(!level.valid());
        assert!(level.status().is_ok());
    }

    #[test]
    fn empty_level_and_all_empty_files() {
        let (mut level, _) = level_of(Vec::new(), Vec::new(), None);
        level.seek_to_first();
        assert!(!level.valid());
        level.seek_to_last();
        assert!(!level.valid());
        level.seek(&make_internal_key(b"a", 1, ValueKind::Put));
        assert!(!level.valid());

        let (mut level, _) = level_of(vec![Vec::new(), Vec::new()], vec![range(b"a", b"b"), range(b"c", b"d")], None);
        level.seek_to_first();
        assert!(!level.valid());
        level.seek_to_last();
        assert!(!level.valid());
        level.seek(&make_internal_key(b"a", 1, ValueKind::Put));
        assert!(!level.valid());
        assert!(level.status().is_ok());
    }

    #[test]
    fn opener_error_invalidates_with_status() {
        let (mut level, _) = level_of(gapped_files(), gapped_empty_ranges(), Some(2));
        level.seek_to_first();
        assert_eq!(level.value(), b"b");
        level.next();
        assert_eq!(level.value(), b"c");
        level.next();
        assert!(!level.valid());
        assert!(level.status().expect_err("opener failure").is_corruption());
        level.seek_to_first();
        assert!(!level.valid(), "the error is sticky");

        let (mut level, _) = level_of(gapped_files(), gapped_empty_ranges(), Some(0));
        level.seek(&make_internal_key(b"a", 1, ValueKind::Put));
        assert!(!level.valid());
        assert!(level.status().is_err());
    }

    #[test]
    fn file_iterator_error_is_reported() {
        let first = vec![entry(b"a", 1), entry(b"b", 1)];
        let second = vec![entry(b"c", 1), entry(b"d", 1)];
        let ranges = vec![
            FileRange { smallest: first[0].0.clone(), largest: first[1].0.clone() },
            FileRange { smallest: second[0].0.clone(), largest: second[1].0.clone() },
        ];
        let opener: FileOpener = Arc::new(move |index| {
            if index == 0 {
                Ok(Box::new(VecIterator::new(first.clone())) as Box<dyn InternalIterator>)
            } else {
                Ok(Box::new(FailingIterator::new(second.clone(), 1)) as Box<dyn InternalIterator>)
            }
        });
        let mut level = LevelIterator::new(ranges.into(), opener, KeyComparator::Bytewise);
        level.seek_to_first();
        level.next();
        level.next();
        assert_eq!(level.value(), b"c");
        level.next();
        assert!(!level.valid());
        assert!(level.status().is_err());
    }

    #[test]
    fn random_levels_match_concatenation() {
        let mut rng = SmallRng::seed_from_u64(21);
        for _ in 0..400 {
            let mut user_keys: Vec<Vec<u8>> = (0..rng.gen_range(0..40))
                .map(|_| vec![rng.gen_range(b'a'..=b'z'), rng.gen_range(b'a'..=b'z')])
                .collect();
            user_keys.sort();
            user_keys.dedup();
            // Several versions of one user key may straddle a file boundary, as in a real level.
            let mut all: Entries = Vec::new();
            for user_key in &user_keys {
                let versions = rng.gen_range(1..4);
                for version in (0..versions).rev() {
                    all.push((
                        make_internal_key(user_key, version, ValueKind::Put),
                        format!("{user_key:?}@{version}").into_bytes(),
                    ));
                }
            }
            let mut files = Vec::new();
            let mut empty_ranges = Vec::new();
            let mut expected: Entries = Vec::new();
            let mut start = 0;
            while start < all.len() {
                let take = rng.gen_range(1..=(all.len() - start).min(6));
                let chunk = &all[start..start + take];
                start += take;
                if take > 1 && rng.gen_bool(0.2) {
                    // The last entry of the chunk becomes the declared range of an empty file
                    // (its entries were all filtered away), so it is absent from the level.
                    let (kept, last) = chunk.split_at(take - 1);
                    files.push(kept.to_vec());
                    files.push(Vec::new());
                    empty_ranges.push(FileRange { smallest: last[0].0.clone(), largest: last[0].0.clone() });
                    expected.extend_from_slice(kept);
                } else {
                    files.push(chunk.to_vec());
                    expected.extend_from_slice(chunk);
                }
            }
            let (mut level, _) = level_of(files, empty_ranges, None);
            walk_and_compare(&mut level, &expected, &mut rng, 60);
        }
    }
}
