//! Flush: writing an immutable memtable to a level-0 table, in a background thread.
//!
//! The flush thread takes the oldest immutable memtable, writes it to a new table (synced, and
//! its directory entry synced), then records the table and the new oldest live WAL in the
//! manifest. Only then is the memtable dropped from the read view and its WAL deleted
//! (invariant I2: data leaves the WAL only after it is durable in a table the manifest names).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::compaction::{meta_from_properties, VersionFilter};
use super::filename::{log_path, table_path};
use super::DbInner;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::iterator::InternalIterator;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::edit::{FileMetadata, VersionEdit};

/// Writes `memtable` to table `number`, dropping versions no reader can see. Returns `None` when
/// nothing was left to write (the file is then removed).
pub(crate) fn write_level0_table(
    dir: &Path,
    file_system: &dyn FileSystem,
    options: &Options,
    memtable: &Arc<MemTable>,
    number: u64,
    smallest_snapshot: u64,
) -> Result<Option<FileMetadata>> {
    let path = table_path(dir, number);
    let file = file_system.create(&path)?;
    let mut builder = TableBuilder::new(file, path.clone(), TableOptions::from_options(options));
    let mut iterator = memtable.iter();
    iterator.seek_to_first();
    let mut filter = VersionFilter::new(smallest_snapshot, false);
    let result = (|| {
        while iterator.valid() {
            if !filter.should_drop(iterator.key(), &path)? {
                builder.add(iterator.key(), iterator.value())?;
            }
            iterator.next();
        }
        iterator.status()?;
        if builder.num_entries() == 0 {
            return Ok(None);
        }
        let properties = builder.finish()?;
        Ok(Some(meta_from_properties(number, &properties)))
    })();
    match result {
        Ok(Some(meta)) => Ok(Some(meta)),
        Ok(None) => {
            let _ = file_system.remove(&path);
            Ok(None)
        }
        Err(error) => {
            let _ = file_system.remove(&path);
            Err(error)
        }
    }
}

/// Background thread body: flushes immutable memtables as they appear.
pub(crate) fn flush_loop(inner: Arc<DbInner>) {
    loop {
        let (memtable, number, smallest_snapshot) = {
            let mut state = inner.state.lock();
            loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if state.background_error.is_none() && !state.immutables.is_empty() {
                    break;
                }
                inner.work_available.wait(&mut state);
            }
            let Some(oldest) = state.immutables.front() else { continue };
            let memtable = Arc::clone(&oldest.memtable);
            let number = state.versions.new_file_number();
            state.flush_running = true;
            (memtable, number, inner.snapshots.smallest_snapshot(&inner.visible_sequence))
        };
        let written = write_level0_table(
            &inner.dir,
            inner.file_system.as_ref(),
            &inner.options,
            &memtable,
            number,
            smallest_snapshot,
        )
        .and_then(|meta| inner.file_system.sync_dir(&inner.dir).map(|()| meta));
        let mut state = inner.state.lock();
        state.flush_running = false;
        let installed = written.and_then(|meta| {
            let next_log_number = state.immutables.get(1).map_or(state.memtable_log_number, |imm| imm.log_number);
            let mut edit = VersionEdit { log_number: Some(next_log_number), ..VersionEdit::default() };
            let bytes_written = meta.as_ref().map_or(0, |m| m.file_size_bytes);
            if let Some(meta) = meta {
                edit.new_files.push((0, meta));
            }
            let last_sequence = state.versions.last_sequence().max(memtable.largest_sequence());
            state.versions.set_last_sequence(last_sequence);
            state.versions.log_and_apply(edit)?;
            state.stats.flush_count += 1;
            state.stats.flush_bytes_written += bytes_written;
            Ok(())
        });
        match installed {
            Ok(()) => {
                if let Some(flushed) = state.immutables.pop_front() {
                    // The manifest no longer needs this log; a failed removal leaves an orphan
                    // that the next open deletes.
                    let _ = inner.file_system.remove(&log_path(&inner.dir, flushed.log_number));
                }
                inner.install_read_view(&state);
                inner.background_done.notify_all();
                inner.work_available.notify_all();
            }
            Err(error) => inner.set_background_error(&mut state, error),
        }
    }
}
