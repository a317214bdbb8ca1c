//! Log files (write-ahead logs and manifests share the record framing): every valid record
//! with its offset and checksum, and every damaged region between and after them.
//!
//! Records are found with the engine's `LogReader` under `WalRecovery::SkipCorrupt`, which
//! resynchronises after damage; the bytes between two records it returns (and after the last
//! one) are the damaged regions. Why a region is damaged is asked of a second `LogReader`, under
//! `WalRecovery::Absolute`, started at the region's first byte, so the reason is the engine's own
//! judgement, word for word.
//!
//! A write-ahead log (a file named `*.log`) may end in zeros its writer preallocated: they are
//! reported as such, not as damage (`docs/format/wal.md`). A manifest may not.
//!
//! Concurrency contract: pure functions over bytes read once.
//!
//! Invariants: records are in file order; the records, the damaged regions and the
//! preallocated tail, and nothing else, cover the file from its first byte to its last.

use std::path::{Path, PathBuf};

use super::{read_file, DamagedRange, EntryKind};
use crate::batch::{BatchOp, WriteBatch};
use crate::db::filename::{parse_file_name, FileKind};
use crate::error::{Error, Result};
use crate::options::WalRecovery;
use crate::wal::{LogReader, RECORD_HEADER_SIZE_BYTES};

/// One valid record of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Offset of the record's header in the file.
    pub offset: u64,
    /// The stored (masked CRC32C) checksum, which matched the record's bytes.
    pub checksum: u32,
    /// The payload: a write batch (log) or a version edit (manifest).
    pub payload: Vec<u8>,
}

impl LogRecord {
    /// Offset of the payload's first byte, where decoding errors are located.
    pub fn payload_offset(&self) -> u64 {
        self.offset + RECORD_HEADER_SIZE_BYTES as u64
    }

    /// Offset one past the record's last byte.
    pub fn end(&self) -> u64 {
        self.payload_offset() + self.payload.len() as u64
    }
}

/// Everything read from one log file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogScan {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub file_size_bytes: u64,
    /// Every valid record, in file order.
    pub records: Vec<LogRecord>,
    /// Every damaged region, in file order.
    pub damage: Vec<DamagedRange>,
    /// Zeros preallocated by the writer at the end of a write-ahead log (not damage).
    pub preallocated_tail_bytes: u64,
}

/// Reads the log (or manifest) at `path` and finds every valid record and damaged region.
/// Only a failure to read the file is an `Err`.
pub fn scan_log(path: &Path) -> Result<LogScan> {
    let data = read_file(path)?;
    Ok(scan_log_bytes(data, path))
}

/// True for a write-ahead log's name (`NNNNNN.log`), whose writer may preallocate.
fn is_write_ahead_log(path: &Path) -> bool {
    let name = path.file_name().and_then(|name| name.to_str());
    matches!(name.and_then(parse_file_name), Some(FileKind::Log(_)))
}

/// [`scan_log`] over bytes already read.
pub(super) fn scan_log_bytes(data: Vec<u8>, path: &Path) -> LogScan {
    let file_size_bytes = data.len() as u64;
    let mut records = Vec::new();
    let mut reader = LogReader::new(data.clone(), path.to_path_buf(), WalRecovery::SkipCorrupt, true);
    if is_write_ahead_log(path) {
        reader = reader.allow_preallocated_tail();
    }
    // Under `SkipCorrupt` the reader reports no errors; should one come, the rest of the file
    // is treated as damage below.
    while let Ok(Some((offset, payload))) = reader.next_record() {
        let checksum = crate::coding::read_u32(&data, offset as usize).unwrap_or_default();
        records.push(LogRecord { offset, checksum, payload: payload.to_vec() });
    }
    let preallocated_tail_bytes = reader.preallocated_tail_bytes();
    let data_end = file_size_bytes - preallocated_tail_bytes;
    let mut damage = Vec::new();
    let mut expected = 0u64;
    let boundaries = records.iter().map(|record| (record.offset, record.end())).chain([(data_end, 0)]);
    for (start, end) in boundaries {
        if start > expected {
            let torn_tail = start == data_end;
            damage.push(DamagedRange {
                file: path.to_path_buf(),
                start: expected,
                end: start,
                reason: damage_reason(&data, path, expected),
                torn_tail,
            });
        }
        expected = end;
    }
    LogScan { path: path.to_path_buf(), file_size_bytes, records, damage, preallocated_tail_bytes }
}

/// The engine's reason for refusing the record that would start at `offset`.
fn damage_reason(data: &[u8], path: &Path, offset: u64) -> String {
    let rest = data.get(offset as usize..).unwrap_or_default().to_vec();
    let mut reader = LogReader::new(rest, path.to_path_buf(), WalRecovery::Absolute, false);
    match reader.next_record() {
        Err(Error::Corruption { reason, .. }) => {
            reason.trim_end_matches(" (WalRecovery::Absolute accepts no damage)").to_string()
        }
        _ => "no valid record starts here".to_string(),
    }
}

/// One record of a write batch, with the sequence number it was written at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchRecord {
    /// The column family's id (0: the default one; `0xFFFFFFFF`: a two-phase commit marker).
    pub column_family_id: u32,
    /// Put or delete.
    pub kind: EntryKind,
    /// The record's sequence number (the batch's base sequence plus its index).
    pub sequence: u64,
    /// The user key.
    pub key: Vec<u8>,
    /// The value (empty for a delete).
    pub value: Vec<u8>,
}

/// A decoded write batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedBatch {
    /// The base sequence number in the header.
    pub sequence: u64,
    /// Its records, in order.
    pub records: Vec<BatchRecord>,
}

/// Decodes a log record's payload as recovery does (`WriteBatch::from_data`); damage is
/// `Error::Corruption` at its offset in `path` (`offset` being the payload's offset).
pub fn decode_batch(payload: &[u8], path: &Path, offset: u64) -> Result<DecodedBatch> {
    let batch = WriteBatch::from_data(payload.to_vec(), path, offset)?;
    let sequence = batch.sequence();
    let records = batch
        .iter()
        .zip(sequence..)
        .map(|(entry, sequence)| BatchRecord {
            column_family_id: entry.column_family_id(),
            kind: match entry.kind() {
                BatchOp::Put => EntryKind::Put,
                BatchOp::DeleteRange => EntryKind::DeleteRange,
                BatchOp::SingleDelete => EntryKind::SingleDelete,
                BatchOp::PutWithExpiry => EntryKind::PutWithExpiry,
                BatchOp::Merge => EntryKind::Merge,
                _ => EntryKind::Delete,
            },
            sequence,
            key: entry.key().to_vec(),
            // A put with an expiry shows its value as stored: the expiry, then the value.
            value: match entry.expires_at_us() {
                Some(expires_at_us) => {
                    let mut stored = Vec::new();
                    crate::ttl::encode_expiring(&mut stored, expires_at_us, entry.value());
                    stored
                }
                None => entry.value().to_vec(),
            },
        })
        .collect();
    Ok(DecodedBatch { sequence, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_damage_cover_the_file_and_name_the_reason() {
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|index| vec![index; 40]).collect();
        let mut data = crate::internals::encode::log(&payloads).expect("log");
        let record_size = 8 + 40;
        data[record_size + 12] ^= 0xff; // The second record's payload.
        data.truncate(data.len() - 3); // The last record is torn.
        let scan = scan_log_bytes(data.clone(), Path::new("/test/000001.log"));
        assert_eq!(scan.records.iter().map(|record| record.offset).collect::<Vec<_>>(), [0, 96, 144]);
        assert_eq!(scan.damage.len(), 2);
        assert_eq!((scan.damage[0].start, scan.damage[0].end, scan.damage[0].torn_tail), (48, 96, false));
        assert!(scan.damage[0].reason.contains("checksum mismatch"), "{}", scan.damage[0].reason);
        assert_eq!(
            (scan.damage[1].start, scan.damage[1].end, scan.damage[1].torn_tail),
            (192, data.len() as u64, true)
        );
    }
}
