//! Result codes, error objects and the entry guard every exported function goes through.
//!
//! Every fallible call returns a `riptide_code_t` (`RIPTIDE_OK` is 0) and takes, last, an
//! optional `riptide_error_t **err`: on failure, when `err` is not NULL, `*err` receives an error
//! object with the code, a message and whether retrying the transaction may succeed. An error
//! already in `*err` is freed first, so a loop that reuses one variable leaks nothing. The guard
//! ([`call`]) runs the body under `catch_unwind`, so a Rust panic becomes `RIPTIDE_PANIC` and
//! never unwinds into C.
//!
//! Concurrency contract: error objects are immutable once made; any thread may read one, and
//! the one that frees it must be the last to use its message pointer.

use std::any::Any;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::handle::{self, Kind};
use crate::{from_handle, riptide_error_t, to_handle};

/// A result code: `RIPTIDE_OK` (0) or one of the error codes below.
#[allow(non_camel_case_types)]
pub type riptide_code_t = i32;

/// Success.
pub const RIPTIDE_OK: riptide_code_t = 0;
/// An I/O error from the operating system; `riptide_error_os_code` gives errno. Not retryable.
pub const RIPTIDE_IO: riptide_code_t = 1;
/// A file failed a checksum or could not be decoded; the message names the file and offset.
pub const RIPTIDE_CORRUPTION: riptide_code_t = 2;
/// An argument broke a documented limit (key or value too large, invalid options, unknown
/// xid, dropped column family, no open savepoint, ...). Not retryable.
pub const RIPTIDE_INVALID_ARGUMENT: riptide_code_t = 3;
/// A resource is in use or exhausted: the directory is locked by another handle or process, or
/// a transaction reached its lock limit (it stays usable; MariaDB's ER_LOCK_TABLE_FULL).
pub const RIPTIDE_BUSY: riptide_code_t = 4;
/// Serialization failure: the transaction conflicts with one that committed first. At commit
/// nothing was written and the transaction is over; roll back and retry (SQLSTATE 40001).
/// Retryable.
pub const RIPTIDE_CONFLICT: riptide_code_t = 5;
/// The transaction was chosen as a deadlock victim; its lock request was not granted. Roll back
/// and retry (SQLSTATE 40001). Retryable.
pub const RIPTIDE_DEADLOCK: riptide_code_t = 6;
/// A lock wait passed the transaction's lock timeout. Only that request failed: the transaction
/// keeps its locks and writes (MariaDB rolls back the statement). Retryable.
pub const RIPTIDE_LOCK_TIMEOUT: riptide_code_t = 7;
/// The database is closed or closing.
pub const RIPTIDE_CLOSED: riptide_code_t = 8;
/// The operation was cancelled on request (a compaction stopped by
/// `riptide_cancel_manual_compactions`).
pub const RIPTIDE_CANCELLED: riptide_code_t = 9;
/// An engine error of a kind this version of the ABI does not know yet.
pub const RIPTIDE_UNKNOWN: riptide_code_t = 63;
/// The caller broke the ABI's contract: a NULL pointer where one is required, a handle that
/// was closed, destroyed or never valid, a handle of another kind, a handle used with another
/// database than its own, or an operation on a transaction that has ended. A bug in the caller;
/// nothing was done.
pub const RIPTIDE_MISUSE: riptide_code_t = 64;
/// A bug in Riptide: a Rust panic was caught at the ABI boundary. The handle involved may be
/// left in any safe state; close it.
pub const RIPTIDE_PANIC: riptide_code_t = 65;

/// An error on its way to the C side.
#[derive(Debug)]
pub(crate) struct CapiError {
    pub(crate) code: riptide_code_t,
    pub(crate) message: String,
    pub(crate) os_code: i32,
}

impl CapiError {
    pub(crate) fn new(code: riptide_code_t, message: impl Into<String>) -> CapiError {
        CapiError { code, message: message.into(), os_code: 0 }
    }

    pub(crate) fn misuse(message: impl Into<String>) -> CapiError {
        CapiError::new(RIPTIDE_MISUSE, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> CapiError {
        CapiError::new(RIPTIDE_INVALID_ARGUMENT, message)
    }

    pub(crate) fn busy(message: impl Into<String>) -> CapiError {
        CapiError::new(RIPTIDE_BUSY, message)
    }

    pub(crate) fn panic(message: impl Into<String>) -> CapiError {
        CapiError::new(RIPTIDE_PANIC, message)
    }
}

impl From<riptide_engine::Error> for CapiError {
    fn from(error: riptide_engine::Error) -> CapiError {
        use riptide_engine::Error as E;
        let code = match &error {
            E::Io { .. } => RIPTIDE_IO,
            E::Corruption { .. } => RIPTIDE_CORRUPTION,
            E::InvalidArgument(_) => RIPTIDE_INVALID_ARGUMENT,
            E::Busy(_) => RIPTIDE_BUSY,
            E::Conflict(_) => RIPTIDE_CONFLICT,
            E::Deadlock(_) => RIPTIDE_DEADLOCK,
            E::LockTimeout(_) => RIPTIDE_LOCK_TIMEOUT,
            E::Closed(_) => RIPTIDE_CLOSED,
            E::Cancelled(_) => RIPTIDE_CANCELLED,
            _ => RIPTIDE_UNKNOWN,
        };
        let os_code = match &error {
            E::Io { source, .. } => source.raw_os_error().unwrap_or(0),
            _ => 0,
        };
        CapiError { code, message: error.to_string(), os_code }
    }
}

/// What a `riptide_error_t` handle names.
pub(crate) struct ErrorObject {
    code: riptide_code_t,
    message: CString,
    os_code: i32,
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let detail = if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    };
    format!("internal error (Rust panic caught at the ABI boundary): {detail}")
}

/// Stores `error` in `*err` (freeing the error already there) when `err` is not NULL.
fn report(err: *mut *mut riptide_error_t, error: CapiError) {
    if err.is_null() {
        return;
    }
    // SAFETY: the contract is that a non-NULL `err` points to a `riptide_error_t *` variable.
    let slot = unsafe { &mut *err };
    let previous = to_handle(*slot);
    if previous != 0 {
        // Whatever the variable held: a live error is freed, anything else is left alone (the
        // registry never dereferences it).
        drop(handle::remove::<ErrorObject>(previous, Kind::Error));
    }
    let message = CString::new(error.message.replace('\0', "\\0")).unwrap_or_default();
    let object = Arc::new(ErrorObject { code: error.code, message, os_code: error.os_code });
    *slot = match handle::insert(Kind::Error, object) {
        Ok(handle) => from_handle(handle),
        Err(_) => std::ptr::null_mut(),
    };
}

/// Runs `body` as the whole of an exported call: a panic becomes `RIPTIDE_PANIC`, an error is
/// reported through `err`, and the code is returned.
pub(crate) fn call(err: *mut *mut riptide_error_t, body: impl FnOnce() -> Result<(), CapiError>) -> riptide_code_t {
    let result = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => Err(CapiError::panic(panic_message(payload.as_ref()))),
    };
    match result {
        Ok(()) => RIPTIDE_OK,
        Err(error) => {
            let code = error.code;
            // Reporting allocates; a panic there (out of memory aside, which aborts) must not
            // escape either.
            let _ = catch_unwind(AssertUnwindSafe(|| report(err, error)));
            code
        }
    }
}

/// Runs `body` for a call that returns a value instead of a code: a panic gives `fallback`.
pub(crate) fn guard<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The code of `error`; `RIPTIDE_MISUSE` when `error` is not a live error handle.
#[no_mangle]
pub extern "C" fn riptide_error_code(error: *const riptide_error_t) -> riptide_code_t {
    guard(RIPTIDE_PANIC, || match handle::get::<ErrorObject>(to_handle(error), Kind::Error) {
        Ok(object) => object.code,
        Err(_) => RIPTIDE_MISUSE,
    })
}

/// The message of `error`, NUL-terminated, valid until `riptide_error_free(error)`. A static
/// message when `error` is not a live error handle; never NULL.
#[no_mangle]
pub extern "C" fn riptide_error_message(error: *const riptide_error_t) -> *const c_char {
    const INVALID: &std::ffi::CStr = c"invalid riptide_error_t handle (NULL, freed, or not an error)";
    guard(INVALID.as_ptr(), || match handle::get::<ErrorObject>(to_handle(error), Kind::Error) {
        // The CString's buffer lives as long as the object, which the registry keeps until
        // `riptide_error_free`; the Arc dropped here is only this call's reference.
        Ok(object) => object.message.as_ptr(),
        Err(_) => INVALID.as_ptr(),
    })
}

/// 1 when retrying the whole transaction may succeed (`RIPTIDE_CONFLICT`, `RIPTIDE_DEADLOCK`,
/// `RIPTIDE_LOCK_TIMEOUT`), else 0.
#[no_mangle]
pub extern "C" fn riptide_error_is_retryable(error: *const riptide_error_t) -> u8 {
    riptide_code_is_retryable(riptide_error_code(error))
}

/// The operating system's error number of a `RIPTIDE_IO` error (errno), else 0.
#[no_mangle]
pub extern "C" fn riptide_error_os_code(error: *const riptide_error_t) -> i32 {
    guard(0, || handle::get::<ErrorObject>(to_handle(error), Kind::Error).map_or(0, |object| object.os_code))
}

/// Frees an error. `RIPTIDE_MISUSE` for NULL, an error freed already, or another handle.
#[no_mangle]
pub extern "C" fn riptide_error_free(error: *mut riptide_error_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || handle::remove::<ErrorObject>(to_handle(error), Kind::Error).map(drop))
}

/// 1 for the codes after which retrying the whole transaction may succeed, else 0.
#[no_mangle]
pub extern "C" fn riptide_code_is_retryable(code: riptide_code_t) -> u8 {
    u8::from(matches!(code, RIPTIDE_CONFLICT | RIPTIDE_DEADLOCK | RIPTIDE_LOCK_TIMEOUT))
}

/// The name of a code ("RIPTIDE_OK", "RIPTIDE_CONFLICT", ...), a static string; "unknown code"
/// for a value that is none of them.
#[no_mangle]
pub extern "C" fn riptide_code_name(code: riptide_code_t) -> *const c_char {
    let name: &'static std::ffi::CStr = match code {
        RIPTIDE_OK => c"RIPTIDE_OK",
        RIPTIDE_IO => c"RIPTIDE_IO",
        RIPTIDE_CORRUPTION => c"RIPTIDE_CORRUPTION",
        RIPTIDE_INVALID_ARGUMENT => c"RIPTIDE_INVALID_ARGUMENT",
        RIPTIDE_BUSY => c"RIPTIDE_BUSY",
        RIPTIDE_CONFLICT => c"RIPTIDE_CONFLICT",
        RIPTIDE_DEADLOCK => c"RIPTIDE_DEADLOCK",
        RIPTIDE_LOCK_TIMEOUT => c"RIPTIDE_LOCK_TIMEOUT",
        RIPTIDE_CLOSED => c"RIPTIDE_CLOSED",
        RIPTIDE_CANCELLED => c"RIPTIDE_CANCELLED",
        RIPTIDE_UNKNOWN => c"RIPTIDE_UNKNOWN",
        RIPTIDE_MISUSE => c"RIPTIDE_MISUSE",
        RIPTIDE_PANIC => c"RIPTIDE_PANIC",
        _ => c"unknown code",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_and_errors_replace_each_other() {
        let mut err: *mut riptide_error_t = std::ptr::null_mut();
        let code = call(&mut err, || panic!("boom"));
        assert_eq!(code, RIPTIDE_PANIC);
        assert_eq!(riptide_error_code(err), RIPTIDE_PANIC);
        // SAFETY: the message pointer is valid until the error is freed.
        let message = unsafe { std::ffi::CStr::from_ptr(riptide_error_message(err)) };
        assert!(message.to_str().unwrap().contains("boom"));
        let first = err;
        let code = call(&mut err, || Err(riptide_engine::Error::Conflict("x".into()).into()));
        assert_eq!(code, RIPTIDE_CONFLICT);
        assert_eq!(riptide_error_is_retryable(err), 1);
        // The first error was freed when the second replaced it.
        assert_eq!(riptide_error_free(first), RIPTIDE_MISUSE);
        assert_eq!(riptide_error_free(err), RIPTIDE_OK);
        assert_eq!(riptide_error_free(err), RIPTIDE_MISUSE);
        assert_eq!(riptide_error_code(err), RIPTIDE_MISUSE);
    }
}
