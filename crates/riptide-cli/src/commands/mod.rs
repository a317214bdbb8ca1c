//! One module per group of commands; `run` dispatches a parsed command line to them.
//!
//! Concurrency contract: each command runs on the main thread and opens the database (when it
//! needs one) for its own duration, closing it before it returns.
//!
//! Invariants: commands report failures as `CliError`s and never panic; output goes through
//! `output::Output` so that a closed pipe ends the command quietly.

mod admin;
mod backup;
mod data;
mod inspect;
mod repair;
mod transfer;
mod verify;

use crate::cli::{Cli, Command};
use crate::escape::Style;
use crate::exit::{CliError, CliResult};

/// Runs the command of `cli`.
pub fn run(cli: Cli) -> CliResult {
    let style = Style::from_flags(cli.hex, cli.json);
    match cli.command {
        Command::Get { database, key } => data::get(&database, &decode(&style, &key)?, style),
        Command::Put { database, key, value, write, create, ttl_secs } => {
            let (key, value) = (decode(&style, &key)?, decode(&style, &value)?);
            data::put(&database, &key, &value, data::PutOptions { sync: write.sync, create, ttl_secs })
        }
        Command::Delete { database, key, write } => data::delete(&database, &decode(&style, &key)?, write.sync),
        Command::DeleteRange { database, start, end, write } => {
            data::delete_range(&database, &decode(&style, &start)?, &decode(&style, &end)?, write.sync)
        }
        Command::Scan { database, from, to, limit, reverse, count, keys_only } => {
            let range = data::ScanRange {
                from: from.map(|text| decode(&style, &text)).transpose()?,
                to: to.map(|text| decode(&style, &text)).transpose()?,
                limit,
                reverse,
            };
            data::scan(&database, &range, count, keys_only, style)
        }
        Command::ListCf { db } => admin::list_column_families(&db, style),
        Command::CreateCf { db, name, comparator } => admin::create_column_family(&db, &name, comparator),
        Command::DropCf { db, name } => admin::drop_column_family(&db, &name),
        Command::Stats { db } => admin::stats(&db),
        Command::Checkpoint { db, target } => admin::checkpoint(&db, &target),
        Command::Backup { db, backups } => backup::create(&db, &backups),
        Command::ListBackups { backups } => backup::list(&backups),
        Command::VerifyBackup { backups, id } => backup::verify(&backups, id),
        Command::Restore { backups, id, target } => backup::restore(&backups, id, &target),
        Command::DeleteBackup { backups, id } => backup::delete(&backups, id),
        Command::Compact { database, from, to } => {
            let from = from.map(|text| decode(&style, &text)).transpose()?;
            let to = to.map(|text| decode(&style, &text)).transpose()?;
            admin::compact(&database, from.as_deref(), to.as_deref())
        }
        Command::Dump { database, output } => transfer::dump(&database, &output),
        Command::Load { database, input, create } => transfer::load(&database, &input, create),
        Command::Inspect { kind, file, entries } => inspect::inspect(kind, &file, entries, style),
        Command::Verify { db, strict } => verify::verify(&db, strict),
        Command::Repair { db } => repair::repair(&db),
    }
}

/// Decodes a key or value argument in the chosen encoding (exit code 2 when malformed).
fn decode(style: &Style, text: &str) -> CliResult<Vec<u8>> {
    style.decode(text).map_err(CliError::usage)
}
