//! Which RocksDB errors are transaction aborts, read from RocksDB's status messages.
//!
//! The `rocksdb` crate hands errors over as the text of RocksDB's `Status::ToString()` (the
//! code's name, then the subcode's message and the state, separated by `": "`), and its own
//! `Error::kind()` reads the code from that text as well. The classification is compiled
//! without the `rocksdb` feature so that the unit tests, which never build RocksDB, check it
//! against RocksDB's exact messages (`util/status.cc` and the point lock manager of RocksDB
//! 11.8.1).

use super::AbortKind;

/// What `Status::ToString()` starts `Busy` with.
const BUSY_PREFIX: &str = "Resource busy";
/// What it starts `TimedOut` with.
const TIMED_OUT_PREFIX: &str = "Operation timed out";
/// What it starts `TryAgain` with (the code's name holds a full stop).
const TRY_AGAIN_PREFIX: &str = "Operation failed. Try again.";
/// The message of the `kDeadlock` subcode.
const DEADLOCK_SUBCODE: &str = "Deadlock";
/// The message of the `kLockLimit` subcode (`max_num_locks` reached).
const LOCK_LIMIT_SUBCODE: &str = "Failed to acquire lock due to max_num_locks limit";

/// The abort a RocksDB transaction error stands for, or `None` when it is not an abort (an I/O
/// error, say, which ends the run).
///
/// `Busy` is a write conflict found by the snapshot validation (at `get_for_update`, `put` or,
/// optimistic, at commit), or with the `Deadlock` subcode a deadlock victim; `TryAgain` is a
/// validation that could not be done because the memtables no longer reach back to the
/// snapshot, which fails the transaction like a conflict; `TimedOut` is a lock wait that
/// reached the lock timeout (or, far rarer, a stripe mutex wait that did). `Busy` with the
/// lock-limit subcode is not an abort: the benchtool sets no lock limit, so it would be a
/// broken configuration.
pub fn classify_rocksdb_error(message: &str) -> Option<AbortKind> {
    let (code, rest) = match message.split_once(':') {
        Some((code, rest)) => (code, rest.trim_start()),
        None => (message, ""),
    };
    if message.starts_with(TRY_AGAIN_PREFIX) {
        return Some(AbortKind::Conflict);
    }
    match code {
        BUSY_PREFIX if rest.starts_with(DEADLOCK_SUBCODE) => Some(AbortKind::Deadlock),
        BUSY_PREFIX if rest.starts_with(LOCK_LIMIT_SUBCODE) => None,
        BUSY_PREFIX => Some(AbortKind::Conflict),
        TIMED_OUT_PREFIX => Some(AbortKind::LockTimeout),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocksdb_messages_classify_as_rocksdb_formats_them() {
        // The write conflict of `TransactionUtil::CheckKey` is a `Busy` without subcode or state.
        assert_eq!(classify_rocksdb_error("Resource busy: "), Some(AbortKind::Conflict));
        assert_eq!(classify_rocksdb_error("Resource busy"), Some(AbortKind::Conflict));
        assert_eq!(classify_rocksdb_error("Resource busy: Deadlock"), Some(AbortKind::Deadlock));
        assert_eq!(classify_rocksdb_error("Resource busy: Deadlock: path 3 -> 7"), Some(AbortKind::Deadlock));
        assert_eq!(
            classify_rocksdb_error("Operation timed out: Timeout waiting to lock key"),
            Some(AbortKind::LockTimeout)
        );
        assert_eq!(
            classify_rocksdb_error("Operation timed out: Timeout Acquiring Mutex"),
            Some(AbortKind::LockTimeout)
        );
        assert_eq!(
            classify_rocksdb_error(
                "Operation failed. Try again.: Transaction could not check for conflicts as the MemTable does not \
                 contain a long enough history to check write at SequenceNumber: 42"
            ),
            Some(AbortKind::Conflict)
        );
        assert_eq!(classify_rocksdb_error("Operation failed. Try again.: "), Some(AbortKind::Conflict));
        // Not aborts: the run stops on them.
        assert_eq!(classify_rocksdb_error("Resource busy: Failed to acquire lock due to max_num_locks limit"), None);
        assert_eq!(classify_rocksdb_error("IO error: No space left on device: /db/000012.log"), None);
        assert_eq!(classify_rocksdb_error("Corruption: block checksum mismatch"), None);
        assert_eq!(classify_rocksdb_error("Operation expired: "), None);
        assert_eq!(classify_rocksdb_error(""), None);
    }
}
