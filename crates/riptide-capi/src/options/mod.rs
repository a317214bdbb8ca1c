//! Options objects: database options, column family options, read options, write options and
//! transaction options, each with a builder-style setter per field.
//!
//! An options object is a plain value behind a lock: setters replace one field and check only
//! what can be checked alone (an enum value in range); `riptide_options_validate` and
//! `riptide_open` check the whole. Functions that take an options object copy what they need
//! during the call, so an options object may be changed or destroyed afterwards without effect
//! on what was opened, begun or created with it.
//!
//! Concurrency contract: every options object is thread-safe; concurrent setters and uses
//! serialize on its lock.

use std::sync::Arc;

use parking_lot::RwLock;
use riptide_engine::{
    BytewiseComparator, ColumnFamilyOptions, CompactionPriority, Comparator, Compression, Options, ReadOptions,
    ReverseBytewiseComparator, SyncMode, TransactionOptions, WalRecovery, WriteOptions,
};

use crate::error::{call, CapiError};

mod fields;
mod read_write;
mod txn_options;

use crate::handle::{self, Kind};
use crate::memory::{malloc_string, out};
use crate::{from_handle, riptide_cf_options_t, riptide_code_t, riptide_error_t, riptide_options_t, to_handle};
pub use fields::*;
pub use read_write::*;
pub use txn_options::*;

/// Block compression: none.
pub const RIPTIDE_COMPRESSION_NONE: i32 = 0;
/// Block compression: LZ4 (the default).
pub const RIPTIDE_COMPRESSION_LZ4: i32 = 1;
/// Block compression: Zstandard at level 3.
pub const RIPTIDE_COMPRESSION_ZSTD: i32 = 2;
/// Block compression: Snappy.
pub const RIPTIDE_COMPRESSION_SNAPPY: i32 = 3;
/// For `*_set_bottommost_compression`: no override (the default).
pub const RIPTIDE_COMPRESSION_UNSET: i32 = -1;

/// WAL sync: only writes that ask for it are synced (the default); a process crash loses
/// nothing, a power loss may lose unsynced writes.
pub const RIPTIDE_SYNC_NONE: i32 = 0;
/// WAL sync: every write is synced before it returns (group commit shares the sync).
pub const RIPTIDE_SYNC_FULL: i32 = 1;
/// WAL sync: a background thread syncs every `interval_us` microseconds (at least 100).
pub const RIPTIDE_SYNC_INTERVAL: i32 = 2;

/// WAL recovery: replay the longest intact prefix; a torn tail is dropped (the default).
pub const RIPTIDE_WAL_RECOVERY_TOLERATE_TORN_TAIL: i32 = 0;
/// WAL recovery: any damage is reported as corruption.
pub const RIPTIDE_WAL_RECOVERY_ABSOLUTE: i32 = 1;
/// WAL recovery: skip damaged records and go on (may lose data, but opens).
pub const RIPTIDE_WAL_RECOVERY_SKIP_CORRUPT: i32 = 2;

/// Compaction priority: least overlap with the next level per byte moved (the default).
pub const RIPTIDE_COMPACTION_PRIORITY_MIN_OVERLAPPING_RATIO: i32 = 0;
/// Compaction priority: round robin over the key space.
pub const RIPTIDE_COMPACTION_PRIORITY_ROUND_ROBIN: i32 = 1;

/// Key order: bytewise ascending (the default).
pub const RIPTIDE_COMPARATOR_BYTEWISE: i32 = 0;
/// Key order: bytewise descending.
pub const RIPTIDE_COMPARATOR_REVERSE_BYTEWISE: i32 = 1;

/// Isolation: READ UNCOMMITTED, which runs as READ COMMITTED (nothing uncommitted is visible).
pub const RIPTIDE_ISOLATION_READ_UNCOMMITTED: i32 = 0;
/// Isolation: READ COMMITTED: every read sees the latest committed data.
pub const RIPTIDE_ISOLATION_READ_COMMITTED: i32 = 1;
/// Isolation: REPEATABLE READ (snapshot isolation, first committer wins; the default).
pub const RIPTIDE_ISOLATION_REPEATABLE_READ: i32 = 2;
/// Isolation: SERIALIZABLE.
pub const RIPTIDE_ISOLATION_SERIALIZABLE: i32 = 3;

/// Transactions lock what they write and read for update (the default).
pub const RIPTIDE_TXN_PESSIMISTIC: i32 = 0;
/// Transactions take no locks and are validated at commit.
pub const RIPTIDE_TXN_OPTIMISTIC: i32 = 1;

/// What a `riptide_options_t` handle names.
pub(crate) struct OptionsObject(pub(crate) RwLock<Options>);
/// What a `riptide_cf_options_t` handle names.
pub(crate) struct CfOptionsObject(pub(crate) RwLock<ColumnFamilyOptions>);
/// What a `riptide_writeoptions_t` handle names.
pub(crate) struct WriteOptionsObject(pub(crate) RwLock<WriteOptions>);
/// What a `riptide_txn_options_t` handle names.
pub(crate) struct TxnOptionsObject(pub(crate) RwLock<TransactionOptions>);

/// Read options with the database their snapshot belongs to (checked when they are used).
pub(crate) struct ReadOptionsState {
    pub(crate) options: ReadOptions,
    pub(crate) snapshot_db: Option<u64>,
}
/// What a `riptide_readoptions_t` handle names.
pub(crate) struct ReadOptionsObject(pub(crate) RwLock<ReadOptionsState>);

pub(crate) fn compression(value: i32) -> Result<Compression, CapiError> {
    match value {
        RIPTIDE_COMPRESSION_NONE => Ok(Compression::None),
        RIPTIDE_COMPRESSION_LZ4 => Ok(Compression::Lz4),
        RIPTIDE_COMPRESSION_ZSTD => Ok(Compression::Zstd),
        RIPTIDE_COMPRESSION_SNAPPY => Ok(Compression::Snappy),
        _ => Err(CapiError::invalid(format!("unknown compression {value}"))),
    }
}

fn optional_compression(value: i32) -> Result<Option<Compression>, CapiError> {
    match value {
        RIPTIDE_COMPRESSION_UNSET => Ok(None),
        _ => compression(value).map(Some),
    }
}

fn compaction_priority(value: i32) -> Result<CompactionPriority, CapiError> {
    match value {
        RIPTIDE_COMPACTION_PRIORITY_MIN_OVERLAPPING_RATIO => Ok(CompactionPriority::MinOverlappingRatio),
        RIPTIDE_COMPACTION_PRIORITY_ROUND_ROBIN => Ok(CompactionPriority::RoundRobin),
        _ => Err(CapiError::invalid(format!("unknown compaction priority {value}"))),
    }
}

fn comparator(value: i32) -> Result<Arc<dyn Comparator>, CapiError> {
    match value {
        RIPTIDE_COMPARATOR_BYTEWISE => Ok(Arc::new(BytewiseComparator)),
        RIPTIDE_COMPARATOR_REVERSE_BYTEWISE => Ok(Arc::new(ReverseBytewiseComparator)),
        _ => Err(CapiError::invalid(format!("unknown comparator {value}"))),
    }
}

fn wal_recovery(value: i32) -> Result<WalRecovery, CapiError> {
    match value {
        RIPTIDE_WAL_RECOVERY_TOLERATE_TORN_TAIL => Ok(WalRecovery::TolerateTornTail),
        RIPTIDE_WAL_RECOVERY_ABSOLUTE => Ok(WalRecovery::Absolute),
        RIPTIDE_WAL_RECOVERY_SKIP_CORRUPT => Ok(WalRecovery::SkipCorrupt),
        _ => Err(CapiError::invalid(format!("unknown WAL recovery mode {value}"))),
    }
}

fn set_db(
    options: *mut riptide_options_t,
    err: *mut *mut riptide_error_t,
    change: impl FnOnce(&mut Options) -> Result<(), CapiError>,
) -> riptide_code_t {
    call(err, || change(&mut handle::get::<OptionsObject>(to_handle(options), Kind::Options)?.0.write()))
}

fn set_cf(
    options: *mut riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
    change: impl FnOnce(&mut ColumnFamilyOptions) -> Result<(), CapiError>,
) -> riptide_code_t {
    call(err, || change(&mut handle::get::<CfOptionsObject>(to_handle(options), Kind::CfOptions)?.0.write()))
}

/// Creates database options with every default; free with `riptide_options_destroy`.
///
/// # Safety
/// `out` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_create(
    out_options: *mut *mut riptide_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let object = Arc::new(OptionsObject(RwLock::new(Options::default())));
        *slot = from_handle(handle::insert(Kind::Options, object)?);
        Ok(())
    })
}

/// Destroys database options. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_options_destroy(options: *mut riptide_options_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<OptionsObject>(to_handle(options), Kind::Options).map(drop))
}

/// Checks every option against its documented range, as `riptide_open` does.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_validate(
    options: *const riptide_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(handle::get::<OptionsObject>(to_handle(options), Kind::Options)?.0.read().validate()?))
}

/// A human-readable dump of every field, `malloc`ed and NUL-terminated (free with `riptide_free`).
///
/// # Safety
/// `out_text` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_describe(
    options: *const riptide_options_t,
    out_text: *mut *mut std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_text, "out_text") }?;
        let object = handle::get::<OptionsObject>(to_handle(options), Kind::Options)?;
        let text = format!("{:?}", *object.0.read());
        *slot = malloc_string(&text)?;
        Ok(())
    })
}

/// Sets the WAL sync policy: `RIPTIDE_SYNC_NONE` (the default), `RIPTIDE_SYNC_FULL`, or
/// `RIPTIDE_SYNC_INTERVAL` with `interval_us` (at least 100; ignored by the other modes).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_wal_sync_mode(
    options: *mut riptide_options_t,
    mode: i32,
    interval_us: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.wal_sync_mode = match mode {
            RIPTIDE_SYNC_NONE => SyncMode::None,
            RIPTIDE_SYNC_FULL => SyncMode::Full,
            RIPTIDE_SYNC_INTERVAL => SyncMode::Interval { interval_us },
            _ => return Err(CapiError::invalid(format!("unknown sync mode {mode}"))),
        };
        Ok(())
    })
}

/// Reads `count` `RIPTIDE_COMPRESSION_*` values (one per level; levels past the end use the
/// last; 0 values: the single compression everywhere).
///
/// # Safety
/// `levels` must be valid for `count` reads.
unsafe fn compression_list(levels: *const i32, count: usize) -> Result<Vec<Compression>, CapiError> {
    if count > 64 {
        return Err(CapiError::invalid("compression_per_level has more entries than levels (64)"));
    }
    if count > 0 && levels.is_null() {
        return Err(CapiError::misuse("levels is NULL with a non-zero count"));
    }
    // SAFETY: non-NULL and valid for `count` values by the caller's contract.
    let values = if count == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(levels, count) } };
    values.iter().map(|&value| compression(value)).collect()
}

/// Sets the compression per level: `count` `RIPTIDE_COMPRESSION_*` values, index = level;
/// levels past the end use the last entry; `count` 0 uses `compression` everywhere.
///
/// # Safety
/// `levels` must be valid for `count` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_compression_per_level(
    options: *mut riptide_options_t,
    levels: *const i32,
    count: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        // SAFETY: by the function's contract.
        options.compression_per_level = unsafe { compression_list(levels, count) }?;
        Ok(())
    })
}

/// Creates column family options with every default; free with `riptide_cf_options_destroy`.
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_create(
    out_options: *mut *mut riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let object = Arc::new(CfOptionsObject(RwLock::new(ColumnFamilyOptions::default())));
        *slot = from_handle(handle::insert(Kind::CfOptions, object)?);
        Ok(())
    })
}

/// Creates column family options equal to those `options` give the default column family.
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_create_from(
    options: *const riptide_options_t,
    out_options: *mut *mut riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let source = handle::get::<OptionsObject>(to_handle(options), Kind::Options)?;
        let family = source.0.read().column_family_options();
        *slot = from_handle(handle::insert(Kind::CfOptions, Arc::new(CfOptionsObject(RwLock::new(family))))?);
        Ok(())
    })
}

/// Destroys column family options. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_cf_options_destroy(options: *mut riptide_cf_options_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<CfOptionsObject>(to_handle(options), Kind::CfOptions).map(drop))
}

/// Checks every column family option against its documented range.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_validate(
    options: *const riptide_cf_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(handle::get::<CfOptionsObject>(to_handle(options), Kind::CfOptions)?.0.read().validate()?))
}

/// A human-readable dump of every field, `malloc`ed and NUL-terminated (free with `riptide_free`).
///
/// # Safety
/// `out_text` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_describe(
    options: *const riptide_cf_options_t,
    out_text: *mut *mut std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_text, "out_text") }?;
        let object = handle::get::<CfOptionsObject>(to_handle(options), Kind::CfOptions)?;
        let text = format!("{:?}", *object.0.read());
        *slot = malloc_string(&text)?;
        Ok(())
    })
}

/// Sets the column family's compression per level (see `riptide_options_set_compression_per_level`).
///
/// # Safety
/// `levels` must be valid for `count` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_compression_per_level(
    options: *mut riptide_cf_options_t,
    levels: *const i32,
    count: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        // SAFETY: by the function's contract.
        options.compression_per_level = unsafe { compression_list(levels, count) }?;
        Ok(())
    })
}
