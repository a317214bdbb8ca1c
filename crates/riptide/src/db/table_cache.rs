//! The table cache: a bounded map from file number to an open [`Table`].
//!
//! Opening a table reads its footer, index, filter and properties, so open tables are kept and
//! shared. The map holds at most `capacity` tables; when full, the least recently used is
//! dropped (readers that still hold its `Arc` keep using it). Lookups take a read lock only; the
//! recency stamp is an atomic so hits never take the write lock.

use crate::hash::FastHashMap as HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::cache::BlockCache;
use crate::comparator::KeyComparator;
use crate::db::filename::table_path;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::sstable::Table;

struct CachedTable {
    table: Arc<Table>,
    last_used: AtomicU64,
}

/// Open tables by file number.
pub(crate) struct TableCache {
    dir: PathBuf,
    file_system: Arc<dyn FileSystem>,
    block_cache: Option<Arc<BlockCache>>,
    capacity: usize,
    tables: RwLock<HashMap<u64, CachedTable>>,
    clock: AtomicU64,
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
            clock: AtomicU64::new(0),
        }
    }

    /// Returns the open table for `number`, opening it if needed. `expected_size_bytes` comes
    /// from the manifest; a file of another size is reported as corruption (a truncated table
    /// must not be read as if it were whole). `comparator` is the order of the column family the
    /// table belongs to; a file number belongs to one column family for good, so a cached table
    /// always has the order its callers ask for.
    pub(crate) fn get(&self, number: u64, expected_size_bytes: u64, comparator: &KeyComparator) -> Result<Arc<Table>> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(cached) = self.tables.read().get(&number) {
            cached.last_used.store(tick, Ordering::Relaxed);
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
        let table = Table::open(file, path, number, self.block_cache.clone(), comparator.clone())?;
        let mut tables = self.tables.write();
        if tables.len() >= self.capacity && !tables.contains_key(&number) {
            let victim = tables
                .iter()
                .min_by_key(|(_, cached)| cached.last_used.load(Ordering::Relaxed))
                .map(|(&victim_number, _)| victim_number);
            if let Some(victim_number) = victim {
                tables.remove(&victim_number);
            }
        }
        let entry = tables
            .entry(number)
            .or_insert_with(|| CachedTable { table: Arc::clone(&table), last_used: AtomicU64::new(tick) });
        Ok(Arc::clone(&entry.table))
    }

    /// Forgets a table (its file is being deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.tables.write().remove(&number);
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
