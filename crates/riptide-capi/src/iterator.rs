//! Iterators over a database (`riptide_iterator_create`) or over a transaction's view
//! (`riptide_txn_iterator_create`), with one C type and one set of calls for both.
//!
//! Key and value pointers point into the iterator's own buffers (no copy) and stay valid until
//! the iterator next moves (seek, next, prev) or is destroyed. A transaction iterator borrows
//! its transaction: the iterator object keeps the transaction alive through an `Arc` it owns,
//! and the borrow is dropped before that `Arc` (field order), so the borrow can never outlive
//! what it borrows. Committing, rolling back or destroying the transaction destroys its
//! iterators; closing the database destroys every iterator of it.
//!
//! Concurrency contract: an iterator is not meant to be shared: use it from one thread at a
//! time (a call from a second thread is serialized by the iterator's mutex, so it is never
//! undefined behaviour, but it moves the iterator under the first thread's key and value
//! pointers).

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use riptide_engine::{DbIterator, Transaction, TransactionIterator};

use crate::db::{family_of, with_db, with_read_options, DbObject};
use crate::error::{call, guard, CapiError};
use crate::handle::{self, Kind};
use crate::memory::{bytes, out};
use crate::txn::TxnObject;
use crate::{
    from_handle, riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t, riptide_iterator_t,
    riptide_readoptions_t, to_handle,
};

/// The engine iterator behind a handle.
// A cursor always lives inside an `Arc`ed `IteratorObject`, never on the stack or in an array,
// so the size difference between its variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Cursor {
    Db(DbIterator),
    Txn {
        /// Borrows `*transaction`; declared first so that it is dropped first.
        iterator: TransactionIterator<'static>,
        _transaction: Arc<Transaction>,
    },
}

impl Cursor {
    /// An iterator of `transaction`, keeping it alive.
    pub(crate) fn of_transaction(
        transaction: Arc<Transaction>,
        make: impl for<'a> FnOnce(&'a Transaction) -> riptide_engine::Result<TransactionIterator<'a>>,
    ) -> Result<Cursor, CapiError> {
        let iterator = make(&transaction)?;
        // SAFETY: only the lifetime changes. The iterator borrows the transaction inside the
        // `Arc`'s allocation, which does not move and lives as long as the `Arc` stored beside
        // the iterator in this variant; the iterator is declared first, so it is dropped
        // before that `Arc`, and no other code can take the `Arc` out while the iterator lives.
        let iterator =
            unsafe { std::mem::transmute::<TransactionIterator<'_>, TransactionIterator<'static>>(iterator) };
        Ok(Cursor::Txn { iterator, _transaction: transaction })
    }

    fn valid(&self) -> bool {
        match self {
            Cursor::Db(iterator) => iterator.valid(),
            Cursor::Txn { iterator, .. } => iterator.valid(),
        }
    }

    fn entry(&self) -> Option<(&[u8], &[u8])> {
        match self {
            Cursor::Db(iterator) if iterator.valid() => Some((iterator.key(), iterator.value())),
            Cursor::Txn { iterator, .. } if iterator.valid() => Some((iterator.key(), iterator.value())),
            _ => None,
        }
    }

    fn status(&self) -> riptide_engine::Result<()> {
        match self {
            Cursor::Db(iterator) => iterator.status(),
            Cursor::Txn { iterator, .. } => iterator.status(),
        }
    }

    fn apply(&mut self, movement: Move<'_>) {
        match self {
            Cursor::Db(iterator) => match movement {
                Move::First => iterator.seek_to_first(),
                Move::Last => iterator.seek_to_last(),
                Move::Seek(key) => iterator.seek(key),
                Move::SeekForPrev(key) => iterator.seek_for_prev(key),
                Move::Next => iterator.next(),
                Move::Prev => iterator.prev(),
            },
            Cursor::Txn { iterator, .. } => match movement {
                Move::First => iterator.seek_to_first(),
                Move::Last => iterator.seek_to_last(),
                Move::Seek(key) => iterator.seek(key),
                Move::SeekForPrev(key) => iterator.seek_for_prev(key),
                // The inherent method, not `Iterator::next` of the `Box`.
                Move::Next => TransactionIterator::next(iterator),
                Move::Prev => iterator.prev(),
            },
        }
    }
}

enum Move<'a> {
    First,
    Last,
    Seek(&'a [u8]),
    SeekForPrev(&'a [u8]),
    Next,
    Prev,
}

/// Who closes an iterator besides its own destroy.
pub(crate) enum Parent {
    Db(Weak<DbObject>),
    Txn(Weak<TxnObject>),
}

/// What a `riptide_iterator_t` handle names.
pub(crate) struct IteratorObject {
    pub(crate) cursor: Mutex<Cursor>,
    pub(crate) parent: Parent,
}

fn with_cursor<R>(iterator: *const riptide_iterator_t, body: impl FnOnce(&mut Cursor) -> R) -> Result<R, CapiError> {
    let object = handle::get::<IteratorObject>(to_handle(iterator), Kind::Iterator)?;
    let mut cursor = object.cursor.lock();
    Ok(body(&mut cursor))
}

/// # Safety
/// `out_iterator` must be valid for a write.
unsafe fn create(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    cf: Option<*const riptide_cf_t>,
    out_iterator: *mut *mut riptide_iterator_t,
) -> Result<(), CapiError> {
    // SAFETY: forwarded contract.
    let slot = unsafe { out(out_iterator, "out_iterator") }?;
    *slot = with_db(db, |object, database| {
        let iterator = with_read_options(object.id, options, |read| match cf {
            None => Ok(database.iter(read)?),
            Some(cf) => Ok(database.iter_cf(&family_of(object.id, cf)?.cf, read)?),
        })?;
        let child = Arc::new(IteratorObject {
            cursor: Mutex::new(Cursor::Db(iterator)),
            parent: Parent::Db(Arc::downgrade(object)),
        });
        object.adopt(Kind::Iterator, child).map(from_handle)
    })?;
    Ok(())
}

/// Creates an iterator over the default column family at one consistent point (the snapshot
/// in `options`, else now), within the bounds of `options` (NULL: none). It starts unpositioned:
/// seek first.
///
/// # Safety
/// `out_iterator` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_create(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    out_iterator: *mut *mut riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { create(db, options, None, out_iterator) })
}

/// `riptide_iterator_create` over column family `cf`.
///
/// # Safety
/// As `riptide_iterator_create`.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_create_cf(
    db: *const riptide_db_t,
    options: *const riptide_readoptions_t,
    cf: *const riptide_cf_t,
    out_iterator: *mut *mut riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    call(err, || unsafe { create(db, options, Some(cf), out_iterator) })
}

/// Destroys an iterator. `RIPTIDE_MISUSE` for NULL, a second destroy, or an iterator that its
/// transaction's end or its database's close destroyed already.
#[no_mangle]
pub extern "C" fn riptide_iterator_destroy(iterator: *mut riptide_iterator_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || {
        let handle = to_handle(iterator);
        let object = handle::remove::<IteratorObject>(handle, Kind::Iterator)?;
        match &object.parent {
            Parent::Db(parent) => {
                if let Some(parent) = parent.upgrade() {
                    parent.disown(handle);
                }
            }
            Parent::Txn(parent) => {
                if let Some(parent) = parent.upgrade() {
                    parent.disown(handle);
                }
            }
        }
        Ok(())
    })
}

fn moved(iterator: *const riptide_iterator_t, err: *mut *mut riptide_error_t, movement: Move<'_>) -> riptide_code_t {
    call(err, || with_cursor(iterator, |cursor| cursor.apply(movement)))
}

/// Positions at the first key (at or after the lower bound).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_seek_to_first(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    moved(iterator, err, Move::First)
}

/// Positions at the last key (before the upper bound).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_seek_to_last(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    moved(iterator, err, Move::Last)
}

/// Positions at the first key `>= key`.
///
/// # Safety
/// `key` must be valid for `key_len` reads; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_seek(
    iterator: *const riptide_iterator_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        with_cursor(iterator, |cursor| cursor.apply(Move::Seek(key)))
    })
}

/// Positions at the last key `<= key`.
///
/// # Safety
/// As `riptide_iterator_seek`.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_seek_for_prev(
    iterator: *const riptide_iterator_t,
    key: *const u8,
    key_len: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        with_cursor(iterator, |cursor| cursor.apply(Move::SeekForPrev(key)))
    })
}

/// Moves to the next key (nothing when not valid).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_next(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    moved(iterator, err, Move::Next)
}

/// Moves to the previous key (nothing when not valid).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_prev(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    moved(iterator, err, Move::Prev)
}

/// 1 when the iterator is positioned on a key; 0 otherwise, and for a handle that is not a
/// live iterator. When it becomes 0, `riptide_iterator_status` tells whether an error ended it.
#[no_mangle]
pub extern "C" fn riptide_iterator_valid(iterator: *const riptide_iterator_t) -> u8 {
    guard(0, || with_cursor(iterator, |cursor| u8::from(cursor.valid())).unwrap_or(0))
}

/// The entry an iterator is on, as raw parts for the C side.
type RawEntry = (*const u8, usize, *const u8, usize);

fn raw_entry(cursor: &Cursor) -> Option<RawEntry> {
    cursor.entry().map(|(key, value)| (key.as_ptr(), key.len(), value.as_ptr(), value.len()))
}

/// Writes `entry` (NULL and 0 for none) into the out-parameters that are not NULL.
///
/// # Safety
/// Each out-parameter must be NULL or valid for a write.
unsafe fn write_entry(
    entry: Option<RawEntry>,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
) {
    let (key, key_len, value, value_len) = entry.unwrap_or((std::ptr::null(), 0, std::ptr::null(), 0));
    // SAFETY: each pointer is NULL or writable by the function's contract.
    unsafe {
        if !out_key.is_null() {
            *out_key = key;
        }
        if !out_key_len.is_null() {
            *out_key_len = key_len;
        }
        if !out_value.is_null() {
            *out_value = value;
        }
        if !out_value_len.is_null() {
            *out_value_len = value_len;
        }
    }
}

/// The current key and value without a copy: pointers valid until the iterator next moves or
/// is destroyed. Returns 1 and fills the out-parameters (any may be NULL) when valid; returns 0
/// and sets them to NULL and 0 otherwise.
///
/// # Safety
/// Each out-parameter must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_current(
    iterator: *const riptide_iterator_t,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
) -> u8 {
    guard(0, || {
        let entry = with_cursor(iterator, |cursor| raw_entry(cursor)).ok().flatten();
        // SAFETY: forwarded contract.
        unsafe { write_entry(entry, out_key, out_key_len, out_value, out_value_len) };
        u8::from(entry.is_some())
    })
}

/// A move and a read of the entry it lands on under one handle lookup.
///
/// # Safety
/// Each out-parameter must be NULL or valid for a write; `err` NULL or a `riptide_error_t *`
/// variable.
unsafe fn moved_to_entry(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
    movement: Move<'_>,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
) -> riptide_code_t {
    let mut entry = None;
    let code = call(err, || {
        with_cursor(iterator, |cursor| {
            cursor.apply(movement);
            entry = raw_entry(cursor);
        })
    });
    // SAFETY: forwarded contract.
    unsafe { write_entry(entry, out_key, out_key_len, out_value, out_value_len) };
    code
}

/// Moves to the next key and reads the entry it lands on: `riptide_iterator_next` and then
/// `riptide_iterator_current` in one call, so that each step of a scan looks its handle up once
/// (the SQL layer steps hundreds of times per query). The out-parameters (any may be NULL) are
/// filled as `riptide_iterator_current` fills them: NULL and 0 when the iterator is not on a
/// key afterwards, when `riptide_iterator_status` tells whether an error ended it. Returns
/// `RIPTIDE_MISUSE` (out-parameters NULL and 0) for a handle that is not a live iterator.
///
/// # Safety
/// Each out-parameter must be NULL or valid for a write; `err` NULL or a `riptide_error_t *`
/// variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_next_entry(
    iterator: *const riptide_iterator_t,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    unsafe { moved_to_entry(iterator, err, Move::Next, out_key, out_key_len, out_value, out_value_len) }
}

/// Bytes before each entry that `riptide_iterator_next_batch` writes: the key's and the value's
/// lengths, 32-bit little-endian each.
const BATCH_ENTRY_HEADER_BYTES: usize = 8;

/// Copies `cursor`'s entries into `buffer` from the current one on, stepping forward after each,
/// while fewer than `max_entries` were copied, the next fits in what is left of `buffer`, and
/// its key sorts bytewise before `stop_key` (when there is one). Returns the entries and bytes
/// copied; the cursor is left on the first entry not copied, or past the last.
fn copy_batch(cursor: &mut Cursor, stop_key: Option<&[u8]>, max_entries: usize, buffer: &mut [u8]) -> (usize, usize) {
    let mut entries = 0;
    let mut used = 0;
    while entries < max_entries {
        let Some((key, value)) = cursor.entry() else { break };
        if stop_key.is_some_and(|stop| key >= stop) {
            break;
        }
        let (Ok(key_length), Ok(value_length)) = (u32::try_from(key.len()), u32::try_from(value.len())) else {
            break;
        };
        let end = used + BATCH_ENTRY_HEADER_BYTES + key.len() + value.len();
        let Some(slot) = buffer.get_mut(used..end) else { break };
        let (lengths, payload) = slot.split_at_mut(BATCH_ENTRY_HEADER_BYTES);
        lengths[..4].copy_from_slice(&key_length.to_le_bytes());
        lengths[4..].copy_from_slice(&value_length.to_le_bytes());
        payload[..key.len()].copy_from_slice(key);
        payload[key.len()..].copy_from_slice(value);
        used = end;
        entries += 1;
        cursor.apply(Move::Next);
    }
    (entries, used)
}

/// Reads a run of entries forward in one call, copied into `buffer`: a scan that goes on for
/// many entries looks its handle up once per run instead of once per step (the SQL layer's
/// read-ahead). When `step_first` is non-zero the iterator first moves to the next key (as
/// `riptide_iterator_next`); then, from the entry it is on, each entry is copied as its key's
/// length and its value's length (32-bit little-endian each) followed by the key's and the
/// value's bytes, and the iterator steps forward, while fewer than `max_entries` were copied,
/// the next entry fits in what is left of `buffer_len`, and its key sorts bytewise (as
/// `memcmp`, whatever the column family's comparator) before `stop_key` (NULL: no such limit).
/// The iterator is left on the first entry not copied, or past the last one: a later call with
/// `step_first` 0 goes on from there, and `riptide_iterator_current` reads an entry that was
/// not copied because of `stop_key` or its size. `*out_entries` and `*out_bytes` say how many
/// entries and bytes were written. With no entry copied and the iterator not on a key, the
/// result is the iterator's status (an I/O or corruption error that ended it, else OK); an
/// error met after some entries were copied is the result of the next call.
///
/// # Safety
/// `buffer` must be valid for `buffer_len` writes and `stop_key` (when not NULL) for
/// `stop_key_len` reads; `out_entries` and `out_bytes` valid for writes; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn riptide_iterator_next_batch(
    iterator: *const riptide_iterator_t,
    step_first: i32,
    stop_key: *const u8,
    stop_key_len: usize,
    max_entries: usize,
    buffer: *mut u8,
    buffer_len: usize,
    out_entries: *mut usize,
    out_bytes: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (entries_slot, bytes_slot) = unsafe { (out(out_entries, "out_entries")?, out(out_bytes, "out_bytes")?) };
        *entries_slot = 0;
        *bytes_slot = 0;
        // SAFETY: by the function's contract.
        let stop_key = unsafe { crate::memory::optional_bytes(stop_key, stop_key_len, "stop_key") }?;
        if buffer.is_null() && buffer_len > 0 {
            return Err(CapiError::misuse(format!("buffer is NULL with a length of {buffer_len}")));
        }
        if buffer_len > isize::MAX as usize {
            return Err(CapiError::misuse(format!("buffer has an impossible length ({buffer_len})")));
        }
        let buffer: &mut [u8] = if buffer_len == 0 {
            &mut []
        } else {
            // SAFETY: non-NULL and valid for `buffer_len` writes by the function's contract.
            unsafe { std::slice::from_raw_parts_mut(buffer, buffer_len) }
        };
        let (entries, used, status) = with_cursor(iterator, |cursor| {
            if step_first != 0 && cursor.valid() {
                cursor.apply(Move::Next);
            }
            let (entries, used) = copy_batch(cursor, stop_key, max_entries, buffer);
            let status = if entries == 0 && !cursor.valid() { cursor.status() } else { Ok(()) };
            (entries, used, status)
        })?;
        *entries_slot = entries;
        *bytes_slot = used;
        status.map_err(CapiError::from)
    })
}

/// `riptide_iterator_next_entry` backwards: moves to the previous key and reads its entry.
///
/// # Safety
/// As `riptide_iterator_next_entry`.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_prev_entry(
    iterator: *const riptide_iterator_t,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    // SAFETY: by the function's contract.
    unsafe { moved_to_entry(iterator, err, Move::Prev, out_key, out_key_len, out_value, out_value_len) }
}

/// The current key (valid until the iterator moves), its length in `*out_len`; NULL when not
/// valid.
///
/// # Safety
/// `out_len` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_key(iterator: *const riptide_iterator_t, out_len: *mut usize) -> *const u8 {
    let mut key = std::ptr::null();
    // SAFETY: `key` and `out_len` are valid or NULL.
    unsafe { riptide_iterator_current(iterator, &mut key, out_len, std::ptr::null_mut(), std::ptr::null_mut()) };
    key
}

/// The current value (valid until the iterator moves), its length in `*out_len`; NULL when not
/// valid.
///
/// # Safety
/// `out_len` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_value(iterator: *const riptide_iterator_t, out_len: *mut usize) -> *const u8 {
    let mut value = std::ptr::null();
    // SAFETY: `value` and `out_len` are valid or NULL.
    unsafe { riptide_iterator_current(iterator, std::ptr::null_mut(), std::ptr::null_mut(), &mut value, out_len) };
    value
}

/// `RIPTIDE_OK`, or the I/O or corruption error that ended the iteration early.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_iterator_status(
    iterator: *const riptide_iterator_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || Ok(with_cursor(iterator, |cursor| cursor.status())??))
}
