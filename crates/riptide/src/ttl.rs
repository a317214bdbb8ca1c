//! Time to live: the clock that decides what has expired, the encoding of an entry's expiry,
//! and the summary of expiries each table keeps for the expiry compaction trigger.
//!
//! An entry of kind `PutWithExpiry` holds its expiry in front of its value: 8 bytes, little
//! endian, microseconds since the Unix epoch as the database's [`Clock`] counts them, then the
//! user's value. An entry whose expiry is at or before a reader's read time reads as a delete
//! of its key at its own sequence number (I42 in `docs/invariants.md`): neither its value nor any
//! older version of the key shows. A snapshot fixes its read time when it is taken, an iterator
//! when it is created, so that what they see does not change while they are used; a plain get
//! reads the clock when it meets an expiring entry.
//!
//! Flush and compaction turn an entry that has expired for every reader into a delete at the
//! same sequence number (the expiry horizon: the smallest read time of the live snapshots, or
//! the clock when there is none), which compaction then treats as any tombstone.
//!
//! Concurrency contract: clocks are shared by every thread of a database and must be
//! thread-safe. [`MonotonicClock`] keeps whatever clock the user gave from going backwards as the
//! database sees it by more than a millisecond, so that an entry read as expired stays expired
//! unless the clock is stepped back (and then for at most that long).

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far the database's clock may run ahead of its recorded latest time (see
/// [`MonotonicClock::now_us`]).
pub(crate) const MONOTONIC_GRANULARITY_US: u64 = 1_000;

/// Size of the expiry that precedes the value of a `PutWithExpiry` entry.
pub(crate) const EXPIRY_PREFIX_BYTES: usize = 8;

/// The time source that decides which entries have expired.
///
/// Riptide reads it when a snapshot or iterator is created, when a plain read meets an expiring
/// entry, when a put needs its column family's `ttl` added to the current time, and when a
/// flush or compaction decides what has expired. Tests use a [`ManualClock`] to move time by
/// hand.
pub trait Clock: Debug + Send + Sync {
    /// The current time in microseconds since the Unix epoch.
    fn now_us(&self) -> u64;
}

/// The system's wall clock (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        // A clock set before 1970 reads as the epoch: nothing with an expiry after it expires.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_micros() as u64)
    }
}

/// A clock that moves only when told to, for tests of expiry.
///
/// ```
/// use std::time::Duration;
/// use riptide::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_millis(2));
/// assert_eq!(clock.now_us(), 3_000);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now_us: AtomicU64,
}

impl ManualClock {
    /// A clock that reads `now_us` until it is moved.
    pub fn new(now_us: u64) -> ManualClock {
        ManualClock { now_us: AtomicU64::new(now_us) }
    }

    /// Sets the time. A database does not see its clock go back past the latest time it
    /// recorded ([`MonotonicClock`]), so setting an earlier time mostly stops it until the clock
    /// passes that time.
    pub fn set_us(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now_us.fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::SeqCst)
    }
}

/// The database's view of its clock: never earlier than a time it returned before.
#[derive(Debug)]
pub(crate) struct MonotonicClock {
    clock: Arc<dyn Clock>,
    latest_us: AtomicU64,
}

impl MonotonicClock {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> MonotonicClock {
        MonotonicClock { clock, latest_us: AtomicU64::new(0) }
    }

    /// The current time, never earlier than the latest time recorded. The record is moved on
    /// at most once per [`MONOTONIC_GRANULARITY_US`] (a read-modify-write that every thread
    /// taking a snapshot would otherwise contend on), so a clock stepped back reads as the
    /// recorded time: at most that granularity before a time returned earlier.
    pub(crate) fn now_us(&self) -> u64 {
        let now = self.clock.now_us();
        let latest = self.latest_us.load(Ordering::Acquire);
        if now >= latest.saturating_add(MONOTONIC_GRANULARITY_US) {
            self.latest_us.fetch_max(now, Ordering::AcqRel);
        }
        now.max(latest)
    }
}

/// `duration` in microseconds, saturating (a time to live too long to count never ends).
pub(crate) fn duration_us(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The expiry and the user value of a `PutWithExpiry` entry's stored value; `None` when it is
/// too short to hold an expiry (damage).
pub(crate) fn split_expiring(stored: &[u8]) -> Option<(u64, &[u8])> {
    let (prefix, value) = stored.split_first_chunk::<EXPIRY_PREFIX_BYTES>()?;
    Some((u64::from_le_bytes(*prefix), value))
}

/// Appends the stored form of a value with an expiry: the expiry, then the value.
pub(crate) fn encode_expiring(out: &mut Vec<u8>, expires_at_us: u64, value: &[u8]) {
    out.extend_from_slice(&expires_at_us.to_le_bytes());
    out.extend_from_slice(value);
}

/// True when an entry expiring at `expires_at_us` is expired for a reader at `read_time_us`.
pub(crate) fn is_expired(expires_at_us: u64, read_time_us: u64) -> bool {
    expires_at_us <= read_time_us
}

/// The expiries of one table's `PutWithExpiry` entries, summarised for the expiry compaction
/// trigger (recorded in the manifest, `docs/format/manifest.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableExpiry {
    /// How many entries carry an expiry.
    pub(crate) entries: u64,
    /// The earliest expiry among them.
    pub(crate) earliest_us: u64,
    /// The latest expiry among them.
    pub(crate) latest_us: u64,
}

impl TableExpiry {
    /// Counts one entry expiring at `expires_at_us`.
    pub(crate) fn add(&mut self, expires_at_us: u64) {
        if self.entries == 0 {
            self.earliest_us = expires_at_us;
            self.latest_us = expires_at_us;
        } else {
            self.earliest_us = self.earliest_us.min(expires_at_us);
            self.latest_us = self.latest_us.max(expires_at_us);
        }
        self.entries += 1;
    }

    /// An estimate of how many of the entries have expired at `horizon_us`, taking the
    /// expiries as spread evenly between the earliest and the latest (as a column family `ttl`
    /// spreads them over the write times).
    pub(crate) fn estimated_expired(&self, horizon_us: u64) -> u64 {
        if self.entries == 0 || horizon_us < self.earliest_us {
            return 0;
        }
        if horizon_us >= self.latest_us {
            return self.entries;
        }
        let span = (self.latest_us - self.earliest_us) as f64;
        let share = (horizon_us - self.earliest_us) as f64 / span;
        (self.entries as f64 * share) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_round_trip_and_short_ones_are_rejected() {
        let mut stored = Vec::new();
        encode_expiring(&mut stored, 0x0102_0304_0506_0708, b"value");
        assert_eq!(split_expiring(&stored), Some((0x0102_0304_0506_0708, b"value".as_slice())));
        let mut empty = Vec::new();
        encode_expiring(&mut empty, 7, b"");
        assert_eq!(split_expiring(&empty), Some((7, b"".as_slice())));
        assert_eq!(split_expiring(&stored[..7]), None);
    }

    #[test]
    fn an_entry_expires_at_its_expiry_time() {
        assert!(!is_expired(100, 99));
        assert!(is_expired(100, 100));
        assert!(is_expired(100, 101));
    }

    #[test]
    fn the_database_clock_never_goes_backwards_past_its_record() {
        const T: u64 = 10_000_000;
        let manual = Arc::new(ManualClock::new(T));
        let clock = MonotonicClock::new(manual.clone());
        assert_eq!(clock.now_us(), T);
        manual.set_us(T - 300);
        assert_eq!(clock.now_us(), T, "an earlier time reads as the latest one recorded");
        manual.advance(Duration::from_micros(700));
        assert_eq!(clock.now_us(), T + 400);
        // Within the granularity the record is not moved on: a step back may return up to that
        // much earlier than a time returned before, never earlier than the record.
        manual.set_us(T + 900);
        assert_eq!(clock.now_us(), T + 900);
        manual.set_us(T + 100);
        assert_eq!(clock.now_us(), T + 100);
        manual.set_us(T + 5_000);
        assert_eq!(clock.now_us(), T + 5_000);
        manual.set_us(T);
        assert_eq!(clock.now_us(), T + 5_000, "a time past the granularity was recorded");
    }

    #[test]
    fn expired_estimates_interpolate_between_earliest_and_latest() {
        let mut expiry = TableExpiry::default();
        assert_eq!(expiry.estimated_expired(u64::MAX), 0);
        for at in [100, 200, 300, 400, 500] {
            expiry.add(at);
        }
        assert_eq!((expiry.entries, expiry.earliest_us, expiry.latest_us), (5, 100, 500));
        assert_eq!(expiry.estimated_expired(99), 0);
        assert_eq!(expiry.estimated_expired(300), 2);
        assert_eq!(expiry.estimated_expired(500), 5);
        let mut single = TableExpiry::default();
        single.add(50);
        assert_eq!(single.estimated_expired(49), 0);
        assert_eq!(single.estimated_expired(50), 1);
    }
}
