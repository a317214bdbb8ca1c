//! Arguments read from C (byte buffers, C strings, out-parameters) and buffers handed to it.
//!
//! Buffers the library returns (values, names, lists, text) are allocated with the C
//! allocator (`malloc`) so that ownership is plain: the caller frees them with `riptide_free`
//! (which is `free`) or, for lists, `riptide_free_string_list` / `riptide_free_bytes_list`.
//! A returned buffer is never NULL when a value was returned, even for an empty value (it is
//! then a 1-byte allocation with length 0), so NULL always means "no value".
//!
//! Concurrency contract: none of these helpers keeps state; what they read must stay valid and
//! unchanged for the duration of the call (the caller's side of the contract).

use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;

use crate::error::CapiError;

/// The `len` bytes at `pointer` (NULL is allowed for an empty buffer).
///
/// # Safety
/// A non-NULL `pointer` must be valid for reads of `len` bytes for the returned lifetime.
pub(crate) unsafe fn bytes<'a>(pointer: *const u8, len: usize, what: &str) -> Result<&'a [u8], CapiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(CapiError::misuse(format!("{what} is NULL with a length of {len}")));
    }
    if len > isize::MAX as usize {
        return Err(CapiError::misuse(format!("{what} has an impossible length ({len})")));
    }
    // SAFETY: non-NULL and valid for `len` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(pointer, len) })
}

/// Like [`bytes`], but NULL means "absent" (an unbounded end of a range, for example).
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn optional_bytes<'a>(
    pointer: *const u8,
    len: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, CapiError> {
    if pointer.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { bytes(pointer, len, what) }.map(Some)
}

/// The NUL-terminated UTF-8 string at `pointer`.
///
/// # Safety
/// A non-NULL `pointer` must point to a NUL-terminated string valid for the returned lifetime.
pub(crate) unsafe fn string<'a>(pointer: *const c_char, what: &str) -> Result<&'a str, CapiError> {
    if pointer.is_null() {
        return Err(CapiError::misuse(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(pointer) };
    text.to_str().map_err(|_| CapiError::invalid(format!("{what} is not valid UTF-8")))
}

/// The NUL-terminated path at `pointer` (any bytes on Unix).
///
/// # Safety
/// As [`string`].
pub(crate) unsafe fn path(pointer: *const c_char) -> Result<PathBuf, CapiError> {
    if pointer.is_null() {
        return Err(CapiError::misuse("path is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(pointer) };
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(text.to_bytes())))
    }
    #[cfg(not(unix))]
    {
        text.to_str().map(PathBuf::from).map_err(|_| CapiError::invalid("path is not valid UTF-8"))
    }
}

/// The out-parameter at `pointer`, checked before any work is done so that nothing is made and
/// then lost for want of a place to put it.
///
/// # Safety
/// A non-NULL `pointer` must be valid for writes of a `T` for the returned lifetime.
pub(crate) unsafe fn out<'a, T>(pointer: *mut T, what: &str) -> Result<&'a mut T, CapiError> {
    if pointer.is_null() {
        return Err(CapiError::misuse(format!("out-parameter {what} is NULL")));
    }
    // SAFETY: non-NULL and writable by the caller's contract.
    Ok(unsafe { &mut *pointer })
}

/// A `malloc`ed copy of `data` (at least one byte, so never NULL unless allocation fails).
pub(crate) fn malloc_copy(data: &[u8]) -> Result<*mut u8, CapiError> {
    // SAFETY: malloc with a non-zero size; the result is checked before use.
    let buffer = unsafe { libc::malloc(data.len().max(1)) }.cast::<u8>();
    if buffer.is_null() {
        return Err(CapiError::new(crate::RIPTIDE_IO, format!("out of memory for {} bytes", data.len())));
    }
    // SAFETY: `buffer` holds at least `data.len()` bytes and does not overlap `data`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buffer, data.len()) };
    Ok(buffer)
}

/// A `malloc`ed NUL-terminated copy of `text` (interior NUL bytes end the C string early).
pub(crate) fn malloc_string(text: &str) -> Result<*mut c_char, CapiError> {
    let mut data = Vec::with_capacity(text.len() + 1);
    data.extend_from_slice(text.as_bytes());
    data.push(0);
    malloc_copy(&data).map(|buffer| buffer.cast())
}

/// A `malloc`ed array of `malloc`ed copies of `items`, with a parallel `malloc`ed array of their
/// lengths when `lengths` is asked for. Each item is NUL-terminated too (not counted in its
/// length), so text items are C strings.
pub(crate) fn malloc_list(items: &[Vec<u8>]) -> Result<(*mut *mut u8, *mut usize), CapiError> {
    let count = items.len().max(1);
    // SAFETY: calloc with non-zero sizes; checked before use. Zeroed, so a partial list can be
    // freed by `free_list` if a later allocation fails.
    let array = unsafe { libc::calloc(count, std::mem::size_of::<*mut u8>()) }.cast::<*mut u8>();
    // SAFETY: as above.
    let lengths = unsafe { libc::calloc(count, std::mem::size_of::<usize>()) }.cast::<usize>();
    if array.is_null() || lengths.is_null() {
        // SAFETY: free accepts NULL and the results of calloc.
        unsafe {
            libc::free(array.cast());
            libc::free(lengths.cast());
        }
        return Err(CapiError::new(crate::RIPTIDE_IO, "out of memory for a list"));
    }
    for (index, item) in items.iter().enumerate() {
        let mut terminated = Vec::with_capacity(item.len() + 1);
        terminated.extend_from_slice(item);
        terminated.push(0);
        match malloc_copy(&terminated) {
            // SAFETY: `index` < `items.len()` <= the arrays' length.
            Ok(buffer) => unsafe {
                *array.add(index) = buffer;
                *lengths.add(index) = item.len();
            },
            Err(error) => {
                // SAFETY: the arrays came from calloc above and hold `index` items so far.
                unsafe { free_list(array, lengths, index) };
                return Err(error);
            }
        }
    }
    Ok((array, lengths))
}

/// Frees a list made by [`malloc_list`].
///
/// # Safety
/// `array` and `lengths` must be NULL or come from `malloc_list` with at least `count` items.
unsafe fn free_list(array: *mut *mut u8, lengths: *mut usize, count: usize) {
    if !array.is_null() {
        for index in 0..count {
            // SAFETY: the first `count` entries are malloc'ed buffers or NULL.
            unsafe { libc::free((*array.add(index)).cast()) };
        }
    }
    // SAFETY: both came from calloc (or are NULL).
    unsafe {
        libc::free(array.cast());
        libc::free(lengths.cast());
    }
}

/// Frees a buffer returned by the library (a value, a name, a text). NULL is ignored. This is
/// the C library's `free`; either may be used.
///
/// # Safety
/// `buffer` must be NULL or a buffer returned by Riptide and not freed yet.
#[no_mangle]
pub unsafe extern "C" fn riptide_free(buffer: *mut c_void) {
    // SAFETY: by the function's contract.
    unsafe { libc::free(buffer) }
}

/// Frees a list of strings returned by the library (`riptide_list_column_families`): every
/// string and the array. NULL is ignored.
///
/// # Safety
/// `strings` must be NULL or a list returned by Riptide with `count` entries, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn riptide_free_string_list(strings: *mut *mut c_char, count: usize) {
    // SAFETY: by the function's contract; no lengths array comes with a string list.
    unsafe { free_list(strings.cast(), std::ptr::null_mut(), count) }
}

/// Frees a list of byte strings returned by the library (`riptide_prepared_transactions`):
/// every item, the array and the array of lengths. NULLs are ignored.
///
/// # Safety
/// `items` and `lengths` must be NULL or a list returned by Riptide with `count` entries.
#[no_mangle]
pub unsafe extern "C" fn riptide_free_bytes_list(items: *mut *mut u8, lengths: *mut usize, count: usize) {
    // SAFETY: by the function's contract.
    unsafe { free_list(items, lengths, count) }
}
