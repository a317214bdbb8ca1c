//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use riptide::fs::FileSystem;
use riptide::{ColumnFamily, Db, DbIterator, Options, ReadOptions};

/// Options with tiny memtables, blocks and files, so that a few thousand writes exercise
/// flushes, many tables, several levels and compactions.
pub fn small_options(file_system: Arc<dyn FileSystem>) -> Options {
    Options {
        file_system,
        memtable_size_bytes: 16 << 10,
        block_size_bytes: 512,
        block_cache_size_bytes: 64 << 10,
        target_file_size_bytes: 16 << 10,
        level0_compaction_trigger_files: 2,
        level0_slowdown_writes_files: 7,
        level0_stop_writes_files: 8,
        max_open_tables: 16,
        // Small chunks keep preallocated logs cheap in memory and cross chunk boundaries often.
        wal_preallocate_bytes: 4096,
        ..Options::default()
    }
}

/// Options under which level 0 keeps the few files a test flushes: 4 MiB memtables, 1 KiB
/// blocks, and a file-count trigger of 8 (slowdown at 12, stop at 20).
pub fn level0_keeping_options(file_system: Arc<dyn FileSystem>) -> Options {
    Options {
        file_system,
        memtable_size_bytes: 4 << 20,
        block_size_bytes: 1024,
        level0_compaction_trigger_files: 8,
        level0_slowdown_writes_files: 12,
        level0_stop_writes_files: 20,
        ..Options::default()
    }
}

/// Every key and value an iterator yields from its first entry on, in iteration order (the
/// column family's order, which need not be bytewise).
pub fn entries(mut iterator: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    iterator.seek_to_first();
    while iterator.valid() {
        out.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.next();
    }
    iterator.status().expect("iterator status");
    out
}

/// Every key and value in the database, read with a forward iterator of `Db::iter`.
pub fn dump(db: &Db, options: &ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    entries(db.iter(options).expect("iterator")).into_iter().collect()
}

/// Every key and value of one column family, read with a forward iterator.
pub fn dump_cf(db: &Db, family: &ColumnFamily, options: &ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    entries(db.iter_cf(family, options).expect("iterator")).into_iter().collect()
}

/// A deterministic key from a number (varying lengths exercise prefix compression).
pub fn key(number: u64) -> Vec<u8> {
    let mut key = format!("key{number:06}").into_bytes();
    key.extend(std::iter::repeat_n(b'x', (number % 3) as usize));
    key
}

/// A deterministic value that names its key and version, so a wrong answer is recognisable.
pub fn value(number: u64, version: u64, length_bytes: usize) -> Vec<u8> {
    let mut value = format!("v{number}.{version}:").into_bytes();
    while value.len() < length_bytes {
        value.push(b'a' + ((value.len() as u64 + version) % 26) as u8);
    }
    value
}

pub fn open_at(path: &Path, options: Options) -> Db {
    Db::open(path, options).expect("open")
}

/// Writes `key` of `family` (the default family when `None`) in `transaction` and commits; as a
/// deadlock victim (a retryable error) it rolls back instead and returns the error. Any other
/// error fails the test.
pub fn write_and_commit_unless_deadlocked(
    transaction: riptide::Transaction,
    family: Option<&ColumnFamily>,
    key: &[u8],
    value: &[u8],
) -> Option<riptide::Error> {
    let written = match family {
        Some(family) => transaction.put_cf(family, key, value),
        None => transaction.put(key, value),
    };
    match written {
        Ok(()) => {
            transaction.commit().unwrap();
            None
        }
        Err(error @ riptide::Error::Deadlock(_)) => {
            assert!(error.is_retryable());
            transaction.rollback().unwrap();
            Some(error)
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}
