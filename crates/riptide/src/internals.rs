//! Internal types and entry points re-exported for the criterion benches, the fuzz targets and
//! the reliability harness only. Not part of the supported API: names and signatures here change
//! without notice.
//!
//! The [`decode`] module wraps every decoder that reads bytes from disk (WAL records, write
//! batches, version edits, `CURRENT` and the manifest, SSTable footers, properties, index, data
//! and filter blocks, compressed blocks) behind functions that take plain bytes, so that a fuzz
//! target, and the stable test that replays its corpus, can feed them anything. The [`encode`]
//! module builds valid inputs for those decoders, to seed the corpora and to check round trips.
//!
//! Concurrency contract: every function is self-contained (each builds its own in-memory file
//! system where one is needed), so they may run on any number of threads at once.
//!
//! Invariants: no function here panics on any input; the only way a decoder reports bad bytes
//! is an `Err` (invariant I16 in `docs/invariants.md`). A panic reached through these entry
//! points is a bug in the engine's decoders, not in the wrapper.

pub mod inspect;

pub use crate::memtable::bench_support as memtable;
pub use crate::sstable::bench_support as sstable;

/// Diagnostics for the reliability harness: what the engine holds for a key.
pub mod debug {
    pub use crate::db::read::StoredVersion;
    use crate::error::Result;
    use crate::Db;

    /// Every version of `user_key` in `column_family`'s current view (memtable, immutable
    /// memtables newest first, then every table of every level), with the sequence number a
    /// read without a snapshot sees now.
    pub fn key_versions(
        db: &Db,
        column_family: &crate::ColumnFamily,
        user_key: &[u8],
    ) -> Result<(u64, Vec<StoredVersion>)> {
        db.key_versions(column_family, user_key)
    }

    /// Every version of `user_key` in the sources `iterator` (an iterator of `db`) reads: the
    /// memtables and tables it pinned when it was created, with the sequence number it reads at.
    pub fn iterator_key_versions(
        db: &Db,
        iterator: &crate::DbIterator,
        user_key: &[u8],
    ) -> Result<(u64, Vec<StoredVersion>)> {
        db.iterator_key_versions(iterator, user_key)
    }
}

/// Decoders over plain bytes, one per on-disk structure.
pub mod decode {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use crate::batch::WriteBatch;
    use crate::cache::BlockCache;
    use crate::comparator::KeyComparator;
    use crate::db::table_cache::TableCache;
    use crate::error::{Error, Result};
    use crate::fs::{FileSystem, MemFileSystem};
    use crate::iterator::InternalIterator;
    use crate::key::{make_internal_key, ValueKind, MAX_SEQUENCE_NUMBER};
    use crate::options::WalRecovery;
    use crate::sstable::block::Block;
    use crate::sstable::bloom::BloomFilter;
    use crate::sstable::format::{
        decode_stored_block, decode_stored_block_into, DecodedBlock, Footer, FOOTER_SIZE_BYTES,
    };
    use crate::sstable::{BlockReadOptions, Table, TableProperties};
    use crate::version::edit::VersionEdit;
    use crate::version::set::VersionSet;
    use crate::version::tree::FileJanitor;
    use crate::wal::{LogReader, RECORD_HEADER_SIZE_BYTES};

    /// The directory the in-memory decoders put their files in.
    const DIRECTORY: &str = "/fuzz";

    /// What a log reader returned for a whole file.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct LogContents {
        /// Every record returned, as (offset of its header, payload), in file order.
        pub records: Vec<(u64, Vec<u8>)>,
        /// Bytes dropped as a torn tail.
        pub dropped_tail_bytes: u64,
        /// Damaged regions skipped (only under [`WalRecovery::SkipCorrupt`]).
        pub skipped_records: u64,
        /// Bytes in the skipped regions.
        pub skipped_bytes: u64,
        /// Preallocated zeros that ended the file (only for [`wal_records`]).
        pub preallocated_tail_bytes: u64,
    }

    /// Reads every record of a log file held in `data` with `LogReader`, under `policy`, as
    /// the manifest is read (no preallocated tail).
    pub fn log_records(data: &[u8], policy: WalRecovery, torn_tail_allowed: bool) -> Result<LogContents> {
        read_log(LogReader::new(data.to_vec(), PathBuf::from("/fuzz/000001.log"), policy, torn_tail_allowed))
    }

    /// [`log_records`] as a write-ahead log is read: the file may end in preallocated zeros.
    pub fn wal_records(data: &[u8], policy: WalRecovery, torn_tail_allowed: bool) -> Result<LogContents> {
        let reader = LogReader::new(data.to_vec(), PathBuf::from("/fuzz/000001.log"), policy, torn_tail_allowed);
        read_log(reader.allow_preallocated_tail())
    }

    fn read_log(mut reader: LogReader) -> Result<LogContents> {
        let mut contents = LogContents::default();
        while let Some((offset, payload)) = reader.next_record()? {
            contents.records.push((offset, payload.to_vec()));
        }
        contents.dropped_tail_bytes = reader.dropped_tail_bytes();
        contents.skipped_records = reader.skipped_records();
        contents.skipped_bytes = reader.skipped_bytes();
        contents.preallocated_tail_bytes = reader.preallocated_tail_bytes();
        Ok(contents)
    }

    /// The size of a log record's header, so callers can account for the bytes of a log.
    pub const LOG_RECORD_HEADER_SIZE_BYTES: usize = RECORD_HEADER_SIZE_BYTES;

    /// Decodes a write batch as recovery does (`WriteBatch::from_data`).
    pub fn write_batch(data: &[u8]) -> Result<WriteBatch> {
        WriteBatch::from_data(data.to_vec(), Path::new("/fuzz/000001.log"), 0)
    }

    /// The encoded bytes of a batch, exactly as they would be written to the log.
    pub fn write_batch_bytes(batch: &WriteBatch) -> Vec<u8> {
        batch.data().to_vec()
    }

    /// The base sequence number stored in a batch's header.
    pub fn write_batch_sequence(batch: &WriteBatch) -> u64 {
        batch.sequence()
    }

    /// Decodes a prepared-transaction file (`NNNNNN.txn`) and returns its canonical
    /// re-encoding, so that a caller can check that it decodes to the same transaction again.
    pub fn prepared_transaction(data: &[u8]) -> Result<Vec<u8>> {
        match crate::txn::prepared::decode(data) {
            Ok(record) => Ok(crate::txn::prepared::encode(&record)),
            Err((offset, reason)) => Err(crate::Error::corruption("/fuzz/000001.txn", offset, reason)),
        }
    }

    /// Decodes a backup description (`meta/NNNNNN` of a backup directory) and returns its
    /// canonical re-encoding, so that a caller can check that it decodes to the same backup.
    pub fn backup_meta(data: &[u8]) -> Result<Vec<u8>> {
        crate::backup::meta::BackupMeta::decode(data, Path::new("/fuzz/meta/000001")).map(|meta| meta.encode())
    }

    /// One record of a blob file, and what a whole blob file (`NNNNNN.blob`) holds.
    pub use crate::blob::format::{BlobFileContents as BlobFile, FileRecord as BlobRecord};

    /// Decodes a whole blob file (`NNNNNN.blob`), each part checked: header, record checksums,
    /// stored values that decompress, footer and its agreement with the records.
    pub fn blob_file(data: &[u8]) -> Result<BlobFile> {
        crate::blob::format::decode_file(data)
            .map_err(|(offset, reason)| Error::corruption("/fuzz/000001.blob", offset, reason))
    }

    /// Decodes one manifest record (a version edit, or a group of them) and returns its
    /// canonical re-encoding, so that a caller can check that decoding the re-encoding gives the
    /// same bytes again.
    pub fn version_edit(data: &[u8]) -> Result<Vec<u8>> {
        let edits = VersionEdit::decode_record(data, Path::new("/fuzz/MANIFEST-000001"), 0)?;
        let mut canonical = Vec::new();
        match edits.as_slice() {
            [edit] => edit.encode(&mut canonical),
            group => VersionEdit::encode_group(group, &mut canonical),
        }
        Ok(canonical)
    }

    /// What a successful manifest recovery found.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct RecoveredManifest {
        /// The manifest number `CURRENT` named.
        pub manifest_number: u64,
        /// The recovered log number.
        pub log_number: u64,
        /// The recovered last sequence.
        pub last_sequence: u64,
        /// Files per level.
        pub files_per_level: Vec<usize>,
    }

    /// Runs `VersionSet::recover` (the parsing of `CURRENT`, the replay of the manifest it names
    /// and the checks on the resulting version) over an in-memory directory holding `CURRENT`
    /// with `current` and each `(number, bytes)` of `manifests` as `MANIFEST-<number>`. Every
    /// column family is opened with the bytewise comparator.
    pub fn recover_manifest(current: &[u8], manifests: &[(u64, &[u8])]) -> Result<RecoveredManifest> {
        let memory = MemFileSystem::new();
        let directory = Path::new(DIRECTORY);
        memory.create_dir_all(directory)?;
        write_file(&memory, &directory.join("CURRENT"), current)?;
        for (number, bytes) in manifests {
            write_file(&memory, &directory.join(format!("MANIFEST-{number:06}")), bytes)?;
        }
        let file_system: Arc<dyn FileSystem> = Arc::new(memory);
        let table_cache = Arc::new(TableCache::new(directory.to_path_buf(), Arc::clone(&file_system), None, 16));
        let janitor =
            Arc::new(FileJanitor { dir: directory.to_path_buf(), file_system: Arc::clone(&file_system), table_cache });
        let set = VersionSet::recover(directory, file_system, janitor, &|_| KeyComparator::Bytewise)?;
        let version = set.current(0);
        Ok(RecoveredManifest {
            manifest_number: set.manifest_number(),
            log_number: set.log_number(0),
            last_sequence: set.last_sequence(),
            files_per_level: version.levels.iter().map(Vec::len).collect(),
        })
    }

    /// Checks a table footer (the last 64 bytes of a table) as `Table::open` does.
    pub fn footer(data: &[u8]) -> Result<()> {
        Footer::decode(Path::new("/fuzz/000001.sst"), 0, data).map(|_| ())
    }

    /// The size of a table footer.
    pub const TABLE_FOOTER_SIZE_BYTES: usize = FOOTER_SIZE_BYTES;

    /// Decodes the contents of a properties block (without its trailer).
    pub fn table_properties(data: &[u8]) -> Result<()> {
        TableProperties::decode(Path::new("/fuzz/000001.sst"), 0, data).map(|_| ())
    }

    /// Checks a stored block (contents then the five-byte trailer) and returns its uncompressed
    /// contents, as every block read from a table is decoded.
    ///
    /// It decodes twice, the second time as the read path does into a reused buffer that holds
    /// other bytes first, and fails (panics) if the two differ.
    pub fn stored_block(stored_with_trailer: &[u8], verify_checksum: bool) -> Result<Vec<u8>> {
        let path = Path::new("/fuzz/000001.sst");
        let decoded = decode_stored_block(path, 0, stored_with_trailer.to_vec(), verify_checksum);
        let mut reused = vec![0xa5; 1 << 16];
        let into = decode_stored_block_into(path, 0, stored_with_trailer, verify_checksum, &mut reused);
        match (&decoded, into) {
            (Ok(contents), Ok(DecodedBlock::Stored(length))) => {
                assert_eq!(&stored_with_trailer[..length], &contents[..])
            }
            (Ok(contents), Ok(DecodedBlock::Decompressed(length))) => assert_eq!(&reused[..length], &contents[..]),
            (Err(_), Err(_)) => {}
            (decoded, into) => panic!("the two decodings disagree: {decoded:?} against {into:?}"),
        }
        decoded
    }

    /// Decodes an uncompressed data or index block and walks it forward, backward, and from a
    /// seek to every key found; returns the entries in forward order. Damage is an `Err`.
    pub fn block_entries(data: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let path = Path::new("/fuzz/000001.sst");
        let block = Block::new(data.to_vec()).map_err(|corruption| corruption.into_error(path, 0))?;
        walk_block(&block, path)
    }

    /// [`block_entries`] for the separated layout a data block takes in the block cache: the
    /// conversion, then the same walks.
    pub fn separated_block_entries(data: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let path = Path::new("/fuzz/000001.sst");
        let block = Block::separated_from(data).map_err(|corruption| corruption.into_error(path, 0))?;
        walk_block(&block, path)
    }

    /// The walks of [`block_entries`] over a decoded block.
    fn walk_block(block: &Block, path: &Path) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut iter = Block::iter(block);
        let mut entries = Vec::new();
        iter.seek_to_first();
        while iter.valid() {
            entries.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
        if let Some(corruption) = iter.corruption() {
            return Err(corruption.into_error(path, 0));
        }
        let mut backward = 0usize;
        iter.seek_to_last();
        while iter.valid() {
            backward += 1;
            iter.prev();
        }
        if let Some(corruption) = iter.corruption() {
            return Err(corruption.into_error(path, 0));
        }
        if backward != entries.len() {
            return Err(Error::corruption(
                path,
                0,
                format!("block walks {} entries forward but {backward} backward", entries.len()),
            ));
        }
        for (key, _) in &entries {
            iter.seek(key, &KeyComparator::Bytewise);
            if let Some(corruption) = iter.corruption() {
                return Err(corruption.into_error(path, 0));
            }
        }
        Ok(entries)
    }

    /// Decodes a bloom filter block and asks it about each of `keys`. `Err` names what is wrong.
    pub fn bloom_filter(data: &[u8], keys: &[&[u8]]) -> std::result::Result<Vec<bool>, &'static str> {
        let filter = BloomFilter::decode(data)?;
        Ok(keys.iter().map(|key| filter.may_contain(key)).collect())
    }

    /// What reading a whole table found.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct TableContents {
        /// Every (internal key, value) in forward order.
        pub entries: Vec<(Vec<u8>, Vec<u8>)>,
        /// Entries seen walking backward from the last.
        pub backward_count: usize,
    }

    /// Opens `data` as a table with `Table::open` (footer, properties, index and filter are read
    /// and checked), iterates it forward and backward, and looks up the user key of every entry.
    /// Any damage found on the way is an `Err`.
    pub fn table(data: &[u8], verify_checksums: bool) -> Result<TableContents> {
        let memory = MemFileSystem::new();
        let directory = Path::new(DIRECTORY);
        memory.create_dir_all(directory)?;
        let path = directory.join("000001.sst");
        write_file(&memory, &path, data)?;
        let file = memory.open(&path)?;
        let table = Table::open(file, path.clone(), 1, Some(BlockCache::new(1 << 20)), KeyComparator::Bytewise, true)?;
        let options = BlockReadOptions { verify_checksums, fill_cache: true };
        let mut contents = TableContents::default();
        let mut iter = table.iter(options);
        iter.seek_to_first();
        while iter.valid() {
            contents.entries.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
        iter.status()?;
        iter.seek_to_last();
        while iter.valid() {
            contents.backward_count += 1;
            iter.prev();
        }
        iter.status()?;
        for (internal_key, _) in &contents.entries {
            let Some(user_key) = internal_key.len().checked_sub(8).and_then(|length| internal_key.get(..length)) else {
                continue;
            };
            // The filter and key range may exclude a damaged key; only a read must not panic.
            if table.may_contain(user_key) {
                let lookup = make_internal_key(user_key, MAX_SEQUENCE_NUMBER, ValueKind::Put);
                table.get(&lookup, options)?;
            }
        }
        Ok(contents)
    }

    /// Writes `bytes` to a new file at `path` and syncs it.
    pub(crate) fn write_file(memory: &MemFileSystem, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut file = memory.create(path)?;
        file.append(bytes)?;
        file.sync()?;
        memory.sync_dir(path.parent().unwrap_or(Path::new("/")))
    }
}

/// Builders of valid inputs for the decoders in [`decode`], for seed corpora and round trips.
pub mod encode {
    use std::path::Path;

    use crate::batch::{BatchOp, WriteBatch};
    use crate::comparator::KeyComparator;
    use crate::error::Result;
    use crate::fs::{FileSystem, MemFileSystem};
    use crate::key::{make_internal_key, ValueKind};
    use crate::options::Compression;
    use crate::sstable::format::{block_trailer, BlockCompressor};
    use crate::sstable::{TableBuilder, TableOptions};
    use crate::version::edit::{FileMetadata, VersionEdit};
    use crate::wal::LogWriter;

    /// A backup description: `files` as (name, shared stored name or `None` for a private
    /// file, size, crc32c).
    pub fn backup_meta(id: u64, timestamp_secs: u64, files: &[(&str, Option<&str>, u64, u32)]) -> Vec<u8> {
        use crate::backup::meta::{BackupFile, BackupMeta, Storage};
        let files = files
            .iter()
            .map(|&(name, stored, size_bytes, crc32c)| BackupFile {
                name: name.to_string(),
                storage: stored.map_or(Storage::Private, |stored| Storage::Shared(stored.to_string())),
                size_bytes,
                crc32c,
            })
            .collect();
        BackupMeta { id, timestamp_secs, files }.encode()
    }

    /// A blob file of column family `column_family_id` holding `records` (key, value) in order,
    /// byte for byte as the engine writes it with `blob_compression` at its default (LZ4).
    pub fn blob_file(column_family_id: u32, records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut compressor = crate::sstable::format::BlockCompressor::new(crate::options::Compression::Lz4);
        let stored: Vec<(u8, Vec<u8>)> = records
            .iter()
            .map(|(_, value)| {
                let (value_type, stored) = compressor.compress(value);
                (value_type, stored.to_vec())
            })
            .collect();
        let as_stored: Vec<(&[u8], u8, &[u8])> = records
            .iter()
            .zip(&stored)
            .map(|((key, _), (value_type, stored))| (*key, *value_type, stored.as_slice()))
            .collect();
        blob_file_as_stored(column_family_id, crate::blob::format::BLOB_FORMAT_VERSION, &as_stored)
    }

    /// A blob file of format `version` (1 or 2) holding `records` (key, value type, stored
    /// value) exactly as given: what a decoded file re-encodes to. Version 1 has no value type
    /// (every type must be 0).
    pub fn blob_file_as_stored(column_family_id: u32, version: u32, records: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        use crate::blob::format::{
            encode_footer, encode_header_of_version, encode_record, encode_record_v1, BlobFooter,
            BLOB_FORMAT_VERSION_1, BLOB_HEADER_SIZE_BYTES,
        };
        let mut data = encode_header_of_version(column_family_id, version).to_vec();
        for (key, value_type, stored) in records {
            if version == BLOB_FORMAT_VERSION_1 {
                assert_eq!(*value_type, 0, "version-1 records store values as they are");
                encode_record_v1(&mut data, key, stored);
            } else {
                encode_record(&mut data, key, *value_type, stored);
            }
        }
        let record_bytes = (data.len() - BLOB_HEADER_SIZE_BYTES) as u64;
        data.extend_from_slice(&encode_footer(&BlobFooter { record_count: records.len() as u64, record_bytes }));
        data
    }

    /// A prepared-transaction file for transaction `number` under `xid`, holding `batch` (an
    /// encoded write batch), guarding `keys` (column family, key, written) and one range per
    /// `(column family, start, end)` with inclusive start and exclusive end.
    pub fn prepared_transaction(
        number: u64,
        xid: &[u8],
        batch: &[u8],
        keys: &[(u32, &[u8], bool)],
        ranges: &[(u32, &[u8], &[u8])],
    ) -> Vec<u8> {
        use std::ops::Bound;
        crate::txn::prepared::encode(&crate::txn::prepared::PreparedRecord {
            number,
            xid: xid.to_vec(),
            batch: batch.to_vec(),
            keys: keys.iter().map(|(family, key, written)| (*family, key.to_vec(), *written)).collect(),
            ranges: ranges
                .iter()
                .map(|(family, start, end)| crate::txn::history::KeyRange {
                    column_family: *family,
                    start: Bound::Included(start.to_vec()),
                    end: Bound::Excluded(end.to_vec()),
                })
                .collect(),
            runs: Vec::new(),
        })
    }

    /// A prepared-transaction file of a spilled transaction (format version 2): as
    /// [`prepared_transaction`] without a batch, with its runs as `(layer, column family, file
    /// number)`.
    pub fn spilled_prepared_transaction(
        number: u64,
        xid: &[u8],
        keys: &[(u32, &[u8], bool)],
        runs: &[(u64, u32, u64)],
    ) -> Vec<u8> {
        crate::txn::prepared::encode(&crate::txn::prepared::PreparedRecord {
            number,
            xid: xid.to_vec(),
            batch: Vec::new(),
            keys: keys.iter().map(|(family, key, written)| (*family, key.to_vec(), *written)).collect(),
            ranges: Vec::new(),
            runs: runs
                .iter()
                .map(|&(layer, column_family, file_number)| crate::txn::prepared::PreparedRun {
                    layer,
                    column_family,
                    file_number,
                })
                .collect(),
        })
    }

    /// A log file holding one record per payload. Payloads must not be empty (I9).
    pub fn log(payloads: &[Vec<u8>]) -> Result<Vec<u8>> {
        let memory = MemFileSystem::new();
        let path = Path::new("/encode.log");
        let mut writer = LogWriter::new(memory.create(path)?, path.to_path_buf());
        for payload in payloads {
            writer.add_record(payload)?;
        }
        writer.flush()?;
        drop(writer);
        memory.read_all(path)
    }

    /// The stored form (possibly compressed contents, then the trailer) of a block whose raw
    /// contents are `raw`, as a table builder with `compression` would write it.
    pub fn stored_block(raw: &[u8], compression: Compression) -> Vec<u8> {
        let mut compressor = BlockCompressor::new(compression);
        let (block_type, stored) = compressor.compress(raw);
        let mut out = stored.to_vec();
        out.extend_from_slice(&block_trailer(stored, block_type));
        out
    }

    /// The encoded bytes of a batch holding `records` in order: (column family id, kind, key,
    /// value). Id 0 is the default column family; a delete's value is ignored; a put with an
    /// expiry's value is its stored form, the expiry (8 bytes, little endian) then the value
    /// (shorter ones are written with expiry 0). Unlike the public
    /// `WriteBatch::put_cf`, this takes a bare id, so that a fuzz target can rebuild a decoded
    /// batch without a database that knows the column family.
    pub fn write_batch(records: &[(u32, BatchOp, &[u8], &[u8])]) -> Vec<u8> {
        let mut batch = WriteBatch::new();
        for (column_family_id, kind, key, value) in records {
            match kind {
                BatchOp::Put => batch.put_in(*column_family_id, key, value),
                BatchOp::DeleteRange => batch.delete_range_in(*column_family_id, key, value),
                BatchOp::SingleDelete => batch.single_delete_in(*column_family_id, key),
                BatchOp::Merge => batch.merge_in(*column_family_id, key, value),
                BatchOp::PutWithExpiry => {
                    let (expires_at_us, value) = crate::ttl::split_expiring(value).unwrap_or((0, value));
                    batch.put_with_expiry_in(*column_family_id, key, value, expires_at_us)
                }
                _ => batch.delete_in(*column_family_id, key),
            }
        }
        batch.data().to_vec()
    }

    /// One table-file description for [`version_edit`].
    #[derive(Clone, Debug)]
    pub struct EditFile {
        /// Level of the file.
        pub level: u32,
        /// File number.
        pub number: u64,
        /// Smallest and largest user keys.
        pub smallest_user_key: Vec<u8>,
        /// Largest user key.
        pub largest_user_key: Vec<u8>,
    }

    /// An encoded version edit with the given counters, deletions and new files.
    pub fn version_edit(
        comparator: Option<&str>,
        counters: Option<(u64, u64, u64)>,
        deleted_files: &[(u32, u64)],
        new_files: &[EditFile],
    ) -> Vec<u8> {
        let mut edit = VersionEdit { comparator: comparator.map(str::to_string), ..VersionEdit::default() };
        if let Some((log_number, next_file_number, last_sequence)) = counters {
            edit.log_number = Some(log_number);
            edit.next_file_number = Some(next_file_number);
            edit.last_sequence = Some(last_sequence);
        }
        edit.deleted_files = deleted_files.to_vec();
        for file in new_files {
            edit.new_files.push((
                file.level,
                FileMetadata::of_one_sequence(
                    file.number,
                    4096,
                    make_internal_key(&file.smallest_user_key, 1, ValueKind::Put),
                    make_internal_key(&file.largest_user_key, 1, ValueKind::Put),
                    1,
                ),
            ));
        }
        let mut out = Vec::new();
        edit.encode(&mut out);
        out
    }

    /// One entry for [`table`]: user key, sequence, and the value or `None` for a tombstone.
    pub type TableEntry = (Vec<u8>, u64, Option<Vec<u8>>);

    /// A whole table file holding `entries` (sorted by user key ascending, then sequence
    /// descending) written with the given layout options.
    pub fn table(
        entries: &[TableEntry],
        compression: Compression,
        block_size_bytes: usize,
        block_restart_interval: usize,
        bloom_bits_per_key: u32,
    ) -> Result<Vec<u8>> {
        let memory = MemFileSystem::new();
        let path = Path::new("/encode.sst");
        let options = TableOptions {
            block_size_bytes,
            block_restart_interval,
            bloom_bits_per_key,
            compression,
            comparator: KeyComparator::Bytewise,
        };
        let mut builder = TableBuilder::new(memory.create(path)?, path.to_path_buf(), options);
        for (user_key, sequence, value) in entries {
            let kind = if value.is_some() { ValueKind::Put } else { ValueKind::Delete };
            builder.add(&make_internal_key(user_key, *sequence, kind), value.as_deref().unwrap_or_default())?;
        }
        builder.finish()?;
        memory.read_all(path)
    }
}
