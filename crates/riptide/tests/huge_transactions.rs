//! Huge transactions: a transaction that writes far more than its memory limit spills its
//! writes to files, still reads its own writes, rolls back (also to savepoints) without a
//! trace, and commits atomically across column families at one sequence number: checked
//! against a `BTreeMap` model, across a reopen and a simulated power loss.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use riptide::fs::{FileSystem, MemFileSystem, PowerLossMode};
use riptide::{ColumnFamilyOptions, ConcurrencyMode, Db, Error, IsolationLevel, ReadOptions, TransactionOptions};

use common::small_options;

const DIR: &str = "/huge";

/// A limit far below what the tests write, so that they spill many times.
const LIMIT_BYTES: usize = 64 << 10;

fn open(memory: &MemFileSystem) -> Db {
    Db::open(DIR, small_options(Arc::new(memory.clone()))).expect("open")
}

fn spilling(mode: ConcurrencyMode) -> TransactionOptions {
    TransactionOptions {
        mode,
        write_memory_limit_bytes: LIMIT_BYTES,
        max_lock_count: None,
        ..TransactionOptions::default()
    }
}

fn key(index: u32) -> Vec<u8> {
    format!("key{index:06}").into_bytes()
}

fn value(index: u32, round: u32) -> Vec<u8> {
    format!("value-{index}-{round}-{}", "x".repeat(40)).into_bytes()
}

fn spill_files(memory: &MemFileSystem) -> usize {
    memory.file_names(DIR).iter().filter(|name| name.ends_with(".spill")).count()
}

fn contents(db: &Db, options: &ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter(options).unwrap().map(|entry| entry.unwrap()).collect()
}

/// Writes keys 0..count twice (the second round over every third key), deletes every fifth,
/// mirroring into `model`; checks the transaction's memory after every write.
fn write_many(transaction: &riptide::Transaction, count: u32, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut largest_memory = 0;
    for index in 0..count {
        transaction.put(&key(index), &value(index, 0)).unwrap();
        model.insert(key(index), value(index, 0));
        largest_memory = largest_memory.max(transaction.write_memory_bytes());
    }
    for index in (0..count).step_by(3) {
        transaction.put(&key(index), &value(index, 1)).unwrap();
        model.insert(key(index), value(index, 1));
    }
    for index in (0..count).step_by(5) {
        transaction.delete(&key(index)).unwrap();
        model.remove(&key(index));
    }
    // In memory: at most the limit plus one entry, and the spilled runs' indexes and filters
    // (a small fraction of what was written).
    let written_bytes = count as usize * (key(0).len() + value(0, 0).len());
    assert!(
        largest_memory < LIMIT_BYTES + written_bytes / 10,
        "{largest_memory} bytes held for {written_bytes} bytes written"
    );
    assert!(transaction.spilled_bytes() > 0, "nothing spilled");
}

#[test]
fn a_spilled_transaction_reads_its_writes_and_commits_them_at_one_sequence() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    // Older versions in the memtable and in tables, which the commit must shadow.
    let mut model = BTreeMap::new();
    for index in (0..20_000).step_by(7) {
        db.put(&key(index), b"before").unwrap();
        model.insert(key(index), b"before".to_vec());
    }
    let before = db.snapshot();
    let transaction = db.begin(&spilling(ConcurrencyMode::Pessimistic)).unwrap();
    write_many(&transaction, 20_000, &mut model);
    assert!(spill_files(&memory) > 0);
    // Read-your-own-writes through every layer.
    for index in (0..20_000).step_by(97) {
        assert_eq!(transaction.get(&key(index)).unwrap(), model.get(&key(index)).cloned(), "key {index}");
    }
    let forward: Vec<(Vec<u8>, Vec<u8>)> =
        transaction.iter(&ReadOptions::default()).unwrap().map(|entry| entry.unwrap()).collect();
    assert_eq!(forward, model.clone().into_iter().collect::<Vec<_>>());
    let mut backward = Vec::new();
    let mut iterator = transaction.iter(&ReadOptions::default()).unwrap();
    iterator.seek_to_last();
    while iterator.valid() {
        backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.prev();
    }
    iterator.status().unwrap();
    drop(iterator);
    backward.reverse();
    assert_eq!(backward, forward);
    // Others see nothing yet.
    assert_eq!(db.get(&key(1)).unwrap(), None);

    let sequence = transaction.commit_returning_sequence().unwrap().expect("a sequence");
    assert_eq!(spill_files(&memory), 0, "runs removed after the commit");
    assert_eq!(contents(&db, &ReadOptions::default()), model);
    // Point reads take the first version found, memtables first: the commit's tables must
    // shadow the older versions (the commit flushed the memtables that held them).
    for index in 0..20_000 {
        assert_eq!(db.get(&key(index)).unwrap(), model.get(&key(index)).cloned(), "key {index}");
    }
    assert_eq!(db.snapshot().sequence(), sequence, "the commit is the latest sequence");
    // A snapshot from before the commit sees none of it.
    let old = contents(&db, &ReadOptions { snapshot: Some(before.clone()), ..ReadOptions::default() });
    assert!(old.values().all(|value| value == b"before"), "the old snapshot saw the commit");
    assert_eq!(old.len(), 20_000usize.div_ceil(7));
    // Later writes win over the committed tables.
    db.put(&key(3), b"after").unwrap();
    model.insert(key(3), b"after".to_vec());
    assert_eq!(db.get(&key(3)).unwrap(), Some(b"after".to_vec()));
    drop(before);
    db.close().unwrap();

    let db = open(&memory);
    assert_eq!(contents(&db, &ReadOptions::default()), model);
    db.compact_all().unwrap();
    assert_eq!(contents(&db, &ReadOptions::default()), model);
}

#[test]
fn a_spilled_transaction_spanning_column_families_commits_atomically_and_survives_power_loss() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let other = db.create_column_family("other", ColumnFamilyOptions::default()).unwrap();
    let transaction = db.begin(&spilling(ConcurrencyMode::Optimistic)).unwrap();
    let mut model = BTreeMap::new();
    write_many(&transaction, 8_000, &mut model);
    for index in 0..8_000 {
        transaction.put_cf(&other, &key(index), &value(index, 2)).unwrap();
    }
    transaction.commit().unwrap();
    // The commit is durable when it returns, whatever the sync option: drop everything
    // unsynced.
    drop(other);
    drop(db);
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    let db = Db::open_with_column_families(
        DIR,
        small_options(Arc::new(memory.clone())),
        vec![("other".to_string(), ColumnFamilyOptions::default())],
    )
    .unwrap();
    assert_eq!(contents(&db, &ReadOptions::default()), model);
    let other = db.column_family("other").unwrap();
    let other_contents: Vec<(Vec<u8>, Vec<u8>)> =
        db.iter_cf(&other, &ReadOptions::default()).unwrap().map(|entry| entry.unwrap()).collect();
    assert_eq!(other_contents, (0..8_000).map(|index| (key(index), value(index, 2))).collect::<Vec<_>>());
    assert_eq!(spill_files(&memory), 0);
}

#[test]
fn rolling_back_a_spilled_transaction_leaves_no_trace() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    db.put(b"kept", b"1").unwrap();
    let expected = contents(&db, &ReadOptions::default());
    let transaction = db.begin(&spilling(ConcurrencyMode::Pessimistic)).unwrap();
    write_many(&transaction, 10_000, &mut BTreeMap::new());
    transaction.rollback().unwrap();
    assert_eq!(spill_files(&memory), 0);
    assert_eq!(contents(&db, &ReadOptions::default()), expected);
    // Dropping the handle rolls back too.
    let transaction = db.begin(&spilling(ConcurrencyMode::Optimistic)).unwrap();
    write_many(&transaction, 10_000, &mut BTreeMap::new());
    drop(transaction);
    assert_eq!(spill_files(&memory), 0);
    assert_eq!(contents(&db, &ReadOptions::default()), expected);
}

#[test]
fn rolling_back_to_a_savepoint_drops_the_runs_written_after_it() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&spilling(ConcurrencyMode::Pessimistic)).unwrap();
    let mut model = BTreeMap::new();
    write_many(&transaction, 5_000, &mut model);
    let runs_before = spill_files(&memory);
    transaction.savepoint().unwrap();
    for index in 0..10_000 {
        transaction.put(&key(index), b"after the savepoint").unwrap();
    }
    assert!(spill_files(&memory) > runs_before);
    transaction.rollback_to_savepoint().unwrap();
    assert!(spill_files(&memory) <= runs_before + 1);
    for index in (0..10_000).step_by(13) {
        assert_eq!(transaction.get(&key(index)).unwrap(), model.get(&key(index)).cloned(), "key {index}");
    }
    // A released savepoint keeps its writes.
    transaction.savepoint().unwrap();
    for index in 5_000..9_000 {
        transaction.put(&key(index), &value(index, 3)).unwrap();
        model.insert(key(index), value(index, 3));
    }
    transaction.release_savepoint().unwrap();
    transaction.commit().unwrap();
    assert_eq!(contents(&db, &ReadOptions::default()), model);
    assert_eq!(spill_files(&memory), 0);
}

#[test]
fn a_spilled_commit_validates_first_committer_wins_and_fails_older_snapshots() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let options =
        TransactionOptions { isolation: IsolationLevel::RepeatableRead, ..spilling(ConcurrencyMode::Optimistic) };
    // Someone commits a key the spilled transaction writes, after its snapshot: it must fail.
    let huge = db.begin(&options).unwrap();
    write_many(&huge, 6_000, &mut BTreeMap::new());
    db.put(&key(4_001), b"first").unwrap();
    let files_before = memory.file_names(DIR).len();
    let error = huge.commit().unwrap_err();
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert_eq!(db.get(&key(4_001)).unwrap(), Some(b"first".to_vec()));
    assert_eq!(db.get(&key(1)).unwrap(), None, "nothing of the failed commit is visible");
    assert_eq!(spill_files(&memory), 0);
    assert!(memory.file_names(DIR).len() <= files_before, "the failed commit left files");

    // A spilled commit does not list its keys in the commit history: a transaction whose
    // snapshot predates it fails validation even on another key (conservative, documented).
    let bystander =
        db.begin(&TransactionOptions { isolation: IsolationLevel::Serializable, ..options.clone() }).unwrap();
    bystander.put(b"elsewhere", b"1").unwrap();
    let huge = db.begin(&options).unwrap();
    write_many(&huge, 6_000, &mut BTreeMap::new());
    huge.commit().unwrap();
    assert!(matches!(bystander.commit(), Err(Error::Conflict(_))));
    // A transaction begun after it is not affected.
    let later = db.begin(&options).unwrap();
    later.put(b"elsewhere", b"2").unwrap();
    later.commit().unwrap();
}

#[test]
fn spill_files_left_by_a_crash_are_removed_at_open() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&spilling(ConcurrencyMode::Pessimistic)).unwrap();
    write_many(&transaction, 5_000, &mut BTreeMap::new());
    assert!(spill_files(&memory) > 0);
    // A crash: the process dies with the transaction open (the handles are leaked, so nothing
    // is cleaned up).
    std::mem::forget(transaction);
    std::mem::forget(db);
    memory.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 7 });
    // Whatever the power loss kept, a run left by a dead process is there now.
    let mut leftover = memory.create(&std::path::Path::new(DIR).join("999999.spill")).unwrap();
    leftover.append(b"a run of a transaction that died").unwrap();
    leftover.sync().unwrap();
    drop(leftover);
    memory.sync_dir(std::path::Path::new(DIR)).unwrap();
    assert!(spill_files(&memory) > 0);
    let db = open(&memory);
    assert_eq!(spill_files(&memory), 0);
    assert_eq!(db.get(&key(1)).unwrap(), None);
}

#[test]
fn a_spilled_transaction_cannot_be_prepared_yet() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&spilling(ConcurrencyMode::Pessimistic)).unwrap();
    write_many(&transaction, 5_000, &mut BTreeMap::new());
    assert!(matches!(transaction.prepare(b"xid"), Err(Error::InvalidArgument(_))));
    // Still usable.
    transaction.commit().unwrap();
}

#[test]
fn a_huge_read_set_is_coarsened_into_ranges_that_still_catch_conflicts() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    for index in 0..30_000 {
        db.put(&key(index), b"v").unwrap();
    }
    let options =
        TransactionOptions { isolation: IsolationLevel::Serializable, ..spilling(ConcurrencyMode::Optimistic) };
    // Reads of keys 10,000 to 19,999: far past a quarter of the limit, so the read set becomes
    // the range [key 10000, key 19999].
    let reader = db.begin(&options).unwrap();
    for index in 10_000..20_000 {
        assert_eq!(reader.get(&key(index)).unwrap(), Some(b"v".to_vec()));
    }
    reader.put(b"reader", b"1").unwrap();
    // A write outside the range read does not fail the reader.
    db.put(&key(25_000), b"outside").unwrap();
    let second = db.begin(&options).unwrap();
    for index in 10_000..20_000 {
        second.get(&key(index)).unwrap();
    }
    second.put(b"second", b"1").unwrap();
    reader.commit().unwrap();
    // A write to one key read, after the snapshot, fails it: coarsening kept the key.
    db.put(&key(15_555), b"changed").unwrap();
    assert!(matches!(second.commit(), Err(Error::Conflict(_))));
}
