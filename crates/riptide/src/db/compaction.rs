//! Compaction: merging tables down the levels, in background threads and for `compact_range`.
//!
//! What to compact is decided by `crate::compaction::picker` (leveled, with dynamic level
//! sizes, scored picking, tombstone-density triggers and trivial moves); this module runs the
//! jobs. Up to `max_background_compactions` threads each take the most urgent job of any column
//! family whose files and output key range do not collide with a running job, so jobs on
//! disjoint key ranges run in parallel. A large job is split into up to `max_subcompactions`
//! key ranges merged by parallel threads; their outputs are disjoint, so they install as one
//! edit. A file that overlaps nothing below is moved by editing the manifest only; it keeps its
//! `TableFile`, so the move never deletes it.
//!
//! Outputs are removed when writing them or syncing the directory fails, when close or a
//! cancellation interrupts the job, or when the column family was dropped meanwhile. Once the
//! manifest update has been attempted they stay, even if it failed (its record may have reached
//! the disk); the next open deletes them if no manifest names them.
//!
//! Invariant I6: a version of a key is dropped only when no snapshot or read can see it: when a
//! newer version of the same key is at or below the smallest snapshot, or when it is a tombstone
//! at or below the smallest snapshot and no deeper level can hold the key. Output files split
//! only between user keys, so no user key spans two files of a level (which keeps I4). Inputs
//! are merged, and sub-compaction ranges cut, in the column family's order (the plan's
//! comparator).
//!
//! Blob references (key-value separation) are carried into the outputs as they are; an entry
//! the job drops makes its blob record garbage, recorded in the job's manifest edit, and the
//! live values of blob files past their garbage ratio (or among the oldest) are moved to new
//! blob files (`blob/relocation.rs`, I34, I35).

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::column_family::ColumnFamily;
use super::filename::{blob_path, table_path};
use super::{DbInner, DbState, RunningJob};
use crate::blob::relocation::{files_to_relocate, note_reference, BlobRelocation, KeptEntry};
use crate::blob::BlobFileMetadata;
use crate::compaction::picker::{self, CompactionPlan, CompactionReason, PickerOptions, RunningCompaction};
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::iterator::merge::MergingIterator;
use crate::iterator::merge_fold::MergeFold;
use crate::iterator::single_delete::SingleDeletePairs;
use crate::iterator::InternalIterator;
use crate::key::{append_internal_key, lookup_key, parse_internal_key, user_key, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::options::ColumnFamilyOptions;
use crate::range_tombstone::FragmentedTombstones;
use crate::snapshot::ReadPoints;
use crate::sstable::{BlockReadOptions, TableBuilder, TableOptions, TableProperties};
use crate::version::edit::{BlobGarbage, FileMetadata, VersionEdit};
use crate::version::tree::{Version, NUM_LEVELS};

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
        blob_references: Vec::new(),
        range_tombstones_applied_through: 0,
        expiry: properties.expiry,
        num_merge_operands: properties.num_merge_operands,
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
            matches!(parsed.kind, ValueKind::Put | ValueKind::BlobIndex | ValueKind::PutWithExpiry)
                && parsed.sequence <= smallest_snapshot
                && parsed.sequence > 0
        })
}

/// What a compaction job wrote, collected across its sub-compactions (also after an error, so
/// that the caller can remove it).
#[derive(Default)]
struct JobOutputs {
    tables: Vec<FileMetadata>,
    blob_files: Vec<BlobFileMetadata>,
    /// Every blob file created, finished or not.
    created_blob_files: Vec<u64>,
    /// Garbage found per blob file: (records, bytes).
    garbage: std::collections::BTreeMap<u64, (u64, u64)>,
}

impl JobOutputs {
    fn absorb(&mut self, other: JobOutputs) {
        self.tables.extend(other.tables);
        self.blob_files.extend(other.blob_files);
        self.created_blob_files.extend(other.created_blob_files);
        for (number, (count, bytes)) in other.garbage {
            let entry = self.garbage.entry(number).or_insert((0, 0));
            entry.0 += count;
            entry.1 += bytes;
        }
    }
}

/// Decides, entry by entry of a sorted internal-key stream, which versions are invisible to
/// every reader and can be dropped (invariant I6).
pub(crate) struct VersionFilter {
    read_points: ReadPoints,
    smallest_snapshot: u64,
    bottommost: bool,
    current_user_key: Vec<u8>,
    has_current_user_key: bool,
    last_sequence_for_key: u64,
    /// Whether the last entry of the current key was a merge operand: the entries beneath it
    /// are its base, not shadowed by it (I43).
    last_was_merge: bool,
    /// Range tombstones that may cover the input's entries (I39), if any.
    tombstones: Option<Arc<FragmentedTombstones>>,
    /// The oldest tombstone covering the last entry `should_drop` kept, if one does.
    last_kept_covering: Option<u64>,
    /// The oldest tombstone covering an entry noted with `note_kept` since the last
    /// `take_applied_through` (I40).
    oldest_kept_covering: Option<u64>,
    /// Entries expiring at or before this time have expired for every reader (I42); 0 when
    /// nothing is taken as expired.
    expiry_horizon_us: u64,
}

impl VersionFilter {
    pub(crate) fn new(read_points: ReadPoints, bottommost: bool) -> VersionFilter {
        VersionFilter {
            smallest_snapshot: read_points.smallest(),
            expiry_horizon_us: read_points.expiry_horizon_us(),
            read_points,
            bottommost,
            current_user_key: Vec::new(),
            has_current_user_key: false,
            last_sequence_for_key: u64::MAX,
            last_was_merge: false,
            tombstones: None,
            last_kept_covering: None,
            oldest_kept_covering: None,
        }
    }

    /// True when the entry of `kind` with `value` has an expiry at or before the horizon: it
    /// is written out as a delete at its sequence number, which every reader sees it as.
    pub(crate) fn has_expired(&self, kind: ValueKind, value: &[u8]) -> bool {
        kind == ValueKind::PutWithExpiry
            && crate::ttl::split_expiring(value)
                .is_some_and(|(expires_at_us, _)| crate::ttl::is_expired(expires_at_us, self.expiry_horizon_us))
    }

    /// Also drops entries these range tombstones cover for every reader.
    pub(crate) fn with_range_tombstones(mut self, tombstones: Option<Arc<FragmentedTombstones>>) -> VersionFilter {
        self.tombstones = tombstones.filter(|tombstones| !tombstones.is_empty());
        self
    }

    /// True when some range tombstone of the filter holds `user_key`, whatever its sequence.
    /// Such keys keep their sequence numbers (see `zero_sequence_at_bottom`).
    pub(crate) fn under_range_tombstone(&self, user_key: &[u8]) -> bool {
        self.tombstones.as_ref().is_some_and(|tombstones| tombstones.fragment_at(user_key).is_some())
    }

    /// Counts the entry `should_drop` last kept as written into the output table being built:
    /// a covered one lowers the table's mark (I40). Called once the entry's table is known
    /// (after a compaction's split decision), so that the mark of each table counts its own
    /// entries.
    pub(crate) fn note_kept(&mut self) {
        if let Some(covering) = self.last_kept_covering.take() {
            self.oldest_kept_covering = Some(self.oldest_kept_covering.map_or(covering, |oldest| oldest.min(covering)));
        }
    }

    /// The mark of the output table whose entries were noted since the last call
    /// (`FileMetadata::range_tombstones_applied_through`, I40): the filter's tombstones were
    /// applied to its entries, except that entries kept though covered (for a reader between,
    /// I39) make it claim nothing from the oldest tombstone covering one of them on.
    pub(crate) fn take_applied_through(&mut self) -> u64 {
        let applied = self.tombstones.as_ref().map_or(0, |tombstones| tombstones.max_sequence());
        match self.oldest_kept_covering.take() {
            Some(covering) => applied.min(covering - 1),
            None => applied,
        }
    }

    /// The oldest range tombstone that covers the entry (`user_key`, `sequence`), if any.
    fn oldest_covering(&self, user_key: &[u8], sequence: u64) -> Option<u64> {
        self.tombstones.as_ref()?.fragment_at(user_key)?.oldest_covering_above(sequence)
    }

    /// True when the entry with `internal_key` can be dropped.
    /// `value` is the entry's value (for its expiry).
    pub(crate) fn should_drop(&mut self, internal_key: &[u8], value: &[u8], file: &Path) -> Result<bool> {
        let parsed = parse_internal_key(internal_key)
            .ok_or_else(|| Error::corruption(file, 0, "malformed internal key in compaction input"))?;
        if !self.has_current_user_key || parsed.user_key != self.current_user_key.as_slice() {
            self.current_user_key.clear();
            self.current_user_key.extend_from_slice(parsed.user_key);
            self.has_current_user_key = true;
            self.last_sequence_for_key = u64::MAX;
            self.last_was_merge = false;
        }
        let newer = self.last_sequence_for_key;
        let covering = self.oldest_covering(parsed.user_key, parsed.sequence);
        // I43: a merge operand does not shadow what lies beneath it, which it applies to.
        let shadowed = newer != u64::MAX && !self.last_was_merge;
        // A single delete must outlive the newer versions that shadow it until it has met its
        // put, unless nothing older lies below this output: those newer versions may be a put
        // and its own single delete, which a later compaction drops as a pair without leaving a
        // tombstone, and the older put would then be read again (I41). Found by the metamorphic
        // test, seed 787899: put, single delete, put, a snapshot, single delete; a compaction
        // that kept the last two for the snapshot dropped the first single delete as shadowed,
        // and once the snapshot was gone the last pair went and the first put came back.
        let guards_older_put = parsed.kind == ValueKind::SingleDelete && !self.bottommost;
        let drop = if shadowed && !guards_older_put && !self.read_points.any_between(parsed.sequence, newer) {
            // Every reader reads below this version or at or above the next newer one, so none
            // sees this one (a long-running transaction's snapshot keeps only the versions it
            // and the readers after it need, not every version written since it began).
            true
        } else if self.bottommost
            && parsed.sequence <= self.smallest_snapshot
            && (parsed.kind.is_deletion() || self.has_expired(parsed.kind, value))
        {
            // A delete at the bottom that every reader sees: nothing older survives it (the
            // older versions are shadowed by it, with no reader between), so it can go too.
            // An operand above it then applies to nothing, as it did to the delete.
            self.last_was_merge = false;
            true
        } else {
            // I39: a covered entry goes when no reader reads between it and the tombstone:
            // every reader at or above the entry then also sees the tombstone.
            covering.is_some_and(|covering| !self.read_points.any_between(parsed.sequence, covering))
        };
        self.last_kept_covering = if drop { None } else { covering };
        self.last_sequence_for_key = parsed.sequence;
        if !drop {
            // A dropped operand applies to nothing any reader sees: what shadowed it shadows
            // the entries beneath it too (no read point lies between them and it either).
            self.last_was_merge = parsed.kind == ValueKind::Merge;
        }
        Ok(drop)
    }
}

/// `compact_range` calls in progress, and which of them were cancelled.
#[derive(Default)]
pub(crate) struct ManualCompactions {
    next_id: u64,
    /// Every manual compaction with an id below this one is cancelled.
    cancelled_below: u64,
}

impl ManualCompactions {
    fn is_cancelled(&self, id: u64) -> bool {
        id < self.cancelled_below
    }
}

/// The picker's view of a column family's options.
pub(crate) fn picker_options(options: &ColumnFamilyOptions) -> PickerOptions {
    PickerOptions {
        level0_compaction_trigger_files: options.level0_compaction_trigger_files,
        level_size_ratio: options.level_size_ratio,
        base_level_size_bytes: options.effective_base_level_size_bytes(),
        target_file_size_bytes: options.target_file_size_bytes,
        max_compaction_bytes: options.target_file_size_bytes.saturating_mul(25),
        tombstone_density_ratio: if options.tombstone_compaction_ratio > 0.0 {
            options.tombstone_compaction_ratio
        } else {
            f64::INFINITY
        },
        tombstone_min_entries: options.tombstone_compaction_min_entries,
        priority: options.compaction_priority,
    }
}

/// Level targets, scores and pending bytes of a column family, for stats.
pub(crate) struct LevelReport {
    pub(crate) base_level: usize,
    pub(crate) target_bytes: [u64; NUM_LEVELS],
    pub(crate) scores: [f64; NUM_LEVELS],
    pub(crate) pending_compaction_bytes: u64,
}

pub(crate) fn level_report(version: &Version, options: &ColumnFamilyOptions) -> LevelReport {
    let picker_options = picker_options(options);
    let targets = picker::level_targets(version, &picker_options);
    LevelReport {
        base_level: targets.base_level,
        target_bytes: targets.target_bytes,
        scores: picker::level_scores(version, &picker_options, &targets),
        pending_compaction_bytes: picker::pending_compaction_bytes(version, &picker_options, &targets),
    }
}

/// One compaction to run: the plan and what running it needs.
struct Job {
    column_family: u32,
    plan: CompactionPlan,
    options: Arc<ColumnFamilyOptions>,
    /// The `compact_range` call this job belongs to, if any.
    manual_id: Option<u64>,
    /// The version's range tombstones when the job was picked (I39). Tombstones flushed later
    /// are newer than every input entry, and none of these leaves the version while the
    /// inputs, which hold what it covers, are still in it.
    range_tombstones: Option<Arc<FragmentedTombstones>>,
}

/// The range tombstones of `version`, for a job's filter.
fn job_tombstones(version: &Version) -> Option<Arc<FragmentedTombstones>> {
    (!version.range_tombstones.is_empty()).then(|| Arc::clone(version.range_tombstones.fragmented()))
}

/// The running compactions of `column_family`, as the picker sees them.
pub(crate) fn running_of(state: &DbState, column_family: u32) -> Vec<RunningCompaction> {
    state
        .running_compactions
        .iter()
        .filter(|running| running.column_family == column_family)
        .map(|running| running.job.clone())
        .collect()
}

/// Records `plan` as running; done under the state mutex in the same critical section that
/// picked it, so the next pick sees it (I23).
fn register(state: &mut DbState, column_family: u32, plan: &CompactionPlan) {
    state.running_compactions.push(RunningJob { column_family, job: RunningCompaction::from_plan(plan) });
}

fn unregister(state: &mut DbState, column_family: u32, plan: &CompactionPlan) {
    let first = plan.file_numbers().next();
    if let Some(index) = state.running_compactions.iter().position(|running| {
        running.column_family == column_family && running.job.file_numbers.first() == first.as_ref()
    }) {
        state.running_compactions.remove(index);
    }
}

/// How often an idle compaction thread looks for tables whose entries have expired since.
const EXPIRY_RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The most urgent automatic job of any column family, or `None`.
fn pick_job(state: &DbState, smallest_snapshot: u64, expiry_horizon_us: u64) -> Option<Job> {
    // Every column family proposes the job it would start now, with the score of the level it
    // is for (counting only files no running job holds); the highest score goes first, the
    // lower id on a tie.
    let mut best: Option<(f64, Job)> = None;
    for (&id, family) in &state.column_families {
        let options = family.shared.options();
        let version = state.versions.current(id);
        let running = running_of(state, id);
        let picker_options = picker_options(&options);
        let picked = picker::pick_with_score(&version, &picker_options, &running, &family.compact_pointers)
            .or_else(|| {
                // Nothing is due by size or tombstones: compact level 0 if seeks paid for it.
                if !family.shared.read_charges.is_due() {
                    return None;
                }
                picker::pick_level0_for_reads(&version, &picker_options, &running).map(|plan| (0.0, plan))
            })
            .or_else(|| {
                // Nothing is due by size or tombstones: move live values out of blob files
                // that are mostly garbage.
                crate::compaction::blob_gc::pick_blob_garbage(&version, &running, options.blob_garbage_collection_ratio)
                    .map(|plan| (0.0, plan))
            })
            .or_else(|| {
                // Nor blob garbage: drop what range deletes cover.
                crate::compaction::range_delete::pick_range_deleted(&version, &running, smallest_snapshot)
                    .map(|plan| (0.0, plan))
            })
            .or_else(|| {
                // Nor range deletes: drop what has expired.
                crate::compaction::expiry::pick_expired(&version, &running, expiry_horizon_us).map(|plan| (0.0, plan))
            });
        let Some((score, plan)) = picked else {
            continue;
        };
        if plan.reason == CompactionReason::TombstoneDensity
            && plan.output_level == plan.level
            && plan.inputs.iter().any(|file| file.meta.largest_sequence > smallest_snapshot)
        {
            // A rewrite in place drops only tombstones every reader is past; with an older
            // snapshot alive it would keep them and be picked again forever.
            continue;
        }
        let better = best.as_ref().is_none_or(|(best_score, best_job)| {
            score > *best_score || (score == *best_score && id < best_job.column_family)
        });
        if better {
            let range_tombstones = job_tombstones(&version);
            best = Some((score, Job { column_family: id, plan, options, manual_id: None, range_tombstones }));
        }
    }
    best.map(|(_, job)| job)
}

/// Starts the read charges of the job's column family again when the job takes level 0: they
/// were charged against files that are going away.
fn restart_read_charges(state: &DbState, job: &Job) {
    if job.plan.level == 0 {
        if let Some(family) = state.column_families.get(&job.column_family) {
            family.shared.read_charges.reset();
        }
    }
}

/// Background thread body: runs compactions while any level of any column family is due.
pub(crate) fn compaction_loop(inner: Arc<DbInner>) {
    loop {
        let job = {
            let mut state = inner.state.lock();
            loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if state.background_error.is_none() {
                    let smallest_snapshot = inner.snapshots.smallest_snapshot(&inner.visible_sequence);
                    let expiry_horizon_us = inner.snapshots.expiry_horizon_us();
                    if let Some(job) = pick_job(&state, smallest_snapshot, expiry_horizon_us) {
                        register(&mut state, job.column_family, &job.plan);
                        restart_read_charges(&state, &job);
                        break job;
                    }
                }
                // Entries expire with time, not with an event: look again now and then.
                inner.work_available.wait_for(&mut state, EXPIRY_RECHECK_INTERVAL);
            }
        };
        let result = run_job(&inner, &job);
        let mut state = inner.state.lock();
        unregister(&mut state, job.column_family, &job.plan);
        // Seeks charged during the job counted files that are gone now.
        restart_read_charges(&state, &job);
        // The plan holds the input files; they are obsolete now, and dropping the last handle
        // deletes them. Drop it before the mutex goes, so that whoever sees the job gone (such
        // as `wait_for_background_work`) also sees its inputs gone from the disk.
        drop(job);
        match result {
            Ok(()) | Err(Error::Closed(_)) | Err(Error::Cancelled(_)) => {}
            Err(error) => inner.set_background_error(&mut state, error),
        }
        inner.background_done.notify_all();
        inner.work_available.notify_all();
    }
}

/// Runs one job and installs its result. On error, outputs are removed only when no manifest
/// update was attempted (see the module doc).
fn run_job(inner: &Arc<DbInner>, job: &Job) -> Result<()> {
    let plan = &job.plan;
    if plan.is_trivial_move() {
        let mut state = inner.state.lock();
        if !state.column_families.contains_key(&job.column_family) {
            return Ok(());
        }
        let mut edit = VersionEdit { column_family: job.column_family, ..VersionEdit::default() };
        for file in &plan.inputs {
            edit.deleted_files.push((plan.level as u32, file.number()));
            edit.new_files.push((plan.output_level as u32, file.meta.clone()));
        }
        state.versions.log_and_apply(edit)?;
        if let Some(family) = state.column_families.get_mut(&job.column_family) {
            if let Some(pointer) = family.compact_pointers.get_mut(plan.level) {
                *pointer = plan.largest_input_user_key().to_vec();
            }
        }
        state.stats.trivial_moves += plan.inputs.len() as u64;
        inner.install_read_view(&state, job.column_family);
        return Ok(());
    }
    let read_points = inner.snapshots.read_points(&inner.visible_sequence);
    let boundaries = picker::subcompaction_boundaries(
        plan,
        &picker_options(&job.options),
        inner.options.effective_max_subcompactions(),
    );
    let mut outputs = JobOutputs::default();
    let written = if boundaries.is_empty() {
        write_outputs(inner, job, None, None, &read_points, &mut outputs)
    } else {
        write_subcompactions(inner, job, &boundaries, &read_points, &mut outputs)
    }
    .and_then(|()| inner.file_system.sync_dir(&inner.dir));
    let remove_outputs = |outputs: &JobOutputs| {
        for meta in &outputs.tables {
            let _ = inner.file_system.remove(&table_path(&inner.dir, meta.number));
        }
        for &number in &outputs.created_blob_files {
            let _ = inner.file_system.remove(&blob_path(&inner.dir, number));
        }
    };
    if let Err(error) = written {
        remove_outputs(&outputs);
        return Err(error);
    }
    let mut state = inner.state.lock();
    if !state.column_families.contains_key(&job.column_family) {
        // Dropped meanwhile: nothing references the outputs.
        remove_outputs(&outputs);
        return Ok(());
    }
    // From here on the outputs stay even if the manifest update fails: its record may have
    // reached the disk. If it did not, the next open deletes them as orphans.
    let mut edit = VersionEdit { column_family: job.column_family, ..VersionEdit::default() };
    for file in &plan.inputs {
        edit.deleted_files.push((plan.level as u32, file.number()));
    }
    for file in &plan.output_inputs {
        edit.deleted_files.push((plan.output_level as u32, file.number()));
    }
    let bytes_written: u64 = outputs.tables.iter().map(|m| m.file_size_bytes).sum::<u64>()
        + outputs.blob_files.iter().map(|blob| blob.file_size_bytes).sum::<u64>();
    for meta in &outputs.tables {
        edit.new_files.push((plan.output_level as u32, meta.clone()));
    }
    edit.new_blob_files = outputs.blob_files.clone();
    edit.blob_garbage =
        outputs.garbage.iter().map(|(&number, &(count, bytes))| BlobGarbage { number, count, bytes }).collect();
    state.versions.log_and_apply(edit)?;
    let stats = &mut state.stats;
    stats.compaction_count += 1;
    let input_bytes: u64 = plan.inputs.iter().map(|f| f.meta.file_size_bytes).sum();
    stats.level_bytes_read[plan.level] += input_bytes;
    stats.level_bytes_brought_in[plan.output_level] += input_bytes;
    stats.level_jobs[plan.output_level] += 1;
    stats.level_bytes_read[plan.output_level] += plan.output_inputs.iter().map(|f| f.meta.file_size_bytes).sum::<u64>();
    stats.level_bytes_written[plan.output_level] += bytes_written;
    if !boundaries.is_empty() {
        stats.subcompactions += 1;
    }
    match plan.reason {
        CompactionReason::TombstoneDensity => stats.tombstone_compactions += 1,
        CompactionReason::RangeDelete => stats.range_delete_compactions += 1,
        CompactionReason::Expiry => stats.expiry_compactions += 1,
        CompactionReason::Manual => stats.manual_compactions += 1,
        CompactionReason::Level0Reads => stats.read_triggered_compactions += 1,
        _ => {}
    }
    if let Some(family) = state.column_families.get_mut(&job.column_family) {
        if let Some(pointer) = family.compact_pointers.get_mut(plan.level) {
            *pointer = plan.largest_input_user_key().to_vec();
        }
    }
    inner.install_read_view(&state, job.column_family);
    Ok(())
}

/// A range of user keys, `[lower, upper)`, unbounded where `None`.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Merges the key ranges between `boundaries` in parallel threads. Outputs of every range are
/// collected (also on error, so the caller can remove them).
fn write_subcompactions(
    inner: &Arc<DbInner>,
    job: &Job,
    boundaries: &[Vec<u8>],
    read_points: &ReadPoints,
    outputs: &mut JobOutputs,
) -> Result<()> {
    let mut ranges: Vec<KeyRange<'_>> = Vec::with_capacity(boundaries.len() + 1);
    let mut lower: Option<&[u8]> = None;
    for boundary in boundaries {
        ranges.push((lower, Some(boundary.as_slice())));
        lower = Some(boundary.as_slice());
    }
    ranges.push((lower, None));
    let results: Vec<(Result<()>, JobOutputs)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(lower, upper)| {
                scope.spawn(move || {
                    let mut range_outputs = JobOutputs::default();
                    let result = write_outputs(inner, job, lower, upper, read_points, &mut range_outputs);
                    (result, range_outputs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    (Err(Error::invalid("internal error: a subcompaction thread panicked")), JobOutputs::default())
                })
            })
            .collect()
    });
    let mut first_error = None;
    for (result, range_outputs) in results {
        outputs.absorb(range_outputs);
        if let Err(error) = result {
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Why a running job must stop now, if it must.
fn interruption(inner: &DbInner, job: &Job) -> Option<Error> {
    if inner.shutting_down.load(Ordering::Acquire) {
        return Some(Error::Closed("compaction stopped by close".to_string()));
    }
    if let Some(id) = job.manual_id {
        if inner.manual_compactions.lock().is_cancelled(id) {
            return Some(Error::Cancelled("manual compaction cancelled".to_string()));
        }
    }
    None
}

/// Decides where a compaction ends one output file and starts the next: at the target size, or
/// from half of it on where a file of the level below the output begins (so outputs line up
/// with that level, and moving one down later rewrites no partly overlapped neighbour), and
/// only between user keys, so that all versions of a key stay in one file (I4).
struct OutputSplitter<'a> {
    /// Ascending start keys of the files below the output level (`grandparent_starts`).
    starts: &'a [Vec<u8>],
    /// The column family's order of user keys.
    comparator: &'a KeyComparator,
    /// The first of `starts` above the last user key seen.
    next_start: usize,
    target_file_size_bytes: u64,
}

impl<'a> OutputSplitter<'a> {
    /// A splitter for a range beginning at `lower` (starts at or below it were passed before).
    fn new(
        starts: &'a [Vec<u8>],
        comparator: &'a KeyComparator,
        lower: Option<&[u8]>,
        target_file_size_bytes: u64,
    ) -> OutputSplitter<'a> {
        let next_start =
            lower.map_or(0, |lower| starts.partition_point(|start| comparator.compare_user_keys(start, lower).is_le()));
        OutputSplitter { starts, comparator, next_start, target_file_size_bytes }
    }

    /// Whether the next start not yet passed is at or before `user_key`.
    fn next_start_reached(&self, user_key: &[u8]) -> bool {
        self.starts.get(self.next_start).is_some_and(|start| self.comparator.compare_user_keys(start, user_key).is_le())
    }

    /// Whether the file being written (of `size` bytes so far; `None` when there is none) ends
    /// before `user_key`, which follows `last_user_key`. Call once per entry, in order.
    fn should_split(&mut self, user_key: &[u8], last_user_key: &[u8], size: Option<u64>) -> bool {
        let crosses_start = self.next_start_reached(user_key);
        while self.next_start_reached(user_key) {
            self.next_start += 1;
        }
        let Some(size) = size else {
            return false;
        };
        user_key != last_user_key
            && (size >= self.target_file_size_bytes || (crosses_start && size >= self.target_file_size_bytes / 2))
    }
}

/// Merges the job's inputs with user keys in `[lower, upper)` (unbounded when `None`) into new
/// tables of the output level. Output metadata is pushed to `outputs` as files are finished, so
/// the caller can clean up after an error.
fn write_outputs(
    inner: &Arc<DbInner>,
    job: &Job,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    read_points: &ReadPoints,
    outputs: &mut JobOutputs,
) -> Result<()> {
    let blob_files = Arc::clone(&inner.state.lock().versions.current(job.column_family).blob_files);
    let relocate = files_to_relocate(
        &blob_files,
        job.options.blob_garbage_collection_ratio,
        job.options.blob_garbage_collection_age_cutoff,
    );
    let new_file_number = || inner.state.lock().versions.new_file_number();
    let mut blobs = BlobRelocation::new(
        &inner.dir,
        inner.file_system.as_ref(),
        job.column_family,
        blob_files,
        relocate,
        job.options.min_blob_size_bytes,
        job.options.blob_file_size_bytes,
        job.options.blob_compression,
        &new_file_number,
    );
    let result = merge_into_outputs(inner, job, lower, upper, read_points, &mut blobs, &mut outputs.tables)
        .and_then(|()| blobs.finish());
    if result.is_err() {
        blobs.remove_created();
    }
    outputs.blob_files.append(&mut blobs.finished);
    outputs.created_blob_files.append(&mut blobs.created);
    for (number, (count, bytes)) in std::mem::take(&mut blobs.garbage) {
        let entry = outputs.garbage.entry(number).or_insert((0, 0));
        entry.0 += count;
        entry.1 += bytes;
    }
    result
}

/// The merge of [`write_outputs`]: output tables are pushed to `outputs` as they are finished,
/// blob references go through `blobs`.
fn merge_into_outputs(
    inner: &Arc<DbInner>,
    job: &Job,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    read_points: &ReadPoints,
    blobs: &mut BlobRelocation<'_>,
    outputs: &mut Vec<FileMetadata>,
) -> Result<()> {
    let plan = &job.plan;
    let smallest_snapshot = read_points.smallest();
    let read_options = BlockReadOptions { verify_checksums: true, fill_cache: false };
    let comparator = &plan.comparator;
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for file in plan.inputs.iter().chain(plan.output_inputs.iter()) {
        // Not `table_of`: inputs are about to leave the version, and pinning them would hold
        // pin slots that the tables reads keep using could have.
        let table = inner.table_cache.get(file.number(), file.meta.file_size_bytes, comparator)?;
        children.push(Box::new(table.iter(read_options)));
    }
    // Single deletes meet their puts here (`iterator/single_delete.rs`).
    let pairs = SingleDeletePairs::new(MergingIterator::new(children, comparator.clone()), read_points.clone());
    // Merge operands that no reader sees apart fold together here (`iterator/merge_fold.rs`).
    let mut merged = MergeFold::new(
        pairs,
        read_points.clone(),
        job.options.merge_operator.clone(),
        job.range_tombstones.clone(),
        plan.bottommost,
    );
    match lower {
        Some(lower) => merged.seek(&lookup_key(lower, MAX_SEQUENCE_NUMBER)),
        None => merged.seek_to_first(),
    }
    let mut filter =
        VersionFilter::new(read_points.clone(), plan.bottommost).with_range_tombstones(job.range_tombstones.clone());
    let table_options = TableOptions::for_level(&job.options, plan.output_level, plan.bottommost);
    let target_file_size_bytes = job.options.target_file_size_bytes;
    let mut builder: Option<(u64, TableBuilder)> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut zeroed_key: Vec<u8> = Vec::new();
    let mut rewritten_value: Vec<u8> = Vec::new();
    // The blob files the table being written references.
    let mut references = std::collections::BTreeSet::new();
    let mut steps: u64 = 0;
    let mut splitter = OutputSplitter::new(&plan.grandparent_starts, comparator, lower, target_file_size_bytes);
    let input_path = inner.dir.join("<compaction input>");
    while merged.valid() {
        note_dropped_pairs(&mut merged, blobs)?;
        steps += 1;
        if steps.is_multiple_of(1024) {
            if let Some(error) = interruption(inner, job) {
                if let Some((number, _)) = builder.take() {
                    let _ = inner.file_system.remove(&table_path(&inner.dir, number));
                }
                return Err(error);
            }
        }
        let key = merged.key();
        let current_user_key = user_key(key);
        if upper.is_some_and(|upper| comparator.compare_user_keys(current_user_key, upper).is_ge()) {
            break;
        }
        let parsed = parse_internal_key(key)
            .ok_or_else(|| Error::corruption(&input_path, 0, "malformed internal key in compaction input"))?;
        if filter.should_drop(key, merged.value(), &input_path)? {
            blobs.dropped(&parsed, merged.value())?;
            merged.next();
            continue;
        }
        let size = builder.as_ref().map(|(_, b)| b.estimated_file_size_bytes());
        let split = splitter.should_split(current_user_key, &last_user_key, size);
        if split {
            if let Some((number, finished)) = builder.take() {
                let properties = finished.finish()?;
                let mut meta = meta_from_properties(number, &properties);
                meta.blob_references = std::mem::take(&mut references).into_iter().collect();
                meta.range_tombstones_applied_through = filter.take_applied_through();
                outputs.push(meta);
            }
        }
        if builder.is_none() {
            let number = inner.state.lock().versions.new_file_number();
            let path = table_path(&inner.dir, number);
            let file = inner.file_system.create(&path)?;
            let new_builder =
                TableBuilder::new(file, path, table_options.clone()).with_memory_charge(inner.memory.builder_charge());
            builder = Some((number, new_builder));
        }
        filter.note_kept();
        if let Some((_, active)) = builder.as_mut() {
            let kept = blobs.kept(&parsed, merged.value(), &mut rewritten_value)?;
            note_reference(&mut references, &kept);
            let (kind, value) = match kept {
                // I42: an entry expired for every reader is written as the delete it reads as.
                KeptEntry::Unchanged { .. } if filter.has_expired(parsed.kind, merged.value()) => {
                    (ValueKind::Delete, &[][..])
                }
                KeptEntry::Unchanged { .. } => (parsed.kind, merged.value()),
                KeptEntry::Rewritten { kind, .. } => (kind, rewritten_value.as_slice()),
            };
            // A key under a range tombstone keeps its sequence number: it decides whether the
            // tombstone covers it (I38).
            let zeroed = kind != ValueKind::Delete
                && zero_sequence_at_bottom(key, plan.bottommost, smallest_snapshot)
                && !filter.under_range_tombstone(current_user_key);
            if zeroed || kind != parsed.kind {
                // Zeroed: every reader sees this version and nothing older of the key
                // survives, so its sequence number carries no information: zeros compress,
                // unique sequence numbers do not (8 bytes per entry, a tenth of a small
                // record). A moved blob value may change the entry's kind as well.
                let sequence = if zeroed { 0 } else { parsed.sequence };
                zeroed_key.clear();
                append_internal_key(&mut zeroed_key, current_user_key, sequence, kind);
                active.add(&zeroed_key, value)?;
            } else {
                active.add(key, value)?;
            }
        }
        last_user_key.clear();
        last_user_key.extend_from_slice(current_user_key);
        merged.next();
    }
    merged.status()?;
    note_dropped_pairs(&mut merged, blobs)?;
    if merged.folded_operands() > 0 {
        inner.state.lock().stats.merge_operands_folded += merged.folded_operands();
    }
    if let Some((number, finished)) = builder.take() {
        if finished.num_entries() > 0 {
            let properties = finished.finish()?;
            let mut meta = meta_from_properties(number, &properties);
            meta.blob_references = references.into_iter().collect();
            meta.range_tombstones_applied_through = filter.take_applied_through();
            outputs.push(meta);
        } else {
            drop(finished);
            let _ = inner.file_system.remove(&table_path(&inner.dir, number));
        }
    }
    Ok(())
}

/// Counts the blob references of the puts the single-delete pairing dropped since the last call
/// as garbage of their blob files.
fn note_dropped_pairs(merged: &mut MergeFold<MergingIterator>, blobs: &mut BlobRelocation<'_>) -> Result<()> {
    for (dropped_key, reference) in merged.take_dropped_blob_references() {
        if let Some(parsed) = parse_internal_key(&dropped_key) {
            blobs.dropped(&parsed, &reference)?;
        }
    }
    Ok(())
}

/// Waits until no flush or compaction is pending or running.
pub(crate) fn wait_until_idle(inner: &Arc<DbInner>) -> Result<()> {
    let mut state = inner.state.lock();
    loop {
        inner.check_not_stopped(&state)?;
        // A memtable that reads paid to flush is pending work too, so tests of read-triggered
        // flushes can wait for one without depending on timing.
        let idle = state.column_families.values().all(|family| family.immutables.is_empty() && !family.flush_running)
            && super::flush::pick_read_flush(&state).is_none()
            && state.running_compactions.is_empty()
            && pick_job(
                &state,
                inner.snapshots.smallest_snapshot(&inner.visible_sequence),
                inner.snapshots.expiry_horizon_us(),
            )
            .is_none();
        if idle {
            return Ok(());
        }
        inner.work_available.notify_all();
        inner.background_done.wait_for(&mut state, Duration::from_millis(100));
    }
}

/// Stops every manual compaction in progress at its next check.
pub(crate) fn cancel_manual_compactions(inner: &DbInner) {
    let mut manual = inner.manual_compactions.lock();
    manual.cancelled_below = manual.next_id;
}

/// Compacts the user keys in `[start, end]` of a column family from level 0 down: at each
/// level, jobs of files overlapping the range (up to the picker's size limit each) until the
/// range is done, then the last level in place where its files still hold deletions. Jobs run
/// in the calling thread, registered like background jobs so that they never collide.
pub(crate) fn compact_range(
    inner: &Arc<DbInner>,
    column_family: &ColumnFamily,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    let manual_id = {
        let mut manual = inner.manual_compactions.lock();
        manual.next_id += 1;
        manual.next_id - 1
    };
    let id = column_family.id();
    for level in 0..NUM_LEVELS {
        // Where the next job of this level starts: `start` at first, then just after the
        // largest key of the job before.
        let mut from: Bound<Vec<u8>> = start.map_or(Bound::Unbounded, |start| Bound::Included(start.to_vec()));
        loop {
            let job = {
                let mut state = inner.state.lock();
                loop {
                    inner.check_not_stopped(&state)?;
                    if inner.manual_compactions.lock().is_cancelled(manual_id) {
                        return Err(Error::Cancelled("manual compaction cancelled".to_string()));
                    }
                    let Some(family) = state.column_families.get(&id) else {
                        return Err(Error::invalid(format!("column family {:?} was dropped", column_family.name())));
                    };
                    let options = family.shared.options();
                    let version = state.versions.current(id);
                    let from = from.as_ref().map(Vec::as_slice);
                    if level == NUM_LEVELS - 1
                        && !has_deletions_in_range(&version, level, from, end, inner.snapshots.expiry_horizon_us())
                    {
                        break None;
                    }
                    let running = running_of(&state, id);
                    match picker::pick_manual(&version, &picker_options(&options), &running, level, from, end) {
                        Ok(Some(plan)) => {
                            register(&mut state, id, &plan);
                            let range_tombstones = job_tombstones(&version);
                            break Some(Job {
                                column_family: id,
                                plan,
                                options,
                                manual_id: Some(manual_id),
                                range_tombstones,
                            });
                        }
                        Ok(None) => break None,
                        // Files of the range are in a running job: wait for it.
                        Err(_) => {
                            inner.background_done.wait_for(&mut state, Duration::from_millis(20));
                        }
                    }
                }
            };
            let Some(job) = job else { break };
            let result = run_job(inner, &job);
            let mut state = inner.state.lock();
            unregister(&mut state, id, &job.plan);
            inner.background_done.notify_all();
            inner.work_available.notify_all();
            drop(state);
            result?;
            // Go on after the job's last key, until the range is covered.
            let resume = job.plan.manual_resume_key();
            if end.is_some_and(|end| job.plan.comparator.compare_user_keys(&resume, end).is_ge()) {
                break;
            }
            from = Bound::Excluded(resume);
        }
    }
    Ok(())
}

/// True when a table of `level` in the range holds deletes, entries a range tombstone covers,
/// entries expired at `expiry_horizon_us` or merge operands: rewriting it in place may drop or
/// fold something.
fn has_deletions_in_range(
    version: &Version,
    level: usize,
    start: Bound<&[u8]>,
    end: Option<&[u8]>,
    expiry_horizon_us: u64,
) -> bool {
    version.levels[level].iter().any(|file| {
        (file.meta.num_deletions > 0
            || version.range_tombstones_hiding_data_in(file).next().is_some()
            || file.meta.expiry.estimated_expired(expiry_horizon_us) > 0
            || file.meta.num_merge_operands > 0)
            && picker::file_in_manual_range(file, start, end, &version.comparator)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn outputs_end_at_the_target_size_or_from_half_of_it_where_a_file_below_begins() {
        let starts = vec![b"d".to_vec(), b"h".to_vec(), b"p".to_vec()];
        let bytewise = KeyComparator::Bytewise;
        let mut splitter = OutputSplitter::new(&starts, &bytewise, None, 100);
        // No file yet: never a split, but passing "d" is remembered.
        assert!(!splitter.should_split(b"e", b"", None));
        assert!(!splitter.should_split(b"g", b"e", Some(70)));
        // Crossing "h" below half the target: no split.
        assert!(!splitter.should_split(b"i", b"g", Some(40)));
        // The target size splits anywhere between user keys, but not inside one.
        assert!(splitter.should_split(b"j", b"i", Some(100)));
        assert!(!splitter.should_split(b"j", b"j", Some(150)));
        // From half the target on, crossing a start splits; "p" itself counts as crossed.
        assert!(!splitter.should_split(b"k", b"j", Some(60)));
        assert!(splitter.should_split(b"p", b"k", Some(60)));
        assert!(!splitter.should_split(b"q", b"p", Some(60)));
        // A range that begins past "h" only looks at later starts.
        let mut ranged = OutputSplitter::new(&starts, &bytewise, Some(b"h"), 100);
        assert!(!ranged.should_split(b"i", b"", Some(60)));
        assert!(ranged.should_split(b"r", b"i", Some(60)));
    }

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
