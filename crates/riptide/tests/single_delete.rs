//! Single deletes (`Db::single_delete`, `WriteBatch::single_delete`): a delete of a key written
//! once, which reads see as a delete and which flush and compaction drop together with the put
//! it meets, so that no tombstone travels to the last level; snapshots between the two keep
//! both; a broken contract affects only its own key.

mod common;

use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, ReadOptions, WriteBatch};

use common::{dump, key, small_options, value};

/// The versions of `user_key` the database stores (memtables and tables).
fn stored_versions(db: &Db, user_key: &[u8]) -> usize {
    let family = db.default_column_family();
    riptide::internals::debug::key_versions(db, &family, user_key).expect("versions").1.len()
}

#[test]
fn a_single_delete_hides_the_key_and_goes_with_its_put_at_the_flush() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    for number in 0..100 {
        db.put(&key(number), &value(number, 1, 40)).unwrap();
    }
    for number in (0..100).step_by(2) {
        db.single_delete(&key(number)).unwrap();
    }
    assert_eq!(db.get(&key(10)).unwrap(), None);
    assert_eq!(db.get(&key(11)).unwrap(), Some(value(11, 1, 40)));
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 50);
    db.flush().unwrap();
    assert_eq!(stored_versions(&db, &key(10)), 0, "the pair met in the memtable and both went");
    assert_eq!(stored_versions(&db, &key(11)), 1);
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 50);
}

#[test]
fn a_single_delete_meets_its_put_in_a_compaction_and_both_go() {
    let memory = MemFileSystem::new();
    // Level 0 is compacted only when asked, so that the put and the single delete are still
    // in two tables when the test looks (a background compaction would pair them first).
    let options = riptide::Options {
        level0_compaction_trigger_files: 100,
        level0_slowdown_writes_files: 200,
        level0_stop_writes_files: 300,
        ..small_options(Arc::new(memory.clone()))
    };
    let db = Db::open("/db", options.clone()).unwrap();
    for number in 0..400 {
        db.put(&key(number), &value(number, 1, 40)).unwrap();
    }
    db.flush().unwrap();
    for number in 0..200 {
        db.single_delete(&key(number)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(stored_versions(&db, &key(5)), 2, "the put and the single delete, in two tables");
    assert_eq!(db.get(&key(5)).unwrap(), None);
    db.compact_all().unwrap();
    assert_eq!(stored_versions(&db, &key(5)), 0);
    let stats = db.stats();
    let entries: u64 = db.approximate_range_stats(&db.default_column_family(), b"", b"\xff").unwrap().table_entries;
    assert!(entries <= 200, "no tombstone is left for the deleted half: {entries} entries\n{stats}");
    db.close().unwrap();
    let db = Db::open("/db", options).unwrap();
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 200);
    assert_eq!(db.get(&key(5)).unwrap(), None);
    assert_eq!(db.get(&key(205)).unwrap(), Some(value(205, 1, 40)));
}

#[test]
fn a_snapshot_between_the_put_and_the_single_delete_keeps_both() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    db.put(b"k", b"v").unwrap();
    let snapshot = db.snapshot();
    db.single_delete(b"k").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    let old = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    assert_eq!(db.get_opt(b"k", &old).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(db.get(b"k").unwrap(), None);
    drop(old);
    drop(snapshot);
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(stored_versions(&db, b"k"), 0, "once the snapshot is gone the pair goes");
}

#[test]
fn a_key_written_again_after_its_single_delete_is_visible() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"1");
    batch.single_delete(b"k");
    batch.put(b"k", b"2");
    db.write(batch).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"2"[..]));
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"2"[..]));
    db.single_delete(b"k").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
}

/// The contract says a key must be written at most once before its single delete. Breaking
/// it may bring the key's older put back, and must never touch another key.
#[test]
fn a_broken_contract_only_affects_its_own_key() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    for number in 0..200 {
        db.put(&key(number), b"first").unwrap();
    }
    db.flush().unwrap();
    db.put(&key(50), b"second").unwrap();
    db.single_delete(&key(50)).unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    let contents = dump(&db, &ReadOptions::default());
    for number in (0..200).filter(|&number| number != 50) {
        assert_eq!(contents.get(&key(number)).map(Vec::as_slice), Some(&b"first"[..]), "key {number}");
    }
    // Key 50 reads as deleted or as its older value, never as anything else.
    assert!(matches!(contents.get(&key(50)).map(Vec::as_slice), None | Some(b"first")));
}

/// Story: the model test first allowed a single delete after a plain delete (put, delete, put,
/// single delete, with a snapshot between). A compaction under the snapshot dropped the plain
/// delete as shadowed by the newer put; once the snapshot was gone the single delete met that
/// put, both went, and the first put was visible again. That is the contract RocksDB documents
/// too (single deletes must not be mixed with deletes), so the contract says so and this test
/// pins down what the misuse does: the key shows its own older value, nothing else changes.
#[test]
fn mixing_a_plain_delete_in_only_affects_that_key() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    db.put(b"other", b"kept").unwrap();
    db.put(b"k", b"first").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    db.delete(b"k").unwrap();
    db.put(b"k", b"second").unwrap();
    let snapshot = db.snapshot();
    db.single_delete(b"k").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    drop(snapshot);
    db.compact_all().unwrap();
    assert!(matches!(db.get(b"k").unwrap().as_deref(), None | Some(b"first")));
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"kept"[..]));
}

/// Regression: the metamorphic test (seed 787899) read back a put that a single delete had
/// deleted. The key was put, single-deleted, put again and single-deleted again, and the flush
/// that wrote the second put with the first single delete dropped that single delete as
/// shadowed by the put. The first put, already in the last level, then had nothing over it
/// but the second put and its single delete, which the next compaction dropped as a pair: the
/// first put came back. A single delete now outlives the versions that shadow it until it has
/// met its put or reached the last level.
#[test]
fn a_single_delete_shadowed_by_a_later_put_still_covers_the_put_before_it() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    let target = key(7);
    db.put(&target, &value(7, 1, 40)).unwrap();
    db.put(&key(8), &value(8, 1, 40)).unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    // The first put is in the last level. A single delete and a second put share a memtable.
    db.single_delete(&target).unwrap();
    db.put(&target, &value(7, 2, 40)).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(&target).unwrap(), Some(value(7, 2, 40)));
    // The second single delete, in a table of its own.
    db.single_delete(&target).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(&target).unwrap(), None);
    // Everything meets in one compaction: both pairs go, and nothing comes back.
    db.compact_all().unwrap();
    assert_eq!(db.get(&target).unwrap(), None, "the first put came back");
    assert_eq!(stored_versions(&db, &target), 0, "both pairs went");
    assert_eq!(db.get(&key(8)).unwrap(), Some(value(8, 1, 40)));
    let reopened = {
        drop(db);
        Db::open("/db", small_options(Arc::new(memory))).unwrap()
    };
    assert_eq!(reopened.get(&target).unwrap(), None);
}
