//! Backups: a backup engine over one backup directory (the engine's `BackupEngine` on the
//! operating system's file system), which backs up open databases, lists, verifies, restores
//! and deletes backups.
//!
//! A backup engine handle names a [`BackupEngineObject`]: the engine behind a read-write lock.
//! It is not a child of any database: it stays open when a database it backed up closes, and
//! `riptide_backup_engine_create_backup` takes the database as an argument (holding it as every
//! database call does, so the database cannot close under it). Lists of backups are written to
//! an array the caller provides, with an element size, as `riptide_get_level_stats` does: the
//! library allocates nothing the caller must free.
//!
//! Concurrency contract: every call is thread-safe. Calls that change the directory (create,
//! delete) hold the engine's lock exclusively, so two of them never take the same backup id and
//! a backup is never deleted under a restore or verification of it; list, verify and restore
//! share it. The engine takes no lock on the directory: open one engine per backup directory
//! (in every process), as the engine's documentation requires.

use std::sync::Arc;

use parking_lot::RwLock;
use riptide_engine::fs::OsFileSystem;
use riptide_engine::{BackupEngine, BackupInfo};

use crate::db::with_db;
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::{out, path};
use crate::stats::{check_array, deliver_array};
use crate::{from_handle, riptide_backup_engine_t, riptide_code_t, riptide_db_t, riptide_error_t, to_handle};

/// What a backup holds, as `riptide_backup_engine_list_backups` reports it. Made of 64-bit
/// fields only; new fields are appended (the caller passes `sizeof(riptide_backup_info_t)`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct riptide_backup_info_t {
    /// The backup's id, increasing from 1.
    pub id: u64,
    /// When the backup was taken, in seconds since the Unix epoch.
    pub timestamp_secs: u64,
    /// Bytes of its files (a shared table or blob file counted in every backup that holds it).
    pub size_bytes: u64,
    /// Files in the backup.
    pub file_count: u64,
}

impl riptide_backup_info_t {
    fn of(info: &BackupInfo) -> riptide_backup_info_t {
        riptide_backup_info_t {
            id: info.id,
            timestamp_secs: info.timestamp_secs,
            size_bytes: info.size_bytes,
            file_count: info.file_count as u64,
        }
    }
}

/// What a `riptide_backup_engine_t` handle names; see the module documentation.
pub(crate) struct BackupEngineObject(RwLock<BackupEngine>);

fn engine_of(engine: *const riptide_backup_engine_t) -> Result<Arc<BackupEngineObject>, CapiError> {
    handle::get::<BackupEngineObject>(to_handle(engine), Kind::BackupEngine)
}

/// Opens the backup directory `path_name`, creating it (and its parents) when missing, and
/// removes what an interrupted backup left in it. Open one engine per backup directory at a
/// time (across processes too): the directory is not locked. Close with
/// `riptide_backup_engine_close`.
///
/// # Safety
/// `path_name` must be a NUL-terminated string; `out_engine` valid for a write; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_open(
    path_name: *const std::ffi::c_char,
    out_engine: *mut *mut riptide_backup_engine_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (slot, directory) = unsafe { (out(out_engine, "out_engine")?, path(path_name)?) };
        let engine = BackupEngine::open(directory, Arc::new(OsFileSystem))?;
        let object = Arc::new(BackupEngineObject(RwLock::new(engine)));
        *slot = from_handle(handle::insert(Kind::BackupEngine, object)?);
        Ok(())
    })
}

/// Closes a backup engine; a call in flight on it finishes first. Backups stay in the
/// directory. `RIPTIDE_MISUSE` for NULL or a second close.
#[no_mangle]
pub extern "C" fn riptide_backup_engine_close(engine: *mut riptide_backup_engine_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<BackupEngineObject>(to_handle(engine), Kind::BackupEngine).map(drop))
}

/// Backs up `db` as a new backup (a checkpoint of it, taken while reads and writes go on) and
/// stores its id in `*out_backup_id`. Tables and blob files the directory already holds are not
/// copied again; everything is synced before the call returns. `RIPTIDE_BUSY` while a prepared
/// transaction is undecided (as `riptide_checkpoint`). A failed backup leaves no backup behind.
///
/// # Safety
/// `out_backup_id` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_create_backup(
    engine: *const riptide_backup_engine_t,
    db: *const riptide_db_t,
    out_backup_id: *mut u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_backup_id, "out_backup_id") }?;
        let object = engine_of(engine)?;
        let info = with_db(db, |_, database| Ok(object.0.write().create_backup(database)?))?;
        *slot = info.id;
        Ok(())
    })
}

/// Lists the backups, oldest first: `*out_count` receives their number, and the first
/// `min(capacity, count)` are written to `backups`, an array of elements of `element_size` bytes
/// (pass `sizeof(riptide_backup_info_t)`). `backups` may be NULL when `capacity` is 0, to learn
/// the count; when `*out_count` is larger than `capacity`, call again with a larger array.
///
/// # Safety
/// `backups` must be valid for `capacity * element_size` bytes of writes; `out_count` valid for
/// a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_list_backups(
    engine: *const riptide_backup_engine_t,
    backups: *mut riptide_backup_info_t,
    capacity: usize,
    element_size: usize,
    out_count: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let count_slot = unsafe { out(out_count, "out_count") }?;
        check_array(backups, capacity, element_size, "backups")?;
        let all = engine_of(engine)?.0.read().list_backups()?;
        // SAFETY: checked above, and by the function's contract.
        unsafe { deliver_array(&all, riptide_backup_info_t::of, backups, capacity, element_size) };
        *count_slot = all.len();
        Ok(())
    })
}

/// Reads every file of backup `backup_id` and checks its size and checksum:
/// `RIPTIDE_CORRUPTION` naming the first damaged file, `RIPTIDE_INVALID_ARGUMENT` when there is
/// no such backup.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_verify_backup(
    engine: *const riptide_backup_engine_t,
    backup_id: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(engine_of(engine)?.0.read().verify_backup(backup_id)?))
}

/// Restores backup `backup_id` into `target_path`, a directory that must not exist
/// (`RIPTIDE_INVALID_ARGUMENT` if it does, or if there is no such backup), checking every file's
/// size and checksum as it copies (`RIPTIDE_CORRUPTION` naming a damaged one). A failed restore
/// removes what it wrote. Open the result with `riptide_open` and the options of the database
/// that was backed up.
///
/// # Safety
/// `target_path` must be a NUL-terminated string; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_restore(
    engine: *const riptide_backup_engine_t,
    backup_id: u64,
    target_path: *const std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let target = unsafe { path(target_path)? };
        Ok(engine_of(engine)?.0.read().restore(backup_id, &target)?)
    })
}

/// Deletes backup `backup_id` (durably), then its files that no other backup holds.
/// `RIPTIDE_INVALID_ARGUMENT` when there is no such backup.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_backup_engine_delete_backup(
    engine: *const riptide_backup_engine_t,
    backup_id: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(engine_of(engine)?.0.write().delete_backup(backup_id)?))
}
