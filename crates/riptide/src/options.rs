//! Options for opening a database, writing and reading.
//!
//! Every option has a documented default chosen for a write-heavy server workload. Options are
//! validated by [`Options::validate`] when the database opens; invalid values are rejected with
//! [`crate::Error::InvalidArgument`] before anything is written.

use std::sync::Arc;

use crate::comparator::{BytewiseComparator, Comparator};
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

/// How a compaction of level 1 or deeper chooses the file it moves down when its level is over
/// target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactionPriority {
    /// The file whose overlapping bytes in the next level are smallest relative to its own
    /// size: the move that rewrites the least data per byte it brings down. Ranges where the
    /// next level is sparse absorb data cheaply, so write amplification is lower than with
    /// round robin, most of all while the database grows. The default.
    MinOverlappingRatio,
    /// The file after the one compacted last, wrapping around: every part of the key space is
    /// visited at the same pace, whatever the cost.
    RoundRobin,
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
    /// Recovery replays the longest intact prefix of the log history: a torn record at the end
    /// of any log (what a crash in the middle of a write, or a power loss before the log was
    /// synced, leaves), or a gap in the sequence numbers between two records, ends the history,
    /// and what follows, later logs included, is dropped. Only writes no sync covered can be
    /// there, since every sync covers all earlier logs. Damage followed by valid records is
    /// reported as [`Error::Corruption`]. The default.
    TolerateTornTail,
    /// Any damage, including a torn tail, and any gap in the sequence numbers is reported as
    /// corruption.
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
    /// The order of the default column family's user keys (and of every column family opened
    /// without options of its own). Fixed when the column family is created: its name is
    /// stored, and opening with a comparator of another name fails with
    /// [`Error::InvalidArgument`]. Default [`BytewiseComparator`]. See
    /// [`ColumnFamilyOptions::comparator`].
    pub comparator: Arc<dyn Comparator>,
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
    /// Once a log has been synced, zeros are written this many bytes at a time ahead of its
    /// records, so that later syncs overwrite existing blocks instead of growing the file (on
    /// ext4 here a sync that grows a file took 2.3 ms against 0.64 ms; see `wal/writer.rs`).
    /// Logs that are never synced are never preallocated. 0 turns it off. At most 1 GiB.
    /// Default 4 MiB.
    pub wal_preallocate_bytes: u64,
    /// Level-0 file count that triggers a compaction into the base level. Default 8.
    ///
    /// A level-0 job merges every level-0 file with the overlapping part of the base level
    /// (all of it, for uniformly spread keys), so the more files one job takes, the fewer times
    /// the base level is rewritten per byte flushed. Measured on the 60-million-key random-write
    /// run (`make bench-longrun`, 2 cores): compaction wrote 19.3 GiB at 4, 16.7 GiB at 6 and
    /// 13.7 GiB at 8, at the same throughput and tail latency. The price is read amplification
    /// during heavy writes: a point lookup may probe the bloom filters of up to this many level-0
    /// files (plus those flushed while a job runs), and a scan merges them all. Lower it for
    /// read-heavy work; RocksDB's default is 4.
    pub level0_compaction_trigger_files: usize,
    /// Level-0 file count at which writes start to be delayed (a little more for every file
    /// above it), so that compaction catches up before writes must stop. Default 20, as
    /// RocksDB's.
    ///
    /// With one compaction thread (2 cores), a level-0 job that rewrites a large base level
    /// runs for seconds while flushes go on adding level-0 files, so a write burst reaches the
    /// slowdown and stop counts long before the job ends. At 12 and 20 (the defaults until
    /// 2026-12-07) the benchtool's standard suite lost to RocksDB on sequential batches (10M
    /// puts: 2.05-2.07M/s, 1.7-1.8 s of the 4.9 s run in 718-776 slowdowns) and on 4 KiB
    /// values (1M puts: 48K/s, 11.9 s in 13 stalls); at 20 and 36, 3.28-3.43M/s and 87K/s,
    /// random batches 1.06-1.10M/s against 0.95-1.02M, and the compactions of the 4 KiB run
    /// wrote 6.3 GiB against 6.9 (`riptide-bench run`: batches two rounds each, 4 KiB values
    /// one). The price is the read amplification of level 0 while a burst lasts: lookups
    /// probe up to this many filters.
    pub level0_slowdown_writes_files: usize,
    /// Level-0 file count at which writers stall until compaction catches up. Default 36, as
    /// RocksDB's.
    pub level0_stop_writes_files: usize,
    /// Target size of SSTables written by compaction. Default 64 MiB.
    pub target_file_size_bytes: u64,
    /// Size ratio between adjacent levels. Default 10.
    pub level_size_ratio: u64,
    /// Target size of the base level (the level level 0 compacts into); 0 means
    /// `memtable_size_bytes * level0_compaction_trigger_files`. Level targets are dynamic: the
    /// last level's target is its actual size, each level above a `level_size_ratio`-th of the
    /// one below, and level 0 compacts straight into the highest level whose target reaches
    /// this size. Default 0.
    pub base_level_size_bytes: u64,
    /// Compression per level (index = level); levels past the end use the last entry. Empty
    /// means `compression` everywhere. Example: `[None, None, Lz4, Lz4, Lz4, Zstd, Zstd]`.
    pub compression_per_level: Vec<Compression>,
    /// Compression of the bottommost data (overrides the per-level choice there). Default
    /// `None` (no override).
    pub bottommost_compression: Option<Compression>,
    /// A table whose entries are at least this fraction of deletes (and at least
    /// `tombstone_compaction_min_entries`) is compacted down even when its level is under
    /// target, so that space held by deleted data comes back. Default 0.5; 0 disables.
    pub tombstone_compaction_ratio: f64,
    /// See `tombstone_compaction_ratio`. Default 1,000.
    pub tombstone_compaction_min_entries: u64,
    /// Read-triggered compaction of level 0: every seek that has to merge more tables than one
    /// compaction of level 0 would leave (one per level-0 file it reaches, less one when no
    /// deeper level holds keys of its range) charges the column family per extra table: a
    /// whole charge for a table that read its block from the file, an eighth for one that
    /// found it in the block cache; and every forward step through such a merge a fifth of a
    /// unit (a sixteenth of a charge) per extra table, for the heap's move over it at each row.
    /// Once the charges times this many bytes reach what that compaction would
    /// rewrite (level 0 and the shallowest deeper level holding files), level 0 is compacted
    /// even below `level0_compaction_trigger_files`. So read-heavy phases after a burst of
    /// writes get their level-0 files merged away, while write-heavy work that seeks little
    /// keeps the file-count trigger's low write amplification. Point lookups, which probe
    /// level-0 files through their bloom filters, do not charge. Measured on 2 cores: Zipfian
    /// seeks over 3 million writes (seven overlapping level-0 files) went from about 100,000 to
    /// 582,000 per second with the rule on (see `docs/architecture.md`, "Read-triggered level
    /// 0"). The same rate prices a flush of the active memtable: scans that pass older
    /// versions of keys held in it pay for switching it, with no write to fill it
    /// ("Read-triggered flushes"). Default 128; 0 turns both off.
    pub read_compaction_bytes_per_table_seek: u64,
    /// Which file a level over target moves down first. Default
    /// [`CompactionPriority::MinOverlappingRatio`].
    pub compaction_priority: CompactionPriority,
    /// Key-value separation: values of at least this many bytes are written to blob files at
    /// flush, and tables hold a small reference to them instead (about 20 bytes), so that
    /// compactions move references rather than rewrite the values. `None` (the default) keeps
    /// every value in its table. See "Blob files" in `docs/architecture.md`.
    pub min_blob_size_bytes: Option<usize>,
    /// A compaction moves the live values of a blob file it reads references of into a new blob
    /// file once at least this share of the file's bytes is garbage (values no table references
    /// any more), so that the old file can be deleted. Between 0 and 1; default 0.5.
    pub blob_garbage_collection_ratio: f64,
    /// A compaction also moves the live values of the oldest blob files, this share of them by
    /// number, whatever their garbage (as RocksDB's `blob_garbage_collection_age_cutoff`).
    /// Between 0 and 1; default 0 (off): the garbage ratio alone decides, since moving live
    /// values that are not garbage costs the very rewrites separation saves.
    pub blob_garbage_collection_age_cutoff: f64,
    /// The size at which a compaction starts a new blob file for the values it moves. Default
    /// 256 MiB.
    pub blob_file_size_bytes: u64,
    /// How values written to blob files are compressed (each value on its own, stored as is
    /// when compression would not save an eighth of its bytes, as table blocks are). Default
    /// [`Compression::Lz4`], like `compression`: large values that compress take half the disk
    /// and half the page cache, and values that do not cost one quick failed attempt each.
    pub blob_compression: Compression,
    /// Time to live of the default column family's puts: a put written without an expiry of
    /// its own ([`crate::WriteBatch::put_with_expiry`]) expires this long after it is written,
    /// by [`Options::clock`]. Expired entries read as deleted and compaction drops them. `None`
    /// (the default): puts never expire. Changing it affects puts written afterwards only.
    pub ttl: Option<std::time::Duration>,
    /// The merge operator of the default column family ([`crate::Db::merge`]); `None` (the
    /// default): merges can be written but not read. Give the same operator at every open: it
    /// is not recorded in the database, and operands written under one are read under the next.
    pub merge_operator: Option<Arc<dyn crate::merge_operator::MergeOperator>>,
    /// The clock that decides when entries expire (see [`Options::ttl`]). Default: the
    /// system's wall clock; tests use a [`crate::ManualClock`].
    pub clock: Arc<dyn crate::ttl::Clock>,
    /// Background threads that flush memtables. Default 1.
    pub max_background_flushes: usize,
    /// Background threads that run compactions; jobs on disjoint key ranges run in parallel.
    /// 0 (the default) means half the CPUs, between 1 and 8: compaction threads compete with
    /// the writers and the flush thread for cores. On a 2-core machine a second compaction
    /// thread made the benchtool's long random-write run slower and raised its write
    /// amplification: jobs started as soon as a level is due are smaller, so the level below
    /// is rewritten more often for the same data.
    pub max_background_compactions: usize,
    /// A large compaction is split into at most this many key ranges run in parallel. 0 (the
    /// default) means a quarter of the CPUs, between 1 and 4 (so 1, no splitting, below 8
    /// CPUs).
    pub max_subcompactions: usize,
    /// Global cap on the memory the engine holds: memtables (active and immutable, of every
    /// column family), the block cache, and the indexes and filters of open tables. As use
    /// nears the cap writes are slowed, memtables flushed early and the block cache shrunk;
    /// at the cap writes wait. The block cache never holds more than the room below 70 % of
    /// the cap that memtables and tables leave, whatever `block_cache_size_bytes` says. 0
    /// means the default: half of the machine's physical memory (or 1 GiB when that cannot be
    /// read). Must be at least 16 MiB.
    pub max_memory_bytes: u64,
    /// Largest accepted key. Default 64 KiB; at most 1 MiB.
    pub max_key_size_bytes: usize,
    /// Largest accepted value. Default 64 MiB; at most 1 GiB.
    pub max_value_size_bytes: usize,
    /// Largest accepted write batch (encoded). Default 256 MiB; at most 1 GiB. A
    /// transaction's commit is one batch, so this also bounds a transaction's writes.
    pub max_batch_size_bytes: usize,
    /// Memory for the commit history that validates REPEATABLE READ and SERIALIZABLE
    /// transactions (the keys written since the oldest open transaction's snapshot; see
    /// `docs/transactions.md`). Past it the oldest entries are dropped, and a transaction whose
    /// snapshot is older than what remains fails to commit with [`crate::Error::Conflict`].
    /// Default 64 MiB; at least 1 MiB.
    pub transaction_history_limit_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            file_system: Arc::new(OsFileSystem),
            comparator: Arc::new(BytewiseComparator),
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
            wal_preallocate_bytes: 4 << 20,
            level0_compaction_trigger_files: 8,
            level0_slowdown_writes_files: 20,
            level0_stop_writes_files: 36,
            target_file_size_bytes: 64 << 20,
            level_size_ratio: 10,
            base_level_size_bytes: 0,
            compression_per_level: Vec::new(),
            bottommost_compression: None,
            tombstone_compaction_ratio: 0.5,
            tombstone_compaction_min_entries: 1000,
            read_compaction_bytes_per_table_seek: 128,
            compaction_priority: CompactionPriority::MinOverlappingRatio,
            min_blob_size_bytes: None,
            blob_garbage_collection_ratio: 0.5,
            blob_garbage_collection_age_cutoff: 0.0,
            blob_file_size_bytes: 256 << 20,
            blob_compression: Compression::Lz4,
            ttl: None,
            merge_operator: None,
            clock: Arc::new(crate::ttl::SystemClock),
            max_background_flushes: 1,
            max_background_compactions: 0,
            max_subcompactions: 0,
            max_memory_bytes: 0,
            max_key_size_bytes: 64 << 10,
            max_value_size_bytes: 64 << 20,
            max_batch_size_bytes: 256 << 20,
            transaction_history_limit_bytes: 64 << 20,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("comparator", &self.comparator.name())
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
            .field("level0_slowdown_writes_files", &self.level0_slowdown_writes_files)
            .field("level0_stop_writes_files", &self.level0_stop_writes_files)
            .field("target_file_size_bytes", &self.target_file_size_bytes)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("base_level_size_bytes", &self.base_level_size_bytes)
            .field("compression_per_level", &self.compression_per_level)
            .field("bottommost_compression", &self.bottommost_compression)
            .field("tombstone_compaction_ratio", &self.tombstone_compaction_ratio)
            .field("tombstone_compaction_min_entries", &self.tombstone_compaction_min_entries)
            .field("read_compaction_bytes_per_table_seek", &self.read_compaction_bytes_per_table_seek)
            .field("compaction_priority", &self.compaction_priority)
            .field("min_blob_size_bytes", &self.min_blob_size_bytes)
            .field("blob_garbage_collection_ratio", &self.blob_garbage_collection_ratio)
            .field("blob_garbage_collection_age_cutoff", &self.blob_garbage_collection_age_cutoff)
            .field("blob_file_size_bytes", &self.blob_file_size_bytes)
            .field("blob_compression", &self.blob_compression)
            .field("ttl", &self.ttl)
            .field("merge_operator", &self.merge_operator.as_ref().map(|operator| operator.name().to_string()))
            .field("clock", &self.clock)
            .field("max_background_flushes", &self.max_background_flushes)
            .field("max_background_compactions", &self.max_background_compactions)
            .field("max_subcompactions", &self.max_subcompactions)
            .field("max_memory_bytes", &self.max_memory_bytes)
            .field("max_key_size_bytes", &self.max_key_size_bytes)
            .field("max_value_size_bytes", &self.max_value_size_bytes)
            .field("max_batch_size_bytes", &self.max_batch_size_bytes)
            .field("transaction_history_limit_bytes", &self.transaction_history_limit_bytes)
            .finish()
    }
}

fn check(condition: bool, message: &str) -> Result<()> {
    if condition {
        Ok(())
    } else {
        Err(Error::invalid(message.to_string()))
    }
}

impl Options {
    /// Checks every option against its documented range.
    pub fn validate(&self) -> Result<()> {
        self.column_family_options().validate()?;
        check(self.max_open_tables >= 16, "max_open_tables must be at least 16")?;
        check((1..=1 << 20).contains(&self.max_key_size_bytes), "max_key_size_bytes must be between 1 and 1 MiB")?;
        check(self.max_value_size_bytes <= 1 << 30, "max_value_size_bytes must be at most 1 GiB")?;
        check(self.max_batch_size_bytes <= 1 << 30, "max_batch_size_bytes must be at most 1 GiB")?;
        check(self.wal_preallocate_bytes <= 1 << 30, "wal_preallocate_bytes must be at most 1 GiB")?;
        check(
            self.transaction_history_limit_bytes >= 1 << 20,
            "transaction_history_limit_bytes must be at least 1 MiB",
        )?;
        check((1..=16).contains(&self.max_background_flushes), "max_background_flushes must be between 1 and 16")?;
        check(self.max_background_compactions <= 16, "max_background_compactions must be at most 16 (0: automatic)")?;
        check(self.max_subcompactions <= 16, "max_subcompactions must be at most 16 (0: automatic)")?;
        check(
            self.max_memory_bytes == 0 || self.max_memory_bytes >= 16 << 20,
            "max_memory_bytes must be 0 (default) or at least 16 MiB",
        )?;
        if let SyncMode::Interval { interval_us } = self.wal_sync_mode {
            check(interval_us >= 100, "SyncMode::Interval needs interval_us >= 100")?;
        }
        Ok(())
    }

    /// The column family options these database options give the default column family (and
    /// any column family opened without options of its own).
    pub fn column_family_options(&self) -> ColumnFamilyOptions {
        ColumnFamilyOptions {
            comparator: Arc::clone(&self.comparator),
            memtable_size_bytes: self.memtable_size_bytes,
            max_immutable_memtables: self.max_immutable_memtables,
            block_size_bytes: self.block_size_bytes,
            block_restart_interval: self.block_restart_interval,
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: self.compression,
            compression_per_level: self.compression_per_level.clone(),
            bottommost_compression: self.bottommost_compression,
            level0_compaction_trigger_files: self.level0_compaction_trigger_files,
            level0_slowdown_writes_files: self.level0_slowdown_writes_files,
            level0_stop_writes_files: self.level0_stop_writes_files,
            target_file_size_bytes: self.target_file_size_bytes,
            level_size_ratio: self.level_size_ratio,
            base_level_size_bytes: self.base_level_size_bytes,
            tombstone_compaction_ratio: self.tombstone_compaction_ratio,
            tombstone_compaction_min_entries: self.tombstone_compaction_min_entries,
            read_compaction_bytes_per_table_seek: self.read_compaction_bytes_per_table_seek,
            compaction_priority: self.compaction_priority,
            min_blob_size_bytes: self.min_blob_size_bytes,
            blob_garbage_collection_ratio: self.blob_garbage_collection_ratio,
            blob_garbage_collection_age_cutoff: self.blob_garbage_collection_age_cutoff,
            blob_file_size_bytes: self.blob_file_size_bytes,
            blob_compression: self.blob_compression,
            ttl: self.ttl,
            merge_operator: self.merge_operator.clone(),
        }
    }

    /// The number of compaction threads in effect: `max_background_compactions`, or half the
    /// CPUs (1 to 8) when it is 0.
    pub fn effective_max_background_compactions(&self) -> usize {
        match self.max_background_compactions {
            0 => (cpu_count() / 2).clamp(1, 8),
            threads => threads,
        }
    }

    /// The sub-compaction limit in effect: `max_subcompactions`, or a quarter of the CPUs (1 to
    /// 4) when it is 0.
    pub fn effective_max_subcompactions(&self) -> usize {
        match self.max_subcompactions {
            0 => (cpu_count() / 4).clamp(1, 4),
            ranges => ranges,
        }
    }

    /// The memory cap in effect: `max_memory_bytes`, or half of physical memory when it is 0.
    pub fn effective_max_memory_bytes(&self) -> u64 {
        if self.max_memory_bytes != 0 {
            return self.max_memory_bytes;
        }
        physical_memory_bytes().map_or(1 << 30, |total| (total / 2).max(16 << 20))
    }
}

/// The CPUs this process may run on (1 when unknown).
fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Total physical memory, from `/proc/meminfo` (Linux); `None` elsewhere or when unreadable.
fn physical_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kibibytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kibibytes * 1024)
}

/// Options of one column family: its key order, memtables, tables and compaction. Every field
/// but the comparator may be changed while the database runs
/// ([`crate::Db::set_column_family_options`]); changes apply to memtables and tables created
/// afterwards, and to the next compaction decisions. The fields mean the same as the
/// [`Options`] fields of the same names, which are the default column family's options.
///
/// Two option sets are equal when every field is, comparators by name (the name is a
/// comparator's identity, see [`Comparator`]).
#[derive(Clone)]
#[non_exhaustive]
pub struct ColumnFamilyOptions {
    /// The order of the column family's user keys (as RocksDB's
    /// `ColumnFamilyOptions::comparator`): iteration, bounds, seeks and key ranges all follow
    /// it. It is fixed when the column family is created: its name is recorded in the manifest
    /// and in every table, reopening the database with a comparator of another name fails with
    /// [`Error::InvalidArgument`] naming both, and
    /// [`crate::Db::set_column_family_options`] refuses to change it. Default
    /// [`BytewiseComparator`]; [`crate::ReverseBytewiseComparator`] gives a descending order.
    pub comparator: Arc<dyn Comparator>,
    /// See [`Options::memtable_size_bytes`].
    pub memtable_size_bytes: usize,
    /// See [`Options::max_immutable_memtables`].
    pub max_immutable_memtables: usize,
    /// See [`Options::block_size_bytes`].
    pub block_size_bytes: usize,
    /// See [`Options::block_restart_interval`].
    pub block_restart_interval: usize,
    /// See [`Options::bloom_bits_per_key`].
    pub bloom_bits_per_key: u32,
    /// See [`Options::compression`].
    pub compression: Compression,
    /// See [`Options::compression_per_level`].
    pub compression_per_level: Vec<Compression>,
    /// See [`Options::bottommost_compression`].
    pub bottommost_compression: Option<Compression>,
    /// See [`Options::level0_compaction_trigger_files`].
    pub level0_compaction_trigger_files: usize,
    /// See [`Options::level0_slowdown_writes_files`].
    pub level0_slowdown_writes_files: usize,
    /// See [`Options::level0_stop_writes_files`].
    pub level0_stop_writes_files: usize,
    /// See [`Options::target_file_size_bytes`].
    pub target_file_size_bytes: u64,
    /// See [`Options::level_size_ratio`].
    pub level_size_ratio: u64,
    /// See [`Options::base_level_size_bytes`].
    pub base_level_size_bytes: u64,
    /// See [`Options::tombstone_compaction_ratio`].
    pub tombstone_compaction_ratio: f64,
    /// See [`Options::tombstone_compaction_min_entries`].
    pub tombstone_compaction_min_entries: u64,
    /// See [`Options::read_compaction_bytes_per_table_seek`].
    pub read_compaction_bytes_per_table_seek: u64,
    /// See [`Options::compaction_priority`].
    pub compaction_priority: CompactionPriority,
    /// Key-value separation: values of at least this many bytes are written to blob files at
    /// flush, and tables hold a small reference to them instead (about 20 bytes), so that
    /// compactions move references rather than rewrite the values. `None` (the default) keeps
    /// every value in its table. See "Blob files" in `docs/architecture.md`.
    pub min_blob_size_bytes: Option<usize>,
    /// A compaction moves the live values of a blob file it reads references of into a new blob
    /// file once at least this share of the file's bytes is garbage (values no table references
    /// any more), so that the old file can be deleted. Between 0 and 1; default 0.5.
    pub blob_garbage_collection_ratio: f64,
    /// A compaction also moves the live values of the oldest blob files, this share of them by
    /// number, whatever their garbage (as RocksDB's `blob_garbage_collection_age_cutoff`).
    /// Between 0 and 1; default 0 (off): the garbage ratio alone decides, since moving live
    /// values that are not garbage costs the very rewrites separation saves.
    pub blob_garbage_collection_age_cutoff: f64,
    /// The size at which a compaction starts a new blob file for the values it moves. Default
    /// 256 MiB.
    pub blob_file_size_bytes: u64,
    /// How values written to blob files are compressed (each value on its own, stored as is
    /// when compression would not save an eighth of its bytes, as table blocks are). Default
    /// [`Compression::Lz4`], like `compression`: large values that compress take half the disk
    /// and half the page cache, and values that do not cost one quick failed attempt each.
    pub blob_compression: Compression,
    /// See [`Options::ttl`].
    pub ttl: Option<std::time::Duration>,
    /// See [`Options::merge_operator`].
    pub merge_operator: Option<Arc<dyn crate::merge_operator::MergeOperator>>,
}

impl Default for ColumnFamilyOptions {
    fn default() -> ColumnFamilyOptions {
        Options::default().column_family_options()
    }
}

impl std::fmt::Debug for ColumnFamilyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamilyOptions")
            .field("comparator", &self.comparator.name())
            .field("memtable_size_bytes", &self.memtable_size_bytes)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("block_size_bytes", &self.block_size_bytes)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("compression_per_level", &self.compression_per_level)
            .field("bottommost_compression", &self.bottommost_compression)
            .field("level0_compaction_trigger_files", &self.level0_compaction_trigger_files)
            .field("level0_slowdown_writes_files", &self.level0_slowdown_writes_files)
            .field("level0_stop_writes_files", &self.level0_stop_writes_files)
            .field("target_file_size_bytes", &self.target_file_size_bytes)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("base_level_size_bytes", &self.base_level_size_bytes)
            .field("tombstone_compaction_ratio", &self.tombstone_compaction_ratio)
            .field("tombstone_compaction_min_entries", &self.tombstone_compaction_min_entries)
            .field("read_compaction_bytes_per_table_seek", &self.read_compaction_bytes_per_table_seek)
            .field("compaction_priority", &self.compaction_priority)
            .field("min_blob_size_bytes", &self.min_blob_size_bytes)
            .field("blob_garbage_collection_ratio", &self.blob_garbage_collection_ratio)
            .field("blob_garbage_collection_age_cutoff", &self.blob_garbage_collection_age_cutoff)
            .field("blob_file_size_bytes", &self.blob_file_size_bytes)
            .field("blob_compression", &self.blob_compression)
            .field("ttl", &self.ttl)
            .field("merge_operator", &self.merge_operator.as_ref().map(|operator| operator.name().to_string()))
            .finish()
    }
}

impl PartialEq for ColumnFamilyOptions {
    fn eq(&self, other: &ColumnFamilyOptions) -> bool {
        // Destructuring makes a field added later fail to compile here until it is compared.
        let ColumnFamilyOptions {
            comparator,
            memtable_size_bytes,
            max_immutable_memtables,
            block_size_bytes,
            block_restart_interval,
            bloom_bits_per_key,
            compression,
            compression_per_level,
            bottommost_compression,
            level0_compaction_trigger_files,
            level0_slowdown_writes_files,
            level0_stop_writes_files,
            target_file_size_bytes,
            level_size_ratio,
            base_level_size_bytes,
            tombstone_compaction_ratio,
            tombstone_compaction_min_entries,
            read_compaction_bytes_per_table_seek,
            compaction_priority,
            min_blob_size_bytes,
            blob_garbage_collection_ratio,
            blob_garbage_collection_age_cutoff,
            blob_file_size_bytes,
            blob_compression,
            ttl,
            merge_operator,
        } = self;
        comparator.name() == other.comparator.name()
            && *memtable_size_bytes == other.memtable_size_bytes
            && *max_immutable_memtables == other.max_immutable_memtables
            && *block_size_bytes == other.block_size_bytes
            && *block_restart_interval == other.block_restart_interval
            && *bloom_bits_per_key == other.bloom_bits_per_key
            && *compression == other.compression
            && *compression_per_level == other.compression_per_level
            && *bottommost_compression == other.bottommost_compression
            && *level0_compaction_trigger_files == other.level0_compaction_trigger_files
            && *level0_slowdown_writes_files == other.level0_slowdown_writes_files
            && *level0_stop_writes_files == other.level0_stop_writes_files
            && *target_file_size_bytes == other.target_file_size_bytes
            && *level_size_ratio == other.level_size_ratio
            && *base_level_size_bytes == other.base_level_size_bytes
            && *tombstone_compaction_ratio == other.tombstone_compaction_ratio
            && *tombstone_compaction_min_entries == other.tombstone_compaction_min_entries
            && *read_compaction_bytes_per_table_seek == other.read_compaction_bytes_per_table_seek
            && *compaction_priority == other.compaction_priority
            && *min_blob_size_bytes == other.min_blob_size_bytes
            && *blob_garbage_collection_ratio == other.blob_garbage_collection_ratio
            && *blob_garbage_collection_age_cutoff == other.blob_garbage_collection_age_cutoff
            && *blob_file_size_bytes == other.blob_file_size_bytes
            && *blob_compression == other.blob_compression
            && *ttl == other.ttl
            && merge_operator.as_ref().map(|operator| operator.name().to_string())
                == other.merge_operator.as_ref().map(|operator| operator.name().to_string())
    }
}

impl ColumnFamilyOptions {
    /// Checks every option against its documented range.
    pub fn validate(&self) -> Result<()> {
        check(!self.comparator.name().is_empty(), "the comparator's name must not be empty")?;
        check(self.memtable_size_bytes >= 4096, "memtable_size_bytes must be at least 4096")?;
        check(self.memtable_size_bytes <= 1 << 31, "memtable_size_bytes must be at most 2 GiB")?;
        check(self.max_immutable_memtables >= 1, "max_immutable_memtables must be at least 1")?;
        check((256..=4 << 20).contains(&self.block_size_bytes), "block_size_bytes must be between 256 B and 4 MiB")?;
        check((1..=1024).contains(&self.block_restart_interval), "block_restart_interval must be between 1 and 1024")?;
        check(self.bloom_bits_per_key <= 64, "bloom_bits_per_key must be at most 64")?;
        check(self.level0_compaction_trigger_files >= 2, "level0_compaction_trigger_files must be at least 2")?;
        check(
            self.level0_slowdown_writes_files >= self.level0_compaction_trigger_files,
            "level0_slowdown_writes_files must be at least level0_compaction_trigger_files",
        )?;
        check(
            self.level0_stop_writes_files > self.level0_slowdown_writes_files,
            "level0_stop_writes_files must exceed level0_slowdown_writes_files",
        )?;
        check(self.target_file_size_bytes >= 4096, "target_file_size_bytes must be at least 4096")?;
        check((2..=1000).contains(&self.level_size_ratio), "level_size_ratio must be between 2 and 1000")?;
        check(
            self.base_level_size_bytes == 0 || self.base_level_size_bytes >= 4096,
            "base_level_size_bytes must be 0 (automatic) or at least 4096",
        )?;
        check(self.compression_per_level.len() <= 64, "compression_per_level has more entries than levels")?;
        check(
            (0.0..=1.0).contains(&self.tombstone_compaction_ratio),
            "tombstone_compaction_ratio must be between 0 and 1",
        )?;
        check(self.min_blob_size_bytes.is_none_or(|size| size >= 1), "min_blob_size_bytes must be at least 1")?;
        check(
            (0.0..=1.0).contains(&self.blob_garbage_collection_ratio),
            "blob_garbage_collection_ratio must be between 0 and 1",
        )?;
        check(
            (0.0..=1.0).contains(&self.blob_garbage_collection_age_cutoff),
            "blob_garbage_collection_age_cutoff must be between 0 and 1",
        )?;
        check(self.blob_file_size_bytes >= 4096, "blob_file_size_bytes must be at least 4096")?;
        check(self.ttl.is_none_or(|ttl| !ttl.is_zero()), "ttl must be longer than zero (None for no expiry)")?;
        Ok(())
    }

    /// The compression of tables written to `level`; `bottommost` when they hold the
    /// bottommost data of their key range.
    pub(crate) fn compression_for_level(&self, level: usize, bottommost: bool) -> Compression {
        if bottommost {
            if let Some(compression) = self.bottommost_compression {
                return compression;
            }
        }
        match self.compression_per_level.get(level).or(self.compression_per_level.last()) {
            Some(&compression) => compression,
            None => self.compression,
        }
    }

    /// The base level's target size: `base_level_size_bytes`, or memtable size times the
    /// level-0 trigger when that is 0 (with a 64 KiB floor for tiny test memtables).
    pub(crate) fn effective_base_level_size_bytes(&self) -> u64 {
        if self.base_level_size_bytes != 0 {
            return self.base_level_size_bytes;
        }
        (self.memtable_size_bytes as u64).saturating_mul(self.level0_compaction_trigger_files as u64).max(64 << 10)
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
    /// Iterators: the smallest user key returned (inclusive), in the column family's order.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the first user key not returned (exclusive), in the column family's order.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators: read blob files ahead of a scan that meets their records in file order (a
    /// window of 64 KiB growing to 256 KiB per file). Default `false`: with the files in the
    /// page cache, single reads measured faster (random 100-key scans of 4 KiB values, 8-25 %),
    /// and the kernel reads ahead of sequential reads itself; worth trying where blob files
    /// are read from a slow device.
    pub blob_readahead: bool,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            verify_checksums: true,
            lower_bound: None,
            upper_bound: None,
            blob_readahead: false,
        }
    }
}
