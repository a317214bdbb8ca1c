//! Options for opening a database, writing and reading.
//!
//! Every option has a documented default chosen for a write-heavy server workload. Options are
//! validated by [`Options::validate`] when the database opens; invalid values are rejected with
//! [`crate::Error::InvalidArgument`] before anything is written.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};
use crate::snapshot::Snapshot;

/// Block compression algorithm for SSTable data blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4 block format (fast; the default).
    Lz4,
    /// Zstandard at level 3 (smaller, slower).
    Zstd,
    /// Snappy raw format.
    Snappy,
}

/// When the write-ahead log is forced to stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncMode {
    /// Never synced by the engine except when a write asks for it with
    /// [`WriteOptions::sync`]. A process crash loses nothing (the OS has the bytes); a power loss
    /// may lose the writes since the last sync.
    None,
    /// Every write is synced before the call returns (group commit shares one sync among
    /// concurrent writers).
    Full,
    /// A background thread syncs the log every `interval_us` microseconds. A power loss may lose
    /// up to that interval of acknowledged writes.
    Interval {
        /// Time between background syncs, in microseconds.
        interval_us: u64,
    },
}

/// How recovery treats a damaged write-ahead log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalRecovery {
    /// A torn record at the very end of the newest log (a crash in the middle of a write) is
    /// dropped; damage anywhere else is reported as [`Error::Corruption`]. The default.
    TolerateTornTail,
    /// Any damage, including a torn tail, is reported as corruption.
    Absolute,
    /// Damaged records are skipped and recovery goes on with the rest (may lose data, but opens).
    SkipCorrupt,
}

/// Options for [`crate::Db::open`].
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none. Default `true`.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default `false`.
    pub error_if_exists: bool,
    /// The file system all I/O goes through. Default: the operating system's.
    pub file_system: Arc<dyn FileSystem>,
    /// Size at which the active memtable becomes immutable and is flushed. Default 64 MiB.
    pub memtable_size_bytes: usize,
    /// Immutable memtables allowed to wait for flush before writers stall. Default 2.
    pub max_immutable_memtables: usize,
    /// Target uncompressed size of an SSTable data block. Default 4 KiB.
    pub block_size_bytes: usize,
    /// Keys between restart points inside a data block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10 (about 1 % false positives).
    pub bloom_bits_per_key: u32,
    /// Data block compression. Default LZ4.
    pub compression: Compression,
    /// Capacity of the shared block cache of uncompressed blocks. Default 64 MiB.
    pub block_cache_size_bytes: usize,
    /// Number of SSTables kept open in the table cache. Default 1,000.
    pub max_open_tables: usize,
    /// WAL sync policy. Default [`SyncMode::None`].
    pub wal_sync_mode: SyncMode,
    /// WAL damage policy at recovery. Default [`WalRecovery::TolerateTornTail`].
    pub wal_recovery: WalRecovery,
    /// Level-0 file count that triggers a compaction into level 1. Default 4.
    pub level0_compaction_trigger_files: usize,
    /// Level-0 file count at which writers stall until compaction catches up. Default 20.
    pub level0_stop_writes_files: usize,
    /// Target size of SSTables written by compaction. Default 64 MiB.
    pub target_file_size_bytes: u64,
    /// Largest accepted key. Default 64 KiB; at most 1 MiB.
    pub max_key_size_bytes: usize,
    /// Largest accepted value. Default 64 MiB; at most 1 GiB.
    pub max_value_size_bytes: usize,
    /// Largest accepted write batch (encoded). Default 256 MiB; at most 1 GiB.
    pub max_batch_size_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            file_system: Arc::new(OsFileSystem),
            memtable_size_bytes: 64 << 20,
            max_immutable_memtables: 2,
            block_size_bytes: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
            block_cache_size_bytes: 64 << 20,
            max_open_tables: 1000,
            wal_sync_mode: SyncMode::None,
            wal_recovery: WalRecovery::TolerateTornTail,
            level0_compaction_trigger_files: 4,
            level0_stop_writes_files: 20,
            target_file_size_bytes: 64 << 20,
            max_key_size_bytes: 64 << 10,
            max_value_size_bytes: 64 << 20,
            max_batch_size_bytes: 256 << 20,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("memtable_size_bytes", &self.memtable_size_bytes)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("block_size_bytes", &self.block_size_bytes)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("block_cache_size_bytes", &self.block_cache_size_bytes)
            .field("max_open_tables", &self.max_open_tables)
            .field("wal_sync_mode", &self.wal_sync_mode)
            .field("wal_recovery", &self.wal_recovery)
            .field("level0_compaction_trigger_files", &self.level0_compaction_trigger_files)
            .field("level0_stop_writes_files", &self.level0_stop_writes_files)
            .field("target_file_size_bytes", &self.target_file_size_bytes)
            .field("max_key_size_bytes", &self.max_key_size_bytes)
            .field("max_value_size_bytes", &self.max_value_size_bytes)
            .field("max_batch_size_bytes", &self.max_batch_size_bytes)
            .finish()
    }
}

impl Options {
    /// Checks every option against its documented range.
    pub fn validate(&self) -> Result<()> {
        fn check(condition: bool, message: &str) -> Result<()> {
            if condition {
                Ok(())
            } else {
                Err(Error::invalid(message.to_string()))
            }
        }
        check(self.memtable_size_bytes >= 4096, "memtable_size_bytes must be at least 4096")?;
        check(self.memtable_size_bytes <= 1 << 31, "memtable_size_bytes must be at most 2 GiB")?;
        check(self.max_immutable_memtables >= 1, "max_immutable_memtables must be at least 1")?;
        check((256..=4 << 20).contains(&self.block_size_bytes), "block_size_bytes must be between 256 B and 4 MiB")?;
        check((1..=1024).contains(&self.block_restart_interval), "block_restart_interval must be between 1 and 1024")?;
        check(self.bloom_bits_per_key <= 64, "bloom_bits_per_key must be at most 64")?;
        check(self.max_open_tables >= 16, "max_open_tables must be at least 16")?;
        check(self.level0_compaction_trigger_files >= 2, "level0_compaction_trigger_files must be at least 2")?;
        check(
            self.level0_stop_writes_files > self.level0_compaction_trigger_files,
            "level0_stop_writes_files must exceed level0_compaction_trigger_files",
        )?;
        check(self.target_file_size_bytes >= 4096, "target_file_size_bytes must be at least 4096")?;
        check((1..=1 << 20).contains(&self.max_key_size_bytes), "max_key_size_bytes must be between 1 and 1 MiB")?;
        check(self.max_value_size_bytes <= 1 << 30, "max_value_size_bytes must be at most 1 GiB")?;
        check(self.max_batch_size_bytes <= 1 << 30, "max_batch_size_bytes must be at most 1 GiB")?;
        if let SyncMode::Interval { interval_us } = self.wal_sync_mode {
            check(interval_us >= 100, "SyncMode::Interval needs interval_us >= 100")?;
        }
        Ok(())
    }
}

/// Options for one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Sync the WAL before the call returns, whatever the database's [`SyncMode`]. When the call
    /// returns `Ok`, the write survives power loss.
    pub sync: bool,
}

/// Options for reads and iterators.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest committed state.
    pub snapshot: Option<Snapshot>,
    /// Insert blocks read from disk into the block cache. Default `true`; turn off for large
    /// scans that should not evict the working set.
    pub fill_cache: bool,
    /// Verify block checksums on reads from disk. Blocks that enter the block cache and table
    /// metadata are always verified; turning this off skips the check only for uncached
    /// reads (`fill_cache: false`). Default `true`.
    pub verify_checksums: bool,
    /// Iterators: the smallest user key returned (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the first user key not returned (exclusive).
    pub upper_bound: Option<Vec<u8>>,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions { snapshot: None, fill_cache: true, verify_checksums: true, lower_bound: None, upper_bound: None }
    }
}
