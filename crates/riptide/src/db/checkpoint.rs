//! Checkpoints: an openable copy of a live database in a new directory, taken while writes go
//! on (`Db::checkpoint`).
//!
//! A checkpoint is the database as of one point in its write order, the point at which the
//! checkpoint held write leadership (no write group in flight). It holds hard links to the
//! tables and blob files of that point's versions (immutable files, so a link is a copy that
//! costs no space; a copy where links are impossible), copies of the write-ahead logs up to
//! their length at that point (the writes not yet in tables), and a new manifest that
//! describes the versions, named by its own `CURRENT`. Opening it is a recovery like any
//! other: the logs replay into memtables. `CURRENT` is written last, so a checkpoint that
//! failed half-way cannot be opened as a database (and its files are removed).
//!
//! Concurrency contract: the point is taken under write leadership and the database state's mutex,
//! briefly (no I/O besides listing the directory). The files are linked and copied afterwards,
//! while writes, flushes and compactions go on: the tables and blob files stay on disk because the
//! checkpoint holds the versions that list them, and the logs because it pins the oldest one (the
//! log deletion respects pins); bytes of a log below its recorded length never change.
//!
//! Invariants: the manifest's next file number exceeds every file number of the checkpoint
//! (I7); the checkpoint's manifest lists exactly its linked tables and blob files; undecided
//! prepared transactions are refused with `Error::Busy` rather than copied, since a decision
//! in progress could be on either side of the point.

use crate::sync::Arc;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::filename::{blob_path, log_path, manifest_path, parse_file_name, table_path, FileKind};
use super::DbInner;
use crate::error::{Error, Result};
use crate::fs::{copy_file_prefix, FileSystem};
use crate::version::set::set_current_file;
use crate::version::tree::Version;
use crate::wal::LogWriter;

/// What the checkpoint copies, taken at its point.
struct Point<'a> {
    manifest_number: u64,
    manifest_records: Vec<Vec<u8>>,
    /// Every column family's version: holding them keeps their files on disk.
    versions: Vec<Arc<Version>>,
    /// Logs to copy, oldest first, each with the length to copy (`None`: all of it).
    logs: Vec<(u64, Option<u64>)>,
    /// Pins the oldest of `logs`, taken under the state's mutex (which log deletion holds).
    _pin: Option<LogPin<'a>>,
}

/// Takes a checkpoint of the database into `target`, a directory that must not exist yet.
pub(crate) fn checkpoint(inner: &DbInner, target: &Path) -> Result<()> {
    let file_system = inner.file_system.as_ref();
    if file_system.exists(target) {
        return Err(Error::invalid(format!(
            "checkpoint directory {} already exists (a checkpoint goes into a new directory)",
            target.display()
        )));
    }
    let point = take_point(inner)?;
    file_system.create_dir_all(target)?;
    let written = write_checkpoint(inner, target, &point);
    if written.is_err() {
        // Best effort: leave no half checkpoint behind (it has no CURRENT, so it cannot be
        // opened as a database either way).
        file_system.remove_dir_and_files(target);
    }
    written
}

/// Takes the checkpoint's point under write leadership and the state's mutex.
fn take_point(inner: &DbInner) -> Result<Point<'_>> {
    super::write::with_write_leadership(inner, || {
        // No group is in flight: every acknowledged write is in the logs and visible, and the
        // current log's bytes up to its length are final.
        // Every group hands its records to the OS before it completes (`append_to_wal`), so the
        // log file holds them all; no flush here, whose failure would stop the writer.
        let current_log = {
            let wal = inner.wal.lock();
            match wal.writer.as_ref() {
                Some(writer) => Some((wal.number, writer.size_bytes())),
                None => return Err(Error::Closed("the write-ahead log is closed".to_string())),
            }
        };
        let last_sequence = inner.last_sequence.load(Ordering::Acquire);
        let undecided = inner
            .file_system
            .list(&inner.dir)?
            .iter()
            .filter(|name| matches!(parse_file_name(name), Some(FileKind::Prepared(_))))
            .count();
        if undecided > 0 {
            return Err(Error::Busy(format!(
                "{undecided} prepared transaction(s) are undecided or being decided; commit or roll them back \
                 before taking a checkpoint"
            )));
        }
        let mut state = inner.state.lock();
        if let Some(error) = &state.background_error {
            return Err(error.duplicate());
        }
        let ids: Vec<u32> = state.column_families.keys().copied().collect();
        let versions = ids.iter().map(|&id| state.versions.current(id)).collect();
        let (manifest_number, edits) = state.versions.checkpoint_manifest(last_sequence);
        let manifest_records = edits
            .iter()
            .map(|edit| {
                let mut record = Vec::new();
                edit.encode(&mut record);
                record
            })
            .collect();
        let logs: Vec<(u64, Option<u64>)> = state
            .live_logs
            .iter()
            .map(|&number| match current_log {
                Some((current, length)) if current == number => (number, Some(length)),
                _ => (number, None),
            })
            .collect();
        let pin = logs.first().map(|&(oldest, _)| LogPin::new(inner, oldest));
        Ok(Point { manifest_number, manifest_records, versions, logs, _pin: pin })
    })
}

/// Links the tables and blob files, copies the logs, then writes the manifest and `CURRENT`.
fn write_checkpoint(inner: &DbInner, target: &Path, point: &Point<'_>) -> Result<()> {
    let file_system = inner.file_system.as_ref();
    for version in &point.versions {
        for file in version.levels.iter().flatten() {
            let number = file.meta.number;
            file_system.link_or_copy(&table_path(&inner.dir, number), &table_path(target, number))?;
        }
        for file in version.blob_files.values() {
            let number = file.number();
            file_system.link_or_copy(&blob_path(&inner.dir, number), &blob_path(target, number))?;
        }
    }
    for &(number, length_bytes) in &point.logs {
        let from = log_path(&inner.dir, number);
        // The pin keeps every listed log on disk: a missing one is an error, never skipped.
        copy_file_prefix(file_system, &from, &log_path(target, number), length_bytes)?;
    }
    write_manifest(file_system, target, point)?;
    // CURRENT last: it makes the directory a database. It syncs the directory, which makes
    // every name above durable too.
    set_current_file(file_system, target, point.manifest_number)
}

fn write_manifest(file_system: &dyn FileSystem, target: &Path, point: &Point<'_>) -> Result<()> {
    let path = manifest_path(target, point.manifest_number);
    let mut writer = LogWriter::new(file_system.create(&path)?, path);
    for record in &point.manifest_records {
        writer.add_record(record)?;
    }
    writer.sync()
}

/// Keeps a log and every newer one on disk while the checkpoint copies them.
struct LogPin<'a> {
    inner: &'a DbInner,
    number: u64,
}

impl<'a> LogPin<'a> {
    fn new(inner: &'a DbInner, number: u64) -> LogPin<'a> {
        inner.transactions.prepared.pin_log(number);
        LogPin { inner, number }
    }
}

impl Drop for LogPin<'_> {
    fn drop(&mut self) {
        self.inner.transactions.prepared.unpin_log(self.number);
    }
}
