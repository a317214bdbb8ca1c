//! Column family creation, drop and rename under power loss at every mutating file-system call,
//! in every `PowerLossMode`.
//!
//! A script creates, writes, renames, drops and re-creates column families, with every write
//! synced, so every step is durable when it returns (creation, drop and rename are recorded in
//! the manifest before they return; a synced write is in the synced log). The script runs on a
//! `FaultFileSystem` that refuses every mutating call from the N-th on, for every N, and then
//! power is cut. After reopening, the database must hold exactly the state after the last
//! acknowledged step, or after the step that was in flight: the same column family names, and
//! in each the same keys and values. A dropped family must not come back; a re-created one must
//! not show its predecessor's data.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use riptide::fs::{FaultFileSystem, MemFileSystem, PowerLossMode};
use riptide::{ColumnFamily, ColumnFamilyOptions, Db, ReadOptions, WriteBatch, WriteOptions};

use common::{dump_cf, key, small_options, value};

/// Each live column family's contents, by name.
type State = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

const SYNC: WriteOptions = WriteOptions { sync: true };

/// One step of the script.
#[derive(Clone, Debug)]
enum Step {
    Create(&'static str),
    /// Puts (key number, version) into each named family, in one batch.
    Write(Vec<(&'static str, u64, u64)>),
    Delete(&'static str, u64),
    Rename(&'static str, &'static str),
    Drop(&'static str),
    Flush,
}

fn script() -> Vec<Step> {
    use Step::*;
    vec![
        Create("a"),
        Write(vec![("a", 1, 1), ("a", 2, 1), ("default", 1, 1)]),
        Create("b"),
        Write(vec![("a", 3, 2), ("b", 1, 2), ("default", 2, 2)]),
        Flush,
        Write(vec![("b", 2, 3), ("b", 3, 3)]),
        Delete("a", 1),
        Rename("b", "c"),
        Write(vec![("c", 4, 4), ("a", 4, 4)]),
        Drop("a"),
        Write(vec![("c", 5, 5), ("default", 3, 5)]),
        Create("a"),
        Write(vec![("a", 9, 6)]),
        Flush,
        Drop("c"),
        Create("b"),
        Write(vec![("b", 7, 7), ("a", 8, 7), ("default", 4, 7)]),
    ]
}

fn value_of(number: u64, version: u64) -> Vec<u8> {
    value(number, version, 30 + (number * 7 % 50) as usize)
}

/// The state after each prefix of `steps`: `states[i]` is after the first `i` steps.
fn expected_states(steps: &[Step]) -> Vec<State> {
    let mut state: State = BTreeMap::from([("default".to_string(), BTreeMap::new())]);
    let mut states = vec![state.clone()];
    for step in steps {
        match step {
            Step::Create(name) => {
                state.insert(name.to_string(), BTreeMap::new());
            }
            Step::Write(puts) => {
                for (name, number, version) in puts {
                    state.get_mut(*name).expect("family").insert(key(*number), value_of(*number, *version));
                }
            }
            Step::Delete(name, number) => {
                state.get_mut(*name).expect("family").remove(&key(*number));
            }
            Step::Rename(from, to) => {
                let contents = state.remove(*from).expect("family");
                state.insert(to.to_string(), contents);
            }
            Step::Drop(name) => {
                state.remove(*name);
            }
            Step::Flush => {}
        }
        states.push(state.clone());
    }
    states
}

fn handle(db: &Db, name: &str) -> ColumnFamily {
    db.column_family(name).unwrap_or_else(|| panic!("no column family {name}"))
}

/// Runs one step; `Err` once the file system refuses.
fn run_step(db: &Db, step: &Step) -> riptide::Result<()> {
    match step {
        Step::Create(name) => db.create_column_family(name, ColumnFamilyOptions::default()).map(drop),
        Step::Write(puts) => {
            let mut batch = WriteBatch::new();
            for (name, number, version) in puts {
                batch.put_cf(&handle(db, name), &key(*number), &value_of(*number, *version));
            }
            db.write_opt(batch, &SYNC)
        }
        Step::Delete(name, number) => {
            let mut batch = WriteBatch::new();
            batch.delete_cf(&handle(db, name), &key(*number));
            db.write_opt(batch, &SYNC)
        }
        Step::Rename(from, to) => db.rename_column_family(&handle(db, from), to),
        Step::Drop(name) => db.drop_column_family(&handle(db, name)),
        Step::Flush => db.flush(),
    }
}

/// Every live column family's contents.
fn dump(db: &Db) -> State {
    db.list_column_families()
        .into_iter()
        .map(|name| {
            let contents = dump_cf(db, &handle(db, &name), &ReadOptions::default());
            (name, contents)
        })
        .collect()
}

/// Runs the script with every mutating call from `crash_at` on refused (none when `None`);
/// returns how many steps were acknowledged and how many mutating calls the run made.
fn run_script(path: &Path, memory: &MemFileSystem, crash_at: Option<u64>) -> (usize, u64) {
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let db = Db::open(path, small_options(Arc::new(fault.clone()))).expect("open");
    let start = fault.mutating_operation_count();
    fault.crash_after(crash_at.map(|n| start + n));
    let mut acknowledged = 0;
    for step in script() {
        if run_step(&db, &step).is_err() {
            break;
        }
        acknowledged += 1;
    }
    let used = fault.mutating_operation_count() - start;
    // Refuse everything from here, so that closing writes nothing a crash would not have.
    fault.crash_after(Some(fault.mutating_operation_count()));
    drop(db);
    (acknowledged, used)
}

#[test]
fn create_drop_and_rename_survive_power_loss_at_every_call() {
    let path = Path::new("/lifecycle");
    let steps = script();
    let states = expected_states(&steps);
    let memory = MemFileSystem::new();
    let (acknowledged, total) = run_script(path, &memory, None);
    assert_eq!(acknowledged, steps.len(), "the script fails on a healthy file system");
    assert!(total > 40, "script too small: {total} mutating calls");
    {
        let db = Db::open(path, small_options(Arc::new(memory.clone()))).expect("reopen");
        assert_eq!(dump(&db), states[steps.len()], "the uninterrupted script's state after reopen");
    }
    let mut checked = 0;
    for crash_at in 0..total {
        for mode in [
            PowerLossMode::DropUnsynced,
            PowerLossMode::KeepUnsyncedPrefix { seed: crash_at },
            PowerLossMode::TornTail { seed: crash_at },
        ] {
            let memory = MemFileSystem::new();
            let (acknowledged, _) = run_script(path, &memory, Some(crash_at));
            memory.simulate_power_loss(mode);
            let db = Db::open(path, small_options(Arc::new(memory.clone())))
                .unwrap_or_else(|error| panic!("crash at call {crash_at} ({mode:?}): reopen failed: {error}"));
            let actual = dump(&db);
            let legal = &states[acknowledged..states.len().min(acknowledged + 2)];
            assert!(
                legal.contains(&actual),
                "crash at call {crash_at} ({mode:?}) after {acknowledged} acknowledged steps: recovered {actual:?}, \
                 legal: {legal:?}"
            );
            // The recovered database goes on working: a new family, a write, a reopen.
            let family = db.create_column_family("after", ColumnFamilyOptions::default()).expect("create after");
            db.put_cf(&family, b"k", b"v").expect("put after");
            drop(db);
            let db = Db::open(path, small_options(Arc::new(memory.clone()))).expect("second reopen");
            assert_eq!(db.get_cf(&handle(&db, "after"), b"k").expect("get"), Some(b"v".to_vec()));
            checked += 1;
        }
    }
    println!("{checked} crash states over {total} mutating calls");
}
