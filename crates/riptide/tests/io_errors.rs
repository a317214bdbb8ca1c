//! I/O-error tests: EIO and ENOSPC on the Nth file-system operation (once, or from then on),
//! for every N of a small workload. The error must reach the caller, no write may be
//! acknowledged unless it is durable under its sync mode, a failed sync must never be treated
//! as if it succeeded, nothing may panic, and the database must reopen afterwards with every
//! acknowledged synced write.

mod common;

use std::path::Path;
use std::sync::Arc;

use riptide::fs::{FaultFileSystem, FaultKind, FaultPlan, MemFileSystem, PowerLossMode};
use riptide::{Db, ReadOptions, WriteOptions};

use common::{dump, key, small_options, value};

const DB: &str = "/io";

/// Key-value pairs in write order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Runs the workload; returns the keys (with values) acknowledged as synced, and whether any
/// operation reported an error.
fn workload(db: &Db) -> (Entries, bool) {
    let mut acknowledged = Vec::new();
    let mut saw_error = false;
    for i in 0..90u64 {
        let k = key(i);
        let v = value(i, 1, 200);
        match db.put_opt(&k, &v, &WriteOptions { sync: true }) {
            Ok(()) => {
                assert!(!saw_error, "write {i} acknowledged after an earlier failure: a failed sync must stick");
                acknowledged.push((k, v));
            }
            Err(error) => {
                assert!(error.is_io() || matches!(error, riptide::Error::Closed(_)), "unexpected error kind: {error}");
                saw_error = true;
            }
        }
        if i % 30 == 29 && db.flush().is_err() {
            saw_error = true;
        }
    }
    (acknowledged, saw_error)
}

fn sweep(kind: FaultKind, persistent: bool) {
    let total = {
        let memory = MemFileSystem::new();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        let db = Db::open(DB, small_options(Arc::new(fault.clone()))).expect("open");
        let start = fault.operation_count();
        let (_, saw_error) = workload(&db);
        assert!(!saw_error);
        db.close().expect("close");
        fault.operation_count() - start
    };
    let mut failures_reported = 0;
    for n in 1..=total {
        let memory = MemFileSystem::new();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        let db = Db::open(DB, small_options(Arc::new(fault.clone()))).expect("open");
        fault.set_plan(Some(FaultPlan {
            fail_at_operation: fault.operation_count() + n,
            kind,
            persistent,
            include_reads: false,
        }));
        let (acknowledged, saw_error) = workload(&db);
        let close_result = db.close();
        if fault.injected_failure_count() > 0 {
            // Either someone was told, or the fault hit work nobody depends on (removing a file
            // that is already garbage) and every write was acknowledged.
            let told = saw_error || close_result.is_err();
            assert!(told || acknowledged.len() == 90, "fault {n} was injected, writes were lost, nobody was told");
            failures_reported += usize::from(told);
        }
        // The machine loses power after the failure: only synced data counts.
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        let reopened = Db::open(DB, small_options(Arc::new(memory.clone())))
            .unwrap_or_else(|error| panic!("fault at {n}: reopen failed: {error}"));
        let contents = dump(&reopened, &ReadOptions::default());
        for (k, v) in &acknowledged {
            assert_eq!(contents.get(k), Some(v), "fault at {n}: acknowledged synced write lost");
        }
        for (k, v) in &contents {
            let i: u64 = String::from_utf8_lossy(&k[3..9]).parse().expect("key number");
            assert_eq!(v, &value(i, 1, 200), "fault at {n}: a value that was never written");
        }
    }
    assert!(failures_reported > 0);
}

#[test]
fn eio_once_at_every_operation() {
    sweep(FaultKind::Eio, false);
}

#[test]
fn enospc_persistent_at_every_operation() {
    sweep(FaultKind::Enospc, true);
}

#[test]
fn eio_persistent_at_every_operation() {
    sweep(FaultKind::Eio, true);
}

#[test]
fn errors_during_open_are_reported_and_leave_a_database_that_opens() {
    // Build a database with data in WAL and tables, then fail each operation of the reopen.
    let template = || {
        let memory = MemFileSystem::new();
        let db = Db::open(DB, small_options(Arc::new(memory.clone()))).expect("open");
        for i in 0..200u64 {
            db.put(&key(i), &value(i, 2, 100)).expect("put");
        }
        db.close().expect("close");
        memory
    };
    let total = {
        let memory = template();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        let db = Db::open(DB, small_options(Arc::new(fault.clone()))).expect("open");
        let count = fault.operation_count();
        drop(db);
        count
    };
    for n in 1..=total {
        let memory = template();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        fault.set_plan(Some(FaultPlan {
            fail_at_operation: n,
            kind: FaultKind::Eio,
            persistent: false,
            include_reads: true,
        }));
        match Db::open(DB, small_options(Arc::new(fault.clone()))) {
            Ok(db) => drop(db),
            Err(error) => assert!(error.is_io(), "fault {n} during open gave {error}"),
        }
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        let db = Db::open(DB, small_options(Arc::new(memory.clone())))
            .unwrap_or_else(|error| panic!("fault {n} during open: the next open failed: {error}"));
        for i in 0..200u64 {
            assert_eq!(db.get(&key(i)).expect("get"), Some(value(i, 2, 100)), "fault {n}: key {i}");
        }
    }
}

#[test]
fn read_only_directory_fails_at_open_with_an_error() {
    // Running as root ignores permissions, so use a path under a regular file instead: creating
    // the directory fails the same way a read-only file system does, with an I/O error.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").expect("write");
    let error = Db::open(Path::new(&file).join("db"), riptide::Options::default()).expect_err("cannot open");
    assert!(error.is_io(), "{error}");
}
