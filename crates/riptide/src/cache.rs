//! The block cache: uncompressed, checksum-verified SSTable data blocks shared by all readers,
//! keyed by (table file number, block offset).
//!
//! The cache is split into shards chosen by a hash of the key, each with its own lock, hash map
//! and least-recently-used list, so that concurrent readers rarely contend. Every entry is
//! charged its block's bytes plus a fixed overhead; when a shard's usage exceeds its share of the
//! capacity, the least recently used entries are dropped (readers holding the `Arc<Block>` keep
//! using it).
//!
//! Concurrency contract: `BlockCache` is `Send + Sync` and shared as `Arc<BlockCache>`; every
//! operation locks exactly one shard (the statistics accessors lock each shard in turn).
//! Invariants: a shard's usage is the sum of the charges of its entries and, after every
//! operation, is at most the shard's capacity; blocks are only inserted after their checksum
//! was verified, so a hit needs no check and no decompression.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::sstable::Block;

/// Bytes charged for an entry on top of its block: the entry, the block header, the reference
/// counts and the hash-map slot.
const ENTRY_OVERHEAD_BYTES: usize =
    std::mem::size_of::<Entry>() + std::mem::size_of::<Block>() + 2 * std::mem::size_of::<usize>() + 32;

/// Each shard gets at least this much capacity, so that a small cache is not cut into shards
/// too small to hold a useful number of blocks.
const MIN_SHARD_CAPACITY_BYTES: usize = 256 << 10;

/// The most shards a cache uses.
const MAX_SHARDS: usize = 64;

/// The slot index of the list sentinel in every shard.
const SENTINEL: usize = 0;

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

/// One slot of a shard's slab: a cached block and its neighbours in the recency list.
struct Entry {
    key: CacheKey,
    block: Option<Arc<Block>>,
    charge_bytes: usize,
    /// Towards the most recently used end.
    previous: usize,
    /// Towards the least recently used end.
    next: usize,
}

/// One shard: a map from key to slot and a circular doubly linked recency list threaded through
/// the slab, with the sentinel in slot 0 (`sentinel.next` is the most recently used entry,
/// `sentinel.previous` the least).
struct Shard {
    map: HashMap<CacheKey, usize, BuildHasherDefault<PassThroughHasher>>,
    slots: Vec<Entry>,
    free_slots: Vec<usize>,
    usage_bytes: usize,
    capacity_bytes: usize,
    hits: u64,
    misses: u64,
}

impl Shard {
    fn new(capacity_bytes: usize) -> Shard {
        let sentinel = Entry {
            key: CacheKey { file_number: u64::MAX, block_offset: u64::MAX },
            block: None,
            charge_bytes: 0,
            previous: SENTINEL,
            next: SENTINEL,
        };
        Shard {
            map: HashMap::default(),
            slots: vec![sentinel],
            free_slots: Vec::new(),
            usage_bytes: 0,
            capacity_bytes,
            hits: 0,
            misses: 0,
        }
    }

    fn unlink(&mut self, slot: usize) {
        let (previous, next) = (self.slots[slot].previous, self.slots[slot].next);
        self.slots[previous].next = next;
        self.slots[next].previous = previous;
    }

    fn push_front(&mut self, slot: usize) {
        let first = self.slots[SENTINEL].next;
        self.slots[slot].previous = SENTINEL;
        self.slots[slot].next = first;
        self.slots[first].previous = slot;
        self.slots[SENTINEL].next = slot;
    }

    fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        match self.map.get(key) {
            Some(&slot) => {
                self.hits += 1;
                self.unlink(slot);
                self.push_front(slot);
                self.slots[slot].block.clone()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>) {
        let charge_bytes = block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        if let Some(&slot) = self.map.get(&key) {
            // Two readers missed on the same block and both read it; keep the newer copy.
            self.usage_bytes = self.usage_bytes - self.slots[slot].charge_bytes + charge_bytes;
            self.slots[slot].block = Some(block);
            self.slots[slot].charge_bytes = charge_bytes;
            self.unlink(slot);
            self.push_front(slot);
        } else {
            let entry = Entry { key, block: Some(block), charge_bytes, previous: SENTINEL, next: SENTINEL };
            let slot = match self.free_slots.pop() {
                Some(slot) => {
                    self.slots[slot] = entry;
                    slot
                }
                None => {
                    self.slots.push(entry);
                    self.slots.len() - 1
                }
            };
            self.map.insert(key, slot);
            self.push_front(slot);
            self.usage_bytes += charge_bytes;
        }
        self.evict_to_capacity();
    }

    /// Drops least recently used entries until usage fits the capacity. A block larger than
    /// the whole shard is dropped right after its insertion.
    fn evict_to_capacity(&mut self) {
        while self.usage_bytes > self.capacity_bytes {
            let victim = self.slots[SENTINEL].previous;
            if victim == SENTINEL {
                break;
            }
            self.unlink(victim);
            let key = self.slots[victim].key;
            self.map.remove(&key);
            self.usage_bytes -= self.slots[victim].charge_bytes;
            self.slots[victim].block = None;
            self.slots[victim].charge_bytes = 0;
            self.free_slots.push(victim);
        }
    }
}

/// A shard padded to its own cache line so that neighbouring locks do not false-share.
#[repr(align(64))]
struct PaddedShard(Mutex<Shard>);

/// The sharded LRU cache of uncompressed data blocks.
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
            .map(|_| PaddedShard(Mutex::new(Shard::new(Self::shard_capacity(capacity_bytes, num_shards)))))
            .collect();
        Arc::new(BlockCache { shards, shard_mask: num_shards - 1, capacity_bytes: AtomicUsize::new(capacity_bytes) })
    }

    fn shard_capacity(capacity_bytes: usize, num_shards: usize) -> usize {
        capacity_bytes / num_shards
    }

    #[inline]
    fn shard(&self, key: &CacheKey) -> &Mutex<Shard> {
        let index = (key.mixed_hash() >> 32) as usize & self.shard_mask;
        &self.shards[index].0
    }

    /// The cached block at `block_offset` of table `file_number`, marking it recently used.
    pub(crate) fn get(&self, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let key = CacheKey { file_number, block_offset };
        self.shard(&key).lock().get(&key)
    }

    /// Caches a verified, uncompressed block, evicting older blocks as needed.
    pub(crate) fn insert(&self, file_number: u64, block_offset: u64, block: Arc<Block>) {
        let key = CacheKey { file_number, block_offset };
        self.shard(&key).lock().insert(key, block);
    }

    /// Bytes currently charged.
    pub(crate) fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|shard| shard.0.lock().usage_bytes).sum()
    }

    /// The configured capacity.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.capacity_bytes.load(Ordering::Relaxed)
    }

    /// Changes the capacity, evicting at once if the cache is now over it.
    pub(crate) fn set_capacity_bytes(&self, capacity_bytes: usize) {
        self.capacity_bytes.store(capacity_bytes, Ordering::Relaxed);
        let per_shard = Self::shard_capacity(capacity_bytes, self.shards.len());
        for shard in self.shards.iter() {
            let mut shard = shard.0.lock();
            shard.capacity_bytes = per_shard;
            shard.evict_to_capacity();
        }
    }

    /// Lookups that found their block.
    pub(crate) fn hit_count(&self) -> u64 {
        self.shards.iter().map(|shard| shard.0.lock().hits).sum()
    }

    /// Lookups that did not.
    pub(crate) fn miss_count(&self) -> u64 {
        self.shards.iter().map(|shard| shard.0.lock().misses).sum()
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
    fn evicts_least_recently_used_under_capacity() {
        let one_block = block(4096);
        let charge = one_block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        // Small enough for a single shard, so the LRU order is global and predictable.
        let cache = BlockCache::new(charge * 4);
        for offset in 0..4u64 {
            cache.insert(7, offset, block(4096));
        }
        assert_eq!(cache.usage_bytes(), charge * 4);
        // Touch block 0 so that block 1 is the least recently used.
        assert!(cache.get(7, 0).is_some());
        cache.insert(7, 4, block(4096));
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        assert!(cache.get(7, 1).is_none(), "the least recently used block is evicted");
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
    }
}
