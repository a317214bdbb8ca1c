//! Simulated power loss at every mutating file-system call of the canonical workloads (put+sync,
//! flush, compaction, manifest switch by reopen), in all three `PowerLossMode`s: about three
//! thousand crash states for one fixed seed. `make soak` sweeps more seeds through
//! `riptide-stress power-loss`.

use riptide_stress::power_loss::{self, SweepReport};

#[test]
fn power_loss_at_every_call_of_the_canonical_workloads() {
    let mut report = SweepReport::default();
    power_loss::sweep_seed(1, 1, &mut report);
    println!("power loss: {} crash states", report.crash_states);
    assert!(report.failures.is_empty(), "{}", report.failures.join("\n"));
    assert!(report.crash_states >= 1000, "only {} crash states", report.crash_states);
}

#[test]
fn every_canonical_workload_reaches_its_feature() {
    // The workloads are only worth sweeping if they do what their names say.
    for workload in power_loss::canonical_workloads(1) {
        let calls = power_loss::count_operations(&workload);
        assert!(calls > 20, "workload {} makes only {calls} calls", workload.name);
    }
}
