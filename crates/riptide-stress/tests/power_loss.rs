//! Simulated power loss at every mutating file-system call of the canonical workloads (put+sync,
//! flush, compaction, manifest switch by reopen, column family lifecycle, transaction commits,
//! two-phase commit, blob files, range deletes, single deletes, expiring puts, merges), in all three `PowerLossMode`s: about ten and a half thousand crash states
//! for one fixed seed. `make soak`
//! sweeps more seeds through `riptide-stress power-loss`.

use std::collections::BTreeSet;

use riptide_stress::power_loss::{self, Step, SweepReport};

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

#[test]
fn the_column_family_workload_creates_drops_renames_and_recreates() {
    let workloads = power_loss::canonical_workloads(1);
    let workload = workloads.iter().find(|workload| workload.name == "column-families").expect("the workload exists");
    let steps = &workload.steps;
    let kinds: Vec<String> = steps
        .iter()
        .map(|step| match step {
            Step::Write { write, sync } => format!("write({}{})", write.len(), if *sync { ",sync" } else { "" }),
            Step::CreateFamily { name, .. } => format!("create({name})"),
            Step::DropFamily { family } => format!("drop(#{family})"),
            Step::RenameFamily { family, name } => format!("rename(#{family},{name})"),
            other => format!("{other:?}"),
        })
        .collect();
    let count = |matches: fn(&Step) -> bool| steps.iter().filter(|step| matches(step)).count();
    assert!(count(|step| matches!(step, Step::DropFamily { .. })) >= 2, "too few drops: {kinds:?}");
    assert!(count(|step| matches!(step, Step::RenameFamily { .. })) >= 1, "no rename: {kinds:?}");
    assert!(count(|step| matches!(step, Step::Flush)) >= 1, "no flush: {kinds:?}");
    assert!(count(|step| matches!(step, Step::Reopen)) >= 1, "no reopen: {kinds:?}");
    assert!(
        count(|step| match step {
            Step::Write { write, sync: false } =>
                write.iter().map(|operation| operation.family).collect::<BTreeSet<_>>().len() > 1,
            _ => false,
        }) >= 3,
        "too few unsynced writes spanning families: {kinds:?}"
    );
    // A name is given again after a drop or rename freed it: the new family must start empty.
    let mut given = BTreeSet::new();
    let mut reused = false;
    for step in steps {
        if let Step::CreateFamily { name, .. } | Step::RenameFamily { name, .. } = step {
            reused |= !given.insert(name.clone());
        }
    }
    assert!(reused, "no name is reused: {kinds:?}");
}

#[test]
fn the_spilled_transaction_workload_spills_across_column_families() {
    let workloads = power_loss::canonical_workloads(1);
    let workload =
        workloads.iter().find(|workload| workload.name == "spilled-transactions").expect("the workload exists");
    let spanning = workload
        .steps
        .iter()
        .filter(|step| match step {
            Step::Transaction { write, spill: true, .. } => {
                write.iter().any(|operation| operation.family == 0)
                    && write.iter().any(|operation| operation.family == 1)
            }
            _ => false,
        })
        .count();
    assert!(spanning >= 2, "only {spanning} spilled transactions span both column families");
    // Spilled transactions are prepared too (at least two writes each, so they do spill), and
    // some of them committed by xid.
    let prepared: Vec<&Vec<u8>> = workload
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Prepare { write, xid, spill: true } if write.len() >= 2 => Some(xid),
            _ => None,
        })
        .collect();
    assert!(prepared.len() >= 2, "only {} spilled transactions are prepared", prepared.len());
    let committed = workload
        .steps
        .iter()
        .filter(|step| matches!(step, Step::CommitPrepared { xid } if prepared.contains(&xid)))
        .count();
    assert!(committed >= 1, "no prepared spilled transaction is committed");
}

#[test]
fn the_range_delete_workload_deletes_ranges_across_flushes_and_compactions() {
    let workloads = power_loss::canonical_workloads(1);
    let workload = workloads.iter().find(|workload| workload.name == "range-deletes").expect("the workload exists");
    let ranges = workload
        .steps
        .iter()
        .filter(|step| match step {
            Step::Write { write, .. } => write.iter().any(|operation| operation.range_end.is_some()),
            _ => false,
        })
        .count();
    assert!(ranges >= 5, "only {ranges} writes delete a range");
    assert!(workload.steps.iter().filter(|step| matches!(step, Step::Flush)).count() >= 3);
    assert!(workload.steps.iter().any(|step| matches!(step, Step::CompactAll)));
}

#[test]
fn the_expiry_workload_writes_puts_expired_and_alive_across_flushes_and_compactions() {
    let workloads = power_loss::canonical_workloads(1);
    let workload = workloads.iter().find(|workload| workload.name == "expiry").expect("the workload exists");
    let expiries: Vec<u64> = workload
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Write { write, .. } => Some(write.iter().filter_map(|operation| operation.expires_at_us)),
            _ => None,
        })
        .flatten()
        .collect();
    let expired = expiries.iter().filter(|&&expiry| expiry <= power_loss::CLOCK_US).count();
    assert!(expired >= 10 && expiries.len() - expired >= 10, "{expired} of {} expiries already past", expiries.len());
    assert!(workload.steps.iter().filter(|step| matches!(step, Step::Flush)).count() >= 3);
    assert!(workload.steps.iter().any(|step| matches!(step, Step::CompactAll)));
}

#[test]
fn the_merge_workload_writes_operands_between_flushes_and_compactions() {
    let workloads = power_loss::canonical_workloads(1);
    let workload = workloads.iter().find(|workload| workload.name == "merges").expect("the workload exists");
    let operands = workload
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Write { write, .. } => Some(write.iter().filter(|operation| operation.merge).count()),
            _ => None,
        })
        .sum::<usize>();
    assert!(operands >= 40, "only {operands} merge operands");
    assert!(workload.options.merge_operator.is_some());
    assert!(workload.steps.iter().filter(|step| matches!(step, Step::Flush)).count() >= 3);
}

#[test]
fn the_single_delete_workload_deletes_keys_put_once() {
    let workloads = power_loss::canonical_workloads(1);
    let workload = workloads.iter().find(|workload| workload.name == "single-deletes").expect("the workload exists");
    let mut puts = std::collections::BTreeMap::<Vec<u8>, u32>::new();
    let mut single_deletes = 0;
    for step in &workload.steps {
        if let Step::Write { write, .. } = step {
            for operation in write {
                if operation.single_delete {
                    assert_eq!(puts.get(&operation.key), Some(&1), "the contract: put once before the single delete");
                    puts.remove(&operation.key);
                    single_deletes += 1;
                } else if operation.value.is_some() {
                    *puts.entry(operation.key.clone()).or_default() += 1;
                }
            }
        }
    }
    assert!(single_deletes >= 20, "only {single_deletes} single deletes");
    assert!(workload.steps.iter().filter(|step| matches!(step, Step::Flush)).count() >= 3);
}
