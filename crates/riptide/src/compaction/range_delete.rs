//! Range-delete reclaim jobs: when no level needs compacting, a table of level 1 or deeper that
//! still holds entries a range tombstone covers is rewritten (into the next level, or in place
//! at the last level), so that the executor's filter drops them (I39) and the table no longer
//! keeps the tombstone alive (I40). Level-0 tables are left to the level-0 compactions that
//! always come. Tables a range delete covers whole go at the flush without any job
//! (`db/flush.rs`).
//!
//! Concurrency contract: pure functions over a version and the running jobs, called under the
//! state mutex like the rest of the picker.
//!
//! Only tombstones at or below the smallest snapshot count: no reader then sits between such a
//! tombstone and the entries it covers, so the rewrite drops them all and marks its outputs as
//! clean, and the same table is never picked twice for one tombstone.

use super::picker::{make_plan, CompactionPlan, CompactionReason, RunningCompaction, RunningJobs, LAST_LEVEL};
use crate::version::tree::{Version, NUM_LEVELS};

/// The next range-delete reclaim job of `version`, if some table of level 1 or deeper holds
/// entries that a tombstone at or below `smallest_snapshot` covers and can be rewritten now.
pub(crate) fn pick_range_deleted(
    version: &Version,
    running: &[RunningCompaction],
    smallest_snapshot: u64,
) -> Option<CompactionPlan> {
    if version.range_tombstones.is_empty() {
        return None;
    }
    let running = RunningJobs::new(running, &version.comparator);
    for level in 1..NUM_LEVELS {
        for file in &version.levels[level] {
            let reclaimable =
                version.range_tombstones_hiding_data_in(file).any(|tombstone| tombstone.sequence <= smallest_snapshot);
            if !reclaimable || running.is_busy(file) {
                continue;
            }
            let output_level = if level == LAST_LEVEL { level } else { level + 1 };
            let Some(plan) = make_plan(version, level, output_level, vec![file.clone()], CompactionReason::RangeDelete)
            else {
                continue;
            };
            if running.admits(&plan) {
                return Some(plan);
            }
        }
    }
    None
}
