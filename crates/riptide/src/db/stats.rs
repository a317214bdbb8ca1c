//! Statistics: a typed snapshot of the engine's counters and sizes, and its human-readable dump.
//!
//! Counters are cumulative since the database was opened. Write amplification is the bytes the
//! engine wrote (WAL, flush and compaction outputs) divided by the logical bytes users wrote
//! (the encoded size of their batches, about key plus value bytes).

use std::fmt;
use std::sync::atomic::Ordering;

use super::DbInner;

/// Files and bytes of one level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Number of table files.
    pub files: usize,
    /// Total size of those files.
    pub size_bytes: u64,
}

/// What recovery found when the database was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryStats {
    /// Write-ahead log records replayed into memtables.
    pub wal_records_replayed: u64,
    /// Bytes of torn records dropped from the end of the newest log.
    pub wal_torn_tail_bytes_dropped: u64,
    /// Damaged records skipped under `WalRecovery::SkipCorrupt`.
    pub wal_records_skipped: u64,
    /// Bytes of those damaged records.
    pub wal_bytes_skipped: u64,
}

/// A snapshot of the engine's statistics; see [`crate::Db::stats`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per level, from level 0 down.
    pub levels: Vec<LevelStats>,
    /// Memory held by the active memtable's arena.
    pub memtable_bytes: usize,
    /// Full memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Memory held by those memtables.
    pub immutable_memtable_bytes: usize,
    /// Bytes of uncompressed blocks in the block cache.
    pub block_cache_usage_bytes: usize,
    /// Block cache capacity.
    pub block_cache_capacity_bytes: usize,
    /// Block cache lookups that found their block.
    pub block_cache_hits: u64,
    /// Block cache lookups that had to read from disk.
    pub block_cache_misses: u64,
    /// Tables open in the table cache.
    pub open_tables: usize,
    /// Memory held by open tables (indexes, filters, properties).
    pub table_memory_bytes: usize,
    /// Logical bytes written by users (encoded batch sizes).
    pub user_bytes_written: u64,
    /// Bytes appended to write-ahead logs.
    pub wal_bytes_written: u64,
    /// Completed flushes.
    pub flush_count: u64,
    /// Bytes of level-0 tables written by flushes.
    pub flush_bytes_written: u64,
    /// Completed compactions (trivial moves not included).
    pub compaction_count: u64,
    /// Bytes of input tables read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes of tables written by compactions.
    pub compaction_bytes_written: u64,
    /// Files moved down a level without rewriting.
    pub trivial_moves: u64,
    /// Times a write waited for flush or compaction.
    pub write_stall_count: u64,
    /// Total time writes waited, in microseconds.
    pub write_stall_micros: u64,
    /// The last sequence number visible to readers.
    pub visible_sequence: u64,
    /// The oldest sequence a reader may still read at (the oldest snapshot, or the visible
    /// sequence when there is none).
    pub smallest_snapshot: u64,
    /// What recovery found at open.
    pub recovery: RecoveryStats,
    /// The background error that stopped writes, if any.
    pub background_error: Option<String>,
}

impl Stats {
    /// Engine bytes written (WAL, flush, compaction) per logical byte written by users; 0 when
    /// nothing was written.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes_written + self.flush_bytes_written + self.compaction_bytes_written) as f64
            / self.user_bytes_written as f64
    }

    /// Total bytes of table files.
    pub fn total_table_bytes(&self) -> u64 {
        self.levels.iter().map(|level| level.size_bytes).sum()
    }

    /// Block cache hits per lookup, 0 when there was none.
    pub fn block_cache_hit_rate(&self) -> f64 {
        let lookups = self.block_cache_hits + self.block_cache_misses;
        if lookups == 0 {
            0.0
        } else {
            self.block_cache_hits as f64 / lookups as f64
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = 1024.0 * 1024.0;
        writeln!(f, "level  files  size_mib")?;
        for (level, stats) in self.levels.iter().enumerate() {
            writeln!(f, "L{level:<5} {:>5}  {:>8.2}", stats.files, stats.size_bytes as f64 / MIB)?;
        }
        writeln!(
            f,
            "memtable: {:.2} MiB active, {} immutable ({:.2} MiB)",
            self.memtable_bytes as f64 / MIB,
            self.immutable_memtables,
            self.immutable_memtable_bytes as f64 / MIB
        )?;
        writeln!(
            f,
            "block cache: {:.2} / {:.2} MiB, hit rate {:.1} % ({} hits, {} misses)",
            self.block_cache_usage_bytes as f64 / MIB,
            self.block_cache_capacity_bytes as f64 / MIB,
            self.block_cache_hit_rate() * 100.0,
            self.block_cache_hits,
            self.block_cache_misses
        )?;
        writeln!(f, "open tables: {} ({:.2} MiB)", self.open_tables, self.table_memory_bytes as f64 / MIB)?;
        writeln!(
            f,
            "written: user {:.2} MiB, wal {:.2} MiB, flush {:.2} MiB ({}), compaction {:.2} MiB ({}, read {:.2} MiB, {} trivial moves)",
            self.user_bytes_written as f64 / MIB,
            self.wal_bytes_written as f64 / MIB,
            self.flush_bytes_written as f64 / MIB,
            self.flush_count,
            self.compaction_bytes_written as f64 / MIB,
            self.compaction_count,
            self.compaction_bytes_read as f64 / MIB,
            self.trivial_moves
        )?;
        writeln!(f, "write amplification: {:.2}", self.write_amplification())?;
        writeln!(f, "stalls: {} ({:.3} s)", self.write_stall_count, self.write_stall_micros as f64 / 1e6)?;
        writeln!(f, "sequence: visible {}, smallest snapshot {}", self.visible_sequence, self.smallest_snapshot)?;
        writeln!(
            f,
            "recovery: {} records replayed, {} torn tail bytes dropped, {} records skipped",
            self.recovery.wal_records_replayed,
            self.recovery.wal_torn_tail_bytes_dropped,
            self.recovery.wal_records_skipped
        )?;
        if let Some(error) = &self.background_error {
            writeln!(f, "background error: {error}")?;
        }
        Ok(())
    }
}

/// Collects the statistics of `inner`.
pub(crate) fn collect(inner: &DbInner) -> Stats {
    let state = inner.state.lock();
    let version = state.versions.current();
    let levels = version
        .levels
        .iter()
        .enumerate()
        .map(|(level, files)| LevelStats { files: files.len(), size_bytes: version.level_bytes(level) })
        .collect();
    let background = state.stats.clone();
    let stats = Stats {
        levels,
        memtable_bytes: state.memtable.approximate_memory_bytes(),
        immutable_memtables: state.immutables.len(),
        immutable_memtable_bytes: state.immutables.iter().map(|imm| imm.memtable.approximate_memory_bytes()).sum(),
        block_cache_usage_bytes: inner.block_cache.usage_bytes(),
        block_cache_capacity_bytes: inner.block_cache.capacity_bytes(),
        block_cache_hits: inner.block_cache.hit_count(),
        block_cache_misses: inner.block_cache.miss_count(),
        open_tables: inner.table_cache.len(),
        table_memory_bytes: inner.table_cache.memory_usage_bytes(),
        user_bytes_written: inner.user_bytes_written.load(Ordering::Relaxed),
        wal_bytes_written: inner.wal_bytes_written.load(Ordering::Relaxed),
        flush_count: background.flush_count,
        flush_bytes_written: background.flush_bytes_written,
        compaction_count: background.compaction_count,
        compaction_bytes_read: background.compaction_bytes_read,
        compaction_bytes_written: background.compaction_bytes_written,
        trivial_moves: background.trivial_moves,
        write_stall_count: background.write_stall_count,
        write_stall_micros: background.write_stall_micros,
        visible_sequence: inner.visible_sequence.load(Ordering::Acquire),
        smallest_snapshot: 0,
        recovery: inner.recovery.clone(),
        background_error: state.background_error.as_ref().map(ToString::to_string),
    };
    drop(state);
    Stats { smallest_snapshot: inner.snapshots.smallest_snapshot(&inner.visible_sequence), ..stats }
}
