//! The byte layout of blob files (`NNNNNN.blob`, see `docs/format/blob.md`, format version 1)
//! and of the blob references that tables store in place of large values.
//!
//! A blob file is a header, a run of records and a footer. Each record holds one value with its
//! user key (so that garbage collection and `verify` can tell which key a value belongs to)
//! and a masked CRC32C over the record; a table entry of kind `BlobIndex` holds a
//! [`BlobReference`] naming the file, the record's offset, the value's length and the record's
//! checksum, so that a read fetches the record in one positioned read and checks it twice
//! (its own checksum, and that the checksum is the one the reference expects).
//!
//! Concurrency contract: pure functions over byte slices; no shared state.
//!
//! Invariants: every decoder rejects damaged input with `(offset, reason)` and never panics
//! (fuzzed by the `blob_file` target); the encoders produce only what the decoders accept.

use crate::coding::{get_varint32, get_varint64, mask_crc, masked_crc, put_varint32, put_varint64};

/// The first eight bytes of every blob file.
pub(crate) const BLOB_FILE_MAGIC: [u8; 8] = *b"riptblob";
/// The eight bytes that open the footer.
pub(crate) const BLOB_FOOTER_MAGIC: [u8; 8] = *b"blobfoot";
/// The format version this build writes and reads.
pub(crate) const BLOB_FORMAT_VERSION: u32 = 1;
/// Bytes of the header: magic, version, column family id, masked CRC32C of the first 16 bytes.
pub(crate) const BLOB_HEADER_SIZE_BYTES: usize = 20;
/// Bytes of the footer: magic, record count, record bytes, masked CRC32C of the first 24 bytes.
pub(crate) const BLOB_FOOTER_SIZE_BYTES: usize = 28;
/// Bytes of a record around its key and value: key length, value length, checksum.
pub(crate) const BLOB_RECORD_OVERHEAD_BYTES: usize = 12;

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
    /// Length of the value.
    pub(crate) value_size_bytes: u32,
    /// The record's masked CRC32C, as stored at its end.
    pub(crate) checksum: u32,
}

impl BlobReference {
    /// Bytes of the whole record for a key of `key_size_bytes`.
    pub(crate) fn record_size_bytes(&self, key_size_bytes: usize) -> u64 {
        (BLOB_RECORD_OVERHEAD_BYTES + key_size_bytes) as u64 + u64::from(self.value_size_bytes)
    }

    /// Appends the encoding: varint64 file number, varint64 offset, varint32 value size, fixed
    /// u32 checksum.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.file_number);
        put_varint64(out, self.record_offset);
        put_varint32(out, self.value_size_bytes);
        out.extend_from_slice(&self.checksum.to_le_bytes());
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
        let (value_size_bytes, third) = get_varint32(&data[position..]).ok_or("blob reference: bad value size")?;
        let position = position + third;
        let checksum_bytes: [u8; 4] =
            data.get(position..).and_then(|rest| rest.try_into().ok()).ok_or("blob reference: bad length")?;
        if record_offset < BLOB_HEADER_SIZE_BYTES as u64 {
            return Err("blob reference: offset inside the header");
        }
        Ok(BlobReference { file_number, record_offset, value_size_bytes, checksum: u32::from_le_bytes(checksum_bytes) })
    }
}

/// The header of a blob file of column family `column_family_id`.
pub(crate) fn encode_header(column_family_id: u32) -> [u8; BLOB_HEADER_SIZE_BYTES] {
    let mut header = [0u8; BLOB_HEADER_SIZE_BYTES];
    header[..8].copy_from_slice(&BLOB_FILE_MAGIC);
    header[8..12].copy_from_slice(&BLOB_FORMAT_VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&column_family_id.to_le_bytes());
    let checksum = masked_crc(&header[..16]);
    header[16..20].copy_from_slice(&checksum.to_le_bytes());
    header
}

/// Checks a header and returns its column family id.
pub(crate) fn decode_header(data: &[u8]) -> Result<u32, (u64, &'static str)> {
    let header = data.get(..BLOB_HEADER_SIZE_BYTES).ok_or((0, "blob file shorter than its header"))?;
    if header[..8] != BLOB_FILE_MAGIC {
        return Err((0, "not a blob file (bad magic)"));
    }
    if masked_crc(&header[..16]) != read_u32(header, 16) {
        return Err((16, "blob file header checksum mismatch"));
    }
    if read_u32(header, 8) != BLOB_FORMAT_VERSION {
        return Err((8, "unsupported blob file format version"));
    }
    Ok(read_u32(header, 12))
}

/// Appends one record for (`key`, `value`) to `out` and returns its checksum. The caller
/// checks the lengths against [`MAX_BLOB_FIELD_BYTES`]. For tests and fuzz targets that build
/// files in memory; the builder appends the same pieces to its file.
pub(crate) fn encode_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) -> u32 {
    let (lengths, checksum) = record_lengths_and_checksum(key, value);
    out.extend_from_slice(&lengths);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out.extend_from_slice(&checksum.to_le_bytes());
    checksum
}

/// The first bytes of the record of (`key`, `value`) (its key and value lengths) and the
/// record's checksum, which ends it. A writer appends the lengths, the key, the value and the
/// checksum in that order: computed piece by piece, the checksum needs no contiguous copy of
/// the record (a value copied into a record buffer and then again into the file's write buffer
/// was 6 % of the CPU of 4 KiB-value writes with blob files).
pub(crate) fn record_lengths_and_checksum(key: &[u8], value: &[u8]) -> ([u8; 8], u32) {
    let mut lengths = [0u8; 8];
    lengths[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    lengths[4..].copy_from_slice(&(value.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&lengths), key), value);
    (lengths, mask_crc(crc))
}

/// A record checked against its own checksum: the key and value it holds, and its checksum.
pub(crate) struct DecodedRecord<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
    pub(crate) checksum: u32,
}

/// Decodes the record at the start of `data` (which may hold more after it) and verifies its
/// checksum. Offsets in errors are relative to `data`.
pub(crate) fn decode_record(data: &[u8]) -> Result<(DecodedRecord<'_>, usize), (u64, &'static str)> {
    if data.len() < BLOB_RECORD_OVERHEAD_BYTES {
        return Err((0, "blob record truncated"));
    }
    let key_size = read_u32(data, 0) as usize;
    let value_size = read_u32(data, 4) as usize;
    let body_end = 8usize
        .checked_add(key_size)
        .and_then(|end| end.checked_add(value_size))
        .filter(|&end| end.checked_add(4).is_some_and(|total| total <= data.len()))
        .ok_or((0, "blob record lengths run past the data"))?;
    let checksum = read_u32(data, body_end);
    if masked_crc(&data[..body_end]) != checksum {
        return Err((body_end as u64, "blob record checksum mismatch"));
    }
    let key = &data[8..8 + key_size];
    let value = &data[8 + key_size..body_end];
    Ok((DecodedRecord { key, value, checksum }, body_end + 4))
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

/// Everything in a whole blob file, checked: its column family, each record as (offset, key,
/// value) and the footer. Used by `verify`, `inspect` and the fuzz target; reads go through
/// [`decode_record`] at the offsets references name.
pub(crate) struct BlobFileContents {
    pub(crate) column_family_id: u32,
    pub(crate) records: Vec<(u64, Vec<u8>, Vec<u8>)>,
}

/// Decodes a whole blob file: header, records tiling the space before the footer exactly, and a
/// footer that agrees with them.
pub(crate) fn decode_file(data: &[u8]) -> Result<BlobFileContents, (u64, &'static str)> {
    let column_family_id = decode_header(data)?;
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
        let (record, length) = decode_record(&data[position..footer_start])
            .map_err(|(offset, reason)| (position as u64 + offset, reason))?;
        records.push((position as u64, record.key.to_vec(), record.value.to_vec()));
        position += length;
    }
    let record_bytes = (footer_start - BLOB_HEADER_SIZE_BYTES) as u64;
    if footer.record_count != records.len() as u64 || footer.record_bytes != record_bytes {
        return Err((footer_start as u64, "blob footer disagrees with the records"));
    }
    Ok(BlobFileContents { column_family_id, records })
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

    fn sample_file() -> Vec<u8> {
        let mut data = encode_header(7).to_vec();
        let mut count = 0;
        for (key, value) in [(&b"a"[..], &b"first value"[..]), (b"bb", b""), (b"", b"v")] {
            encode_record(&mut data, key, value);
            count += 1;
        }
        let record_bytes = (data.len() - BLOB_HEADER_SIZE_BYTES) as u64;
        data.extend_from_slice(&encode_footer(&BlobFooter { record_count: count, record_bytes }));
        data
    }

    #[test]
    fn a_file_round_trips() {
        let data = sample_file();
        let contents = decode_file(&data).expect("valid file");
        assert_eq!(contents.column_family_id, 7);
        let keys: Vec<&[u8]> = contents.records.iter().map(|(_, key, _)| key.as_slice()).collect();
        assert_eq!(keys, vec![&b"a"[..], b"bb", b""]);
        assert_eq!(contents.records[0].0, BLOB_HEADER_SIZE_BYTES as u64);
        assert_eq!(contents.records[0].2, b"first value");
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_rejected() {
        let data = sample_file();
        for position in 0..data.len() {
            for bit in 0..8 {
                let mut damaged = data.clone();
                damaged[position] ^= 1 << bit;
                assert!(decode_file(&damaged).is_err(), "bit {bit} of byte {position} flipped went unnoticed");
            }
        }
        for length in 0..data.len() {
            assert!(decode_file(&data[..length]).is_err(), "truncation to {length} bytes went unnoticed");
        }
    }

    #[test]
    fn references_round_trip_and_reject_damage() {
        let reference =
            BlobReference { file_number: 300, record_offset: 20, value_size_bytes: 4096, checksum: 0xdead_beef };
        let encoded = reference.encoded();
        assert_eq!(BlobReference::decode(&encoded), Ok(reference));
        assert!(BlobReference::decode(&encoded[..encoded.len() - 1]).is_err());
        let mut longer = encoded.clone();
        longer.push(0);
        assert!(BlobReference::decode(&longer).is_err());
        let inside_header = BlobReference { record_offset: 3, ..reference }.encoded();
        assert!(BlobReference::decode(&inside_header).is_err());
        assert_eq!(reference.record_size_bytes(5), 12 + 5 + 4096);
    }

    #[test]
    fn a_record_checksum_covers_its_lengths_key_and_value() {
        let mut record = Vec::new();
        let checksum = encode_record(&mut record, b"key", b"value");
        let (decoded, length) = decode_record(&record).map_err(|(_, reason)| reason).expect("valid record");
        assert_eq!((decoded.key, decoded.value, decoded.checksum, length), (&b"key"[..], &b"value"[..], checksum, 20));
        for position in 0..record.len() {
            let mut damaged = record.clone();
            damaged[position] ^= 0x10;
            assert!(decode_record(&damaged).is_err(), "damage at {position} went unnoticed");
        }
    }
}
