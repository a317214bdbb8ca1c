//! Compaction behaviour: trivial moves, tombstones reaching the bottom, and levels staying
//! consistent across reopen.

mod common;

use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, ReadOptions};

use common::{dump, key, small_options, value};

/// Regression test. The story: a trivial move (a file moved down a level by a manifest edit
/// alone) gave the moved file a second handle in the new version and marked the old handle
/// obsolete, so when the old version was dropped the file was deleted while the current version
/// still named it; reads then failed and the next open reported a missing table. Sequential
/// keys make non-overlapping files, which are moved rather than rewritten.
#[test]
fn trivial_moves_keep_the_moved_file() {
    let memory = MemFileSystem::new();
    let options = small_options(Arc::new(memory.clone()));
    let db = Db::open("/moves", options.clone()).expect("open");
    for i in 0..30000u64 {
        db.put(&key(i), &value(i, 1, 100)).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_background_work().expect("idle");
    let stats = db.stats();
    assert!(stats.trivial_moves > 0, "the workload was meant to move files:\n{stats}");
    for i in 0..30000u64 {
        assert_eq!(db.get(&key(i)).expect("get"), Some(value(i, 1, 100)), "key {i}");
    }
    db.close().expect("close");
    let db = Db::open("/moves", options).expect("reopen finds every table");
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 30000);
}

#[test]
fn tombstones_vanish_at_the_bottom() {
    let memory = MemFileSystem::new();
    let db = Db::open("/tombstones", small_options(Arc::new(memory.clone()))).expect("open");
    for i in 0..2000u64 {
        db.put(&key(i), &value(i, 1, 50)).expect("put");
    }
    for i in 0..2000u64 {
        db.delete(&key(i)).expect("delete");
    }
    db.compact_all().expect("compact");
    assert!(dump(&db, &ReadOptions::default()).is_empty());
    let stats = db.stats();
    assert_eq!(stats.total_table_bytes(), 0, "deleted data and its tombstones should be gone:\n{stats}");
}

#[test]
fn levels_fill_and_data_survives_reopen() {
    let memory = MemFileSystem::new();
    let options = small_options(Arc::new(memory.clone()));
    let db = Db::open("/levels", options.clone()).expect("open");
    for round in 0..4u64 {
        for i in 0..3000u64 {
            let n = (i * 7919 + round * 31) % 3000;
            db.put(&key(n), &value(n, round, 80)).expect("put");
        }
    }
    db.wait_for_background_work().expect("idle");
    let counts = db.level_file_counts();
    assert!(counts[1..].iter().sum::<usize>() > 0, "nothing reached level 1: {counts:?}");
    let before = dump(&db, &ReadOptions::default());
    assert_eq!(before.len(), 3000);
    db.close().expect("close");
    let db = Db::open("/levels", options).expect("reopen");
    assert_eq!(dump(&db, &ReadOptions::default()), before);
}
