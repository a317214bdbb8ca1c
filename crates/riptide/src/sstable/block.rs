//! Blocks of sorted internal keys with prefix compression and restart points: the builder that
//! encodes them, the decoded [`Block`] and the [`BlockIter`] cursor over one.
//!
//! Layout of an uncompressed block: entries, then the restart array (one little-endian u32 per
//! restart point, the offset of an entry whose key is stored whole), then the restart count
//! (little-endian u32). Each entry is `varint shared_key_bytes, varint unshared_key_bytes,
//! varint value_bytes, unshared key bytes, value bytes`; the key of an entry is the first
//! `shared_key_bytes` of the previous key followed by the unshared bytes.
//!
//! The block cache holds data blocks in a second, in-memory layout, *separated* (keys apart from
//! values, see [`Block`]), which the same cursor reads; it is never written to disk.
//!
//! Concurrency contract: a [`Block`] is immutable once built and is shared between threads as
//! `Arc<Block>` (the block cache hands the same block to many readers). A [`BlockBuilder`] and a
//! [`BlockIter`] belong to one thread. Invariants: [`Block::new`] accepts only a block whose
//! restart array fits, starts at offset 0 and is strictly increasing, so every restart point the
//! iterator reads lies inside the entry area; entries are decoded with checked arithmetic, and any
//! malformed entry (lengths past the entry area, a shared prefix longer than the previous key, a
//! key shorter than an internal-key trailer) makes the iterator invalid with a
//! [`BlockCorruption`] instead of panicking. Keys in every block are internal keys, ordered by
//! the column family's [`KeyComparator`] (the table builder checks the order as it adds keys;
//! seeks are given the comparator).

use std::cell::RefCell;
use std::ops::Deref;
use std::path::Path;

use crate::coding::{get_varint32, put_varint32, read_u32};
use crate::comparator::KeyComparator;
use crate::error::Error;
use crate::key::TRAILER_SIZE_BYTES;

/// Capacity a block cursor's key buffer starts with: internal keys of up to 56-byte user keys
/// fit without growing it.
pub(crate) const INITIAL_KEY_BUFFER_BYTES: usize = 64;

/// Size of one restart offset and of the restart count.
const RESTART_ENTRY_SIZE_BYTES: usize = 4;

/// Buffers of dropped blocks a thread keeps for the next blocks it reads (see
/// [`recycled_block_buffer`]), at most this many ...
const RECYCLED_BUFFERS_PER_THREAD: usize = 8;

/// ... and none larger than this, so that a thread never keeps more than half a MiB.
const MAX_RECYCLED_BUFFER_BYTES: usize = 64 << 10;

thread_local! {
    /// The buffers of blocks this thread dropped last (see [`recycled_block_buffer`]).
    static RECYCLED_BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer for a block of `length_bytes`: one this thread kept from a dropped block, with room
/// for the block and at most a quarter more (the cache charges a block by its length), or an
/// empty one. A kept buffer comes with the stale bytes of its last block: a decompressor
/// writing over them need not clear it first.
///
/// Why: a point read that misses the cache allocates its block, and the block it evicts is
/// freed. At 4 KiB both went through the general allocator's slow paths (too large for its
/// per-thread caches): malloc and free were 9 % of the CPU of random gets missing the cache
/// about half the time. The evicting thread is the reading thread, so its next miss reuses the
/// buffer it just let go.
pub(crate) fn recycled_block_buffer(length_bytes: usize) -> Vec<u8> {
    let fits = |buffer: &Vec<u8>| (length_bytes..=length_bytes + length_bytes / 4).contains(&buffer.capacity());
    RECYCLED_BUFFERS
        .try_with(|cell| {
            let mut kept = cell.try_borrow_mut().ok()?;
            let position = kept.iter().rposition(fits)?;
            Some(kept.swap_remove(position))
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Where and why a block failed to decode. Offsets are within the uncompressed block; the table
/// layer turns this into an [`Error::Corruption`] naming the file and the block's file offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockCorruption {
    pub(crate) offset_in_block: usize,
    pub(crate) reason: &'static str,
}

impl BlockCorruption {
    /// The error for a block stored at `block_offset` in `path`.
    pub(crate) fn into_error(self, path: &Path, block_offset: u64) -> Error {
        Error::corruption(
            path,
            block_offset,
            format!("{} (at byte {} of the uncompressed block)", self.reason, self.offset_in_block),
        )
    }
}

/// Length of the common prefix of two byte strings, compared eight bytes at a time first.
fn common_prefix_length(left: &[u8], right: &[u8]) -> usize {
    let mut shared = 0;
    for (left_chunk, right_chunk) in left.chunks_exact(8).zip(right.chunks_exact(8)) {
        if left_chunk != right_chunk {
            break;
        }
        shared += 8;
    }
    let left_rest = left.get(shared..).unwrap_or_default();
    let right_rest = right.get(shared..).unwrap_or_default();
    shared + left_rest.iter().zip(right_rest).take_while(|(a, b)| a == b).count()
}

/// Encodes one block. Reused across blocks: [`BlockBuilder::reset`] keeps the allocations.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    entries_since_restart: usize,
    num_entries: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// A builder that stores a whole key every `restart_interval` entries.
    pub(crate) fn new(restart_interval: usize) -> BlockBuilder {
        assert!(restart_interval >= 1, "block_restart_interval must be at least 1");
        BlockBuilder {
            buffer: Vec::new(),
            restarts: vec![0],
            restart_interval,
            entries_since_restart: 0,
            num_entries: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. Keys must be internal keys in strictly increasing order under the
    /// column family's comparator, which the builder does not know: the table builder checks
    /// the order of data keys and index separators before they get here.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "add after finish without reset");
        debug_assert!(key.len() >= TRAILER_SIZE_BYTES, "block keys are internal keys");
        let shared = if self.entries_since_restart < self.restart_interval {
            common_prefix_length(&self.last_key, key)
        } else {
            self.restarts.push(Self::offset_u32(self.buffer.len()));
            self.entries_since_restart = 0;
            0
        };
        let unshared = key.len() - shared;
        put_varint32(&mut self.buffer, Self::offset_u32(shared));
        put_varint32(&mut self.buffer, Self::offset_u32(unshared));
        put_varint32(&mut self.buffer, Self::offset_u32(value.len()));
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.entries_since_restart += 1;
        self.num_entries += 1;
        // Offsets inside a block are u32; a block past 4 GiB cannot be addressed.
        assert!(self.buffer.len() <= u32::MAX as usize, "block exceeds 4 GiB");
    }

    /// Converts a length the builder produced to the u32 the format stores.
    fn offset_u32(length: usize) -> u32 {
        assert!(length <= u32::MAX as usize, "block offset or length exceeds 4 GiB");
        length as u32
    }

    /// Size the block would have if finished now.
    pub(crate) fn estimated_size_bytes(&self) -> usize {
        self.buffer.len() + self.restarts.len() * RESTART_ENTRY_SIZE_BYTES + RESTART_ENTRY_SIZE_BYTES
    }

    /// True when nothing was added since the last reset.
    /// Bytes the builder's buffers hold (their capacities, used or not).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.buffer.capacity() + self.restarts.capacity() * std::mem::size_of::<u32>()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Appends the restart array and count and returns the finished block. The builder must be
    /// [`reset`](BlockBuilder::reset) before it is used again.
    pub(crate) fn finish(&mut self) -> &[u8] {
        debug_assert!(!self.finished, "finish called twice");
        for &restart in &self.restarts {
            self.buffer.extend_from_slice(&restart.to_le_bytes());
        }
        let count = Self::offset_u32(self.restarts.len());
        self.buffer.extend_from_slice(&count.to_le_bytes());
        self.finished = true;
        &self.buffer
    }

    /// Clears the builder for the next block, keeping its buffers.
    pub(crate) fn reset(&mut self) {
        self.buffer.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.entries_since_restart = 0;
        self.num_entries = 0;
        self.last_key.clear();
        self.finished = false;
    }
}

/// A block in the stored layout, borrowed, with its restart array validated: what
/// [`Block::new`] checks, and what [`Block::separated_from`] reads.
struct StoredBlock<'a> {
    data: &'a [u8],
    restarts_offset: usize,
    num_restarts: usize,
}

impl<'a> StoredBlock<'a> {
    /// Validates the restart array of `data`.
    fn parse(data: &'a [u8]) -> Result<StoredBlock<'a>, BlockCorruption> {
        let corruption = |offset_in_block, reason| Err(BlockCorruption { offset_in_block, reason });
        let Some(count_offset) = data.len().checked_sub(RESTART_ENTRY_SIZE_BYTES) else {
            return corruption(0, "block too short for its restart count");
        };
        let Some(num_restarts) = read_u32(data, count_offset) else {
            return corruption(count_offset, "block too short for its restart count");
        };
        let num_restarts = num_restarts as usize;
        if num_restarts > count_offset / RESTART_ENTRY_SIZE_BYTES {
            return corruption(count_offset, "restart count larger than the block");
        }
        let restarts_offset = count_offset - num_restarts * RESTART_ENTRY_SIZE_BYTES;
        if num_restarts == 0 && restarts_offset != 0 {
            return corruption(count_offset, "entries without restart points");
        }
        let mut previous: Option<u32> = None;
        for index in 0..num_restarts {
            let position = restarts_offset + index * RESTART_ENTRY_SIZE_BYTES;
            let Some(restart) = read_u32(data, position) else {
                return corruption(position, "restart array truncated");
            };
            let in_order = match previous {
                None => restart == 0,
                Some(previous) => restart > previous,
            };
            // A restart point must name an entry; the one exception is the single restart point
            // of a block without entries, which names the (empty) end of the entry area.
            let names_entry = (restart as usize) < restarts_offset || (restarts_offset == 0 && restart == 0);
            if !in_order || !names_entry {
                return corruption(position, "restart point out of order or out of range");
            }
            previous = Some(restart);
        }
        Ok(StoredBlock { data, restarts_offset, num_restarts })
    }

    /// The entry offset of restart point `index` (validated by `parse`).
    fn restart_point(&self, index: usize) -> usize {
        read_u32(self.data, self.restarts_offset + index * RESTART_ENTRY_SIZE_BYTES)
            .map_or(self.restarts_offset, |offset| offset as usize)
    }

    /// Walks a stored block's entries in order, calling `visit` at each restart point and for
    /// each entry, and checking that every entry ends within its restart interval. Only
    /// [`Block::separated_from`] uses it: once to count and check, once to copy.
    fn walk_entries(&self, mut visit: impl FnMut(EntryStep)) -> Result<(), BlockCorruption> {
        for restart in 0..self.num_restarts {
            visit(EntryStep::Restart(restart));
            let end =
                if restart + 1 < self.num_restarts { self.restart_point(restart + 1) } else { self.restarts_offset };
            let mut offset = self.restart_point(restart);
            while offset < end {
                let header = decode_entry_header(self.data, offset, end)?;
                let value_end = header.key_end.checked_add(header.value_length).filter(|&value_end| value_end <= end);
                let Some(value_end) = value_end else {
                    return Err(BlockCorruption {
                        offset_in_block: offset,
                        reason: "entry extends past its restart interval",
                    });
                };
                visit(EntryStep::Entry { offset, key_end: header.key_end, value_end });
                offset = value_end;
            }
        }
        Ok(())
    }
}

/// One step of [`StoredBlock::walk_entries`]: the start of a restart interval, or an entry with
/// the offsets of its header, the end of its key and the end of its value.
enum EntryStep {
    Restart(usize),
    Entry { offset: usize, key_end: usize, value_end: usize },
}

/// A decoded, validated, uncompressed block, in one of two layouts:
///
/// - *stored*: as written (entries with their values inline, then the restart array and
///   count); `entries_end == restarts_offset`.
/// - *separated* ([`Block::separated_from`], the form of data blocks an iterator cached): the
///   entries' headers and key bytes first, `[0, entries_end)`; then their values, in entry order,
///   `[entries_end, restarts_offset)`; then the restart points' entry offsets (u32 each), then
///   their value offsets (u32 each, from the start of the block). A seek walks a restart interval
///   of keys without pulling every value into the processor's cache: the keys of an interval
///   span two or three cache lines instead of one per entry.
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    /// End of the entries (headers and keys, and in the stored layout values).
    entries_end: usize,
    restarts_offset: usize,
    num_restarts: usize,
    /// True for the separated layout.
    separated: bool,
}

impl Drop for Block {
    /// Keeps the block's buffer for the thread's next block read ([`recycled_block_buffer`]).
    fn drop(&mut self) {
        if self.data.capacity() == 0 || self.data.capacity() > MAX_RECYCLED_BUFFER_BYTES {
            return;
        }
        let data = std::mem::take(&mut self.data);
        // A thread that is exiting, or a drop inside a recycling call, lets the buffer go.
        let _ = RECYCLED_BUFFERS.try_with(|cell| {
            if let Ok(mut kept) = cell.try_borrow_mut() {
                if kept.len() == RECYCLED_BUFFERS_PER_THREAD {
                    kept.remove(0);
                }
                kept.push(data);
            }
        });
    }
}

impl Block {
    /// Validates the restart array of `data` and wraps it.
    pub(crate) fn new(data: Vec<u8>) -> Result<Block, BlockCorruption> {
        let stored = StoredBlock::parse(&data)?;
        let (restarts_offset, num_restarts) = (stored.restarts_offset, stored.num_restarts);
        Ok(Block { data, entries_end: restarts_offset, restarts_offset, num_restarts, separated: false })
    }

    /// The separated layout of the stored block `stored_bytes` (see [`Block`]), validated as
    /// [`Block::new`] validates, plus every entry's lengths: an entry that runs past its restart
    /// interval or the entry area is corruption here rather than when a cursor reaches it. The
    /// bytes are borrowed (the read path decodes blocks into buffers its thread keeps); each is
    /// copied once into the block's own allocation.
    pub(crate) fn separated_from(stored_bytes: &[u8]) -> Result<Block, BlockCorruption> {
        let stored = StoredBlock::parse(stored_bytes)?;
        // First pass: check every entry and count the bytes of headers and keys, so that the
        // second writes each byte once into a buffer of the exact size. (Appending pass by pass
        // to a buffer not cleared first measured slower: more passes, a copy call per piece.)
        let mut entries_end = 0;
        stored.walk_entries(|step| {
            if let EntryStep::Entry { offset, key_end, .. } = step {
                entries_end += key_end - offset;
            }
        })?;
        // Entries and values together take exactly the stored entry area.
        let restarts_offset = stored.restarts_offset;
        let values_bytes = stored.restarts_offset - entries_end;
        let total_bytes = entries_end + values_bytes + 2 * RESTART_ENTRY_SIZE_BYTES * stored.num_restarts;
        if total_bytes > u32::MAX as usize {
            return Err(BlockCorruption { offset_in_block: 0, reason: "block too large to separate" });
        }
        let mut data = vec![0u8; total_bytes];
        let (entries, rest) = data.split_at_mut(entries_end);
        let (values, restarts) = rest.split_at_mut(values_bytes);
        let (restart_entry_offsets, restart_value_offsets) =
            restarts.split_at_mut(RESTART_ENTRY_SIZE_BYTES * stored.num_restarts);
        let (mut entry_position, mut value_position) = (0, 0);
        stored.walk_entries(|step| match step {
            EntryStep::Restart(restart) => {
                let slot = restart * RESTART_ENTRY_SIZE_BYTES..(restart + 1) * RESTART_ENTRY_SIZE_BYTES;
                restart_entry_offsets[slot.clone()].copy_from_slice(&(entry_position as u32).to_le_bytes());
                restart_value_offsets[slot].copy_from_slice(&((entries_end + value_position) as u32).to_le_bytes());
            }
            EntryStep::Entry { offset, key_end, value_end } => {
                let entry_bytes = key_end - offset;
                let value_bytes = value_end - key_end;
                entries[entry_position..entry_position + entry_bytes].copy_from_slice(&stored.data[offset..key_end]);
                values[value_position..value_position + value_bytes].copy_from_slice(&stored.data[key_end..value_end]);
                entry_position += entry_bytes;
                value_position += value_bytes;
            }
        })?;
        debug_assert_eq!((entry_position, value_position), (entries_end, values_bytes));
        Ok(Block { data, entries_end, restarts_offset, num_restarts: stored.num_restarts, separated: true })
    }

    /// A value read from a blob file, to be kept in the block cache (keyed by the blob file's
    /// number and the record's offset, which no table block shares: I7). It has no entries,
    /// so a cursor over it finds none; [`Block::raw_bytes`] returns the value.
    pub(crate) fn raw(data: Vec<u8>) -> Block {
        Block { data, entries_end: 0, restarts_offset: 0, num_restarts: 0, separated: false }
    }

    /// The bytes of a block made by [`Block::raw`].
    pub(crate) fn raw_bytes(&self) -> &[u8] {
        &self.data
    }

    /// A block with no entries, used as a placeholder before the first real block is loaded.
    pub(crate) fn empty() -> Block {
        Block {
            data: vec![0; RESTART_ENTRY_SIZE_BYTES],
            entries_end: 0,
            restarts_offset: 0,
            num_restarts: 0,
            separated: false,
        }
    }

    /// The whole block in the stored layout; `None` for a separated block.
    pub(crate) fn stored_bytes(&self) -> Option<&[u8]> {
        (!self.separated).then_some(&self.data[..])
    }

    /// Bytes of the uncompressed block held in memory.
    pub(crate) fn size_bytes(&self) -> usize {
        self.data.len()
    }

    /// Number of restart points.
    pub(crate) fn restart_count(&self) -> usize {
        self.num_restarts
    }

    /// The entry offset of restart point `index`. [`Block::new`] validated the array, so the
    /// fallback (the end of the entry area, which reads as "no more entries") is never taken.
    #[inline]
    fn restart_point(&self, index: usize) -> usize {
        read_u32(&self.data, self.restarts_offset + index * RESTART_ENTRY_SIZE_BYTES)
            .map_or(self.entries_end, |offset| offset as usize)
    }

    /// In a separated block, the offset of the value of the entry at restart point `index`.
    #[inline]
    fn restart_value_point(&self, index: usize) -> usize {
        let position = self.restarts_offset + (self.num_restarts + index) * RESTART_ENTRY_SIZE_BYTES;
        read_u32(&self.data, position).map_or(self.restarts_offset, |offset| offset as usize)
    }

    /// The whole key stored at restart point `index`, borrowed from the block.
    #[inline]
    pub(crate) fn restart_key(&self, index: usize) -> Result<&[u8], BlockCorruption> {
        let offset = self.restart_point(index);
        let header = decode_entry_header(&self.data, offset, self.entries_end)?;
        if header.shared != 0 {
            return Err(BlockCorruption { offset_in_block: offset, reason: "restart entry shares a key prefix" });
        }
        let key = self.data.get(header.key_start..header.key_end).unwrap_or_default();
        if key.len() < TRAILER_SIZE_BYTES {
            return Err(BlockCorruption {
                offset_in_block: offset,
                reason: "key shorter than an internal key trailer",
            });
        }
        Ok(key)
    }

    /// A cursor over this block.
    pub(crate) fn iter<B: Deref<Target = Block>>(block: B) -> BlockIter<B> {
        // Room for common keys from the start: a buffer grown from empty takes an allocation
        // for the first key and a reallocation for the first longer one, which callgrind put at
        // 7 % of a fresh iterator's seek.
        BlockIter::new(block, Vec::with_capacity(INITIAL_KEY_BUFFER_BYTES))
    }

    /// A cursor over a block whose keys are all stored whole (an index block: restart interval
    /// 1). Every key it yields is borrowed from the block, so it starts without a key buffer
    /// rather than allocating one that stays empty; a damaged block whose entries share
    /// prefixes grows one on demand.
    pub(crate) fn iter_whole_keys<B: Deref<Target = Block>>(block: B) -> BlockIter<B> {
        BlockIter::new(block, Vec::new())
    }
}

/// The decoded header of one entry, with absolute offsets into the block.
#[derive(Clone, Copy, Debug)]
struct EntryHeader {
    shared: usize,
    key_start: usize,
    key_end: usize,
    value_length: usize,
}

/// Decodes the entry header at `offset`, checking that the key ends by `limit` (the end of the
/// entries); where the value lies depends on the block's layout, and the caller checks it.
#[inline(always)]
fn decode_entry_header(data: &[u8], offset: usize, limit: usize) -> Result<EntryHeader, BlockCorruption> {
    let corruption = |reason| BlockCorruption { offset_in_block: offset, reason };
    let area = data.get(offset..limit).ok_or_else(|| corruption("entry offset outside the block"))?;
    // Fast path: in the common case all three lengths are below 128 and take one byte each.
    let (shared, unshared, value_length, header_length) = match area {
        [shared, unshared, value_length, ..] if (shared | unshared | value_length) < 0x80 => {
            (*shared as usize, *unshared as usize, *value_length as usize, 3)
        }
        _ => {
            let (shared, first) = get_varint32(area).ok_or_else(|| corruption("bad shared key length"))?;
            let rest = area.get(first..).unwrap_or_default();
            let (unshared, second) = get_varint32(rest).ok_or_else(|| corruption("bad unshared key length"))?;
            let rest = rest.get(second..).unwrap_or_default();
            let (value_length, third) = get_varint32(rest).ok_or_else(|| corruption("bad value length"))?;
            (shared as usize, unshared as usize, value_length as usize, first + second + third)
        }
    };
    let key_start = offset + header_length;
    let key_end = key_start.checked_add(unshared).ok_or_else(|| corruption("key length overflows"))?;
    if key_end > limit {
        return Err(corruption("entry extends past the end of the block"));
    }
    Ok(EntryHeader { shared, key_start, key_end, value_length })
}

/// A cursor over one block, generic over how the block is held: `Arc<Block>` for iterators that
/// outlive the borrow of the table, `&Block` for point lookups that need no reference count.
///
/// Keys stored whole (restart points, and every entry of an index block) are borrowed from the
/// block; other keys are rebuilt in one reused buffer, so moving along allocates nothing.
#[derive(Debug)]
pub(crate) struct BlockIter<B: Deref<Target = Block>> {
    block: B,
    /// Offset of the current entry; the start of the restart array when not valid.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// In a separated block, the offset of the next entry's value.
    next_value_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    key_buffer: Vec<u8>,
    /// True when the key is `block[key_start..key_end]` rather than `key_buffer`.
    key_borrowed: bool,
    key_start: usize,
    key_end: usize,
    value_start: usize,
    value_end: usize,
    corruption: Option<BlockCorruption>,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// A cursor over `block` that rebuilds keys in `key_buffer` (its allocation is reused).
    pub(crate) fn new(block: B, mut key_buffer: Vec<u8>) -> BlockIter<B> {
        key_buffer.clear();
        let end = block.entries_end;
        BlockIter {
            block,
            current: end,
            next_offset: end,
            next_value_offset: 0,
            restart_index: 0,
            key_buffer,
            key_borrowed: false,
            key_start: 0,
            key_end: 0,
            value_start: 0,
            value_end: 0,
            corruption: None,
        }
    }

    /// Ends the cursor, handing back its key buffer for reuse.
    pub(crate) fn into_key_buffer(self) -> Vec<u8> {
        self.key_buffer
    }

    /// Takes the key buffer out of a cursor about to be dropped, for reuse (reading its key
    /// afterwards is a logic error). Touches nothing but the buffer, so it may run while the
    /// block the cursor points to is being let go.
    pub(crate) fn take_key_buffer(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.key_buffer)
    }

    /// Switches to another block, keeping the key buffer. The cursor is not valid afterwards.
    pub(crate) fn reset(&mut self, block: B) {
        self.block = block;
        self.corruption = None;
        self.key_borrowed = false;
        self.key_buffer.clear();
        self.mark_end();
    }

    /// True when positioned on an entry.
    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.current < self.block.entries_end
    }

    /// The first decoding failure, if any. A corrupt cursor is never valid.
    pub(crate) fn corruption(&self) -> Option<BlockCorruption> {
        self.corruption
    }

    /// The key of the current entry.
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        if self.key_borrowed {
            self.block.data.get(self.key_start..self.key_end).unwrap_or_default()
        } else {
            &self.key_buffer
        }
    }

    /// The value of the current entry, borrowed from the block.
    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        self.block.data.get(self.value_start..self.value_end).unwrap_or_default()
    }

    fn mark_end(&mut self) {
        self.current = self.block.entries_end;
        self.next_offset = self.block.entries_end;
        self.restart_index = self.block.num_restarts;
    }

    fn set_corruption(&mut self, corruption: BlockCorruption) {
        self.corruption = Some(corruption);
        self.mark_end();
    }

    /// Prepares to decode the entry at restart point `index` with the next [`parse_next`].
    fn seek_to_restart(&mut self, index: usize) {
        self.restart_index = index;
        self.key_borrowed = false;
        self.key_buffer.clear();
        self.next_offset = self.block.restart_point(index);
        if self.block.separated {
            self.next_value_offset = self.block.restart_value_point(index);
        }
    }

    /// Decodes the entry at `next_offset` and makes it current. False at the end of the block
    /// or on corruption.
    #[inline]
    fn parse_next(&mut self) -> bool {
        let block: &Block = &self.block;
        let limit = block.entries_end;
        self.current = self.next_offset;
        if self.current >= limit {
            self.mark_end();
            return false;
        }
        let header = match decode_entry_header(&block.data, self.current, limit) {
            Ok(header) => header,
            Err(corruption) => {
                self.set_corruption(corruption);
                return false;
            }
        };
        let previous_key_length = if self.key_borrowed { self.key_end - self.key_start } else { self.key_buffer.len() };
        if header.shared > previous_key_length {
            let corruption =
                BlockCorruption { offset_in_block: self.current, reason: "shared prefix longer than the previous key" };
            self.set_corruption(corruption);
            return false;
        }
        let unshared = block.data.get(header.key_start..header.key_end).unwrap_or_default();
        if header.shared == 0 {
            self.key_borrowed = true;
            self.key_start = header.key_start;
            self.key_end = header.key_end;
        } else {
            if self.key_borrowed {
                // The previous key lives in the block; copy the shared prefix out of it.
                let prefix_end = self.key_start + header.shared;
                self.key_buffer.clear();
                self.key_buffer.extend_from_slice(block.data.get(self.key_start..prefix_end).unwrap_or_default());
                self.key_borrowed = false;
            } else {
                self.key_buffer.truncate(header.shared);
            }
            self.key_buffer.extend_from_slice(unshared);
        }
        let key_length = header.shared + unshared.len();
        if key_length < TRAILER_SIZE_BYTES {
            let corruption =
                BlockCorruption { offset_in_block: self.current, reason: "key shorter than an internal key trailer" };
            self.set_corruption(corruption);
            return false;
        }
        let (value_start, values_limit) =
            if block.separated { (self.next_value_offset, block.restarts_offset) } else { (header.key_end, limit) };
        let Some(value_end) = value_start.checked_add(header.value_length).filter(|&end| end <= values_limit) else {
            let corruption =
                BlockCorruption { offset_in_block: self.current, reason: "entry extends past the end of the block" };
            self.set_corruption(corruption);
            return false;
        };
        self.value_start = value_start;
        self.value_end = value_end;
        if block.separated {
            self.next_value_offset = value_end;
            self.next_offset = header.key_end;
        } else {
            self.next_offset = value_end;
        }
        while self.restart_index + 1 < block.num_restarts && block.restart_point(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        true
    }

    /// Positions at the first entry.
    pub(crate) fn seek_to_first(&mut self) {
        if self.corruption.is_some() || self.block.num_restarts == 0 {
            self.mark_end();
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        if self.corruption.is_some() || self.block.num_restarts == 0 {
            self.mark_end();
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_offset < self.block.entries_end {}
    }

    /// Positions at the first entry whose key is `>= target` in internal-key order under
    /// `comparator` (the order the block was written in): a binary search over the restart
    /// points, then a scan of at most one restart interval.
    pub(crate) fn seek(&mut self, target: &[u8], comparator: &KeyComparator) {
        self.seek_in_restarts(target, comparator, 0, usize::MAX);
    }

    /// [`BlockIter::seek`], told that the last restart point whose key is `< target` (restart 0
    /// when none is) lies between restart points `first` and `last` (clamped to the block), as
    /// an [`crate::sstable::index::IndexGuide`] says; the binary search covers only those.
    pub(crate) fn seek_in_restarts(&mut self, target: &[u8], comparator: &KeyComparator, first: usize, last: usize) {
        debug_assert!(target.len() >= TRAILER_SIZE_BYTES, "seek targets are internal keys");
        if self.corruption.is_some() || self.block.num_restarts == 0 {
            self.mark_end();
            return;
        }
        // Find the last restart point whose key is < target; the answer is in its interval or is
        // the first entry of the next one, which the scan below reaches.
        let mut right = last.min(self.block.num_restarts - 1);
        let mut left = first.min(right);
        while left < right {
            let middle = left + (right - left).div_ceil(2);
            let ordering = match self.block.restart_key(middle) {
                Ok(key) => comparator.compare_internal_keys(key, target),
                Err(corruption) => {
                    self.set_corruption(corruption);
                    return;
                }
            };
            if ordering.is_lt() {
                left = middle;
            } else {
                right = middle - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if comparator.compare_internal_keys(self.key(), target).is_ge() {
                return;
            }
        }
    }

    /// Moves to the next entry.
    #[inline]
    pub(crate) fn next(&mut self) {
        debug_assert!(self.valid());
        self.parse_next();
    }

    /// Moves to the previous entry: back to the restart point before the current entry, then
    /// forward to the entry that ends where the current one starts.
    pub(crate) fn prev(&mut self) {
        debug_assert!(self.valid());
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.mark_end();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() && self.next_offset < original {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use std::sync::Arc;

    fn entries(count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..count)
            .map(|i| {
                let key = make_internal_key(format!("key{:06}", i * 3).as_bytes(), 1000 - i as u64, ValueKind::Put);
                (key, format!("value-{i}").into_bytes())
            })
            .collect()
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Arc<Block> {
        let mut builder = BlockBuilder::new(restart_interval);
        for (key, value) in entries {
            builder.add(key, value);
        }
        Arc::new(Block::new(builder.finish().to_vec()).unwrap())
    }

    fn collect_forward(iter: &mut BlockIter<Arc<Block>>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_first();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
        out
    }

    fn collect_backward(iter: &mut BlockIter<Arc<Block>>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_last();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.prev();
        }
        out.reverse();
        out
    }

    #[test]
    fn a_dropped_blocks_buffer_serves_a_later_block_of_about_its_size_only() {
        let block = Block::raw(vec![7u8; 4000]);
        let address = block.data.as_ptr();
        drop(block);
        assert_eq!(recycled_block_buffer(5000).capacity(), 0, "too small for the block");
        assert_eq!(recycled_block_buffer(1000).capacity(), 0, "more than a quarter too large");
        let reused = recycled_block_buffer(3500);
        assert_eq!(reused.as_ptr(), address);
        assert_eq!(reused, vec![7u8; 4000], "it comes with its stale bytes, for a decoder to overwrite");
        assert_eq!(recycled_block_buffer(3500).capacity(), 0, "a kept buffer is handed out once");
        // A thread keeps only a few, and none of the largest blocks.
        drop(Block::raw(Vec::with_capacity(MAX_RECYCLED_BUFFER_BYTES + 1)));
        assert_eq!(recycled_block_buffer(MAX_RECYCLED_BUFFER_BYTES + 1).capacity(), 0);
        for _ in 0..2 * RECYCLED_BUFFERS_PER_THREAD {
            drop(Block::raw(vec![1u8; 4000]));
        }
        let kept = RECYCLED_BUFFERS.with(|cell| cell.borrow().len());
        assert_eq!(kept, RECYCLED_BUFFERS_PER_THREAD);
    }

    #[test]
    fn round_trip_with_many_restart_intervals() {
        for restart_interval in [1, 2, 3, 7, 16, 100, 1024] {
            for count in [1, 2, 15, 16, 17, 200] {
                let input = entries(count);
                let block = build(&input, restart_interval);
                let mut iter = Block::iter(block.clone());
                assert_eq!(collect_forward(&mut iter), input, "interval {restart_interval}, count {count}");
                assert_eq!(collect_backward(&mut iter), input, "interval {restart_interval}, count {count}");
                assert!(iter.corruption().is_none());
            }
        }
    }

    #[test]
    fn seek_finds_exact_between_and_past_the_end() {
        for restart_interval in [1, 4, 16] {
            let input = entries(100);
            let block = build(&input, restart_interval);
            let mut iter = Block::iter(&*block);
            for (index, (key, value)) in input.iter().enumerate() {
                iter.seek(key, &KeyComparator::Bytewise);
                assert!(iter.valid());
                assert_eq!((iter.key(), iter.value()), (&key[..], &value[..]));
                // A key between this one and the next lands on the next one.
                let between = make_internal_key(format!("key{:06}", index * 3 + 1).as_bytes(), 5, ValueKind::Put);
                iter.seek(&between, &KeyComparator::Bytewise);
                match input.get(index + 1) {
                    Some((next_key, _)) => assert_eq!(iter.key(), &next_key[..]),
                    None => assert!(!iter.valid()),
                }
            }
            let before = make_internal_key(b"a", 1, ValueKind::Put);
            iter.seek(&before, &KeyComparator::Bytewise);
            assert_eq!(iter.key(), &input[0].0[..]);
            let after = make_internal_key(b"z", 1, ValueKind::Put);
            iter.seek(&after, &KeyComparator::Bytewise);
            assert!(!iter.valid());
        }
    }

    #[test]
    fn seek_then_prev_and_next_cross_restart_points() {
        let input = entries(64);
        let block = build(&input, 4);
        let mut iter = Block::iter(block);
        for index in 0..input.len() {
            iter.seek(&input[index].0, &KeyComparator::Bytewise);
            iter.prev();
            if index == 0 {
                assert!(!iter.valid());
                continue;
            }
            assert_eq!(iter.key(), &input[index - 1].0[..]);
            iter.next();
            assert_eq!(iter.key(), &input[index].0[..]);
        }
    }

    #[test]
    fn empty_block_is_never_valid() {
        let mut builder = BlockBuilder::new(16);
        let block = Arc::new(Block::new(builder.finish().to_vec()).unwrap());
        let mut iter = Block::iter(block);
        iter.seek_to_first();
        assert!(!iter.valid());
        iter.seek_to_last();
        assert!(!iter.valid());
        iter.seek(&make_internal_key(b"k", 1, ValueKind::Put), &KeyComparator::Bytewise);
        assert!(!iter.valid());
        let mut iter = Block::iter(Arc::new(Block::empty()));
        iter.seek_to_first();
        assert!(!iter.valid());
    }

    #[test]
    fn builder_reset_reuses_cleanly() {
        let mut builder = BlockBuilder::new(3);
        let first = entries(10);
        for (key, value) in &first {
            builder.add(key, value);
        }
        let first_bytes = builder.finish().to_vec();
        builder.reset();
        for (key, value) in &first {
            builder.add(key, value);
        }
        assert_eq!(builder.estimated_size_bytes(), first_bytes.len());
        assert_eq!(builder.finish(), &first_bytes[..]);
    }

    /// Every position of a cursor over `block`: forward, backward, and where a seek to each of
    /// `targets` lands, as (key, value) or `None` past the end.
    fn cursor_positions(block: Arc<Block>, targets: &[Vec<u8>]) -> Vec<Option<(Vec<u8>, Vec<u8>)>> {
        let mut iter = Block::iter(block);
        let position =
            |iter: &BlockIter<Arc<Block>>| iter.valid().then(|| (iter.key().to_vec(), iter.value().to_vec()));
        let mut positions = collect_forward(&mut iter).into_iter().map(Some).collect::<Vec<_>>();
        positions.extend(collect_backward(&mut iter).into_iter().map(Some));
        for target in targets {
            iter.seek(target, &KeyComparator::Bytewise);
            positions.push(position(&iter));
            if iter.valid() {
                iter.prev();
                positions.push(position(&iter));
                iter.seek(target, &KeyComparator::Bytewise);
                iter.next();
                positions.push(position(&iter));
            }
            assert!(iter.corruption().is_none());
        }
        positions
    }

    #[test]
    fn separated_layout_reads_like_the_stored_one() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(17);
        for round in 0..300 {
            // Keys with shared prefixes of every length, values from empty to past the one-byte
            // varint, restart intervals from 1 to larger than the block.
            let count = rng.gen_range(0..120);
            let mut user_keys: Vec<Vec<u8>> = (0..count)
                .map(|_| (0..rng.gen_range(0..20)).map(|_| [0u8, 1, b'a', b'b', 0xff][rng.gen_range(0..5)]).collect())
                .collect();
            user_keys.sort();
            user_keys.dedup();
            let input: Vec<(Vec<u8>, Vec<u8>)> = user_keys
                .iter()
                .map(|user_key| {
                    let value_length = [0, 1, 7, 127, 128, 300][rng.gen_range(0..6)];
                    let value = (0..value_length).map(|_| rng.gen()).collect();
                    (make_internal_key(user_key, rng.gen_range(0..1000), ValueKind::Put), value)
                })
                .collect();
            let restart_interval = [1, 2, 3, 16, 200][round % 5];
            let stored = build(&input, restart_interval);
            let separated = Arc::new(Block::separated_from(&stored.data).unwrap());
            assert!(separated.separated && !stored.separated);
            assert_eq!(separated.size_bytes(), stored.size_bytes() + 4 * stored.restart_count() - 4);
            let mut targets: Vec<Vec<u8>> = input.iter().map(|(key, _)| key.clone()).collect();
            for _ in 0..30 {
                let user_key: Vec<u8> =
                    (0..rng.gen_range(0..20)).map(|_| [0u8, b'a', b'c'][rng.gen_range(0..3)]).collect();
                targets.push(make_internal_key(&user_key, rng.gen_range(0..1000), ValueKind::Put));
            }
            let stored_positions = cursor_positions(stored, &targets);
            assert_eq!(stored_positions, cursor_positions(separated, &targets), "round {round}");
            assert!(stored_positions.iter().flatten().count() >= 2 * input.len());
        }
    }

    #[test]
    fn malformed_blocks_are_rejected_or_reported_never_panic() {
        let input = entries(40);
        let mut builder = BlockBuilder::new(4);
        for (key, value) in &input {
            builder.add(key, value);
        }
        let good = builder.finish().to_vec();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3000 {
            let mut bytes = good.clone();
            if round % 10 == 0 {
                bytes.truncate(random() as usize % bytes.len());
            } else {
                for _ in 0..1 + round % 3 {
                    let position = random() as usize % bytes.len();
                    bytes[position] = random() as u8;
                }
            }
            if let Ok(separated) = Block::separated_from(&bytes) {
                // The conversion refuses some damage; what it accepts reads without panicking.
                let mut iter = Block::iter(Arc::new(separated));
                iter.seek_to_first();
                while iter.valid() {
                    let _ = (iter.key(), iter.value());
                    iter.next();
                }
                iter.seek_to_last();
                while iter.valid() {
                    iter.prev();
                }
                for (key, _) in input.iter().step_by(7) {
                    iter.seek(key, &KeyComparator::Bytewise);
                }
            }
            let Ok(block) = Block::new(bytes) else { continue };
            let block = Arc::new(block);
            let mut iter = Block::iter(block.clone());
            let mut steps = 0;
            iter.seek_to_first();
            while iter.valid() && steps < 1000 {
                let _ = (iter.key(), iter.value());
                iter.next();
                steps += 1;
            }
            iter.seek_to_last();
            while iter.valid() && steps < 2000 {
                iter.prev();
                steps += 1;
            }
            for (key, _) in input.iter().step_by(7) {
                iter.seek(key, &KeyComparator::Bytewise);
            }
        }
    }
}
