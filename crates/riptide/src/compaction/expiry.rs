//! Expiry compaction jobs: when no level needs compacting, a table of level 1 or deeper whose
//! entries have mostly expired is rewritten (into the next level, or in place at the last
//! level), so that the executor turns its expired entries into deletes and drops them (I42).
//! Level-0 tables are left to the level-0 compactions, like range-delete reclaim jobs.
//!
//! Concurrency contract: pure functions over a version and the running jobs, called under the
//! state mutex like the rest of the picker.
//!
//! A table's expiries are summarised by its count, earliest and latest
//! (`FileMetadata::expiry`); the share expired at the horizon is estimated as if they were
//! spread evenly between the two. The horizon is the one the executor will use (the oldest
//! snapshot's read time, or now), and every entry the rewrite keeps expires after it, so the
//! outputs of a job never qualify again at the same horizon.

use super::picker::{make_plan, CompactionPlan, CompactionReason, RunningCompaction, RunningJobs, LAST_LEVEL};
use crate::version::tree::{Version, NUM_LEVELS};

/// A table qualifies once at least this share of its entries is estimated expired.
const EXPIRED_SHARE_TRIGGER: f64 = 0.5;

/// The next expiry job of `version`, if some table of level 1 or deeper has mostly expired at
/// `horizon_us` and can be rewritten now.
pub(crate) fn pick_expired(
    version: &Version,
    running: &[RunningCompaction],
    horizon_us: u64,
) -> Option<CompactionPlan> {
    let running = RunningJobs::new(running, &version.comparator);
    for level in 1..NUM_LEVELS {
        for file in &version.levels[level] {
            let expired = file.meta.expiry.estimated_expired(horizon_us);
            let mostly_expired =
                expired > 0 && expired as f64 >= EXPIRED_SHARE_TRIGGER * file.meta.num_entries.max(1) as f64;
            if !mostly_expired || running.is_busy(file) {
                continue;
            }
            let output_level = if level == LAST_LEVEL { level } else { level + 1 };
            let Some(plan) = make_plan(version, level, output_level, vec![file.clone()], CompactionReason::Expiry)
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
