//! `list-cf`, `create-cf`, `drop-cf`, `stats` and `compact`: the database as a whole.
//!
//! Concurrency contract: each command holds the database's lock from its open to its close;
//! `compact` returns when the compaction is done, as `Db::compact_range` does.
//!
//! Invariants: column family changes are durable when the command exits 0 (the engine syncs
//! the manifest before it returns).

use std::path::Path;

use riptide::{BytewiseComparator, ColumnFamilyOptions, Comparator, ReverseBytewiseComparator};

use crate::cli::{ComparatorChoice, DatabaseArgs};
use crate::escape::{json_string, Framing, Style};
use crate::exit::{CliError, CliResult, Outcome};
use crate::open::{close, column_family, open_database};
use crate::output::Output;

/// `riptide list-cf DB`: one name per line (a JSON string per line with `--json`).
pub fn list_column_families(dir: &Path, style: Style) -> CliResult {
    let db = open_database(dir, false)?;
    let names = db.list_column_families();
    close(db)?;
    let mut output = Output::stdout();
    for name in names {
        let line = match style.framing {
            Framing::Tabs => name,
            Framing::Json => format!("{{\"name\":{}}}", json_string(&name)),
        };
        output.line(&line)?;
    }
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide create-cf DB NAME`.
pub fn create_column_family(dir: &Path, name: &str, comparator: ComparatorChoice) -> CliResult {
    let db = open_database(dir, false)?;
    if db.column_family(name).is_some() {
        return Err(CliError::other(format!("column family {name:?} exists already")));
    }
    let comparator: std::sync::Arc<dyn Comparator> = match comparator {
        ComparatorChoice::Bytewise => std::sync::Arc::new(BytewiseComparator),
        ComparatorChoice::ReverseBytewise => std::sync::Arc::new(ReverseBytewiseComparator),
    };
    let mut options = ColumnFamilyOptions::default();
    options.comparator = comparator;
    db.create_column_family(name, options)?;
    close(db)?;
    Ok(Outcome::Success)
}

/// `riptide drop-cf DB NAME`.
pub fn drop_column_family(dir: &Path, name: &str) -> CliResult {
    let db = open_database(dir, false)?;
    let family = column_family(&db, name)?;
    db.drop_column_family(&family)?;
    close(db)?;
    Ok(Outcome::Success)
}

/// `riptide stats DB`: the engine's statistics dump.
pub fn stats(dir: &Path) -> CliResult {
    let db = open_database(dir, false)?;
    let text = db.stats().to_string();
    close(db)?;
    let mut output = Output::stdout();
    output.line(text.trim_end())?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide checkpoint DB TARGET`: a checkpoint of the database in the new directory TARGET.
pub fn checkpoint(dir: &Path, target: &Path) -> CliResult {
    let db = open_database(dir, false)?;
    db.checkpoint(target)?;
    close(db)?;
    let mut output = Output::stdout();
    output.line(&format!("checkpoint written to {}", target.display()))?;
    output.finish()?;
    Ok(Outcome::Success)
}

/// `riptide compact DB [--cf] [--from] [--to]`: bounds inclusive, unbounded when left out.
pub fn compact(database: &DatabaseArgs, from: Option<&[u8]>, to: Option<&[u8]>) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    db.compact_range(&family, from, to)?;
    close(db)?;
    Ok(Outcome::Success)
}
