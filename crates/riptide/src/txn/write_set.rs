//! A transaction's own writes, in each column family's key order, as a stack of layers.
//!
//! Writes go to the newest layer, an in-memory map per column family, where the last write of a
//! key wins (a put after a delete is a put, a delete after a put a delete). Reads of the
//! transaction look through the layers newest first (read-your-own-writes); iterators and the
//! commit merge them (`own_cursor`).
//!
//! Savepoints: a savepoint marks the top of the stack, and the next write opens a new layer
//! above the mark. Rolling back to the savepoint drops the layers above it, spilled runs
//! included; releasing it merges the layer above into the one below when both are in memory.
//! So a savepoint costs nothing until the next write, and rolling back needs no undo records
//! (which a statement of ten million rows under MariaDB's statement savepoint would have to
//! keep).
//!
//! Spilling: past the transaction's memory limit, every in-memory layer is written out as
//! sorted runs (`spill`), one per column family, and its memory freed. A transaction that never
//! spilled commits as one write batch (`to_batch`); one that spilled commits through
//! `db/spilled_commit.rs`.
//!
//! Concurrency contract: none of its own; the transaction keeps it behind its mutex.
//!
//! Invariants: layer ids grow from the bottom of the stack to the top; every savepoint mark is
//! at most the number of layers; a spilled layer is never written to again.

use crate::hash::FastHashMap as HashMap;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::own_cursor::OwnCursor;
use super::prepared::PreparedRun;
use super::spill::{layer_entry_key, write_run, SpilledRun};
use crate::batch::WriteBatch;
use crate::comparator::KeyComparator;
use crate::db::DbInner;
use crate::error::Result;
use crate::iterator::{InternalIterator, VecIterator};
use crate::key::{lookup_key, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::options::ColumnFamilyOptions;
use crate::sstable::BlockReadOptions;

/// Approximate bytes of one entry besides its key and value (map node, allocations).
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

struct Family {
    order: KeyComparator,
    entries: BTreeMap<OrderedKey, Written>,
}

enum Contents {
    Memory(HashMap<u32, Family>),
    /// One run per column family.
    Spilled(HashMap<u32, Arc<SpilledRun>>),
}

struct Layer {
    id: u64,
    contents: Contents,
}

/// The write set; see the module documentation.
#[derive(Default)]
pub(crate) struct WriteSet {
    /// Oldest first.
    layers: Vec<Layer>,
    /// Number of layers at each open savepoint, oldest first.
    savepoints: Vec<usize>,
    next_layer_id: u64,
    /// Bytes of the in-memory layers.
    memory_bytes: usize,
    /// Bytes of the spilled runs' readers (index and filter).
    run_memory_bytes: usize,
    /// Entries written: distinct keys in memory, plus every entry of every run (a key spilled
    /// in several layers counts in each).
    entry_count: usize,
}

/// Memory an entry with a key of `key_bytes` and a value of `value_bytes` holds in an
/// in-memory layer.
pub(crate) fn entry_size_bytes(key_bytes: usize, value_bytes: usize) -> usize {
    key_bytes + value_bytes + ENTRY_OVERHEAD_BYTES
}

fn entry_bytes(key: &[u8], written: &Written) -> usize {
    entry_size_bytes(key.len(), written.as_ref().map_or(0, Vec::len))
}

impl Family {
    /// Memory the family's entries hold.
    fn memory_bytes(&self) -> usize {
        self.entries.iter().map(|(key, written)| entry_bytes(&key.key, written)).sum()
    }
}

impl WriteSet {
    /// The layer new writes go to: the top one if it is in memory and above the newest
    /// savepoint, else a new one.
    fn writable_layer(&mut self) -> &mut HashMap<u32, Family> {
        let floor = self.savepoints.last().copied().unwrap_or(0);
        let reusable = self.layers.len() > floor
            && matches!(self.layers.last(), Some(Layer { contents: Contents::Memory(_), .. }));
        if !reusable {
            self.next_layer_id += 1;
            self.layers.push(Layer { id: self.next_layer_id, contents: Contents::Memory(HashMap::default()) });
        }
        match self.layers.last_mut() {
            Some(Layer { contents: Contents::Memory(families), .. }) => families,
            _ => unreachable!("the top layer was just made an in-memory one"),
        }
    }

    /// Records a put (`Some`) or delete (`None`) of `key` in `column_family`.
    pub(crate) fn write(&mut self, column_family: u32, order: &KeyComparator, key: &[u8], written: Written) {
        let added = entry_bytes(key, &written);
        let families = self.writable_layer();
        let family =
            families.entry(column_family).or_insert_with(|| Family { order: order.clone(), entries: BTreeMap::new() });
        let ordered = OrderedKey { key: key.to_vec(), order: family.order.clone() };
        let previous = family.entries.insert(ordered, written);
        self.memory_bytes += added;
        match &previous {
            None => self.entry_count += 1,
            Some(old) => self.memory_bytes -= entry_bytes(key, old),
        }
    }

    /// The transaction's own write of `key`, if it made one: `Some(Some(value))` for a put,
    /// `Some(None)` for a delete. Reads spilled runs, hence the `Result`.
    pub(crate) fn get(&self, column_family: u32, key: &[u8]) -> Result<Option<Written>> {
        let mut lookup: Option<Vec<u8>> = None;
        for layer in self.layers.iter().rev() {
            match &layer.contents {
                Contents::Memory(families) => {
                    let Some(family) = families.get(&column_family) else { continue };
                    let ordered = OrderedKey { key: key.to_vec(), order: family.order.clone() };
                    if let Some(written) = family.entries.get(&ordered) {
                        return Ok(Some(written.clone()));
                    }
                }
                Contents::Spilled(runs) => {
                    let Some(run) = runs.get(&column_family) else { continue };
                    let lookup = lookup.get_or_insert_with(|| lookup_key(key, MAX_SEQUENCE_NUMBER));
                    let options = BlockReadOptions { verify_checksums: true, fill_cache: false };
                    let Some((kind, _, value)) = run.table.get_value(lookup, options)? else { continue };
                    return Ok(Some(match kind {
                        ValueKind::Delete | ValueKind::SingleDelete => None,
                        // A spilled run holds the transaction's own puts and deletes; its
                        // writer never separates values into blob files.
                        ValueKind::Put | ValueKind::BlobIndex => Some(value),
                        // Transactions write no expiring puts (a column family's `ttl` is
                        // added when the commit is written), so this is damage.
                        ValueKind::PutWithExpiry | ValueKind::Merge => {
                            return Err(crate::error::Error::corruption(
                                "<transaction spill>",
                                0,
                                "a put with an expiry or a merge in a transaction's spilled writes",
                            ))
                        }
                    }));
                }
            }
        }
        Ok(None)
    }

    /// A cursor over the writes of `column_family` within the bounds (inclusive lower,
    /// exclusive upper, in the family's `order`): what an iterator merges and a spilled commit
    /// writes. It copies the in-memory entries within the bounds.
    pub(crate) fn cursor(
        &self,
        column_family: u32,
        order: &KeyComparator,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> OwnCursor {
        let mut layers: Vec<Box<dyn InternalIterator>> = Vec::new();
        for layer in &self.layers {
            match &layer.contents {
                Contents::Memory(families) => {
                    let Some(family) = families.get(&column_family) else { continue };
                    let entries: Vec<(Vec<u8>, Vec<u8>)> = in_bounds(family, lower_bound, upper_bound)
                        .into_iter()
                        .map(|(key, written)| {
                            (layer_entry_key(&key.key, layer.id, written), written.clone().unwrap_or_default())
                        })
                        .collect();
                    layers.push(Box::new(VecIterator::with_order(entries, order.clone())));
                }
                Contents::Spilled(runs) => {
                    if let Some(run) = runs.get(&column_family) {
                        let options = BlockReadOptions { verify_checksums: true, fill_cache: false };
                        layers.push(Box::new(run.table.iter(options)));
                    }
                }
            }
        }
        OwnCursor::new(layers, order.clone(), lower_bound.map(<[u8]>::to_vec), upper_bound.map(<[u8]>::to_vec))
    }

    /// The column families written to, sorted.
    pub(crate) fn column_families(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .layers
            .iter()
            .flat_map(|layer| match &layer.contents {
                Contents::Memory(families) => families.keys().copied().collect::<Vec<_>>(),
                Contents::Spilled(runs) => runs.keys().copied().collect(),
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// True once a layer was spilled (and not rolled back): the commit then goes through
    /// `db/spilled_commit.rs`, and `keys` and `to_batch` may not be used.
    pub(crate) fn spilled(&self) -> bool {
        self.layers.iter().any(|layer| matches!(layer.contents, Contents::Spilled(_)))
    }

    /// Visits the in-memory layers merged, newest write of each key winning: column families
    /// by id, each one's keys in its order. Only for a write set that has not spilled. A single
    /// layer (every transaction without savepoints) is visited in place; several are merged into
    /// a map first.
    fn for_each_merged(&self, mut visit: impl FnMut(u32, &[u8], &Written)) {
        debug_assert!(!self.spilled(), "a spilled write set commits through its runs");
        if let [Layer { contents: Contents::Memory(families), .. }] = self.layers.as_slice() {
            let mut ids: Vec<u32> = families.keys().copied().collect();
            ids.sort_unstable();
            for id in ids {
                for (key, written) in &families[&id].entries {
                    visit(id, &key.key, written);
                }
            }
            return;
        }
        let mut merged: BTreeMap<u32, BTreeMap<OrderedKey, &Written>> = BTreeMap::new();
        for layer in &self.layers {
            let Contents::Memory(families) = &layer.contents else { continue };
            for (&id, family) in families {
                let entries = merged.entry(id).or_default();
                for (key, written) in &family.entries {
                    entries.insert(key.clone(), written);
                }
            }
        }
        for (id, entries) in merged {
            for (key, written) in entries {
                visit(id, &key.key, written);
            }
        }
    }

    /// Every (column family, key) written, for validation and for locks. Only for a write set
    /// that has not spilled.
    pub(crate) fn keys(&self) -> Vec<(u32, Vec<u8>)> {
        let mut keys = Vec::with_capacity(self.entry_count);
        self.for_each_merged(|id, key, _| keys.push((id, key.to_vec())));
        keys
    }

    /// The write batch that commits the set: the default column family first, then by id, each
    /// family's keys in its order. Only for a write set that has not spilled.
    pub(crate) fn to_batch(&self) -> WriteBatch {
        // The in-memory layers' charge covers every record's encoding (key, value, their
        // lengths, kind and family take less than the per-entry overhead it counts).
        let mut batch = WriteBatch::with_capacity_bytes(self.memory_bytes);
        self.for_each_merged(|id, key, written| match written {
            Some(value) => batch.put_in(id, key, value),
            None => batch.delete_in(id, key),
        });
        batch
    }

    /// Number of keys written (see `entry_count`).
    pub(crate) fn len(&self) -> usize {
        self.entry_count
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// Memory held by the in-memory layers: what the transaction's limit bounds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// Memory held in all: the in-memory layers and the spilled runs' readers.
    pub(crate) fn total_memory_bytes(&self) -> usize {
        self.memory_bytes + self.run_memory_bytes
    }

    /// Bytes of the spilled runs' files.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|layer| match &layer.contents {
                Contents::Memory(_) => 0,
                Contents::Spilled(runs) => runs.values().map(|run| run.file_size_bytes).sum(),
            })
            .sum()
    }

    /// Writes every in-memory layer out as runs (one per column family) and frees its memory.
    /// `options_of` gives a column family's options (`None`: dropped; its entries are
    /// dropped too, since the commit would fail on the family anyway). On error the layers
    /// not yet spilled stay in memory and the set is unchanged otherwise.
    pub(crate) fn spill(
        &mut self,
        db: &DbInner,
        options_of: &dyn Fn(u32) -> Option<Arc<ColumnFamilyOptions>>,
    ) -> Result<()> {
        for index in 0..self.layers.len() {
            let layer = &self.layers[index];
            let Contents::Memory(families) = &layer.contents else { continue };
            let mut runs = HashMap::default();
            let mut freed = 0;
            let mut run_memory = 0;
            for (&id, family) in families {
                freed += family.memory_bytes();
                let Some(options) = options_of(id) else { continue };
                if family.entries.is_empty() {
                    continue;
                }
                let run = write_run(db, &options, layer.id, family.entries.iter())?;
                run_memory += run.memory_bytes();
                runs.insert(id, Arc::new(run));
            }
            self.layers[index].contents = Contents::Spilled(runs);
            self.memory_bytes -= freed;
            self.run_memory_bytes += run_memory;
        }
        Ok(())
    }

    /// The runs of a write set that is wholly spilled, oldest layer first: what the file of a
    /// prepared spilled transaction lists.
    pub(crate) fn runs(&self) -> Vec<PreparedRun> {
        let mut listed = Vec::new();
        for layer in &self.layers {
            match &layer.contents {
                Contents::Spilled(runs) => {
                    let mut ids: Vec<u32> = runs.keys().copied().collect();
                    ids.sort_unstable();
                    for id in ids {
                        listed.push(PreparedRun { layer: layer.id, column_family: id, file_number: runs[&id].number });
                    }
                }
                Contents::Memory(families) => {
                    debug_assert!(
                        families.values().all(|family| family.entries.is_empty()),
                        "runs() of a write set with writes in memory"
                    );
                }
            }
        }
        listed
    }

    /// Sets whether dropping the set removes its runs' files (see `SpilledRun`).
    pub(crate) fn set_runs_removed_on_drop(&self, removed: bool) {
        for layer in &self.layers {
            if let Contents::Spilled(runs) = &layer.contents {
                for run in runs.values() {
                    run.set_removed_on_drop(removed);
                }
            }
        }
    }

    /// The write set of a prepared spilled transaction found at open, from its runs (each with
    /// the layer id its entries carry). Savepoints are gone: a prepared transaction has none.
    pub(crate) fn from_runs(runs: Vec<(u64, u32, SpilledRun)>) -> WriteSet {
        let mut set = WriteSet::default();
        let mut by_layer: BTreeMap<u64, HashMap<u32, Arc<SpilledRun>>> = BTreeMap::new();
        for (layer, column_family, run) in runs {
            set.entry_count += run.entry_count as usize;
            set.run_memory_bytes += run.memory_bytes();
            by_layer.entry(layer).or_default().insert(column_family, Arc::new(run));
        }
        for (id, runs) in by_layer {
            set.next_layer_id = set.next_layer_id.max(id);
            set.layers.push(Layer { id, contents: Contents::Spilled(runs) });
        }
        set
    }

    /// Opens a savepoint.
    pub(crate) fn savepoint(&mut self) {
        self.savepoints.push(self.layers.len());
    }

    /// Drops every write since the newest savepoint (spilled runs included) and closes it.
    /// False when none is open.
    pub(crate) fn rollback_to_savepoint(&mut self) -> bool {
        let Some(mark) = self.savepoints.pop() else { return false };
        for layer in self.layers.drain(mark..) {
            match layer.contents {
                Contents::Memory(families) => {
                    for family in families.values() {
                        self.entry_count -= family.entries.len();
                        self.memory_bytes -= family.memory_bytes();
                    }
                }
                Contents::Spilled(runs) => {
                    for run in runs.values() {
                        self.entry_count -= run.entry_count as usize;
                        self.run_memory_bytes -= run.memory_bytes();
                    }
                }
            }
        }
        true
    }

    /// Closes the newest savepoint, keeping its writes. False when none is open.
    pub(crate) fn release_savepoint(&mut self) -> bool {
        let Some(mark) = self.savepoints.pop() else { return false };
        // The layer just above the mark now belongs to the segment below: merge it into the
        // segment's top layer when both are in memory, so that statement savepoints do not
        // pile up layers.
        let floor = self.savepoints.last().copied().unwrap_or(0);
        if mark > floor && mark < self.layers.len() {
            let both_in_memory = matches!(self.layers[mark - 1].contents, Contents::Memory(_))
                && matches!(self.layers[mark].contents, Contents::Memory(_));
            if both_in_memory {
                let upper = self.layers.remove(mark);
                let Contents::Memory(upper) = upper.contents else { return true };
                let Contents::Memory(lower) = &mut self.layers[mark - 1].contents else { return true };
                for (id, family) in upper {
                    let target = lower
                        .entry(id)
                        .or_insert_with(|| Family { order: family.order.clone(), entries: BTreeMap::new() });
                    for (key, written) in family.entries {
                        let key_bytes = key.key.len();
                        if let Some(old) = target.entries.insert(key, written) {
                            self.entry_count -= 1;
                            self.memory_bytes -= entry_size_bytes(key_bytes, old.as_ref().map_or(0, Vec::len));
                        }
                    }
                }
            }
        }
        true
    }
}

/// The entries of `family` within the bounds (inclusive lower, exclusive upper).
fn in_bounds<'a>(
    family: &'a Family,
    lower_bound: Option<&[u8]>,
    upper_bound: Option<&[u8]>,
) -> Vec<(&'a OrderedKey, &'a Written)> {
    let ordered = |key: &[u8]| OrderedKey { key: key.to_vec(), order: family.order.clone() };
    let lower = lower_bound.map_or(Bound::Unbounded, |key| Bound::Included(ordered(key)));
    let upper = upper_bound.map_or(Bound::Unbounded, |key| Bound::Excluded(ordered(key)));
    if let (Bound::Included(lower), Bound::Excluded(upper)) = (&lower, &upper) {
        // BTreeMap::range panics on inverted bounds; such a range is empty.
        if lower >= upper {
            return Vec::new();
        }
    }
    family.entries.range((lower, upper)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::{BytewiseComparator, Comparator};

    fn order() -> KeyComparator {
        KeyComparator::new(&(Arc::new(BytewiseComparator) as Arc<dyn Comparator>))
    }

    fn put(set: &mut WriteSet, key: &str, value: &str) {
        set.write(0, &order(), key.as_bytes(), Some(value.as_bytes().to_vec()));
    }

    fn snapshot(set: &WriteSet) -> Vec<(String, Option<String>)> {
        let mut cursor = set.cursor(0, &order(), None, None);
        let mut seen = Vec::new();
        cursor.seek_to_first();
        while let Some((key, written)) = cursor.current() {
            seen.push((
                String::from_utf8(key.to_vec()).unwrap(),
                written.as_ref().map(|value| String::from_utf8(value.clone()).unwrap()),
            ));
            cursor.next();
        }
        seen
    }

    #[test]
    fn last_write_wins_and_batch_is_ordered() {
        let mut set = WriteSet::default();
        put(&mut set, "b", "1");
        put(&mut set, "a", "2");
        set.write(0, &order(), b"b", None);
        assert_eq!(set.len(), 2);
        assert_eq!(set.get(0, b"b").unwrap(), Some(None));
        assert_eq!(snapshot(&set), vec![("a".into(), Some("2".into())), ("b".into(), None)]);
        let batch = set.to_batch();
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
        assert_eq!(set.get(0, b"a").unwrap(), Some(None));
        assert!(set.rollback_to_savepoint());
        assert_eq!(snapshot(&set), vec![("a".into(), Some("2".into())), ("b".into(), Some("2".into()))]);
        assert!(set.rollback_to_savepoint());
        assert_eq!(snapshot(&set), vec![("a".into(), Some("1".into()))]);
        assert_eq!(set.len(), 1);
        assert_eq!(set.to_batch().len(), 1);
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
        put(&mut set, "a", "2");
        assert!(set.release_savepoint());
        // The released layer merged into the one below: one layer, two keys.
        assert_eq!(set.layers.len(), 1);
        assert_eq!(set.len(), 2);
        assert_eq!(snapshot(&set), vec![("a".into(), Some("2".into())), ("b".into(), Some("1".into()))]);
        assert!(set.rollback_to_savepoint());
        assert!(set.is_empty());
        assert_eq!(set.memory_bytes(), 0);
        assert!(!set.release_savepoint());
    }

    #[test]
    fn the_batch_of_several_layers_holds_each_key_once_with_its_newest_write() {
        let mut set = WriteSet::default();
        put(&mut set, "b", "1");
        put(&mut set, "c", "1");
        set.savepoint();
        put(&mut set, "a", "2");
        set.write(0, &order(), b"b", None);
        set.savepoint();
        put(&mut set, "c", "3");
        assert_eq!(set.layers.len(), 3);
        let batch = set.to_batch();
        let entries: Vec<(&[u8], Option<&[u8]>)> = batch
            .iter()
            .map(|entry| (entry.key(), (entry.kind() == crate::batch::BatchOp::Put).then(|| entry.value())))
            .collect();
        assert_eq!(entries, vec![(b"a".as_slice(), Some(b"2".as_slice())), (b"b", None), (b"c", Some(b"3"))]);
        assert_eq!(set.keys(), vec![(0, b"a".to_vec()), (0, b"b".to_vec()), (0, b"c".to_vec())]);
    }

    #[test]
    fn statement_savepoints_do_not_pile_up_layers() {
        let mut set = WriteSet::default();
        for statement in 0..100 {
            set.savepoint();
            put(&mut set, &format!("k{statement}"), "v");
            assert!(set.release_savepoint());
        }
        assert_eq!(set.layers.len(), 1);
        assert_eq!(set.len(), 100);
    }

    #[test]
    fn bounds_select_entries() {
        let mut set = WriteSet::default();
        for key in ["a", "b", "c", "d"] {
            put(&mut set, key, "v");
        }
        let mut cursor = set.cursor(0, &order(), Some(b"b"), Some(b"d"));
        let mut keys = Vec::new();
        cursor.seek_to_first();
        while let Some((key, _)) = cursor.current() {
            keys.push(key.to_vec());
            cursor.next();
        }
        assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
        let mut inverted = set.cursor(0, &order(), Some(b"d"), Some(b"b"));
        inverted.seek_to_first();
        assert!(inverted.current().is_none());
    }
}
