//! The global memory cap: accounting of what the engine holds in memory, pressure levels, and
//! the actions each level triggers.
//!
//! Memory is counted in seven parts: active memtables and immutable memtables of every column
//! family (their arena chunks), the block cache's charged bytes, the indexes, filters and
//! properties of open tables, the buffers of the table builders of running flushes and
//! compactions (charged live through [`crate::memory_charge::MemoryCharge`]), the lock tables
//! and commit history of transactions, and the write and read sets of open transactions
//! (charged live; under high pressure transactions spill their writes sooner, see
//! `txn::Transaction::write_memory_limit_bytes`). The writer side
//! (the write leader, under the database mutex) totals the memtables itself, because they
//! change with every write; the cache and table parts change more slowly and are refreshed by
//! the monitor thread every `MONITOR_INTERVAL_MS` milliseconds. The monitor also returns the
//! allocator's free memory to the system after memory moved (see `AllocatorTrim`).
//!
//! The ratio of use to `max_memory_bytes` maps to a [`MemoryPressure`] level:
//! below 70 % normal; from 70 % elevated (writers switch a memtable that is at least half full
//! so it is flushed early, and wait 100 µs per write group); from 85 % high (the largest
//! memtable of any column family is switched for flushing, the block cache is shrunk, and
//! writers wait 1 ms per group); from 95 % critical (writers block until use falls below the
//! critical mark, as long as flushes in flight can free memory). The monitor thread acts from
//! its side too: it shrinks the block cache (down to an eighth of its configured capacity)
//! from elevated pressure on and gives it back once pressure is normal.
//!
//! Whatever its configured capacity, the block cache may only fill the room below the elevated
//! mark that memtables and tables leave (see [`MemoryGovernor::cache_room_bytes`]): so the cache
//! never raises the pressure by itself, and the total stays within the critical mark plus the
//! write group that crossed it. The monitor applies the room at every refresh, and writers
//! shrink the cache at once when memtables grow into its room, because the monitor's refresh
//! comes too late: reads can fill the cache by many MiB between two refreshes.
//!
//! A writer never blocks when nothing in flight can free memory (no immutable memtable waits
//! for flush): then the excess is in active memtables (which the high-pressure step switches
//! for flushing first) or table metadata that only compaction or closing tables reduces, and
//! blocking would deadlock (invariant I24). Such
//! writes are counted.
//!
//! Concurrency contract: the governor's fields are atomics; the configured cache capacity is
//! changed only through [`MemoryGovernor::set_block_cache_capacity_bytes`].

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::memory_charge::MemoryCharge;

use super::stats::MemoryPressure;

/// How often the monitor thread refreshes the cache and table parts and adjusts the cache.
pub(crate) const MONITOR_INTERVAL_MS: u64 = 20;

/// Monitor intervals in a row without a memtable chunk taken from the pool after which the
/// pool gives its chunks back (60 ms): writers filling memtables take one every few tens of
/// milliseconds; a database that stopped writing should not keep memory for them.
const CHUNK_POOL_IDLE_CHECKS: u32 = 3;

/// The one policy for pooled memtable chunks and memory pressure, applied by the monitor and
/// by every write group: the pool keeps chunks only while pressure is normal, and raised
/// pressure gives back what it holds first (they are the cheapest memory to return).
pub(crate) fn fit_chunk_pool(inner: &super::DbInner, pressure: MemoryPressure) {
    inner.chunk_pool.set_accepting(pressure == MemoryPressure::Normal);
}

/// Fractions of the cap at which each pressure level begins, in per mille.
const ELEVATED_PER_MILLE: u64 = 700;
const HIGH_PER_MILLE: u64 = 850;
const CRITICAL_PER_MILLE: u64 = 950;

/// The block cache never shrinks below this fraction of its configured capacity (unless the
/// room the cap leaves it is smaller).
const MINIMUM_CACHE_DIVISOR: usize = 8;

/// When writers shrink the block cache to its room, they shrink it this fraction of the cap
/// further, so that steadily growing memtables shrink it once per step rather than at every
/// write group (each shrink locks every shard).
const CACHE_SHRINK_STEP_DIVISOR: u64 = 64;

pub(crate) struct MemoryGovernor {
    limit_bytes: u64,
    /// Block cache plus open-table memory, as of the monitor's last refresh.
    other_usage_bytes: AtomicU64,
    /// The open-table part of `other_usage_bytes`.
    table_usage_bytes: AtomicU64,
    /// Memtable memory as of the last write group.
    memtable_usage_bytes: AtomicU64,
    /// Buffers of running table builders (flushes and compactions), charged live.
    builder_usage_bytes: Arc<AtomicU64>,
    /// Lock tables and commit history of transactions, as of the monitor's last refresh.
    transaction_usage_bytes: AtomicU64,
    /// Open transactions' own writes and read sets (in-memory layers, spilled runs' readers),
    /// charged live.
    write_set_usage_bytes: Arc<AtomicU64>,
    /// The capacity the user configured; the cache may be shrunk below it under pressure.
    configured_cache_bytes: AtomicUsize,
    pressure: AtomicU8,
    /// Largest total use seen.
    peak_usage_bytes: AtomicU64,
    /// Writes that went on at critical pressure because nothing in flight could free memory.
    pub(crate) unreclaimable_critical_writes: AtomicU64,
    pub(crate) delays: AtomicU64,
    pub(crate) delay_micros: AtomicU64,
    pub(crate) blocks: AtomicU64,
    pub(crate) block_micros: AtomicU64,
}

impl MemoryGovernor {
    pub(crate) fn new(limit_bytes: u64, configured_cache_bytes: usize) -> MemoryGovernor {
        MemoryGovernor {
            limit_bytes,
            other_usage_bytes: AtomicU64::new(0),
            table_usage_bytes: AtomicU64::new(0),
            memtable_usage_bytes: AtomicU64::new(0),
            builder_usage_bytes: Arc::new(AtomicU64::new(0)),
            transaction_usage_bytes: AtomicU64::new(0),
            write_set_usage_bytes: Arc::new(AtomicU64::new(0)),
            configured_cache_bytes: AtomicUsize::new(configured_cache_bytes),
            pressure: AtomicU8::new(MemoryPressure::Normal as u8),
            peak_usage_bytes: AtomicU64::new(0),
            unreclaimable_critical_writes: AtomicU64::new(0),
            delays: AtomicU64::new(0),
            delay_micros: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            block_micros: AtomicU64::new(0),
        }
    }

    pub(crate) fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Total use as last accounted.
    pub(crate) fn usage_bytes(&self) -> u64 {
        self.other_usage_bytes.load(Ordering::Relaxed)
            + self.memtable_usage_bytes.load(Ordering::Relaxed)
            + self.builder_usage_bytes()
            + self.transaction_usage_bytes.load(Ordering::Relaxed)
            + self.write_set_usage_bytes()
    }

    /// A charge for one transaction's write and read sets.
    pub(crate) fn write_set_charge(&self) -> MemoryCharge {
        MemoryCharge::new(Arc::clone(&self.write_set_usage_bytes))
    }

    /// Bytes the open transactions' write and read sets hold now.
    pub(crate) fn write_set_usage_bytes(&self) -> u64 {
        self.write_set_usage_bytes.load(Ordering::Relaxed)
    }

    /// The pressure level of the current use, with the live parts (builders, transactions'
    /// write sets) as they are now and the others as last refreshed.
    pub(crate) fn current_pressure(&self) -> MemoryPressure {
        pressure_for(self.usage_bytes(), self.limit_bytes)
    }

    /// Records the memory of the lock tables and the commit history (from the monitor); the
    /// pressure follows at the next refresh.
    pub(crate) fn update_transactions(&self, transaction_bytes: u64) {
        self.transaction_usage_bytes.store(transaction_bytes, Ordering::Relaxed);
    }

    /// A charge for one table builder's buffers (see `TableBuilder::with_memory_charge`).
    pub(crate) fn builder_charge(&self) -> MemoryCharge {
        MemoryCharge::new(Arc::clone(&self.builder_usage_bytes))
    }

    /// Bytes the running table builders hold now.
    pub(crate) fn builder_usage_bytes(&self) -> u64 {
        self.builder_usage_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn peak_usage_bytes(&self) -> u64 {
        self.peak_usage_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn pressure(&self) -> MemoryPressure {
        MemoryPressure::from_u8(self.pressure.load(Ordering::Relaxed))
    }

    /// Records the memtables' memory (from the write path) and returns the pressure level.
    pub(crate) fn update_memtables(&self, memtable_bytes: u64) -> MemoryPressure {
        self.memtable_usage_bytes.store(memtable_bytes, Ordering::Relaxed);
        self.refresh_pressure()
    }

    /// Records the cache and table memory (from the monitor) and returns the pressure level.
    pub(crate) fn update_other(&self, cache_bytes: u64, table_bytes: u64) -> MemoryPressure {
        self.table_usage_bytes.store(table_bytes, Ordering::Relaxed);
        self.other_usage_bytes.store(cache_bytes + table_bytes, Ordering::Relaxed);
        self.refresh_pressure()
    }

    fn refresh_pressure(&self) -> MemoryPressure {
        let usage = self.usage_bytes();
        self.peak_usage_bytes.fetch_max(usage, Ordering::Relaxed);
        let level = pressure_for(usage, self.limit_bytes);
        self.pressure.store(level as u8, Ordering::Relaxed);
        level
    }

    /// The most the block cache may hold now: the room below the elevated mark that the
    /// memtables, open tables and table builders leave.
    pub(crate) fn cache_room_bytes(&self) -> usize {
        let elevated_mark = (u128::from(self.limit_bytes) * u128::from(ELEVATED_PER_MILLE) / 1000) as u64;
        let others = self.memtable_usage_bytes.load(Ordering::Relaxed)
            + self.table_usage_bytes.load(Ordering::Relaxed)
            + self.builder_usage_bytes()
            + self.transaction_usage_bytes.load(Ordering::Relaxed);
        usize::try_from(elevated_mark.saturating_sub(others)).unwrap_or(usize::MAX)
    }

    /// The capacity the block cache should have at `pressure`, within its room.
    pub(crate) fn cache_capacity_for(&self, pressure: MemoryPressure) -> usize {
        let configured = self.configured_cache_bytes.load(Ordering::Relaxed);
        let minimum = configured / MINIMUM_CACHE_DIVISOR;
        let wanted = match pressure {
            MemoryPressure::Normal => configured,
            MemoryPressure::Elevated => (configured / 2).max(minimum),
            MemoryPressure::High | MemoryPressure::Critical => minimum,
        };
        wanted.min(self.cache_room_bytes())
    }

    /// Called by writers after recording the memtables: when they have grown into the block
    /// cache's room, shrinks the cache now (a step below the room) instead of at the monitor's
    /// next refresh.
    pub(crate) fn fit_block_cache(&self, cache: &BlockCache) {
        let room = self.cache_room_bytes();
        if cache.capacity_bytes() > room {
            let step = usize::try_from(self.limit_bytes / CACHE_SHRINK_STEP_DIVISOR).unwrap_or(usize::MAX);
            cache.set_capacity_bytes(room.saturating_sub(step));
        }
    }

    /// Sets the user's cache capacity; the cache gets it (or less, under pressure) at once.
    pub(crate) fn set_block_cache_capacity_bytes(&self, cache: &BlockCache, capacity_bytes: usize) {
        self.configured_cache_bytes.store(capacity_bytes, Ordering::Relaxed);
        cache.set_capacity_bytes(self.cache_capacity_for(self.pressure()));
    }
}

/// The pressure level of `usage_bytes` against `limit_bytes`.
pub(crate) fn pressure_for(usage_bytes: u64, limit_bytes: u64) -> MemoryPressure {
    let per_mille = (u128::from(usage_bytes) * 1000 / u128::from(limit_bytes.max(1))) as u64;
    if per_mille >= CRITICAL_PER_MILLE {
        MemoryPressure::Critical
    } else if per_mille >= HIGH_PER_MILLE {
        MemoryPressure::High
    } else if per_mille >= ELEVATED_PER_MILLE {
        MemoryPressure::Elevated
    } else {
        MemoryPressure::Normal
    }
}

/// The least time between two returns of free allocator memory to the operating system. The
/// process's peak follows it: the memory cap's 4 GiB process test (64 MiB cap) peaked 101-107
/// MiB over its baseline every 250 ms, past the 102.4 MiB its contract allows, and 78 MiB every
/// 50 ms, with the same throughput (benchtool, batches of 1,000 under a 128 MiB cap: 897-915K
/// and 934-948K writes/s).
const ALLOCATOR_TRIM_INTERVAL_MS: u64 = 50;

/// Returns the system allocator's free memory to the operating system, at most every
/// [`ALLOCATOR_TRIM_INTERVAL_MS`] while memory pressure is elevated or higher, and once each time
/// the pressure falls or the block cache shrinks.
///
/// Why: under a cap, memory moves between the block cache (small heap blocks) and the memtables
/// (page-mapped chunks) as the pressure changes. When the cache shrinks, glibc's malloc keeps the
/// freed blocks in its arenas, scattered between live ones, so the process's resident memory does
/// not fall with the engine's count: four writers and two readers under a 64 MiB cap held 50 MiB
/// of free heap (`mallinfo2`: 67 MiB of arenas, 16 MiB in use) and peaked at 118 MiB of RSS.
/// `malloc_trim(0)` hands every free page in every arena back (`MADV_DONTNEED`); it walks the
/// arenas' free lists, which takes well under a millisecond at these sizes, on the monitor
/// thread only. Other allocators and platforms: nothing is done (see "Memory cap" in
/// `docs/architecture.md` for how they behave).
#[derive(Default)]
struct AllocatorTrim {
    /// Memory was freed (or pressure is raised) since the last trim.
    pending: bool,
    last: Option<std::time::Instant>,
}

impl AllocatorTrim {
    /// Trims when a trim is pending and the last one is old enough.
    fn release_if_due(&mut self, now: std::time::Instant) {
        let due = self.last.is_none_or(|last| {
            now.duration_since(last) >= std::time::Duration::from_millis(ALLOCATOR_TRIM_INTERVAL_MS)
        });
        if self.pending && due {
            self.pending = false;
            self.last = Some(now);
            release_free_allocator_memory();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(loom)))]
fn release_free_allocator_memory() {
    // SAFETY: malloc_trim only returns free memory of glibc's own arenas to the kernel; it takes
    // the arenas' locks itself and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", not(loom))))]
fn release_free_allocator_memory() {}

/// Background thread body: refreshes the slow-moving parts of the accounting, adjusts the
/// block cache to the pressure level and wakes writers waiting for memory.
pub(crate) fn monitor_loop(inner: std::sync::Arc<super::DbInner>) {
    let interval = std::time::Duration::from_millis(MONITOR_INTERVAL_MS);
    let mut last_pressure = MemoryPressure::Normal;
    let mut allocator_trim = AllocatorTrim::default();
    let mut last_cache_capacity = inner.block_cache.capacity_bytes();
    loop {
        let memtable_bytes: u64 = {
            let mut state = inner.state.lock();
            // Close sets the flag, then signals under the mutex: checking it under the mutex
            // before waiting means the signal cannot be missed.
            if inner.shutting_down.load(Ordering::Acquire) {
                return;
            }
            inner.shutdown_signal.wait_for(&mut state, interval);
            if inner.shutting_down.load(Ordering::Acquire) {
                return;
            }
            super::write::memtable_memory_bytes(&inner, &state)
        };
        inner.memory.update_transactions(inner.transactions.memory_bytes() as u64);
        inner.memory.update_memtables(memtable_bytes);
        let pressure = inner
            .memory
            .update_other(inner.block_cache.usage_bytes() as u64, inner.table_cache.memory_usage_bytes() as u64);
        fit_chunk_pool(&inner, pressure);
        // Pooled chunks are kept only while memtables keep taking them.
        inner.chunk_pool.release_if_idle(CHUNK_POOL_IDLE_CHECKS);
        let capacity = inner.memory.cache_capacity_for(pressure);
        if capacity != inner.block_cache.capacity_bytes() {
            inner.block_cache.set_capacity_bytes(capacity);
        }
        // While pressure is raised, once more when it has fallen, and after the cache shrank
        // (by the monitor or by writers): freed blocks and memtables should leave the process.
        let cache_capacity = inner.block_cache.capacity_bytes();
        let cache_shrank = cache_capacity < last_cache_capacity;
        last_cache_capacity = cache_capacity;
        if pressure >= MemoryPressure::Elevated || pressure < last_pressure || cache_shrank {
            allocator_trim.pending = true;
        }
        allocator_trim.release_if_due(std::time::Instant::now());
        if pressure < last_pressure {
            // Writers blocked at critical pressure re-check when woken.
            let _state = inner.state.lock();
            inner.background_done.notify_all();
        }
        last_pressure = pressure;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_memory_counts_and_takes_the_cache_room() {
        let governor = MemoryGovernor::new(1000, 600);
        let room_before = governor.cache_room_bytes();
        governor.update_transactions(300);
        assert_eq!(governor.usage_bytes(), 300);
        assert_eq!(governor.cache_room_bytes(), room_before - 300);
        assert_eq!(governor.update_other(0, 0), MemoryPressure::Normal);
        governor.update_transactions(960);
        assert_eq!(governor.update_other(0, 0), MemoryPressure::Critical);
    }

    #[test]
    fn pressure_levels_follow_the_ratio() {
        assert_eq!(pressure_for(0, 1000), MemoryPressure::Normal);
        assert_eq!(pressure_for(699, 1000), MemoryPressure::Normal);
        assert_eq!(pressure_for(700, 1000), MemoryPressure::Elevated);
        assert_eq!(pressure_for(850, 1000), MemoryPressure::High);
        assert_eq!(pressure_for(949, 1000), MemoryPressure::High);
        assert_eq!(pressure_for(950, 1000), MemoryPressure::Critical);
        assert_eq!(pressure_for(5000, 1000), MemoryPressure::Critical);
        assert_eq!(pressure_for(u64::MAX, 1), MemoryPressure::Critical);
    }

    #[test]
    fn cache_shrinks_with_pressure_and_comes_back() {
        let governor = MemoryGovernor::new(10_000, 800);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Normal), 800);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Elevated), 400);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::High), 100);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Critical), 100);
        assert_eq!(governor.update_memtables(9000), MemoryPressure::High);
        assert_eq!(governor.update_other(500, 100), MemoryPressure::Critical);
        assert_eq!(governor.update_memtables(1000), MemoryPressure::Normal);
        assert_eq!(governor.peak_usage_bytes(), 9600);
    }

    #[test]
    fn cache_gets_only_the_room_below_the_elevated_mark() {
        // A cache configured larger than the whole cap gets what memtables and tables leave
        // below 70 % of it, at every pressure level.
        let governor = MemoryGovernor::new(1000, 4000);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Normal), 700);
        governor.update_memtables(300);
        governor.update_other(0, 100);
        assert_eq!(governor.cache_room_bytes(), 300);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Normal), 300);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Critical), 300);
        governor.update_memtables(900);
        assert_eq!(governor.cache_capacity_for(MemoryPressure::Normal), 0);
        // Writers shrink the cache a step below its room as soon as memtables grow into it.
        let cache = BlockCache::new(4000);
        governor.update_memtables(500);
        governor.fit_block_cache(&cache);
        assert_eq!(cache.capacity_bytes(), 100 - 1000 / 64);
        governor.fit_block_cache(&cache);
        assert_eq!(cache.capacity_bytes(), 100 - 1000 / 64, "no shrink while within the room");
    }
}
