//! The canonical workloads of the power-loss sweep, generated from a seed: put+sync, flush,
//! compaction, manifest switch, the column family lifecycle (create, drop, rename and
//! re-create under an old name, between unsynced and synced batches that span families),
//! transaction commits (also of transactions that spill), two-phase commit (prepare, commit and roll back prepared
//! transactions, one left undecided), blob files, range deletes, single deletes, expiring puts
//! and merges.
//!
//! Concurrency contract: plain data, built on one thread.
//!
//! Invariants: a script only names column families that are live at that step (created and
//! not dropped), never drops or renames the default one, and never gives two live families
//! one name, so every step is valid and can fail only through the file system.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::Options;

/// A column family by the order of its creation in a script: 0 is the default one, 1 the
/// first one the script creates, and so on. A re-created name is a new family.
pub type FamilyIndex = usize;

/// One operation of an atomic write: a put (`value` is `Some`) or a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The column family it writes to.
    pub family: FamilyIndex,
    /// Its key.
    pub key: Vec<u8>,
    /// The value it puts, or `None` for a delete.
    pub value: Option<Vec<u8>>,
    /// For a range delete (`value` is then `None`): the end key, exclusive; the range starts
    /// at `key`. Only plain writes hold range deletes, never transactions.
    pub range_end: Option<Vec<u8>>,
    /// For a put: its expiry (`WriteBatch::put_with_expiry`), in microseconds by the workload's
    /// clock, which stands still at [`CLOCK_US`]: a put expiring at or before it reads as a
    /// delete. Only plain writes hold expiries, never transactions.
    pub expires_at_us: Option<u64>,
    /// The put is a merge operand (`WriteBatch::merge`) for [`AppendOperator`]: the key's value
    /// becomes its old value, a comma and the operand (the operand alone over nothing). Only
    /// plain writes hold merges, never transactions.
    pub merge: bool,
    /// The delete is a single delete (`WriteBatch::single_delete`), used only where its
    /// contract holds (the key put once since it was last deleted). Only plain writes hold
    /// them, never transactions.
    pub single_delete: bool,
}

impl Operation {
    /// A put (`value` is `Some`) or a delete of `key` in `family`, with no range, expiry,
    /// merge or single delete.
    pub fn plain(family: FamilyIndex, key: Vec<u8>, value: Option<Vec<u8>>) -> Operation {
        Operation { family, key, value, range_end: None, expires_at_us: None, merge: false, single_delete: false }
    }
}

/// The merge operator of the `merges` workload: the value beneath, then the operands, joined by
/// commas.
#[derive(Debug)]
pub struct AppendOperator;

impl riptide::MergeOperator for AppendOperator {
    fn name(&self) -> &str {
        "power-loss.append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = existing.into_iter().collect();
        parts.extend_from_slice(operands);
        Some(parts.join(&b","[..]))
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(operands.join(&b","[..]))
    }
}

/// Applies a merge `operand` to `existing`, as [`AppendOperator`] does.
pub fn append(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    match existing {
        Some(existing) => [existing, b",", operand].concat(),
        None => operand.to_vec(),
    }
}

/// The time the clock of the `expiry` workload shows, always (a `ManualClock` never moved).
pub const CLOCK_US: u64 = 1_790_000_000_000_000;

/// One write: its operations, applied atomically (one batch, possibly across families).
pub type Write = Vec<Operation>;

/// One step of a workload script.
#[derive(Clone, Debug)]
pub enum Step {
    /// An atomic write, synced or not.
    Write {
        /// Its operations.
        write: Write,
        /// Whether it asks for a sync.
        sync: bool,
    },
    /// A transaction (pessimistic, REPEATABLE READ) that makes the write's operations and
    /// commits, synced or not: as atomic and as durable as a batch.
    Transaction {
        /// Its operations.
        write: Write,
        /// Whether its commit is synced.
        sync: bool,
        /// Whether it spills (a write memory limit of one byte: every write but the last moves
        /// to a spilled run, and the script gives such transactions at least two), so that it
        /// commits through tables in one manifest record, durable when it returns.
        spill: bool,
    },
    /// A transaction that makes the write's operations and is prepared under `xid`.
    Prepare {
        /// Its operations.
        write: Write,
        /// Its xid.
        xid: Vec<u8>,
        /// Whether its writes spill (a one-byte write memory limit): it is then prepared with
        /// its runs, and its commit installs tables.
        spill: bool,
    },
    /// `Db::commit_prepared(xid)`.
    CommitPrepared {
        /// The xid of an earlier `Prepare`.
        xid: Vec<u8>,
    },
    /// `Db::rollback_prepared(xid)`.
    RollbackPrepared {
        /// The xid of an earlier `Prepare`.
        xid: Vec<u8>,
    },
    /// `Db::flush`.
    Flush,
    /// `Db::compact_all`.
    CompactAll,
    /// Close and open again (recovery writes a new manifest and switches `CURRENT`).
    Reopen,
    /// `Db::create_column_family`.
    CreateFamily {
        /// The index the new family gets.
        family: FamilyIndex,
        /// Its name.
        name: String,
        /// Its memtable size: a small one switches and flushes every few writes.
        memtable_size_bytes: usize,
    },
    /// `Db::drop_column_family`.
    DropFamily {
        /// The family dropped.
        family: FamilyIndex,
    },
    /// `Db::rename_column_family`.
    RenameFamily {
        /// The family renamed.
        family: FamilyIndex,
        /// Its new name.
        name: String,
    },
}

impl Step {
    /// Whether the step changes the set of column families (recorded in the manifest, durable
    /// when acknowledged).
    pub fn is_lifecycle(&self) -> bool {
        matches!(self, Step::CreateFamily { .. } | Step::DropFamily { .. } | Step::RenameFamily { .. })
    }
}

/// A named workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its name, for reports.
    pub name: &'static str,
    /// The options it runs with (the file system is replaced).
    pub options: Options,
    /// Its steps.
    pub steps: Vec<Step>,
}

fn key(number: u64) -> Vec<u8> {
    format!("key{number:04}").into_bytes()
}

fn value(number: u64, step: usize, length_bytes: usize) -> Vec<u8> {
    let mut value = format!("v{number}.{step}:").into_bytes();
    while value.len() < length_bytes {
        value.push(b'a' + ((value.len() + step) % 26) as u8);
    }
    value
}

fn small_options() -> Options {
    Options {
        memtable_size_bytes: 8 << 10,
        block_size_bytes: 512,
        block_cache_size_bytes: 64 << 10,
        target_file_size_bytes: 8 << 10,
        level0_compaction_trigger_files: 2,
        level0_slowdown_writes_files: 7,
        level0_stop_writes_files: 8,
        max_open_tables: 16,
        // Several preallocated chunks per log, so that crash states fall before, inside and
        // after preallocated zeros.
        wal_preallocate_bytes: 2048,
        ..Options::default()
    }
}

/// One random operation on one of `families`, over `keys` keys.
fn random_operation(
    rng: &mut SmallRng,
    families: &[FamilyIndex],
    step: usize,
    keys: u64,
    max_value_bytes: usize,
) -> Operation {
    let family = families[rng.gen_range(0..families.len())];
    let number = rng.gen_range(0..keys);
    let value = rng.gen_bool(0.85).then(|| value(number, step, rng.gen_range(0..max_value_bytes)));
    Operation::plain(family, key(number), value)
}

/// A random write of one to `max_operations` operations over `keys` keys of the default
/// column family.
fn random_write(rng: &mut SmallRng, step: usize, keys: u64, max_operations: usize, max_value_bytes: usize) -> Write {
    (0..rng.gen_range(1..=max_operations)).map(|_| random_operation(rng, &[0], step, keys, max_value_bytes)).collect()
}

/// `writes` (steps of one workload, in order) with a flush after every `flush_every`-th of them,
/// a compaction of everything after the one numbered `compact_after`, and another at the end.
fn with_maintenance(writes: Vec<Step>, flush_every: usize, compact_after: usize) -> Vec<Step> {
    let mut steps = Vec::with_capacity(writes.len() + writes.len() / flush_every + 2);
    for (step, write) in writes.into_iter().enumerate() {
        steps.push(write);
        if step % flush_every == flush_every - 1 {
            steps.push(Step::Flush);
        }
        if step == compact_after {
            steps.push(Step::CompactAll);
        }
    }
    steps.push(Step::CompactAll);
    steps
}

/// Transactions that spill their writes and commit through tables (across two column
/// families, one recorded manifest group), between unsynced plain writes, ordinary
/// transactions and flushes; and spilled transactions prepared (each on keys of its own, which
/// it holds locked), committed or rolled back a few steps later, the last one left undecided.
fn spilled_transactions(rng: &mut SmallRng) -> Vec<Step> {
    let mut steps = vec![Step::CreateFamily { family: 1, name: "spilled".into(), memtable_size_bytes: 4096 }];
    let xid = |transaction: u64| format!("spilled-xid-{transaction}").into_bytes();
    let mut undecided: Vec<u64> = Vec::new();
    let mut prepared = 0u64;
    for round in 0..12 {
        let step = steps.len();
        if round % 4 == 1 {
            let write: Write = (0..rng.gen_range(2..=5))
                .map(|_| {
                    let mut operation = random_operation(rng, &[0, 1], step, 10, 200);
                    let number = 1000 + prepared * 10 + rng.gen_range(0..10);
                    operation.key = key(number);
                    operation
                })
                .collect();
            steps.push(Step::Prepare { write, xid: xid(prepared), spill: true });
            undecided.push(prepared);
            prepared += 1;
        }
        if undecided.len() > 1 || (round == 10 && !undecided.is_empty()) {
            let decided = undecided.remove(0);
            if rng.gen_bool(0.7) {
                steps.push(Step::CommitPrepared { xid: xid(decided) });
            } else {
                steps.push(Step::RollbackPrepared { xid: xid(decided) });
            }
        }
        let kind = rng.gen_range(0..4);
        // A write set spills when a write would take it past the limit, so with a one-byte
        // limit a transaction spills from its second write on: the spilled ones make at least
        // two (and then commit through tables, durably).
        let operations = if kind >= 2 { rng.gen_range(2..=6) } else { rng.gen_range(1..=6) };
        let write: Write = (0..operations).map(|_| random_operation(rng, &[0, 1], step, 40, 200)).collect();
        match kind {
            0 => steps.push(Step::Write { write, sync: false }),
            1 => steps.push(Step::Transaction { write, sync: false, spill: false }),
            _ => steps.push(Step::Transaction { write, sync: false, spill: true }),
        }
        if step % 9 == 8 {
            steps.push(Step::Flush);
        }
    }
    steps
}

/// Prepares transactions (each on keys of its own, as prepared transactions hold their locks)
/// between plain writes and flushes, commits some, rolls back others, leaves the last one
/// undecided, and reopens with prepared transactions outstanding.
fn two_phase_commit(rng: &mut SmallRng) -> Vec<Step> {
    let prepared_write = |rng: &mut SmallRng, transaction: u64, step: usize| -> Write {
        (0..rng.gen_range(1..=3))
            .map(|_| {
                let number = 1000 + transaction * 10 + rng.gen_range(0..10);
                let value = rng.gen_bool(0.85).then(|| value(number, step, rng.gen_range(0..150)));
                Operation::plain(0, key(number), value)
            })
            .collect()
    };
    let xid = |transaction: u64| format!("xid-{transaction}").into_bytes();
    let mut steps = Vec::new();
    let mut undecided: Vec<u64> = Vec::new();
    for transaction in 0..8u64 {
        let step = steps.len();
        steps.push(Step::Write { write: random_write(rng, step, 20, 2, 120), sync: rng.gen_bool(0.2) });
        steps.push(Step::Prepare {
            write: prepared_write(rng, transaction, step),
            xid: xid(transaction),
            spill: false,
        });
        undecided.push(transaction);
        // Decide an earlier one now and then; keep a few outstanding.
        if undecided.len() > 2 || (transaction > 0 && rng.gen_bool(0.5)) {
            let decided = undecided.remove(rng.gen_range(0..undecided.len()));
            if rng.gen_bool(0.7) {
                steps.push(Step::CommitPrepared { xid: xid(decided) });
            } else {
                steps.push(Step::RollbackPrepared { xid: xid(decided) });
            }
        }
        if transaction == 3 {
            steps.push(Step::Flush);
        }
        if transaction == 5 {
            steps.push(Step::Reopen);
        }
    }
    // Decide all but the last one.
    while undecided.len() > 1 {
        let decided = undecided.remove(0);
        steps.push(Step::CommitPrepared { xid: xid(decided) });
    }
    let step = steps.len();
    steps.push(Step::Write { write: random_write(rng, step, 20, 2, 120), sync: true });
    steps
}

/// The names the lifecycle workload gives its column families; a name comes back after a drop
/// or a rename freed it.
const FAMILY_NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

/// Creates, drops, renames and re-creates column families between writes that span them,
/// mostly unsynced, with flushes and a reopen: the manifest's lifecycle records must survive
/// as acknowledged while the logs keep an independent prefix of the writes.
fn column_family_lifecycle(rng: &mut SmallRng) -> Vec<Step> {
    let mut live: Vec<(FamilyIndex, String)> = vec![(0, "default".to_string())];
    // Names a drop or a rename freed: a creation mostly takes one of these, so that a new
    // family often carries an old family's name (whose data must not come back).
    let mut freed: Vec<String> = Vec::new();
    let mut next_family = 1;
    let mut steps = Vec::new();
    let free_name = |live: &[(FamilyIndex, String)], freed: &[String], rng: &mut SmallRng| {
        let is_free = |name: &str| live.iter().all(|(_, live_name)| live_name != name);
        let reusable: Vec<&String> = freed.iter().filter(|name| is_free(name)).collect();
        if !reusable.is_empty() && rng.gen_bool(0.75) {
            return reusable[rng.gen_range(0..reusable.len())].clone();
        }
        let free: Vec<&str> = FAMILY_NAMES.iter().copied().filter(|name| is_free(name)).collect();
        free[rng.gen_range(0..free.len())].to_string()
    };
    // A prologue: a family that switches memtables alone, so that it alone holds the oldest
    // log, is dropped before the default family writes anything; then a synced write and a
    // reopen. The drop must not let recovery lose the later writes (the story of
    // `dropping_a_family_that_alone_held_a_log_loses_no_later_write_at_reopen`).
    let name = free_name(&live, &freed, rng);
    steps.push(Step::CreateFamily { family: next_family, name: name.clone(), memtable_size_bytes: 4096 });
    for number in 0..2 {
        let operation = Operation::plain(next_family, key(number), Some(value(number, 0, 3000)));
        steps.push(Step::Write { write: vec![operation], sync: false });
    }
    steps.push(Step::DropFamily { family: next_family });
    freed.push(name);
    next_family += 1;
    let write = vec![Operation::plain(0, key(0), Some(value(0, 0, 40)))];
    steps.push(Step::Write { write, sync: true });
    steps.push(Step::Reopen);
    for step in 0..48 {
        let roll = rng.gen_range(0..100);
        // The first steps create two families, so writes span families from early on.
        if step < 2 || (roll < 10 && live.len() < 4) {
            let name = free_name(&live, &freed, rng);
            let memtable_size_bytes = if rng.gen_bool(0.5) { 4096 } else { 64 << 10 };
            steps.push(Step::CreateFamily { family: next_family, name: name.clone(), memtable_size_bytes });
            live.push((next_family, name));
            next_family += 1;
        } else if roll < 16 && live.len() > 1 {
            let (family, name) = live.remove(rng.gen_range(1..live.len()));
            freed.push(name);
            steps.push(Step::DropFamily { family });
        } else if roll < 20 && live.len() > 1 {
            let position = rng.gen_range(1..live.len());
            let name = free_name(&live, &freed, rng);
            freed.push(std::mem::replace(&mut live[position].1, name.clone()));
            steps.push(Step::RenameFamily { family: live[position].0, name });
        } else if roll < 24 {
            steps.push(Step::Flush);
        } else if roll < 26 || step == 30 {
            // One reopen at least, so that a new manifest snapshot carries the lifecycle.
            steps.push(Step::Reopen);
        } else {
            let families: Vec<FamilyIndex> = live.iter().map(|(family, _)| *family).collect();
            let write = (0..rng.gen_range(1..=3)).map(|_| random_operation(rng, &families, step, 25, 300)).collect();
            steps.push(Step::Write { write, sync: rng.gen_bool(0.25) });
        }
    }
    steps
}

/// The canonical workloads, varied by `seed`: put+sync, flush, compaction, manifest switch,
/// column family lifecycle.
pub fn canonical_workloads(seed: u64) -> Vec<Workload> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut put_sync = Vec::new();
    for step in 0..24 {
        put_sync.push(Step::Write { write: random_write(&mut rng, step, 20, 3, 120), sync: rng.gen_bool(0.5) });
    }
    let mut flush = Vec::new();
    for step in 0..40 {
        flush.push(Step::Write { write: random_write(&mut rng, step, 40, 2, 300), sync: rng.gen_bool(0.1) });
        if step % 15 == 14 {
            flush.push(Step::Flush);
        }
    }
    let mut compaction = Vec::new();
    for step in 0..70 {
        compaction.push(Step::Write { write: random_write(&mut rng, step, 60, 2, 400), sync: false });
        if step % 20 == 19 {
            compaction.push(Step::Flush);
        }
    }
    compaction.push(Step::CompactAll);
    compaction.push(Step::Write { write: random_write(&mut rng, 70, 60, 2, 100), sync: true });
    let mut manifest_switch = Vec::new();
    for round in 0..3 {
        for step in 0..6 {
            let sync = step == 5 || rng.gen_bool(0.2);
            manifest_switch.push(Step::Write { write: random_write(&mut rng, round * 10 + step, 15, 3, 80), sync });
        }
        if round == 1 {
            manifest_switch.push(Step::Flush);
        }
        manifest_switch.push(Step::Reopen);
    }
    let lifecycle = column_family_lifecycle(&mut rng);
    let mut transactions = Vec::new();
    for step in 0..30 {
        let write = random_write(&mut rng, step, 30, 4, 200);
        if rng.gen_bool(0.7) {
            transactions.push(Step::Transaction { write, sync: rng.gen_bool(0.3), spill: false });
        } else {
            transactions.push(Step::Write { write, sync: false });
        }
        if step % 12 == 11 {
            transactions.push(Step::Flush);
        }
    }
    let two_phase = two_phase_commit(&mut rng);
    let spilled = spilled_transactions(&mut rng);
    // Key-value separation: flushes write blob files beside their tables, compactions carry
    // references and record garbage, and the overwrites leave blob files mostly garbage so that
    // the last compactions move their live values (blob garbage collection).
    let writes = (0..48)
        .map(|step| Step::Write { write: random_write(&mut rng, step, 24, 2, 400), sync: rng.gen_bool(0.1) })
        .collect();
    let mut blob_files = with_maintenance(writes, 12, 35);
    blob_files.push(Step::Write { write: random_write(&mut rng, 48, 24, 2, 400), sync: true });
    // Range deletes: their records in the log, their move into the manifest at flushes (with
    // tables they cover whole removed in the same edit), compactions dropping what they cover
    // and the edit that retires them.
    let writes = (0..60)
        .map(|step| {
            let mut write = random_write(&mut rng, step, 60, 3, 120);
            if rng.gen_bool(0.2) {
                let start = rng.gen_range(0..60);
                let longest = if rng.gen_bool(0.2) { 60 } else { 12 };
                let end = start + rng.gen_range(1..longest);
                write.push(Operation { range_end: Some(key(end)), ..Operation::plain(0, key(start), None) });
            }
            Step::Write { write, sync: rng.gen_bool(0.1) }
        })
        .collect();
    let range_deletes = with_maintenance(writes, 15, 44);
    // Time to live: puts with expiries on both sides of the workload's fixed clock, so that
    // some read as deletes from the start (hiding older values, written as deletes by the
    // flush), between flushes and compactions that must keep or drop them by their expiry.
    let writes = (0..60)
        .map(|step| {
            let mut write = random_write(&mut rng, step, 40, 3, 120);
            for operation in &mut write {
                if operation.value.is_some() && rng.gen_bool(0.5) {
                    operation.expires_at_us = Some(CLOCK_US - 5_000_000 + rng.gen_range(0..10_000_000));
                }
            }
            Step::Write { write, sync: rng.gen_bool(0.1) }
        })
        .collect();
    let mut expiry = with_maintenance(writes, 15, 44);
    expiry.push(Step::Write { write: random_write(&mut rng, 60, 40, 2, 120), sync: true });
    // Merge operands over puts, deletes and each other, folded by flushes and compactions.
    let writes = (0..60)
        .map(|step| {
            let mut write = random_write(&mut rng, step, 20, 3, 40);
            for operation in &mut write {
                if operation.value.is_some() && rng.gen_bool(0.6) {
                    operation.merge = true;
                    operation.value = Some(format!("m{step}").into_bytes());
                }
            }
            Step::Write { write, sync: rng.gen_bool(0.1) }
        })
        .collect();
    let mut merges = with_maintenance(writes, 15, 44);
    merges.push(Step::Write { write: random_write(&mut rng, 60, 20, 2, 40), sync: true });
    // Single deletes where their contract holds: every key is put once, then single-deleted
    // (sometimes put again once and single-deleted again), between flushes and compactions, so
    // that the pairs meet in memtables, in flushes and in compactions of several levels.
    let mut put_once: Vec<u64> = Vec::new();
    let writes = (0..70)
        .map(|step| {
            let mut write = Vec::new();
            for slot in 0..rng.gen_range(1..4u64) {
                let number = 2000 + step as u64 * 4 + slot;
                write.push(Operation::plain(0, key(number), Some(value(number, step, rng.gen_range(0..100)))));
                put_once.push(number);
            }
            if put_once.len() > 6 && rng.gen_bool(0.7) {
                let number = put_once.remove(rng.gen_range(0..put_once.len()));
                write.push(Operation { single_delete: true, ..Operation::plain(0, key(number), None) });
            }
            Step::Write { write, sync: rng.gen_bool(0.1) }
        })
        .collect();
    let single_deletes = with_maintenance(writes, 12, 40);
    vec![
        Workload { name: "put-sync", options: small_options(), steps: put_sync },
        Workload { name: "flush", options: small_options(), steps: flush },
        Workload {
            name: "compaction",
            options: Options { memtable_size_bytes: 4096, ..small_options() },
            steps: compaction,
        },
        Workload { name: "manifest-switch", options: small_options(), steps: manifest_switch },
        Workload { name: "column-families", options: small_options(), steps: lifecycle },
        Workload { name: "transactions", options: small_options(), steps: transactions },
        Workload { name: "two-phase-commit", options: small_options(), steps: two_phase },
        Workload { name: "spilled-transactions", options: small_options(), steps: spilled },
        Workload {
            name: "blob-files",
            options: Options {
                memtable_size_bytes: 4096,
                min_blob_size_bytes: Some(100),
                blob_garbage_collection_ratio: 0.3,
                blob_garbage_collection_age_cutoff: 0.25,
                ..small_options()
            },
            steps: blob_files,
        },
        Workload {
            name: "range-deletes",
            options: Options { memtable_size_bytes: 4096, ..small_options() },
            steps: range_deletes,
        },
        Workload {
            name: "expiry",
            options: Options {
                memtable_size_bytes: 4096,
                clock: std::sync::Arc::new(riptide::ManualClock::new(CLOCK_US)),
                ..small_options()
            },
            steps: expiry,
        },
        Workload {
            name: "single-deletes",
            options: Options { memtable_size_bytes: 4096, ..small_options() },
            steps: single_deletes,
        },
        Workload {
            name: "merges",
            options: Options {
                memtable_size_bytes: 4096,
                merge_operator: Some(std::sync::Arc::new(AppendOperator)),
                ..small_options()
            },
            steps: merges,
        },
    ]
}
