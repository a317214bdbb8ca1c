//! The log writer: appends checksummed records to a log file (the WAL or the manifest).
//!
//! Concurrency contract: one owner, `&mut self` for every call; the engine keeps the writer
//! behind its group-commit leader. The writer is `Send` so it can move between threads.
//!
//! Invariants: the file only ever grows by whole records handed to one `add_record` call (a
//! failure in the middle of one leaves a partial record, which is exactly the torn tail the
//! reader knows how to judge); after the first failed append, flush or sync the writer is
//! poisoned and every later call fails with a copy of that first error, because the contents of
//! the file past the last successful sync are unknown and a later successful sync must never be
//! taken to cover them.

use std::path::PathBuf;

use super::{record_checksum, RECORD_HEADER_SIZE_BYTES};
use crate::error::{Error, Result};
use crate::fs::WritableFile;

/// Appends records to a log file.
pub(crate) struct LogWriter {
    /// The file records are appended to.
    file: Box<dyn WritableFile>,
    /// Its path, for error messages.
    path: PathBuf,
    /// The first failure, once one happened.
    poisoned: Option<Error>,
}

impl LogWriter {
    /// Wraps a file opened for appending. Records go after whatever the file already holds.
    pub(crate) fn new(file: Box<dyn WritableFile>, path: PathBuf) -> LogWriter {
        LogWriter { file, path, poisoned: None }
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
        let length_bytes = length.to_le_bytes();
        let mut header = [0u8; RECORD_HEADER_SIZE_BYTES];
        header[..4].copy_from_slice(&record_checksum(length_bytes, payload).to_le_bytes());
        header[4..].copy_from_slice(&length_bytes);
        // Two appends rather than one copy: payloads of a group commit can be hundreds of
        // megabytes, and the file buffers small writes anyway.
        let result = self.file.append(&header).and_then(|()| self.file.append(payload));
        self.record_failure(result)
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
