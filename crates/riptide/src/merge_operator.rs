//! Merge operators: read-modify-write without a read. `Db::merge(key, operand)` records an
//! operand; reads combine a key's operands with the value beneath them through the column
//! family's [`MergeOperator`], and flush and compaction fold operands together where no reader
//! could see them apart (`iterator/merge_fold.rs`, I43 in `docs/invariants.md`).
//!
//! Concurrency contract: an operator is shared by every reader and background thread of its
//! column family and must be thread-safe and deterministic: the same inputs give the same result
//! whenever and wherever it runs, since reads and compactions both apply it.
//!
//! Invariants: operands are passed oldest first. An operator that fails (returns `None`) makes
//! the read fail with `Error::Corruption` naming the key; flush and compaction never fail for it:
//! they keep the operands as they were, so that nothing is lost and the read reports the failure.

use std::fmt::Debug;

/// Combines a key's merge operands with the value beneath them, as RocksDB's `MergeOperator`.
///
/// ```
/// use riptide::{MergeOperator, U64AddOperator};
/// let add = U64AddOperator;
/// let merged = add.full_merge(b"hits", Some(&5u64.to_le_bytes()), &[&2u64.to_le_bytes(), &3u64.to_le_bytes()]);
/// assert_eq!(merged, Some(10u64.to_le_bytes().to_vec()));
/// ```
pub trait MergeOperator: Debug + Send + Sync {
    /// The operator's name, shown in options and errors.
    fn name(&self) -> &str;

    /// The value of `key` after applying `operands` (oldest first) to `existing`, the value
    /// beneath them (`None` when the key had none: never written, deleted or expired). `None`
    /// when the operands cannot be applied (malformed): the read then fails.
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>>;

    /// One operand with the effect of `operands` (oldest first, at least two) applied in order,
    /// so that compaction can keep one operand instead of many when it cannot reach the value
    /// beneath them; `None` when they do not combine without that value (the default), and
    /// compaction then keeps them all.
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let _ = (key, operands);
        None
    }
}

/// The built-in counter: values and operands are unsigned 64-bit integers, 8 bytes little
/// endian; a merge adds them (wrapping at 2^64). A value or operand of another length makes
/// the merge fail, and the read with it, rather than count wrong.
#[derive(Clone, Copy, Debug, Default)]
pub struct U64AddOperator;

impl U64AddOperator {
    fn decode(bytes: &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }
}

impl MergeOperator for U64AddOperator {
    fn name(&self) -> &str {
        "riptide.u64add"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut sum = match existing {
            Some(bytes) => Self::decode(bytes)?,
            None => 0,
        };
        for operand in operands {
            sum = sum.wrapping_add(Self::decode(operand)?);
        }
        Some(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(value: u64) -> [u8; 8] {
        value.to_le_bytes()
    }

    #[test]
    fn u64_add_sums_wraps_and_rejects_malformed_input() {
        let add = U64AddOperator;
        assert_eq!(add.full_merge(b"k", None, &[&le(1), &le(2)]), Some(le(3).to_vec()));
        assert_eq!(add.full_merge(b"k", Some(&le(u64::MAX)), &[&le(2)]), Some(le(1).to_vec()));
        assert_eq!(add.full_merge(b"k", Some(&le(7)), &[]), Some(le(7).to_vec()));
        assert_eq!(add.full_merge(b"k", Some(b"seven"), &[&le(1)]), None);
        assert_eq!(add.full_merge(b"k", None, &[&le(1), b"x"]), None);
        assert_eq!(add.partial_merge(b"k", &[&le(4), &le(5)]), Some(le(9).to_vec()));
    }
}
