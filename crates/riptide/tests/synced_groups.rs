//! Synced writes from several threads share syncs of the log: through the sync stage while few
//! are in flight (`db/sync_stage.rs`), through the write queue's groups when more are
//! (`db/write_queue.rs`). However they share them and whoever runs the sync, a synced write's
//! promise must hold, which these tests check under a power loss in the middle of the writes:
//! - every write acknowledged to a synced writer survives, also when it shared its group with
//!   unsynced writes or was led by an unsynced writer;
//! - what survives of each thread's writes is a prefix of them (the log keeps one order);
//! - every writer returns, also the ones that pause between writes.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use riptide::fs::{FaultFileSystem, MemFileSystem, PowerLossMode};
use riptide::{Db, ReadOptions, SyncMode, WriteOptions};

use common::{dump, small_options};

/// Above the largest batch that writes itself without queueing (1 MiB).
const LARGE_VALUE_BYTES: usize = (1 << 20) + 1;

fn thread_key(thread: u64, index: u64) -> Vec<u8> {
    format!("t{thread:02}-{index:06}").into_bytes()
}

/// What one writer thread saw: how many writes it made and which of them were acknowledged
/// after a sync.
struct Written {
    thread: u64,
    attempted: u64,
    last_synced: Option<u64>,
}

/// Runs `synced_threads` writers of synced single puts and `unsynced_threads` writers of
/// unsynced ones until the file system crashes under them (once `crash_after_synced` synced
/// writes have been acknowledged in all: a count, not a time, so a loaded machine still crashes
/// mid-run), drops what a power loss drops, reopens and checks the promises above.
fn crash_in_the_middle(synced_threads: u64, unsynced_threads: u64, crash_after_synced: u64, seed: u64) {
    crash_in_the_middle_with(synced_threads, unsynced_threads, LARGE_VALUE_BYTES, crash_after_synced, seed);
}

/// [`crash_in_the_middle`] with unsynced values of `unsynced_value_bytes`.
fn crash_in_the_middle_with(
    synced_threads: u64,
    unsynced_threads: u64,
    unsynced_value_bytes: usize,
    crash_after_synced: u64,
    seed: u64,
) {
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let path = Path::new("/synced-groups");
    let options = riptide::Options { wal_sync_mode: SyncMode::None, ..small_options(Arc::new(fault.clone())) };
    let db = Arc::new(Db::open(path, options.clone()).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let synced_acknowledged = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..synced_threads + unsynced_threads)
        .map(|thread| {
            let db = Arc::clone(&db);
            let stop = Arc::clone(&stop);
            let synced_acknowledged = Arc::clone(&synced_acknowledged);
            let sync = thread < synced_threads;
            std::thread::spawn(move || {
                let mut written = Written { thread, attempted: 0, last_synced: None };
                let limit = if sync { 20_000 } else { 40 };
                while !stop.load(Ordering::Relaxed) && written.attempted < limit {
                    let index = written.attempted;
                    written.attempted += 1;
                    let mut value = format!("value-{seed}-{thread}-{index}").into_bytes();
                    if !sync {
                        // Larger than a self-service write may be, unsynced writes queue and
                        // share groups with synced ones (and lead some of them); smaller, they
                        // write themselves between the synced writes of the sync stage.
                        value.resize(unsynced_value_bytes.max(value.len()), b'.');
                    }
                    if db.put_opt(&thread_key(thread, index), &value, &WriteOptions { sync }).is_err() {
                        break;
                    }
                    if sync {
                        written.last_synced = Some(index);
                        synced_acknowledged.fetch_add(1, Ordering::Release);
                    }
                    // Some writers pause now and then, so that groups form in varied sizes.
                    if thread % 2 == 1 && index % 16 == 15 {
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
                written
            })
        })
        .collect();
    while synced_acknowledged.load(Ordering::Acquire) < crash_after_synced {
        std::thread::yield_now();
    }
    // Every mutation from here on fails: the writers in flight get errors and stop.
    fault.crash_after(Some(fault.mutating_operation_count()));
    stop.store(true, Ordering::Relaxed);
    let written: Vec<Written> = writers.into_iter().map(|writer| writer.join().expect("writer")).collect();
    drop(db);
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    let db = Db::open(path, riptide::Options { file_system: Arc::new(memory.clone()), ..options })
        .expect("reopen after the power loss");
    let contents = dump(&db, &ReadOptions::default());
    let mut survivors: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for key in contents.keys() {
        let text = String::from_utf8(key.clone()).expect("keys are text");
        let (thread, index) = text[1..].split_once('-').expect("thread-index");
        survivors.entry(thread.parse().expect("thread")).or_default().push(index.parse().expect("index"));
    }
    let mut synced_acknowledged = 0;
    for writer in &written {
        let indexes = survivors.get(&writer.thread).cloned().unwrap_or_default();
        let expected_prefix: Vec<u64> = (0..indexes.len() as u64).collect();
        assert_eq!(
            indexes, expected_prefix,
            "seed {seed}: thread {} kept writes that are not a prefix of its own",
            writer.thread
        );
        assert!(indexes.len() as u64 <= writer.attempted, "seed {seed}: writes nobody made");
        if let Some(last) = writer.last_synced {
            synced_acknowledged += last + 1;
            assert!(
                indexes.len() as u64 > last,
                "seed {seed}: thread {} lost synced write {last} (kept {})",
                writer.thread,
                indexes.len()
            );
        }
    }
    assert!(synced_acknowledged > 0, "seed {seed}: no synced write was acknowledged before the crash");
}

#[test]
fn synced_writers_alone_keep_every_acknowledged_write() {
    for seed in 0..3 {
        crash_in_the_middle(4, 0, 400, seed);
    }
}

#[test]
fn synced_writers_beside_unsynced_ones_keep_every_acknowledged_write() {
    // Shown to fail (four runs of four) when a group synced only if its leader's write asked
    // for it; with 6 seeds, one run in three.
    for seed in 0..20 {
        crash_in_the_middle(3, 3, 300, seed);
    }
}

#[test]
fn two_synced_writers_keep_every_acknowledged_write() {
    for seed in 0..3 {
        crash_in_the_middle(2, 1, 200, seed);
    }
}

#[test]
fn synced_writers_beside_small_unsynced_ones_keep_every_acknowledged_write() {
    // Both kinds write themselves (self-service): the synced ones wait in the sync stage while
    // the unsynced ones hand their records over, and the 16 KiB memtables switch logs often.
    for seed in 0..10 {
        crash_in_the_middle_with(3, 3, 100, 300, seed);
    }
}

#[test]
fn many_synced_writers_through_the_stage_and_the_queue_keep_every_acknowledged_write() {
    // More synced writers than the stage takes: some go through the queue's groups, some
    // through the stage, and both kinds of sync run in one run.
    for seed in 0..4 {
        crash_in_the_middle_with(8, 2, 100, 800, seed);
    }
}
