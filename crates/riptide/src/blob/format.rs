//! The byte layout of blob files (`NNNNNN.blob`, see `docs/format/blob.md`, format version 2;
//! version 1 is still read) and of the blob references that tables store in place of large
//! values.
//!
//! A blob file is a header, a run of records and a footer. Each record holds one value with its
//! user key (so that garbage collection and `verify` can tell which key a value belongs to)
//! and a masked CRC32C over the record; a table entry of kind `BlobIndex` holds a
//! [`BlobReference`] naming the file, the record's offset, the stored value's length, the
//! record's checksum and (for version-2 records) the form the value is stored in, so that a read
//! fetches the record in one positioned read, checks it twice (its own checksum, and that the
//! checksum is the one the reference expects) and decompresses the value when it was
//! compressed. Version 2 added that form: a type byte in every record, the block types of the
//! table format (none, LZ4, Zstandard, Snappy) with the payloads the table format stores.
//!
//! Concurrency contract: pure functions over byte slices; no shared state.
//!
//! Invariants: every decoder rejects damaged input with `(offset, reason)` and never panics
//! (fuzzed by the `blob_file` target); the encoders produce only what the decoders accept.

use std::path::Path;

use crate::coding::{get_varint32, get_varint64, mask_crc, masked_crc, put_varint32, put_varint64};
use crate::sstable::format::{decode_payload_into, DecodedBlock, BLOCK_TYPE_NONE, BLOCK_TYPE_SNAPPY};

/// The first eight bytes of every blob file.
pub(crate) const BLOB_FILE_MAGIC: [u8; 8] = *b"riptblob";
/// The eight bytes that open the footer.
pub(crate) const BLOB_FOOTER_MAGIC: [u8; 8] = *b"blobfoot";
/// The format version this build writes.
pub(crate) const BLOB_FORMAT_VERSION: u32 = 2;
/// The first format version, whose files this build still reads: records without a type byte,
/// values stored as they are.
pub(crate) const BLOB_FORMAT_VERSION_1: u32 = 1;
/// Bytes of the header: magic, version, column family id, masked CRC32C of the first 16 bytes.
pub(crate) const BLOB_HEADER_SIZE_BYTES: usize = 20;
/// Bytes of the footer: magic, record count, record bytes, masked CRC32C of the first 24 bytes.
pub(crate) const BLOB_FOOTER_SIZE_BYTES: usize = 28;
/// Bytes of a version-1 record around its key and value: key length, value length, checksum.
pub(crate) const BLOB_RECORD_V1_OVERHEAD_BYTES: usize = 12;
/// Bytes of a version-2 record around its key and stored value: key length, stored length, the
/// value's type byte, checksum.
pub(crate) const BLOB_RECORD_OVERHEAD_BYTES: usize = 13;

/// The largest key or value a record may hold (the length fields are 32 bits; the table and
/// batch formats limit keys and values well below this anyway).
pub(crate) const MAX_BLOB_FIELD_BYTES: u64 = u32::MAX as u64;

/// Where a value stored in a blob file is, as a table's `BlobIndex` entry records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobReference {
    /// The blob file's number (the file is `NNNNNN.blob`).
    pub(crate) file_number: u64,
    /// Offset of the record's first byte in the file.
    pub(crate) record_offset: u64,
    /// Length of the value as stored in the record (compressed, when it was).
    pub(crate) stored_size_bytes: u32,
    /// The record's masked CRC32C, as stored at its end.
    pub(crate) checksum: u32,
    /// The stored value's form (a table block type: none, LZ4, Zstandard, Snappy) for a record
    /// of format version 2; `None` for a version-1 record, which has no type byte and holds the
    /// value as is.
    pub(crate) value_type: Option<u8>,
}

impl BlobReference {
    /// The format version of the record this reference names: references to version-2 records
    /// end with the value type, references to version-1 records do not.
    pub(crate) fn record_version(&self) -> u32 {
        match self.value_type {
            Some(_) => BLOB_FORMAT_VERSION,
            None => BLOB_FORMAT_VERSION_1,
        }
    }

    /// Bytes of the whole record for a key of `key_size_bytes`.
    pub(crate) fn record_size_bytes(&self, key_size_bytes: usize) -> u64 {
        let overhead = match self.value_type {
            None => BLOB_RECORD_V1_OVERHEAD_BYTES,
            Some(_) => BLOB_RECORD_OVERHEAD_BYTES,
        };
        (overhead + key_size_bytes) as u64 + u64::from(self.stored_size_bytes)
    }

    /// Appends the encoding: varint64 file number, varint64 offset, varint32 stored size, fixed
    /// u32 checksum, and for a version-2 record its value type byte.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.file_number);
        put_varint64(out, self.record_offset);
        put_varint32(out, self.stored_size_bytes);
        out.extend_from_slice(&self.checksum.to_le_bytes());
        if let Some(value_type) = self.value_type {
            out.push(value_type);
        }
    }

    /// The encoding as a new vector.
    #[cfg(test)]
    pub(crate) fn encoded(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        self.encode(&mut out);
        out
    }

    /// Decodes a reference that must fill `data` exactly; the reason on failure.
    pub(crate) fn decode(data: &[u8]) -> Result<BlobReference, &'static str> {
        let (file_number, first) = get_varint64(data).ok_or("blob reference: bad file number")?;
        let (record_offset, second) = get_varint64(&data[first..]).ok_or("blob reference: bad offset")?;
        let position = first + second;
        let (stored_size_bytes, third) = get_varint32(&data[position..]).ok_or("blob reference: bad value size")?;
        let position = position + third;
        let checksum_bytes: [u8; 4] = data
            .get(position..position + 4)
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or("blob reference: bad length")?;
        let value_type = match &data[position + 4..] {
            [] => None,
            [value_type] if is_known_value_type(*value_type) => Some(*value_type),
            [_] => return Err("blob reference: unknown value type"),
            _ => return Err("blob reference: bad length"),
        };
        if record_offset < BLOB_HEADER_SIZE_BYTES as u64 {
            return Err("blob reference: offset inside the header");
        }
        Ok(BlobReference {
            file_number,
            record_offset,
            stored_size_bytes,
            checksum: u32::from_le_bytes(checksum_bytes),
            value_type,
        })
    }
}

/// Whether `value_type` is a form a version-2 record may store its value in.
fn is_known_value_type(value_type: u8) -> bool {
    value_type <= BLOCK_TYPE_SNAPPY
}

/// The header of a blob file of column family `column_family_id`, in the version this build
/// writes.
pub(crate) fn encode_header(column_family_id: u32) -> [u8; BLOB_HEADER_SIZE_BYTES] {
    encode_header_of_version(column_family_id, BLOB_FORMAT_VERSION)
}

/// The header of a blob file of `version` (tests and tools re-encoding a file they decoded).
pub(crate) fn encode_header_of_version(column_family_id: u32, version: u32) -> [u8; BLOB_HEADER_SIZE_BYTES] {
    let mut header = [0u8; BLOB_HEADER_SIZE_BYTES];
    header[..8].copy_from_slice(&BLOB_FILE_MAGIC);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    header[12..16].copy_from_slice(&column_family_id.to_le_bytes());
    let checksum = masked_crc(&header[..16]);
    header[16..20].copy_from_slice(&checksum.to_le_bytes());
    header
}

/// Checks a header and returns its column family id and format version (1 or 2).
pub(crate) fn decode_header(data: &[u8]) -> Result<(u32, u32), (u64, &'static str)> {
    let header = data.get(..BLOB_HEADER_SIZE_BYTES).ok_or((0, "blob file shorter than its header"))?;
    if header[..8] != BLOB_FILE_MAGIC {
        return Err((0, "not a blob file (bad magic)"));
    }
    if masked_crc(&header[..16]) != read_u32(header, 16) {
        return Err((16, "blob file header checksum mismatch"));
    }
    let version = read_u32(header, 8);
    if version != BLOB_FORMAT_VERSION && version != BLOB_FORMAT_VERSION_1 {
        return Err((8, "unsupported blob file format version"));
    }
    Ok((read_u32(header, 12), version))
}

/// Appends one version-2 record for `key` with its value stored as `stored` in form
/// `value_type` to `out` and returns its checksum. The caller checks the lengths against
/// [`MAX_BLOB_FIELD_BYTES`]. For tests and fuzz targets that build files in memory; the builder
/// appends the same pieces to its file.
pub(crate) fn encode_record(out: &mut Vec<u8>, key: &[u8], value_type: u8, stored: &[u8]) -> u32 {
    append_record(out, &record_head(key, value_type, stored), key, stored)
}

/// Appends one version-1 record (no type byte, the value as is): files of the first format
/// version, for tests and for re-encoding a decoded version-1 file.
pub(crate) fn encode_record_v1(out: &mut Vec<u8>, key: &[u8], value: &[u8]) -> u32 {
    let mut lengths = [0u8; 8];
    lengths[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    lengths[4..].copy_from_slice(&(value.len() as u32).to_le_bytes());
    append_record(out, &lengths, key, value)
}

/// Appends a record of either version (its `head`, the key, the stored value and the checksum
/// that covers them) and returns the checksum.
fn append_record(out: &mut Vec<u8>, head: &[u8], key: &[u8], stored: &[u8]) -> u32 {
    let checksum = record_checksum(head, key, stored);
    out.extend_from_slice(head);
    out.extend_from_slice(key);
    out.extend_from_slice(stored);
    out.extend_from_slice(&checksum.to_le_bytes());
    checksum
}

/// The masked CRC32C that ends a record: over its head, its key and its stored value, computed
/// piece by piece.
fn record_checksum(head: &[u8], key: &[u8], stored: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(head), key), stored))
}

/// The first bytes of the version-2 record of `key` and `stored`: its key and stored lengths
/// and the value's type byte.
fn record_head(key: &[u8], value_type: u8, stored: &[u8]) -> [u8; 9] {
    let mut head = [0u8; 9];
    head[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    head[4..8].copy_from_slice(&(stored.len() as u32).to_le_bytes());
    head[8] = value_type;
    head
}

/// The head of the version-2 record of `key` and `stored` and the record's checksum, which
/// ends it. A writer appends the head, the key, the stored value and the checksum in that
/// order: computed piece by piece, the checksum needs no contiguous copy of the record (a value
/// copied into a record buffer and then again into the file's write buffer was 6 % of the CPU
/// of 4 KiB-value writes with blob files).
pub(crate) fn record_head_and_checksum(key: &[u8], value_type: u8, stored: &[u8]) -> ([u8; 9], u32) {
    let head = record_head(key, value_type, stored);
    let checksum = record_checksum(&head, key, stored);
    (head, checksum)
}

/// A record checked against its own checksum: the key and stored value it holds, the value's
/// form and the record's checksum.
pub(crate) struct DecodedRecord<'a> {
    pub(crate) key: &'a [u8],
    /// The value as stored: compressed when `value_type` says so.
    pub(crate) stored: &'a [u8],
    /// The stored value's form: a table block type (always none in a version-1 record).
    pub(crate) value_type: u8,
    pub(crate) checksum: u32,
}

impl DecodedRecord<'_> {
    /// The value, decompressed when it was stored compressed. A payload that does not
    /// decompress is `Error::Corruption` at `record_offset` of `path`.
    pub(crate) fn value(&self, path: &Path, record_offset: u64) -> crate::error::Result<Vec<u8>> {
        let mut output = Vec::new();
        match decode_payload_into(path, record_offset, self.value_type, self.stored, &mut output)? {
            DecodedBlock::Stored(length) => Ok(self.stored[..length].to_vec()),
            DecodedBlock::Decompressed(length) => {
                output.truncate(length);
                Ok(output)
            }
        }
    }
}

/// Decodes the record at the start of `data` (which may hold more after it), laid out as files
/// of format `version` lay records out, and verifies its checksum. Offsets in errors are
/// relative to `data`.
pub(crate) fn decode_record(data: &[u8], version: u32) -> Result<(DecodedRecord<'_>, usize), (u64, &'static str)> {
    let head_bytes = if version == BLOB_FORMAT_VERSION_1 { 8 } else { 9 };
    if data.len() < head_bytes + 4 {
        return Err((0, "blob record truncated"));
    }
    let key_size = read_u32(data, 0) as usize;
    let stored_size = read_u32(data, 4) as usize;
    let value_type = if version == BLOB_FORMAT_VERSION_1 { BLOCK_TYPE_NONE } else { data[8] };
    let body_end = head_bytes
        .checked_add(key_size)
        .and_then(|end| end.checked_add(stored_size))
        .filter(|&end| end.checked_add(4).is_some_and(|total| total <= data.len()))
        .ok_or((0, "blob record lengths run past the data"))?;
    let checksum = read_u32(data, body_end);
    if masked_crc(&data[..body_end]) != checksum {
        return Err((body_end as u64, "blob record checksum mismatch"));
    }
    if !is_known_value_type(value_type) {
        return Err((8, "blob record has an unknown value type"));
    }
    let key = &data[head_bytes..head_bytes + key_size];
    let stored = &data[head_bytes + key_size..body_end];
    Ok((DecodedRecord { key, stored, value_type, checksum }, body_end + 4))
}

/// Decodes `record`, exactly the bytes `reference` names, and checks it against the reference
/// for a read of `user_key` as I36 requires: the record's own checksum, its length, its key, the
/// reference's checksum and value type. The reason on failure.
pub(crate) fn decode_referenced_record<'a>(
    record: &'a [u8],
    user_key: &[u8],
    reference: &BlobReference,
) -> Result<DecodedRecord<'a>, &'static str> {
    let (decoded, length) = decode_record(record, reference.record_version()).map_err(|(_, reason)| reason)?;
    if length != record.len() || decoded.key != user_key {
        return Err("blob record does not hold the referenced key");
    }
    if decoded.checksum != reference.checksum {
        return Err("blob record checksum differs from the reference's");
    }
    if reference.value_type.is_some_and(|value_type| value_type != decoded.value_type) {
        return Err("blob record value type differs from the reference's");
    }
    Ok(decoded)
}

/// What a footer records about the records before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobFooter {
    pub(crate) record_count: u64,
    /// Bytes of all records (from the end of the header to the start of the footer).
    pub(crate) record_bytes: u64,
}

pub(crate) fn encode_footer(footer: &BlobFooter) -> [u8; BLOB_FOOTER_SIZE_BYTES] {
    let mut out = [0u8; BLOB_FOOTER_SIZE_BYTES];
    out[..8].copy_from_slice(&BLOB_FOOTER_MAGIC);
    out[8..16].copy_from_slice(&footer.record_count.to_le_bytes());
    out[16..24].copy_from_slice(&footer.record_bytes.to_le_bytes());
    let checksum = masked_crc(&out[..24]);
    out[24..28].copy_from_slice(&checksum.to_le_bytes());
    out
}

pub(crate) fn decode_footer(data: &[u8]) -> Result<BlobFooter, (u64, &'static str)> {
    if data.len() != BLOB_FOOTER_SIZE_BYTES {
        return Err((0, "blob footer has the wrong length"));
    }
    if data[..8] != BLOB_FOOTER_MAGIC {
        return Err((0, "bad blob footer magic"));
    }
    if masked_crc(&data[..24]) != read_u32(data, 24) {
        return Err((24, "blob footer checksum mismatch"));
    }
    let record_count = u64::from_le_bytes(data[8..16].try_into().unwrap_or_default());
    let record_bytes = u64::from_le_bytes(data[16..24].try_into().unwrap_or_default());
    Ok(BlobFooter { record_count, record_bytes })
}

/// One record of a decoded blob file. Public for tools through `internals::decode`
/// (`BlobRecord`); the module itself is the crate's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// The record's offset in the file.
    pub offset: u64,
    /// The user key the record holds.
    pub key: Vec<u8>,
    /// The stored value's form: a table block type (0 none, 1 LZ4, 2 Zstandard, 3 Snappy;
    /// always 0 in a version-1 file).
    pub value_type: u8,
    /// The value as stored.
    pub stored: Vec<u8>,
    /// The value, decompressed when it was stored compressed.
    pub value: Vec<u8>,
}

/// Everything in a whole blob file, checked: its column family, its format version (1 or 2),
/// each record and the footer. Used by `verify`, `inspect` and the fuzz target (through
/// `internals::decode`, as `BlobFile`); reads go through `decode_record` at the offsets
/// references name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobFileContents {
    /// The column family the file belongs to, from its header.
    pub column_family_id: u32,
    /// The file's format version (1 or 2), from its header.
    pub format_version: u32,
    /// Every record, in file order.
    pub records: Vec<FileRecord>,
}

/// Decodes a whole blob file: header, records tiling the space before the footer exactly (each
/// stored value decompressing), and a footer that agrees with them.
pub(crate) fn decode_file(data: &[u8]) -> Result<BlobFileContents, (u64, &'static str)> {
    let (column_family_id, version) = decode_header(data)?;
    let Some(footer_start) = data.len().checked_sub(BLOB_FOOTER_SIZE_BYTES) else {
        return Err((data.len() as u64, "blob file shorter than header and footer"));
    };
    if footer_start < BLOB_HEADER_SIZE_BYTES {
        return Err((data.len() as u64, "blob file shorter than header and footer"));
    }
    let footer =
        decode_footer(&data[footer_start..]).map_err(|(offset, reason)| (footer_start as u64 + offset, reason))?;
    let mut records = Vec::new();
    let mut position = BLOB_HEADER_SIZE_BYTES;
    while position < footer_start {
        let (record, length) = decode_record(&data[position..footer_start], version)
            .map_err(|(offset, reason)| (position as u64 + offset, reason))?;
        let value = record
            .value(Path::new("blob"), position as u64)
            .map_err(|_| (position as u64, "blob record value does not decompress"))?;
        records.push(FileRecord {
            offset: position as u64,
            key: record.key.to_vec(),
            value_type: record.value_type,
            stored: record.stored.to_vec(),
            value,
        });
        position += length;
    }
    let record_bytes = (footer_start - BLOB_HEADER_SIZE_BYTES) as u64;
    if footer.record_count != records.len() as u64 || footer.record_bytes != record_bytes {
        return Err((footer_start as u64, "blob footer disagrees with the records"));
    }
    Ok(BlobFileContents { column_family_id, format_version: version, records })
}

fn read_u32(data: &[u8], offset: usize) -> u32 {
    let mut bytes = [0u8; 4];
    if let Some(slice) = data.get(offset..offset + 4) {
        bytes.copy_from_slice(slice);
    }
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Compression;
    use crate::sstable::format::{BlockCompressor, BLOCK_TYPE_LZ4};

    /// A file of `version` holding three records; in version 2 the first value is stored
    /// LZ4-compressed.
    fn sample_file(version: u32) -> Vec<u8> {
        let mut data = encode_header_of_version(7, version).to_vec();
        let long_value = b"first value, first value, first value, first value".to_vec();
        let mut compressor = BlockCompressor::new(Compression::Lz4);
        let mut count = 0;
        for (key, value) in [(&b"a"[..], &long_value[..]), (b"bb", b""), (b"", b"v")] {
            if version == BLOB_FORMAT_VERSION_1 {
                encode_record_v1(&mut data, key, value);
            } else {
                let (value_type, stored) = compressor.compress(value);
                encode_record(&mut data, key, value_type, stored);
            }
            count += 1;
        }
        let record_bytes = (data.len() - BLOB_HEADER_SIZE_BYTES) as u64;
        data.extend_from_slice(&encode_footer(&BlobFooter { record_count: count, record_bytes }));
        data
    }

    #[test]
    fn a_file_of_either_version_round_trips() {
        for version in [BLOB_FORMAT_VERSION_1, BLOB_FORMAT_VERSION] {
            let data = sample_file(version);
            let contents = decode_file(&data).expect("valid file");
            assert_eq!((contents.column_family_id, contents.format_version), (7, version));
            let keys: Vec<&[u8]> = contents.records.iter().map(|record| record.key.as_slice()).collect();
            assert_eq!(keys, vec![&b"a"[..], b"bb", b""]);
            assert_eq!(contents.records[0].offset, BLOB_HEADER_SIZE_BYTES as u64);
            assert_eq!(contents.records[0].value, b"first value, first value, first value, first value");
            assert_eq!(contents.records[2].value, b"v");
            let expected_type = if version == BLOB_FORMAT_VERSION_1 { BLOCK_TYPE_NONE } else { BLOCK_TYPE_LZ4 };
            assert_eq!(contents.records[0].value_type, expected_type);
            if version == BLOB_FORMAT_VERSION {
                assert!(contents.records[0].stored.len() < contents.records[0].value.len(), "the value compressed");
            }
        }
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_rejected() {
        for version in [BLOB_FORMAT_VERSION_1, BLOB_FORMAT_VERSION] {
            let data = sample_file(version);
            for position in 0..data.len() {
                for bit in 0..8 {
                    let mut damaged = data.clone();
                    damaged[position] ^= 1 << bit;
                    assert!(
                        decode_file(&damaged).is_err(),
                        "version {version}: bit {bit} of byte {position} flipped went unnoticed"
                    );
                }
            }
            for length in 0..data.len() {
                assert!(decode_file(&data[..length]).is_err(), "truncation to {length} bytes went unnoticed");
            }
        }
    }

    #[test]
    fn a_payload_that_does_not_decompress_is_rejected_even_with_a_good_checksum() {
        let mut data = encode_header(1).to_vec();
        encode_record(&mut data, b"key", BLOCK_TYPE_LZ4, &[0x05, 0xff, 0xff, 0xff]);
        let record_bytes = (data.len() - BLOB_HEADER_SIZE_BYTES) as u64;
        data.extend_from_slice(&encode_footer(&BlobFooter { record_count: 1, record_bytes }));
        assert_eq!(decode_file(&data).err(), Some((20, "blob record value does not decompress")));
        let mut unknown = encode_header(1).to_vec();
        encode_record(&mut unknown, b"key", 9, b"value");
        assert_eq!(
            decode_record(&unknown[20..], BLOB_FORMAT_VERSION).err(),
            Some((8, "blob record has an unknown value type"))
        );
    }

    #[test]
    fn references_round_trip_and_reject_damage() {
        for value_type in [None, Some(BLOCK_TYPE_NONE), Some(BLOCK_TYPE_LZ4)] {
            let reference = BlobReference {
                file_number: 300,
                record_offset: 20,
                stored_size_bytes: 4096,
                checksum: 0xdead_beef,
                value_type,
            };
            let encoded = reference.encoded();
            assert_eq!(BlobReference::decode(&encoded), Ok(reference));
            let shorter = BlobReference::decode(&encoded[..encoded.len() - 1]);
            match value_type {
                None => assert!(shorter.is_err()),
                // Without its type byte a version-2 reference reads as a version-1 one; the
                // record it then names is a byte short and fails its checksum on the read.
                Some(_) => assert_eq!(shorter.map(|reference| reference.value_type), Ok(None)),
            }
            let mut longer = encoded.clone();
            longer.extend_from_slice(&[0, 0]);
            assert!(BlobReference::decode(&longer).is_err());
            let inside_header = BlobReference { record_offset: 3, ..reference }.encoded();
            assert!(BlobReference::decode(&inside_header).is_err());
            let overhead = if value_type.is_none() { 12 } else { 13 };
            assert_eq!(reference.record_size_bytes(5), overhead + 5 + 4096);
        }
        // The documented example.
        let example = BlobReference {
            file_number: 300,
            record_offset: 20,
            stored_size_bytes: 4096,
            checksum: 0xdead_beef,
            value_type: Some(BLOCK_TYPE_LZ4),
        };
        assert_eq!(example.encoded(), [0xac, 0x02, 0x14, 0x80, 0x20, 0xef, 0xbe, 0xad, 0xde, 0x01]);
        let mut unknown_type = example.encoded();
        *unknown_type.last_mut().unwrap() = 7;
        assert_eq!(BlobReference::decode(&unknown_type), Err("blob reference: unknown value type"));
    }

    #[test]
    fn a_record_checksum_covers_its_lengths_type_key_and_value() {
        let mut record = Vec::new();
        let checksum = encode_record(&mut record, b"key", BLOCK_TYPE_NONE, b"value");
        let (decoded, length) =
            decode_record(&record, BLOB_FORMAT_VERSION).map_err(|(_, reason)| reason).expect("valid record");
        assert_eq!(
            (decoded.key, decoded.stored, decoded.value_type, decoded.checksum, length),
            (&b"key"[..], &b"value"[..], BLOCK_TYPE_NONE, checksum, 21)
        );
        for position in 0..record.len() {
            let mut damaged = record.clone();
            damaged[position] ^= 0x10;
            assert!(decode_record(&damaged, BLOB_FORMAT_VERSION).is_err(), "damage at {position} went unnoticed");
        }
    }
}
