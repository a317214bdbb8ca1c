//! The read path: point lookups and iterator construction.
//!
//! A read takes the current [`super::ReadView`] and the sequence to read at together, under the
//! view's read lock (see [`super::DbInner::view_and_sequence`]). Taking them together matters:
//! a memtable switch installs a new view under the write lock, so every write at or below the
//! sequence is in a memtable or table of the view; and a compaction that collapsed versions at
//! or below some sequence installed its version before that sequence could be read.
//!
//! Lookup order is newest data first: active memtable, immutable memtables (newest first),
//! level-0 tables (newest first), then one table per deeper level. The first entry found for the
//! key decides (a tombstone means absent).

use std::sync::Arc;

use super::iter::DbIterator;
use super::table_cache::TableCache;
use super::DbInner;
use crate::error::{Error, Result};
use crate::iterator::db_iter::UserIterator;
use crate::iterator::level::LevelIterator;
use crate::iterator::merge::MergingIterator;
use crate::iterator::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, ValueKind};
use crate::memtable::MemTableLookup;
use crate::options::ReadOptions;
use crate::sstable::BlockReadOptions;
use crate::version::tree::TableFile;

fn block_options(options: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions { verify_checksums: options.verify_checksums, fill_cache: options.fill_cache }
}

/// Looks `key` up as of the read options' snapshot (or the latest state).
pub(crate) fn get(inner: &DbInner, key: &[u8], options: &ReadOptions) -> Result<Option<Vec<u8>>> {
    let (view, sequence) = inner.view_and_sequence(options.snapshot.as_ref());
    if let Some(found) = view.memtable.get(key, sequence) {
        return Ok(memtable_answer(found));
    }
    for immutable in &view.immutables {
        if let Some(found) = immutable.get(key, sequence) {
            return Ok(memtable_answer(found));
        }
    }
    let lookup = lookup_key(key, sequence);
    let read_options = block_options(options);
    for file in &view.version.levels[0] {
        if file.smallest_user_key() <= key && key <= file.largest_user_key() {
            if let Some(answer) = table_get(&inner.table_cache, file, key, &lookup, read_options)? {
                return Ok(answer);
            }
        }
    }
    for level in 1..view.version.levels.len() {
        if let Some(index) = view.version.find_file(level, key) {
            let file = &view.version.levels[level][index];
            if let Some(answer) = table_get(&inner.table_cache, file, key, &lookup, read_options)? {
                return Ok(answer);
            }
        }
    }
    Ok(None)
}

fn memtable_answer(found: MemTableLookup) -> Option<Vec<u8>> {
    match found {
        MemTableLookup::Value(value) => Some(value),
        MemTableLookup::Deleted => None,
    }
}

/// Looks `key` up in one table: `Some(answer)` when the table decides, `None` to go on.
fn table_get(
    table_cache: &TableCache,
    file: &TableFile,
    key: &[u8],
    lookup: &[u8],
    options: BlockReadOptions,
) -> Result<Option<Option<Vec<u8>>>> {
    let table = table_cache.get(file.number(), file.meta.file_size_bytes)?;
    if !table.may_contain(key) {
        return Ok(None);
    }
    let Some((internal_key, value)) = table.get(lookup, options)? else {
        return Ok(None);
    };
    let parsed = parse_internal_key(&internal_key).ok_or_else(|| {
        Error::corruption(
            crate::db::filename::table_path(table_cache.dir(), file.number()),
            0,
            "table returned a malformed internal key",
        )
    })?;
    if parsed.user_key != key {
        return Ok(None);
    }
    Ok(Some(match parsed.kind {
        ValueKind::Put => Some(value),
        ValueKind::Delete => None,
    }))
}

/// Approximate table bytes for user keys in `[start, end)`.
pub(crate) fn approximate_size_bytes(inner: &DbInner, start: &[u8], end: &[u8]) -> Result<u64> {
    if start >= end {
        return Ok(0);
    }
    let view = Arc::clone(&inner.read_view.read());
    let start_key = lookup_key(start, crate::key::MAX_SEQUENCE_NUMBER);
    let end_key = lookup_key(end, crate::key::MAX_SEQUENCE_NUMBER);
    let mut total = 0;
    for file in view.version.levels.iter().flatten() {
        if !file_in_bounds(file, Some(start), Some(end)) {
            continue;
        }
        let table = inner.table_cache.get(file.number(), file.meta.file_size_bytes)?;
        let from = table.approximate_offset_of(&start_key);
        let to = table.approximate_offset_of(&end_key);
        total += to.saturating_sub(from);
    }
    Ok(total)
}

/// True when the file's user-key range can hold keys in `[lower, upper)`.
fn file_in_bounds(file: &TableFile, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    lower.is_none_or(|lower| file.largest_user_key() >= lower)
        && upper.is_none_or(|upper| file.smallest_user_key() < upper)
}

/// Builds a user iterator over the current view (or the snapshot's sequence).
pub(crate) fn new_iterator(inner: &DbInner, options: &ReadOptions) -> Result<DbIterator> {
    let (view, sequence) = inner.view_and_sequence(options.snapshot.as_ref());
    let lower = options.lower_bound.as_deref();
    let upper = options.upper_bound.as_deref();
    let read_options = block_options(options);
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(view.memtable.iter()));
    for immutable in &view.immutables {
        children.push(Box::new(immutable.iter()));
    }
    for file in &view.version.levels[0] {
        if file_in_bounds(file, lower, upper) {
            let table = inner.table_cache.get(file.number(), file.meta.file_size_bytes)?;
            children.push(Box::new(table.iter(read_options)));
        }
    }
    for level in 1..view.version.levels.len() {
        let files = &view.version.levels[level];
        // Levels whose files all lie outside the bounds are skipped; within a level the
        // iterator opens only the files a seek or a step reaches.
        if !files.iter().any(|f| file_in_bounds(f, lower, upper)) {
            continue;
        }
        let table_cache = Arc::clone(&inner.table_cache);
        let version = Arc::clone(&view.version);
        let opener = Arc::new(move |index: usize| -> Result<Box<dyn InternalIterator>> {
            let file = &version.levels[level][index];
            let table = table_cache.get(file.number(), file.meta.file_size_bytes)?;
            Ok(Box::new(table.iter(read_options)) as Box<dyn InternalIterator>)
        });
        children.push(Box::new(LevelIterator::new(Arc::clone(&view.version.level_ranges[level]), opener)));
    }
    let merged = MergingIterator::new(children);
    let user = UserIterator::new(Box::new(merged), sequence, options.lower_bound.clone(), options.upper_bound.clone());
    Ok(DbIterator::new(user, view, options.snapshot.clone()))
}
