//! Opening a database: locking, recovery from the manifest and the write-ahead logs, cleanup of
//! files a crash left behind, and starting the background threads.
//!
//! Recovery order (each step durable before the next):
//! 1. Take the `LOCK` file's OS lock (released by the OS if the process dies).
//! 2. Rebuild the version from `CURRENT` and the manifest it names.
//! 3. Replay every WAL numbered at or above the smallest log number of any column family,
//!    oldest first, into per-column-family memtables (a record goes to a column family only if
//!    its log is at or above that column family's log number, and records of dropped column
//!    families are skipped: invariant I22), writing each full memtable (and the last one) to a
//!    level-0 table.
//! 4. Start a new WAL, and record, per column family, the recovered tables and the new log
//!    number in a fresh manifest, switching `CURRENT` to it. A crash between two column
//!    families' records is safe: each column family's log number says which logs it still
//!    needs, and those logs are deleted only after the last record.
//! 5. Delete what no longer matters: older WALs and manifests, temporary files, and tables the
//!    manifest does not name (outputs of a flush or compaction that a crash interrupted).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use super::column_family::{ColumnFamilyShared, ColumnFamilyState};
use super::compaction::ManualCompactions;
use super::filename::{log_path, parse_file_name, table_path, FileKind, CURRENT_FILE_NAME, LOCK_FILE_NAME};
use super::flush::{write_level0_table, BlobTarget};
use super::memory::MemoryGovernor;
use super::stats::{MemoryPressure, RecoveryStats};
use super::table_cache::TableCache;
use super::write::{check_column_family_name_length, insert_batch, new_write_queue, WalState};
use super::{BackgroundStats, Db, DbInner, DbState, ReadView};
use crate::batch::{WriteBatch, DEFAULT_COLUMN_FAMILY_ID};
use crate::cache::BlockCache;
use crate::comparator::KeyComparator;
use crate::error::{Error, Result};
use crate::memtable::{ChunkPool, MemTable};
use crate::options::{ColumnFamilyOptions, Options, SyncMode, WalRecovery};
use crate::snapshot::SnapshotList;
use crate::txn::prepared::MARKER_COLUMN_FAMILY_ID;
use crate::version::edit::VersionEdit;
use crate::version::set::{VersionSet, DEFAULT_COLUMN_FAMILY_NAME};
use crate::version::tree::{FileJanitor, TableFile};
use crate::wal::{LogReader, LogWriter, RECORD_HEADER_SIZE_BYTES};

pub(crate) fn open(dir: &Path, options: Options) -> Result<Db> {
    open_with_column_families(dir, options, Vec::new())
}

/// A column family's memtable during log replay.
struct Replay {
    options: Arc<ColumnFamilyOptions>,
    memtable: Arc<MemTable>,
    /// Logs below this number are already in the column family's tables.
    log_number: u64,
    edit: VersionEdit,
}

pub(crate) fn open_with_column_families(
    dir: &Path,
    options: Options,
    column_families: Vec<(String, ColumnFamilyOptions)>,
) -> Result<Db> {
    options.validate()?;
    for (name, column_family_options) in &column_families {
        // A listed name that does not exist creates a column family, so it must be a valid name.
        check_column_family_name_length(name)?;
        column_family_options
            .validate()
            .map_err(|error| Error::invalid(format!("options of column family {name:?}: {error}")))?;
    }
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
    let options_of = |name: &str| -> ColumnFamilyOptions {
        column_families
            .iter()
            .find(|(listed, _)| listed == name)
            .map_or_else(|| options.column_family_options(), |(_, listed)| listed.clone())
    };
    // Recovery checks every column family's comparator against the recorded name before
    // anything is written, so a wrong one leaves the database untouched.
    let comparator_of = |name: &str| KeyComparator::new(&options_of(name).comparator);
    let mut versions = if file_system.exists(&dir.join(CURRENT_FILE_NAME)) {
        if options.error_if_exists {
            return Err(Error::invalid(format!("a database already exists in {}", dir.display())));
        }
        VersionSet::recover(dir, Arc::clone(&file_system), Arc::clone(&janitor), &comparator_of)?
    } else {
        if !options.create_if_missing {
            return Err(Error::invalid(format!("no database in {} and create_if_missing is off", dir.display())));
        }
        refuse_to_recreate_over_data(dir, &file_system)?;
        let default_comparator = comparator_of(DEFAULT_COLUMN_FAMILY_NAME);
        VersionSet::new_empty(dir, Arc::clone(&file_system), Arc::clone(&janitor), default_comparator)
    };
    check_tables_present(dir, &file_system, &versions)?;

    // Replay the logs the manifest does not cover yet.
    let names = file_system.list(dir)?;
    let min_log_number = versions.min_log_number();
    let mut log_numbers: Vec<u64> = names
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::Log(number)) if number >= min_log_number => Some(number),
            _ => None,
        })
        .collect();
    log_numbers.sort_unstable();
    for &number in &log_numbers {
        versions.mark_file_number_used(number);
    }
    // Two-phase commit (see `txn/prepared.rs`): the prepared transactions' files, and the logs
    // older than the replayed ones, which a commit in progress kept for its marker.
    let mut prepared_numbers: Vec<u64> = Vec::new();
    let mut older_logs: Vec<u64> = Vec::new();
    for name in &names {
        match parse_file_name(name) {
            Some(FileKind::Prepared(number)) => prepared_numbers.push(number),
            Some(FileKind::Log(number)) if number < min_log_number => older_logs.push(number),
            // Removed below, but its number stays used until then (I7).
            Some(FileKind::Spill(number)) => versions.mark_file_number_used(number),
            _ => {}
        }
    }
    prepared_numbers.sort_unstable();
    older_logs.sort_unstable();
    for &number in prepared_numbers.iter().chain(&older_logs) {
        versions.mark_file_number_used(number);
    }
    let mut committed_markers: HashSet<u64> = HashSet::new();
    if !prepared_numbers.is_empty() {
        for &number in &older_logs {
            collect_markers(dir, &file_system, number, &mut committed_markers);
        }
    }
    let mut replays: BTreeMap<u32, Replay> = versions
        .column_families()
        .iter()
        .map(|(&id, family)| {
            let family_options = Arc::new(options_of(&family.name));
            let memtable = Arc::new(MemTable::new(family_options.memtable_size_bytes, family.comparator().clone()));
            let edit = VersionEdit { column_family: id, ..VersionEdit::default() };
            (id, Replay { options: family_options, memtable, log_number: family.log_number, edit })
        })
        .collect();
    let mut recovery = RecoveryStats::default();
    let mut max_sequence = versions.last_sequence();
    // I12: logs are synced lazily, so a power loss can tear any log, not only the newest, and
    // can keep pages of a later log while losing pages of an earlier one. Every sync covers all
    // earlier logs, so what a sync made durable is a prefix of the write history, and recovery
    // replays the longest intact prefix: it stops at a torn tail, in whichever log, or at a gap
    // in the sequence numbers (a log cut exactly at a record boundary, or lost with its name),
    // and drops the rest, later logs included. Only unsynced writes can lie there.
    // The first record replayed has no predecessor in the logs, but it may not start past the
    // manifest's last sequence plus one: every record of a log no longer replayed is covered by
    // it (`record_assigned_sequences`), so a first record beyond it means the records between,
    // in the oldest log still needed, were lost (the log came back empty while a later log's
    // pages survived).
    let tolerate_torn_tail = options.wal_recovery == WalRecovery::TolerateTornTail;
    let first_sequence_bound = versions.last_sequence().saturating_add(1);
    let mut next_sequence: Option<u64> = None;
    let mut history_ended = false;
    for &number in &log_numbers {
        let path = log_path(dir, number);
        if history_ended {
            recovery.wal_logs_dropped += 1;
            recovery.wal_torn_tail_bytes_dropped += file_system.file_size(&path)?;
            continue;
        }
        let data = file_system.read_all(&path)?;
        let file_size_bytes = data.len() as u64;
        let mut reader = LogReader::new(data, path.clone(), options.wal_recovery, true).allow_preallocated_tail();
        while let Some((offset, record)) = reader.next_record()? {
            let batch = WriteBatch::from_data(record.to_vec(), &path, offset + RECORD_HEADER_SIZE_BYTES as u64)?;
            if batch.is_empty() {
                recovery.wal_records_replayed += 1;
                continue;
            }
            let gap = match next_sequence {
                Some(expected) => (batch.sequence() != expected).then(|| format!("{expected} was expected")),
                None => (batch.sequence() > first_sequence_bound)
                    .then(|| format!("at most {first_sequence_bound} was expected after the manifest's last sequence")),
            };
            if let Some(expected) = gap {
                let reason = format!(
                    "the record holds sequence numbers from {} where {expected}: writes are missing before it",
                    batch.sequence()
                );
                match options.wal_recovery {
                    WalRecovery::Absolute => {
                        return Err(Error::corruption(&path, offset, format!("{reason} (WalRecovery::Absolute)")));
                    }
                    WalRecovery::TolerateTornTail => {
                        history_ended = true;
                        recovery.wal_torn_tail_bytes_dropped += file_size_bytes - offset;
                        break;
                    }
                    // Skipping damage already gives up on completeness.
                    _ => {}
                }
            }
            next_sequence = Some(batch.sequence() + batch.len() as u64);
            recovery.wal_records_replayed += 1;
            note_markers(&batch, &mut committed_markers);
            // I22: a column family takes the record only if its tables do not hold this log.
            insert_batch(&batch, |id| {
                replays.get(&id).filter(|replay| number >= replay.log_number).map(|replay| replay.memtable.as_ref())
            });
            max_sequence = max_sequence.max(batch.sequence() + batch.len() as u64 - 1);
            for replay in replays.values_mut() {
                if replay.memtable.approximate_memory_bytes() >= replay.options.memtable_size_bytes {
                    flush_recovered(dir, &file_system, &mut versions, replay)?;
                }
            }
        }
        recovery.wal_torn_tail_bytes_dropped += reader.dropped_tail_bytes();
        recovery.wal_records_skipped += reader.skipped_records();
        recovery.wal_bytes_skipped += reader.skipped_bytes();
        if tolerate_torn_tail && reader.dropped_tail_bytes() > 0 {
            history_ended = true;
        }
    }
    for replay in replays.values_mut() {
        if !replay.memtable.is_empty() {
            flush_recovered(dir, &file_system, &mut versions, replay)?;
        }
    }
    file_system.sync_dir(dir)?;

    // A fresh log for new writes, then a fresh manifest naming it for every column family.
    let log_number = versions.new_file_number();
    let log_file_path = log_path(dir, log_number);
    let log_file = file_system.create(&log_file_path)?;
    let log_writer = LogWriter::with_preallocation(log_file, log_file_path, options.wal_preallocate_bytes);
    versions.set_last_sequence(max_sequence);
    for (_, mut replay) in std::mem::take(&mut replays) {
        replay.edit.log_number = Some(log_number);
        versions.log_and_apply(replay.edit)?;
    }
    // Column families listed in the options that do not exist yet are created now.
    let mut created = Vec::new();
    for (name, family_options) in &column_families {
        if !versions.column_families().values().any(|family| &family.name == name) {
            let id = versions.new_column_family_id();
            let edit = VersionEdit {
                column_family: id,
                add_column_family: Some(name.clone()),
                log_number: Some(log_number),
                ..VersionEdit::default()
            };
            versions.add_column_family(edit, KeyComparator::new(&family_options.comparator))?;
            created.push(id);
        }
    }
    // I32: a prepared spilled transaction committed by a manifest record that names it.
    committed_markers.extend(versions.prepared_committed().iter().copied());
    let recovered_prepared = resolve_prepared(dir, &file_system, &prepared_numbers, &committed_markers, &mut recovery)?;
    // Their files are gone (durably) now, so the manifest need not repeat them.
    for number in committed_markers {
        versions.forget_prepared_committed(number);
    }
    let kept_runs: HashSet<u64> =
        recovered_prepared.iter().flat_map(|record| record.runs.iter().map(|run| run.file_number)).collect();
    delete_obsolete_files(dir, &file_system, &versions, log_number, &kept_runs)?;

    let mut states = BTreeMap::new();
    let mut handles = HashMap::new();
    let work_available = Arc::new(Condvar::new());
    // Up to one memtable's worth of chunks of flushed memtables, for the next ones (see
    // `ChunkPool`).
    let chunk_pool = Arc::new(ChunkPool::new(options.memtable_size_bytes));
    for (&id, family) in versions.column_families() {
        let family_options = options_of(&family.name);
        let memtable = Arc::new(MemTable::new(family_options.memtable_size_bytes, family.comparator().clone()));
        let view = ReadView { memtable: Arc::clone(&memtable), immutables: Vec::new(), version: versions.current(id) };
        let shared = Arc::new(ColumnFamilyShared::new(
            id,
            family.name.clone(),
            family_options,
            view,
            Arc::clone(&work_available),
            Arc::clone(&chunk_pool),
        ));
        handles.insert(id, Arc::clone(&shared));
        states.insert(id, ColumnFamilyState::new(shared, memtable, log_number));
    }
    let default_column_family = handles
        .get(&DEFAULT_COLUMN_FAMILY_ID)
        .cloned()
        .ok_or_else(|| Error::invalid("internal error: no default column family"))?;
    let state = DbState {
        column_families: states,
        versions,
        background_error: None,
        running_compactions: Vec::new(),
        live_logs: VecDeque::from([log_number]),
        stats: BackgroundStats::default(),
    };
    let memory = MemoryGovernor::new(options.effective_max_memory_bytes(), options.block_cache_size_bytes);
    // A cache configured larger than the room the cap leaves it starts within that room.
    block_cache.set_capacity_bytes(memory.cache_capacity_for(MemoryPressure::Normal));
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        file_system,
        lock: Mutex::new(Some(lock)),
        state: Mutex::new(state),
        background_done: Condvar::new(),
        work_available,
        shutdown_signal: Condvar::new(),
        write_queue: new_write_queue(),
        self_service: super::self_service::SelfService::new(),
        wal: Mutex::new(WalState {
            writer: Some(log_writer),
            number: log_number,
            unsynced: false,
            name_unsynced: false,
        }),
        closed_logs: Mutex::new(Vec::new()),
        last_sequence: AtomicU64::new(max_sequence),
        visible_sequence: AtomicU64::new(max_sequence),
        default_column_family,
        column_family_handles: RwLock::new(handles),
        manual_compactions: Mutex::new(ManualCompactions::default()),
        memory,
        snapshots: Arc::new(SnapshotList::new(Arc::new(crate::ttl::MonotonicClock::new(Arc::clone(&options.clock))))),
        transactions: crate::txn::TransactionShared::default(),
        table_cache,
        block_cache,
        chunk_pool,
        shutting_down: AtomicBool::new(false),
        user_bytes_written: AtomicU64::new(0),
        wal_bytes_written: AtomicU64::new(0),
        recovery,
        options,
    });
    for record in recovered_prepared {
        crate::txn::two_phase::recover(&inner, record)?;
    }
    // Only once all of them hold their locks again (see the function).
    crate::txn::two_phase::escalate_recovered(&inner);
    let mut threads = Vec::new();
    let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().name(name).spawn(body).map_err(|e| Error::io("start background thread", e))
    };
    for index in 0..inner.options.max_background_flushes {
        let flush_inner = Arc::clone(&inner);
        threads.push(spawn(format!("riptide-flush-{index}"), Box::new(move || super::flush::flush_loop(flush_inner)))?);
    }
    for index in 0..inner.options.effective_max_background_compactions() {
        let compaction_inner = Arc::clone(&inner);
        threads.push(spawn(
            format!("riptide-compact-{index}"),
            Box::new(move || super::compaction::compaction_loop(compaction_inner)),
        )?);
    }
    let monitor_inner = Arc::clone(&inner);
    threads.push(spawn("riptide-memory".to_string(), Box::new(move || super::memory::monitor_loop(monitor_inner)))?);
    if let SyncMode::Interval { interval_us } = inner.options.wal_sync_mode {
        let sync_inner = Arc::clone(&inner);
        let interval = Duration::from_micros(interval_us);
        threads.push(spawn(
            "riptide-wal-sync".to_string(),
            Box::new(move || super::write::interval_sync_loop(sync_inner, interval)),
        )?);
    }
    // Work may be due right away (for example level 0 was full when the database closed).
    inner.work_available.notify_all();
    Ok(Db { inner, threads: Mutex::new(threads), closed: AtomicBool::new(false) })
}

/// Adds the prepared transactions whose commit markers `batch` holds to `markers`.
fn note_markers(batch: &WriteBatch, markers: &mut HashSet<u64>) {
    if !batch.has_column_family_records() {
        return;
    }
    for record in batch.entries() {
        if record.column_family_id == MARKER_COLUMN_FAMILY_ID {
            if let Ok(bytes) = <[u8; 8]>::try_from(record.key) {
                markers.insert(u64::from_be_bytes(bytes));
            }
        }
    }
}

/// Reads a log that is not replayed for the commit markers it holds. Its records were applied
/// before (their data is in tables); only a marker matters, and damage ends the scan.
fn collect_markers(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>, number: u64, markers: &mut HashSet<u64>) {
    let path = log_path(dir, number);
    let Ok(data) = file_system.read_all(&path) else { return };
    let mut reader = LogReader::new(data, path.clone(), WalRecovery::TolerateTornTail, true).allow_preallocated_tail();
    while let Ok(Some((offset, record))) = reader.next_record() {
        let Ok(batch) = WriteBatch::from_data(record.to_vec(), &path, offset + RECORD_HEADER_SIZE_BYTES as u64) else {
            return;
        };
        note_markers(&batch, markers);
    }
}

/// Sorts the prepared-transaction files found at open: those whose commit marker was seen
/// committed before the crash and are removed, damaged ones (an unfinished `prepare`, which
/// never returned) are removed, the rest are returned to be recovered as prepared.
fn resolve_prepared(
    dir: &Path,
    file_system: &Arc<dyn crate::fs::FileSystem>,
    numbers: &[u64],
    committed: &HashSet<u64>,
    recovery: &mut RecoveryStats,
) -> Result<Vec<crate::txn::prepared::PreparedRecord>> {
    let mut recovered = Vec::new();
    let mut removed = false;
    for &number in numbers {
        let keep = if committed.contains(&number) {
            recovery.prepared_transactions_committed += 1;
            false
        } else {
            match crate::txn::prepared::read(file_system.as_ref(), dir, number)? {
                Ok(record) => {
                    recovered.push(record);
                    true
                }
                Err(_reason) => {
                    recovery.prepared_files_dropped += 1;
                    false
                }
            }
        };
        if !keep {
            file_system.remove(&crate::txn::prepared::prepared_path(dir, number))?;
            removed = true;
        }
    }
    if removed {
        file_system.sync_dir(dir)?;
    }
    recovery.prepared_transactions_recovered = recovered.len() as u64;
    Ok(recovered)
}

/// Without `CURRENT`, a directory is treated as new only if it holds no data: tables or
/// non-empty logs mean `CURRENT` was lost, and creating a new database would delete them. (A
/// crash while creating a database leaves at most an empty log and a manifest, which is safe to
/// start over from.)
fn refuse_to_recreate_over_data(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>) -> Result<()> {
    for name in file_system.list(dir)? {
        let holds_data = match parse_file_name(&name) {
            Some(FileKind::Table(_)) | Some(FileKind::Prepared(_)) => true,
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

/// Writes a memtable rebuilt from the logs to a level-0 table, adds it to the column family's
/// edit and starts a new memtable.
fn flush_recovered(
    dir: &Path,
    file_system: &Arc<dyn crate::fs::FileSystem>,
    versions: &mut VersionSet,
    replay: &mut Replay,
) -> Result<()> {
    let number = versions.new_file_number();
    // No snapshot can exist during recovery, but older versions are kept anyway: the flush
    // rule only drops a version shadowed by a newer one, which is always safe here.
    let read_points = crate::snapshot::ReadPoints::single(replay.memtable.largest_sequence());
    let fresh = MemTable::new(replay.options.memtable_size_bytes, replay.memtable.comparator().clone());
    let memtable = std::mem::replace(&mut replay.memtable, Arc::new(fresh));
    // Recovery runs before the memory governor exists (no charge) and flushes one memtable at a
    // time.
    let blob = replay
        .options
        .min_blob_size_bytes
        .is_some()
        .then(|| BlobTarget { number: versions.new_file_number(), column_family_id: replay.edit.column_family });
    if let Some(output) =
        write_level0_table(dir, file_system.as_ref(), &replay.options, &memtable, number, blob, read_points, None)?
    {
        replay.edit.new_files.push((0, output.table));
        replay.edit.new_blob_files.extend(output.blob);
    }
    replay.edit.new_range_tombstones.extend(memtable.range_tombstones());
    Ok(())
}

/// Every table the manifest names must exist with the recorded size.
fn check_tables_present(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>, versions: &VersionSet) -> Result<()> {
    for family in versions.column_families().values() {
        for file in family.current.levels.iter().flatten() {
            check_table_present(dir, file_system, file)?;
        }
        for blob in family.current.blob_files.values() {
            let path = blob.path();
            if !file_system.exists(&path) {
                return Err(Error::corruption(&path, 0, "blob file named by the manifest is missing"));
            }
            let size = file_system.file_size(&path)?;
            if size != blob.meta.file_size_bytes {
                return Err(Error::corruption(
                    &path,
                    size,
                    format!("blob file is {size} bytes, the manifest says {}", blob.meta.file_size_bytes),
                ));
            }
        }
    }
    Ok(())
}

fn check_table_present(dir: &Path, file_system: &Arc<dyn crate::fs::FileSystem>, file: &TableFile) -> Result<()> {
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
    Ok(())
}

/// Removes files that recovery made obsolete or that a crash left half-written.
fn delete_obsolete_files(
    dir: &Path,
    file_system: &Arc<dyn crate::fs::FileSystem>,
    versions: &VersionSet,
    live_log_number: u64,
    kept_runs: &HashSet<u64>,
) -> Result<()> {
    let live_tables: HashSet<u64> = versions
        .column_families()
        .values()
        .flat_map(|family| family.current.levels.iter().flatten().map(|f| f.number()).collect::<Vec<_>>())
        .collect();
    let live_blob_files: HashSet<u64> =
        versions.column_families().values().flat_map(|family| family.current.blob_files.keys().copied()).collect();
    for name in file_system.list(dir)? {
        let obsolete = match parse_file_name(&name) {
            Some(FileKind::Log(number)) => number < live_log_number,
            Some(FileKind::Table(number)) => !live_tables.contains(&number),
            // I35: a blob file no live table references is garbage (a crash between writing it
            // and the manifest record, or after the record that stopped listing it).
            Some(FileKind::Blob(number)) => !live_blob_files.contains(&number),
            Some(FileKind::Manifest(number)) => number != versions.manifest_number(),
            // Spilled runs of transactions that died with the process that wrote them; the runs
            // of prepared transactions stay.
            Some(FileKind::Spill(number)) => !kept_runs.contains(&number),
            Some(FileKind::Temp(_)) => true,
            // Decided ones were removed before; the others are undecided transactions.
            Some(FileKind::Prepared(_)) => false,
            Some(FileKind::Current) | Some(FileKind::Lock) | None => false,
        };
        if obsolete {
            // Failing to delete garbage is not fatal; the next open tries again.
            let _ = file_system.remove(&dir.join(&name));
        }
    }
    Ok(())
}
