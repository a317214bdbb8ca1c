//! Opening a database for a command: the checks that give clear messages before the engine is
//! involved (a missing directory, a directory without a database), and the column families'
//! comparators, read from the manifest, so that a database whose column families use the
//! built-in reverse order opens too.
//!
//! `Db::open` creates a missing directory, which a reading command must not do, so the
//! directory's existence is checked here first; `create` allows creating it for the commands
//! that write (`put --create`, `load --create`).
//!
//! Concurrency contract: the engine's `LOCK` file keeps a second process out; this module adds
//! nothing to it. The manifest is read without the lock, before the open, only to learn the
//! comparators; the open itself re-reads and checks everything under the lock.
//!
//! Invariants: a command never works on a database it had to guess the comparators of: a
//! column family with a comparator the tool does not provide fails with exit code 7.

use std::path::Path;

use riptide::internals::inspect::{builtin_comparator, replay_manifest};
use riptide::{ColumnFamily, ColumnFamilyOptions, Db, Options};

use crate::exit::{CliError, CliResult};

/// Fails with exit code 3 unless `dir` is an existing directory holding a database (a
/// `CURRENT` file).
pub fn require_database(dir: &Path) -> CliResult<()> {
    if !dir.exists() {
        return Err(CliError::missing(format!("{}: no such directory", dir.display())));
    }
    if !dir.is_dir() {
        return Err(CliError::missing(format!("{}: not a directory", dir.display())));
    }
    if !dir.join("CURRENT").exists() {
        return Err(CliError::missing(format!("{}: no database here (no CURRENT file)", dir.display())));
    }
    Ok(())
}

/// Opens the database in `dir`. With `create`, a missing directory or database is created;
/// otherwise it is an error (exit code 3).
pub fn open_database(dir: &Path, create: bool) -> CliResult<Db> {
    if !create {
        require_database(dir)?;
    } else if dir.exists() && !dir.is_dir() {
        return Err(CliError::missing(format!("{}: not a directory", dir.display())));
    }
    let options = Options { create_if_missing: create, ..Options::default() };
    let mut listed = Vec::new();
    if dir.join("CURRENT").exists() {
        // A manifest that cannot be read is left to the open, which reports it precisely.
        if let Ok(state) = replay_manifest(dir) {
            for family in &state.column_families {
                let comparator = builtin_comparator(&family.comparator).ok_or_else(|| {
                    CliError::other(format!(
                        "column family {:?} uses comparator {:?}, which this tool does not provide",
                        family.name, family.comparator
                    ))
                })?;
                let mut family_options: ColumnFamilyOptions = options.column_family_options();
                family_options.comparator = comparator;
                listed.push((family.name.clone(), family_options));
            }
        }
    }
    Ok(Db::open_with_column_families(dir, options, listed)?)
}

/// The column family named `name` (exit code 3 when it does not exist, listing those that do).
pub fn column_family(db: &Db, name: &str) -> CliResult<ColumnFamily> {
    db.column_family(name).ok_or_else(|| {
        CliError::missing(format!(
            "no column family {name:?} (the database has: {})",
            db.list_column_families().join(", ")
        ))
    })
}

/// Closes the database, reporting any error of the close.
pub fn close(db: Db) -> CliResult<()> {
    Ok(db.close()?)
}
