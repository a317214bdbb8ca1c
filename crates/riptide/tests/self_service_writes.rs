//! Self-service writes (`db/self_service.rs`): small unsynced writes from many threads that
//! sequence, log, insert and publish themselves, beside writes that still go through the
//! queue's leaders (synced writes, transactions, memtable switches, flushes).
//!
//! Each test runs threads against tiny memtables, so that self-service writes keep meeting
//! switches and flushes, and checks what a user relies on:
//! - a write is visible to its own thread when the call returns, and its record was handed to
//!   the file system (it survives a process crash);
//! - a snapshot never changes: the visible sequence never covers a write that is not yet in its
//!   memtable (a scan repeated under the same snapshot sees the same entries);
//! - each thread's acknowledged writes survive, in order, with no holes;
//! - a failed log write fails the writers it concerns, hangs none, and acknowledges nothing
//!   that is lost.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use riptide::fs::{FaultFileSystem, FaultKind, FaultPlan, MemFileSystem};
use riptide::{Db, ReadOptions, TransactionOptions, WriteOptions};

use common::{dump, small_options};

const WRITERS: u64 = 6;

fn thread_key(thread: u64, index: u64) -> Vec<u8> {
    format!("t{thread}-{index:06}").into_bytes()
}

fn thread_value(thread: u64, index: u64) -> Vec<u8> {
    format!("value of {thread}/{index} ").repeat(3).into_bytes()
}

/// The indexes present for each writer thread in `contents`.
fn indexes_by_thread(contents: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<u64, Vec<u64>> {
    let mut by_thread: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (key, value) in contents {
        let text = String::from_utf8(key.clone()).expect("utf-8 key");
        let Some(rest) = text.strip_prefix('t') else { continue };
        let Some((thread, index)) = rest.split_once('-') else { continue };
        let (thread, index): (u64, u64) = (thread.parse().expect("thread"), index.parse().expect("index"));
        assert_eq!(value, &thread_value(thread, index), "wrong value for {text}");
        by_thread.entry(thread).or_default().push(index);
    }
    by_thread
}

/// Runs `WRITERS` threads of single puts (thread 0 syncs every 50th, thread 1 commits every
/// 40th in a transaction), each reading its write back at once, while a reader checks that
/// scans under one snapshot never change. Returns how many writes each thread had
/// acknowledged when it stopped (at `writes_per_thread`, or at its first error).
fn run_writers(db: &Arc<Db>, writes_per_thread: u64, stop: &Arc<AtomicBool>) -> Vec<u64> {
    let barrier = Arc::new(Barrier::new(WRITERS as usize + 1));
    let writers: Vec<_> = (0..WRITERS)
        .map(|thread| {
            let (db, barrier, stop) = (Arc::clone(db), Arc::clone(&barrier), Arc::clone(stop));
            std::thread::spawn(move || {
                barrier.wait();
                let mut acknowledged = 0;
                for index in 0..writes_per_thread {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let (key, value) = (thread_key(thread, index), thread_value(thread, index));
                    let written = if thread == 0 && index % 50 == 49 {
                        db.put_opt(&key, &value, &WriteOptions { sync: true })
                    } else if thread == 1 && index % 40 == 39 {
                        db.begin(&TransactionOptions::default()).and_then(|transaction| {
                            transaction.put(&key, &value)?;
                            transaction.commit()
                        })
                    } else {
                        db.put(&key, &value)
                    };
                    if written.is_err() {
                        break;
                    }
                    acknowledged += 1;
                    let read = db.get(&key).expect("read back an acknowledged write");
                    assert_eq!(read.as_deref(), Some(&value[..]), "thread {thread} does not see its write {index}");
                }
                acknowledged
            })
        })
        .collect();
    let reader = {
        let (db, stop) = (Arc::clone(db), Arc::clone(stop));
        std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Acquire) && scans < 200 {
                let snapshot = db.snapshot();
                let options = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
                let first = dump(&db, &options);
                std::thread::sleep(Duration::from_micros(300));
                let second = dump(&db, &options);
                assert_eq!(
                    first.len(),
                    second.len(),
                    "a scan under one snapshot changed: a write became visible before it was inserted"
                );
                assert!(first == second, "a scan under one snapshot changed");
                for (thread, indexes) in indexes_by_thread(&first) {
                    // A thread's writes are sequenced in its order, so what a snapshot shows
                    // of them is a prefix of them.
                    let expected: Vec<u64> = (0..indexes.len() as u64).collect();
                    assert_eq!(indexes, expected, "thread {thread}'s visible writes have a hole");
                }
                scans += 1;
            }
        })
    };
    barrier.wait();
    let acknowledged = writers.into_iter().map(|writer| writer.join().expect("writer")).collect();
    stop.store(true, Ordering::Release);
    reader.join().expect("reader");
    acknowledged
}

/// Every thread's acknowledged writes are in `contents`, and what is there of each thread is a
/// prefix of its writes.
fn assert_acknowledged_present(contents: &BTreeMap<Vec<u8>, Vec<u8>>, acknowledged: &[u64]) {
    let by_thread = indexes_by_thread(contents);
    for (thread, &count) in acknowledged.iter().enumerate() {
        let indexes = by_thread.get(&(thread as u64)).cloned().unwrap_or_default();
        let expected: Vec<u64> = (0..indexes.len() as u64).collect();
        assert_eq!(indexes, expected, "thread {thread}: recovered writes are not a prefix");
        assert!(
            indexes.len() as u64 >= count,
            "thread {thread}: {count} writes acknowledged, {} recovered",
            indexes.len()
        );
    }
}

#[test]
fn concurrent_small_writes_are_visible_in_order_and_survive_reopen() {
    let memory = MemFileSystem::new();
    let path = Path::new("/self-service");
    let db = Arc::new(Db::open(path, small_options(Arc::new(memory.clone()))).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = run_writers(&db, 1500, &stop);
    assert!(acknowledged.iter().all(|&count| count == 1500), "every write succeeds: {acknowledged:?}");
    let stats = db.stats();
    assert!(stats.flush_count > 3, "the memtables switched and flushed during the run ({} flushes)", stats.flush_count);
    let before = dump(&db, &ReadOptions::default());
    assert_acknowledged_present(&before, &acknowledged);
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().expect("close"),
        Err(_) => panic!("the writers still hold the database"),
    }
    let reopened = Db::open(path, small_options(Arc::new(memory.clone()))).expect("reopen");
    assert_eq!(dump(&reopened, &ReadOptions::default()), before);
}

#[test]
fn acknowledged_writes_survive_a_process_crash() {
    // The process dies while the threads write: every file-system operation from then on
    // fails, as nothing more reaches the disk. Whatever was handed to the file system stays
    // (a process crash keeps the kernel's page cache), so every acknowledged write must come
    // back, with or without a sync.
    for seed in 0..3u64 {
        let memory = MemFileSystem::new();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        let path = Path::new("/crash");
        let db = Arc::new(Db::open(path, small_options(Arc::new(fault.clone()))).expect("open"));
        let stop = Arc::new(AtomicBool::new(false));
        let crasher = {
            let fault = fault.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20 + 15 * seed));
                fault.crash_after(Some(fault.mutating_operation_count()));
            })
        };
        let acknowledged = run_writers(&db, 4000, &stop);
        crasher.join().expect("crasher");
        assert!(fault.is_crashed());
        drop(db);
        let reopened = Db::open(path, small_options(Arc::new(memory.clone()))).expect("reopen after the crash");
        assert_acknowledged_present(&dump(&reopened, &ReadOptions::default()), &acknowledged);
    }
}

#[test]
fn a_failed_log_write_fails_writers_and_hangs_none() {
    // A log write fails (EIO from then on): the writers whose records it held, and every later
    // one, get errors; none waits forever for a predecessor's publication; nothing acknowledged
    // is lost after a restart.
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let path = Path::new("/failing");
    let db = Arc::new(Db::open(path, small_options(Arc::new(fault.clone()))).expect("open"));
    fault.set_plan(Some(FaultPlan {
        fail_at_operation: fault.operation_count() + 400,
        kind: FaultKind::Eio,
        persistent: true,
        include_reads: false,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = run_writers(&db, 3000, &stop);
    assert!(fault.injected_failure_count() > 0, "the plan fired");
    assert!(acknowledged.iter().all(|&count| count < 3000), "every writer met the failure: {acknowledged:?}");
    let error = db.put(b"after", b"failure").expect_err("the database stopped");
    assert!(error.is_io() || matches!(error, riptide::Error::Closed(_)), "{error}");
    fault.set_plan(None);
    drop(db);
    let reopened = Db::open(path, small_options(Arc::new(memory.clone()))).expect("reopen after the failure");
    assert_acknowledged_present(&dump(&reopened, &ReadOptions::default()), &acknowledged);
}
