//! The block cache: uncompressed, checksum-verified SSTable data blocks shared by all readers,
//! keyed by (table file number, block offset).
//!
//! The cache is split into shards chosen by a hash of the key. A shard is an open-addressing
//! table of slots that lookups read without a lock, and a mutex that serializes the writers
//! (insertion, eviction, capacity changes). A slot holds its key and a weak reference to the
//! block inline, in 32 bytes, under a sequence number (a seqlock: a writer makes it odd while it
//! changes the slot, and a reader that saw it change reads again); the cache's strong reference
//! to each block sits beside the table, on the writers' side. A hit reads its slot (one cache
//! line) and upgrades the weak reference to an `Arc`, which also fails safely when the block
//! was evicted in the meantime. Nothing shared is written by a hit but the block's reference
//! count, and the slot's `referenced` flag when it was clear.
//!
//! Why: with a lock and a hash map per shard, a hit touched the shard's lock (written by both
//! cores), the map's control bytes and bucket, the flag array and the block's count: five cache
//! lines, the lock's bouncing between cores. `BlockCache::get` was 17 % of Zipfian re-seeks
//! (36 % of it the lock's `cmpxchg`), 9 % of fresh 100-key scans, and the plugin's largest
//! symbol in MariaDB's read-only transactions (about 230 ns a lookup).
//!
//! Eviction is a clock, swept by the writer over the table's slots: a referenced entry loses its
//! flag and is passed over once (its second chance); the first unreferenced one goes. A new
//! entry starts unreferenced, so a block read once by a scan is the first to go, and a block
//! must be hit again to outlast the others. Room is made before an entry goes in, so an
//! insertion never evicts its own block.
//!
//! Memory: an evicted block's strong reference is dropped at once by the evicting thread (a
//! reader whose miss evicted a block usually gets that block's buffer for its own, see
//! `sstable::block::recycled_block_buffer`); readers still holding the block keep it alive.
//! What a lookup may still be reading, a slot's weak reference and a replaced table, is
//! released through an epoch (`crossbeam-epoch`) once every thread pinned before it left has
//! unpinned: lookups pin for the few loads of their probe.
//!
//! Concurrency contract: `BlockCache` is `Send + Sync` and shared as `Arc<BlockCache>`.
//! Lookups take no lock and may run alongside anything; insertions and capacity changes lock
//! one shard's writer mutex (the statistics accessors lock each shard in turn). A lookup may
//! miss a block that a concurrent insertion is adding or moving (a spurious miss reads the
//! block from its file), but it never returns a block stored under another key.
//!
//! Invariants: a shard's usage is the sum of the charges of its entries and, after every
//! insertion or capacity change, is at most the shard's capacity; slot `i` holds a key and the
//! weak reference of a block exactly when the writer side holds that block's strong reference
//! at `i`; every entry is reachable from its key's home slot by probing forward over occupied
//! slots only; at least half of the slots are empty, so every probe ends; blocks are only
//! inserted after their checksum was verified, so a hit needs no check and no decompression.

use std::mem::ManuallyDrop;
use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};
use parking_lot::Mutex;

use crate::sstable::Block;

/// A slot's file number when it holds no entry: a probe for any key ends there. File numbers
/// come from a counter that never gets near it; a key that would collide with it is not cached.
const EMPTY_FILE_NUMBER: u64 = u64::MAX;

/// Bytes charged for an entry on top of its block: three slots and three strong-reference
/// cells (a table is at most half full, and after it doubles a quarter), the block header, the reference counts
/// and the allocator's overhead.
const ENTRY_OVERHEAD_BYTES: usize = 3 * (std::mem::size_of::<Slot>() + std::mem::size_of::<Option<Arc<Block>>>())
    + std::mem::size_of::<Block>()
    + 2 * std::mem::size_of::<usize>()
    + 16;

/// Each shard gets at least this much capacity, so that a small cache is not cut into shards
/// too small to hold a useful number of blocks.
const MIN_SHARD_CAPACITY_BYTES: usize = 256 << 10;

/// The most shards a cache uses.
const MAX_SHARDS: usize = 64;

/// Slots of a shard's table at first; tables grow by doubling.
const MIN_TABLE_SLOTS: usize = 16;

/// A lookup that finds a slot being changed this many times in a row takes it for a miss,
/// rather than spin while the writer's thread may be descheduled.
const MAX_SLOT_READ_ATTEMPTS: u32 = 64;

/// Threads count hits and misses in one of this many stripes, so that the counters are not one
/// more line written by every core.
const COUNTER_STRIPES: usize = 16;

/// The key of a cached block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CacheKey {
    file_number: u64,
    block_offset: u64,
}

impl CacheKey {
    /// A well-mixed 64-bit hash (a multiply-xorshift finalizer over both fields); the shard is
    /// chosen from its upper half and the home slot from its lower half.
    #[inline]
    fn mixed_hash(&self) -> u64 {
        let mut value = self.file_number.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.block_offset;
        value ^= value >> 32;
        value = value.wrapping_mul(0xd6e8_feb8_6659_fd93);
        value ^= value >> 32;
        value = value.wrapping_mul(0xd6e8_feb8_6659_fd93);
        value ^ (value >> 32)
    }

    /// Whether the key can be cached (see [`EMPTY_FILE_NUMBER`]).
    fn is_cacheable(&self) -> bool {
        self.file_number != EMPTY_FILE_NUMBER
    }
}

/// The home slot of a key whose [`CacheKey::mixed_hash`] is `hash`, in a table with `mask + 1`
/// slots: the hash's lower half (its upper half picks the shard).
#[inline]
fn home_slot(hash: u64, mask: usize) -> usize {
    hash as usize & mask
}

/// One slot of a shard's table, two to a cache line. Every field is an atomic: readers load
/// them while the shard's writer may be storing them, and the sequence number tells a reader
/// whether what it loaded belongs together.
#[repr(C, align(32))]
struct Slot {
    /// Even while the slot is stable; odd while the writer changes it.
    sequence: AtomicU32,
    /// Set (to 1) by a hit when clear; cleared by the clock hand. Not covered by `sequence`.
    referenced: AtomicU32,
    file_number: AtomicU64,
    block_offset: AtomicU64,
    /// `Weak::into_raw` of the cached block, or null when the slot is empty.
    block: AtomicPtr<Block>,
}

/// What a slot held at one moment.
#[derive(Clone, Copy)]
enum SlotView {
    Empty,
    Full {
        key: CacheKey,
        block: *const Block,
    },
    /// The writer kept changing the slot (see [`MAX_SLOT_READ_ATTEMPTS`]).
    Unsettled,
}

impl Slot {
    fn empty() -> Slot {
        Slot {
            sequence: AtomicU32::new(0),
            referenced: AtomicU32::new(0),
            file_number: AtomicU64::new(EMPTY_FILE_NUMBER),
            block_offset: AtomicU64::new(0),
            block: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// A consistent view of the slot: its fields as they were between two of the writer's
    /// changes (the seqlock read: the sequence before, the fields, an acquire fence, the
    /// sequence again, unchanged and even).
    #[inline]
    fn read(&self) -> SlotView {
        for _ in 0..MAX_SLOT_READ_ATTEMPTS {
            let before = self.sequence.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let file_number = self.file_number.load(Ordering::Relaxed);
            let block_offset = self.block_offset.load(Ordering::Relaxed);
            let block = self.block.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.sequence.load(Ordering::Relaxed) != before {
                continue;
            }
            return if file_number == EMPTY_FILE_NUMBER {
                SlotView::Empty
            } else {
                SlotView::Full { key: CacheKey { file_number, block_offset }, block }
            };
        }
        SlotView::Unsettled
    }

    /// Stores a key and a block reference (the writer's side of the seqlock). Only the shard's
    /// writer calls this, under its mutex.
    fn write(&self, file_number: u64, block_offset: u64, block: *const Block) {
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence.store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.file_number.store(file_number, Ordering::Relaxed);
        self.block_offset.store(block_offset, Ordering::Relaxed);
        self.block.store(block.cast_mut(), Ordering::Relaxed);
        self.sequence.store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// The slot's key and block as the writer sees them (only the writer changes them, so no
    /// sequence check is needed on its side).
    fn writer_view(&self) -> (u64, u64, *const Block) {
        (
            self.file_number.load(Ordering::Relaxed),
            self.block_offset.load(Ordering::Relaxed),
            self.block.load(Ordering::Relaxed).cast_const(),
        )
    }
}

/// A shard's table of slots; its length is a power of two. Dropping it drops no block
/// reference: the weak references its slots hold are released by the writer (through the
/// epoch) or moved to the table that replaced it.
struct Table {
    slots: Box<[Slot]>,
}

impl Table {
    fn new(slot_count: usize) -> Table {
        debug_assert!(slot_count.is_power_of_two());
        Table { slots: (0..slot_count).map(|_| Slot::empty()).collect() }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The writer's probe: the index of `key`'s slot, if present.
    fn find(&self, key: &CacheKey, hash: u64) -> Option<usize> {
        let mask = self.mask();
        let mut index = home_slot(hash, mask);
        for _ in 0..self.slots.len() {
            let (file_number, block_offset, _) = self.slots[index].writer_view();
            if file_number == EMPTY_FILE_NUMBER {
                return None;
            }
            if file_number == key.file_number && block_offset == key.block_offset {
                return Some(index);
            }
            index = (index + 1) & mask;
        }
        None
    }

    /// The writer's probe for a key known to be absent: the first empty slot (there is one:
    /// tables are at most half full).
    fn free_slot(&self, hash: u64) -> usize {
        let mask = self.mask();
        let mut index = home_slot(hash, mask);
        loop {
            let (file_number, _, _) = self.slots[index].writer_view();
            if file_number == EMPTY_FILE_NUMBER {
                return index;
            }
            index = (index + 1) & mask;
        }
    }
}

/// A slot's weak reference, taken out of the table and released once no lookup can hold it.
struct RetiredWeak(*const Block);

// SAFETY: the pointer is a `Weak<Block>` made by `Weak::into_raw`, and `Weak<Block>` is `Send`
// (`Block` is `Send + Sync`); it is turned back into one exactly once, in `release`.
unsafe impl Send for RetiredWeak {}

impl RetiredWeak {
    fn release(self) {
        // SAFETY: see the `Send` impl; nothing else releases this reference.
        drop(unsafe { Weak::from_raw(self.0) });
    }
}

/// What only the shard's writer touches, under its mutex.
struct Writer {
    /// Parallel to the current table's slots: the strong reference the cache holds to the
    /// block in each full slot.
    blocks: Vec<Option<Arc<Block>>>,
    live: usize,
    hand: usize,
    usage_bytes: usize,
    capacity_bytes: usize,
}

fn charge_of(block: &Block) -> usize {
    block.size_bytes() + ENTRY_OVERHEAD_BYTES
}

/// The read side of a shard, on its own cache line: the table pointer every lookup loads, and
/// that only a table's growth writes.
#[repr(align(64))]
struct ShardTable {
    table: Atomic<Table>,
}

/// The write side of a shard, on its own cache line.
#[repr(align(64))]
struct ShardWriter {
    writer: Mutex<Writer>,
}

struct Shard {
    read: ShardTable,
    write: ShardWriter,
}

impl Shard {
    fn new(capacity_bytes: usize) -> Shard {
        Shard {
            read: ShardTable { table: Atomic::new(Table::new(MIN_TABLE_SLOTS)) },
            write: ShardWriter {
                writer: Mutex::new(Writer {
                    blocks: (0..MIN_TABLE_SLOTS).map(|_| None).collect(),
                    live: 0,
                    hand: 0,
                    usage_bytes: 0,
                    capacity_bytes,
                }),
            },
        }
    }

    /// The current table. The caller holds the writer mutex or is pinned by `guard`; tables
    /// are replaced only under the mutex and destroyed only through the epoch.
    fn table<'g>(&self, guard: &'g Guard) -> &'g Table {
        let table = self.read.table.load(Ordering::Acquire, guard);
        // SAFETY: the pointer is never null (set at construction, replaced by a new table
        // only), and a replaced table is destroyed through the epoch after every thread pinned
        // before its replacement has unpinned, so it outlives `guard`.
        unsafe { table.deref() }
    }

    /// The lock-free lookup.
    fn get(&self, key: &CacheKey, hash: u64) -> Option<Arc<Block>> {
        let guard = epoch::pin();
        let table = self.table(&guard);
        let mask = table.mask();
        let mut index = home_slot(hash, mask);
        for _ in 0..table.slots.len() {
            let slot = &table.slots[index];
            match slot.read() {
                SlotView::Empty | SlotView::Unsettled => return None,
                SlotView::Full { key: found, block } => {
                    if found == *key {
                        // SAFETY: `block` came from `Weak::into_raw` and was in the slot, with
                        // this key, at a moment while this thread was pinned; the writer
                        // releases a slot's weak reference only through the epoch, after
                        // every thread pinned before it left the slot has unpinned. The weak
                        // reference is borrowed, not taken (`ManuallyDrop`).
                        let weak = ManuallyDrop::new(unsafe { Weak::from_raw(block) });
                        // `None`: the block was evicted and dropped meanwhile; a miss.
                        let block = weak.upgrade()?;
                        // Read before writing: the flags of blocks hit by both cores stay in
                        // shared lines.
                        if slot.referenced.load(Ordering::Relaxed) == 0 {
                            slot.referenced.store(1, Ordering::Relaxed);
                        }
                        return Some(block);
                    }
                }
            }
            index = (index + 1) & mask;
        }
        None
    }

    fn insert(&self, key: CacheKey, hash: u64, block: Arc<Block>) {
        let mut writer = self.write.writer.lock();
        let guard = epoch::pin();
        let table = self.table(&guard);
        let charge_bytes = charge_of(&block);
        if let Some(index) = table.find(&key, hash) {
            let Some(cached) = writer.blocks[index].as_ref() else {
                debug_assert!(false, "slot {index} names a key but holds no block");
                return;
            };
            // Two readers missed on the same block and both read it, or an iterator converted
            // a block a point read cached: keep the newer copy, unless only the older one has
            // the separated layout (a point read's copy replaces no iterator's).
            if cached.stored_bytes().is_none() && block.stored_bytes().is_some() {
                return;
            }
            let old_charge_bytes = charge_of(cached);
            let slot = &table.slots[index];
            let (_, _, old_weak) = slot.writer_view();
            slot.write(key.file_number, key.block_offset, Weak::into_raw(Arc::downgrade(&block)));
            let retired = RetiredWeak(old_weak);
            guard.defer(move || retired.release());
            writer.usage_bytes = writer.usage_bytes - old_charge_bytes + charge_bytes;
            // The old copy's strong reference goes here, on this thread.
            writer.blocks[index] = Some(block);
            writer.evict_until_fits(table, 0, &guard);
            return;
        }
        if charge_bytes > writer.capacity_bytes {
            // A block larger than the whole shard is not kept, and evicts nothing.
            return;
        }
        writer.evict_until_fits(table, charge_bytes, &guard);
        let table = if (writer.live + 1) * 2 > table.slots.len() {
            self.rebuild(&mut writer, table.slots.len() * 2, &guard)
        } else {
            table
        };
        let index = table.free_slot(hash);
        let slot = &table.slots[index];
        slot.referenced.store(0, Ordering::Relaxed);
        slot.write(key.file_number, key.block_offset, Weak::into_raw(Arc::downgrade(&block)));
        writer.blocks[index] = Some(block);
        writer.live += 1;
        writer.usage_bytes += charge_bytes;
    }

    /// Moves every entry into a new table of `slot_count` slots, publishes it
    /// and retires the old one through the epoch. Lookups still reading the old table find
    /// what it held; the weak references move, so neither table releases them.
    fn rebuild<'g>(&self, writer: &mut Writer, slot_count: usize, guard: &'g Guard) -> &'g Table {
        debug_assert!(slot_count >= 2 * writer.live);
        let old = self.read.table.load(Ordering::Acquire, guard);
        // SAFETY: as in `table`; the writer mutex is held, so this is the current table.
        let old_table = unsafe { old.deref() };
        let new_table = Table::new(slot_count);
        let mut blocks: Vec<Option<Arc<Block>>> = (0..slot_count).map(|_| None).collect();
        for (index, cached) in writer.blocks.iter_mut().enumerate() {
            let Some(block) = cached.take() else {
                continue;
            };
            let old_slot = &old_table.slots[index];
            let (file_number, block_offset, weak) = old_slot.writer_view();
            let key = CacheKey { file_number, block_offset };
            let new_index = new_table.free_slot(key.mixed_hash());
            let new_slot = &new_table.slots[new_index];
            new_slot.referenced.store(old_slot.referenced.load(Ordering::Relaxed), Ordering::Relaxed);
            new_slot.write(file_number, block_offset, weak);
            blocks[new_index] = Some(block);
        }
        writer.blocks = blocks;
        writer.hand = 0;
        let new = self.read.table.swap(Owned::new(new_table), Ordering::AcqRel, guard);
        debug_assert!(new == old, "the table changed under the writer mutex");
        // SAFETY: the old table is unreachable for lookups that pin from now on; those pinned
        // before may still read it, and the epoch destroys it only after they unpin. Its weak
        // references moved to the new table, and `Table`'s drop releases none.
        unsafe { guard.defer_destroy(old) };
        self.table(guard)
    }
}

impl Writer {
    /// Sweeps the clock hand until `incoming_bytes` more fit the capacity: a referenced entry
    /// loses its flag and is passed over, the first unreferenced one is dropped. Every flag is
    /// clear after one turn unless lookups set them again; after two turns the flags are
    /// ignored, so this ends within three turns per entry dropped.
    fn evict_until_fits(&mut self, table: &Table, incoming_bytes: usize, guard: &Guard) {
        let mask = table.mask();
        let mut steps = 0usize;
        while self.usage_bytes + incoming_bytes > self.capacity_bytes && self.live > 0 {
            let index = self.hand;
            self.hand = (index + 1) & mask;
            steps += 1;
            if self.blocks[index].is_none() {
                continue;
            }
            let slot = &table.slots[index];
            if steps <= 2 * table.slots.len() && slot.referenced.swap(0, Ordering::Relaxed) != 0 {
                continue;
            }
            self.remove(table, index, guard);
            steps = 0;
        }
    }

    /// Removes the entry of slot `index`: releases its weak reference through the epoch, drops
    /// the cache's strong reference on this thread, and closes the gap by moving back the
    /// entries after it that may move (linear probing's deletion, Knuth's algorithm R), so that
    /// no slot is left deleted and probes stay short. An entry being moved is briefly in two
    /// slots; a lookup that passed the first and reaches the second after it changed misses
    /// (spuriously) but never finds another key's block.
    fn remove(&mut self, table: &Table, index: usize, guard: &Guard) {
        let (_, _, weak) = table.slots[index].writer_view();
        let retired = RetiredWeak(weak);
        guard.defer(move || retired.release());
        if let Some(block) = self.blocks[index].take() {
            self.usage_bytes -= charge_of(&block);
        }
        self.live -= 1;
        let mask = table.mask();
        let mut hole = index;
        let mut next = (index + 1) & mask;
        loop {
            let next_slot = &table.slots[next];
            let (file_number, block_offset, next_weak) = next_slot.writer_view();
            if file_number == EMPTY_FILE_NUMBER {
                break;
            }
            let home = home_slot(CacheKey { file_number, block_offset }.mixed_hash(), mask);
            // The entry may fill the hole unless its home lies cyclically in (hole, next]: it
            // would then sit before its home, where no probe looks.
            let stays = if hole <= next { hole < home && home <= next } else { hole < home || home <= next };
            if !stays {
                let hole_slot = &table.slots[hole];
                hole_slot.referenced.store(next_slot.referenced.load(Ordering::Relaxed), Ordering::Relaxed);
                hole_slot.write(file_number, block_offset, next_weak);
                self.blocks[hole] = self.blocks[next].take();
                hole = next;
            }
            next = (next + 1) & mask;
        }
        let hole_slot = &table.slots[hole];
        hole_slot.write(EMPTY_FILE_NUMBER, 0, std::ptr::null());
        hole_slot.referenced.store(0, Ordering::Relaxed);
    }
}

/// A stripe of the hit and miss counters, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct CounterStripe {
    hits: AtomicU64,
    misses: AtomicU64,
}

/// The stripe this thread counts in.
fn counter_stripe() -> usize {
    static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % COUNTER_STRIPES;
    }
    STRIPE.try_with(|stripe| *stripe).unwrap_or(0)
}

/// The sharded clock cache of uncompressed data blocks.
pub(crate) struct BlockCache {
    shards: Box<[Shard]>,
    shard_mask: usize,
    capacity_bytes: AtomicUsize,
    counters: Box<[CounterStripe]>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("shards", &self.shards.len())
            .field("capacity_bytes", &self.capacity_bytes())
            .field("usage_bytes", &self.usage_bytes())
            .finish()
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no lookup or writer can be running, so the current tables and
        // the weak references in them are reachable from here alone. (Tables and references
        // retired earlier belong to the epoch, which releases them on its own.)
        let guard = unsafe { epoch::unprotected() };
        for shard in self.shards.iter() {
            let table = shard.read.table.swap(epoch::Shared::null(), Ordering::Relaxed, guard);
            if table.is_null() {
                continue;
            }
            // SAFETY: as above; the table was the shard's own, now unlinked.
            let table = unsafe { table.into_owned() };
            for slot in table.slots.iter() {
                let (_, _, weak) = slot.writer_view();
                if !weak.is_null() {
                    RetiredWeak(weak).release();
                }
            }
        }
    }
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of charged blocks.
    pub(crate) fn new(capacity_bytes: usize) -> Arc<BlockCache> {
        let mut num_shards = 1;
        while num_shards < MAX_SHARDS && capacity_bytes / (num_shards * 2) >= MIN_SHARD_CAPACITY_BYTES {
            num_shards *= 2;
        }
        let shards = (0..num_shards).map(|_| Shard::new(Self::shard_capacity(capacity_bytes, num_shards))).collect();
        let counters = (0..COUNTER_STRIPES).map(|_| CounterStripe::default()).collect();
        Arc::new(BlockCache {
            shards,
            shard_mask: num_shards - 1,
            capacity_bytes: AtomicUsize::new(capacity_bytes),
            counters,
        })
    }

    fn shard_capacity(capacity_bytes: usize, num_shards: usize) -> usize {
        capacity_bytes / num_shards
    }

    #[inline]
    fn shard(&self, hash: u64) -> &Shard {
        &self.shards[(hash >> 32) as usize & self.shard_mask]
    }

    /// The cached block at `block_offset` of table `file_number`, marking it used.
    pub(crate) fn get(&self, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let key = CacheKey { file_number, block_offset };
        let hash = key.mixed_hash();
        let found = if key.is_cacheable() { self.shard(hash).get(&key, hash) } else { None };
        let stripe = &self.counters[counter_stripe()];
        if found.is_some() {
            stripe.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            stripe.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Caches a verified, uncompressed block, evicting others as needed.
    pub(crate) fn insert(&self, file_number: u64, block_offset: u64, block: Arc<Block>) {
        let key = CacheKey { file_number, block_offset };
        if !key.is_cacheable() {
            return;
        }
        let hash = key.mixed_hash();
        self.shard(hash).insert(key, hash, block);
    }

    /// Bytes currently charged.
    pub(crate) fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|shard| shard.write.writer.lock().usage_bytes).sum()
    }

    /// The configured capacity.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.capacity_bytes.load(Ordering::Relaxed)
    }

    /// Changes the capacity, evicting at once if the cache is now over it. A shard left with
    /// few entries in a large table moves them to a smaller one.
    pub(crate) fn set_capacity_bytes(&self, capacity_bytes: usize) {
        self.capacity_bytes.store(capacity_bytes, Ordering::Relaxed);
        let per_shard = Self::shard_capacity(capacity_bytes, self.shards.len());
        for shard in self.shards.iter() {
            let mut writer = shard.write.writer.lock();
            let guard = epoch::pin();
            let table = shard.table(&guard);
            writer.capacity_bytes = per_shard;
            writer.evict_until_fits(table, 0, &guard);
            if table.slots.len() > MIN_TABLE_SLOTS && writer.live * 8 < table.slots.len() {
                let slot_count = (2 * (writer.live + 1)).next_power_of_two().max(MIN_TABLE_SLOTS);
                shard.rebuild(&mut writer, slot_count, &guard);
            }
        }
    }

    /// Lookups that found their block.
    pub(crate) fn hit_count(&self) -> u64 {
        self.counters.iter().map(|stripe| stripe.hits.load(Ordering::Relaxed)).sum()
    }

    /// Lookups that did not.
    pub(crate) fn miss_count(&self) -> u64 {
        self.counters.iter().map(|stripe| stripe.misses.load(Ordering::Relaxed)).sum()
    }

    /// Checks the shards' invariants (slots and strong references agree; every entry is found
    /// from its home slot; usage is the sum of the charges; at least half of the slots are
    /// empty).
    /// For tests.
    #[cfg(test)]
    fn check_invariants(&self) {
        for shard in self.shards.iter() {
            let writer = shard.write.writer.lock();
            let guard = epoch::pin();
            let table = shard.table(&guard);
            assert_eq!(writer.blocks.len(), table.slots.len());
            let (mut live, mut empty, mut usage_bytes) = (0, 0, 0);
            for (index, slot) in table.slots.iter().enumerate() {
                let (file_number, block_offset, weak) = slot.writer_view();
                match (&writer.blocks[index], file_number) {
                    (None, EMPTY_FILE_NUMBER) => {
                        assert!(weak.is_null());
                        empty += 1;
                    }
                    (Some(block), _) => {
                        assert_eq!(weak, Arc::as_ptr(block), "slot {index} names another block");
                        let key = CacheKey { file_number, block_offset };
                        assert_eq!(table.find(&key, key.mixed_hash()), Some(index));
                        live += 1;
                        usage_bytes += charge_of(block);
                    }
                    (None, _) => panic!("slot {index} names a key without a block"),
                }
                assert_eq!(slot.sequence.load(Ordering::Relaxed) % 2, 0);
            }
            assert_eq!(writer.live, live);
            assert_eq!(writer.usage_bytes, usage_bytes);
            assert!(writer.usage_bytes <= writer.capacity_bytes);
            assert!(empty * 2 >= table.slots.len(), "{empty} of {} slots empty", table.slots.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(size_bytes: usize) -> Arc<Block> {
        // A block of about `size_bytes`: one entry whose value fills it.
        let mut builder = crate::sstable::block::BlockBuilder::new(16);
        let key = crate::key::make_internal_key(b"k", 1, crate::key::ValueKind::Put);
        builder.add(&key, &vec![0u8; size_bytes.saturating_sub(24)]);
        Arc::new(Block::new(builder.finish().to_vec()).unwrap())
    }

    /// A block whose bytes name its key, so that a lookup returning another key's block is
    /// seen.
    fn named_block(file_number: u64, block_offset: u64, size_bytes: usize) -> Arc<Block> {
        let mut data = vec![0u8; size_bytes.max(16)];
        data[..8].copy_from_slice(&file_number.to_le_bytes());
        data[8..16].copy_from_slice(&block_offset.to_le_bytes());
        Arc::new(Block::raw(data))
    }

    fn name_of(block: &Block) -> (u64, u64) {
        let bytes = block.raw_bytes();
        (u64::from_le_bytes(bytes[..8].try_into().unwrap()), u64::from_le_bytes(bytes[8..16].try_into().unwrap()))
    }

    #[test]
    fn hit_miss_and_counters() {
        let cache = BlockCache::new(1 << 20);
        assert!(cache.get(1, 0).is_none());
        cache.insert(1, 0, block(4096));
        assert!(cache.get(1, 0).is_some());
        assert!(cache.get(1, 4096).is_none());
        assert!(cache.get(2, 0).is_none());
        assert_eq!(cache.hit_count(), 1);
        assert_eq!(cache.miss_count(), 3);
        assert!(cache.usage_bytes() >= 4096);
        assert_eq!(cache.capacity_bytes(), 1 << 20);
        cache.check_invariants();
    }

    #[test]
    fn a_key_that_collides_with_the_empty_marker_is_not_cached() {
        let cache = BlockCache::new(1 << 20);
        cache.insert(EMPTY_FILE_NUMBER, 0, block(100));
        assert!(cache.get(EMPTY_FILE_NUMBER, 0).is_none());
        assert_eq!(cache.usage_bytes(), 0);
        cache.check_invariants();
    }

    #[test]
    fn evicts_blocks_not_hit_since_the_hand_passed() {
        let one_block = block(4096);
        let charge = charge_of(&one_block);
        // Small enough for a single shard, so the clock is global and predictable.
        let cache = BlockCache::new(charge * 4);
        assert_eq!(cache.shards.len(), 1);
        for offset in 0..4u64 {
            cache.insert(7, offset, block(4096));
        }
        assert_eq!(cache.usage_bytes(), charge * 4);
        // Hit block 0: the hand passes over it once and takes a block that was not hit.
        assert!(cache.get(7, 0).is_some());
        cache.insert(7, 4, block(4096));
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        assert!(cache.get(7, 0).is_some(), "the block hit survives");
        assert!(cache.get(7, 4).is_some(), "an insertion never evicts its own block");
        let survivors = (1..4u64).filter(|&offset| cache.get(7, offset).is_some()).count();
        assert_eq!(survivors, 2, "exactly one block not hit was evicted");
        cache.set_capacity_bytes(charge * 2);
        assert!(cache.usage_bytes() <= charge * 2);
        cache.check_invariants();
        cache.set_capacity_bytes(0);
        assert_eq!(cache.usage_bytes(), 0);
        cache.insert(7, 9, block(4096));
        assert_eq!(cache.usage_bytes(), 0, "a block larger than the cache is not kept");
        cache.check_invariants();
    }

    #[test]
    fn eviction_drops_the_caches_reference_at_once() {
        // The evicting thread drops the block, so that its buffer is recycled there
        // (`recycled_block_buffer`); a reader holding the block keeps it alive.
        let first = block(4096);
        let cache = BlockCache::new(charge_of(&first));
        cache.insert(1, 0, Arc::clone(&first));
        assert_eq!(Arc::strong_count(&first), 2);
        let held = cache.get(1, 0).unwrap();
        cache.insert(1, 4096, block(4096));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(Arc::strong_count(&first), 2, "only the test and the reader hold it now");
        drop(held);
        assert_eq!(Arc::strong_count(&first), 1);
        cache.check_invariants();
    }

    #[test]
    fn blocks_hit_again_outlast_a_scan_of_blocks_read_once() {
        let charge = charge_of(&block(4096));
        let cache = BlockCache::new(charge * 8);
        assert_eq!(cache.shards.len(), 1);
        // Four hot blocks, hit after their insertion, then a scan of forty blocks read once.
        for offset in 0..4u64 {
            cache.insert(1, offset, block(4096));
            assert!(cache.get(1, offset).is_some());
        }
        for offset in 100..140u64 {
            cache.insert(2, offset, block(4096));
            // The hot blocks are hit between the scan's blocks, as a working set is.
            if offset % 4 == 0 {
                for hot in 0..4u64 {
                    assert!(cache.get(1, hot).is_some(), "hot block {hot} evicted at scan block {offset}");
                }
            }
        }
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        cache.check_invariants();
    }

    /// Random inserts, hits and capacity changes against a model of what is cached (a map from
    /// key to the block last inserted), the shards' invariants, and the capacity bound after
    /// every insertion.
    #[test]
    fn random_operations_keep_the_slots_and_the_blocks_in_step() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        use std::collections::HashMap;
        let mut rng = SmallRng::seed_from_u64(11);
        let sizes = [200usize, 1000, 4096, 9000];
        let cache = BlockCache::new(600 << 10);
        let mut last_inserted: HashMap<(u64, u64), Arc<Block>> = HashMap::new();
        for step in 0..30_000u32 {
            let file_number = rng.gen_range(0..5u64);
            let block_offset = rng.gen_range(0..300u64);
            match rng.gen_range(0..100) {
                0 => cache.set_capacity_bytes(rng.gen_range(0..(800usize << 10))),
                1..=40 => {
                    let inserted = named_block(file_number, block_offset, sizes[rng.gen_range(0..sizes.len())]);
                    cache.insert(file_number, block_offset, Arc::clone(&inserted));
                    last_inserted.insert((file_number, block_offset), inserted);
                    assert!(cache.usage_bytes() <= cache.capacity_bytes(), "step {step}");
                }
                _ => {
                    if let Some(found) = cache.get(file_number, block_offset) {
                        assert_eq!(name_of(&found), (file_number, block_offset), "step {step}");
                        let expected = &last_inserted[&(file_number, block_offset)];
                        assert!(Arc::ptr_eq(&found, expected), "step {step}: a replaced copy was returned");
                    }
                }
            }
            if step % 500 == 0 {
                cache.check_invariants();
            }
        }
        cache.check_invariants();
    }

    #[test]
    fn reinserting_a_key_replaces_it_and_many_shards_stay_within_capacity() {
        let cache = BlockCache::new(64 << 20);
        cache.insert(1, 0, block(1000));
        let usage = cache.usage_bytes();
        cache.insert(1, 0, block(1000));
        assert_eq!(cache.usage_bytes(), usage);
        let cache = BlockCache::new(4 << 20);
        assert!(cache.shards.len() > 1);
        for offset in 0..10_000u64 {
            cache.insert(offset % 13, offset * 4096, block(4096));
            if offset % 1000 == 0 {
                assert!(cache.usage_bytes() <= cache.capacity_bytes());
            }
        }
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        assert!(cache.usage_bytes() > cache.capacity_bytes() / 2);
        cache.check_invariants();
        // Shrinking to a few entries moves them to smaller tables, and they are still found.
        let kept: Vec<(u64, u64)> = (9_990..10_000u64).map(|offset| (offset % 13, offset * 4096)).collect();
        for &(file_number, block_offset) in &kept {
            cache.insert(file_number, block_offset, block(4096));
        }
        cache.set_capacity_bytes(cache.shards.len() * charge_of(&block(4096)) * 2);
        cache.check_invariants();
        assert!(cache.usage_bytes() > 0);
    }

    /// One slot rewritten as fast as a writer can, alternating between two keys and their
    /// block references, while two threads read it: every view a reader gets is one the writer
    /// stored whole (the seqlock; without its second sequence check, views tore in every run
    /// tried). The references are never dereferenced.
    #[test]
    fn slot_reads_are_never_torn() {
        let slot = Slot::empty();
        let done = std::sync::atomic::AtomicBool::new(false);
        // Addresses only, kept as numbers so that the readers' closures are `Send`.
        let (first, second) = (0x1000usize, 0x2000usize);
        let full_views = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                let (slot, done, full_views) = (&slot, &done, &full_views);
                scope.spawn(move || {
                    while !done.load(Ordering::Relaxed) {
                        match slot.read() {
                            SlotView::Full { key, block } => {
                                let expected = if key.file_number == 1 { first } else { second };
                                assert_eq!(key.block_offset, key.file_number, "torn key");
                                assert_eq!(block as usize, expected, "torn reference");
                                full_views.fetch_add(1, Ordering::Relaxed);
                            }
                            SlotView::Empty | SlotView::Unsettled => {}
                        }
                    }
                });
            }
            // Until the readers got enough whole views while the writes went on (a bound keeps
            // a starved reader from holding the test forever).
            let mut round = 0u64;
            while full_views.load(Ordering::Relaxed) < 20_000 && round < 200_000_000 {
                let (number, block) = if round.is_multiple_of(2) { (1, first) } else { (2, second) };
                slot.write(number, number, block as *const Block);
                round += 1;
            }
            done.store(true, Ordering::Relaxed);
        });
        assert!(full_views.load(Ordering::Relaxed) >= 20_000, "the readers saw too few whole views");
    }

    /// Readers and writers on few keys and a small cache, so that slots are replaced, emptied,
    /// moved back and tables rebuilt while lookups read them: every block a lookup returns is the one
    /// stored under its key, and the invariants hold afterwards.
    #[test]
    fn concurrent_lookups_see_only_their_own_keys_blocks() {
        let cache = BlockCache::new(300 << 10);
        let lookups = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let (cache, lookups) = (&cache, &lookups);
                scope.spawn(move || {
                    let mut state = thread.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    for index in 0..20_000u64 {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        let (file_number, block_offset) = (state % 3, (state >> 8) % 200);
                        lookups.fetch_add(1, Ordering::Relaxed);
                        match cache.get(file_number, block_offset) {
                            Some(found) => assert_eq!(name_of(&found), (file_number, block_offset)),
                            None => cache.insert(
                                file_number,
                                block_offset,
                                named_block(file_number, block_offset, 1000 + (index as usize % 5000)),
                            ),
                        }
                        if thread == 0 && index % 5_000 == 0 {
                            cache.set_capacity_bytes((100 << 10) + (index as usize % 3) * (150 << 10));
                        }
                    }
                });
            }
        });
        assert_eq!(cache.hit_count() + cache.miss_count(), lookups.load(Ordering::Relaxed));
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        cache.check_invariants();
    }
}
