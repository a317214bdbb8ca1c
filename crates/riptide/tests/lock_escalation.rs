//! Lock escalation of pessimistic transactions: past `lock_escalation_threshold` row locks in one
//! column family a transaction takes the family whole and lets its row locks there go. The lock
//! memory of a huge transaction stays bounded and its commit is whole; others wait for the
//! family (and time out, or go on once it ends); escalation is refused while another transaction
//! holds a lock in the family, and tried again later; a deadlock through a family lock is found;
//! other families are not affected; `max_lock_count` counts row locks only; prepared
//! transactions keep their family lock until decided, and recovery escalates as a live
//! transaction would. Every test here fails with escalation disabled (the threshold `None`, and
//! the default `None` for the recovery tests): each checks that it happened.

mod common;
mod table_gate;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use riptide::fs::{MemFileSystem, PowerLossMode};
use riptide::{ColumnFamilyOptions, Db, Error, Options, ReadOptions, TransactionOptions};

use common::{dump, dump_cf, write_and_commit_unless_deadlocked};
use table_gate::wait_until;

fn open(memory: &MemFileSystem) -> Db {
    Db::open("/escalation", Options { file_system: Arc::new(memory.clone()), ..Options::default() }).expect("open")
}

/// A pessimistic transaction (the default mode) that escalates past `threshold` row locks in a
/// column family and waits for locks without limit.
fn escalating(threshold: usize) -> TransactionOptions {
    TransactionOptions {
        lock_escalation_threshold: Some(threshold),
        lock_timeout: None,
        ..TransactionOptions::default()
    }
}

/// A transaction whose lock requests fail at once instead of waiting.
fn no_wait() -> TransactionOptions {
    TransactionOptions { lock_timeout: Some(Duration::ZERO), ..TransactionOptions::default() }
}

fn row(index: usize) -> Vec<u8> {
    format!("row/{index:08}").into_bytes()
}

fn value(index: usize) -> Vec<u8> {
    format!("value {index}").into_bytes()
}

#[test]
fn a_huge_transaction_holds_bounded_lock_memory_and_commits_everything() {
    const THRESHOLD: usize = 1_000;
    const ROWS: usize = 50_000;
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&escalating(THRESHOLD)).unwrap();
    transaction.put(&row(0), &value(0)).unwrap();
    // What one row lock costs, as the lock manager accounts it (about 96 bytes plus the key).
    let row_lock_bytes = db.stats().transactions.lock_memory_bytes;
    assert!(row_lock_bytes > row(0).len());
    // The bound: at most THRESHOLD row locks at a time (the put that takes one more escalates
    // before it returns), and after the escalation one column-family lock, whose cost does not
    // grow with the keys it covers; twice the row locks' memory leaves room for it. Without
    // escalation the transaction would hold ROWS locks, 50 times the bound.
    let memory_bound_bytes = 2 * (THRESHOLD + 1) * row_lock_bytes;
    let (mut peak_locks, mut peak_memory_bytes) = (0, 0);
    let mut after_escalation_bytes = None;
    for index in 1..ROWS {
        transaction.put(&row(index), &value(index)).unwrap();
        // Sampled in-band, every 100 writes and right around the threshold.
        if index % 100 == 0 || index.abs_diff(THRESHOLD) <= 1 {
            let stats = db.stats().transactions;
            peak_locks = peak_locks.max(stats.locks_held);
            peak_memory_bytes = peak_memory_bytes.max(stats.lock_memory_bytes);
            if index == THRESHOLD + 1 {
                after_escalation_bytes = Some(stats.lock_memory_bytes);
            }
        }
    }
    let stats = db.stats().transactions;
    assert!(peak_locks <= THRESHOLD + 1, "{peak_locks} locks held at once, the bound is {}", THRESHOLD + 1);
    assert!(
        peak_memory_bytes <= memory_bound_bytes,
        "{peak_memory_bytes} bytes of locks at once, the bound is {memory_bound_bytes}"
    );
    assert_eq!((stats.locks_held, stats.lock_escalations), (1, 1));
    // Flat since the escalation: the keys written after it cost no lock memory.
    assert_eq!(Some(stats.lock_memory_bytes), after_escalation_bytes);
    assert_eq!(transaction.write_count(), ROWS);
    transaction.commit().unwrap();
    let stored = dump(&db, &ReadOptions::default());
    assert_eq!(stored.len(), ROWS);
    assert!((0..ROWS).all(|index| stored.get(&row(index)) == Some(&value(index))));
    let stats = db.stats().transactions;
    assert_eq!((stats.locks_held, stats.lock_memory_bytes, stats.open), (0, 0, 0));
}

#[test]
fn others_wait_for_an_escalated_family_and_go_on_once_it_commits() {
    let memory = MemFileSystem::new();
    let db = Arc::new(open(&memory));
    let big = db.begin(&escalating(10)).unwrap();
    for index in 0..11 {
        big.put(&row(index), b"big").unwrap();
    }
    assert_eq!(db.stats().transactions.lock_escalations, 1);
    // Another transaction: every lock in the family waits, on the big one's keys and on keys
    // it never touched; reads take no locks and go on.
    let other = db.begin(&TransactionOptions { lock_timeout: Some(Duration::from_millis(20)), ..no_wait() }).unwrap();
    let untouched = other.put(b"untouched", b"other").unwrap_err();
    assert!(matches!(&untouched, Error::LockTimeout(message) if message.contains("holds whole")), "{untouched}");
    assert!(untouched.is_retryable());
    assert!(matches!(other.get_for_update(&row(0)), Err(Error::LockTimeout(_))));
    assert_eq!(other.get(&row(0)).unwrap(), None);
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_timeouts, stats.column_family_lock_waits), (2, 2));
    // One that waits without limit sleeps until the big one ends.
    let waiter = {
        let db = Arc::clone(&db);
        thread::spawn(move || {
            let transaction = db.begin(&TransactionOptions { lock_timeout: None, ..no_wait() })?;
            transaction.put(b"late", b"waited")?;
            transaction.commit()
        })
    };
    wait_until("the waiter to wait for the column family", || db.stats().transactions.column_family_lock_waits == 3);
    assert!(!waiter.is_finished());
    big.commit().unwrap();
    waiter.join().unwrap().unwrap();
    // The timed-out transaction is intact and may lock now.
    other.put(b"untouched", b"other").unwrap();
    other.commit().unwrap();
    assert_eq!(db.get(b"late").unwrap(), Some(b"waited".to_vec()));
    assert_eq!(db.get(b"untouched").unwrap(), Some(b"other".to_vec()));
    assert_eq!(db.get(&row(10)).unwrap(), Some(b"big".to_vec()));
    assert_eq!(db.stats().transactions.locks_held, 0);
}

#[test]
fn escalation_is_refused_while_another_holds_a_lock_in_the_family_and_tried_again_later() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let holder = db.begin(&TransactionOptions::default()).unwrap();
    holder.put(b"held", b"holder").unwrap();
    let big = db.begin(&escalating(100)).unwrap();
    for index in 0..101 {
        big.put(&row(index), b"big").unwrap();
    }
    // Refused at 101 row locks: all kept, and they still keep others off the big one's keys
    // (and only those).
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.lock_escalations_refused, stats.locks_held), (0, 1, 102));
    let prober = db.begin(&no_wait()).unwrap();
    assert!(matches!(prober.put(&row(0), b"prober"), Err(Error::LockTimeout(_))));
    prober.put(b"free", b"prober").unwrap();
    prober.rollback().unwrap();
    holder.commit().unwrap();
    // Not tried again before 100 more row locks, then granted.
    for index in 101..200 {
        big.put(&row(index), b"big").unwrap();
    }
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.lock_escalations_refused, stats.locks_held), (0, 1, 200));
    big.put(&row(200), b"big").unwrap();
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.lock_escalations_refused, stats.locks_held), (1, 1, 1));
    let prober = db.begin(&no_wait()).unwrap();
    assert!(matches!(prober.put(b"free", b"prober"), Err(Error::LockTimeout(_))));
    assert!(matches!(prober.put(&row(0), b"prober"), Err(Error::LockTimeout(_))));
    prober.rollback().unwrap();
    big.commit().unwrap();
    let stored = dump(&db, &ReadOptions::default());
    assert_eq!(stored.len(), 202);
    assert_eq!(stored.get(b"held".as_slice()), Some(&b"holder".to_vec()));
    assert_eq!(db.stats().transactions.locks_held, 0);
}

#[test]
fn a_deadlock_through_a_column_family_lock_is_detected() {
    // The old transaction holds family "big" whole; the young one holds a key of the default
    // family. Each asks for what the other holds: one cycle, through the family lock, whoever
    // asks first. Nobody has a lock timeout, so only deadlock detection can end it. The request
    // that closes the cycle (normally the second one) fails; the other transaction commits.
    for young_waits_first in [false, true] {
        let memory = MemFileSystem::new();
        let db = open(&memory);
        let family = db.create_column_family("big", ColumnFamilyOptions::default()).unwrap();
        let old = db.begin(&escalating(10)).unwrap();
        let young = db.begin(&escalating(10)).unwrap();
        for index in 0..11 {
            old.put_cf(&family, &row(index), b"old").unwrap();
        }
        assert_eq!(db.stats().transactions.lock_escalations, 1);
        young.put(b"shared", b"young").unwrap();
        let young_asks = |young| write_and_commit_unless_deadlocked(young, Some(&family), b"new", b"young");
        let old_asks = |old| write_and_commit_unless_deadlocked(old, None, b"shared", b"old");
        let (old_error, young_error) = thread::scope(|scope| {
            if young_waits_first {
                let young_thread = scope.spawn(move || young_asks(young));
                wait_until("the young transaction to wait for the family", || {
                    db.stats().transactions.column_family_lock_waits == 1
                });
                let old_error = old_asks(old);
                (old_error, young_thread.join().unwrap())
            } else {
                let old_thread = scope.spawn(move || old_asks(old));
                wait_until("the old transaction to wait for the key", || db.stats().transactions.lock_waits == 1);
                let young_error = young_asks(young);
                (old_thread.join().unwrap(), young_error)
            }
        });
        let context = format!("young waits first: {young_waits_first}");
        assert!(old_error.is_some() != young_error.is_some(), "exactly one victim expected ({context})");
        let old_won = young_error.is_some();
        let expected_shared = if old_won { b"old".to_vec() } else { b"young".to_vec() };
        assert_eq!(db.get(b"shared").unwrap(), Some(expected_shared), "{context}");
        assert_eq!(db.get_cf(&family, b"new").unwrap(), (!old_won).then(|| b"young".to_vec()), "{context}");
        assert_eq!(db.get_cf(&family, &row(0)).unwrap(), old_won.then(|| b"old".to_vec()), "{context}");
        let stats = db.stats().transactions;
        assert_eq!((stats.deadlocks, stats.locks_held), (1, 0), "{context}");
    }
}

#[test]
fn a_transaction_in_another_column_family_is_not_blocked() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let big_family = db.create_column_family("big", ColumnFamilyOptions::default()).unwrap();
    let other_family = db.create_column_family("other", ColumnFamilyOptions::default()).unwrap();
    let big = db.begin(&escalating(10)).unwrap();
    for index in 0..11 {
        big.put_cf(&big_family, &row(index), b"big").unwrap();
    }
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.locks_held), (1, 1));
    // Never waits: other families, even for the very keys the big one holds in its family.
    let other = db.begin(&no_wait()).unwrap();
    other.put_cf(&other_family, &row(0), b"other").unwrap();
    assert_eq!(other.get_for_update_cf(&other_family, &row(1)).unwrap(), None);
    other.put(&row(0), b"default").unwrap();
    other.delete(b"anything").unwrap();
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_waits, stats.locks_held), (0, 5));
    other.commit().unwrap();
    big.commit().unwrap();
    assert_eq!(dump_cf(&db, &big_family, &ReadOptions::default()).len(), 11);
    assert_eq!(db.get_cf(&other_family, &row(0)).unwrap(), Some(b"other".to_vec()));
    assert_eq!(db.get(&row(0)).unwrap(), Some(b"default".to_vec()));
}

#[test]
fn max_lock_count_counts_row_locks_only() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let limited = TransactionOptions { max_lock_count: Some(20), ..escalating(10) };
    // Escalated at 11 row locks: the keys after it are covered and never reach the limit.
    let transaction = db.begin(&limited).unwrap();
    for index in 0..100 {
        transaction.put(&row(index), b"v").unwrap();
    }
    assert_eq!(db.stats().transactions.locks_held, 1);
    transaction.commit().unwrap();
    // A threshold above the limit: the limit comes first, and the transaction goes on.
    let transaction = db.begin(&TransactionOptions { lock_escalation_threshold: Some(50), ..limited }).unwrap();
    for index in 0..20 {
        transaction.put(&row(index), b"w").unwrap();
    }
    assert!(matches!(transaction.put(&row(20), b"w"), Err(Error::Busy(_))));
    transaction.put(&row(0), b"again").unwrap();
    transaction.commit().unwrap();
    assert_eq!(db.get(&row(0)).unwrap(), Some(b"again".to_vec()));
    assert_eq!(db.get(&row(20)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.stats().transactions.lock_escalations, 1);
}

#[test]
fn a_prepared_transaction_keeps_its_column_family_lock_until_decided() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&escalating(10)).unwrap();
    for index in 0..11 {
        transaction.put(&row(index), b"prepared").unwrap();
    }
    transaction.prepare(b"xid").unwrap();
    drop(transaction); // does not roll back a prepared transaction
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.locks_held), (1, 1));
    let blocked = db.begin(&no_wait()).unwrap();
    assert!(matches!(blocked.put(b"new", b"x"), Err(Error::LockTimeout(_))));
    drop(blocked);
    db.commit_prepared(b"xid").unwrap();
    assert_eq!(db.stats().transactions.locks_held, 0);
    let after = db.begin(&no_wait()).unwrap();
    after.put(b"new", b"x").unwrap();
    after.commit().unwrap();
    assert_eq!(db.get(&row(10)).unwrap(), Some(b"prepared".to_vec()));
}

/// Rows past the default threshold, so that recovery (which escalates as the default options
/// would) takes the family whole.
const PAST_DEFAULT_THRESHOLD: usize = 100_001;

#[test]
fn a_recovered_prepared_transaction_escalates_like_a_live_one() {
    let memory = MemFileSystem::new();
    {
        let db = open(&memory);
        // No escalation while it runs: the recovered one escalates on its own.
        let transaction =
            db.begin(&TransactionOptions { lock_escalation_threshold: None, ..TransactionOptions::default() }).unwrap();
        for index in 0..PAST_DEFAULT_THRESHOLD {
            transaction.put(&row(index), b"p").unwrap();
        }
        assert_eq!(db.stats().transactions.locks_held, PAST_DEFAULT_THRESHOLD);
        transaction.prepare(b"huge").unwrap();
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        drop(transaction);
    }
    let db = open(&memory);
    assert_eq!(db.prepared_transactions(), vec![b"huge".to_vec()]);
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.locks_held), (1, 1));
    let blocked = db.begin(&no_wait()).unwrap();
    assert!(matches!(blocked.put(b"new", b"x"), Err(Error::LockTimeout(_))));
    drop(blocked);
    db.rollback_prepared(b"huge").unwrap();
    assert_eq!(db.stats().transactions.locks_held, 0);
    let after = db.begin(&no_wait()).unwrap();
    after.put(b"new", b"x").unwrap();
    after.commit().unwrap();
    assert_eq!(db.get(&row(0)).unwrap(), None);
}

#[test]
fn recovery_escalates_only_after_every_prepared_transaction_holds_its_locks() {
    // The huge transaction prepares first (so it is recovered first), the small one, with a key
    // in the same family, after. Escalating the huge one as soon as it is recovered would make
    // the small one's recovery fail (recovery does not wait for locks) and the open with it;
    // escalating once both hold their locks is refused instead, as it would be live.
    let memory = MemFileSystem::new();
    {
        let db = open(&memory);
        let small = db.begin(&TransactionOptions::default()).unwrap();
        small.put(b"small", b"s").unwrap();
        let huge =
            db.begin(&TransactionOptions { lock_escalation_threshold: None, ..TransactionOptions::default() }).unwrap();
        for index in 0..PAST_DEFAULT_THRESHOLD {
            huge.put(&row(index), b"h").unwrap();
        }
        huge.prepare(b"huge").unwrap();
        small.prepare(b"small").unwrap();
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        drop((huge, small));
    }
    let db = open(&memory);
    assert_eq!(db.prepared_transactions(), vec![b"huge".to_vec(), b"small".to_vec()]);
    let stats = db.stats().transactions;
    assert_eq!((stats.lock_escalations, stats.lock_escalations_refused), (0, 1));
    assert_eq!(stats.locks_held, PAST_DEFAULT_THRESHOLD + 1);
    db.commit_prepared(b"small").unwrap();
    db.rollback_prepared(b"huge").unwrap();
    assert_eq!(db.stats().transactions.locks_held, 0);
    assert_eq!(db.get(b"small").unwrap(), Some(b"s".to_vec()));
}
