//! A [`Version`]: the set of live table files, by level, at one point in time.
//!
//! Versions are immutable and shared (`Arc<Version>`): readers and iterators pin the version
//! they started with, so the files it names stay on disk while they read (a file is deleted only
//! when the last [`TableFile`] handle is dropped after the manifest has recorded its removal).
//! The loom model at the end of this file (`make loom`) checks that protocol with readers
//! racing a trivial move and a compaction.
//!
//! Invariants (see `docs/invariants.md`): I4, files of levels 1 and deeper are sorted by key (in
//! the column family's order, which every version carries) and do not overlap; I5, level-0 files
//! are ordered newest first (by largest sequence number), so a point lookup can stop at the first
//! level-0 hit.

use std::path::PathBuf;

use crate::blob::BlobFiles;

use crate::comparator::KeyComparator;
use crate::db::filename::table_path;
use crate::db::table_cache::TableCache;
use crate::fs::FileSystem;
use crate::iterator::level::FileRange;
use crate::key::user_key;
use crate::range_tombstone::{RangeTombstone, VersionTombstones};
use crate::sstable::Table;
// Versions and table files are shared through the shim's `Arc` and the obsolete flag is its
// atomic, so that the loom model at the end of this file runs this code; normal builds get
// `std`'s types.
use crate::sync::{Arc, AtomicBool, Ordering};
use crate::version::edit::FileMetadata;

/// Number of levels in the tree.
pub(crate) const NUM_LEVELS: usize = 7;

/// Deletes files that no version references any more.
pub(crate) struct FileJanitor {
    pub(crate) dir: PathBuf,
    pub(crate) file_system: std::sync::Arc<dyn FileSystem>,
    pub(crate) table_cache: std::sync::Arc<TableCache>,
}

/// One table file as referenced by versions. When a compaction removes it from the current
/// version (durably, in the manifest) it is marked obsolete, and the file is deleted when the
/// last version or iterator holding it lets go.
pub(crate) struct TableFile {
    pub(crate) meta: FileMetadata,
    obsolete: AtomicBool,
    janitor: std::sync::Arc<FileJanitor>,
    /// The open table, once the table cache pinned it here ([`TableCache::table_of`]): reads
    /// then reach it through the version they already hold, with no lock and no reference
    /// count changed.
    pinned_table: std::sync::OnceLock<std::sync::Arc<Table>>,
}

impl TableFile {
    pub(crate) fn new(meta: FileMetadata, janitor: std::sync::Arc<FileJanitor>) -> TableFile {
        TableFile { meta, obsolete: AtomicBool::new(false), janitor, pinned_table: std::sync::OnceLock::new() }
    }

    /// The table pinned to this file, if the table cache pinned one.
    #[inline]
    pub(crate) fn pinned_table(&self) -> Option<&std::sync::Arc<Table>> {
        self.pinned_table.get()
    }

    /// Pins `table` to this file; false if one is pinned already. Called by the table cache
    /// only, which counts pinned tables against its capacity.
    pub(crate) fn pin_table(&self, table: std::sync::Arc<Table>) -> bool {
        self.pinned_table.set(table).is_ok()
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
        // The pinned table (an open file) goes first, before the file may be deleted.
        if self.pinned_table.take().is_some() && !self.obsolete.load(Ordering::Acquire) {
            self.janitor.table_cache.unpin(self.meta.number);
        }
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
    pub(crate) level_ranges: Vec<std::sync::Arc<[FileRange]>>,
    /// The order of the column family's keys, which sorts the levels and answers every
    /// question about key ranges.
    pub(crate) comparator: KeyComparator,
    /// The blob files the tables of this version reference (exactly those: I35), by number.
    pub(crate) blob_files: BlobFiles,
    /// The range tombstones flushed from memtables that may still hide data in the tables
    /// (`range_tombstone.rs`, I38, I39).
    pub(crate) range_tombstones: VersionTombstones,
    /// Whether some table holds entries with an expiry: iterators read the clock only then
    /// (I42).
    pub(crate) has_expiring_entries: bool,
    /// Per level, the total size of its files, summed once: `levels` never changes after
    /// construction, and the picker and every iterator's read charges ask for these.
    level_sizes_bytes: Vec<u64>,
    /// Per level, the largest sequence number any of its files holds (0 for an empty level),
    /// found once for the same reason: every iterator tells its merge how new each source is.
    level_largest_sequences: Vec<u64>,
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
        let range_tombstones = VersionTombstones::empty(comparator.clone());
        let has_expiring_entries = levels.iter().flatten().any(|file| file.meta.expiry.entries > 0);
        let level_sizes_bytes = levels.iter().map(|files| Self::sum_of_sizes(files)).collect();
        let level_largest_sequences =
            levels.iter().map(|files| files.iter().map(|file| file.meta.largest_sequence).max().unwrap_or(0)).collect();
        Version {
            levels,
            level_ranges,
            comparator,
            blob_files: BlobFiles::default(),
            range_tombstones,
            has_expiring_entries,
            level_sizes_bytes,
            level_largest_sequences,
        }
    }

    /// The same version with `blob_files` as its blob files.
    pub(crate) fn with_blob_files(mut self, blob_files: BlobFiles) -> Version {
        self.blob_files = blob_files;
        self
    }

    /// The same version with `range_tombstones` as its range tombstones.
    pub(crate) fn with_range_tombstones(mut self, range_tombstones: Vec<RangeTombstone>) -> Version {
        self.range_tombstones = VersionTombstones::new(range_tombstones, self.comparator.clone());
        self
    }

    /// The range tombstones that may still hide entries of `file`: they overlap its key range,
    /// and it holds entries older than them without having been written with them applied
    /// (I40).
    pub(crate) fn range_tombstones_hiding_data_in<'a>(
        &'a self,
        file: &'a TableFile,
    ) -> impl Iterator<Item = &'a RangeTombstone> + 'a {
        self.range_tombstones.list().iter().filter(move |tombstone| {
            file.meta.smallest_sequence < tombstone.sequence
                && file.meta.range_tombstones_applied_through < tombstone.sequence
                && tombstone.overlaps(file.smallest_user_key(), file.largest_user_key(), &self.comparator)
        })
    }

    /// The sequences of the range tombstones that no table can hide data from any more (I40).
    /// Memtables need not be asked: a tombstone reaches the version with the flush of its
    /// memtable, after every older memtable of the column family, and later memtables hold only
    /// newer entries.
    pub(crate) fn obsolete_range_tombstones(&self) -> Vec<u64> {
        // Every manifest edit asks; without tombstones there is nothing to walk the files for.
        if self.range_tombstones.is_empty() {
            return Vec::new();
        }
        let mut hiding: std::collections::HashSet<u64> = std::collections::HashSet::new();
        for file in self.levels.iter().flatten() {
            hiding.extend(self.range_tombstones_hiding_data_in(file).map(|tombstone| tombstone.sequence));
        }
        self.range_tombstones
            .list()
            .iter()
            .map(|tombstone| tombstone.sequence)
            .filter(|sequence| !hiding.contains(sequence))
            .collect()
    }

    /// The total size of the files of `level`.
    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        debug_assert_eq!(
            self.level_sizes_bytes[level],
            Self::sum_of_sizes(&self.levels[level]),
            "the levels changed after the version was built"
        );
        self.level_sizes_bytes[level]
    }

    /// The largest sequence number the files of `level` hold (0 when it has none).
    pub(crate) fn level_largest_sequence(&self, level: usize) -> u64 {
        self.level_largest_sequences[level]
    }

    fn sum_of_sizes(files: &[Arc<TableFile>]) -> u64 {
        files.iter().map(|f| f.meta.file_size_bytes).sum()
    }

    /// Files of `level` whose user-key range intersects `[smallest, largest]`.
    pub(crate) fn overlapping_files(&self, level: usize, smallest: &[u8], largest: &[u8]) -> Vec<Arc<TableFile>> {
        self.levels[level].iter().filter(|f| f.overlaps(smallest, largest, &self.comparator)).cloned().collect()
    }

    /// True when some file of `level` intersects `[smallest, largest]`.
    pub(crate) fn level_overlaps(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.levels[level].iter().any(|f| f.overlaps(smallest, largest, &self.comparator))
    }

    /// The files that may hold `key`, in a point lookup's search order (newest data first):
    /// each level-0 file whose range holds it, newest first, then the one file of each deeper
    /// level whose range holds it.
    pub(crate) fn files_for_key<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = &'a TableFile> + 'a {
        let level0 = self.levels[0].iter().filter(move |file| file.overlaps(key, key, &self.comparator));
        let deeper = (1..self.levels.len())
            .filter_map(move |level| self.find_file(level, key).map(|index| &self.levels[level][index]));
        level0.chain(deeper).map(|file| &**file)
    }

    /// For levels 1 and deeper: the index of the only file that may hold `key`.
    fn find_file(&self, level: usize, key: &[u8]) -> Option<usize> {
        debug_assert!(level > 0);
        let files = &self.levels[level];
        let comparator = &self.comparator;
        let index = files.partition_point(|f| comparator.compare_user_keys(f.largest_user_key(), key).is_lt());
        (index < files.len() && comparator.compare_user_keys(files[index].smallest_user_key(), key).is_le())
            .then_some(index)
    }
}

/// Loom model of table-file reference counting (`make loom`): a reader pins a version while a
/// compaction installs new ones through the real [`crate::version::set::VersionSet`] (manifest
/// on an in-memory file system) and marks its input obsolete. Versions and table files are
/// loom `Arc`s here, so loom explores where each reference is dropped, including which thread
/// drops the last one and so runs the deletion.
///
/// The file system underneath records every removal, and fails the model when a file is
/// removed twice or while the reader holds a version naming it; after the threads join and the
/// version set is dropped, the compacted file must have been removed exactly once and the
/// compaction's output never.
///
/// Shown to fail on deliberately broken code (then restored): with `VersionSet::apply` giving a
/// moved file a fresh handle instead of reusing its old one, the model reports the file
/// removed while the reader's version still names it (the new handle is marked obsolete by the
/// second edit and dropped, while the reader's old handle lives on); with `install` marking
/// files obsolete after replacing the current version (so it no longer finds them), the file
/// is never removed. Weakening the obsolete flag's orderings to Relaxed is rightly not reported:
/// the last reference's drop already acquires everything every earlier holder did before
/// letting go, the marking included.
#[cfg(all(test, loom))]
mod loom_models {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::db::table_cache::TableCache;
    use crate::fs::{FileLock, MemFileSystem, RandomAccessFile, WritableFile};
    use crate::key::{make_internal_key, ValueKind};
    use crate::sync::{model, Mutex};
    use crate::version::edit::VersionEdit;
    use crate::version::set::VersionSet;
    use loom::thread;

    const DIR: &str = "/db";

    /// An in-memory file system that counts removals per path and knows which table files a
    /// reader holds, so that a removal at the wrong time fails the model where it happens. Its
    /// notebook is behind `std` locks: nothing inside them can be preempted.
    struct WatchedFileSystem {
        inner: MemFileSystem,
        removals: std::sync::Mutex<HashMap<PathBuf, usize>>,
        /// The files named by the versions readers hold, once per holding reader.
        held_by_reader: std::sync::Mutex<Vec<PathBuf>>,
        /// The (loom) thread that removed each file, for the model's coverage.
        removed_by: std::sync::Mutex<HashMap<PathBuf, thread::ThreadId>>,
    }

    impl WatchedFileSystem {
        fn removals(&self, number: u64) -> usize {
            let removals = self.removals.lock().expect("notebook");
            removals.get(&table_path(Path::new(DIR), number)).copied().unwrap_or(0)
        }

        /// Notes that a reader holds a version naming `paths`.
        fn hold(&self, paths: &[PathBuf]) {
            self.held_by_reader.lock().expect("notebook").extend_from_slice(paths);
        }

        /// Notes that a reader is about to drop the version naming `paths`.
        fn release(&self, paths: &[PathBuf]) {
            let mut held = self.held_by_reader.lock().expect("notebook");
            for path in paths {
                if let Some(index) = held.iter().position(|candidate| candidate == path) {
                    held.swap_remove(index);
                }
            }
        }

        fn removed_by(&self, number: u64) -> Option<thread::ThreadId> {
            self.removed_by.lock().expect("notebook").get(&table_path(Path::new(DIR), number)).copied()
        }
    }

    impl FileSystem for WatchedFileSystem {
        fn create(&self, path: &Path) -> crate::Result<Box<dyn WritableFile>> {
            self.inner.create(path)
        }
        fn open(&self, path: &Path) -> crate::Result<std::sync::Arc<dyn RandomAccessFile>> {
            self.inner.open(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> crate::Result<()> {
            self.inner.rename(from, to)
        }
        fn remove(&self, path: &Path) -> crate::Result<()> {
            let held = self.held_by_reader.lock().expect("notebook").contains(&path.to_path_buf());
            assert!(!held, "{} removed while a reader's version names it", path.display());
            let mut removals = self.removals.lock().expect("notebook");
            let count = removals.entry(path.to_path_buf()).or_insert(0);
            *count += 1;
            assert_eq!(*count, 1, "{} removed twice", path.display());
            self.removed_by.lock().expect("notebook").insert(path.to_path_buf(), thread::current().id());
            self.inner.remove(path)
        }
        fn create_dir_all(&self, path: &Path) -> crate::Result<()> {
            self.inner.create_dir_all(path)
        }
        fn list(&self, dir: &Path) -> crate::Result<Vec<String>> {
            self.inner.list(dir)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn file_size(&self, path: &Path) -> crate::Result<u64> {
            self.inner.file_size(path)
        }
        fn sync_dir(&self, dir: &Path) -> crate::Result<()> {
            self.inner.sync_dir(dir)
        }
        fn lock(&self, path: &Path) -> crate::Result<Box<dyn FileLock>> {
            self.inner.lock(path)
        }
    }

    /// The metadata of table `number`, holding the single key `a` at sequence `number`.
    fn table(number: u64) -> FileMetadata {
        let key = make_internal_key(b"a", number, ValueKind::Put);
        FileMetadata::of_one_sequence(number, 5, key.clone(), key, number)
    }

    /// Writes table `number` to the file system, as a flush or compaction would have.
    fn write_table(file_system: &dyn FileSystem, number: u64) {
        let mut file = file_system.create(&table_path(Path::new(DIR), number)).expect("create table");
        file.append(b"table").expect("append");
        file.sync().expect("sync");
    }

    /// The edit that moves or compacts: removes `deleted` and adds `added`, as (level, file).
    fn edit(deleted: (u32, u64), added: (u32, u64)) -> VersionEdit {
        VersionEdit {
            deleted_files: vec![deleted],
            new_files: vec![(added.0, table(added.1))],
            ..VersionEdit::default()
        }
    }

    /// How often the executions reached the cases the model is for; plain `std` atomics, as
    /// they outlive the executions.
    #[derive(Default)]
    struct Coverage {
        /// The reader took the version from before the move and dropped the last reference to
        /// table 5, so the deletion ran on the reader's thread, after both edits.
        reader_deleted_premove_file: std::sync::atomic::AtomicUsize,
        /// The compaction's own drop deleted table 5.
        compaction_deleted: std::sync::atomic::AtomicUsize,
    }

    /// Table 5 is flushed to level 0 before the threads start. The compaction thread then moves
    /// it to level 1 (a trivial move: same file, same handle) and compacts it into table 6 at
    /// level 2, each edit under the database mutex as in the engine. Two readers each take the
    /// current version under the same mutex at any point, read with it (a yield stands for the
    /// reads) and drop it, possibly last.
    #[test]
    fn reader_pins_files_across_move_and_compaction() {
        let coverage = std::sync::Arc::new(Coverage::default());
        let seen = std::sync::Arc::clone(&coverage);
        model(3, move || {
            let file_system = std::sync::Arc::new(WatchedFileSystem {
                inner: MemFileSystem::new(),
                removals: std::sync::Mutex::new(HashMap::new()),
                held_by_reader: std::sync::Mutex::new(Vec::new()),
                removed_by: std::sync::Mutex::new(HashMap::new()),
            });
            let dir = PathBuf::from(DIR);
            file_system.create_dir_all(&dir).expect("directory");
            let shared: std::sync::Arc<dyn FileSystem> = file_system.clone();
            let table_cache = std::sync::Arc::new(TableCache::new(dir.clone(), shared.clone(), None, 4));
            let janitor =
                std::sync::Arc::new(FileJanitor { dir: dir.clone(), file_system: shared.clone(), table_cache });
            let mut versions = VersionSet::new_empty(&dir, shared, janitor, KeyComparator::Bytewise);
            versions.mark_file_number_used(6);
            write_table(file_system.as_ref(), 5);
            let flush = VersionEdit { new_files: vec![(0, table(5))], ..VersionEdit::default() };
            versions.log_and_apply(flush).expect("flush");
            let versions = Arc::new(Mutex::new(versions));

            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let versions = Arc::clone(&versions);
                    let file_system = file_system.clone();
                    thread::spawn(move || {
                        let version = versions.lock().current(0);
                        let premove = version.levels[0].iter().any(|file| file.number() == 5);
                        let held: Vec<PathBuf> = version
                            .levels
                            .iter()
                            .flatten()
                            .map(|file| table_path(Path::new(DIR), file.number()))
                            .collect();
                        for path in &held {
                            assert!(file_system.exists(path), "{} is gone while a version names it", path.display());
                        }
                        file_system.hold(&held);
                        thread::yield_now();
                        file_system.release(&held);
                        drop(version);
                        (thread::current().id(), premove)
                    })
                })
                .collect();
            let compaction = {
                let versions = Arc::clone(&versions);
                let file_system = file_system.clone();
                thread::spawn(move || {
                    versions.lock().log_and_apply(edit((0, 5), (1, 5))).expect("trivial move");
                    write_table(file_system.as_ref(), 6);
                    versions.lock().log_and_apply(edit((1, 5), (2, 6))).expect("compaction");
                })
            };
            let readers: Vec<(thread::ThreadId, bool)> =
                readers.into_iter().map(|reader| reader.join().expect("reader")).collect();
            let compaction_thread = compaction.thread().id();
            compaction.join().expect("compaction");
            let final_files: Vec<u64> =
                versions.lock().current(0).levels.iter().flatten().map(|file| file.number()).collect();
            assert_eq!(final_files, [6]);
            drop(versions);
            assert_eq!(file_system.removals(5), 1, "the compacted table was not removed exactly once");
            assert_eq!(file_system.removals(6), 0, "a live table was removed");
            let bump = |counter: &std::sync::atomic::AtomicUsize| {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            };
            match file_system.removed_by(5) {
                Some(remover) if readers.contains(&(remover, true)) => bump(&seen.reader_deleted_premove_file),
                Some(remover) if remover == compaction_thread => bump(&seen.compaction_deleted),
                _ => {}
            }
        });
        let count = |counter: &std::sync::atomic::AtomicUsize| counter.load(std::sync::atomic::Ordering::Relaxed);
        assert!(count(&coverage.reader_deleted_premove_file) > 0 && count(&coverage.compaction_deleted) > 0);
    }
}
