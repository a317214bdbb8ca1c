//! The transaction workload: short read-modify-write transactions, counted as they end.
//!
//! What a transaction does: it draws [`KEYS_PER_TRANSACTION`] distinct keys from the run's key
//! pattern (uniform or zipfian over a key space that the populate phase wrote in full), reads
//! each of them, then writes each back with its counter one higher and commits. The counter is
//! the first [`COUNTER_BYTES`] of the value, little-endian (the populate phase writes zero
//! there); the rest of the value is written back as it was read. In pessimistic mode the reads
//! are `get_for_update`, which lock the key until the transaction ends, so the read-modify-write
//! is protected by the lock and by the snapshot check at lock time; in optimistic mode they are
//! plain reads at the snapshot, and the commit validates the written keys against it. Keys are
//! locked in the order drawn, not sorted, so transactions can deadlock as an application's do.
//!
//! A transaction that concurrency control fails (conflict, deadlock, lock timeout) is rolled
//! back and counted as an abort of its kind; it is not retried, the next one draws new keys.
//! Throughput is committed transactions per second, latency covers committed transactions
//! (begin to the end of the commit), the abort rate is aborts over attempts. Any other error
//! (a missing key, an I/O error) ends the run.
//!
//! Concurrency: every worker thread owns a [`TransactionWorker`] and its engine session and runs
//! one transaction at a time; counts are per thread and merged after the phase.
//!
//! Invariants: `attempts = committed + conflicts + deadlocks + lock_timeouts` at every point of
//! a worker; a committed transaction adds exactly [`KEYS_PER_TRANSACTION`] to the sum of all
//! counters and an aborted one adds nothing, so after a run the counters of the key space sum
//! to `KEYS_PER_TRANSACTION x committed` (the tests check it: a lost update, or an abort whose
//! writes leaked, breaks the sum).

use crate::bail;
use crate::engine::{AbortKind, Session, TransactionError, TransactionMode};
use crate::error::{BenchError, Result};
use crate::keys::KeyCursor;

/// Keys each transaction reads and then writes.
pub const KEYS_PER_TRANSACTION: usize = 4;
/// Bytes of the counter at the start of every value of the transaction workload.
pub const COUNTER_BYTES: usize = 8;
/// Keys in the transaction workload's key space unless `--transaction-keys` says otherwise.
pub const DEFAULT_TRANSACTION_KEY_COUNT: u64 = 100_000;
/// Draws after which drawing distinct keys gives up (only a degenerate key space gets there).
const MAX_DRAWS_PER_KEY: u32 = 100_000;

/// How the transactions of a run (or of one thread) ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransactionCounts {
    /// Transactions begun.
    pub attempts: u64,
    /// Transactions committed.
    pub committed: u64,
    /// Aborts by write conflicts (at lock time or at commit).
    pub conflicts: u64,
    /// Aborts of deadlock victims.
    pub deadlocks: u64,
    /// Aborts by lock waits that timed out.
    pub lock_timeouts: u64,
}

impl TransactionCounts {
    /// Aborts of every kind.
    pub fn aborts(&self) -> u64 {
        self.conflicts + self.deadlocks + self.lock_timeouts
    }

    /// Aborts over attempts (`None` without attempts).
    pub fn abort_rate(&self) -> Option<f64> {
        (self.attempts > 0).then(|| self.aborts() as f64 / self.attempts as f64)
    }

    /// Counts one attempt that ended as `outcome`.
    pub fn record(&mut self, outcome: TransactionOutcome) {
        self.attempts += 1;
        match outcome {
            TransactionOutcome::Committed => self.committed += 1,
            TransactionOutcome::Aborted(AbortKind::Conflict) => self.conflicts += 1,
            TransactionOutcome::Aborted(AbortKind::Deadlock) => self.deadlocks += 1,
            TransactionOutcome::Aborted(AbortKind::LockTimeout) => self.lock_timeouts += 1,
        }
    }

    /// Adds another thread's counts.
    pub fn add(&mut self, other: &TransactionCounts) {
        self.attempts += other.attempts;
        self.committed += other.committed;
        self.conflicts += other.conflicts;
        self.deadlocks += other.deadlocks;
        self.lock_timeouts += other.lock_timeouts;
    }
}

/// How one transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionOutcome {
    /// It committed.
    Committed,
    /// Concurrency control aborted it; it was rolled back.
    Aborted(AbortKind),
}

/// The counter at the start of `value`, or `None` when the value is too short to hold one.
pub fn read_counter(value: &[u8]) -> Option<u64> {
    let bytes: [u8; COUNTER_BYTES] = value.get(..COUNTER_BYTES)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Writes `counter` over the start of `value`; fails when the value is too short to hold one.
pub fn write_counter(counter: u64, value: &mut [u8]) -> Result<()> {
    let length = value.len();
    let Some(prefix) = value.get_mut(..COUNTER_BYTES) else {
        bail!("a {length}-byte value cannot hold a {COUNTER_BYTES}-byte counter");
    };
    prefix.copy_from_slice(&counter.to_le_bytes());
    Ok(())
}

/// Fills `numbers` with distinct key numbers drawn from `cursor` (a duplicate is drawn again),
/// so that a transaction touches as many keys as it says; `index` is the transaction's
/// operation index.
pub fn draw_distinct_keys(cursor: &mut KeyCursor<'_>, index: u64, numbers: &mut [u64]) -> Result<()> {
    for slot in 0..numbers.len() {
        let mut draws = 0u32;
        numbers[slot] = loop {
            let number = cursor.key_number(index);
            if !numbers[..slot].contains(&number) {
                break number;
            }
            draws += 1;
            if draws >= MAX_DRAWS_PER_KEY {
                bail!("could not draw {} distinct keys in {MAX_DRAWS_PER_KEY} draws", numbers.len());
            }
        };
    }
    Ok(())
}

/// One thread's transactions: the buffers they reuse and the counts of how they ended.
#[derive(Clone, Debug)]
pub struct TransactionWorker {
    mode: TransactionMode,
    numbers: [u64; KEYS_PER_TRANSACTION],
    keys: Vec<Vec<u8>>,
    counters: [u64; KEYS_PER_TRANSACTION],
    values: Vec<Vec<u8>>,
    /// How this thread's transactions ended so far.
    pub counts: TransactionCounts,
    /// Key plus value bytes of every read of every attempt.
    pub read_bytes: u64,
}

impl TransactionWorker {
    /// A worker for transactions in `mode` over keys of `key_size_bytes`.
    pub fn new(mode: TransactionMode, key_size_bytes: usize) -> TransactionWorker {
        TransactionWorker {
            mode,
            numbers: [0; KEYS_PER_TRANSACTION],
            keys: vec![vec![0u8; key_size_bytes]; KEYS_PER_TRANSACTION],
            counters: [0; KEYS_PER_TRANSACTION],
            values: vec![Vec::new(); KEYS_PER_TRANSACTION],
            counts: TransactionCounts::default(),
            read_bytes: 0,
        }
    }

    /// Draws the keys of the next transaction (operation `index`) from `cursor`.
    pub fn draw_keys(&mut self, cursor: &mut KeyCursor<'_>, index: u64) -> Result<()> {
        draw_distinct_keys(cursor, index, &mut self.numbers)?;
        for (key, &number) in self.keys.iter_mut().zip(&self.numbers) {
            crate::keys::encode_key(number, key);
        }
        Ok(())
    }

    /// Runs one transaction over the keys drawn last, rolls it back when it aborts, counts
    /// how it ended and returns that; errors other than aborts end the run.
    pub fn run<S: Session>(&mut self, session: &mut S) -> Result<TransactionOutcome> {
        session.begin_transaction()?;
        let outcome = match self.body(session) {
            Ok(()) => TransactionOutcome::Committed,
            Err(TransactionError::Abort(kind)) => {
                session.rollback_transaction()?;
                TransactionOutcome::Aborted(kind)
            }
            Err(TransactionError::Failed(error)) => {
                // The error that ended the run matters more than one from cleaning up after it.
                if let Err(rollback_error) = session.rollback_transaction() {
                    return Err(BenchError::new(format!("{error} (and then rolling back: {rollback_error})")));
                }
                return Err(error);
            }
        };
        self.counts.record(outcome);
        Ok(outcome)
    }

    /// Reads every key, then writes each back with its counter incremented, then commits.
    fn body<S: Session>(&mut self, session: &mut S) -> std::result::Result<(), TransactionError> {
        let for_update = self.mode == TransactionMode::Pessimistic;
        for ((key, value), counter) in self.keys.iter().zip(&mut self.values).zip(&mut self.counters) {
            if !session.transaction_read(key, for_update, value)? {
                return Err(BenchError::new(format!(
                    "key {} is missing, but the populate phase wrote every key of the space",
                    String::from_utf8_lossy(key)
                ))
                .into());
            }
            self.read_bytes += (key.len() + value.len()) as u64;
            *counter = read_counter(value).ok_or_else(|| {
                BenchError::new(format!(
                    "the value of key {} has {} bytes, too few for a {COUNTER_BYTES}-byte counter",
                    String::from_utf8_lossy(key),
                    value.len()
                ))
            })?;
        }
        for ((key, value), counter) in self.keys.iter().zip(&mut self.values).zip(&self.counters) {
            write_counter(counter.wrapping_add(1), value)?;
            session.transaction_put(key, value)?;
        }
        session.commit_transaction()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{KeyPattern, KeySpace};

    #[test]
    fn counts_add_up_and_the_abort_rate_is_aborts_over_attempts() {
        let mut counts = TransactionCounts::default();
        assert_eq!(counts.abort_rate(), None);
        for outcome in [
            TransactionOutcome::Committed,
            TransactionOutcome::Committed,
            TransactionOutcome::Committed,
            TransactionOutcome::Aborted(AbortKind::Conflict),
            TransactionOutcome::Aborted(AbortKind::Conflict),
            TransactionOutcome::Aborted(AbortKind::Deadlock),
            TransactionOutcome::Aborted(AbortKind::LockTimeout),
            TransactionOutcome::Committed,
        ] {
            counts.record(outcome);
            assert_eq!(counts.attempts, counts.committed + counts.aborts());
        }
        assert_eq!(
            counts,
            TransactionCounts { attempts: 8, committed: 4, conflicts: 2, deadlocks: 1, lock_timeouts: 1 }
        );
        assert_eq!(counts.abort_rate(), Some(0.5));
        let mut total = counts;
        total.add(&counts);
        assert_eq!((total.attempts, total.committed, total.deadlocks), (16, 8, 2));
    }

    #[test]
    fn counters_sit_little_endian_at_the_start_of_the_value() {
        let mut value = vec![0xaau8; 20];
        write_counter(0x0102_0304_0506_0708, &mut value).unwrap();
        assert_eq!(&value[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&value[8..], &[0xaa; 12], "the rest of the value is kept");
        assert_eq!(read_counter(&value), Some(0x0102_0304_0506_0708));
        assert_eq!(read_counter(&value[..7]), None);
        assert!(write_counter(1, &mut value[..7]).is_err());
        assert_eq!(read_counter(&[0u8; 8]), Some(0));
    }

    #[test]
    fn drawn_keys_are_distinct_even_when_the_skew_repeats_them() {
        for pattern in [KeyPattern::Uniform, KeyPattern::Zipfian] {
            // Five keys of which a transaction takes four: duplicates come up all the time.
            let space = KeySpace::new(pattern, 5, 3);
            let mut cursor = space.cursor(0);
            let mut numbers = [0u64; KEYS_PER_TRANSACTION];
            for index in 0..1000 {
                draw_distinct_keys(&mut cursor, index, &mut numbers).unwrap();
                let mut sorted = numbers;
                sorted.sort_unstable();
                assert!(sorted.windows(2).all(|pair| pair[0] < pair[1]), "{pattern:?}: {numbers:?}");
                assert!(numbers.iter().all(|&number| number < 5));
            }
        }
        // A space with fewer keys than a transaction needs cannot work (runs refuse it first).
        let space = KeySpace::new(KeyPattern::Uniform, 3, 3);
        let mut numbers = [0u64; KEYS_PER_TRANSACTION];
        assert!(draw_distinct_keys(&mut space.cursor(0), 0, &mut numbers).is_err());
    }
}
