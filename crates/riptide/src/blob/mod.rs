//! Key-value separation: values at or above a column family's `min_blob_size` are written to
//! append-only blob files (`NNNNNN.blob`) when a memtable is flushed, each compressed on its own
//! with the column family's `blob_compression` when that pays, and the table keeps a small
//! [`BlobReference`] under the entry kind `BlobIndex` instead. Compaction moves the references,
//! not the values, and relocates the live values of blob files whose garbage passed a ratio
//! (see `db/compaction.rs`); a moved value is decompressed and stored again with the current
//! compression. Readers get values decompressed (and cached so).
//!
//! This module holds the file format (`format.rs`), the writer ([`BlobFileBuilder`]) and the
//! shared handle of one live blob file ([`BlobFile`]), which reads values (through the block
//! cache, keyed by file number and record offset) and deletes its file once it is obsolete and
//! the last version holding it is gone, as table files are deleted (`version/tree.rs`).
//!
//! Concurrency contract: a builder is used by one thread. `BlobFile` is `Send + Sync`; reads
//! share one open file handle, opened by the first reader; the garbage counters are atomics
//! written under the database's state mutex (when an edit is installed) and read without it.
//!
//! Invariants (see `docs/invariants.md`): I34, a blob file is synced before the manifest record
//! that names it, and the table entries that reference a blob file are in tables whose manifest
//! record names it, in the same edit or an earlier one; I35, a blob file is deleted only after
//! the manifest no longer lists it (no table of the current version references it) and no
//! version, iterator or snapshot read holds it; I36, a value read through a reference is
//! returned only if its record's checksum verifies, equals the reference's and the record holds
//! the reader's user key, and anything else is `Error::Corruption` naming the blob file and the
//! record's offset.

pub(crate) mod format;
pub(crate) mod relocation;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::cache::BlockCache;
use crate::db::filename::blob_path;
use crate::error::{Error, Result};
use crate::fs::{RandomAccessFile, WritableFile};
use crate::options::Compression;
use crate::sstable::format::BlockCompressor;
use crate::sstable::Block;
use crate::version::tree::FileJanitor;
pub(crate) use format::BlobReference;
use format::{
    encode_footer, encode_header, record_head_and_checksum, BlobFooter, BLOB_FORMAT_VERSION, BLOB_HEADER_SIZE_BYTES,
    MAX_BLOB_FIELD_BYTES,
};

/// The live blob files of one column family's version, by number.
pub(crate) type BlobFiles = Arc<BTreeMap<u64, Arc<BlobFile>>>;

/// The first window a scan reads ahead in a blob file, once it reads records in file order.
const READAHEAD_START_BYTES: usize = 64 << 10;
/// The largest window: each window that served the scan doubles the next one up to this.
const READAHEAD_MAX_BYTES: usize = 256 << 10;

/// What the manifest records about one blob file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobFileMetadata {
    /// The file number (the file is `NNNNNN.blob`).
    pub(crate) number: u64,
    /// Records in the file.
    pub(crate) record_count: u64,
    /// Bytes of all records (the file less its header and footer).
    pub(crate) record_bytes: u64,
    /// Size of the whole file.
    pub(crate) file_size_bytes: u64,
    /// The file's format version (1 or 2; see `docs/format/blob.md`). The manifest records a
    /// version-2 file under its own tag, so that a build that cannot read one refuses the
    /// database at open instead of failing on its first read.
    pub(crate) format_version: u32,
}

/// Writes one blob file front to back: the header, one record per [`BlobFileBuilder::add`],
/// and at [`BlobFileBuilder::finish`] the footer and a sync. Each value is stored compressed
/// with the file's compression when that saves at least an eighth of its bytes (the table
/// format's rule), as is otherwise; its record says which. Records go to the file's own write
/// buffer piece by piece (head, key, stored value, checksum): the builder keeps no copy of them
/// beyond its compressor's scratch buffer.
pub(crate) struct BlobFileBuilder {
    file: Box<dyn WritableFile>,
    number: u64,
    /// Offset in the file of the next record.
    next_offset: u64,
    record_count: u64,
    compressor: BlockCompressor,
}

impl BlobFileBuilder {
    /// Starts blob file `number` of column family `column_family_id` in `file`, appending its
    /// header; values go in compressed with `compression`. The builder's only buffer is its
    /// compressor's scratch (its file's write buffer is the file system's): it grows to the
    /// largest value's compressed form, a value the memtable being flushed (or the compaction's
    /// input) holds and is charged for anyway, and goes with the builder.
    pub(crate) fn new(
        mut file: Box<dyn WritableFile>,
        number: u64,
        column_family_id: u32,
        compression: Compression,
    ) -> Result<Self> {
        file.start_writeback_every(crate::fs::TABLE_WRITEBACK_INTERVAL_BYTES);
        file.append(&encode_header(column_family_id))?;
        Ok(BlobFileBuilder {
            file,
            number,
            next_offset: BLOB_HEADER_SIZE_BYTES as u64,
            record_count: 0,
            compressor: BlockCompressor::new(compression),
        })
    }

    /// Bytes written so far (records included, footer not).
    pub(crate) fn size_bytes(&self) -> u64 {
        self.next_offset
    }

    /// Appends the record of (`user_key`, `value`) and returns the reference to it.
    pub(crate) fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<BlobReference> {
        if user_key.len() as u64 > MAX_BLOB_FIELD_BYTES || value.len() as u64 > MAX_BLOB_FIELD_BYTES {
            return Err(Error::invalid("key or value too large for a blob record"));
        }
        let record_offset = self.next_offset;
        let (value_type, stored) = self.compressor.compress(value);
        let (head, checksum) = record_head_and_checksum(user_key, value_type, stored);
        self.file.append(&head)?;
        self.file.append(user_key)?;
        self.file.append(stored)?;
        self.file.append(&checksum.to_le_bytes())?;
        self.next_offset += (head.len() + user_key.len() + stored.len() + 4) as u64;
        self.record_count += 1;
        Ok(BlobReference {
            file_number: self.number,
            record_offset,
            stored_size_bytes: stored.len() as u32,
            checksum,
            value_type: Some(value_type),
        })
    }

    /// Writes the footer and syncs the file (I34: before any manifest record names it).
    pub(crate) fn finish(mut self) -> Result<BlobFileMetadata> {
        let record_bytes = self.next_offset - BLOB_HEADER_SIZE_BYTES as u64;
        self.file.append(&encode_footer(&BlobFooter { record_count: self.record_count, record_bytes }))?;
        self.file.flush()?;
        self.file.sync()?;
        Ok(BlobFileMetadata {
            number: self.number,
            record_count: self.record_count,
            record_bytes,
            file_size_bytes: self.file.len(),
            format_version: BLOB_FORMAT_VERSION,
        })
    }
}

/// One blob file as the versions of its column family know it. See the module documentation.
pub(crate) struct BlobFile {
    pub(crate) meta: BlobFileMetadata,
    /// Records whose references compactions dropped or moved elsewhere.
    garbage_count: AtomicU64,
    /// Their bytes.
    garbage_bytes: AtomicU64,
    obsolete: AtomicBool,
    file: OnceLock<Arc<dyn RandomAccessFile>>,
    janitor: Arc<FileJanitor>,
}

impl BlobFile {
    pub(crate) fn new(meta: BlobFileMetadata, janitor: Arc<FileJanitor>) -> BlobFile {
        BlobFile {
            meta,
            garbage_count: AtomicU64::new(0),
            garbage_bytes: AtomicU64::new(0),
            obsolete: AtomicBool::new(false),
            file: OnceLock::new(),
            janitor,
        }
    }

    pub(crate) fn number(&self) -> u64 {
        self.meta.number
    }

    pub(crate) fn path(&self) -> PathBuf {
        blob_path(&self.janitor.dir, self.meta.number)
    }

    /// Adds garbage found by a compaction (or replayed from the manifest).
    pub(crate) fn add_garbage(&self, count: u64, bytes: u64) {
        self.garbage_count.fetch_add(count, Ordering::Relaxed);
        self.garbage_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Garbage as (records, bytes).
    pub(crate) fn garbage(&self) -> (u64, u64) {
        (self.garbage_count.load(Ordering::Relaxed), self.garbage_bytes.load(Ordering::Relaxed))
    }

    /// The share of the file's record bytes that no table references any more.
    pub(crate) fn garbage_ratio(&self) -> f64 {
        if self.meta.record_bytes == 0 {
            return 1.0;
        }
        (self.garbage().1 as f64 / self.meta.record_bytes as f64).min(1.0)
    }

    /// Marks the file for deletion once the last version holding it is dropped. Called only
    /// after the manifest edit that stopped listing it is durable (I35).
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The open file, opened on first use. A missing file is corruption: the manifest lists it.
    fn file(&self) -> Result<&Arc<dyn RandomAccessFile>> {
        if let Some(file) = self.file.get() {
            return Ok(file);
        }
        let path = self.path();
        let opened = match self.janitor.file_system.open(&path) {
            Ok(file) => file,
            Err(error) => {
                if !self.janitor.file_system.exists(&path) {
                    return Err(Error::corruption(&path, 0, "blob file is missing"));
                }
                return Err(error);
            }
        };
        if opened.len() != self.meta.file_size_bytes {
            return Err(Error::corruption(
                &path,
                0,
                format!("blob file is {} bytes, the manifest says {}", opened.len(), self.meta.file_size_bytes),
            ));
        }
        // Two readers may open it at once; the loser's handle is dropped.
        let _ = self.file.set(opened);
        self.file.get().ok_or_else(|| Error::invalid("internal error: blob file handle not set"))
    }

    /// Reads the value `reference` names for `user_key`, checked as I36 requires. With a
    /// `cache`, a cached value is returned without reading, and (when `fill_cache`) a read
    /// value is cached.
    pub(crate) fn read_value(
        &self,
        user_key: &[u8],
        reference: &BlobReference,
        cache: Option<&BlockCache>,
        fill_cache: bool,
    ) -> Result<Vec<u8>> {
        self.read_value_ahead(user_key, reference, cache, fill_cache, None)
    }

    fn read_uncached(&self, user_key: &[u8], reference: &BlobReference) -> Result<Vec<u8>> {
        let end = self.record_end(user_key, reference)?;
        let offset = reference.record_offset;
        let mut record = vec![0u8; (end - offset) as usize];
        self.file()?.read_exact_at(offset, &mut record)?;
        self.checked_value(user_key, reference, &record)
    }

    /// The end of the record `reference` names, checked to lie inside the file.
    fn record_end(&self, user_key: &[u8], reference: &BlobReference) -> Result<u64> {
        let offset = reference.record_offset;
        let past = || Error::corruption(self.path(), offset, "blob reference runs past the file");
        let end = offset.checked_add(reference.record_size_bytes(user_key.len())).ok_or_else(past)?;
        // The footer follows the last record, so a record never reaches the file's end.
        if end > self.meta.file_size_bytes {
            return Err(past());
        }
        Ok(end)
    }

    /// The value of `record` (the bytes `reference` names), checked as I36 requires and
    /// decompressed when it was stored compressed.
    fn checked_value(&self, user_key: &[u8], reference: &BlobReference, record: &[u8]) -> Result<Vec<u8>> {
        format::decode_referenced_record(record, user_key, reference)
            .map_err(|reason| Error::corruption(self.path(), reference.record_offset, reason))?
            .value(&self.path(), reference.record_offset)
    }

    /// Like [`BlobFile::read_value`] for a scan: records met in file order are served from a
    /// window read ahead of them (`readahead`, kept per file), so that a scan over separated
    /// values reads each stretch of the file once instead of once per value. A window starts
    /// after three records of the file read in order, at 64 KiB, and doubles up to 256 KiB while
    /// the scan stays in order; a jump goes back to single reads. Values come from the window
    /// only after the same checks as any read (I36).
    pub(crate) fn read_value_ahead(
        &self,
        user_key: &[u8],
        reference: &BlobReference,
        cache: Option<&BlockCache>,
        fill_cache: bool,
        readahead: Option<&mut BlobReadahead>,
    ) -> Result<Vec<u8>> {
        if let Some(block) = cache.and_then(|cache| cache.get(self.meta.number, reference.record_offset)) {
            return Ok(block.raw_bytes().to_vec());
        }
        let value = match readahead {
            Some(readahead) => self.read_through(user_key, reference, readahead)?,
            None => self.read_uncached(user_key, reference)?,
        };
        if let (Some(cache), true) = (cache, fill_cache) {
            cache.insert(self.meta.number, reference.record_offset, Arc::new(Block::raw(value.clone())));
        }
        Ok(value)
    }

    /// Reads the record `reference` names through the scan's window of this file, reading a
    /// new window when the scan reads the file in order.
    fn read_through(
        &self,
        user_key: &[u8],
        reference: &BlobReference,
        readahead: &mut BlobReadahead,
    ) -> Result<Vec<u8>> {
        let end = self.record_end(user_key, reference)?;
        let offset = reference.record_offset;
        let value = match readahead.window(self.meta.number, offset, end) {
            Some(record) => self.checked_value(user_key, reference, record)?,
            None if readahead.in_order(self.meta.number, offset) => {
                // The footer follows the records: a window never needs to reach past it.
                let window_bytes = readahead.next_window_bytes(self.meta.number) as u64;
                let window_end = (offset + window_bytes).max(end).min(self.meta.file_size_bytes);
                let mut window = readahead.take_buffer(self.meta.number);
                window.resize((window_end - offset) as usize, 0);
                self.file()?.read_exact_at(offset, &mut window)?;
                readahead.fill(self.meta.number, offset, window);
                let record = readahead.window(self.meta.number, offset, end).unwrap_or_default();
                self.checked_value(user_key, reference, record)?
            }
            None => self.read_uncached(user_key, reference)?,
        };
        readahead.note_read(self.meta.number, offset, end);
        Ok(value)
    }
}

/// The readahead state of one scan (see [`BlobFile::read_value_ahead`]), per blob file: a scan
/// over keys that several flushes wrote alternates between their blob files, and each of them
/// is read in order on its own. Owned by one iterator.
#[derive(Debug, Default)]
pub(crate) struct BlobReadahead {
    /// The files read most recently, at most [`READAHEAD_FILES`], the least recently used first.
    streams: Vec<FileStream>,
}

/// Blob files whose reads one scan follows at once.
const READAHEAD_FILES: usize = 4;

/// Reads in order needed before a window is read ahead.
const READAHEAD_AFTER_READS: u32 = 3;

/// The readahead state of one blob file within a scan.
#[derive(Debug)]
struct FileStream {
    file_number: u64,
    /// The window: bytes of the file from `window_start`.
    window_start: u64,
    bytes: Vec<u8>,
    /// Where the previous read ended, and how many reads in a row began where the one before
    /// ended.
    last_end: u64,
    in_order_reads: u32,
    /// The size of the next window.
    next_window_bytes: usize,
}

impl BlobReadahead {
    fn stream(&self, file_number: u64) -> Option<&FileStream> {
        self.streams.iter().find(|stream| stream.file_number == file_number)
    }

    /// The state of `file_number`, made the most recently used (a new one when the scan had
    /// none, in place of the least recently used).
    fn stream_mut(&mut self, file_number: u64) -> &mut FileStream {
        let stream = match self.streams.iter().position(|stream| stream.file_number == file_number) {
            Some(position) => self.streams.remove(position),
            None => {
                if self.streams.len() == READAHEAD_FILES {
                    self.streams.remove(0);
                }
                FileStream {
                    file_number,
                    window_start: 0,
                    bytes: Vec::new(),
                    last_end: 0,
                    in_order_reads: 0,
                    next_window_bytes: READAHEAD_START_BYTES,
                }
            }
        };
        self.streams.push(stream);
        let last = self.streams.len() - 1;
        &mut self.streams[last]
    }

    /// The bytes `[start, end)` of file `file_number` if its window holds them.
    fn window(&self, file_number: u64, start: u64, end: u64) -> Option<&[u8]> {
        let stream = self.stream(file_number)?;
        if start < stream.window_start {
            return None;
        }
        let from = (start - stream.window_start) as usize;
        let to = (end - stream.window_start) as usize;
        stream.bytes.get(from..to)
    }

    /// True when a read at `offset` of `file_number` continues that file's reads in order,
    /// after enough of them to read ahead.
    fn in_order(&self, file_number: u64, offset: u64) -> bool {
        self.stream(file_number)
            .is_some_and(|stream| offset == stream.last_end && stream.in_order_reads >= READAHEAD_AFTER_READS)
    }

    /// The size of the next window of `file_number`.
    fn next_window_bytes(&self, file_number: u64) -> usize {
        self.stream(file_number).map_or(READAHEAD_START_BYTES, |stream| stream.next_window_bytes)
    }

    /// Takes the buffer of `file_number`'s window, to be filled again.
    fn take_buffer(&mut self, file_number: u64) -> Vec<u8> {
        std::mem::take(&mut self.stream_mut(file_number).bytes)
    }

    fn fill(&mut self, file_number: u64, start: u64, bytes: Vec<u8>) {
        let stream = self.stream_mut(file_number);
        stream.window_start = start;
        stream.bytes = bytes;
        stream.next_window_bytes = (stream.next_window_bytes * 2).min(READAHEAD_MAX_BYTES);
    }

    /// Records a read of `[offset, end)` of `file_number`.
    fn note_read(&mut self, file_number: u64, offset: u64, end: u64) {
        let stream = self.stream_mut(file_number);
        if offset == stream.last_end {
            stream.in_order_reads = stream.in_order_reads.saturating_add(1);
        } else {
            // A jump within the file: this read starts a new run, with small windows again.
            stream.in_order_reads = 1;
            stream.next_window_bytes = READAHEAD_START_BYTES;
        }
        stream.last_end = end;
    }

    /// Bytes the window of `file_number` holds now.
    #[cfg(test)]
    fn window_bytes(&self, file_number: u64) -> usize {
        self.stream(file_number).map_or(0, |stream| stream.bytes.len())
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            // A failure leaves an orphan that the next open deletes.
            let _ = self.janitor.file_system.remove(&self.path());
        }
    }
}

/// Resolves a `BlobIndex` entry's value: decodes the reference and reads it from the column
/// family's blob files. A reference that does not decode or names a file the version does not
/// hold is corruption of the table that holds it (`table`). A scan passes its `readahead`
/// (see [`BlobFile::read_value_ahead`]).
pub(crate) fn resolve(
    blob_files: &BTreeMap<u64, Arc<BlobFile>>,
    user_key: &[u8],
    encoded_reference: &[u8],
    cache: Option<&BlockCache>,
    fill_cache: bool,
    table: &std::path::Path,
    readahead: Option<&mut BlobReadahead>,
) -> Result<Vec<u8>> {
    let reference = BlobReference::decode(encoded_reference).map_err(|reason| Error::corruption(table, 0, reason))?;
    let file = blob_files.get(&reference.file_number).ok_or_else(|| {
        Error::corruption(
            table,
            0,
            format!("entry references blob file {} that no version lists", reference.file_number),
        )
    })?;
    file.read_value_ahead(user_key, &reference, cache, fill_cache, readahead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::table_cache::TableCache;
    use crate::fs::{FileSystem, MemFileSystem};

    fn janitor(file_system: Arc<dyn FileSystem>) -> Arc<FileJanitor> {
        file_system.create_dir_all(std::path::Path::new("/db")).expect("dir");
        Arc::new(FileJanitor {
            dir: PathBuf::from("/db"),
            file_system: Arc::clone(&file_system),
            table_cache: Arc::new(TableCache::new(PathBuf::from("/db"), file_system, None, 16)),
        })
    }

    fn write_file(
        file_system: &Arc<dyn FileSystem>,
        values: &[(&[u8], Vec<u8>)],
    ) -> (BlobFileMetadata, Vec<BlobReference>) {
        write_file_compressed(file_system, values, Compression::Lz4)
    }

    fn write_file_compressed(
        file_system: &Arc<dyn FileSystem>,
        values: &[(&[u8], Vec<u8>)],
        compression: Compression,
    ) -> (BlobFileMetadata, Vec<BlobReference>) {
        let path = blob_path(std::path::Path::new("/db"), 5);
        let mut builder =
            BlobFileBuilder::new(file_system.create(&path).expect("create"), 5, 0, compression).expect("header");
        let references = values.iter().map(|(key, value)| builder.add(key, value).expect("add")).collect();
        (builder.finish().expect("finish"), references)
    }

    #[test]
    fn the_builder_writes_the_file_the_format_describes() {
        // The builder appends each record's pieces to the file and checksums them piece by
        // piece; the bytes must equal those of the contiguous encoding the readers check.
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        file_system.create_dir_all(std::path::Path::new("/db")).expect("dir");
        let large_value = vec![7u8; 300_000];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let random_value: Vec<u8> = (0..5000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let records: Vec<(&[u8], &[u8])> = vec![
            (b"a", b"first value"),
            (b"", b"v"),
            (b"bb", b""),
            (b"large", &large_value),
            (b"random", &random_value),
        ];
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            for count in [0, records.len()] {
                let path = blob_path(std::path::Path::new("/db"), 9);
                let mut builder = BlobFileBuilder::new(file_system.create(&path).expect("create"), 9, 3, compression)
                    .expect("header");
                let references: Vec<BlobReference> =
                    records[..count].iter().map(|(key, value)| builder.add(key, value).expect("add")).collect();
                let meta = builder.finish().expect("finish");
                let written = file_system.read_all(&path).expect("read");
                let mut expected = format::encode_header(3).to_vec();
                let mut checksums = Vec::new();
                let mut compressor = BlockCompressor::new(compression);
                for (key, value) in &records[..count] {
                    let (value_type, stored) = compressor.compress(value);
                    checksums.push(format::encode_record(&mut expected, key, value_type, stored));
                }
                let record_bytes = (expected.len() - BLOB_HEADER_SIZE_BYTES) as u64;
                expected.extend_from_slice(&encode_footer(&BlobFooter { record_count: count as u64, record_bytes }));
                assert!(
                    written == expected,
                    "{compression:?}, {count} records: the file differs from the format's encoding"
                );
                assert_eq!(meta.file_size_bytes, expected.len() as u64);
                assert_eq!(references.iter().map(|reference| reference.checksum).collect::<Vec<_>>(), checksums);
                if count > 0 {
                    // The repetitive value shrinks unless compression is off; the random one is
                    // stored as is (compressing it would not save an eighth).
                    let large = &references[3];
                    assert_eq!(large.stored_size_bytes < 300_000, compression != Compression::None, "{compression:?}");
                    assert_eq!(references[4].value_type, Some(crate::sstable::format::BLOCK_TYPE_NONE));
                    let contents = format::decode_file(&written).map_err(|(_, reason)| reason).expect("valid file");
                    let values: Vec<&[u8]> = contents.records.iter().map(|record| record.value.as_slice()).collect();
                    let originals: Vec<&[u8]> = records.iter().map(|(_, value)| *value).collect();
                    assert!(values == originals, "{compression:?}: values decode to what was added");
                }
            }
        }
    }

    #[test]
    fn a_huge_value_that_compresses_to_almost_nothing_reads_back() {
        // The reader refuses a stored form whose recorded length is implausible for its size
        // (so that damage cannot make it allocate gigabytes); the most compressible value of
        // the default largest size must still read back with every compression.
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let zeros = vec![0u8; 64 << 20];
        for compression in [Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let (meta, references) = write_file_compressed(&file_system, &[(b"zeros", zeros.clone())], compression);
            assert!((references[0].stored_size_bytes as usize) < zeros.len() / 8, "{compression:?} compressed it");
            let file = BlobFile::new(meta, Arc::clone(&janitor));
            let read = file.read_value(b"zeros", &references[0], None, false).expect("a valid value reads back");
            assert!(read == zeros, "{compression:?}");
        }
    }

    #[test]
    fn a_version_1_file_is_still_read_through_its_references() {
        // Files written before values could be compressed have no type byte in their records,
        // and their references none after the checksum.
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let path = blob_path(std::path::Path::new("/db"), 5);
        let mut data = format::encode_header_of_version(0, format::BLOB_FORMAT_VERSION_1).to_vec();
        let mut references = Vec::new();
        for (key, value) in [(&b"a"[..], vec![1u8; 5000]), (b"b", b"two".to_vec())] {
            let record_offset = data.len() as u64;
            let checksum = format::encode_record_v1(&mut data, key, &value);
            references.push(BlobReference {
                file_number: 5,
                record_offset,
                stored_size_bytes: value.len() as u32,
                checksum,
                value_type: None,
            });
        }
        let record_bytes = (data.len() - BLOB_HEADER_SIZE_BYTES) as u64;
        data.extend_from_slice(&encode_footer(&BlobFooter { record_count: 2, record_bytes }));
        let mut writer = file_system.create(&path).expect("create");
        writer.append(&data).expect("append");
        writer.sync().expect("sync");
        drop(writer);
        let meta = BlobFileMetadata {
            number: 5,
            record_count: 2,
            record_bytes,
            file_size_bytes: data.len() as u64,
            format_version: format::BLOB_FORMAT_VERSION_1,
        };
        let file = BlobFile::new(meta, janitor);
        assert_eq!(file.read_value(b"a", &references[0], None, false).expect("read"), vec![1u8; 5000]);
        assert_eq!(file.read_value(b"b", &references[1], None, false).expect("read"), b"two");
        // Read as a version-2 record (a reference that gained a type byte), it is damage.
        let as_version_2 = BlobReference { value_type: Some(0), ..references[1] };
        assert!(matches!(file.read_value(b"b", &as_version_2, None, false), Err(Error::Corruption { .. })));
    }

    #[test]
    fn a_scan_in_file_order_reads_ahead_and_still_checks_every_value() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let keys: Vec<Vec<u8>> = (0..400u32).map(|n| format!("key{n:04}").into_bytes()).collect();
        let values: Vec<(&[u8], Vec<u8>)> =
            keys.iter().enumerate().map(|(n, key)| (key.as_slice(), vec![n as u8; 1000 + n % 7])).collect();
        // Stored as they are, so that the file is large enough for windows to grow.
        let (meta, references) = write_file_compressed(&file_system, &values, Compression::None);
        let path = blob_path(std::path::Path::new("/db"), 5);
        let file = BlobFile::new(meta, Arc::clone(&janitor));
        let mut readahead = BlobReadahead::default();
        for (n, ((key, value), reference)) in values.iter().zip(&references).enumerate() {
            let read = file.read_value_ahead(key, reference, None, false, Some(&mut readahead)).expect("read");
            assert_eq!(&read, value, "record {n}");
            if n >= 4 {
                assert!(readahead.window_bytes(5) >= 1000, "a window after record {n}");
            }
        }
        assert!(readahead.window_bytes(5) > READAHEAD_START_BYTES, "windows grew: {}", readahead.window_bytes(5));
        // A jump back reads the record alone, and the windows start small again.
        let read = file.read_value_ahead(values[5].0, &references[5], None, false, Some(&mut readahead)).expect("read");
        assert_eq!(read, values[5].1);
        assert_eq!(readahead.next_window_bytes(5), READAHEAD_START_BYTES);
        // Damage inside a window is found like damage read alone (I36).
        let damaged_at = references[200].record_offset + 20;
        drop(file);
        let mut bytes = file_system.read_all(&path).expect("read");
        bytes[damaged_at as usize] ^= 0xff;
        let mut writer = file_system.create(&path).expect("create");
        writer.append(&bytes).expect("append");
        writer.sync().expect("sync");
        drop(writer);
        let file = BlobFile::new(meta, janitor);
        let mut readahead = BlobReadahead::default();
        let mut failed_at = None;
        for (n, ((key, _), reference)) in values.iter().zip(&references).enumerate() {
            if let Err(error) = file.read_value_ahead(key, reference, None, false, Some(&mut readahead)) {
                assert!(error.is_corruption());
                failed_at = Some(n);
                break;
            }
        }
        assert_eq!(failed_at, Some(200));
    }

    #[test]
    fn values_are_read_back_through_their_references_and_the_cache() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let values: Vec<(&[u8], Vec<u8>)> =
            vec![(b"a", vec![1; 5000]), (b"b", Vec::new()), (b"c", (0..300_000u32).map(|n| n as u8).collect())];
        let (meta, references) = write_file(&file_system, &values);
        assert_eq!(meta.record_count, 3);
        let whole = file_system.read_all(&blob_path(std::path::Path::new("/db"), 5)).expect("read");
        assert_eq!(whole.len() as u64, meta.file_size_bytes);
        let contents = format::decode_file(&whole).map_err(|(_, reason)| reason).expect("valid file");
        assert_eq!(contents.records.len(), 3);
        let file = BlobFile::new(meta, janitor);
        let cache = BlockCache::new(1 << 20);
        for ((key, value), reference) in values.iter().zip(&references) {
            assert_eq!(&file.read_value(key, reference, Some(&cache), true).expect("read"), value);
            assert_eq!(&file.read_value(key, reference, Some(&cache), true).expect("cached"), value);
        }
        assert!(cache.hit_count() >= 2);
    }

    #[test]
    fn damage_is_corruption_with_the_file_and_record_offset() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let (meta, references) = write_file(&file_system, &[(b"a", vec![7; 100]), (b"b", vec![8; 100])]);
        let path = blob_path(std::path::Path::new("/db"), 5);
        let mut bytes = file_system.read_all(&path).expect("read");
        let second = references[1].record_offset as usize;
        bytes[second + 20] ^= 1;
        let mut rewritten = file_system.create(&path).expect("create");
        rewritten.append(&bytes).expect("append");
        rewritten.sync().expect("sync");
        drop(rewritten);
        let file = BlobFile::new(meta, Arc::clone(&janitor));
        assert_eq!(file.read_value(b"a", &references[0], None, false).expect("intact"), vec![7; 100]);
        match file.read_value(b"b", &references[1], None, false) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (path.clone(), references[1].record_offset));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        // A reference with the wrong key, or another record's checksum, is refused too.
        assert!(matches!(file.read_value(b"x", &references[0], None, false), Err(Error::Corruption { .. })));
        let wrong_checksum = BlobReference { checksum: references[1].checksum, ..references[0] };
        assert!(matches!(file.read_value(b"a", &wrong_checksum, None, false), Err(Error::Corruption { .. })));
        let past_end = BlobReference { record_offset: meta.file_size_bytes - 10, ..references[0] };
        assert!(matches!(file.read_value(b"a", &past_end, None, false), Err(Error::Corruption { .. })));
        // A missing file is corruption as well, never an empty value.
        file_system.remove(&path).expect("remove");
        let missing = BlobFile::new(meta, janitor);
        match missing.read_value(b"a", &references[0], None, false) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn an_obsolete_file_is_deleted_with_its_last_handle_and_a_live_one_is_not() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let janitor = janitor(Arc::clone(&file_system));
        let (meta, _) = write_file(&file_system, &[(b"a", vec![1; 10])]);
        let path = blob_path(std::path::Path::new("/db"), 5);
        drop(BlobFile::new(meta, Arc::clone(&janitor)));
        assert!(file_system.exists(&path), "a live file survives its handle (close, not obsolescence)");
        let file = Arc::new(BlobFile::new(meta, janitor));
        let held = Arc::clone(&file);
        file.mark_obsolete();
        drop(file);
        assert!(file_system.exists(&path), "a reader still holds it");
        drop(held);
        assert!(!file_system.exists(&path));
    }
}
