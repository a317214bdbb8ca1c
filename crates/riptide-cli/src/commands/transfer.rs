//! `dump` and `load`: export a column family to a dump file and import one (format:
//! `docs/format/dump.md`, written and read by `dump_format`).
//!
//! `load` reads the file twice: a first pass checks it whole (structure, record count and
//! checksum) without writing anything, so a damaged or truncated dump changes nothing; the
//! second pass writes its pairs in batches of about 1 MiB. Pairs overwrite the keys they name;
//! other keys of the column family stay. A progress bar (indicatif) shows the second pass on
//! stderr when stderr is a terminal and the file is large, and is hidden otherwise, so that
//! scripts and logs see no control characters.
//!
//! Concurrency contract: the database is open (and locked) for the whole command; `dump` reads
//! through one iterator, so it is one consistent point of the column family's history.
//!
//! Invariants: a dump holds the pairs of one column family in its order; a load is not atomic
//! as a whole (each batch is), so a load interrupted by a crash leaves a prefix of the dump's
//! batches, and loading the same dump again completes it.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, IsTerminal, Write};
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use riptide::{ColumnFamilyOptions, ReadOptions, WriteBatch};

use crate::cli::DatabaseArgs;
use crate::dump_format::{read_dump, DumpError, DumpWriter, Header};
use crate::exit::{CliError, CliResult, Outcome};
use crate::open::{close, column_family, open_database, require_database};

/// Bytes of keys and values per write batch while loading.
const LOAD_BATCH_BYTES: usize = 1 << 20;
/// Dumps smaller than this load without a progress bar: they finish before it would help.
const PROGRESS_MIN_BYTES: u64 = 4 << 20;

/// `riptide dump DB [--cf] [--output FILE]`.
pub fn dump(database: &DatabaseArgs, output_path: &Path) -> CliResult {
    let db = open_database(&database.db, false)?;
    let family = column_family(&db, &database.cf)?;
    let comparator = db.column_family_options(&family)?.comparator.name().to_string();
    let header = Header { column_family: family.name(), comparator };
    let options = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    let mut iterator = db.iter_cf(&family, &options)?;
    iterator.seek_to_first();
    let to_stdout = output_path == Path::new("-");
    let (out, file): (Box<dyn Write>, Option<File>) = if to_stdout {
        (Box::new(BufWriter::new(std::io::stdout())), None)
    } else {
        let file = File::create(output_path).map_err(|error| CliError::io(output_path.display(), error))?;
        let handle = file.try_clone().map_err(|error| CliError::io(output_path.display(), error))?;
        (Box::new(BufWriter::new(handle)), Some(file))
    };
    let failed = |error: std::io::Error| {
        if to_stdout && error.kind() == ErrorKind::BrokenPipe {
            CliError::quiet_stop()
        } else {
            CliError::io(output_path.display(), error)
        }
    };
    let mut writer = DumpWriter::new(out, &header).map_err(failed)?;
    while iterator.valid() {
        writer.record(iterator.key(), iterator.value()).map_err(failed)?;
        iterator.next();
    }
    iterator.status()?;
    drop(iterator);
    let (_, records) = writer.finish().map_err(failed)?;
    if let Some(file) = file {
        file.sync_all().map_err(failed)?;
        eprintln!("dumped {records} pairs of column family {:?} to {}", header.column_family, output_path.display());
    }
    close(db)?;
    Ok(Outcome::Success)
}

/// `riptide load DB FILE [--cf] [--create]`.
pub fn load(database: &DatabaseArgs, input_path: &Path, create: bool) -> CliResult {
    if !create {
        require_database(&database.db)?;
    }
    let total_bytes = std::fs::metadata(input_path).map_err(|error| CliError::io(input_path.display(), error))?.len();
    let open_input = || -> CliResult<BufReader<File>> {
        let file = File::open(input_path).map_err(|error| CliError::io(input_path.display(), error))?;
        Ok(BufReader::with_capacity(1 << 20, file))
    };
    // First pass: check the whole file before anything is written.
    let checked = read_dump(open_input()?, total_bytes, |_, _| Ok::<(), CliError>(()), |_| {});
    let (header, records) = dump_result(checked, input_path)??;
    let db = open_database(&database.db, create)?;
    let family = match db.column_family(&database.cf) {
        Some(family) => family,
        None if create => {
            let comparator = riptide::internals::inspect::builtin_comparator(&header.comparator).ok_or_else(|| {
                CliError::other(format!("the dump's comparator {:?} is not a built-in one", header.comparator))
            })?;
            let mut options = ColumnFamilyOptions::default();
            options.comparator = comparator;
            db.create_column_family(&database.cf, options)?
        }
        None => column_family(&db, &database.cf)?,
    };
    let progress = progress_bar(total_bytes);
    let mut batch = WriteBatch::new();
    let loaded = read_dump(
        open_input()?,
        total_bytes,
        |key, value| {
            batch.put_cf(&family, key, value);
            if batch.size_bytes() >= LOAD_BATCH_BYTES {
                db.write(std::mem::take(&mut batch))?;
            }
            Ok::<(), CliError>(())
        },
        |offset| progress.set_position(offset),
    );
    // The file was checked; a failure now means it changed in between, or the engine failed.
    dump_result(loaded, input_path)??;
    if !batch.is_empty() {
        db.write(batch)?;
    }
    progress.finish_and_clear();
    close(db)?;
    eprintln!("loaded {records} pairs into column family {:?} from {}", database.cf, input_path.display());
    Ok(Outcome::Success)
}

/// The progress bar of a load: drawn on stderr only when it is a terminal and the dump large.
fn progress_bar(total_bytes: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() || total_bytes < PROGRESS_MIN_BYTES {
        return ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total_bytes);
    if let Ok(style) = ProgressStyle::with_template("loading {bar:40} {bytes}/{total_bytes} ({eta} left)") {
        bar.set_style(style);
    }
    bar
}

/// Turns a reading failure into the tool's error (exit code 5 for a damaged dump).
fn dump_result<T>(result: Result<T, DumpError>, path: &Path) -> CliResult<T> {
    result.map_err(|error| match error {
        DumpError::Io(error) => CliError::io(path.display(), error),
        DumpError::Invalid(offset, reason) => CliError::corruption(format!(
            "{}: invalid dump at offset {offset}: {reason}; nothing was loaded",
            path.display()
        )),
    })
}
