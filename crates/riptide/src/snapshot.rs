//! Snapshots: a pinned sequence number that reads can use to see the database as it was.
//!
//! A [`Snapshot`] is a cheap handle (an `Arc`). While any clone of it lives, its sequence number
//! stays registered with the database so that compaction keeps every version a read at that
//! sequence could need (invariant I6 in `docs/invariants.md`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// The set of live snapshot sequence numbers, with a count for each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the current visible sequence. The sequence is read while the
    /// list is locked so that [`SnapshotList::smallest_snapshot`] can never miss a snapshot that
    /// is being taken.
    pub(crate) fn acquire_current(self: &Arc<Self>, visible_sequence: &AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let sequence = visible_sequence.load(Ordering::Acquire);
        *live.entry(sequence).or_insert(0) += 1;
        drop(live);
        Snapshot { inner: Arc::new(SnapshotInner { sequence, list: Arc::clone(self) }) }
    }

    /// The oldest sequence any reader may read at: the oldest live snapshot, or the visible
    /// sequence when there is none. Compaction may collapse versions at or below it (I6).
    pub(crate) fn smallest_snapshot(&self, visible_sequence: &AtomicU64) -> u64 {
        let live = self.live.lock();
        let visible = visible_sequence.load(Ordering::Acquire);
        live.keys().next().map_or(visible, |&oldest| oldest.min(visible))
    }

    fn release(&self, sequence: u64) {
        let mut live = self.live.lock();
        if let Some(count) = live.get_mut(&sequence) {
            *count -= 1;
            if *count == 0 {
                live.remove(&sequence);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    sequence: u64,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.sequence);
    }
}

/// A consistent, read-only view of the database at one point in its write history.
#[derive(Clone, Debug)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at: it sees every write with a sequence number
    /// up to and including this one.
    pub fn sequence(&self) -> u64 {
        self.inner.sequence
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smallest_snapshot_tracks_live_snapshots() {
        let list = Arc::new(SnapshotList::default());
        let visible = AtomicU64::new(5);
        let a = list.acquire_current(&visible);
        visible.store(9, Ordering::Release);
        let b = list.acquire_current(&visible);
        let a2 = a.clone();
        visible.store(12, Ordering::Release);
        assert_eq!(list.smallest_snapshot(&visible), 5);
        drop(a);
        assert_eq!(list.smallest_snapshot(&visible), 5, "a clone still holds the snapshot");
        drop(a2);
        assert_eq!(list.smallest_snapshot(&visible), 9);
        assert_eq!(b.sequence(), 9);
        drop(b);
        assert_eq!(list.smallest_snapshot(&visible), 12, "without snapshots, the visible sequence");
    }
}
