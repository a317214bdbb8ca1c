//! Riptide's reliability harness.
//!
//! - [`driver`] and [`operations`]: a multi-threaded stress driver that runs random operations
//!   against a database on the real file system and checks every answer against an
//!   [`model::ExpectedState`] that tolerates operations in flight.
//! - [`crash`]: a parent that runs the driver as a child process, kills it with SIGKILL at
//!   random moments, and verifies the reopened database from the child's [`journal`].
//! - [`power_loss`]: simulated power loss (every `PowerLossMode`) at every mutating file-system
//!   call of small canonical workloads.
//! - [`io_errors`]: EIO and ENOSPC, once and persistent, at every file-system operation of the
//!   same workloads, then a restart or a power cut.
//! - [`metamorphic`]: one random operation sequence under many option sets, compared with each
//!   other and with a `BTreeMap`.
//! - [`api_sequence`] and [`fuzz_bodies`]: what the fuzz targets in `fuzz/` run, shared with the
//!   stable tests that replay their corpora.
//! - [`isolation`]: an Elle-style history checker for transactions: threads run list-append
//!   transactions under one isolation level and mode, and the recorded history is checked for
//!   the anomalies that level forbids (G0, G1a, G1b, G1c, G-single, G2-item).
//!
//! Every harness reports its failures with the seed that replays them, and has a short,
//! fixed-seed form run by `make test` and a long form run by `make soak`.
//!
//! Concurrency contract: the driver and the isolation workload are the multi-threaded parts (see
//! `operations` and `isolation::workload`); the other harnesses run one database at a time on one
//! thread, plus the engine's own threads.
//!
//! Invariants: no harness function panics on a database failure; it returns a description of
//! what went wrong (tests turn that into a panic).

pub mod api_sequence;
pub mod crash;
pub mod driver;
pub mod fuzz_bodies;
pub mod io_errors;
pub mod isolation;
pub mod journal;
pub mod metamorphic;
pub mod model;
pub mod operations;
pub mod power_loss;

/// One line of `reliability/ledger.tsv` minus the date and commit, which the soak script adds:
/// harness, seed range, count with its unit, failures. Printed by the soak commands as
/// `LEDGER\t...` so the script can pick it out.
pub fn ledger_line(harness: &str, seeds: &str, count: &str, failures: usize) -> String {
    format!("LEDGER\t{harness}\t{seeds}\t{count}\t{failures}")
}
