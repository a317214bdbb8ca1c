//! The setters of single option fields: those of the default column family (the same for
//! database options and column family options), then the database-only ones.
//!
//! Concurrency contract: as every options object, thread-safe behind its lock.

use super::{compaction_priority, comparator, compression, optional_compression, set_cf, set_db, wal_recovery};
use crate::{riptide_cf_options_t, riptide_code_t, riptide_error_t, riptide_options_t};

/// Size at which the active memtable is frozen and flushed. Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_memtable_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.memtable_size_bytes = value;
        Ok(())
    })
}

/// Frozen memtables allowed to wait for flush before writers stall. Default 2.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_immutable_memtables(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_immutable_memtables = value;
        Ok(())
    })
}

/// Target uncompressed size of a table data block. Default 4 KiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_block_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.block_size_bytes = value;
        Ok(())
    })
}

/// Keys between restart points in a data block. Default 16.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_block_restart_interval(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.block_restart_interval = value;
        Ok(())
    })
}

/// Bloom filter bits per key; 0 disables filters. Default 10.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_bloom_bits_per_key(
    options: *mut riptide_options_t,
    value: u32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.bloom_bits_per_key = value;
        Ok(())
    })
}

/// Level-0 files that trigger a compaction. Default 8.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_level0_compaction_trigger_files(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.level0_compaction_trigger_files = value;
        Ok(())
    })
}

/// Level-0 files from which writes are delayed. Default 20.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_level0_slowdown_writes_files(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.level0_slowdown_writes_files = value;
        Ok(())
    })
}

/// Level-0 files at which writes stop until compaction catches up. Default 36.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_level0_stop_writes_files(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.level0_stop_writes_files = value;
        Ok(())
    })
}

/// Target size of tables written by compaction. Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_target_file_size_bytes(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.target_file_size_bytes = value;
        Ok(())
    })
}

/// Size ratio between adjacent levels. Default 10.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_level_size_ratio(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.level_size_ratio = value;
        Ok(())
    })
}

/// Target size of the base level; 0: memtable size times the level-0 trigger. Default 0.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_base_level_size_bytes(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.base_level_size_bytes = value;
        Ok(())
    })
}

/// Fraction of deletes that makes a table due for compaction; 0 disables. Default 0.5.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_tombstone_compaction_ratio(
    options: *mut riptide_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.tombstone_compaction_ratio = value;
        Ok(())
    })
}

/// Entries a table needs before the tombstone ratio applies. Default 1,000.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_tombstone_compaction_min_entries(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.tombstone_compaction_min_entries = value;
        Ok(())
    })
}

/// Read-triggered compaction of level 0: the bytes of level-0 compaction one level-0 table
/// merged by a seek is worth; 0 turns the rule off. Default 128.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_read_compaction_bytes_per_table_seek(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.read_compaction_bytes_per_table_seek = value;
        Ok(())
    })
}

/// Block compression, a `RIPTIDE_COMPRESSION_*` value. Default LZ4.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_compression(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.compression = compression(value)?;
        Ok(())
    })
}

/// Compression of the bottommost data, a `RIPTIDE_COMPRESSION_*` value, or `RIPTIDE_COMPRESSION_UNSET` for no override (the default).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_bottommost_compression(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.bottommost_compression = optional_compression(value)?;
        Ok(())
    })
}

/// Which file a level over target moves down first, a `RIPTIDE_COMPACTION_PRIORITY_*` value.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_compaction_priority(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.compaction_priority = compaction_priority(value)?;
        Ok(())
    })
}

/// The key order, a `RIPTIDE_COMPARATOR_*` value (fixed when a column family is created). Default bytewise.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_comparator(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.comparator = comparator(value)?;
        Ok(())
    })
}

/// Key-value separation: values of at least this many bytes are written to blob files at flush
/// and the table keeps a small reference to each ("Blob files" in `docs/architecture.md`); 0
/// turns it off. Default 0 (off).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_min_blob_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.min_blob_size_bytes = (value > 0).then_some(value);
        Ok(())
    })
}

/// Time to live of the default column family's puts, in microseconds: a put written without
/// an expiry of its own expires this long after it is written. 0 (the default): puts never
/// expire.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_ttl_us(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.ttl = (value > 0).then(|| std::time::Duration::from_micros(value));
        Ok(())
    })
}

/// Share of a blob file's bytes that must be garbage before compactions move its live values
/// into a new blob file, between 0 and 1. Default 0.5.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_blob_garbage_collection_ratio(
    options: *mut riptide_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.blob_garbage_collection_ratio = value;
        Ok(())
    })
}

/// Share of the blob files, the oldest by number, whose live values compactions also move
/// whatever their garbage, between 0 and 1. Default 0 (off).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_blob_garbage_collection_age_cutoff(
    options: *mut riptide_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.blob_garbage_collection_age_cutoff = value;
        Ok(())
    })
}

/// Size at which a compaction starts a new blob file for the values it moves (at least 4096).
/// Default 256 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_blob_file_size_bytes(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.blob_file_size_bytes = value;
        Ok(())
    })
}

/// Compression of values in blob files, a `RIPTIDE_COMPRESSION_*` value: each value compressed on
/// its own and stored as is when that would not save an eighth of it. Default LZ4.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_blob_compression(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.blob_compression = compression(value)?;
        Ok(())
    })
}

/// Size at which the active memtable is frozen and flushed. Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_memtable_size_bytes(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.memtable_size_bytes = value;
        Ok(())
    })
}

/// Frozen memtables allowed to wait for flush before writers stall. Default 2.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_max_immutable_memtables(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.max_immutable_memtables = value;
        Ok(())
    })
}

/// Target uncompressed size of a table data block. Default 4 KiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_block_size_bytes(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.block_size_bytes = value;
        Ok(())
    })
}

/// Keys between restart points in a data block. Default 16.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_block_restart_interval(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.block_restart_interval = value;
        Ok(())
    })
}

/// Bloom filter bits per key; 0 disables filters. Default 10.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_bloom_bits_per_key(
    options: *mut riptide_cf_options_t,
    value: u32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.bloom_bits_per_key = value;
        Ok(())
    })
}

/// Level-0 files that trigger a compaction. Default 8.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_level0_compaction_trigger_files(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.level0_compaction_trigger_files = value;
        Ok(())
    })
}

/// Level-0 files from which writes are delayed. Default 20.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_level0_slowdown_writes_files(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.level0_slowdown_writes_files = value;
        Ok(())
    })
}

/// Level-0 files at which writes stop until compaction catches up. Default 36.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_level0_stop_writes_files(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.level0_stop_writes_files = value;
        Ok(())
    })
}

/// Target size of tables written by compaction. Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_target_file_size_bytes(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.target_file_size_bytes = value;
        Ok(())
    })
}

/// Size ratio between adjacent levels. Default 10.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_level_size_ratio(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.level_size_ratio = value;
        Ok(())
    })
}

/// Target size of the base level; 0: memtable size times the level-0 trigger. Default 0.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_base_level_size_bytes(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.base_level_size_bytes = value;
        Ok(())
    })
}

/// Fraction of deletes that makes a table due for compaction; 0 disables. Default 0.5.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_tombstone_compaction_ratio(
    options: *mut riptide_cf_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.tombstone_compaction_ratio = value;
        Ok(())
    })
}

/// Entries a table needs before the tombstone ratio applies. Default 1,000.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_tombstone_compaction_min_entries(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.tombstone_compaction_min_entries = value;
        Ok(())
    })
}

/// Read-triggered compaction of level 0: the bytes of level-0 compaction one level-0 table
/// merged by a seek is worth; 0 turns the rule off. Default 128.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_read_compaction_bytes_per_table_seek(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.read_compaction_bytes_per_table_seek = value;
        Ok(())
    })
}

/// Block compression, a `RIPTIDE_COMPRESSION_*` value. Default LZ4.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_compression(
    options: *mut riptide_cf_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.compression = compression(value)?;
        Ok(())
    })
}

/// Compression of the bottommost data, a `RIPTIDE_COMPRESSION_*` value, or `RIPTIDE_COMPRESSION_UNSET` for no override (the default).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_bottommost_compression(
    options: *mut riptide_cf_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.bottommost_compression = optional_compression(value)?;
        Ok(())
    })
}

/// Which file a level over target moves down first, a `RIPTIDE_COMPACTION_PRIORITY_*` value.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_compaction_priority(
    options: *mut riptide_cf_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.compaction_priority = compaction_priority(value)?;
        Ok(())
    })
}

/// The key order, a `RIPTIDE_COMPARATOR_*` value (fixed when a column family is created). Default bytewise.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_comparator(
    options: *mut riptide_cf_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.comparator = comparator(value)?;
        Ok(())
    })
}

/// Key-value separation: values of at least this many bytes are written to blob files at flush
/// and the table keeps a small reference to each ("Blob files" in `docs/architecture.md`); 0
/// turns it off. Default 0 (off).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_min_blob_size_bytes(
    options: *mut riptide_cf_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.min_blob_size_bytes = (value > 0).then_some(value);
        Ok(())
    })
}

/// Time to live of the column family's puts, in microseconds (see `riptide_options_set_ttl_us`);
/// 0 for none.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_ttl_us(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.ttl = (value > 0).then(|| std::time::Duration::from_micros(value));
        Ok(())
    })
}

/// Share of a blob file's bytes that must be garbage before compactions move its live values
/// into a new blob file, between 0 and 1. Default 0.5.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_blob_garbage_collection_ratio(
    options: *mut riptide_cf_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.blob_garbage_collection_ratio = value;
        Ok(())
    })
}

/// Share of the blob files, the oldest by number, whose live values compactions also move
/// whatever their garbage, between 0 and 1. Default 0 (off).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_blob_garbage_collection_age_cutoff(
    options: *mut riptide_cf_options_t,
    value: f64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.blob_garbage_collection_age_cutoff = value;
        Ok(())
    })
}

/// Size at which a compaction starts a new blob file for the values it moves (at least 4096).
/// Default 256 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_blob_file_size_bytes(
    options: *mut riptide_cf_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.blob_file_size_bytes = value;
        Ok(())
    })
}

/// Compression of values in blob files, a `RIPTIDE_COMPRESSION_*` value: each value compressed on
/// its own and stored as is when that would not save an eighth of it. Default LZ4.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_blob_compression(
    options: *mut riptide_cf_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        options.blob_compression = compression(value)?;
        Ok(())
    })
}

/// Create the database if the directory holds none (1, the default) or fail (0).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_create_if_missing(
    options: *mut riptide_options_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.create_if_missing = value != 0;
        Ok(())
    })
}

/// Fail if a database already exists (1). Default 0.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_error_if_exists(
    options: *mut riptide_options_t,
    value: u8,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.error_if_exists = value != 0;
        Ok(())
    })
}

/// Capacity of the shared block cache. Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_block_cache_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.block_cache_size_bytes = value;
        Ok(())
    })
}

/// Tables kept open in the table cache (at least 16). Default 1,000.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_open_tables(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_open_tables = value;
        Ok(())
    })
}

/// Background flush threads (1 to 16). Default 1.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_background_flushes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_background_flushes = value;
        Ok(())
    })
}

/// Background compaction threads; 0: half the CPUs, 1 to 8 (the default).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_background_compactions(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_background_compactions = value;
        Ok(())
    })
}

/// Key ranges one large compaction is split into; 0: automatic (the default).
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_subcompactions(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_subcompactions = value;
        Ok(())
    })
}

/// The global memory cap (memtables, block cache, table indexes and filters, compaction buffers); 0: half of physical memory (the default); else at least 16 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_memory_bytes(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_memory_bytes = value;
        Ok(())
    })
}

/// Largest accepted key (at most 1 MiB). Default 64 KiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_key_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_key_size_bytes = value;
        Ok(())
    })
}

/// Largest accepted value (at most 1 GiB). Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_value_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_value_size_bytes = value;
        Ok(())
    })
}

/// Largest accepted write batch, and so transaction commit (at most 1 GiB). Default 256 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_max_batch_size_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.max_batch_size_bytes = value;
        Ok(())
    })
}

/// Memory of the commit history that validates transactions (at least 1 MiB). Default 64 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_transaction_history_limit_bytes(
    options: *mut riptide_options_t,
    value: usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.transaction_history_limit_bytes = value;
        Ok(())
    })
}

/// Once a write-ahead log has been synced, zeros are written this many bytes at a time ahead of
/// its records, so that later syncs overwrite existing blocks instead of growing the file; 0
/// turns it off (at most 1 GiB). Default 4 MiB.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_wal_preallocate_bytes(
    options: *mut riptide_options_t,
    value: u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.wal_preallocate_bytes = value;
        Ok(())
    })
}

/// How recovery treats a damaged write-ahead log, a `RIPTIDE_WAL_RECOVERY_*` value.
///
/// # Safety
/// `err` must be NULL or point to a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_wal_recovery(
    options: *mut riptide_options_t,
    value: i32,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        options.wal_recovery = wal_recovery(value)?;
        Ok(())
    })
}

/// The merge operator a name chooses: `NULL` or `""` for none, `"riptide.u64add"` for the
/// built-in counter (values and operands 8-byte little-endian unsigned integers, added).
///
/// # Safety
/// `name` NULL or a NUL-terminated string.
unsafe fn merge_operator_named(
    name: *const std::ffi::c_char,
) -> Result<Option<std::sync::Arc<dyn riptide_engine::MergeOperator>>, crate::error::CapiError> {
    if name.is_null() {
        return Ok(None);
    }
    // SAFETY: by the caller's contract.
    match unsafe { crate::memory::string(name, "name") }? {
        "" => Ok(None),
        "riptide.u64add" => Ok(Some(std::sync::Arc::new(riptide_engine::U64AddOperator))),
        other => Err(crate::error::CapiError::invalid(format!(
            "unknown merge operator {other:?} (the C API offers \"riptide.u64add\")"
        ))),
    }
}

/// Sets the default column family's merge operator by name (`riptide_merge`): `NULL` or `""`
/// for none (the default), `"riptide.u64add"` for the built-in counter. Any other name is
/// `RIPTIDE_INVALID_ARGUMENT`. Give the same operator at every open.
///
/// # Safety
/// `name` NULL or a NUL-terminated string; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_options_set_merge_operator(
    options: *mut riptide_options_t,
    name: *const std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_db(options, err, |options| {
        // SAFETY: by the function's contract.
        options.merge_operator = unsafe { merge_operator_named(name) }?;
        Ok(())
    })
}

/// Sets the column family's merge operator by name (see `riptide_options_set_merge_operator`).
///
/// # Safety
/// `name` NULL or a NUL-terminated string; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_cf_options_set_merge_operator(
    options: *mut riptide_cf_options_t,
    name: *const std::ffi::c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    set_cf(options, err, |options| {
        // SAFETY: by the function's contract.
        options.merge_operator = unsafe { merge_operator_named(name) }?;
        Ok(())
    })
}
