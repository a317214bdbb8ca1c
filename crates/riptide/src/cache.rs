//! The block cache: uncompressed, checksum-verified SSTable data blocks shared by all readers,
//! keyed by (table file number, block offset).
//!
//! The cache is split into shards chosen by a hash of the key, each with its own lock and hash
//! map. Every entry is charged its block's bytes plus a fixed overhead; when a shard's usage
//! exceeds its share of the capacity, entries not used since the shard's clock hand last passed
//! them are dropped (readers holding the `Arc<Block>` keep using it).
//!
//! Why a clock and not a list: with a least-recently-used list every hit moved its entry to
//! the front, which wrote the entry, both its neighbours and the list head, each a likely cache
//! miss. Zipfian seeks from 8 threads spent 15-23 % of their time in the lookup (`perf`,
//! benchtool `seek -p zipfian --scan-iterator reseek`). A hit now reads the entry in the map's
//! own bucket, sets its slot's `referenced` flag (a byte in a compact array) only if it is clear
//! and clones the block's `Arc`. Eviction, on insertion, sweeps the hand over the shard's slots:
//! a referenced entry loses its flag and is passed over once (its second chance); the first
//! unreferenced one goes. A new entry starts unreferenced, so a block read once by a scan is the
//! first to go, and a block must be hit again to outlast the others. The shard lock stays a
//! mutex: a reader-writer lock (hits shared) measured slower on random gets that miss half the
//! time, whose insertions then wait for readers.
//!
//! Concurrency contract: `BlockCache` is `Send + Sync` and shared as `Arc<BlockCache>`; every
//! operation locks exactly one shard (the statistics accessors lock each shard in turn).
//! Invariants: a shard's usage is the sum of the charges of its entries and, after every
//! insertion or capacity change, is at most the shard's capacity; every entry of the map names
//! a slot of the clock that names its key back, and no other slot names a key; blocks are only
//! inserted after their checksum was verified, so a hit needs no check and no decompression.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::sstable::Block;

/// Bytes charged for an entry on top of its block: the map's bucket, the clock slot, the block
/// header and the reference counts.
const ENTRY_OVERHEAD_BYTES: usize = std::mem::size_of::<(CacheKey, CachedBlock)>()
    + std::mem::size_of::<Option<CacheKey>>()
    + std::mem::size_of::<bool>()
    + std::mem::size_of::<Block>()
    + 2 * std::mem::size_of::<usize>()
    + 16;

/// Each shard gets at least this much capacity, so that a small cache is not cut into shards
/// too small to hold a useful number of blocks.
const MIN_SHARD_CAPACITY_BYTES: usize = 256 << 10;

/// The most shards a cache uses.
const MAX_SHARDS: usize = 64;

/// The key of a cached block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CacheKey {
    file_number: u64,
    block_offset: u64,
}

impl CacheKey {
    /// A well-mixed 64-bit hash (a multiply-xorshift finalizer over both fields); the shard is
    /// chosen from its upper half and the hash map uses all of it.
    #[inline]
    fn mixed_hash(&self) -> u64 {
        let mut value = self.file_number.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.block_offset;
        value ^= value >> 32;
        value = value.wrapping_mul(0xd6e8_feb8_6659_fd93);
        value ^= value >> 32;
        value = value.wrapping_mul(0xd6e8_feb8_6659_fd93);
        value ^ (value >> 32)
    }
}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.mixed_hash());
    }
}

/// A hasher that passes through the already mixed hash written by [`CacheKey`].
#[derive(Default)]
struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is expected; fold anything else in so the hasher stays correct.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// A cached block, stored in the map's bucket.
struct CachedBlock {
    block: Arc<Block>,
    charge_bytes: usize,
    /// The entry's position on the clock.
    slot: usize,
}

/// One shard: a map from key to cached block, and the clock: the slots the hand sweeps, each
/// naming the key of an entry or free, with a parallel array of `referenced` flags, set by hits
/// and cleared by the hand. A byte per slot keeps the flags within a few cache lines, so neither
/// a hit nor the hand's sweep misses on them (flags kept in the map's buckets made every step of
/// the sweep a probe of the map).
struct Shard {
    map: HashMap<CacheKey, CachedBlock, BuildHasherDefault<PassThroughHasher>>,
    slots: Vec<Option<CacheKey>>,
    referenced: Vec<bool>,
    free_slots: Vec<usize>,
    hand: usize,
    usage_bytes: usize,
    capacity_bytes: usize,
    hits: u64,
    misses: u64,
}

impl Shard {
    fn new(capacity_bytes: usize) -> Shard {
        Shard {
            map: HashMap::default(),
            slots: Vec::new(),
            referenced: Vec::new(),
            free_slots: Vec::new(),
            hand: 0,
            usage_bytes: 0,
            capacity_bytes,
            hits: 0,
            misses: 0,
        }
    }

    /// The block under `key`, marked as used since the hand last passed.
    #[inline]
    fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        let Some(cached) = self.map.get(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        if let Some(flag) = self.referenced.get_mut(cached.slot) {
            // Read before writing: the flags of blocks hit by both cores stay in shared lines.
            if !*flag {
                *flag = true;
            }
        }
        Some(Arc::clone(&cached.block))
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>) {
        let charge_bytes = block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        if let Some(cached) = self.map.get_mut(&key) {
            // Two readers missed on the same block and both read it, or an iterator converted
            // a block a point read cached: keep the newer copy, unless only the older one has
            // the separated layout (a point read's copy replaces no iterator's).
            if cached.block.stored_bytes().is_none() && block.stored_bytes().is_some() {
                return;
            }
            self.usage_bytes = self.usage_bytes - cached.charge_bytes + charge_bytes;
            cached.block = block;
            cached.charge_bytes = charge_bytes;
        } else {
            let slot = match self.free_slots.pop() {
                Some(slot) => {
                    self.slots[slot] = Some(key);
                    self.referenced[slot] = false;
                    slot
                }
                None => {
                    self.slots.push(Some(key));
                    self.referenced.push(false);
                    self.slots.len() - 1
                }
            };
            let cached = CachedBlock { block, charge_bytes, slot };
            self.map.insert(key, cached);
            self.usage_bytes += charge_bytes;
        }
        self.evict_to_capacity();
    }

    /// Sweeps the hand until usage fits the capacity: a referenced entry loses its flag and is
    /// passed over, the first unreferenced one is dropped. Every flag is clear after one turn,
    /// so this ends within two turns per entry dropped. A block larger than the whole shard is
    /// dropped right after its insertion.
    fn evict_to_capacity(&mut self) {
        while self.usage_bytes > self.capacity_bytes && !self.map.is_empty() {
            let slot = self.hand;
            self.hand = if slot + 1 >= self.slots.len() { 0 } else { slot + 1 };
            let Some(key) = self.slots[slot] else {
                continue;
            };
            if std::mem::replace(&mut self.referenced[slot], false) {
                continue;
            }
            let victim = self.map.remove(&key);
            debug_assert!(
                victim.as_ref().is_some_and(|victim| victim.slot == slot),
                "clock slot {slot} and map disagree"
            );
            if let Some(victim) = victim {
                self.usage_bytes -= victim.charge_bytes;
            }
            self.slots[slot] = None;
            self.free_slots.push(slot);
        }
    }
}

/// A shard padded to its own cache line so that neighbouring locks do not false-share.
#[repr(align(64))]
struct PaddedShard {
    shard: Mutex<Shard>,
}

/// The sharded clock cache of uncompressed data blocks.
pub(crate) struct BlockCache {
    shards: Box<[PaddedShard]>,
    shard_mask: usize,
    capacity_bytes: AtomicUsize,
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

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of charged blocks.
    pub(crate) fn new(capacity_bytes: usize) -> Arc<BlockCache> {
        let mut num_shards = 1;
        while num_shards < MAX_SHARDS && capacity_bytes / (num_shards * 2) >= MIN_SHARD_CAPACITY_BYTES {
            num_shards *= 2;
        }
        let shards = (0..num_shards)
            .map(|_| PaddedShard { shard: Mutex::new(Shard::new(Self::shard_capacity(capacity_bytes, num_shards))) })
            .collect();
        Arc::new(BlockCache { shards, shard_mask: num_shards - 1, capacity_bytes: AtomicUsize::new(capacity_bytes) })
    }

    fn shard_capacity(capacity_bytes: usize, num_shards: usize) -> usize {
        capacity_bytes / num_shards
    }

    #[inline]
    fn shard(&self, key: &CacheKey) -> &PaddedShard {
        let index = (key.mixed_hash() >> 32) as usize & self.shard_mask;
        &self.shards[index]
    }

    /// The cached block at `block_offset` of table `file_number`, marking it used.
    pub(crate) fn get(&self, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let key = CacheKey { file_number, block_offset };
        self.shard(&key).shard.lock().get(&key)
    }

    /// Caches a verified, uncompressed block, evicting others as needed.
    pub(crate) fn insert(&self, file_number: u64, block_offset: u64, block: Arc<Block>) {
        let key = CacheKey { file_number, block_offset };
        self.shard(&key).shard.lock().insert(key, block);
    }

    /// Bytes currently charged.
    pub(crate) fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|padded| padded.shard.lock().usage_bytes).sum()
    }

    /// The configured capacity.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.capacity_bytes.load(Ordering::Relaxed)
    }

    /// Changes the capacity, evicting at once if the cache is now over it.
    pub(crate) fn set_capacity_bytes(&self, capacity_bytes: usize) {
        self.capacity_bytes.store(capacity_bytes, Ordering::Relaxed);
        let per_shard = Self::shard_capacity(capacity_bytes, self.shards.len());
        for padded in self.shards.iter() {
            let mut shard = padded.shard.lock();
            shard.capacity_bytes = per_shard;
            shard.evict_to_capacity();
        }
    }

    /// Lookups that found their block.
    pub(crate) fn hit_count(&self) -> u64 {
        self.shards.iter().map(|padded| padded.shard.lock().hits).sum()
    }

    /// Lookups that did not.
    pub(crate) fn miss_count(&self) -> u64 {
        self.shards.iter().map(|padded| padded.shard.lock().misses).sum()
    }

    /// Checks the shards' invariants (map and clock name each other; usage is the sum of the
    /// charges). For tests.
    #[cfg(test)]
    fn check_invariants(&self) {
        for padded in self.shards.iter() {
            let shard = padded.shard.lock();
            let mut usage_bytes = 0;
            for (key, cached) in &shard.map {
                assert_eq!(shard.slots[cached.slot], Some(*key));
                usage_bytes += cached.charge_bytes;
            }
            assert_eq!(shard.slots.iter().filter(|slot| slot.is_some()).count(), shard.map.len());
            assert_eq!(shard.usage_bytes, usage_bytes);
            assert_eq!(shard.free_slots.len() + shard.map.len(), shard.slots.len());
            assert_eq!(shard.referenced.len(), shard.slots.len());
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
    }

    #[test]
    fn evicts_blocks_not_hit_since_the_hand_passed() {
        let one_block = block(4096);
        let charge = one_block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        // Small enough for a single shard, so the clock is global and predictable.
        let cache = BlockCache::new(charge * 4);
        for offset in 0..4u64 {
            cache.insert(7, offset, block(4096));
        }
        assert_eq!(cache.usage_bytes(), charge * 4);
        // Hit block 0 so that the hand passes over it once and takes block 1.
        assert!(cache.get(7, 0).is_some());
        cache.insert(7, 4, block(4096));
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        assert!(cache.get(7, 1).is_none(), "the first block not hit is evicted");
        for offset in [0, 2, 3, 4] {
            assert!(cache.get(7, offset).is_some(), "block {offset} survives");
        }
        cache.set_capacity_bytes(charge * 2);
        assert!(cache.usage_bytes() <= charge * 2);
        assert!(cache.get(7, 4).is_some());
        cache.set_capacity_bytes(0);
        assert_eq!(cache.usage_bytes(), 0);
        cache.insert(7, 9, block(4096));
        assert_eq!(cache.usage_bytes(), 0, "a block larger than the cache is not kept");
    }

    #[test]
    fn blocks_hit_again_outlast_a_scan_of_blocks_read_once() {
        let charge = block(4096).size_bytes() + ENTRY_OVERHEAD_BYTES;
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

    /// Random inserts, hits and capacity changes against the shards' invariants, and the
    /// capacity bound after every insertion.
    #[test]
    fn random_operations_keep_the_clock_and_the_map_in_step() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(11);
        let blocks: Vec<Arc<Block>> = [200usize, 1000, 4096, 9000].iter().map(|&size| block(size)).collect();
        let cache = BlockCache::new(600 << 10);
        for step in 0..20_000u32 {
            let file_number = rng.gen_range(0..5u64);
            let block_offset = rng.gen_range(0..300u64);
            match rng.gen_range(0..100) {
                0 => cache.set_capacity_bytes(rng.gen_range(0..(800usize << 10))),
                1..=40 => {
                    cache.insert(file_number, block_offset, Arc::clone(&blocks[rng.gen_range(0..blocks.len())]));
                    assert!(cache.usage_bytes() <= cache.capacity_bytes(), "step {step}");
                }
                _ => {
                    let _ = cache.get(file_number, block_offset);
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
    }

    #[test]
    fn concurrent_readers_and_writers() {
        let cache = BlockCache::new(2 << 20);
        let shared = block(4096);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let cache = &cache;
                let shared = &shared;
                scope.spawn(move || {
                    for index in 0..2000u64 {
                        let offset = (index * 7 + thread) % 600;
                        if cache.get(thread % 2, offset).is_none() {
                            cache.insert(thread % 2, offset, Arc::clone(shared));
                        }
                    }
                });
            }
        });
        assert_eq!(cache.hit_count() + cache.miss_count(), 8000);
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        cache.check_invariants();
    }
}
