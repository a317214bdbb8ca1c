//! Column families: create, drop, rename, list, look up by name, and their options.
//!
//! A column family handle names a [`CfObject`]: the engine's `ColumnFamily` (a cheap shared
//! handle) and the id of its database. Handles stay valid after the column family is dropped
//! (operations through them then fail with `RIPTIDE_INVALID_ARGUMENT`, as in the engine) until
//! `riptide_cf_destroy` or the database's close. Each lookup (`riptide_column_family_handle`,
//! `riptide_default_column_family`, `riptide_create_column_family`) returns a new handle that
//! the caller destroys.
//!
//! Concurrency contract: column family handles are immutable and thread-safe.

use std::ffi::c_char;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use riptide_engine::{ColumnFamily, ColumnFamilyOptions};

use crate::db::{family_of, with_db, DbObject};
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::{malloc_list, malloc_string, out, string};
use crate::options::CfOptionsObject;
use crate::{
    from_handle, riptide_cf_options_t, riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t, to_handle,
};

/// What a `riptide_cf_t` handle names.
pub(crate) struct CfObject {
    pub(crate) db_id: u64,
    pub(crate) cf: ColumnFamily,
    parent: Weak<DbObject>,
}

fn adopt(object: &Arc<DbObject>, cf: ColumnFamily) -> Result<*mut riptide_cf_t, CapiError> {
    let child = Arc::new(CfObject { db_id: object.id, cf, parent: Arc::downgrade(object) });
    object.adopt(Kind::ColumnFamily, child).map(from_handle)
}

fn cf_options(options: *const riptide_cf_options_t) -> Result<ColumnFamilyOptions, CapiError> {
    if options.is_null() {
        return Ok(ColumnFamilyOptions::default());
    }
    Ok(handle::get::<CfOptionsObject>(to_handle(options), Kind::CfOptions)?.0.read().clone())
}

/// Creates column family `name` (1 to 255 bytes, unique) with `options` (NULL: the defaults);
/// durable on return. `*out_cf` receives a handle to it (destroy with `riptide_cf_destroy`).
///
/// # Safety
/// `name` must be a NUL-terminated string; `out_cf` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_create_column_family(
    db: *const riptide_db_t,
    name: *const c_char,
    options: *const riptide_cf_options_t,
    out_cf: *mut *mut riptide_cf_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (slot, name) = unsafe { (out(out_cf, "out_cf")?, string(name, "name")?) };
        let options = cf_options(options)?;
        *slot = with_db(db, |object, database| adopt(object, database.create_column_family(name, options)?))?;
        Ok(())
    })
}

/// Drops column family `cf` (durably); its files go once no reader holds them. The handle
/// stays to be destroyed; operations through it fail. The default column family cannot be
/// dropped.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_drop_column_family(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || with_db(db, |object, database| Ok(database.drop_column_family(&family_of(object.id, cf)?.cf)?)))
}

/// Renames column family `cf` to `new_name` (durably). Handles keep working.
///
/// # Safety
/// `new_name` must be a NUL-terminated string; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_rename_column_family(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    new_name: *const c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let new_name = unsafe { string(new_name, "new_name") }?;
        with_db(db, |object, database| Ok(database.rename_column_family(&family_of(object.id, cf)?.cf, new_name)?))
    })
}

/// The names of the live column families, the default one first: `*out_names` is an array of
/// `*out_count` NUL-terminated strings (free with `riptide_free_string_list`).
///
/// # Safety
/// The out-parameters must be valid for writes; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_list_column_families(
    db: *const riptide_db_t,
    out_names: *mut *mut *mut c_char,
    out_count: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (names_slot, count_slot) = unsafe { (out(out_names, "out_names")?, out(out_count, "out_count")?) };
        let names = with_db(db, |_, database| Ok(database.list_column_families()))?;
        let items: Vec<Vec<u8>> = names.into_iter().map(String::into_bytes).collect();
        let (array, lengths) = malloc_list(&items)?;
        // A string list carries no lengths: the strings are NUL-terminated.
        // SAFETY: `lengths` came from calloc in malloc_list.
        unsafe { libc::free(lengths.cast()) };
        *names_slot = array.cast();
        *count_slot = items.len();
        Ok(())
    })
}

/// A new handle to the live column family named `name`, or NULL in `*out_cf` when there is
/// none (not an error).
///
/// # Safety
/// `name` must be a NUL-terminated string; `out_cf` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_column_family_handle(
    db: *const riptide_db_t,
    name: *const c_char,
    out_cf: *mut *mut riptide_cf_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (slot, name) = unsafe { (out(out_cf, "out_cf")?, string(name, "name")?) };
        *slot = with_db(db, |object, database| match database.column_family(name) {
            Some(cf) => adopt(object, cf),
            None => Ok(std::ptr::null_mut()),
        })?;
        Ok(())
    })
}

/// A new handle to the default column family.
///
/// # Safety
/// `out_cf` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_default_column_family(
    db: *const riptide_db_t,
    out_cf: *mut *mut riptide_cf_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_cf, "out_cf") }?;
        *slot = with_db(db, |object, database| adopt(object, database.default_column_family()))?;
        Ok(())
    })
}

/// Destroys a column family handle (not the column family). `RIPTIDE_MISUSE` for NULL, a
/// second destroy, or a handle whose database was closed (closing destroyed it).
#[no_mangle]
pub extern "C" fn riptide_cf_destroy(cf: *mut riptide_cf_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || {
        let handle = to_handle(cf);
        let object = handle::remove::<CfObject>(handle, Kind::ColumnFamily)?;
        if let Some(parent) = object.parent.upgrade() {
            parent.disown(handle);
        }
        Ok(())
    })
}

/// The column family's id (0 for the default one; ids are never reused).
///
/// # Safety
/// `out_id` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_id(
    cf: *const riptide_cf_t,
    out_id: *mut u32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_id, "out_id") }?;
        *slot = handle::get::<CfObject>(to_handle(cf), Kind::ColumnFamily)?.cf.id();
        Ok(())
    })
}

/// The column family's current name, `malloc`ed and NUL-terminated (free with `riptide_free`).
///
/// # Safety
/// `out_name` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_name(
    cf: *const riptide_cf_t,
    out_name: *mut *mut c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_name, "out_name") }?;
        *slot = malloc_string(&handle::get::<CfObject>(to_handle(cf), Kind::ColumnFamily)?.cf.name())?;
        Ok(())
    })
}

/// 1 in `*out_dropped` once the column family has been dropped, else 0.
///
/// # Safety
/// `out_dropped` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_is_dropped(
    cf: *const riptide_cf_t,
    out_dropped: *mut u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_dropped, "out_dropped") }?;
        *slot = u8::from(handle::get::<CfObject>(to_handle(cf), Kind::ColumnFamily)?.cf.is_dropped());
        Ok(())
    })
}

/// The options column family `cf` uses now, as new column family options (destroy with
/// `riptide_cf_options_destroy`): change fields and pass them to
/// `riptide_set_column_family_options`.
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_column_family_options(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    out_options: *mut *mut riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let options =
            with_db(db, |object, database| Ok(database.column_family_options(&family_of(object.id, cf)?.cf)?))?;
        *slot = from_handle(handle::insert(Kind::CfOptions, Arc::new(CfOptionsObject(RwLock::new(options))))?);
        Ok(())
    })
}

/// Changes column family `cf`'s options while the database runs (every option but the
/// comparator; memtable sizes from the next memtable, table options for new tables). Column
/// family options are not stored in the database: pass them again at the next open.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_set_column_family_options(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    options: *const riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        if options.is_null() {
            return Err(CapiError::misuse("NULL riptide_cf_options_t handle"));
        }
        let options = cf_options(options)?;
        with_db(db, |object, database| Ok(database.set_column_family_options(&family_of(object.id, cf)?.cf, options)?))
    })
}
