//! `backup`, `list-backups`, `verify-backup`, `restore` and `delete-backup`: the engine's
//! `BackupEngine` on the operating system's file system.
//!
//! Each command opens the backup directory (creating it only for `backup`); the database is
//! opened only by `backup`. Damage found in a backup exits with code 5 (corruption), an unknown
//! id or an existing restore target with 7 (any other engine error).

use std::path::Path;
use std::sync::Arc;

use riptide::fs::OsFileSystem;
use riptide::BackupEngine;

use crate::exit::{CliError, CliResult, Outcome};
use crate::open::{close, open_database};
use crate::output::Output;

fn engine(backups: &Path, create: bool) -> CliResult<BackupEngine> {
    if !create && !backups.join("meta").is_dir() {
        return Err(CliError::missing(format!("{}: not a backup directory", backups.display())));
    }
    Ok(BackupEngine::open(backups, Arc::new(OsFileSystem))?)
}

/// `riptide backup DB BACKUPS`.
pub fn create(db: &Path, backups: &Path) -> CliResult {
    let database = open_database(db, false)?;
    let info = engine(backups, true)?.create_backup(&database)?;
    close(database)?;
    let mut output = Output::stdout();
    output.line(&format!("backup {} written: {} files, {} bytes", info.id, info.file_count, info.size_bytes))?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide list-backups BACKUPS`: one line per backup, tab-separated.
pub fn list(backups: &Path) -> CliResult {
    let mut output = Output::stdout();
    for info in engine(backups, false)?.list_backups()? {
        output.line(&format!(
            "{}\t{}\t{} files\t{} bytes",
            info.id, info.timestamp_secs, info.file_count, info.size_bytes
        ))?;
    }
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide verify-backup BACKUPS ID`.
pub fn verify(backups: &Path, id: u64) -> CliResult {
    engine(backups, false)?.verify_backup(id)?;
    let mut output = Output::stdout();
    output.line(&format!("backup {id}: every file matches its size and checksum"))?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide restore BACKUPS ID TARGET`.
pub fn restore(backups: &Path, id: u64, target: &Path) -> CliResult {
    engine(backups, false)?.restore(id, target)?;
    let mut output = Output::stdout();
    output.line(&format!("backup {id} restored into {}", target.display()))?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide delete-backup BACKUPS ID`.
pub fn delete(backups: &Path, id: u64) -> CliResult {
    engine(backups, false)?.delete_backup(id)?;
    Ok(Outcome::Success)
}
