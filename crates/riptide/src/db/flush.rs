//! Flush: writing an immutable memtable to a level-0 table, in a background thread.
//!
//! A flush thread takes the oldest immutable memtable of a column family (the one whose oldest
//! memtable is in the oldest log, so logs are freed in order), writes it to a new table
//! (synced, and its directory entry synced), then records the table and the column family's
//! new log number in the manifest. Only then is the memtable dropped from the read view and
//! are the WALs no column family needs any more deleted (invariant I2: data leaves the WAL only
//! after it is durable in a table the manifest names; I22: a log goes only when no column
//! family's memtables hold data in it). With several flush threads, column
//! families flush in parallel, but each column family flushes one memtable at a time, so its
//! tables are installed in the order of its memtables.
//!
//! With key-value separation on (`min_blob_size_bytes`), values at or above the threshold go to
//! one new blob file per flush, written beside the table and synced before it (I34); the table
//! holds `BlobIndex` entries that reference them, and the manifest record that adds the table
//! also adds the blob file.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::compaction::{meta_from_properties, VersionFilter};
use super::filename::{blob_path, table_path};
use super::write::delete_obsolete_logs;
use super::{ColumnFamilyState, DbInner, DbState};
use crate::blob::{BlobFileBuilder, BlobFileMetadata};
use crate::error::Result;
use crate::fs::FileSystem;
use crate::iterator::merge_fold::MergeFold;
use crate::iterator::single_delete::SingleDeletePairs;
use crate::key::{parse_internal_key, ValueKind};
use crate::memory_charge::MemoryCharge;
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::snapshot::ReadPoints;
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::edit::{FileMetadata, VersionEdit};

/// Where a flush may put large values: the number reserved for its blob file and the column
/// family the file belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlobTarget {
    pub(crate) number: u64,
    pub(crate) column_family_id: u32,
}

/// What a flush wrote: the table, and the blob file holding its large values if it has any.
pub(crate) struct FlushOutput {
    pub(crate) table: FileMetadata,
    pub(crate) blob: Option<BlobFileMetadata>,
    /// Merge operands folded into other entries.
    pub(crate) folded_operands: u64,
}

/// Writes `memtable` to table `number`, dropping versions no reader can see. Values of at least
/// `options.min_blob_size_bytes` go to blob file `blob.number` when a `blob` target is given.
/// Returns `None` when nothing was left to write (the files are then removed).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_level0_table(
    dir: &Path,
    file_system: &dyn FileSystem,
    options: &ColumnFamilyOptions,
    memtable: &Arc<MemTable>,
    number: u64,
    blob: Option<BlobTarget>,
    read_points: ReadPoints,
    memory_charge: Option<MemoryCharge>,
) -> Result<Option<FlushOutput>> {
    let path = table_path(dir, number);
    let file = file_system.create(&path)?;
    let mut builder = TableBuilder::new(file, path.clone(), TableOptions::for_level(options, 0, false));
    if let Some(charge) = memory_charge {
        builder = builder.with_memory_charge(charge);
    }
    let min_blob_size_bytes = blob.and(options.min_blob_size_bytes);
    let mut blob_builder: Option<BlobFileBuilder> = None;
    // A single delete and the put it meets in the memtable both go (`iterator/single_delete.rs`).
    let pairs = SingleDeletePairs::new(memtable.iter(), read_points.clone());
    // Merge operands fold together where no reader sees them apart (`iterator/merge_fold.rs`);
    // older entries may lie in tables, so operands alone fold only partially.
    let mut iterator = MergeFold::new(
        pairs,
        read_points.clone(),
        options.merge_operator.clone(),
        memtable.fragmented_range_tombstones(),
        false,
    );
    iterator.seek_to_first();
    // I39: entries the memtable's own range tombstones cover for every reader go now; older
    // tombstones (in the version) are older than every entry here and cover none of them.
    let mut filter =
        VersionFilter::new(read_points, false).with_range_tombstones(memtable.fragmented_range_tombstones());
    let mut separated_key = Vec::new();
    let mut reference = Vec::new();
    let result = (|| {
        while iterator.valid() {
            if !filter.should_drop(iterator.key(), iterator.value(), &path)? {
                filter.note_kept();
                let value = iterator.value();
                let key = iterator.key();
                if crate::key::has_kind(key, ValueKind::PutWithExpiry)
                    && filter.has_expired(ValueKind::PutWithExpiry, value)
                {
                    // I42: expired for every reader: written as the delete it reads as.
                    let parsed = parse_internal_key(key)
                        .ok_or_else(|| crate::error::Error::corruption(&path, 0, "malformed memtable key"))?;
                    separated_key.clear();
                    crate::key::append_internal_key(
                        &mut separated_key,
                        parsed.user_key,
                        parsed.sequence,
                        ValueKind::Delete,
                    );
                    builder.add(&separated_key, &[])?;
                    iterator.next();
                    continue;
                }
                match (min_blob_size_bytes, blob) {
                    (Some(threshold), Some(target)) if value.len() >= threshold => {
                        let parsed = parse_internal_key(iterator.key())
                            .ok_or_else(|| crate::error::Error::corruption(&path, 0, "malformed memtable key"))?;
                        // Values with an expiry stay in the table: its expiry must be read
                        // with the entry (docs/architecture.md, "Time to live").
                        if parsed.kind != ValueKind::Put {
                            builder.add(iterator.key(), value)?;
                        } else {
                            let writer = match blob_builder.as_mut() {
                                Some(writer) => writer,
                                None => {
                                    let blob_file_path = blob_path(dir, target.number);
                                    let blob_file = file_system.create(&blob_file_path)?;
                                    blob_builder.insert(BlobFileBuilder::new(
                                        blob_file,
                                        target.number,
                                        target.column_family_id,
                                        options.blob_compression,
                                    )?)
                                }
                            };
                            reference.clear();
                            writer.add(parsed.user_key, value)?.encode(&mut reference);
                            separated_key.clear();
                            crate::key::append_internal_key(
                                &mut separated_key,
                                parsed.user_key,
                                parsed.sequence,
                                ValueKind::BlobIndex,
                            );
                            builder.add(&separated_key, &reference)?;
                        }
                    }
                    _ => builder.add(iterator.key(), value)?,
                }
            }
            iterator.next();
        }
        iterator.status()?;
        if builder.num_entries() == 0 {
            return Ok(None);
        }
        // I34: the blob file is synced before the table that references it is finished.
        let blob_meta = match blob_builder.take() {
            Some(writer) => Some(writer.finish()?),
            None => None,
        };
        let properties = builder.finish()?;
        let mut table = meta_from_properties(number, &properties);
        table.range_tombstones_applied_through = filter.take_applied_through();
        if let Some(blob_meta) = &blob_meta {
            table.blob_references = vec![blob_meta.number];
        }
        Ok(Some(FlushOutput { table, blob: blob_meta, folded_operands: iterator.folded_operands() }))
    })();
    let remove_blob = || {
        if let Some(target) = blob {
            let blob_file_path = blob_path(dir, target.number);
            if file_system.exists(&blob_file_path) {
                let _ = file_system.remove(&blob_file_path);
            }
        }
    };
    match result {
        Ok(Some(output)) => Ok(Some(output)),
        Ok(None) => {
            let _ = file_system.remove(&path);
            remove_blob();
            Ok(None)
        }
        Err(error) => {
            drop(blob_builder);
            let _ = file_system.remove(&path);
            remove_blob();
            Err(error)
        }
    }
}

/// The column family to flush next: among those with an immutable memtable and no flush
/// running, the one whose oldest immutable memtable started in the oldest log.
fn pick_flush(state: &DbState) -> Option<u32> {
    state
        .column_families
        .values()
        .filter(|family| !family.flush_running)
        .filter_map(|family| family.immutables.front().map(|oldest| (oldest.log_number, family.id())))
        .min()
        .map(|(_, id)| id)
}

/// How long a flush thread waits before trying again to switch a memtable that reads paid to
/// flush, when writers held their leadership.
const READ_FLUSH_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether reads paid for a flush of `family`'s active memtable (`db::read_charges`) and it
/// can be switched without a stall.
pub(crate) fn wants_read_flush(family: &ColumnFamilyState) -> bool {
    family.shared.read_charges.is_flush_due()
        && !family.memtable.is_empty()
        && family.immutables.len() < family.shared.options().max_immutable_memtables
}

/// A column family that [`wants_read_flush`].
pub(crate) fn pick_read_flush(state: &DbState) -> Option<u32> {
    state.column_families.values().find(|family| wants_read_flush(family)).map(|family| family.id())
}

/// Background thread body: flushes immutable memtables as they appear, and switches memtables
/// that reads paid to flush.
pub(crate) fn flush_loop(inner: Arc<DbInner>) {
    loop {
        let (id, memtable, number, blob, read_points, options, several_families) = {
            let mut state = inner.state.lock();
            let id = loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if state.background_error.is_none() {
                    if let Some(id) = pick_flush(&state) {
                        break id;
                    }
                    if let Some(id) = pick_read_flush(&state) {
                        // The switch takes the writers' leadership, which comes before the
                        // state lock; it gives up rather than wait for writers.
                        let switched = parking_lot::MutexGuard::unlocked(&mut state, || {
                            super::write::switch_memtable_for_reads(&inner, id)
                        });
                        if !matches!(switched, Ok(false)) {
                            continue;
                        }
                        // Writers were busy: look again soon (they may not notify).
                        inner.work_available.wait_for(&mut state, READ_FLUSH_RETRY);
                        continue;
                    }
                }
                inner.work_available.wait(&mut state);
            };
            let number = state.versions.new_file_number();
            let Some(family) = state.column_families.get(&id) else { continue };
            // The blob file's number is reserved even if no value turns out large enough;
            // numbers are plentiful and never reused (I7).
            let blob = family
                .shared
                .options()
                .min_blob_size_bytes
                .is_some()
                .then(|| BlobTarget { number: state.versions.new_file_number(), column_family_id: id });
            let Some(family) = state.column_families.get_mut(&id) else { continue };
            let Some(oldest) = family.immutables.front() else { continue };
            let memtable = Arc::clone(&oldest.memtable);
            family.flush_running = true;
            let options = family.shared.options();
            let read_points = inner.snapshots.read_points(&inner.visible_sequence);
            (id, memtable, number, blob, read_points, options, state.column_families.len() > 1)
        };
        let written = write_level0_table(
            &inner.dir,
            inner.file_system.as_ref(),
            &options,
            &memtable,
            number,
            blob,
            read_points,
            Some(inner.memory.builder_charge()),
        )
        .and_then(|meta| inner.file_system.sync_dir(&inner.dir).map(|()| meta))
        .and_then(|meta| {
            // A batch may span column families. Once this table is installed, recovery
            // no longer replays this family's part from the logs, so the other parts,
            // which may exist only in the logs so far, must be durable first (the
            // memtable's writes all lie in closed logs: its switch started a new one).
            if several_families {
                super::write::sync_closed_logs(&inner)?;
            }
            Ok(meta)
        });
        let mut state = inner.state.lock();
        let Some(family) = state.column_families.get_mut(&id) else {
            // The column family was dropped meanwhile: its table is garbage.
            let _ = inner.file_system.remove(&table_path(&inner.dir, number));
            if let Some(target) = blob {
                let _ = inner.file_system.remove(&blob_path(&inner.dir, target.number));
            }
            inner.background_done.notify_all();
            continue;
        };
        family.flush_running = false;
        let next_log_number = family.immutables.get(1).map_or(family.memtable_log_number, |imm| imm.log_number);
        let installed = written.and_then(|meta| {
            let mut edit =
                VersionEdit { column_family: id, log_number: Some(next_log_number), ..VersionEdit::default() };
            let bytes_written = meta
                .as_ref()
                .map_or(0, |output| output.table.file_size_bytes + output.blob.map_or(0, |blob| blob.file_size_bytes));
            if let Some(output) = meta {
                state.stats.merge_operands_folded += output.folded_operands;
                edit.new_files.push((0, output.table));
                edit.new_blob_files.extend(output.blob);
            }
            // The memtable's range tombstones move into the version (I38), and the tables
            // they wholly cover go without being read.
            edit.new_range_tombstones = memtable.range_tombstones();
            let dropped_files = drop_covered_tables(&inner, &state, id, &mut edit);
            inner.record_assigned_sequences(&mut state);
            state.versions.log_and_apply(edit)?;
            state.stats.flush_count += 1;
            state.stats.range_delete_dropped_files += dropped_files;
            state.stats.level_bytes_written[0] += bytes_written;
            state.stats.level_jobs[0] += 1;
            Ok(())
        });
        match installed {
            Ok(()) => {
                if let Some(family) = state.column_families.get_mut(&id) {
                    family.immutables.pop_front();
                }
                delete_obsolete_logs(&inner, &mut state);
                inner.install_read_view(&state, id);
                inner.background_done.notify_all();
                inner.work_available.notify_all();
            }
            Err(error) => inner.set_background_error(&mut state, error),
        }
    }
}

/// Adds to `edit` (a flush of column family `id` that adds range tombstones) the removal of
/// every table that one of those tombstones covers whole: the table lies inside the
/// tombstone's range, every entry in it is older than the tombstone, no reader reads between
/// its oldest entry and the tombstone (I39), and no compaction holds it. Such a table can only
/// ever read as deleted, so it goes without being read or rewritten: a delete of a table's
/// whole key range frees its space at the next flush. Returns how many tables go.
fn drop_covered_tables(inner: &DbInner, state: &DbState, id: u32, edit: &mut VersionEdit) -> u64 {
    if edit.new_range_tombstones.is_empty() {
        return 0;
    }
    let version = state.versions.current(id);
    let read_points = inner.snapshots.read_points(&inner.visible_sequence);
    let running = super::compaction::running_of(state, id);
    let running = crate::compaction::picker::RunningJobs::new(&running, &version.comparator);
    let mut dropped = 0;
    for (level, files) in version.levels.iter().enumerate() {
        for file in files {
            if running.is_busy(file) {
                continue;
            }
            let covered = edit.new_range_tombstones.iter().any(|tombstone| {
                file.meta.largest_sequence < tombstone.sequence
                    && tombstone.contains_range(file.smallest_user_key(), file.largest_user_key(), &version.comparator)
                    && !read_points.any_between(file.meta.smallest_sequence, tombstone.sequence)
            });
            if covered {
                edit.deleted_files.push((level as u32, file.number()));
                dropped += 1;
            }
        }
    }
    dropped
}
