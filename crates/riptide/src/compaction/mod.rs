//! Compaction policy: the decisions about what to merge down the tree, kept apart from the code
//! that reads and writes tables so that they can be tested on hand-built versions.
//!
//! - `picker`: leveled compaction with dynamic level sizes. Given a [`Version`] and the jobs
//!   already running, it chooses the next job (its input files, output level and reason),
//!   manual-compaction jobs, split points for sub-compactions and the pending-bytes estimate.
//! - `blob_gc`: when nothing else is due, a job that rewrites a table referencing the blob file
//!   with the most garbage (past the column family's ratio), so that its live values move out.
//! - `range_delete`: when nothing else is due, a job that rewrites a table still holding
//!   entries a range tombstone covers, so that they go.
//!
//! Concurrency contract: everything here is pure (no I/O, no locks, no shared state); the engine
//! calls it under its state mutex so that the version and the list of running jobs it passes are
//! consistent with each other.
//!
//! [`Version`]: crate::version::tree::Version

pub(crate) mod blob_gc;
pub(crate) mod expiry;
pub(crate) mod picker;
pub(crate) mod range_delete;
