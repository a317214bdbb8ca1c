//! Transaction options: isolation level, locking mode, lock timeout, deadlock detection, lock
//! limits, commit sync and the in-memory write limit.
//!
//! Concurrency contract: as every options object, thread-safe behind its lock.

use std::time::Duration;

use parking_lot::RwLock;
use riptide_engine::{ConcurrencyMode, IsolationLevel, TransactionOptions};

use std::sync::Arc;

use super::*;
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::out;
use crate::riptide_txn_options_t;
use crate::{from_handle, riptide_code_t, riptide_error_t, to_handle};

/// Creates transaction options with every default: REPEATABLE READ, pessimistic, 1 s lock
/// timeout, deadlock detection on, no lock limit, escalation past 100,000 row locks, no sync,
/// 32 MiB of writes in memory.
///
/// # Safety
/// `out_options` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_create(
    out_options: *mut *mut riptide_txn_options_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_options, "out_options") }?;
        let object = Arc::new(TxnOptionsObject(RwLock::new(TransactionOptions::default())));
        *slot = from_handle(handle::insert(Kind::TxnOptions, object)?);
        Ok(())
    })
}

/// Destroys transaction options. `RIPTIDE_MISUSE` for NULL or a second destroy.
#[no_mangle]
pub extern "C" fn riptide_txn_options_destroy(options: *mut riptide_txn_options_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<TxnOptionsObject>(to_handle(options), Kind::TxnOptions).map(drop))
}

fn set_txn(
    options: *mut riptide_txn_options_t,
    err: *mut *mut riptide_error_t,
    change: impl FnOnce(&mut TransactionOptions) -> Result<(), CapiError>,
) -> riptide_code_t {
    call(err, || change(&mut handle::get::<TxnOptionsObject>(to_handle(options), Kind::TxnOptions)?.0.write()))
}

/// The isolation level, a `RIPTIDE_ISOLATION_*` value.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_isolation(
    options: *mut riptide_txn_options_t,
    isolation: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.isolation = match isolation {
            RIPTIDE_ISOLATION_READ_UNCOMMITTED => IsolationLevel::ReadUncommitted,
            RIPTIDE_ISOLATION_READ_COMMITTED => IsolationLevel::ReadCommitted,
            RIPTIDE_ISOLATION_REPEATABLE_READ => IsolationLevel::RepeatableRead,
            RIPTIDE_ISOLATION_SERIALIZABLE => IsolationLevel::Serializable,
            _ => return Err(CapiError::invalid(format!("unknown isolation level {isolation}"))),
        };
        Ok(())
    })
}

/// Pessimistic (`RIPTIDE_TXN_PESSIMISTIC`, locks) or optimistic (`RIPTIDE_TXN_OPTIMISTIC`).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_mode(
    options: *mut riptide_txn_options_t,
    mode: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.mode = match mode {
            RIPTIDE_TXN_PESSIMISTIC => ConcurrencyMode::Pessimistic,
            RIPTIDE_TXN_OPTIMISTIC => ConcurrencyMode::Optimistic,
            _ => return Err(CapiError::invalid(format!("unknown transaction mode {mode}"))),
        };
        Ok(())
    })
}

/// How long a lock request may wait, in microseconds, before `RIPTIDE_LOCK_TIMEOUT`; 0 never
/// waits; a negative value waits without limit. Default 1,000,000 (1 s).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_lock_timeout_us(
    options: *mut riptide_txn_options_t,
    timeout_us: i64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.lock_timeout = u64::try_from(timeout_us).ok().map(Duration::from_micros);
        Ok(())
    })
}

/// Look for deadlocks when a lock request waits (1, the default); without it (0) only the
/// lock timeout ends a deadlock.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_deadlock_detection(
    options: *mut riptide_txn_options_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.deadlock_detection = value != 0;
        Ok(())
    })
}

/// The most row locks the transaction may hold (past it: `RIPTIDE_BUSY`); 0: no limit (the
/// default).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_max_lock_count(
    options: *mut riptide_txn_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.max_lock_count = (value != 0).then_some(value);
        Ok(())
    })
}

/// Row locks in one column family past which a pessimistic transaction locks the whole family
/// instead; 0: never. Default 100,000.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_lock_escalation_threshold(
    options: *mut riptide_txn_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.lock_escalation_threshold = (value != 0).then_some(value);
        Ok(())
    })
}

/// Sync the commit record before commit returns (1). Default 0.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_sync(
    options: *mut riptide_txn_options_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.sync = value != 0;
        Ok(())
    })
}

/// The most memory the transaction's writes hold before they spill to private files (capped at
/// the database's max batch size). Default 32 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_txn_options_set_write_memory_limit_bytes(
    options: *mut riptide_txn_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_txn(options, err, |options| {
        options.write_memory_limit_bytes = value;
        Ok(())
    })
}
