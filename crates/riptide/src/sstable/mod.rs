//! Sorted string tables: the immutable files that hold flushed and compacted data.
//!
//! A table is a sequence of prefix-compressed data blocks of sorted internal keys, followed by a
//! whole-table bloom filter over user keys, a properties block, an index block that maps a
//! separator key to each data block, and a fixed 64-byte footer. Every stored block carries a
//! five-byte trailer (compression type and masked CRC32C). The byte-level layout, format version
//! 1, is documented in `docs/format/sstable.md`.
//!
//! Modules: [`block`] (block encoding and the block cursor), [`bloom`] (the filter), [`format`]
//! (handles, trailers, compression, footer), [`index`] (the in-memory guide to a table's index
//! block), [`properties`] (table statistics), [`builder`]
//! ([`TableBuilder`]) and [`reader`] ([`Table`], [`TableIterator`]).
//!
//! Concurrency contract: a [`TableBuilder`] is owned by one thread; an open [`Table`] is
//! immutable and shared as `Arc<Table>` by any number of threads. Invariants: tables hold at
//! least one entry; keys are strictly increasing internal keys under the column family's
//! comparator, whose name the table records; nothing read from a file is
//! trusted before it is checked, so damaged files produce [`crate::Error::Corruption`], never a
//! panic.

pub(crate) mod block;
pub(crate) mod bloom;
pub(crate) mod builder;
pub(crate) mod format;
pub(crate) mod index;
pub(crate) mod properties;
pub(crate) mod reader;

#[cfg(test)]
mod tests;

pub(crate) use block::Block;
pub(crate) use builder::TableBuilder;
pub(crate) use properties::TableProperties;
pub(crate) use reader::{BlockReadOptions, Table};

use crate::comparator::KeyComparator;
use crate::options::{ColumnFamilyOptions, Compression};

/// The options a table builder needs, taken from the column family's options.
#[derive(Clone, Debug)]
pub(crate) struct TableOptions {
    /// Target uncompressed size of a data block.
    pub block_size_bytes: usize,
    /// Entries between restart points in data blocks (at least 1).
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Data block compression.
    pub compression: Compression,
    /// The order of the keys, recorded in the table's properties.
    pub comparator: KeyComparator,
}

impl TableOptions {
    /// The options of tables a column family writes to `level`; `bottommost` when they hold
    /// the bottommost data of their key range (which may be compressed differently).
    pub(crate) fn for_level(options: &ColumnFamilyOptions, level: usize, bottommost: bool) -> TableOptions {
        TableOptions {
            block_size_bytes: options.block_size_bytes,
            block_restart_interval: options.block_restart_interval,
            bloom_bits_per_key: options.bloom_bits_per_key,
            compression: options.compression_for_level(level, bottommost),
            comparator: KeyComparator::new(&options.comparator),
        }
    }
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions::for_level(&ColumnFamilyOptions::default(), 0, false)
    }
}

/// Entry points for the criterion benches (`benches/sstable.rs`). Not a supported API: names
/// and signatures change without notice.
#[doc(hidden)]
pub mod bench_support {
    use std::path::Path;
    use std::sync::Arc;

    use super::block::{Block, BlockBuilder};
    use super::bloom::{BloomFilter, BloomFilterBuilder};
    use super::{BlockReadOptions, Table, TableBuilder, TableOptions};
    use crate::cache::BlockCache;
    use crate::comparator::KeyComparator;
    use crate::fs::{FileSystem, OsFileSystem};
    use crate::iterator::InternalIterator;
    use crate::key::{make_internal_key, ValueKind};
    use crate::options::Compression;

    /// The internal key of a put of `user_key` at `sequence`.
    pub fn internal_key(user_key: &[u8], sequence: u64) -> Vec<u8> {
        make_internal_key(user_key, sequence, ValueKind::Put)
    }

    /// Encodes one uncompressed block from entries sorted by internal key.
    pub fn build_block(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
        let mut builder = BlockBuilder::new(restart_interval);
        for (key, value) in entries {
            builder.add(key, value);
        }
        builder.finish().to_vec()
    }

    /// A decoded block.
    pub struct DecodedBlock(Arc<Block>);

    impl DecodedBlock {
        /// Validates and wraps encoded block bytes; `None` if they are malformed.
        pub fn decode(bytes: Vec<u8>) -> Option<DecodedBlock> {
            Block::new(bytes).ok().map(|block| DecodedBlock(Arc::new(block)))
        }

        /// Seeks to the first entry `>= target` and returns its value length.
        pub fn seek(&self, target: &[u8]) -> Option<usize> {
            let mut iter = Block::iter(&*self.0);
            iter.seek(target, &KeyComparator::Bytewise);
            iter.valid().then(|| iter.value().len())
        }

        /// Walks every entry and returns the total key and value bytes seen.
        pub fn scan(&self) -> usize {
            let mut iter = Block::iter(&*self.0);
            let mut total = 0;
            iter.seek_to_first();
            while iter.valid() {
                total += iter.key().len() + iter.value().len();
                iter.next();
            }
            total
        }
    }

    /// A bloom filter over a set of user keys.
    pub struct Bloom(BloomFilter);

    impl Bloom {
        /// Builds a filter over `keys` with `bits_per_key` bits per key.
        pub fn build(keys: &[Vec<u8>], bits_per_key: u32) -> Bloom {
            let mut builder = BloomFilterBuilder::new(bits_per_key);
            for key in keys {
                builder.add_key(key);
            }
            let mut encoded = Vec::new();
            builder.finish(&mut encoded);
            match BloomFilter::decode(&encoded) {
                Ok(filter) => Bloom(filter),
                Err(reason) => panic!("a freshly built filter must decode: {reason}"),
            }
        }

        /// False when `key` was certainly not added.
        pub fn may_contain(&self, key: &[u8]) -> bool {
            self.0.may_contain(key)
        }
    }

    /// A table written to a real file and opened with a block cache.
    pub struct BenchTable(Arc<Table>);

    impl BenchTable {
        /// Writes `entries` (sorted internal keys) to `path` and opens the table with a 64 MiB
        /// block cache.
        pub fn build(
            path: &Path,
            entries: &[(Vec<u8>, Vec<u8>)],
            compression: Compression,
        ) -> crate::Result<BenchTable> {
            let file_system = OsFileSystem;
            let options = TableOptions { compression, ..TableOptions::default() };
            let mut builder = TableBuilder::new(file_system.create(path)?, path.to_path_buf(), options);
            for (key, value) in entries {
                builder.add(key, value)?;
            }
            builder.finish()?;
            let file = file_system.open(path)?;
            let cache = Some(BlockCache::new(64 << 20));
            Ok(BenchTable(Table::open(file, path.to_path_buf(), 1, cache, KeyComparator::Bytewise, true)?))
        }

        /// Looks up an internal key; returns the value length when its user key is present.
        pub fn get(&self, lookup_key: &[u8]) -> crate::Result<Option<usize>> {
            let options = BlockReadOptions { verify_checksums: true, fill_cache: true };
            Ok(self.0.get(lookup_key, options)?.map(|(_, value)| value.len()))
        }

        /// Iterates over the whole table and returns the number of entries.
        pub fn scan(&self) -> crate::Result<usize> {
            let mut iter = self.0.iter(BlockReadOptions { verify_checksums: true, fill_cache: true });
            let mut count = 0;
            iter.seek_to_first();
            while iter.valid() {
                count += 1;
                iter.next();
            }
            iter.status()?;
            Ok(count)
        }
    }
}
