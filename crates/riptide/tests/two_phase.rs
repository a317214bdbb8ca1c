//! Two-phase commit: `prepare(xid)` makes a transaction durable but invisible; it is decided
//! later by handle or by xid; after a crash `Db::open` recovers it as prepared (locks and all)
//! and `prepared_transactions` lists it; a commit interrupted between its log record and the
//! removal of its file is recognised as committed, never applied twice.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use riptide::fs::{FileLock, FileSystem, MemFileSystem, PowerLossMode, RandomAccessFile, WritableFile};
use riptide::{ConcurrencyMode, Db, Error, IsolationLevel, ReadOptions, Result, TransactionOptions};

use common::small_options;

fn open(memory: &MemFileSystem) -> Db {
    Db::open("/2pc", small_options(Arc::new(memory.clone()))).expect("open")
}

fn no_wait() -> TransactionOptions {
    TransactionOptions { lock_timeout: Some(Duration::ZERO), ..TransactionOptions::default() }
}

#[test]
fn prepared_writes_are_invisible_until_committed_by_handle_or_by_xid() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let first = db.begin(&TransactionOptions::default()).unwrap();
    first.put(b"a", b"1").unwrap();
    first.prepare(b"xid-1").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.prepared_transactions(), vec![b"xid-1".to_vec()]);
    // A prepared transaction only commits or rolls back.
    assert!(matches!(first.put(b"b", b"2"), Err(Error::InvalidArgument(_))));
    assert!(matches!(first.get(b"a"), Err(Error::InvalidArgument(_))));
    first.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert!(db.prepared_transactions().is_empty());

    let second = db.begin(&TransactionOptions::default()).unwrap();
    second.put(b"b", b"2").unwrap();
    second.prepare(b"xid-2").unwrap();
    drop(second); // does not roll back a prepared transaction
    assert_eq!(db.prepared_transactions(), vec![b"xid-2".to_vec()]);
    db.commit_prepared(b"xid-2").unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert!(matches!(db.commit_prepared(b"xid-2"), Err(Error::InvalidArgument(_))));
    let stats = db.stats().transactions;
    assert_eq!((stats.committed, stats.open, stats.locks_held), (2, 0, 0));
    // The files are gone.
    assert!(memory.list(Path::new("/2pc")).unwrap().iter().all(|name| !name.ends_with(".txn")));
}

#[test]
fn rollback_of_a_prepared_transaction_leaves_nothing() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    transaction.put(b"k", b"v").unwrap();
    transaction.prepare(b"xid").unwrap();
    transaction.rollback().unwrap();
    let other = db.begin(&no_wait()).unwrap();
    other.put(b"k", b"other").unwrap(); // the lock is free again
    other.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"other".to_vec()));
    let third = db.begin(&TransactionOptions::default()).unwrap();
    third.put(b"gone", b"v").unwrap();
    third.prepare(b"xid-3").unwrap();
    drop(third);
    db.rollback_prepared(b"xid-3").unwrap();
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert!(db.prepared_transactions().is_empty());
    assert!(matches!(db.rollback_prepared(b"xid-3"), Err(Error::InvalidArgument(_))));
}

#[test]
fn xids_are_checked() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    assert!(matches!(transaction.prepare(b""), Err(Error::InvalidArgument(_))));
    assert!(matches!(transaction.prepare(&[b'x'; 257]), Err(Error::InvalidArgument(_))));
    transaction.prepare(b"same").unwrap();
    let duplicate = db.begin(&TransactionOptions::default()).unwrap();
    assert!(matches!(duplicate.prepare(b"same"), Err(Error::InvalidArgument(_))));
    // The failed prepare left the transaction usable.
    duplicate.put(b"k", b"v").unwrap();
    duplicate.commit().unwrap();
    transaction.rollback().unwrap();
}

#[test]
fn a_prepared_transaction_cannot_be_invalidated() {
    // Between prepare and commit, others' writes to what the prepared transaction wrote (locks,
    // and the guard for optimistic writers) or read under SERIALIZABLE (the guard) fail.
    let memory = MemFileSystem::new();
    let db = open(&memory);
    db.put(b"read", b"0").unwrap();
    let serializable = TransactionOptions { isolation: IsolationLevel::Serializable, ..TransactionOptions::default() };
    let prepared = db.begin(&serializable).unwrap();
    assert_eq!(prepared.get(b"read").unwrap(), Some(b"0".to_vec()));
    let scan = ReadOptions {
        lower_bound: Some(b"range/".to_vec()),
        upper_bound: Some(b"range0".to_vec()),
        ..Default::default()
    };
    assert_eq!(prepared.iter(&scan).unwrap().count(), 0);
    prepared.put(b"written", b"prepared").unwrap();
    prepared.prepare(b"guarded").unwrap();

    let pessimistic = db.begin(&no_wait()).unwrap();
    assert!(matches!(pessimistic.put(b"written", b"x"), Err(Error::LockTimeout(_))));
    pessimistic.put(b"read", b"1").unwrap();
    assert!(matches!(pessimistic.commit(), Err(Error::Conflict(_))));
    let optimistic_options = TransactionOptions { mode: ConcurrencyMode::Optimistic, ..TransactionOptions::default() };
    let optimistic = db.begin(&optimistic_options).unwrap();
    optimistic.put(b"written", b"x").unwrap();
    assert!(matches!(optimistic.commit(), Err(Error::Conflict(_))));
    let phantom = db.begin(&optimistic_options).unwrap();
    phantom.put(b"range/1", b"x").unwrap();
    assert!(matches!(phantom.commit(), Err(Error::Conflict(_))));
    // Reading is fine, and sees the committed state.
    let reader = db.begin(&TransactionOptions::default()).unwrap();
    assert_eq!(reader.get(b"written").unwrap(), None);
    reader.commit().unwrap();

    db.commit_prepared(b"guarded").unwrap();
    assert_eq!(db.get(b"written").unwrap(), Some(b"prepared".to_vec()));
    // Decided: the guard is gone.
    let after = db.begin(&no_wait()).unwrap();
    after.put(b"read", b"2").unwrap();
    after.put(b"range/1", b"y").unwrap();
    after.commit().unwrap();
}

#[test]
fn prepare_validates_like_a_commit() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    let transaction =
        db.begin(&TransactionOptions { mode: ConcurrencyMode::Optimistic, ..Default::default() }).unwrap();
    transaction.put(b"k", b"mine").unwrap();
    db.put(b"k", b"theirs").unwrap();
    assert!(matches!(transaction.prepare(b"late"), Err(Error::Conflict(_))));
    assert!(db.prepared_transactions().is_empty());
    transaction.rollback().unwrap();
}

#[test]
fn prepared_transactions_survive_a_crash_with_their_locks() {
    let memory = MemFileSystem::new();
    {
        let db = open(&memory);
        let family = db.create_column_family("orders", riptide::ColumnFamilyOptions::default()).unwrap();
        let transaction = db.begin(&TransactionOptions::default()).unwrap();
        transaction.put(b"stock", b"41").unwrap();
        transaction.put_cf(&family, b"order/1", b"1 x stock").unwrap();
        transaction.prepare(b"binlog-xid-7").unwrap();
        let undecided = db.begin(&TransactionOptions::default()).unwrap();
        undecided.put(b"never", b"prepared").unwrap();
        // Power loss: unsynced data is gone; the prepared transaction's file was synced.
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        drop(undecided);
        drop(transaction);
        drop(family);
    }
    let db = open(&memory);
    assert_eq!(db.stats().recovery.prepared_transactions_recovered, 1);
    assert_eq!(db.prepared_transactions(), vec![b"binlog-xid-7".to_vec()]);
    let family = db.column_family("orders").unwrap();
    assert_eq!(db.get(b"stock").unwrap(), None);
    assert_eq!(db.get(b"never").unwrap(), None);
    // Its locks are held again.
    let blocked = db.begin(&no_wait()).unwrap();
    assert!(matches!(blocked.put(b"stock", b"0"), Err(Error::LockTimeout(_))));
    drop(blocked);
    db.commit_prepared(b"binlog-xid-7").unwrap();
    assert_eq!(db.get(b"stock").unwrap(), Some(b"41".to_vec()));
    assert_eq!(db.get_cf(&family, b"order/1").unwrap(), Some(b"1 x stock".to_vec()));
    drop(family);
    drop(db);
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    let db = open(&memory);
    assert!(db.prepared_transactions().is_empty(), "committed and synced: decided for good");
    assert_eq!(db.get(b"stock").unwrap(), Some(b"41".to_vec()));
}

/// The story: `prepare` wrote and synced its own file but not the WAL, so a write the
/// transaction had read, acknowledged without sync, could be lost by a power loss while the
/// prepared transaction survived, and its later commit would rest on a value that no longer
/// existed. Prepare now syncs the WAL first.
#[test]
fn what_a_prepared_transaction_read_survives_a_power_loss_with_it() {
    let memory = MemFileSystem::new();
    let db = open(&memory);
    db.put(b"balance", b"100").unwrap();
    let transaction = db.begin(&TransactionOptions::default()).unwrap();
    assert_eq!(transaction.get_for_update(b"balance").unwrap(), Some(b"100".to_vec()));
    transaction.put(b"balance", b"90").unwrap();
    transaction.prepare(b"transfer").unwrap();
    std::mem::forget(transaction);
    std::mem::forget(db);
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    let db = open(&memory);
    assert_eq!(db.prepared_transactions(), vec![b"transfer".to_vec()]);
    assert_eq!(db.get(b"balance").unwrap(), Some(b"100".to_vec()), "the value the transaction read was lost");
    db.commit_prepared(b"transfer").unwrap();
    assert_eq!(db.get(b"balance").unwrap(), Some(b"90".to_vec()));
}

#[test]
fn a_torn_prepare_is_dropped_at_open() {
    let memory = MemFileSystem::new();
    drop(open(&memory));
    // A prepare that died while writing its file (it never returned).
    let mut file = memory.create(Path::new("/2pc/000999.txn")).unwrap();
    file.append(b"RPTDTXN\x01 half of a file").unwrap();
    file.sync().unwrap();
    drop(file);
    memory.sync_dir(Path::new("/2pc")).unwrap();
    let db = open(&memory);
    assert_eq!(db.stats().recovery.prepared_files_dropped, 1);
    assert!(db.prepared_transactions().is_empty());
    assert!(!memory.exists(Path::new("/2pc/000999.txn")));
}

/// A file system that fails removals of prepared-transaction files while `refuse` is set.
struct RefuseTxnRemoval {
    inner: MemFileSystem,
    refuse: Arc<AtomicBool>,
}

impl FileSystem for RefuseTxnRemoval {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        if self.refuse.load(Ordering::SeqCst) && path.extension().is_some_and(|extension| extension == "txn") {
            return Err(Error::Io {
                context: format!("remove {}: refused by the test", path.display()),
                source: std::io::Error::from_raw_os_error(5),
            });
        }
        self.inner.remove(path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.inner.remove_dir(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[test]
fn a_commit_cut_before_its_file_was_removed_is_not_applied_twice() {
    // The crash comes after the commit record was synced and before the prepared file was
    // removed. Meanwhile the key was overwritten by a later transaction, and the memtables were
    // flushed (so the log with the commit marker is no longer replayed): recovery must find the
    // marker in the log the commit pinned and see the transaction as committed. Re-applying it
    // would bring the overwritten value back; listing it as prepared would let MariaDB commit
    // it a second time.
    for flush_before_crash in [false, true] {
        let memory = MemFileSystem::new();
        let refuse = Arc::new(AtomicBool::new(false));
        let file_system = Arc::new(RefuseTxnRemoval { inner: memory.clone(), refuse: Arc::clone(&refuse) });
        {
            let db = Db::open("/2pc", small_options(file_system)).unwrap();
            let transaction = db.begin(&TransactionOptions::default()).unwrap();
            transaction.put(b"k", b"prepared value").unwrap();
            transaction.prepare(b"xid").unwrap();
            refuse.store(true, Ordering::SeqCst);
            let error = db.commit_prepared(b"xid").expect_err("the file removal fails");
            assert!(error.is_io(), "{error}");
            refuse.store(false, Ordering::SeqCst);
            assert_eq!(db.get(b"k").unwrap(), Some(b"prepared value".to_vec()), "committed nonetheless");
            db.put_opt(b"k", b"later value", &riptide::WriteOptions { sync: true }).unwrap();
            if flush_before_crash {
                db.flush().unwrap();
                // A second flush syncs the directory after the first one's log deletions, so a
                // log deleted then stays deleted through the power loss.
                db.put(b"other", b"v").unwrap();
                db.flush().unwrap();
            }
            memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        }
        let db = open(&memory);
        assert!(db.prepared_transactions().is_empty(), "flush {flush_before_crash}: listed as undecided");
        assert_eq!(db.stats().recovery.prepared_transactions_committed, 1, "flush {flush_before_crash}");
        assert_eq!(db.get(b"k").unwrap(), Some(b"later value".to_vec()), "flush {flush_before_crash}");
    }
}
