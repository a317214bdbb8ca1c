//! Transactions: begin, reads (plain and for update), writes, iterators, savepoints, commit,
//! rollback, and two-phase commit by xid (prepare, the list of prepared transactions after a
//! restart, commit or roll back by xid).
//!
//! A transaction handle names a [`TxnObject`]: the engine's `Transaction` in an `Arc` (taken
//! out when the transaction ends), the id of its database and the set of its iterators. Calls
//! clone the `Arc` and run without holding any lock of the ABI, so a call waiting for a row
//! lock never blocks another call on the same transaction, nor the database's close. Commit and
//! rollback need the transaction alone: they destroy its iterators, then take it; if a call is
//! still running on it in another thread, they return `RIPTIDE_MISUSE` and leave it as it was.
//! After commit or rollback (successful or not) the handle stays valid for
//! `riptide_txn_destroy` only; other calls return `RIPTIDE_MISUSE`. Destroying an active
//! transaction rolls it back; destroying a prepared one leaves it prepared (decide it by xid).
//!
//! Concurrency contract: transaction calls are thread-safe (the engine serializes them), with
//! the caveat above for commit and rollback.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use riptide_engine::{ColumnFamily, Transaction};

use crate::db::{deliver_copy, deliver_pinned, family_of, with_db, with_read_options, DbObject};
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::iterator::{Cursor, IteratorObject, Parent};
use crate::memory::{bytes, malloc_list, out};
use crate::options::TxnOptionsObject;
use crate::snapshot::adopt_snapshot;
use crate::{
    from_handle, riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t, riptide_iterator_t, riptide_pinnable_t,
    riptide_readoptions_t, riptide_snapshot_t, riptide_txn_options_t, riptide_txn_t, to_handle,
};

/// What a `riptide_txn_t` handle names; see the module documentation.
pub(crate) struct TxnObject {
    db_id: u64,
    transaction: Mutex<Option<Arc<Transaction>>>,
    iterators: Mutex<HashSet<u64>>,
    database: Weak<DbObject>,
}

impl TxnObject {
    /// Forgets an iterator that was destroyed on its own.
    pub(crate) fn disown(&self, handle: u64) {
        self.iterators.lock().remove(&handle);
    }

    fn close_iterators(&self) {
        let iterators = std::mem::take(&mut *self.iterators.lock());
        for iterator in iterators {
            drop(handle::remove_any(iterator));
        }
    }
}

impl Drop for TxnObject {
    fn drop(&mut self) {
        // The iterators hold the transaction too; closing them lets it roll back now.
        self.close_iterators();
    }
}

fn ended() -> CapiError {
    CapiError::misuse("riptide_txn_t used after commit or rollback")
}

fn with_txn<R>(
    txn: *const riptide_txn_t,
    body: impl FnOnce(&Arc<TxnObject>, &Arc<Transaction>) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    let object = handle::get::<TxnObject>(to_handle(txn), Kind::Transaction)?;
    let transaction = object.transaction.lock().clone().ok_or_else(ended)?;
    body(&object, &transaction)
}

/// The column family `cf` names for a transaction of database `db_id` (NULL: none given).
fn family(db_id: u64, cf: Option<*const riptide_cf_t>) -> Result<Option<ColumnFamily>, CapiError> {
    cf.map(|cf| family_of(db_id, cf).map(|object| object.cf.clone())).transpose()
}

/// Begins a transaction with `options` (NULL: the defaults). Destroy it with
/// `riptide_txn_destroy` after commit or rollback (destroying it first rolls it back).
///
/// # Safety
/// `out_txn` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_begin(
    db: *const riptide_db_t,
    options: *const riptide_txn_options_t,
    out_txn: *mut *mut riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_txn, "out_txn") }?;
        let options = if options.is_null() {
            riptide_engine::TransactionOptions::default()
        } else {
            handle::get::<TxnOptionsObject>(to_handle(options), Kind::TxnOptions)?.0.read().clone()
        };
        *slot = with_db(db, |object, database| {
            let transaction = database.begin(&options)?;
            let child = Arc::new(TxnObject {
                db_id: object.id,
                transaction: Mutex::new(Some(Arc::new(transaction))),
                iterators: Mutex::new(HashSet::new()),
                database: Arc::downgrade(object),
            });
            object.adopt(Kind::Transaction, child).map(from_handle)
        })?;
        Ok(())
    })
}

/// Destroys a transaction handle, rolling back an active transaction (a prepared one stays
/// prepared). `RIPTIDE_MISUSE` for NULL, a second destroy, or a transaction whose database was
/// closed (closing destroyed it).
#[no_mangle]
pub extern "C" fn riptide_txn_destroy(txn: *mut riptide_txn_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || {
        let handle = to_handle(txn);
        let object = handle::remove::<TxnObject>(handle, Kind::Transaction)?;
        if let Some(parent) = object.database.upgrade() {
            parent.disown(handle);
        }
        Ok(())
    })
}

/// Takes the transaction out of its handle for commit or rollback (see the module docs).
fn take(txn: *const riptide_txn_t) -> Result<Transaction, CapiError> {
    let object = handle::get::<TxnObject>(to_handle(txn), Kind::Transaction)?;
    let shared = object.transaction.lock().take().ok_or_else(ended)?;
    object.close_iterators();
    Arc::try_unwrap(shared).map_err(|shared| {
        *object.transaction.lock() = Some(shared);
        CapiError::misuse("riptide_txn_t committed or rolled back while another thread is using it")
    })
}

/// Commits: validates (REPEATABLE READ, SERIALIZABLE) and writes every change atomically. On
/// `RIPTIDE_CONFLICT` nothing was written (retry the whole transaction). A prepared transaction
/// commits its prepared writes. Destroys the transaction's iterators; the transaction has ended
/// either way.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_commit(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(take(txn)?.commit()?))
}

/// Rolls back: discards every write and releases the locks (a prepared transaction is rolled
/// back durably). Destroys the transaction's iterators.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_rollback(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(take(txn)?.rollback()?))
}

/// How a transactional read locks its key.
#[derive(Clone, Copy)]
enum ReadLock {
    /// No lock: the snapshot's value.
    None,
    /// An exclusive lock (`get_for_update`).
    ForUpdate,
    /// A shared lock (`get_for_share`).
    ForShare,
}

/// # Safety
/// `key` must be valid for `key_len` reads.
unsafe fn read(
    txn: *const riptide_txn_t,
    cf: Option<*const riptide_cf_t>,
    key: *const u8,
    key_len: usize,
    lock: ReadLock,
) -> Result<Option<Vec<u8>>, CapiError> {
    // SAFETY: forwarded contract.
    let key = unsafe { bytes(key, key_len, "key") }?;
    with_txn(txn, |object, transaction| {
        let value = match (family(object.db_id, cf)?, lock) {
            (None, ReadLock::None) => transaction.get(key)?,
            (None, ReadLock::ForUpdate) => transaction.get_for_update(key)?,
            (None, ReadLock::ForShare) => transaction.get_for_share(key)?,
            (Some(cf), ReadLock::None) => transaction.get_cf(&cf, key)?,
            (Some(cf), ReadLock::ForUpdate) => transaction.get_for_update_cf(&cf, key)?,
            (Some(cf), ReadLock::ForShare) => transaction.get_for_share_cf(&cf, key)?,
        };
        Ok(value)
    })
}

/// # Safety
/// As the exported getters.
unsafe fn get_copy(
    txn: *const riptide_txn_t,
    cf: Option<*const riptide_cf_t>,
    key: (*const u8, usize),
    lock: ReadLock,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let (value_slot, len_slot) = unsafe { (out(out_value, "out_value")?, out(out_value_len, "out_value_len")?) };
    // SAFETY: forwarded contract.
    deliver_copy(unsafe { read(txn, cf, key.0, key.1, lock) }?, value_slot, len_slot)
}

/// Reads `key` from the default column family: the transaction's own write if any, else the
/// database at its snapshot (latest committed state under READ COMMITTED). As `riptide_get`:
/// a `malloc`ed copy, or NULL when absent.
///
/// # Safety
/// `key` must be valid for `key_len` reads; out-parameters valid for writes; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get(
    txn: *const riptide_txn_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, None, (key, key_len), ReadLock::None, out_value, out_value_len) })
}

/// `riptide_txn_get` in column family `cf`.
///
/// # Safety
/// As `riptide_txn_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_cf(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, Some(cf), (key, key_len), ReadLock::None, out_value, out_value_len) })
}

/// Reads `key` for update: locks it exclusively (pessimistic; may return `RIPTIDE_LOCK_TIMEOUT`,
/// `RIPTIDE_DEADLOCK`, `RIPTIDE_BUSY`, `RIPTIDE_CONFLICT`) and makes the commit fail if another
/// transaction writes it after the snapshot. Returns the value as `riptide_txn_get`.
///
/// # Safety
/// As `riptide_txn_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_for_update(
    txn: *const riptide_txn_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, None, (key, key_len), ReadLock::ForUpdate, out_value, out_value_len) })
}

/// `riptide_txn_get_for_update` in column family `cf`.
///
/// # Safety
/// As `riptide_txn_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_for_update_cf(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, Some(cf), (key, key_len), ReadLock::ForUpdate, out_value, out_value_len) })
}

/// Reads `key` under a shared lock (SQL's `LOCK IN SHARE MODE`): as
/// `riptide_txn_get_for_update`, except that in pessimistic mode the lock is shared, so other
/// transactions may share-lock and read the key too while none may write it until this one
/// ends. A later write of the key by this transaction upgrades the lock (two sharers that both
/// upgrade deadlock: one gets `RIPTIDE_DEADLOCK`).
///
/// # Safety
/// As `riptide_txn_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_for_share(
    txn: *const riptide_txn_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, None, (key, key_len), ReadLock::ForShare, out_value, out_value_len) })
}

/// `riptide_txn_get_for_share` in column family `cf`.
///
/// # Safety
/// As `riptide_txn_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_for_share_cf(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { get_copy(txn, Some(cf), (key, key_len), ReadLock::ForShare, out_value, out_value_len) })
}

/// `riptide_txn_get` into a pinned value handle (see `riptide_get_pinned`); `cf` may be NULL
/// for the default column family.
///
/// # Safety
/// `key` must be valid for `key_len` reads; `out_pinnable` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_get_pinned(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_pinnable: *mut *mut riptide_pinnable_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_pinnable, "out_pinnable") }?;
        let cf = (!cf.is_null()).then_some(cf);
        // SAFETY: by the function's contract.
        deliver_pinned(unsafe { read(txn, cf, key, key_len, ReadLock::None) }?, slot)
    })
}

/// # Safety
/// `key` and `value` must be valid for their lengths.
unsafe fn write(
    txn: *const riptide_txn_t,
    cf: Option<*const riptide_cf_t>,
    key: (*const u8, usize),
    value: Option<(*const u8, usize)>,
) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let key = unsafe { bytes(key.0, key.1, "key") }?;
    // SAFETY: forwarded contract.
    let value = value.map(|(pointer, len)| unsafe { bytes(pointer, len, "value") }).transpose()?;
    with_txn(txn, |object, transaction| {
        match (family(object.db_id, cf)?, value) {
            (None, Some(value)) => transaction.put(key, value)?,
            (None, None) => transaction.delete(key)?,
            (Some(cf), Some(value)) => transaction.put_cf(&cf, key, value)?,
            (Some(cf), None) => transaction.delete_cf(&cf, key)?,
        }
        Ok(())
    })
}

/// Stores `value` under `key` in the default column family when the transaction commits.
/// Pessimistic: locks `key` first (may return `RIPTIDE_LOCK_TIMEOUT`, `RIPTIDE_DEADLOCK`,
/// `RIPTIDE_BUSY` or `RIPTIDE_CONFLICT`; the transaction is then unchanged).
///
/// # Safety
/// `key` and `value` must be valid for their lengths; `err` NULL or a `riptide_error_t *`
/// variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_put(
    txn: *const riptide_txn_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write(txn, None, (key, key_len), Some((value, value_len))) })
}

/// `riptide_txn_put` in column family `cf`.
///
/// # Safety
/// As `riptide_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_put_cf(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write(txn, Some(cf), (key, key_len), Some((value, value_len))) })
}

/// Deletes `key` from the default column family when the transaction commits (locking as
/// `riptide_txn_put`).
///
/// # Safety
/// As `riptide_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_delete(
    txn: *const riptide_txn_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write(txn, None, (key, key_len), None) })
}

/// `riptide_txn_delete` in column family `cf`.
///
/// # Safety
/// As `riptide_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_delete_cf(
    txn: *const riptide_txn_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write(txn, Some(cf), (key, key_len), None) })
}

/// Creates an iterator over the transaction's view of `cf` (NULL: the default column family):
/// its own writes made before this call merged with the database at its snapshot. Bounds come
/// from `options` (NULL: none); their snapshot is ignored under REPEATABLE READ and
/// SERIALIZABLE. Use it with the `riptide_iterator_*` calls; it is destroyed at the latest
/// when the transaction ends.
///
/// # Safety
/// `out_iterator` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_iterator_create(
    txn: *const riptide_txn_t,
    options: *const riptide_readoptions_t,
    cf: *const riptide_cf_t,
    out_iterator: *mut *mut riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_iterator, "out_iterator") }?;
        *slot = with_txn(txn, |object, transaction| {
            let cf = family(object.db_id, (!cf.is_null()).then_some(cf))?;
            let cursor = with_read_options(object.db_id, options, |read| {
                Cursor::of_transaction(Arc::clone(transaction), |transaction| match &cf {
                    None => transaction.iter(read),
                    Some(cf) => transaction.iter_cf(cf, read),
                })
            })?;
            let child = Arc::new(IteratorObject {
                cursor: parking_lot::Mutex::new(cursor),
                parent: Parent::Txn(Arc::downgrade(object)),
            });
            let handle = handle::insert(Kind::Iterator, child)?;
            object.iterators.lock().insert(handle);
            Ok(from_handle(handle))
        })?;
        Ok(())
    })
}

fn simple(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
    step: fn(&Transaction) -> riptide_engine::Result<()>,
) -> riptide_code_t {
    call(err, || with_txn(txn, |_, transaction| Ok(step(transaction)?)))
}

/// Opens a savepoint; savepoints nest.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_savepoint(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    simple(txn, err, Transaction::savepoint)
}

/// Undoes the writes since the newest open savepoint and closes it (locks are kept).
/// `RIPTIDE_INVALID_ARGUMENT` when no savepoint is open.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_rollback_to_savepoint(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    simple(txn, err, Transaction::rollback_to_savepoint)
}

/// Closes the newest open savepoint, keeping its writes.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_release_savepoint(
    txn: *const riptide_txn_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    simple(txn, err, Transaction::release_savepoint)
}

/// Prepares the transaction for two-phase commit under `xid` (1 to 256 bytes, unique among
/// prepared transactions): after success it can no longer fail to commit; its writes are
/// durable but invisible and its locks kept until `riptide_txn_commit`/`riptide_txn_rollback`,
/// or `riptide_commit_prepared`/`riptide_rollback_prepared` by xid (also after a restart).
///
/// # Safety
/// `xid` must be valid for `xid_len` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_prepare(
    txn: *const riptide_txn_t,
    xid: *const u8,
    xid_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let xid = unsafe { bytes(xid, xid_len, "xid") }?;
        with_txn(txn, |_, transaction| Ok(transaction.prepare(xid)?))
    })
}

/// Counters of the transaction: its id (ids grow in begin order), keys written, memory of its
/// writes, bytes spilled to files. Any out-parameter may be NULL.
///
/// # Safety
/// Each out-parameter must be NULL or valid for a write; `err` NULL or a `riptide_error_t *`
/// variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_info(
    txn: *const riptide_txn_t,
    out_id: *mut u64,
    out_write_count: *mut u64,
    out_write_memory_bytes: *mut u64,
    out_spilled_bytes: *mut u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        let values = with_txn(txn, |_, transaction| {
            Ok([
                transaction.id(),
                transaction.write_count() as u64,
                transaction.write_memory_bytes() as u64,
                transaction.spilled_bytes(),
            ])
        })?;
        for (pointer, value) in
            [out_id, out_write_count, out_write_memory_bytes, out_spilled_bytes].into_iter().zip(values)
        {
            if !pointer.is_null() {
                // SAFETY: non-NULL out-parameters are writable by the function's contract.
                unsafe { *pointer = value };
            }
        }
        Ok(())
    })
}

/// A new snapshot handle of the transaction's snapshot (REPEATABLE READ and SERIALIZABLE), or
/// NULL in `*out_snapshot` under READ COMMITTED. Release it with `riptide_snapshot_release`.
///
/// # Safety
/// `out_snapshot` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_snapshot(
    txn: *const riptide_txn_t,
    out_snapshot: *mut *mut riptide_snapshot_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_snapshot, "out_snapshot") }?;
        *slot = with_txn(txn, |object, transaction| match (transaction.snapshot(), object.database.upgrade()) {
            (Some(snapshot), Some(database)) => adopt_snapshot(&database, snapshot.clone()),
            (Some(_), None) => Err(CapiError::misuse("the transaction's database was closed")),
            (None, _) => Ok(std::ptr::null_mut()),
        })?;
        Ok(())
    })
}

/// The xids of the prepared transactions waiting for a decision (those prepared since open and
/// those recovered at open), in byte order: `*out_xids` is an array of `*out_count` byte
/// strings with their lengths in `*out_lengths` (free with `riptide_free_bytes_list`).
///
/// # Safety
/// The out-parameters must be valid for writes; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_prepared_transactions(
    db: *const riptide_db_t,
    out_xids: *mut *mut *mut u8,
    out_lengths: *mut *mut usize,
    out_count: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (xids_slot, lengths_slot, count_slot) =
            unsafe { (out(out_xids, "out_xids")?, out(out_lengths, "out_lengths")?, out(out_count, "out_count")?) };
        let xids = with_db(db, |_, database| Ok(database.prepared_transactions()))?;
        let (array, lengths) = malloc_list(&xids)?;
        *xids_slot = array;
        *lengths_slot = lengths;
        *count_slot = xids.len();
        Ok(())
    })
}

/// # Safety
/// `xid` must be valid for `xid_len` reads.
unsafe fn decide(db: *const riptide_db_t, xid: *const u8, xid_len: usize, commit: bool) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let xid = unsafe { bytes(xid, xid_len, "xid") }?;
    with_db(
        db,
        |_, database| {
            if commit {
                Ok(database.commit_prepared(xid)?)
            } else {
                Ok(database.rollback_prepared(xid)?)
            }
        },
    )
}

/// Commits the prepared transaction `xid` (durably). `RIPTIDE_INVALID_ARGUMENT` when no
/// transaction is prepared under `xid`.
///
/// # Safety
/// `xid` must be valid for `xid_len` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_commit_prepared(
    db: *const riptide_db_t,
    xid: *const u8,
    xid_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { decide(db, xid, xid_len, true) })
}

/// Rolls back the prepared transaction `xid` (durably). `RIPTIDE_INVALID_ARGUMENT` when no
/// transaction is prepared under `xid`.
///
/// # Safety
/// As `riptide_commit_prepared`.
#[no_mangle]
pub unsafe extern "C" fn riptide_rollback_prepared(
    db: *const riptide_db_t,
    xid: *const u8,
    xid_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { decide(db, xid, xid_len, false) })
}
