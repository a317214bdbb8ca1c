//! Riptide: a write-optimized LSM-tree key-value storage engine.
//!
//! Writes go to a write-ahead log (group-committed) and a concurrent in-memory skiplist; full
//! memtables are flushed in the background to immutable sorted tables (SSTables) that
//! compaction merges down a tree of levels. Reads consult the memtables, then the tables newest
//! first, skipping tables with bloom filters. See `docs/architecture.md` for the full picture.
//!
//! ```
//! use riptide::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! db.put(b"key", b"value").unwrap();
//! db.put_opt(b"durable", b"yes", &WriteOptions { sync: true }).unwrap();
//! let mut batch = WriteBatch::new();
//! batch.put(b"a", b"1");
//! batch.delete(b"key");
//! db.write(batch).unwrap();
//! assert_eq!(db.get(b"key").unwrap(), None);
//! let keys: Vec<Vec<u8>> = db.iter(&ReadOptions::default()).unwrap().map(|e| e.unwrap().0).collect();
//! assert_eq!(keys, vec![b"a".to_vec(), b"durable".to_vec()]);
//! db.close().unwrap();
//! ```

#![deny(missing_docs)]

mod backup;
mod batch;
mod blob;
mod cache;
mod coding;
mod compaction;
mod comparator;
mod db;
mod error;
pub mod fs;
mod hash;
mod iterator;
mod key;
mod memory_charge;
mod memtable;
mod merge_operator;
mod options;
mod range_tombstone;
mod snapshot;
mod sstable;
mod sync;
mod ttl;
mod txn;
mod version;
mod wal;

#[doc(hidden)]
pub mod internals;

pub use backup::{BackupEngine, BackupInfo};
pub use batch::{BatchEntry, BatchIter, BatchOp, WriteBatch};
pub use comparator::{BytewiseComparator, Comparator, ReverseBytewiseComparator};
pub use db::{
    ColumnFamily, ColumnFamilyStats, Db, DbIterator, LevelStats, MemoryPressure, RangeStats, RecoveryStats, Stats,
    TransactionStats,
};
pub use error::{Error, Result};
pub use merge_operator::{MergeOperator, U64AddOperator};
pub use options::{
    ColumnFamilyOptions, CompactionPriority, Compression, Options, ReadOptions, SyncMode, WalRecovery, WriteOptions,
};
pub use snapshot::Snapshot;
pub use ttl::{Clock, ManualClock, SystemClock};
pub use txn::{ConcurrencyMode, IsolationLevel, Transaction, TransactionIterator, TransactionOptions};
