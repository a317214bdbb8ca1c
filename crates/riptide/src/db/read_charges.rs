//! Read charges: what seeks tell the compaction picker about level 0 (read-triggered compaction).
//!
//! A seek merges one cursor per level-0 table in its range and one per deeper level. A
//! compaction of level 0 would leave one cursor for all of them (the level it writes into), so
//! every level-0 cursor beyond that is work the seek pays only because level 0 has not been
//! compacted yet. Iterators add that number to their column family's [`ReadCharges`] for every
//! seek, weighed by what the cursors cost: an eighth of a charge for a table whose block was
//! cached, a whole charge for one that read it from the file ([`MISS_UNITS`]). Once the
//! charges, at `read_compaction_bytes_per_table_seek` bytes each, reach what the
//! compaction would rewrite (level 0 and the shallowest deeper level holding files), the column
//! family is marked due and the compaction threads are woken; the picker then compacts level 0
//! even below its file-count trigger (`compaction::picker::pick_level0_for_reads`). Any job that
//! takes level 0 starts the count again. Every forward step pays as well, a fifth of a unit per
//! extra level-0 cursor ([`SeekCharges::charge_step`]): the merge's heap moves over each of them
//! at every row, so a 100-key scan over three overlapping level-0 tables costs about four
//! times what its seek alone is charged. Scans also pay for the older versions they pass in
//! the sources such a job merges ([`SeekCharges::charge_passed_versions`]): a row rewritten
//! since level 0 was last compacted costs every scan over it a move of each source holding an
//! older version, work the job removes. The cost model is LevelDB's seek compaction, reweighed
//! for data in memory: a seek that merges a table more costs about what compacting a hundred
//! bytes or so does when the table reads a block (a few microseconds against about 20 ns per
//! byte, measured on 2 cores), and 7 to 15 bytes' worth when the block is cached.
//!
//! The same holds one level up. Rows rewritten since the active memtable was started leave it
//! holding several versions of their keys, and a scan passes the older ones at every such row,
//! work no compaction removes while they sit in memory: a flush does (it keeps only the
//! versions a reader can see, I3), and the level-0 charges above then pay for merging the
//! flushed table. Scans count the keys whose older versions they passed in the active memtable
//! ([`SeekCharges::charge_passed_memtable_versions`]), each weighed as a passed version above;
//! once those charges reach what the flush costs, the
//! column family is marked for a flush and the flush threads are woken; one of them switches
//! the memtable when the writers' leadership is free (`db::flush`). A read-only phase after a
//! write burst (sysbench's `oltp_read_only` right after `oltp_read_write`) then stops paying
//! for the burst's versions within seconds instead of until the next write fills the memtable.
//! Any switch of the memtable starts that count again. What the flush costs: writing the
//! memtable's bytes, and its new level-0 file's share of the level-0 compaction it brings nearer
//! (that job's bytes over the file-count trigger), at the rate above. Without that share, a
//! memtable just started was cheap enough to flush every few seconds while writers and scans
//! shared a table (sysbench's read_write: 72 flushes a minute over four tables), each small
//! file bringing a rewrite of the level below closer.
//!
//! Concurrency contract: [`ReadCharges`] is shared by every iterator of a column family and the
//! compaction threads; its counters are relaxed atomics, since a charge that lands late or is
//! counted against the next level-0 shape changes only when a compaction starts, never what any
//! read returns. Iterators batch their charges locally ([`SeekCharges`]) and add them every
//! [`CHARGES_PER_FLUSH`] seeks and when dropped, so the shared counter is written rarely.
//! Waking the compaction threads may miss one that is about to wait; it then finds the mark at
//! its next periodic look, within a second.
//!
//! Invariants: charges only ever mark a column family due; they never change what is read, and
//! a due mark without a level-0 file to compact picks nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Condvar;

use crate::sstable::reader::counted_block_misses;
use crate::version::tree::Version;

/// An iterator adds its charges to the shared counter after this many units.
const CHARGES_PER_FLUSH: u64 = 256;

/// Units of charge (sixteenths of `read_compaction_bytes_per_table_seek`) of one extra
/// level-0 table a seek positions in, and the units added for each data block a level-0 table
/// read from the file rather than the block cache during a seek: a table seek that reads its
/// block from disk costs one whole charge, one that finds it cached an eighth. Why: an extra
/// table whose blocks are cached cost a fresh-iterator seek 140 ns (sequential seeks over two
/// overlapping level-0 tables ran at 1.42M a second on 2 cores against 1.58M over one table)
/// to 305 ns (Zipfian seeks: 1.14M against 1.38M), what compacting 7 to 15 bytes costs at 20 ns
/// a byte; one that reads and decompresses a block costs a few microseconds, the 128 bytes of
/// the default. Weighing every extra table as a read from disk compacted a 32 MB level 0
/// halfway through a quarter-second of cached sequential seeks, work those seeks could not
/// repay.
const CACHED_TABLE_UNITS: u64 = 2;
const MISS_UNITS: u64 = 14;
const UNITS_PER_CHARGE: u64 = CACHED_TABLE_UNITS + MISS_UNITS;

/// Stepped rows per extra level-0 table that make one unit of charge: a forward step through a
/// merge moves its heap over every cursor a compaction of level 0 would remove, about 35 ns a
/// row per extra table (100-key random scans over 1M keys in three overlapping level-0 tables,
/// blocks 60 % cached: 24 us of CPU per scan against 14.8 us once the three were compacted into
/// one table, 9.3 us of which the seeks' own charges price at about 2.4), what compacting 1.7
/// bytes costs: a fifth of a unit at the default 128 bytes a charge.
const STEPPED_ROW_TABLES_PER_UNIT: u64 = 5;

/// A column family's read charges against its current level 0.
pub(crate) struct ReadCharges {
    /// Charges since the last job that took level 0.
    charges: AtomicU64,
    /// Set when the charges paid for a compaction of level 0; cleared by any job that takes it.
    due: AtomicBool,
    /// Counts the resets. An iterator made before the last one reads level-0 files that a job
    /// has taken since (or is taking), so its charges are dropped: no compaction can spare it
    /// that work any more.
    generation: AtomicU64,
    /// The column family's `read_compaction_bytes_per_table_seek` (0: off), kept here so that
    /// creating an iterator does not take the options' lock.
    bytes_per_charge: AtomicU64,
    /// Charges against the active memtable since it was started.
    memtable_charges: AtomicU64,
    /// Set when those paid for a flush; cleared when the memtable is switched.
    flush_due: AtomicBool,
    /// Counts the memtable switches; an iterator's memtable charges count only while it holds.
    memtable_generation: AtomicU64,
    /// The column family's `level0_compaction_trigger_files`, for a flush's share of the
    /// level-0 compaction it brings nearer.
    level0_trigger_files: AtomicU64,
    /// The compaction threads' condition variable (the database's `work_available`).
    work_available: Arc<Condvar>,
}

impl ReadCharges {
    pub(crate) fn new(bytes_per_charge: u64, work_available: Arc<Condvar>) -> ReadCharges {
        ReadCharges {
            charges: AtomicU64::new(0),
            due: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            bytes_per_charge: AtomicU64::new(bytes_per_charge),
            memtable_charges: AtomicU64::new(0),
            flush_due: AtomicBool::new(false),
            memtable_generation: AtomicU64::new(0),
            level0_trigger_files: AtomicU64::new(1),
            work_available,
        }
    }

    /// Follows a change of the column family's `level0_compaction_trigger_files`.
    pub(crate) fn set_level0_trigger_files(&self, files: usize) {
        self.level0_trigger_files.store(files.max(1) as u64, Ordering::Relaxed);
    }

    /// True when reads have paid for a flush of the active memtable.
    pub(crate) fn is_flush_due(&self) -> bool {
        self.flush_due.load(Ordering::Relaxed)
    }

    /// Starts counting against a new active memtable (called at every switch).
    pub(crate) fn reset_memtable(&self) {
        self.memtable_generation.fetch_add(1, Ordering::Relaxed);
        self.memtable_charges.store(0, Ordering::Relaxed);
        self.flush_due.store(false, Ordering::Relaxed);
    }

    /// Follows a change of the column family's options.
    pub(crate) fn set_bytes_per_charge(&self, bytes_per_charge: u64) {
        self.bytes_per_charge.store(bytes_per_charge, Ordering::Relaxed);
        if bytes_per_charge == 0 {
            self.due.store(false, Ordering::Relaxed);
            self.flush_due.store(false, Ordering::Relaxed);
        }
    }

    /// True when the rule is on (iterators then count their level-0 tables' block misses).
    pub(crate) fn is_enabled(&self) -> bool {
        self.bytes_per_charge.load(Ordering::Relaxed) != 0
    }

    /// True when reads have paid for a compaction of level 0.
    pub(crate) fn is_due(&self) -> bool {
        self.due.load(Ordering::Relaxed)
    }

    /// Starts counting again: a job took level 0, so the charges so far were against files
    /// that are going away.
    pub(crate) fn reset(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.charges.store(0, Ordering::Relaxed);
        self.due.store(false, Ordering::Relaxed);
    }

    /// The per-iterator accumulator for seeks over `version`, or `None` when they charge
    /// nothing: the rule is off, or neither level 0 adds a cursor a compaction would remove nor
    /// the active memtable holds anything. `level0_tables` is the number of level-0 tables the
    /// iterator merges, `deeper_levels` the number of deeper levels it merges (its level-0
    /// tables count their block misses, [`counted_block_misses`]); `memtable_bytes` is the
    /// active memtable's size, what a flush of it writes (its share of the level-0 job it brings
    /// nearer is added).
    pub(crate) fn seek_charges(
        self: &Arc<Self>,
        version: &Version,
        level0_tables: usize,
        deeper_levels: usize,
        memtable_bytes: usize,
    ) -> Option<SeekCharges> {
        let bytes_per_charge = self.bytes_per_charge.load(Ordering::Relaxed);
        let extra_tables = extra_tables_per_seek(level0_tables, deeper_levels);
        let per_seek = extra_tables * CACHED_TABLE_UNITS;
        if bytes_per_charge == 0 || (per_seek == 0 && memtable_bytes == 0) {
            return None;
        }
        // The units at which the job is paid for, at least one seek's worth (none is due for
        // an iterator whose seeks charge nothing: its passed versions lie in no level-0 job).
        let job_bytes = level0_job_bytes(version);
        let threshold = if per_seek == 0 {
            u64::MAX
        } else {
            job_bytes.saturating_mul(UNITS_PER_CHARGE).div_ceil(bytes_per_charge).max(per_seek)
        };
        let flush_bytes =
            (memtable_bytes as u64) + job_bytes / self.level0_trigger_files.load(Ordering::Relaxed).max(1);
        let memtable_threshold = flush_bytes.saturating_mul(UNITS_PER_CHARGE).div_ceil(bytes_per_charge).max(1);
        Some(SeekCharges {
            shared: Arc::clone(self),
            extra_tables,
            stepped_row_tables: 0,
            pending: 0,
            threshold,
            generation: self.generation.load(Ordering::Relaxed),
            misses_before_seek: 0,
            memtable_pending: 0,
            memtable_threshold,
            memtable_generation: self.memtable_generation.load(Ordering::Relaxed),
        })
    }

    /// Adds memtable `charges` of an iterator made in `generation` (of the memtable); marks the
    /// column family for a flush and wakes the background threads when the total reaches
    /// `threshold`.
    fn add_memtable(&self, charges: u64, threshold: u64, generation: u64) {
        if self.bytes_per_charge.load(Ordering::Relaxed) == 0
            || self.memtable_generation.load(Ordering::Relaxed) != generation
        {
            return;
        }
        let total = self.memtable_charges.fetch_add(charges, Ordering::Relaxed) + charges;
        if total >= threshold && !self.flush_due.swap(true, Ordering::Relaxed) {
            self.work_available.notify_all();
        }
    }

    /// Adds `charges` of an iterator made in `generation`; marks the column family due and
    /// wakes the compaction threads when the total reaches `threshold`.
    fn add(&self, charges: u64, threshold: u64, generation: u64) {
        if self.bytes_per_charge.load(Ordering::Relaxed) == 0 || self.generation.load(Ordering::Relaxed) != generation {
            return;
        }
        let total = self.charges.fetch_add(charges, Ordering::Relaxed) + charges;
        if total >= threshold && !self.due.swap(true, Ordering::Relaxed) {
            self.work_available.notify_all();
        }
    }
}

/// The cursors a compaction of level 0 would remove from a seek over `level0_tables` level-0
/// tables and `deeper_levels` deeper levels: all the level-0 ones when a deeper level holds keys
/// of the range (the job writes into it), all but one otherwise (the job's output is one more
/// level).
fn extra_tables_per_seek(level0_tables: usize, deeper_levels: usize) -> u64 {
    let extra = if deeper_levels > 0 { level0_tables } else { level0_tables.saturating_sub(1) };
    extra as u64
}

/// What a compaction of level 0 rewrites, about: every level-0 file, and the shallowest deeper
/// level that holds files (where level-0 data goes; for keys spread over the whole range, all of
/// it overlaps).
fn level0_job_bytes(version: &Version) -> u64 {
    let below_bytes = (1..version.levels.len()).map(|level| version.level_bytes(level)).find(|&bytes| bytes > 0);
    version.level_bytes(0) + below_bytes.unwrap_or(0)
}

/// One iterator's charges, added to the column family's every [`CHARGES_PER_FLUSH`] and when
/// dropped.
pub(crate) struct SeekCharges {
    shared: Arc<ReadCharges>,
    /// The level-0 cursors a compaction would remove from every seek and step
    /// ([`extra_tables_per_seek`]); a seek costs [`CACHED_TABLE_UNITS`] for each, before its
    /// block misses.
    extra_tables: u64,
    /// Rows stepped times `extra_tables`, not yet turned into units
    /// ([`STEPPED_ROW_TABLES_PER_UNIT`]).
    stepped_row_tables: u64,
    /// Charges not yet added.
    pending: u64,
    /// The total at which level 0 is due, from the iterator's version.
    threshold: u64,
    /// The shared charges' generation when the iterator was made.
    generation: u64,
    /// This thread's count of blocks read by level-0 tables when the current seek began: only a
    /// seek's misses are charged (a scan reads the same blocks however many files hold them).
    misses_before_seek: u64,
    /// Memtable charges not yet added, the total at which a flush is due (from the memtable's
    /// size when the iterator was made) and the memtable generation then.
    memtable_pending: u64,
    memtable_threshold: u64,
    memtable_generation: u64,
}

impl SeekCharges {
    /// Charges one seek, before it runs.
    #[inline]
    pub(crate) fn charge_seek(&mut self) {
        self.misses_before_seek = counted_block_misses();
        self.charge_units(self.extra_tables * CACHED_TABLE_UNITS);
    }

    /// Charges the block misses of the seek that just ran.
    #[inline]
    pub(crate) fn charge_seek_misses(&mut self) {
        let misses = counted_block_misses();
        let units = misses.wrapping_sub(self.misses_before_seek).saturating_mul(MISS_UNITS);
        self.misses_before_seek = misses;
        self.charge_units(units);
    }

    /// Charges one forward step through the merge: the heap moves over each extra level-0
    /// cursor at every row, whether or not the rows were ever rewritten, so a scan costs more
    /// per row than over the one table a compaction leaves ([`STEPPED_ROW_TABLES_PER_UNIT`]).
    #[inline]
    pub(crate) fn charge_step(&mut self) {
        if self.extra_tables == 0 {
            return;
        }
        self.stepped_row_tables += self.extra_tables;
        if self.stepped_row_tables >= STEPPED_ROW_TABLES_PER_UNIT * CHARGES_PER_FLUSH {
            let units = self.stepped_row_tables / STEPPED_ROW_TABLES_PER_UNIT;
            self.stepped_row_tables -= units * STEPPED_ROW_TABLES_PER_UNIT;
            self.charge_units(units);
        }
    }

    /// Charges `versions` older versions that a step or a seek passed in sources a compaction
    /// of level 0 merges: each costs the merge a move of one source and a comparison or two,
    /// at most what a cached extra table costs a seek, so it weighs as much
    /// ([`CACHED_TABLE_UNITS`]); measured with `examples/scan_versions.rs` (one thread, blocks
    /// cached), 80-90 ns per passed version against 140-305 ns for the extra table. Scans over
    /// rows rewritten since level 0 was last compacted pay this at every such row, many times
    /// per seek.
    #[inline]
    pub(crate) fn charge_passed_versions(&mut self, versions: u64) {
        if versions > 0 {
            self.charge_units(versions * CACHED_TABLE_UNITS);
        }
    }

    /// Charges `keys` whose older versions a step passed in the active memtable: each costs the
    /// step a jump over the key's run of versions in the skiplist, a cache miss or two, about
    /// what a passed version in a table costs ([`CACHED_TABLE_UNITS`]). A flush would leave one
    /// version per key.
    #[inline]
    pub(crate) fn charge_passed_memtable_versions(&mut self, keys: u64) {
        if keys > 0 {
            self.memtable_pending += keys * CACHED_TABLE_UNITS;
            if self.memtable_pending >= CHARGES_PER_FLUSH {
                self.flush_memtable_charges();
            }
        }
    }

    fn flush_memtable_charges(&mut self) {
        if self.memtable_pending > 0 {
            self.shared.add_memtable(self.memtable_pending, self.memtable_threshold, self.memtable_generation);
            self.memtable_pending = 0;
        }
    }

    /// Adds `units` to the pending charges, passing them on once there are enough.
    #[inline]
    fn charge_units(&mut self, units: u64) {
        self.pending += units;
        if self.pending >= CHARGES_PER_FLUSH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending > 0 {
            self.shared.add(self.pending, self.threshold, self.generation);
            self.pending = 0;
        }
    }
}

impl Drop for SeekCharges {
    fn drop(&mut self) {
        self.pending += self.stepped_row_tables / STEPPED_ROW_TABLES_PER_UNIT;
        self.flush();
        self.flush_memtable_charges();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::reader::add_counted_block_misses;

    #[test]
    fn extra_tables_count_only_what_a_level0_job_removes() {
        assert_eq!(extra_tables_per_seek(0, 0), 0);
        assert_eq!(extra_tables_per_seek(1, 0), 0, "one level-0 table alone: the job leaves one");
        assert_eq!(extra_tables_per_seek(3, 0), 2);
        assert_eq!(extra_tables_per_seek(0, 2), 0);
        assert_eq!(extra_tables_per_seek(1, 1), 1, "the job merges it into the level below");
        assert_eq!(extra_tables_per_seek(7, 1), 7);
    }

    fn test_charges(shared: &Arc<ReadCharges>, extra_tables: u64, threshold: u64) -> SeekCharges {
        SeekCharges {
            shared: Arc::clone(shared),
            extra_tables,
            stepped_row_tables: 0,
            pending: 0,
            threshold,
            generation: 0,
            misses_before_seek: 0,
            memtable_pending: 0,
            memtable_threshold: u64::MAX,
            memtable_generation: 0,
        }
    }

    #[test]
    fn a_seek_is_charged_its_own_block_misses_only() {
        let shared = Arc::new(ReadCharges::new(100, Arc::new(Condvar::new())));
        let mut charges = test_charges(&shared, 1, u64::MAX);
        // Misses before the seek (a scan's) are not charged; the seek's two are.
        add_counted_block_misses(5);
        charges.charge_seek();
        add_counted_block_misses(2);
        charges.charge_seek_misses();
        assert_eq!(charges.pending, 2 + 2 * MISS_UNITS);
        // A seek that found its blocks cached costs its tables alone.
        add_counted_block_misses(3);
        charges.charge_seek();
        charges.charge_seek_misses();
        assert_eq!(charges.pending, 2 + 2 * MISS_UNITS + 2);
        drop(charges);
        assert_eq!(shared.charges.load(Ordering::Relaxed), 4 + 2 * MISS_UNITS);
    }

    #[test]
    fn steps_charge_a_unit_per_five_rows_per_extra_table() {
        let charged = |extra_tables: u64, steps: u64| {
            let shared = Arc::new(ReadCharges::new(100, Arc::new(Condvar::new())));
            let mut charges = test_charges(&shared, extra_tables, u64::MAX);
            for _ in 0..steps {
                charges.charge_step();
            }
            drop(charges);
            shared.charges.load(Ordering::Relaxed)
        };
        // Two extra tables: 1,000 steps move over 2,000 extra cursors, 400 units, part of them
        // passed on while stepping and the rest when the iterator is dropped.
        assert_eq!(charged(2, 1000), 400);
        assert_eq!(charged(2, 10_000), 4000);
        // One extra table: 7 steps make one whole unit; the remainder is not charged.
        assert_eq!(charged(1, 7), 1);
        // A merge with nothing a compaction would remove charges no step.
        assert_eq!(charged(0, 10_000), 0);
    }

    #[test]
    fn charges_mark_due_once_at_the_threshold_and_reset() {
        let shared = Arc::new(ReadCharges::new(100, Arc::new(Condvar::new())));
        let mut charges = test_charges(&shared, 1, 1000);
        for _ in 0..499 {
            charges.charge_seek();
        }
        drop(charges);
        assert!(!shared.is_due(), "998 charges are under 1,000");
        let mut charges = test_charges(&shared, 1, 1000);
        charges.charge_seek();
        assert!(!shared.is_due(), "charges wait in the iterator until flushed");
        drop(charges);
        assert!(shared.is_due());
        let mut stale = test_charges(&shared, 1000, 1000);
        shared.reset();
        assert!(!shared.is_due());
        assert_eq!(shared.charges.load(Ordering::Relaxed), 0);
        stale.charge_seek();
        drop(stale);
        assert!(!shared.is_due(), "charges of an iterator made before the reset are dropped");
        shared.add(1000, 1000, 1);
        assert!(shared.is_due());
        shared.set_bytes_per_charge(0);
        assert!(!shared.is_due(), "turning the rule off clears the mark");
    }
}
