//! The log reader: walks the records of a whole log file held in memory (recovery of the WAL,
//! and replay of the manifest), judging damage by the [`WalRecovery`] policy.
//!
//! Concurrency contract: one owner, `&mut self` for every call.
//!
//! The damage rule. A record at offset P is valid when its 8-byte header fits in the file, its
//! payload length is non-zero, the payload fits in the file, and the stored checksum matches.
//! Anything else at P is damage: a truncated header, a payload running past the end of the
//! file, a zero length, or a checksum mismatch. Damage at P is a *torn tail* (what a crash in
//! the middle of an append leaves) when no valid record starts at any offset after P; otherwise
//! it is *mid-file corruption*. The test is the same whatever the kind of damage, because a
//! damaged length field can make a middle record look as if it ran past the end of the file,
//! and such a record must not silently swallow the valid records after it. Then:
//!
//! - `Absolute`: any damage is [`Error::Corruption`] at P.
//! - `TolerateTornTail`: a torn tail is dropped and counted in [`LogReader::dropped_tail_bytes`]
//!   where the caller allows one (`torn_tail_allowed`: WAL recovery allows it in every log, since
//!   logs are synced lazily and the history ends at the first torn tail, I12; the manifest
//!   reader in its one file); otherwise, and for mid-file corruption anywhere, damage is
//!   [`Error::Corruption`] at P.
//! - `SkipCorrupt`: mid-file corruption is skipped up to the next offset where a valid record
//!   starts (counted in [`LogReader::skipped_records`] and [`LogReader::skipped_bytes`]); a torn
//!   tail is dropped, in any log.
//!
//! Preallocated tails (write-ahead logs only, [`LogReader::allow_preallocated_tail`]): the
//! writer may have written zeros ahead of its records (`wal/writer.rs`), so the run of zero
//! bytes that ends the file, if any, is unused space rather than damage: the log ends where that
//! run starts, or where the last record ends if that is later (a payload may end in zeros). The
//! manifest is never preallocated, and its reader keeps judging zeros as damage (I33).
//!
//! Bounded work: looking for the next valid record scans forward byte by byte, checking a
//! checksum only where the candidate length is non-zero and fits in the file. The bytes
//! checksummed while scanning are limited to a budget per reader (16 times the file size, plus
//! 16 MiB), so garbage that looks like many huge records cannot make recovery quadratic. When the
//! budget runs out, the reader cannot prove that no valid record follows the damage, so it never
//! calls it a torn tail: `TolerateTornTail` reports corruption, and `SkipCorrupt` gives up on the
//! rest of the file and counts it as skipped.
//!
//! Invariants: records are returned in file order with strictly increasing offsets; once an
//! error has been returned, every later call returns a copy of it; the reader never panics and
//! never indexes outside the file, whatever the bytes. For a reader that returned `Ok(None)`, the
//! bytes of the returned records, the skipped bytes, the dropped tail and the preallocated tail
//! add up to the file size.

use std::path::PathBuf;

use super::{CHECKSUM_SIZE_BYTES, RECORD_HEADER_SIZE_BYTES};
use crate::coding::read_u32;
use crate::error::{Error, Result};
use crate::options::WalRecovery;

/// The resync budget is this many times the file size ...
const RESYNC_BUDGET_FILE_MULTIPLE: u64 = 16;

/// ... plus this many bytes, so small files are never starved.
const RESYNC_BUDGET_BASE_BYTES: u64 = 16 << 20;

/// Reads the records of one log file.
pub(crate) struct LogReader {
    /// The whole file.
    data: Vec<u8>,
    /// Its path, for error messages.
    path: PathBuf,
    /// How damage is treated.
    policy: WalRecovery,
    /// Whether `TolerateTornTail` may drop a torn tail of this file.
    torn_tail_allowed: bool,
    /// Where the next record starts.
    position: usize,
    /// The end of the last record returned.
    // Read only by the tests, which check where the valid records end.
    #[cfg_attr(not(test), allow(dead_code))]
    valid_length_bytes: u64,
    /// Bytes dropped as a torn tail.
    dropped_tail_bytes: u64,
    /// Damaged regions skipped under `SkipCorrupt`.
    skipped_records: u64,
    /// Bytes in the skipped regions.
    skipped_bytes: u64,
    /// Checksum bytes the resync scan may still spend.
    resync_budget_bytes: u64,
    /// Where the file's final run of zero bytes starts, when a preallocated tail is allowed;
    /// the file size otherwise.
    zero_tail_start: usize,
    /// Bytes of preallocated zeros found past the last record.
    preallocated_tail_bytes: u64,
    /// The error already returned, repeated by every later call.
    failure: Option<Error>,
}

/// What is found at an offset.
enum RecordCheck {
    /// A valid record with a payload of this many bytes.
    Valid(usize),
    /// The end of the file.
    End,
    /// Damage, described.
    Damaged(String),
}

/// The result of looking for the next valid record.
enum ScanOutcome {
    /// A valid record starts at this offset.
    Found(usize),
    /// No valid record starts anywhere in the range scanned, which ran to the end of the file.
    NotFound,
    /// The budget ran out at this offset before the question was settled.
    BudgetExhausted(usize),
}

impl LogReader {
    /// Reads `data`, the whole contents of the log at `path`. `torn_tail_allowed` says whether
    /// `TolerateTornTail` may drop a torn tail of this file (see the module comment).
    pub(crate) fn new(data: Vec<u8>, path: PathBuf, policy: WalRecovery, torn_tail_allowed: bool) -> LogReader {
        let file_size_bytes = data.len() as u64;
        let resync_budget_bytes =
            file_size_bytes.saturating_mul(RESYNC_BUDGET_FILE_MULTIPLE).saturating_add(RESYNC_BUDGET_BASE_BYTES);
        LogReader {
            data,
            path,
            policy,
            torn_tail_allowed,
            position: 0,
            valid_length_bytes: 0,
            dropped_tail_bytes: 0,
            skipped_records: 0,
            skipped_bytes: 0,
            resync_budget_bytes,
            zero_tail_start: file_size_bytes as usize,
            preallocated_tail_bytes: 0,
            failure: None,
        }
    }

    /// Lets the file end in zeros that a write-ahead log writer preallocated: the log ends
    /// where they start (see the module comment).
    pub(crate) fn allow_preallocated_tail(mut self) -> LogReader {
        let nonzero_end = self.data.iter().rposition(|&byte| byte != 0).map_or(0, |last| last + 1);
        self.zero_tail_start = nonzero_end;
        self
    }

    /// Returns the next record as (offset of the record's header in the file, payload), or
    /// `None` at the end of the log. The payload starts `RECORD_HEADER_SIZE_BYTES` after the
    /// offset, which is what to pass when decoding it so that damage is located precisely.
    pub(crate) fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        loop {
            if let Some(failure) = &self.failure {
                return Err(failure.duplicate());
            }
            let start = self.position;
            if start >= self.zero_tail_start && start < self.data.len() {
                self.preallocated_tail_bytes = (self.data.len() - start) as u64;
                self.position = self.data.len();
                return Ok(None);
            }
            match self.check_record(start) {
                RecordCheck::End => return Ok(None),
                RecordCheck::Valid(payload_bytes) => {
                    let payload_start = start + RECORD_HEADER_SIZE_BYTES;
                    let end = payload_start + payload_bytes;
                    self.position = end;
                    self.valid_length_bytes = end as u64;
                    let payload = self.data.get(payload_start..end).unwrap_or_default();
                    return Ok(Some((start as u64, payload)));
                }
                RecordCheck::Damaged(reason) => self.handle_damage(start, reason),
            }
        }
    }

    /// Bytes dropped from the end of the file as a torn tail.
    pub(crate) fn dropped_tail_bytes(&self) -> u64 {
        self.dropped_tail_bytes
    }

    /// Bytes of preallocated zeros that ended the file (only with
    /// [`LogReader::allow_preallocated_tail`]).
    pub(crate) fn preallocated_tail_bytes(&self) -> u64 {
        self.preallocated_tail_bytes
    }

    /// Damaged regions skipped under `SkipCorrupt`. A region counts once, however many records
    /// it held: with the length fields damaged, nobody can tell.
    pub(crate) fn skipped_records(&self) -> u64 {
        self.skipped_records
    }

    /// Bytes in the regions counted by [`LogReader::skipped_records`].
    pub(crate) fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    /// The offset just past the last record returned: after a torn tail was dropped, the length
    /// to truncate the log to before anything else is appended to it.
    #[cfg(test)]
    pub(crate) fn valid_length_bytes(&self) -> u64 {
        self.valid_length_bytes
    }

    /// Replaces the resync budget, so tests can exhaust it cheaply.
    #[cfg(test)]
    pub(crate) fn set_resync_budget_bytes(&mut self, budget_bytes: u64) {
        self.resync_budget_bytes = budget_bytes;
    }

    /// Applies the policy to damage at `start`: records the error, skips ahead, or drops the
    /// rest of the file. The caller loops, so a skip resumes reading at the next valid record.
    fn handle_damage(&mut self, start: usize, reason: String) {
        let file_size = self.data.len();
        match self.policy {
            WalRecovery::Absolute => {
                self.fail(start, format!("{reason} (WalRecovery::Absolute accepts no damage)"));
            }
            WalRecovery::TolerateTornTail if !self.torn_tail_allowed => {
                self.fail(start, format!("{reason}; this log may not end in a torn record"));
            }
            WalRecovery::TolerateTornTail => match self.find_valid_record(start + 1) {
                ScanOutcome::NotFound => self.drop_tail(start),
                ScanOutcome::Found(next) => {
                    self.fail(
                        start,
                        format!("{reason}; a valid record follows at offset {next}, so this is not a torn tail"),
                    );
                }
                ScanOutcome::BudgetExhausted(stopped) => {
                    self.fail(
                        start,
                        format!("{reason}; gave up at offset {stopped} looking for later records, so it cannot be judged a torn tail"),
                    );
                }
            },
            WalRecovery::SkipCorrupt => match self.find_valid_record(start + 1) {
                ScanOutcome::NotFound => self.drop_tail(start),
                ScanOutcome::Found(next) => {
                    self.skipped_records += 1;
                    self.skipped_bytes += (next - start) as u64;
                    self.position = next;
                }
                ScanOutcome::BudgetExhausted(_) => {
                    self.skipped_records += 1;
                    self.skipped_bytes += (file_size - start) as u64;
                    self.position = file_size;
                }
            },
        }
    }

    /// Records a corruption error at `offset`.
    fn fail(&mut self, offset: usize, reason: String) {
        self.failure = Some(Error::corruption(self.path.clone(), offset as u64, reason));
    }

    /// Drops everything from `start` to the end of the file as a torn tail (up to the
    /// preallocated zeros, which are not part of it).
    fn drop_tail(&mut self, start: usize) {
        let file_size = self.data.len();
        let torn_end = self.zero_tail_start.max(start);
        self.dropped_tail_bytes += (torn_end - start) as u64;
        self.preallocated_tail_bytes += (file_size - torn_end) as u64;
        self.position = file_size;
    }

    /// Judges the record that would start at `start`.
    fn check_record(&self, start: usize) -> RecordCheck {
        let available = self.data.len().saturating_sub(start);
        if available == 0 {
            return RecordCheck::End;
        }
        let (Some(stored_checksum), Some(length)) =
            (read_u32(&self.data, start), read_u32(&self.data, start + CHECKSUM_SIZE_BYTES))
        else {
            return RecordCheck::Damaged(format!(
                "record header truncated: {available} of {RECORD_HEADER_SIZE_BYTES} bytes before the end of the file"
            ));
        };
        if length == 0 {
            return RecordCheck::Damaged("zero-length record (records are never empty)".to_string());
        }
        let payload_bytes = length as usize;
        let payload_start = start + RECORD_HEADER_SIZE_BYTES;
        let Some(covered) = self.data.get(start + CHECKSUM_SIZE_BYTES..payload_start.saturating_add(payload_bytes))
        else {
            let missing = (payload_start as u64 + u64::from(length)).saturating_sub(self.data.len() as u64);
            return RecordCheck::Damaged(format!(
                "record payload of {length} bytes runs {missing} bytes past the end of the file"
            ));
        };
        let computed_checksum = crate::coding::mask_crc(crc32c::crc32c(covered));
        if computed_checksum != stored_checksum {
            return RecordCheck::Damaged(format!(
                "record checksum mismatch: stored {stored_checksum:#010x}, computed {computed_checksum:#010x}"
            ));
        }
        RecordCheck::Valid(payload_bytes)
    }

    /// Looks for the first offset at or after `from` where a valid record starts, spending the
    /// resync budget on checksums.
    fn find_valid_record(&mut self, from: usize) -> ScanOutcome {
        let file_size = self.data.len();
        // The smallest valid record is a header and one payload byte.
        let last_possible_start = match file_size.checked_sub(RECORD_HEADER_SIZE_BYTES + 1) {
            Some(last) => last,
            None => return ScanOutcome::NotFound,
        };
        let mut candidate = from;
        while candidate <= last_possible_start {
            let Some(length) = read_u32(&self.data, candidate + CHECKSUM_SIZE_BYTES) else {
                break;
            };
            let available = file_size - candidate - RECORD_HEADER_SIZE_BYTES;
            if length != 0 && length as usize <= available {
                let cost = CHECKSUM_SIZE_BYTES as u64 + u64::from(length);
                if cost > self.resync_budget_bytes {
                    return ScanOutcome::BudgetExhausted(candidate);
                }
                self.resync_budget_bytes -= cost;
                if matches!(self.check_record(candidate), RecordCheck::Valid(_)) {
                    return ScanOutcome::Found(candidate);
                }
            }
            candidate += 1;
        }
        ScanOutcome::NotFound
    }
}
