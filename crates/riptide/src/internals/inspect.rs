//! Read-only inspection of a database's files, for the `riptide` tool's `inspect`, `verify`
//! and `repair` commands: every structure is decoded by the engine's own decoders (the log
//! reader, `WriteBatch::from_data`, `VersionEdit::decode_record`, the table footer, block and
//! properties decoders, `VersionSet::recover`), and returned as plain public values with the
//! offsets and checksums a person needs to locate damage. Nothing here writes to a database.
//!
//! Unlike the engine's read paths, which stop at the first damage, these functions go on past
//! damage where the format allows it (the next valid log record, the next data block) and
//! report each damaged region, so that a tool can say everything that is wrong, and salvage
//! everything that is readable.
//!
//! Concurrency contract: every function reads files through the operating system and keeps no
//! state, so any number may run at once; they take no lock, so a file that a running database
//! is appending to may show a torn tail.
//!
//! Invariants: no function panics on any file contents (damage is data in the report or an
//! `Err`, never a panic, as for the decoders of `internals::decode`); offsets are byte offsets
//! in the file named by the report.

mod log;
mod manifest;
mod table;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use log::{decode_batch, scan_log, BatchRecord, DecodedBatch, LogRecord, LogScan};
pub use manifest::{
    check_recovery, replay_manifest, replay_manifest_file, scan_manifest, ColumnFamilyState, EditSummary, FileSummary,
    LiveFile, ManifestRecord, ManifestScan, ManifestState,
};
pub use table::{inspect_table, BlockReport, FilterSummary, FooterSummary, PropertiesSummary, TableEntry, TableReport};

use crate::comparator::{BytewiseComparator, Comparator, ReverseBytewiseComparator};
use crate::db::filename::{parse_file_name, FileKind};
use crate::error::{Error, Result};
use crate::key::ValueKind;

/// Whether an entry sets or removes its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A put: the key has the value.
    Put,
    /// A tombstone: the key is deleted.
    Delete,
    /// A put whose value is in a blob file; the entry's value is the reference.
    BlobIndex,
    /// A single delete: the key, written once, is deleted (see `WriteBatch::single_delete`).
    SingleDelete,
    /// A put with an expiry: the entry's value starts with the expiry (8 bytes, little endian,
    /// microseconds since the Unix epoch), then the user's value.
    PutWithExpiry,
    /// A merge operand.
    Merge,
    /// A range delete (log records only): every key from the key (inclusive) to the value
    /// (exclusive) is deleted.
    DeleteRange,
}

impl EntryKind {
    fn from_value_kind(kind: ValueKind) -> EntryKind {
        match kind {
            ValueKind::Put => EntryKind::Put,
            ValueKind::Delete => EntryKind::Delete,
            ValueKind::BlobIndex => EntryKind::BlobIndex,
            ValueKind::SingleDelete => EntryKind::SingleDelete,
            ValueKind::PutWithExpiry => EntryKind::PutWithExpiry,
            ValueKind::Merge => EntryKind::Merge,
        }
    }

    /// `"put"` or `"delete"`.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Put => "put",
            EntryKind::Delete => "delete",
            EntryKind::BlobIndex => "blob-index",
            EntryKind::DeleteRange => "delete-range",
            EntryKind::SingleDelete => "single-delete",
            EntryKind::PutWithExpiry => "put-with-expiry",
            EntryKind::Merge => "merge",
        }
    }
}

/// A decoded internal key: user key, sequence number and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyParts {
    /// The user key.
    pub user_key: Vec<u8>,
    /// The sequence number of the write.
    pub sequence: u64,
    /// Put or delete.
    pub kind: EntryKind,
}

/// Decodes an internal key (user key followed by the 8-byte trailer); `None` when it is too
/// short or its kind is unknown.
pub fn parse_internal_key(internal_key: &[u8]) -> Option<KeyParts> {
    let parsed = crate::key::parse_internal_key(internal_key)?;
    Some(KeyParts {
        user_key: parsed.user_key.to_vec(),
        sequence: parsed.sequence,
        kind: EntryKind::from_value_kind(parsed.kind),
    })
}

/// The kinds of file Riptide keeps in a database directory (see `docs/architecture.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbFileKind {
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// `MANIFEST-NNNNNN`.
    Manifest(u64),
    /// `NNNNNN.log`.
    Log(u64),
    /// `NNNNNN.sst`.
    Table(u64),
    /// `NNNNNN.dbtmp`.
    Temp(u64),
    /// `NNNNNN.txn`, a prepared transaction.
    Prepared(u64),
    /// `NNNNNN.spill`, a transaction's spilled writes.
    Spill(u64),
    /// `NNNNNN.blob`, a blob file.
    Blob(u64),
}

/// Classifies a file name as the engine does; `None` for names that are not Riptide's.
pub fn classify_file_name(name: &str) -> Option<DbFileKind> {
    Some(match parse_file_name(name)? {
        FileKind::Current => DbFileKind::Current,
        FileKind::Lock => DbFileKind::Lock,
        FileKind::Manifest(number) => DbFileKind::Manifest(number),
        FileKind::Log(number) => DbFileKind::Log(number),
        FileKind::Table(number) => DbFileKind::Table(number),
        FileKind::Temp(number) => DbFileKind::Temp(number),
        FileKind::Prepared(number) => DbFileKind::Prepared(number),
        FileKind::Spill(number) => DbFileKind::Spill(number),
        FileKind::Blob(number) => DbFileKind::Blob(number),
    })
}

/// The file name of table `number` (`NNNNNN.sst`).
pub fn table_file_name(number: u64) -> String {
    crate::db::filename::table_file_name(number)
}

/// The value a table's `BlobIndex` entry of `user_key` references (`encoded_reference` is the
/// entry's value), read from the blob file in `dir` and checked as the engine checks it: the
/// record's checksum, the reference's checksum and the key. Any damage, or a missing file, is
/// `Error::Corruption` naming the blob file and the record's offset.
pub fn read_blob_value(dir: &Path, user_key: &[u8], encoded_reference: &[u8]) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let reference = crate::blob::BlobReference::decode(encoded_reference)
        .map_err(|reason| Error::corruption(dir.join("<table entry>"), 0, reason))?;
    let path = crate::db::filename::blob_path(dir, reference.file_number);
    let offset = reference.record_offset;
    let corruption = |reason: &str| Error::corruption(&path, offset, reason.to_string());
    let file = std::fs::File::open(&path).map_err(|_| corruption("blob file is missing or unreadable"))?;
    let mut record = vec![0u8; reference.record_size_bytes(user_key.len()) as usize];
    file.read_exact_at(&mut record, offset).map_err(|_| corruption("blob record runs past the file"))?;
    crate::blob::format::decode_referenced_record(&record, user_key, &reference)
        .map_err(corruption)?
        .value(&path, offset)
}

/// The file name of blob file `number` (`NNNNNN.blob`).
pub fn blob_file_name(number: u64) -> String {
    crate::db::filename::blob_file_name(number)
}

/// The file name of log `number` (`NNNNNN.log`).
pub fn log_file_name(number: u64) -> String {
    crate::db::filename::log_file_name(number)
}

/// The built-in comparator with this name (`riptide.bytewise`, `riptide.reverse_bytewise`), or
/// `None` for a caller's own comparator, which a tool cannot provide.
pub fn builtin_comparator(name: &str) -> Option<Arc<dyn Comparator>> {
    if name == BytewiseComparator.name() {
        Some(Arc::new(BytewiseComparator))
    } else if name == ReverseBytewiseComparator.name() {
        Some(Arc::new(ReverseBytewiseComparator))
    } else {
        None
    }
}

/// The name of the manifest that `dir/CURRENT` names, checked as recovery checks it: a
/// manifest file name and one newline, nothing else.
pub fn read_current(dir: &Path) -> Result<String> {
    let path = dir.join(crate::db::filename::CURRENT_FILE_NAME);
    let contents = read_file(&path)?;
    let name = std::str::from_utf8(&contents)
        .ok()
        .and_then(|text| text.strip_suffix('\n'))
        .filter(|name| matches!(classify_file_name(name), Some(DbFileKind::Manifest(_))))
        .ok_or_else(|| Error::corruption(&path, 0, "CURRENT does not name a manifest"))?;
    Ok(name.to_string())
}

/// A damaged byte range of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedRange {
    /// The file.
    pub file: PathBuf,
    /// The first damaged byte.
    pub start: u64,
    /// One past the last damaged byte.
    pub end: u64,
    /// What is wrong at `start`.
    pub reason: String,
    /// True when nothing valid follows (what a crash in the middle of an append leaves); false
    /// for damage in the middle of the file, which loses data.
    pub torn_tail: bool,
}

/// Reads a whole file, with the error context the engine uses.
fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|error| Error::io(format!("read {}", path.display()), error))
}
