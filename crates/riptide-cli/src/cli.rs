//! The command line: every command, argument and flag, parsed with `clap`'s derive API.
//!
//! The text of `riptide --help` (including the exit codes, from `exit::EXIT_CODES_HELP`) and of
//! each command's `--help` comes from the documentation comments here, so they are the user's
//! reference and must stay accurate.
//!
//! Concurrency contract: plain values parsed once on the main thread.
//!
//! Invariants: keys and values are taken as `String`s and decoded later by `escape`, so that a
//! malformed escape is reported with exit code 2 like any other usage error.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::EXIT_CODES_HELP;

/// Reads, writes, inspects, verifies and repairs Riptide databases.
///
/// Keys and values are printed escaped: printable ASCII as is, `\\`, `\t`, `\n`, `\r` and
/// `\xNN` for other bytes; `scan` prints one pair per line, key and value separated by a tab.
/// Arguments accept the same escapes. `--hex` uses hex digits for both input and output;
/// `--json` prints one JSON object per line.
#[derive(Debug, Parser)]
#[command(name = "riptide", version, after_help = EXIT_CODES_HELP, after_long_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Keys and values as hex digits, on the command line and in the output.
    #[arg(long, global = true)]
    pub hex: bool,
    /// Print one JSON object per line instead of tab-separated fields.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every command of the tool.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the value of a key (exit code 1, and nothing printed, when it has none).
    Get {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key.
        key: String,
    },
    /// Set a key to a value.
    Put {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key.
        key: String,
        /// The value.
        value: String,
        #[command(flatten)]
        write: WriteArgs,
        /// Create the database if the directory holds none.
        #[arg(long)]
        create: bool,
        /// Expire the key this many seconds from now: from then on it reads as deleted.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        ttl_secs: Option<u64>,
    },
    /// Delete a key (deleting a missing key succeeds).
    Delete {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key.
        key: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Delete every key from START (inclusive) to END (exclusive), in the column family's
    /// order, with one range tombstone.
    DeleteRange {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The first key deleted.
        start: String,
        /// The first key not deleted.
        end: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Print the pairs of a key range, one per line, in the column family's order.
    Scan {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The first key printed (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// The first key not printed (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Print at most this many pairs.
        #[arg(long)]
        limit: Option<u64>,
        /// Walk the range from its last key to its first.
        #[arg(long)]
        reverse: bool,
        /// Print only the number of pairs in the range (after `--limit`).
        #[arg(long)]
        count: bool,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
    },
    /// List the column families, one name per line.
    ListCf {
        /// The database directory.
        db: PathBuf,
    },
    /// Create a column family.
    CreateCf {
        /// The database directory.
        db: PathBuf,
        /// The new column family's name.
        name: String,
        /// The order of its keys (fixed for its life).
        #[arg(long, value_enum, default_value_t = ComparatorChoice::Bytewise)]
        comparator: ComparatorChoice,
    },
    /// Drop a column family and all its data.
    DropCf {
        /// The database directory.
        db: PathBuf,
        /// The column family's name.
        name: String,
    },
    /// Print the engine's statistics: levels, column families, memory, stalls.
    Stats {
        /// The database directory.
        db: PathBuf,
    },
    /// Write a consistent, openable copy of the database into a new directory (tables hard-linked
    /// where possible, logs copied).
    Checkpoint {
        /// The database directory.
        db: PathBuf,
        /// The checkpoint's directory, which must not exist.
        target: PathBuf,
    },
    /// Back the database up into a backup directory (incremental: tables already there are not
    /// stored again).
    Backup {
        /// The database directory.
        db: PathBuf,
        /// The backup directory (created if missing).
        backups: PathBuf,
    },
    /// List the backups of a backup directory: id, time, files, bytes.
    ListBackups {
        /// The backup directory.
        backups: PathBuf,
    },
    /// Check every file of a backup against its recorded size and checksum (exit code 5 on
    /// damage).
    VerifyBackup {
        /// The backup directory.
        backups: PathBuf,
        /// The backup's id.
        id: u64,
    },
    /// Restore a backup into a new directory, checking every file as it is copied.
    Restore {
        /// The backup directory.
        backups: PathBuf,
        /// The backup's id.
        id: u64,
        /// The directory to restore into, which must not exist.
        target: PathBuf,
    },
    /// Delete a backup (and the shared files no other backup needs).
    DeleteBackup {
        /// The backup directory.
        backups: PathBuf,
        /// The backup's id.
        id: u64,
    },
    /// Compact a key range of a column family down through the levels.
    Compact {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The first key of the range (inclusive); unbounded when left out.
        #[arg(long)]
        from: Option<String>,
        /// The last key of the range (inclusive); unbounded when left out.
        #[arg(long)]
        to: Option<String>,
    },
    /// Export a column family to a dump file (format: docs/format/dump.md).
    Dump {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The file to write; `-` for standard output.
        #[arg(long, short, default_value = "-")]
        output: PathBuf,
    },
    /// Import a dump file into a column family (checked whole before anything is written).
    Load {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The dump file to read.
        input: PathBuf,
        /// Create the database if missing, and the column family if it does not exist.
        #[arg(long)]
        create: bool,
    },
    /// Print the records, blocks, properties and checksums of one file, for a person.
    Inspect {
        /// What kind of file it is.
        #[arg(value_enum)]
        kind: FileKindChoice,
        /// The file.
        file: PathBuf,
        /// Also print every entry (table) or every record's keys and values (log).
        #[arg(long)]
        entries: bool,
    },
    /// Check every live file of a database; report each problem with file and offset.
    ///
    /// Exit code 0 when nothing is wrong, 5 when a problem was found (warnings, such as a torn
    /// log tail or a leftover file that the next open deletes, count only with `--strict`).
    Verify {
        /// The database directory.
        db: PathBuf,
        /// Count warnings as problems.
        #[arg(long)]
        strict: bool,
    },
    /// Salvage what can be read from a damaged database into a consistent one.
    ///
    /// The original files are moved into `DB/lost-<timestamp>/` first; the database is then
    /// rebuilt from every readable table block and log record, newest version of each key first,
    /// and what was lost is listed (files, records, byte ranges).
    Repair {
        /// The database directory.
        db: PathBuf,
    },
}

/// The database and column family a data command works on.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The column family.
    #[arg(long, default_value = "default")]
    pub cf: String,
}

/// Durability of a write.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// Sync the log before returning, so the write survives power loss.
    #[arg(long)]
    pub sync: bool,
}

/// The built-in key orders a new column family can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ComparatorChoice {
    /// Bytes in increasing order (`riptide.bytewise`).
    Bytewise,
    /// Bytes in decreasing order (`riptide.reverse_bytewise`).
    ReverseBytewise,
}

/// The kinds of file `inspect` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FileKindChoice {
    /// A write-ahead log (`NNNNNN.log`).
    Wal,
    /// A sorted table (`NNNNNN.sst`).
    Sst,
    /// A manifest (`MANIFEST-NNNNNN`).
    Manifest,
}
