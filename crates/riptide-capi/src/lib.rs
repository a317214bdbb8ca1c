//! The C ABI of Riptide: `libriptide.a`, `libriptide.so` and `include/riptide.h`.
//!
//! Every exported function is `extern "C"`, starts with `riptide_`, runs its body under
//! `catch_unwind` (see [`error`]) and names objects by opaque handles from the registry (see
//! [`handle`]), never by pointers to Rust memory, so NULL, stale, double-closed and
//! wrong-kind handles are reported as `RIPTIDE_MISUSE` instead of causing undefined behaviour.
//! The conventions the C side relies on (who frees what, thread safety, the ABI version) are
//! written once, in the header's top comment, which `cbindgen.toml` holds; `tests/header.rs`
//! fails when the committed header differs from what this source generates.
//!
//! Modules by concern: `handle` (the registry), `error` (codes and the entry guard), `memory`
//! (arguments read from C and buffers handed to it), `options`, `db` (open, close, reads,
//! writes, column families, maintenance), `batch`, `iterator`, `snapshot`, `txn`, `stats` and
//! `backup`.
//!
//! Invariant: no exported function dereferences a handle value; the only pointers it
//! dereferences are the caller's byte buffers, C strings and out-parameters, whose validity
//! is the caller's part of the contract (stated in the header).

pub mod backup;
pub mod batch;
pub mod db;
pub mod error;
pub mod family;
mod handle;
pub mod iterator;
pub mod memory;
pub mod options;
pub mod snapshot;
pub mod stats;
pub mod txn;

use std::ffi::c_char;

pub use error::*;

/// The ABI's major version: bumped on every change that breaks a program compiled against an
/// earlier header (a removed or changed function, type or constant). Additions do not bump it.
pub const RIPTIDE_ABI_VERSION: u32 = 1;

// The opaque handle types: cbindgen emits each as an incomplete struct, and the C side only
// ever holds pointers to them (whose values are registry handles, see `handle`).

/// Options for `riptide_open`: database-wide options and those of the default column family.
#[allow(non_camel_case_types)]
pub struct riptide_options_t {
    _opaque: [u8; 0],
}

/// Options of one column family.
#[allow(non_camel_case_types)]
pub struct riptide_cf_options_t {
    _opaque: [u8; 0],
}

/// Options of reads and iterators: snapshot, bounds, cache and checksum use.
#[allow(non_camel_case_types)]
pub struct riptide_readoptions_t {
    _opaque: [u8; 0],
}

/// Options of writes: whether to sync the write-ahead log.
#[allow(non_camel_case_types)]
pub struct riptide_writeoptions_t {
    _opaque: [u8; 0],
}

/// Options of a transaction: isolation level, locking mode, lock timeout, limits.
#[allow(non_camel_case_types)]
pub struct riptide_txn_options_t {
    _opaque: [u8; 0],
}

/// An open database.
#[allow(non_camel_case_types)]
pub struct riptide_db_t {
    _opaque: [u8; 0],
}

/// A handle to one column family of one database.
#[allow(non_camel_case_types)]
pub struct riptide_cf_t {
    _opaque: [u8; 0],
}

/// A consistent read-only view of a database at one point of its history.
#[allow(non_camel_case_types)]
pub struct riptide_snapshot_t {
    _opaque: [u8; 0],
}

/// A write batch: puts and deletes applied atomically by `riptide_write`.
#[allow(non_camel_case_types)]
pub struct riptide_batch_t {
    _opaque: [u8; 0],
}

/// A cursor over a database's or a transaction's keys.
#[allow(non_camel_case_types)]
pub struct riptide_iterator_t {
    _opaque: [u8; 0],
}

/// A transaction.
#[allow(non_camel_case_types)]
pub struct riptide_txn_t {
    _opaque: [u8; 0],
}

/// A value read without a copy in the ABI, held until `riptide_pinnable_release`.
#[allow(non_camel_case_types)]
pub struct riptide_pinnable_t {
    _opaque: [u8; 0],
}

/// A backup engine: one backup directory's incremental backups of databases.
#[allow(non_camel_case_types)]
pub struct riptide_backup_engine_t {
    _opaque: [u8; 0],
}

/// An error: code, message and OS error number.
#[allow(non_camel_case_types)]
pub struct riptide_error_t {
    _opaque: [u8; 0],
}

/// The handle value a C pointer carries (0 for NULL).
pub(crate) fn to_handle<T>(pointer: *const T) -> u64 {
    pointer.addr() as u64
}

/// The C pointer that carries a handle value; never dereferenced by anyone.
pub(crate) fn from_handle<T>(handle: u64) -> *mut T {
    std::ptr::without_provenance_mut(handle as usize)
}

/// The ABI's major version, `RIPTIDE_ABI_VERSION` of the library actually loaded. A program
/// should check at start-up that it equals the `RIPTIDE_ABI_VERSION` it was compiled with.
#[no_mangle]
pub extern "C" fn riptide_version() -> u32 {
    RIPTIDE_ABI_VERSION
}

/// A static, NUL-terminated description of the library: "riptide <crate version> (ABI <major>)".
#[no_mangle]
pub extern "C" fn riptide_version_string() -> *const c_char {
    const VERSION: &str = concat!("riptide ", env!("CARGO_PKG_VERSION"), " (ABI 1)\0");
    VERSION.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_string_names_the_abi_version() {
        // SAFETY: the version string is static and NUL-terminated.
        let text = unsafe { std::ffi::CStr::from_ptr(super::riptide_version_string()) };
        assert!(text.to_str().unwrap().ends_with(&format!("(ABI {})", super::RIPTIDE_ABI_VERSION)));
    }
}
