//! The bodies of the fuzz targets in `fuzz/fuzz_targets/`, one function per target, so that the
//! stable test `tests/fuzz_replay.rs` runs exactly the same code over the committed corpora and
//! regression inputs without nightly or cargo-fuzz.
//!
//! A body feeds its bytes to an engine decoder through `riptide::internals::decode` and panics
//! only when the decoder breaks a promise: a panic inside the decoder itself, a round trip that
//! changes the data, or an accounting identity that does not hold. An `Err` from a decoder is
//! the expected answer to bad bytes.
//!
//! [`TARGETS`] lists every target with its body; [`seed_corpus`] builds small valid inputs for
//! each, from which the committed corpora were made (`riptide-stress seed-corpus`).
//!
//! Concurrency contract: bodies are independent and may run on any threads.
//!
//! Invariants: every target in `fuzz/Cargo.toml` appears in [`TARGETS`] under the same name.

use std::path::Path;
use std::sync::Arc;

use riptide::fs::{FileSystem, MemFileSystem};
use riptide::internals::decode;
use riptide::internals::encode::{self, EditFile};
use riptide::{BatchOp, ColumnFamilyOptions, Compression, Db, Options, WalRecovery, WriteBatch, WriteOptions};

/// A fuzz target's body.
pub type Body = fn(&[u8]);

/// Every fuzz target, by name.
pub const TARGETS: &[(&str, Body)] = &[
    ("wal_record", wal_record),
    ("write_batch", write_batch),
    ("version_edit", version_edit),
    ("manifest", manifest),
    ("current", current),
    ("table", table),
    ("block", block),
    ("compressed_block", compressed_block),
    ("bloom_filter", bloom_filter),
    ("footer_properties", footer_properties),
    ("prepared_transaction", prepared_transaction),
    ("blob_file", blob_file),
    ("backup_meta", backup_meta),
    ("api_sequence", api_sequence),
];

/// Looks up a target's body by name.
pub fn body(name: &str) -> Option<Body> {
    TARGETS.iter().find(|(target, _)| *target == name).map(|(_, body)| *body)
}

const POLICIES: [WalRecovery; 3] = [WalRecovery::TolerateTornTail, WalRecovery::Absolute, WalRecovery::SkipCorrupt];

/// WAL (and manifest) record framing: the first byte picks the policy, whether this is the
/// newest log, and whether it is read as a write-ahead log (which may end in preallocated
/// zeros) or as a manifest; the rest is the file.
pub fn wal_record(data: &[u8]) {
    let Some((&selector, log)) = data.split_first() else { return };
    let policy = POLICIES[usize::from(selector % 3)];
    let is_last_log = selector & 4 != 0;
    let read = if selector & 8 != 0 { decode::wal_records } else { decode::log_records };
    let Ok(contents) = read(log, policy, is_last_log) else { return };
    if selector & 8 == 0 {
        assert_eq!(contents.preallocated_tail_bytes, 0, "a manifest read found a preallocated tail");
    } else if contents.preallocated_tail_bytes > 0 {
        let tail = &log[log.len() - contents.preallocated_tail_bytes as usize..];
        assert!(tail.iter().all(|&byte| byte == 0), "a preallocated tail holds a non-zero byte");
    }
    let mut accounted = contents.dropped_tail_bytes + contents.skipped_bytes + contents.preallocated_tail_bytes;
    let mut previous_end = 0u64;
    for (offset, payload) in &contents.records {
        assert!(!payload.is_empty(), "an empty record was returned at offset {offset}");
        assert!(*offset >= previous_end, "record at {offset} overlaps the previous one ending at {previous_end}");
        previous_end = offset + (decode::LOG_RECORD_HEADER_SIZE_BYTES + payload.len()) as u64;
        accounted += (decode::LOG_RECORD_HEADER_SIZE_BYTES + payload.len()) as u64;
    }
    assert_eq!(
        accounted,
        log.len() as u64,
        "records, skipped bytes, dropped and preallocated tails do not add up to the file"
    );
    // The records found, written again, read back exactly under the strictest policy.
    let payloads: Vec<Vec<u8>> = contents.records.iter().map(|(_, payload)| payload.clone()).collect();
    let rewritten = match encode::log(&payloads) {
        Ok(bytes) => bytes,
        Err(error) => panic!("re-encoding valid records failed: {error}"),
    };
    match decode::log_records(&rewritten, WalRecovery::Absolute, false) {
        Ok(again) => {
            let again: Vec<Vec<u8>> = again.records.into_iter().map(|(_, payload)| payload).collect();
            assert_eq!(again, payloads, "a rewritten log reads back differently");
        }
        Err(error) => panic!("a rewritten log does not read back: {error}"),
    }
}

/// Write batches as recovery decodes them; a batch that decodes re-encodes to the same bytes,
/// column family ids included.
pub fn write_batch(data: &[u8]) {
    let Ok(batch) = decode::write_batch(data) else { return };
    // A put with an expiry is rebuilt from its stored form: the expiry, then the value.
    let stored: Vec<Vec<u8>> = batch
        .iter()
        .map(|entry| match entry.expires_at_us() {
            Some(expires_at_us) => [&expires_at_us.to_le_bytes()[..], entry.value()].concat(),
            None => entry.value().to_vec(),
        })
        .collect();
    let records: Vec<(u32, BatchOp, &[u8], &[u8])> = batch
        .iter()
        .zip(&stored)
        .map(|(entry, value)| (entry.column_family_id(), entry.kind(), entry.key(), value.as_slice()))
        .collect();
    assert_eq!(records.len(), batch.len(), "the entry count changed");
    let original = decode::write_batch_bytes(&batch);
    let again = encode::write_batch(&records);
    // The header's sequence is stamped at write time; everything after it must match.
    assert_eq!(original.get(8..), again.get(8..), "a decoded batch re-encodes differently");
}

/// Version edits: a decoded edit's canonical encoding decodes to itself.
pub fn version_edit(data: &[u8]) {
    let Ok(canonical) = decode::version_edit(data) else { return };
    match decode::version_edit(&canonical) {
        Ok(again) => assert_eq!(again, canonical, "a canonical edit re-encodes differently"),
        Err(error) => panic!("a canonical edit does not decode: {error}"),
    }
}

/// The manifest replayed by recovery, with `CURRENT` naming it.
pub fn manifest(data: &[u8]) {
    let _ = decode::recover_manifest(b"MANIFEST-000001\n", &[(1, data)]);
}

/// A valid manifest, for the `current` target.
fn valid_manifest() -> Vec<u8> {
    let snapshot = encode::version_edit(
        Some("riptide.bytewise"),
        Some((4, 9, 100)),
        &[],
        &[EditFile { level: 1, number: 3, smallest_user_key: b"a".to_vec(), largest_user_key: b"m".to_vec() }],
    );
    encode::log(&[snapshot]).unwrap_or_default()
}

/// `CURRENT` parsing: arbitrary contents, with manifests 1 and 5 present.
pub fn current(data: &[u8]) {
    let manifest = valid_manifest();
    if let Ok(recovered) = decode::recover_manifest(data, &[(1, &manifest), (5, &manifest)]) {
        assert!(
            recovered.manifest_number == 1 || recovered.manifest_number == 5,
            "CURRENT {data:?} named manifest {}",
            recovered.manifest_number
        );
        assert_eq!(recovered.last_sequence, 100);
    }
}

/// Whole tables through `Table::open`: footer, properties, index, filter and data blocks. The
/// first byte turns checksum verification of data blocks off when odd.
pub fn table(data: &[u8]) {
    let Some((&selector, file)) = data.split_first() else { return };
    let Ok(contents) = decode::table(file, selector & 1 == 0) else { return };
    assert_eq!(contents.backward_count, contents.entries.len(), "a table walks differently forward and backward");
}

/// Uncompressed data and index blocks: decoding and cursor movement, in the stored layout and in
/// the separated one of the block cache, which must read the same.
pub fn block(data: &[u8]) {
    let stored = decode::block_entries(data);
    let separated = decode::separated_block_entries(data);
    // The block cache's layout reads exactly as the stored one wherever both read cleanly
    // (the conversion refuses some damage the stored walk does not notice).
    if let (Ok(stored), Ok(separated)) = (stored, separated) {
        assert_eq!(stored, separated, "the separated layout reads differently");
    }
}

/// Stored blocks: trailer, checksum and decompression; and every compression's round trip of
/// the input as raw contents.
pub fn compressed_block(data: &[u8]) {
    if let Some((&selector, stored)) = data.split_first() {
        let _ = decode::stored_block(stored, selector & 1 == 0);
    }
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
        let stored = encode::stored_block(data, compression);
        match decode::stored_block(&stored, true) {
            Ok(raw) => assert_eq!(raw, data, "{compression:?} round trip changed the block"),
            Err(error) => panic!("{compression:?}: a freshly stored block does not decode: {error}"),
        }
    }
}

/// Bloom filter blocks: decoding arbitrary bytes, and no false negative for keys a filter was
/// built from.
pub fn bloom_filter(data: &[u8]) {
    let probes: Vec<&[u8]> = data.chunks(3).take(64).collect();
    let _ = decode::bloom_filter(data, &probes);
    let keys: Vec<Vec<u8>> = data.chunks(5).map(<[u8]>::to_vec).collect();
    if keys.is_empty() {
        return;
    }
    let bits_per_key = 1 + u32::from(data[0] % 20);
    let filter = riptide::internals::sstable::Bloom::build(&keys, bits_per_key);
    for key in &keys {
        assert!(filter.may_contain(key), "bloom filter false negative for {key:?}");
    }
}

/// Table footers (first 64 bytes) and properties blocks (the rest).
pub fn footer_properties(data: &[u8]) {
    let split = data.len().min(decode::TABLE_FOOTER_SIZE_BYTES);
    let _ = decode::footer(&data[..split]);
    let _ = decode::table_properties(&data[split..]);
    let _ = decode::table_properties(data);
}

/// The API call-sequence fuzzer (see `api_sequence`).
pub fn api_sequence(data: &[u8]) {
    if let Err(failure) = crate::api_sequence::run(data) {
        panic!("API sequence diverged from the model: {failure}");
    }
}

/// The files of a small real database on a `MemFileSystem`: (name, bytes).
fn sample_database_files() -> Vec<(String, Vec<u8>)> {
    let memory = MemFileSystem::new();
    let options = Options {
        file_system: Arc::new(memory.clone()),
        memtable_size_bytes: 4096,
        block_size_bytes: 256,
        target_file_size_bytes: 4096,
        level0_compaction_trigger_files: 2,
        compression: Compression::Lz4,
        ..Options::default()
    };
    let path = Path::new("/seed");
    let Ok(db) = Db::open(path, options) else { return Vec::new() };
    for number in 0..120u32 {
        let key = format!("key{number:04}");
        let _ = db.put(key.as_bytes(), format!("value-{number}-{}", "x".repeat((number % 50) as usize)).as_bytes());
        if number % 7 == 0 {
            let _ = db.delete(format!("key{:04}", number / 2).as_bytes());
        }
    }
    // A range delete over flushed tables puts tags 18 to 20 in the manifest; a single delete
    // whose put is in a table puts kind 6 in the log and kind 3 in the next table.
    let _ = db.delete_range(b"key0010", b"key0030");
    let _ = db.single_delete(b"key0040");
    // Puts with an expiry: kind 8 in the log; in the table, kind 4 for the live one (with
    // properties tags 16 to 18 and manifest tag 85) and a delete for the expired one.
    let _ = db.put_with_ttl(b"key0050", b"lives an hour", std::time::Duration::from_secs(3600));
    let mut expiring = WriteBatch::new();
    expiring.put_with_expiry(b"key0051", b"expired", 1);
    let _ = db.write(expiring);
    // Merge operands: kind 10 in the log, entry kind 5 in the table (properties tag 19,
    // manifest tag 86); without a merge operator the flush keeps them as they are.
    let _ = db.merge(b"key0060", &1u64.to_le_bytes());
    let _ = db.merge(b"key0060", &2u64.to_le_bytes());
    let _ = db.flush();
    let mut batch = WriteBatch::new();
    batch.put(b"batch-a", b"1");
    batch.delete(b"key0003");
    // Kinds 4 and 5 (range deletes) and 6 (a single delete) in the log's last batch.
    batch.delete_range(b"key0100", b"key0105");
    batch.single_delete(b"key0110");
    // Kind 8 (a put with an expiry) in the log's last batch, and kind 9 below.
    batch.put_with_expiry(b"key0120", b"expires", u64::MAX / 2);
    // Kind 10 (a merge operand) in the log's last batch, and kind 11 below.
    batch.merge(b"key0130", b"operand");
    // Column families put kinds 2 and 3 in the log's batches and column family records in the
    // manifest: one that lives, with a batch across it and the default one, and one that is
    // renamed and dropped.
    if let Ok(events) = db.create_column_family("events", ColumnFamilyOptions::default()) {
        for number in 0..30u32 {
            let _ = db.put_cf(&events, format!("event{number:03}").as_bytes(), b"payload");
        }
        let _ = db.delete_cf(&events, b"event007");
        batch.put_cf(&events, b"event-batch", b"2");
        batch.delete_cf(&events, b"event001");
        batch.delete_range_cf(&events, b"event010", b"event015");
        batch.put_with_expiry_cf(&events, b"event-expiring", b"4", u64::MAX / 2);
        batch.merge_cf(&events, b"event-counter", &5u64.to_le_bytes());
        let _ = db.flush();
    }
    if let Ok(scratch) = db.create_column_family("scratch", ColumnFamilyOptions::default()) {
        let _ = db.put_cf(&scratch, b"temporary", b"value");
        let _ = db.rename_column_family(&scratch, "scratch-renamed");
        let _ = db.drop_column_family(&scratch);
    }
    let _ = db.write_opt(batch, &WriteOptions { sync: true });
    drop(db);
    let mut files = Vec::new();
    for name in memory.file_names(path) {
        if let Ok(bytes) = memory.read_all(&path.join(&name)) {
            files.push((name, bytes));
        }
    }
    files
}

/// A prepared-transaction file (two-phase commit): decoding either fails or yields a
/// transaction whose canonical encoding decodes to the same encoding again.
pub fn prepared_transaction(data: &[u8]) {
    let Ok(canonical) = decode::prepared_transaction(data) else { return };
    let again = decode::prepared_transaction(&canonical).expect("a canonical encoding decodes");
    assert_eq!(again, canonical, "re-encoding a decoded prepared transaction is not stable");
}

/// A blob file (key-value separation): decoding either fails or yields records whose
/// re-encoding, as stored, is the input itself (the format has no slack: any other byte string
/// that decodes would be a second encoding of the same records), and every value that was
/// stored uncompressed is its stored bytes.
pub fn blob_file(data: &[u8]) {
    let Ok(file) = decode::blob_file(data) else { return };
    let stored: Vec<(&[u8], u8, &[u8])> = file
        .records
        .iter()
        .map(|record| (record.key.as_slice(), record.value_type, record.stored.as_slice()))
        .collect();
    assert_eq!(
        encode::blob_file_as_stored(file.column_family_id, file.format_version, &stored),
        data,
        "a decoded blob file re-encodes differently"
    );
    let overhead = if file.format_version == 1 { 12 } else { 13 };
    let mut previous_end = 0;
    for record in &file.records {
        assert!(record.offset >= previous_end, "blob records overlap");
        previous_end = record.offset + overhead + record.key.len() as u64 + record.stored.len() as u64;
        if record.value_type == 0 {
            assert_eq!(record.value, record.stored, "an uncompressed value differs from its stored bytes");
        }
    }
}

/// A backup description: decoding either fails or yields a backup whose re-encoding decodes to
/// the same backup (the text format allows other spellings of a number, so the input itself
/// need not be canonical).
pub fn backup_meta(data: &[u8]) {
    let Ok(canonical) = decode::backup_meta(data) else { return };
    let again = decode::backup_meta(&canonical).expect("a canonical encoding decodes");
    assert_eq!(again, canonical, "re-encoding a decoded backup description is not stable");
}

/// Small valid inputs for every target: (target, file name, bytes).
pub fn seed_corpus() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds: Vec<(&'static str, String, Vec<u8>)> = Vec::new();
    let files = sample_database_files();
    for (name, bytes) in &files {
        if name.ends_with(".log") && !bytes.is_empty() {
            for selector in [0u8, 4] {
                let mut input = vec![selector];
                input.extend_from_slice(bytes);
                seeds.push(("wal_record", format!("{name}-{selector}"), input));
            }
            if let Ok(contents) = decode::log_records(bytes, WalRecovery::TolerateTornTail, true) {
                for (index, (_, payload)) in contents.records.iter().enumerate().take(4) {
                    seeds.push(("write_batch", format!("{name}-record{index}"), payload.clone()));
                }
            }
        }
        if name.starts_with("MANIFEST-") {
            seeds.push(("manifest", name.clone(), bytes.clone()));
            if let Ok(contents) = decode::log_records(bytes, WalRecovery::TolerateTornTail, true) {
                // Every edit: the column family records come after the first flushes.
                for (index, (_, payload)) in contents.records.iter().enumerate().take(16) {
                    seeds.push(("version_edit", format!("{name}-record{index}"), payload.clone()));
                }
            }
        }
        if name == "CURRENT" {
            seeds.push(("current", name.clone(), bytes.clone()));
        }
        if name.ends_with(".sst") && seeds.iter().filter(|(target, _, _)| *target == "table").count() < 2 {
            let mut input = vec![0u8];
            input.extend_from_slice(bytes);
            seeds.push(("table", name.clone(), input));
            let footer_start = bytes.len().saturating_sub(decode::TABLE_FOOTER_SIZE_BYTES);
            seeds.push(("footer_properties", format!("{name}-footer"), bytes[footer_start..].to_vec()));
        }
    }
    seeds.push(("current", "manifest-5".to_string(), b"MANIFEST-000005\n".to_vec()));
    seeds.push((
        "blob_file",
        "three-records".to_string(),
        encode::blob_file(3, &[(b"user:1", &[7u8; 300]), (b"", b""), (b"user:2", b"a value")]),
    ));
    seeds.push(("blob_file", "empty".to_string(), encode::blob_file(0, &[])));
    seeds.push((
        "blob_file",
        "version-1".to_string(),
        encode::blob_file_as_stored(2, 1, &[(b"user:1", 0, &[7u8; 300]), (b"user:2", 0, b"a value")]),
    ));
    seeds.push((
        "backup_meta",
        "three-files".to_string(),
        encode::backup_meta(
            3,
            1_790_000_000,
            &[
                ("000012.sst", Some("000012_4096.sst"), 4096, 0xdead_beef),
                ("000013.blob", Some("000013_300.blob"), 300, 7),
                ("CURRENT", None, 16, 0x0102_0304),
            ],
        ),
    ));
    seeds.push(("backup_meta", "no-files".to_string(), encode::backup_meta(1, 0, &[])));
    let batch = encode::write_batch(&[(0, BatchOp::Put, b"stock", b"41"), (3, BatchOp::Delete, b"order/9", b"")]);
    seeds.push((
        "prepared_transaction",
        "two-writes".to_string(),
        encode::prepared_transaction(
            17,
            b"gtrid.bqual",
            &batch,
            &[(0, b"stock", true), (3, b"order/9", true), (0, b"read", false)],
            &[(0, b"a", b"m")],
        ),
    ));
    seeds.push((
        "prepared_transaction",
        "spilled".to_string(),
        encode::spilled_prepared_transaction(
            40,
            b"gtrid.big",
            &[(0, b"read", false)],
            &[(1, 0, 33), (1, 3, 34), (2, 0, 39)],
        ),
    ));
    seeds.push((
        "prepared_transaction",
        "empty".to_string(),
        encode::prepared_transaction(1, b"x", &encode::write_batch(&[]), &[], &[]),
    ));
    let payloads: Vec<Vec<u8>> = (1..12usize).map(|length| vec![length as u8; length * 9]).collect();
    if let Ok(log) = encode::log(&payloads) {
        for (selector, cut) in [(4u8, 0usize), (0, 0), (6, 5), (2, 30)] {
            let mut input = vec![selector];
            input.extend_from_slice(&log[..log.len() - cut]);
            seeds.push(("wal_record", format!("built-{selector}-cut{cut}"), input));
        }
    }
    let entries: Vec<(Vec<u8>, u64, Option<Vec<u8>>)> = (0..40u64)
        .map(|number| {
            let value = (number % 5 != 0).then(|| format!("value{number}").repeat(3).into_bytes());
            (format!("k{number:03}").into_bytes(), 1000 - number, value)
        })
        .collect();
    for (index, compression) in [Compression::None, Compression::Zstd, Compression::Snappy].into_iter().enumerate() {
        if let Ok(bytes) = encode::table(&entries, compression, 256, 1 + index * 3, if index == 1 { 0 } else { 10 }) {
            let mut input = vec![index as u8];
            input.extend_from_slice(&bytes);
            seeds.push(("table", format!("built-{compression:?}"), input));
        }
    }
    let raw_entries: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .take(12)
        .map(|(key, sequence, value)| {
            (riptide::internals::sstable::internal_key(key, *sequence), value.clone().unwrap_or_default())
        })
        .collect();
    for restart_interval in [1, 4, 16] {
        let raw = riptide::internals::sstable::build_block(&raw_entries, restart_interval);
        seeds.push(("block", format!("restart-{restart_interval}"), raw.clone()));
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let mut input = vec![0u8];
            input.extend_from_slice(&encode::stored_block(&raw, compression));
            seeds.push(("compressed_block", format!("restart-{restart_interval}-{compression:?}"), input));
        }
    }
    let filter_keys: Vec<Vec<u8>> = (0..50u32).map(|number| format!("key{number}").into_bytes()).collect();
    seeds.push(("bloom_filter", "keys".to_string(), filter_keys.concat()));
    seeds.push((
        "version_edit",
        "built".to_string(),
        encode::version_edit(
            Some("riptide.bytewise"),
            Some((2, 10, 77)),
            &[(0, 4)],
            &[EditFile { level: 2, number: 8, smallest_user_key: b"b".to_vec(), largest_user_key: b"q".to_vec() }],
        ),
    ));
    seeds.push(("manifest", "built".to_string(), valid_manifest()));
    for (index, program) in [
        &b"\x01\x00\x05\x20\x07\x01\x09\x04\x00\x03\x03\x05\x01\x07\x06\x00\x0f\x03\x09\x8b\x04\x05"[..],
        &b"\x02\x00\x41\x30\x01\x80\x42\x31\x02\x07\x01\x09\x07\x8a\x0b\x86\x00\x00\x07\x85\x41"[..],
        &b"\x03\x03\x04\x00\x00\x11\x12\x01\x00\x13\x14\x00\x0b\x81\x05\x30\x30\x0a\x8b\x04\x05"[..],
    ]
    .into_iter()
    .enumerate()
    {
        seeds.push(("api_sequence", format!("program-{index}"), program.to_vec()));
    }
    seeds
}
