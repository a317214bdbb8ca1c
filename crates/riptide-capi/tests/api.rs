//! Rust-side tests of the exported functions: the paths where the ABI's own machinery matters
//! (handle lifetimes across transactions, iterators and close), called as C would call them.

use std::ffi::CString;
use std::ptr::null_mut;

use riptide::db::*;
use riptide::iterator::*;
use riptide::options::*;
use riptide::txn::*;
use riptide::*;

fn open(dir: &std::path::Path) -> *mut riptide_db_t {
    let path = CString::new(dir.join("db").to_str().unwrap()).unwrap();
    let mut db = null_mut();
    // SAFETY: valid C string and out-parameter.
    assert_eq!(unsafe { riptide_open(path.as_ptr(), std::ptr::null(), &mut db, null_mut()) }, RIPTIDE_OK);
    db
}

#[test]
fn a_transaction_iterator_dies_with_its_transaction_and_the_transaction_with_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut txn = null_mut();
    let mut iterator = null_mut();
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_txn_begin(db, std::ptr::null(), &mut txn, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_put(txn, b"k".as_ptr(), 1, b"v".as_ptr(), 1, null_mut()), RIPTIDE_OK);
        assert_eq!(
            riptide_txn_iterator_create(txn, std::ptr::null(), std::ptr::null(), &mut iterator, null_mut()),
            RIPTIDE_OK
        );
        assert_eq!(riptide_iterator_seek_to_first(iterator, null_mut()), RIPTIDE_OK);
        let mut len = 0;
        let key = riptide_iterator_key(iterator, &mut len);
        assert_eq!(std::slice::from_raw_parts(key, len), b"k");
        // Rollback destroys the iterator, which borrowed the transaction.
        assert_eq!(riptide_txn_rollback(txn, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_iterator_next(iterator, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_destroy(txn), RIPTIDE_OK);

        // A live transaction with a live iterator is closed by the database's close.
        assert_eq!(riptide_txn_begin(db, std::ptr::null(), &mut txn, null_mut()), RIPTIDE_OK);
        assert_eq!(
            riptide_txn_iterator_create(txn, std::ptr::null(), std::ptr::null(), &mut iterator, null_mut()),
            RIPTIDE_OK
        );
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_iterator_valid(iterator), 0);
        assert_eq!(riptide_iterator_destroy(iterator), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_destroy(txn), RIPTIDE_MISUSE);
    }
    // The directory lock was released: the database opens again.
    let db = open(dir.path());
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_close(db, null_mut()) }, RIPTIDE_OK);
}

#[test]
fn commit_refuses_while_another_thread_is_inside_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut options = null_mut();
    let mut holder = null_mut();
    let mut waiter = null_mut();
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_txn_options_create(&mut options, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_options_set_lock_timeout_us(options, 2_000_000, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_begin(db, options, &mut holder, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_begin(db, options, &mut waiter, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_put(holder, b"k".as_ptr(), 1, b"1".as_ptr(), 1, null_mut()), RIPTIDE_OK);
    }
    let waiter_value = waiter as usize;
    // The waiter blocks on the holder's lock in another thread...
    let thread = std::thread::spawn(move || {
        let waiter = waiter_value as *mut riptide_txn_t;
        // SAFETY: a live handle and valid buffers.
        unsafe { riptide_txn_put(waiter, b"k".as_ptr(), 1, b"2".as_ptr(), 1, null_mut()) }
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    // ...so committing the waiter now is misuse and changes nothing.
    // SAFETY: live handles.
    unsafe {
        assert_eq!(riptide_txn_commit(waiter, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_txn_commit(holder, null_mut()), RIPTIDE_OK);
    }
    // Once the holder committed, the waiter gets the lock and (snapshot isolation) a conflict.
    assert_eq!(thread.join().unwrap(), RIPTIDE_CONFLICT);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(riptide_txn_rollback(waiter, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_txn_destroy(waiter), RIPTIDE_OK);
        assert_eq!(riptide_txn_destroy(holder), RIPTIDE_OK);
        assert_eq!(riptide_txn_options_destroy(options), RIPTIDE_OK);
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
    }
}

fn c_path(path: &std::path::Path) -> CString {
    CString::new(path.to_str().unwrap()).unwrap()
}

/// The code of a live error (and frees it), or `RIPTIDE_OK` when none was reported.
fn take_error(err: &mut *mut riptide_error_t) -> riptide_code_t {
    if err.is_null() {
        return RIPTIDE_OK;
    }
    let code = riptide_error_code(*err);
    assert_eq!(riptide_error_free(*err), RIPTIDE_OK);
    *err = null_mut();
    code
}

fn key(index: u32) -> Vec<u8> {
    format!("key{index:05}").into_bytes()
}

fn value(index: u32) -> Vec<u8> {
    format!("value-{index}-").repeat(8).into_bytes()
}

/// Puts keys `range` into `db`.
fn put_range(db: *mut riptide_db_t, range: std::ops::Range<u32>) {
    for index in range {
        let (key, value) = (key(index), value(index));
        // SAFETY: a live handle and valid buffers.
        let code = unsafe {
            riptide_put(db, std::ptr::null(), key.as_ptr(), key.len(), value.as_ptr(), value.len(), null_mut())
        };
        assert_eq!(code, RIPTIDE_OK);
    }
}

/// The value of `key` in `db`, through a copying get.
fn get(db: *mut riptide_db_t, key: &[u8]) -> Option<Vec<u8>> {
    let (mut value, mut len) = (null_mut(), 0);
    // SAFETY: a live handle and valid buffers and out-parameters.
    let code = unsafe { riptide_get(db, std::ptr::null(), key.as_ptr(), key.len(), &mut value, &mut len, null_mut()) };
    assert_eq!(code, RIPTIDE_OK);
    if value.is_null() {
        return None;
    }
    // SAFETY: the library returned `len` bytes at `value`, freed once copied.
    let copy = unsafe { std::slice::from_raw_parts(value, len) }.to_vec();
    // SAFETY: a buffer the library returned.
    unsafe { riptide::memory::riptide_free(value.cast()) };
    Some(copy)
}

fn open_at(path: &std::path::Path, options: *const riptide_options_t) -> *mut riptide_db_t {
    let path = c_path(path);
    let mut db = null_mut();
    // SAFETY: valid C string and out-parameter.
    assert_eq!(unsafe { riptide_open(path.as_ptr(), options, &mut db, null_mut()) }, RIPTIDE_OK);
    db
}

/// The backups `engine` lists, through an array of room for `capacity`.
fn list_backups(engine: *const riptide_backup_engine_t) -> Vec<riptide::backup::riptide_backup_info_t> {
    use riptide::backup::*;
    let mut count = usize::MAX;
    let size = std::mem::size_of::<riptide_backup_info_t>();
    // SAFETY: capacity 0 with a NULL array; a valid count out-parameter.
    let code = unsafe { riptide_backup_engine_list_backups(engine, null_mut(), 0, size, &mut count, null_mut()) };
    assert_eq!(code, RIPTIDE_OK);
    let mut infos = vec![riptide_backup_info_t::default(); count];
    let mut again = 0;
    // SAFETY: the array holds `count` elements of `size` bytes.
    let code =
        unsafe { riptide_backup_engine_list_backups(engine, infos.as_mut_ptr(), count, size, &mut again, null_mut()) };
    assert_eq!((code, again), (RIPTIDE_OK, count));
    infos
}

/// The first file (by name) of `dir`.
fn first_file(dir: &std::path::Path) -> std::path::PathBuf {
    let mut names: Vec<_> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    names.sort();
    names.into_iter().next().unwrap_or_else(|| panic!("{} is empty", dir.display()))
}

#[test]
fn backups_restore_every_key_and_damage_is_corruption() {
    use riptide::backup::*;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    put_range(db, 0..400);
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_flush(db, null_mut()) }, RIPTIDE_OK);
    put_range(db, 400..500); // in the log only
    let backups_dir = dir.path().join("backups");
    let (mut engine, mut first, mut second, mut err) = (null_mut(), 0u64, 0u64, null_mut());
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_backup_engine_open(c_path(&backups_dir).as_ptr(), &mut engine, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_backup_engine_create_backup(engine, db, &mut first, null_mut()), RIPTIDE_OK);
    }
    put_range(db, 500..600);
    // SAFETY: live handles and a valid out-parameter.
    assert_eq!(unsafe { riptide_backup_engine_create_backup(engine, db, &mut second, null_mut()) }, RIPTIDE_OK);
    assert_eq!((first, second), (1, 2));
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_close(db, null_mut()) }, RIPTIDE_OK);

    let infos = list_backups(engine);
    assert_eq!(infos.iter().map(|info| info.id).collect::<Vec<_>>(), [1, 2]);
    for info in &infos {
        assert!(info.file_count >= 3 && info.size_bytes > 0 && info.timestamp_secs > 1_700_000_000, "{info:?}");
    }
    // A short array gets the first backups and the full count; a shorter (older) element only
    // its prefix.
    let sentinel = riptide_backup_info_t { id: 77, timestamp_secs: 77, size_bytes: 77, file_count: 77 };
    let mut short = [sentinel; 2];
    let mut count = 0;
    // SAFETY: the array holds 2 elements; 16 bytes of each are written.
    unsafe {
        assert_eq!(
            riptide_backup_engine_list_backups(engine, short.as_mut_ptr(), 1, 16, &mut count, null_mut()),
            RIPTIDE_OK
        );
    }
    assert_eq!(count, 2);
    assert_eq!((short[0].id, short[0].timestamp_secs, short[0].size_bytes), (1, infos[0].timestamp_secs, 77));
    assert_eq!(short[1].id, 77);

    // Restore the first backup and read every key back: exactly what it held.
    let restored = dir.path().join("restored");
    // SAFETY: a live handle and a valid C string.
    unsafe {
        assert_eq!(riptide_backup_engine_verify_backup(engine, first, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_backup_engine_restore(engine, first, c_path(&restored).as_ptr(), null_mut()), RIPTIDE_OK);
        // The target exists now.
        assert_eq!(
            riptide_backup_engine_restore(engine, first, c_path(&restored).as_ptr(), &mut err),
            RIPTIDE_INVALID_ARGUMENT
        );
    }
    assert_eq!(take_error(&mut err), RIPTIDE_INVALID_ARGUMENT);
    let copy = open_at(&restored, std::ptr::null());
    for index in 0..600 {
        let expected = (index < 500).then(|| value(index));
        assert_eq!(get(copy, &key(index)), expected, "key {index}");
    }
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_close(copy, null_mut()) }, RIPTIDE_OK);

    // Unknown ids are typed errors.
    let elsewhere = c_path(&dir.path().join("elsewhere"));
    // SAFETY: a live handle and a valid C string.
    unsafe {
        assert_eq!(riptide_backup_engine_verify_backup(engine, 99, &mut err), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(take_error(&mut err), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(riptide_backup_engine_restore(engine, 99, elsewhere.as_ptr(), &mut err), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(take_error(&mut err), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(riptide_backup_engine_delete_backup(engine, 99, &mut err), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(take_error(&mut err), RIPTIDE_INVALID_ARGUMENT);
    }
    assert!(!dir.path().join("elsewhere").exists());

    // One changed byte of a shared table: verification and restore report corruption, naming
    // the file, and the failed restore leaves nothing behind.
    let victim = first_file(&backups_dir.join("shared"));
    let mut bytes = std::fs::read(&victim).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();
    let damaged_target = dir.path().join("damaged");
    // SAFETY: a live handle and a valid C string.
    unsafe {
        assert_eq!(riptide_backup_engine_verify_backup(engine, first, &mut err), RIPTIDE_CORRUPTION);
        let message = std::ffi::CStr::from_ptr(riptide_error_message(err)).to_string_lossy().into_owned();
        let name = victim.file_name().unwrap().to_str().unwrap();
        assert!(message.contains(name), "{message:?} names {name}");
        assert_eq!(take_error(&mut err), RIPTIDE_CORRUPTION);
        let code = riptide_backup_engine_restore(engine, first, c_path(&damaged_target).as_ptr(), &mut err);
        assert_eq!(code, RIPTIDE_CORRUPTION);
        assert_eq!(take_error(&mut err), RIPTIDE_CORRUPTION);
    }
    assert!(!damaged_target.exists());

    // Deleting one backup leaves the other listed; a second delete is an unknown id.
    // SAFETY: a live handle.
    unsafe {
        assert_eq!(riptide_backup_engine_delete_backup(engine, second, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_backup_engine_delete_backup(engine, second, null_mut()), RIPTIDE_INVALID_ARGUMENT);
    }
    assert_eq!(list_backups(engine).iter().map(|info| info.id).collect::<Vec<_>>(), [1]);
    assert!(!backups_dir.join("private").join("000002").exists());

    // The engine survives a reopen of the directory; closing twice is misuse.
    assert_eq!(riptide_backup_engine_close(engine), RIPTIDE_OK);
    assert_eq!(riptide_backup_engine_close(engine), RIPTIDE_MISUSE);
    // SAFETY: a valid C string and out-parameter.
    unsafe {
        assert_eq!(riptide_backup_engine_open(c_path(&backups_dir).as_ptr(), &mut engine, null_mut()), RIPTIDE_OK);
    }
    assert_eq!(list_backups(engine).len(), 1);
    assert_eq!(riptide_backup_engine_close(engine), RIPTIDE_OK);
}

#[test]
fn backup_calls_refuse_null_stale_and_wrong_kind_handles() {
    use riptide::backup::*;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let backups = c_path(&dir.path().join("backups"));
    let (mut engine, mut id, mut count, mut err) = (null_mut(), 0u64, 0usize, null_mut());
    // SAFETY: every pointer passed is NULL or valid for the call; handles are never
    // dereferenced by the library.
    unsafe {
        assert_eq!(riptide_backup_engine_open(std::ptr::null(), &mut engine, &mut err), RIPTIDE_MISUSE);
        assert_eq!(take_error(&mut err), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_open(backups.as_ptr(), null_mut(), null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_open(backups.as_ptr(), &mut engine, null_mut()), RIPTIDE_OK);
        // NULL engine, NULL database, a database where an engine is expected, NULL out-parameters.
        assert_eq!(riptide_backup_engine_create_backup(null_mut(), db, &mut id, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_create_backup(engine, null_mut(), &mut id, &mut err), RIPTIDE_MISUSE);
        assert!(std::ffi::CStr::from_ptr(riptide_error_message(err)).to_string_lossy().contains("riptide_db_t"));
        assert_eq!(take_error(&mut err), RIPTIDE_MISUSE);
        let wrong_kind = db.cast::<riptide_backup_engine_t>();
        assert_eq!(riptide_backup_engine_verify_backup(wrong_kind, 1, &mut err), RIPTIDE_MISUSE);
        assert!(std::ffi::CStr::from_ptr(riptide_error_message(err)).to_string_lossy().contains("riptide_db_t"));
        assert_eq!(take_error(&mut err), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_create_backup(engine, db, null_mut(), null_mut()), RIPTIDE_MISUSE);
        assert_eq!(
            riptide_backup_engine_list_backups(engine, null_mut(), 0, 32, null_mut(), null_mut()),
            RIPTIDE_MISUSE
        );
        assert_eq!(
            riptide_backup_engine_list_backups(engine, null_mut(), 2, 32, &mut count, null_mut()),
            RIPTIDE_MISUSE
        );
        assert_eq!(riptide_backup_engine_restore(engine, 1, std::ptr::null(), null_mut()), RIPTIDE_MISUSE);
        // Nothing was backed up by the refused calls.
        assert_eq!(riptide_backup_engine_list_backups(engine, null_mut(), 0, 32, &mut count, null_mut()), RIPTIDE_OK);
        assert_eq!(count, 0);
        assert_eq!(riptide_backup_engine_create_backup(engine, db, &mut id, null_mut()), RIPTIDE_OK);
        assert_eq!(id, 1);
        // A closed database and a closed engine are stale handles.
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_backup_engine_create_backup(engine, db, &mut id, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_close(engine), RIPTIDE_OK);
        assert_eq!(riptide_backup_engine_verify_backup(engine, 1, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_delete_backup(engine, 1, null_mut()), RIPTIDE_MISUSE);
        assert_eq!(riptide_backup_engine_close(null_mut()), RIPTIDE_MISUSE);
    }
}

/// The names of the blob files in `dir`.
fn blob_files(dir: &std::path::Path) -> Vec<String> {
    let names = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap());
    names.filter(|name| name.ends_with(".blob")).collect()
}

#[test]
fn values_at_or_above_the_blob_threshold_round_trip_through_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut options = null_mut();
    // SAFETY: valid out-parameters.
    unsafe {
        assert_eq!(riptide_options_create(&mut options, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_min_blob_size_bytes(options, 100, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_garbage_collection_ratio(options, 0.25, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_garbage_collection_age_cutoff(options, 0.5, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_file_size_bytes(options, 1 << 20, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_compression(options, RIPTIDE_COMPRESSION_ZSTD, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_compression(options, 42, null_mut()), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(riptide_options_validate(options, null_mut()), RIPTIDE_OK);
    }
    let db = open_at(&path, options);
    let below = vec![b'b'; 99];
    let at = vec![b'a'; 100];
    let above = vec![b'x'; 5000];
    let put = |key: &[u8], value: &[u8]| {
        // SAFETY: a live handle and valid buffers.
        let code = unsafe {
            riptide_put(db, std::ptr::null(), key.as_ptr(), key.len(), value.as_ptr(), value.len(), null_mut())
        };
        assert_eq!(code, RIPTIDE_OK);
    };
    // Values under the threshold stay in the tables...
    put(b"below", &below);
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_flush(db, null_mut()) }, RIPTIDE_OK);
    assert_eq!(blob_files(&path), Vec::<String>::new());
    // ...one of exactly the threshold goes to a blob file, as does a larger one.
    put(b"at", &at);
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_flush(db, null_mut()) }, RIPTIDE_OK);
    assert_eq!(blob_files(&path).len(), 1);
    put(b"above", &above);
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_flush(db, null_mut()) }, RIPTIDE_OK);
    assert_eq!(blob_files(&path).len(), 2);
    for (key, value) in [(&b"below"[..], &below), (b"at", &at), (b"above", &above)] {
        assert_eq!(get(db, key).as_ref(), Some(value));
    }
    // SAFETY: a live handle.
    assert_eq!(unsafe { riptide_close(db, null_mut()) }, RIPTIDE_OK);
    let db = open_at(&path, options);
    for (key, value) in [(&b"below"[..], &below), (b"at", &at), (b"above", &above)] {
        assert_eq!(get(db, key).as_ref(), Some(value));
    }
    // SAFETY: live handles.
    unsafe {
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
        // 0 turns separation off again; ranges are checked by validation.
        assert_eq!(riptide_options_set_min_blob_size_bytes(options, 0, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_validate(options, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_set_blob_garbage_collection_ratio(options, 1.5, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_options_validate(options, null_mut()), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(riptide_options_destroy(options), RIPTIDE_OK);
        assert_eq!(riptide_options_set_min_blob_size_bytes(options, 100, null_mut()), RIPTIDE_MISUSE);
    }
}

#[test]
fn a_column_family_with_the_blob_option_separates_its_values_alone() {
    use riptide::family::*;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let path = dir.path().join("db");
    let (mut options, mut cf, mut text) = (null_mut(), null_mut(), null_mut());
    let large = vec![b'v'; 1000];
    // SAFETY: every pointer passed is valid for the call.
    unsafe {
        assert_eq!(riptide_cf_options_create(&mut options, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_set_min_blob_size_bytes(options, 512, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_set_blob_garbage_collection_ratio(options, 0.75, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_set_blob_garbage_collection_age_cutoff(options, 0.1, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_set_blob_file_size_bytes(options, 1 << 20, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_set_blob_compression(options, RIPTIDE_COMPRESSION_NONE, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_describe(options, &mut text, null_mut()), RIPTIDE_OK);
        let described = std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned();
        riptide::memory::riptide_free(text.cast());
        for field in [
            "min_blob_size_bytes: Some(512)",
            "blob_garbage_collection_ratio: 0.75",
            "blob_garbage_collection_age_cutoff: 0.1",
            "blob_file_size_bytes: 1048576",
            "blob_compression: None",
        ] {
            assert!(described.contains(field), "{field} in {described}");
        }
        let name = CString::new("blobs").unwrap();
        assert_eq!(riptide_create_column_family(db, name.as_ptr(), options, &mut cf, null_mut()), RIPTIDE_OK);
        // The default column family keeps large values in its tables.
        assert_eq!(
            riptide_put(db, std::ptr::null(), b"k".as_ptr(), 1, large.as_ptr(), large.len(), null_mut()),
            RIPTIDE_OK
        );
        assert_eq!(riptide_flush(db, null_mut()), RIPTIDE_OK);
        assert_eq!(blob_files(&path).len(), 0);
        let code = riptide_put_cf(db, std::ptr::null(), cf, b"k".as_ptr(), 1, large.as_ptr(), large.len(), null_mut());
        assert_eq!(code, RIPTIDE_OK);
        assert_eq!(riptide_flush(db, null_mut()), RIPTIDE_OK);
        assert_eq!(blob_files(&path).len(), 1);
        let (mut value, mut len) = (null_mut(), 0);
        let code = riptide_get_cf(db, std::ptr::null(), cf, b"k".as_ptr(), 1, &mut value, &mut len, null_mut());
        assert_eq!(code, RIPTIDE_OK);
        assert_eq!(std::slice::from_raw_parts(value, len), &large[..]);
        riptide::memory::riptide_free(value.cast());
        assert_eq!(riptide_cf_options_set_blob_file_size_bytes(options, 100, null_mut()), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_validate(options, null_mut()), RIPTIDE_INVALID_ARGUMENT);
        assert_eq!(riptide_cf_destroy(cf), RIPTIDE_OK);
        assert_eq!(riptide_cf_options_destroy(options), RIPTIDE_OK);
        assert_eq!(riptide_close(db, null_mut()), RIPTIDE_OK);
    }
}
