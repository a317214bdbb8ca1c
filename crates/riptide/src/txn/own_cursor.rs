//! A cursor over a transaction's own writes in one column family: every layer of the write set
//! (in-memory maps and spilled runs) merged, one entry per key, the newest layer's write
//! winning, within optional bounds.
//!
//! The layers are merged by internal key, each entry carrying its layer's id as sequence number
//! (`txn::spill`), so a key's entries come newest layer first going forward and oldest first
//! going backward. The cursor collapses them: going forward it takes a key's first entry and
//! skips the rest; going backward it reads all of them and keeps the last. Deletes are entries
//! too (`Written::None`): the transaction iterator needs them to hide the database's keys, and
//! the commit writes them as tombstones.
//!
//! Concurrency contract: used by one thread. It owns copies of the in-memory layers' entries
//! (taken when it is made) and shared handles on the runs, so the write set may change after.

use std::cmp::Ordering;

use super::write_set::Written;
use crate::comparator::KeyComparator;
use crate::error::Result;
use crate::iterator::merge::MergingIterator;
use crate::iterator::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, user_key, MAX_SEQUENCE_NUMBER};

/// See the module documentation.
pub(crate) struct OwnCursor {
    merged: MergingIterator,
    order: KeyComparator,
    /// Inclusive lower bound.
    lower_bound: Option<Vec<u8>>,
    /// Exclusive upper bound.
    upper_bound: Option<Vec<u8>>,
    current: Option<(Vec<u8>, Written)>,
    /// Forward: `merged` is past every entry of the current key. Backward: before them.
    forward: bool,
}

impl OwnCursor {
    pub(crate) fn new(
        layers: Vec<Box<dyn InternalIterator>>,
        order: KeyComparator,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
    ) -> OwnCursor {
        OwnCursor {
            merged: MergingIterator::new(layers, order.clone()),
            order,
            lower_bound,
            upper_bound,
            current: None,
            forward: true,
        }
    }

    /// The current key and the transaction's write of it.
    pub(crate) fn current(&self) -> Option<(&[u8], &Written)> {
        self.current.as_ref().map(|(key, written)| (key.as_slice(), written))
    }

    /// An I/O or corruption error met reading a spilled run.
    pub(crate) fn status(&self) -> Result<()> {
        self.merged.status()
    }

    pub(crate) fn seek_to_first(&mut self) {
        match self.lower_bound.clone() {
            Some(lower) => self.merged.seek(&lookup_key(&lower, MAX_SEQUENCE_NUMBER)),
            None => self.merged.seek_to_first(),
        }
        self.load_forward();
    }

    /// Positions at the first key at or after `target` (and the lower bound).
    pub(crate) fn seek(&mut self, target: &[u8]) {
        let below_lower = self
            .lower_bound
            .as_deref()
            .is_some_and(|lower| self.order.compare_user_keys(target, lower) == Ordering::Less);
        if below_lower {
            self.seek_to_first();
            return;
        }
        self.merged.seek(&lookup_key(target, MAX_SEQUENCE_NUMBER));
        self.load_forward();
    }

    pub(crate) fn seek_to_last(&mut self) {
        match self.upper_bound.clone() {
            Some(upper) => self.position_before(&upper, false),
            None => {
                self.merged.seek_to_last();
                self.load_backward();
            }
        }
    }

    /// Positions at the last key at or before `target` (and below the upper bound).
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        let at_or_above_upper = self
            .upper_bound
            .as_deref()
            .is_some_and(|upper| self.order.compare_user_keys(target, upper) != Ordering::Less);
        if at_or_above_upper {
            self.seek_to_last();
            return;
        }
        self.position_before(target, true);
    }

    pub(crate) fn next(&mut self) {
        let Some((key, _)) = self.current.take() else { return };
        if !self.forward {
            self.skip_past(&key);
        }
        self.load_forward();
    }

    pub(crate) fn prev(&mut self) {
        let Some((key, _)) = self.current.take() else { return };
        if self.forward {
            // Back to the current key's first entry, then one before it.
            self.merged.seek(&lookup_key(&key, MAX_SEQUENCE_NUMBER));
            if self.merged.valid() {
                self.merged.prev();
            } else {
                self.merged.seek_to_last();
            }
        }
        self.load_backward();
    }

    /// True when `merged` is on an entry of `key`.
    fn on_key(&self, key: &[u8]) -> bool {
        self.merged.valid() && self.order.compare_user_keys(user_key(self.merged.key()), key) == Ordering::Equal
    }

    /// Positions `merged` on the first entry of the first key after `key`.
    fn skip_past(&mut self, key: &[u8]) {
        self.merged.seek(&lookup_key(key, MAX_SEQUENCE_NUMBER));
        while self.on_key(key) {
            self.merged.next();
        }
    }

    /// Positions on the last key before `target` (or at it, when `inclusive`).
    fn position_before(&mut self, target: &[u8], inclusive: bool) {
        if inclusive {
            self.skip_past(target);
        } else {
            self.merged.seek(&lookup_key(target, MAX_SEQUENCE_NUMBER));
        }
        if self.merged.valid() {
            self.merged.prev();
        } else {
            self.merged.seek_to_last();
        }
        self.load_backward();
    }

    /// Takes the key `merged` is on (its newest entry) and moves past its other entries.
    fn load_forward(&mut self) {
        self.forward = true;
        self.current = None;
        if !self.merged.valid() {
            return;
        }
        let key = user_key(self.merged.key()).to_vec();
        if let Some(upper) = &self.upper_bound {
            if self.order.compare_user_keys(&key, upper) != Ordering::Less {
                return;
            }
        }
        let written = entry_written(self.merged.key(), self.merged.value());
        while self.on_key(&key) {
            self.merged.next();
        }
        self.current = Some((key, written));
    }

    /// Reads back over the entries of the key `merged` is on (its oldest entry) and keeps the
    /// last one read, the newest.
    fn load_backward(&mut self) {
        self.forward = false;
        self.current = None;
        if !self.merged.valid() {
            return;
        }
        let key = user_key(self.merged.key()).to_vec();
        if let Some(lower) = &self.lower_bound {
            if self.order.compare_user_keys(&key, lower) == Ordering::Less {
                return;
            }
        }
        let mut written = None;
        while self.on_key(&key) {
            written = Some(entry_written(self.merged.key(), self.merged.value()));
            self.merged.prev();
        }
        self.current = written.map(|written| (key, written));
    }
}

/// The write an entry of a layer stands for.
fn entry_written(internal_key: &[u8], value: &[u8]) -> Written {
    match parse_internal_key(internal_key).map(|parsed| parsed.kind) {
        Some(kind) if kind.is_deletion() => None,
        // Layers are written by this process from well-formed keys; a run whose key does not
        // parse fails its checksum first.
        _ => Some(value.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::{make_internal_key, ValueKind};

    fn layer(id: u64, entries: &[(&str, Option<&str>)]) -> Box<dyn InternalIterator> {
        let entries = entries
            .iter()
            .map(|(key, value)| {
                let kind = if value.is_some() { ValueKind::Put } else { ValueKind::Delete };
                (make_internal_key(key.as_bytes(), id, kind), value.unwrap_or_default().as_bytes().to_vec())
            })
            .collect();
        Box::new(VecIterator::new(entries))
    }

    fn cursor(lower: Option<&str>, upper: Option<&str>) -> OwnCursor {
        let layers = vec![
            layer(1, &[("a", Some("a1")), ("b", Some("b1")), ("d", Some("d1"))]),
            layer(2, &[("b", None), ("c", Some("c2"))]),
            layer(3, &[("b", Some("b3")), ("e", Some("e3"))]),
        ];
        OwnCursor::new(
            layers,
            KeyComparator::Bytewise,
            lower.map(|key| key.as_bytes().to_vec()),
            upper.map(|key| key.as_bytes().to_vec()),
        )
    }

    fn shown(cursor: &OwnCursor) -> Option<(String, Option<String>)> {
        cursor.current().map(|(key, written)| {
            (
                String::from_utf8(key.to_vec()).unwrap(),
                written.as_ref().map(|value| String::from_utf8(value.clone()).unwrap()),
            )
        })
    }

    fn forward(cursor: &mut OwnCursor) -> Vec<(String, Option<String>)> {
        let mut seen = Vec::new();
        cursor.seek_to_first();
        while let Some(entry) = shown(cursor) {
            seen.push(entry);
            cursor.next();
        }
        seen
    }

    fn backward(cursor: &mut OwnCursor) -> Vec<(String, Option<String>)> {
        let mut seen = Vec::new();
        cursor.seek_to_last();
        while let Some(entry) = shown(cursor) {
            seen.push(entry);
            cursor.prev();
        }
        seen.reverse();
        seen
    }

    fn entry(key: &str, value: Option<&str>) -> (String, Option<String>) {
        (key.to_string(), value.map(str::to_string))
    }

    #[test]
    fn the_newest_layer_wins_in_both_directions() {
        let expected = vec![
            entry("a", Some("a1")),
            entry("b", Some("b3")),
            entry("c", Some("c2")),
            entry("d", Some("d1")),
            entry("e", Some("e3")),
        ];
        assert_eq!(forward(&mut cursor(None, None)), expected);
        assert_eq!(backward(&mut cursor(None, None)), expected);
    }

    #[test]
    fn bounds_and_seeks_and_direction_changes() {
        let mut bounded = cursor(Some("b"), Some("e"));
        assert_eq!(forward(&mut bounded), vec![entry("b", Some("b3")), entry("c", Some("c2")), entry("d", Some("d1"))]);
        assert_eq!(
            backward(&mut bounded),
            vec![entry("b", Some("b3")), entry("c", Some("c2")), entry("d", Some("d1"))]
        );
        let mut all = cursor(None, None);
        all.seek(b"bb");
        assert_eq!(shown(&all), Some(entry("c", Some("c2"))));
        all.prev();
        assert_eq!(shown(&all), Some(entry("b", Some("b3"))));
        all.next();
        assert_eq!(shown(&all), Some(entry("c", Some("c2"))));
        all.seek_for_prev(b"cc");
        assert_eq!(shown(&all), Some(entry("c", Some("c2"))));
        all.seek_for_prev(b"c");
        assert_eq!(shown(&all), Some(entry("c", Some("c2"))));
        all.next();
        assert_eq!(shown(&all), Some(entry("d", Some("d1"))));
        all.seek(b"a");
        all.prev();
        assert_eq!(shown(&all), None);
        let mut deleted = OwnCursor::new(
            vec![layer(1, &[("k", Some("v"))]), layer(2, &[("k", None)])],
            KeyComparator::Bytewise,
            None,
            None,
        );
        assert_eq!(forward(&mut deleted), vec![entry("k", None)]);
        assert_eq!(backward(&mut deleted), vec![entry("k", None)]);
        bounded.seek(b"a");
        assert_eq!(shown(&bounded), Some(entry("b", Some("b3"))));
        bounded.seek_for_prev(b"z");
        assert_eq!(shown(&bounded), Some(entry("d", Some("d1"))));
    }
}
