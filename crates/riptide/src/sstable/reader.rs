//! [`Table`]: an open table file, and [`TableIterator`], the two-level cursor over it.
//!
//! Opening a table reads and verifies the footer, the properties block, the index block and the
//! filter block and keeps them in memory; data blocks are read on demand with one positional
//! read each (the block and its trailer), verified, decompressed and optionally put into the
//! shared [`BlockCache`]. A point lookup touches the key range and the bloom filter, binary
//! searches the in-memory index and reads one data block.
//!
//! Concurrency contract: a `Table` is immutable after [`Table::open`] and shared as `Arc<Table>` by
//! any number of threads; reads use positional I/O and need no lock. A [`TableIterator`] belongs to
//! one thread and keeps its table alive through an `Arc`. Invariants: a table is read in the order
//! of the comparator it was opened with, and opening checks that the table records that
//! comparator's name; every index entry was checked at open (its handle lies inside the data region
//! and separators increase), so a data-block read never leaves the data region; any damage met
//! later is reported as [`Error::Corruption`], never as a panic or a wrong entry that a checksum
//! could have caught.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iterator::InternalIterator;
use crate::key::{self, ValueKind, TRAILER_SIZE_BYTES};
use crate::sstable::block::{recycled_block_buffer, Block, BlockCorruption, BlockIter, INITIAL_KEY_BUFFER_BYTES};
use crate::sstable::bloom::BloomFilter;
use crate::sstable::format::{
    decode_stored_block, decode_stored_block_into, uncompressed_length_hint, BlockHandle, DecodedBlock, Footer,
    BLOCK_TRAILER_SIZE_BYTES, FOOTER_SIZE_BYTES, FORMAT_VERSION,
};
use crate::sstable::index::IndexGuide;
use crate::sstable::properties::TableProperties;

std::thread_local! {
    /// Key buffers this thread's data-block cursors rebuild keys in, kept between uses: point
    /// reads (`Table::find`) and table iterators (dropped ones leave theirs) would otherwise
    /// allocate and free one per lookup, and a fresh iterator per query (a SQL engine's
    /// lookups, the benchtool's fresh seeks) one per table it reads.
    static KEY_BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A key buffer larger than this (a huge key) is freed rather than kept.
const MAX_KEPT_KEY_BUFFER_BYTES: usize = 4096;

/// Buffers a thread keeps in [`KEY_BUFFERS`]: enough for the tables of a few live iterators.
const KEPT_KEY_BUFFERS_PER_THREAD: usize = 16;

/// A key buffer for a data-block cursor: one this thread kept, else a new one with room for
/// common keys.
fn take_key_buffer() -> Vec<u8> {
    KEY_BUFFERS
        .try_with(|kept| kept.try_borrow_mut().ok().and_then(|mut kept| kept.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(INITIAL_KEY_BUFFER_BYTES))
}

/// Keeps `buffer` for this thread's next data-block cursor, unless it grew large or the thread
/// keeps enough (or is exiting).
fn give_key_buffer(mut buffer: Vec<u8>) {
    if buffer.capacity() == 0 || buffer.capacity() > MAX_KEPT_KEY_BUFFER_BYTES {
        return;
    }
    buffer.clear();
    let _ = KEY_BUFFERS.try_with(|kept| {
        if let Ok(mut kept) = kept.try_borrow_mut() {
            if kept.len() < KEPT_KEY_BUFFERS_PER_THREAD {
                kept.push(buffer);
            }
        }
    });
}

/// How one read treats checksums and the block cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockReadOptions {
    /// Verify the checksum of data blocks read from disk. Blocks that go into the cache are
    /// always verified, whatever this says, so a cache hit never needs a check; metadata blocks
    /// are always verified at open.
    pub verify_checksums: bool,
    /// Insert data blocks read from disk into the block cache.
    pub fill_cache: bool,
}

impl Default for BlockReadOptions {
    fn default() -> BlockReadOptions {
        BlockReadOptions { verify_checksums: true, fill_cache: true }
    }
}

/// An open table.
pub(crate) struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    file_number: u64,
    cache: Option<Arc<BlockCache>>,
    index: Arc<Block>,
    /// Narrows searches of the index (bytewise tables with large indexes only).
    index_guide: Option<IndexGuide>,
    index_offset: u64,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    /// The order of the keys (the column family's).
    comparator: KeyComparator,
    /// A block without entries, the starting point of every iterator.
    empty_block: Arc<Block>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("properties", &self.properties)
            .finish_non_exhaustive()
    }
}

/// Reads the block at `handle` (which must end by `limit`), checks and decompresses it.
fn read_block_contents(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    limit: u64,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    let length = stored_length_with_trailer(path, handle, limit)?;
    let mut buffer = vec![0u8; length];
    file.read_exact_at(handle.offset, &mut buffer)?;
    decode_stored_block(path, handle.offset, buffer, verify_checksum)
}

/// The bytes to read for the block at `handle` (its stored bytes and trailer), checked to end
/// by `limit` (the end of the file's data area).
fn stored_length_with_trailer(path: &Path, handle: BlockHandle, limit: u64) -> Result<usize> {
    handle
        .end_with_trailer()
        .filter(|&end| end <= limit)
        .and_then(|_| usize::try_from(handle.size_bytes).ok())
        .and_then(|size| size.checked_add(BLOCK_TRAILER_SIZE_BYTES))
        .ok_or_else(|| {
            Error::corruption(
                path,
                handle.offset,
                format!("block handle (size {}) extends past offset {limit}", handle.size_bytes),
            )
        })
}

/// The data blocks this thread's counting table cursors have read from their files so far (a
/// running count that wraps; callers take differences).
pub(crate) fn counted_block_misses() -> u64 {
    COUNTED_BLOCK_MISSES.with(Cell::get)
}

/// Adds `count` to this thread's [`counted_block_misses`].
pub(crate) fn add_counted_block_misses(count: u64) {
    COUNTED_BLOCK_MISSES.with(|misses| misses.set(misses.get().wrapping_add(count)));
}

/// The buffers a thread reads and decompresses cached blocks into; see
/// [`with_read_buffers`].
#[derive(Default)]
struct ReadBuffers {
    stored: Vec<u8>,
    decompressed: Vec<u8>,
}

/// Buffers larger than this are freed after use rather than kept by the thread: a table of
/// huge values should not leave every reading thread holding its largest block.
const READ_BUFFER_KEEP_BYTES: usize = 256 << 10;

thread_local! {
    /// Data blocks this thread's counting table cursors read from their files
    /// ([`Table::iter_counting_misses`]). A thread-local counter, not one per iterator: a seek
    /// runs on one thread, which reads the count before and after it, and an iterator is
    /// created per query, so a shared counter would cost an allocation and an atomic write per
    /// table per query.
    static COUNTED_BLOCK_MISSES: Cell<u64> = const { Cell::new(0) };

    static READ_BUFFERS: RefCell<ReadBuffers> = RefCell::new(ReadBuffers::default());
}

/// Runs `read` with this thread's read buffers (fresh ones if they are in use, which a block
/// read never nests, or if the thread is exiting). Why: a block-cache miss allocated and
/// cleared a buffer for the stored bytes and another for the decompressed ones, then freed
/// both once the cached copy was made: allocation, freeing and clearing were a tenth of the
/// CPU of random gets missing the cache half the time.
fn with_read_buffers<T>(read: impl FnOnce(&mut ReadBuffers) -> Result<T>) -> Result<T> {
    let mut read = Some(read);
    let kept = READ_BUFFERS.try_with(|cell| {
        let mut buffers = cell.try_borrow_mut().ok()?;
        let read = read.take()?;
        let result = read(&mut buffers);
        let ReadBuffers { stored, decompressed } = &mut *buffers;
        for buffer in [stored, decompressed] {
            if buffer.len() > READ_BUFFER_KEEP_BYTES {
                *buffer = Vec::new();
            }
        }
        Some(result)
    });
    match (kept, read) {
        (Ok(Some(result)), _) => result,
        (_, Some(read)) => read(&mut ReadBuffers::default()),
        // `read` was taken only by a call that returned its result.
        (_, None) => unreachable!("the read ran but its result was lost"),
    }
}

impl Table {
    /// Opens a table of a column family ordered by `comparator`: reads and verifies the footer,
    /// properties, index and filter. A table that records another comparator's name is
    /// corruption (the manifest said it belongs to a column family of this order; I25).
    ///
    /// With `index_guide`, a bytewise table with a large index also gets an [`IndexGuide`]
    /// (about 8 bytes per data block) to speed up its seeks: the database's tables do; the
    /// runs a huge transaction spills do not, since their memory counts against the
    /// transaction's bounded write memory.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        comparator: KeyComparator,
        index_guide: bool,
    ) -> Result<Arc<Table>> {
        let file_length = file.len();
        let corruption = |offset: u64, reason: String| Error::corruption(&path, offset, reason);
        let footer_offset = file_length
            .checked_sub(FOOTER_SIZE_BYTES as u64)
            .ok_or_else(|| corruption(0, format!("file of {file_length} bytes is too short for a table")))?;
        let mut footer_bytes = [0u8; FOOTER_SIZE_BYTES];
        file.read_exact_at(footer_offset, &mut footer_bytes)?;
        let footer = Footer::decode(&path, footer_offset, &footer_bytes)?;

        let properties_contents = read_block_contents(&*file, &path, footer.properties, footer_offset, true)?;
        let mut properties = TableProperties::decode(&path, footer.properties.offset, &properties_contents)?;
        properties.file_size_bytes = file_length;
        let data_end = properties.data_size_bytes;
        let properties_corruption =
            |reason: &str| corruption(footer.properties.offset, format!("properties block: {reason}"));
        if properties.format_version != FORMAT_VERSION {
            return Err(properties_corruption("format version differs from the footer"));
        }
        if properties.num_entries == 0 || properties.num_data_blocks == 0 {
            return Err(properties_corruption("a table must hold at least one entry"));
        }
        if data_end > footer_offset {
            return Err(properties_corruption("data region extends past the footer"));
        }
        if properties.index_size_bytes != footer.index.size_bytes.saturating_add(BLOCK_TRAILER_SIZE_BYTES as u64) {
            return Err(properties_corruption("index size differs from the footer"));
        }
        let filter_size =
            footer.filter.map_or(0, |handle| handle.size_bytes.saturating_add(BLOCK_TRAILER_SIZE_BYTES as u64));
        if properties.filter_size_bytes != filter_size {
            return Err(properties_corruption("filter size differs from the footer"));
        }
        if properties.comparator_name != comparator.name() {
            return Err(properties_corruption(&format!(
                "the table is ordered by comparator {:?}, its column family by {:?}",
                properties.comparator_name,
                comparator.name()
            )));
        }
        if comparator.compare_internal_keys(&properties.smallest_key, &properties.largest_key).is_gt() {
            return Err(properties_corruption("smallest key is larger than the largest key"));
        }
        for handle in [Some(footer.index), Some(footer.properties), footer.filter].into_iter().flatten() {
            if handle.offset < data_end {
                return Err(corruption(handle.offset, "metadata block overlaps the data region".to_string()));
            }
        }

        let index_contents = read_block_contents(&*file, &path, footer.index, footer_offset, true)?;
        let index = Block::new(index_contents).map_err(|error| error.into_error(&path, footer.index.offset))?;
        Self::check_index(&index, &path, footer.index.offset, &properties, &comparator)?;

        let filter = match footer.filter {
            Some(handle) => {
                let contents = read_block_contents(&*file, &path, handle, footer_offset, true)?;
                let filter = BloomFilter::decode(&contents)
                    .map_err(|reason| corruption(handle.offset, format!("filter block: {reason}")))?;
                Some(filter)
            }
            None => None,
        };

        Ok(Arc::new(Table {
            file,
            path,
            file_number,
            cache,
            index_guide: if index_guide && matches!(comparator, KeyComparator::Bytewise) {
                IndexGuide::build(&index)
            } else {
                None
            },
            index: Arc::new(index),
            index_offset: footer.index.offset,
            filter,
            properties,
            comparator,
            empty_block: Arc::new(Block::empty()),
        }))
    }

    /// Checks every index entry once, so that later reads can trust the handles: separators
    /// increase strictly, every handle lies inside the data region, and there is one entry per
    /// data block.
    fn check_index(
        index: &Block,
        path: &Path,
        index_offset: u64,
        properties: &TableProperties,
        comparator: &KeyComparator,
    ) -> Result<()> {
        let corruption = |reason: &str| Error::corruption(path, index_offset, format!("index block: {reason}"));
        let mut iter = Block::iter(index);
        let mut previous: Option<Vec<u8>> = None;
        let mut count: u64 = 0;
        let mut previous_end: u64 = 0;
        iter.seek_to_first();
        while iter.valid() {
            let handle = BlockHandle::decode_varint(iter.value()).ok_or_else(|| corruption("bad block handle"))?;
            let end = handle.end_with_trailer().ok_or_else(|| corruption("block handle overflows"))?;
            if handle.offset < previous_end || end > properties.data_size_bytes {
                return Err(corruption("block handle out of order or outside the data region"));
            }
            previous_end = end;
            if let Some(previous) = &previous {
                if comparator.compare_internal_keys(previous, iter.key()).is_ge() {
                    return Err(corruption("separators out of order"));
                }
            }
            previous = Some(iter.key().to_vec());
            count += 1;
            iter.next();
        }
        if let Some(error) = iter.corruption() {
            return Err(error.into_error(path, index_offset));
        }
        if count != properties.num_data_blocks {
            return Err(corruption("entry count differs from the number of data blocks"));
        }
        Ok(())
    }

    /// The table's properties.
    pub(crate) fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// False when `user_key` is certainly not in the table: outside its key range, or rejected by
    /// the bloom filter.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        if self.comparator.compare_user_keys(user_key, key::user_key(&self.properties.smallest_key)).is_lt()
            || self.comparator.compare_user_keys(user_key, key::user_key(&self.properties.largest_key)).is_gt()
        {
            return false;
        }
        self.filter.as_ref().is_none_or(|filter| filter.may_contain(user_key))
    }

    /// Reads a data block through the cache, for a point read (`for_iterator` false) or an
    /// iterator.
    ///
    /// A block a point read brings into the cache stays in the stored layout: a get searches
    /// one interval of one block, which the separated layout does not make faster, and the
    /// conversion cost a get that missed the cache about a tenth of its time. A block an
    /// iterator brings in takes the separated layout (keys apart from values), which later seeks
    /// search faster; an iterator that meets a cached block in the stored layout converts it
    /// once and replaces the cached copy. Either way a block that stays in the cache is
    /// verified (cache hits are never checked), and it is read and decompressed into this
    /// thread's buffers, so the block's own allocation is the only one a miss makes.
    ///
    /// With `count_miss`, a block read from the file rather than found in the cache is counted
    /// in this thread's [`counted_block_misses`].
    fn read_data_block(
        &self,
        handle: BlockHandle,
        options: BlockReadOptions,
        for_iterator: bool,
        count_miss: bool,
    ) -> Result<Arc<Block>> {
        let corruption = |error: BlockCorruption| error.into_error(&self.path, handle.offset);
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.file_number, handle.offset) {
                let Some(stored) = block.stored_bytes().filter(|_| for_iterator) else {
                    return Ok(block);
                };
                let separated = Arc::new(Block::separated_from(stored).map_err(corruption)?);
                cache.insert(self.file_number, handle.offset, Arc::clone(&separated));
                return Ok(separated);
            }
        }
        if count_miss {
            add_counted_block_misses(1);
        }
        let Some(cache) = self.cache.as_ref().filter(|_| options.fill_cache) else {
            // A block read once is used as stored.
            let contents = read_block_contents(
                &*self.file,
                &self.path,
                handle,
                self.properties.data_size_bytes,
                options.verify_checksums,
            )?;
            return Ok(Arc::new(Block::new(contents).map_err(corruption)?));
        };
        let block = with_read_buffers(|buffers| {
            let length = stored_length_with_trailer(&self.path, handle, self.properties.data_size_bytes)?;
            if buffers.stored.len() < length {
                buffers.stored.resize(length, 0);
            }
            let stored = &mut buffers.stored[..length];
            self.file.read_exact_at(handle.offset, stored)?;
            if for_iterator {
                let decoded =
                    decode_stored_block_into(&self.path, handle.offset, stored, true, &mut buffers.decompressed)?;
                let contents = match decoded {
                    DecodedBlock::Stored(length) => &buffers.stored[..length],
                    DecodedBlock::Decompressed(length) => &buffers.decompressed[..length],
                };
                return Block::separated_from(contents).map_err(corruption);
            }
            // Decompressed straight into the block's own buffer: one a dropped block left
            // this thread when one fits, else a fresh one.
            let mut contents = recycled_block_buffer(uncompressed_length_hint(stored));
            match decode_stored_block_into(&self.path, handle.offset, stored, true, &mut contents)? {
                DecodedBlock::Stored(length) => {
                    contents.clear();
                    contents.extend_from_slice(&stored[..length]);
                }
                DecodedBlock::Decompressed(length) => contents.truncate(length),
            }
            Block::new(contents).map_err(corruption)
        })?;
        let block = Arc::new(block);
        cache.insert(self.file_number, handle.offset, Arc::clone(&block));
        Ok(block)
    }

    /// Seeks a cursor over this table's index to the entry for the data block that may hold
    /// `target` (an internal key), through the guide when the table has one.
    fn seek_index<B: std::ops::Deref<Target = Block>>(&self, index_iter: &mut BlockIter<B>, target: &[u8]) {
        match &self.index_guide {
            Some(guide) => {
                let (first, last) = guide.restart_range(key::user_key(target));
                index_iter.seek_in_restarts(target, &self.comparator, first, last);
            }
            None => index_iter.seek(target, &self.comparator),
        }
    }

    fn index_error(&self, corruption: BlockCorruption) -> Error {
        corruption.into_error(&self.path, self.index_offset)
    }

    /// Decodes the handle in an index entry (checked at open, but decoded defensively).
    fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode_varint(value)
            .ok_or_else(|| Error::corruption(&self.path, self.index_offset, "index block: bad block handle"))
    }

    /// Finds the first entry whose internal key is `>= lookup_key` and returns it when its user
    /// key equals the user key of `lookup_key`; the caller interprets the kind (value or
    /// tombstone).
    pub(crate) fn get(&self, lookup_key: &[u8], options: BlockReadOptions) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.find(lookup_key, options, |internal_key, value| (internal_key.to_vec(), value.to_vec()))
    }

    /// [`Table::get`] for the read path: the entry's kind (value or tombstone) and its value,
    /// without copying the key. A stored key whose trailer does not parse is corruption.
    pub(crate) fn get_value(
        &self,
        lookup_key: &[u8],
        options: BlockReadOptions,
    ) -> Result<Option<(ValueKind, u64, Vec<u8>)>> {
        let found = self.find(lookup_key, options, |internal_key, value| {
            key::parse_internal_key(internal_key).map(|parsed| (parsed.kind, parsed.sequence, value.to_vec()))
        })?;
        match found {
            None => Ok(None),
            Some(Some(entry)) => Ok(Some(entry)),
            Some(None) => Err(Error::corruption(&self.path, 0, "table returned a malformed internal key")),
        }
    }

    /// Finds the entry [`Table::get`] describes and hands its internal key and value to `found`.
    fn find<T>(
        &self,
        lookup_key: &[u8],
        options: BlockReadOptions,
        found: impl FnOnce(&[u8], &[u8]) -> T,
    ) -> Result<Option<T>> {
        debug_assert!(lookup_key.len() >= TRAILER_SIZE_BYTES, "lookup keys are internal keys");
        let user_key = key::user_key(lookup_key);
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let mut index_iter = Block::iter_whole_keys(&*self.index);
        self.seek_index(&mut index_iter, lookup_key);
        if !index_iter.valid() {
            return match index_iter.corruption() {
                Some(corruption) => Err(self.index_error(corruption)),
                None => Ok(None),
            };
        }
        let handle = self.decode_handle(index_iter.value())?;
        let block = self.read_data_block(handle, options, false, false)?;
        // The cursor rebuilds prefix-compressed keys in a buffer; a point read borrows this
        // thread's instead of allocating and freeing one per lookup.
        let mut data_iter = BlockIter::new(&*block, take_key_buffer());
        data_iter.seek(lookup_key, &self.comparator);
        let result = if !data_iter.valid() {
            // Past the block's last key (possible with a shortened separator): the next block
            // starts with a larger user key, so the key is absent.
            match data_iter.corruption() {
                Some(corruption) => Err(corruption.into_error(&self.path, handle.offset)),
                None => Ok(None),
            }
        } else if key::user_key(data_iter.key()) != user_key {
            // Keys that compare equal are byte-identical (the comparator's contract).
            Ok(None)
        } else {
            Ok(Some(found(data_iter.key(), data_iter.value())))
        };
        give_key_buffer(data_iter.into_key_buffer());
        result
    }

    /// A cursor over the whole table.
    pub(crate) fn iter(self: &Arc<Self>, options: BlockReadOptions) -> TableIterator {
        self.iter_counting_misses(options, false)
    }

    /// [`Table::iter`], counting (with `count_misses`) every data block the cursor reads from
    /// the file rather than the block cache in [`counted_block_misses`]: what read-triggered
    /// compaction weighs a level-0 table's seeks by (`db::read_charges`).
    pub(crate) fn iter_counting_misses(
        self: &Arc<Self>,
        options: BlockReadOptions,
        count_misses: bool,
    ) -> TableIterator {
        TableIterator {
            index: Block::iter_whole_keys(TableBlock::of(&self.index)),
            data: BlockIter::new(DataBlock::Empty(TableBlock::of(&self.empty_block)), take_key_buffer()),
            data_block_offset: None,
            table: Arc::clone(self),
            options,
            error: None,
            count_misses,
        }
    }

    /// The approximate file offset where entries at or after `internal_key` start: the offset of
    /// the data block that would hold it, or the end of the data region past the last key.
    pub(crate) fn approximate_offset_of(&self, internal_key: &[u8]) -> u64 {
        let mut index_iter = Block::iter_whole_keys(&*self.index);
        self.seek_index(&mut index_iter, internal_key);
        if index_iter.valid() {
            if let Some(handle) = BlockHandle::decode_varint(index_iter.value()) {
                return handle.offset;
            }
        }
        self.properties.data_size_bytes
    }

    /// Bytes held in memory for this open table: index, filter and properties.
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        std::mem::size_of::<Table>()
            + self.index.size_bytes()
            + self.index_guide.as_ref().map_or(0, IndexGuide::memory_usage_bytes)
            + self.filter.as_ref().map_or(0, BloomFilter::memory_usage_bytes)
            + self.properties.smallest_key.len()
            + self.properties.largest_key.len()
            + self.path.as_os_str().len()
    }
}

/// A block the table holds for its whole life (its index, its empty block), borrowed by an
/// iterator of the table without a reference count of its own. Cloning the table's `Arc`s for
/// every iterator wrote counters that every reading core shares: four atomic writes per table
/// for each fresh iterator (two at creation, two when dropped), about a tenth of the CPU of
/// fresh Zipfian seeks with the drop of the iterator's other parts.
struct TableBlock(std::ptr::NonNull<Block>);

impl TableBlock {
    /// Borrows `block`, which must be one of the table's own, reached through the `Arc<Table>`
    /// of the iterator that holds the result.
    fn of(block: &Arc<Block>) -> TableBlock {
        TableBlock(std::ptr::NonNull::from(&**block))
    }
}

impl std::ops::Deref for TableBlock {
    type Target = Block;

    fn deref(&self) -> &Block {
        // SAFETY: a `TableBlock` lives only in a `TableIterator`, which holds the `Arc<Table>`
        // whose block it points to; a table never replaces its index or empty block, so the
        // block outlives the pointer.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: a `TableBlock` is a shared reference to a `Block` (which is `Sync`) kept alive by the
// iterator that holds it, so it may move to and be used from another thread like `&Block`.
unsafe impl Send for TableBlock {}
// SAFETY: as above.
unsafe impl Sync for TableBlock {}

/// The data block a table iterator reads: a cached block, or the table's empty block before
/// the first load and past the ends.
enum DataBlock {
    Empty(TableBlock),
    Loaded(Arc<Block>),
}

impl std::ops::Deref for DataBlock {
    type Target = Block;

    fn deref(&self) -> &Block {
        match self {
            DataBlock::Empty(block) => block,
            DataBlock::Loaded(block) => block,
        }
    }
}

/// A two-level cursor over a table: a cursor over the in-memory index selects a data block, a
/// cursor over that block yields the entries. Keys borrow a reused buffer and values borrow the
/// block, so stepping allocates nothing; moving into another block costs one cache lookup or
/// one read.
pub(crate) struct TableIterator {
    /// The table `index` and `data` may point into (`TableBlock`); their pointers are never
    /// followed once the iterator is being dropped (a `BlockIter` has no drop of its own).
    table: Arc<Table>,
    options: BlockReadOptions,
    index: BlockIter<TableBlock>,
    data: BlockIter<DataBlock>,
    /// File offset of the block `data` reads, `None` before the first load.
    data_block_offset: Option<u64>,
    error: Option<Error>,
    /// Counts data blocks read from the file (see [`Table::iter_counting_misses`]).
    count_misses: bool,
}

impl Drop for TableIterator {
    /// Leaves the data cursor's key buffer to this thread's next table iterator.
    fn drop(&mut self) {
        give_key_buffer(self.data.take_key_buffer());
    }
}

impl TableIterator {
    /// Points `data` at the block named by the current index entry. False (with `data` not
    /// valid) when the index is exhausted or on error.
    fn load_data_block(&mut self) -> bool {
        if !self.index.valid() {
            if let Some(corruption) = self.index.corruption() {
                self.error = Some(self.table.index_error(corruption));
            }
            self.data.reset(DataBlock::Empty(TableBlock::of(&self.table.empty_block)));
            self.data_block_offset = None;
            return false;
        }
        let handle = match self.table.decode_handle(self.index.value()) {
            Ok(handle) => handle,
            Err(error) => {
                self.error = Some(error);
                return false;
            }
        };
        if self.data_block_offset == Some(handle.offset) {
            return true;
        }
        match self.table.read_data_block(handle, self.options, true, self.count_misses) {
            Ok(block) => {
                self.data.reset(DataBlock::Loaded(block));
                self.data_block_offset = Some(handle.offset);
                true
            }
            Err(error) => {
                self.error = Some(error);
                false
            }
        }
    }

    /// Records a decoding failure of the current data block, if there is one.
    fn check_data_corruption(&mut self) -> bool {
        if let Some(corruption) = self.data.corruption() {
            let offset = self.data_block_offset.unwrap_or(0);
            self.error = Some(corruption.into_error(&self.table.path, offset));
            return true;
        }
        false
    }

    /// Moves forward over the ends of blocks until positioned on an entry or exhausted.
    fn skip_forward(&mut self) {
        while self.error.is_none() && !self.data.valid() {
            if self.check_data_corruption() || !self.index.valid() {
                return;
            }
            self.index.next();
            if !self.load_data_block() {
                return;
            }
            self.data.seek_to_first();
        }
    }

    /// Moves backward over the starts of blocks until positioned on an entry or exhausted.
    fn skip_backward(&mut self) {
        while self.error.is_none() && !self.data.valid() {
            if self.check_data_corruption() || !self.index.valid() {
                return;
            }
            self.index.prev();
            if !self.load_data_block() {
                return;
            }
            self.data.seek_to_last();
        }
    }
}

impl InternalIterator for TableIterator {
    fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        self.table.may_contain(user_key)
    }

    fn reaches_cheaply(&self, target: &[u8]) -> bool {
        // At or before the current block's separator: `seek_forward` searches this block alone.
        self.valid()
            && self.index.valid()
            && self.table.comparator.compare_internal_keys(self.index.key(), target).is_ge()
    }

    #[inline]
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.valid()
    }

    fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.index.seek_to_first();
        if self.load_data_block() {
            self.data.seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.index.seek_to_last();
        if self.load_data_block() {
            self.data.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        self.table.seek_index(&mut self.index, target);
        if self.load_data_block() {
            self.data.seek(target, &self.table.comparator);
        }
        self.skip_forward();
    }

    fn seek_forward(&mut self, target: &[u8]) {
        /// Entries stepped over before searching: a target this close (the rest of one key's
        /// versions) costs less to walk to than a binary search.
        const STEPS_BEFORE_SEARCH: usize = 4;
        // A target past the current block (a re-seek far ahead): search the index at once
        // rather than stepping first.
        if self.valid()
            && self.index.valid()
            && self.table.comparator.compare_internal_keys(self.index.key(), target).is_lt()
        {
            self.seek(target);
            return;
        }
        for _ in 0..STEPS_BEFORE_SEARCH {
            if !self.valid() || self.table.comparator.compare_internal_keys(self.data.key(), target).is_ge() {
                return;
            }
            self.next();
        }
        if !self.valid() {
            return;
        }
        // A target at or before the current block's separator is in this block or starts the
        // next one: search the block alone, not the index.
        let within_block =
            self.index.valid() && self.table.comparator.compare_internal_keys(self.index.key(), target).is_ge();
        if within_block {
            self.data.seek(target, &self.table.comparator);
            self.skip_forward();
        } else {
            self.seek(target);
        }
    }

    #[inline]
    fn next(&mut self) {
        debug_assert!(self.valid());
        self.data.next();
        if !self.data.valid() {
            self.skip_forward();
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        self.data.prev();
        if !self.data.valid() {
            self.skip_backward();
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.data.key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.data.value()
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(error) => Err(error.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod read_buffer_tests {
    use super::*;

    /// A key buffer given back (by a point read or a dropped table iterator) serves this
    /// thread's next cursor, emptied; a buffer grown past the limit is let go, and the thread
    /// keeps at most its share.
    #[test]
    fn key_buffers_are_kept_for_the_next_cursor() {
        // Start from an empty pool (other tests on this thread may have filled it).
        KEY_BUFFERS.with(|kept| kept.borrow_mut().clear());
        let mut buffer = take_key_buffer();
        assert!(buffer.is_empty() && buffer.capacity() >= INITIAL_KEY_BUFFER_BYTES);
        buffer.extend_from_slice(&[1; 200]);
        let address = buffer.as_ptr();
        give_key_buffer(buffer);
        let reused = take_key_buffer();
        assert_eq!(reused.as_ptr(), address, "the kept buffer is handed out again");
        assert!(reused.is_empty(), "a kept buffer is emptied");

        give_key_buffer(Vec::with_capacity(MAX_KEPT_KEY_BUFFER_BYTES + 1));
        assert_eq!(KEY_BUFFERS.with(|kept| kept.borrow().len()), 0, "large buffers are let go");
        for _ in 0..KEPT_KEY_BUFFERS_PER_THREAD + 5 {
            give_key_buffer(Vec::with_capacity(32));
        }
        assert_eq!(KEY_BUFFERS.with(|kept| kept.borrow().len()), KEPT_KEY_BUFFERS_PER_THREAD);
    }

    #[test]
    fn nested_reads_get_fresh_buffers_and_large_buffers_are_not_kept() {
        let outer: Result<()> = with_read_buffers(|outer| {
            outer.stored.resize(1000, 7);
            // A nested read (none does so today) must not see or disturb the outer buffers.
            let inner: Result<usize> = with_read_buffers(|inner| {
                assert!(inner.stored.is_empty());
                inner.stored.resize(10, 1);
                Ok(inner.stored.len())
            });
            assert_eq!(inner.unwrap(), 10);
            assert_eq!(outer.stored.len(), 1000);
            Ok(())
        });
        outer.unwrap();
        // Small buffers are kept for the next read; one past the limit is freed.
        with_read_buffers(|buffers| {
            assert_eq!(buffers.stored.len(), 1000);
            buffers.decompressed.resize(READ_BUFFER_KEEP_BYTES + 1, 0);
            Ok(())
        })
        .unwrap();
        with_read_buffers(|buffers| {
            assert_eq!(buffers.stored.len(), 1000);
            assert!(buffers.decompressed.is_empty());
            Ok(())
        })
        .unwrap();
    }
}
