//! Write batches: an atomic group of puts and deletes, encoded once.
//!
//! A [`WriteBatch`] keeps its records in their final encoded form (`rep`), so the very same
//! bytes are appended to the write-ahead log and later replayed into the memtable; nothing is
//! re-encoded on the write path. The byte layout is documented in `docs/format/write_batch.md`
//! (format version 3): an 8-byte little-endian base sequence number, a 4-byte little-endian
//! record count, then the records, each a kind byte, a column family id (only for the
//! column-family kinds), a length-prefixed key and, for puts only, a length-prefixed value
//! (for range deletes, the length-prefixed end key). Records of the default column family use
//! the version-1 kinds, so a batch that names no other column family and holds no range delete
//! is byte-for-byte a version-1 batch.
//!
//! Concurrency contract: a batch is a plain value with no interior mutability. It is `Send` and
//! `Sync`; mutation needs `&mut`, so a batch is built by one thread and then handed over (to the
//! group-commit leader, which stamps its sequence number and appends its bytes to the log).
//!
//! Invariants: `rep` always holds at least the 12-byte header; the count in the header equals
//! the number of records that follow; the records decode exactly to the end of `rep`, with no
//! trailing bytes; `max_key_bytes` and `max_value_bytes` are the largest key and value lengths
//! among the records (0 for an empty batch). Batches built through the public methods hold these
//! by construction; [`WriteBatch::from_data`] checks them for bytes read back from disk, which
//! is why the iterators can decode without reporting errors.

use std::fmt;
use std::path::Path;

use crate::coding::{
    get_length_prefixed, get_varint32, put_length_prefixed, put_varint32, read_u32, read_u64, varint_length,
};
use crate::error::{Error, Result};
use crate::key::{ValueKind, MAX_SEQUENCE_NUMBER};

/// Size of the batch header: the 8-byte base sequence number and the 4-byte record count.
pub(crate) const BATCH_HEADER_SIZE_BYTES: usize = 12;

/// Offset of the record count inside the header.
const COUNT_OFFSET_BYTES: usize = 8;

/// Record kind: a delete in the default column family (the same code as [`ValueKind::Delete`]).
const RECORD_DELETE: u8 = 0;
/// Record kind: a put in the default column family (the same code as [`ValueKind::Put`]).
const RECORD_PUT: u8 = 1;
/// Record kind: a delete in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_DELETE: u8 = 2;
/// Record kind: a put in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_PUT: u8 = 3;
/// Record kind: a range delete in the default column family: the start key, then the end key
/// (exclusive) where a put has its value. Format version 3.
const RECORD_RANGE_DELETE: u8 = 4;
/// Record kind: a range delete in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_RANGE_DELETE: u8 = 5;
/// Record kind: a single delete in the default column family (the same layout as a delete).
/// Format version 3.
const RECORD_SINGLE_DELETE: u8 = 6;
/// Record kind: a single delete in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_SINGLE_DELETE: u8 = 7;
/// Record kind: a put with an expiry in the default column family: the layout of a put, whose
/// value is the expiry (8 bytes, little endian, microseconds since the Unix epoch) followed by
/// the user's value (`ttl.rs`). Format version 4.
const RECORD_PUT_WITH_EXPIRY: u8 = 8;
/// Record kind: a put with an expiry in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_PUT_WITH_EXPIRY: u8 = 9;
/// Record kind: a merge operand in the default column family (the layout of a put). Format
/// version 5.
const RECORD_MERGE: u8 = 10;
/// Record kind: a merge operand in the column family whose id follows as a varint.
const RECORD_COLUMN_FAMILY_MERGE: u8 = 11;

/// The id of the default column family, which always exists.
pub(crate) const DEFAULT_COLUMN_FAMILY_ID: u32 = 0;

/// A batch of writes applied atomically: either every put and delete in it becomes visible, or
/// none does.
///
/// Records are applied in the order they were added, so a later write to the same key wins.
///
/// ```
/// use riptide::WriteBatch;
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red");
/// batch.delete(b"banana");
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone)]
pub struct WriteBatch {
    /// The encoded batch: header, then records.
    rep: Vec<u8>,
    /// Length of the longest key among the records, kept so limits can be checked in O(1).
    max_key_bytes: usize,
    /// Length of the longest value among the records.
    max_value_bytes: usize,
    /// True when some record names a column family other than the default one.
    has_column_family_records: bool,
}

/// What a record in a [`WriteBatch`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BatchOp {
    /// Sets the key to the value.
    Put,
    /// Removes the key.
    Delete,
    /// Removes every key from the record's key (inclusive) to its value (exclusive).
    DeleteRange,
    /// Removes a key written once (see [`WriteBatch::single_delete`]).
    SingleDelete,
    /// Sets the key to the value until an expiry time (see [`WriteBatch::put_with_expiry`] and
    /// [`BatchEntry::expires_at_us`]).
    PutWithExpiry,
    /// Adds a merge operand to the key (see [`WriteBatch::merge`]).
    Merge,
}

/// One record of a [`WriteBatch`], borrowed from the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    column_family_id: u32,
    kind: BatchOp,
    key: &'a [u8],
    value: &'a [u8],
}

impl<'a> BatchEntry<'a> {
    /// The id of the column family the record writes to (0 for the default one).
    pub fn column_family_id(&self) -> u32 {
        self.column_family_id
    }

    /// Whether this record is a put or a delete.
    pub fn kind(&self) -> BatchOp {
        self.kind
    }

    /// The user key the record writes.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The value of a put, the end key (exclusive) of a range delete; empty for a delete.
    pub fn value(&self) -> &'a [u8] {
        match self.kind {
            BatchOp::PutWithExpiry => crate::ttl::split_expiring(self.value).map_or(&[], |(_, value)| value),
            _ => self.value,
        }
    }

    /// The expiry of a put with an expiry, in microseconds since the Unix epoch; `None` for
    /// every other record.
    pub fn expires_at_us(&self) -> Option<u64> {
        match self.kind {
            BatchOp::PutWithExpiry => crate::ttl::split_expiring(self.value).map(|(expiry, _)| expiry),
            _ => None,
        }
    }
}

/// A read-only iterator over the records of a [`WriteBatch`], in the order they were added.
#[derive(Clone, Debug)]
pub struct BatchIter<'a> {
    entries: BatchEntries<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchEntry<'a>;

    fn next(&mut self) -> Option<BatchEntry<'a>> {
        let entry = self.entries.next()?;
        let kind = match entry.kind {
            _ if entry.range_delete => BatchOp::DeleteRange,
            // Batches never hold blob references (`from_data` decodes puts and deletes only);
            // a reference would be a put of its own bytes.
            ValueKind::Put | ValueKind::BlobIndex => BatchOp::Put,
            ValueKind::Delete => BatchOp::Delete,
            ValueKind::SingleDelete => BatchOp::SingleDelete,
            ValueKind::PutWithExpiry => BatchOp::PutWithExpiry,
            ValueKind::Merge => BatchOp::Merge,
        };
        Some(BatchEntry { column_family_id: entry.column_family_id, kind, key: entry.key, value: entry.value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = BatchEntry<'a>;
    type IntoIter = BatchIter<'a>;

    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// One decoded record, as the write path inserts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordRef<'a> {
    pub(crate) column_family_id: u32,
    /// `Delete` for a range delete too (see `range_delete`).
    pub(crate) kind: ValueKind,
    /// The key; the start key of a range delete.
    pub(crate) key: &'a [u8],
    /// Empty for a delete; the end key (exclusive) of a range delete.
    pub(crate) value: &'a [u8],
    /// True for a range delete of `[key, value)`.
    pub(crate) range_delete: bool,
}

/// The crate's iterator over a batch's records; the value is empty for a delete. The batch has been
/// validated, so decoding cannot fail; should it ever meet bytes it cannot decode (a broken
/// invariant), it ends early instead of panicking.
#[derive(Clone, Debug)]
pub(crate) struct BatchEntries<'a> {
    /// The records still to decode.
    records: &'a [u8],
    /// Records still to yield, from the header count.
    remaining: usize,
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        if self.remaining == 0 {
            return None;
        }
        match decode_record(self.records) {
            Ok(record) => {
                self.records = self.records.get(record.length_bytes..).unwrap_or_default();
                self.remaining -= 1;
                Some(RecordRef {
                    column_family_id: record.column_family_id,
                    kind: record.kind,
                    key: record.key,
                    value: record.value,
                    range_delete: record.range_delete,
                })
            }
            Err(_) => {
                debug_assert!(false, "a validated write batch failed to decode");
                self.remaining = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

/// A record decoded from the front of a byte slice.
struct DecodedRecord<'a> {
    column_family_id: u32,
    kind: ValueKind,
    key: &'a [u8],
    value: &'a [u8],
    range_delete: bool,
    /// Encoded size of the record, so the caller can step to the next one.
    length_bytes: usize,
}

/// Decodes one record from the front of `input`. On failure it returns the position within
/// `input` where the damage was found and a description of it.
fn decode_record(input: &[u8]) -> std::result::Result<DecodedRecord<'_>, (usize, String)> {
    let Some(&kind_byte) = input.first() else {
        return Err((0, "record kind byte missing".to_string()));
    };
    let range_delete = matches!(kind_byte, RECORD_RANGE_DELETE | RECORD_COLUMN_FAMILY_RANGE_DELETE);
    let (kind, names_column_family) = match kind_byte {
        RECORD_DELETE | RECORD_RANGE_DELETE => (ValueKind::Delete, false),
        RECORD_PUT => (ValueKind::Put, false),
        RECORD_COLUMN_FAMILY_DELETE | RECORD_COLUMN_FAMILY_RANGE_DELETE => (ValueKind::Delete, true),
        RECORD_SINGLE_DELETE => (ValueKind::SingleDelete, false),
        RECORD_COLUMN_FAMILY_SINGLE_DELETE => (ValueKind::SingleDelete, true),
        RECORD_COLUMN_FAMILY_PUT => (ValueKind::Put, true),
        RECORD_PUT_WITH_EXPIRY => (ValueKind::PutWithExpiry, false),
        RECORD_COLUMN_FAMILY_PUT_WITH_EXPIRY => (ValueKind::PutWithExpiry, true),
        RECORD_MERGE => (ValueKind::Merge, false),
        RECORD_COLUMN_FAMILY_MERGE => (ValueKind::Merge, true),
        _ => return Err((0, format!("unknown record kind {kind_byte}"))),
    };
    let mut length_bytes = 1;
    let mut column_family_id = DEFAULT_COLUMN_FAMILY_ID;
    if names_column_family {
        let after_kind = input.get(1..).unwrap_or_default();
        let Some((id, id_length_bytes)) = get_varint32(after_kind) else {
            return Err((1, "column family id is malformed or runs past the end of the batch".to_string()));
        };
        // The default column family always uses the short kinds, and ids are minimally
        // encoded, so that decoding stays one-to-one.
        if id == DEFAULT_COLUMN_FAMILY_ID || id_length_bytes != varint_length(u64::from(id)) {
            return Err((1, format!("column family id {id} is not in canonical form")));
        }
        column_family_id = id;
        length_bytes += id_length_bytes;
    }
    let after_kind = input.get(length_bytes..).unwrap_or_default();
    let Some((key, key_length_bytes)) = get_length_prefixed(after_kind) else {
        return Err((length_bytes, "key length is malformed or runs past the end of the batch".to_string()));
    };
    if !is_minimal_prefix(key, key_length_bytes) {
        return Err((length_bytes, "key length is not minimally encoded".to_string()));
    }
    length_bytes += key_length_bytes;
    let mut value: &[u8] = &[];
    if matches!(kind, ValueKind::Put | ValueKind::PutWithExpiry | ValueKind::Merge) || range_delete {
        let after_key = input.get(length_bytes..).unwrap_or_default();
        let Some((decoded_value, value_length_bytes)) = get_length_prefixed(after_key) else {
            return Err((length_bytes, "value length is malformed or runs past the end of the batch".to_string()));
        };
        if !is_minimal_prefix(decoded_value, value_length_bytes) {
            return Err((length_bytes, "value length is not minimally encoded".to_string()));
        }
        if kind == ValueKind::PutWithExpiry && decoded_value.len() < crate::ttl::EXPIRY_PREFIX_BYTES {
            return Err((length_bytes, format!("a put with an expiry has a {}-byte value", decoded_value.len())));
        }
        value = decoded_value;
        length_bytes += value_length_bytes;
    }
    Ok(DecodedRecord { column_family_id, kind, key, value, range_delete, length_bytes })
}

/// True when a length-prefixed string of `total_bytes` (prefix included) used the shortest
/// varint for its length. The encoder always does, so a longer prefix means damaged bytes; and
/// rejecting it keeps decoding one-to-one, so a decoded batch re-encodes to the same bytes.
fn is_minimal_prefix(bytes: &[u8], total_bytes: usize) -> bool {
    total_bytes - bytes.len() == varint_length(bytes.len() as u64)
}

impl WriteBatch {
    /// Creates an empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::with_capacity_bytes(0)
    }

    /// Creates an empty batch whose buffer holds `record_bytes` of records before it grows.
    /// Callers that know what they will add (a transaction's commit) size it once instead of
    /// letting the buffer double its way up.
    pub(crate) fn with_capacity_bytes(record_bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(BATCH_HEADER_SIZE_BYTES.saturating_add(record_bytes));
        rep.resize(BATCH_HEADER_SIZE_BYTES, 0);
        WriteBatch { rep, max_key_bytes: 0, max_value_bytes: 0, has_column_family_records: false }
    }

    /// Adds a record that sets `key` to `value` in the default column family.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.put_in(DEFAULT_COLUMN_FAMILY_ID, key, value);
    }

    /// Adds a record that removes `key` from the default column family. Deleting a key that
    /// does not exist is not an error.
    pub fn delete(&mut self, key: &[u8]) {
        self.delete_in(DEFAULT_COLUMN_FAMILY_ID, key);
    }

    /// Adds a record that sets `key` to `value` in `column_family`. A batch may write to several
    /// column families; it is applied atomically across all of them.
    pub fn put_cf(&mut self, column_family: &crate::ColumnFamily, key: &[u8], value: &[u8]) {
        self.put_in(column_family.id(), key, value);
    }

    /// Adds a record that removes `key` from `column_family`.
    pub fn delete_cf(&mut self, column_family: &crate::ColumnFamily, key: &[u8]) {
        self.delete_in(column_family.id(), key);
    }

    /// Adds a record that removes every key from `start` (inclusive) to `end` (exclusive) from
    /// the default column family, in its key order. A range whose start is not below its end
    /// removes nothing. [`crate::Db::write`] rejects keys longer than the key size limit.
    pub fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        self.delete_range_in(DEFAULT_COLUMN_FAMILY_ID, start, end);
    }

    /// Adds a record that removes every key in `[start, end)` from `column_family`.
    pub fn delete_range_cf(&mut self, column_family: &crate::ColumnFamily, start: &[u8], end: &[u8]) {
        self.delete_range_in(column_family.id(), start, end);
    }

    /// Adds a record that removes `key` from the default column family, for a key written
    /// with at most one put since its previous single delete: flush and compaction then drop
    /// the single delete together with the put it meets, instead of carrying a tombstone down
    /// to the last level. Reads see it as a delete.
    ///
    /// The contract, as RocksDB's: a single-deleted key is written only by puts (one at most
    /// between single deletes) and never deleted with [`WriteBatch::delete`]. A plain delete
    /// between two puts may be dropped by compaction as shadowed by the newer put, after which
    /// the single delete meets that put and the older one is visible again. A broken contract
    /// leaves that key deleted or showing an older value of its own; it never changes another
    /// key. Range deletes may be mixed freely.
    pub fn single_delete(&mut self, key: &[u8]) {
        self.single_delete_in(DEFAULT_COLUMN_FAMILY_ID, key);
    }

    /// Adds a single delete of `key` in `column_family` (see [`WriteBatch::single_delete`]).
    pub fn single_delete_cf(&mut self, column_family: &crate::ColumnFamily, key: &[u8]) {
        self.single_delete_in(column_family.id(), key);
    }

    /// Adds a merge operand for `key` in the default column family: reads apply it, with every
    /// operand written before it, to the value beneath them through the column family's merge
    /// operator ([`crate::Options::merge_operator`]), without reading anything at write time (a
    /// counter's increment, an append). Reading a key with operands in a column family without
    /// a merge operator fails with [`crate::Error::InvalidArgument`].
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.merge_in(DEFAULT_COLUMN_FAMILY_ID, key, operand);
    }

    /// Adds a merge operand for `key` in `column_family` (see [`WriteBatch::merge`]).
    pub fn merge_cf(&mut self, column_family: &crate::ColumnFamily, key: &[u8], operand: &[u8]) {
        self.merge_in(column_family.id(), key, operand);
    }

    pub(crate) fn merge_in(&mut self, column_family_id: u32, key: &[u8], operand: &[u8]) {
        self.push_kind(column_family_id, RECORD_MERGE, RECORD_COLUMN_FAMILY_MERGE);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, operand);
        self.max_key_bytes = self.max_key_bytes.max(key.len());
        self.max_value_bytes = self.max_value_bytes.max(operand.len());
        self.add_to_count(1);
    }

    /// Adds a record that sets `key` to `value` in the default column family until
    /// `expires_at_us` (microseconds since the Unix epoch, as the database's
    /// [`crate::Clock`] counts them). From that time on, reads see the key as deleted, and
    /// compaction drops the value (I42). The expiry is stored as given, so a batch written twice
    /// expires at the same time both times; [`crate::Db::put_with_ttl`] computes it from a
    /// duration.
    pub fn put_with_expiry(&mut self, key: &[u8], value: &[u8], expires_at_us: u64) {
        self.put_with_expiry_in(DEFAULT_COLUMN_FAMILY_ID, key, value, expires_at_us);
    }

    /// Adds a put with an expiry of `key` in `column_family` (see
    /// [`WriteBatch::put_with_expiry`]).
    pub fn put_with_expiry_cf(
        &mut self,
        column_family: &crate::ColumnFamily,
        key: &[u8],
        value: &[u8],
        expires_at_us: u64,
    ) {
        self.put_with_expiry_in(column_family.id(), key, value, expires_at_us);
    }

    pub(crate) fn put_with_expiry_in(&mut self, column_family_id: u32, key: &[u8], value: &[u8], expires_at_us: u64) {
        self.push_kind(column_family_id, RECORD_PUT_WITH_EXPIRY, RECORD_COLUMN_FAMILY_PUT_WITH_EXPIRY);
        put_length_prefixed(&mut self.rep, key);
        crate::coding::put_varint64(&mut self.rep, (value.len() + crate::ttl::EXPIRY_PREFIX_BYTES) as u64);
        self.rep.extend_from_slice(&expires_at_us.to_le_bytes());
        self.rep.extend_from_slice(value);
        self.max_key_bytes = self.max_key_bytes.max(key.len());
        self.max_value_bytes = self.max_value_bytes.max(value.len());
        self.add_to_count(1);
    }

    pub(crate) fn single_delete_in(&mut self, column_family_id: u32, key: &[u8]) {
        self.push_kind(column_family_id, RECORD_SINGLE_DELETE, RECORD_COLUMN_FAMILY_SINGLE_DELETE);
        put_length_prefixed(&mut self.rep, key);
        self.max_key_bytes = self.max_key_bytes.max(key.len());
        self.add_to_count(1);
    }

    pub(crate) fn delete_range_in(&mut self, column_family_id: u32, start: &[u8], end: &[u8]) {
        self.push_kind(column_family_id, RECORD_RANGE_DELETE, RECORD_COLUMN_FAMILY_RANGE_DELETE);
        put_length_prefixed(&mut self.rep, start);
        put_length_prefixed(&mut self.rep, end);
        self.max_key_bytes = self.max_key_bytes.max(start.len()).max(end.len());
        self.add_to_count(1);
    }

    pub(crate) fn put_in(&mut self, column_family_id: u32, key: &[u8], value: &[u8]) {
        self.push_kind(column_family_id, RECORD_PUT, RECORD_COLUMN_FAMILY_PUT);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.max_key_bytes = self.max_key_bytes.max(key.len());
        self.max_value_bytes = self.max_value_bytes.max(value.len());
        self.add_to_count(1);
    }

    pub(crate) fn delete_in(&mut self, column_family_id: u32, key: &[u8]) {
        self.push_kind(column_family_id, RECORD_DELETE, RECORD_COLUMN_FAMILY_DELETE);
        put_length_prefixed(&mut self.rep, key);
        self.max_key_bytes = self.max_key_bytes.max(key.len());
        self.add_to_count(1);
    }

    /// Appends the kind byte, and the column family id when it is not the default one.
    fn push_kind(&mut self, column_family_id: u32, default_kind: u8, column_family_kind: u8) {
        if column_family_id == DEFAULT_COLUMN_FAMILY_ID {
            self.rep.push(default_kind);
        } else {
            self.rep.push(column_family_kind);
            put_varint32(&mut self.rep, column_family_id);
            self.has_column_family_records = true;
        }
    }

    /// True when some record names a column family other than the default one.
    pub(crate) fn has_column_family_records(&self) -> bool {
        self.has_column_family_records
    }

    /// Removes every record, leaving an empty batch that can be reused without reallocating.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_SIZE_BYTES, 0);
        self.max_key_bytes = 0;
        self.max_value_bytes = 0;
        self.has_column_family_records = false;
    }

    /// Number of records (puts and deletes) in the batch.
    pub fn len(&self) -> usize {
        self.count() as usize
    }

    /// True when the batch holds no records.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Size of the encoded batch in bytes, header included: what it will occupy in the log.
    pub fn size_bytes(&self) -> usize {
        self.rep.len()
    }

    /// Iterates over the records in the order they were added.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter { entries: self.entries() }
    }

    /// The base sequence number: the first record gets it, each later record the next one.
    pub(crate) fn sequence(&self) -> u64 {
        read_u64(&self.rep, 0).unwrap_or_default()
    }

    /// Sets the base sequence number (the write path does this just before logging).
    pub(crate) fn set_sequence(&mut self, sequence: u64) {
        debug_assert!(
            self.is_empty() || sequence.saturating_add(self.len() as u64 - 1) <= MAX_SEQUENCE_NUMBER,
            "I3: the batch's last sequence number would exceed 56 bits"
        );
        self.rep[..COUNT_OFFSET_BYTES].copy_from_slice(&sequence.to_le_bytes());
    }

    /// The encoded batch, exactly as it is written to the log.
    pub(crate) fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Rebuilds a batch from bytes read back from the log, checking the whole encoding: the
    /// header, every record, the record count, that nothing trails the last record, and that the
    /// sequence numbers of all records fit in 56 bits (invariant I3). `path` and `offset` (where
    /// `data` starts in that file) locate any damage in the returned [`Error::Corruption`].
    pub(crate) fn from_data(data: Vec<u8>, path: &Path, offset: u64) -> Result<WriteBatch> {
        let corruption = |position: usize, reason: String| {
            Error::corruption(path, offset.saturating_add(position as u64), format!("write batch: {reason}"))
        };
        let (Some(sequence), Some(count)) = (read_u64(&data, 0), read_u32(&data, COUNT_OFFSET_BYTES)) else {
            return Err(corruption(
                0,
                format!("{} bytes is shorter than the {BATCH_HEADER_SIZE_BYTES}-byte header", data.len()),
            ));
        };
        if count > 0 {
            let last_sequence = sequence.checked_add(u64::from(count) - 1);
            if last_sequence.is_none_or(|last| last > MAX_SEQUENCE_NUMBER) {
                return Err(corruption(
                    0,
                    format!("base sequence {sequence} with {count} records exceeds the 56-bit sequence space"),
                ));
            }
        }
        let mut position = BATCH_HEADER_SIZE_BYTES;
        let mut decoded_count: u32 = 0;
        let mut max_key_bytes = 0;
        let mut max_value_bytes = 0;
        let mut has_column_family_records = false;
        while position < data.len() {
            if decoded_count == count {
                return Err(corruption(
                    position,
                    format!("{} bytes follow the last of the {count} records", data.len() - position),
                ));
            }
            let remaining = data.get(position..).unwrap_or_default();
            let record = decode_record(remaining).map_err(|(within, reason)| {
                corruption(position + within, format!("record {decoded_count}: {reason}"))
            })?;
            max_key_bytes = max_key_bytes.max(record.key.len());
            if record.range_delete {
                // A range delete's second string is its end key.
                max_key_bytes = max_key_bytes.max(record.value.len());
            } else if record.kind == ValueKind::PutWithExpiry {
                max_value_bytes = max_value_bytes.max(record.value.len() - crate::ttl::EXPIRY_PREFIX_BYTES);
            } else {
                max_value_bytes = max_value_bytes.max(record.value.len());
            }
            has_column_family_records |= record.column_family_id != DEFAULT_COLUMN_FAMILY_ID;
            position += record.length_bytes;
            decoded_count += 1;
        }
        if decoded_count != count {
            return Err(corruption(
                position,
                format!("header counts {count} records but only {decoded_count} are present"),
            ));
        }
        Ok(WriteBatch { rep: data, max_key_bytes, max_value_bytes, has_column_family_records })
    }

    /// Appends `other`'s records after this batch's own, as if they had been added to this
    /// batch one by one. The counts add; this batch keeps its own sequence.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(other.records());
        self.max_key_bytes = self.max_key_bytes.max(other.max_key_bytes);
        self.max_value_bytes = self.max_value_bytes.max(other.max_value_bytes);
        self.has_column_family_records |= other.has_column_family_records;
        self.add_to_count(other.count());
    }

    /// Length of the longest key in the batch (0 when empty).
    pub(crate) fn max_key_bytes(&self) -> usize {
        self.max_key_bytes
    }

    /// Length of the longest value in the batch (0 when empty or when it holds only deletes).
    pub(crate) fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    /// Iterates over the decoded records, for insertion into memtables.
    pub(crate) fn entries(&self) -> BatchEntries<'_> {
        BatchEntries { records: self.records(), remaining: self.len() }
    }

    /// The record count from the header.
    fn count(&self) -> u32 {
        read_u32(&self.rep, COUNT_OFFSET_BYTES).unwrap_or_default()
    }

    /// The encoded records, without the header.
    fn records(&self) -> &[u8] {
        self.rep.get(BATCH_HEADER_SIZE_BYTES..).unwrap_or_default()
    }

    /// Adds `added` to the header count. The engine refuses batches larger than 1 GiB, and every
    /// record takes at least 2 bytes, so the 32-bit count cannot overflow in practice; if it ever
    /// would, failing loudly beats writing a count that disagrees with the records.
    fn add_to_count(&mut self, added: u32) {
        let Some(count) = self.count().checked_add(added) else {
            panic!("a write batch cannot hold more than {} records", u32::MAX);
        };
        self.rep[COUNT_OFFSET_BYTES..BATCH_HEADER_SIZE_BYTES].copy_from_slice(&count.to_le_bytes());
    }
}

impl Default for WriteBatch {
    fn default() -> WriteBatch {
        WriteBatch::new()
    }
}

impl fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence())
            .field("len", &self.len())
            .field("size_bytes", &self.size_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::path::PathBuf;

    fn collect(batch: &WriteBatch) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
        batch.entries().map(|record| (record.kind, record.key.to_vec(), record.value.to_vec())).collect()
    }

    fn path() -> PathBuf {
        PathBuf::from("000007.log")
    }

    fn expect_corruption(result: Result<WriteBatch>) -> u64 {
        match result {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, path());
                offset
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn column_family_records_round_trip() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1");
        batch.put_in(7, b"b", b"2");
        batch.delete_in(300, b"c");
        batch.delete(b"d");
        assert!(batch.has_column_family_records());
        let decoded = WriteBatch::from_data(batch.data().to_vec(), &path(), 0).unwrap();
        assert!(decoded.has_column_family_records());
        let records: Vec<(u32, ValueKind, Vec<u8>)> =
            decoded.entries().map(|r| (r.column_family_id, r.kind, r.key.to_vec())).collect();
        assert_eq!(
            records,
            vec![
                (0, ValueKind::Put, b"a".to_vec()),
                (7, ValueKind::Put, b"b".to_vec()),
                (300, ValueKind::Delete, b"c".to_vec()),
                (0, ValueKind::Delete, b"d".to_vec()),
            ]
        );
        // A default-only batch is byte-for-byte a version-1 batch.
        let mut plain = WriteBatch::new();
        plain.put(b"k", b"vv");
        assert!(!plain.has_column_family_records());
        assert_eq!(&plain.data()[12..], &[1, 1, b'k', 2, b'v', b'v']);
    }

    #[test]
    fn column_family_ids_must_be_canonical() {
        let mut header = vec![0u8; 8];
        header.extend_from_slice(&1u32.to_le_bytes());
        // Kind 3 (put in a column family) naming the default id 0 has a shorter spelling.
        let mut zero = header.clone();
        zero.extend_from_slice(&[3, 0, 1, b'k', 0]);
        assert!(WriteBatch::from_data(zero, &path(), 0).is_err());
        // A non-minimal varint id.
        let mut long = header.clone();
        long.extend_from_slice(&[2, 0x85, 0x00, 1, b'k']);
        assert!(WriteBatch::from_data(long, &path(), 0).is_err());
        let mut good = header;
        good.extend_from_slice(&[2, 5, 1, b'k']);
        let batch = WriteBatch::from_data(good, &path(), 0).unwrap();
        assert_eq!(batch.iter().next().unwrap().column_family_id(), 5);
    }

    #[test]
    fn empty_batch() {
        let batch = WriteBatch::new();
        assert!(batch.is_empty());
        assert_eq!(batch.len(), 0);
        assert_eq!(batch.size_bytes(), BATCH_HEADER_SIZE_BYTES);
        assert_eq!(batch.sequence(), 0);
        assert_eq!(batch.iter().count(), 0);
        assert_eq!(batch.max_key_bytes(), 0);
        assert_eq!(batch.max_value_bytes(), 0);
        let decoded = WriteBatch::from_data(batch.data().to_vec(), &path(), 0).expect("valid");
        assert!(decoded.is_empty());
        assert_eq!(format!("{:?}", WriteBatch::default()), "WriteBatch { sequence: 0, len: 0, size_bytes: 12 }");
    }

    #[test]
    fn put_delete_and_iterate() {
        let mut batch = WriteBatch::new();
        batch.put(b"apple", b"red");
        batch.delete(b"banana");
        batch.put(b"", b"");
        batch.put(b"cherry", &[7u8; 300]);
        assert_eq!(batch.len(), 4);
        assert!(!batch.is_empty());
        assert_eq!(batch.max_key_bytes(), 6);
        assert_eq!(batch.max_value_bytes(), 300);
        let expected_size = 12 + (1 + 6 + 4) + (1 + 7) + (1 + 1 + 1) + (1 + 7 + 2 + 300);
        assert_eq!(batch.size_bytes(), expected_size);

        let public: Vec<(BatchOp, &[u8], &[u8])> = batch.iter().map(|e| (e.kind(), e.key(), e.value())).collect();
        assert_eq!(
            public,
            vec![
                (BatchOp::Put, &b"apple"[..], &b"red"[..]),
                (BatchOp::Delete, &b"banana"[..], &b""[..]),
                (BatchOp::Put, &b""[..], &b""[..]),
                (BatchOp::Put, &b"cherry"[..], &[7u8; 300][..]),
            ]
        );
        assert_eq!((&batch).into_iter().count(), 4);
        let kinds: Vec<ValueKind> = batch.entries().map(|record| record.kind).collect();
        assert_eq!(kinds, vec![ValueKind::Put, ValueKind::Delete, ValueKind::Put, ValueKind::Put]);
    }

    #[test]
    fn encoding_is_byte_exact() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"vv");
        batch.delete(b"d");
        batch.set_sequence(0x0001_0203_0405_0607);
        let expected: Vec<u8> = [
            &[0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00][..],
            &[2, 0, 0, 0],
            &[1, 1, b'k', 2, b'v', b'v'],
            &[0, 1, b'd'],
        ]
        .concat();
        assert_eq!(batch.data(), &expected[..]);
    }

    #[test]
    fn range_deletes_encode_as_documented_and_round_trip() {
        let mut batch = WriteBatch::new();
        batch.delete_range(b"a", b"cc");
        batch.delete_range_in(7, b"", b"z");
        assert_eq!(batch.max_key_bytes(), 2);
        assert_eq!(batch.max_value_bytes(), 0, "an end key is no value");
        let expected: Vec<u8> =
            [&[0u8; 8][..], &[2, 0, 0, 0], &[4, 1, b'a', 2, b'c', b'c'], &[5, 7, 0, 1, b'z']].concat();
        assert_eq!(batch.data(), &expected[..]);
        let decoded = WriteBatch::from_data(batch.data().to_vec(), &path(), 0).expect("valid batch");
        assert_eq!(decoded.max_key_bytes(), 2);
        assert_eq!(decoded.max_value_bytes(), 0);
        let public: Vec<(u32, BatchOp, &[u8], &[u8])> =
            decoded.iter().map(|e| (e.column_family_id(), e.kind(), e.key(), e.value())).collect();
        assert_eq!(
            public,
            vec![(0, BatchOp::DeleteRange, &b"a"[..], &b"cc"[..]), (7, BatchOp::DeleteRange, &b""[..], &b"z"[..])]
        );
        assert!(decoded.entries().all(|record| record.range_delete && record.kind == ValueKind::Delete));
        // A range delete without its end key is damage.
        let mut truncated = [&[0u8; 8][..], &[1, 0, 0, 0], &[4, 1, b'a']].concat();
        assert!(WriteBatch::from_data(truncated.clone(), &path(), 0).is_err());
        truncated.extend_from_slice(&[1, b'b']);
        assert!(WriteBatch::from_data(truncated, &path(), 0).is_ok());
        let mut plain = WriteBatch::new();
        plain.put(b"k", b"v");
        plain.append(&batch);
        assert_eq!(plain.iter().filter(|e| e.kind() == BatchOp::DeleteRange).count(), 2);
    }

    #[test]
    fn round_trip_through_from_data() {
        let mut batch = WriteBatch::new();
        for index in 0..100u32 {
            let key = format!("key-{index:05}");
            if index % 3 == 0 {
                batch.delete(key.as_bytes());
            } else {
                batch.put(key.as_bytes(), &vec![index as u8; index as usize]);
            }
        }
        batch.set_sequence(12_345);
        let decoded = WriteBatch::from_data(batch.data().to_vec(), &path(), 99).expect("valid batch");
        assert_eq!(decoded.sequence(), 12_345);
        assert_eq!(decoded.len(), 100);
        assert_eq!(decoded.data(), batch.data());
        assert_eq!(collect(&decoded), collect(&batch));
        assert_eq!(decoded.max_key_bytes(), batch.max_key_bytes());
        assert_eq!(decoded.max_value_bytes(), batch.max_value_bytes());
        assert_eq!(decoded.max_value_bytes(), 98);
    }

    #[test]
    fn clear_resets_everything() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"b");
        batch.set_sequence(9);
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.sequence(), 0);
        assert_eq!(batch.size_bytes(), BATCH_HEADER_SIZE_BYTES);
        assert_eq!(batch.max_key_bytes(), 0);
        batch.delete(b"x");
        assert_eq!(collect(&batch), vec![(ValueKind::Delete, b"x".to_vec(), Vec::new())]);
    }

    #[test]
    fn append_merges_records_and_counts() {
        let mut leader = WriteBatch::new();
        leader.put(b"a", b"1");
        leader.set_sequence(50);
        let mut follower = WriteBatch::new();
        follower.delete(b"long-key-here");
        follower.put(b"b", b"a longer value");
        follower.set_sequence(999);
        leader.append(&follower);
        leader.append(&WriteBatch::new());
        assert_eq!(leader.len(), 3);
        assert_eq!(leader.sequence(), 50);
        assert_eq!(leader.max_key_bytes(), 13);
        assert_eq!(leader.max_value_bytes(), 14);
        assert_eq!(
            collect(&leader),
            vec![
                (ValueKind::Put, b"a".to_vec(), b"1".to_vec()),
                (ValueKind::Delete, b"long-key-here".to_vec(), Vec::new()),
                (ValueKind::Put, b"b".to_vec(), b"a longer value".to_vec()),
            ]
        );
        let decoded = WriteBatch::from_data(leader.data().to_vec(), &path(), 0).expect("valid");
        assert_eq!(collect(&decoded), collect(&leader));
    }

    #[test]
    fn puts_with_an_expiry_round_trip_in_both_column_family_forms() {
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(b"session", b"alice", 1_790_000_000_000_000);
        batch.put_with_expiry_in(7, b"token", b"", u64::MAX);
        batch.put(b"plain", b"value");
        let decoded = WriteBatch::from_data(batch.data().to_vec(), &path(), 0).unwrap();
        type Record<'a> = (u32, BatchOp, &'a [u8], &'a [u8], Option<u64>);
        let records: Vec<Record<'_>> = decoded
            .iter()
            .map(|entry| (entry.column_family_id(), entry.kind(), entry.key(), entry.value(), entry.expires_at_us()))
            .collect();
        assert_eq!(
            records,
            vec![
                (0, BatchOp::PutWithExpiry, b"session".as_slice(), b"alice".as_slice(), Some(1_790_000_000_000_000)),
                (7, BatchOp::PutWithExpiry, b"token", b"", Some(u64::MAX)),
                (0, BatchOp::Put, b"plain", b"value", None),
            ]
        );
        assert_eq!(decoded.max_value_bytes(), 5, "the limit counts the user's value, not the expiry");
        // The memtable receives the stored form: the expiry, then the value.
        let stored: Vec<Vec<u8>> = decoded.entries().map(|record| record.value.to_vec()).collect();
        assert_eq!(stored[0][..8], 1_790_000_000_000_000u64.to_le_bytes());
        assert_eq!(&stored[0][8..], b"alice");
    }

    #[test]
    fn every_truncation_is_corruption() {
        let mut batch = WriteBatch::new();
        batch.put(b"apple", b"red");
        batch.delete(b"banana");
        batch.put(b"cherry", &[1u8; 200]);
        let data = batch.data();
        for length in 0..data.len() {
            let offset = expect_corruption(WriteBatch::from_data(data[..length].to_vec(), &path(), 1000));
            assert!((1000..=1000 + length as u64).contains(&offset), "offset {offset} for length {length}");
        }
    }

    #[test]
    fn specific_damage_is_reported_with_offsets() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v");
        batch.delete(b"d");
        let good = batch.data().to_vec();

        let mut unknown_kind = good.clone();
        unknown_kind[12 + 5] = 12;
        assert_eq!(expect_corruption(WriteBatch::from_data(unknown_kind, &path(), 100)), 117);

        let mut count_too_high = good.clone();
        count_too_high[8] = 3;
        assert_eq!(expect_corruption(WriteBatch::from_data(count_too_high, &path(), 0)), good.len() as u64);

        let mut count_too_low = good.clone();
        count_too_low[8] = 1;
        assert_eq!(expect_corruption(WriteBatch::from_data(count_too_low, &path(), 0)), 17);

        let mut trailing = good.clone();
        trailing.push(0);
        expect_corruption(WriteBatch::from_data(trailing, &path(), 0));

        let mut overflowing = good.clone();
        overflowing[..8].copy_from_slice(&MAX_SEQUENCE_NUMBER.to_le_bytes());
        expect_corruption(WriteBatch::from_data(overflowing.clone(), &path(), 0));
        overflowing[..8].copy_from_slice(&(MAX_SEQUENCE_NUMBER - 1).to_le_bytes());
        WriteBatch::from_data(overflowing, &path(), 0).expect("last record uses the largest sequence");

        let mut huge_key_length = good;
        huge_key_length[13..15].copy_from_slice(&[0xff, 0x7f]);
        assert_eq!(expect_corruption(WriteBatch::from_data(huge_key_length, &path(), 0)), 13);
    }

    /// Builds a random valid batch.
    fn random_batch(rng: &mut SmallRng) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for _ in 0..rng.gen_range(0..8) {
            let key: Vec<u8> = (0..rng.gen_range(0..20)).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.1) {
                batch.single_delete_in(rng.gen_range(0..3), &key);
            } else if rng.gen_bool(0.1) {
                let end: Vec<u8> = (0..rng.gen_range(0..20)).map(|_| rng.gen()).collect();
                batch.delete_range_in(rng.gen_range(0..3), &key, &end);
            } else if rng.gen_bool(0.3) {
                batch.delete(&key);
            } else {
                let length = if rng.gen_bool(0.1) { rng.gen_range(128..400) } else { rng.gen_range(0..20) };
                let value: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
                if rng.gen_bool(0.2) {
                    batch.put_with_expiry_in(rng.gen_range(0..3), &key, &value, rng.gen());
                } else if rng.gen_bool(0.2) {
                    batch.merge_in(rng.gen_range(0..3), &key, &value);
                } else {
                    batch.put(&key, &value);
                }
            }
        }
        batch.set_sequence(rng.gen_range(0..1_000_000));
        batch
    }

    #[test]
    fn randomized_damage_never_panics() {
        let mut rng = SmallRng::seed_from_u64(0x5eed_ba7c);
        for _ in 0..5000 {
            let batch = random_batch(&mut rng);
            let mut data = batch.data().to_vec();
            match rng.gen_range(0..5) {
                0 => {
                    let length = rng.gen_range(0..data.len());
                    data.truncate(length);
                    expect_corruption(WriteBatch::from_data(data, &path(), 0));
                    continue;
                }
                1 => {
                    let flips = rng.gen_range(1..4);
                    for _ in 0..flips {
                        let position = rng.gen_range(0..data.len());
                        data[position] ^= 1 << rng.gen_range(0..8);
                    }
                }
                2 => {
                    let position = rng.gen_range(0..data.len());
                    data[position] = rng.gen();
                }
                3 => {
                    let extra = rng.gen_range(1..10);
                    data.extend((0..extra).map(|_| rng.gen::<u8>()));
                }
                _ => {
                    data = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
                }
            }
            // Whatever the bytes, decoding either fails cleanly or yields a batch whose records
            // re-encode to the very same bytes.
            if let Ok(decoded) = WriteBatch::from_data(data.clone(), &path(), 0) {
                let mut rebuilt = WriteBatch::new();
                for record in decoded.entries() {
                    match record.kind {
                        _ if record.range_delete => {
                            rebuilt.delete_range_in(record.column_family_id, record.key, record.value)
                        }
                        ValueKind::Put | ValueKind::BlobIndex => {
                            rebuilt.put_in(record.column_family_id, record.key, record.value)
                        }
                        ValueKind::Delete => rebuilt.delete_in(record.column_family_id, record.key),
                        ValueKind::SingleDelete => rebuilt.single_delete_in(record.column_family_id, record.key),
                        ValueKind::PutWithExpiry => {
                            let (expires_at_us, value) = crate::ttl::split_expiring(record.value).unwrap();
                            rebuilt.put_with_expiry_in(record.column_family_id, record.key, value, expires_at_us)
                        }
                        ValueKind::Merge => rebuilt.merge_in(record.column_family_id, record.key, record.value),
                    }
                }
                rebuilt.set_sequence(decoded.sequence());
                assert_eq!(rebuilt.data(), &data[..]);
                assert_eq!(rebuilt.max_key_bytes(), decoded.max_key_bytes());
                assert_eq!(rebuilt.max_value_bytes(), decoded.max_value_bytes());
            }
        }
    }
}
