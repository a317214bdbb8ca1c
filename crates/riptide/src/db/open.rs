//! Opening a database: locking, recovery from the manifest and the write-ahead logs, cleanup of
//! files a crash left behind, and starting the background threads.
//!
//! Recovery order (each step durable before the next):
//! 1. Take the `LOCK` file's OS lock (released by the OS if the process dies).
//! 2. Rebuild the version from `CURRENT` and the manifest it names.
//! 3. Replay every WAL numbered at or above the manifest's log number, oldest first, into
//!    memtables, writing each full memtable (and the last one) to a level-0 table.
//! 4. Start a new WAL, and record the recovered tables and the new log number in a fresh
//!    manifest, switching `CURRENT` to it.
//! 5. Delete what no longer matters: older WALs and manifests, temporary files, and tables the
//!    manifest does not name (outputs of a flush or compaction that a crash interrupted).

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use super::filename::{log_path, parse_file_name, table_path, FileKind, CURRENT_FILE_NAME, LOCK_FILE_NAME};
use super::flush::write_level0_table;
use super::stats::RecoveryStats;
use super::table_cache::TableCache;
use super::write::{insert_batch, WalState, WriteQueue};
use super::{BackgroundStats, Db, DbInner, DbState, ReadView};
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::{Options, SyncMode};
use crate::snapshot::SnapshotList;
use crate::version::edit::VersionEdit;
use crate::version::set::VersionSet;
use crate::version::tree::{FileJanitor, NUM_LEVELS};
use crate::wal::{LogReader, LogWriter, RECORD_HEADER_SIZE_BYTES};

pub(crate) fn open(dir: &Path, options: Options) -> Result<Db> {
    options.validate()?;
    let file_system = Arc::clone(&options.file_system);
    file_system.create_dir_all(dir)?;
    let lock = file_system.lock(&dir.join(LOCK_FILE_NAME))?;
    let block_cache = BlockCache::new(options.block_cache_size_bytes);
    let table_cache = Arc::new(TableCache::new(
        dir.to_path_buf(),
        Arc::clone(&file_system),
        Some(Arc::clone(&block_cache)),
        options.max_open_tables,
    ));
    let janitor = Arc::new(FileJanitor {
        dir: dir.to_path_buf(),
        file_system: Arc::clone(&file_system),
        table_cache: Arc::clone(&table_cache),
    });
    let mut versions = if file_system.exists(&dir.join(CURRENT_FILE_NAME)) {
        if options.error_if_exists {
            return Err(Error::invalid(format!("a database already exists in {}", dir.display())));
        }
        VersionSet::recover(dir, Arc::clone(&file_system), Arc::clone(&janitor))?
    } else {
        if !options.create_if_missing {
            return Err(Error::invalid(format!("no database in {} and create_if_missing is off", dir.display())));
        }
        refuse_to_recreate_over_data(dir, &file_system)?;
        VersionSet::new_empty(dir, Arc::clone(&file_system), Arc::clone(&janitor))
    };
    check_tables_present(dir, &file_system, &versions)?;

    // Replay the logs the manifest does not cover yet.
    let names = file_system.list(dir)?;
    let mut log_numbers: Vec<u64> = names
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::Log(number)) if number >= versions.log_number() => Some(number),
            _ => None,
        })
        .collect();
    log_numbers.sort_unstable();
    for &number in &log_numbers {
        versions.mark_file_number_used(number);
    }
    let mut edit = VersionEdit::default();
    let mut recovery = RecoveryStats::default();
    let mut max_sequence = versions.last_sequence();
    let mut memtable = Arc::new(MemTable::new(options.memtable_size_bytes));
    // Only the newest log with data may end in a torn record: older logs were synced before
    // the next one was started. Empty logs after it (a new log created just before a crash)
    // do not count.
    let mut log_sizes = Vec::with_capacity(log_numbers.len());
    for &number in &log_numbers {
        log_sizes.push(file_system.file_size(&log_path(dir, number))?);
    }
    let last_log_with_data = log_sizes.iter().rposition(|&size| size > 0);
    for (index, &number) in log_numbers.iter().enumerate() {
        let path = log_path(dir, number);
        let data = file_system.read_all(&path)?;
        let is_last_log = Some(index) >= last_log_with_data;
        let mut reader = LogReader::new(data, path.clone(), options.wal_recovery, is_last_log);
        while let Some((offset, record)) = reader.next_record()? {
            recovery.wal_records_replayed += 1;
            let batch = WriteBatch::from_data(record.to_vec(), &path, offset + RECORD_HEADER_SIZE_BYTES as u64)?;
            if batch.is_empty() {
                continue;
            }
            insert_batch(&memtable, &batch);
            max_sequence = max_sequence.max(batch.sequence() + batch.len() as u64 - 1);
            if memtable.approximate_memory_bytes() >= options.memtable_size_bytes {
                flush_recovered(dir, &file_system, &options, &mut versions, &memtable, &mut edit)?;
                memtable = Arc::new(MemTable::new(options.memtable_size_bytes));
            }
        }
        recovery.wal_torn_tail_bytes_dropped += reader.dropped_tail_bytes();
        recovery.wal_records_skipped += reader.skipped_records();
        recovery.wal_bytes_skipped += reader.skipped_bytes();
    }
    if !memtable.is_empty() {
        flush_recovered(dir, &file_system, &options, &mut versions, &memtable, &mut edit)?;
        memtable = Arc::new(MemTable::new(options.memtable_size_bytes));
    }
    file_system.sync_dir(dir)?;

    // A fresh log for new writes, then a fresh manifest naming it.
    let log_number = versions.new_file_number();
    let log_file_path = log_path(dir, log_number);
    let log_file = file_system.create(&log_file_path)?;
    let log_writer = LogWriter::new(log_file, log_file_path);
    edit.log_number = Some(log_number);
    versions.set_last_sequence(max_sequence);
    versions.log_and_apply(edit)?;
    delete_obsolete_files(dir, &file_system, &versions, log_number)?;

    let state = DbState {
        memtable: Arc::clone(&memtable),
        memtable_log_number: log_number,
        immutables: VecDeque::new(),
        versions,
        background_error: None,
        flush_running: false,
        compaction_running: false,
        compact_pointers: vec![Vec::new(); NUM_LEVELS],
        stats: BackgroundStats::default(),
    };
    let view = ReadView { memtable, immutables: Vec::new(), version: state.versions.current() };
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        file_system,
        lock: Mutex::new(Some(lock)),
        state: Mutex::new(state),
        background_done: Condvar::new(),
        work_available: Condvar::new(),
        write_queue: Mutex::new(WriteQueue::default()),
        wal: Mutex::new(WalState { writer: Some(log_writer), number: log_number, unsynced: false }),
        last_sequence: AtomicU64::new(max_sequence),
        visible_sequence: AtomicU64::new(max_sequence),
        read_view: RwLock::new(Arc::new(view)),
        snapshots: Arc::new(SnapshotList::default()),
        table_cache,
        block_cache,
        shutting_down: AtomicBool::new(false),
        user_bytes_written: AtomicU64::new(0),
        wal_bytes_written: AtomicU64::new(0),
        recovery,
        options,
    });
    let mut threads = Vec::new();
    let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(body)
            .map_err(|e| Error::io("start background thread", e))
    };
    let flush_inner = Arc::clone(&inner);
    threads.push(spawn("riptide-flush", Box::new(move || super::flush::flush_loop(flush_inner)))?);
    let compaction_inner = Arc::clone(&inner);
    threads.push(spawn("riptide-compact", Box::new(move || super::compaction::compaction_loop(compaction_inner)))?);
    if let SyncMode::Interval { interval_us } = inner.options.wal_sync_mode {
        let sync_inner = Arc::clone(&inner);
        let interval = Duration::from_micros(interval_us);
        threads
            .push(spawn("riptide-wal-sync", Box::new(move || super::write::interval_sync_loop(sync_inner, interval)))?);
    }
    // Work may be due right away (for example level 0 was full when the database closed).
    inner.work_available.notify_all();
    Ok(Db { inner, threads: Mutex::new(threads), closed: AtomicBool::new(false) })
}

/// Without `CURRENT`, a directory is treated as new only if it holds no data: tables or
/// non-empty logs mean `CURRENT` was lost, and creating a new database would delete them. (A
/// crash while creating a database leaves at most an empty log and a manifest, which is safe to
/// start over from.)
fn refuse_to_recreate_over_data(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>) -> Result<()> {
    for name in file_system.list(dir)? {
        let holds_data = match parse_file_name(&name) {
            Some(FileKind::Table(_)) => true,
            Some(FileKind::Log(_)) => file_system.file_size(&dir.join(&name))? > 0,
            _ => false,
        };
        if holds_data {
            return Err(Error::corruption(
                dir.join(CURRENT_FILE_NAME),
                0,
                format!("CURRENT is missing but {name} holds data; refusing to create a new database over it"),
            ));
        }
    }
    Ok(())
}

/// Writes a memtable rebuilt from the logs to a level-0 table and adds it to `edit`.
fn flush_recovered(
    dir: &Path,
    file_system: &Arc<dyn crate::fs::FileSystem>,
    options: &Options,
    versions: &mut VersionSet,
    memtable: &Arc<MemTable>,
    edit: &mut VersionEdit,
) -> Result<()> {
    let number = versions.new_file_number();
    // No snapshot can exist during recovery, but older versions are kept anyway: the flush
    // rule only drops a version shadowed by a newer one, which is always safe here.
    let smallest_snapshot = memtable.largest_sequence();
    if let Some(meta) = write_level0_table(dir, file_system.as_ref(), options, memtable, number, smallest_snapshot)? {
        edit.new_files.push((0, meta));
    }
    Ok(())
}

/// Every table the manifest names must exist with the recorded size.
fn check_tables_present(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>, versions: &VersionSet) -> Result<()> {
    let version = versions.current();
    for file in version.levels.iter().flatten() {
        let path = table_path(dir, file.number());
        if !file_system.exists(&path) {
            return Err(Error::corruption(&path, 0, "table named by the manifest is missing"));
        }
        let size = file_system.file_size(&path)?;
        if size != file.meta.file_size_bytes {
            return Err(Error::corruption(
                &path,
                size,
                format!("table is {size} bytes, the manifest says {}", file.meta.file_size_bytes),
            ));
        }
    }
    Ok(())
}

/// Removes files that recovery made obsolete or that a crash left half-written.
fn delete_obsolete_files(
    dir: &Path,
    file_system: &Arc<dyn crate::fs::FileSystem>,
    versions: &VersionSet,
    live_log_number: u64,
) -> Result<()> {
    let version = versions.current();
    let live_tables: HashSet<u64> = version.levels.iter().flatten().map(|f| f.number()).collect();
    for name in file_system.list(dir)? {
        let obsolete = match parse_file_name(&name) {
            Some(FileKind::Log(number)) => number < live_log_number,
            Some(FileKind::Table(number)) => !live_tables.contains(&number),
            Some(FileKind::Manifest(number)) => number != versions.manifest_number(),
            Some(FileKind::Temp(_)) => true,
            Some(FileKind::Current) | Some(FileKind::Lock) | None => false,
        };
        if obsolete {
            // Failing to delete garbage is not fatal; the next open tries again.
            let _ = file_system.remove(&dir.join(&name));
        }
    }
    Ok(())
}
