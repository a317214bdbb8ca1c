//! Snapshots: a pinned sequence number that reads can use to see the database as it was.
//!
//! A [`Snapshot`] is a cheap handle (an `Arc`). While any clone of it lives, its sequence number
//! stays registered with the database so that compaction keeps every version a read at that
//! sequence could need (invariant I6 in `docs/invariants.md`), and every entry that had not
//! expired at its read time, the time it was taken (I42).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::ttl::MonotonicClock;

/// The set of live snapshot sequence numbers, with a count and the earliest read time of each.
#[derive(Debug)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<u64, LiveSnapshots>>,
    clock: Arc<MonotonicClock>,
    /// The latest expiry horizon handed out: a snapshot taken after it reads at this time or
    /// later, so that nothing it could see has been rewritten as expired (I42). Written and
    /// read under `live`'s lock.
    horizon_given_us: AtomicU64,
}

/// The snapshots at one sequence number.
#[derive(Debug)]
struct LiveSnapshots {
    count: usize,
    /// The earliest read time among them (kept while any of them lives: an upper bound on
    /// what the horizon may pass).
    read_time_us: u64,
}

impl Default for SnapshotList {
    fn default() -> SnapshotList {
        SnapshotList::new(Arc::new(MonotonicClock::new(Arc::new(crate::ttl::SystemClock))))
    }
}

impl SnapshotList {
    /// Registers a snapshot at the current visible sequence. The sequence is read while the
    /// list is locked so that [`SnapshotList::smallest_snapshot`] can never miss a snapshot that
    /// is being taken.
    ///
    /// The read time is read before the lock, to keep the clock out of the critical section:
    /// read times need not ascend with sequence numbers, so the expiry horizon takes the
    /// earliest of them all.
    pub(crate) fn acquire_current(self: &Arc<Self>, visible_sequence: &AtomicU64) -> Snapshot {
        let clock_time_us = self.clock.now_us();
        let mut live = self.live.lock();
        let sequence = visible_sequence.load(Ordering::Acquire);
        let read_time_us = clock_time_us.max(self.horizon_given_us.load(Ordering::Relaxed));
        let snapshots = live.entry(sequence).or_insert(LiveSnapshots { count: 0, read_time_us });
        snapshots.count += 1;
        snapshots.read_time_us = snapshots.read_time_us.min(read_time_us);
        drop(live);
        Snapshot { inner: Arc::new(SnapshotInner { sequence, read_time_us, list: Arc::clone(self) }) }
    }

    /// A list whose snapshots take their read times from `clock`.
    pub(crate) fn new(clock: Arc<MonotonicClock>) -> SnapshotList {
        SnapshotList { live: Mutex::new(BTreeMap::new()), clock, horizon_given_us: AtomicU64::new(0) }
    }

    /// The database's clock.
    pub(crate) fn clock(&self) -> &Arc<MonotonicClock> {
        &self.clock
    }

    /// The expiry horizon (see [`ReadPoints::expiry_horizon_us`]), for the picker.
    pub(crate) fn expiry_horizon_us(&self) -> u64 {
        let now = self.clock.now_us();
        let live = self.live.lock();
        self.give_horizon(&live, now)
    }

    /// The earliest read time of the live snapshots, or `now` when it is earlier, recorded as
    /// given (under `live`'s lock) so that snapshots taken later read at it or after.
    fn give_horizon(&self, live: &BTreeMap<u64, LiveSnapshots>, now: u64) -> u64 {
        let horizon = live.values().map(|snapshots| snapshots.read_time_us).fold(now, u64::min);
        self.horizon_given_us.fetch_max(horizon, Ordering::Relaxed);
        horizon
    }

    /// The oldest sequence any reader may read at: the oldest live snapshot, or the visible
    /// sequence when there is none. Compaction may collapse versions at or below it (I6).
    pub(crate) fn smallest_snapshot(&self, visible_sequence: &AtomicU64) -> u64 {
        let live = self.live.lock();
        let visible = visible_sequence.load(Ordering::Acquire);
        live.keys().next().map_or(visible, |&oldest| oldest.min(visible))
    }

    /// Every sequence a reader may read at now: the live snapshots and the visible sequence,
    /// ascending. Compaction keeps, of a key's versions, the newest at or below each of them
    /// (I6); a snapshot taken later reads at or above the visible sequence taken here.
    pub(crate) fn read_points(&self, visible_sequence: &AtomicU64) -> ReadPoints {
        let live = self.live.lock();
        let visible = visible_sequence.load(Ordering::Acquire);
        let mut points: Vec<u64> = live.keys().copied().filter(|&sequence| sequence < visible).collect();
        points.push(visible);
        let expiry_horizon_us = self.give_horizon(&live, self.clock.now_us());
        ReadPoints { points: points.into(), expiry_horizon_us }
    }

    fn release(&self, sequence: u64) {
        let mut live = self.live.lock();
        if let Some(snapshots) = live.get_mut(&sequence) {
            snapshots.count -= 1;
            if snapshots.count == 0 {
                live.remove(&sequence);
            }
        }
    }
}

/// The sequences readers may read at, ascending (see [`SnapshotList::read_points`]).
#[derive(Clone, Debug)]
pub(crate) struct ReadPoints {
    points: Arc<[u64]>,
    /// The time up to which entries have expired for every reader (I42): the read time of the
    /// oldest live snapshot, or the clock's time when there is none. Reads without a snapshot
    /// read the clock later, iterators read the tables their version pins, and snapshots taken
    /// later read at a later time. 0 (nothing expired) for read points made by hand.
    expiry_horizon_us: u64,
}

impl ReadPoints {
    /// A single read point: every version at or below `sequence` but the newest is invisible.
    pub(crate) fn single(sequence: u64) -> ReadPoints {
        ReadPoints { points: Arc::from([sequence]), expiry_horizon_us: 0 }
    }

    /// Read points at `points` (ascending), for tests.
    #[cfg(test)]
    pub(crate) fn from_points(points: &[u64]) -> ReadPoints {
        debug_assert!(points.windows(2).all(|pair| pair[0] <= pair[1]));
        ReadPoints { points: Arc::from(points), expiry_horizon_us: 0 }
    }

    /// See the field.
    pub(crate) fn expiry_horizon_us(&self) -> u64 {
        self.expiry_horizon_us
    }

    /// The oldest read point.
    pub(crate) fn smallest(&self) -> u64 {
        self.points.first().copied().unwrap_or(0)
    }

    /// True when some reader reads at a sequence in `[older, newer)`: it then sees the version
    /// at `older` when the next newer version of its key is at `newer`.
    pub(crate) fn any_between(&self, older: u64, newer: u64) -> bool {
        let first_at_or_above = self.points.partition_point(|&point| point < older);
        self.points.get(first_at_or_above).is_some_and(|&point| point < newer)
    }
}

#[derive(Debug)]
struct SnapshotInner {
    sequence: u64,
    read_time_us: u64,
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

    /// The time this snapshot reads at, in microseconds since the Unix epoch by the
    /// database's [`crate::Clock`]: entries that expire at or before it are deleted for it, and
    /// every other entry it sees stays visible while it lives, whatever the clock says later.
    pub fn read_time_us(&self) -> u64 {
        self.inner.read_time_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_points_list_snapshots_and_the_visible_sequence() {
        let list = Arc::new(SnapshotList::default());
        let visible = AtomicU64::new(5);
        let five = list.acquire_current(&visible);
        visible.store(9, Ordering::Release);
        let nine = list.acquire_current(&visible);
        visible.store(20, Ordering::Release);
        let points = list.read_points(&visible);
        assert_eq!(&*points.points, &[5, 9, 20]);
        assert_eq!(points.smallest(), 5);
        // A version at 6 whose next newer version is at 9: the snapshot at 9 sees the newer one,
        // the one at 5 sees an older one; nobody sees 6.
        assert!(!points.any_between(6, 9));
        assert!(points.any_between(6, 10));
        assert!(points.any_between(5, 6));
        assert!(!points.any_between(21, u64::MAX));
        drop((five, nine));
        assert_eq!(&*list.read_points(&visible).points, &[20]);
    }

    #[test]
    fn the_expiry_horizon_waits_for_the_earliest_snapshot_and_later_snapshots_read_after_it() {
        let manual = Arc::new(crate::ttl::ManualClock::new(100));
        let list = Arc::new(SnapshotList::new(Arc::new(MonotonicClock::new(manual.clone()))));
        let visible = AtomicU64::new(5);
        let early = list.acquire_current(&visible);
        assert_eq!(early.read_time_us(), 100);
        manual.set_us(200);
        visible.store(9, Ordering::Release);
        let later = list.acquire_current(&visible);
        assert_eq!(list.read_points(&visible).expiry_horizon_us(), 100, "the earliest live snapshot holds it");
        drop(early);
        assert_eq!(list.expiry_horizon_us(), 200);
        drop(later);
        manual.set_us(300);
        assert_eq!(list.read_points(&visible).expiry_horizon_us(), 300, "without snapshots, the clock");
        // A snapshot never reads before a horizon already handed out.
        assert!(list.acquire_current(&visible).read_time_us() >= 300);
    }

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
