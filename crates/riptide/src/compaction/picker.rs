//! The compaction picker: decides which files a compaction job merges, into which level, and
//! why. It holds the level-size targets, the level scores, the choice of the next job (automatic
//! or manual), the split points of a job into sub-compactions and the estimate of the work still
//! pending. It reads no file and writes nothing; running a [`CompactionPlan`] is the executor's
//! business.
//!
//! Level sizes are dynamic: the last level's target is its actual size (at least
//! `base_level_size_bytes`), each level above it gets a tenth (`1 / level_size_ratio`) of the
//! target below, and the walk up stops at the first level whose target is at most
//! `base_level_size_bytes`. That level is the base level, the one level 0 compacts into; the
//! levels between 1 and the base level are unused (target 0). So a database whose last level
//! holds at most `base_level_size_bytes` compacts level 0 straight into the last level, and the
//! base level moves up one level each time the last level grows by another factor of
//! `level_size_ratio`. See [`level_targets`].
//!
//! Every key range (of files, jobs, pointers and manual requests) is compared in the column
//! family's order, which the version carries ([`Version::comparator`]); a plan keeps that order
//! for the questions asked of it later.
//!
//! Concurrency contract: every function is pure and takes no lock. The engine calls them under
//! its state mutex, passes the current version together with the jobs that are running
//! ([`RunningCompaction`], built with [`RunningCompaction::from_plan`]), and registers a returned
//! plan as running before it lets the mutex go, so that two jobs picked in a row never collide.
//!
//! Invariants of every plan returned: its files are live files of the version it was picked
//! from and none of them is an input of a running job; `output_inputs` holds every file of the
//! output level overlapping the inputs (so outputs never overlap files left in place, I4); a
//! level-0 job takes a set of level-0 files that no other level-0 file overlaps (so level-0 data
//! leaves in sequence order, I5) and only one level-0 job runs at a time; data moves down only
//! past levels that neither hold nor are receiving keys of its range (so for every user key
//! shallower levels hold newer versions, I17); and no two running jobs write overlapping
//! user-key ranges into the same level (I23, checked by `RunningJobs::admits`).

use std::collections::HashSet;
use std::fmt;
use std::ops::Bound;

use crate::comparator::KeyComparator;
use crate::options::CompactionPriority;
// Table files are shared through the shim's `Arc`, as versions hold them (see `version::tree`).
use crate::sync::Arc;
use crate::version::tree::{TableFile, Version, NUM_LEVELS};

/// The deepest level. It has no size target of its own to exceed: its target follows its size.
pub(super) const LAST_LEVEL: usize = NUM_LEVELS - 1;

/// The score of a level above the base level that still holds files (left by a database that
/// was larger, or by an older layout). It outranks every ordinary size score so that such levels
/// drain downward first; level 0 cannot compact past them while they hold its keys.
const UNUSED_LEVEL_SCORE: f64 = 100.0;

/// The tuning the picker reads. Out-of-range values are clamped where they would make no sense
/// (a ratio below 2, a trigger or base size of 0) rather than rejected: validating options is
/// the engine's job, and the picker must never divide by zero.
#[derive(Clone, Debug)]
pub(crate) struct PickerOptions {
    /// Level 0's file-count score is its number of files divided by this.
    pub(crate) level0_compaction_trigger_files: usize,
    /// The ratio between the targets of adjacent levels (at least 2, usually 10).
    pub(crate) level_size_ratio: u64,
    /// The smallest target of the base level (RocksDB's `max_bytes_for_level_base`); also level
    /// 0's byte budget.
    pub(crate) base_level_size_bytes: u64,
    /// The size at which the executor closes an output file; jobs under twice this size are not
    /// split into sub-compactions.
    pub(crate) target_file_size_bytes: u64,
    /// The cap on a job's input bytes (input and output-level files) when the picker adds files
    /// to a job beyond the one it chose, and for manual jobs of levels 1 and deeper. Level-0
    /// jobs take every level-0 file regardless.
    pub(crate) max_compaction_bytes: u64,
    /// A file of level 1 or deeper whose deletions make at least this share of its entries is a
    /// tombstone-density candidate (values above 1 disable the rule) ...
    pub(crate) tombstone_density_ratio: f64,
    /// ... provided it holds at least this many entries.
    pub(crate) tombstone_min_entries: u64,
    /// How a size job of level 1 or deeper chooses its file.
    pub(crate) priority: CompactionPriority,
}

impl PickerOptions {
    fn trigger_files(&self) -> usize {
        self.level0_compaction_trigger_files.max(1)
    }

    fn size_ratio(&self) -> u64 {
        self.level_size_ratio.max(2)
    }

    fn base_size_bytes(&self) -> u64 {
        self.base_level_size_bytes.max(1)
    }
}

/// Why a job was picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactionReason {
    /// Level 0 reached its file-count trigger (or its byte budget).
    Level0FileCount,
    /// Seeks paid for compacting level 0 below its trigger (read-triggered compaction, see
    /// `db::read_charges`).
    Level0Reads,
    /// A level of 1 or deeper is over its target, or is unused but still holds files.
    LevelSize,
    /// A file holds mostly tombstones; compacting it down (or rewriting it at the bottom) lets
    /// the executor drop them.
    TombstoneDensity,
    /// Asked for by the user ([`pick_manual`]).
    Manual,
    /// A file references a blob file whose garbage passed the column family's
    /// `blob_garbage_collection_ratio`; rewriting it moves the live values out of that blob
    /// file (`compaction/blob_gc.rs`).
    BlobGarbage,
    /// A file holds entries a range tombstone covers; rewriting it drops them
    /// (`compaction/range_delete.rs`).
    RangeDelete,
    /// Most of a file's entries have expired; rewriting it drops them (`compaction/expiry.rs`).
    Expiry,
}

/// One compaction job: which files to merge, and where the result goes.
#[derive(Clone)]
pub(crate) struct CompactionPlan {
    /// The level the job takes its files from.
    pub(crate) level: usize,
    /// The level the outputs go to: `level + 1` normally, the base level (or an unused level
    /// above it that holds keys of the range) for level 0, and `level` itself for a rewrite in
    /// place of a last-level file.
    pub(crate) output_level: usize,
    /// Files of `level`. For level 0 they are in the version's order, newest first.
    pub(crate) inputs: Vec<Arc<TableFile>>,
    /// The files of `output_level` that overlap the inputs' user-key range, sorted by key; empty
    /// when `output_level == level`.
    pub(crate) output_inputs: Vec<Arc<TableFile>>,
    /// True when no level deeper than `output_level` holds a file overlapping the job's
    /// user-key range, so the executor may drop tombstones and zero sequence numbers (I6).
    pub(crate) bottommost: bool,
    /// Why the job was picked.
    pub(crate) reason: CompactionReason,
    /// The smallest user keys of the files of `output_level + 1` that start inside the job's
    /// range, ascending in `comparator`'s order. The executor prefers to end an output file
    /// where one of them begins, so that the output files line up with the level below and a
    /// later job moving one of them down does not rewrite a partly overlapped neighbour there.
    pub(crate) grandparent_starts: Vec<Vec<u8>>,
    /// The order of the column family's keys (the version's).
    pub(crate) comparator: KeyComparator,
}

impl CompactionPlan {
    /// True when the job can be done by moving its files to the output level in the manifest
    /// alone: nothing in the output level overlaps them, they do not overlap each other (level-0
    /// files may; sequential inserts give disjoint ones, and moving them saves a rewrite), and
    /// the job was not asked to rewrite them (manual and tombstone jobs exist to drop entries,
    /// which a move would not do).
    pub(crate) fn is_trivial_move(&self) -> bool {
        if !self.output_inputs.is_empty()
            || self.output_level == self.level
            || matches!(
                self.reason,
                CompactionReason::Manual
                    | CompactionReason::TombstoneDensity
                    | CompactionReason::BlobGarbage
                    | CompactionReason::RangeDelete
                    | CompactionReason::Expiry
            )
        {
            return false;
        }
        let comparator = &self.comparator;
        let mut ranges: Vec<(&[u8], &[u8])> =
            self.inputs.iter().map(|file| (file.smallest_user_key(), file.largest_user_key())).collect();
        ranges.sort_unstable_by(|a, b| {
            comparator.compare_user_keys(a.0, b.0).then_with(|| comparator.compare_user_keys(a.1, b.1))
        });
        !ranges.is_empty() && ranges.windows(2).all(|pair| comparator.compare_user_keys(pair[0].1, pair[1].0).is_lt())
    }

    /// The bytes of all files the job reads.
    pub(crate) fn input_bytes(&self) -> u64 {
        total_bytes_of(self.all_files())
    }

    /// The smallest and largest user keys (both inclusive) over the files of both levels; the
    /// executor's outputs stay inside this range.
    pub(crate) fn user_key_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (smallest, largest) = user_key_range_of(self.all_files(), &self.comparator).unwrap_or_default();
        (smallest.to_vec(), largest.to_vec())
    }

    /// The numbers of all files the job reads (and removes from the version).
    pub(crate) fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.all_files().map(|file| file.number())
    }

    /// The largest user key of this job's input-level files. A manual compaction that
    /// [`pick_manual`] cut short continues after it, passing it as an excluded `start`, so that
    /// a file rewritten in place at the last level is not picked again. (The start is excluded
    /// rather than moved to the next key, because only the bytewise order has a "next key".)
    pub(crate) fn manual_resume_key(&self) -> Vec<u8> {
        self.largest_input_user_key().to_vec()
    }

    /// The largest user key of the input-level files (empty when there are none), which the
    /// level's compaction pointer moves to.
    pub(crate) fn largest_input_user_key(&self) -> &[u8] {
        let comparator = &self.comparator;
        let mut largest_keys = self.inputs.iter().map(|file| file.largest_user_key());
        let first = largest_keys.next().unwrap_or_default();
        largest_keys.fold(first, |largest, key| comparator.max_user_key(largest, key))
    }

    fn all_files(&self) -> impl Iterator<Item = &Arc<TableFile>> + '_ {
        self.inputs.iter().chain(&self.output_inputs)
    }
}

impl fmt::Debug for CompactionPlan {
    /// Prints file numbers rather than files, which is what a log line needs.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers = |files: &[Arc<TableFile>]| files.iter().map(|file| file.number()).collect::<Vec<_>>();
        formatter
            .debug_struct("CompactionPlan")
            .field("level", &self.level)
            .field("output_level", &self.output_level)
            .field("inputs", &numbers(&self.inputs))
            .field("output_inputs", &numbers(&self.output_inputs))
            .field("bottommost", &self.bottommost)
            .field("reason", &self.reason)
            .finish()
    }
}

/// A job that is running, so that parallel jobs never touch the same files or write
/// overlapping ranges into the same level. Its key range is in the order of its column family,
/// whose jobs alone it is compared with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunningCompaction {
    /// Every file the job reads.
    pub(crate) file_numbers: Vec<u64>,
    /// The level the job writes into.
    pub(crate) output_level: usize,
    /// The smallest user key the job may write.
    pub(crate) smallest_user_key: Vec<u8>,
    /// The largest user key the job may write.
    pub(crate) largest_user_key: Vec<u8>,
    /// The level the job reads its inputs from.
    pub(crate) level: usize,
}

impl RunningCompaction {
    /// The record the engine keeps while `plan` runs.
    pub(crate) fn from_plan(plan: &CompactionPlan) -> RunningCompaction {
        let (smallest_user_key, largest_user_key) = plan.user_key_range();
        RunningCompaction {
            file_numbers: plan.file_numbers().collect(),
            output_level: plan.output_level,
            smallest_user_key,
            largest_user_key,
            level: plan.level,
        }
    }

    fn overlaps(&self, smallest: &[u8], largest: &[u8], comparator: &KeyComparator) -> bool {
        comparator.compare_user_keys(&self.largest_user_key, smallest).is_ge()
            && comparator.compare_user_keys(&self.smallest_user_key, largest).is_le()
    }
}

/// A manual compaction could not start because files of its range are being compacted (or a
/// level-0 job is running, for a level-0 request). The caller waits for a job to finish and asks
/// again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ManualConflict;

/// The size target of every level, and the base level that level 0 compacts into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelTargets {
    /// The level level-0 files compact into, between 1 and the last level.
    pub(crate) base_level: usize,
    /// Per level, its target in bytes. Entry 0 is unused (0); levels 1 to `base_level - 1` are
    /// unused and have target 0; the last level's target is at least its size.
    pub(crate) target_bytes: [u64; NUM_LEVELS],
}

/// Computes the dynamic level targets. The rule (that of RocksDB's dynamic level sizes): while
/// the last level holds at most `base_level_size_bytes`, it is the base level and its target is
/// `base_level_size_bytes`. Beyond that its target is its size, and walking up, each level's
/// target is the one below divided by `level_size_ratio`; the first level whose target is at
/// most `base_level_size_bytes` is the base level (or level 1, if the walk gets there first).
/// The base level's target therefore lies in `(base / ratio, base]`, so a level-0 job, which
/// carries about `base` bytes, merges with at most about as many bytes of the base level: the
/// cost of moving data out of level 0 stays near 2, however large the database.
pub(crate) fn level_targets(version: &Version, options: &PickerOptions) -> LevelTargets {
    let base_size_bytes = options.base_size_bytes();
    let ratio = options.size_ratio();
    let mut target_bytes = [0; NUM_LEVELS];
    let last_bytes = version.level_bytes(LAST_LEVEL);
    target_bytes[LAST_LEVEL] = last_bytes.max(base_size_bytes);
    let mut base_level = LAST_LEVEL;
    let mut level_bytes = target_bytes[LAST_LEVEL];
    while base_level > 1 && level_bytes > base_size_bytes {
        level_bytes /= ratio;
        base_level -= 1;
        target_bytes[base_level] = level_bytes.max(1);
    }
    LevelTargets { base_level, target_bytes }
}

/// Scores every level; a level with a score of 1 or more needs compaction. Level 0: the larger
/// of its file count over `level0_compaction_trigger_files` and its bytes over
/// `base_level_size_bytes`. Levels 1 to the last but one: bytes over target, or
/// a fixed high score for an unused level that still holds files. The last level: 0.
pub(crate) fn level_scores(version: &Version, options: &PickerOptions, targets: &LevelTargets) -> [f64; NUM_LEVELS] {
    scores_of_idle_files(version, options, targets, &RunningJobs::new(&[], &version.comparator))
}

/// Chooses the most urgent job that can run next to `running`, or `None` when no level needs
/// compaction (or all that do are busy) and no file is dense with tombstones.
///
/// Due levels are tried in decreasing score order, where scores count only files no running job
/// holds (so a level that running jobs will bring under target does not start more jobs). Level 0
/// takes every level-0 file. A level of 1 or deeper takes the first file that can run in the order
/// of `options.priority`: with `MinOverlappingRatio`, the file whose overlapping bytes in the next
/// level are the smallest share of its own bytes (ties, and `RoundRobin`, go in key order starting
/// after `compact_pointers[level]`, the largest user key of the level's last job, wrapping around;
/// empty before the first job, which in an order where the empty key is not the smallest only moves
/// where the round starts). The chosen file is then joined by the neighbours that fit in the same
/// output-level files, within `max_compaction_bytes`.
///
/// When nothing is due by size, a file of level 1 or deeper dense with tombstones is compacted
/// down, or rewritten in place at the last level (densest first). Whether the rewrite drops the
/// tombstones depends on the snapshots, which the picker does not see: the engine should not
/// pick again while an old snapshot keeps a rewritten file as dense as it was.
///
/// Returns the plan with the score it was picked for: its level's score over the files no
/// running job holds (at least 1.0), or 0.0 for a tombstone-density job. The engine ranks column
/// families by it, so that it starts the job that is most due among those that can start now,
/// not the one of the family whose largest score is owed to files already being compacted.
pub(crate) fn pick_with_score(
    version: &Version,
    options: &PickerOptions,
    running: &[RunningCompaction],
    compact_pointers: &[Vec<u8>],
) -> Option<(f64, CompactionPlan)> {
    let targets = level_targets(version, options);
    let running = RunningJobs::new(running, &version.comparator);
    let scores = scores_of_idle_files(version, options, &targets, &running);
    let mut due_levels: Vec<usize> = (0..NUM_LEVELS).filter(|&level| scores[level] >= 1.0).collect();
    // The sort is stable, so equal scores keep the shallower level first.
    due_levels.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    for level in due_levels {
        let plan = if level == 0 {
            pick_level0(version, &targets, &running)
        } else {
            let pointer = compact_pointers.get(level).map_or(&[][..], Vec::as_slice);
            pick_sorted_level(version, options, &running, level, pointer)
        };
        if let Some(plan) = plan {
            return Some((scores[level], plan));
        }
    }
    pick_tombstone_dense(version, options, &running).map(|plan| (0.0, plan))
}

/// Chooses a manual job over the files of `level` that overlap the range from `start` to `end`
/// (user keys; `start` included, excluded or unbounded, `end` included or unbounded when
/// `None`). Level 0 takes those files and every level-0 file that
/// overlaps them in turn, into the base level (or a level above it holding keys of the range,
/// see [`pick_with_score`]); levels 1 to the last but one go to the next level; the last level is rewritten
/// in place. For levels 1 and deeper the job takes the files in key order while its input bytes
/// (with the output-level files they overlap) stay within `max_compaction_bytes`, and at least
/// one file; the caller continues after [`CompactionPlan::manual_resume_key`] (excluded) until
/// this returns `Ok(None)` or the resume key reaches `end`.
///
/// Returns `Ok(None)` when no file of `level` overlaps the range (or `level` does not exist),
/// and `Err(ManualConflict)` when the job would touch files or ranges of a running job.
pub(crate) fn pick_manual(
    version: &Version,
    options: &PickerOptions,
    running: &[RunningCompaction],
    level: usize,
    start: Bound<&[u8]>,
    end: Option<&[u8]>,
) -> Result<Option<CompactionPlan>, ManualConflict> {
    if level >= NUM_LEVELS {
        return Ok(None);
    }
    let comparator = &version.comparator;
    let running = RunningJobs::new(running, comparator);
    let in_range = |file: &&Arc<TableFile>| file_in_manual_range(file, start, end, comparator);
    let plan = if level == 0 {
        let seeds: Vec<Arc<TableFile>> = version.levels[0].iter().filter(in_range).cloned().collect();
        let inputs = close_over_level0_overlaps(version, seeds);
        let Some((smallest, largest)) = user_key_range_of(inputs.iter(), comparator) else {
            return Ok(None);
        };
        let output_level = level0_output_level(version, level_targets(version, options).base_level, smallest, largest);
        make_plan(version, 0, output_level, inputs, CompactionReason::Manual)
    } else {
        let candidates: Vec<&Arc<TableFile>> = version.levels[level].iter().filter(in_range).collect();
        let output_level = if level == LAST_LEVEL { level } else { level + 1 };
        let count = manual_prefix_len(version, options, level, output_level, &candidates);
        let inputs = candidates[..count].iter().map(|file| Arc::clone(file)).collect();
        make_plan(version, level, output_level, inputs, CompactionReason::Manual)
    };
    match plan {
        None => Ok(None),
        Some(plan) if running.admits(&plan) => Ok(Some(plan)),
        Some(_) => Err(ManualConflict),
    }
}

/// True when `file` holds user keys in the range from `start` to `end` (see [`pick_manual`]).
pub(crate) fn file_in_manual_range(
    file: &TableFile,
    start: Bound<&[u8]>,
    end: Option<&[u8]>,
    comparator: &KeyComparator,
) -> bool {
    let after_start = match start {
        Bound::Included(start) => comparator.compare_user_keys(file.largest_user_key(), start).is_ge(),
        Bound::Excluded(start) => comparator.compare_user_keys(file.largest_user_key(), start).is_gt(),
        Bound::Unbounded => true,
    };
    after_start && end.is_none_or(|end| comparator.compare_user_keys(file.smallest_user_key(), end).is_le())
}

/// Splits a job into at most `max_subcompactions` key ranges of roughly equal input bytes, for
/// executors that run them in parallel. Returns the boundaries, sorted and strictly inside the
/// job's user-key range; subrange `i` holds the user keys from boundary `i - 1` (inclusive) up
/// to boundary `i` (exclusive), the first starting at the job's smallest key and the last
/// ending at its largest, so no user key is split. Empty means "do not split": when asked for fewer than 2
/// ranges, or when the job reads less than `2 * target_file_size_bytes`. Every range should
/// fill at least one output file, so there are at most `input bytes / target_file_size_bytes`
/// ranges.
///
/// The candidate boundaries are the largest user keys of the job's files (both levels). The
/// bytes up to a candidate are estimated as the sizes of the files that end at or before it (the
/// keys' distribution inside a file is unknown); for each ideal split point the candidate whose
/// estimate is nearest is taken, skipping candidates that would add an empty range.
pub(crate) fn subcompaction_boundaries(
    plan: &CompactionPlan,
    options: &PickerOptions,
    max_subcompactions: usize,
) -> Vec<Vec<u8>> {
    let total_bytes = plan.input_bytes();
    let file_bytes = options.target_file_size_bytes.max(1);
    if max_subcompactions < 2 || total_bytes < file_bytes.saturating_mul(2) {
        return Vec::new();
    }
    let ranges = max_subcompactions.min(usize::try_from(total_bytes / file_bytes).unwrap_or(usize::MAX));
    let comparator = &plan.comparator;
    let (smallest, largest) = plan.user_key_range();
    let mut candidates: Vec<&[u8]> = plan
        .all_files()
        .map(|file| file.largest_user_key())
        .filter(|key| {
            comparator.compare_user_keys(key, &smallest).is_gt() && comparator.compare_user_keys(key, &largest).is_lt()
        })
        .collect();
    candidates.sort_unstable_by(|a, b| comparator.compare_user_keys(a, b));
    // Equal keys are byte-identical (the comparator's contract), so adjacent duplicates go.
    candidates.dedup();
    let bytes_up_to: Vec<u64> = candidates
        .iter()
        .map(|candidate| {
            total_bytes_of(
                plan.all_files()
                    .filter(|file| comparator.compare_user_keys(file.largest_user_key(), candidate).is_le()),
            )
        })
        .collect();
    let mut boundaries = Vec::new();
    let mut next_candidate = 0;
    let mut bytes_before = 0;
    for range in 1..ranges {
        // u128 keeps `total * range` exact for any file sizes.
        let ideal_bytes = u128::from(total_bytes) * range as u128 / ranges as u128;
        let nearest = (next_candidate..candidates.len())
            .min_by_key(|&index| u128::from(bytes_up_to[index]).abs_diff(ideal_bytes));
        let Some(nearest) = nearest else {
            break;
        };
        if bytes_up_to[nearest] > bytes_before {
            boundaries.push(candidates[nearest].to_vec());
            bytes_before = bytes_up_to[nearest];
            next_candidate = nearest + 1;
        }
    }
    boundaries
}

/// Estimates the bytes compaction must still rewrite to bring every level under its target
/// (the idea of RocksDB's estimated pending compaction bytes), for write throttling. Level 0,
/// when its score is 1 or more, contributes its bytes (read and written once) and hands them to
/// the base level. Walking down from level 1, each level's size plus what the levels above hand
/// it is compared with its target (0 for unused levels); the excess is read and written once and
/// meets about `level_size_ratio` times as many bytes of the next level, so it adds
/// `excess * (1 + ratio)` and is handed on. The last level has no target to exceed. The
/// estimate ignores overlap: skewed key ranges can make real jobs smaller or larger.
pub(crate) fn pending_compaction_bytes(version: &Version, options: &PickerOptions, targets: &LevelTargets) -> u64 {
    let cost_per_excess_byte = options.size_ratio().saturating_add(1);
    let level0_bytes = version.level_bytes(0);
    let level0_due = level_scores(version, options, targets)[0] >= 1.0;
    let mut pending_bytes = if level0_due { level0_bytes } else { 0 };
    let mut incoming_bytes = 0u64;
    for level in 1..LAST_LEVEL {
        let mut size_bytes = version.level_bytes(level).saturating_add(incoming_bytes);
        if level0_due && level == targets.base_level {
            size_bytes = size_bytes.saturating_add(level0_bytes);
        }
        let excess_bytes = size_bytes.saturating_sub(targets.target_bytes[level]);
        pending_bytes = pending_bytes.saturating_add(excess_bytes.saturating_mul(cost_per_excess_byte));
        incoming_bytes = excess_bytes;
    }
    pending_bytes
}

/// The running jobs of one column family, with their files in a set for quick lookups.
pub(crate) struct RunningJobs<'a> {
    jobs: &'a [RunningCompaction],
    busy_file_numbers: HashSet<u64>,
    /// The column family's order, in which the jobs' key ranges are compared.
    comparator: &'a KeyComparator,
}

impl<'a> RunningJobs<'a> {
    pub(crate) fn new(jobs: &'a [RunningCompaction], comparator: &'a KeyComparator) -> RunningJobs<'a> {
        let busy_file_numbers = jobs.iter().flat_map(|job| job.file_numbers.iter().copied()).collect();
        RunningJobs { jobs, busy_file_numbers, comparator }
    }

    pub(crate) fn is_busy(&self, file: &TableFile) -> bool {
        self.busy_file_numbers.contains(&file.number())
    }

    /// True when `plan` can run next to every running job: it shares no file with them, it is
    /// not a second level-0 job, and no running job writes keys of its range into its output
    /// level or into a level it moves data past (level 0's output may skip unused levels, which
    /// is right only while no job is filling them with keys of the range, I17). Invariant I23.
    pub(super) fn admits(&self, plan: &CompactionPlan) -> bool {
        if plan.file_numbers().any(|number| self.busy_file_numbers.contains(&number)) {
            return false;
        }
        if plan.level == 0 && self.jobs.iter().any(|job| job.level == 0) {
            return false;
        }
        let (smallest, largest) = plan.user_key_range();
        self.jobs.iter().all(|job| {
            let writes_in_the_way = job.output_level == plan.output_level
                || (plan.level < job.output_level && job.output_level < plan.output_level);
            !(writes_in_the_way && job.overlaps(&smallest, &largest, self.comparator))
        })
    }
}

fn scores_of_idle_files(
    version: &Version,
    options: &PickerOptions,
    targets: &LevelTargets,
    running: &RunningJobs<'_>,
) -> [f64; NUM_LEVELS] {
    let idle_files = |level: usize| version.levels[level].iter().filter(|file| !running.is_busy(file));
    // Bytes waiting above each level to be compacted down into it or through it: all of level
    // 0 and, for each sorted level, its excess over target (all of it for an unused level).
    let mut incoming_bytes = [0u64; NUM_LEVELS];
    let mut waiting = version.level_bytes(0);
    for (level, incoming) in incoming_bytes.iter_mut().enumerate().skip(1) {
        *incoming = waiting;
        waiting = waiting.saturating_add(version.level_bytes(level).saturating_sub(targets.target_bytes[level]));
    }
    std::array::from_fn(|level| match level {
        0 => {
            let count_score = idle_files(0).count() as f64 / options.trigger_files() as f64;
            let size_score = total_bytes_of(idle_files(0)) as f64 / options.base_size_bytes() as f64;
            count_score.max(size_score)
        }
        LAST_LEVEL => 0.0,
        _ if targets.target_bytes[level] > 0 => {
            // A level over target yields to the data above it: it is due only once it exceeds
            // its target by more than what is waiting to come down. Moving data down later,
            // from a fuller level, rewrites fewer bytes of the level below per byte moved (the
            // overlap ratio falls as the level grows), and the level stays bounded by its
            // target plus the data above it.
            let bytes = total_bytes_of(idle_files(level)) as f64;
            let target = targets.target_bytes[level] as f64;
            if bytes <= target {
                bytes / target
            } else {
                bytes / (target + incoming_bytes[level] as f64)
            }
        }
        _ if idle_files(level).next().is_some() => UNUSED_LEVEL_SCORE,
        _ => 0.0,
    })
}

/// The level-0 job: every level-0 file, since they overlap each other and must leave in
/// sequence order. Only one level-0 job runs at a time.
fn pick_level0(version: &Version, targets: &LevelTargets, running: &RunningJobs<'_>) -> Option<CompactionPlan> {
    if running.jobs.iter().any(|job| job.level == 0) {
        return None;
    }
    let inputs = version.levels[0].clone();
    let output_level = {
        let (smallest, largest) = user_key_range_of(inputs.iter(), &version.comparator)?;
        level0_output_level(version, targets.base_level, smallest, largest)
    };
    let plan = make_plan(version, 0, output_level, inputs, CompactionReason::Level0FileCount)?;
    running.admits(&plan).then_some(plan)
}

/// The level-0 job of read-triggered compaction: every level-0 file into the base level, as
/// [`pick_with_score`] would take it at the file-count trigger. `None` when level 0 is empty or
/// a running job holds level 0 or the output range.
pub(crate) fn pick_level0_for_reads(
    version: &Version,
    options: &PickerOptions,
    running: &[RunningCompaction],
) -> Option<CompactionPlan> {
    if version.levels[0].is_empty() {
        return None;
    }
    let targets = level_targets(version, options);
    let running = RunningJobs::new(running, &version.comparator);
    let mut plan = pick_level0(version, &targets, &running)?;
    plan.reason = CompactionReason::Level0Reads;
    Some(plan)
}

/// Where level-0 data of `[smallest, largest]` goes: the base level, unless an unused level
/// above it still holds keys of the range. Passing that level would put newer versions below
/// older ones (I17), so the data stops there and drains down with that level.
fn level0_output_level(version: &Version, base_level: usize, smallest: &[u8], largest: &[u8]) -> usize {
    (1..base_level).find(|&level| version.level_overlaps(level, smallest, largest)).unwrap_or(base_level)
}

/// A size job of a sorted level (1 or deeper): the first file that can run, in the order of
/// [`sorted_level_candidates`].
fn pick_sorted_level(
    version: &Version,
    options: &PickerOptions,
    running: &RunningJobs<'_>,
    level: usize,
    pointer: &[u8],
) -> Option<CompactionPlan> {
    let files = &version.levels[level];
    for index in sorted_level_candidates(version, options.priority, level, pointer) {
        let file = &files[index];
        if running.is_busy(file) {
            continue;
        }
        let Some(plan) = make_plan(version, level, level + 1, vec![Arc::clone(file)], CompactionReason::LevelSize)
        else {
            continue;
        };
        if running.admits(&plan) {
            return Some(expand_inputs(version, options, running, plan));
        }
    }
    None
}

/// The indexes of `level`'s files in the order a size job tries them. Round robin: key order
/// starting with the first file after `pointer`, wrapping around. Min overlapping ratio: by the
/// bytes of next-level files each overlaps divided by its own bytes, ascending; the sort is
/// stable, so equal ratios keep the round-robin order and no range is starved among equals.
fn sorted_level_candidates(
    version: &Version,
    priority: CompactionPriority,
    level: usize,
    pointer: &[u8],
) -> Vec<usize> {
    let files = &version.levels[level];
    // Files of a sorted level do not overlap (I4), so their largest keys ascend too.
    let comparator = &version.comparator;
    let start = files.partition_point(|file| comparator.compare_user_keys(file.largest_user_key(), pointer).is_le());
    let mut order: Vec<usize> = (start..files.len()).chain(0..start).collect();
    if priority == CompactionPriority::RoundRobin || level == LAST_LEVEL {
        return order;
    }
    let overlap = overlapping_bytes_below(version, level);
    let ratio = |index: usize| overlap[index] as f64 / files[index].meta.file_size_bytes.max(1) as f64;
    order.sort_by(|&a, &b| ratio(a).total_cmp(&ratio(b)));
    order
}

/// For each file of sorted `level` (1 to the last but one), the total bytes of the files of
/// `level + 1` whose user-key ranges overlap it. Both levels are sorted and free of overlaps
/// within themselves (I4), so one sweep finds them; a next-level file that straddles two
/// neighbouring files counts for both, as it would be rewritten by either job.
fn overlapping_bytes_below(version: &Version, level: usize) -> Vec<u64> {
    let next = &version.levels[level + 1];
    let comparator = &version.comparator;
    let mut first_candidate = 0;
    version.levels[level]
        .iter()
        .map(|file| {
            while first_candidate < next.len()
                && comparator
                    .compare_user_keys(next[first_candidate].largest_user_key(), file.smallest_user_key())
                    .is_lt()
            {
                first_candidate += 1;
            }
            next[first_candidate..]
                .iter()
                .take_while(|below| {
                    comparator.compare_user_keys(below.smallest_user_key(), file.largest_user_key()).is_le()
                })
                .map(|below| below.meta.file_size_bytes)
                .fold(0, u64::saturating_add)
        })
        .collect()
}

/// Adds to a sorted-level job the input-level files that lie inside its range when that brings
/// in no more output-level files (their bytes must be rewritten anyway, so the neighbours ride
/// along cheaply), provided the job stays within `max_compaction_bytes` and can still run.
fn expand_inputs(
    version: &Version,
    options: &PickerOptions,
    running: &RunningJobs<'_>,
    plan: CompactionPlan,
) -> CompactionPlan {
    if plan.output_inputs.is_empty() {
        // The inputs' range already is the job's range, and no other file of the level is in it.
        return plan;
    }
    let (smallest, largest) = plan.user_key_range();
    let expanded = version.overlapping_files(plan.level, &smallest, &largest);
    if expanded.len() <= plan.inputs.len() {
        return plan;
    }
    match make_plan(version, plan.level, plan.output_level, expanded, plan.reason) {
        Some(candidate)
            if candidate.output_inputs.len() == plan.output_inputs.len()
                && candidate.input_bytes() <= options.max_compaction_bytes
                && running.admits(&candidate) =>
        {
            candidate
        }
        _ => plan,
    }
}

/// The densest tombstone-heavy file of level 1 or deeper that can run, compacted into the next
/// level, or rewritten in place at the last level.
fn pick_tombstone_dense(
    version: &Version,
    options: &PickerOptions,
    running: &RunningJobs<'_>,
) -> Option<CompactionPlan> {
    // A file with no entries has no density; requiring one entry also keeps the division safe.
    let min_entries = options.tombstone_min_entries.max(1);
    let density = |file: &TableFile| file.meta.num_deletions as f64 / file.meta.num_entries as f64;
    let mut candidates: Vec<(usize, &Arc<TableFile>)> = (1..NUM_LEVELS)
        .flat_map(|level| version.levels[level].iter().map(move |file| (level, file)))
        .filter(|(_, file)| {
            file.meta.num_entries >= min_entries
                && density(file) >= options.tombstone_density_ratio
                && !running.is_busy(file)
        })
        .collect();
    candidates.sort_by(|(_, a), (_, b)| density(b).total_cmp(&density(a)));
    candidates.into_iter().find_map(|(level, file)| {
        let output_level = if level == LAST_LEVEL { level } else { level + 1 };
        let plan = make_plan(version, level, output_level, vec![Arc::clone(file)], CompactionReason::TombstoneDensity)?;
        running.admits(&plan).then_some(plan)
    })
}

/// How many of `candidates` (consecutive files of a sorted level, in key order) a manual job
/// takes: as many as keep the input bytes, with the output-level files they overlap, within
/// `max_compaction_bytes`, and at least one.
fn manual_prefix_len(
    version: &Version,
    options: &PickerOptions,
    level: usize,
    output_level: usize,
    candidates: &[&Arc<TableFile>],
) -> usize {
    let Some(first) = candidates.first() else {
        return 0;
    };
    let output_files = &version.levels[output_level];
    let comparator = &version.comparator;
    let mut input_bytes = 0u64;
    let mut count = 0;
    for file in candidates {
        input_bytes = input_bytes.saturating_add(file.meta.file_size_bytes);
        let overlap_bytes = if output_level == level {
            0
        } else {
            // Both levels are sorted and free of overlaps (I4), so the output files overlapping
            // the prefix form one run, found by binary search.
            let from = output_files.partition_point(|output| {
                comparator.compare_user_keys(output.largest_user_key(), first.smallest_user_key()).is_lt()
            });
            let to = output_files.partition_point(|output| {
                comparator.compare_user_keys(output.smallest_user_key(), file.largest_user_key()).is_le()
            });
            total_bytes_of(output_files[from..to.max(from)].iter())
        };
        if count > 0 && input_bytes.saturating_add(overlap_bytes) > options.max_compaction_bytes {
            break;
        }
        count += 1;
    }
    count
}

/// The level-0 files to compact with `seeds`: the seeds and every level-0 file that overlaps
/// the growing range, until none outside does. Leaving out an overlapping file would move newer
/// versions of its keys below it (I5, I17), whichever of the two is older. The result keeps the
/// version's newest-first order.
fn close_over_level0_overlaps(version: &Version, seeds: Vec<Arc<TableFile>>) -> Vec<Arc<TableFile>> {
    let mut chosen = seeds;
    loop {
        let Some((smallest, largest)) = user_key_range_of(chosen.iter(), &version.comparator) else {
            return chosen;
        };
        let grown = version.overlapping_files(0, smallest, largest);
        if grown.len() == chosen.len() {
            return grown;
        }
        chosen = grown;
    }
}

/// Builds a plan from its inputs: finds the output-level files they overlap and the bottommost
/// flag. `None` when `inputs` is empty.
pub(super) fn make_plan(
    version: &Version,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<TableFile>>,
    reason: CompactionReason,
) -> Option<CompactionPlan> {
    let comparator = &version.comparator;
    let (smallest, largest) = user_key_range_of(inputs.iter(), comparator)?;
    let output_inputs =
        if output_level == level { Vec::new() } else { version.overlapping_files(output_level, smallest, largest) };
    let (smallest, largest) = user_key_range_of(inputs.iter().chain(&output_inputs), comparator)?;
    let bottommost = (output_level + 1..NUM_LEVELS).all(|deeper| !version.level_overlaps(deeper, smallest, largest));
    let grandparent_starts = match version.levels.get(output_level + 1) {
        Some(grandparents) if output_level > level => grandparents
            .iter()
            .map(|file| file.smallest_user_key())
            .filter(|&start| {
                comparator.compare_user_keys(smallest, start).is_lt()
                    && comparator.compare_user_keys(start, largest).is_le()
            })
            .map(<[u8]>::to_vec)
            .collect(),
        _ => Vec::new(),
    };
    Some(CompactionPlan {
        level,
        output_level,
        inputs,
        output_inputs,
        bottommost,
        reason,
        grandparent_starts,
        comparator: comparator.clone(),
    })
}

/// The smallest and largest user keys over `files` in `comparator`'s order; `None` when there
/// are none.
fn user_key_range_of<'a>(
    files: impl Iterator<Item = &'a Arc<TableFile>>,
    comparator: &KeyComparator,
) -> Option<(&'a [u8], &'a [u8])> {
    files.fold(None, |range, file| {
        let (smallest, largest) = (file.smallest_user_key(), file.largest_user_key());
        Some(match range {
            None => (smallest, largest),
            Some((low, high)) => (comparator.min_user_key(low, smallest), comparator.max_user_key(high, largest)),
        })
    })
}

fn total_bytes_of<'a>(files: impl Iterator<Item = &'a Arc<TableFile>>) -> u64 {
    files.map(|file| file.meta.file_size_bytes).fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::db::table_cache::TableCache;
    use crate::fs::{FileSystem, MemFileSystem};
    use crate::key::{make_internal_key, ValueKind};
    use crate::version::edit::FileMetadata;
    use crate::version::tree::FileJanitor;

    /// The base level size of the test options.
    const BASE_BYTES: u64 = 1_000;

    fn options() -> PickerOptions {
        PickerOptions {
            level0_compaction_trigger_files: 4,
            level_size_ratio: 10,
            base_level_size_bytes: BASE_BYTES,
            target_file_size_bytes: 100,
            max_compaction_bytes: 10_000,
            tombstone_density_ratio: 0.5,
            tombstone_min_entries: 50,
            priority: CompactionPriority::MinOverlappingRatio,
        }
    }

    /// Builds versions from files described by their user-key ranges. The files are never marked
    /// obsolete, so dropping them deletes nothing.
    struct Tree {
        janitor: std::sync::Arc<FileJanitor>,
        levels: Vec<Vec<Arc<TableFile>>>,
        next_number: u64,
    }

    impl Tree {
        fn new() -> Tree {
            let file_system: std::sync::Arc<dyn FileSystem> = std::sync::Arc::new(MemFileSystem::new());
            let dir = PathBuf::from("/db");
            let table_cache = std::sync::Arc::new(TableCache::new(dir.clone(), file_system.clone(), None, 16));
            let janitor = std::sync::Arc::new(FileJanitor { dir, file_system, table_cache });
            Tree { janitor, levels: vec![Vec::new(); NUM_LEVELS], next_number: 1 }
        }

        /// A tree whose last level holds `last_level_bytes` in keys after every other test key.
        fn with_last_level_bytes(last_level_bytes: u64) -> Tree {
            let mut tree = Tree::new();
            tree.add(LAST_LEVEL, "zz0", "zz9", last_level_bytes);
            tree
        }

        /// Adds a file of user keys `smallest..=largest` and returns its number; later files are
        /// newer (larger numbers and sequences).
        fn add(&mut self, level: usize, smallest: &str, largest: &str, size_bytes: u64) -> u64 {
            self.add_with_entries(level, smallest, largest, size_bytes, 10, 0)
        }

        fn add_with_entries(
            &mut self,
            level: usize,
            smallest: &str,
            largest: &str,
            size_bytes: u64,
            num_entries: u64,
            num_deletions: u64,
        ) -> u64 {
            let number = self.next_number;
            self.next_number += 1;
            let meta = FileMetadata {
                number,
                file_size_bytes: size_bytes,
                smallest: make_internal_key(smallest.as_bytes(), number, ValueKind::Put),
                largest: make_internal_key(largest.as_bytes(), number, ValueKind::Put),
                smallest_sequence: number,
                largest_sequence: number,
                num_entries,
                num_deletions,
                blob_references: Vec::new(),
                range_tombstones_applied_through: 0,
                expiry: Default::default(),
                num_merge_operands: 0,
            };
            self.levels[level].push(Arc::new(TableFile::new(meta, std::sync::Arc::clone(&self.janitor))));
            number
        }

        fn version(&self) -> Version {
            Version::from_files(self.levels.clone(), KeyComparator::Bytewise)
        }
    }

    fn numbers(files: &[Arc<TableFile>]) -> Vec<u64> {
        files.iter().map(|file| file.number()).collect()
    }

    fn no_pointers() -> Vec<Vec<u8>> {
        vec![Vec::new(); NUM_LEVELS]
    }

    /// The plan of [`pick_with_score`], without its score.
    fn pick(
        version: &Version,
        options: &PickerOptions,
        running: &[RunningCompaction],
        compact_pointers: &[Vec<u8>],
    ) -> Option<CompactionPlan> {
        pick_with_score(version, options, running, compact_pointers).map(|(_, plan)| plan)
    }

    fn pick_plan(version: &Version, running: &[RunningCompaction]) -> CompactionPlan {
        pick(version, &options(), running, &no_pointers()).expect("a plan")
    }

    fn manual(
        version: &Version,
        options: &PickerOptions,
        running: &[RunningCompaction],
        level: usize,
        start: Option<&str>,
        end: Option<&str>,
    ) -> Result<Option<CompactionPlan>, ManualConflict> {
        let start = start.map_or(Bound::Unbounded, |start| Bound::Included(start.as_bytes()));
        pick_manual(version, options, running, level, start, end.map(str::as_bytes))
    }

    fn manual_plan(
        version: &Version,
        options: &PickerOptions,
        level: usize,
        start: Option<&str>,
        end: Option<&str>,
    ) -> CompactionPlan {
        manual(version, options, &[], level, start, end).expect("no conflict").expect("a plan")
    }

    #[test]
    fn an_empty_database_compacts_level0_into_the_last_level() {
        let targets = level_targets(&Version::empty(KeyComparator::Bytewise), &options());
        assert_eq!(targets.base_level, LAST_LEVEL);
        let mut expected = [0; NUM_LEVELS];
        expected[LAST_LEVEL] = BASE_BYTES;
        assert_eq!(targets.target_bytes, expected);
        assert_eq!(level_scores(&Version::empty(KeyComparator::Bytewise), &options(), &targets), [0.0; NUM_LEVELS]);
    }

    #[test]
    fn the_base_level_moves_up_one_level_per_ratio_of_growth() {
        let cases = [
            (BASE_BYTES / 2, 6),
            (BASE_BYTES, 6),
            (BASE_BYTES + 10, 5),
            (BASE_BYTES * 10, 5),
            (BASE_BYTES * 10 + 10, 4),
            (BASE_BYTES * 100, 4),
            (BASE_BYTES * 1_000, 3),
            (BASE_BYTES * 10_000_000, 1),
        ];
        for (last_level_bytes, expected_base_level) in cases {
            let version = Tree::with_last_level_bytes(last_level_bytes).version();
            let targets = level_targets(&version, &options());
            assert_eq!(targets.base_level, expected_base_level, "last level of {last_level_bytes} bytes");
            assert_eq!(targets.target_bytes[LAST_LEVEL], last_level_bytes.max(BASE_BYTES));
            assert!(targets.target_bytes[1..expected_base_level].iter().all(|&target| target == 0));
            for level in expected_base_level..LAST_LEVEL {
                assert_eq!(targets.target_bytes[level], targets.target_bytes[level + 1] / 10);
            }
            if expected_base_level > 1 && expected_base_level < LAST_LEVEL {
                // The base level's target lies in (base / ratio, base], give or take the
                // rounding of integer division.
                let base_target = targets.target_bytes[expected_base_level];
                assert!((BASE_BYTES / 10..=BASE_BYTES).contains(&base_target), "{base_target}");
            }
        }
    }

    #[test]
    fn disjoint_level0_files_move_without_a_rewrite() {
        let mut tree = Tree::new();
        tree.add(0, "a", "b", 10);
        tree.add(0, "c", "d", 10);
        tree.add(0, "e", "f", 10);
        tree.add(0, "g", "h", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!(plan.level, 0);
        assert!(plan.is_trivial_move(), "sequential level-0 files need no merge");
        tree.add(6, "c", "c", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert!(!plan.is_trivial_move(), "a base-level file overlaps");
    }

    #[test]
    fn an_unused_level_holding_files_drains_first() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        let unused = tree.add(2, "c", "d", 10);
        tree.add(4, "m", "n", BASE_BYTES * 5);
        let version = tree.version();
        let targets = level_targets(&version, &options());
        assert_eq!(targets.base_level, 4);
        let scores = level_scores(&version, &options(), &targets);
        assert_eq!(scores[2], UNUSED_LEVEL_SCORE);
        assert_eq!(scores[1], 0.0);
        assert_eq!(scores[3], 0.0);
        // Level 4 is five times its target, less the unused level's 10 bytes waiting above it.
        assert_eq!(scores[4], 5_000.0 / 1_010.0);
        let plan = pick_plan(&version, &[]);
        assert_eq!((plan.level, plan.output_level, plan.reason), (2, 3, CompactionReason::LevelSize));
        assert_eq!(numbers(&plan.inputs), vec![unused]);
        assert!(plan.is_trivial_move());
    }

    #[test]
    fn level0_stops_above_older_data_of_its_range() {
        let mut tree = Tree::new();
        let older = tree.add(3, "c", "d", 10);
        tree.add(0, "a", "b", 10);
        tree.add(0, "b", "c", 10);
        let plan = manual_plan(&tree.version(), &options(), 0, None, None);
        assert_eq!(plan.output_level, 3);
        assert_eq!(numbers(&plan.output_inputs), vec![older]);

        let mut tree = Tree::new();
        tree.add(3, "x", "y", 10);
        tree.add(0, "a", "b", 10);
        tree.add(0, "b", "c", 10);
        let plan = manual_plan(&tree.version(), &options(), 0, None, None);
        assert_eq!(plan.output_level, LAST_LEVEL);
    }

    #[test]
    fn level0_compacts_at_its_file_trigger_or_byte_budget() {
        let mut tree = Tree::new();
        let under_keys = tree.add(LAST_LEVEL, "c", "c", 10);
        tree.add(LAST_LEVEL, "x", "y", 10);
        let mut level0 = Vec::new();
        for _ in 0..3 {
            level0.push(tree.add(0, "a", "d", 10));
        }
        assert!(pick(&tree.version(), &options(), &[], &no_pointers()).is_none());
        level0.push(tree.add(0, "b", "e", 10));
        let version = tree.version();
        let targets = level_targets(&version, &options());
        assert_eq!(level_scores(&version, &options(), &targets)[0], 1.0);
        let plan = pick_plan(&version, &[]);
        assert_eq!((plan.level, plan.output_level, plan.reason), (0, LAST_LEVEL, CompactionReason::Level0FileCount));
        level0.reverse();
        assert_eq!(numbers(&plan.inputs), level0, "every level-0 file, newest first");
        assert_eq!(numbers(&plan.output_inputs), vec![under_keys]);
        assert!(plan.bottommost);
        assert!(!plan.is_trivial_move(), "overlapping level-0 files must be merged");

        let mut tree = Tree::new();
        tree.add(0, "a", "b", BASE_BYTES * 2);
        let version = tree.version();
        let targets = level_targets(&version, &options());
        assert_eq!(level_scores(&version, &options(), &targets)[0], 2.0);
        assert_eq!(pick_plan(&version, &[]).level, 0);
    }

    #[test]
    fn the_level_with_the_highest_score_goes_first() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", BASE_BYTES);
        tree.add(4, "c", "d", BASE_BYTES);
        for key in ["e", "f", "g"] {
            tree.add(5, key, key, BASE_BYTES * 10);
        }
        let version = tree.version();
        let scores = level_scores(&version, &options(), &level_targets(&version, &options()));
        // Level 5's score counts level 4's excess (1,000 bytes) as waiting to come down.
        assert_eq!((scores[4], scores[5]), (2.0, 30_000.0 / 11_000.0));
        assert_eq!(pick_plan(&version, &[]).level, 5);

        tree.add(4, "h", "i", BASE_BYTES * 2);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!((plan.level, plan.output_level, plan.reason), (4, 5, CompactionReason::LevelSize));
    }

    #[test]
    fn a_level_over_target_yields_to_the_data_waiting_above_it() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        // Level 5 (target 10,000) holds 10,500: due on its own.
        for key in ["e", "f", "g"] {
            tree.add(5, key, key, 3_500);
        }
        let scores = |tree: &Tree| {
            let version = tree.version();
            level_scores(&version, &options(), &level_targets(&version, &options()))
        };
        assert_eq!(scores(&tree)[5], 1.05);
        // With 900 bytes in level 0 (below its triggers) waiting to come down, level 5 is not
        // due: it waits until they have moved into it.
        for key in ["a", "b", "c"] {
            tree.add(0, key, key, 300);
        }
        let waiting = scores(&tree);
        assert!(waiting[0] < 1.0);
        assert_eq!(waiting[5], 10_500.0 / 10_900.0);
        assert!(pick(&tree.version(), &options(), &[], &no_pointers()).is_none());
        // The level stays bounded: once it exceeds its target by more than what waits above,
        // it is due again.
        tree.add(5, "h", "h", 1_500);
        assert_eq!(scores(&tree)[5], 12_000.0 / 10_900.0);
        assert_eq!(pick_plan(&tree.version(), &[]).level, 5);
    }

    #[test]
    fn round_robin_follows_the_compaction_pointer() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        let first = tree.add(4, "a", "b", BASE_BYTES);
        let second = tree.add(4, "c", "d", BASE_BYTES);
        let third = tree.add(4, "e", "f", BASE_BYTES);
        let version = tree.version();
        let cases: [(&[u8], u64); 5] = [(b"", first), (b"b", second), (b"c", second), (b"d", third), (b"f", first)];
        for (pointer, expected) in cases {
            let mut pointers = no_pointers();
            pointers[4] = pointer.to_vec();
            for priority in [CompactionPriority::RoundRobin, CompactionPriority::MinOverlappingRatio] {
                // Nothing lies below level 4 but the far-away last level, so every file's
                // overlap ratio is 0 and the tie keeps the round-robin order.
                let options = PickerOptions { priority, ..options() };
                let plan = pick(&version, &options, &[], &pointers).expect("a plan");
                assert_eq!(numbers(&plan.inputs), vec![expected], "{priority:?}, pointer {pointer:?}");
            }
        }
    }

    #[test]
    fn min_overlapping_ratio_moves_the_file_that_rewrites_least_below() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        // Level 4 is over target; below it, level 5 is dense under "a".."b", sparse under
        // "e".."f", and "c".."d" has a middling overlap but is a small file.
        let dense = tree.add(4, "a", "b", BASE_BYTES);
        let small = tree.add(4, "c", "d", BASE_BYTES / 10);
        let sparse = tree.add(4, "e", "f", BASE_BYTES);
        tree.add(5, "a", "a5", 5 * BASE_BYTES);
        tree.add(5, "a6", "b", 5 * BASE_BYTES);
        tree.add(5, "c", "d", BASE_BYTES);
        tree.add(5, "e", "f", BASE_BYTES / 2);
        let version = tree.version();
        let min_overlap = options();
        assert_eq!(numbers(&pick(&version, &min_overlap, &[], &no_pointers()).expect("a plan").inputs), vec![sparse]);
        let round_robin = PickerOptions { priority: CompactionPriority::RoundRobin, ..options() };
        assert_eq!(numbers(&pick(&version, &round_robin, &[], &no_pointers()).expect("a plan").inputs), vec![dense]);
        // The ratios: dense 10, small 10, sparse 0.5. With "e".."f" busy, the next cheapest is
        // tried next; the tie between dense and small keeps key order.
        let running = [RunningCompaction::from_plan(&pick(&version, &min_overlap, &[], &no_pointers()).unwrap())];
        let second = pick(&version, &min_overlap, &running, &no_pointers()).expect("a plan");
        assert_eq!(numbers(&second.inputs), vec![dense]);
        // The full order: sparse, then the tie in key order from the pointer.
        let by_number = |order: Vec<usize>| order.into_iter().map(|index| version.levels[4][index].number()).collect();
        let order: Vec<u64> =
            by_number(sorted_level_candidates(&version, CompactionPriority::MinOverlappingRatio, 4, b""));
        assert_eq!(order, vec![sparse, dense, small]);
        let order: Vec<u64> =
            by_number(sorted_level_candidates(&version, CompactionPriority::MinOverlappingRatio, 4, b"b"));
        assert_eq!(order, vec![sparse, small, dense]);
    }

    #[test]
    fn plans_list_the_starts_of_the_files_below_their_output_inside_their_range() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        let input = tree.add(4, "c", "m", BASE_BYTES * 2);
        tree.add(5, "b", "e", 10);
        tree.add(6, "a", "b", 10);
        tree.add(6, "c", "d", 10);
        tree.add(6, "f", "g", 10);
        tree.add(6, "k", "n", 10);
        tree.add(6, "o", "p", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!(numbers(&plan.inputs), vec![input]);
        // The job spans "b".."m" (its level-5 file starts at "b"); "c", "f" and "k" start inside
        // it, "b" is its first key (nothing to line up with before it), "a" and "o" are outside.
        let starts: Vec<&[u8]> = plan.grandparent_starts.iter().map(Vec::as_slice).collect();
        assert_eq!(starts, vec![&b"c"[..], b"f", b"k"]);
    }

    #[test]
    fn overlapping_bytes_count_files_straddling_two_inputs_for_both() {
        let mut tree = Tree::new();
        tree.add(3, "b", "d", 10);
        tree.add(3, "f", "h", 10);
        tree.add(3, "x", "y", 10);
        tree.add(4, "a", "c", 100);
        tree.add(4, "c5", "g", 1_000);
        tree.add(4, "h5", "i", 10_000);
        tree.add(4, "z", "zz", 100_000);
        assert_eq!(overlapping_bytes_below(&tree.version(), 3), vec![1_100, 1_000, 0]);
    }

    #[test]
    fn busy_files_are_skipped_and_disjoint_jobs_run_in_parallel() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", BASE_BYTES);
        tree.add(4, "c", "d", BASE_BYTES);
        tree.add(4, "e", "f", BASE_BYTES);
        tree.add(5, "a", "a", 10);
        tree.add(5, "d", "e", 10);
        let version = tree.version();
        let mut running: Vec<RunningCompaction> = Vec::new();
        let mut taken: Vec<u64> = Vec::new();
        for _ in 0..2 {
            let plan = pick_plan(&version, &running);
            assert!(plan.file_numbers().all(|number| !taken.contains(&number)), "{plan:?} reuses a busy file");
            let (smallest, largest) = plan.user_key_range();
            assert!(
                running.iter().all(|job| !job.overlaps(&smallest, &largest, &KeyComparator::Bytewise)),
                "{plan:?} overlaps a job"
            );
            taken.extend(plan.file_numbers());
            running.push(RunningCompaction::from_plan(&plan));
        }
        // The first job takes "a".."b" with the output file "a". The second skips the busy
        // "a".."b" and takes "c".."d"; its output file "d".."e" also overlaps "e".."f", which
        // rides along. Every level-4 file is then busy, so nothing more is due.
        assert_eq!(running[0].smallest_user_key, b"a");
        assert_eq!(
            (running[1].smallest_user_key.as_slice(), running[1].largest_user_key.as_slice()),
            (&b"c"[..], &b"f"[..])
        );
        assert!(pick(&version, &options(), &running, &no_pointers()).is_none());
    }

    #[test]
    fn the_score_of_a_pick_counts_only_idle_files() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", BASE_BYTES);
        tree.add(4, "c", "d", BASE_BYTES);
        tree.add(4, "e", "f", BASE_BYTES);
        let version = tree.version();
        let targets = level_targets(&version, &options());
        let full_score = level_scores(&version, &options(), &targets)[4];
        let (first_score, first) = pick_with_score(&version, &options(), &[], &no_pointers()).expect("a plan");
        assert_eq!((first.level, first_score), (4, full_score));
        // With the first job running, level 4 is still due, but less: the engine must rank this
        // column family by the smaller score, not by the level's full one.
        let running = [RunningCompaction::from_plan(&first)];
        let (second_score, second) = pick_with_score(&version, &options(), &running, &no_pointers()).expect("a plan");
        assert_eq!(second.level, 4);
        assert!((1.0..full_score).contains(&second_score), "second pick scored {second_score}, the level {full_score}");
    }

    #[test]
    fn running_jobs_count_towards_bringing_a_level_under_target() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", 600);
        tree.add(4, "c", "d", 600);
        let version = tree.version();
        let first = pick_plan(&version, &[]);
        // Once the first file has moved, level 4 holds 600 bytes for a target of 1,000.
        assert!(pick(&version, &options(), &[RunningCompaction::from_plan(&first)], &no_pointers()).is_none());
    }

    #[test]
    fn a_job_writing_an_overlapping_range_into_the_same_level_is_refused() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "c", "d", BASE_BYTES * 2);
        let version = tree.version();
        let job = |level: usize, output_level: usize, smallest: &str, largest: &str| RunningCompaction {
            file_numbers: vec![999],
            output_level,
            smallest_user_key: smallest.as_bytes().to_vec(),
            largest_user_key: largest.as_bytes().to_vec(),
            level,
        };
        assert!(pick(&version, &options(), &[job(4, 5, "a", "z")], &no_pointers()).is_none());
        assert!(pick(&version, &options(), &[job(4, 5, "d", "d")], &no_pointers()).is_none());
        assert!(pick(&version, &options(), &[job(4, 5, "e", "z")], &no_pointers()).is_some());
        assert!(pick(&version, &options(), &[job(5, 6, "a", "z")], &no_pointers()).is_some());
    }

    #[test]
    fn level0_does_not_pass_a_level_receiving_keys_of_its_range() {
        let mut tree = Tree::new();
        for _ in 0..4 {
            tree.add(0, "c", "d", 10);
        }
        let version = tree.version();
        let drain = RunningCompaction {
            file_numbers: vec![999],
            output_level: 3,
            smallest_user_key: b"a".to_vec(),
            largest_user_key: b"c".to_vec(),
            level: 2,
        };
        assert!(pick(&version, &options(), std::slice::from_ref(&drain), &no_pointers()).is_none());
        let elsewhere =
            RunningCompaction { smallest_user_key: b"x".to_vec(), largest_user_key: b"y".to_vec(), ..drain };
        assert_eq!(pick_plan(&version, &[elsewhere]).output_level, LAST_LEVEL);
    }

    #[test]
    fn only_one_level0_job_runs_at_a_time() {
        let mut tree = Tree::new();
        for _ in 0..4 {
            tree.add(0, "a", "b", 10);
        }
        let first = pick_plan(&tree.version(), &[]);
        assert_eq!(first.level, 0);
        let running = [RunningCompaction::from_plan(&first)];
        for _ in 0..4 {
            tree.add(0, "x", "y", 10);
        }
        let version = tree.version();
        assert!(pick(&version, &options(), &running, &no_pointers()).is_none());
        assert!(matches!(manual(&version, &options(), &running, 0, Some("x"), None), Err(ManualConflict)));

        // Even a level-0 job whose files and range are disjoint from this one's blocks it.
        let mut tree = Tree::new();
        for _ in 0..4 {
            tree.add(0, "x", "y", 10);
        }
        let elsewhere = RunningCompaction {
            file_numbers: vec![999],
            output_level: LAST_LEVEL,
            smallest_user_key: b"a".to_vec(),
            largest_user_key: b"b".to_vec(),
            level: 0,
        };
        assert!(pick(&tree.version(), &options(), std::slice::from_ref(&elsewhere), &no_pointers()).is_none());
    }

    #[test]
    fn trivial_moves_are_single_files_with_nothing_below() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", BASE_BYTES * 2);
        let version = tree.version();
        let plan = pick_plan(&version, &[]);
        assert!(plan.is_trivial_move());
        assert!(!manual_plan(&version, &options(), 4, None, None).is_trivial_move(), "manual jobs rewrite");

        tree.add(5, "b", "c", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!(plan.output_inputs.len(), 1);
        assert!(!plan.is_trivial_move());
    }

    #[test]
    fn bottommost_means_no_deeper_level_holds_keys_of_the_range() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(4, "a", "b", BASE_BYTES * 2);
        assert!(pick_plan(&tree.version(), &[]).bottommost);

        // The output-level file widens the range to "h", where the last level holds a key.
        tree.add(5, "b", "h", 10);
        tree.add(LAST_LEVEL, "g", "g", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!(plan.user_key_range(), (b"a".to_vec(), b"h".to_vec()));
        assert!(!plan.bottommost);
    }

    #[test]
    fn files_dense_with_tombstones_are_compacted_when_nothing_is_due() {
        let mut tree = Tree::new();
        let dense = tree.add_with_entries(LAST_LEVEL, "a", "b", 10, 100, 60);
        tree.add_with_entries(LAST_LEVEL, "c", "d", 10, 100, 49);
        tree.add_with_entries(LAST_LEVEL, "e", "f", 10, 49, 49);
        let version = tree.version();
        let plan = pick_plan(&version, &[]);
        assert_eq!(
            (plan.level, plan.output_level, plan.reason),
            (LAST_LEVEL, LAST_LEVEL, CompactionReason::TombstoneDensity)
        );
        assert_eq!(numbers(&plan.inputs), vec![dense]);
        assert!(plan.output_inputs.is_empty());
        assert!(plan.bottommost);
        assert!(!plan.is_trivial_move());
        let running = [RunningCompaction::from_plan(&plan)];
        assert!(pick(&version, &options(), &running, &no_pointers()).is_none(), "the others are not dense enough");

        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add_with_entries(4, "a", "b", 10, 100, 70);
        let densest = tree.add_with_entries(4, "c", "d", 10, 100, 90);
        let below = tree.add(5, "d", "e", 10);
        let plan = pick_plan(&tree.version(), &[]);
        assert_eq!((plan.level, plan.output_level, plan.reason), (4, 5, CompactionReason::TombstoneDensity));
        assert_eq!(numbers(&plan.inputs), vec![densest]);
        assert_eq!(numbers(&plan.output_inputs), vec![below]);
    }

    #[test]
    fn sorted_level_jobs_take_neighbours_that_share_their_output_files() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        let left = tree.add(4, "a", "b", 600);
        let right = tree.add(4, "c", "d", 600);
        tree.add(5, "a", "d", 100);
        let version = tree.version();
        assert_eq!(numbers(&pick_plan(&version, &[]).inputs), vec![left, right]);
        let capped = PickerOptions { max_compaction_bytes: 1_000, ..options() };
        assert_eq!(numbers(&pick(&version, &capped, &[], &no_pointers()).expect("a plan").inputs), vec![left]);

        // Taking the neighbour would bring in a second output file, so it stays.
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        let left = tree.add(4, "a", "b", 600);
        tree.add(4, "c", "d", 600);
        tree.add(5, "a", "c", 100);
        tree.add(5, "d", "e", 100);
        assert_eq!(numbers(&pick_plan(&tree.version(), &[]).inputs), vec![left]);
    }

    #[test]
    fn manual_compaction_takes_its_range_in_bounded_steps() {
        let mut tree = Tree::new();
        tree.add(5, "a", "b", 100);
        let c_d = tree.add(5, "c", "d", 100);
        let e_f = tree.add(5, "e", "f", 100);
        tree.add(5, "g", "h", 100);
        let a_d = tree.add(LAST_LEVEL, "a", "d", 100);
        let e_h = tree.add(LAST_LEVEL, "e", "h", 100);
        let version = tree.version();

        let plan = manual_plan(&version, &options(), 5, Some("c"), Some("f"));
        assert_eq!((plan.level, plan.output_level, plan.reason), (5, 6, CompactionReason::Manual));
        assert_eq!(numbers(&plan.inputs), vec![c_d, e_f]);
        assert_eq!(numbers(&plan.output_inputs), vec![a_d, e_h]);
        assert_eq!(manual_plan(&version, &options(), 5, None, None).inputs.len(), 4);

        // 250 bytes hold "c".."d" with "a".."d" below, not "e".."f" as well.
        let capped = PickerOptions { max_compaction_bytes: 250, ..options() };
        let plan = manual_plan(&version, &capped, 5, Some("c"), Some("f"));
        assert_eq!(numbers(&plan.inputs), vec![c_d]);
        assert_eq!(plan.user_key_range().1, b"d");
        assert_eq!(plan.manual_resume_key(), b"d");
        let resume = plan.manual_resume_key();
        let plan = pick_manual(&version, &capped, &[], 5, Bound::Excluded(&resume), Some(b"f"))
            .expect("no conflict")
            .expect("a plan");
        assert_eq!(numbers(&plan.inputs), vec![e_f]);
        let resume = plan.manual_resume_key();
        assert!(pick_manual(&version, &capped, &[], 5, Bound::Excluded(&resume), Some(b"f"))
            .expect("no conflict")
            .is_none());
        let nothing_fits = PickerOptions { max_compaction_bytes: 0, ..options() };
        assert_eq!(manual_plan(&version, &nothing_fits, 5, None, None).inputs.len(), 1, "at least one file");

        assert!(manual(&version, &options(), &[], 5, Some("x"), None).expect("no conflict").is_none());
        assert!(manual(&version, &options(), &[], 2, None, None).expect("no conflict").is_none());

        let plan = manual_plan(&version, &options(), LAST_LEVEL, Some("b"), None);
        assert_eq!((plan.level, plan.output_level), (LAST_LEVEL, LAST_LEVEL));
        assert_eq!(numbers(&plan.inputs), vec![a_d, e_h]);
        assert!(plan.output_inputs.is_empty());
        assert!(!plan.is_trivial_move());

        let busy = RunningCompaction::from_plan(&manual_plan(&version, &options(), LAST_LEVEL, Some("a"), Some("a")));
        assert!(matches!(
            manual(&version, &options(), std::slice::from_ref(&busy), 5, Some("c"), Some("c")),
            Err(ManualConflict)
        ));
        assert!(manual(&version, &options(), &[busy], 5, Some("g"), Some("g")).is_ok_and(|plan| plan.is_some()));
    }

    #[test]
    fn manual_level0_jobs_take_every_level0_file_overlapping_the_range() {
        let mut tree = Tree::new();
        let a_c = tree.add(0, "a", "c", 10);
        let b_e = tree.add(0, "b", "e", 10);
        let d_f = tree.add(0, "d", "f", 10);
        tree.add(0, "x", "z", 10);
        let plan = manual_plan(&tree.version(), &options(), 0, Some("a"), Some("a"));
        assert_eq!((plan.level, plan.output_level), (0, LAST_LEVEL));
        assert_eq!(numbers(&plan.inputs), vec![d_f, b_e, a_c]);
    }

    #[test]
    fn subcompaction_boundaries_split_large_jobs_evenly() {
        let mut tree = Tree::new();
        for (smallest, largest) in [("a", "b"), ("c", "d"), ("e", "f"), ("g", "h")] {
            tree.add(5, smallest, largest, 1_000);
        }
        let plan = manual_plan(&tree.version(), &options(), 5, None, None);
        let keys = |boundaries: Vec<Vec<u8>>| {
            boundaries.into_iter().map(|key| String::from_utf8(key).expect("ASCII")).collect::<Vec<_>>()
        };
        assert_eq!(keys(subcompaction_boundaries(&plan, &options(), 4)), ["b", "d", "f"]);
        assert_eq!(keys(subcompaction_boundaries(&plan, &options(), 2)), ["d"]);
        assert!(subcompaction_boundaries(&plan, &options(), 1).is_empty());
        let large_files = PickerOptions { target_file_size_bytes: 1_500, ..options() };
        assert_eq!(keys(subcompaction_boundaries(&plan, &large_files, 4)), ["d"], "one output file per range");
        let small_job = PickerOptions { target_file_size_bytes: 2_001, ..options() };
        assert!(subcompaction_boundaries(&plan, &small_job, 4).is_empty());

        // No boundary adds a range with no bytes in it (here, the empty files' keys).
        let mut tree = Tree::new();
        for (smallest, largest, size_bytes) in [("a", "b", 3_000), ("c", "c", 0), ("d", "d", 0), ("e", "f", 3_000)] {
            tree.add(5, smallest, largest, size_bytes);
        }
        let plan = manual_plan(&tree.version(), &options(), 5, None, None);
        assert_eq!(keys(subcompaction_boundaries(&plan, &options(), 4)), ["b"]);

        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let mut tree = Tree::new();
            for level in [4, 5] {
                let mut key = 0u32;
                for _ in 0..rng.gen_range(1..12) {
                    let smallest = key + rng.gen_range(0..5);
                    let largest = smallest + rng.gen_range(0..5);
                    tree.add(level, &format!("{smallest:04}"), &format!("{largest:04}"), rng.gen_range(1..3_000));
                    key = largest + 1;
                }
            }
            let plan = manual_plan(&tree.version(), &options(), 4, None, None);
            let max_subcompactions = rng.gen_range(1..8);
            let boundaries = subcompaction_boundaries(&plan, &options(), max_subcompactions);
            let (smallest, largest) = plan.user_key_range();
            assert!(boundaries.len() < max_subcompactions, "at most max - 1 boundaries");
            assert!(boundaries.windows(2).all(|pair| pair[0] < pair[1]), "sorted and unique: {boundaries:?}");
            assert!(boundaries.iter().all(|key| *key > smallest && *key < largest), "inside the range");
            if plan.input_bytes() < 2 * options().target_file_size_bytes {
                assert!(boundaries.is_empty());
            }
        }
    }

    #[test]
    fn pending_bytes_count_the_excess_over_every_target() {
        let mut tree = Tree::with_last_level_bytes(BASE_BYTES * 100);
        tree.add(0, "a", "b", 10);
        tree.add(4, "c", "d", BASE_BYTES);
        tree.add(5, "e", "f", BASE_BYTES * 10);
        let version = tree.version();
        assert_eq!(pending_compaction_bytes(&version, &options(), &level_targets(&version, &options())), 0);

        // Level 4 is 2,000 bytes over its target: those bytes, and ten times as many of level 5,
        // are rewritten. Level 5 then holds 12,000 bytes for a target of 10,000, and its excess
        // costs the same again on its way into the last level.
        tree.add(4, "g", "h", BASE_BYTES * 2);
        let version = tree.version();
        let targets = level_targets(&version, &options());
        assert_eq!(pending_compaction_bytes(&version, &options(), &targets), 2_000 * 11 + 2_000 * 11);

        // Level 0 at its trigger adds its 40 bytes, once and again as base-level excess.
        for _ in 0..3 {
            tree.add(0, "a", "b", 10);
        }
        let version = tree.version();
        let targets = level_targets(&version, &options());
        assert_eq!(pending_compaction_bytes(&version, &options(), &targets), 40 + 2_040 * 11 + 2_040 * 11);
    }
}
