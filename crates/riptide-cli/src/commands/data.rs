//! `get`, `put`, `delete` and `scan`: reading and writing keys of one column family.
//!
//! Concurrency contract: each command opens the database (taking its lock, so no other process
//! can have it open), does its work and closes it; a write returns once the engine has
//! accepted it (and synced its log with `--sync`), and `close` is waited for so that its errors
//! are reported.
//!
//! Invariants: `get` exits 1 with nothing on stdout when the key has no value; `scan` prints
//! pairs in the column family's order (its reverse with `--reverse`), at most `--limit` of
//! them, within `[--from, --to)`.

use riptide::{ReadOptions, WriteOptions};

use crate::cli::DatabaseArgs;
use crate::escape::{Framing, Style};
use crate::exit::{CliResult, Outcome};
use crate::open::{close, column_family, open_database};
use crate::output::Output;

/// `riptide get DB KEY`: prints the value (escaped, hex, or as a JSON object with the key).
pub fn get(database: &DatabaseArgs, key: &[u8], style: Style) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    let value = db.get_cf(&family, key)?;
    close(db)?;
    let Some(value) = value else {
        return Ok(Outcome::NotFound);
    };
    let mut output = Output::stdout();
    let line = match style.framing {
        Framing::Tabs => style.encode(&value),
        Framing::Json => style.line(&[("key", key), ("value", &value)]),
    };
    output.line(&line)?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide put DB KEY VALUE`.
pub fn put(database: &DatabaseArgs, key: &[u8], value: &[u8], options: PutOptions) -> CliResult {
    let db = open_database(&database.db, options.create)?;
    let family = column_family(&db, &database.cf)?;
    let mut batch = riptide::WriteBatch::new();
    match options.ttl_secs {
        Some(seconds) => {
            let expires_at_us = db.now_us().saturating_add(seconds.saturating_mul(1_000_000));
            batch.put_with_expiry_cf(&family, key, value, expires_at_us);
        }
        None => batch.put_cf(&family, key, value),
    }
    db.write_opt(batch, &WriteOptions { sync: options.sync })?;
    close(db)?;
    Ok(Outcome::Success)
}

/// How `riptide put` writes.
pub struct PutOptions {
    /// Sync the log before returning.
    pub sync: bool,
    /// Create the database if the directory holds none.
    pub create: bool,
    /// Expire the key this many seconds from now.
    pub ttl_secs: Option<u64>,
}

/// `riptide delete DB KEY`.
pub fn delete(database: &DatabaseArgs, key: &[u8], sync: bool) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    let mut batch = riptide::WriteBatch::new();
    batch.delete_cf(&family, key);
    db.write_opt(batch, &WriteOptions { sync })?;
    close(db)?;
    Ok(Outcome::Success)
}

/// `riptide delete-range DB START END`: one range tombstone over `[start, end)`.
pub fn delete_range(database: &DatabaseArgs, start: &[u8], end: &[u8], sync: bool) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    let mut batch = riptide::WriteBatch::new();
    batch.delete_range_cf(&family, start, end);
    db.write_opt(batch, &WriteOptions { sync })?;
    close(db)?;
    Ok(Outcome::Success)
}

/// The range and direction of a scan.
#[derive(Clone, Debug, Default)]
pub struct ScanRange {
    /// The first key (inclusive).
    pub from: Option<Vec<u8>>,
    /// The first key not included.
    pub to: Option<Vec<u8>>,
    /// At most this many pairs.
    pub limit: Option<u64>,
    /// Last key first.
    pub reverse: bool,
}

/// `riptide scan DB`: one pair per line, or only their number with `--count`.
pub fn scan(database: &DatabaseArgs, range: &ScanRange, count_only: bool, keys_only: bool, style: Style) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    let options = ReadOptions {
        lower_bound: range.from.clone(),
        upper_bound: range.to.clone(),
        // A full scan should not push the working set out of the cache of a long-lived
        // process; here the cache dies with the command, but the reads are the same.
        fill_cache: false,
        ..ReadOptions::default()
    };
    let mut iterator = db.iter_cf(&family, &options)?;
    if range.reverse {
        iterator.seek_to_last();
    } else {
        iterator.seek_to_first();
    }
    let mut output = Output::stdout();
    let mut printed: u64 = 0;
    while iterator.valid() && range.limit.is_none_or(|limit| printed < limit) {
        if !count_only {
            let line = if keys_only {
                style.line(&[("key", iterator.key())])
            } else {
                style.line(&[("key", iterator.key()), ("value", iterator.value())])
            };
            output.line(&line)?;
        }
        printed += 1;
        if range.reverse {
            iterator.prev();
        } else {
            iterator.next();
        }
    }
    iterator.status()?;
    drop(iterator);
    if count_only {
        let line = match style.framing {
            Framing::Tabs => printed.to_string(),
            Framing::Json => format!("{{\"count\":{printed}}}"),
        };
        output.line(&line)?;
    }
    output.finish()?;
    close(db)?;
    Ok(Outcome::Success)
}
