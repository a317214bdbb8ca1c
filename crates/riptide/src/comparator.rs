//! User-key comparators: the order in which a column family keeps its keys.
//!
//! Each column family orders its user keys with the [`Comparator`] of its options
//! ([`crate::ColumnFamilyOptions::comparator`]); internal keys then order by that user-key order,
//! and by trailer descending among the versions of one user key. The comparator's name is
//! recorded in the manifest and in every table, and a database refuses to open a column family
//! with a comparator of another name, since tables sorted one way cannot be read the other way
//! (invariant I25).
//!
//! Inside the engine a comparator travels as a [`KeyComparator`]: the bytewise order is its own
//! variant, so the hot paths (memtable inserts, block seeks, the merging heap) compare slices
//! directly behind one predictable branch instead of calling through a trait object.
//!
//! Concurrency contract: comparators are `Send + Sync` and shared as `Arc`s; a `KeyComparator`
//! is an immutable value, cheap to clone (a tag or one reference count).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::key::{trailer, user_key};

/// The name of [`BytewiseComparator`]. Manifests written before column families had their own
/// comparators record this very name as the database's order, so they read as bytewise.
pub(crate) const BYTEWISE_COMPARATOR_NAME: &str = "riptide.bytewise";

/// The name of [`ReverseBytewiseComparator`].
pub(crate) const REVERSE_BYTEWISE_COMPARATOR_NAME: &str = "riptide.reverse_bytewise";

/// A total order on user keys, chosen per column family with
/// [`crate::ColumnFamilyOptions::comparator`] (as RocksDB's `Comparator`).
///
/// Contract, which the engine relies on and cannot check:
/// - `compare` is a total order: antisymmetric, transitive, and the same answer for the same
///   two keys every time, in every process that opens the database.
/// - `compare` returns `Equal` only for byte-identical keys. Bloom filters hash key bytes, and
///   the engine treats keys that compare equal as one key; two different byte strings that
///   compared equal would shadow each other unpredictably.
/// - `name` identifies the order on disk. It is stored in the manifest and in every table, and
///   opening a column family with a comparator of another name fails with
///   [`crate::Error::InvalidArgument`]; change the name whenever the order changes. Names
///   starting with `riptide.` are reserved for the built-in comparators: a comparator named
///   `riptide.bytewise` is taken to be [`BytewiseComparator`], whatever its `compare` does.
///
/// Bounds, seeks and ranges (`ReadOptions::lower_bound`, `Db::compact_range`, ...) are all
/// understood in the column family's order.
pub trait Comparator: Send + Sync {
    /// The name of the order, stored on disk (a non-empty UTF-8 string).
    fn name(&self) -> &str;

    /// Compares two user keys.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;
}

/// Orders keys by their bytes, lexicographically, as `<[u8]>::cmp` does (shorter first when
/// one key is a prefix of the other). The default of every column family. Name:
/// `riptide.bytewise`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BytewiseComparator;

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        BYTEWISE_COMPARATOR_NAME
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

/// The bytewise order reversed: the largest key first, as for a descending index. Name:
/// `riptide.reverse_bytewise`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReverseBytewiseComparator;

impl Comparator for ReverseBytewiseComparator {
    fn name(&self) -> &str {
        REVERSE_BYTEWISE_COMPARATOR_NAME
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
}

/// A column family's order as the engine uses it: the bytewise order compared inline, or a
/// user comparator called through its trait object.
#[derive(Clone)]
pub(crate) enum KeyComparator {
    /// `<[u8]>::cmp`.
    Bytewise,
    /// Any other comparator.
    Custom(Arc<dyn Comparator>),
}

impl KeyComparator {
    /// The engine's form of `comparator`. A comparator named like the bytewise one becomes the
    /// inline bytewise order (the name is the comparator's identity, see [`Comparator`]).
    pub(crate) fn new(comparator: &Arc<dyn Comparator>) -> KeyComparator {
        if comparator.name() == BYTEWISE_COMPARATOR_NAME {
            KeyComparator::Bytewise
        } else {
            KeyComparator::Custom(Arc::clone(comparator))
        }
    }

    /// The name stored on disk.
    pub(crate) fn name(&self) -> &str {
        match self {
            KeyComparator::Bytewise => BYTEWISE_COMPARATOR_NAME,
            KeyComparator::Custom(comparator) => comparator.name(),
        }
    }

    /// True for the bytewise order, the only one the byte-level tricks (shortened index
    /// separators, "the next key is this key plus a zero byte") are valid for.
    pub(crate) fn is_bytewise(&self) -> bool {
        matches!(self, KeyComparator::Bytewise)
    }

    /// Compares two user keys.
    #[inline]
    pub(crate) fn compare_user_keys(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyComparator::Bytewise => compare_bytes(a, b),
            KeyComparator::Custom(comparator) => comparator.compare(a, b),
        }
    }

    /// Compares two well-formed internal keys: user key in this order, then trailer descending
    /// (newest version first).
    #[inline]
    pub(crate) fn compare_internal_keys(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self.compare_user_keys(user_key(a), user_key(b)) {
            Ordering::Equal => trailer(b).cmp(&trailer(a)),
            other => other,
        }
    }

    /// The smaller of two user keys (the first when they are equal).
    #[inline]
    pub(crate) fn min_user_key<'a>(&self, a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
        if self.compare_user_keys(b, a) == Ordering::Less {
            b
        } else {
            a
        }
    }

    /// The larger of two user keys (the first when they are equal).
    #[inline]
    pub(crate) fn max_user_key<'a>(&self, a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
        if self.compare_user_keys(b, a) == Ordering::Greater {
            b
        } else {
            a
        }
    }
}

/// The longest common length [`compare_bytes`] compares inline; longer keys go to the C
/// library's `memcmp`, which is faster than a word loop once there are several words.
const INLINE_COMPARE_MAX_BYTES: usize = 32;

/// The bytewise order of two byte strings (what `<[u8]>::cmp` gives). Short keys, the common
/// case of benchmarks and of the SQL layer's indexes, compare as big-endian words inline: a
/// call to `memcmp` per comparison was 14 % of a Zipfian seek's time (`perf`, benchtool `seek -p
/// zipfian`), most of it the call itself for 16-byte keys.
#[inline(always)]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    if common > INLINE_COMPARE_MAX_BYTES {
        return a.cmp(b);
    }
    let mut offset = 0;
    while offset + 8 <= common {
        let left = word_at(a, offset);
        let right = word_at(b, offset);
        if left != right {
            return left.cmp(&right);
        }
        offset += 8;
    }
    if offset < common {
        // Fewer than eight common bytes remain. Both sides are read with fixed-size loads: a copy
        // of a variable length was a call to `memmove` per comparison (1.2 % of mariadbd's CPU
        // in a profile of sysbench oltp_read_only, whose keys are 5 bytes).
        let (left, right) = if common >= 8 {
            // The last eight common bytes: those before `offset` are equal on both sides, so
            // reading them again decides nothing.
            (word_at(a, common - 8), word_at(b, common - 8))
        } else {
            (short_word(&a[..common]), short_word(&b[..common]))
        };
        if left != right {
            return left.cmp(&right);
        }
    }
    a.len().cmp(&b.len())
}

/// The eight bytes at `offset` as a big-endian number.
#[inline(always)]
fn word_at(bytes: &[u8], offset: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_be_bytes(word)
}

/// Fewer than eight bytes as a number that orders as they do among strings of their length.
/// Four to seven bytes: the first four, then the last four (they overlap; where the first four
/// are equal, the first difference lies in the last four). One to three: the first, the middle
/// and the last byte, which between them are every byte, in order.
#[inline(always)]
fn short_word(bytes: &[u8]) -> u64 {
    let length = bytes.len();
    debug_assert!(length < 8);
    if length >= 4 {
        let first = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let last = u32::from_be_bytes([bytes[length - 4], bytes[length - 3], bytes[length - 2], bytes[length - 1]]);
        (u64::from(first) << 32) | u64::from(last)
    } else if length > 0 {
        (u64::from(bytes[0]) << 16) | (u64::from(bytes[length / 2]) << 8) | u64::from(bytes[length - 1])
    } else {
        0
    }
}

impl fmt::Debug for KeyComparator {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    #[test]
    fn built_in_orders_and_names() {
        let bytewise: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let reverse: Arc<dyn Comparator> = Arc::new(ReverseBytewiseComparator);
        assert!(KeyComparator::new(&bytewise).is_bytewise());
        let reverse = KeyComparator::new(&reverse);
        assert!(!reverse.is_bytewise());
        assert_eq!(reverse.name(), REVERSE_BYTEWISE_COMPARATOR_NAME);
        assert_eq!(KeyComparator::Bytewise.compare_user_keys(b"a", b"b"), Ordering::Less);
        assert_eq!(reverse.compare_user_keys(b"a", b"b"), Ordering::Greater);
        assert_eq!(reverse.compare_user_keys(b"ab", b"ab"), Ordering::Equal);
        assert_eq!(reverse.max_user_key(b"a", b"b"), b"a");
        assert_eq!(reverse.min_user_key(b"a", b"b"), b"b");
    }

    #[test]
    fn internal_keys_order_by_user_key_then_newest_first() {
        let reverse = KeyComparator::Custom(Arc::new(ReverseBytewiseComparator));
        let older = make_internal_key(b"k", 5, ValueKind::Put);
        let newer = make_internal_key(b"k", 9, ValueKind::Delete);
        let smaller_key = make_internal_key(b"j", 1, ValueKind::Put);
        for comparator in [KeyComparator::Bytewise, reverse.clone()] {
            assert_eq!(comparator.compare_internal_keys(&newer, &older), Ordering::Less);
            assert_eq!(comparator.compare_internal_keys(&older, &older), Ordering::Equal);
        }
        assert_eq!(KeyComparator::Bytewise.compare_internal_keys(&smaller_key, &older), Ordering::Less);
        assert_eq!(reverse.compare_internal_keys(&smaller_key, &older), Ordering::Greater);
    }

    #[test]
    fn inline_bytewise_comparison_agrees_with_slice_order() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(5);
        // Lengths around the word size and the inline limit; few distinct bytes, so that long
        // common prefixes and prefixes of each other are frequent.
        for _ in 0..200_000 {
            let length_a = rng.gen_range(0..=INLINE_COMPARE_MAX_BYTES + 9);
            let mut a: Vec<u8> = (0..length_a).map(|_| [0u8, 1, 0x7f, 0x80, 0xff][rng.gen_range(0..5)]).collect();
            let mut b = a.clone();
            match rng.gen_range(0..4) {
                0 => b.truncate(rng.gen_range(0..=b.len())),
                1 => b.push([0u8, 0xff][rng.gen_range(0..2)]),
                2 if !b.is_empty() => {
                    let position = rng.gen_range(0..b.len());
                    b[position] = b[position].wrapping_add(rng.gen_range(1..=255));
                    b.truncate(rng.gen_range(position + 1..=b.len()));
                }
                _ => b = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect(),
            }
            if rng.gen_bool(0.5) {
                std::mem::swap(&mut a, &mut b);
            }
            assert_eq!(compare_bytes(&a, &b), a.cmp(&b), "{a:?} vs {b:?}");
        }
    }
}
