//! Names of the files in a database directory.
//!
//! - `CURRENT`: names the live manifest.
//! - `LOCK`: held with an OS lock while a handle is open.
//! - `MANIFEST-NNNNNN`: the version log (see `docs/format/manifest.md`).
//! - `NNNNNN.log`: a write-ahead log (see `docs/format/wal.md`).
//! - `NNNNNN.sst`: a sorted table (see `docs/format/sstable.md`).
//! - `NNNNNN.blob`: a blob file, large values a column family keeps apart from its tables
//!   (see `docs/format/blob.md`).
//! - `NNNNNN.dbtmp`: a temporary file (the next `CURRENT` before its rename).
//! - `NNNNNN.spill`: a run of a transaction's writes spilled out of memory (`txn/spill.rs`);
//!   private to the process that wrote it, so `Db::open` removes every one.
//!
//! All numbers come from one counter (the manifest's next file number), so a number names at
//! most one file of any kind over the life of a database (invariant I7).

use std::path::{Path, PathBuf};

/// The kinds of file Riptide keeps in its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Current,
    Lock,
    Manifest(u64),
    Log(u64),
    Table(u64),
    Temp(u64),
    /// A prepared transaction (two-phase commit, `txn/prepared.rs`).
    Prepared(u64),
    Spill(u64),
    /// A blob file (key-value separation, `blob/mod.rs`).
    Blob(u64),
}

pub(crate) const CURRENT_FILE_NAME: &str = "CURRENT";
pub(crate) const LOCK_FILE_NAME: &str = "LOCK";

pub(crate) fn log_file_name(number: u64) -> String {
    format!("{number:06}.log")
}

pub(crate) fn table_file_name(number: u64) -> String {
    format!("{number:06}.sst")
}

pub(crate) fn blob_file_name(number: u64) -> String {
    format!("{number:06}.blob")
}

pub(crate) fn blob_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(blob_file_name(number))
}

pub(crate) fn manifest_file_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

pub(crate) fn temp_file_name(number: u64) -> String {
    format!("{number:06}.dbtmp")
}

pub(crate) fn spill_file_name(number: u64) -> String {
    format!("{number:06}.spill")
}

pub(crate) fn spill_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(spill_file_name(number))
}

pub(crate) fn log_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(log_file_name(number))
}

pub(crate) fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(table_file_name(number))
}

pub(crate) fn manifest_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(manifest_file_name(number))
}

fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Classifies a file name; `None` for files that are not Riptide's.
pub(crate) fn parse_file_name(name: &str) -> Option<FileKind> {
    if name == CURRENT_FILE_NAME {
        return Some(FileKind::Current);
    }
    if name == LOCK_FILE_NAME {
        return Some(FileKind::Lock);
    }
    if let Some(digits) = name.strip_prefix("MANIFEST-") {
        return parse_number(digits).map(FileKind::Manifest);
    }
    let (stem, extension) = name.split_once('.')?;
    let number = parse_number(stem)?;
    match extension {
        "log" => Some(FileKind::Log(number)),
        "sst" => Some(FileKind::Table(number)),
        "dbtmp" => Some(FileKind::Temp(number)),
        "txn" => Some(FileKind::Prepared(number)),
        "spill" => Some(FileKind::Spill(number)),
        "blob" => Some(FileKind::Blob(number)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(parse_file_name(&log_file_name(7)), Some(FileKind::Log(7)));
        assert_eq!(parse_file_name(&table_file_name(1_234_567)), Some(FileKind::Table(1_234_567)));
        assert_eq!(parse_file_name(&manifest_file_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse_file_name(&crate::txn::prepared::prepared_file_name(12)), Some(FileKind::Prepared(12)));
        assert_eq!(parse_file_name(&temp_file_name(9)), Some(FileKind::Temp(9)));
        assert_eq!(parse_file_name(&spill_file_name(11)), Some(FileKind::Spill(11)));
        assert_eq!(parse_file_name(&blob_file_name(13)), Some(FileKind::Blob(13)));
        assert_eq!(parse_file_name("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse_file_name("LOCK"), Some(FileKind::Lock));
    }

    #[test]
    fn foreign_names_are_ignored() {
        for name in ["notes.txt", "MANIFEST-", "MANIFEST-12a", ".log", "12.log.bak", "-1.sst", "x.sst"] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
