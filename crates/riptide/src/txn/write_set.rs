//! A transaction's own writes, in each column family's key order, with the undo records that
//! savepoints roll back.
//!
//! Writes stay here until commit turns them into one write batch (one WAL record, so the
//! commit is atomic across column families, I14). Reads of the transaction look here first
//! (read-your-own-writes), and its iterators merge a copy of one family's entries with the
//! database. The last write of a key wins: a put after a delete is a put, a delete after a put
//! a delete.
//!
//! Savepoints: while at least one savepoint is open, every change records the key's previous
//! state; rolling back to the newest savepoint replays those records backwards. Without an open
//! savepoint nothing is recorded, so plain transactions pay nothing for the feature.
//!
//! Concurrency contract: none of its own; the transaction keeps it behind its mutex.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use crate::batch::WriteBatch;
use crate::comparator::KeyComparator;

/// Approximate bytes of one entry besides its key and value (map node, undo bookkeeping).
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// A user key ordered by its column family's comparator.
#[derive(Clone, Debug)]
pub(crate) struct OrderedKey {
    pub(crate) key: Vec<u8>,
    order: KeyComparator,
}

impl PartialEq for OrderedKey {
    fn eq(&self, other: &OrderedKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OrderedKey {}

impl PartialOrd for OrderedKey {
    fn partial_cmp(&self, other: &OrderedKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedKey {
    fn cmp(&self, other: &OrderedKey) -> Ordering {
        self.order.compare_user_keys(&self.key, &other.key)
    }
}

/// The value a transaction wrote: `Some` for a put, `None` for a delete.
pub(crate) type Written = Option<Vec<u8>>;

struct Undo {
    column_family: u32,
    key: OrderedKey,
    /// The entry before the change (`None`: the key was not in the write set).
    previous: Option<Written>,
}

struct Family {
    order: KeyComparator,
    entries: BTreeMap<OrderedKey, Written>,
}

/// The write set; see the module documentation.
#[derive(Default)]
pub(crate) struct WriteSet {
    families: HashMap<u32, Family>,
    undo: Vec<Undo>,
    /// Length of `undo` at each open savepoint, oldest first.
    savepoints: Vec<usize>,
    memory_bytes: usize,
    entry_count: usize,
    /// Encoded size of the records of the current entries: the commit batch's size, less its
    /// header.
    record_bytes: usize,
}

/// The encoded size of one batch record (see `docs/format/write_batch.md`).
pub(crate) fn record_bytes(column_family: u32, key: &[u8], written: &Written) -> usize {
    let family_bytes = if column_family == 0 { 0 } else { crate::coding::varint_length(u64::from(column_family)) };
    let value_bytes =
        written.as_ref().map_or(0, |value| crate::coding::varint_length(value.len() as u64) + value.len());
    1 + family_bytes + crate::coding::varint_length(key.len() as u64) + key.len() + value_bytes
}

fn entry_bytes(key: &[u8], written: &Written) -> usize {
    key.len() + written.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD_BYTES
}

impl WriteSet {
    /// Records a put (`Some`) or delete (`None`) of `key` in `column_family`.
    pub(crate) fn write(&mut self, column_family: u32, order: &KeyComparator, key: &[u8], written: Written) {
        let family = self
            .families
            .entry(column_family)
            .or_insert_with(|| Family { order: order.clone(), entries: BTreeMap::new() });
        let ordered = OrderedKey { key: key.to_vec(), order: family.order.clone() };
        self.memory_bytes += entry_bytes(key, &written);
        self.record_bytes += record_bytes(column_family, key, &written);
        let previous = family.entries.insert(ordered.clone(), written);
        match &previous {
            None => self.entry_count += 1,
            Some(old) => self.record_bytes -= record_bytes(column_family, key, old),
        }
        if self.savepoints.is_empty() {
            if let Some(old) = &previous {
                self.memory_bytes -= entry_bytes(key, old);
            }
        } else {
            // The replaced entry's bytes now belong to its undo record.
            self.undo.push(Undo { column_family, key: ordered, previous });
        }
    }

    /// The transaction's own write of `key`, if it made one: `Some(Some(value))` for a put,
    /// `Some(None)` for a delete.
    pub(crate) fn get(&self, column_family: u32, key: &[u8]) -> Option<&Written> {
        let family = self.families.get(&column_family)?;
        family.entries.get(&OrderedKey { key: key.to_vec(), order: family.order.clone() })
    }

    /// The entries of `column_family` within the bounds (inclusive lower, exclusive upper, in
    /// the family's order), in order: what an iterator merges.
    pub(crate) fn entries_in(
        &self,
        column_family: u32,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Written)> {
        let Some(family) = self.families.get(&column_family) else { return Vec::new() };
        let bound = |key: Option<&[u8]>, included: bool| match key {
            None => Bound::Unbounded,
            Some(key) => {
                let ordered = OrderedKey { key: key.to_vec(), order: family.order.clone() };
                if included {
                    Bound::Included(ordered)
                } else {
                    Bound::Excluded(ordered)
                }
            }
        };
        let lower = bound(lower_bound, true);
        let upper = bound(upper_bound, false);
        if let (Bound::Included(lower), Bound::Excluded(upper)) = (&lower, &upper) {
            if lower >= upper {
                return Vec::new();
            }
        }
        family.entries.range((lower, upper)).map(|(key, written)| (key.key.clone(), written.clone())).collect()
    }

    /// Every (column family, key) written, for validation and for locks.
    pub(crate) fn keys(&self) -> Vec<(u32, Vec<u8>)> {
        let mut keys = Vec::with_capacity(self.entry_count);
        for (&column_family, family) in &self.families {
            keys.extend(family.entries.keys().map(|key| (column_family, key.key.clone())));
        }
        keys
    }

    /// The write batch that commits the set: the default column family first, then by id, each
    /// family's keys in its order.
    pub(crate) fn to_batch(&self) -> WriteBatch {
        let mut ids: Vec<u32> = self.families.keys().copied().collect();
        ids.sort_unstable();
        let mut batch = WriteBatch::new();
        for id in ids {
            for (key, written) in &self.families[&id].entries {
                match written {
                    Some(value) => batch.put_in(id, &key.key, value),
                    None => batch.delete_in(id, &key.key),
                }
            }
        }
        batch
    }

    /// Number of keys written.
    pub(crate) fn len(&self) -> usize {
        self.entry_count
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// The encoded size of the batch `to_batch` would build.
    pub(crate) fn batch_size_bytes(&self) -> usize {
        crate::batch::BATCH_HEADER_SIZE_BYTES + self.record_bytes
    }

    /// Approximate memory held, savepoint records included.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// Opens a savepoint.
    pub(crate) fn savepoint(&mut self) {
        self.savepoints.push(self.undo.len());
    }

    /// Undoes every write since the newest savepoint and closes it. False when none is open.
    pub(crate) fn rollback_to_savepoint(&mut self) -> bool {
        let Some(mark) = self.savepoints.pop() else { return false };
        while self.undo.len() > mark {
            let Some(undo) = self.undo.pop() else { break };
            let Some(family) = self.families.get_mut(&undo.column_family) else { continue };
            let key_bytes = undo.key.key.len();
            // The restored entry's bytes move from the undo record back to the map; the entry
            // it replaces goes.
            // The entry the undo replaces leaves the batch; the restored one (if any) returns.
            if let Some(current) = family.entries.get(&undo.key) {
                self.record_bytes -= record_bytes(undo.column_family, &undo.key.key, current);
            }
            if let Some(previous) = &undo.previous {
                self.record_bytes += record_bytes(undo.column_family, &undo.key.key, previous);
            }
            let replaced = match undo.previous {
                Some(previous) => family.entries.insert(undo.key, previous),
                None => {
                    self.entry_count -= 1;
                    family.entries.remove(&undo.key)
                }
            };
            if let Some(replaced) = replaced {
                self.memory_bytes -= key_bytes + replaced.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD_BYTES;
            }
        }
        true
    }

    /// Closes the newest savepoint, keeping its writes. False when none is open.
    pub(crate) fn release_savepoint(&mut self) -> bool {
        if self.savepoints.pop().is_none() {
            return false;
        }
        if self.savepoints.is_empty() {
            let undo_bytes: usize = self
                .undo
                .drain(..)
                .map(|undo| undo.previous.as_ref().map_or(0, |previous| entry_bytes(&undo.key.key, previous)))
                .sum();
            self.memory_bytes -= undo_bytes;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::{BytewiseComparator, Comparator};
    use std::sync::Arc;

    fn order() -> KeyComparator {
        KeyComparator::new(&(Arc::new(BytewiseComparator) as Arc<dyn Comparator>))
    }

    fn put(set: &mut WriteSet, key: &str, value: &str) {
        set.write(0, &order(), key.as_bytes(), Some(value.as_bytes().to_vec()));
    }

    fn snapshot(set: &WriteSet) -> Vec<(String, Option<String>)> {
        set.entries_in(0, None, None)
            .into_iter()
            .map(|(key, written)| {
                (String::from_utf8(key).unwrap(), written.map(|value| String::from_utf8(value).unwrap()))
            })
            .collect()
    }

    #[test]
    fn last_write_wins_and_batch_is_ordered() {
        let mut set = WriteSet::default();
        put(&mut set, "b", "1");
        put(&mut set, "a", "2");
        set.write(0, &order(), b"b", None);
        assert_eq!(set.len(), 2);
        assert_eq!(set.get(0, b"b"), Some(&None));
        assert_eq!(snapshot(&set), vec![("a".into(), Some("2".into())), ("b".into(), None)]);
        let batch = set.to_batch();
        assert_eq!(set.batch_size_bytes(), batch.size_bytes());
        let keys: Vec<&[u8]> = batch.iter().map(|entry| entry.key()).collect();
        assert_eq!(keys, vec![b"a".as_slice(), b"b".as_slice()]);
    }

    #[test]
    fn nested_savepoints_roll_back_in_order() {
        let mut set = WriteSet::default();
        put(&mut set, "a", "1");
        let base_memory = set.memory_bytes();
        set.savepoint();
        put(&mut set, "a", "2");
        put(&mut set, "b", "2");
        set.savepoint();
        set.write(0, &order(), b"a", None);
        put(&mut set, "c", "3");
        assert!(set.rollback_to_savepoint());
        assert_eq!(snapshot(&set), vec![("a".into(), Some("2".into())), ("b".into(), Some("2".into()))]);
        assert!(set.rollback_to_savepoint());
        assert_eq!(snapshot(&set), vec![("a".into(), Some("1".into()))]);
        assert_eq!(set.len(), 1);
        assert_eq!(set.batch_size_bytes(), set.to_batch().size_bytes());
        assert_eq!(set.memory_bytes(), base_memory);
        assert!(!set.rollback_to_savepoint());
    }

    #[test]
    fn release_keeps_writes_and_outer_savepoint_still_rolls_back() {
        let mut set = WriteSet::default();
        set.savepoint();
        put(&mut set, "a", "1");
        set.savepoint();
        put(&mut set, "b", "1");
        assert!(set.release_savepoint());
        assert_eq!(set.len(), 2);
        assert!(set.rollback_to_savepoint());
        assert!(set.is_empty());
        assert!(!set.release_savepoint());
    }

    #[test]
    fn bounds_select_entries() {
        let mut set = WriteSet::default();
        for key in ["a", "b", "c", "d"] {
            put(&mut set, key, "v");
        }
        let keys: Vec<Vec<u8>> = set.entries_in(0, Some(b"b"), Some(b"d")).into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
        assert!(set.entries_in(0, Some(b"d"), Some(b"b")).is_empty());
    }
}
