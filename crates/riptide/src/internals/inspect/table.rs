//! Table files: the footer, properties, filter, index and every data block, each with its
//! offset, size and checksum, and (on request) every entry; damage to one data block is
//! reported and the next block is read, so that everything readable can be salvaged.
//!
//! Each structure is decoded by the engine's own decoder (`Footer::decode`,
//! `decode_stored_block`, `TableProperties::decode`, `Block`, `BloomFilter::decode`); the
//! engine's `Table::open` is run too, for the checks that tie the structures together. On top
//! of them this module checks what a read checks only for the keys it touches: every entry's
//! key is a valid internal key, keys increase strictly within and across blocks in the table's
//! order, each block lies between its index separators, and the counts agree with the
//! properties.
//!
//! Concurrency contract: pure functions over a file read once.
//!
//! Invariants: a data block whose checksum, decompression or decoding fails contributes no
//! entries; every damaged region names the table and the offset of the structure at fault.

use std::path::{Path, PathBuf};

use super::{builtin_comparator, parse_internal_key, read_file, DamagedRange, KeyParts};
use crate::coding::read_u32;
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};
use crate::sstable::block::Block;
use crate::sstable::bloom::BloomFilter;
use crate::sstable::format::{
    block_checksum, decode_stored_block, BlockHandle, Footer, BLOCK_TRAILER_SIZE_BYTES, FOOTER_SIZE_BYTES,
};
use crate::sstable::{Table, TableProperties};

/// The footer's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FooterSummary {
    /// Offset of the footer.
    pub offset: u64,
    /// The index block, as (offset, stored size).
    pub index: (u64, u64),
    /// The filter block, if any.
    pub filter: Option<(u64, u64)>,
    /// The properties block.
    pub properties: (u64, u64),
    /// The format version.
    pub format_version: u32,
    /// The footer's stored checksum (it matched).
    pub checksum: u32,
}

/// The properties block's fields (see `docs/format/sstable.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertiesSummary {
    /// Entries, puts and deletes.
    pub entries: u64,
    /// Deletes.
    pub deletions: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// End of the data region.
    pub data_size_bytes: u64,
    /// Stored index block plus trailer.
    pub index_size_bytes: u64,
    /// Stored filter block plus trailer (0: none).
    pub filter_size_bytes: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// The first internal key.
    pub smallest_key: Vec<u8>,
    /// The last internal key.
    pub largest_key: Vec<u8>,
    /// The smallest sequence number.
    pub smallest_sequence: u64,
    /// The largest sequence number.
    pub largest_sequence: u64,
    /// The configured compression of data blocks.
    pub compression: String,
    /// The table format version.
    pub format_version: u32,
    /// The comparator that orders the keys.
    pub comparator: String,
}

impl PropertiesSummary {
    fn from_properties(properties: &TableProperties) -> PropertiesSummary {
        PropertiesSummary {
            entries: properties.num_entries,
            deletions: properties.num_deletions,
            raw_key_bytes: properties.raw_key_bytes,
            raw_value_bytes: properties.raw_value_bytes,
            data_size_bytes: properties.data_size_bytes,
            index_size_bytes: properties.index_size_bytes,
            filter_size_bytes: properties.filter_size_bytes,
            data_blocks: properties.num_data_blocks,
            smallest_key: properties.smallest_key.clone(),
            largest_key: properties.largest_key.clone(),
            smallest_sequence: properties.smallest_sequence,
            largest_sequence: properties.largest_sequence,
            compression: format!("{:?}", properties.compression),
            format_version: properties.format_version,
            comparator: properties.comparator_name.clone(),
        }
    }
}

/// The filter block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterSummary {
    /// Its offset.
    pub offset: u64,
    /// Its stored size, without the trailer.
    pub size_bytes: u64,
    /// The stored checksum.
    pub checksum: u32,
    /// Whether it decodes.
    pub valid: bool,
}

/// One data block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockReport {
    /// Offset of the block in the file.
    pub offset: u64,
    /// Stored size, without the 5-byte trailer.
    pub size_bytes: u64,
    /// The stored compression type name (`none`, `lz4`, `zstd`, `snappy`, or the unknown code).
    pub compression: String,
    /// The stored checksum.
    pub stored_checksum: u32,
    /// The checksum computed over the stored bytes.
    pub computed_checksum: u32,
    /// Size after decompression (0 when it failed).
    pub uncompressed_bytes: u64,
    /// Entries decoded.
    pub entries: u64,
    /// Its first and last keys, when it decoded.
    pub first_key: Option<Vec<u8>>,
    /// The last key.
    pub last_key: Option<Vec<u8>>,
    /// What is wrong with it, if anything.
    pub error: Option<String>,
}

/// One entry of a data block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// Offset of its data block.
    pub block_offset: u64,
    /// The decoded internal key.
    pub key: KeyParts,
    /// The value.
    pub value: Vec<u8>,
}

/// Everything read from one table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableReport {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub file_size_bytes: u64,
    /// The footer, when it decoded.
    pub footer: Option<FooterSummary>,
    /// The properties, when they decoded.
    pub properties: Option<PropertiesSummary>,
    /// The filter block, if the table has one.
    pub filter: Option<FilterSummary>,
    /// Entries in the index block (one per data block), when it decoded.
    pub index_entries: Option<u64>,
    /// Every data block the index names, in file order.
    pub blocks: Vec<BlockReport>,
    /// Every entry of the readable blocks, when asked for.
    pub entries: Vec<TableEntry>,
    /// Every problem, with the byte range at fault.
    pub damage: Vec<DamagedRange>,
}

impl TableReport {
    /// Entries in the readable data blocks.
    pub fn readable_entries(&self) -> u64 {
        self.blocks.iter().filter(|block| block.error.is_none()).map(|block| block.entries).sum()
    }
}

/// Reads the table at `path`. Keys are ordered by `comparator` (a built-in comparator's name),
/// or by the one the table's properties name when `None`. With `with_entries`, every entry of
/// every readable block is returned. Only a failure to read the file is an `Err`.
pub fn inspect_table(path: &Path, comparator: Option<&str>, with_entries: bool) -> Result<TableReport> {
    let data = read_file(path)?;
    let mut report =
        TableReport { path: path.to_path_buf(), file_size_bytes: data.len() as u64, ..TableReport::default() };
    let mut inspector = Inspector { path, data: &data, report: &mut report, with_entries };
    inspector.run(comparator);
    Ok(report)
}

/// The state of one inspection.
struct Inspector<'a> {
    path: &'a Path,
    data: &'a [u8],
    report: &'a mut TableReport,
    with_entries: bool,
}

impl Inspector<'_> {
    fn damage(&mut self, start: u64, end: u64, reason: impl Into<String>) {
        self.report.damage.push(DamagedRange {
            file: self.path.to_path_buf(),
            start,
            end,
            reason: reason.into(),
            torn_tail: false,
        });
    }

    fn damage_from_error(&mut self, error: Error, end: u64) {
        match error {
            Error::Corruption { offset, reason, .. } => self.damage(offset, end.max(offset), reason),
            other => self.damage(0, end, other.to_string()),
        }
    }

    /// The stored bytes and trailer of the block at `handle`, if they lie inside `limit`.
    fn stored_block(&self, handle: BlockHandle, limit: u64) -> Option<&[u8]> {
        let end = handle.end_with_trailer().filter(|&end| end <= limit)?;
        self.data.get(usize::try_from(handle.offset).ok()?..usize::try_from(end).ok()?)
    }

    /// Checks and decompresses the block at `handle`, recording damage under `what`.
    fn read_block(&mut self, handle: BlockHandle, limit: u64, what: &str) -> Option<Vec<u8>> {
        let end = handle.end_with_trailer().unwrap_or(u64::MAX);
        let Some(stored) = self.stored_block(handle, limit) else {
            self.damage(
                handle.offset,
                limit,
                format!("{what} block (size {}) extends past offset {limit}", handle.size_bytes),
            );
            return None;
        };
        match decode_stored_block(self.path, handle.offset, stored.to_vec(), true) {
            Ok(contents) => Some(contents),
            Err(error) => {
                self.damage_from_error(error, end);
                None
            }
        }
    }

    fn run(&mut self, comparator: Option<&str>) {
        let file_size = self.data.len() as u64;
        let Some(footer_offset) = file_size.checked_sub(FOOTER_SIZE_BYTES as u64) else {
            self.damage(0, file_size, format!("file of {file_size} bytes is too short for a table"));
            return;
        };
        let footer_bytes = self.data.get(footer_offset as usize..).unwrap_or_default();
        let footer = match Footer::decode(self.path, footer_offset, footer_bytes) {
            Ok(footer) => footer,
            Err(error) => {
                self.damage_from_error(error, file_size);
                self.damage(0, footer_offset, "nothing can be located without the footer");
                return;
            }
        };
        self.report.footer = Some(FooterSummary {
            offset: footer_offset,
            index: (footer.index.offset, footer.index.size_bytes),
            filter: footer.filter.map(|handle| (handle.offset, handle.size_bytes)),
            properties: (footer.properties.offset, footer.properties.size_bytes),
            format_version: footer.format_version,
            checksum: read_u32(footer_bytes, 52).unwrap_or_default(),
        });
        let properties = self.read_block(footer.properties, footer_offset, "properties").and_then(|contents| {
            match TableProperties::decode(self.path, footer.properties.offset, &contents) {
                Ok(properties) => Some(properties),
                Err(error) => {
                    let end = footer.properties.end_with_trailer().unwrap_or(footer_offset);
                    self.damage_from_error(error, end);
                    None
                }
            }
        });
        self.report.properties = properties.as_ref().map(PropertiesSummary::from_properties);
        let comparator_name = comparator
            .map(str::to_string)
            .or_else(|| properties.as_ref().map(|properties| properties.comparator_name.clone()))
            .unwrap_or_else(|| "riptide.bytewise".to_string());
        let key_comparator = builtin_comparator(&comparator_name).map(|comparator| KeyComparator::new(&comparator));
        if let Some(handle) = footer.filter {
            let checksum = self.checksum_of(handle).0;
            let valid = self.read_block(handle, footer_offset, "filter").is_some_and(|contents| {
                match BloomFilter::decode(&contents) {
                    Ok(_) => true,
                    Err(reason) => {
                        let end = handle.end_with_trailer().unwrap_or(footer_offset);
                        self.damage(handle.offset, end, format!("filter block: {reason}"));
                        false
                    }
                }
            });
            self.report.filter =
                Some(FilterSummary { offset: handle.offset, size_bytes: handle.size_bytes, checksum, valid });
        }
        let data_end =
            properties.as_ref().map_or(footer_offset, |properties| properties.data_size_bytes.min(footer_offset));
        let handles = self.index_handles(footer.index, footer_offset, data_end);
        if let Some(handles) = &handles {
            self.report.index_entries = Some(handles.len() as u64);
            self.read_data_blocks(handles, key_comparator.as_ref());
        }
        if self.report.damage.is_empty() {
            if let Some(comparator) = &key_comparator {
                self.open_with_engine(comparator.clone());
            }
            if let Some(properties) = &properties {
                self.check_counts(properties);
            }
        }
    }

    /// The (separator, handle) pairs of the index, or `None` (with the data region reported
    /// unreachable) when the index is damaged.
    fn index_handles(
        &mut self,
        index: BlockHandle,
        footer_offset: u64,
        data_end: u64,
    ) -> Option<Vec<(Vec<u8>, BlockHandle)>> {
        let contents = self.read_block(index, footer_offset, "index");
        let decoded = contents.and_then(|contents| match Block::new(contents) {
            Ok(block) => Some(block),
            Err(corruption) => {
                let end = index.end_with_trailer().unwrap_or(footer_offset);
                self.damage_from_error(corruption.into_error(self.path, index.offset), end);
                None
            }
        });
        let Some(block) = decoded else {
            self.damage(0, data_end, "data blocks unreachable: the index is damaged");
            return None;
        };
        let mut handles = Vec::new();
        let mut iterator = Block::iter(&block);
        iterator.seek_to_first();
        while iterator.valid() {
            match BlockHandle::decode_varint(iterator.value()) {
                Some(handle) => handles.push((iterator.key().to_vec(), handle)),
                None => {
                    self.damage(index.offset, index.offset + index.size_bytes, "index block: bad block handle");
                }
            }
            iterator.next();
        }
        if let Some(corruption) = iterator.corruption() {
            let end = index.end_with_trailer().unwrap_or(footer_offset);
            self.damage_from_error(corruption.into_error(self.path, index.offset), end);
        }
        Some(handles)
    }

    /// The stored and computed checksums of the block at `handle` (zeros if out of bounds).
    fn checksum_of(&self, handle: BlockHandle) -> (u32, u32) {
        let Some(stored) = self.stored_block(handle, self.data.len() as u64) else {
            return (0, 0);
        };
        let length = stored.len() - BLOCK_TRAILER_SIZE_BYTES;
        let block_type = stored.get(length).copied().unwrap_or(u8::MAX);
        (read_u32(stored, length + 1).unwrap_or_default(), block_checksum(&stored[..length], block_type))
    }

    fn read_data_blocks(&mut self, handles: &[(Vec<u8>, BlockHandle)], comparator: Option<&KeyComparator>) {
        let mut previous_key: Option<Vec<u8>> = None;
        let mut previous_separator: Option<Vec<u8>> = None;
        for (separator, handle) in handles {
            let handle = *handle;
            let end = handle.end_with_trailer().unwrap_or(u64::MAX);
            let (stored_checksum, computed_checksum) = self.checksum_of(handle);
            let compression = self
                .stored_block(handle, self.data.len() as u64)
                .and_then(|stored| stored.get(stored.len() - BLOCK_TRAILER_SIZE_BYTES))
                .map_or_else(|| "?".to_string(), |&code| compression_name(code));
            let mut block_report = BlockReport {
                offset: handle.offset,
                size_bytes: handle.size_bytes,
                compression,
                stored_checksum,
                computed_checksum,
                uncompressed_bytes: 0,
                entries: 0,
                first_key: None,
                last_key: None,
                error: None,
            };
            let damage_before = self.report.damage.len();
            let contents = self.read_block(handle, self.data.len() as u64, "data");
            let mut entries = Vec::new();
            if let Some(contents) = contents {
                block_report.uncompressed_bytes = contents.len() as u64;
                match Block::new(contents) {
                    Err(corruption) => self.damage_from_error(corruption.into_error(self.path, handle.offset), end),
                    Ok(block) => {
                        let mut iterator = Block::iter(&block);
                        iterator.seek_to_first();
                        while iterator.valid() {
                            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
                            iterator.next();
                        }
                        if let Some(corruption) = iterator.corruption() {
                            self.damage_from_error(corruption.into_error(self.path, handle.offset), end);
                        }
                    }
                }
            }
            if self.report.damage.len() == damage_before {
                self.check_block_keys(
                    &entries,
                    handle,
                    separator,
                    previous_separator.as_deref(),
                    previous_key.as_deref(),
                    comparator,
                );
            }
            if self.report.damage.len() > damage_before {
                block_report.error = self.report.damage.last().map(|damage| damage.reason.clone());
                self.report.blocks.push(block_report);
                previous_separator = Some(separator.clone());
                continue;
            }
            block_report.entries = entries.len() as u64;
            block_report.first_key = entries.first().map(|(key, _)| key.clone());
            block_report.last_key = entries.last().map(|(key, _)| key.clone());
            if let Some((key, _)) = entries.last() {
                previous_key = Some(key.clone());
            }
            previous_separator = Some(separator.clone());
            self.report.blocks.push(block_report);
            if self.with_entries {
                for (key, value) in entries {
                    if let Some(key) = parse_internal_key(&key) {
                        self.report.entries.push(TableEntry { block_offset: handle.offset, key, value });
                    }
                }
            }
        }
    }

    /// Every key is an internal key, keys increase strictly (also from the previous readable
    /// block), and the block lies after the previous separator and at or before its own.
    fn check_block_keys(
        &mut self,
        entries: &[(Vec<u8>, Vec<u8>)],
        handle: BlockHandle,
        separator: &[u8],
        previous_separator: Option<&[u8]>,
        previous_key: Option<&[u8]>,
        comparator: Option<&KeyComparator>,
    ) {
        let end = handle.end_with_trailer().unwrap_or(u64::MAX);
        if entries.is_empty() {
            self.damage(handle.offset, end, "data block holds no entries");
            return;
        }
        if let Some(index) = entries.iter().position(|(key, _)| parse_internal_key(key).is_none()) {
            self.damage(handle.offset, end, format!("entry {index} of the block is not a valid internal key"));
            return;
        }
        let Some(comparator) = comparator else {
            return;
        };
        let mut last = previous_key;
        for (index, (key, _)) in entries.iter().enumerate() {
            if let Some(last) = last {
                if comparator.compare_internal_keys(last, key).is_ge() {
                    let which = if index == 0 {
                        "the first key is not after the previous block's last key".to_string()
                    } else {
                        format!("key {index} of the block is not after key {}", index - 1)
                    };
                    self.damage(handle.offset, end, format!("keys out of order: {which}"));
                    return;
                }
            }
            last = Some(key);
        }
        let first = &entries[0].0;
        let last_key = &entries[entries.len() - 1].0;
        if comparator.compare_internal_keys(last_key, separator).is_gt() {
            self.damage(handle.offset, end, "the block's last key is after its index separator");
        } else if previous_separator.is_some_and(|previous| comparator.compare_internal_keys(first, previous).is_le()) {
            self.damage(handle.offset, end, "the block's first key is not after the previous index separator");
        }
    }

    /// The engine's own open of the table, for the checks that relate its structures.
    fn open_with_engine(&mut self, comparator: KeyComparator) {
        let file_system = OsFileSystem;
        let opened = file_system
            .open(self.path)
            .and_then(|file| Table::open(file, self.path.to_path_buf(), 0, None, comparator, false));
        if let Err(error) = opened {
            let end = self.data.len() as u64;
            self.damage_from_error(error, end);
        }
    }

    /// The entries read agree with the properties' counts and key range.
    fn check_counts(&mut self, properties: &TableProperties) {
        let Some(footer) = self.report.footer.clone() else {
            return;
        };
        let properties_end = footer.properties.0 + footer.properties.1 + BLOCK_TRAILER_SIZE_BYTES as u64;
        let readable = self.report.readable_entries();
        if readable != properties.num_entries {
            self.damage(
                footer.properties.0,
                properties_end,
                format!("properties say {} entries, the data blocks hold {readable}", properties.num_entries),
            );
        }
        let first = self.report.blocks.first().and_then(|block| block.first_key.clone());
        let last = self.report.blocks.last().and_then(|block| block.last_key.clone());
        if first.as_deref() != Some(&properties.smallest_key[..])
            || last.as_deref() != Some(&properties.largest_key[..])
        {
            self.damage(
                footer.properties.0,
                properties_end,
                "properties' key range differs from the data blocks' keys",
            );
        }
    }
}

/// The name of a stored block type.
fn compression_name(code: u8) -> String {
    match code {
        0 => "none".to_string(),
        1 => "lz4".to_string(),
        2 => "zstd".to_string(),
        3 => "snappy".to_string(),
        other => format!("unknown type {other}"),
    }
}
