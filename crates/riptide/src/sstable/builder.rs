//! [`TableBuilder`]: writes one table file from internal keys added in increasing order.
//!
//! The file is written front to back: data blocks as they fill, then at [`TableBuilder::finish`]
//! the filter block, the properties block, the index block and the footer, followed by one sync.
//!
//! Concurrency contract: a builder is owned by one thread (flush or compaction). Invariants: keys
//! are added in strictly increasing internal-key order under the column family's comparator
//! (checked by `debug_assert`, as is the order of index separators); every index entry maps a
//! separator that is `>=` every key of its data block and `<` every key of the next block
//! (shortened for the bytewise order only: a separator between two keys is a byte-level
//! construction, and for any other order the block's last key is used whole); a table has at least
//! one entry (finishing an empty builder is an [`Error::InvalidArgument`], and the caller should
//! delete the file). After any error the builder must be dropped and the partial file deleted.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{self, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::memory_charge::MemoryCharge;
use crate::sstable::block::BlockBuilder;
use crate::sstable::bloom::BloomFilterBuilder;
use crate::sstable::format::{
    block_trailer, BlockCompressor, BlockHandle, Footer, BLOCK_TRAILER_SIZE_BYTES, BLOCK_TYPE_NONE, FOOTER_SIZE_BYTES,
    FORMAT_VERSION,
};
use crate::sstable::properties::TableProperties;
use crate::sstable::TableOptions;

/// Writes one table file.
pub(crate) struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    options: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<BloomFilterBuilder>,
    compressor: BlockCompressor,
    /// The handle of the last flushed data block, waiting for its index entry until the first
    /// key of the next block is known (so the separator can be shortened).
    pending_handle: Option<BlockHandle>,
    /// Reused buffer for index separators and encoded handles.
    separator: Vec<u8>,
    /// Debug builds: the previous index separator, to check that separators increase (empty
    /// before the first; a separator is an internal key, never empty).
    last_separator: Vec<u8>,
    handle_encoding: Vec<u8>,
    last_key: Vec<u8>,
    /// Bytes written to the file so far.
    offset: u64,
    properties: TableProperties,
    /// The builder's buffers, charged to the memory cap when the engine asked for it; updated
    /// after every data block and released when the builder is dropped.
    memory_charge: Option<MemoryCharge>,
}

impl TableBuilder {
    /// Starts a table that will be written to `file` (whose name is `path`, for error messages).
    pub(crate) fn new(mut file: Box<dyn WritableFile>, path: PathBuf, options: TableOptions) -> TableBuilder {
        file.start_writeback_every(crate::fs::TABLE_WRITEBACK_INTERVAL_BYTES);
        let offset = file.len();
        debug_assert_eq!(offset, 0, "a table starts at the beginning of a new file");
        TableBuilder {
            data_block: BlockBuilder::new(options.block_restart_interval),
            index_block: BlockBuilder::new(1),
            filter: (options.bloom_bits_per_key > 0).then(|| BloomFilterBuilder::new(options.bloom_bits_per_key)),
            compressor: BlockCompressor::new(options.compression),
            pending_handle: None,
            separator: Vec::new(),
            last_separator: Vec::new(),
            handle_encoding: Vec::new(),
            last_key: Vec::new(),
            offset,
            // The smallest sequence starts at the maximum so that the first entry lowers it.
            properties: TableProperties {
                smallest_sequence: u64::MAX,
                comparator_name: options.comparator.name().to_string(),
                ..TableProperties::empty(options.compression, FORMAT_VERSION)
            },
            file,
            path,
            options,
            memory_charge: None,
        }
    }

    /// Charges the builder's buffers (index, filter and block builders) to `charge` from now on.
    pub(crate) fn with_memory_charge(mut self, charge: MemoryCharge) -> TableBuilder {
        self.memory_charge = Some(charge);
        self.update_memory_charge(0);
        self
    }

    /// Bytes the builder holds in memory: its block, index and filter buffers.
    fn memory_bytes(&self) -> usize {
        self.data_block.memory_bytes()
            + self.index_block.memory_bytes()
            + self.filter.as_ref().map_or(0, BloomFilterBuilder::memory_bytes)
            + self.last_key.capacity()
    }

    /// Charges the buffers plus `extra_bytes` about to be allocated.
    fn update_memory_charge(&mut self, extra_bytes: usize) {
        let bytes = (self.memory_bytes() + extra_bytes) as u64;
        if let Some(charge) = self.memory_charge.as_mut() {
            charge.set(bytes);
        }
    }

    /// Adds an entry. Keys must be well-formed internal keys in strictly increasing order.
    pub(crate) fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        let parsed = key::parse_internal_key(internal_key);
        debug_assert!(parsed.is_some(), "TableBuilder::add needs a well-formed internal key");
        debug_assert!(
            self.properties.num_entries == 0
                || self.options.comparator.compare_internal_keys(&self.last_key, internal_key).is_lt(),
            "TableBuilder keys must be strictly increasing"
        );
        let Some(parsed) = parsed else {
            return Err(Error::invalid("TableBuilder::add needs a well-formed internal key"));
        };
        if let Some(handle) = self.pending_handle.take() {
            // The previous block is flushed; now that its successor's first key is known, its
            // index entry can use a short separator. Shortening works on bytes, so it is only
            // valid for the bytewise order; the last key itself separates in every order.
            if self.options.comparator.is_bytewise() {
                shortest_separator(&self.last_key, internal_key, &mut self.separator);
            } else {
                self.separator.clear();
                self.separator.extend_from_slice(&self.last_key);
            }
            self.add_index_entry(handle);
        }
        let new_user_key = self.properties.num_entries == 0 || key::user_key(&self.last_key) != parsed.user_key;
        if let Some(filter) = self.filter.as_mut() {
            // Versions of one user key are adjacent; the filter needs each user key once.
            if new_user_key {
                filter.add_key(parsed.user_key);
            }
        }
        if self.properties.num_entries == 0 {
            self.properties.smallest_key = internal_key.to_vec();
        }
        self.properties.num_entries += 1;
        if parsed.kind.is_deletion() {
            self.properties.num_deletions += 1;
        } else if parsed.kind == key::ValueKind::Merge {
            self.properties.num_merge_operands += 1;
        } else if parsed.kind == key::ValueKind::PutWithExpiry {
            if let Some((expires_at_us, _)) = crate::ttl::split_expiring(value) {
                self.properties.expiry.add(expires_at_us);
            }
        }
        self.properties.raw_key_bytes += internal_key.len() as u64;
        self.properties.raw_value_bytes += value.len() as u64;
        self.properties.smallest_sequence = self.properties.smallest_sequence.min(parsed.sequence);
        self.properties.largest_sequence = self.properties.largest_sequence.max(parsed.sequence);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        self.data_block.add(internal_key, value);
        if self.data_block.estimated_size_bytes() >= self.options.block_size_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Entries added so far.
    pub(crate) fn num_entries(&self) -> u64 {
        self.properties.num_entries
    }

    /// The size the file would have if finished now (the metadata is estimated).
    pub(crate) fn estimated_file_size_bytes(&self) -> u64 {
        let filter = self.filter.as_ref().map_or(0, |filter| filter.estimated_size_bytes());
        let metadata = self.index_block.estimated_size_bytes() + filter + 256 + FOOTER_SIZE_BYTES;
        self.offset + self.data_block.estimated_size_bytes() as u64 + metadata as u64
    }

    /// Writes the remaining data block and the filter, properties and index blocks and the
    /// footer, syncs the file and returns the table's properties.
    pub(crate) fn finish(mut self) -> Result<TableProperties> {
        if self.properties.num_entries == 0 {
            return Err(Error::invalid(format!(
                "refusing to write {}: a table needs at least one entry",
                self.path.display()
            )));
        }
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        if let Some(handle) = self.pending_handle.take() {
            // The last block's separator is its last key: there is no successor to shorten
            // towards, and the largest key of the table keeps lookups past it cheap.
            self.separator.clear();
            self.separator.extend_from_slice(&self.last_key);
            self.add_index_entry(handle);
        }
        self.properties.data_size_bytes = self.offset;
        self.properties.largest_key = self.last_key.clone();
        // Finishing allocates the encoded filter and a copy of the index next to the buffers.
        let finishing_bytes = self.filter.as_ref().map_or(0, BloomFilterBuilder::estimated_size_bytes)
            + self.index_block.estimated_size_bytes();
        self.update_memory_charge(finishing_bytes);

        let filter_handle = match self.filter.take() {
            Some(filter) => {
                let mut encoded = Vec::with_capacity(filter.estimated_size_bytes());
                filter.finish(&mut encoded);
                let handle = self.write_raw_block(&encoded)?;
                self.properties.filter_size_bytes = handle.size_bytes + BLOCK_TRAILER_SIZE_BYTES as u64;
                Some(handle)
            }
            None => None,
        };

        // The index is finished (and compressed, as data blocks are: with long keys and one
        // entry per block it holds a tenth of the table) before the properties, so that its
        // stored size can be recorded there. It is decoded once, at open.
        let (index_type, index_stored) = self.compressor.compress(self.index_block.finish());
        let index_stored = index_stored.to_vec();
        self.properties.index_size_bytes = (index_stored.len() + BLOCK_TRAILER_SIZE_BYTES) as u64;

        let mut properties_contents = Vec::with_capacity(256);
        self.properties.encode(&mut properties_contents);
        let properties_handle = self.write_raw_block(&properties_contents)?;
        let index_handle = self.write_block(&index_stored, index_type)?;

        let footer = Footer {
            index: index_handle,
            filter: filter_handle,
            properties: properties_handle,
            format_version: FORMAT_VERSION,
        };
        self.file.append(&footer.encode())?;
        self.offset += FOOTER_SIZE_BYTES as u64;
        self.file.sync()?;
        self.properties.file_size_bytes = self.offset;
        Ok(self.properties)
    }

    /// Compresses and writes the current data block and remembers its handle for the index.
    fn flush_data_block(&mut self) -> Result<()> {
        debug_assert!(!self.data_block.is_empty());
        // Charged before the writes, so that a job waiting on its file is counted as it is.
        self.update_memory_charge(0);
        let raw = self.data_block.finish();
        let (block_type, stored) = self.compressor.compress(raw);
        let handle = BlockHandle { offset: self.offset, size_bytes: stored.len() as u64 };
        let trailer = block_trailer(stored, block_type);
        self.file.append(stored)?;
        self.file.append(&trailer)?;
        self.offset += (stored.len() + BLOCK_TRAILER_SIZE_BYTES) as u64;
        self.data_block.reset();
        self.properties.num_data_blocks += 1;
        self.pending_handle = Some(handle);
        Ok(())
    }

    /// Writes a metadata block uncompressed (it is read once, at open) and returns its handle.
    fn write_raw_block(&mut self, contents: &[u8]) -> Result<BlockHandle> {
        self.write_block(contents, BLOCK_TYPE_NONE)
    }

    /// Writes `stored`, a block in the stored form `block_type` names, with its trailer, and
    /// returns its handle.
    fn write_block(&mut self, stored: &[u8], block_type: u8) -> Result<BlockHandle> {
        let handle = BlockHandle { offset: self.offset, size_bytes: stored.len() as u64 };
        self.file.append(stored)?;
        self.file.append(&block_trailer(stored, block_type))?;
        self.offset += (stored.len() + BLOCK_TRAILER_SIZE_BYTES) as u64;
        Ok(handle)
    }

    /// Adds `separator -> handle` to the index block.
    fn add_index_entry(&mut self, handle: BlockHandle) {
        debug_assert!(
            self.last_separator.is_empty()
                || self.options.comparator.compare_internal_keys(&self.last_separator, &self.separator).is_lt(),
            "index separators must be strictly increasing"
        );
        if cfg!(debug_assertions) {
            self.last_separator.clear();
            self.last_separator.extend_from_slice(&self.separator);
        }
        self.handle_encoding.clear();
        handle.encode_varint(&mut self.handle_encoding);
        self.index_block.add(&self.separator, &self.handle_encoding);
    }
}

/// Writes into `out` a short internal key `s` with `last <= s < next` in the bytewise order,
/// where `last` is the last key of a data block and `next` the first key of the following block.
/// Only for bytewise tables: the construction below relies on the order of bytes.
///
/// When the user keys differ at some byte that can be incremented without reaching the next
/// user key, the separator is the user key of `last` cut after that byte, incremented, with the
/// largest possible trailer (maximum sequence, seek kind), which sorts before every other entry
/// of that user key. Its user key is strictly between the two user keys, so the internal-key
/// order holds whatever the trailers are. Otherwise the separator is `last` itself.
pub(crate) fn shortest_separator(last: &[u8], next: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let last_user_key = key::user_key(last);
    let next_user_key = key::user_key(next);
    let common = last_user_key.iter().zip(next_user_key).take_while(|(a, b)| a == b).count();
    if common < last_user_key.len() && common < next_user_key.len() {
        let last_byte = last_user_key[common];
        let next_byte = next_user_key[common];
        // Shortening helps only when the cut key is shorter than the original.
        if last_byte < u8::MAX && last_byte + 1 < next_byte && common + 1 < last_user_key.len() {
            out.extend_from_slice(&last_user_key[..common]);
            out.push(last_byte + 1);
            out.extend_from_slice(&key::pack_trailer(MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK).to_le_bytes());
            debug_assert!(key::compare_internal_keys(last, out).is_lt());
            debug_assert!(key::compare_internal_keys(out, next).is_lt());
            return;
        }
    }
    out.extend_from_slice(last);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn separator_is_between_and_short_when_possible() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdefgh", b"abzzzz"),
            (b"abc", b"abd"),
            (b"abc", b"abcd"),
            (b"ab\xff\xff", b"ac"),
            (b"apple", b"banana"),
            (b"k", b"k"),
            (b"", b"a"),
        ];
        let mut out = Vec::new();
        for &(last_user, next_user) in cases {
            let last = make_internal_key(last_user, 10, ValueKind::Put);
            let next = if last_user == next_user {
                make_internal_key(next_user, 9, ValueKind::Put)
            } else {
                make_internal_key(next_user, 50, ValueKind::Delete)
            };
            shortest_separator(&last, &next, &mut out);
            assert!(key::compare_internal_keys(&last, &out).is_le(), "{last_user:?} {next_user:?}");
            assert!(key::compare_internal_keys(&out, &next).is_lt(), "{last_user:?} {next_user:?}");
            assert!(out.len() <= last.len());
        }
        let last = make_internal_key(b"abcdefgh", 1, ValueKind::Put);
        let next = make_internal_key(b"abzzzz", 1, ValueKind::Put);
        shortest_separator(&last, &next, &mut out);
        assert_eq!(key::user_key(&out), b"abd");
    }
}
