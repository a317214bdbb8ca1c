//! Statistics: a typed snapshot of the engine's counters and sizes, and its human-readable dump.
//!
//! Counters are cumulative since the database was opened. Write amplification is the bytes the
//! engine wrote (WAL, flush and compaction outputs) divided by the logical bytes users wrote
//! (the encoded size of their batches, about key plus value bytes).

use std::fmt;
use std::sync::atomic::Ordering;

use super::DbInner;
use crate::version::tree::NUM_LEVELS;

/// Files, bytes and compaction traffic of one level.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Number of table files.
    pub files: usize,
    /// Total size of those files.
    pub size_bytes: u64,
    /// Bytes of tables written into this level (level 0: by flushes; others: by compactions).
    pub bytes_written: u64,
    /// Bytes of this level's tables read by compactions (as a job's input level or as the
    /// level it merged into).
    pub bytes_read: u64,
    /// Jobs that wrote tables into this level: flushes for level 0, compactions (trivial moves
    /// excluded) for the others.
    pub jobs: u64,
    /// Bytes of the input level's tables that compactions brought into this level (RocksDB's
    /// "Rn"). The rest of what those jobs read, this level's own tables they merged with, is
    /// the price of keeping the level sorted; their ratio shows how well jobs were chosen.
    pub bytes_brought_in: u64,
    /// The level's target size under the dynamic level sizes (0: level 0, or a level above
    /// the base level that is not used). Per column family only; summed in the totals.
    pub target_bytes: u64,
    /// Compaction score: size over target (level 0: files over trigger); 1 or more means due.
    pub score: f64,
}

/// Memory pressure levels of the global memory cap (see [`crate::Options::max_memory_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum MemoryPressure {
    /// Below 70 % of the cap.
    #[default]
    Normal = 0,
    /// From 70 %: early flushes, 100 µs delays per write group, smaller block cache.
    Elevated = 1,
    /// From 85 %: forced flushes, 1 ms delays, block cache at its minimum.
    High = 2,
    /// From 95 %: writes wait until memory is freed.
    Critical = 3,
}

impl MemoryPressure {
    pub(crate) fn from_u8(value: u8) -> MemoryPressure {
        match value {
            0 => MemoryPressure::Normal,
            1 => MemoryPressure::Elevated,
            2 => MemoryPressure::High,
            _ => MemoryPressure::Critical,
        }
    }
}

impl fmt::Display for MemoryPressure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            MemoryPressure::Normal => "normal",
            MemoryPressure::Elevated => "elevated",
            MemoryPressure::High => "high",
            MemoryPressure::Critical => "critical",
        };
        f.write_str(name)
    }
}

/// The statistics of one column family.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ColumnFamilyStats {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The name of its comparator (the order of its keys), e.g. `riptide.bytewise`.
    pub comparator: String,
    /// Per level, from level 0 down (bytes written and read are database-wide, in
    /// [`Stats::levels`], and zero here).
    pub levels: Vec<LevelStats>,
    /// Memory held by the active memtable.
    pub memtable_bytes: usize,
    /// Full memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Memory held by those memtables.
    pub immutable_memtable_bytes: usize,
    /// Estimated bytes compaction must still rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// The level that level 0 compacts into.
    pub base_level: usize,
    /// Live blob files (key-value separation): those its tables reference.
    pub blob_files: usize,
    /// Their total size.
    pub blob_file_bytes: u64,
    /// Bytes of their records that no table references any more (garbage that blob garbage
    /// collection may give back).
    pub blob_garbage_bytes: u64,
}

/// What recovery found when the database was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryStats {
    /// Write-ahead log records replayed into memtables.
    pub wal_records_replayed: u64,
    /// Bytes dropped from the end of the log history: a torn record, or a record after a gap in
    /// the sequence numbers, and everything after it, later logs included (only writes no sync
    /// had covered can be there; see `WalRecovery::TolerateTornTail`).
    pub wal_torn_tail_bytes_dropped: u64,
    /// Whole logs after the end of the history, not replayed (their bytes are counted in
    /// `wal_torn_tail_bytes_dropped`).
    pub wal_logs_dropped: u64,
    /// Damaged records skipped under `WalRecovery::SkipCorrupt`.
    pub wal_records_skipped: u64,
    /// Bytes of those damaged records.
    pub wal_bytes_skipped: u64,
    /// Prepared transactions found undecided and recovered as prepared (two-phase commit).
    pub prepared_transactions_recovered: u64,
    /// Prepared-transaction files of transactions whose commit the log showed (the crash came
    /// between the commit and the file's removal); removed.
    pub prepared_transactions_committed: u64,
    /// Damaged prepared-transaction files (a `prepare` the crash interrupted); removed.
    pub prepared_files_dropped: u64,
}

/// A snapshot of the engine's statistics; see [`crate::Db::stats`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per level, from level 0 down, summed over column families.
    pub levels: Vec<LevelStats>,
    /// Per column family.
    pub column_families: Vec<ColumnFamilyStats>,
    /// Memory held by the active memtables' arenas.
    pub memtable_bytes: usize,
    /// Full memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Memory held by those memtables.
    pub immutable_memtable_bytes: usize,
    /// Estimated bytes compaction must still rewrite (all column families).
    pub pending_compaction_bytes: u64,
    /// Compactions running now.
    pub running_compactions: usize,
    /// Compactions that were split into parallel key ranges.
    pub subcompactions: u64,
    /// Compactions started because a table was mostly deletes.
    pub tombstone_compactions: u64,
    /// Tables removed whole, without being read, because a range delete covered all of them.
    pub range_delete_dropped_files: u64,
    /// Compactions started to drop entries that range deletes cover.
    pub range_delete_compactions: u64,
    /// Compactions started because most of a table's entries had expired.
    pub expiry_compactions: u64,
    /// Compactions of level 0 below its file-count trigger, paid for by seeks that merged its
    /// files (`Options::read_compaction_bytes_per_table_seek`).
    pub read_triggered_compactions: u64,
    /// Memtables switched (and so flushed) because scans passing the older versions they held
    /// paid for it (`Options::read_compaction_bytes_per_table_seek`).
    pub read_triggered_flushes: u64,
    /// Merge operands flushes and compactions folded into other entries
    /// (`iterator/merge_fold.rs`).
    pub merge_operands_folded: u64,
    /// Range tombstones the column families' versions hold (flushed range deletes that may
    /// still hide data in tables).
    pub range_tombstones: usize,
    /// Compaction jobs run for `compact_range`.
    pub manual_compactions: u64,
    /// The global memory cap in effect.
    pub memory_limit_bytes: u64,
    /// Memory in use as last accounted: memtables, block cache, open tables, table builders.
    pub memory_usage_bytes: u64,
    /// Largest memory use accounted since open.
    pub memory_peak_bytes: u64,
    /// The current pressure level.
    pub memory_pressure: MemoryPressure,
    /// Memtables switched early because of memory pressure.
    pub memory_flushes: u64,
    /// Write groups delayed by memory pressure, and their total delay.
    pub memory_delay_count: u64,
    /// See `memory_delay_count`, in microseconds.
    pub memory_delay_micros: u64,
    /// Waits of writers blocked at critical memory pressure, and their total time.
    pub memory_block_count: u64,
    /// See `memory_block_count`, in microseconds.
    pub memory_block_micros: u64,
    /// Write groups that went on at critical pressure because nothing in flight could free
    /// memory (the excess was table metadata).
    pub memory_unreclaimable_writes: u64,
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
    /// Memory held now by the table builders of running flushes and compactions (block, index
    /// and filter buffers).
    pub table_builder_bytes: usize,
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
    /// Times a write waited for flush or compaction (level 0 at its stop trigger, or the
    /// immutable memtables at their limit).
    pub write_stall_count: u64,
    /// Write groups waiting right now for flush or compaction (RocksDB's
    /// `rocksdb.is-write-stopped`, as a count).
    pub write_stalls_in_progress: u64,
    /// Total time writes waited, in microseconds.
    pub write_stall_micros: u64,
    /// Write groups delayed because level 0 reached its slowdown trigger.
    pub write_slowdown_count: u64,
    /// Total time of those delays, in microseconds.
    pub write_slowdown_micros: u64,
    /// The last sequence number visible to readers.
    pub visible_sequence: u64,
    /// The oldest sequence a reader may still read at (the oldest snapshot, or the visible
    /// sequence when there is none).
    pub smallest_snapshot: u64,
    /// What recovery found at open.
    pub recovery: RecoveryStats,
    /// Transactions: counts, conflicts and locks.
    pub transactions: TransactionStats,
    /// The background error that stopped writes, if any.
    pub background_error: Option<String>,
}

/// Transaction counters and lock-manager figures, part of [`Stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionStats {
    /// Transactions begun since open.
    pub begun: u64,
    /// Transactions open now.
    pub open: u64,
    /// Transactions that committed.
    pub committed: u64,
    /// Transactions rolled back (explicitly, by drop, or after a failed commit).
    pub rolled_back: u64,
    /// Serialization failures ([`crate::Error::Conflict`]) at lock time or at commit.
    pub conflicts: u64,
    /// Lock requests that had to wait.
    pub lock_waits: u64,
    /// Total time lock requests waited, in microseconds.
    pub lock_wait_micros: u64,
    /// Deadlocks found (each fails one victim).
    pub deadlocks: u64,
    /// Lock requests that timed out.
    pub lock_timeouts: u64,
    /// Lock escalations: a transaction past its `lock_escalation_threshold` row locks in a
    /// column family took the family whole and released its row locks there.
    pub lock_escalations: u64,
    /// Escalations refused because another transaction held or waited for a lock in the
    /// family (the transaction kept its row locks and tried again later).
    pub lock_escalations_refused: u64,
    /// Lock requests that waited for another transaction's column-family lock (also counted in
    /// `lock_waits`).
    pub column_family_lock_waits: u64,
    /// Locks held now (a column family held whole counts as one).
    pub locks_held: usize,
    /// Approximate memory of the lock tables.
    pub lock_memory_bytes: usize,
    /// Memory of the commit history that validates transactions.
    pub history_memory_bytes: usize,
    /// Memory of open and prepared transactions' own writes and read sets (in-memory writes,
    /// spilled runs' indexes and filters), charged to the memory cap.
    pub write_set_memory_bytes: usize,
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
        writeln!(f, "level  files  size_mib  written_mib  read_mib   jobs  in_mib  w_amp")?;
        for (level, stats) in self.levels.iter().enumerate() {
            let level_amplification = if self.user_bytes_written == 0 {
                0.0
            } else {
                stats.bytes_written as f64 / self.user_bytes_written as f64
            };
            writeln!(
                f,
                "L{level:<5} {:>5}  {:>8.2}  {:>11.2}  {:>8.2}  {:>5}  {:>6.0}  {:>5.2}",
                stats.files,
                stats.size_bytes as f64 / MIB,
                stats.bytes_written as f64 / MIB,
                stats.bytes_read as f64 / MIB,
                stats.jobs,
                stats.bytes_brought_in as f64 / MIB,
                level_amplification
            )?;
        }
        for family in &self.column_families {
            let scores: Vec<String> = family.levels.iter().map(|level| format!("{:.2}", level.score)).collect();
            writeln!(
                f,
                "column family {} ({}, {}): base level {}, pending compaction {:.2} MiB, memtable {:.2} MiB, {} immutable, scores [{}]",
                family.id,
                family.name,
                family.comparator,
                family.base_level,
                family.pending_compaction_bytes as f64 / MIB,
                family.memtable_bytes as f64 / MIB,
                family.immutable_memtables,
                scores.join(" ")
            )?;
            if family.blob_files > 0 {
                writeln!(
                    f,
                    "  blob files: {}, {:.2} MiB, {:.2} MiB garbage",
                    family.blob_files,
                    family.blob_file_bytes as f64 / MIB,
                    family.blob_garbage_bytes as f64 / MIB
                )?;
            }
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
        writeln!(
            f,
            "open tables: {} ({:.2} MiB); table builders {:.2} MiB",
            self.open_tables,
            self.table_memory_bytes as f64 / MIB,
            self.table_builder_bytes as f64 / MIB
        )?;
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
        let transactions = &self.transactions;
        writeln!(
            f,
            "transactions: {} begun, {} open, {} committed, {} rolled back, {} conflicts; locks: {} held ({:.2} MiB), \
             {} waits ({:.3} s, {} on column families), {} deadlocks, {} timeouts, {} escalations ({} refused); \
             history {:.2} MiB, write sets {:.2} MiB",
            transactions.begun,
            transactions.open,
            transactions.committed,
            transactions.rolled_back,
            transactions.conflicts,
            transactions.locks_held,
            transactions.lock_memory_bytes as f64 / MIB,
            transactions.lock_waits,
            transactions.lock_wait_micros as f64 / 1e6,
            transactions.column_family_lock_waits,
            transactions.deadlocks,
            transactions.lock_timeouts,
            transactions.lock_escalations,
            transactions.lock_escalations_refused,
            transactions.history_memory_bytes as f64 / MIB,
            transactions.write_set_memory_bytes as f64 / MIB
        )?;
        writeln!(
            f,
            "stalls: {} ({:.3} s, {} now); slowdowns: {} ({:.3} s); running compactions {}, pending {:.2} MiB; \
             {} subcompactions, {} tombstone, {} manual, {} read-triggered ({} read-triggered flushes); range tombstones {}, {} tables dropped by them, {} compactions for them; {} expiry compactions, {} merge operands folded",
            self.write_stall_count,
            self.write_stall_micros as f64 / 1e6,
            self.write_stalls_in_progress,
            self.write_slowdown_count,
            self.write_slowdown_micros as f64 / 1e6,
            self.running_compactions,
            self.pending_compaction_bytes as f64 / MIB,
            self.subcompactions,
            self.tombstone_compactions,
            self.manual_compactions,
            self.read_triggered_compactions,
            self.read_triggered_flushes,
            self.range_tombstones,
            self.range_delete_dropped_files,
            self.range_delete_compactions,
            self.expiry_compactions,
            self.merge_operands_folded
        )?;
        writeln!(
            f,
            "memory: {:.2} / {:.2} MiB ({}), peak {:.2} MiB; {} early flushes, {} delays ({:.3} s), {} blocks ({:.3} s), {} unreclaimable",
            self.memory_usage_bytes as f64 / MIB,
            self.memory_limit_bytes as f64 / MIB,
            self.memory_pressure,
            self.memory_peak_bytes as f64 / MIB,
            self.memory_flushes,
            self.memory_delay_count,
            self.memory_delay_micros as f64 / 1e6,
            self.memory_block_count,
            self.memory_block_micros as f64 / 1e6,
            self.memory_unreclaimable_writes
        )?;
        writeln!(f, "sequence: visible {}, smallest snapshot {}", self.visible_sequence, self.smallest_snapshot)?;
        writeln!(
            f,
            "recovery: {} records replayed, {} torn tail bytes dropped ({} whole logs), {} records skipped",
            self.recovery.wal_records_replayed,
            self.recovery.wal_torn_tail_bytes_dropped,
            self.recovery.wal_logs_dropped,
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
    let background = state.stats.clone();
    let mut levels: Vec<LevelStats> = (0..NUM_LEVELS)
        .map(|level| LevelStats {
            bytes_written: background.level_bytes_written[level],
            bytes_read: background.level_bytes_read[level],
            jobs: background.level_jobs[level],
            bytes_brought_in: background.level_bytes_brought_in[level],
            ..LevelStats::default()
        })
        .collect();
    let mut column_families = Vec::new();
    for (&id, family) in &state.column_families {
        let version = state.versions.current(id);
        let options = family.shared.options();
        let report = super::compaction::level_report(&version, &options);
        let family_levels: Vec<LevelStats> = (0..NUM_LEVELS)
            .map(|level| LevelStats {
                files: version.levels[level].len(),
                size_bytes: version.level_bytes(level),
                target_bytes: report.target_bytes[level],
                score: report.scores[level],
                ..LevelStats::default()
            })
            .collect();
        for (total, level) in levels.iter_mut().zip(&family_levels) {
            total.files += level.files;
            total.size_bytes += level.size_bytes;
            total.target_bytes += level.target_bytes;
            total.score = total.score.max(level.score);
        }
        column_families.push(ColumnFamilyStats {
            id,
            name: family.shared.name.read().clone(),
            comparator: version.comparator.name().to_string(),
            levels: family_levels,
            memtable_bytes: family.memtable.approximate_memory_bytes(),
            immutable_memtables: family.immutables.len(),
            immutable_memtable_bytes: family.immutables.iter().map(|imm| imm.memtable.approximate_memory_bytes()).sum(),
            pending_compaction_bytes: report.pending_compaction_bytes,
            base_level: report.base_level,
            blob_files: version.blob_files.len(),
            blob_file_bytes: version.blob_files.values().map(|file| file.meta.file_size_bytes).sum(),
            blob_garbage_bytes: version.blob_files.values().map(|file| file.garbage().1).sum(),
        });
    }
    let memory = &inner.memory;
    let stats = Stats {
        levels,
        memtable_bytes: column_families.iter().map(|family| family.memtable_bytes).sum(),
        immutable_memtables: column_families.iter().map(|family| family.immutable_memtables).sum(),
        immutable_memtable_bytes: column_families.iter().map(|family| family.immutable_memtable_bytes).sum(),
        pending_compaction_bytes: column_families.iter().map(|family| family.pending_compaction_bytes).sum(),
        column_families,
        running_compactions: state.running_compactions.len(),
        subcompactions: background.subcompactions,
        tombstone_compactions: background.tombstone_compactions,
        range_delete_dropped_files: background.range_delete_dropped_files,
        range_delete_compactions: background.range_delete_compactions,
        expiry_compactions: background.expiry_compactions,
        read_triggered_compactions: background.read_triggered_compactions,
        read_triggered_flushes: background.read_triggered_flushes,
        merge_operands_folded: background.merge_operands_folded,
        range_tombstones: state
            .versions
            .column_families()
            .values()
            .map(|f| f.current.range_tombstones.list().len())
            .sum(),
        manual_compactions: background.manual_compactions,
        memory_limit_bytes: memory.limit_bytes(),
        memory_usage_bytes: memory.usage_bytes(),
        memory_peak_bytes: memory.peak_usage_bytes(),
        memory_pressure: memory.pressure(),
        memory_flushes: background.memory_flushes,
        memory_delay_count: memory.delays.load(Ordering::Relaxed),
        memory_delay_micros: memory.delay_micros.load(Ordering::Relaxed),
        memory_block_count: memory.blocks.load(Ordering::Relaxed),
        memory_block_micros: memory.block_micros.load(Ordering::Relaxed),
        memory_unreclaimable_writes: memory.unreclaimable_critical_writes.load(Ordering::Relaxed),
        block_cache_usage_bytes: inner.block_cache.usage_bytes(),
        block_cache_capacity_bytes: inner.block_cache.capacity_bytes(),
        block_cache_hits: inner.block_cache.hit_count(),
        block_cache_misses: inner.block_cache.miss_count(),
        open_tables: inner.table_cache.len(),
        table_memory_bytes: inner.table_cache.memory_usage_bytes(),
        table_builder_bytes: usize::try_from(memory.builder_usage_bytes()).unwrap_or(usize::MAX),
        user_bytes_written: inner.user_bytes_written.load(Ordering::Relaxed),
        wal_bytes_written: inner.wal_bytes_written.load(Ordering::Relaxed),
        flush_count: background.flush_count,
        // Level 0 receives only flushes; the other levels only compactions.
        flush_bytes_written: background.level_bytes_written[0],
        compaction_count: background.compaction_count,
        compaction_bytes_read: background.level_bytes_read.iter().sum(),
        compaction_bytes_written: background.level_bytes_written[1..].iter().sum(),
        trivial_moves: background.trivial_moves,
        write_stall_count: background.write_stall_count,
        write_stalls_in_progress: background.write_stalls_in_progress,
        write_stall_micros: background.write_stall_micros,
        write_slowdown_count: background.write_slowdown_count,
        write_slowdown_micros: background.write_slowdown_micros,
        visible_sequence: inner.visible_sequence.load(Ordering::Acquire),
        smallest_snapshot: 0,
        recovery: inner.recovery.clone(),
        transactions: transaction_stats(inner),
        background_error: state.background_error.as_ref().map(ToString::to_string),
    };
    drop(state);
    Stats { smallest_snapshot: inner.snapshots.smallest_snapshot(&inner.visible_sequence), ..stats }
}

fn transaction_stats(inner: &DbInner) -> TransactionStats {
    let shared = &inner.transactions;
    let counters = &shared.counters;
    let locks = &shared.locks.counters;
    TransactionStats {
        begun: counters.begun.load(Ordering::Relaxed),
        open: counters.open.load(Ordering::Relaxed),
        committed: counters.committed.load(Ordering::Relaxed),
        rolled_back: counters.rolled_back.load(Ordering::Relaxed),
        conflicts: counters.conflicts.load(Ordering::Relaxed),
        lock_waits: locks.waits.load(Ordering::Relaxed),
        lock_wait_micros: locks.wait_micros.load(Ordering::Relaxed),
        deadlocks: locks.deadlocks.load(Ordering::Relaxed),
        lock_timeouts: locks.timeouts.load(Ordering::Relaxed),
        lock_escalations: locks.escalations.load(Ordering::Relaxed),
        lock_escalations_refused: locks.escalations_refused.load(Ordering::Relaxed),
        column_family_lock_waits: locks.column_family_waits.load(Ordering::Relaxed),
        locks_held: shared.locks.lock_count(),
        lock_memory_bytes: shared.locks.memory_bytes(),
        history_memory_bytes: shared.history.memory_bytes(),
        write_set_memory_bytes: inner.memory.write_set_usage_bytes() as usize,
    }
}
