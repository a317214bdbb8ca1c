//! The log writer: appends checksummed records to a log file (the WAL or the manifest).
//!
//! Concurrency contract: one owner, `&mut self` for every call; the engine keeps the writer
//! behind its group-commit leader. The writer is `Send` so it can move between threads.
//!
//! Preallocation (WAL only): once a log has been synced, the writer keeps zeros written ahead
//! of its records, a chunk at a time ([`LogWriter::with_preallocation`]), so that the syncs of a
//! synced workload overwrite blocks that already exist instead of growing the file. On ext4, an
//! `fdatasync` that grows a file commits the file size through the journal, and measured here
//! (512-byte writes, each synced) that took 2.3 ms against 0.64 ms inside written blocks. Logs
//! never synced are not preallocated: nobody waits for their syncs, and the zeros would only
//! double the bytes they hand the kernel. The reader takes a tail of zeros for the end of the
//! log (format version 2, `docs/format/wal.md`; I33).
//!
//! Invariants: records are written one after another from the start of the file, each by one
//! `add_record` call (a failure in the middle of one leaves a partial record, which is exactly
//! the torn tail the reader knows how to judge); past the last record the file holds nothing
//! or zeros; after the first failed append, flush or sync the writer is
//! poisoned and every later call fails with a copy of that first error, because the contents of
//! the file past the last successful sync are unknown and a later successful sync must never be
//! taken to cover them.

use std::path::PathBuf;
use std::sync::Arc;

use super::{record_checksum, RECORD_HEADER_SIZE_BYTES};
use crate::error::{Error, Result};
use crate::fs::{FileSyncer, WritableFile};

/// Appends records to a log file.
pub(crate) struct LogWriter {
    /// The file records are appended to.
    file: Box<dyn WritableFile>,
    /// Its path, for error messages.
    path: PathBuf,
    /// The first failure, once one happened.
    poisoned: Option<Error>,
    /// Zeros written ahead at a time once the log was synced; 0: never.
    preallocate_chunk_bytes: u64,
    /// The file's size including preallocated zeros.
    preallocated_until_bytes: u64,
    /// Set by the first successful sync: preallocation starts then.
    synced: bool,
    /// The file's syncer, once asked for.
    syncer: Option<Arc<dyn FileSyncer>>,
}

impl LogWriter {
    /// Wraps a file opened for appending. Records go after whatever the file already holds.
    pub(crate) fn new(file: Box<dyn WritableFile>, path: PathBuf) -> LogWriter {
        LogWriter {
            file,
            path,
            poisoned: None,
            preallocate_chunk_bytes: 0,
            preallocated_until_bytes: 0,
            synced: false,
            syncer: None,
        }
    }

    /// A writer for a write-ahead log that, once the log has been synced, writes zeros
    /// `chunk_bytes` at a time ahead of its records (0: never). Only for a fresh, empty file.
    pub(crate) fn with_preallocation(file: Box<dyn WritableFile>, path: PathBuf, chunk_bytes: u64) -> LogWriter {
        debug_assert!(file.is_empty(), "preallocation starts from an empty log");
        LogWriter { preallocate_chunk_bytes: chunk_bytes, ..LogWriter::new(file, path) }
    }

    /// Appends one record holding `payload`. The bytes may sit in a buffer until
    /// [`LogWriter::flush`] or [`LogWriter::sync`].
    ///
    /// An empty payload or one longer than `u32::MAX` bytes is refused with
    /// [`Error::InvalidArgument`] before anything is written, so it does not poison the writer.
    pub(crate) fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_usable()?;
        if payload.is_empty() {
            return Err(Error::invalid(format!("empty record for log {}", self.path.display())));
        }
        let Ok(length) = u32::try_from(payload.len()) else {
            return Err(Error::invalid(format!(
                "record of {} bytes for log {} exceeds the {} byte limit",
                payload.len(),
                self.path.display(),
                u32::MAX
            )));
        };
        self.preallocate_for(RECORD_HEADER_SIZE_BYTES as u64 + u64::from(length))?;
        let header = record_header(length, payload);
        // Two appends rather than one copy: payloads of a group commit can be hundreds of
        // megabytes, and the file buffers small writes anyway.
        let result = self.file.append(&header).and_then(|()| self.file.append(payload));
        self.record_failure(result)
    }

    /// Appends records framed by [`encode_record`] (any number, back to back) and hands
    /// everything buffered to the operating system. A failure part of the way leaves a partial
    /// record at the end, as a failed `add_record` does.
    pub(crate) fn append_encoded_and_flush(&mut self, records: &[u8]) -> Result<()> {
        self.check_usable()?;
        if !records.is_empty() {
            self.preallocate_for(records.len() as u64)?;
            let result = self.file.append(records);
            self.record_failure(result)?;
        }
        self.flush()
    }

    /// Hands buffered records to the operating system, without forcing them to stable storage.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.check_usable()?;
        let result = self.file.flush();
        self.record_failure(result)
    }

    /// Makes every record appended so far durable.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        let result = self.file.sync();
        self.synced |= result.is_ok();
        self.record_failure(result)
    }

    /// True once a sync of this log succeeded (preallocation runs from then on).
    pub(crate) fn has_synced(&self) -> bool {
        self.synced
    }

    /// A handle that syncs the log while this writer goes on appending (see
    /// [`WritableFile::syncer`]); `None` when the writer refuses work or the file system offers
    /// none. Whoever syncs through it must report a failure with
    /// [`LogWriter::poison_after_failed_sync`] before anything else syncs the log.
    pub(crate) fn syncer(&mut self) -> Option<Arc<dyn FileSyncer>> {
        if self.poisoned.is_some() {
            return None;
        }
        if self.syncer.is_none() {
            self.syncer = self.file.syncer();
        }
        self.syncer.clone()
    }

    /// Poisons the writer after a sync through its [`LogWriter::syncer`] failed, as if its own
    /// sync had (I10).
    pub(crate) fn poison_after_failed_sync(&mut self, error: &Error) {
        if self.poisoned.is_none() {
            self.poisoned = Some(error.duplicate());
        }
    }

    /// Before a record of `record_bytes` is appended: once the log has been synced, makes sure
    /// preallocated zeros cover it, writing the next chunks of them when they do not.
    fn preallocate_for(&mut self, record_bytes: u64) -> Result<()> {
        if self.preallocate_chunk_bytes == 0 || !self.synced {
            return Ok(());
        }
        let end_bytes = self.file.len().saturating_add(record_bytes);
        if end_bytes <= self.preallocated_until_bytes {
            return Ok(());
        }
        let chunks = end_bytes.div_ceil(self.preallocate_chunk_bytes);
        let until_bytes = chunks.saturating_mul(self.preallocate_chunk_bytes);
        let result = self.file.preallocate(until_bytes);
        if result.is_ok() {
            self.preallocated_until_bytes = until_bytes;
        }
        self.record_failure(result)
    }

    /// Bytes appended to the file so far, including any it held when the writer was created.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.file.len()
    }

    /// Fails with a copy of the first failure once the writer is poisoned.
    fn check_usable(&self) -> Result<()> {
        let Some(first_failure) = &self.poisoned else {
            return Ok(());
        };
        Err(match first_failure.duplicate() {
            Error::Io { context, source } => Error::Io {
                context: format!("log {} refuses work after an earlier failure: {context}", self.path.display()),
                source,
            },
            other => other,
        })
    }

    /// Poisons the writer if `result` is a failure, and passes `result` on.
    fn record_failure(&mut self, result: Result<()>) -> Result<()> {
        if let Err(error) = &result {
            self.poisoned = Some(error.duplicate());
        }
        result
    }
}

/// The header of a record of `length` bytes holding `payload`: its checksum, then its length.
fn record_header(length: u32, payload: &[u8]) -> [u8; RECORD_HEADER_SIZE_BYTES] {
    let length_bytes = length.to_le_bytes();
    let mut header = [0u8; RECORD_HEADER_SIZE_BYTES];
    header[..4].copy_from_slice(&record_checksum(length_bytes, payload).to_le_bytes());
    header[4..].copy_from_slice(&length_bytes);
    header
}

/// Appends to `buffer` the bytes [`LogWriter::add_record`] would write for `payload` (header,
/// then payload), for [`LogWriter::append_encoded_and_flush`]: self-service writers frame their
/// records while they hold the WAL stage, and one of them writes everyone's at once. Refuses an
/// empty payload or one longer than `u32::MAX` bytes, leaving `buffer` as it was.
pub(crate) fn encode_record(buffer: &mut Vec<u8>, payload: &[u8]) -> Result<()> {
    if payload.is_empty() {
        return Err(Error::invalid("empty log record"));
    }
    let Ok(length) = u32::try_from(payload.len()) else {
        return Err(Error::invalid(format!(
            "log record of {} bytes exceeds the {} byte limit",
            payload.len(),
            u32::MAX
        )));
    };
    buffer.extend_from_slice(&record_header(length, payload));
    buffer.extend_from_slice(payload);
    Ok(())
}
