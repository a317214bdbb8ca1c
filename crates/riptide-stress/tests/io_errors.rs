//! The I/O-error sweep of the canonical workloads (column family lifecycle included): EIO once
//! then a restart, and ENOSPC from then on then a power cut, at every file-system operation,
//! for one fixed seed. `make soak` sweeps more seeds and all four settings through
//! `riptide-stress io-errors`.

use riptide::fs::{FaultKind, PowerLossMode};
use riptide_stress::io_errors::{self, FaultSetting};
use riptide_stress::power_loss::SweepReport;

#[test]
fn io_errors_at_every_operation_of_the_canonical_workloads() {
    let settings = [
        FaultSetting { kind: FaultKind::Eio, persistent: false, power_loss: None },
        FaultSetting { kind: FaultKind::Enospc, persistent: true, power_loss: Some(PowerLossMode::DropUnsynced) },
    ];
    let mut report = SweepReport::default();
    io_errors::sweep_seed(1, 1, &settings, &mut report);
    println!("I/O errors: {} cases", report.crash_states);
    assert!(report.failures.is_empty(), "{} failures:\n{}", report.failures.len(), report.failures.join("\n"));
    assert!(report.crash_states >= 2000, "only {} cases", report.crash_states);
}

/// Story: the I/O-error soak (seed 12014, column family workload, EIO once at operation 83, then
/// a restart) lost synced writes of the default family. Removing an obsolete log failed; the
/// engine forgot the log anyway and went on deleting newer ones, so the old log stayed on disk
/// with a hole after it. Recovery read its records, found the next log's first sequence number
/// far past them, took the hole for lost writes and dropped every later record. Logs are now
/// removed oldest first and a failed removal stops the run, so what is on disk stays unbroken.
#[test]
fn a_failed_log_removal_leaves_no_hole_that_recovery_takes_for_lost_writes() {
    let workloads = riptide_stress::power_loss::canonical_workloads(12014);
    let workload = workloads.iter().find(|workload| workload.name == "column-families").expect("workload");
    let setting = FaultSetting { kind: FaultKind::Eio, persistent: false, power_loss: None };
    let total = riptide_stress::power_loss::count_operations(workload);
    let failures: Vec<String> =
        (1..=total).filter_map(|fail_at| io_errors::fault_case(workload, fail_at, setting).err()).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
