//! Table properties: the statistics and key range of one table, stored in the properties block
//! and kept in memory while the table is open.
//!
//! Encoding: a sequence of records `varint tag, varint payload_bytes, payload`. Numeric payloads
//! are one varint; key payloads are raw bytes; the comparator name is UTF-8. Tags are listed in
//! `docs/format/sstable.md`; readers skip unknown tags so that later versions can add
//! properties. Tags 1 to 14 are required; tag 15 (the comparator name) is optional, since
//! tables written before it existed are bytewise. `file_size_bytes` is not
//! stored (the properties block is written before the file is complete); it is filled in from the
//! file length.
//!
//! Concurrency contract: plain immutable data once decoded. Invariants: decoding never panics;
//! it fails with [`Error::Corruption`] on a truncated record, a duplicated or missing required
//! tag, a malformed number, a key shorter than an internal-key trailer or an unknown compression
//! code.

use std::path::Path;

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint64, varint_length};
use crate::comparator::BYTEWISE_COMPARATOR_NAME;
use crate::error::{Error, Result};
use crate::key::TRAILER_SIZE_BYTES;
use crate::options::Compression;
use crate::sstable::format::{compression_code, compression_from_code};
use crate::ttl::TableExpiry;

const TAG_NUM_ENTRIES: u64 = 1;
const TAG_NUM_DELETIONS: u64 = 2;
const TAG_RAW_KEY_BYTES: u64 = 3;
const TAG_RAW_VALUE_BYTES: u64 = 4;
const TAG_DATA_SIZE_BYTES: u64 = 5;
const TAG_INDEX_SIZE_BYTES: u64 = 6;
const TAG_FILTER_SIZE_BYTES: u64 = 7;
const TAG_NUM_DATA_BLOCKS: u64 = 8;
const TAG_SMALLEST_KEY: u64 = 9;
const TAG_LARGEST_KEY: u64 = 10;
const TAG_SMALLEST_SEQUENCE: u64 = 11;
const TAG_LARGEST_SEQUENCE: u64 = 12;
const TAG_COMPRESSION: u64 = 13;
const TAG_FORMAT_VERSION: u64 = 14;
const TAG_COMPARATOR_NAME: u64 = 15;
/// Optional, all three or none: the entries with an expiry and their earliest and latest
/// expiry (`ttl.rs`).
const TAG_EXPIRING_ENTRIES: u64 = 16;
const TAG_EARLIEST_EXPIRY: u64 = 17;
const TAG_LATEST_EXPIRY: u64 = 18;
/// Optional: the entries that are merge operands (written only when there are some).
const TAG_MERGE_OPERANDS: u64 = 19;

/// Every tag from 1 to this one is required.
const LAST_REQUIRED_TAG: u64 = TAG_FORMAT_VERSION;

/// The highest tag this version knows; tags above it are skipped.
const LAST_KNOWN_TAG: u64 = TAG_MERGE_OPERANDS;

/// Statistics and key range of one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableProperties {
    /// Entries (puts and deletions) in the table.
    pub(crate) num_entries: u64,
    /// Entries that are tombstones.
    pub(crate) num_deletions: u64,
    /// Sum of internal key lengths as added, before prefix compression.
    pub(crate) raw_key_bytes: u64,
    /// Sum of value lengths as added, before compression.
    pub(crate) raw_value_bytes: u64,
    /// Bytes of all stored data blocks including their trailers; also the offset where the
    /// metadata blocks start.
    pub(crate) data_size_bytes: u64,
    /// Bytes of the stored index block including its trailer.
    pub(crate) index_size_bytes: u64,
    /// Bytes of the stored filter block including its trailer; 0 without a filter.
    pub(crate) filter_size_bytes: u64,
    /// Number of data blocks.
    pub(crate) num_data_blocks: u64,
    /// Length of the whole file (not stored; taken from the file).
    pub(crate) file_size_bytes: u64,
    /// The first internal key.
    pub(crate) smallest_key: Vec<u8>,
    /// The last internal key.
    pub(crate) largest_key: Vec<u8>,
    /// The smallest sequence number of any entry.
    pub(crate) smallest_sequence: u64,
    /// The largest sequence number of any entry.
    pub(crate) largest_sequence: u64,
    /// The compression configured for data blocks (individual blocks may be stored raw).
    pub(crate) compression: Compression,
    /// The table format version.
    pub(crate) format_version: u32,
    /// The name of the comparator the keys are ordered by; the bytewise comparator's name when
    /// the table does not record one (it was written before names were recorded).
    pub(crate) comparator_name: String,
    /// The expiries of the entries that have one (none when `expiry.entries` is 0).
    pub(crate) expiry: TableExpiry,
    /// Entries that are merge operands.
    pub(crate) num_merge_operands: u64,
}

fn put_number(out: &mut Vec<u8>, tag: u64, value: u64) {
    put_varint64(out, tag);
    put_varint64(out, varint_length(value) as u64);
    put_varint64(out, value);
}

fn put_bytes(out: &mut Vec<u8>, tag: u64, value: &[u8]) {
    put_varint64(out, tag);
    put_length_prefixed(out, value);
}

impl TableProperties {
    /// Properties of a table with no entries yet: all counts zero, no key range, the given
    /// compression, format version `format_version` and the bytewise comparator (the builder
    /// fills in the rest as entries arrive; the decoder as records are read).
    pub(crate) fn empty(compression: Compression, format_version: u32) -> TableProperties {
        TableProperties {
            num_entries: 0,
            num_deletions: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            data_size_bytes: 0,
            index_size_bytes: 0,
            filter_size_bytes: 0,
            num_data_blocks: 0,
            file_size_bytes: 0,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            smallest_sequence: 0,
            largest_sequence: 0,
            compression,
            format_version,
            comparator_name: BYTEWISE_COMPARATOR_NAME.to_string(),
            expiry: TableExpiry::default(),
            num_merge_operands: 0,
        }
    }

    /// Appends the encoded properties to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_number(out, TAG_NUM_ENTRIES, self.num_entries);
        put_number(out, TAG_NUM_DELETIONS, self.num_deletions);
        put_number(out, TAG_RAW_KEY_BYTES, self.raw_key_bytes);
        put_number(out, TAG_RAW_VALUE_BYTES, self.raw_value_bytes);
        put_number(out, TAG_DATA_SIZE_BYTES, self.data_size_bytes);
        put_number(out, TAG_INDEX_SIZE_BYTES, self.index_size_bytes);
        put_number(out, TAG_FILTER_SIZE_BYTES, self.filter_size_bytes);
        put_number(out, TAG_NUM_DATA_BLOCKS, self.num_data_blocks);
        put_bytes(out, TAG_SMALLEST_KEY, &self.smallest_key);
        put_bytes(out, TAG_LARGEST_KEY, &self.largest_key);
        put_number(out, TAG_SMALLEST_SEQUENCE, self.smallest_sequence);
        put_number(out, TAG_LARGEST_SEQUENCE, self.largest_sequence);
        put_number(out, TAG_COMPRESSION, u64::from(compression_code(self.compression)));
        put_number(out, TAG_FORMAT_VERSION, u64::from(self.format_version));
        put_bytes(out, TAG_COMPARATOR_NAME, self.comparator_name.as_bytes());
        if self.expiry.entries > 0 {
            put_number(out, TAG_EXPIRING_ENTRIES, self.expiry.entries);
            put_number(out, TAG_EARLIEST_EXPIRY, self.expiry.earliest_us);
            put_number(out, TAG_LATEST_EXPIRY, self.expiry.latest_us);
        }
        if self.num_merge_operands > 0 {
            put_number(out, TAG_MERGE_OPERANDS, self.num_merge_operands);
        }
    }

    /// Decodes the properties block stored at `block_offset` in `path`.
    pub(crate) fn decode(path: &Path, block_offset: u64, input: &[u8]) -> Result<TableProperties> {
        let corruption = |reason: String| Error::corruption(path, block_offset, format!("properties block: {reason}"));
        let mut properties = TableProperties::empty(Compression::None, 0);
        let mut seen_tags: u64 = 0;
        let mut position = 0;
        while position < input.len() {
            let rest = input.get(position..).unwrap_or_default();
            let (tag, tag_length) = get_varint64(rest).ok_or_else(|| corruption("bad tag".to_string()))?;
            let (payload, payload_length) = get_length_prefixed(rest.get(tag_length..).unwrap_or_default())
                .ok_or_else(|| corruption(format!("record {tag} truncated")))?;
            position += tag_length + payload_length;
            if !(1..=LAST_KNOWN_TAG).contains(&tag) {
                // A property added by a later version: skip it.
                continue;
            }
            if seen_tags & (1 << tag) != 0 {
                return Err(corruption(format!("record {tag} appears twice")));
            }
            seen_tags |= 1 << tag;
            let number = || match get_varint64(payload) {
                Some((value, length)) if length == payload.len() => Ok(value),
                _ => Err(corruption(format!("record {tag} is not a number"))),
            };
            let key = || {
                if payload.len() < TRAILER_SIZE_BYTES {
                    Err(corruption(format!("record {tag} is not an internal key")))
                } else {
                    Ok(payload.to_vec())
                }
            };
            match tag {
                TAG_NUM_ENTRIES => properties.num_entries = number()?,
                TAG_NUM_DELETIONS => properties.num_deletions = number()?,
                TAG_RAW_KEY_BYTES => properties.raw_key_bytes = number()?,
                TAG_RAW_VALUE_BYTES => properties.raw_value_bytes = number()?,
                TAG_DATA_SIZE_BYTES => properties.data_size_bytes = number()?,
                TAG_INDEX_SIZE_BYTES => properties.index_size_bytes = number()?,
                TAG_FILTER_SIZE_BYTES => properties.filter_size_bytes = number()?,
                TAG_NUM_DATA_BLOCKS => properties.num_data_blocks = number()?,
                TAG_SMALLEST_KEY => properties.smallest_key = key()?,
                TAG_LARGEST_KEY => properties.largest_key = key()?,
                TAG_SMALLEST_SEQUENCE => properties.smallest_sequence = number()?,
                TAG_LARGEST_SEQUENCE => properties.largest_sequence = number()?,
                TAG_COMPRESSION => {
                    properties.compression = u8::try_from(number()?)
                        .ok()
                        .and_then(compression_from_code)
                        .ok_or_else(|| corruption("unknown compression code".to_string()))?;
                }
                TAG_FORMAT_VERSION => {
                    properties.format_version =
                        u32::try_from(number()?).map_err(|_| corruption("format version too large".to_string()))?;
                }
                TAG_COMPARATOR_NAME => {
                    properties.comparator_name = std::str::from_utf8(payload)
                        .map_err(|_| corruption("comparator name is not UTF-8".to_string()))?
                        .to_string();
                }
                TAG_EXPIRING_ENTRIES => properties.expiry.entries = number()?,
                TAG_EARLIEST_EXPIRY => properties.expiry.earliest_us = number()?,
                TAG_LATEST_EXPIRY => properties.expiry.latest_us = number()?,
                TAG_MERGE_OPERANDS => properties.num_merge_operands = number()?,
                _ => {}
            }
        }
        let required: u64 = ((1 << (LAST_REQUIRED_TAG + 1)) - 1) & !1;
        if seen_tags & required != required {
            return Err(corruption(format!("missing records (present bitmap {seen_tags:#x})")));
        }
        let expiry_tags = (1 << TAG_EXPIRING_ENTRIES) | (1 << TAG_EARLIEST_EXPIRY) | (1 << TAG_LATEST_EXPIRY);
        let expiry = seen_tags & expiry_tags;
        let consistent = properties.expiry.entries > 0 && properties.expiry.earliest_us <= properties.expiry.latest_us;
        if expiry != 0 && (expiry != expiry_tags || !consistent) {
            return Err(corruption("expiry records are incomplete or inconsistent".to_string()));
        }
        Ok(properties)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use std::path::PathBuf;

    fn sample() -> TableProperties {
        TableProperties {
            num_entries: 10,
            num_deletions: 2,
            raw_key_bytes: 300,
            raw_value_bytes: 1 << 40,
            data_size_bytes: 4096,
            index_size_bytes: 77,
            filter_size_bytes: 69,
            num_data_blocks: 1,
            file_size_bytes: 0,
            smallest_key: make_internal_key(b"a", 5, ValueKind::Put),
            largest_key: make_internal_key(b"z", 9, ValueKind::Delete),
            smallest_sequence: 5,
            largest_sequence: 9,
            compression: Compression::Zstd,
            format_version: 1,
            comparator_name: "riptide.reverse_bytewise".to_string(),
            expiry: TableExpiry::default(),
            num_merge_operands: 0,
        }
    }

    #[test]
    fn round_trip_and_skips_unknown_tags() {
        let properties = sample();
        let mut encoded = Vec::new();
        properties.encode(&mut encoded);
        let path = PathBuf::from("t.sst");
        assert_eq!(TableProperties::decode(&path, 0, &encoded).unwrap(), properties);
        put_bytes(&mut encoded, 99, b"from the future");
        assert_eq!(TableProperties::decode(&path, 0, &encoded).unwrap(), properties);
    }

    #[test]
    fn expiries_round_trip_and_must_come_whole_and_ordered() {
        let path = PathBuf::from("t.sst");
        let with_expiry = TableProperties {
            expiry: TableExpiry { entries: 3, earliest_us: 1_000, latest_us: 9_000_000 },
            num_merge_operands: 4,
            ..sample()
        };
        let mut encoded = Vec::new();
        with_expiry.encode(&mut encoded);
        assert_eq!(TableProperties::decode(&path, 0, &encoded).unwrap(), with_expiry);
        let mut without_latest = Vec::new();
        sample().encode(&mut without_latest);
        put_number(&mut without_latest, TAG_EXPIRING_ENTRIES, 3);
        put_number(&mut without_latest, TAG_EARLIEST_EXPIRY, 1_000);
        assert!(TableProperties::decode(&path, 0, &without_latest).unwrap_err().is_corruption());
        let mut reversed = without_latest.clone();
        put_number(&mut reversed, TAG_LATEST_EXPIRY, 999);
        assert!(TableProperties::decode(&path, 0, &reversed).unwrap_err().is_corruption());
        let mut none_counted = Vec::new();
        sample().encode(&mut none_counted);
        put_number(&mut none_counted, TAG_EXPIRING_ENTRIES, 0);
        put_number(&mut none_counted, TAG_EARLIEST_EXPIRY, 1);
        put_number(&mut none_counted, TAG_LATEST_EXPIRY, 2);
        assert!(TableProperties::decode(&path, 0, &none_counted).unwrap_err().is_corruption());
    }

    #[test]
    fn tables_without_a_comparator_name_are_bytewise() {
        let mut encoded = Vec::new();
        sample().encode(&mut encoded);
        let path = PathBuf::from("t.sst");
        // The name is the last record; a table written before it existed ends before it.
        let mut name_record = Vec::new();
        put_bytes(&mut name_record, TAG_COMPARATOR_NAME, sample().comparator_name.as_bytes());
        let older = &encoded[..encoded.len() - name_record.len()];
        let decoded = TableProperties::decode(&path, 0, older).unwrap();
        assert_eq!(decoded.comparator_name, BYTEWISE_COMPARATOR_NAME);
        assert_eq!(decoded, TableProperties { comparator_name: BYTEWISE_COMPARATOR_NAME.to_string(), ..sample() });

        let mut not_utf8 = older.to_vec();
        put_bytes(&mut not_utf8, TAG_COMPARATOR_NAME, &[0xff, 0xfe]);
        assert!(TableProperties::decode(&path, 0, &not_utf8).unwrap_err().is_corruption());
        let mut twice = encoded.clone();
        put_bytes(&mut twice, TAG_COMPARATOR_NAME, b"riptide.bytewise");
        assert!(TableProperties::decode(&path, 0, &twice).unwrap_err().is_corruption());
    }

    #[test]
    fn malformed_properties_are_corruption() {
        let mut encoded = Vec::new();
        sample().encode(&mut encoded);
        let path = PathBuf::from("t.sst");
        // The optional comparator name is last; a prefix that ends just before it is whole.
        let mut name_record = Vec::new();
        put_bytes(&mut name_record, TAG_COMPARATOR_NAME, sample().comparator_name.as_bytes());
        let without_name = encoded.len() - name_record.len();
        for length in (0..encoded.len()).filter(|&length| length != without_name) {
            assert!(TableProperties::decode(&path, 0, &encoded[..length]).unwrap_err().is_corruption());
        }
        let mut duplicated = encoded.clone();
        put_number(&mut duplicated, TAG_NUM_ENTRIES, 1);
        assert!(TableProperties::decode(&path, 0, &duplicated).is_err());
        for position in 0..encoded.len() {
            let mut damaged = encoded.clone();
            damaged[position] ^= 0xff;
            let _ = TableProperties::decode(&path, 0, &damaged);
        }
    }
}
