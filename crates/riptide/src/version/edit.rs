//! The manifest's edit record: a [`VersionEdit`] describes one change to the set of live
//! tables (files added and removed per level) and to the counters recovery needs (log number,
//! next file number, last sequence number).
//!
//! The encoding is a sequence of fields, each a varint tag followed by the tag's fields (see
//! `docs/format/manifest.md`, format version 9: tags 15 to 17 and 23 record blob files, 18 and
//! 19 range tombstones). Each edit belongs to one column family (the
//! default one, id 0, when the edit names none): its files and its log number are that column
//! family's; the file-number, sequence and column-family counters are global. Tags with bit 6 set
//! ([`SAFE_TO_IGNORE_TAG_BIT`]) carry a length-prefixed body that an older reader skips; any
//! other unknown tag is corruption, because an edit whose meaning is not fully understood must
//! not be applied.
//!
//! Concurrency contract: plain values, no shared state; encoding and decoding are pure functions.
//!
//! Invariants of every decoded edit (the decoder checks them and reports
//! [`Error::Corruption`] otherwise; the encoder expects them of what it is given): levels are
//! below [`MAX_ENCODABLE_LEVELS`]; comparator names are UTF-8; each of the comparators, log
//! number, next file number and last sequence appears at most once; sequence numbers fit in 56
//! bits; a file's smallest and largest keys are well-formed internal keys (at least 8 bytes,
//! known kind); its smallest sequence is at most its largest; its deletions are at most its
//! entries. That a file's smallest key sorts at or before its largest depends on its column
//! family's comparator, which an edit alone does not tell; recovery checks it
//! (`VersionSet::recover`).

use std::path::Path;

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint32, put_varint64};
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, MAX_SEQUENCE_NUMBER};
use crate::range_tombstone::RangeTombstone;

/// Levels must be below this number to be encoded; the engine's own level count is smaller and
/// is checked when an edit is applied.
pub(crate) const MAX_ENCODABLE_LEVELS: u32 = 64;

/// A tag with this bit set is followed by a length-prefixed body that readers which do not know
/// the tag skip. Fields added by later format versions that older readers may safely ignore use
/// such tags.
pub(crate) const SAFE_TO_IGNORE_TAG_BIT: u32 = 1 << 6;

/// Tag: the comparator name (length-prefixed UTF-8), global: the order of every column family
/// that records none of its own (tag 12). Always the bytewise comparator's name.
const TAG_COMPARATOR: u32 = 1;
/// Tag: the number of the oldest log still needed (varint64).
const TAG_LOG_NUMBER: u32 = 2;
/// Tag: the next file number to hand out (varint64).
const TAG_NEXT_FILE_NUMBER: u32 = 3;
/// Tag: the last sequence number in use (varint64).
const TAG_LAST_SEQUENCE: u32 = 4;
/// Tag: a file removed from a level (varint32 level, varint64 file number).
const TAG_DELETED_FILE: u32 = 5;
/// Tag: a file added to a level (varint32 level, then the file's metadata).
const TAG_NEW_FILE: u32 = 6;
/// Tag: the column family the edit applies to (varint32 id); absent means the default one.
const TAG_COLUMN_FAMILY: u32 = 7;
/// Tag: the edit creates its column family with this name (length-prefixed UTF-8).
const TAG_ADD_COLUMN_FAMILY: u32 = 8;
/// Tag: the edit drops its column family (no body).
const TAG_DROP_COLUMN_FAMILY: u32 = 9;
/// Tag: the edit renames its column family (length-prefixed UTF-8).
const TAG_RENAME_COLUMN_FAMILY: u32 = 10;
/// Tag: the largest column family id ever handed out (varint32), so ids are never reused.
const TAG_MAX_COLUMN_FAMILY: u32 = 11;
/// Tag: the comparator of the edit's column family (length-prefixed UTF-8), written when the
/// column family is created (and in every snapshot) unless it is the bytewise one. It changes
/// how the column family's tables are read, so it lacks the safe-to-ignore bit: a reader that
/// does not know it must not open the database.
const TAG_COLUMN_FAMILY_COMPARATOR: u32 = 12;

/// Tag: the record is a group of edits that apply together or not at all (varint count, then
/// each edit length-prefixed); it must be the record's only field. Format version 4. Written
/// by the commit of a spilled transaction (tables in several column families at once).
const TAG_EDIT_GROUP: u32 = 13;

/// Tag: prepared transaction number N (varint64) committed in this record: the commit of a
/// prepared transaction whose writes were spilled (`db/spilled_commit.rs`), whose commit point
/// is this record rather than a WAL marker. Format version 5. Also written in the snapshot
/// that opens a manifest while the transaction's file is not yet removed. It decides whether a
/// prepared transaction found at open is committed, so it lacks the safe-to-ignore bit: a
/// reader that does not know it must not open the database.
const TAG_PREPARED_COMMITTED: u32 = 14;

/// Tag: a blob file added to the edit's column family (varint64 number, record count, record
/// bytes, file size). Format version 6. Without it a reader would take the file for garbage
/// and delete values tables still reference, so it lacks the safe-to-ignore bit.
const TAG_NEW_BLOB_FILE: u32 = 15;
/// Tag: a blob file of blob format version 2 (values with a type byte, possibly compressed)
/// added to the edit's column family, with the fields of tag 15. Format version 9. A build that
/// knows only version-1 blob files cannot read its records, so it lacks the safe-to-ignore bit:
/// such a build refuses the database at open.
const TAG_NEW_BLOB_FILE_V2: u32 = 23;
/// Tag: garbage found in a blob file of the edit's column family (varint64 number, records,
/// bytes), added to what earlier records found. Format version 6.
const TAG_BLOB_GARBAGE: u32 = 16;
/// Tag: the blob files a table added by the same edit references (varint64 table number,
/// varint64 count, then that many varint64 blob file numbers, strictly ascending); it follows
/// the table's tag 6. Format version 6. Tables without it reference no blob file.
const TAG_TABLE_BLOB_REFERENCES: u32 = 17;
/// Tag: a range tombstone added to the edit's column family (length-prefixed start key,
/// length-prefixed end key, varint64 sequence). Format version 7. Ignoring it would bring
/// deleted keys back, so it lacks the safe-to-ignore bit.
const TAG_RANGE_TOMBSTONE: u32 = 18;
/// Tag: the range tombstone of this sequence (varint64) leaves the edit's column family: no
/// table holds data it could hide any more. Format version 7.
const TAG_RANGE_TOMBSTONE_DROPPED: u32 = 19;
/// Tag: a table added by the same edit holds no entry that a range tombstone of this sequence
/// or older covers (varint64 table number, varint64 sequence); it follows the table's tag 6.
/// Format version 7. Without it a table counts as possibly holding covered entries, which only
/// keeps range tombstones longer.
const TAG_TABLE_RANGE_TOMBSTONES_APPLIED: u32 = 20;
/// Tag: the expiries of a table added by the same edit (length-prefixed body: varint64 table
/// number, entries with an expiry, earliest and latest expiry in microseconds); it follows the
/// table's tag 6. Format version 8. It only drives the expiry compaction trigger, so it has the
/// safe-to-ignore bit.
const TAG_TABLE_EXPIRY: u32 = 21 | SAFE_TO_IGNORE_TAG_BIT;
/// Tag: the merge operands of a table added by the same edit (length-prefixed body: varint64
/// table number, varint64 count, at least 1); it follows the table's tag 6. Format version 8.
/// It only lets `compact_range` know that a last-level table has operands to fold.
const TAG_TABLE_MERGE_OPERANDS: u32 = 22 | SAFE_TO_IGNORE_TAG_BIT;

/// Bytes of a blob file besides its records: header and footer (`blob/format.rs`).
const BLOB_FILE_FRAME_BYTES: u64 =
    (crate::blob::format::BLOB_HEADER_SIZE_BYTES + crate::blob::format::BLOB_FOOTER_SIZE_BYTES) as u64;

/// Garbage a compaction found in one blob file: references it dropped or moved elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobGarbage {
    pub(crate) number: u64,
    pub(crate) count: u64,
    pub(crate) bytes: u64,
}

/// What the manifest records about one SSTable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileMetadata {
    /// The file number (the table is `NNNNNN.sst`).
    pub number: u64,
    /// Size of the file.
    pub file_size_bytes: u64,
    /// The smallest internal key in the table.
    pub smallest: Vec<u8>,
    /// The largest internal key in the table.
    pub largest: Vec<u8>,
    /// The smallest sequence number of any entry.
    pub smallest_sequence: u64,
    /// The largest sequence number of any entry.
    pub largest_sequence: u64,
    /// Number of entries (puts and deletes).
    pub num_entries: u64,
    /// Number of deletes among the entries.
    pub num_deletions: u64,
    /// The blob files the table's `BlobIndex` entries reference, ascending (I35).
    pub blob_references: Vec<u64>,
    /// The table holds no entry that a range tombstone of this sequence or older covers
    /// (I40); 0 when nothing is known. Written by the flush or compaction that filtered the
    /// table's entries through the tombstones.
    pub range_tombstones_applied_through: u64,
    /// The expiries of the table's entries that have one, for the expiry compaction trigger
    /// (none when `expiry.entries` is 0).
    pub expiry: crate::ttl::TableExpiry,
    /// Entries that are merge operands, which a compaction at the last level may fold.
    pub num_merge_operands: u64,
}

impl FileMetadata {
    /// Metadata for tests and fuzz inputs: table `number` of `file_size_bytes`, one entry from
    /// `smallest` to `largest` (internal keys), all at `sequence`, nothing else recorded.
    pub(crate) fn of_one_sequence(
        number: u64,
        file_size_bytes: u64,
        smallest: Vec<u8>,
        largest: Vec<u8>,
        sequence: u64,
    ) -> FileMetadata {
        FileMetadata {
            number,
            file_size_bytes,
            smallest,
            largest,
            smallest_sequence: sequence,
            largest_sequence: sequence,
            num_entries: 1,
            num_deletions: 0,
            blob_references: Vec::new(),
            range_tombstones_applied_through: 0,
            expiry: Default::default(),
            num_merge_operands: 0,
        }
    }
}

/// One change to the version, as logged in the manifest. Absent fields are left unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    /// Name of the key ordering; recorded in each manifest's first edit.
    pub comparator: Option<String>,
    /// Logs numbered below this one are no longer needed for recovery.
    pub log_number: Option<u64>,
    /// The next number to hand out for a new file.
    pub next_file_number: Option<u64>,
    /// The largest sequence number in use.
    pub last_sequence: Option<u64>,
    /// Files removed, as (level, file number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Files added, as (level, metadata).
    pub new_files: Vec<(u32, FileMetadata)>,
    /// The column family whose files and log number this edit changes.
    pub column_family: u32,
    /// Creates the column family, with this name.
    pub add_column_family: Option<String>,
    /// Drops the column family.
    pub drop_column_family: bool,
    /// Renames the column family.
    pub rename_column_family: Option<String>,
    /// The largest column family id handed out so far.
    pub max_column_family: Option<u32>,
    /// The name of the column family's comparator, when it is not the bytewise one.
    pub column_family_comparator: Option<String>,
    /// Prepared transactions (by file number) whose commit this record is, or (in a snapshot)
    /// was, with their files not yet known to be removed.
    pub prepared_committed: Vec<u64>,
    /// Blob files added to the column family.
    pub new_blob_files: Vec<crate::blob::BlobFileMetadata>,
    /// Garbage found in the column family's blob files.
    pub blob_garbage: Vec<BlobGarbage>,
    /// Range tombstones added to the column family (a flush moves them from a memtable).
    pub new_range_tombstones: Vec<RangeTombstone>,
    /// Range tombstones, by sequence, removed from the column family.
    pub dropped_range_tombstones: Vec<u64>,
}

impl VersionEdit {
    /// Appends the encoding of this edit to `out`. An edit with no fields encodes to no bytes;
    /// since log records are never empty, such an edit must not be logged.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        if let Some(comparator) = &self.comparator {
            put_varint32(out, TAG_COMPARATOR);
            put_length_prefixed(out, comparator.as_bytes());
        }
        if self.column_family != 0 {
            put_varint32(out, TAG_COLUMN_FAMILY);
            put_varint32(out, self.column_family);
        }
        if let Some(name) = &self.add_column_family {
            put_varint32(out, TAG_ADD_COLUMN_FAMILY);
            put_length_prefixed(out, name.as_bytes());
        }
        if let Some(name) = &self.column_family_comparator {
            put_varint32(out, TAG_COLUMN_FAMILY_COMPARATOR);
            put_length_prefixed(out, name.as_bytes());
        }
        if self.drop_column_family {
            put_varint32(out, TAG_DROP_COLUMN_FAMILY);
        }
        if let Some(name) = &self.rename_column_family {
            put_varint32(out, TAG_RENAME_COLUMN_FAMILY);
            put_length_prefixed(out, name.as_bytes());
        }
        if let Some(max) = self.max_column_family {
            put_varint32(out, TAG_MAX_COLUMN_FAMILY);
            put_varint32(out, max);
        }
        let counters = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, value) in counters {
            if let Some(value) = value {
                put_varint32(out, tag);
                put_varint64(out, value);
            }
        }
        for &(level, number) in &self.deleted_files {
            debug_assert!(level < MAX_ENCODABLE_LEVELS, "level {level} cannot be encoded");
            put_varint32(out, TAG_DELETED_FILE);
            put_varint32(out, level);
            put_varint64(out, number);
        }
        for &number in &self.prepared_committed {
            put_varint32(out, TAG_PREPARED_COMMITTED);
            put_varint64(out, number);
        }
        for (level, file) in &self.new_files {
            debug_assert!(*level < MAX_ENCODABLE_LEVELS, "level {level} cannot be encoded");
            put_varint32(out, TAG_NEW_FILE);
            put_varint32(out, *level);
            put_varint64(out, file.number);
            put_varint64(out, file.file_size_bytes);
            put_length_prefixed(out, &file.smallest);
            put_length_prefixed(out, &file.largest);
            put_varint64(out, file.smallest_sequence);
            put_varint64(out, file.largest_sequence);
            put_varint64(out, file.num_entries);
            put_varint64(out, file.num_deletions);
            if file.expiry.entries > 0 {
                put_varint32(out, TAG_TABLE_EXPIRY);
                let mut body = Vec::new();
                put_varint64(&mut body, file.number);
                put_varint64(&mut body, file.expiry.entries);
                put_varint64(&mut body, file.expiry.earliest_us);
                put_varint64(&mut body, file.expiry.latest_us);
                put_length_prefixed(out, &body);
            }
            if file.num_merge_operands > 0 {
                put_varint32(out, TAG_TABLE_MERGE_OPERANDS);
                let mut body = Vec::new();
                put_varint64(&mut body, file.number);
                put_varint64(&mut body, file.num_merge_operands);
                put_length_prefixed(out, &body);
            }
            if file.range_tombstones_applied_through > 0 {
                put_varint32(out, TAG_TABLE_RANGE_TOMBSTONES_APPLIED);
                put_varint64(out, file.number);
                put_varint64(out, file.range_tombstones_applied_through);
            }
            if !file.blob_references.is_empty() {
                put_varint32(out, TAG_TABLE_BLOB_REFERENCES);
                put_varint64(out, file.number);
                put_varint64(out, file.blob_references.len() as u64);
                for &blob in &file.blob_references {
                    put_varint64(out, blob);
                }
            }
        }
        for blob in &self.new_blob_files {
            let tag = if blob.format_version == crate::blob::format::BLOB_FORMAT_VERSION_1 {
                TAG_NEW_BLOB_FILE
            } else {
                TAG_NEW_BLOB_FILE_V2
            };
            put_varint32(out, tag);
            put_varint64(out, blob.number);
            put_varint64(out, blob.record_count);
            put_varint64(out, blob.record_bytes);
            put_varint64(out, blob.file_size_bytes);
        }
        for garbage in &self.blob_garbage {
            put_varint32(out, TAG_BLOB_GARBAGE);
            put_varint64(out, garbage.number);
            put_varint64(out, garbage.count);
            put_varint64(out, garbage.bytes);
        }
        for &sequence in &self.dropped_range_tombstones {
            put_varint32(out, TAG_RANGE_TOMBSTONE_DROPPED);
            put_varint64(out, sequence);
        }
        for tombstone in &self.new_range_tombstones {
            put_varint32(out, TAG_RANGE_TOMBSTONE);
            put_length_prefixed(out, &tombstone.start);
            put_length_prefixed(out, &tombstone.end);
            put_varint64(out, tombstone.sequence);
        }
    }

    /// Decodes an edit from `data`, checking every invariant listed in the module comment.
    /// `offset` is where `data` starts in the manifest at `path`; errors point at the field
    /// that is damaged.
    /// Encodes `edits` as one group record (see [`TAG_EDIT_GROUP`]).
    pub(crate) fn encode_group(edits: &[VersionEdit], out: &mut Vec<u8>) {
        put_varint32(out, TAG_EDIT_GROUP);
        put_varint64(out, edits.len() as u64);
        let mut encoded = Vec::new();
        for edit in edits {
            encoded.clear();
            edit.encode(&mut encoded);
            put_length_prefixed(out, &encoded);
        }
    }

    /// Decodes one manifest record: a single edit, or the edits of a group record.
    pub(crate) fn decode_record(data: &[u8], path: &Path, offset: u64) -> Result<Vec<VersionEdit>> {
        let is_group = get_varint64(data).is_some_and(|(tag, _)| tag == u64::from(TAG_EDIT_GROUP));
        if !is_group {
            return Ok(vec![VersionEdit::decode(data, path, offset)?]);
        }
        let corruption = |reason: &str| Error::corruption(path, offset, format!("edit group: {reason}"));
        let mut position = get_varint64(data).map_or(0, |(_, length)| length);
        let (count, length) = get_varint64(&data[position..]).ok_or_else(|| corruption("bad count"))?;
        position += length;
        if !(2..=u64::from(u32::MAX)).contains(&count) {
            return Err(corruption("a group holds at least two edits"));
        }
        let mut edits = Vec::new();
        for _ in 0..count {
            let (member, length) =
                get_length_prefixed(&data[position..]).ok_or_else(|| corruption("truncated member"))?;
            let member_offset = offset + (position + length - member.len()) as u64;
            edits.push(VersionEdit::decode(member, path, member_offset)?);
            position += length;
        }
        if position != data.len() {
            return Err(corruption("bytes after the last member"));
        }
        Ok(edits)
    }

    pub(crate) fn decode(data: &[u8], path: &Path, offset: u64) -> Result<VersionEdit> {
        let mut decoder = Decoder { data, position: 0, path, base_offset: offset };
        let mut edit = VersionEdit::default();
        let mut column_family = None;
        while !decoder.at_end() {
            let tag_start = decoder.position;
            let tag = decoder.varint64("tag")?;
            match u32::try_from(tag) {
                Ok(TAG_COMPARATOR) => {
                    let name = decoder.text("comparator name", tag_start)?;
                    decoder.set_once(&mut edit.comparator, name, tag_start, "comparator")?;
                }
                Ok(TAG_COLUMN_FAMILY) => {
                    let id = decoder.varint32("column family id")?;
                    // The default column family is implied by the tag's absence, so the
                    // encoding of an edit stays unique.
                    if id == 0 {
                        return Err(decoder.corruption(tag_start, "explicit default column family id"));
                    }
                    decoder.set_once(&mut column_family, id, tag_start, "column family")?;
                }
                Ok(TAG_ADD_COLUMN_FAMILY) => {
                    let name = decoder.text("column family name", tag_start)?;
                    decoder.set_once(&mut edit.add_column_family, name, tag_start, "added column family")?;
                }
                Ok(TAG_COLUMN_FAMILY_COMPARATOR) => {
                    let name = decoder.text("column family comparator name", tag_start)?;
                    decoder.set_once(
                        &mut edit.column_family_comparator,
                        name,
                        tag_start,
                        "column family comparator",
                    )?;
                }
                Ok(TAG_DROP_COLUMN_FAMILY) => {
                    if edit.drop_column_family {
                        return Err(decoder.corruption(tag_start, "column family dropped twice"));
                    }
                    edit.drop_column_family = true;
                }
                Ok(TAG_RENAME_COLUMN_FAMILY) => {
                    let name = decoder.text("column family name", tag_start)?;
                    decoder.set_once(&mut edit.rename_column_family, name, tag_start, "renamed column family")?;
                }
                Ok(TAG_MAX_COLUMN_FAMILY) => {
                    let max = decoder.varint32("max column family")?;
                    decoder.set_once(&mut edit.max_column_family, max, tag_start, "max column family")?;
                }
                Ok(TAG_LOG_NUMBER) => {
                    let value = decoder.varint64("log number")?;
                    decoder.set_once(&mut edit.log_number, value, tag_start, "log number")?;
                }
                Ok(TAG_NEXT_FILE_NUMBER) => {
                    let value = decoder.varint64("next file number")?;
                    decoder.set_once(&mut edit.next_file_number, value, tag_start, "next file number")?;
                }
                Ok(TAG_LAST_SEQUENCE) => {
                    let value = decoder.sequence("last sequence")?;
                    decoder.set_once(&mut edit.last_sequence, value, tag_start, "last sequence")?;
                }
                Ok(TAG_DELETED_FILE) => {
                    let level = decoder.level()?;
                    let number = decoder.varint64("deleted file number")?;
                    edit.deleted_files.push((level, number));
                }
                Ok(TAG_NEW_FILE) => {
                    let level = decoder.level()?;
                    let file = decoder.file_metadata(tag_start)?;
                    edit.new_files.push((level, file));
                }
                Ok(TAG_PREPARED_COMMITTED) => {
                    let number = decoder.varint64("committed prepared transaction number")?;
                    edit.prepared_committed.push(number);
                }
                Ok(TAG_TABLE_BLOB_REFERENCES) => {
                    let table = decoder.varint64("referencing table number")?;
                    let count = decoder.varint64("blob reference count")?;
                    let Some((_, file)) = edit.new_files.iter_mut().rev().find(|(_, file)| file.number == table) else {
                        return Err(
                            decoder.corruption(tag_start, format!("blob references of table {table}, not added"))
                        );
                    };
                    if !file.blob_references.is_empty() || count == 0 {
                        return Err(decoder.corruption(tag_start, format!("table {table}: bad blob reference list")));
                    }
                    for _ in 0..count {
                        let blob = decoder.varint64("referenced blob file number")?;
                        if file.blob_references.last().is_some_and(|&last| last >= blob) {
                            return Err(decoder.corruption(tag_start, "blob references not strictly ascending"));
                        }
                        file.blob_references.push(blob);
                    }
                }
                Ok(tag @ (TAG_NEW_BLOB_FILE | TAG_NEW_BLOB_FILE_V2)) => {
                    let number = decoder.varint64("blob file number")?;
                    let record_count = decoder.varint64("blob record count")?;
                    let record_bytes = decoder.varint64("blob record bytes")?;
                    let file_size_bytes = decoder.varint64("blob file size")?;
                    let framed = record_bytes.checked_add(BLOB_FILE_FRAME_BYTES);
                    if framed != Some(file_size_bytes) || record_count > record_bytes {
                        return Err(decoder.corruption(tag_start, format!("blob file {number}: inconsistent sizes")));
                    }
                    edit.new_blob_files.push(crate::blob::BlobFileMetadata {
                        number,
                        record_count,
                        record_bytes,
                        file_size_bytes,
                        format_version: if tag == TAG_NEW_BLOB_FILE {
                            crate::blob::format::BLOB_FORMAT_VERSION_1
                        } else {
                            crate::blob::format::BLOB_FORMAT_VERSION
                        },
                    });
                }
                Ok(TAG_BLOB_GARBAGE) => {
                    let number = decoder.varint64("garbage blob file number")?;
                    let count = decoder.varint64("garbage record count")?;
                    let bytes = decoder.varint64("garbage bytes")?;
                    edit.blob_garbage.push(BlobGarbage { number, count, bytes });
                }
                Ok(TAG_TABLE_RANGE_TOMBSTONES_APPLIED) => {
                    let table = decoder.varint64("table number")?;
                    let sequence = decoder.sequence("range tombstones applied through")?;
                    let Some((_, file)) = edit.new_files.iter_mut().rev().find(|(_, file)| file.number == table) else {
                        return Err(
                            decoder.corruption(tag_start, format!("range tombstone mark of table {table}, not added"))
                        );
                    };
                    if file.range_tombstones_applied_through != 0 || sequence == 0 {
                        return Err(decoder.corruption(tag_start, format!("table {table}: bad range tombstone mark")));
                    }
                    file.range_tombstones_applied_through = sequence;
                }
                Ok(TAG_TABLE_EXPIRY) => {
                    let body = decoder.bytes("table expiry")?;
                    let mut fields = [0u64; 4];
                    let mut position = 0;
                    for field in &mut fields {
                        let (value, length) = get_varint64(body.get(position..).unwrap_or_default())
                            .ok_or_else(|| decoder.corruption(tag_start, "table expiry is truncated or malformed"))?;
                        *field = value;
                        position += length;
                    }
                    let [table, entries, earliest_us, latest_us] = fields;
                    if position != body.len() || entries == 0 || earliest_us > latest_us {
                        return Err(decoder.corruption(tag_start, format!("table {table}: bad expiry")));
                    }
                    let Some((_, file)) = edit.new_files.iter_mut().rev().find(|(_, file)| file.number == table) else {
                        return Err(decoder.corruption(tag_start, format!("expiry of table {table}, not added")));
                    };
                    if file.expiry.entries != 0 {
                        return Err(decoder.corruption(tag_start, format!("table {table}: expiry recorded twice")));
                    }
                    file.expiry = crate::ttl::TableExpiry { entries, earliest_us, latest_us };
                }
                Ok(TAG_TABLE_MERGE_OPERANDS) => {
                    let body = decoder.bytes("table merge operands")?;
                    let malformed = || decoder.corruption(tag_start, "table merge operands are malformed");
                    let (table, table_length) = get_varint64(body).ok_or_else(malformed)?;
                    let (count, count_length) =
                        get_varint64(body.get(table_length..).unwrap_or_default()).ok_or_else(malformed)?;
                    if table_length + count_length != body.len() || count == 0 {
                        return Err(malformed());
                    }
                    let Some((_, file)) = edit.new_files.iter_mut().rev().find(|(_, file)| file.number == table) else {
                        return Err(
                            decoder.corruption(tag_start, format!("merge operands of table {table}, not added"))
                        );
                    };
                    if file.num_merge_operands != 0 {
                        return Err(
                            decoder.corruption(tag_start, format!("table {table}: merge operands recorded twice"))
                        );
                    }
                    file.num_merge_operands = count;
                }
                Ok(TAG_RANGE_TOMBSTONE) => {
                    let start = decoder.bytes("range tombstone start key")?.to_vec();
                    let end = decoder.bytes("range tombstone end key")?.to_vec();
                    let sequence = decoder.sequence("range tombstone sequence")?;
                    edit.new_range_tombstones.push(RangeTombstone { start, end, sequence });
                }
                Ok(TAG_RANGE_TOMBSTONE_DROPPED) => {
                    let sequence = decoder.sequence("dropped range tombstone sequence")?;
                    edit.dropped_range_tombstones.push(sequence);
                }
                _ if tag & u64::from(SAFE_TO_IGNORE_TAG_BIT) != 0 => {
                    // A field from a later format version that this reader may skip.
                    decoder.bytes("body of an ignorable field")?;
                }
                _ => return Err(decoder.corruption(tag_start, format!("unknown tag {tag}"))),
            }
        }
        edit.column_family = column_family.unwrap_or(0);
        Ok(edit)
    }
}

/// A cursor over an encoded edit that turns every decoding failure into corruption at the
/// right offset.
struct Decoder<'a> {
    data: &'a [u8],
    position: usize,
    path: &'a Path,
    base_offset: u64,
}

impl<'a> Decoder<'a> {
    fn at_end(&self) -> bool {
        self.position >= self.data.len()
    }

    fn remaining(&self) -> &'a [u8] {
        self.data.get(self.position..).unwrap_or_default()
    }

    fn corruption(&self, position: usize, reason: impl Into<String>) -> Error {
        Error::corruption(
            self.path,
            self.base_offset.saturating_add(position as u64),
            format!("version edit: {}", reason.into()),
        )
    }

    fn varint64(&mut self, what: &str) -> Result<u64> {
        let (value, length) = get_varint64(self.remaining())
            .ok_or_else(|| self.corruption(self.position, format!("{what} is truncated or malformed")))?;
        self.position += length;
        Ok(value)
    }

    fn varint32(&mut self, what: &str) -> Result<u32> {
        let start = self.position;
        let value = self.varint64(what)?;
        u32::try_from(value).map_err(|_| self.corruption(start, format!("{what} {value} exceeds 32 bits")))
    }

    /// A length-prefixed UTF-8 string.
    fn text(&mut self, what: &str, tag_start: usize) -> Result<String> {
        let bytes = self.bytes(what)?;
        let text =
            std::str::from_utf8(bytes).map_err(|_| self.corruption(tag_start, format!("{what} is not UTF-8")))?;
        Ok(text.to_string())
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let (bytes, length) = get_length_prefixed(self.remaining())
            .ok_or_else(|| self.corruption(self.position, format!("{what} is truncated or malformed")))?;
        self.position += length;
        Ok(bytes)
    }

    fn sequence(&mut self, what: &str) -> Result<u64> {
        let start = self.position;
        let value = self.varint64(what)?;
        if value > MAX_SEQUENCE_NUMBER {
            return Err(self.corruption(start, format!("{what} {value} exceeds 56 bits")));
        }
        Ok(value)
    }

    fn level(&mut self) -> Result<u32> {
        let start = self.position;
        let level = self.varint64("level")?;
        match u32::try_from(level) {
            Ok(level) if level < MAX_ENCODABLE_LEVELS => Ok(level),
            _ => Err(self.corruption(start, format!("level {level} is not below {MAX_ENCODABLE_LEVELS}"))),
        }
    }

    fn internal_key(&mut self, what: &str) -> Result<Vec<u8>> {
        let start = self.position;
        let key = self.bytes(what)?;
        if parse_internal_key(key).is_none() {
            return Err(self.corruption(start, format!("{what} is not a valid internal key ({} bytes)", key.len())));
        }
        Ok(key.to_vec())
    }

    fn set_once<T>(&self, slot: &mut Option<T>, value: T, tag_start: usize, what: &str) -> Result<()> {
        if slot.is_some() {
            return Err(self.corruption(tag_start, format!("{what} appears twice")));
        }
        *slot = Some(value);
        Ok(())
    }

    fn file_metadata(&mut self, tag_start: usize) -> Result<FileMetadata> {
        let number = self.varint64("file number")?;
        let file_size_bytes = self.varint64("file size")?;
        let smallest = self.internal_key("smallest key")?;
        let largest = self.internal_key("largest key")?;
        let smallest_sequence = self.sequence("smallest sequence")?;
        let largest_sequence = self.sequence("largest sequence")?;
        let num_entries = self.varint64("entry count")?;
        let num_deletions = self.varint64("deletion count")?;
        let problem = if smallest_sequence > largest_sequence {
            Some("smallest sequence exceeds largest sequence")
        } else if num_deletions > num_entries {
            Some("more deletions than entries")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(self.corruption(tag_start, format!("file {number}: {problem}")));
        }
        Ok(FileMetadata {
            number,
            file_size_bytes,
            smallest,
            largest,
            smallest_sequence,
            largest_sequence,
            num_entries,
            num_deletions,
            blob_references: Vec::new(),
            range_tombstones_applied_through: 0,
            expiry: Default::default(),
            num_merge_operands: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::path::PathBuf;

    fn path() -> PathBuf {
        PathBuf::from("MANIFEST-000003")
    }

    fn file(number: u64) -> FileMetadata {
        FileMetadata {
            number,
            file_size_bytes: 4096 * number,
            smallest: make_internal_key(format!("a{number}").as_bytes(), 10, ValueKind::Put),
            largest: make_internal_key(format!("z{number}").as_bytes(), 3, ValueKind::Delete),
            smallest_sequence: 3,
            largest_sequence: 10 + number,
            num_entries: 100,
            num_deletions: 7,
            blob_references: Vec::new(),
            range_tombstones_applied_through: 0,
            expiry: Default::default(),
            num_merge_operands: 0,
        }
    }

    fn full_edit() -> VersionEdit {
        VersionEdit {
            comparator: Some("riptide.bytewise".to_string()),
            log_number: Some(12),
            next_file_number: Some(300),
            last_sequence: Some(MAX_SEQUENCE_NUMBER),
            deleted_files: vec![(0, 5), (63, u64::MAX)],
            new_files: vec![
                (
                    1,
                    FileMetadata {
                        range_tombstones_applied_through: 41,
                        expiry: crate::ttl::TableExpiry { entries: 12, earliest_us: 5, latest_us: 1 << 50 },
                        num_merge_operands: 3,
                        ..file(17)
                    },
                ),
                (6, FileMetadata { blob_references: vec![2, 9, u64::MAX], ..file(200) }),
            ],
            prepared_committed: vec![77, u64::MAX],
            new_blob_files: vec![
                crate::blob::BlobFileMetadata {
                    number: 9,
                    record_count: 3,
                    record_bytes: 5000,
                    file_size_bytes: 5000 + BLOB_FILE_FRAME_BYTES,
                    format_version: crate::blob::format::BLOB_FORMAT_VERSION,
                },
                crate::blob::BlobFileMetadata {
                    number: 10,
                    record_count: 1,
                    record_bytes: 40,
                    file_size_bytes: 40 + BLOB_FILE_FRAME_BYTES,
                    format_version: crate::blob::format::BLOB_FORMAT_VERSION_1,
                },
            ],
            blob_garbage: vec![BlobGarbage { number: 2, count: 1, bytes: 4108 }],
            new_range_tombstones: vec![
                RangeTombstone { start: b"a".to_vec(), end: b"q".to_vec(), sequence: 41 },
                RangeTombstone { start: Vec::new(), end: vec![0xff; 3], sequence: MAX_SEQUENCE_NUMBER },
            ],
            dropped_range_tombstones: vec![7],
            ..VersionEdit::default()
        }
    }

    #[test]
    fn range_tombstone_fields_encode_as_documented_and_are_checked() {
        let edit = VersionEdit {
            new_range_tombstones: vec![RangeTombstone { start: b"ab".to_vec(), end: b"c".to_vec(), sequence: 300 }],
            dropped_range_tombstones: vec![5],
            ..VersionEdit::default()
        };
        let bytes = encode(&edit);
        assert_eq!(bytes, vec![19, 5, 18, 2, b'a', b'b', 1, b'c', 0xac, 0x02]);
        assert_eq!(VersionEdit::decode(&bytes, &path(), 0).unwrap(), edit);
        // A sequence beyond 56 bits is damage.
        let mut too_large = vec![19];
        crate::coding::put_varint64(&mut too_large, MAX_SEQUENCE_NUMBER + 1);
        assert!(VersionEdit::decode(&too_large, &path(), 0).is_err());
        // A tombstone cut short is damage.
        assert!(VersionEdit::decode(&bytes[..bytes.len() - 1], &path(), 0).is_err());
    }

    fn column_family_edit() -> VersionEdit {
        VersionEdit {
            column_family: 4,
            add_column_family: Some("users".to_string()),
            column_family_comparator: Some("riptide.reverse_bytewise".to_string()),
            rename_column_family: Some("people".to_string()),
            drop_column_family: true,
            max_column_family: Some(9),
            log_number: Some(40),
            new_files: vec![(0, file(3))],
            ..VersionEdit::default()
        }
    }

    #[test]
    fn groups_round_trip_and_damaged_groups_are_corruption() {
        let group = vec![
            full_edit(),
            VersionEdit { column_family: 3, new_files: vec![(0, file(9))], ..VersionEdit::default() },
        ];
        let mut record = Vec::new();
        VersionEdit::encode_group(&group, &mut record);
        assert_eq!(VersionEdit::decode_record(&record, &path(), 0).unwrap(), group);
        // A single edit is a record of its own.
        assert_eq!(VersionEdit::decode_record(&encode(&full_edit()), &path(), 0).unwrap(), vec![full_edit()]);
        // Every truncation (but to nothing, which is an empty edit), and a byte added, fail.
        for length in 1..record.len() {
            assert!(VersionEdit::decode_record(&record[..length], &path(), 0).is_err(), "length {length}");
        }
        let mut longer = record.clone();
        longer.push(0);
        assert!(VersionEdit::decode_record(&longer, &path(), 0).is_err());
        // A group of one, and a group inside a group, are refused.
        let mut single = Vec::new();
        VersionEdit::encode_group(&group[..1], &mut single);
        assert!(VersionEdit::decode_record(&single, &path(), 0).is_err());
        let mut nested = Vec::new();
        VersionEdit::encode_group(&group, &mut nested);
        let mut outer = Vec::new();
        put_varint32(&mut outer, TAG_EDIT_GROUP);
        put_varint64(&mut outer, 2);
        put_length_prefixed(&mut outer, &nested);
        put_length_prefixed(&mut outer, &encode(&full_edit()));
        assert!(VersionEdit::decode_record(&outer, &path(), 0).is_err());
    }

    #[test]
    fn column_family_fields_round_trip() {
        let edit = column_family_edit();
        let decoded = VersionEdit::decode(&encode(&edit), &path(), 0).unwrap();
        assert_eq!(decoded, edit);
        // The default column family is implied, never written.
        let default_edit = VersionEdit { log_number: Some(1), ..VersionEdit::default() };
        assert_eq!(encode(&default_edit), vec![2, 1]);
    }

    #[test]
    fn column_family_fields_are_checked() {
        // An explicit default id would give one edit two encodings.
        assert!(VersionEdit::decode(&[7, 0], &path(), 0).is_err());
        // Twice the same column family tag.
        assert!(VersionEdit::decode(&[7, 1, 7, 1], &path(), 0).is_err());
        // Dropped twice.
        assert!(VersionEdit::decode(&[7, 1, 9, 9], &path(), 0).is_err());
        // Names must be UTF-8.
        assert!(VersionEdit::decode(&[8, 1, 0xff], &path(), 0).is_err());
        assert!(VersionEdit::decode(&[12, 1, 0xff], &path(), 0).is_err());
        // Twice a comparator for the column family.
        assert!(VersionEdit::decode(&[12, 1, b'c', 12, 1, b'c'], &path(), 0).is_err());
        // Ids must fit in 32 bits.
        assert!(VersionEdit::decode(&[11, 0x80, 0x80, 0x80, 0x80, 0x10], &path(), 0).is_err());
    }

    fn encode(edit: &VersionEdit) -> Vec<u8> {
        let mut out = Vec::new();
        edit.encode(&mut out);
        out
    }

    fn corruption_offset(result: Result<VersionEdit>) -> u64 {
        match result {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, path());
                offset
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn round_trips() {
        let edits = [
            full_edit(),
            VersionEdit::default(),
            VersionEdit { log_number: Some(0), ..VersionEdit::default() },
            VersionEdit { new_files: vec![(0, file(1))], ..VersionEdit::default() },
        ];
        for edit in edits {
            let encoded = encode(&edit);
            assert_eq!(VersionEdit::decode(&encoded, &path(), 0).expect("valid"), edit);
        }
        assert!(encode(&VersionEdit::default()).is_empty());
    }

    #[test]
    fn a_committed_prepared_transaction_encodes_as_documented() {
        // The example of docs/format/manifest.md: prepared transaction 300 committed together
        // with a table of column family 2.
        let edit = VersionEdit { column_family: 2, prepared_committed: vec![300], ..VersionEdit::default() };
        assert_eq!(encode(&edit), vec![7, 2, 14, 0xac, 0x02]);
        assert_eq!(VersionEdit::decode(&encode(&edit), &path(), 0).expect("decodes"), edit);
        // A truncated number is corruption.
        assert!(VersionEdit::decode(&[14, 0xac], &path(), 0).is_err());
    }

    #[test]
    fn blob_fields_encode_as_documented_and_are_checked() {
        // The example of docs/format/manifest.md: blob file 9 (2 records, 300 bytes of them)
        // and garbage of 1 record, 150 bytes, in blob file 4.
        let edit = VersionEdit {
            new_blob_files: vec![crate::blob::BlobFileMetadata {
                number: 9,
                record_count: 2,
                record_bytes: 300,
                file_size_bytes: 348,
                format_version: crate::blob::format::BLOB_FORMAT_VERSION,
            }],
            blob_garbage: vec![BlobGarbage { number: 4, count: 1, bytes: 150 }],
            ..VersionEdit::default()
        };
        assert_eq!(encode(&edit), vec![23, 9, 2, 0xac, 0x02, 0xdc, 0x02, 16, 4, 1, 0x96, 0x01]);
        assert_eq!(VersionEdit::decode(&encode(&edit), &path(), 0).expect("valid"), edit);
        // A version-1 blob file (written by a build of manifest format 8 or older) keeps tag 15.
        let mut version_1 = edit.clone();
        version_1.new_blob_files[0].format_version = crate::blob::format::BLOB_FORMAT_VERSION_1;
        assert_eq!(encode(&version_1), vec![15, 9, 2, 0xac, 0x02, 0xdc, 0x02, 16, 4, 1, 0x96, 0x01]);
        assert_eq!(VersionEdit::decode(&encode(&version_1), &path(), 0).expect("valid"), version_1);
        // A table's references follow its own record.
        let referencing = VersionEdit {
            new_files: vec![(0, FileMetadata { blob_references: vec![4, 9], ..file(10) })],
            ..VersionEdit::default()
        };
        let encoded = encode(&referencing);
        assert_eq!(&encoded[encoded.len() - 5..], &[17, 10, 2, 4, 9]);
        let mut bad_sizes = Vec::new();
        put_varint32(&mut bad_sizes, TAG_NEW_BLOB_FILE);
        for value in [9, 2, 300, 347] {
            put_varint64(&mut bad_sizes, value);
        }
        assert!(VersionEdit::decode(&bad_sizes, &path(), 0).is_err(), "file size must frame the records");
        let mut orphan_references = Vec::new();
        for value in [17, 10, 1, 4] {
            put_varint64(&mut orphan_references, value);
        }
        assert!(VersionEdit::decode(&orphan_references, &path(), 0).is_err(), "references of a table not added");
        let mut descending = encode(&VersionEdit { new_files: vec![(0, file(10))], ..VersionEdit::default() });
        for value in [17, 10, 2, 9, 4] {
            put_varint64(&mut descending, value);
        }
        assert!(VersionEdit::decode(&descending, &path(), 0).is_err(), "references must ascend");
        let mut twice = encoded.clone();
        twice.extend_from_slice(&[17, 10, 1, 11]);
        assert!(VersionEdit::decode(&twice, &path(), 0).is_err(), "one reference list per table");
    }

    #[test]
    fn encoding_is_byte_exact() {
        let edit = VersionEdit {
            comparator: Some("c".to_string()),
            log_number: Some(2),
            next_file_number: Some(300),
            last_sequence: Some(4),
            deleted_files: vec![(1, 9)],
            new_files: Vec::new(),
            ..VersionEdit::default()
        };
        assert_eq!(encode(&edit), vec![1, 1, b'c', 2, 2, 3, 0xac, 0x02, 4, 4, 5, 1, 9]);
    }

    #[test]
    fn a_column_family_comparator_encodes_as_documented() {
        // The example of docs/format/manifest.md.
        let edit = VersionEdit {
            column_family: 2,
            add_column_family: Some("desc".to_string()),
            column_family_comparator: Some("riptide.reverse_bytewise".to_string()),
            max_column_family: Some(2),
            log_number: Some(21),
            next_file_number: Some(22),
            last_sequence: Some(900),
            ..VersionEdit::default()
        };
        let mut expected = vec![7, 2, 8, 4];
        expected.extend_from_slice(b"desc");
        expected.extend_from_slice(&[12, 24]);
        expected.extend_from_slice(b"riptide.reverse_bytewise");
        expected.extend_from_slice(&[11, 2, 2, 21, 3, 22, 4, 0x84, 0x07]);
        assert_eq!(encode(&edit), expected);
        assert_eq!(VersionEdit::decode(&expected, &path(), 0).expect("decodes"), edit);
    }

    #[test]
    fn ignorable_tags_are_skipped_and_unknown_tags_rejected() {
        let mut encoded = encode(&full_edit());
        let known_length = encoded.len() as u64;
        put_varint32(&mut encoded, SAFE_TO_IGNORE_TAG_BIT | 1);
        put_length_prefixed(&mut encoded, b"future field");
        put_varint32(&mut encoded, 1000 | SAFE_TO_IGNORE_TAG_BIT);
        put_length_prefixed(&mut encoded, b"");
        assert_eq!(VersionEdit::decode(&encoded, &path(), 0).expect("ignorable"), full_edit());

        let mut unknown = encode(&full_edit());
        put_varint32(&mut unknown, 13);
        put_length_prefixed(&mut unknown, b"x");
        assert_eq!(corruption_offset(VersionEdit::decode(&unknown, &path(), 50)), 50 + known_length);
        assert_eq!(corruption_offset(VersionEdit::decode(&[0], &path(), 50)), 50);
        let mut huge_tag = Vec::new();
        put_varint64(&mut huge_tag, 1 << 40);
        corruption_offset(VersionEdit::decode(&huge_tag, &path(), 0));
    }

    #[test]
    fn invalid_fields_are_corruption() {
        let mut level_too_high = Vec::new();
        put_varint32(&mut level_too_high, TAG_DELETED_FILE);
        put_varint32(&mut level_too_high, 64);
        put_varint64(&mut level_too_high, 1);
        assert_eq!(corruption_offset(VersionEdit::decode(&level_too_high, &path(), 10)), 11);

        let mut new_file_level = encode(&VersionEdit { new_files: vec![(0, file(1))], ..VersionEdit::default() });
        new_file_level[1] = 64;
        assert_eq!(corruption_offset(VersionEdit::decode(&new_file_level, &path(), 0)), 1);

        let short_key = FileMetadata { smallest: b"short".to_vec(), ..file(2) };
        let mut short_key_bytes = Vec::new();
        put_varint32(&mut short_key_bytes, TAG_NEW_FILE);
        put_varint32(&mut short_key_bytes, 0);
        put_varint64(&mut short_key_bytes, short_key.number);
        put_varint64(&mut short_key_bytes, short_key.file_size_bytes);
        let key_offset = short_key_bytes.len() as u64;
        put_length_prefixed(&mut short_key_bytes, &short_key.smallest);
        put_length_prefixed(&mut short_key_bytes, &short_key.largest);
        for value in [1u64, 2, 3, 0] {
            put_varint64(&mut short_key_bytes, value);
        }
        assert_eq!(corruption_offset(VersionEdit::decode(&short_key_bytes, &path(), 0)), key_offset);

        let mut bad_kind = file(3);
        let last = bad_kind.largest.len() - 8;
        bad_kind.largest[last] = 0x7f;
        let encoded = encode(&VersionEdit { new_files: vec![(0, bad_kind)], ..VersionEdit::default() });
        corruption_offset(VersionEdit::decode(&encoded, &path(), 0));

        // Which of two keys is the smallest depends on the column family's comparator, so the
        // decoder takes a file whose keys look reversed bytewise; recovery checks the order.
        let reversed = FileMetadata { smallest: file(4).largest, largest: file(4).smallest, ..file(4) };
        let edit = VersionEdit { new_files: vec![(2, reversed)], ..VersionEdit::default() };
        assert_eq!(VersionEdit::decode(&encode(&edit), &path(), 0).expect("decodes"), edit);

        let sequences = FileMetadata { smallest_sequence: 50, largest_sequence: 49, ..file(5) };
        let encoded = encode(&VersionEdit { new_files: vec![(2, sequences)], ..VersionEdit::default() });
        corruption_offset(VersionEdit::decode(&encoded, &path(), 0));

        let deletions = FileMetadata { num_entries: 1, num_deletions: 2, ..file(6) };
        let encoded = encode(&VersionEdit { new_files: vec![(2, deletions)], ..VersionEdit::default() });
        corruption_offset(VersionEdit::decode(&encoded, &path(), 0));

        let encoded = encode(&VersionEdit { last_sequence: Some(MAX_SEQUENCE_NUMBER + 1), ..VersionEdit::default() });
        assert_eq!(corruption_offset(VersionEdit::decode(&encoded, &path(), 0)), 1);

        let mut not_utf8 = Vec::new();
        put_varint32(&mut not_utf8, TAG_COMPARATOR);
        put_length_prefixed(&mut not_utf8, &[0xff, 0xfe]);
        corruption_offset(VersionEdit::decode(&not_utf8, &path(), 0));

        let mut twice = encode(&VersionEdit { log_number: Some(1), ..VersionEdit::default() });
        let second = twice.len() as u64;
        twice.extend(encode(&VersionEdit { log_number: Some(2), ..VersionEdit::default() }));
        assert_eq!(corruption_offset(VersionEdit::decode(&twice, &path(), 0)), second);
    }

    #[test]
    fn truncation_inside_a_field_is_corruption() {
        // The lengths at which a prefix of the encoding ends exactly after a whole field.
        let edit = full_edit();
        let mut boundaries = vec![0];
        let mut partial = VersionEdit::default();
        type Step = Box<dyn Fn(&mut VersionEdit)>;
        let steps: Vec<Step> = vec![
            Box::new(|e| e.comparator = full_edit().comparator),
            Box::new(|e| e.log_number = full_edit().log_number),
            Box::new(|e| e.next_file_number = full_edit().next_file_number),
            Box::new(|e| e.last_sequence = full_edit().last_sequence),
            Box::new(|e| e.deleted_files.push(full_edit().deleted_files[0])),
            Box::new(|e| e.deleted_files.push(full_edit().deleted_files[1])),
            Box::new(|e| e.prepared_committed.push(full_edit().prepared_committed[0])),
            Box::new(|e| e.prepared_committed.push(full_edit().prepared_committed[1])),
            Box::new(|e| {
                let (level, file) = full_edit().new_files[0].clone();
                e.new_files.push((
                    level,
                    FileMetadata {
                        range_tombstones_applied_through: 0,
                        expiry: Default::default(),
                        num_merge_operands: 0,
                        ..file
                    },
                ));
            }),
            // A table's expiry is a field of its own (tag 21) after its tag 6.
            Box::new(|e| e.new_files[0].1.expiry = full_edit().new_files[0].1.expiry),
            // And its merge operand count (tag 22).
            Box::new(|e| e.new_files[0].1.num_merge_operands = full_edit().new_files[0].1.num_merge_operands),
            // A table's range tombstone mark is a field of its own (tag 20) after its tag 6.
            Box::new(|e| {
                e.new_files[0].1.range_tombstones_applied_through =
                    full_edit().new_files[0].1.range_tombstones_applied_through
            }),
            Box::new(|e| {
                let (level, file) = full_edit().new_files[1].clone();
                e.new_files.push((level, FileMetadata { blob_references: Vec::new(), ..file }));
            }),
            // A table's blob references are a field of their own (tag 17) after its tag 6.
            Box::new(|e| e.new_files[1].1.blob_references = full_edit().new_files[1].1.blob_references.clone()),
            // Each blob file is a field of its own (tag 23 for version 2, 15 for version 1).
            Box::new(|e| e.new_blob_files.push(full_edit().new_blob_files[0])),
            Box::new(|e| e.new_blob_files.push(full_edit().new_blob_files[1])),
            Box::new(|e| e.blob_garbage = full_edit().blob_garbage),
            Box::new(|e| e.dropped_range_tombstones = full_edit().dropped_range_tombstones),
            Box::new(|e| e.new_range_tombstones.push(full_edit().new_range_tombstones[0].clone())),
            Box::new(|e| e.new_range_tombstones.push(full_edit().new_range_tombstones[1].clone())),
        ];
        for step in steps {
            step(&mut partial);
            boundaries.push(encode(&partial).len());
        }
        assert_eq!(partial, edit);
        let encoded = encode(&edit);
        for length in 0..=encoded.len() {
            let result = VersionEdit::decode(&encoded[..length], &path(), 0);
            if boundaries.contains(&length) {
                result.expect("a prefix ending on a field boundary is a valid edit");
            } else {
                let offset = corruption_offset(result);
                assert!(offset <= length as u64);
            }
        }
    }

    #[test]
    fn randomized_damage_never_panics() {
        let original = encode(&full_edit());
        let mut rng = SmallRng::seed_from_u64(0xed17);
        let mut decoded_cleanly = 0;
        for _ in 0..5000 {
            let mut garbled = original.clone();
            match rng.gen_range(0..4) {
                0 => garbled.truncate(rng.gen_range(0..original.len())),
                1 => {
                    for _ in 0..rng.gen_range(1..4) {
                        let position = rng.gen_range(0..garbled.len());
                        garbled[position] ^= 1 << rng.gen_range(0..8);
                    }
                }
                2 => {
                    let position = rng.gen_range(0..garbled.len());
                    garbled.insert(position, rng.gen());
                }
                _ => garbled = (0..rng.gen_range(0..80)).map(|_| rng.gen_range(0..8)).collect(),
            }
            if let Ok(edit) = VersionEdit::decode(&garbled, &path(), 0) {
                decoded_cleanly += 1;
                // Whatever decodes must satisfy the documented invariants.
                for (level, file) in &edit.new_files {
                    assert!(*level < MAX_ENCODABLE_LEVELS);
                    assert!(file.smallest.len() >= 8 && file.largest.len() >= 8);
                    assert!(file.num_deletions <= file.num_entries);
                }
                assert!(edit.deleted_files.iter().all(|(level, _)| *level < MAX_ENCODABLE_LEVELS));
            }
        }
        assert!(decoded_cleanly < 5000);
    }
}
