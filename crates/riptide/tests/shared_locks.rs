//! Shared row locks (`Transaction::get_for_share`, SQL's `LOCK IN SHARE MODE`): sharers do not
//! block each other, they block writers and `get_for_update` until they end, a sharer that
//! writes upgrades its lock, two upgrading sharers deadlock and one of them fails, a locking
//! read gets the same check against writes after the snapshot as `get_for_update`, and in
//! optimistic mode the key is validated at commit.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use riptide::fs::MemFileSystem;
use riptide::{ColumnFamilyOptions, ConcurrencyMode, Db, Error, IsolationLevel, TransactionOptions};

use common::{small_options, write_and_commit_unless_deadlocked};

fn memory_db() -> Db {
    let memory = MemFileSystem::new();
    let db = Db::open("/shared-locks", small_options(Arc::new(memory))).expect("open");
    db.put(b"k", b"v0").unwrap();
    db
}

fn short_wait() -> TransactionOptions {
    TransactionOptions { lock_timeout: Some(Duration::from_millis(30)), ..TransactionOptions::default() }
}

#[test]
fn sharers_read_together_and_keep_writers_out_until_they_end() {
    let db = memory_db();
    let first = db.begin(&TransactionOptions::default()).unwrap();
    let second = db.begin(&TransactionOptions::default()).unwrap();
    assert_eq!(first.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));
    assert_eq!(second.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));
    // A share lock taken twice by the same transaction is held once.
    assert_eq!(first.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));
    assert_eq!(db.stats().transactions.locks_held, 2);

    let writer = db.begin(&short_wait()).unwrap();
    assert!(matches!(writer.put(b"k", b"w"), Err(Error::LockTimeout(_))));
    assert!(matches!(writer.get_for_update(b"k"), Err(Error::LockTimeout(_))));
    // A third sharer is not held back by the writer that gave up.
    let third = db.begin(&short_wait()).unwrap();
    assert_eq!(third.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));

    first.commit().unwrap();
    second.rollback().unwrap();
    assert!(matches!(writer.put(b"k", b"w"), Err(Error::LockTimeout(_))), "the third sharer still holds it");
    third.commit().unwrap();
    // Every sharer is gone. The key did not change after the writer's snapshot, so it locks.
    writer.put(b"k", b"w").unwrap();
    writer.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"w".to_vec()));
    assert_eq!(db.stats().transactions.locks_held, 0);
}

#[test]
fn a_share_lock_waits_for_an_exclusive_holder() {
    let db = memory_db();
    let holder = db.begin(&TransactionOptions::default()).unwrap();
    holder.get_for_update(b"k").unwrap();
    let reader = db.begin(&short_wait()).unwrap();
    assert!(matches!(reader.get_for_share(b"k"), Err(Error::LockTimeout(_))));
    // A plain read takes no lock and reads the snapshot.
    assert_eq!(reader.get(b"k").unwrap(), Some(b"v0".to_vec()));
    holder.rollback().unwrap();
    assert_eq!(reader.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));
}

#[test]
fn a_sharer_that_writes_upgrades_once_the_others_end() {
    let db = Arc::new(memory_db());
    // Long enough never to expire on a working lock manager, short enough that a broken one
    // fails the test instead of hanging it.
    let patient = TransactionOptions { lock_timeout: Some(Duration::from_secs(30)), ..TransactionOptions::default() };
    let upgrader = db.begin(&patient).unwrap();
    let other = db.begin(&patient).unwrap();
    upgrader.get_for_share(b"k").unwrap();
    other.get_for_share(b"k").unwrap();
    let waiting = thread::spawn(move || {
        upgrader.put(b"k", b"upgraded").unwrap();
        upgrader.commit().unwrap();
    });
    while db.stats().transactions.lock_waits == 0 {
        thread::yield_now();
    }
    assert!(!waiting.is_finished(), "the upgrade must wait for the other sharer");
    other.commit().unwrap();
    waiting.join().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"upgraded".to_vec()));
    assert_eq!(db.stats().transactions.locks_held, 0);
}

#[test]
fn two_sharers_that_both_upgrade_deadlock_and_one_commits() {
    let db = Arc::new(memory_db());
    // Long enough never to expire on a working lock manager, short enough that a broken one
    // fails the test instead of hanging it.
    let patient = TransactionOptions { lock_timeout: Some(Duration::from_secs(30)), ..TransactionOptions::default() };
    let first = db.begin(&patient).unwrap();
    let second = db.begin(&patient).unwrap();
    first.get_for_share(b"k").unwrap();
    second.get_for_share(b"k").unwrap();
    let first_thread = thread::spawn(move || write_and_commit_unless_deadlocked(first, None, b"k", b"first").is_none());
    while db.stats().transactions.lock_waits == 0 {
        thread::yield_now();
    }
    let second_committed = write_and_commit_unless_deadlocked(second, None, b"k", b"second").is_none();
    let first_committed = first_thread.join().unwrap();
    assert_ne!(first_committed, second_committed, "exactly one of the two must commit");
    let winner: &[u8] = if first_committed { b"first" } else { b"second" };
    assert_eq!(db.get(b"k").unwrap(), Some(winner.to_vec()));
    let stats = db.stats().transactions;
    assert_eq!((stats.deadlocks, stats.locks_held), (1, 0));
}

#[test]
fn a_share_lock_on_a_key_written_after_the_snapshot_is_a_conflict() {
    let db = memory_db();
    let reader = db.begin(&TransactionOptions::default()).unwrap();
    db.put(b"k", b"newer").unwrap();
    assert!(matches!(reader.get_for_share(b"k"), Err(Error::Conflict(_))));
    // READ COMMITTED reads the latest value under the lock instead.
    let read_committed = db
        .begin(&TransactionOptions { isolation: IsolationLevel::ReadCommitted, ..TransactionOptions::default() })
        .unwrap();
    db.put(b"k", b"latest").unwrap();
    assert_eq!(read_committed.get_for_share(b"k").unwrap(), Some(b"latest".to_vec()));
}

#[test]
fn optimistic_share_reads_are_validated_at_commit() {
    let db = memory_db();
    let optimistic = TransactionOptions { mode: ConcurrencyMode::Optimistic, ..TransactionOptions::default() };
    let reader = db.begin(&optimistic).unwrap();
    assert_eq!(reader.get_for_share(b"k").unwrap(), Some(b"v0".to_vec()));
    reader.put(b"derived", b"from v0").unwrap();
    db.put(b"k", b"changed").unwrap();
    assert!(matches!(reader.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get(b"derived").unwrap(), None);
}

#[test]
fn share_locks_in_a_column_family_and_misuse() {
    let db = memory_db();
    let family = db.create_column_family("cf", ColumnFamilyOptions::default()).unwrap();
    db.put_cf(&family, b"k", b"in cf").unwrap();
    let first = db.begin(&TransactionOptions::default()).unwrap();
    assert_eq!(first.get_for_share_cf(&family, b"k").unwrap(), Some(b"in cf".to_vec()));
    // The same key in the default family is another lock.
    let writer = db.begin(&short_wait()).unwrap();
    writer.put(b"k", b"default").unwrap();
    assert!(matches!(writer.put_cf(&family, b"k", b"w"), Err(Error::LockTimeout(_))));
    let oversized = vec![b'x'; 1 << 20];
    assert!(matches!(first.get_for_share(&oversized), Err(Error::InvalidArgument(_))));
    first.commit().unwrap();
    writer.commit().unwrap();
}
