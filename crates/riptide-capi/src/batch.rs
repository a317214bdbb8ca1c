//! Write batches: puts and deletes, in any column families of one database, applied
//! atomically by `riptide_write` (all or nothing, also across a crash).
//!
//! A batch is not tied to a database until a column family handle is used with it: from then
//! on (until `riptide_batch_clear`) it may only take column families of that database and be
//! written to it, since column family ids mean nothing in another database. `riptide_write`
//! leaves the batch as it was, so it can be written again or cleared and reused.
//!
//! Concurrency contract: a batch is thread-safe (its operations serialize on its mutex), but
//! the order of puts from several threads is whatever the threads make it.

use std::sync::Arc;

use parking_lot::Mutex;
use riptide_engine::WriteBatch;

use crate::db::{with_db, write_options};
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::{bytes, out};
use crate::{
    from_handle, riptide_batch_t, riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t, riptide_writeoptions_t,
    to_handle,
};

struct BatchState {
    batch: WriteBatch,
    /// The database of the column families used in the batch, if any was.
    db_id: Option<u64>,
}

/// What a `riptide_batch_t` handle names.
pub(crate) struct BatchObject(Mutex<BatchState>);

fn with_batch<R>(
    batch: *const riptide_batch_t,
    body: impl FnOnce(&mut BatchState) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    let object = handle::get::<BatchObject>(to_handle(batch), Kind::Batch)?;
    let mut state = object.0.lock();
    body(&mut state)
}

/// Checks that `cf` may join a batch bound to `db_id` (if bound) and binds it.
fn bind(state: &mut BatchState, cf: *const riptide_cf_t) -> Result<Arc<crate::family::CfObject>, CapiError> {
    let object = handle::get::<crate::family::CfObject>(to_handle(cf), Kind::ColumnFamily)?;
    match state.db_id {
        Some(db_id) if db_id != object.db_id => {
            Err(CapiError::misuse("riptide_batch_t already holds column families of another database"))
        }
        _ => {
            state.db_id = Some(object.db_id);
            Ok(object)
        }
    }
}

/// Creates an empty batch; destroy with `riptide_batch_destroy`.
///
/// # Safety
/// `out_batch` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_create(
    out_batch: *mut *mut riptide_batch_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_batch, "out_batch") }?;
        let object = Arc::new(BatchObject(Mutex::new(BatchState { batch: WriteBatch::new(), db_id: None })));
        *slot = from_handle(handle::insert(Kind::Batch, object)?);
        Ok(())
    })
}

/// Destroys a batch. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_batch_destroy(batch: *mut riptide_batch_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<BatchObject>(to_handle(batch), Kind::Batch).map(drop))
}

/// Adds a put of `value` under `key` in the default column family.
///
/// # Safety
/// `key` and `value` must be valid for their lengths; `err` NULL or a `riptide_error_t *`
/// variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_put(
    batch: *const riptide_batch_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (key, value) = unsafe { (bytes(key, key_len, "key")?, bytes(value, value_len, "value")?) };
        with_batch(batch, |state| {
            state.batch.put(key, value);
            Ok(())
        })
    })
}

/// Adds a put in column family `cf`.
///
/// # Safety
/// As `riptide_batch_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_put_cf(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (key, value) = unsafe { (bytes(key, key_len, "key")?, bytes(value, value_len, "value")?) };
        with_batch(batch, |state| {
            let family = bind(state, cf)?;
            state.batch.put_cf(&family.cf, key, value);
            Ok(())
        })
    })
}

/// Adds a delete of `key` in the default column family.
///
/// # Safety
/// As `riptide_batch_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_delete(
    batch: *const riptide_batch_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        with_batch(batch, |state| {
            state.batch.delete(key);
            Ok(())
        })
    })
}

/// Adds a delete of `key` in column family `cf`.
///
/// # Safety
/// As `riptide_batch_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_delete_cf(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        with_batch(batch, |state| {
            let family = bind(state, cf)?;
            state.batch.delete_cf(&family.cf, key);
            Ok(())
        })
    })
}

/// Adds the merge operand `operand` for `key` in the default column family (`cf` NULL) or in
/// `cf` (see `riptide_merge`).
///
/// # Safety
/// As `riptide_batch_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_merge(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    operand: *const u8,
    operand_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (key, operand) = unsafe { (bytes(key, key_len, "key")?, bytes(operand, operand_len, "operand")?) };
        with_batch(batch, |state| {
            if cf.is_null() {
                state.batch.merge(key, operand);
            } else {
                let family = bind(state, cf)?;
                state.batch.merge_cf(&family.cf, key, operand);
            }
            Ok(())
        })
    })
}

/// Adds a put of `value` under `key` in the default column family (`cf` NULL) or in `cf`
/// that expires at `expires_at_us` (microseconds since the Unix epoch by the database's clock,
/// see `riptide_now_us`): from then on reads see the key as deleted.
///
/// # Safety
/// As `riptide_batch_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_put_with_expiry(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    expires_at_us: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (key, value) = unsafe { (bytes(key, key_len, "key")?, bytes(value, value_len, "value")?) };
        with_batch(batch, |state| {
            if cf.is_null() {
                state.batch.put_with_expiry(key, value, expires_at_us);
            } else {
                let family = bind(state, cf)?;
                state.batch.put_with_expiry_cf(&family.cf, key, value, expires_at_us);
            }
            Ok(())
        })
    })
}

/// Adds a single delete of `key` in the default column family (`cf` NULL) or in `cf` (see
/// `riptide_single_delete` for the contract).
///
/// # Safety
/// As `riptide_batch_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_single_delete(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        with_batch(batch, |state| {
            if cf.is_null() {
                state.batch.single_delete(key);
            } else {
                let family = bind(state, cf)?;
                state.batch.single_delete_cf(&family.cf, key);
            }
            Ok(())
        })
    })
}

/// Adds a range delete of every key from `start` (inclusive) to `end` (exclusive) in the
/// default column family; records after it in the batch are applied after it.
///
/// # Safety
/// `start` and `end` must be valid for their lengths (NULL allowed for length 0); `err` NULL or
/// a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_delete_range(
    batch: *const riptide_batch_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (start, end) = unsafe { (bytes(start, start_len, "start")?, bytes(end, end_len, "end")?) };
        with_batch(batch, |state| {
            state.batch.delete_range(start, end);
            Ok(())
        })
    })
}

/// Adds a range delete of every key in `[start, end)` (in the column family's order) in column
/// family `cf`.
///
/// # Safety
/// As `riptide_batch_delete_range`.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_delete_range_cf(
    batch: *const riptide_batch_t,
    cf: *const riptide_cf_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (start, end) = unsafe { (bytes(start, start_len, "start")?, bytes(end, end_len, "end")?) };
        with_batch(batch, |state| {
            let family = bind(state, cf)?;
            state.batch.delete_range_cf(&family.cf, start, end);
            Ok(())
        })
    })
}

/// Empties the batch (and unbinds it from its database).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_clear(
    batch: *const riptide_batch_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        with_batch(batch, |state| {
            state.batch.clear();
            state.db_id = None;
            Ok(())
        })
    })
}

/// Appends every operation of `source` to `batch` (both must be of the same database, if bound).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_append(
    batch: *const riptide_batch_t,
    source: *const riptide_batch_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // Copy the source first: locking both at once could deadlock two threads appending
        // each batch to the other (and a batch appended to itself).
        let (other, other_db) = with_batch(source, |state| Ok((state.batch.clone(), state.db_id)))?;
        with_batch(batch, |state| {
            if let (Some(mine), Some(theirs)) = (state.db_id, other_db) {
                if mine != theirs {
                    return Err(CapiError::misuse("the batches hold column families of different databases"));
                }
            }
            state.db_id = state.db_id.or(other_db);
            state.batch.append(&other);
            Ok(())
        })
    })
}

/// The number of operations in the batch, in `*out_count`.
///
/// # Safety
/// `out_count` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_count(
    batch: *const riptide_batch_t,
    out_count: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_count, "out_count") }?;
        *slot = with_batch(batch, |state| Ok(state.batch.len()))?;
        Ok(())
    })
}

/// The batch's encoded size in bytes (what `max_batch_size_bytes` limits), in `*out_size`.
///
/// # Safety
/// `out_size` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_batch_size_bytes(
    batch: *const riptide_batch_t,
    out_size: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_size, "out_size") }?;
        *slot = with_batch(batch, |state| Ok(state.batch.size_bytes()))?;
        Ok(())
    })
}

/// Applies the batch atomically with `options` (NULL: no sync). The batch is left unchanged.
/// A batch bound to another database is `RIPTIDE_MISUSE`; one naming a dropped column family
/// is `RIPTIDE_INVALID_ARGUMENT` and writes nothing.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_write(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    batch: *const riptide_batch_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        let options = write_options(options)?;
        // The batch is copied so that it is not locked during the write and stays reusable.
        let (copy, bound) = with_batch(batch, |state| Ok((state.batch.clone(), state.db_id)))?;
        with_db(db, |object, database| {
            if bound.is_some_and(|db_id| db_id != object.id) {
                return Err(CapiError::misuse("riptide_batch_t holds column families of another database"));
            }
            Ok(database.write_opt(copy, &options)?)
        })
    })
}
