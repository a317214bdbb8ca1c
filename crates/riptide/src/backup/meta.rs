//! The description of one backup (`meta/NNNNNN` in a backup directory): which files it holds,
//! where each is stored, and each one's size and checksum. Format in `docs/format/backup.md`.
//!
//! The encoding is text, one field per line, so that an operator can read it, ending in a
//! line with the crc32c of everything before it; a description whose checksum does not match,
//! or that does not parse, is `Error::Corruption` with its path and the offset of the line.

use std::path::Path;

use crate::error::{Error, Result};

/// The first line of every description, with the format version.
const MAGIC_LINE: &str = "riptide-backup 1";

/// Where a file of a backup is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// In `shared/` under this name, possibly with other backups (tables and blob files, which
    /// never change once written).
    Shared(String),
    /// In `private/NNNNNN/` under its own name (`CURRENT`, the manifest, the logs).
    Private,
}

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BackupFile {
    /// Its name in the database directory.
    pub(crate) name: String,
    pub(crate) storage: Storage,
    pub(crate) size_bytes: u64,
    pub(crate) crc32c: u32,
}

/// One backup: its id, when it was taken, and its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BackupMeta {
    pub(crate) id: u64,
    pub(crate) timestamp_secs: u64,
    pub(crate) files: Vec<BackupFile>,
}

impl BackupMeta {
    /// The description's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut text = format!("{MAGIC_LINE}\nid {}\ntimestamp {}\n", self.id, self.timestamp_secs);
        for file in &self.files {
            match &file.storage {
                Storage::Shared(stored) => text.push_str(&format!(
                    "file shared {} {} {} {:08x}\n",
                    file.name, stored, file.size_bytes, file.crc32c
                )),
                Storage::Private => {
                    text.push_str(&format!("file private {} {} {:08x}\n", file.name, file.size_bytes, file.crc32c))
                }
            }
        }
        let checksum = crc32c::crc32c(text.as_bytes());
        text.push_str(&format!("checksum {checksum:08x}\n"));
        text.into_bytes()
    }

    /// Parses a description read from `path` (named in errors).
    pub(crate) fn decode(data: &[u8], path: &Path) -> Result<BackupMeta> {
        let damage = |offset: usize, reason: String| Error::corruption(path, offset as u64, reason);
        let text = std::str::from_utf8(data).map_err(|error| damage(error.valid_up_to(), "not UTF-8 text".into()))?;
        let Some(checksum_start) = text.rfind("checksum ") else {
            return Err(damage(0, "no checksum line".into()));
        };
        let recorded = text[checksum_start..]
            .strip_prefix("checksum ")
            .and_then(|rest| rest.strip_suffix('\n'))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or_else(|| damage(checksum_start, "malformed checksum line".into()))?;
        let body = &text[..checksum_start];
        if crc32c::crc32c(body.as_bytes()) != recorded {
            return Err(damage(checksum_start, "checksum mismatch".into()));
        }
        let mut meta = BackupMeta { id: 0, timestamp_secs: 0, files: Vec::new() };
        let mut offset = 0;
        for (number, line) in body.lines().enumerate() {
            let fields: Vec<&str> = line.split(' ').collect();
            let bad = || damage(offset, format!("unreadable line {}: {line:?}", number + 1));
            let integer = |field: &str| field.parse::<u64>().map_err(|_| bad());
            let crc = |field: &str| u32::from_str_radix(field, 16).map_err(|_| bad());
            match (number, fields.as_slice()) {
                (0, _) if line == MAGIC_LINE => {}
                (0, _) => return Err(damage(0, format!("not a backup description of version 1: {line:?}"))),
                (_, ["id", id]) => meta.id = integer(id)?,
                (_, ["timestamp", seconds]) => meta.timestamp_secs = integer(seconds)?,
                (_, ["file", "shared", name, stored, size, checksum]) => meta.files.push(BackupFile {
                    name: checked_name(name).ok_or_else(bad)?,
                    storage: Storage::Shared(checked_name(stored).ok_or_else(bad)?),
                    size_bytes: integer(size)?,
                    crc32c: crc(checksum)?,
                }),
                (_, ["file", "private", name, size, checksum]) => meta.files.push(BackupFile {
                    name: checked_name(name).ok_or_else(bad)?,
                    storage: Storage::Private,
                    size_bytes: integer(size)?,
                    crc32c: crc(checksum)?,
                }),
                _ => return Err(bad()),
            }
            offset += line.len() + 1;
        }
        Ok(meta)
    }
}

/// `name` when it is a plain file name (no separators, not `.` or `..`, not empty).
fn checked_name(name: &str) -> Option<String> {
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
    plain.then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BackupMeta {
        BackupMeta {
            id: 7,
            timestamp_secs: 1_790_000_000,
            files: vec![
                BackupFile {
                    name: "000012.sst".into(),
                    storage: Storage::Shared("000012_4096.sst".into()),
                    size_bytes: 4096,
                    crc32c: 0xdead_beef,
                },
                BackupFile { name: "CURRENT".into(), storage: Storage::Private, size_bytes: 16, crc32c: 1 },
            ],
        }
    }

    #[test]
    fn a_description_round_trips() {
        let meta = sample();
        assert_eq!(BackupMeta::decode(&meta.encode(), Path::new("meta/7")).unwrap(), meta);
    }

    #[test]
    fn every_changed_byte_is_corruption() {
        let encoded = sample().encode();
        for position in 0..encoded.len() {
            let mut damaged = encoded.clone();
            damaged[position] ^= 0x01;
            assert!(
                matches!(BackupMeta::decode(&damaged, Path::new("meta/7")), Err(Error::Corruption { .. })),
                "byte {position}"
            );
        }
        assert!(BackupMeta::decode(&encoded[..encoded.len() - 1], Path::new("m")).is_err(), "truncated");
    }

    #[test]
    fn names_with_separators_are_refused_even_under_a_valid_checksum() {
        let mut meta = sample();
        meta.files[1].name = "../escape".into();
        assert!(matches!(BackupMeta::decode(&meta.encode(), Path::new("m")), Err(Error::Corruption { .. })));
    }
}
