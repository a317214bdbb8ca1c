//! The recorded history of an isolation run: every transaction each thread ran, with the
//! micro-operations it made and what each one saw, how it ended, and the final state of every
//! key.
//!
//! Keys hold lists of integers (elements), encoded in the value as comma-separated decimal. A
//! transaction appends to a key by reading its own view of the list and writing the list back
//! with one new element at the end; elements are unique across a whole run, so every element
//! names the one append that wrote it. A key that is absent holds the empty list, which is
//! never written (an append always leaves at least its own element).
//!
//! Concurrency contract: plain data. Each workload thread builds its own records; they are
//! joined into one [`History`] after every thread has stopped, and the checker reads it on one
//! thread.
//!
//! Invariants: within a [`TransactionRecord`], operations are in program order, and an
//! [`Operation::Append`] records exactly the list its transaction saw before writing, so the
//! list it wrote is `read` followed by `element`; a transaction's version of a key is its last
//! append there that no rollback to a savepoint undid.

use std::fmt::Write as _;

/// One element of a list: unique across a run, so it identifies the append that wrote it.
pub type Element = u64;

/// The key of list `index`: fixed-width decimal, so that the bytewise order of keys is the
/// order of their indices and a key range is a range of indices.
pub fn key_name(index: usize) -> Vec<u8> {
    format!("list-{index:03}").into_bytes()
}

/// The index of a key made by [`key_name`], if it is one.
pub fn parse_key_name(key: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(key).ok()?;
    let digits = text.strip_prefix("list-")?;
    if digits.len() != 3 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Encodes a list as comma-separated decimal.
pub fn encode_list(list: &[Element]) -> Vec<u8> {
    let mut text = String::new();
    for (position, element) in list.iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        // Writing into a String cannot fail.
        let _ = write!(text, "{element}");
    }
    text.into_bytes()
}

/// Decodes a value written by [`encode_list`]. An empty value is an error: no append ever
/// writes one, so a present key with an empty value is something nobody wrote.
pub fn decode_list(value: &[u8]) -> Result<Vec<Element>, String> {
    let text = std::str::from_utf8(value).map_err(|_| format!("a value that is not UTF-8: {value:?}"))?;
    if text.is_empty() {
        return Err("an empty value, which no append writes".to_string());
    }
    text.split(',')
        .map(|part| part.parse::<Element>().map_err(|_| format!("a value that is no list of elements: {text:?}")))
        .collect()
}

/// A list for messages: short lists in full, long ones by their last elements and length, so
/// that a report stays readable while still naming the version (the last element does).
pub fn describe_list(list: &[Element]) -> String {
    const SHOWN: usize = 5;
    let shown: Vec<String> = list.iter().rev().take(SHOWN).rev().map(Element::to_string).collect();
    if list.len() <= SHOWN {
        format!("[{}]", shown.join(" "))
    } else {
        format!("[… {}] ({} elements)", shown.join(" "), list.len())
    }
}

/// A key for messages.
pub fn describe_key(index: usize) -> String {
    String::from_utf8_lossy(&key_name(index)).into_owned()
}

/// The row lock a point read takes (in pessimistic mode; optimistic mode validates the key at
/// commit instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadLock {
    /// `get`: none.
    None,
    /// `get_for_update`: exclusive.
    ForUpdate,
    /// `get_for_share`: shared.
    ForShare,
}

/// One micro-operation of a transaction and what it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A point read (`get`, `get_for_update` or `get_for_share`, as `lock` says): the list the
    /// key held in the transaction's view (empty when absent).
    Read {
        /// The key's index.
        key: usize,
        /// What the read returned.
        list: Vec<Element>,
        /// The lock the read took.
        lock: ReadLock,
    },
    /// An append: the transaction read `read` (its own view of the key, by `get`), then wrote
    /// `read` followed by `element`.
    Append {
        /// The key's index.
        key: usize,
        /// The new element, unique across the run.
        element: Element,
        /// The list the transaction saw just before writing.
        read: Vec<Element>,
    },
    /// A range read with an iterator over the keys `start..end` (end excluded), forward or
    /// backward: every key of the range with the list it held (empty when the iterator did not
    /// return it). With lists, a range read is a set of point reads, absent keys included, so
    /// a phantom shows as a read of the empty version of a key that someone then appended to.
    RangeRead {
        /// First key index of the range.
        start: usize,
        /// One past the last key index.
        end: usize,
        /// True when the iterator ran from the end of the range backward.
        reverse: bool,
        /// Every key of `start..end` in key order, with what the iterator showed.
        lists: Vec<(usize, Vec<Element>)>,
    },
    /// `savepoint`: opens a savepoint (they nest).
    Savepoint,
    /// `rollback_to_savepoint`: undoes the appends made since the newest open savepoint and
    /// closes it. The undone elements must never be seen, as if their transaction had aborted.
    RollbackToSavepoint,
    /// `release_savepoint`: closes the newest open savepoint, keeping its appends.
    ReleaseSavepoint,
}

impl Operation {
    /// The reads this operation made, as `(key, list)` in the order they were made (a backward
    /// range read's order does not matter: one iterator reads at one point of view).
    pub fn reads(&self) -> Vec<(usize, &[Element])> {
        match self {
            Operation::Read { key, list, .. } => vec![(*key, list.as_slice())],
            Operation::Append { key, read, .. } => vec![(*key, read.as_slice())],
            Operation::RangeRead { lists, .. } => lists.iter().map(|(key, list)| (*key, list.as_slice())).collect(),
            Operation::Savepoint | Operation::RollbackToSavepoint | Operation::ReleaseSavepoint => Vec::new(),
        }
    }

    /// The operation for messages.
    pub fn describe(&self) -> String {
        match self {
            Operation::Read { key, list, lock } => {
                let verb = match lock {
                    ReadLock::None => "read",
                    ReadLock::ForUpdate => "read for update",
                    ReadLock::ForShare => "read for share",
                };
                format!("{verb} {} = {}", describe_key(*key), describe_list(list))
            }
            Operation::Append { key, element, read } => {
                format!("append {element} to {} (saw {})", describe_key(*key), describe_list(read))
            }
            Operation::RangeRead { start, end, reverse, lists } => {
                let seen: Vec<String> = lists
                    .iter()
                    .map(|(key, list)| format!("{}: {}", describe_key(*key), describe_list(list)))
                    .collect();
                format!(
                    "scan {}..{} {} = {{{}}}",
                    describe_key(*start),
                    describe_key(*end),
                    if *reverse { "backward" } else { "forward" },
                    seen.join(", ")
                )
            }
            Operation::Savepoint => "savepoint".to_string(),
            Operation::RollbackToSavepoint => "rollback to savepoint".to_string(),
            Operation::ReleaseSavepoint => "release savepoint".to_string(),
        }
    }
}

/// How a transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `commit` succeeded.
    Committed,
    /// The engine refused it (a retryable error: conflict, deadlock or lock timeout, during an
    /// operation or at commit); the text is the error.
    Aborted(String),
    /// The workload rolled it back on purpose.
    RolledBack,
}

impl Outcome {
    /// True when the transaction committed.
    pub fn committed(&self) -> bool {
        matches!(self, Outcome::Committed)
    }
}

/// One transaction of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionRecord {
    /// The workload thread that ran it.
    pub thread: usize,
    /// Its micro-operations in program order (an operation that failed is left out, except
    /// the read an append made before its write failed, which is recorded as a read).
    pub operations: Vec<Operation>,
    /// How it ended.
    pub outcome: Outcome,
    /// The sequence number its commit returned (committed transactions that wrote).
    pub commit_sequence: Option<u64>,
    /// The sequence number of its snapshot (REPEATABLE READ and SERIALIZABLE).
    pub snapshot: Option<u64>,
}

impl TransactionRecord {
    /// A committed transaction without sequence numbers, for hand-built histories.
    pub fn committed(thread: usize, operations: Vec<Operation>) -> TransactionRecord {
        TransactionRecord { thread, operations, outcome: Outcome::Committed, commit_sequence: None, snapshot: None }
    }

    /// An aborted transaction, for hand-built histories.
    pub fn aborted(thread: usize, operations: Vec<Operation>) -> TransactionRecord {
        TransactionRecord {
            thread,
            operations,
            outcome: Outcome::Aborted("conflict".to_string()),
            commit_sequence: None,
            snapshot: None,
        }
    }

    /// The same record with a commit sequence number.
    pub fn at_sequence(mut self, sequence: u64) -> TransactionRecord {
        self.commit_sequence = Some(sequence);
        self
    }

    /// The same record with a snapshot sequence number.
    pub fn with_snapshot(mut self, sequence: u64) -> TransactionRecord {
        self.snapshot = Some(sequence);
        self
    }

    /// True when the transaction wrote nothing.
    pub fn read_only(&self) -> bool {
        !self.operations.iter().any(|operation| matches!(operation, Operation::Append { .. }))
    }

    /// The transaction for messages, as `T<id>` with its thread, outcome, sequence numbers and
    /// operations.
    pub fn describe(&self, id: usize) -> String {
        let outcome = match &self.outcome {
            Outcome::Committed => match self.commit_sequence {
                Some(sequence) => format!("committed at sequence {sequence}"),
                None => "committed".to_string(),
            },
            Outcome::Aborted(reason) => format!("aborted: {reason}"),
            Outcome::RolledBack => "rolled back".to_string(),
        };
        let snapshot = self.snapshot.map(|sequence| format!(", snapshot {sequence}")).unwrap_or_default();
        let operations: Vec<String> = self.operations.iter().map(Operation::describe).collect();
        format!("T{id} (thread {}, {outcome}{snapshot}): {}", self.thread, operations.join("; "))
    }
}

/// A whole run: the transactions, and the final list of every key read after all threads
/// stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Every transaction; its position is its id (`T<position>` in messages).
    pub transactions: Vec<TransactionRecord>,
    /// The final list of every key, by index (empty when absent).
    pub final_lists: Vec<Vec<Element>>,
}

impl History {
    /// Number of keys.
    pub fn keys(&self) -> usize {
        self.final_lists.len()
    }

    /// Transaction `id` for messages.
    pub fn describe_transaction(&self, id: usize) -> String {
        match self.transactions.get(id) {
            Some(record) => record.describe(id),
            None => format!("T{id} (not in the history)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_key_names_round_trip() {
        for list in [vec![7], vec![1, 20, 300], vec![u64::MAX, 0]] {
            assert_eq!(decode_list(&encode_list(&list)), Ok(list));
        }
        assert!(decode_list(b"").is_err());
        assert!(decode_list(b"1,,2").is_err());
        assert!(decode_list(b"1,x").is_err());
        assert_eq!(parse_key_name(&key_name(7)), Some(7));
        assert_eq!(parse_key_name(b"list-7"), None);
        assert_eq!(parse_key_name(b"other-007"), None);
        assert!(key_name(9) < key_name(10), "key order is index order");
    }

    #[test]
    fn long_lists_are_shortened_in_messages() {
        assert_eq!(describe_list(&[]), "[]");
        assert_eq!(describe_list(&[1, 2, 3]), "[1 2 3]");
        assert_eq!(describe_list(&[1, 2, 3, 4, 5, 6, 7]), "[… 3 4 5 6 7] (7 elements)");
    }
}
