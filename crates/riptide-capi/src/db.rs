//! Databases: open and close, point reads and writes, pinned values, and maintenance (flush,
//! compaction, waiting for and cancelling background work).
//!
//! A database handle names a [`DbObject`]: the engine's `Db` behind a read-write lock, a
//! `closing` flag and the set of handles opened from it (column families, snapshots, iterators,
//! transactions). Calls hold the read lock for their whole duration, so `riptide_close`, which
//! takes the write lock, waits for the calls in flight and then owns the `Db`. Closing first
//! sets `closing` (new calls fail with `RIPTIDE_MISUSE` at once instead of queueing behind the
//! close), cancels manual compactions (which could otherwise hold the close for minutes), and
//! closes every child handle, so no handle of a closed database stays usable.
//!
//! Concurrency contract: every database call is thread-safe. Column families and snapshots are
//! checked to belong to the database they are used with (`RIPTIDE_MISUSE` otherwise).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use riptide_engine::{ColumnFamilyOptions, Db, ReadOptions, WriteBatch, WriteOptions};

use crate::error::{call, guard, CapiError};
use crate::family::CfObject;
use crate::handle::{self, Kind};
use crate::memory::{bytes, malloc_copy, malloc_string, optional_bytes, out, path, string};
use crate::options::{CfOptionsObject, OptionsObject, ReadOptionsObject, WriteOptionsObject};
use crate::{
    from_handle, riptide_cf_options_t, riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t, riptide_options_t,
    riptide_pinnable_t, riptide_readoptions_t, riptide_writeoptions_t, to_handle,
};

/// Ids of opened databases, so that handles can tell which database they belong to even after
/// a handle slot is reused.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// What a `riptide_db_t` handle names; see the module documentation.
pub(crate) struct DbObject {
    pub(crate) id: u64,
    db: RwLock<Option<Db>>,
    closing: AtomicBool,
    /// The handles opened from this database; `None` once the close has closed them, so that
    /// a child made concurrently with the close (through a transaction, which does not hold
    /// the database's lock) is refused instead of outliving the database.
    children: Mutex<Option<HashSet<u64>>>,
}

impl DbObject {
    /// Registers `child` as a new handle that closes with this database.
    pub(crate) fn adopt<T: std::any::Any + Send + Sync>(&self, kind: Kind, child: Arc<T>) -> Result<u64, CapiError> {
        let mut children = self.children.lock();
        let children = children.as_mut().ok_or_else(|| CapiError::misuse("riptide_db_t is closed"))?;
        let handle = handle::insert(kind, child)?;
        children.insert(handle);
        Ok(handle)
    }

    /// Forgets a child handle that was closed on its own.
    pub(crate) fn disown(&self, handle: u64) {
        if let Some(children) = self.children.lock().as_mut() {
            children.remove(&handle);
        }
    }
}

/// Runs `body` with the live database `db` names, holding its read lock (see the module
/// documentation).
pub(crate) fn with_db<R>(
    db: *const riptide_db_t,
    body: impl FnOnce(&Arc<DbObject>, &Db) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    let object = handle::get::<DbObject>(to_handle(db), Kind::Db)?;
    let closed = || CapiError::misuse("riptide_db_t used while it is being closed");
    if object.closing.load(Ordering::Acquire) {
        return Err(closed());
    }
    // Recursive read: a call must not queue behind a waiting close, which itself waits for
    // calls that may need this one (cancel_manual_compactions for a compact_range in flight).
    let guard = object.db.read_recursive();
    let database = guard.as_ref().ok_or_else(closed)?;
    body(&object, database)
}

/// The column family `cf` names, checked to belong to the database `db_id`.
pub(crate) fn family_of(db_id: u64, cf: *const riptide_cf_t) -> Result<Arc<CfObject>, CapiError> {
    let object = handle::get::<CfObject>(to_handle(cf), Kind::ColumnFamily)?;
    if object.db_id != db_id {
        return Err(CapiError::misuse("riptide_cf_t used with another database than its own"));
    }
    Ok(object)
}

/// Runs `body` with the read options `options` names (NULL: the defaults), checking that their
/// snapshot belongs to the database `db_id`.
pub(crate) fn with_read_options<R>(
    db_id: u64,
    options: *const riptide_readoptions_t,
    body: impl FnOnce(&ReadOptions) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    if options.is_null() {
        return body(&ReadOptions::default());
    }
    let object = handle::get::<ReadOptionsObject>(to_handle(options), Kind::ReadOptions)?;
    let state = object.0.read();
    if state.snapshot_db.is_some_and(|snapshot_db| snapshot_db != db_id) {
        return Err(CapiError::misuse("read options hold a snapshot of another database"));
    }
    body(&state.options)
}

/// The write options `options` names (NULL: the defaults).
pub(crate) fn write_options(options: *const riptide_writeoptions_t) -> Result<WriteOptions, CapiError> {
    if options.is_null() {
        return Ok(WriteOptions::default());
    }
    Ok(*handle::get::<WriteOptionsObject>(to_handle(options), Kind::WriteOptions)?.0.read())
}

fn register(database: Db) -> Result<*mut riptide_db_t, CapiError> {
    let object = Arc::new(DbObject {
        id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
        db: RwLock::new(Some(database)),
        closing: AtomicBool::new(false),
        children: Mutex::new(Some(HashSet::new())),
    });
    handle::insert(Kind::Db, object).map(from_handle)
}

fn db_options(options: *const riptide_options_t) -> Result<riptide_engine::Options, CapiError> {
    if options.is_null() {
        return Ok(riptide_engine::Options::default());
    }
    Ok(handle::get::<OptionsObject>(to_handle(options), Kind::Options)?.0.read().clone())
}

/// Opens (or, with `create_if_missing`, creates) the database in directory `path` with
/// `options` (NULL: the defaults). A second open of the same directory fails with
/// `RIPTIDE_BUSY`. Close with `riptide_close`.
///
/// # Safety
/// `path` must be a NUL-terminated string; `out_db` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_open(
    path_name: *const std::ffi::c_char,
    options: *const riptide_options_t,
    out_db: *mut *mut riptide_db_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (slot, directory) = unsafe { (out(out_db, "out_db")?, path(path_name)?) };
        let database = Db::open(directory, db_options(options)?)?;
        *slot = register(database)?;
        Ok(())
    })
}

/// Opens the database giving options to `count` column families by name: one that does not
/// exist is created, one that exists gets the options (all but the comparator may change).
/// Others use the options `options` give the default column family.
///
/// # Safety
/// `names` and `cf_options` must be valid for `count` reads, each name a NUL-terminated
/// string; otherwise as `riptide_open`.
#[no_mangle]
pub unsafe extern "C" fn riptide_open_with_column_families(
    path_name: *const std::ffi::c_char,
    options: *const riptide_options_t,
    count: usize,
    names: *const *const std::ffi::c_char,
    cf_options: *const *const riptide_cf_options_t,
    out_db: *mut *mut riptide_db_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (slot, directory) = unsafe { (out(out_db, "out_db")?, path(path_name)?) };
        if count > 0 && (names.is_null() || cf_options.is_null()) {
            return Err(CapiError::misuse("names or cf_options is NULL with a non-zero count"));
        }
        let mut families: Vec<(String, ColumnFamilyOptions)> = Vec::with_capacity(count);
        for index in 0..count {
            // SAFETY: both arrays hold `count` entries by the function's contract.
            let (name, family) = unsafe { (*names.add(index), *cf_options.add(index)) };
            // SAFETY: each name is a NUL-terminated string by the function's contract.
            let name = unsafe { string(name, "column family name") }?;
            let family = handle::get::<CfOptionsObject>(to_handle(family), Kind::CfOptions)?;
            let family = family.0.read().clone();
            families.push((name.to_string(), family));
        }
        let database = Db::open_with_column_families(directory, db_options(options)?, families)?;
        *slot = register(database)?;
        Ok(())
    })
}

/// Closes the database: waits for calls in flight, cancels manual compactions, closes every
/// handle opened from it (column families, snapshots, iterators; open transactions roll back,
/// prepared ones stay prepared), stops background work, syncs the log and releases the
/// directory. The handle is invalid afterwards, even when an error (the first background error,
/// for example) is returned. `RIPTIDE_MISUSE` for NULL or a second close.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_close(db: *mut riptide_db_t, err: *mut *mut riptide_error_t) -> riptide_code_t {
    call(err, || {
        let handle = to_handle(db);
        let object = handle::get::<DbObject>(handle, Kind::Db)?;
        if object.closing.swap(true, Ordering::AcqRel) {
            return Err(CapiError::misuse("riptide_db_t closed twice"));
        }
        if let Some(database) = object.db.read_recursive().as_ref() {
            database.cancel_manual_compactions();
        }
        drop(handle::remove::<DbObject>(handle, Kind::Db)?);
        let database = {
            // Holding the write lock means no call on the database is in flight, so none can
            // add a child after the set is taken; children made through transactions are
            // refused from here on.
            let mut guard = object.db.write();
            let children = object.children.lock().take().unwrap_or_default();
            for child in children {
                drop(handle::remove_any(child));
            }
            guard.take().ok_or_else(|| CapiError::misuse("riptide_db_t closed twice"))?
        };
        Ok(database.close()?)
    })
}

/// Writes one key through a batch, in the default column family or in `cf`.
///
/// # Safety
/// `key` and `value` (when given) must be valid for their lengths.
unsafe fn write_one(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: Option<*const riptide_cf_t>,
    key: (*const u8, usize),
    value: Option<(*const u8, usize)>,
) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let key = unsafe { bytes(key.0, key.1, "key") }?;
    // SAFETY: forwarded contract.
    let value = value.map(|(pointer, len)| unsafe { bytes(pointer, len, "value") }).transpose()?;
    write_built(db, options, cf, |batch, family| match (family, value) {
        (None, Some(value)) => batch.put(key, value),
        (None, None) => batch.delete(key),
        (Some(family), Some(value)) => batch.put_cf(family, key, value),
        (Some(family), None) => batch.delete_cf(family, key),
    })
}

/// Writes the batch `build` fills with `options`, handing it the column family `cf` names
/// (`None`: the default one): the common body of the one-record writes.
fn write_built(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: Option<*const riptide_cf_t>,
    build: impl FnOnce(&mut WriteBatch, Option<&riptide_engine::ColumnFamily>),
) -> Result<(), CapiError> {
    let options = write_options(options)?;
    with_db(db, |object, database| {
        let family = cf.map(|cf| family_of(object.id, cf)).transpose()?;
        let mut batch = WriteBatch::new();
        build(&mut batch, family.as_ref().map(|family| &family.cf));
        Ok(database.write_opt(batch, &options)?)
    })
}

/// Stores `value` under `key` in the default column family. `options` may be NULL.
///
/// # Safety
/// `key` and `value` must be valid for their lengths (NULL allowed for length 0); `err` NULL
/// or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_put(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write_one(db, options, None, (key, key_len), Some((value, value_len))) })
}

/// Stores `value` under `key` in column family `cf`.
///
/// # Safety
/// As `riptide_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_put_cf(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write_one(db, options, Some(cf), (key, key_len), Some((value, value_len))) })
}

/// Deletes `key` from the default column family (a no-op when absent).
///
/// # Safety
/// As `riptide_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_delete(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write_one(db, options, None, (key, key_len), None) })
}

/// Deletes `key` from column family `cf`.
///
/// # Safety
/// As `riptide_put`.
#[no_mangle]
pub unsafe extern "C" fn riptide_delete_cf(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { write_one(db, options, Some(cf), (key, key_len), None) })
}

/// Single-deletes `key` in the default column family (`cf` NULL) or in `cf`: a delete for a
/// key written with at most one put since its previous single delete and never deleted with
/// `riptide_delete`; flush and compaction drop it together with the put it meets. A broken
/// contract only affects that key (an older value of it may show again).
///
/// # Safety
/// As `riptide_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_single_delete(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        write_built(db, options, (!cf.is_null()).then_some(cf), |batch, family| match family {
            None => batch.single_delete(key),
            Some(family) => batch.single_delete_cf(family, key),
        })
    })
}

/// Adds the merge operand `operand` for `key` in the default column family (`cf` NULL) or in
/// `cf`: reads combine it with the operands before it and the value beneath them through the
/// column family's merge operator (`riptide_options_set_merge_operator`). Reading a key with
/// operands in a column family without one is `RIPTIDE_INVALID_ARGUMENT`; an operand the
/// operator cannot apply makes the read fail with `RIPTIDE_CORRUPTION`.
///
/// # Safety
/// As `riptide_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_merge(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
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
        write_built(db, options, (!cf.is_null()).then_some(cf), |batch, family| match family {
            None => batch.merge(key, operand),
            Some(family) => batch.merge_cf(family, key, operand),
        })
    })
}

/// Stores `value` under `key` in the default column family (`cf` NULL) or in `cf` until
/// `ttl_us` microseconds from now by the database's clock: from then on reads see the key as
/// deleted and compaction drops the value. The expiry is fixed when the call is made and
/// survives a crash and reopen as written. `ttl_us` 0 is `RIPTIDE_INVALID_ARGUMENT`.
///
/// # Safety
/// As `riptide_put`; `cf` NULL or a column family handle.
#[no_mangle]
pub unsafe extern "C" fn riptide_put_with_ttl(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    ttl_us: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (key, value) = unsafe { (bytes(key, key_len, "key")?, bytes(value, value_len, "value")?) };
        if ttl_us == 0 {
            return Err(CapiError::invalid("ttl_us must be at least 1"));
        }
        let options = write_options(options)?;
        with_db(db, |object, database| {
            let family = (!cf.is_null()).then(|| family_of(object.id, cf)).transpose()?;
            let expires_at_us = database.now_us().saturating_add(ttl_us);
            let mut batch = WriteBatch::new();
            match &family {
                None => batch.put_with_expiry(key, value, expires_at_us),
                Some(family) => batch.put_with_expiry_cf(&family.cf, key, value, expires_at_us),
            }
            Ok(database.write_opt(batch, &options)?)
        })
    })
}

/// The database's clock, in microseconds since the Unix epoch: the time expiries are compared
/// with (`riptide_put_with_ttl`, `riptide_batch_put_with_expiry`). A clock stepped back reads as the latest time recorded
/// (at most a millisecond before a time returned earlier).
///
/// # Safety
/// `out_now_us` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_now_us(
    db: *const riptide_db_t,
    out_now_us: *mut u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_now_us, "out_now_us") }?;
        with_db(db, |_, database| {
            *slot = database.now_us();
            Ok(())
        })
    })
}

/// Deletes every key from `start` (inclusive) to `end` (exclusive) in the default column
/// family with one range tombstone: one record whatever the number of keys, durable like any
/// write under `options`. A range whose start is not below its end deletes nothing.
///
/// # Safety
/// `start` and `end` must be valid for their lengths (NULL allowed for length 0); `err` NULL or
/// a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_delete_range(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { delete_range(db, options, None, (start, start_len), (end, end_len)) })
}

/// Deletes every key in `[start, end)`, in the column family's order, from column family `cf`.
///
/// # Safety
/// As `riptide_delete_range`.
#[no_mangle]
pub unsafe extern "C" fn riptide_delete_range_cf(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: *const riptide_cf_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { delete_range(db, options, Some(cf), (start, start_len), (end, end_len)) })
}

/// The body of `riptide_delete_range` and `riptide_delete_range_cf`.
///
/// # Safety
/// As `riptide_delete_range`.
unsafe fn delete_range(
    db: *const riptide_db_t,
    options: *const riptide_writeoptions_t,
    cf: Option<*const riptide_cf_t>,
    start: (*const u8, usize),
    end: (*const u8, usize),
) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let (start, end) = unsafe { (bytes(start.0, start.1, "start")?, bytes(end.0, end.1, "end")?) };
    write_built(db, options, cf, |batch, family| match family {
        None => batch.delete_range(start, end),
        Some(family) => batch.delete_range_cf(family, start, end),
    })
}

/// Reads `key` in the default column family or `cf` with `options`.
///
/// # Safety
/// `key` must be valid for `key_len` reads.
unsafe fn read_one(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    cf: Option<*const riptide_cf_t>,
    key: *const u8,
    key_len: usize,
) -> Result<Option<Vec<u8>>, CapiError> {
    // SAFETY: forwarded contract.
    let key = unsafe { bytes(key, key_len, "key") }?;
    with_db(db, |object, database| {
        with_read_options(object.id, options, |read| match cf {
            None => Ok(database.get_opt(key, read)?),
            Some(cf) => Ok(database.get_cf_opt(&family_of(object.id, cf)?.cf, key, read)?),
        })
    })
}

/// Stores a value (or its absence) in the out-parameters of a copying get.
pub(crate) fn deliver_copy(
    value: Option<Vec<u8>>,
    out_value: &mut *mut u8,
    out_len: &mut usize,
) -> Result<(), CapiError> {
    match value {
        Some(value) => {
            *out_value = malloc_copy(&value)?;
            *out_len = value.len();
        }
        None => {
            *out_value = std::ptr::null_mut();
            *out_len = 0;
        }
    }
    Ok(())
}

/// Reads `key` from the default column family. On success `*out_value` is a `malloc`ed copy
/// (free with `riptide_free`) of `*out_value_len` bytes, or NULL when the key is absent (a
/// missing key is not an error). `options` may be NULL.
///
/// # Safety
/// `key` must be valid for `key_len` reads; the out-parameters valid for writes; `err` NULL
/// or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_get(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (value_slot, len_slot) = unsafe { (out(out_value, "out_value")?, out(out_value_len, "out_value_len")?) };
        // SAFETY: by the function's contract.
        deliver_copy(unsafe { read_one(db, options, None, key, key_len) }?, value_slot, len_slot)
    })
}

/// `riptide_get` in column family `cf`.
///
/// # Safety
/// As `riptide_get`.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_cf(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_value: *mut *mut u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (value_slot, len_slot) = unsafe { (out(out_value, "out_value")?, out(out_value_len, "out_value_len")?) };
        // SAFETY: by the function's contract.
        deliver_copy(unsafe { read_one(db, options, Some(cf), key, key_len) }?, value_slot, len_slot)
    })
}

/// What a `riptide_pinnable_t` handle names: the value the engine returned, kept as it is.
pub(crate) struct PinnableObject {
    value: Vec<u8>,
}

/// Stores a value (or its absence) as a pinnable handle in `slot`.
pub(crate) fn deliver_pinned(value: Option<Vec<u8>>, slot: &mut *mut riptide_pinnable_t) -> Result<(), CapiError> {
    *slot = match value {
        Some(value) => from_handle(handle::insert(Kind::Pinnable, Arc::new(PinnableObject { value }))?),
        None => std::ptr::null_mut(),
    };
    Ok(())
}

/// Reads `key` from the default column family without a copy in the ABI: `*out_pinnable` is a
/// handle to the value (read it with `riptide_pinnable_value`, release it with
/// `riptide_pinnable_release`), or NULL when the key is absent.
///
/// # Safety
/// `key` must be valid for `key_len` reads; `out_pinnable` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_pinned(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    key: *const u8,
    key_len: usize,
    out_pinnable: *mut *mut riptide_pinnable_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_pinnable, "out_pinnable") }?;
        // SAFETY: by the function's contract.
        deliver_pinned(unsafe { read_one(db, options, None, key, key_len) }?, slot)
    })
}

/// `riptide_get_pinned` in column family `cf`.
///
/// # Safety
/// As `riptide_get_pinned`.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_pinned_cf(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    cf: *const riptide_cf_t,
    key: *const u8,
    key_len: usize,
    out_pinnable: *mut *mut riptide_pinnable_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_pinnable, "out_pinnable") }?;
        // SAFETY: by the function's contract.
        deliver_pinned(unsafe { read_one(db, options, Some(cf), key, key_len) }?, slot)
    })
}

/// The pinned value's bytes, valid until `riptide_pinnable_release`; its length in
/// `*out_len`. NULL (and length 0) for a handle that is not a live pinnable.
///
/// # Safety
/// `out_len` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn riptide_pinnable_value(pinnable: *const riptide_pinnable_t, out_len: *mut usize) -> *const u8 {
    guard(std::ptr::null(), || {
        let object = handle::get::<PinnableObject>(to_handle(pinnable), Kind::Pinnable).ok();
        let (pointer, len) = match &object {
            // The buffer lives as long as the object, which the registry keeps until release;
            // the Arc dropped here is only this call's reference.
            Some(object) => (object.value.as_ptr(), object.value.len()),
            None => (std::ptr::null(), 0),
        };
        if !out_len.is_null() {
            // SAFETY: non-NULL and writable by the function's contract.
            unsafe { *out_len = len };
        }
        pointer
    })
}

/// Releases a pinned value. `RIPTIDE_MISUSE` for NULL or a second release.
#[no_mangle]
pub extern "C" fn riptide_pinnable_release(pinnable: *mut riptide_pinnable_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<PinnableObject>(to_handle(pinnable), Kind::Pinnable).map(drop))
}

/// Writes every memtable of every column family to tables and waits until that is done.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_flush(db: *const riptide_db_t, err: *mut *mut riptide_error_t) -> riptide_code_t {
    call(err, || with_db(db, |_, database| Ok(database.flush()?)))
}

/// Writes a checkpoint of the database into `target_path`, a directory that must not exist: an
/// openable copy as of one point in the write order, taken while reads and writes go on (tables
/// and blob files hard-linked where possible, logs copied; everything synced before the call
/// returns). `RIPTIDE_INVALID_ARGUMENT` if the directory exists, `RIPTIDE_BUSY` while a prepared
/// transaction is undecided. Open the copy with `riptide_open` and the same options.
///
/// # Safety
/// `target_path` must be a NUL-terminated string; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_checkpoint(
    db: *const riptide_db_t,
    target_path: *const std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let target = unsafe { path(target_path)? };
        with_db(db, |_, database| Ok(database.checkpoint(&target)?))
    })
}

/// Waits until no flush or compaction is pending or running.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_wait_for_background_work(
    db: *const riptide_db_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || with_db(db, |_, database| Ok(database.wait_for_background_work()?)))
}

/// Flushes, then compacts every column family as far down as the policy allows.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_compact_all(
    db: *const riptide_db_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || with_db(db, |_, database| Ok(database.compact_all()?)))
}

/// Compacts the keys in `[start, end]` (inclusive; a NULL pointer is unbounded) of `cf` (NULL:
/// the default column family) down through the levels, so deleted data gives its space back.
/// Returns when done; `RIPTIDE_CANCELLED` when `riptide_cancel_manual_compactions` (or
/// `riptide_close`) is called meanwhile.
///
/// # Safety
/// `start` and `end` must be NULL or valid for their lengths; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_compact_range(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (start, end) =
            unsafe { (optional_bytes(start, start_len, "start")?, optional_bytes(end, end_len, "end")?) };
        with_db(db, |object, database| {
            let family =
                if cf.is_null() { database.default_column_family() } else { family_of(object.id, cf)?.cf.clone() };
            Ok(database.compact_range(&family, start, end)?)
        })
    })
}

/// Stops every `riptide_compact_range` in progress (they return `RIPTIDE_CANCELLED`).
/// Automatic compactions go on.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cancel_manual_compactions(
    db: *const riptide_db_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        with_db(db, |_, database| {
            database.cancel_manual_compactions();
            Ok(())
        })
    })
}

/// Changes the block cache capacity while the database runs; shrinking evicts at once.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_set_block_cache_capacity(
    db: *const riptide_db_t,
    capacity_bytes: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        with_db(db, |_, database| {
            database.set_block_cache_capacity_bytes(capacity_bytes);
            Ok(())
        })
    })
}

/// The database's directory, `malloc`ed and NUL-terminated (free with `riptide_free`).
///
/// # Safety
/// `out_path` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_path(
    db: *const riptide_db_t,
    out_path: *mut *mut std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_path, "out_path") }?;
        let text = with_db(db, |_, database| Ok(database.path().to_string_lossy().into_owned()))?;
        *slot = malloc_string(&text)?;
        Ok(())
    })
}
