//! Transactions' contracts: read-your-own-writes, atomic commit across column families,
//! rollback, savepoints, iterators merging own writes (against a `BTreeMap` model), locks
//! (timeouts, deadlocks, limits), errors after misuse, stats, and commits that survive reopen
//! and simulated power loss. The isolation anomalies have their own file (`isolation.rs`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::{MemFileSystem, PowerLossMode};
use riptide::{
    ColumnFamilyOptions, ConcurrencyMode, Db, Error, IsolationLevel, ReadOptions, ReverseBytewiseComparator,
    TransactionOptions,
};

use common::{dump, small_options, write_and_commit_unless_deadlocked};

fn memory_db() -> (MemFileSystem, Db) {
    let memory = MemFileSystem::new();
    let db = Db::open("/txn", small_options(Arc::new(memory.clone()))).expect("open");
    (memory, db)
}

fn options(isolation: IsolationLevel, mode: ConcurrencyMode) -> TransactionOptions {
    TransactionOptions { isolation, mode, ..TransactionOptions::default() }
}

const ALL_LEVELS: [IsolationLevel; 4] = [
    IsolationLevel::ReadUncommitted,
    IsolationLevel::ReadCommitted,
    IsolationLevel::RepeatableRead,
    IsolationLevel::Serializable,
];

const BOTH_MODES: [ConcurrencyMode; 2] = [ConcurrencyMode::Pessimistic, ConcurrencyMode::Optimistic];

#[test]
fn reads_see_own_writes_and_others_see_them_only_after_commit() {
    for level in ALL_LEVELS {
        for mode in BOTH_MODES {
            let (_memory, db) = memory_db();
            db.put(b"a", b"old").unwrap();
            let transaction = db.begin(&options(level, mode)).unwrap();
            transaction.put(b"a", b"new").unwrap();
            transaction.put(b"b", b"born").unwrap();
            transaction.delete(b"a").unwrap();
            transaction.put(b"a", b"again").unwrap();
            transaction.put(b"c", b"doomed").unwrap();
            transaction.delete(b"c").unwrap();
            assert_eq!(transaction.get(b"a").unwrap(), Some(b"again".to_vec()), "{level:?} {mode:?}");
            assert_eq!(transaction.get(b"c").unwrap(), None);
            assert_eq!(db.get(b"a").unwrap(), Some(b"old".to_vec()), "uncommitted write visible outside");
            assert_eq!(db.get(b"b").unwrap(), None);
            assert_eq!(transaction.write_count(), 3);
            transaction.commit().unwrap();
            assert_eq!(db.get(b"a").unwrap(), Some(b"again".to_vec()));
            assert_eq!(db.get(b"b").unwrap(), Some(b"born".to_vec()));
            assert_eq!(db.get(b"c").unwrap(), None);
        }
    }
}

#[test]
fn rollback_and_drop_leave_no_trace() {
    let (_memory, db) = memory_db();
    db.put(b"k", b"v").unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    transaction.put(b"k", b"changed").unwrap();
    transaction.delete(b"gone").unwrap();
    transaction.rollback().unwrap();
    {
        let transaction = db.begin(&TransactionOptions::default()).unwrap();
        transaction.put(b"other", b"x").unwrap();
        // Dropped without commit: rolled back, and its lock released.
    }
    let after = db.begin(&TransactionOptions { lock_timeout: Some(Duration::ZERO), ..Default::default() }).unwrap();
    after.put(b"other", b"y").unwrap();
    after.put(b"k", b"y").unwrap();
    after.rollback().unwrap();
    assert_eq!(dump(&db, &ReadOptions::default()), BTreeMap::from([(b"k".to_vec(), b"v".to_vec())]));
    let stats = db.stats().transactions;
    assert_eq!((stats.begun, stats.open, stats.committed, stats.rolled_back), (3, 0, 0, 3));
    assert_eq!(stats.locks_held, 0);
}

#[test]
fn commit_is_atomic_across_column_families_and_survives_reopen_and_power_loss() {
    let memory = MemFileSystem::new();
    let open = || Db::open("/txn", small_options(Arc::new(memory.clone()))).expect("open");
    let db = open();
    let accounts = db.create_column_family("accounts", ColumnFamilyOptions::default()).unwrap();
    let log = db.create_column_family("log", ColumnFamilyOptions::default()).unwrap();
    let synced = db.begin(&TransactionOptions { sync: true, ..Default::default() }).unwrap();
    synced.put_cf(&accounts, b"alice", b"90").unwrap();
    synced.put_cf(&log, b"0001", b"alice -10").unwrap();
    synced.put(b"last", b"0001").unwrap();
    let sequence = synced.commit_returning_sequence().unwrap().expect("a sequence");
    assert!(sequence > 0);
    let unsynced = db.begin(&TransactionOptions::default()).unwrap();
    unsynced.put_cf(&accounts, b"bob", b"110").unwrap();
    unsynced.put_cf(&log, b"0002", b"bob +10").unwrap();
    unsynced.commit().unwrap();
    drop(accounts);
    drop(log);
    // Power loss: the synced commit is wholly there; the unsynced one wholly there or wholly
    // absent.
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    drop(db);
    let db = open();
    let accounts = db.column_family("accounts").unwrap();
    let log = db.column_family("log").unwrap();
    assert_eq!(db.get_cf(&accounts, b"alice").unwrap(), Some(b"90".to_vec()));
    assert_eq!(db.get_cf(&log, b"0001").unwrap(), Some(b"alice -10".to_vec()));
    assert_eq!(db.get(b"last").unwrap(), Some(b"0001".to_vec()));
    let bob = db.get_cf(&accounts, b"bob").unwrap();
    let bob_log = db.get_cf(&log, b"0002").unwrap();
    assert_eq!(bob.is_some(), bob_log.is_some(), "half a transaction survived: {bob:?} {bob_log:?}");
}

#[test]
fn compaction_keeps_what_an_open_transaction_reads_and_nothing_more() {
    // A transaction's snapshot is an ordinary registered snapshot: compaction keeps the version
    // it reads and the newest one, drops the versions written in between (nobody can read
    // them), and drops the old one too once the transaction ends.
    //
    // Story: compaction used to know only the smallest snapshot, so one long transaction kept
    // every version written after its snapshot (201 here) until it ended.
    let (_memory, db) = memory_db();
    db.put(b"k", b"seen by the transaction").unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    for round in 0..200 {
        db.put(b"k", format!("overwrite {round}").as_bytes()).unwrap();
        db.put(format!("filler{round:03}").as_bytes(), &[b'x'; 200]).unwrap();
    }
    db.compact_all().unwrap();
    assert_eq!(transaction.get(b"k").unwrap(), Some(b"seen by the transaction".to_vec()));
    let keys: Vec<Vec<u8>> = transaction.iter(&ReadOptions::default()).unwrap().map(|entry| entry.unwrap().0).collect();
    assert_eq!(keys, vec![b"k".to_vec()], "the fillers came after the snapshot");
    let family = db.default_column_family();
    let values = |db: &Db| -> Vec<Vec<u8>> {
        let (_, versions) = riptide::internals::debug::key_versions(db, &family, b"k").unwrap();
        versions.into_iter().map(|version| version.value).collect()
    };
    assert_eq!(values(&db), vec![b"overwrite 199".to_vec(), b"seen by the transaction".to_vec()]);
    transaction.rollback().unwrap();
    // Another version, flushed over the table, makes the next compaction rewrite it.
    db.put(b"k", b"last").unwrap();
    db.compact_all().unwrap();
    assert_eq!(values(&db), vec![b"last".to_vec()], "nobody reads the old versions any more");
}

#[test]
fn savepoints_undo_writes_after_them() {
    let (_memory, db) = memory_db();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    transaction.put(b"a", b"1").unwrap();
    transaction.savepoint().unwrap();
    transaction.put(b"a", b"2").unwrap();
    transaction.put(b"b", b"2").unwrap();
    transaction.savepoint().unwrap();
    transaction.delete(b"a").unwrap();
    assert_eq!(transaction.get(b"a").unwrap(), None);
    transaction.rollback_to_savepoint().unwrap();
    assert_eq!(transaction.get(b"a").unwrap(), Some(b"2".to_vec()));
    transaction.release_savepoint().unwrap();
    assert!(matches!(transaction.rollback_to_savepoint(), Err(Error::InvalidArgument(_))));
    assert!(matches!(transaction.release_savepoint(), Err(Error::InvalidArgument(_))));
    transaction.savepoint().unwrap();
    transaction.put(b"c", b"3").unwrap();
    transaction.rollback_to_savepoint().unwrap();
    transaction.commit().unwrap();
    let expected = BTreeMap::from([(b"a".to_vec(), b"2".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    assert_eq!(dump(&db, &ReadOptions::default()), expected);
}

#[test]
fn ended_transaction_and_closed_database_fail_clearly() {
    let (_memory, db) = memory_db();
    let family = db.create_column_family("doomed", ColumnFamilyOptions::default()).unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    transaction.put_cf(&family, b"k", b"v").unwrap();
    db.drop_column_family(&family).unwrap();
    assert!(matches!(transaction.put_cf(&family, b"k2", b"v"), Err(Error::InvalidArgument(_))));
    // The commit names a dropped family: refused, nothing written.
    assert!(matches!(transaction.commit(), Err(Error::InvalidArgument(_))));
    let too_long = vec![b'k'; (64 << 10) + 1];
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    assert!(matches!(transaction.put(&too_long, b"v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        db.begin(&TransactionOptions { max_lock_count: Some(0), ..Default::default() }),
        Err(Error::InvalidArgument(_))
    ));
    db.close().unwrap();
    assert!(matches!(transaction.put(b"k", b"v"), Err(Error::Closed(_))));
    assert!(matches!(transaction.commit(), Err(Error::Closed(_))));
}

#[test]
fn lock_timeout_fails_only_the_request() {
    let (_memory, db) = memory_db();
    let holder = db.begin(&TransactionOptions::default()).unwrap();
    holder.put(b"k", b"holder").unwrap();
    let waiter =
        db.begin(&TransactionOptions { lock_timeout: Some(Duration::from_millis(20)), ..Default::default() }).unwrap();
    waiter.put(b"mine", b"kept").unwrap();
    assert!(matches!(waiter.put(b"k", b"waiter"), Err(Error::LockTimeout(_))));
    assert!(matches!(waiter.get_for_update(b"k"), Err(Error::LockTimeout(_))));
    holder.commit().unwrap();
    // Still usable: its earlier write commits. (The key it failed to lock changed after its
    // snapshot, so locking it now is a conflict under REPEATABLE READ.)
    assert!(matches!(waiter.put(b"k", b"waiter"), Err(Error::Conflict(_))));
    waiter.commit().unwrap();
    assert_eq!(db.get(b"mine").unwrap(), Some(b"kept".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), Some(b"holder".to_vec()));
    let stats = db.stats().transactions;
    assert_eq!(stats.lock_timeouts, 2);
    assert!(stats.lock_waits >= 2);
}

#[test]
fn read_committed_waits_for_the_lock_then_overwrites() {
    let (_memory, db) = memory_db();
    let db = Arc::new(db);
    let level = options(IsolationLevel::ReadCommitted, ConcurrencyMode::Pessimistic);
    let holder = db.begin(&level).unwrap();
    holder.put(b"k", b"first").unwrap();
    let waiter = {
        let db = Arc::clone(&db);
        let level = level.clone();
        thread::spawn(move || {
            let transaction = db.begin(&TransactionOptions { lock_timeout: None, ..level }).unwrap();
            let seen = transaction.get_for_update(b"k").unwrap();
            transaction.put(b"k", b"second").unwrap();
            transaction.commit().unwrap();
            seen
        })
    };
    while db.stats().transactions.lock_waits == 0 {
        thread::yield_now();
    }
    holder.commit().unwrap();
    // The waiter read after the lock was granted: the latest committed value.
    assert_eq!(waiter.join().unwrap(), Some(b"first".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), Some(b"second".to_vec()));
}

#[test]
fn a_deadlock_fails_one_member_and_the_other_commits() {
    // Each transaction locks a key, then asks for the other's. The request that closes the
    // cycle fails with `Deadlock` (usually the second one, but the first waiter may not have
    // recorded its wait yet when the second asks); that transaction rolls back, and the other
    // one gets the key and commits both.
    let (_memory, db) = memory_db();
    let db = Arc::new(db);
    let forever = TransactionOptions { lock_timeout: None, ..Default::default() };
    let first = db.begin(&forever).unwrap();
    let second = db.begin(&forever).unwrap();
    first.put(b"a", b"first").unwrap();
    second.put(b"b", b"second").unwrap();
    let first_thread = thread::spawn(move || write_and_commit_unless_deadlocked(first, None, b"b", b"first").is_none());
    while db.stats().transactions.lock_waits == 0 {
        thread::yield_now();
    }
    let second_committed = write_and_commit_unless_deadlocked(second, None, b"a", b"second").is_none();
    let first_committed = first_thread.join().unwrap();
    assert_ne!(first_committed, second_committed, "exactly one of the two must commit");
    let winner = if first_committed { b"first".to_vec() } else { b"second".to_vec() };
    assert_eq!(db.get(b"a").unwrap(), Some(winner.clone()));
    assert_eq!(db.get(b"b").unwrap(), Some(winner));
    let stats = db.stats().transactions;
    assert_eq!((stats.deadlocks, stats.locks_held), (1, 0));
}

#[test]
fn deadlocks_among_many_transactions_always_resolve() {
    // Eight threads lock random pairs of four keys in random order, forever (no timeout): only
    // deadlock detection can end a cycle, so a missed one hangs the test.
    //
    // Regression (found by this test as first written): a waiter chosen as victim could be
    // granted its lock before it saw the mark; the mark stayed, and its next wait failed with a
    // deadlock that did not exist (386 deadlocks counted, 368 reported). Marks now die with the
    // wait, and a deadlock is counted when its victim fails.
    let (_memory, db) = memory_db();
    let db = Arc::new(db);
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8u64)
        .map(|thread_index| {
            let db = Arc::clone(&db);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread_index);
                barrier.wait();
                let (mut committed, mut deadlocks) = (0, 0);
                while committed < 50 {
                    let transaction =
                        db.begin(&TransactionOptions { lock_timeout: None, ..Default::default() }).unwrap();
                    let result = (0..3).try_for_each(|_| {
                        let key = [b'k', rng.gen_range(b'0'..b'4')];
                        transaction.put(&key, &thread_index.to_le_bytes())
                    });
                    match result {
                        Ok(()) => match transaction.commit() {
                            Ok(()) => committed += 1,
                            Err(Error::Conflict(_)) => {}
                            Err(error) => panic!("commit: {error}"),
                        },
                        Err(Error::Deadlock(_)) => deadlocks += 1,
                        // A key written by another after this snapshot.
                        Err(Error::Conflict(_)) => {}
                        Err(error) => panic!("put: {error}"),
                    }
                }
                deadlocks
            })
        })
        .collect();
    let deadlocks: u64 = threads.into_iter().map(|thread| thread.join().unwrap()).sum();
    let stats = db.stats().transactions;
    assert_eq!(stats.deadlocks, deadlocks, "every detected deadlock failed exactly one victim");
    assert_eq!(stats.locks_held, 0);
    assert_eq!(stats.open, 0);
}

#[test]
fn writes_past_the_batch_limit_spill_instead_of_failing() {
    // The story: before write sets spilled, a transaction committed as one batch, and the write
    // that would take it past max_batch_size_bytes failed. The write memory limit is now capped
    // by the batch limit, so a transaction that would outgrow one batch spills and commits
    // through tables instead (tests/huge_transactions.rs has the rest).
    let memory = MemFileSystem::new();
    let options = riptide::Options {
        max_batch_size_bytes: 4096,
        max_value_size_bytes: 1024,
        ..small_options(Arc::new(memory.clone()))
    };
    let db = Db::open("/txn", options).unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    let value = [b'v'; 100];
    for index in 0..200 {
        transaction.put(format!("key{index:04}").as_bytes(), &value).unwrap();
    }
    assert!(transaction.spilled_bytes() > 0, "20 KB of writes under a 4 KiB batch limit did not spill");
    // A value past max_value_size_bytes is still refused, and the transaction goes on.
    let huge = vec![0u8; 1025];
    assert!(matches!(transaction.put(b"huge", &huge), Err(Error::InvalidArgument(_))));
    transaction.commit().unwrap();
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 200);
}

#[test]
fn max_lock_count_is_busy_and_the_transaction_goes_on() {
    let (_memory, db) = memory_db();
    let transaction = db.begin(&TransactionOptions { max_lock_count: Some(2), ..Default::default() }).unwrap();
    transaction.put(b"a", b"1").unwrap();
    transaction.put(b"b", b"1").unwrap();
    transaction.put(b"a", b"2").unwrap();
    assert!(matches!(transaction.put(b"c", b"1"), Err(Error::Busy(_))));
    assert_eq!(db.stats().transactions.locks_held, 2);
    transaction.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), None);
}

#[test]
fn optimistic_transactions_take_no_locks() {
    let (_memory, db) = memory_db();
    let mode = options(IsolationLevel::RepeatableRead, ConcurrencyMode::Optimistic);
    let first = db.begin(&mode).unwrap();
    let second = db.begin(&mode).unwrap();
    first.put(b"k", b"first").unwrap();
    second.put(b"k", b"second").unwrap();
    assert_eq!(db.stats().transactions.locks_held, 0);
    first.commit().unwrap();
    assert!(matches!(second.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get(b"k").unwrap(), Some(b"first".to_vec()));
    assert_eq!(db.stats().transactions.conflicts, 1);
}

type Entry = (Vec<u8>, Vec<u8>);

/// Collects a transaction iterator forwards from `seek` (or the start) and backwards from
/// `seek_for_prev` (or the end).
fn both_directions(
    transaction: &riptide::Transaction,
    family: Option<&riptide::ColumnFamily>,
    read: &ReadOptions,
) -> (Vec<Entry>, Vec<Entry>) {
    let open = || match family {
        Some(family) => transaction.iter_cf(family, read).unwrap(),
        None => transaction.iter(read).unwrap(),
    };
    let forward: Vec<_> = open().map(Result::unwrap).collect();
    let mut iterator = open();
    let mut backward = Vec::new();
    iterator.seek_to_last();
    while iterator.valid() {
        backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.prev();
    }
    iterator.status().unwrap();
    (forward, backward)
}

#[test]
fn iterators_merge_own_writes_like_a_model() {
    // Random database contents (some flushed to tables), random own writes, random bounds:
    // forward and backward iteration, seeks and direction changes agree with a BTreeMap.
    for seed in 0..20u64 {
        let (_memory, db) = memory_db();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let key = |rng: &mut SmallRng| format!("k{:02}", rng.gen_range(0..40)).into_bytes();
        for round in 0..60 {
            let k = key(&mut rng);
            if rng.gen_bool(0.8) {
                let v = format!("db{round}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            if round == 30 {
                db.flush().unwrap();
            }
        }
        let transaction = db.begin(&TransactionOptions::default()).unwrap();
        for round in 0..25 {
            let k = key(&mut rng);
            if rng.gen_bool(0.6) {
                let v = format!("own{round}").into_bytes();
                transaction.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                transaction.delete(&k).unwrap();
                model.remove(&k);
            }
        }
        // Writes by others after the snapshot stay invisible.
        db.put(b"k00", b"later").unwrap();
        db.delete(b"k01").unwrap();
        for _ in 0..10 {
            let (mut low, mut high) = (key(&mut rng), key(&mut rng));
            if low > high {
                std::mem::swap(&mut low, &mut high);
            }
            let read = ReadOptions {
                lower_bound: rng.gen_bool(0.5).then(|| low.clone()),
                upper_bound: rng.gen_bool(0.5).then(|| high.clone()),
                ..ReadOptions::default()
            };
            let in_bounds: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .filter(|(k, _)| read.lower_bound.as_ref().is_none_or(|low| *k >= low))
                .filter(|(k, _)| read.upper_bound.as_ref().is_none_or(|high| *k < high))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let (forward, mut backward) = both_directions(&transaction, None, &read);
            assert_eq!(forward, in_bounds, "seed {seed} forward {read:?}");
            backward.reverse();
            assert_eq!(backward, in_bounds, "seed {seed} backward {read:?}");
            // Seek, step forward, turn back, and step again.
            let target = key(&mut rng);
            let mut iterator = transaction.iter(&read).unwrap();
            iterator.seek(&target);
            let expected_at = in_bounds.iter().position(|(k, _)| *k >= target);
            match expected_at {
                None => assert!(!iterator.valid(), "seed {seed}"),
                Some(at) => {
                    assert_eq!(iterator.key(), in_bounds[at].0.as_slice(), "seed {seed} seek");
                    iterator.next();
                    if at + 1 < in_bounds.len() {
                        assert_eq!(iterator.key(), in_bounds[at + 1].0.as_slice(), "seed {seed} next");
                        iterator.prev();
                        assert_eq!(iterator.key(), in_bounds[at].0.as_slice(), "seed {seed} next, prev");
                        iterator.prev();
                        if at > 0 {
                            assert_eq!(iterator.key(), in_bounds[at - 1].0.as_slice(), "seed {seed} prev");
                            iterator.next();
                            assert_eq!(iterator.key(), in_bounds[at].0.as_slice(), "seed {seed} prev, next");
                        } else {
                            assert!(!iterator.valid());
                        }
                    } else {
                        assert!(!iterator.valid());
                    }
                }
            }
            iterator.seek_for_prev(&target);
            match in_bounds.iter().rposition(|(k, _)| *k <= target) {
                None => assert!(!iterator.valid(), "seed {seed}"),
                Some(at) => assert_eq!(iterator.key(), in_bounds[at].0.as_slice(), "seed {seed} seek_for_prev"),
            }
        }
        transaction.rollback().unwrap();
    }
}

#[test]
fn iterators_follow_the_column_family_order() {
    let (_memory, db) = memory_db();
    let mut reverse_order = ColumnFamilyOptions::default();
    reverse_order.comparator = Arc::new(ReverseBytewiseComparator);
    let reverse = db.create_column_family("reverse", reverse_order).unwrap();
    db.put_cf(&reverse, b"b", b"db").unwrap();
    db.put_cf(&reverse, b"d", b"db").unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    transaction.put_cf(&reverse, b"c", b"own").unwrap();
    transaction.put_cf(&reverse, b"a", b"own").unwrap();
    transaction.delete_cf(&reverse, b"d").unwrap();
    let (forward, backward) = both_directions(&transaction, Some(&reverse), &ReadOptions::default());
    let keys: Vec<&[u8]> = forward.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, vec![b"c".as_slice(), b"b", b"a"]);
    let keys: Vec<&[u8]> = backward.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, vec![b"a".as_slice(), b"b", b"c"]);
    // Bounds in the family's order: from "c" down to (not including) "a".
    let read = ReadOptions { lower_bound: Some(b"c".to_vec()), upper_bound: Some(b"a".to_vec()), ..Default::default() };
    let (forward, _) = both_directions(&transaction, Some(&reverse), &read);
    let keys: Vec<&[u8]> = forward.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, vec![b"c".as_slice(), b"b"]);
}

#[test]
fn concurrent_increments_lose_nothing() {
    // Read-modify-write counters under every level that prevents lost updates, in both modes,
    // retried on retryable errors: the final sum is exact.
    //
    // Regression (found by this test as first written: 385 of 400 increments under optimistic
    // REPEATABLE READ): a transaction took its snapshot before registering it with the commit
    // history, and a prune in between (bounded by the visible sequence, which had moved past
    // the snapshot) dropped the very writes its commit had to be checked against. Snapshot and
    // registration now happen under the history's mutex.
    for (level, mode) in [
        (IsolationLevel::RepeatableRead, ConcurrencyMode::Pessimistic),
        (IsolationLevel::RepeatableRead, ConcurrencyMode::Optimistic),
        (IsolationLevel::Serializable, ConcurrencyMode::Pessimistic),
        (IsolationLevel::Serializable, ConcurrencyMode::Optimistic),
        (IsolationLevel::ReadCommitted, ConcurrencyMode::Pessimistic),
    ] {
        let (_memory, db) = memory_db();
        let db = Arc::new(db);
        let threads: Vec<_> = (0..4u64)
            .map(|thread_index| {
                let db = Arc::clone(&db);
                let options = TransactionOptions { lock_timeout: None, ..options(level, mode) };
                thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread_index);
                    let mut done = 0;
                    while done < 100 {
                        let counter = [b'c', rng.gen_range(b'0'..b'3')];
                        let transaction = db.begin(&options).unwrap();
                        let attempt = (|| {
                            // READ COMMITTED needs the lock before the read to prevent lost
                            // updates; get_for_update takes it in every mode.
                            let current = transaction.get_for_update(&counter)?;
                            let value: u64 =
                                current.map_or(0, |bytes| String::from_utf8(bytes).unwrap().parse().unwrap());
                            transaction.put(&counter, (value + 1).to_string().as_bytes())?;
                            Ok::<(), Error>(())
                        })();
                        match attempt.and_then(|()| transaction.commit()) {
                            Ok(()) => done += 1,
                            Err(error) if error.is_retryable() => {}
                            Err(error) => panic!("{level:?} {mode:?}: {error}"),
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let total: u64 = (b'0'..b'3')
            .map(|digit| {
                db.get(&[b'c', digit]).unwrap().map_or(0, |bytes| String::from_utf8(bytes).unwrap().parse().unwrap())
            })
            .sum();
        assert_eq!(total, 400, "{level:?} {mode:?}: lost updates");
    }
}

#[test]
fn a_key_that_failed_its_lock_time_check_keeps_failing_although_its_lock_is_held() {
    // The write of a read-modify-write skips the history check for a key read for update (it
    // was checked when locked). A key whose check failed is locked too, but was never read for
    // update: writing it must still fail.
    let (_memory, db) = memory_db();
    db.put(b"k", b"0").unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    db.put(b"k", b"1").unwrap();
    assert!(matches!(transaction.get_for_update(b"k"), Err(Error::Conflict(_))));
    assert!(matches!(transaction.put(b"k", b"2"), Err(Error::Conflict(_))));
    assert!(matches!(transaction.get_for_update(b"k"), Err(Error::Conflict(_))));
    // A key read for update and then written: one check, and the write goes through.
    db.put(b"j", b"0").unwrap();
    let later = db.begin(&TransactionOptions::default()).unwrap();
    assert_eq!(later.get_for_update(b"j").unwrap(), Some(b"0".to_vec()));
    later.put(b"j", b"1").unwrap();
    later.commit().unwrap();
    assert_eq!(db.get(b"j").unwrap(), Some(b"1".to_vec()));
}
