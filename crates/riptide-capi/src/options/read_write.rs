//! Read options (snapshot, iterator bounds, cache and checksum use) and write options (sync).
//!
//! Concurrency contract: as every options object, thread-safe behind its lock.

use parking_lot::RwLock;
use riptide_engine::{ReadOptions, WriteOptions};

use std::sync::Arc;

use super::{ReadOptionsObject, ReadOptionsState, WriteOptionsObject};
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::out;
use crate::snapshot::SnapshotObject;
use crate::{from_handle, riptide_code_t, riptide_error_t, to_handle};
use crate::{riptide_readoptions_t, riptide_snapshot_t, riptide_writeoptions_t};

/// Creates read options: latest state, no bounds, cache filled, checksums verified.
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_create(
    out_options: *mut *mut riptide_readoptions_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let state = ReadOptionsState { options: ReadOptions::default(), snapshot_db: None };
        *slot = from_handle(handle::insert(Kind::ReadOptions, Arc::new(ReadOptionsObject(RwLock::new(state))))?);
        Ok(())
    })
}

/// Destroys read options. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_readoptions_destroy(options: *mut riptide_readoptions_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<ReadOptionsObject>(to_handle(options), Kind::ReadOptions).map(drop))
}

fn set_read(
    options: *mut riptide_readoptions_t,
    err: *mut *mut riptide_error_t,
    change: impl FnOnce(&mut ReadOptionsState) -> Result<(), CapiError>,
) -> riptide_code_t {
    call(err, || change(&mut handle::get::<ReadOptionsObject>(to_handle(options), Kind::ReadOptions)?.0.write()))
}

/// Reads at `snapshot` (NULL: the latest state). The read options keep their own reference,
/// so the snapshot handle may be released first; using them with another database than the
/// snapshot's is `RIPTIDE_MISUSE`.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_snapshot(
    options: *mut riptide_readoptions_t,
    snapshot: *const riptide_snapshot_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        if snapshot.is_null() {
            state.options.snapshot = None;
            state.snapshot_db = None;
        } else {
            let object = handle::get::<SnapshotObject>(to_handle(snapshot), Kind::Snapshot)?;
            state.options.snapshot = Some(object.snapshot.clone());
            state.snapshot_db = Some(object.db_id);
        }
        Ok(())
    })
}

/// Iterators: the smallest key returned (inclusive); NULL: unbounded. The key is copied.
///
/// # Safety
/// `key` must be NULL or valid for `key_len` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_lower_bound(
    options: *mut riptide_readoptions_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        // SAFETY: by the function's contract.
        state.options.lower_bound = unsafe { crate::memory::optional_bytes(key, key_len, "key") }?.map(<[u8]>::to_vec);
        Ok(())
    })
}

/// Iterators: the first key not returned (exclusive); NULL: unbounded. The key is copied.
///
/// # Safety
/// `key` must be NULL or valid for `key_len` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_upper_bound(
    options: *mut riptide_readoptions_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        // SAFETY: by the function's contract.
        state.options.upper_bound = unsafe { crate::memory::optional_bytes(key, key_len, "key") }?.map(<[u8]>::to_vec);
        Ok(())
    })
}

/// Whether blocks read from disk enter the block cache (1, the default) or not (0, for scans).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_fill_cache(
    options: *mut riptide_readoptions_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        state.options.fill_cache = value != 0;
        Ok(())
    })
}

/// Whether iterators read blob files ahead of scans that meet their records in file order (1)
/// or not (0, the default); see `ReadOptions::blob_readahead`.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_blob_readahead(
    options: *mut riptide_readoptions_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        state.options.blob_readahead = value != 0;
        Ok(())
    })
}

/// Whether uncached reads verify block checksums (1, the default) or not (0).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_readoptions_set_verify_checksums(
    options: *mut riptide_readoptions_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_read(options, err, |state| {
        state.options.verify_checksums = value != 0;
        Ok(())
    })
}

/// Creates write options (no sync).
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_writeoptions_create(
    out_options: *mut *mut riptide_writeoptions_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let object = Arc::new(WriteOptionsObject(RwLock::new(WriteOptions::default())));
        *slot = from_handle(handle::insert(Kind::WriteOptions, object)?);
        Ok(())
    })
}

/// Destroys write options. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_writeoptions_destroy(options: *mut riptide_writeoptions_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || {
        handle::remove::<WriteOptionsObject>(to_handle(options), Kind::WriteOptions).map(drop)
    })
}

/// Sync the WAL before the write returns (1): the write then survives power loss.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_writeoptions_set_sync(
    options: *mut riptide_writeoptions_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        handle::get::<WriteOptionsObject>(to_handle(options), Kind::WriteOptions)?.0.write().sync = value != 0;
        Ok(())
    })
}
