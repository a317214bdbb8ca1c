//! A bump allocator that owns all the memory of one memtable.
//!
//! The arena hands out blocks carved from large chunks with an atomic bump pointer, so many
//! writer threads allocate at once without taking a lock; the mutex is taken only to add a new
//! chunk when the current one runs out, or to give an oversized block a chunk of its own. Blocks
//! are never freed one by one: dropping the arena frees every chunk at once, which is exactly the
//! lifetime of a memtable's entries.
//!
//! Concurrency contract: `allocate` and `memory_usage_bytes` take `&self` and may be called from
//! any number of threads. The caller owns each returned block exclusively until it publishes the
//! block to other threads with a Release store (the skiplist's link CAS); the arena itself never
//! reads or writes block contents.
//!
//! Invariants: every block is aligned to [`ARENA_ALIGNMENT_BYTES`] and lies entirely inside one
//! chunk; blocks never overlap; a block stays at the same address until the arena is dropped;
//! `memory_usage_bytes` is the sum of the capacities of all chunks, except the untouched pages of
//! a page-mapped current chunk (see `region`), i.e. what the process holds, which is at least
//! the sum of the block sizes handed out.

use std::ptr::{self, NonNull};

// From the shim rather than `std` and `parking_lot` directly, so that the skiplist's loom model
// (`make loom`) also explores the arena's chunk switches; normal builds get the same types.
use crate::sync::{AtomicPtr, AtomicUsize, Mutex, Ordering};

/// Alignment of every block the arena returns: enough for `u64` and for the pointer-sized
/// atomics of skiplist towers.
pub(crate) const ARENA_ALIGNMENT_BYTES: usize = 8;

// Blocks are only guaranteed `ARENA_ALIGNMENT_BYTES` alignment, so the types stored in them must
// not need more.
const _: () = assert!(std::mem::align_of::<u64>() <= ARENA_ALIGNMENT_BYTES);
const _: () = assert!(std::mem::align_of::<AtomicPtr<u8>>() <= ARENA_ALIGNMENT_BYTES);

/// Smallest chunk the arena uses, so that tiny capacity hints do not produce absurdly many chunks.
const MIN_CHUNK_SIZE_BYTES: usize = 1 << 10;

/// Largest regular chunk: big enough that adding chunks is rare, small enough that the memory
/// reported for a fresh memtable stays a small fraction of a typical 64 MiB budget.
const MAX_CHUNK_SIZE_BYTES: usize = 4 << 20;

/// Blocks larger than `chunk size / LARGE_BLOCK_DIVISOR` get a dedicated chunk; this caps the
/// space wasted at the end of an abandoned chunk at a quarter of a chunk.
const LARGE_BLOCK_DIVISOR: usize = 4;

/// One contiguous region of memory and its bump pointer.
struct Chunk {
    /// Start of the region; aligned to `ARENA_ALIGNMENT_BYTES`.
    base: NonNull<u8>,
    /// Size of the region in bytes.
    capacity_bytes: usize,
    /// Bytes claimed so far. Threads claim with `fetch_add`, so after the chunk is exhausted this
    /// may exceed `capacity_bytes`; a claim counts only if it ends within the capacity.
    claimed_bytes: AtomicUsize,
    /// True when every page of the region is already in memory (a chunk recycled through a
    /// [`ChunkPool`]), so its untouched part counts too.
    resident: bool,
}

impl Chunk {
    /// Allocates a chunk of `capacity_bytes` (a positive multiple of the alignment) and returns
    /// it as a raw pointer owned by the caller, to be freed with [`Chunk::free`]. A raw pointer
    /// (rather than a `Box` kept in a vector) lets other threads hold shared references to the
    /// chunk while the owning list is modified.
    /// A chunk of the pool's size is taken from `pool` when it holds one.
    fn allocate(capacity_bytes: usize, initially_claimed_bytes: usize, pool: Option<&ChunkPool>) -> NonNull<Chunk> {
        let recycled = pool.filter(|_| ChunkPool::holds_size(capacity_bytes)).and_then(ChunkPool::take);
        let resident = recycled.is_some();
        let base = recycled.unwrap_or_else(|| region::allocate(capacity_bytes));
        let chunk = Box::new(Chunk {
            base,
            capacity_bytes,
            claimed_bytes: AtomicUsize::new(initially_claimed_bytes),
            resident,
        });
        NonNull::from(Box::leak(chunk))
    }

    /// Frees a chunk made by [`Chunk::allocate`].
    ///
    /// # Safety
    /// `chunk` came from `Chunk::allocate`, is freed only once, and no reference to the chunk or
    /// to memory inside it is used afterwards.
    /// A chunk of the pool's size goes back to `pool` when it has room.
    unsafe fn free(chunk: NonNull<Chunk>, pool: Option<&ChunkPool>) {
        // SAFETY: the caller guarantees `chunk` is a live, uniquely owned leaked box.
        let chunk = unsafe { Box::from_raw(chunk.as_ptr()) };
        if let Some(pool) = pool.filter(|_| ChunkPool::holds_size(chunk.capacity_bytes)) {
            if pool.give(chunk.base) {
                return;
            }
        }
        // SAFETY: `base` came from `region::allocate` (directly or through the pool, which
        // holds only page-mapped regions of its size) with this capacity and is freed only here.
        unsafe { region::free(chunk.base, chunk.capacity_bytes) };
    }
}

/// Regions of finished memtables' chunks, kept for the next memtables of the same database.
///
/// Why: a page-mapped chunk costs a page fault and a zeroed page per 4 KiB the first time it is
/// written, and the memory returns to the operating system when the memtable is dropped, so
/// every byte a database writes paid for fresh pages twice over. With 4 KiB values from 8
/// writers, faults and page clearing were about a tenth of the process's CPU, and more when
/// the page cache was full (the kernel reclaims a page for every fault); the write path's
/// system time was 0.81-0.86 s against RocksDB's 0.54-0.60 s for the same 415 MiB, RocksDB's
/// arena reusing freed heap memory. A pool holds at most `capacity_chunks` regions of
/// [`MAX_CHUNK_SIZE_BYTES`] (the chunk size of memtables of 32 MiB and more), only page-mapped
/// ones, and only while the database's memory pressure is normal: the memory accounting counts
/// pooled bytes with the memtables, and raised pressure empties the pool
/// ([`ChunkPool::set_accepting`]).
///
/// Concurrency contract: shared as `Arc` by the database and its memtables' arenas; `take`,
/// `give` and `set_accepting` may be called from any thread. Invariants: every pooled region
/// is page-mapped, of [`MAX_CHUNK_SIZE_BYTES`], owned by the pool alone, and at most
/// `capacity_chunks` are pooled; `pooled_bytes` is their total.
pub(crate) struct ChunkPool {
    /// The pooled regions and whether the pool accepts more, under one lock so that a region
    /// given back while the pool stops accepting is either refused or released with the rest.
    state: Mutex<PoolState>,
    /// A copy of `state.accepting`, written under the lock, read without it so that the
    /// callers on the write path can skip the lock when nothing would change.
    accepting_hint: std::sync::atomic::AtomicBool,
    capacity_chunks: usize,
    pooled_bytes: AtomicUsize,
    /// Regions taken so far, and the count the last idleness check saw with the number of
    /// checks since it changed (see [`ChunkPool::release_if_idle`]).
    taken_count: AtomicUsize,
    idle: Mutex<(usize, u32)>,
}

/// What [`ChunkPool`] keeps under its lock.
struct PoolState {
    regions: Vec<PooledRegion>,
    accepting: bool,
}

/// A pooled region's base pointer.
struct PooledRegion(NonNull<u8>);

// SAFETY: a pooled region is plain memory owned by the pool alone; whoever takes it owns it.
unsafe impl Send for PooledRegion {}

impl ChunkPool {
    /// A pool holding at most `capacity_bytes` of regions (rounded down to whole chunks).
    pub(crate) fn new(capacity_bytes: usize) -> ChunkPool {
        ChunkPool {
            state: Mutex::new(PoolState { regions: Vec::new(), accepting: true }),
            accepting_hint: std::sync::atomic::AtomicBool::new(true),
            capacity_chunks: capacity_bytes / MAX_CHUNK_SIZE_BYTES,
            pooled_bytes: AtomicUsize::new(0),
            taken_count: AtomicUsize::new(0),
            idle: Mutex::new((0, 0)),
        }
    }

    /// Called at a regular interval (the memory monitor's): once `checks` calls in a row saw
    /// no region taken, the pool gives back what it holds. A database that stopped writing
    /// keeps no memory for memtables it is not filling: the chunks of the memtable flushed at
    /// the end of a load otherwise stayed while the reads that followed filled the block cache
    /// (peak RSS of Zipfian seeks after a load 63-64 MiB against 54-55 MiB). True when it
    /// released something.
    pub(crate) fn release_if_idle(&self, checks: u32) -> bool {
        let taken = self.taken_count.load(Ordering::Relaxed);
        let mut idle = self.idle.lock();
        if idle.0 != taken {
            *idle = (taken, 0);
            return false;
        }
        idle.1 = idle.1.saturating_add(1);
        if idle.1 < checks || self.pooled_bytes() == 0 {
            return false;
        }
        drop(idle);
        self.release();
        true
    }

    /// True for chunks a pool recycles: page-mapped, of [`MAX_CHUNK_SIZE_BYTES`].
    fn holds_size(capacity_bytes: usize) -> bool {
        capacity_bytes == MAX_CHUNK_SIZE_BYTES && region::page_mapped(capacity_bytes)
    }

    /// A pooled region, if any.
    fn take(&self) -> Option<NonNull<u8>> {
        let region = self.state.lock().regions.pop()?;
        self.pooled_bytes.fetch_sub(MAX_CHUNK_SIZE_BYTES, Ordering::Relaxed);
        self.taken_count.fetch_add(1, Ordering::Relaxed);
        Some(region.0)
    }

    /// Keeps `base` (a page-mapped region of [`MAX_CHUNK_SIZE_BYTES`] no one uses any more) if
    /// the pool accepts regions and has room; false when the caller must free it.
    fn give(&self, base: NonNull<u8>) -> bool {
        let mut state = self.state.lock();
        if !state.accepting || state.regions.len() >= self.capacity_chunks {
            return false;
        }
        state.regions.push(PooledRegion(base));
        self.pooled_bytes.fetch_add(MAX_CHUNK_SIZE_BYTES, Ordering::Relaxed);
        true
    }

    /// Whether the pool keeps regions given back; a pool that stops accepting returns every
    /// region it holds to the operating system.
    pub(crate) fn set_accepting(&self, accepting: bool) {
        // Called for every write group: nothing to change costs two loads, not a lock.
        if self.accepting_hint.load(Ordering::Relaxed) == accepting && (accepting || self.pooled_bytes() == 0) {
            return;
        }
        let mut state = self.state.lock();
        state.accepting = accepting;
        self.accepting_hint.store(accepting, Ordering::Relaxed);
        if !accepting {
            let regions = std::mem::take(&mut state.regions);
            drop(state);
            self.free_regions(regions);
        }
    }

    /// Bytes of the regions pooled.
    pub(crate) fn pooled_bytes(&self) -> usize {
        self.pooled_bytes.load(Ordering::Relaxed)
    }

    /// Returns every pooled region to the operating system.
    fn release(&self) {
        let regions = std::mem::take(&mut self.state.lock().regions);
        self.free_regions(regions);
    }

    /// Frees regions taken out of the pool's state.
    fn free_regions(&self, regions: Vec<PooledRegion>) {
        for region in regions {
            self.pooled_bytes.fetch_sub(MAX_CHUNK_SIZE_BYTES, Ordering::Relaxed);
            // SAFETY: pooled regions are page-mapped regions of this size that the pool alone
            // owns (see `give`), and each is freed once, here.
            unsafe { region::free(region.0, MAX_CHUNK_SIZE_BYTES) };
        }
    }
}

impl Drop for ChunkPool {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for ChunkPool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ChunkPool")
            .field("capacity_chunks", &self.capacity_chunks)
            .field("pooled_bytes", &self.pooled_bytes())
            .finish()
    }
}

/// Where chunk memory comes from.
///
/// Chunks of [`region::PAGE_MAPPED_MIN_BYTES`] and more are mapped from the operating system
/// directly (anonymous `mmap`, returned with `munmap` when the memtable is dropped) on Unix,
/// rather than taken from the global allocator. Why: glibc's malloc serves such sizes with
/// `mmap` at first, but on the first `free` of one it raises its mmap threshold to that size and
/// its trim threshold to twice that (up to 32 and 64 MiB), so every later chunk comes from the
/// heap arenas, and each of the per-thread arenas may keep that much freed memory without giving
/// it back. Measured with 4 writers and a 64 MiB cap: the process peaked at 114 MiB of RSS with
/// chunks from malloc and at about 90 MiB with this (`docs/architecture.md`, "Memory cap"). A mapping
/// costs only the pages touched, and its memory leaves the process the moment it is unmapped.
/// Smaller chunks, other platforms and loom models use the global allocator.
mod region {
    use std::alloc::{self, Layout};
    use std::ptr::NonNull;

    use super::{size_overflow, ARENA_ALIGNMENT_BYTES};

    /// The smallest chunk that is mapped from the operating system rather than allocated.
    pub(super) const PAGE_MAPPED_MIN_BYTES: usize = 64 << 10;

    /// The granularity in which the operating system gives a mapping memory (the smallest page
    /// size of the platforms Riptide runs on; larger pages only make the count an underestimate
    /// by less than a page).
    pub(super) const PAGE_SIZE_BYTES: usize = 4096;

    /// True when a chunk of this capacity is page-mapped.
    pub(super) fn page_mapped(capacity_bytes: usize) -> bool {
        cfg!(all(unix, not(loom))) && capacity_bytes >= PAGE_MAPPED_MIN_BYTES
    }

    /// A region of `capacity_bytes`, aligned to the arena's alignment, uninitialised.
    pub(super) fn allocate(capacity_bytes: usize) -> NonNull<u8> {
        if page_mapped(capacity_bytes) {
            return map(capacity_bytes);
        }
        let layout = layout(capacity_bytes);
        // SAFETY: `layout` never has a zero size.
        let raw = unsafe { alloc::alloc(layout) };
        match NonNull::new(raw) {
            Some(base) => base,
            None => alloc::handle_alloc_error(layout),
        }
    }

    /// Frees a region.
    ///
    /// # Safety
    /// `base` came from [`allocate`] with the same `capacity_bytes`, and is freed only once.
    pub(super) unsafe fn free(base: NonNull<u8>, capacity_bytes: usize) {
        if page_mapped(capacity_bytes) {
            // SAFETY: the caller's contract; `allocate` mapped this region for this size.
            unsafe { unmap(base, capacity_bytes) };
            return;
        }
        // SAFETY: allocated with exactly this layout (same size, same alignment).
        unsafe { alloc::dealloc(base.as_ptr(), layout(capacity_bytes)) };
    }

    fn layout(capacity_bytes: usize) -> Layout {
        match Layout::from_size_align(capacity_bytes.max(ARENA_ALIGNMENT_BYTES), ARENA_ALIGNMENT_BYTES) {
            Ok(layout) => layout,
            Err(_) => size_overflow(capacity_bytes),
        }
    }

    #[cfg(all(unix, not(loom)))]
    fn map(capacity_bytes: usize) -> NonNull<u8> {
        // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
        // existing memory; the result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            // The same outcome as the global allocator running out of memory.
            alloc::handle_alloc_error(layout(capacity_bytes));
        }
        // Page alignment (at least 4 KiB) satisfies the arena's alignment.
        match NonNull::new(raw.cast::<u8>()) {
            Some(base) => base,
            None => alloc::handle_alloc_error(layout(capacity_bytes)),
        }
    }

    #[cfg(all(unix, not(loom)))]
    unsafe fn unmap(base: NonNull<u8>, capacity_bytes: usize) {
        // SAFETY: the caller passes a mapping made by `map` with this length, unmapped once.
        let result = unsafe { libc::munmap(base.as_ptr().cast(), capacity_bytes) };
        // munmap fails only for arguments that `map` could not have produced.
        debug_assert_eq!(result, 0, "munmap of an arena chunk failed");
    }

    #[cfg(not(all(unix, not(loom))))]
    fn map(_capacity_bytes: usize) -> NonNull<u8> {
        unreachable!("page mapping is used on Unix only")
    }

    #[cfg(not(all(unix, not(loom))))]
    unsafe fn unmap(_base: NonNull<u8>, _capacity_bytes: usize) {
        unreachable!("page mapping is used on Unix only")
    }
}

/// Rounds `size_bytes` up to a positive multiple of the alignment, so that consecutive claims
/// from one chunk all stay aligned.
fn rounded_block_size(size_bytes: usize) -> usize {
    match size_bytes.max(1).checked_add(ARENA_ALIGNMENT_BYTES - 1) {
        Some(padded) => padded & !(ARENA_ALIGNMENT_BYTES - 1),
        None => size_overflow(size_bytes),
    }
}

/// Reports a request that cannot be represented as an allocation. Memtable entries are built from
/// slices that already exist in memory and the engine caps keys at 1 MiB and values at 1 GiB, so
/// this is unreachable in practice; it panics rather than handing out a wrong block.
#[cold]
#[inline(never)]
fn size_overflow(size_bytes: usize) -> ! {
    panic!("arena allocation of {size_bytes} bytes overflows the address space")
}

/// A concurrent bump allocator; see the module documentation.
pub(crate) struct Arena {
    /// The chunk regular blocks are currently carved from. Always points to a chunk listed in
    /// `chunks`; replaced (under the `chunks` lock) with a Release store when exhausted.
    current: AtomicPtr<Chunk>,
    /// Every chunk ever allocated, owned by the arena and freed on drop.
    chunks: Mutex<Vec<NonNull<Chunk>>>,
    /// Capacity of regular chunks.
    chunk_size_bytes: usize,
    /// Sum of the capacities of all chunks.
    reserved_bytes: AtomicUsize,
    /// Where regular chunks come from and go back to, when the database keeps a pool.
    pool: Option<std::sync::Arc<ChunkPool>>,
}

// SAFETY: the arena owns its chunks outright (no thread-local state), so it may move to another
// thread.
unsafe impl Send for Arena {}
// SAFETY: shared access goes through atomics (`current`, `claimed_bytes`, `reserved_bytes`) and
// the `chunks` mutex; chunk headers are immutable apart from their atomic counter; and each block
// is handed to exactly one caller, so no two threads touch the same block through the arena.
unsafe impl Sync for Arena {}

impl Arena {
    /// [`Arena::with_pool`] without a pool (tests).
    #[cfg(test)]
    pub(crate) fn new(capacity_hint_bytes: usize) -> Arena {
        Arena::with_pool(capacity_hint_bytes, None)
    }

    /// Creates an arena for a memtable expected to hold about `capacity_hint_bytes`. Regular
    /// chunks are an eighth of the hint, clamped to [1 KiB, 4 MiB], so the first chunk (allocated
    /// here) is a small fraction of the budget and a full memtable needs few chunks. Regular
    /// chunks of the pooled size are taken from and given back to `pool`, when there is one.
    pub(crate) fn with_pool(capacity_hint_bytes: usize, pool: Option<std::sync::Arc<ChunkPool>>) -> Arena {
        let chunk_size_bytes =
            rounded_block_size((capacity_hint_bytes / 8).clamp(MIN_CHUNK_SIZE_BYTES, MAX_CHUNK_SIZE_BYTES));
        let first = Chunk::allocate(chunk_size_bytes, 0, pool.as_deref());
        Arena {
            current: AtomicPtr::new(first.as_ptr()),
            chunks: Mutex::new(vec![first]),
            chunk_size_bytes,
            reserved_bytes: AtomicUsize::new(chunk_size_bytes),
            pool,
        }
    }

    /// Returns a block of at least `size_bytes` bytes, aligned to [`ARENA_ALIGNMENT_BYTES`],
    /// uninitialised, exclusively the caller's, and valid until the arena is dropped.
    pub(crate) fn allocate(&self, size_bytes: usize) -> NonNull<u8> {
        let block_size_bytes = rounded_block_size(size_bytes);
        if block_size_bytes > self.chunk_size_bytes / LARGE_BLOCK_DIVISOR {
            return self.allocate_dedicated(block_size_bytes);
        }
        loop {
            let chunk_pointer = self.current.load(Ordering::Acquire);
            // SAFETY: `current` always points to a chunk in `chunks`, and chunks are freed only
            // when the arena is dropped, which cannot happen while `&self` is borrowed. The
            // Acquire load pairs with the Release store that installed the chunk, so its header
            // fields are initialised.
            let chunk = unsafe { &*chunk_pointer };
            // The claim itself needs no ordering: the block's memory is published to readers
            // later by the caller's own Release store.
            let start = chunk.claimed_bytes.fetch_add(block_size_bytes, Ordering::Relaxed);
            let fits = start.checked_add(block_size_bytes).is_some_and(|end| end <= chunk.capacity_bytes);
            if fits {
                // SAFETY: `start + block_size_bytes <= capacity_bytes`, so the block lies inside
                // the chunk; `fetch_add` gave this range to this thread alone.
                let block = unsafe { chunk.base.as_ptr().add(start) };
                // SAFETY: derived from the non-null chunk base by an in-bounds offset.
                return unsafe { NonNull::new_unchecked(block) };
            }
            self.replace_exhausted_chunk(chunk_pointer);
        }
    }

    /// Bytes of memory the arena holds: the capacity of every chunk, except that the pages of
    /// a page-mapped current chunk beyond its claimed part are not counted (the operating system
    /// gives them memory only when first written, so they are not part of the process until
    /// then). This is what the memory cap counts; an approximation while writers allocate.
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        let reserved = self.reserved_bytes.load(Ordering::Relaxed);
        let chunk_pointer = self.current.load(Ordering::Acquire);
        // SAFETY: `current` always points to a live chunk of this arena (see `allocate`).
        let chunk = unsafe { &*chunk_pointer };
        if !region::page_mapped(chunk.capacity_bytes) || chunk.resident {
            return reserved;
        }
        let claimed = chunk.claimed_bytes.load(Ordering::Relaxed).min(chunk.capacity_bytes);
        let touched = claimed.next_multiple_of(region::PAGE_SIZE_BYTES).min(chunk.capacity_bytes);
        reserved.saturating_sub(chunk.capacity_bytes - touched)
    }

    /// Bytes of every chunk's capacity, touched or not.
    #[cfg(test)]
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.reserved_bytes.load(Ordering::Relaxed)
    }

    /// Gives a block too large for regular chunks a chunk of its own. The chunk is marked fully
    /// claimed so it is never used for anything else.
    #[cold]
    fn allocate_dedicated(&self, block_size_bytes: usize) -> NonNull<u8> {
        // A dedicated chunk of exactly the pool's size is recycled like a regular one.
        let chunk = Chunk::allocate(block_size_bytes, block_size_bytes, self.pool.as_deref());
        // SAFETY: the chunk was just allocated and is not yet shared.
        let base = unsafe { chunk.as_ref().base };
        self.chunks.lock().push(chunk);
        self.reserved_bytes.fetch_add(block_size_bytes, Ordering::Relaxed);
        base
    }

    /// Installs a fresh chunk unless another thread already replaced `exhausted`.
    #[cold]
    fn replace_exhausted_chunk(&self, exhausted: *mut Chunk) {
        let mut chunks = self.chunks.lock();
        // Only the lock holder stores to `current`, so a Relaxed load under the lock sees the
        // latest value.
        if !ptr::eq(self.current.load(Ordering::Relaxed), exhausted) {
            return;
        }
        let fresh = Chunk::allocate(self.chunk_size_bytes, 0, self.pool.as_deref());
        chunks.push(fresh);
        self.reserved_bytes.fetch_add(self.chunk_size_bytes, Ordering::Relaxed);
        // Release: threads that load the new chunk pointer with Acquire see its header.
        self.current.store(fresh.as_ptr(), Ordering::Release);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let pool = self.pool.take();
        for chunk in self.chunks.get_mut().drain(..) {
            // SAFETY: each chunk is listed once and came from `Chunk::allocate`; `&mut self`
            // proves no block or chunk reference outlives this point.
            unsafe { Chunk::free(chunk, pool.as_deref()) };
        }
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Arena")
            .field("chunk_size_bytes", &self.chunk_size_bytes)
            .field("memory_usage_bytes", &self.memory_usage_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Fills a block with a byte pattern so overlapping blocks would be detected later.
    fn fill(block: NonNull<u8>, length: usize, pattern: u8) {
        // SAFETY: the test owns the block, which is at least `length` bytes long.
        unsafe { ptr::write_bytes(block.as_ptr(), pattern, length) };
    }

    fn holds_pattern(block: NonNull<u8>, length: usize, pattern: u8) -> bool {
        // SAFETY: the block is live and was fully initialised by `fill`.
        let bytes = unsafe { std::slice::from_raw_parts(block.as_ptr(), length) };
        bytes.iter().all(|&byte| byte == pattern)
    }

    #[test]
    fn chunk_size_follows_hint() {
        assert_eq!(Arena::new(0).reserved_bytes(), MIN_CHUNK_SIZE_BYTES);
        assert_eq!(Arena::new(64 << 10).reserved_bytes(), 8 << 10);
        assert_eq!(Arena::new(64 << 20).reserved_bytes(), MAX_CHUNK_SIZE_BYTES);
        assert_eq!(Arena::new(2 << 30).reserved_bytes(), MAX_CHUNK_SIZE_BYTES);
    }

    /// A page-mapped chunk counts only its touched pages while it is the current chunk, and its
    /// whole capacity once a newer chunk replaced it (on Unix, where chunks are mapped).
    #[test]
    #[cfg(unix)]
    fn page_mapped_chunks_count_touched_pages() {
        let arena = Arena::new(64 << 20);
        let chunk = arena.chunk_size_bytes;
        assert!(region::page_mapped(chunk));
        assert_eq!(arena.memory_usage_bytes(), 0, "a fresh mapping holds no memory");
        let block = arena.allocate(100);
        fill(block, 100, 1);
        assert_eq!(arena.memory_usage_bytes(), region::PAGE_SIZE_BYTES);
        let large = arena.allocate(region::PAGE_SIZE_BYTES * 3);
        fill(large, region::PAGE_SIZE_BYTES * 3, 2);
        assert_eq!(arena.memory_usage_bytes(), region::PAGE_SIZE_BYTES * 4);
        // Fill the chunk and start the next one: the first now counts whole.
        while arena.reserved_bytes() == chunk {
            arena.allocate(4000);
        }
        let usage = arena.memory_usage_bytes();
        assert!(usage > chunk && usage <= chunk + region::PAGE_SIZE_BYTES, "{usage}");
        assert!(holds_pattern(block, 100, 1) && holds_pattern(large, region::PAGE_SIZE_BYTES * 3, 2));
    }

    #[test]
    fn blocks_are_aligned_and_disjoint() {
        let arena = Arena::new(64 << 10);
        let mut blocks = Vec::new();
        for index in 0..2000usize {
            let length = index % 37 + 1;
            let block = arena.allocate(length);
            assert_eq!(block.as_ptr() as usize % ARENA_ALIGNMENT_BYTES, 0);
            fill(block, length, index as u8);
            blocks.push((block, length, index as u8));
        }
        for &(block, length, pattern) in &blocks {
            assert!(holds_pattern(block, length, pattern));
        }
        // Disjointness by address ranges as well, independent of the patterns.
        let ranges: BTreeMap<usize, usize> =
            blocks.iter().map(|&(block, length, _)| (block.as_ptr() as usize, length)).collect();
        assert_eq!(ranges.len(), blocks.len());
        let mut previous_end = 0;
        for (&start, &length) in &ranges {
            assert!(start >= previous_end);
            previous_end = start + length;
        }
    }

    #[test]
    fn accounting_counts_reserved_chunks() {
        let arena = Arena::new(64 << 10);
        let chunk = arena.chunk_size_bytes;
        assert_eq!(chunk, 8 << 10);
        assert_eq!(arena.memory_usage_bytes(), chunk);
        // Fill the first chunk exactly with 64-byte blocks: no new chunk yet.
        for _ in 0..chunk / 64 {
            arena.allocate(64);
        }
        assert_eq!(arena.memory_usage_bytes(), chunk);
        // The next block starts a second chunk.
        arena.allocate(64);
        assert_eq!(arena.memory_usage_bytes(), 2 * chunk);
        // A block above a quarter chunk gets a dedicated chunk of its rounded size.
        let large = chunk / 4 + 1;
        let block = arena.allocate(large);
        fill(block, large, 0xAB);
        assert_eq!(arena.memory_usage_bytes(), 2 * chunk + rounded_block_size(large));
        // A block exactly a quarter chunk still comes from the regular chunk.
        arena.allocate(chunk / 4);
        assert_eq!(arena.memory_usage_bytes(), 2 * chunk + rounded_block_size(large));
        assert!(holds_pattern(block, large, 0xAB));
    }

    #[test]
    fn oversized_and_zero_sized_blocks() {
        let arena = Arena::new(4096);
        let huge = 1 << 20;
        let block = arena.allocate(huge);
        fill(block, huge, 7);
        let empty = arena.allocate(0);
        assert_eq!(empty.as_ptr() as usize % ARENA_ALIGNMENT_BYTES, 0);
        assert!(holds_pattern(block, huge, 7));
        assert!(arena.memory_usage_bytes() >= huge);
    }

    #[test]
    fn concurrent_allocations_do_not_overlap() {
        let arena = Arc::new(Arena::new(256 << 10));
        let threads: Vec<_> = (0..4u8)
            .map(|thread| {
                let arena = Arc::clone(&arena);
                std::thread::spawn(move || {
                    let mut blocks = Vec::new();
                    for index in 0..20_000usize {
                        let length = (index * 7 + thread as usize) % 200 + 1;
                        let block = arena.allocate(length);
                        let pattern = thread.wrapping_mul(61).wrapping_add(index as u8);
                        fill(block, length, pattern);
                        blocks.push((block.as_ptr() as usize, length, pattern));
                    }
                    blocks
                })
            })
            .collect();
        let mut all = Vec::new();
        for thread in threads {
            all.extend(thread.join().unwrap());
        }
        let mut payload_bytes = 0;
        for &(address, length, pattern) in &all {
            let block = NonNull::new(address as *mut u8).unwrap();
            assert!(holds_pattern(block, length, pattern));
            payload_bytes += length;
        }
        all.sort_unstable();
        for pair in all.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "blocks overlap");
        }
        assert!(arena.memory_usage_bytes() >= payload_bytes);
    }

    /// Chunks of a dropped arena go to its pool (up to the pool's capacity) and the next arena
    /// takes them, counting them whole (their pages are in memory); a pool that stops
    /// accepting gives everything back and refuses more.
    #[test]
    #[cfg(unix)]
    fn pooled_chunks_are_recycled_and_counted_whole() {
        let pool = Arc::new(ChunkPool::new(2 * MAX_CHUNK_SIZE_BYTES));
        let first = Arena::with_pool(64 << 20, Some(Arc::clone(&pool)));
        assert_eq!(first.chunk_size_bytes, MAX_CHUNK_SIZE_BYTES);
        let mut bases = Vec::new();
        while first.reserved_bytes() < 3 * MAX_CHUNK_SIZE_BYTES {
            let block = first.allocate(1 << 16);
            fill(block, 1 << 16, 7);
            bases.push(block.as_ptr() as usize);
        }
        assert_eq!(pool.pooled_bytes(), 0);
        drop(first);
        assert_eq!(pool.pooled_bytes(), 2 * MAX_CHUNK_SIZE_BYTES, "two of three chunks kept");
        let second = Arena::with_pool(64 << 20, Some(Arc::clone(&pool)));
        assert_eq!(pool.pooled_bytes(), MAX_CHUNK_SIZE_BYTES);
        assert_eq!(second.memory_usage_bytes(), MAX_CHUNK_SIZE_BYTES, "a recycled chunk counts whole");
        let block = second.allocate(100);
        let chunk_of =
            |address: usize| bases.iter().any(|&base| base <= address && address < base + MAX_CHUNK_SIZE_BYTES);
        assert!(chunk_of(block.as_ptr() as usize), "the new arena writes into a recycled region");
        // A region that comes back holds the old memtable's bytes: the arena hands out
        // uninitialised blocks either way.
        fill(block, 100, 9);
        assert!(holds_pattern(block, 100, 9));
        // Idleness: checks that see a region taken start counting again; `checks` idle ones in
        // a row give everything back.
        assert!(!pool.release_if_idle(2), "a region was taken since the last check");
        assert!(!pool.release_if_idle(2));
        assert!(pool.release_if_idle(2), "two idle checks in a row");
        assert_eq!(pool.pooled_bytes(), 0);
        drop(Arena::with_pool(64 << 20, Some(Arc::clone(&pool))));
        assert_eq!(pool.pooled_bytes(), MAX_CHUNK_SIZE_BYTES, "a dropped arena fills it again");
        pool.set_accepting(false);
        assert_eq!(pool.pooled_bytes(), 0, "released at once");
        drop(second);
        assert_eq!(pool.pooled_bytes(), 0, "a pool that does not accept keeps nothing");
        pool.set_accepting(true);
        let small = Arena::with_pool(64 << 10, Some(Arc::clone(&pool)));
        small.allocate(100);
        drop(small);
        assert_eq!(pool.pooled_bytes(), 0, "only chunks of the pool's size are kept");
    }
}
