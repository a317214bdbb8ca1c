//! Blob garbage collection jobs: when no level needs compacting, the blob file with the most
//! garbage at or above `blob_garbage_collection_ratio` gets a job that rewrites one table of
//! level 1 or deeper referencing it (into the next level, or in place at the last level). The
//! executor moves the live values of such a file into a new blob file as it writes
//! (`blob/relocation.rs`), so the rewritten table no longer references it; once no table does,
//! the file is deleted (I35). Level-0 tables are left to the level-0 compactions that always
//! come.
//!
//! Concurrency contract: pure functions over a version and the running jobs, called under the
//! state mutex like the rest of the picker.
//!
//! Each job removes every reference to the chosen blob file from its input table, so repeated
//! picking ends: the file's referencing tables shrink by one per job.

use super::picker::{make_plan, CompactionPlan, CompactionReason, RunningCompaction, RunningJobs, LAST_LEVEL};
use crate::version::tree::{Version, NUM_LEVELS};

/// The next blob garbage collection job of `version`, if a blob file's garbage ratio is at
/// least `ratio` and a table referencing it can be rewritten now.
pub(crate) fn pick_blob_garbage(
    version: &Version,
    running: &[RunningCompaction],
    ratio: f64,
) -> Option<CompactionPlan> {
    if version.blob_files.is_empty() || ratio > 1.0 {
        return None;
    }
    let running = RunningJobs::new(running, &version.comparator);
    let mut candidates: Vec<(f64, u64)> = version
        .blob_files
        .values()
        .map(|file| (file.garbage_ratio(), file.number()))
        .filter(|&(garbage_ratio, _)| garbage_ratio >= ratio && garbage_ratio > 0.0)
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, blob_number) in candidates {
        for level in 1..NUM_LEVELS {
            for file in &version.levels[level] {
                if !file.meta.blob_references.contains(&blob_number) || running.is_busy(file) {
                    continue;
                }
                let output_level = if level == LAST_LEVEL { level } else { level + 1 };
                let Some(plan) =
                    make_plan(version, level, output_level, vec![file.clone()], CompactionReason::BlobGarbage)
                else {
                    continue;
                };
                if running.admits(&plan) {
                    return Some(plan);
                }
            }
        }
    }
    None
}
