//! The read path: point lookups and iterator construction.
//!
//! A read takes the current [`super::ReadView`] and the sequence to read at together, checked
//! against the view generation (see `ColumnFamilyShared::view_and_sequence`). Taking them
//! together matters: a memtable switch installs a new view before any write into the new
//! memtable is published, so every write at or below the sequence is in a memtable or table of
//! the view; and a compaction that collapsed versions at or below some sequence installed its
//! version before that sequence could be read.
//!
//! Lookup order is newest data first: active memtable, immutable memtables (newest first),
//! level-0 tables (newest first), then one table per deeper level. The first entry found for the
//! key decides (a tombstone means absent). Key ranges (of files, of bounds, of range queries)
//! are compared in the column family's order, which its version carries.

use std::sync::Arc;

use super::column_family::ColumnFamilyShared;
use super::iter::{DbIterator, ViewRefresh};
use super::read_charges::SeekCharges;
use super::table_cache::TableCache;
use super::{DbInner, ReadView};
use crate::comparator::KeyComparator;
use crate::error::Result;
use crate::iterator::db_iter::{BlobSource, UserIterator};
use crate::iterator::level::LevelIterator;
use crate::iterator::merge::{MergingIterator, SequenceBounds};
use crate::iterator::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::memtable::MemTableLookup;
use crate::options::ReadOptions;
use crate::sstable::BlockReadOptions;
use crate::version::tree::TableFile;

fn block_options(options: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions { verify_checksums: options.verify_checksums, fill_cache: options.fill_cache }
}

/// Looks `key` up in a column family as of the read options' snapshot (or the latest state).
pub(crate) fn get(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    key: &[u8],
    options: &ReadOptions,
) -> Result<Option<Vec<u8>>> {
    let (view, sequence, _) = column_family.view_and_sequence(&inner.visible_sequence, options.snapshot.as_ref());
    // I38: an entry older than a visible range tombstone that holds the key reads as deleted.
    // The newest entry found decides, so one comparison with the newest covering tombstone is
    // enough (older sources hold only older versions of the key).
    let covering = covering_sequence(&view, key, sequence);
    // I42: an expired entry reads as deleted. The clock is read only when an entry with an
    // expiry decides the read; a snapshot brings its own read time.
    let read_time_us = || match &options.snapshot {
        Some(snapshot) => snapshot.read_time_us(),
        None => inner.snapshots.clock().now_us(),
    };
    // A memtable that held no entry once `sequence` was read holds none this read may see
    // (I48). Skipping it spares a probe of its filter, a cache miss per get after a flush.
    let memtables =
        std::iter::once(&view.memtable).chain(view.immutables.iter()).filter(|memtable| !memtable.is_empty());
    for memtable in memtables {
        if let Some((found, found_sequence)) = memtable.get_with_sequence(key, sequence) {
            if found_sequence < covering {
                return Ok(None);
            }
            if found == MemTableLookup::Merge {
                return merged_get(inner, column_family, &view, sequence, key, options);
            }
            return Ok(memtable_answer(found, read_time_us));
        }
    }
    let lookup = lookup_key(key, sequence);
    let read_options = block_options(options);
    let comparator = &view.version.comparator;
    let found = 'search: {
        for file in view.version.files_for_key(key) {
            if let Some(answer) = table_get(&inner.table_cache, file, &lookup, read_options, comparator)? {
                break 'search Some((file, answer));
            }
        }
        None
    };
    match found {
        None => Ok(None),
        Some((_, (_, found_sequence))) if found_sequence < covering => Ok(None),
        Some((_, (TableAnswer::Value(value), _))) => Ok(Some(value)),
        Some((_, (TableAnswer::Deleted, _))) => Ok(None),
        Some((_, (TableAnswer::Merge, _))) => merged_get(inner, column_family, &view, sequence, key, options),
        Some((file, (TableAnswer::Expiring(stored), _))) => {
            let Some((expires_at_us, _)) = crate::ttl::split_expiring(&stored) else {
                let table = crate::db::filename::table_path(&inner.dir, file.number());
                return Err(crate::error::Error::corruption(
                    table,
                    0,
                    format!("an entry with an expiry has a {}-byte value", stored.len()),
                ));
            };
            if crate::ttl::is_expired(expires_at_us, read_time_us()) {
                return Ok(None);
            }
            let mut value = stored;
            value.drain(..crate::ttl::EXPIRY_PREFIX_BYTES);
            Ok(Some(value))
        }
        Some((file, (TableAnswer::InBlob(reference), _))) => {
            // I36: the value comes from the version's blob files, checked, or not at all.
            let table = crate::db::filename::table_path(&inner.dir, file.number());
            let value = crate::blob::resolve(
                &view.version.blob_files,
                key,
                &reference,
                Some(&inner.block_cache),
                options.fill_cache,
                &table,
                None,
            )?;
            Ok(Some(value))
        }
    }
}

/// The newest sequence of a range tombstone of the view that holds `key` and is visible at
/// `sequence`; 0 when there is none. Costs an atomic load per memtable when no memtable holds a
/// range tombstone.
pub(crate) fn covering_sequence(view: &super::ReadView, key: &[u8], sequence: u64) -> u64 {
    let mut covering = 0;
    if !view.version.range_tombstones.is_empty() {
        covering = view.version.range_tombstones.fragmented().covering_sequence(key, sequence);
    }
    for memtable in std::iter::once(&view.memtable).chain(view.immutables.iter()) {
        if let Some(fragmented) = memtable.fragmented_range_tombstones() {
            covering = covering.max(fragmented.covering_sequence(key, sequence));
        }
    }
    covering
}

/// The range tombstone sets of the view (each memtable's and the version's, fragmented; empty
/// when there are none). They may hold tombstones newer than a reader's sequence: lookups take
/// the newest one at or below it.
pub(crate) fn view_range_tombstones(view: &super::ReadView) -> Vec<Arc<crate::range_tombstone::FragmentedTombstones>> {
    let mut sets = Vec::new();
    for memtable in std::iter::once(&view.memtable).chain(view.immutables.iter()) {
        sets.extend(memtable.fragmented_range_tombstones());
    }
    if !view.version.range_tombstones.is_empty() {
        sets.push(Arc::clone(view.version.range_tombstones.fragmented()));
    }
    sets
}

/// What one table says about a key.
enum TableAnswer {
    Value(Vec<u8>),
    Deleted,
    /// The value is in a blob file; this is its encoded reference.
    InBlob(Vec<u8>),
    /// A value with an expiry, as stored: the expiry, then the value.
    Expiring(Vec<u8>),
    /// A merge operand: the value takes older entries too.
    Merge,
}

fn memtable_answer(found: MemTableLookup, read_time_us: impl FnOnce() -> u64) -> Option<Vec<u8>> {
    match found {
        MemTableLookup::Value(value) => Some(value),
        MemTableLookup::Deleted => None,
        MemTableLookup::Expiring { expires_at_us, value } => {
            (!crate::ttl::is_expired(expires_at_us, read_time_us())).then_some(value)
        }
        // The caller reads merges through an iterator.
        MemTableLookup::Merge => None,
    }
}

/// The value of `key` when its newest entry is a merge operand (I43), read at `sequence` in
/// `view` (the get's): a user iterator over the sources that may hold the key (memtables and
/// tables whose bloom filters pass it) combines the operands with what lies beneath them, with
/// range tombstones, expiries and blob values applied as for any read. Taken only for keys
/// whose newest entry is an operand.
fn merged_get(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    view: &super::ReadView,
    sequence: u64,
    key: &[u8],
    options: &ReadOptions,
) -> Result<Option<Vec<u8>>> {
    let comparator = &view.version.comparator;
    let read_options = block_options(options);
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for memtable in std::iter::once(&view.memtable).chain(view.immutables.iter()) {
        if memtable.may_contain(key) {
            children.push(Box::new(memtable.iter()));
        }
    }
    for file in view.version.files_for_key(key) {
        let table = inner.table_cache.table_of(file, comparator)?;
        if table.may_contain(key) {
            children.push(Box::new(table.iter(read_options)));
        }
    }
    let merged = MergingIterator::new(children, comparator.clone());
    let mut iterator = UserIterator::new(Box::new(merged), comparator.clone(), sequence, Some(key.to_vec()), None);
    // A one-key read: no readahead.
    configure_user_iterator(&mut iterator, inner, column_family, view, view_range_tombstones(view), options, false);
    iterator.seek(key);
    iterator.status()?;
    // Keys that compare equal are byte-identical (the comparator's contract).
    Ok((iterator.valid() && iterator.key() == key).then(|| iterator.value().to_vec()))
}

/// Looks `key` up in one table: `Some((answer, sequence of the entry))` when the table decides, `None` to go on. The
/// table checks its key range and bloom filter first, and answers only for an entry of `key`
/// itself.
fn table_get(
    table_cache: &TableCache,
    file: &TableFile,
    lookup: &[u8],
    options: BlockReadOptions,
    comparator: &KeyComparator,
) -> Result<Option<(TableAnswer, u64)>> {
    let table = table_cache.table_of(file, comparator)?;
    Ok(table.get_value(lookup, options)?.map(|(kind, sequence, value)| {
        let answer = match kind {
            ValueKind::Put => TableAnswer::Value(value),
            ValueKind::Delete | ValueKind::SingleDelete => TableAnswer::Deleted,
            ValueKind::BlobIndex => TableAnswer::InBlob(value),
            ValueKind::PutWithExpiry => TableAnswer::Expiring(value),
            ValueKind::Merge => TableAnswer::Merge,
        };
        (answer, sequence)
    }))
}

/// Approximate table bytes for user keys in `[start, end)`.
pub(crate) fn approximate_size_bytes(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    start: &[u8],
    end: &[u8],
) -> Result<u64> {
    Ok(table_range_stats(inner, column_family, start, end)?.0)
}

/// Table bytes and estimated entries for user keys in `[start, end)`: per overlapping table,
/// the bytes between the index positions of `start` and `end`, and its entries in proportion.
fn table_range_stats(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    start: &[u8],
    end: &[u8],
) -> Result<(u64, u64)> {
    let view = column_family.read_view.load();
    let comparator = &view.version.comparator;
    if comparator.compare_user_keys(start, end).is_ge() {
        return Ok((0, 0));
    }
    let start_key = lookup_key(start, crate::key::MAX_SEQUENCE_NUMBER);
    let end_key = lookup_key(end, crate::key::MAX_SEQUENCE_NUMBER);
    let mut total_bytes = 0;
    let mut total_entries = 0.0;
    for file in view.version.levels.iter().flatten() {
        if !file_in_bounds(file, Some(start), Some(end), comparator) {
            continue;
        }
        let table = inner.table_cache.table_of(file, comparator)?;
        let from = table.approximate_offset_of(&start_key);
        let to = table.approximate_offset_of(&end_key);
        let bytes = to.saturating_sub(from);
        total_bytes += bytes;
        // The share of the data region between the two positions: both are block offsets, so
        // a range over the whole table reaches the region's end.
        let data_bytes = table.properties().data_size_bytes.max(1);
        let fraction = (bytes as f64 / data_bytes as f64).min(1.0);
        total_entries += fraction * file.meta.num_entries as f64;
    }
    Ok((total_bytes, total_entries.round() as u64))
}

/// Approximate size and entry count of a key range; see [`crate::Db::approximate_range_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RangeStats {
    /// Bytes of table data holding keys in the range (compressed, as on disk).
    pub table_bytes: u64,
    /// Entries (versions, tombstones included) in tables, estimated from table properties.
    pub table_entries: u64,
    /// User keys in memtables, each counted once however many versions it has there: counted
    /// exactly in a range of up to a few tens of entries, estimated from the skiplist's levels
    /// in a longer one (usually within a few tens of percent).
    pub memtable_entries: u64,
}

impl RangeStats {
    /// Estimated entries in the range, tables and memtables together. Deleted keys count,
    /// and a key in a memtable and in tables (or in several of them) counts in each, so this
    /// is an upper estimate of live keys.
    pub fn entries(&self) -> u64 {
        self.table_entries + self.memtable_entries
    }
}

pub(crate) fn approximate_range_stats(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    start: &[u8],
    end: &[u8],
) -> Result<RangeStats> {
    let (table_bytes, table_entries) = table_range_stats(inner, column_family, start, end)?;
    let mut memtable_entries = 0;
    if column_family.comparator.compare_user_keys(start, end).is_lt() {
        let view = column_family.read_view.load();
        for memtable in std::iter::once(&view.memtable).chain(view.immutables.iter()) {
            memtable_entries += memtable.user_keys_in_range(start, end);
        }
    }
    Ok(RangeStats { table_bytes, table_entries, memtable_entries })
}

/// True when the file's user-key range can hold keys in `[lower, upper)` (in `comparator`'s
/// order).
fn file_in_bounds(file: &TableFile, lower: Option<&[u8]>, upper: Option<&[u8]>, comparator: &KeyComparator) -> bool {
    lower.is_none_or(|lower| comparator.compare_user_keys(file.largest_user_key(), lower).is_ge())
        && upper.is_none_or(|upper| comparator.compare_user_keys(file.smallest_user_key(), upper).is_lt())
}

/// Builds a user iterator over a column family's current view (or the snapshot's sequence).
/// The iterator moves to newer views of the same data on later seeks (see `db::iter`).
pub(crate) fn new_iterator(
    inner: &Arc<DbInner>,
    column_family: &Arc<ColumnFamilyShared>,
    options: &ReadOptions,
) -> Result<DbIterator> {
    // The generation is the view's or older, so that a view installed since is a change the
    // iterator notices on its next seek.
    let (view, sequence, view_generation) =
        column_family.view_and_sequence(&inner.visible_sequence, options.snapshot.as_ref());
    let view = arc_swap::Guard::into_inner(view);
    let (user, seek_charges) = user_iterator_over_view(inner, column_family, &view, sequence, options)?;
    let refresh = ViewRefresh {
        db: Arc::downgrade(inner),
        column_family: Arc::clone(column_family),
        fill_cache: options.fill_cache,
        verify_checksums: options.verify_checksums,
        blob_readahead: options.blob_readahead,
        view_generation,
    };
    Ok(DbIterator::new(user, view, options.snapshot.clone(), seek_charges, refresh))
}

/// The user iterator over `view` at `sequence`, and the charges its seeks make against level 0.
pub(crate) fn user_iterator_over_view(
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    view: &Arc<ReadView>,
    sequence: u64,
    options: &ReadOptions,
) -> Result<(UserIterator, Option<SeekCharges>)> {
    let lower = options.lower_bound.as_deref();
    let upper = options.upper_bound.as_deref();
    let read_options = block_options(options);
    let comparator = &view.version.comparator;
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let tombstones = view_range_tombstones(view);
    // The largest sequence each child can hold (the active memtable still takes writes: its
    // bound is the largest there is), so that a scan over a range tombstone lets the older
    // ones jump past it, and a seek that lands on its key in a newer source leaves the older
    // ones unpositioned (I49).
    let mut max_sequences = SequenceBounds::default();
    let mut note_max_sequence = |max_sequence: u64| max_sequences.push(max_sequence);
    // A memtable that held no entry once `sequence` was read holds none the iterator may see
    // (I48): every entry at or below the sequence was inserted and counted before the sequence
    // was published, and later ones are newer than the iterator. Leaving it out spares every
    // fresh iterator after a flush a child, and often the merge itself (below).
    let reads_memtable = !view.memtable.is_empty();
    if reads_memtable {
        children.push(Box::new(view.memtable.iter()));
        note_max_sequence(u64::MAX);
    }
    for immutable in view.immutables.iter().filter(|immutable| !immutable.is_empty()) {
        children.push(Box::new(immutable.iter()));
        note_max_sequence(immutable.largest_sequence());
    }
    let first_level0_child = children.len();
    let mut level0_tables = 0;
    // Read-triggered compaction weighs a seek's level-0 tables by the blocks they read from disk.
    let count_misses = column_family.read_charges.is_enabled();
    for file in &view.version.levels[0] {
        if file_in_bounds(file, lower, upper, comparator) {
            let table = inner.table_cache.table_of(file, comparator)?;
            children.push(Box::new(table.iter_counting_misses(read_options, count_misses)));
            note_max_sequence(file.meta.largest_sequence);
            level0_tables += 1;
        }
    }
    let mut deeper_levels = 0;
    for level in 1..view.version.levels.len() {
        let files = &view.version.levels[level];
        // Levels whose files all lie outside the bounds are skipped; within a level the
        // iterator opens only the files a seek or a step reaches.
        if !files.iter().any(|f| file_in_bounds(f, lower, upper, comparator)) {
            continue;
        }
        deeper_levels += 1;
        let table_cache = Arc::clone(&inner.table_cache);
        let version = crate::sync::Arc::clone(&view.version);
        let opener = Arc::new(move |index: usize| -> Result<Box<dyn InternalIterator>> {
            let file = &version.levels[level][index];
            let table = table_cache.table_of(file, &version.comparator)?;
            Ok(Box::new(table.iter(read_options)) as Box<dyn InternalIterator>)
        });
        // A file's filter, for seeks that leave sources without the key unpositioned (I49); a
        // table that cannot be opened may hold the key (the seek reports the error).
        let table_cache = Arc::clone(&inner.table_cache);
        let version = crate::sync::Arc::clone(&view.version);
        let filter = Arc::new(move |index: usize, user_key: &[u8]| -> bool {
            let file = &version.levels[level][index];
            table_cache.table_of(file, &version.comparator).map_or(true, |table| table.may_contain(user_key))
        });
        let ranges = Arc::clone(&view.version.level_ranges[level]);
        children.push(Box::new(LevelIterator::new(ranges, opener, comparator.clone()).with_filter(filter)));
        note_max_sequence(view.version.level_largest_sequence(level));
    }
    // One source needs no merge: the user iterator drives it directly, a layer of calls less
    // per step. (With range tombstones the merge also lets older sources jump past them.)
    let merged: Box<dyn InternalIterator> = match (children.len(), tombstones.is_empty()) {
        (1, true) => children.remove(0),
        _ => {
            // A compaction of level 0 merges its tables and the first deeper level (its
            // output), so older versions passed in those count against level 0.
            let compactable = if level0_tables > 0 {
                first_level0_child..first_level0_child + level0_tables + deeper_levels.min(1)
            } else {
                0..0
            };
            // Configured in place on the heap: the merge is large (its lists live inline), and
            // each by-value builder step copied it whole.
            let mut merged = Box::new(MergingIterator::new(children, comparator.clone()));
            merged.set_compactable_children(compactable);
            if reads_memtable {
                // The active memtable is the first child.
                merged.set_memtable_child(0);
            }
            merged.set_child_max_sequences(max_sequences);
            merged
        }
    };
    // Set in place: the iterator is large, and each by-value builder step would move it.
    let mut user = UserIterator::new(
        merged,
        comparator.clone(),
        sequence,
        options.lower_bound.clone(),
        options.upper_bound.clone(),
    );
    configure_user_iterator(&mut user, inner, column_family, view, tombstones, options, options.blob_readahead);
    let memtable_bytes = if reads_memtable { view.memtable.approximate_memory_bytes() } else { 0 };
    let seek_charges =
        column_family.read_charges.seek_charges(&view.version, level0_tables, deeper_levels, memtable_bytes);
    Ok((user, seek_charges))
}

/// Gives a user iterator over `view` what reading it needs besides its entries: the view's
/// range tombstone sets `tombstones` (I38), its read time (I42: the snapshot's, or the clock's when the view
/// holds entries with an expiry), the merge operator (I43) and the blob files, read ahead when
/// `readahead`.
fn configure_user_iterator(
    iterator: &mut UserIterator,
    inner: &DbInner,
    column_family: &ColumnFamilyShared,
    view: &super::ReadView,
    tombstones: Vec<Arc<crate::range_tombstone::FragmentedTombstones>>,
    options: &ReadOptions,
    readahead: bool,
) {
    iterator.set_range_tombstones(tombstones);
    iterator.set_read_time(match &options.snapshot {
        Some(snapshot) => snapshot.read_time_us(),
        None if view_has_expiring_entries(view) => inner.snapshots.clock().now_us(),
        None => 0,
    });
    iterator.set_merge_operator(column_family.merge_operator());
    // Without blob files a reference is corruption either way (it names a file no version
    // lists), so the source is left out: its two `Arc`s cost four writes, at creation and at
    // drop, to counters every reading core shares.
    if !view.version.blob_files.is_empty() {
        iterator.set_blob_source(BlobSource {
            files: Arc::clone(&view.version.blob_files),
            cache: Arc::clone(&inner.block_cache),
            fill_cache: options.fill_cache,
            readahead: readahead.then(Default::default),
        });
    }
}

/// Whether a memtable or a table of the view holds entries with an expiry.
fn view_has_expiring_entries(view: &super::ReadView) -> bool {
    view.version.has_expiring_entries
        || view.memtable.has_expiring_entries()
        || view.immutables.iter().any(|memtable| memtable.has_expiring_entries())
}

/// One stored version of a key, as [`key_versions`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredVersion {
    /// Where it lies: `memtable`, `immutable N` (0 the newest), or `L<level> #<file number>`.
    pub source: String,
    /// Its sequence number (0 once a bottom compaction dropped it).
    pub sequence: u64,
    /// True for a tombstone.
    pub is_delete: bool,
    /// Its value.
    pub value: Vec<u8>,
}

/// Every version of `user_key` held by the current view of `column_family`, source by source
/// in read order, with the sequence number reads see now. For diagnostics (the reliability
/// harness prints it when a read looks wrong): it reads every source in full for the key,
/// whatever filters say.
pub(crate) fn key_versions(
    inner: &DbInner,
    column_family: &super::column_family::ColumnFamilyShared,
    user_key: &[u8],
) -> Result<(u64, Vec<StoredVersion>)> {
    let (view, sequence, _) = column_family.view_and_sequence(&inner.visible_sequence, None);
    Ok((sequence, key_versions_in_view(&view, &inner.table_cache, user_key)?))
}

/// Every version of `user_key` in `view`, source by source in read order.
pub(crate) fn key_versions_in_view(
    view: &super::ReadView,
    table_cache: &TableCache,
    user_key: &[u8],
) -> Result<Vec<StoredVersion>> {
    let comparator = &view.version.comparator;
    let target = lookup_key(user_key, MAX_SEQUENCE_NUMBER);
    let read_options = BlockReadOptions { verify_checksums: true, fill_cache: false };
    let mut sources: Vec<(String, Box<dyn InternalIterator>)> =
        vec![("memtable".to_string(), Box::new(view.memtable.iter()))];
    for (position, immutable) in view.immutables.iter().enumerate() {
        sources.push((format!("immutable {position}"), Box::new(immutable.iter())));
    }
    for (level, files) in view.version.levels.iter().enumerate() {
        for file in files {
            let table = table_cache.table_of(file, comparator)?;
            sources.push((format!("L{level} #{}", file.number()), Box::new(table.iter(read_options))));
        }
    }
    let mut versions = Vec::new();
    for (source, mut iterator) in sources {
        iterator.seek(&target);
        while iterator.valid() {
            let Some(parsed) = parse_internal_key(iterator.key()) else { break };
            if comparator.compare_user_keys(parsed.user_key, user_key).is_ne() {
                break;
            }
            versions.push(StoredVersion {
                source: source.clone(),
                sequence: parsed.sequence,
                is_delete: parsed.kind.is_deletion(),
                value: iterator.value().to_vec(),
            });
            iterator.next();
        }
        iterator.status()?;
    }
    Ok(versions)
}
