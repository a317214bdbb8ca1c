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
