//! Compaction: merging tables down the levels, in a background thread.
//!
//! The policy here is leveled and deliberately simple (the full leveled compaction with dynamic
//! level sizes and sub-compactions is later work): level 0 is compacted into level 1 when it
//! holds `level0_compaction_trigger_files` files; level `n` from 1 to 5 is compacted into
//! `n + 1` when its size reaches its target,
//! `max(memtable_size_bytes * level0_compaction_trigger_files, 64 KiB) * 10^(n-1)` (the 64 KiB
//! floor only matters for tiny memtables, as in tests), one file at a time, round robin through
//! the key space; the last level is never compacted. When several levels are due, the one with
//! the highest score (file count or size over its trigger or target) goes first. A file that
//! overlaps nothing below is moved by editing the manifest only; it keeps its `TableFile`, so
//! the move never deletes it.
//!
//! Outputs are removed when writing them or syncing the directory fails, or when close
//! interrupts the compaction. Once the manifest update has been attempted they stay, even if it
//! failed (its record may have reached the disk); the next open deletes them if no manifest
//! names them.
//!
//! Invariant I6: a version of a key is dropped only when no snapshot or read can see it: when a
//! newer version of the same key is at or below the smallest snapshot, or when it is a tombstone
//! at or below the smallest snapshot and no deeper level can hold the key. Output files split
//! only between user keys, so no user key spans two files of a level (which keeps I4).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::filename::table_path;
use super::DbInner;
use crate::error::{Error, Result};
use crate::iterator::merge::MergingIterator;
use crate::iterator::InternalIterator;
use crate::key::{append_internal_key, parse_internal_key, user_key, ValueKind};
use crate::sstable::{BlockReadOptions, TableBuilder, TableOptions, TableProperties};
use crate::version::edit::{FileMetadata, VersionEdit};
use crate::version::tree::{TableFile, Version, NUM_LEVELS};

/// Converts a finished table's properties into its manifest entry.
pub(crate) fn meta_from_properties(number: u64, properties: &TableProperties) -> FileMetadata {
    FileMetadata {
        number,
        file_size_bytes: properties.file_size_bytes,
        smallest: properties.smallest_key.clone(),
        largest: properties.largest_key.clone(),
        smallest_sequence: properties.smallest_sequence,
        largest_sequence: properties.largest_sequence,
        num_entries: properties.num_entries,
        num_deletions: properties.num_deletions,
    }
}

/// True when a kept entry's sequence number can be rewritten to 0: a put in a compaction that
/// writes the bottommost data of its key range, at or below the smallest snapshot. The
/// version filter keeps at most one such entry per user key (any older one is shadowed by it,
/// and tombstones at or below the smallest snapshot are dropped at the bottom), so the rewritten
/// key stays unique, and sequence 0 still sorts after every newer version of the key (I6).
fn zero_sequence_at_bottom(internal_key: &[u8], bottommost: bool, smallest_snapshot: u64) -> bool {
    bottommost
        && parse_internal_key(internal_key).is_some_and(|parsed| {
            parsed.kind == ValueKind::Put && parsed.sequence <= smallest_snapshot && parsed.sequence > 0
        })
}

/// Decides, entry by entry of a sorted internal-key stream, which versions are invisible to
/// every reader and can be dropped (invariant I6).
pub(crate) struct VersionFilter {
    smallest_snapshot: u64,
    bottommost: bool,
    current_user_key: Vec<u8>,
    has_current_user_key: bool,
    last_sequence_for_key: u64,
}

impl VersionFilter {
    pub(crate) fn new(smallest_snapshot: u64, bottommost: bool) -> VersionFilter {
        VersionFilter {
            smallest_snapshot,
            bottommost,
            current_user_key: Vec::new(),
            has_current_user_key: false,
            last_sequence_for_key: u64::MAX,
        }
    }

    /// True when the entry with `internal_key` can be dropped.
    pub(crate) fn should_drop(&mut self, internal_key: &[u8], file: &Path) -> Result<bool> {
        let parsed = parse_internal_key(internal_key)
            .ok_or_else(|| Error::corruption(file, 0, "malformed internal key in compaction input"))?;
        if !self.has_current_user_key || parsed.user_key != self.current_user_key.as_slice() {
            self.current_user_key.clear();
            self.current_user_key.extend_from_slice(parsed.user_key);
            self.has_current_user_key = true;
            self.last_sequence_for_key = u64::MAX;
        }
        let drop = if self.last_sequence_for_key <= self.smallest_snapshot {
            // A newer version of this key is visible to every reader, so this one never is.
            true
        } else {
            parsed.kind == ValueKind::Delete && parsed.sequence <= self.smallest_snapshot && self.bottommost
        };
        self.last_sequence_for_key = parsed.sequence;
        Ok(drop)
    }
}

/// One unit of compaction work.
pub(crate) struct Compaction {
    level: usize,
    /// `inputs[0]` from `level`, `inputs[1]` from `level + 1`.
    inputs: [Vec<Arc<TableFile>>; 2],
    /// True when no level below the output can hold keys of the compaction's range.
    bottommost: bool,
    /// Rewrite even a lone file (manual compaction), so that dropping can happen.
    force_rewrite: bool,
}

impl Compaction {
    fn output_level(&self) -> usize {
        self.level + 1
    }

    fn is_trivial_move(&self) -> bool {
        !self.force_rewrite && self.level > 0 && self.inputs[0].len() == 1 && self.inputs[1].is_empty()
    }

    fn input_bytes(&self) -> u64 {
        self.inputs.iter().flatten().map(|f| f.meta.file_size_bytes).sum()
    }
}

/// The size above which level `level >= 1` needs compaction:
/// `max(memtable_size_bytes * level0_compaction_trigger_files, 64 KiB) * 10^(level-1)`.
fn level_target_bytes(options: &crate::Options, level: usize) -> u64 {
    let base = (options.memtable_size_bytes as u64).saturating_mul(options.level0_compaction_trigger_files as u64);
    let mut target = base.max(64 << 10);
    for _ in 1..level {
        target = target.saturating_mul(10);
    }
    target
}

fn user_range(files: &[&Arc<TableFile>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let smallest = files.iter().map(|f| f.smallest_user_key()).min()?;
    let largest = files.iter().map(|f| f.largest_user_key()).max()?;
    Some((smallest.to_vec(), largest.to_vec()))
}

fn make_compaction(version: &Version, level: usize, inputs0: Vec<Arc<TableFile>>) -> Option<Compaction> {
    let (smallest, largest) = user_range(&inputs0.iter().collect::<Vec<_>>())?;
    let inputs1 = version.overlapping_files(level + 1, &smallest, &largest);
    let all: Vec<&Arc<TableFile>> = inputs0.iter().chain(inputs1.iter()).collect();
    let (smallest, largest) = user_range(&all)?;
    let bottommost =
        (level + 2..NUM_LEVELS).all(|deeper| version.overlapping_files(deeper, &smallest, &largest).is_empty());
    Some(Compaction { level, inputs: [inputs0, inputs1], bottommost, force_rewrite: false })
}

/// Chooses the most urgent compaction, if any level is over its target.
fn pick_compaction(options: &crate::Options, version: &Version, compact_pointers: &[Vec<u8>]) -> Option<Compaction> {
    let mut best_level = 0;
    let mut best_score = version.levels[0].len() as f64 / options.level0_compaction_trigger_files as f64;
    for level in 1..NUM_LEVELS - 1 {
        let score = version.level_bytes(level) as f64 / level_target_bytes(options, level) as f64;
        if score > best_score {
            best_score = score;
            best_level = level;
        }
    }
    if best_score < 1.0 {
        return None;
    }
    if best_level == 0 {
        return make_compaction(version, 0, version.levels[0].clone());
    }
    let files = &version.levels[best_level];
    let pointer = compact_pointers.get(best_level).map_or(&[][..], Vec::as_slice);
    let file = files.iter().find(|f| pointer.is_empty() || f.largest_user_key() > pointer).or_else(|| files.first())?;
    make_compaction(version, best_level, vec![Arc::clone(file)])
}

/// Background thread body: runs compactions while any level is over its target.
pub(crate) fn compaction_loop(inner: Arc<DbInner>) {
    loop {
        let compaction = {
            let mut state = inner.state.lock();
            loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if state.background_error.is_none() && !state.compaction_running {
                    let version = state.versions.current();
                    if let Some(compaction) = pick_compaction(&inner.options, &version, &state.compact_pointers) {
                        state.compaction_running = true;
                        break compaction;
                    }
                }
                inner.work_available.wait(&mut state);
            }
        };
        let result = run_compaction(&inner, &compaction);
        let mut state = inner.state.lock();
        state.compaction_running = false;
        match result {
            Ok(()) => {}
            Err(Error::Closed(_)) => {}
            Err(error) => inner.set_background_error(&mut state, error),
        }
        inner.background_done.notify_all();
        inner.work_available.notify_all();
    }
}

/// Runs one compaction and installs its result. On error, outputs are removed only when no
/// manifest update was attempted (see the module doc).
fn run_compaction(inner: &Arc<DbInner>, compaction: &Compaction) -> Result<()> {
    let level = compaction.level;
    if compaction.is_trivial_move() {
        let mut state = inner.state.lock();
        let file = &compaction.inputs[0][0];
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((level as u32, file.number()));
        edit.new_files.push(((level + 1) as u32, file.meta.clone()));
        state.versions.log_and_apply(edit)?;
        if let Some(pointer) = state.compact_pointers.get_mut(level) {
            *pointer = file.largest_user_key().to_vec();
        }
        state.stats.trivial_moves += 1;
        inner.install_read_view(&state);
        return Ok(());
    }
    let smallest_snapshot = inner.snapshots.smallest_snapshot(&inner.visible_sequence);
    let mut outputs: Vec<FileMetadata> = Vec::new();
    let written = write_outputs(inner, compaction, smallest_snapshot, &mut outputs)
        .and_then(|()| inner.file_system.sync_dir(&inner.dir));
    if let Err(error) = written {
        for meta in &outputs {
            let _ = inner.file_system.remove(&table_path(&inner.dir, meta.number));
        }
        return Err(error);
    }
    // From here on the outputs stay even if the manifest update fails: its record may have
    // reached the disk. If it did not, the next open deletes them as orphans.
    let mut state = inner.state.lock();
    let installed = (|| {
        let mut edit = VersionEdit::default();
        for (which, files) in compaction.inputs.iter().enumerate() {
            for file in files {
                edit.deleted_files.push(((level + which) as u32, file.number()));
            }
        }
        let bytes_written: u64 = outputs.iter().map(|m| m.file_size_bytes).sum();
        for meta in &outputs {
            edit.new_files.push((compaction.output_level() as u32, meta.clone()));
        }
        state.versions.log_and_apply(edit)?;
        state.stats.compaction_count += 1;
        state.stats.compaction_bytes_read += compaction.input_bytes();
        state.stats.compaction_bytes_written += bytes_written;
        if let Some(largest) = compaction.inputs[0].iter().map(|f| f.largest_user_key()).max() {
            if let Some(pointer) = state.compact_pointers.get_mut(level) {
                *pointer = largest.to_vec();
            }
        }
        inner.install_read_view(&state);
        Ok(())
    })();
    installed
}

/// Merges the inputs into new tables of the output level. Output metadata is pushed to
/// `outputs` as files are finished, so the caller can clean up after an error.
fn write_outputs(
    inner: &Arc<DbInner>,
    compaction: &Compaction,
    smallest_snapshot: u64,
    outputs: &mut Vec<FileMetadata>,
) -> Result<()> {
    let read_options = BlockReadOptions { verify_checksums: true, fill_cache: false };
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for file in compaction.inputs.iter().flatten() {
        let table = inner.table_cache.get(file.number(), file.meta.file_size_bytes)?;
        children.push(Box::new(table.iter(read_options)));
    }
    let mut merged = MergingIterator::new(children);
    merged.seek_to_first();
    let mut filter = VersionFilter::new(smallest_snapshot, compaction.bottommost);
    let table_options = TableOptions::from_options(&inner.options);
    let mut builder: Option<(u64, TableBuilder)> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut zeroed_key: Vec<u8> = Vec::new();
    let mut steps: u64 = 0;
    let input_path = inner.dir.join("<compaction input>");
    while merged.valid() {
        steps += 1;
        if steps.is_multiple_of(1024) && inner.shutting_down.load(Ordering::Acquire) {
            if let Some((number, _)) = builder.take() {
                let _ = inner.file_system.remove(&table_path(&inner.dir, number));
            }
            return Err(Error::Closed("compaction stopped by close".to_string()));
        }
        let key = merged.key();
        if filter.should_drop(key, &input_path)? {
            merged.next();
            continue;
        }
        let current_user_key = user_key(key);
        let split = builder.as_ref().is_some_and(|(_, b)| {
            b.estimated_file_size_bytes() >= inner.options.target_file_size_bytes
                && current_user_key != last_user_key.as_slice()
        });
        if split {
            if let Some((number, finished)) = builder.take() {
                let properties = finished.finish()?;
                outputs.push(meta_from_properties(number, &properties));
            }
        }
        if builder.is_none() {
            let number = inner.state.lock().versions.new_file_number();
            let path = table_path(&inner.dir, number);
            let file = inner.file_system.create(&path)?;
            builder = Some((number, TableBuilder::new(file, path, table_options)));
        }
        if let Some((_, active)) = builder.as_mut() {
            if zero_sequence_at_bottom(key, compaction.bottommost, smallest_snapshot) {
                // Every reader sees this version and nothing older of the key survives, so its
                // sequence number carries no information: zeros compress, unique sequence
                // numbers do not (8 bytes per entry, a tenth of a small record).
                zeroed_key.clear();
                append_internal_key(&mut zeroed_key, current_user_key, 0, ValueKind::Put);
                active.add(&zeroed_key, merged.value())?;
            } else {
                active.add(key, merged.value())?;
            }
        }
        last_user_key.clear();
        last_user_key.extend_from_slice(current_user_key);
        merged.next();
    }
    merged.status()?;
    if let Some((number, finished)) = builder.take() {
        if finished.num_entries() > 0 {
            let properties = finished.finish()?;
            outputs.push(meta_from_properties(number, &properties));
        } else {
            drop(finished);
            let _ = inner.file_system.remove(&table_path(&inner.dir, number));
        }
    }
    Ok(())
}

/// Waits until no flush or compaction is pending or running.
pub(crate) fn wait_until_idle(inner: &Arc<DbInner>) -> Result<()> {
    let mut state = inner.state.lock();
    loop {
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".to_string()));
        }
        let version = state.versions.current();
        let idle = state.immutables.is_empty()
            && !state.flush_running
            && !state.compaction_running
            && pick_compaction(&inner.options, &version, &state.compact_pointers).is_none();
        if idle {
            return Ok(());
        }
        inner.work_available.notify_all();
        inner.background_done.wait_for(&mut state, Duration::from_millis(100));
    }
}

/// Compacts every level into the next, once from the top down, so that all tables present at
/// the start end in the deepest non-empty level (at least level 1), rewritten so that
/// invisible versions and droppable tombstones are gone.
pub(crate) fn compact_all(inner: &Arc<DbInner>) -> Result<()> {
    {
        let mut state = inner.state.lock();
        while state.compaction_running {
            if let Some(error) = &state.background_error {
                return Err(error.duplicate());
            }
            inner.background_done.wait_for(&mut state, Duration::from_millis(100));
        }
        state.compaction_running = true;
    }
    let result = (|| {
        let target = {
            let state = inner.state.lock();
            let version = state.versions.current();
            (0..NUM_LEVELS).rev().find(|&level| !version.levels[level].is_empty()).unwrap_or(0).max(1)
        };
        for level in 0..target {
            let compaction = {
                let state = inner.state.lock();
                if let Some(error) = &state.background_error {
                    return Err(error.duplicate());
                }
                let version = state.versions.current();
                make_compaction(&version, level, version.levels[level].clone())
            };
            if let Some(mut compaction) = compaction {
                compaction.force_rewrite = true;
                run_compaction(inner, &compaction)?;
            }
        }
        Ok(())
    })();
    let mut state = inner.state.lock();
    state.compaction_running = false;
    inner.background_done.notify_all();
    inner.work_available.notify_all();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn only_bottommost_puts_at_or_below_the_smallest_snapshot_lose_their_sequence() {
        let put = make_internal_key(b"k", 7, ValueKind::Put);
        let delete = make_internal_key(b"k", 7, ValueKind::Delete);
        assert!(zero_sequence_at_bottom(&put, true, 7));
        assert!(zero_sequence_at_bottom(&put, true, 100));
        assert!(!zero_sequence_at_bottom(&put, true, 6), "a snapshot below it may not see it");
        assert!(!zero_sequence_at_bottom(&put, false, 100), "deeper levels may hold older versions");
        assert!(!zero_sequence_at_bottom(&delete, true, 100));
        assert!(!zero_sequence_at_bottom(&make_internal_key(b"k", 0, ValueKind::Put), true, 100));
        assert!(!zero_sequence_at_bottom(b"short", true, 100));
    }
}
