//! The table cache: a bounded map from file number to an open [`Table`].
//!
//! Opening a table reads its footer, index, filter and properties, so open tables are kept and
//! shared. The map holds at most `capacity` tables; when full, one not used since the last
//! eviction pass is dropped (readers that still hold its `Arc` keep using it): a hit sets the
//! table's `referenced` flag, and eviction walks the map clearing flags until it meets a table
//! whose flag was already clear (the clock, or second-chance, approximation of least recently
//! used). Lookups take a read lock only, and a hit on a table already marked writes nothing:
//! every point read looks up a table per level, from every thread, and a shared counter
//! bumped per lookup (the recency stamp this replaced) made the lookup a tenth of a cached
//! read's time on 2 cores.

use crate::hash::FastHashMap as HashMap;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::cache::BlockCache;
use crate::comparator::KeyComparator;
use crate::db::filename::table_path;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::sstable::Table;
use crate::version::tree::TableFile;

struct CachedTable {
    table: Arc<Table>,
    /// Set by hits, cleared by eviction passes.
    referenced: AtomicBool,
    /// Pinned to its [`TableFile`] as well (see [`TableCache::table_of`]): never evicted, since
    /// the file holds it open anyway.
    pinned: bool,
}

/// Open tables by file number.
pub(crate) struct TableCache {
    dir: PathBuf,
    file_system: Arc<dyn FileSystem>,
    block_cache: Option<Arc<BlockCache>>,
    capacity: usize,
    tables: RwLock<HashMap<u64, CachedTable>>,
    /// Entries of `tables` that are pinned; at most half the capacity, so that eviction always
    /// finds an entry it may drop.
    pinned_count: AtomicUsize,
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        file_system: Arc<dyn FileSystem>,
        block_cache: Option<Arc<BlockCache>>,
        capacity: usize,
    ) -> TableCache {
        TableCache {
            dir,
            file_system,
            block_cache,
            capacity: capacity.max(1),
            tables: RwLock::new(HashMap::default()),
            pinned_count: AtomicUsize::new(0),
        }
    }

    /// Returns the open table for `number`, opening it if needed. `expected_size_bytes` comes
    /// from the manifest; a file of another size is reported as corruption (a truncated table
    /// must not be read as if it were whole). `comparator` is the order of the column family the
    /// table belongs to; a file number belongs to one column family for good, so a cached table
    /// always has the order its callers ask for.
    pub(crate) fn get(&self, number: u64, expected_size_bytes: u64, comparator: &KeyComparator) -> Result<Arc<Table>> {
        if let Some(cached) = self.tables.read().get(&number) {
            // Read before writing: a table hit by every thread keeps its cache line shared.
            if !cached.referenced.load(Ordering::Relaxed) {
                cached.referenced.store(true, Ordering::Relaxed);
            }
            return Ok(Arc::clone(&cached.table));
        }
        let path = table_path(&self.dir, number);
        let file = self.file_system.open(&path)?;
        if file.len() != expected_size_bytes {
            return Err(Error::corruption(
                &path,
                file.len(),
                format!("table file is {} bytes, the manifest says {expected_size_bytes}", file.len()),
            ));
        }
        let table = Table::open(file, path, number, self.block_cache.clone(), comparator.clone(), true)?;
        let mut tables = self.tables.write();
        if tables.len() >= self.capacity && !tables.contains_key(&number) {
            // Second chance: the first table not hit since it was opened or last passed over
            // goes; the ones passed over lose their mark. If every table was marked, the first
            // one goes. A new table starts unmarked, so it must be hit to outlast the others.
            // Pinned tables are passed over (at most half the entries are pinned).
            let victim = tables
                .iter()
                .find(|(_, cached)| !cached.pinned && !cached.referenced.swap(false, Ordering::Relaxed))
                .or_else(|| tables.iter().find(|(_, cached)| !cached.pinned))
                .map(|(&victim_number, _)| victim_number);
            if let Some(victim_number) = victim {
                tables.remove(&victim_number);
            }
        }
        let entry = tables.entry(number).or_insert_with(|| CachedTable {
            table: Arc::clone(&table),
            referenced: AtomicBool::new(false),
            pinned: false,
        });
        Ok(Arc::clone(&entry.table))
    }

    /// The open table of `file`, as [`TableCache::get`] finds it, and pinned to `file` while
    /// fewer than half the capacity are pinned: later reads of the file borrow it from the
    /// version they hold. Why: a lookup in the map took its lock and cloned the table's
    /// reference count, and released both, four atomic writes to cache lines every reading
    /// thread shares, for every table a read visits (a point read visits one per level and
    /// overlapping level-0 file; an iterator is built over all of them). Pinned tables count
    /// against the capacity like any open table.
    pub(crate) fn table_of<'file>(
        &self,
        file: &'file TableFile,
        comparator: &KeyComparator,
    ) -> Result<Cow<'file, Arc<Table>>> {
        if let Some(table) = file.pinned_table() {
            return Ok(Cow::Borrowed(table));
        }
        let table = self.get(file.number(), file.meta.file_size_bytes, comparator)?;
        if self.pinned_count.load(Ordering::Relaxed) < self.capacity / 2 {
            let mut tables = self.tables.write();
            let pinned_count = self.pinned_count.load(Ordering::Relaxed);
            if let Some(cached) = tables.get_mut(&file.number()) {
                // The entry is the table just returned unless another thread evicted and
                // reopened it in between; pin whichever the map holds, so the two agree.
                if !cached.pinned && pinned_count < self.capacity / 2 && file.pin_table(Arc::clone(&cached.table)) {
                    cached.pinned = true;
                    self.pinned_count.store(pinned_count + 1, Ordering::Relaxed);
                }
            }
        }
        Ok(Cow::Owned(table))
    }

    /// Unpins the table of file `number` (its [`TableFile`] is gone, the file lives on in
    /// another handle or is closed with the database): it becomes an ordinary entry.
    pub(crate) fn unpin(&self, number: u64) {
        let mut tables = self.tables.write();
        if let Some(cached) = tables.get_mut(&number).filter(|cached| cached.pinned) {
            cached.pinned = false;
            self.pinned_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Forgets a table (its file is being deleted).
    pub(crate) fn evict(&self, number: u64) {
        let mut tables = self.tables.write();
        if tables.remove(&number).is_some_and(|cached| cached.pinned) {
            self.pinned_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Memory held by open tables' indexes, filters and properties.
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        self.tables.read().values().map(|cached| cached.table.memory_usage_bytes()).sum()
    }

    /// Number of open tables.
    pub(crate) fn len(&self) -> usize {
        self.tables.read().len()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::fs::MemFileSystem;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sstable::{TableBuilder, TableOptions};
    use crate::version::edit::FileMetadata;
    use crate::version::tree::FileJanitor;

    /// Writes table `number` holding one key and returns its handle.
    fn table_file(file_system: &Arc<dyn FileSystem>, dir: &Path, janitor: &Arc<FileJanitor>, number: u64) -> TableFile {
        let path = table_path(dir, number);
        let key = make_internal_key(format!("key{number}").as_bytes(), number, ValueKind::Put);
        let mut builder = TableBuilder::new(file_system.create(&path).unwrap(), path, TableOptions::default());
        builder.add(&key, b"value").unwrap();
        let properties = builder.finish().unwrap();
        let meta = FileMetadata::of_one_sequence(number, properties.file_size_bytes, key.clone(), key, number);
        TableFile::new(meta, Arc::clone(janitor))
    }

    #[test]
    fn tables_are_pinned_up_to_half_the_capacity_and_pinned_ones_stay_open() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = PathBuf::from("/db");
        file_system.create_dir_all(&dir).unwrap();
        let cache = Arc::new(TableCache::new(dir.clone(), Arc::clone(&file_system), None, 4));
        let janitor = Arc::new(FileJanitor {
            dir: dir.clone(),
            file_system: Arc::clone(&file_system),
            table_cache: cache.clone(),
        });
        let comparator = KeyComparator::Bytewise;
        let files: Vec<TableFile> = (1..=6).map(|number| table_file(&file_system, &dir, &janitor, number)).collect();
        // The first two files read are pinned (half of 4); the first read returns the table it
        // pinned, later reads borrow it from the file.
        for file in &files[..3] {
            let first = Arc::clone(&cache.table_of(file, &comparator).unwrap());
            let again = cache.table_of(file, &comparator).unwrap();
            assert!(Arc::ptr_eq(&first, &again));
        }
        assert!(files[0].pinned_table().is_some() && files[1].pinned_table().is_some());
        assert!(files[2].pinned_table().is_none(), "no more than half the capacity is pinned");
        assert!(matches!(cache.table_of(&files[0], &comparator).unwrap(), Cow::Borrowed(_)));
        assert!(matches!(cache.table_of(&files[2], &comparator).unwrap(), Cow::Owned(_)));
        // Opening more tables than the capacity evicts unpinned ones only.
        for file in &files[3..] {
            cache.table_of(file, &comparator).unwrap();
        }
        assert_eq!(cache.len(), 4);
        let open: Vec<bool> = (1..=6).map(|number| cache.tables.read().contains_key(&number)).collect();
        assert!(open[0] && open[1], "pinned tables stay in the map: {open:?}");
        // A dropped handle unpins its table, which may then be evicted; another file is pinned.
        let mut files = files;
        let first = files.remove(0);
        drop(first);
        assert_eq!(cache.pinned_count.load(Ordering::Relaxed), 1);
        assert!(!cache.tables.read().get(&1).is_some_and(|cached| cached.pinned));
        cache.table_of(&files[1], &comparator).unwrap();
        assert!(files[1].pinned_table().is_some());
        assert_eq!(cache.pinned_count.load(Ordering::Relaxed), 2);
        // An obsolete file's table leaves the map and the pinned count with it.
        let second = files.remove(0);
        second.mark_obsolete();
        drop(second);
        assert!(!cache.tables.read().contains_key(&2));
        assert!(!file_system.exists(&table_path(&dir, 2)));
        assert_eq!(cache.pinned_count.load(Ordering::Relaxed), 1);
        // Reads through the pinned tables still answer.
        for file in &files {
            let table = cache.table_of(file, &comparator).unwrap();
            let lookup = crate::key::lookup_key(file.smallest_user_key(), u64::MAX >> 8);
            assert!(table.get(&lookup, crate::sstable::BlockReadOptions::default()).unwrap().is_some());
        }
    }
}
