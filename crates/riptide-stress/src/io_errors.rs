//! I/O-error sweep over the canonical power-loss workloads, column family lifecycle included:
//! the N-th file-system operation fails with EIO or ENOSPC (once, or from then on), for every N.
//!
//! The script stops at its first failed write, flush, compaction or reopen, as an application
//! would; after a failed create, drop or rename it goes on (leaving out what names a family
//! whose creation failed), since an application may, and the engine must then stay
//! consistent: the failed step may survive recovery only as if it had succeeded or never
//! been tried, and every later acknowledged step must survive. Then a probe: one synced
//! write to the default column family. If the engine acknowledges it, it is durable and joins
//! the history; since the history keeps its writes in order, an acknowledged probe after a
//! write that failed and left no trace is caught as a gap (a failed write or flush must stick:
//! the engine may not go on as if a failed sync had succeeded). A failed lifecycle step need
//! not stick: the manifest is rewritten whole on the next change. The database is closed (its
//! result does not matter), the process restarts (everything handed to the OS survives) or the
//! machine loses power (unsynced data is dropped), and the database must reopen to a state the
//! history allows, with every acknowledged write and lifecycle step, take a write and survive
//! a clean reopen (`power_loss::check_recovery`).
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads.
//!
//! Invariants: I1, I2, I12, I13, I14 as in `power_loss`; no panic on any injected error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use riptide::fs::{FaultFileSystem, FaultKind, FaultPlan, MemFileSystem, PowerLossMode};
use riptide::WriteOptions;

use crate::power_loss::{self, count_operations, AfterLifecycleFailure, Operation, SweepReport, Workload};

/// How a case fails its operation, and what happens after.
#[derive(Clone, Copy, Debug)]
pub struct FaultSetting {
    /// The error injected.
    pub kind: FaultKind,
    /// Whether every later operation fails too.
    pub persistent: bool,
    /// The power cut after the close, or `None` for a process restart that keeps every byte.
    pub power_loss: Option<PowerLossMode>,
}

/// The settings a seed sweeps: each kind once and persistently, alternately followed by a
/// restart and by a power cut.
pub fn settings(seed: u64) -> [FaultSetting; 4] {
    [
        FaultSetting { kind: FaultKind::Eio, persistent: false, power_loss: None },
        FaultSetting { kind: FaultKind::Eio, persistent: true, power_loss: Some(PowerLossMode::DropUnsynced) },
        FaultSetting { kind: FaultKind::Enospc, persistent: false, power_loss: Some(PowerLossMode::TornTail { seed }) },
        FaultSetting { kind: FaultKind::Enospc, persistent: true, power_loss: None },
    ]
}

/// The key of the probe written after the first error.
const PROBE_KEY: &[u8] = b"probe-after-error";

/// One case: the `fail_at`-th operation fails as `setting` says. `Err` describes a failure.
pub fn fault_case(workload: &Workload, fail_at: u64, setting: FaultSetting) -> Result<(), String> {
    let path = Path::new("/io-errors");
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    fault.set_plan(Some(FaultPlan {
        fail_at_operation: fail_at,
        kind: setting.kind,
        persistent: setting.persistent,
        include_reads: false,
    }));
    let (mut history, db) =
        power_loss::run_script(workload, Arc::new(fault.clone()), path, AfterLifecycleFailure::GoOn);
    if let Some(db) = db {
        let probe = vec![Operation::plain(0, PROBE_KEY.to_vec(), Some(b"ok".to_vec()))];
        history.writes.push(probe);
        if db.put_opt(PROBE_KEY, b"ok", &WriteOptions { sync: true }).is_ok() {
            history.acknowledged_writes = history.writes.len();
            history.durable_writes = history.writes.len();
        }
        // Closing may fail after the error; what it leaves is checked below either way.
        drop(db.close());
    }
    if let Some(mode) = setting.power_loss {
        memory.simulate_power_loss(mode);
    }
    power_loss::check_recovery(workload, &history, &memory, path)
        .map_err(|failure| format!("workload {} {setting:?} at operation {fail_at}: {failure}", workload.name))
}

/// Sweeps every operation number of every canonical workload of `seed` under each of
/// `settings`; `stride` > 1 takes every stride-th number only (offset by the seed).
pub fn sweep_seed(seed: u64, stride: u64, settings: &[FaultSetting], report: &mut SweepReport) {
    let stride = stride.max(1);
    for workload in power_loss::canonical_workloads(seed) {
        let total = count_operations(&workload);
        for fail_at in (1 + seed % stride..=total).step_by(stride as usize) {
            for setting in settings {
                report.crash_states += 1;
                if let Err(failure) = fault_case(&workload, fail_at, *setting) {
                    report.failures.push(format!("seed {seed}: {failure}"));
                }
            }
        }
    }
}

/// Sweeps seeds from `first_seed` on, all four settings each, until `duration` has passed
/// (one seed when `None`).
pub fn soak(first_seed: u64, duration: Option<Duration>) -> SweepReport {
    power_loss::soak_seeds(first_seed, duration, |seed, report| sweep_seed(seed, 1, &settings(seed), report))
}
