//! The fixed parts of the SSTable file format: block handles, the per-block trailer (compression
//! type and checksum), block compression, and the footer.
//!
//! Concurrency contract: everything here is a pure function or a plain value; the scratch
//! compressor [`BlockCompressor`] belongs to one builder. Invariants: every stored block is
//! followed by a [`BLOCK_TRAILER_SIZE_BYTES`]-byte trailer whose checksum covers the stored bytes
//! and the type byte; a decoded block is returned only after its checksum matched and, when
//! compressed, after it decompressed to exactly the length recorded in front of the payload. The
//! byte-level description lives in `docs/format/sstable.md`.

use std::cell::RefCell;
use std::path::Path;

use crate::coding::{get_varint64, mask_crc, put_varint64, read_u32, read_u64, varint_length};
use crate::error::{Error, Result};
use crate::options::Compression;

/// The format version written into every footer and properties block.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// The last eight bytes of every table file.
pub(crate) const MAGIC: [u8; 8] = *b"RiptSST\x1a";

/// Size of the footer at the end of the file.
pub(crate) const FOOTER_SIZE_BYTES: usize = 64;

/// Size of the trailer after every stored block: one type byte and a four-byte masked CRC32C.
pub(crate) const BLOCK_TRAILER_SIZE_BYTES: usize = 5;

/// Largest uncompressed block a reader accepts. A block holds whole entries, so a single huge
/// value makes a huge block; this bound only stops a damaged length prefix from asking for an
/// absurd allocation.
pub(crate) const MAX_UNCOMPRESSED_BLOCK_BYTES: usize = 1 << 31;

/// The most bytes one compressed payload byte can expand to, per codec, with a small allowance
/// for headers. A damaged (or, with checksums off, forged) length prefix is checked against
/// `payload_length * ratio` before anything is allocated, so a 40-byte block cannot make the
/// reader allocate gigabytes. LZ4's block format encodes at most 255 output bytes per extension
/// byte; Snappy's densest copy (2 bytes for 64 output bytes) is below 32; Zstandard's RLE block
/// turns a 4-byte block into up to 128 KiB.
const MAX_EXPANSION_LZ4: usize = 256;
const MAX_EXPANSION_SNAPPY: usize = 32;
const MAX_EXPANSION_ZSTD: usize = 32 * 1024;
const EXPANSION_ALLOWANCE_BYTES: usize = 64;

/// Whether `raw_length` is a length `payload_length` compressed bytes could decode to.
fn plausible_uncompressed_length(raw_length: usize, payload_length: usize, max_expansion: usize) -> bool {
    raw_length <= MAX_UNCOMPRESSED_BLOCK_BYTES
        && raw_length <= payload_length.saturating_mul(max_expansion).saturating_add(EXPANSION_ALLOWANCE_BYTES)
}

/// Type byte of a block stored as is.
pub(crate) const BLOCK_TYPE_NONE: u8 = 0;
/// Type byte of an LZ4 (block format) compressed block.
pub(crate) const BLOCK_TYPE_LZ4: u8 = 1;
/// Type byte of a Zstandard compressed block.
pub(crate) const BLOCK_TYPE_ZSTD: u8 = 2;
/// Type byte of a Snappy (raw format) compressed block.
pub(crate) const BLOCK_TYPE_SNAPPY: u8 = 3;

/// The Zstandard level used for data blocks, matching the documentation of
/// [`Compression::Zstd`].
const ZSTD_LEVEL: i32 = 3;

/// The on-disk code of a compression algorithm.
pub(crate) fn compression_code(compression: Compression) -> u8 {
    match compression {
        Compression::None => BLOCK_TYPE_NONE,
        Compression::Lz4 => BLOCK_TYPE_LZ4,
        Compression::Zstd => BLOCK_TYPE_ZSTD,
        Compression::Snappy => BLOCK_TYPE_SNAPPY,
    }
}

/// The compression algorithm of an on-disk code, or `None` for an unknown code.
pub(crate) fn compression_from_code(code: u8) -> Option<Compression> {
    match code {
        BLOCK_TYPE_NONE => Some(Compression::None),
        BLOCK_TYPE_LZ4 => Some(Compression::Lz4),
        BLOCK_TYPE_ZSTD => Some(Compression::Zstd),
        BLOCK_TYPE_SNAPPY => Some(Compression::Snappy),
        _ => None,
    }
}

/// Where a stored block lives: its offset in the file and its stored size, not counting the
/// trailer that follows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BlockHandle {
    pub(crate) offset: u64,
    pub(crate) size_bytes: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (offset, size), the form used in index entries.
    pub(crate) fn encode_varint(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.size_bytes);
    }

    /// Decodes a handle written by [`BlockHandle::encode_varint`]; the input must hold nothing
    /// else. `None` when it is malformed.
    pub(crate) fn decode_varint(input: &[u8]) -> Option<BlockHandle> {
        let (offset, offset_length) = get_varint64(input)?;
        let rest = input.get(offset_length..)?;
        let (size_bytes, size_length) = get_varint64(rest)?;
        (size_length == rest.len()).then_some(BlockHandle { offset, size_bytes })
    }

    /// The offset just past this block's trailer, or `None` on overflow (a damaged handle).
    pub(crate) fn end_with_trailer(&self) -> Option<u64> {
        self.offset.checked_add(self.size_bytes)?.checked_add(BLOCK_TRAILER_SIZE_BYTES as u64)
    }
}

/// The checksum stored in a block trailer: the masked CRC32C of the stored bytes followed by the
/// type byte.
pub(crate) fn block_checksum(stored: &[u8], block_type: u8) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(stored), &[block_type]))
}

/// Builds the five-byte trailer of a stored block.
pub(crate) fn block_trailer(stored: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_SIZE_BYTES] {
    let checksum = block_checksum(stored, block_type).to_le_bytes();
    [block_type, checksum[0], checksum[1], checksum[2], checksum[3]]
}

/// Compresses blocks for one table builder, keeping its scratch buffers and codec contexts
/// between blocks so that a flush allocates nothing in the steady state.
pub(crate) struct BlockCompressor {
    compression: Compression,
    scratch: Vec<u8>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    snappy: Option<snap::raw::Encoder>,
}

impl BlockCompressor {
    /// A compressor for `compression`.
    pub(crate) fn new(compression: Compression) -> BlockCompressor {
        BlockCompressor { compression, scratch: Vec::new(), zstd: None, snappy: None }
    }

    /// Chooses the stored form of `raw`: compressed with the configured algorithm when that
    /// saves at least an eighth of the bytes, otherwise `raw` itself. Returns the type byte and
    /// the stored bytes. A codec failure falls back to storing the block as is, which is always
    /// correct.
    pub(crate) fn compress<'a>(&'a mut self, raw: &'a [u8]) -> (u8, &'a [u8]) {
        let code = compression_code(self.compression);
        if code == BLOCK_TYPE_NONE || raw.is_empty() {
            return (BLOCK_TYPE_NONE, raw);
        }
        let compressed_length = match self.compress_into_scratch(raw) {
            Some(length) => length,
            None => return (BLOCK_TYPE_NONE, raw),
        };
        // Compression must save at least 1/8 of the block, otherwise the decompression cost on
        // every read is not worth the space.
        if compressed_length >= raw.len() - raw.len() / 8 {
            return (BLOCK_TYPE_NONE, raw);
        }
        (code, &self.scratch[..compressed_length])
    }

    /// Writes the compressed form into `scratch` and returns its length.
    fn compress_into_scratch(&mut self, raw: &[u8]) -> Option<usize> {
        self.scratch.clear();
        match self.compression {
            Compression::None => None,
            Compression::Lz4 => {
                // LZ4 and Zstandard payloads are preceded by the uncompressed length so the
                // reader can allocate the output exactly once.
                put_varint64(&mut self.scratch, raw.len() as u64);
                let header_length = self.scratch.len();
                let bound = lz4_flex::block::get_maximum_output_size(raw.len());
                self.scratch.resize(header_length + bound, 0);
                let written = lz4_flex::block::compress_into(raw, &mut self.scratch[header_length..]).ok()?;
                Some(header_length + written)
            }
            Compression::Zstd => {
                put_varint64(&mut self.scratch, raw.len() as u64);
                let header_length = self.scratch.len();
                let bound = zstd::zstd_safe::compress_bound(raw.len());
                self.scratch.resize(header_length + bound, 0);
                if self.zstd.is_none() {
                    self.zstd = Some(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?);
                }
                let compressor = self.zstd.as_mut()?;
                let written = compressor.compress_to_buffer(raw, &mut self.scratch[header_length..]).ok()?;
                Some(header_length + written)
            }
            Compression::Snappy => {
                // The Snappy raw format carries its own length header.
                self.scratch.resize(snap::raw::max_compress_len(raw.len()), 0);
                let encoder = self.snappy.get_or_insert_with(snap::raw::Encoder::new);
                encoder.compress(raw, &mut self.scratch).ok()
            }
        }
    }
}

thread_local! {
    /// One Zstandard decompression context per thread: creating a context costs far more than
    /// decompressing a 4 KiB block.
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Checks the trailer of a block read from disk and returns its uncompressed contents.
///
/// `stored_with_trailer` holds exactly the stored bytes followed by the five-byte trailer;
/// `block_offset` is the block's offset in `path`, used in error reports. The buffer is reused
/// as the result when the block is not compressed. With `verify_checksum` false the checksum is
/// not computed; decoding stays fully checked, so damage can then yield wrong bytes but never a
/// panic.
pub(crate) fn decode_stored_block(
    path: &Path,
    block_offset: u64,
    mut stored_with_trailer: Vec<u8>,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    let mut output = Vec::new();
    match decode_stored_block_into(path, block_offset, &stored_with_trailer, verify_checksum, &mut output)? {
        DecodedBlock::Stored(length) => {
            stored_with_trailer.truncate(length);
            Ok(stored_with_trailer)
        }
        DecodedBlock::Decompressed(length) => {
            output.truncate(length);
            Ok(output)
        }
    }
}

/// The size of the block `stored_with_trailer` once decoded, as its header says (for a
/// compressed block, unchecked: [`decode_stored_block_into`] checks it), or its stored size.
pub(crate) fn uncompressed_length_hint(stored_with_trailer: &[u8]) -> usize {
    let stored_length = stored_with_trailer.len().saturating_sub(BLOCK_TRAILER_SIZE_BYTES);
    let stored = &stored_with_trailer[..stored_length];
    match stored_with_trailer.get(stored_length).copied() {
        Some(BLOCK_TYPE_LZ4 | BLOCK_TYPE_ZSTD) => {
            get_varint64(stored).and_then(|(length, _)| usize::try_from(length).ok()).unwrap_or(stored_length)
        }
        Some(BLOCK_TYPE_SNAPPY) => snap::raw::decompress_len(stored).unwrap_or(stored_length),
        _ => stored_length,
    }
}

/// Where [`decode_stored_block_into`] left a block's uncompressed contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodedBlock {
    /// The block was stored uncompressed: its contents are the first `n` bytes of the input.
    Stored(usize),
    /// The block was compressed: its contents are the first `n` bytes of the output buffer.
    Decompressed(usize),
}

/// [`decode_stored_block`] without allocating: a compressed block is decompressed into
/// `output`, which grows when it is too short and is never shrunk (the read path keeps one per
/// thread, so a block read costs no allocation and no cleared buffer). An empty `output` is
/// allocated to the block's size by the LZ4 decompressor, which fills it without clearing it.
pub(crate) fn decode_stored_block_into(
    path: &Path,
    block_offset: u64,
    stored_with_trailer: &[u8],
    verify_checksum: bool,
    output: &mut Vec<u8>,
) -> Result<DecodedBlock> {
    let corruption = |reason: String| Error::corruption(path, block_offset, reason);
    let stored_length = stored_with_trailer
        .len()
        .checked_sub(BLOCK_TRAILER_SIZE_BYTES)
        .ok_or_else(|| corruption("block shorter than its trailer".to_string()))?;
    let block_type = stored_with_trailer.get(stored_length).copied().unwrap_or(u8::MAX);
    let expected = read_u32(stored_with_trailer, stored_length + 1)
        .ok_or_else(|| corruption("block trailer truncated".to_string()))?;
    let stored = stored_with_trailer.get(..stored_length).unwrap_or_default();
    let actual = if verify_checksum { block_checksum(stored, block_type) } else { expected };
    if actual != expected {
        return Err(corruption(format!("block checksum mismatch: stored {expected:#010x}, computed {actual:#010x}")));
    }
    decode_payload_into(path, block_offset, block_type, stored, output)
}

/// The uncompressed contents of `stored`, the stored form of type `block_type` that
/// [`BlockCompressor::compress`] returned, whose checksum the caller has checked: a compressed
/// payload is decompressed into `output` as [`decode_stored_block_into`] describes, an
/// uncompressed one is left where it is. Damage (a bad length, a payload that does not
/// decompress to it, an unknown type) is `Error::Corruption` at `block_offset` of `path`, never
/// a panic. Blob records store values in the same forms (`blob/format.rs`).
pub(crate) fn decode_payload_into(
    path: &Path,
    block_offset: u64,
    block_type: u8,
    stored: &[u8],
    output: &mut Vec<u8>,
) -> Result<DecodedBlock> {
    let corruption = |reason: String| Error::corruption(path, block_offset, reason);
    let stored_length = stored.len();
    let output_of_length = |output: &mut Vec<u8>, length: usize| {
        if output.len() < length {
            output.resize(length, 0);
        }
    };
    match block_type {
        BLOCK_TYPE_NONE => Ok(DecodedBlock::Stored(stored_length)),
        BLOCK_TYPE_LZ4 | BLOCK_TYPE_ZSTD => {
            let (raw_length, header_length) =
                get_varint64(stored).ok_or_else(|| corruption("bad uncompressed length".to_string()))?;
            let payload = stored.get(header_length..).unwrap_or_default();
            let max_expansion = if block_type == BLOCK_TYPE_LZ4 { MAX_EXPANSION_LZ4 } else { MAX_EXPANSION_ZSTD };
            let raw_length = usize::try_from(raw_length)
                .ok()
                .filter(|&length| plausible_uncompressed_length(length, payload.len(), max_expansion))
                .ok_or_else(|| {
                    corruption(format!(
                        "uncompressed length {raw_length} is impossible for {} stored bytes",
                        payload.len()
                    ))
                })?;
            debug_assert_eq!(header_length, varint_length(raw_length as u64));
            let lz4_failed =
                |error: lz4_flex::block::DecompressError| corruption(format!("LZ4 decompression failed: {error}"));
            let written = if block_type == BLOCK_TYPE_LZ4 && output.is_empty() {
                // An empty output (a point read's block, which keeps the buffer) is allocated
                // and filled by the decompressor without being cleared first: clearing 4 KiB
                // was 3 % of the CPU of random gets that missed the cache half the time.
                *output = lz4_flex::block::decompress(payload, raw_length).map_err(lz4_failed)?;
                output.len()
            } else {
                output_of_length(output, raw_length);
                let target = &mut output[..raw_length];
                if block_type == BLOCK_TYPE_LZ4 {
                    lz4_flex::block::decompress_into(payload, target).map_err(lz4_failed)?
                } else {
                    zstd_decompress(payload, target)
                        .map_err(|error| corruption(format!("Zstandard decompression failed: {error}")))?
                }
            };
            if written != raw_length {
                return Err(corruption(format!("block decompressed to {written} bytes, expected {raw_length}")));
            }
            Ok(DecodedBlock::Decompressed(raw_length))
        }
        BLOCK_TYPE_SNAPPY => {
            let raw_length = snap::raw::decompress_len(stored)
                .map_err(|error| corruption(format!("Snappy header damaged: {error}")))?;
            if !plausible_uncompressed_length(raw_length, stored.len(), MAX_EXPANSION_SNAPPY) {
                return Err(corruption(format!(
                    "uncompressed length {raw_length} is impossible for {} stored bytes",
                    stored.len()
                )));
            }
            output_of_length(output, raw_length);
            let written = snap::raw::Decoder::new()
                .decompress(stored, &mut output[..raw_length])
                .map_err(|error| corruption(format!("Snappy decompression failed: {error}")))?;
            if written != raw_length {
                return Err(corruption(format!("block decompressed to {written} bytes, expected {raw_length}")));
            }
            Ok(DecodedBlock::Decompressed(raw_length))
        }
        other => Err(corruption(format!("unknown block type {other}"))),
    }
}

/// Decompresses a Zstandard payload into `output` with this thread's context.
fn zstd_decompress(payload: &[u8], output: &mut [u8]) -> std::io::Result<usize> {
    ZSTD_DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot.as_mut() {
            Some(decompressor) => decompressor.decompress_to_buffer(payload, output),
            None => Err(std::io::Error::other("no Zstandard context")),
        }
    })
}

/// The footer: the last [`FOOTER_SIZE_BYTES`] bytes of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) index: BlockHandle,
    /// `None` when the table was written without a filter.
    pub(crate) filter: Option<BlockHandle>,
    pub(crate) properties: BlockHandle,
    pub(crate) format_version: u32,
}

impl Footer {
    /// Encodes the footer: three fixed64 handle pairs, the version, a checksum, the magic.
    pub(crate) fn encode(&self) -> [u8; FOOTER_SIZE_BYTES] {
        let mut out = [0u8; FOOTER_SIZE_BYTES];
        let filter = self.filter.unwrap_or_default();
        let fields = [
            self.index.offset,
            self.index.size_bytes,
            filter.offset,
            filter.size_bytes,
            self.properties.offset,
            self.properties.size_bytes,
        ];
        for (slot, value) in out.chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
        out[48..52].copy_from_slice(&self.format_version.to_le_bytes());
        let checksum = mask_crc(crc32c::crc32c(&out[..52]));
        out[52..56].copy_from_slice(&checksum.to_le_bytes());
        out[56..64].copy_from_slice(&MAGIC);
        out
    }

    /// Decodes and checks a footer read from `footer_offset` of `path`.
    pub(crate) fn decode(path: &Path, footer_offset: u64, input: &[u8]) -> Result<Footer> {
        let corruption = |reason: String| Error::corruption(path, footer_offset, reason);
        if input.len() != FOOTER_SIZE_BYTES {
            return Err(corruption(format!("footer is {} bytes, expected {FOOTER_SIZE_BYTES}", input.len())));
        }
        if input.get(56..64) != Some(&MAGIC[..]) {
            return Err(corruption("bad magic number: not a Riptide table".to_string()));
        }
        let stored_checksum = read_u32(input, 52).ok_or_else(|| corruption("footer truncated".to_string()))?;
        let computed = mask_crc(crc32c::crc32c(input.get(..52).unwrap_or_default()));
        if stored_checksum != computed {
            return Err(corruption(format!(
                "footer checksum mismatch: stored {stored_checksum:#010x}, computed {computed:#010x}"
            )));
        }
        let field = |index: usize| read_u64(input, index * 8).ok_or_else(|| corruption("footer truncated".to_string()));
        let index = BlockHandle { offset: field(0)?, size_bytes: field(1)? };
        let filter = BlockHandle { offset: field(2)?, size_bytes: field(3)? };
        let properties = BlockHandle { offset: field(4)?, size_bytes: field(5)? };
        let format_version = read_u32(input, 48).ok_or_else(|| corruption("footer truncated".to_string()))?;
        if format_version != FORMAT_VERSION {
            return Err(corruption(format!("unsupported format version {format_version}")));
        }
        let filter = if filter == BlockHandle::default() { None } else { Some(filter) };
        Ok(Footer { index, filter, properties, format_version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn round_trip(compression: Compression, raw: &[u8]) -> (u8, Vec<u8>) {
        let mut compressor = BlockCompressor::new(compression);
        let (block_type, stored) = compressor.compress(raw);
        let mut file_bytes = stored.to_vec();
        file_bytes.extend_from_slice(&block_trailer(stored, block_type));
        let decoded = decode_stored_block(&PathBuf::from("t.sst"), 0, file_bytes, true).unwrap();
        (block_type, decoded)
    }

    #[test]
    fn every_compression_round_trips_and_compresses_repetitive_data() {
        let raw: Vec<u8> = (0..4096u32).map(|i| (i % 7) as u8).collect();
        for (compression, code) in [
            (Compression::None, BLOCK_TYPE_NONE),
            (Compression::Lz4, BLOCK_TYPE_LZ4),
            (Compression::Zstd, BLOCK_TYPE_ZSTD),
            (Compression::Snappy, BLOCK_TYPE_SNAPPY),
        ] {
            let (block_type, decoded) = round_trip(compression, &raw);
            assert_eq!(block_type, code, "{compression:?}");
            assert_eq!(decoded, raw);
        }
    }

    #[test]
    fn incompressible_blocks_are_stored_raw() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for compression in [Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let (block_type, decoded) = round_trip(compression, &raw);
            assert_eq!(block_type, BLOCK_TYPE_NONE);
            assert_eq!(decoded, raw);
        }
    }

    #[test]
    fn damaged_blocks_are_corruption() {
        let raw: Vec<u8> = (0..2048u32).map(|i| (i % 5) as u8).collect();
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let mut compressor = BlockCompressor::new(compression);
            let (block_type, stored) = compressor.compress(&raw);
            let mut file_bytes = stored.to_vec();
            file_bytes.extend_from_slice(&block_trailer(stored, block_type));
            for position in 0..file_bytes.len() {
                let mut damaged = file_bytes.clone();
                damaged[position] ^= 0x40;
                let error = decode_stored_block(&PathBuf::from("t.sst"), 7, damaged, true).unwrap_err();
                assert!(error.is_corruption());
            }
            assert!(decode_stored_block(&PathBuf::from("t.sst"), 7, vec![1, 2], true).unwrap_err().is_corruption());
        }
    }

    /// Story: a review of the stored-block decoder (last session's reliability note) found that
    /// a block whose checksum is not checked (or collides) could claim an uncompressed length of
    /// up to 2 GiB in a few header bytes, and the reader allocated that much before the
    /// decompressor noticed the payload was too short. The claimed length is now checked
    /// against what the payload could possibly expand to.
    #[test]
    fn claimed_lengths_beyond_the_codecs_expansion_are_rejected_before_allocating() {
        let path = PathBuf::from("t.sst");
        for block_type in [BLOCK_TYPE_LZ4, BLOCK_TYPE_ZSTD] {
            let mut stored = Vec::new();
            put_varint64(&mut stored, 1 << 30);
            stored.extend_from_slice(&[0u8; 8]);
            let mut file_bytes = stored.clone();
            file_bytes.extend_from_slice(&block_trailer(&stored, block_type));
            for verify in [true, false] {
                let error = decode_stored_block(&path, 0, file_bytes.clone(), verify).unwrap_err();
                assert!(error.to_string().contains("impossible"), "{block_type}: {error}");
            }
        }
        let mut stored = Vec::new();
        put_varint64(&mut stored, 1 << 30);
        stored.extend_from_slice(&[0u8; 8]);
        let mut file_bytes = stored.clone();
        file_bytes.extend_from_slice(&block_trailer(&stored, BLOCK_TYPE_SNAPPY));
        let error = decode_stored_block(&path, 0, file_bytes, false).unwrap_err();
        assert!(error.to_string().contains("impossible"), "{error}");
    }

    /// The expansion bounds must never reject what the codecs really produce: a run of one byte
    /// is each codec's best case.
    #[test]
    fn the_most_compressible_blocks_still_decode() {
        let raw = vec![0u8; 4 << 20];
        for compression in [Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let (block_type, decoded) = round_trip(compression, &raw);
            assert_ne!(block_type, BLOCK_TYPE_NONE, "{compression:?}");
            assert!(decoded == raw, "{compression:?}");
        }
    }

    #[test]
    fn footer_round_trip_and_damage() {
        let footer = Footer {
            index: BlockHandle { offset: 100, size_bytes: 20 },
            filter: None,
            properties: BlockHandle { offset: 80, size_bytes: 15 },
            format_version: FORMAT_VERSION,
        };
        let encoded = footer.encode();
        let path = PathBuf::from("t.sst");
        assert_eq!(Footer::decode(&path, 0, &encoded).unwrap(), footer);
        for position in 0..FOOTER_SIZE_BYTES {
            let mut damaged = encoded;
            damaged[position] ^= 1;
            assert!(Footer::decode(&path, 0, &damaged).unwrap_err().is_corruption());
        }
    }

    #[test]
    fn handle_varint_round_trip() {
        let handle = BlockHandle { offset: 1 << 40, size_bytes: 4100 };
        let mut out = Vec::new();
        handle.encode_varint(&mut out);
        assert_eq!(BlockHandle::decode_varint(&out), Some(handle));
        assert_eq!(BlockHandle::decode_varint(&out[..out.len() - 1]), None);
        out.push(0);
        assert_eq!(BlockHandle::decode_varint(&out), None);
    }
}
