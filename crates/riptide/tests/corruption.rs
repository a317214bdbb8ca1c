//! Corruption tests: damaged WAL, SSTable, manifest and CURRENT files give
//! `Error::Corruption` naming the file (or, for a torn WAL tail, a clean recovery), never a
//! panic and never a wrong answer.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use riptide::fs::{FileSystem, MemFileSystem};
use riptide::{Db, Error, Options, ReadOptions, WalRecovery, WriteOptions};

use common::{key, small_options, value};

const DB: &str = "/corrupt";

fn files_with(memory: &MemFileSystem, suffix: &str) -> Vec<PathBuf> {
    memory.file_names(DB).into_iter().filter(|n| n.ends_with(suffix)).map(|n| Path::new(DB).join(n)).collect()
}

fn options(memory: &MemFileSystem) -> Options {
    Options { memtable_size_bytes: 1 << 20, ..small_options(Arc::new(memory.clone())) }
}

/// Writes `count` keys and closes without flushing, so the data sits in the WAL.
fn database_in_wal(count: u64) -> MemFileSystem {
    let memory = MemFileSystem::new();
    let db = Db::open(DB, options(&memory)).expect("open");
    for i in 0..count {
        db.put_opt(&key(i), &value(i, 1, 50), &WriteOptions { sync: false }).expect("put");
    }
    db.close().expect("close");
    memory
}

fn corruption_file(error: &Error) -> PathBuf {
    match error {
        Error::Corruption { file, .. } => file.clone(),
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn wal_flipped_byte_in_the_middle_is_corruption_with_file_and_offset() {
    let memory = database_in_wal(50);
    let wal = files_with(&memory, ".log").pop().expect("a log");
    let size = memory.file_size(&wal).expect("size");
    memory.corrupt_byte(&wal, size / 3).expect("corrupt");
    let error = Db::open(DB, options(&memory)).expect_err("must not open silently");
    assert_eq!(corruption_file(&error), wal);
    if let Error::Corruption { offset, .. } = error {
        assert!(offset <= size / 3, "offset {offset} is past the damage");
    }
}

#[test]
fn wal_skip_corrupt_opens_without_the_damaged_record() {
    let memory = database_in_wal(50);
    let wal = files_with(&memory, ".log").pop().expect("a log");
    let size = memory.file_size(&wal).expect("size");
    memory.corrupt_byte(&wal, size / 2).expect("corrupt");
    let db = Db::open(DB, Options { wal_recovery: WalRecovery::SkipCorrupt, ..options(&memory) }).expect("open");
    let mut present = 0;
    for i in 0..50 {
        if let Some(v) = db.get(&key(i)).expect("get") {
            assert_eq!(v, value(i, 1, 50), "wrong value for key {i}");
            present += 1;
        }
    }
    assert!((40..50).contains(&present), "{present} of 50 records survived one flipped byte");
}

#[test]
fn wal_torn_tail_is_dropped_at_every_cut() {
    let template = database_in_wal(10);
    let wal = files_with(&template, ".log").pop().expect("a log");
    let size = template.file_size(&wal).expect("size");
    // Every cut in the last 40 bytes falls inside the last record (its value alone is 50
    // bytes): the first nine keys survive, the tenth does not.
    for cut in (size - 40)..size {
        let memory = database_in_wal(10);
        memory.truncate(&wal, cut).expect("truncate");
        let db = Db::open(DB, options(&memory)).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        for i in 0..9 {
            assert_eq!(db.get(&key(i)).expect("get"), Some(value(i, 1, 50)), "cut {cut} key {i}");
        }
        assert_eq!(db.get(&key(9)).expect("get"), None, "cut {cut}");
        drop(db);
        let memory = database_in_wal(10);
        memory.truncate(&wal, cut).expect("truncate");
        let error = Db::open(DB, Options { wal_recovery: WalRecovery::Absolute, ..options(&memory) })
            .expect_err("absolute recovery reports a torn tail");
        assert_eq!(corruption_file(&error), wal);
    }
}

/// Writes keys into tables (flushed), so reads go to SSTables.
fn database_in_tables() -> MemFileSystem {
    let memory = MemFileSystem::new();
    let db = Db::open(DB, Options { memtable_size_bytes: 1 << 20, ..small_options(Arc::new(memory.clone())) })
        .expect("open");
    for i in 0..400 {
        db.put(&key(i), &value(i, 1, 60)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    memory
}

#[test]
fn sstable_damage_never_gives_a_wrong_answer() {
    let template = database_in_tables();
    let table = files_with(&template, ".sst").pop().expect("a table");
    let size = template.file_size(&table).expect("size");
    let mut corruption_seen = 0;
    for offset in (0..size).step_by((size / 97).max(1) as usize) {
        let memory = database_in_tables();
        memory.corrupt_byte(&table, offset).expect("corrupt");
        let db = Db::open(DB, options(&memory)).expect("open does not read table contents");
        for i in 0..400 {
            match db.get(&key(i)) {
                Ok(Some(v)) => assert_eq!(v, value(i, 1, 60), "offset {offset}: wrong value for key {i}"),
                Ok(None) => panic!("offset {offset}: key {i} silently missing"),
                Err(error) => {
                    assert_eq!(corruption_file(&error), table);
                    corruption_seen += 1;
                }
            }
        }
        let mut iterator = db.iter(&ReadOptions::default()).inspect_err(|e| assert_eq!(corruption_file(e), table));
        if let Ok(iterator) = iterator.as_mut() {
            iterator.seek_to_first();
            let mut i = 0;
            while iterator.valid() {
                assert_eq!(iterator.key(), key(i).as_slice(), "offset {offset}");
                assert_eq!(iterator.value(), value(i, 1, 60).as_slice());
                i += 1;
                iterator.next();
            }
            if i < 400 {
                let error = iterator.status().expect_err("a short scan must report why");
                assert_eq!(corruption_file(&error), table);
            }
        }
    }
    assert!(corruption_seen > 0, "no damage was ever detected");
}

#[test]
fn truncated_sstable_is_corruption() {
    let memory = database_in_tables();
    let table = files_with(&memory, ".sst").pop().expect("a table");
    let size = memory.file_size(&table).expect("size");
    memory.truncate(&table, size - 10).expect("truncate");
    let error = Db::open(DB, options(&memory)).expect_err("size mismatch is detected at open");
    assert_eq!(corruption_file(&error), table);
}

#[test]
fn manifest_damage_is_corruption() {
    // Damage inside the first record (the snapshot); the record after it keeps it from looking
    // like a torn tail.
    let memory = database_in_tables();
    {
        let db = Db::open(DB, options(&memory)).expect("open");
        db.put(b"extra", b"1").expect("put");
        db.flush().expect("flush adds a second manifest record");
        db.close().expect("close");
    }
    let manifest_now =
        files_with(&memory, "").into_iter().find(|p| p.to_string_lossy().contains("MANIFEST")).expect("manifest");
    memory.corrupt_byte(&manifest_now, 10).expect("corrupt");
    let error = Db::open(DB, options(&memory)).expect_err("damaged manifest");
    assert_eq!(corruption_file(&error), manifest_now);
}

#[test]
fn current_damage_is_corruption() {
    for damage in 0..3 {
        let memory = database_in_tables();
        let current = Path::new(DB).join("CURRENT");
        match damage {
            0 => memory.corrupt_byte(&current, 0).expect("corrupt"),
            1 => memory.truncate(&current, 3).expect("truncate"),
            _ => memory.truncate(&current, 0).expect("truncate"),
        }
        let error = Db::open(DB, options(&memory)).expect_err("damaged CURRENT");
        assert_eq!(corruption_file(&error), current);
    }
}

#[test]
fn missing_current_with_tables_present_is_not_a_new_database() {
    let memory = database_in_tables();
    memory.remove(&Path::new(DB).join("CURRENT")).expect("remove");
    let error = Db::open(DB, options(&memory)).expect_err("must not recreate over existing tables");
    assert!(error.is_corruption(), "{error}");
    assert!(!files_with(&memory, ".sst").is_empty(), "tables must not be deleted");
}

#[test]
fn missing_table_is_corruption() {
    let memory = database_in_tables();
    let table = files_with(&memory, ".sst").pop().expect("a table");
    memory.remove(&table).expect("remove");
    let error = Db::open(DB, options(&memory)).expect_err("missing table");
    assert_eq!(corruption_file(&error), table);
}
