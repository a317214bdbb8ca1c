//! Spilled runs: a transaction's writes moved out of memory into private table files.
//!
//! When a transaction's in-memory writes pass its limit
//! (`TransactionOptions::write_memory_limit_bytes`), the write set writes each in-memory layer
//! out as one run per column family: an ordinary table (`docs/format/sstable.md`) named
//! `NNNNNN.spill` in the database directory, whose entries carry the layer's id where a
//! sequence number would be, so that merging the layers by internal key puts a key's newest
//! write first. Nobody but the transaction reads a run, it is never named in the manifest,
//! and it is removed when the run is dropped: when the transaction rolls back (or back past the
//! savepoint that made the run), and after its commit installed the merged tables. A crash
//! leaves runs behind; `Db::open` removes every `.spill` file except the runs of prepared
//! transactions (their files list them, `prepared.rs`), whose transactions it recovers.
//!
//! Concurrency contract: a run is immutable once built; its table may be read from any thread.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::write_set::{OrderedKey, Written};
use crate::comparator::KeyComparator;
use crate::db::filename::spill_path;
use crate::db::DbInner;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::key::{make_internal_key, ValueKind};
use crate::options::ColumnFamilyOptions;
use crate::sstable::{Table, TableBuilder, TableOptions};

/// One column family's entries of one spilled layer.
pub(crate) struct SpilledRun {
    pub(crate) table: Arc<Table>,
    /// The file's number (`NNNNNN.spill`).
    pub(crate) number: u64,
    path: PathBuf,
    file_system: Arc<dyn FileSystem>,
    pub(crate) file_size_bytes: u64,
    pub(crate) entry_count: u64,
    /// Whether dropping the run removes its file: false while the run belongs to a prepared
    /// transaction, whose runs must outlive a close of the database (I32).
    removed_on_drop: AtomicBool,
}

impl SpilledRun {
    /// Sets whether dropping the run removes its file.
    pub(crate) fn set_removed_on_drop(&self, removed: bool) {
        self.removed_on_drop.store(removed, Ordering::Relaxed);
    }

    /// Memory the run's reader holds (index and filter).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.table.memory_usage_bytes()
    }
}

impl Drop for SpilledRun {
    fn drop(&mut self) {
        if self.removed_on_drop.load(Ordering::Relaxed) {
            // Best effort: a run left behind is removed by the next `Db::open`.
            let _ = self.file_system.remove(&self.path);
        }
    }
}

/// Writes `entries` (one column family's, in its order) as a run whose entries carry
/// `layer_id`, and opens it for reading.
pub(crate) fn write_run<'a>(
    db: &DbInner,
    options: &ColumnFamilyOptions,
    layer_id: u64,
    entries: impl Iterator<Item = (&'a OrderedKey, &'a Written)>,
) -> Result<SpilledRun> {
    let number = db.state.lock().versions.new_file_number();
    let path = spill_path(&db.dir, number);
    let file_system = Arc::clone(&db.file_system);
    let built = (|| {
        let file = file_system.create(&path)?;
        let table_options = TableOptions::for_level(options, 0, false);
        let comparator = table_options.comparator.clone();
        let mut builder = TableBuilder::new(file, path.clone(), table_options);
        let mut internal_key = Vec::new();
        for (key, written) in entries {
            internal_key.clear();
            crate::key::append_internal_key(&mut internal_key, &key.key, layer_id, kind_of(written));
            builder.add(&internal_key, written.as_deref().unwrap_or_default())?;
        }
        let properties = builder.finish()?;
        let file = file_system.open(&path)?;
        let table = Table::open(file, path.clone(), number, None, comparator, false)?;
        Ok((table, properties.file_size_bytes, properties.num_entries))
    })();
    match built {
        Ok((table, file_size_bytes, entry_count)) => Ok(SpilledRun {
            table,
            number,
            path,
            file_system,
            file_size_bytes,
            entry_count,
            removed_on_drop: AtomicBool::new(true),
        }),
        Err(error) => {
            let _ = file_system.remove(&path);
            Err(error)
        }
    }
}

/// Opens the run in file `number` again: a run of a prepared transaction found at open. The
/// file was synced before the transaction's prepare returned.
pub(crate) fn open_run(db: &DbInner, comparator: KeyComparator, number: u64) -> Result<SpilledRun> {
    let path = spill_path(&db.dir, number);
    let file_system = Arc::clone(&db.file_system);
    let file = file_system.open(&path)?;
    let table = Table::open(file, path.clone(), number, None, comparator, false)?;
    let file_size_bytes = file_system.file_size(&path)?;
    let entry_count = table.properties().num_entries;
    // Recovered for a prepared transaction: kept until it is decided.
    Ok(SpilledRun {
        table,
        number,
        path,
        file_system,
        file_size_bytes,
        entry_count,
        removed_on_drop: AtomicBool::new(false),
    })
}

/// The internal key of an in-memory entry of layer `layer_id`, as a run would store it.
pub(crate) fn layer_entry_key(key: &[u8], layer_id: u64, written: &Written) -> Vec<u8> {
    make_internal_key(key, layer_id, kind_of(written))
}

/// The kind of entry that stores `written`: a put, or a tombstone for a delete.
pub(crate) fn kind_of(written: &Written) -> ValueKind {
    if written.is_some() {
        ValueKind::Put
    } else {
        ValueKind::Delete
    }
}
