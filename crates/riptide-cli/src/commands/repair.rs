//! `repair DIR`: salvages what can be read from a damaged database into a consistent one, as
//! RocksDB's `RepairDB` does.
//!
//! Steps:
//! 1. Take the database's lock (exit code 4 if another process has it open) and learn the
//!    column families (names, comparators, log numbers, which table belongs to which) from the
//!    manifest `CURRENT` names, or, when `CURRENT` is unreadable, from the newest manifest.
//! 2. Move every file of the database (everything but `LOCK`) into `DIR/lost-<timestamp>/`,
//!    so nothing is ever deleted: the originals stay there for a person to look at.
//! 3. Read every table and log there through the engine's decoders, going on past damage:
//!    every readable data block of the live tables (all tables when the manifest is lost) and
//!    every valid record of the logs each column family still needs. Of each key, the newest
//!    version read (highest sequence number) wins; a key whose newest version is a delete
//!    stays deleted.
//! 4. Create a new database in `DIR` with the same column families and comparators, write the
//!    surviving pairs, flush, and close. It is an ordinary database: `Db::open` opens it and
//!    `riptide verify` passes.
//!
//! What is lost is printed: damaged byte ranges per file, tables and records that could not be
//! read, records of column families that no longer exist, prepared (two-phase commit)
//! transactions, which are not restored. Sequence numbers start afresh: no snapshot survives a
//! repair anyway. A delete whose tombstone was in a lost block can let an older version of its
//! key come back, as in any LSM repair.
//!
//! Concurrency contract: the lock is held from the start until the new database is created
//! (the engine then holds it itself), so no other process sees the directory half-moved.
//!
//! Invariants: the originals are moved, never modified or deleted; the new database is
//! complete before the command reports success (exit code 0, even when data was lost: the
//! report says what).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use riptide::fs::{FileSystem, OsFileSystem};
use riptide::internals::inspect::{
    builtin_comparator, classify_file_name, decode_batch, inspect_table, replay_manifest, replay_manifest_file,
    scan_log, DamagedRange, DbFileKind, EntryKind, ManifestState,
};
use riptide::{ColumnFamilyOptions, Db, Options, WriteBatch};

use crate::exit::{CliError, CliResult, Outcome};
use crate::output::Output;

/// The column family id of two-phase commit markers in logs: no column family has it.
const COMMIT_MARKER_COLUMN_FAMILY: u32 = u32::MAX;
/// Bytes of keys and values per write batch of the rebuilt database.
const BATCH_BYTES: usize = 1 << 20;

/// A column family to rebuild.
#[derive(Clone, Debug)]
struct Family {
    name: String,
    comparator: String,
    log_number: u64,
}

/// What was read of each key, per column family id.
type Salvage = BTreeMap<u32, BTreeMap<Vec<u8>, Salvaged>>;

/// What was read of one key: its newest full version, and the merge operands newer than it.
#[derive(Default)]
struct Salvaged {
    /// (sequence, value or `None` for a delete, expiry of a put with one).
    full: Option<(u64, Option<Vec<u8>>, Option<u64>)>,
    /// Merge operands newer than `full`, as (sequence, operand), in the order read.
    operands: Vec<(u64, Vec<u8>)>,
}

/// One version read: a put (with its expiry, if it has one), a delete or a merge operand.
enum Version<'a> {
    Value(&'a [u8], Option<u64>),
    Delete,
    Operand(&'a [u8]),
}

impl<'a> Version<'a> {
    /// The version an entry of `kind` with the stored `value` is (a put with an expiry stores
    /// its expiry before its value).
    fn of(kind: EntryKind, value: &'a [u8]) -> Version<'a> {
        match kind {
            EntryKind::Put => Version::Value(value, None),
            EntryKind::PutWithExpiry => match value.split_first_chunk::<8>() {
                Some((expiry, rest)) => Version::Value(rest, Some(u64::from_le_bytes(*expiry))),
                None => Version::Delete,
            },
            EntryKind::Merge => Version::Operand(value),
            _ => Version::Delete,
        }
    }
}

/// The range tombstones found (in the manifest and in logs), per column family id, as (start,
/// end, sequence): a salvaged version older than one that holds its key is deleted.
type RangeSalvage = BTreeMap<u32, Vec<(Vec<u8>, Vec<u8>, u64)>>;

/// Everything the repair reports.
#[derive(Default)]
struct Report {
    lines: Vec<String>,
    lost: Vec<String>,
}

/// Runs `riptide repair DIR`.
pub fn repair(dir: &Path) -> CliResult {
    if !dir.is_dir() {
        return Err(CliError::missing(format!("{}: no such directory", dir.display())));
    }
    let names = database_files(dir)?;
    if names.is_empty() {
        return Err(CliError::missing(format!("{}: no database files here; nothing to repair", dir.display())));
    }
    let lock = OsFileSystem.lock(&dir.join("LOCK"))?;
    let mut report = Report::default();
    let manifest = read_manifest(dir, &names, &mut report);
    let families = families_of(manifest.as_ref());
    for family in families.values() {
        if builtin_comparator(&family.comparator).is_none() {
            return Err(CliError::other(format!(
                "column family {:?} uses comparator {:?}, which this tool does not provide; nothing was changed",
                family.name, family.comparator
            )));
        }
    }
    let lost_dir = move_aside(dir, &names)?;
    report.lines.push(format!("moved {} files into {}", names.len(), lost_dir.display()));
    let mut salvage = Salvage::new();
    let mut ranges = RangeSalvage::new();
    if let Some(state) = &manifest {
        for family in &state.column_families {
            ranges.entry(family.id).or_default().extend(family.range_tombstones.iter().cloned());
        }
    }
    salvage_tables(&lost_dir, &names, manifest.as_ref(), &families, &mut salvage, &mut report)?;
    salvage_logs(&lost_dir, &names, manifest.is_some(), &families, &mut salvage, &mut ranges, &mut report)?;
    for name in &names {
        if let Some(DbFileKind::Prepared(_)) = classify_file_name(name) {
            report.lost.push(format!("{name}: a prepared (two-phase commit) transaction, not restored"));
        }
    }
    drop(lock);
    rebuild(dir, &families, &salvage, &ranges, &mut report)?;
    let mut output = Output::stdout();
    for line in &report.lines {
        output.line(line)?;
    }
    if report.lost.is_empty() {
        output.line("nothing was lost")?;
    } else {
        output.line(&format!("lost ({}):", report.lost.len()))?;
        for line in &report.lost {
            output.line(&format!("  {line}"))?;
        }
    }
    output.finish()?;
    Ok(Outcome::Success)
}

/// The names of the database's own files in `dir` (everything Riptide names, but `LOCK`).
fn database_files(dir: &Path) -> CliResult<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|error| CliError::io(dir.display(), error))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| CliError::io(dir.display(), error))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if !matches!(classify_file_name(&name), None | Some(DbFileKind::Lock)) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The manifest's state: the one `CURRENT` names, or else the newest manifest in `dir`.
fn read_manifest(dir: &Path, names: &[String], report: &mut Report) -> Option<ManifestState> {
    match replay_manifest(dir) {
        Ok(state) => return Some(state),
        Err(error) => report.lost.push(format!("CURRENT or its manifest: {error}")),
    }
    let newest = names
        .iter()
        .filter_map(|name| match classify_file_name(name) {
            Some(DbFileKind::Manifest(number)) => Some(number),
            _ => None,
        })
        .max()?;
    let path = dir.join(format!("MANIFEST-{newest:06}"));
    match replay_manifest_file(&path) {
        Ok(state) if state.records > 0 => {
            report.lines.push(format!("CURRENT is unusable; column families taken from {}", path.display()));
            Some(state)
        }
        _ => None,
    }
}

/// The column families to rebuild, by id; just the default one without a manifest.
fn families_of(manifest: Option<&ManifestState>) -> BTreeMap<u32, Family> {
    let mut families = BTreeMap::new();
    if let Some(state) = manifest {
        for family in &state.column_families {
            families.insert(
                family.id,
                Family {
                    name: family.name.clone(),
                    comparator: family.comparator.clone(),
                    log_number: family.log_number,
                },
            );
        }
    }
    families.entry(0).or_insert_with(|| Family {
        name: "default".to_string(),
        comparator: "riptide.bytewise".to_string(),
        log_number: 0,
    });
    families
}

/// Moves every file named into a new `lost-<timestamp>` directory inside `dir`.
fn move_aside(dir: &Path, names: &[String]) -> CliResult<PathBuf> {
    let seconds =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
    let mut lost_dir = dir.join(format!("lost-{seconds}"));
    let mut attempt = 1;
    while lost_dir.exists() {
        lost_dir = dir.join(format!("lost-{seconds}-{attempt}"));
        attempt += 1;
    }
    std::fs::create_dir(&lost_dir).map_err(|error| CliError::io(lost_dir.display(), error))?;
    for name in names {
        std::fs::rename(dir.join(name), lost_dir.join(name))
            .map_err(|error| CliError::io(dir.join(name).display(), error))?;
    }
    // The moves must reach the disk before the new database is written next to them.
    OsFileSystem.sync_dir(dir)?;
    OsFileSystem.sync_dir(&lost_dir)?;
    Ok(lost_dir)
}

/// Keeps the newest full version of a key and the merge operands newer than it.
fn offer(salvage: &mut Salvage, family: u32, key: &[u8], sequence: u64, version: Version<'_>) {
    let salvaged = salvage.entry(family).or_default().entry(key.to_vec()).or_default();
    let newer_than_full = salvaged.full.as_ref().is_none_or(|(full, _, _)| *full < sequence);
    match version {
        Version::Operand(operand) => {
            if newer_than_full {
                salvaged.operands.push((sequence, operand.to_vec()));
            }
        }
        Version::Value(..) | Version::Delete if !newer_than_full => {}
        Version::Value(value, expiry) => {
            salvaged.full = Some((sequence, Some(value.to_vec()), expiry));
            salvaged.operands.retain(|(operand, _)| *operand > sequence);
        }
        Version::Delete => {
            salvaged.full = Some((sequence, None, None));
            salvaged.operands.retain(|(operand, _)| *operand > sequence);
        }
    }
}

fn damage_text(range: &DamagedRange) -> String {
    format!("bytes {}..{} ({} bytes): {}", range.start, range.end, range.end - range.start, range.reason)
}

fn salvage_tables(
    lost_dir: &Path,
    names: &[String],
    manifest: Option<&ManifestState>,
    families: &BTreeMap<u32, Family>,
    salvage: &mut Salvage,
    report: &mut Report,
) -> CliResult<()> {
    // Which column family each live table belongs to; without a manifest, every table goes to
    // the default column family, the only one known.
    let owners: Option<HashMap<u64, u32>> = manifest.map(|state| {
        state
            .column_families
            .iter()
            .flat_map(|family| family.files.iter().map(move |live| (live.file.number, family.id)))
            .collect()
    });
    for name in names {
        let Some(DbFileKind::Table(number)) = classify_file_name(name) else {
            continue;
        };
        let owner = match &owners {
            Some(owners) => match owners.get(&number) {
                Some(&owner) => owner,
                // Not live: the output of an interrupted job, or a table of a dropped family.
                None => continue,
            },
            None => 0,
        };
        let comparator = families.get(&owner).map(|family| family.comparator.as_str());
        let path = lost_dir.join(name);
        let table = inspect_table(&path, comparator, true)?;
        for range in &table.damage {
            report.lost.push(format!("{name}: {}", damage_text(range)));
        }
        for entry in &table.entries {
            if entry.key.kind == EntryKind::BlobIndex {
                // The value is in a blob file (moved to the same directory); a damaged or
                // missing one loses this version of the key, never turns it into other bytes.
                match riptide::internals::inspect::read_blob_value(lost_dir, &entry.key.user_key, &entry.value) {
                    Ok(value) => {
                        offer(salvage, owner, &entry.key.user_key, entry.key.sequence, Version::Value(&value, None))
                    }
                    Err(error) => report.lost.push(format!("{name}: {error}")),
                }
                continue;
            }
            let version = Version::of(entry.key.kind, &entry.value);
            offer(salvage, owner, &entry.key.user_key, entry.key.sequence, version);
        }
        report.lines.push(format!("{name}: {} entries read", table.entries.len()));
    }
    if let Some(state) = manifest {
        for family in &state.column_families {
            for live in &family.files {
                let name = riptide::internals::inspect::table_file_name(live.file.number);
                if !names.contains(&name) {
                    report.lost.push(format!(
                        "{name}: missing ({} entries of column family {:?})",
                        live.file.entries, family.name
                    ));
                }
            }
        }
    }
    Ok(())
}

fn salvage_logs(
    lost_dir: &Path,
    names: &[String],
    manifest_known: bool,
    families: &BTreeMap<u32, Family>,
    salvage: &mut Salvage,
    ranges: &mut RangeSalvage,
    report: &mut Report,
) -> CliResult<()> {
    for name in names {
        let Some(DbFileKind::Log(number)) = classify_file_name(name) else {
            continue;
        };
        let path = lost_dir.join(name);
        let scan = scan_log(&path)?;
        for range in &scan.damage {
            report.lost.push(format!("{name}: {}", damage_text(range)));
        }
        let mut applied = 0u64;
        let mut orphans = 0u64;
        for record in &scan.records {
            let batch = match decode_batch(&record.payload, &path, record.payload_offset()) {
                Ok(batch) => batch,
                Err(error) => {
                    report.lost.push(format!("{name}: record at {}: {error}", record.offset));
                    continue;
                }
            };
            for entry in &batch.records {
                if entry.column_family_id == COMMIT_MARKER_COLUMN_FAMILY {
                    continue;
                }
                let Some(family) = families.get(&entry.column_family_id) else {
                    // A dropped column family's record (its id is never reused), or one whose
                    // creation was in a lost manifest.
                    if manifest_known {
                        continue;
                    }
                    orphans += 1;
                    continue;
                };
                // Logs below a column family's log number hold nothing of it that is not in
                // its tables; their records may be versions compaction has since dropped.
                if number < family.log_number {
                    continue;
                }
                if entry.kind == EntryKind::DeleteRange {
                    ranges.entry(entry.column_family_id).or_default().push((
                        entry.key.clone(),
                        entry.value.clone(),
                        entry.sequence,
                    ));
                    applied += 1;
                    continue;
                }
                let version = Version::of(entry.kind, &entry.value);
                offer(salvage, entry.column_family_id, &entry.key, entry.sequence, version);
                applied += 1;
            }
        }
        if orphans > 0 {
            report.lost.push(format!("{name}: {orphans} records of column families the lost manifest defined"));
        }
        report.lines.push(format!("{name}: {} records read, {applied} writes applied", scan.records.len()));
    }
    Ok(())
}

/// Creates the new database and writes the salvaged pairs.
fn rebuild(
    dir: &Path,
    families: &BTreeMap<u32, Family>,
    salvage: &Salvage,
    ranges: &RangeSalvage,
    report: &mut Report,
) -> CliResult<()> {
    let options = Options { create_if_missing: true, error_if_exists: true, ..Options::default() };
    let mut listed = Vec::new();
    for family in families.values() {
        let mut family_options: ColumnFamilyOptions = options.column_family_options();
        if let Some(comparator) = builtin_comparator(&family.comparator) {
            family_options.comparator = comparator;
        }
        listed.push((family.name.clone(), family_options));
    }
    let db = Db::open_with_column_families(dir, options, listed)?;
    for (id, family) in families {
        let handle = db
            .column_family(&family.name)
            .ok_or_else(|| CliError::other(format!("column family {:?} was not created", family.name)))?;
        let mut batch = WriteBatch::new();
        let mut restored = 0u64;
        let mut deleted = 0u64;
        // Checked at the start: every family's comparator is a built-in one.
        let order = builtin_comparator(&family.comparator)
            .ok_or_else(|| CliError::other(format!("column family {:?}: unknown comparator", family.name)))?;
        let tombstones = ranges.get(id).map(Vec::as_slice).unwrap_or_default();
        let covered = |key: &[u8], sequence: u64| {
            tombstones.iter().any(|(start, end, tombstone)| {
                *tombstone > sequence && order.compare(start, key).is_le() && order.compare(key, end).is_lt()
            })
        };
        for (key, salvaged) in salvage.get(id).into_iter().flatten() {
            // A range tombstone over an operand deletes it and everything older.
            let mut operands: Vec<&(u64, Vec<u8>)> = salvaged.operands.iter().collect();
            operands.sort_by_key(|(sequence, _)| *sequence);
            let first_live =
                operands.iter().rposition(|(sequence, _)| covered(key, *sequence)).map_or(0, |last| last + 1);
            let base = salvaged
                .full
                .as_ref()
                .filter(|(sequence, _, _)| first_live == 0 && !covered(key, *sequence))
                .and_then(|(_, value, expiry)| value.as_ref().map(|value| (value, *expiry)));
            if base.is_none() && first_live == operands.len() {
                deleted += 1;
                continue;
            }
            match base {
                Some((value, Some(expires_at_us))) => batch.put_with_expiry_cf(&handle, key, value, expires_at_us),
                Some((value, None)) => batch.put_cf(&handle, key, value),
                None => {}
            }
            for (_, operand) in &operands[first_live..] {
                batch.merge_cf(&handle, key, operand);
            }
            restored += 1;
            if batch.size_bytes() >= BATCH_BYTES {
                db.write(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            db.write(batch)?;
        }
        report.lines.push(format!(
            "column family {:?}: {restored} keys restored ({deleted} keys whose newest version is a delete left out)",
            family.name
        ));
    }
    db.flush()?;
    db.close()?;
    Ok(())
}
