//! Internal keys: a user key followed by an 8-byte trailer that packs the sequence number and the
//! kind of the entry.
//!
//! Layout: `user_key ++ fixed64_le((sequence << 8) | kind)`. Internal keys sort by user key
//! ascending in the column family's order (`crate::comparator::KeyComparator`), then by sequence
//! number descending, then by kind descending, so the newest version of a user key comes first.
//! Invariant I3 (see `docs/invariants.md`): sequence numbers fit in 56 bits.

use std::cmp::Ordering;

/// The largest sequence number that fits in the 56-bit field of the trailer.
pub const MAX_SEQUENCE_NUMBER: u64 = (1 << 56) - 1;

/// Size in bytes of the trailer that ends every internal key.
pub(crate) const TRAILER_SIZE_BYTES: usize = 8;

/// What an entry means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A value stored in a blob file: the entry's value is a `BlobReference`
    /// (`blob/format.rs`). Only tables hold entries of this kind, never memtables or logs.
    BlobIndex = 2,
    /// A single delete: a tombstone for a key written once, which flush and compaction drop
    /// together with the put it meets (`iterator/single_delete.rs`, I41). Reads treat it as a
    /// delete.
    SingleDelete = 3,
    /// A value with an expiry: the entry's value is the expiry (8 bytes, little endian,
    /// microseconds since the Unix epoch) followed by the user's value (`ttl.rs`). Once expired
    /// it reads as a delete (I42). Format version 4 of the write batch and of tables.
    PutWithExpiry = 4,
    /// A merge operand: applied by the column family's merge operator to the value beneath it
    /// (`merge_operator.rs`, I43). Write batch format 5.
    Merge = 5,
}

impl ValueKind {
    /// The kind with the highest code, used in lookup keys so that a seek lands on the newest
    /// entry whose sequence number is at most the snapshot.
    pub(crate) const FOR_SEEK: ValueKind = ValueKind::Merge;

    /// True for the kinds that delete their key (`Delete`, `SingleDelete`).
    pub(crate) fn is_deletion(self) -> bool {
        matches!(self, ValueKind::Delete | ValueKind::SingleDelete)
    }

    /// Decodes a kind byte; `None` for an unknown code (corruption).
    pub(crate) fn from_u8(code: u8) -> Option<ValueKind> {
        match code {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::BlobIndex),
            3 => Some(ValueKind::SingleDelete),
            4 => Some(ValueKind::PutWithExpiry),
            5 => Some(ValueKind::Merge),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into the trailer value.
pub(crate) fn pack_trailer(sequence: u64, kind: ValueKind) -> u64 {
    debug_assert!(sequence <= MAX_SEQUENCE_NUMBER, "I3: sequence {sequence} exceeds 56 bits");
    (sequence << 8) | kind as u64
}

/// Appends the internal key for (`user_key`, `sequence`, `kind`) to `out`.
pub(crate) fn append_internal_key(out: &mut Vec<u8>, user_key: &[u8], sequence: u64, kind: ValueKind) {
    // One reservation for key and trailer: growing an empty buffer for the key and again for
    // the trailer cost a fresh iterator's first seek an allocation and a reallocation.
    out.reserve(user_key.len() + TRAILER_SIZE_BYTES);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&pack_trailer(sequence, kind).to_le_bytes());
}

/// Builds an owned internal key.
pub(crate) fn make_internal_key(user_key: &[u8], sequence: u64, kind: ValueKind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_SIZE_BYTES);
    append_internal_key(&mut out, user_key, sequence, kind);
    out
}

/// The key to seek to when looking for `user_key` as of snapshot `sequence`.
pub(crate) fn lookup_key(user_key: &[u8], sequence: u64) -> Vec<u8> {
    make_internal_key(user_key, sequence, ValueKind::FOR_SEEK)
}

/// The user-key part of an internal key. The caller guarantees the key is well formed (at least
/// 8 bytes); keys read from disk are validated with [`parse_internal_key`] first.
#[inline]
pub(crate) fn user_key(internal_key: &[u8]) -> &[u8] {
    debug_assert!(internal_key.len() >= TRAILER_SIZE_BYTES);
    &internal_key[..internal_key.len() - TRAILER_SIZE_BYTES]
}

/// True when `internal_key` has a trailer whose kind is `kind`: the trailer's low byte (the
/// last 8 bytes, little-endian), read without parsing the key, so that stream stages can pass
/// the common entry with one comparison.
#[inline]
pub(crate) fn has_kind(internal_key: &[u8], kind: ValueKind) -> bool {
    internal_key.len() >= TRAILER_SIZE_BYTES && internal_key[internal_key.len() - TRAILER_SIZE_BYTES] == kind as u8
}

/// The packed trailer of a well-formed internal key.
#[inline]
pub(crate) fn trailer(internal_key: &[u8]) -> u64 {
    debug_assert!(internal_key.len() >= TRAILER_SIZE_BYTES);
    let start = internal_key.len() - TRAILER_SIZE_BYTES;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&internal_key[start..]);
    u64::from_le_bytes(bytes)
}

/// The sequence number of a well-formed internal key.
#[inline]
pub(crate) fn sequence(internal_key: &[u8]) -> u64 {
    trailer(internal_key) >> 8
}

/// A decoded internal key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParsedKey<'a> {
    pub(crate) user_key: &'a [u8],
    pub(crate) sequence: u64,
    pub(crate) kind: ValueKind,
}

/// Decodes an internal key, or `None` when it is too short or has an unknown kind.
pub(crate) fn parse_internal_key(internal_key: &[u8]) -> Option<ParsedKey<'_>> {
    if internal_key.len() < TRAILER_SIZE_BYTES {
        return None;
    }
    let packed = trailer(internal_key);
    let kind = ValueKind::from_u8((packed & 0xff) as u8)?;
    Some(ParsedKey { user_key: user_key(internal_key), sequence: packed >> 8, kind })
}

/// Orders two internal keys in the bytewise order: user key ascending, then trailer descending.
/// Only for column families whose comparator is the bytewise one; the engine goes through
/// `KeyComparator::compare_internal_keys`, which picks this order or the column family's own.
#[inline]
pub(crate) fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first() {
        let old = make_internal_key(b"k", 5, ValueKind::Put);
        let new = make_internal_key(b"k", 9, ValueKind::Delete);
        let other = make_internal_key(b"l", 1, ValueKind::Put);
        assert_eq!(compare_internal_keys(&new, &old), Ordering::Less);
        assert_eq!(compare_internal_keys(&old, &other), Ordering::Less);
        assert_eq!(compare_internal_keys(&old, &old), Ordering::Equal);
    }

    #[test]
    fn lookup_key_finds_entries_at_or_below_snapshot() {
        let at_snapshot = make_internal_key(b"k", 7, ValueKind::Delete);
        let above = make_internal_key(b"k", 8, ValueKind::Put);
        let probe = lookup_key(b"k", 7);
        assert_ne!(compare_internal_keys(&probe, &at_snapshot), Ordering::Greater);
        assert_eq!(compare_internal_keys(&above, &probe), Ordering::Less);
    }

    #[test]
    fn a_seek_key_lands_on_a_blob_index_entry_of_its_own_sequence() {
        let blob = make_internal_key(b"k", 7, ValueKind::BlobIndex);
        let probe = lookup_key(b"k", 7);
        assert_ne!(compare_internal_keys(&probe, &blob), Ordering::Greater, "the probe must not skip the entry");
        assert_eq!(compare_internal_keys(&make_internal_key(b"k", 8, ValueKind::Delete), &probe), Ordering::Less);
    }

    #[test]
    fn parse_rejects_short_and_unknown_kind() {
        assert!(parse_internal_key(b"short").is_none());
        let mut key = make_internal_key(b"k", 3, ValueKind::Put);
        let last = key.len() - TRAILER_SIZE_BYTES;
        key[last] = 3;
        assert_eq!(parse_internal_key(&key).map(|parsed| parsed.kind), Some(ValueKind::SingleDelete));
        key[last] = 4;
        assert_eq!(parse_internal_key(&key).map(|parsed| parsed.kind), Some(ValueKind::PutWithExpiry));
        key[last] = 5;
        assert_eq!(parse_internal_key(&key).map(|parsed| parsed.kind), Some(ValueKind::Merge));
        key[last] = 6;
        assert!(parse_internal_key(&key).is_none());
        let good = make_internal_key(b"key", 42, ValueKind::Put);
        let parsed = parse_internal_key(&good).expect("well formed");
        assert_eq!((parsed.user_key, parsed.sequence, parsed.kind), (&b"key"[..], 42, ValueKind::Put));
    }
}
