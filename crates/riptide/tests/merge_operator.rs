//! Merge operators (`Db::merge`, `WriteBatch::merge`, `Options::merge_operator`): operands
//! combine with the value beneath them in gets and in iterators in both directions, across
//! memtables, tables, snapshots, deletes, range deletes, expiries and blob values; flush and
//! compaction fold them where no reader sees them apart and keep them where one does; a failing
//! or missing operator is a typed error on read and never loses data.

mod common;

use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, MergeOperator, Options, ReadOptions, U64AddOperator, WriteBatch};

use common::small_options;

fn le(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

fn counter(db: &Db, key: &[u8]) -> Option<u64> {
    db.get(key).unwrap().map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

/// Options with the u64 adder and level 0 compacted only when asked, so that the tests decide
/// where entries lie.
fn counting_options(memory: &MemFileSystem) -> Options {
    Options {
        merge_operator: Some(Arc::new(U64AddOperator)),
        level0_compaction_trigger_files: 100,
        level0_slowdown_writes_files: 200,
        level0_stop_writes_files: 300,
        ..small_options(Arc::new(memory.clone()))
    }
}

/// The versions of `key` the database stores.
fn stored_versions(db: &Db, key: &[u8]) -> usize {
    let family = db.default_column_family();
    riptide::internals::debug::key_versions(db, &family, key).expect("versions").1.len()
}

/// An appending operator: operands joined with commas, after the existing value.
#[derive(Debug)]
struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &str {
        "test.append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = existing.into_iter().collect();
        parts.extend_from_slice(operands);
        Some(parts.join(&b","[..]))
    }
}

#[test]
fn counters_add_up_across_memtables_tables_and_reopens() {
    let memory = MemFileSystem::new();
    let options = counting_options(&memory);
    let db = Db::open("/db", options.clone()).unwrap();
    db.put(b"hits", &le(100)).unwrap();
    db.merge(b"hits", &le(1)).unwrap();
    assert_eq!(counter(&db, b"hits"), Some(101));
    db.flush().unwrap();
    db.merge(b"hits", &le(2)).unwrap();
    db.merge(b"fresh", &le(7)).unwrap();
    assert_eq!(counter(&db, b"hits"), Some(103), "operands in the memtable over a table");
    assert_eq!(counter(&db, b"fresh"), Some(7), "operands over nothing");
    db.flush().unwrap();
    db.merge(b"hits", &le(3)).unwrap();
    assert_eq!(counter(&db, b"hits"), Some(106), "operands in two tables and the memtable");
    drop(db);
    let db = Db::open("/db", options).unwrap();
    assert_eq!(counter(&db, b"hits"), Some(106), "replayed from the log");
    db.compact_all().unwrap();
    assert_eq!(counter(&db, b"hits"), Some(106));
    assert_eq!(stored_versions(&db, b"hits"), 1, "compaction folded the operands into one put");
    assert!(db.stats().merge_operands_folded >= 3);
}

#[test]
fn iterators_merge_in_both_directions_and_within_bounds() {
    let memory = MemFileSystem::new();
    let options = Options { merge_operator: Some(Arc::new(Append)), ..counting_options(&memory) };
    let db = Db::open("/db", options).unwrap();
    db.put(b"a", b"a0").unwrap();
    db.merge(b"b", b"b1").unwrap();
    db.put(b"c", b"c0").unwrap();
    db.flush().unwrap();
    db.merge(b"a", b"a1").unwrap();
    db.merge(b"b", b"b2").unwrap();
    db.delete(b"c").unwrap();
    db.merge(b"c", b"c1").unwrap();
    db.merge(b"d", b"d1").unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"a".to_vec(), b"a0,a1".to_vec()),
        (b"b".to_vec(), b"b1,b2".to_vec()),
        (b"c".to_vec(), b"c1".to_vec()),
        (b"d".to_vec(), b"d1".to_vec()),
    ];
    let mut iterator = db.iter(&ReadOptions::default()).unwrap();
    iterator.seek_to_first();
    let mut forward = Vec::new();
    while iterator.valid() {
        forward.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.next();
    }
    iterator.status().unwrap();
    assert_eq!(forward, expected);
    iterator.seek_to_last();
    let mut backward = Vec::new();
    while iterator.valid() {
        backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.prev();
    }
    backward.reverse();
    assert_eq!(backward, expected);
    // Turning around on a merged key.
    iterator.seek(b"b");
    assert_eq!(iterator.value(), b"b1,b2");
    iterator.prev();
    assert_eq!((iterator.key(), iterator.value()), (&b"a"[..], &b"a0,a1"[..]));
    iterator.next();
    assert_eq!((iterator.key(), iterator.value()), (&b"b"[..], &b"b1,b2"[..]));
    iterator.next();
    assert_eq!((iterator.key(), iterator.value()), (&b"c"[..], &b"c1"[..]));
    for (key, value) in &expected {
        assert_eq!(db.get(key).unwrap().as_ref(), Some(value));
    }
}

#[test]
fn snapshots_keep_their_operands_through_compactions() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", counting_options(&memory)).unwrap();
    db.merge(b"k", &le(1)).unwrap();
    db.merge(b"k", &le(2)).unwrap();
    let early = db.snapshot();
    db.merge(b"k", &le(4)).unwrap();
    let middle = db.snapshot();
    db.merge(b"k", &le(8)).unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    let at = |snapshot: &riptide::Snapshot| {
        let options = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
        db.get_opt(b"k", &options).unwrap().map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap()))
    };
    assert_eq!(at(&early), Some(3));
    assert_eq!(at(&middle), Some(7));
    assert_eq!(counter(&db, b"k"), Some(15));
    assert!(stored_versions(&db, b"k") >= 3, "one folded entry per snapshot stripe");
    drop((early, middle));
    db.compact_all().unwrap();
    assert_eq!(counter(&db, b"k"), Some(15));
    assert_eq!(stored_versions(&db, b"k"), 1);
}

#[test]
fn deletes_range_deletes_and_expiries_reset_the_base() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(riptide::ManualClock::new(1_790_000_000_000_000));
    let options = Options { clock: clock.clone(), ..counting_options(&memory) };
    let db = Db::open("/db", options).unwrap();
    db.put(b"a", &le(100)).unwrap();
    db.put(b"b", &le(100)).unwrap();
    db.put_with_ttl(b"c", &le(100), std::time::Duration::from_secs(10)).unwrap();
    db.flush().unwrap();
    db.delete(b"a").unwrap();
    db.delete_range(b"b", b"bz").unwrap();
    for key in [b"a", b"b", b"c"] {
        db.merge(key, &le(5)).unwrap();
    }
    assert_eq!(counter(&db, b"a"), Some(5), "over a delete");
    assert_eq!(counter(&db, b"b"), Some(5), "over a range delete");
    assert_eq!(counter(&db, b"c"), Some(105), "over a live value with an expiry");
    clock.advance(std::time::Duration::from_secs(10));
    assert_eq!(counter(&db, b"c"), Some(5), "over an expired value");
    db.flush().unwrap();
    db.compact_all().unwrap();
    for key in [b"a", b"b", b"c"] {
        assert_eq!(counter(&db, key), Some(5), "after compaction: {}", String::from_utf8_lossy(key));
    }
}

#[test]
fn operands_over_blob_values_read_through_the_blob() {
    let memory = MemFileSystem::new();
    let options =
        Options { merge_operator: Some(Arc::new(Append)), min_blob_size_bytes: Some(64), ..counting_options(&memory) };
    let db = Db::open("/db", options).unwrap();
    let large = vec![b'x'; 200];
    db.put(b"big", &large).unwrap();
    db.flush().unwrap();
    db.merge(b"big", b"tail").unwrap();
    let mut expected = large.clone();
    expected.extend_from_slice(b",tail");
    assert_eq!(db.get(b"big").unwrap(), Some(expected.clone()));
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(db.get(b"big").unwrap(), Some(expected.clone()));
    let mut iterator = db.iter(&ReadOptions::default()).unwrap();
    iterator.seek_to_last();
    assert_eq!(iterator.value(), expected.as_slice());
}

#[test]
fn a_missing_or_failing_operator_is_an_error_and_loses_nothing() {
    let memory = MemFileSystem::new();
    let without = Options { merge_operator: None, ..counting_options(&memory) };
    let db = Db::open("/db", without.clone()).unwrap();
    db.merge(b"k", &le(1)).unwrap();
    db.put(b"plain", b"v").unwrap();
    assert!(matches!(db.get(b"k"), Err(riptide::Error::InvalidArgument(_))));
    assert_eq!(db.get(b"plain").unwrap(), Some(b"v".to_vec()), "other keys read on");
    db.flush().unwrap();
    db.compact_all().unwrap();
    drop(db);
    let db = Db::open("/db", counting_options(&memory)).unwrap();
    assert_eq!(counter(&db, b"k"), Some(1), "the operand survived compactions without an operator");
    // A malformed operand makes the read fail with corruption naming the key, and compaction
    // keeps every entry.
    db.merge(b"k", b"three").unwrap();
    match db.get(b"k") {
        Err(riptide::Error::Corruption { reason, .. }) => assert!(reason.contains("riptide.u64add"), "{reason}"),
        other => panic!("expected corruption, got {other:?}"),
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(stored_versions(&db, b"k"), 2);
    let mut iterator = db.iter(&ReadOptions::default()).unwrap();
    iterator.seek_to_first();
    assert!(!iterator.valid());
    assert!(iterator.status().unwrap_err().is_corruption());
}

#[test]
fn batches_and_column_families_take_operands() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", counting_options(&memory)).unwrap();
    let mut family_options = db.column_family_options(&db.default_column_family()).unwrap();
    family_options.merge_operator = Some(Arc::new(Append));
    let lists = db.create_column_family("lists", family_options).unwrap();
    let mut batch = WriteBatch::new();
    batch.merge(b"n", &le(2));
    batch.merge(b"n", &le(3));
    batch.merge_cf(&lists, b"l", b"x");
    batch.merge_cf(&lists, b"l", b"y");
    db.write(batch).unwrap();
    db.merge_cf(&lists, b"l", b"z").unwrap();
    assert_eq!(counter(&db, b"n"), Some(5));
    assert_eq!(db.get_cf(&lists, b"l").unwrap(), Some(b"x,y,z".to_vec()));
    let transaction = db.begin(&riptide::TransactionOptions::default()).unwrap();
    assert_eq!(transaction.get_cf(&lists, b"l").unwrap(), Some(b"x,y,z".to_vec()), "transactions read merges");
    transaction.rollback().unwrap();
}
