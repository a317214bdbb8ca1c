//! A [`Version`]: the set of live table files, by level, at one point in time.
//!
//! Versions are immutable and shared (`Arc<Version>`): readers and iterators pin the version
//! they started with, so the files it names stay on disk while they read (a file is deleted only
//! when the last [`TableFile`] handle is dropped after the manifest has recorded its removal).
//!
//! Invariants (see `docs/invariants.md`): I4, files of levels 1 and deeper are sorted by key (in
//! the column family's order, which every version carries) and do not overlap; I5, level-0 files are ordered newest first (by largest sequence number), so a
//! point lookup can stop at the first level-0 hit.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::comparator::KeyComparator;
use crate::db::filename::table_path;
use crate::db::table_cache::TableCache;
use crate::fs::FileSystem;
use crate::iterator::level::FileRange;
use crate::key::user_key;
use crate::version::edit::FileMetadata;

/// Number of levels in the tree.
pub(crate) const NUM_LEVELS: usize = 7;

/// Deletes files that no version references any more.
pub(crate) struct FileJanitor {
    pub(crate) dir: PathBuf,
    pub(crate) file_system: Arc<dyn FileSystem>,
    pub(crate) table_cache: Arc<TableCache>,
}

/// One table file as referenced by versions. When a compaction removes it from the current
/// version (durably, in the manifest) it is marked obsolete, and the file is deleted when the
/// last version or iterator holding it lets go.
pub(crate) struct TableFile {
    pub(crate) meta: FileMetadata,
    obsolete: AtomicBool,
    janitor: Arc<FileJanitor>,
}

impl TableFile {
    pub(crate) fn new(meta: FileMetadata, janitor: Arc<FileJanitor>) -> TableFile {
        TableFile { meta, obsolete: AtomicBool::new(false), janitor }
    }

    pub(crate) fn number(&self) -> u64 {
        self.meta.number
    }

    pub(crate) fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.meta.smallest)
    }

    pub(crate) fn largest_user_key(&self) -> &[u8] {
        user_key(&self.meta.largest)
    }

    /// True when `[smallest, largest]` (user keys, inclusive, in `comparator`'s order)
    /// intersects this file's range.
    pub(crate) fn overlaps(&self, smallest: &[u8], largest: &[u8], comparator: &KeyComparator) -> bool {
        comparator.compare_user_keys(self.largest_user_key(), smallest).is_ge()
            && comparator.compare_user_keys(self.smallest_user_key(), largest).is_le()
    }

    /// Marks the file for deletion once unreferenced. Called only after the manifest edit that
    /// removed it is durable.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            self.janitor.table_cache.evict(self.meta.number);
            // A failure here leaves an orphan that the next open deletes, so it is not an error
            // anyone needs to see.
            let _ = self.janitor.file_system.remove(&table_path(&self.janitor.dir, self.meta.number));
        }
    }
}

/// The live files of the tree.
#[derive(Clone)]
pub(crate) struct Version {
    pub(crate) levels: Vec<Vec<Arc<TableFile>>>,
    /// Per level, the key ranges of its files in the same order, built once so that every
    /// iterator over a level shares them instead of copying keys.
    pub(crate) level_ranges: Vec<Arc<[FileRange]>>,
    /// The order of the column family's keys, which sorts the levels and answers every
    /// question about key ranges.
    pub(crate) comparator: KeyComparator,
}

impl Version {
    pub(crate) fn empty(comparator: KeyComparator) -> Version {
        Version::from_files(vec![Vec::new(); NUM_LEVELS], comparator)
    }

    /// Builds a version from files, sorting each level as its invariant requires.
    pub(crate) fn from_files(mut levels: Vec<Vec<Arc<TableFile>>>, comparator: KeyComparator) -> Version {
        levels.resize(NUM_LEVELS, Vec::new());
        for (level, files) in levels.iter_mut().enumerate() {
            if level == 0 {
                files.sort_by(|a, b| {
                    b.meta.largest_sequence.cmp(&a.meta.largest_sequence).then(b.number().cmp(&a.number()))
                });
            } else {
                files.sort_by(|a, b| comparator.compare_internal_keys(&a.meta.smallest, &b.meta.smallest));
            }
        }
        let level_ranges = levels
            .iter()
            .map(|files| {
                files
                    .iter()
                    .map(|f| FileRange { smallest: f.meta.smallest.clone(), largest: f.meta.largest.clone() })
                    .collect::<Vec<_>>()
                    .into()
            })
            .collect();
        Version { levels, level_ranges, comparator }
    }

    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.meta.file_size_bytes).sum()
    }

    /// Files of `level` whose user-key range intersects `[smallest, largest]`.
    pub(crate) fn overlapping_files(&self, level: usize, smallest: &[u8], largest: &[u8]) -> Vec<Arc<TableFile>> {
        self.levels[level].iter().filter(|f| f.overlaps(smallest, largest, &self.comparator)).cloned().collect()
    }

    /// True when some file of `level` intersects `[smallest, largest]`.
    pub(crate) fn level_overlaps(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.levels[level].iter().any(|f| f.overlaps(smallest, largest, &self.comparator))
    }

    /// For levels 1 and deeper: the index of the only file that may hold `key`.
    pub(crate) fn find_file(&self, level: usize, key: &[u8]) -> Option<usize> {
        debug_assert!(level > 0);
        let files = &self.levels[level];
        let comparator = &self.comparator;
        let index = files.partition_point(|f| comparator.compare_user_keys(f.largest_user_key(), key).is_lt());
        (index < files.len() && comparator.compare_user_keys(files[index].smallest_user_key(), key).is_le())
            .then_some(index)
    }
}
