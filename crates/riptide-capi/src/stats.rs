//! Statistics as C structs and as text, and the size and key-count estimates of key ranges
//! that a query optimizer needs.
//!
//! The structs are `#[repr(C)]` and made of 64-bit fields only (no padding). For forward
//! compatibility each starts with `struct_size` (or takes an element size): the caller sets it
//! to `sizeof` the struct it was compiled with, and the library fills only that many bytes, so
//! fields added at the end in later versions never overrun an older caller's struct, and an
//! older library leaves a newer caller's extra fields untouched.
//!
//! Concurrency contract: every call here is thread-safe; each reads a fresh snapshot of the
//! engine's counters.

use std::ffi::c_char;

use riptide_engine::{LevelStats, MemoryPressure, Stats};

use crate::db::{family_of, with_db};
use crate::error::{call, CapiError};
use crate::memory::{bytes, malloc_string, out};
use crate::{riptide_cf_t, riptide_code_t, riptide_db_t, riptide_error_t};

/// Memory pressure below 70 % of the cap.
pub const RIPTIDE_MEMORY_PRESSURE_NORMAL: u64 = 0;
/// From 70 % of the cap: early flushes, small write delays, a smaller block cache.
pub const RIPTIDE_MEMORY_PRESSURE_ELEVATED: u64 = 1;
/// From 85 %: forced flushes, longer delays.
pub const RIPTIDE_MEMORY_PRESSURE_HIGH: u64 = 2;
/// From 95 %: writes wait until memory is freed.
pub const RIPTIDE_MEMORY_PRESSURE_CRITICAL: u64 = 3;

/// Database-wide statistics (cumulative counters since open, and current sizes). Set
/// `struct_size` to `sizeof(riptide_stats_t)` before calling `riptide_get_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct riptide_stats_t {
    /// In: the caller's `sizeof(riptide_stats_t)`. Out: the bytes filled.
    pub struct_size: u64,
    /// Bytes in active memtables (all column families).
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for flush.
    pub immutable_memtables: u64,
    /// Bytes in those.
    pub immutable_memtable_bytes: u64,
    /// Bytes compaction still has to move to bring every level under target.
    pub pending_compaction_bytes: u64,
    /// Compactions running now.
    pub running_compactions: u64,
    /// Sub-compactions run.
    pub subcompactions: u64,
    /// Compactions started by the tombstone ratio.
    pub tombstone_compactions: u64,
    /// Manual compaction jobs run.
    pub manual_compactions: u64,
    /// The memory cap in effect.
    pub memory_limit_bytes: u64,
    /// Memory charged against the cap now.
    pub memory_usage_bytes: u64,
    /// The highest memory charged since open.
    pub memory_peak_bytes: u64,
    /// A `RIPTIDE_MEMORY_PRESSURE_*` value.
    pub memory_pressure: u64,
    /// Flushes forced by memory pressure.
    pub memory_flushes: u64,
    /// Write groups delayed by memory pressure, and the time they waited.
    pub memory_delay_count: u64,
    /// See `memory_delay_count`.
    pub memory_delay_micros: u64,
    /// Write groups blocked at the cap, and the time they waited.
    pub memory_block_count: u64,
    /// See `memory_block_count`.
    pub memory_block_micros: u64,
    /// Writes let through at the cap because nothing in flight could free memory.
    pub memory_unreclaimable_writes: u64,
    /// Block cache use and capacity.
    pub block_cache_usage_bytes: u64,
    /// See `block_cache_usage_bytes`.
    pub block_cache_capacity_bytes: u64,
    /// Block cache hits and misses.
    pub block_cache_hits: u64,
    /// See `block_cache_hits`.
    pub block_cache_misses: u64,
    /// Tables open in the table cache.
    pub open_tables: u64,
    /// Memory of their indexes and filters.
    pub table_memory_bytes: u64,
    /// Memory of table builders of running flushes and compactions.
    pub table_builder_bytes: u64,
    /// Logical bytes written by users.
    pub user_bytes_written: u64,
    /// Bytes appended to the write-ahead log.
    pub wal_bytes_written: u64,
    /// Flushes and the bytes they wrote.
    pub flush_count: u64,
    /// See `flush_count`.
    pub flush_bytes_written: u64,
    /// Compactions and their traffic.
    pub compaction_count: u64,
    /// See `compaction_count`.
    pub compaction_bytes_read: u64,
    /// See `compaction_count`.
    pub compaction_bytes_written: u64,
    /// Compactions that moved a file without rewriting it.
    pub trivial_moves: u64,
    /// Write stalls (writers stopped), in progress now, and their time.
    pub write_stall_count: u64,
    /// See `write_stall_count`.
    pub write_stalls_in_progress: u64,
    /// See `write_stall_count`.
    pub write_stall_micros: u64,
    /// Write slowdowns (level-0 files) and their time.
    pub write_slowdown_count: u64,
    /// See `write_slowdown_count`.
    pub write_slowdown_micros: u64,
    /// The newest sequence number visible to reads.
    pub visible_sequence: u64,
    /// The oldest sequence number a snapshot or transaction still reads at.
    pub smallest_snapshot: u64,
    /// Total bytes of tables.
    pub total_table_bytes: u64,
    /// Number of levels reported by `riptide_get_level_stats`.
    pub num_levels: u64,
    /// Number of column families.
    pub num_column_families: u64,
    /// 1 when a background error stopped writes (the message is in `riptide_stats_text`).
    pub has_background_error: u64,
    /// Recovery at open: WAL records replayed.
    pub recovery_wal_records_replayed: u64,
    /// Recovery: torn-tail bytes dropped.
    pub recovery_wal_torn_tail_bytes_dropped: u64,
    /// Recovery: logs dropped after a torn tail or gap.
    pub recovery_wal_logs_dropped: u64,
    /// Recovery: damaged records skipped (`RIPTIDE_WAL_RECOVERY_SKIP_CORRUPT`).
    pub recovery_wal_records_skipped: u64,
    /// Recovery: bytes of those.
    pub recovery_wal_bytes_skipped: u64,
    /// Recovery: prepared transactions recovered (listed by `riptide_prepared_transactions`).
    pub recovery_prepared_transactions_recovered: u64,
    /// Recovery: prepared transactions found committed.
    pub recovery_prepared_transactions_committed: u64,
    /// Recovery: leftover prepared files removed.
    pub recovery_prepared_files_dropped: u64,
    /// Transactions begun, open now, committed, rolled back.
    pub txn_begun: u64,
    /// See `txn_begun`.
    pub txn_open: u64,
    /// See `txn_begun`.
    pub txn_committed: u64,
    /// See `txn_begun`.
    pub txn_rolled_back: u64,
    /// Commits and lock requests that failed with `RIPTIDE_CONFLICT`.
    pub txn_conflicts: u64,
    /// Lock requests that waited, and their time.
    pub txn_lock_waits: u64,
    /// See `txn_lock_waits`.
    pub txn_lock_wait_micros: u64,
    /// Deadlock victims and lock timeouts.
    pub txn_deadlocks: u64,
    /// See `txn_deadlocks`.
    pub txn_lock_timeouts: u64,
    /// Lock escalations done and refused.
    pub txn_lock_escalations: u64,
    /// See `txn_lock_escalations`.
    pub txn_lock_escalations_refused: u64,
    /// Lock requests that waited for a column-family lock.
    pub txn_column_family_lock_waits: u64,
    /// Row locks held now and their memory.
    pub txn_locks_held: u64,
    /// See `txn_locks_held`.
    pub txn_lock_memory_bytes: u64,
    /// Memory of the commit history.
    pub txn_history_memory_bytes: u64,
    /// Bytes written by the engine per byte written by users.
    pub write_amplification: f64,
    /// Block cache hits over lookups (0 when none).
    pub block_cache_hit_rate: f64,
    /// Memory of open and prepared transactions' write and read sets, charged to the memory
    /// cap. (Added after the fields above: a caller built against an older header passes a
    /// smaller `struct_size` and does not get it.)
    pub txn_write_set_memory_bytes: u64,
    /// Compactions of level 0 below its file-count trigger, paid for by seeks that merged its
    /// files (`riptide_options_set_read_compaction_bytes_per_table_seek`). (Added after the
    /// fields above, like `txn_write_set_memory_bytes`.)
    pub read_triggered_compactions: u64,
}

/// Files, bytes and compaction traffic of one level.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct riptide_level_stats_t {
    /// Table files in the level.
    pub files: u64,
    /// Their total size.
    pub size_bytes: u64,
    /// Bytes of tables written into the level.
    pub bytes_written: u64,
    /// Bytes of the level's tables read by compactions.
    pub bytes_read: u64,
    /// Flushes (level 0) or compactions that wrote into the level.
    pub jobs: u64,
    /// Bytes compactions brought in from the level above.
    pub bytes_brought_in: u64,
    /// Target size (per column family; summed in totals).
    pub target_bytes: u64,
    /// Compaction score: 1 or more means due.
    pub score: f64,
}

/// One column family's statistics; its name comes from `riptide_cf_name`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct riptide_cf_stats_t {
    /// In: the caller's `sizeof(riptide_cf_stats_t)`. Out: the bytes filled.
    pub struct_size: u64,
    /// The column family's id.
    pub id: u64,
    /// Bytes in its active memtable.
    pub memtable_bytes: u64,
    /// Its frozen memtables and their bytes.
    pub immutable_memtables: u64,
    /// See `immutable_memtables`.
    pub immutable_memtable_bytes: u64,
    /// Bytes compaction still has to move.
    pub pending_compaction_bytes: u64,
    /// The level level 0 compacts into.
    pub base_level: u64,
    /// Levels reported by `riptide_get_level_stats` for it.
    pub num_levels: u64,
}

/// Size and entry estimates of a key range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct riptide_range_stats_t {
    /// In: the caller's `sizeof(riptide_range_stats_t)`. Out: the bytes filled.
    pub struct_size: u64,
    /// Bytes of table data holding keys of the range (compressed, as on disk).
    pub table_bytes: u64,
    /// Entries (versions and tombstones) in tables, estimated from table properties.
    pub table_entries: u64,
    /// User keys in memtables, each once however many versions it has there (counted in a short
    /// range, estimated from a sample of the skiplist in a longer one).
    pub memtable_entries: u64,
    /// `table_entries + memtable_entries`: an upper estimate of the live keys.
    pub entries: u64,
}

/// Copies the first `size` bytes of `value` (at most all of it) to `target`; returns the count.
///
/// # Safety
/// `target` must be valid for `size` bytes of writes; `T` must have no padding.
pub(crate) unsafe fn copy_prefix<T: Copy>(value: &T, target: *mut u8, size: usize) -> usize {
    let count = size.min(std::mem::size_of::<T>());
    // SAFETY: `value` is `count` readable bytes without padding; `target` is writable.
    unsafe { std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), target, count) };
    count
}

/// Checks the arguments of a caller-owned output array named `what`: with a non-zero
/// `capacity` it must be non-NULL and its elements non-empty.
pub(crate) fn check_array<T>(array: *mut T, capacity: usize, element_size: usize, what: &str) -> Result<(), CapiError> {
    if capacity > 0 && (array.is_null() || element_size == 0) {
        return Err(CapiError::misuse(format!("{what} is NULL or element_size is 0 with a non-zero capacity")));
    }
    Ok(())
}

/// Writes the first `capacity` of `items`, each flattened by `flatten`, into the caller's array
/// of `element_size`-byte elements (each truncated to its element, as `copy_prefix` does).
///
/// # Safety
/// `array` must be valid for `capacity * element_size` bytes of writes (checked with
/// `check_array`); `T` must have no padding.
pub(crate) unsafe fn deliver_array<S, T: Copy>(
    items: &[S],
    flatten: impl Fn(&S) -> T,
    array: *mut T,
    capacity: usize,
    element_size: usize,
) {
    for (index, item) in items.iter().take(capacity).enumerate() {
        // SAFETY: element `index` < `capacity` lies within the caller's array.
        unsafe { copy_prefix(&flatten(item), array.cast::<u8>().add(index * element_size), element_size) };
    }
}

/// Reads the caller's `struct_size` and copies `value` into `*target` up to it.
///
/// # Safety
/// `target` must be NULL or point to a struct whose first field is `struct_size`, valid for
/// that many bytes.
unsafe fn deliver_sized<T: Copy>(
    mut value: T,
    target: *mut T,
    struct_size: fn(&mut T) -> &mut u64,
) -> Result<(), CapiError> {
    if target.is_null() {
        return Err(CapiError::misuse("out-parameter is NULL"));
    }
    // SAFETY: the first field is a u64 by the function's contract.
    let size = unsafe { *target.cast::<u64>() } as usize;
    if size < std::mem::size_of::<u64>() {
        return Err(CapiError::misuse("struct_size is not set (set it to sizeof the struct)"));
    }
    *struct_size(&mut value) = size.min(std::mem::size_of::<T>()) as u64;
    // SAFETY: the caller's struct holds `size` bytes; T is made of 64-bit fields.
    unsafe { copy_prefix(&value, target.cast(), size) };
    Ok(())
}

fn pressure(value: MemoryPressure) -> u64 {
    match value {
        MemoryPressure::Normal => RIPTIDE_MEMORY_PRESSURE_NORMAL,
        MemoryPressure::Elevated => RIPTIDE_MEMORY_PRESSURE_ELEVATED,
        MemoryPressure::High => RIPTIDE_MEMORY_PRESSURE_HIGH,
        _ => RIPTIDE_MEMORY_PRESSURE_CRITICAL,
    }
}

fn flatten(stats: &Stats) -> riptide_stats_t {
    let (recovery, txn) = (&stats.recovery, &stats.transactions);
    riptide_stats_t {
        struct_size: 0,
        memtable_bytes: stats.memtable_bytes as u64,
        immutable_memtables: stats.immutable_memtables as u64,
        immutable_memtable_bytes: stats.immutable_memtable_bytes as u64,
        pending_compaction_bytes: stats.pending_compaction_bytes,
        running_compactions: stats.running_compactions as u64,
        subcompactions: stats.subcompactions,
        tombstone_compactions: stats.tombstone_compactions,
        manual_compactions: stats.manual_compactions,
        memory_limit_bytes: stats.memory_limit_bytes,
        memory_usage_bytes: stats.memory_usage_bytes,
        memory_peak_bytes: stats.memory_peak_bytes,
        memory_pressure: pressure(stats.memory_pressure),
        memory_flushes: stats.memory_flushes,
        memory_delay_count: stats.memory_delay_count,
        memory_delay_micros: stats.memory_delay_micros,
        memory_block_count: stats.memory_block_count,
        memory_block_micros: stats.memory_block_micros,
        memory_unreclaimable_writes: stats.memory_unreclaimable_writes,
        block_cache_usage_bytes: stats.block_cache_usage_bytes as u64,
        block_cache_capacity_bytes: stats.block_cache_capacity_bytes as u64,
        block_cache_hits: stats.block_cache_hits,
        block_cache_misses: stats.block_cache_misses,
        open_tables: stats.open_tables as u64,
        table_memory_bytes: stats.table_memory_bytes as u64,
        table_builder_bytes: stats.table_builder_bytes as u64,
        user_bytes_written: stats.user_bytes_written,
        wal_bytes_written: stats.wal_bytes_written,
        flush_count: stats.flush_count,
        flush_bytes_written: stats.flush_bytes_written,
        compaction_count: stats.compaction_count,
        compaction_bytes_read: stats.compaction_bytes_read,
        compaction_bytes_written: stats.compaction_bytes_written,
        trivial_moves: stats.trivial_moves,
        write_stall_count: stats.write_stall_count,
        write_stalls_in_progress: stats.write_stalls_in_progress,
        write_stall_micros: stats.write_stall_micros,
        write_slowdown_count: stats.write_slowdown_count,
        write_slowdown_micros: stats.write_slowdown_micros,
        visible_sequence: stats.visible_sequence,
        smallest_snapshot: stats.smallest_snapshot,
        total_table_bytes: stats.total_table_bytes(),
        num_levels: stats.levels.len() as u64,
        num_column_families: stats.column_families.len() as u64,
        has_background_error: u64::from(stats.background_error.is_some()),
        recovery_wal_records_replayed: recovery.wal_records_replayed,
        recovery_wal_torn_tail_bytes_dropped: recovery.wal_torn_tail_bytes_dropped,
        recovery_wal_logs_dropped: recovery.wal_logs_dropped,
        recovery_wal_records_skipped: recovery.wal_records_skipped,
        recovery_wal_bytes_skipped: recovery.wal_bytes_skipped,
        recovery_prepared_transactions_recovered: recovery.prepared_transactions_recovered,
        recovery_prepared_transactions_committed: recovery.prepared_transactions_committed,
        recovery_prepared_files_dropped: recovery.prepared_files_dropped,
        txn_begun: txn.begun,
        txn_open: txn.open,
        txn_committed: txn.committed,
        txn_rolled_back: txn.rolled_back,
        txn_conflicts: txn.conflicts,
        txn_lock_waits: txn.lock_waits,
        txn_lock_wait_micros: txn.lock_wait_micros,
        txn_deadlocks: txn.deadlocks,
        txn_lock_timeouts: txn.lock_timeouts,
        txn_lock_escalations: txn.lock_escalations,
        txn_lock_escalations_refused: txn.lock_escalations_refused,
        txn_column_family_lock_waits: txn.column_family_lock_waits,
        txn_locks_held: txn.locks_held as u64,
        txn_lock_memory_bytes: txn.lock_memory_bytes as u64,
        txn_history_memory_bytes: txn.history_memory_bytes as u64,
        write_amplification: stats.write_amplification(),
        block_cache_hit_rate: stats.block_cache_hit_rate(),
        txn_write_set_memory_bytes: txn.write_set_memory_bytes as u64,
        read_triggered_compactions: stats.read_triggered_compactions,
    }
}

/// Fills `*out_stats` (whose `struct_size` the caller sets) with the database's statistics.
///
/// # Safety
/// `out_stats` must point to a struct of `struct_size` bytes; `err` NULL or a
/// `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_stats(
    db: *const riptide_db_t,
    out_stats: *mut riptide_stats_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        let stats = with_db(db, |_, database| Ok(database.stats()))?;
        // SAFETY: by the function's contract.
        unsafe { deliver_sized(flatten(&stats), out_stats, |stats| &mut stats.struct_size) }
    })
}

/// Fills `*out_stats` (whose `struct_size` the caller sets) with column family `cf`'s
/// statistics.
///
/// # Safety
/// As `riptide_get_stats`.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_cf_stats(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    out_stats: *mut riptide_cf_stats_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        let family = with_db(db, |object, database| {
            let id = family_of(object.id, cf)?.cf.id();
            let stats = database.stats();
            stats
                .column_families
                .into_iter()
                .find(|family| family.id == id)
                .ok_or_else(|| CapiError::invalid(format!("column family {id} was dropped")))
        })?;
        let flat = riptide_cf_stats_t {
            struct_size: 0,
            id: u64::from(family.id),
            memtable_bytes: family.memtable_bytes as u64,
            immutable_memtables: family.immutable_memtables as u64,
            immutable_memtable_bytes: family.immutable_memtable_bytes as u64,
            pending_compaction_bytes: family.pending_compaction_bytes,
            base_level: family.base_level as u64,
            num_levels: family.levels.len() as u64,
        };
        // SAFETY: by the function's contract.
        unsafe { deliver_sized(flat, out_stats, |stats| &mut stats.struct_size) }
    })
}

fn flatten_level(level: &LevelStats) -> riptide_level_stats_t {
    riptide_level_stats_t {
        files: level.files as u64,
        size_bytes: level.size_bytes,
        bytes_written: level.bytes_written,
        bytes_read: level.bytes_read,
        jobs: level.jobs,
        bytes_brought_in: level.bytes_brought_in,
        target_bytes: level.target_bytes,
        score: level.score,
    }
}

/// Per-level statistics of column family `cf`, or of the whole database when `cf` is NULL:
/// `*out_count` receives the number of levels, and the first `min(capacity, count)` of them are
/// written to `levels`, an array of elements of `element_size` bytes (pass
/// `sizeof(riptide_level_stats_t)`). `levels` may be NULL when `capacity` is 0.
///
/// # Safety
/// `levels` must be valid for `capacity * element_size` bytes of writes; `out_count` valid for
/// a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_get_level_stats(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    levels: *mut riptide_level_stats_t,
    capacity: usize,
    element_size: usize,
    out_count: *mut usize,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let count_slot = unsafe { out(out_count, "out_count") }?;
        check_array(levels, capacity, element_size, "levels")?;
        let all = with_db(db, |object, database| {
            let stats = database.stats();
            if cf.is_null() {
                return Ok(stats.levels);
            }
            let id = family_of(object.id, cf)?.cf.id();
            stats
                .column_families
                .into_iter()
                .find(|family| family.id == id)
                .map(|family| family.levels)
                .ok_or_else(|| CapiError::invalid(format!("column family {id} was dropped")))
        })?;
        // SAFETY: checked above, and by the function's contract.
        unsafe { deliver_array(&all, flatten_level, levels, capacity, element_size) };
        *count_slot = all.len();
        Ok(())
    })
}

/// The engine's human-readable statistics dump (per level, per column family, memory,
/// stalls, transactions), `malloc`ed and NUL-terminated (free with `riptide_free`).
///
/// # Safety
/// `out_text` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_stats_text(
    db: *const riptide_db_t,
    out_text: *mut *mut c_char,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_text, "out_text") }?;
        let text = with_db(db, |_, database| Ok(database.stats().to_string()))?;
        *slot = malloc_string(&text)?;
        Ok(())
    })
}

/// Estimates of the keys in `[start, end)` of `cf` (NULL: the default column family): bytes
/// and entries in tables and memtables. Cheap: in-memory indexes and table properties only.
///
/// # Safety
/// `start` and `end` must be valid for their lengths; `out_stats` must point to a struct of
/// its `struct_size` bytes; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_approximate_range_stats(
    db: *const riptide_db_t,
    cf: *const riptide_cf_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    out_stats: *mut riptide_range_stats_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let (start, end) = unsafe { (bytes(start, start_len, "start")?, bytes(end, end_len, "end")?) };
        let range = with_db(db, |object, database| {
            let family =
                if cf.is_null() { database.default_column_family() } else { family_of(object.id, cf)?.cf.clone() };
            Ok(database.approximate_range_stats(&family, start, end)?)
        })?;
        let flat = riptide_range_stats_t {
            struct_size: 0,
            table_bytes: range.table_bytes,
            table_entries: range.table_entries,
            memtable_entries: range.memtable_entries,
            entries: range.entries(),
        };
        // SAFETY: by the function's contract.
        unsafe { deliver_sized(flat, out_stats, |stats| &mut stats.struct_size) }
    })
}

/// Approximate bytes of table data holding keys in `[start, end)` of the default column family
/// (memtables not counted), in `*out_bytes`.
///
/// # Safety
/// `start` and `end` must be valid for their lengths; `out_bytes` valid for a write; `err` NULL
/// or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_approximate_size(
    db: *const riptide_db_t,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    out_bytes: *mut u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_bytes, "out_bytes") }?;
        // SAFETY: by the function's contract.
        let (start, end) = unsafe { (bytes(start, start_len, "start")?, bytes(end, end_len, "end")?) };
        *slot = with_db(db, |_, database| Ok(database.approximate_size_bytes(start, end)?))?;
        Ok(())
    })
}
