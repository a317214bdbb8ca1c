//! Column families: independent key spaces of one database that share its write-ahead log,
//! sequence numbers, snapshots, caches and background threads.
//!
//! Each column family has its own memtables, levels, options ([`ColumnFamilyOptions`]) and key
//! order (its comparator, fixed at creation and recorded in the manifest). A
//! write batch may span column families; since all of them log to the one WAL, the batch is
//! atomic across a crash. Per column family the manifest records a log number: the oldest WAL
//! that may hold data of the column family not yet in its tables. Recovery replays a WAL
//! record into a column family only if the WAL is at or above that number (invariant I22).
//!
//! Concurrency contract: a [`ColumnFamily`] handle is a cheap clone shared across threads. Its
//! [`ColumnFamilyShared`] part holds what readers need without the database mutex (the read
//! view, behind its own lock, and the options); [`ColumnFamilyState`] is the part guarded by
//! the database mutex. Dropping a column family removes it from the state and the manifest
//! and marks its files obsolete; they are deleted when the last reader (a read view, an
//! iterator) lets go of them.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use parking_lot::{Condvar, RwLock};

use super::read_charges::ReadCharges;
use super::{ImmutableMemTable, ReadView};
use crate::comparator::KeyComparator;
use crate::memtable::{ChunkPool, MemTable};
use crate::options::ColumnFamilyOptions;
use crate::snapshot::Snapshot;
use crate::version::tree::NUM_LEVELS;

/// A handle to a column family, from [`crate::Db::create_column_family`],
/// [`crate::Db::column_family`] or [`crate::Db::default_column_family`].
///
/// Handles stay valid after the column family is dropped, but every operation through them
/// then fails with [`crate::Error::InvalidArgument`].
#[derive(Clone)]
pub struct ColumnFamily {
    pub(crate) shared: Arc<ColumnFamilyShared>,
}

impl ColumnFamily {
    /// The column family's id: 0 for the default one; ids are never reused.
    pub fn id(&self) -> u32 {
        self.shared.id
    }

    /// The column family's current name.
    pub fn name(&self) -> String {
        self.shared.name.read().clone()
    }

    /// True once the column family has been dropped.
    pub fn is_dropped(&self) -> bool {
        self.shared.dropped.load(Ordering::Acquire)
    }
}

impl fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColumnFamily").field("id", &self.id()).field("name", &self.name()).finish()
    }
}

/// What readers and writers of a column family use without the database mutex.
pub(crate) struct ColumnFamilyShared {
    pub(crate) id: u32,
    pub(crate) name: RwLock<String>,
    pub(crate) dropped: AtomicBool,
    /// The order of the column family's keys: the comparator of its options, which never
    /// changes (`set_column_family_options` refuses to).
    pub(crate) comparator: KeyComparator,
    pub(crate) options: RwLock<Arc<ColumnFamilyOptions>>,
    /// The options' `ttl` in microseconds, 0 for none: the write path reads it for every batch,
    /// without the options' lock.
    ttl_us: AtomicU64,
    /// Whether the options name a merge operator: iterators take the options only then.
    has_merge_operator: AtomicBool,
    /// The options' `level0_slowdown_writes_files` and `memtable_size_bytes`, which a
    /// self-service write checks for room (`db::self_service`) without the options' lock and
    /// reference count, two writes to lines every writer shares.
    level0_slowdown_writes_files: AtomicUsize,
    memtable_size_bytes: AtomicUsize,
    /// The memtables and version readers use, replaced (under the database mutex) whenever
    /// they change. Readers load it without writing to any line another core reads (see
    /// [`ColumnFamilyShared::view_and_sequence`]).
    pub(crate) read_view: ArcSwap<ReadView>,
    /// What seeks paid for a compaction of level 0 (see `read_charges`).
    pub(crate) read_charges: Arc<ReadCharges>,
    /// Counts the views installed in `read_view`, so that an iterator learns of a newer view
    /// with one load instead of the lock (see `db::iter`).
    view_generation: AtomicU64,
    /// The database's pool of memtable chunks, which new memtables draw on.
    chunk_pool: Arc<ChunkPool>,
}

impl ColumnFamilyShared {
    /// A column family's shared part; `work_available` is the database's condition variable of
    /// the compaction threads, which reads wake when they make level 0 due.
    pub(crate) fn new(
        id: u32,
        name: String,
        options: ColumnFamilyOptions,
        view: ReadView,
        work_available: Arc<Condvar>,
        chunk_pool: Arc<ChunkPool>,
    ) -> ColumnFamilyShared {
        let read_charges = Arc::new(ReadCharges::new(options.read_compaction_bytes_per_table_seek, work_available));
        read_charges.set_level0_trigger_files(options.level0_compaction_trigger_files);
        ColumnFamilyShared {
            id,
            name: RwLock::new(name),
            dropped: AtomicBool::new(false),
            comparator: KeyComparator::new(&options.comparator),
            ttl_us: AtomicU64::new(ttl_micros(&options)),
            has_merge_operator: AtomicBool::new(options.merge_operator.is_some()),
            level0_slowdown_writes_files: AtomicUsize::new(options.level0_slowdown_writes_files),
            memtable_size_bytes: AtomicUsize::new(options.memtable_size_bytes),
            options: RwLock::new(Arc::new(options)),
            read_view: ArcSwap::from_pointee(view),
            read_charges,
            view_generation: AtomicU64::new(0),
            chunk_pool,
        }
    }

    pub(crate) fn options(&self) -> Arc<ColumnFamilyOptions> {
        Arc::clone(&self.options.read())
    }

    /// Replaces the options.
    pub(crate) fn set_options(&self, options: ColumnFamilyOptions) {
        self.ttl_us.store(ttl_micros(&options), Ordering::Release);
        self.has_merge_operator.store(options.merge_operator.is_some(), Ordering::Release);
        self.level0_slowdown_writes_files.store(options.level0_slowdown_writes_files, Ordering::Release);
        self.memtable_size_bytes.store(options.memtable_size_bytes, Ordering::Release);
        self.read_charges.set_bytes_per_charge(options.read_compaction_bytes_per_table_seek);
        self.read_charges.set_level0_trigger_files(options.level0_compaction_trigger_files);
        *self.options.write() = Arc::new(options);
    }

    /// The column family's merge operator, if it has one. Without one this costs an atomic
    /// load, not the options' lock (iterators ask on creation).
    pub(crate) fn merge_operator(&self) -> Option<Arc<dyn crate::merge_operator::MergeOperator>> {
        if !self.has_merge_operator.load(Ordering::Acquire) {
            return None;
        }
        self.options.read().merge_operator.clone()
    }

    /// The options' `(level0_slowdown_writes_files, memtable_size_bytes)`, two atomic loads.
    pub(crate) fn write_room_limits(&self) -> (usize, usize) {
        (self.level0_slowdown_writes_files.load(Ordering::Acquire), self.memtable_size_bytes.load(Ordering::Acquire))
    }

    /// The time to live of puts without an expiry of their own, in microseconds; `None` when
    /// they do not expire.
    pub(crate) fn ttl_us(&self) -> Option<u64> {
        Some(self.ttl_us.load(Ordering::Acquire)).filter(|&ttl| ttl > 0)
    }

    /// Installs `view` for readers.
    pub(crate) fn install_view(&self, view: ReadView) {
        self.read_view.store(Arc::new(view));
        // After the view: an iterator that sees the new generation finds the new view, and a
        // reader that saw a write published after this install sees the new generation
        // (see `view_and_sequence`).
        self.view_generation.fetch_add(1, Ordering::Release);
    }

    /// The number of views installed so far.
    pub(crate) fn view_generation(&self) -> u64 {
        self.view_generation.load(Ordering::Acquire)
    }

    /// A new, empty memtable for this column family.
    pub(crate) fn new_memtable(&self, capacity_hint_bytes: usize) -> Arc<MemTable> {
        Arc::new(MemTable::with_chunk_pool(
            capacity_hint_bytes,
            self.comparator.clone(),
            Some(Arc::clone(&self.chunk_pool)),
        ))
    }

    /// The read view, the sequence to read at and the view generation, taken together so that
    /// every write at or below the sequence is in the view (see `read.rs`).
    ///
    /// How, without a lock: the view is loaded between two loads of the generation, and the
    /// sequence after the view. An install stores its view before it counts the generation,
    /// and a memtable switch installs its view before any write into the new memtable is
    /// published. So if the sequence covers a write into a memtable this view lacks, the
    /// second load sees a newer generation, and the read starts over. A view newer than the
    /// generation read (an install between its two steps) is harmless: a newer view holds every
    /// write an older one does, and a compaction it carries dropped only versions that newer
    /// ones at or below the sequence shadow. (The generation returned may then be older than
    /// the view, which only makes an iterator look for a newer view once more.)
    ///
    /// Why: a lock or a reference count here is written by every read from every core. With 8
    /// threads of random gets on 2 cores, the read lock and the view's reference count were
    /// three quarters of the lookup's own time. The guard borrows the view through a slot of
    /// the reading thread's own.
    pub(crate) fn view_and_sequence(
        &self,
        visible_sequence: &std::sync::atomic::AtomicU64,
        snapshot: Option<&Snapshot>,
    ) -> (Guard<Arc<ReadView>>, u64, u64) {
        loop {
            let generation = self.view_generation.load(Ordering::Acquire);
            let view = self.read_view.load();
            let sequence = match snapshot {
                Some(snapshot) => snapshot.sequence(),
                None => visible_sequence.load(Ordering::Acquire),
            };
            if self.view_generation.load(Ordering::Acquire) == generation {
                return (view, sequence, generation);
            }
        }
    }
}

/// The part of a column family guarded by the database mutex.
pub(crate) struct ColumnFamilyState {
    pub(crate) shared: Arc<ColumnFamilyShared>,
    pub(crate) memtable: Arc<MemTable>,
    /// The WAL that was current when `memtable` was created: the oldest that may hold its data.
    pub(crate) memtable_log_number: u64,
    /// Full memtables waiting for flush, oldest first.
    pub(crate) immutables: VecDeque<ImmutableMemTable>,
    /// True while a flush of this column family runs (one at a time, so tables are installed in
    /// the order of their memtables).
    pub(crate) flush_running: bool,
    /// Per level: the largest user key (in the column family's order) of the last compaction,
    /// so the next one moves on.
    pub(crate) compact_pointers: Vec<Vec<u8>>,
}

impl ColumnFamilyState {
    pub(crate) fn new(shared: Arc<ColumnFamilyShared>, memtable: Arc<MemTable>, log_number: u64) -> Self {
        ColumnFamilyState {
            shared,
            memtable,
            memtable_log_number: log_number,
            immutables: VecDeque::new(),
            flush_running: false,
            compact_pointers: vec![Vec::new(); NUM_LEVELS],
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.shared.id
    }

    /// The oldest WAL this column family still needs, or `None` when all its data is in
    /// tables (then no WAL needs to be kept for it).
    pub(crate) fn oldest_needed_log(&self) -> Option<u64> {
        match self.immutables.front() {
            Some(oldest) => Some(oldest.log_number),
            None if !self.memtable.is_empty() => Some(self.memtable_log_number),
            None => None,
        }
    }

    /// Memory held by the active and immutable memtables.
    pub(crate) fn memtable_memory_bytes(&self) -> usize {
        self.memtable.approximate_memory_bytes()
            + self.immutables.iter().map(|imm| imm.memtable.approximate_memory_bytes()).sum::<usize>()
    }
}

/// The options' `ttl` in microseconds (at least 1), 0 for none.
fn ttl_micros(options: &ColumnFamilyOptions) -> u64 {
    options.ttl.map_or(0, |ttl| crate::ttl::duration_us(ttl).max(1))
}
