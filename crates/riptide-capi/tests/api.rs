//! Rust-side tests of the exported functions: the paths where the ABI's own machinery matters
//! (handle lifetimes across transactions, iterators and close), called as C would call them.

use std::ffi::CString;
use std::ptr::null_mut;

use riptide::db::*;
use riptide::iterator::*;
use riptide::options::*;
use riptide::txn::*;
use riptide::*;

fn open(dir: &std::path::Path) -> *mut riptide_db_t {
    let path = CString::new(dir.join("db").to_str().unwrap()).unwrap();
    let mut db = null_mut();
    // SAFETY: valid C string and out-parameter.
    assert_eq!(unsafe { riptide_open(path.as_ptr(), std::ptr::null(), &mut db, null_mut()) }, RIPTIDE_OK);
    db
}

#[test]
fn a_transaction_iterator_dies_with_its_transaction_and_the_transaction_with_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut txn = null_mut();
    let mut iterator = null_mut();
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_txn_begin(db, std::ptr::null(), &mut txn, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_put(txn, b"k".as_ptr(), 1, b"v".as_ptr(), 1, null_mut()), RIPTIDE_OK);
        assert_eq!(
            riptide_txn_iterator_create(txn, std::ptr::null(), std::ptr::null(), &mut iterator, null_mut()),
            RIPTIDE_OK
        );
        assert_eq!(riptide_iterator_seek_to_first(iterator, null_mut()), RIPTIDE_OK);
        let mut len = 0;
        let key = riptide_iterator_key(iterator, &mut len);
        assert_eq!(std::slice::from_raw_parts(key, len), b"k");
        // Rollback destroys the iterator, which borrowed the transaction.
        assert_eq!(riptide_txn_rollback(txn, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_iterator_next(iterator, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_destroy(txn), RIPTIDE_OK);

        // A live transaction with a live iterator is closed by the database's close.
        assert_eq!(riptide_txn_begin(db, std::ptr::null(), &mut txn, null_mut()), RIPTIDE_OK);
        assert_eq!(
            riptide_txn_iterator_create(txn, std::ptr::null(), std::ptr::null(), &mut iterator, null_mut()),
            RIPTIDE_OK
        );
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_iterator_valid(iterator), 0);
        assert_eq!(riptide_iterator_destroy(iterator), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_destroy(txn), RIPTIDE_MISUSE);
    }
    // The directory lock was released: the database opens again.
    let db = open(dir.path());
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_close(db, null_mut()) }, RIPTIDE_OK);
}

#[test]
fn commit_refuses_while_another_thread_is_inside_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut options = null_mut();
    let mut holder = null_mut();
    let mut waiter = null_mut();
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_txn_options_create(&mut options, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_options_set_lock_timeout_us(options, 2_000_000, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_begin(db, options, &mut holder, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_begin(db, options, &mut waiter, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_put(holder, b"k".as_ptr(), 1, b"1".as_ptr(), 1, null_mut()), RIPTIDE_OK);
    }
    let waiter_value = waiter as usize;
    // The waiter blocks on the holder's lock in another thread...
    let thread = std::thread::spawn(move || {
        let waiter = waiter_value as *mut riptide_txn_t;
        // SAFETY: a live handle and valid buffers.
        unsafe { riptide_txn_put(waiter, b"k".as_ptr(), 1, b"2".as_ptr(), 1, null_mut()) }
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    // ...so committing the waiter now is misuse and changes nothing.
    // SAFETY: live handles.
    unsafe {
        assert_eq!(riptide_txn_commit(waiter, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_commit(holder, null_mut()), RIPTIDE_OK);
    }
    // Once the holder committed, the waiter gets the lock and (snapshot isolation) a conflict.
    assert_eq!(thread.join().unwrap(), RIPTIDE_CONFLICT);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(riptide_txn_rollback(waiter, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_destroy(waiter), RIPTIDE_OK);
        assert_eq!(riptide_txn_destroy(holder), RIPTIDE_OK);
        assert_eq!(riptide_txn_options_destroy(options), RIPTIDE_OK);
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
    }
}
