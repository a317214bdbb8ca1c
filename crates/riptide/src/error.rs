//! The one error type of the engine.
//!
//! Every fallible public operation returns [`Result<T>`]. A missing key is not an error (`Ok(None)`);
//! errors describe I/O failures, damaged files, bad arguments, a locked directory and a closing
//! database. The enum is `#[non_exhaustive]` so that later features can add kinds without
//! breaking callers.
//!
//! After a background failure (a failed WAL write or sync, memtable switch, flush or
//! compaction), writes, `flush`, `wait_for_background_work` and `compact_all` fail with a copy of
//! that first error, of the same kind (for example [`Error::Io`] with its OS code), until the
//! database is reopened; reads keep working.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The result type used throughout Riptide.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Riptide.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The operating system (or the injected fault layer) reported an I/O failure.
    Io {
        /// What the engine was doing, e.g. "sync WAL 000012.log".
        context: String,
        /// The underlying error, with its OS error code when there is one.
        source: io::Error,
    },
    /// Data on disk failed a checksum or could not be decoded.
    Corruption {
        /// The file that holds the damaged bytes.
        file: PathBuf,
        /// Byte offset in `file` where the damage was detected.
        offset: u64,
        /// A human-readable description of what was wrong.
        reason: String,
    },
    /// The caller passed an argument that breaks a documented limit or contract: for example a
    /// key, value or batch over its limit, invalid options, or `create_if_missing` /
    /// `error_if_exists` refusing to open. Also returned when a column family is opened with a
    /// comparator of another name than it was created with, or asked to change its comparator,
    /// when sequence numbers are exhausted, and when an internal consistency check
    /// fails (a version edit that would make files of a level overlap, "internal error (I4)"),
    /// which is a bug in Riptide rather than in the caller.
    InvalidArgument(String),
    /// A resource is in use or exhausted: the database directory is locked by another handle or
    /// process, or a transaction would take more locks than
    /// [`crate::TransactionOptions::max_lock_count`] allows (the transaction is still usable;
    /// MariaDB maps this to `ER_LOCK_TABLE_FULL`).
    Busy(String),
    /// A transaction could not commit (or, under a pessimistic lock, go on) without breaking its
    /// isolation level: a concurrent transaction committed a write to a key it wrote (under
    /// REPEATABLE READ and SERIALIZABLE) or to a key or range it read (under SERIALIZABLE).
    /// Nothing of the transaction was written; roll it back and retry. MariaDB maps this to
    /// `ER_LOCK_DEADLOCK` / `HA_ERR_LOCK_DEADLOCK` (a serialization failure, SQLSTATE 40001).
    Conflict(String),
    /// The transaction was the victim of a deadlock among lock waiters (the one whose lock
    /// request would have closed the cycle; see `docs/transactions.md`). Its lock request was
    /// not granted; roll it back and retry. MariaDB maps this to `ER_LOCK_DEADLOCK` (SQLSTATE
    /// 40001).
    Deadlock(String),
    /// A lock request waited longer than the transaction's lock timeout. Only that request
    /// failed: the transaction keeps its other locks and writes and may go on or roll back
    /// (MariaDB's `ER_LOCK_WAIT_TIMEOUT`, SQLSTATE HY000, rolls back only the statement).
    LockTimeout(String),
    /// The database is closed or closing: work that finds a shutdown under way stops with this
    /// error (for example a compaction interrupted by close, which is not reported further).
    ///
    /// It does not signal a background failure: once one has happened, writes fail with a copy
    /// of that first error, of its own kind (for example [`Error::Io`]), not with `Closed`.
    Closed(String),
    /// The operation was cancelled on request (for example a `compact_range` stopped by
    /// `cancel_manual_compactions`). Nothing is lost: work done before the cancellation stays.
    Cancelled(String),
}

impl Error {
    /// Builds an [`Error::Io`] with context.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// Builds an [`Error::Corruption`].
    pub(crate) fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption { file: file.into(), offset, reason: reason.into() }
    }

    /// Builds an [`Error::InvalidArgument`].
    pub(crate) fn invalid(reason: impl Into<String>) -> Error {
        Error::InvalidArgument(reason.into())
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True for the errors after which retrying the whole transaction may succeed:
    /// [`Error::Conflict`], [`Error::Deadlock`] and [`Error::LockTimeout`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict(_) | Error::Deadlock(_) | Error::LockTimeout(_))
    }

    /// True for [`Error::Io`].
    pub fn is_io(&self) -> bool {
        matches!(self, Error::Io { .. })
    }

    /// Makes a copy of this error. `io::Error` is not `Clone`, so I/O errors keep their kind, OS
    /// code and message but lose any custom payload. Used to hand one background error to many
    /// waiting writers.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption { file, offset, reason } => {
                Error::Corruption { file: file.clone(), offset: *offset, reason: reason.clone() }
            }
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Busy(s) => Error::Busy(s.clone()),
            Error::Conflict(s) => Error::Conflict(s.clone()),
            Error::Deadlock(s) => Error::Deadlock(s.clone()),
            Error::LockTimeout(s) => Error::LockTimeout(s.clone()),
            Error::Closed(s) => Error::Closed(s.clone()),
            Error::Cancelled(s) => Error::Cancelled(s.clone()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error: {context}: {source}"),
            Error::Corruption { file, offset, reason } => {
                write!(f, "corruption in {} at offset {offset}: {reason}", file.display())
            }
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::Busy(s) => write!(f, "busy: {s}"),
            Error::Conflict(s) => write!(f, "conflict: {s}"),
            Error::Deadlock(s) => write!(f, "deadlock: {s}"),
            Error::LockTimeout(s) => write!(f, "lock wait timeout: {s}"),
            Error::Closed(s) => write!(f, "closed: {s}"),
            Error::Cancelled(s) => write!(f, "cancelled: {s}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
