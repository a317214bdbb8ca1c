//! Manifests: every record decoded into its version edits, and the edits replayed into the
//! state they describe (column families, their comparators and log numbers, and the live
//! tables of every level), going on past damage so that each problem is reported.
//!
//! The replay here is forgiving on purpose: an edit that the engine's recovery would refuse is
//! reported as a problem and applied as far as it makes sense, so that `verify` can say
//! everything that is wrong and `repair` can learn which table belongs to which column family
//! from a damaged manifest. [`check_recovery`] runs the engine's own, strict, recovery of the
//! manifest (`VersionSet::recover`) for the final word.
//!
//! Concurrency contract: pure functions over files read once; nothing is written.
//!
//! Invariants: `ManifestState::column_families` is sorted by id and always holds the default
//! column family (id 0); every problem names the manifest and the offset of the record at
//! fault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::log::scan_log;
use super::{builtin_comparator, parse_internal_key, read_current, DamagedRange, KeyParts, LogScan};
use crate::comparator::KeyComparator;
use crate::db::table_cache::TableCache;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};
use crate::version::edit::{FileMetadata, VersionEdit};
use crate::version::set::VersionSet;
use crate::version::tree::{FileJanitor, NUM_LEVELS};

/// What the manifest records about one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSummary {
    /// The file number (`NNNNNN.sst`).
    pub number: u64,
    /// The file's size.
    pub file_size_bytes: u64,
    /// The smallest internal key, as stored.
    pub smallest: Vec<u8>,
    /// The largest internal key, as stored.
    pub largest: Vec<u8>,
    /// The smallest sequence number of any entry.
    pub smallest_sequence: u64,
    /// The largest sequence number of any entry.
    pub largest_sequence: u64,
    /// Entries, puts and deletes.
    pub entries: u64,
    /// Deletes among the entries.
    pub deletions: u64,
    /// The blob files the table references (tag 17), ascending.
    pub blob_references: Vec<u64>,
}

impl FileSummary {
    fn from_metadata(meta: &FileMetadata) -> FileSummary {
        FileSummary {
            number: meta.number,
            file_size_bytes: meta.file_size_bytes,
            smallest: meta.smallest.clone(),
            largest: meta.largest.clone(),
            smallest_sequence: meta.smallest_sequence,
            largest_sequence: meta.largest_sequence,
            entries: meta.num_entries,
            deletions: meta.num_deletions,
            blob_references: meta.blob_references.clone(),
        }
    }

    /// The smallest key, decoded (`None` if it is malformed).
    pub fn smallest_parts(&self) -> Option<KeyParts> {
        parse_internal_key(&self.smallest)
    }

    /// The largest key, decoded (`None` if it is malformed).
    pub fn largest_parts(&self) -> Option<KeyParts> {
        parse_internal_key(&self.largest)
    }
}

/// One version edit, field by field (see `docs/format/manifest.md`); absent fields are `None`
/// or empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EditSummary {
    /// The column family the edit belongs to (tag 7; 0 when absent).
    pub column_family: u32,
    /// Tag 1: the global comparator name.
    pub comparator: Option<String>,
    /// Tag 2: the column family's log number.
    pub log_number: Option<u64>,
    /// Tag 3: the next file number.
    pub next_file_number: Option<u64>,
    /// Tag 4: the last sequence number.
    pub last_sequence: Option<u64>,
    /// Tag 5: tables removed, as (level, number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Tag 6: tables added, as (level, metadata).
    pub new_files: Vec<(u32, FileSummary)>,
    /// Tag 8: the column family is created with this name.
    pub add_column_family: Option<String>,
    /// Tag 9: the column family is dropped.
    pub drop_column_family: bool,
    /// Tag 10: the column family's new name.
    pub rename_column_family: Option<String>,
    /// Tag 11: the largest column family id handed out.
    pub max_column_family: Option<u32>,
    /// Tag 12: the column family's comparator.
    pub column_family_comparator: Option<String>,
    /// Prepared transactions (file numbers) whose commit this record is.
    pub prepared_committed: Vec<u64>,
    /// Tag 18: range tombstones added, as (start, end, sequence).
    pub new_range_tombstones: Vec<(Vec<u8>, Vec<u8>, u64)>,
    /// Tag 19: range tombstones removed, by sequence.
    pub dropped_range_tombstones: Vec<u64>,
}

impl EditSummary {
    fn from_edit(edit: &VersionEdit) -> EditSummary {
        EditSummary {
            column_family: edit.column_family,
            comparator: edit.comparator.clone(),
            log_number: edit.log_number,
            next_file_number: edit.next_file_number,
            last_sequence: edit.last_sequence,
            deleted_files: edit.deleted_files.clone(),
            new_files: edit.new_files.iter().map(|(level, meta)| (*level, FileSummary::from_metadata(meta))).collect(),
            add_column_family: edit.add_column_family.clone(),
            drop_column_family: edit.drop_column_family,
            rename_column_family: edit.rename_column_family.clone(),
            max_column_family: edit.max_column_family,
            column_family_comparator: edit.column_family_comparator.clone(),
            prepared_committed: edit.prepared_committed.clone(),
            new_range_tombstones: edit
                .new_range_tombstones
                .iter()
                .map(|tombstone| (tombstone.start.clone(), tombstone.end.clone(), tombstone.sequence))
                .collect(),
            dropped_range_tombstones: edit.dropped_range_tombstones.clone(),
        }
    }
}

/// One valid record of a manifest and what it decodes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestRecord {
    /// Offset of the record's header.
    pub offset: u64,
    /// Payload length.
    pub length: u64,
    /// The stored checksum (it matched).
    pub checksum: u32,
    /// The edits (one, or the members of a group), or the decoder's error.
    pub edits: std::result::Result<Vec<EditSummary>, String>,
}

/// Every record and damaged region of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestScan {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub file_size_bytes: u64,
    /// The valid records, decoded.
    pub records: Vec<ManifestRecord>,
    /// The damaged regions.
    pub damage: Vec<DamagedRange>,
}

/// Reads and decodes every record of the manifest at `path`. Only a failure to read the file
/// is an `Err`.
pub fn scan_manifest(path: &Path) -> Result<ManifestScan> {
    let LogScan { path, file_size_bytes, records, damage, .. } = scan_log(path)?;
    let records = records
        .into_iter()
        .map(|record| {
            let edits = VersionEdit::decode_record(&record.payload, &path, record.payload_offset())
                .map(|edits| edits.iter().map(EditSummary::from_edit).collect())
                .map_err(|error| error.to_string());
            ManifestRecord {
                offset: record.offset,
                length: record.payload.len() as u64,
                checksum: record.checksum,
                edits,
            }
        })
        .collect();
    Ok(ManifestScan { path, file_size_bytes, records, damage })
}

/// A live table of a column family, as the manifest says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveFile {
    /// Its level.
    pub level: u32,
    /// Its metadata.
    pub file: FileSummary,
}

/// A column family after the replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnFamilyState {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The name of its comparator (`riptide.bytewise` when none is recorded).
    pub comparator: String,
    /// Logs below this number hold nothing of it that is not in its tables.
    pub log_number: u64,
    /// Its live tables, by level, then by file number.
    pub files: Vec<LiveFile>,
    /// Its live range tombstones, as (start, end, sequence), by sequence.
    pub range_tombstones: Vec<(Vec<u8>, Vec<u8>, u64)>,
}

/// What the manifest `CURRENT` names describes, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestState {
    /// The manifest.
    pub path: PathBuf,
    /// Every live column family, by id.
    pub column_families: Vec<ColumnFamilyState>,
    /// The next file number recorded (0 if none was).
    pub next_file_number: u64,
    /// The last sequence number recorded (0 if none was).
    pub last_sequence: u64,
    /// Valid records read.
    pub records: usize,
    /// Damaged regions of the file.
    pub damage: Vec<DamagedRange>,
    /// Problems of meaning, as (offset of the record, description).
    pub problems: Vec<(u64, String)>,
}

impl ManifestState {
    /// The column family with this name.
    pub fn column_family(&self, name: &str) -> Option<&ColumnFamilyState> {
        self.column_families.iter().find(|family| family.name == name)
    }

    /// The smallest log number of any column family: logs at or above it are live.
    pub fn min_log_number(&self) -> u64 {
        self.column_families.iter().map(|family| family.log_number).min().unwrap_or(0)
    }
}

/// A column family during the replay.
struct Replayed {
    name: String,
    comparator: Option<String>,
    log_number: u64,
    files: BTreeMap<u64, (u32, FileSummary)>,
    range_tombstones: BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
}

impl Replayed {
    fn new(name: String) -> Replayed {
        Replayed { name, comparator: None, log_number: 0, files: BTreeMap::new(), range_tombstones: BTreeMap::new() }
    }
}

/// Reads `dir/CURRENT` and replays the manifest it names. A missing or damaged `CURRENT`, or a
/// manifest that cannot be read, is an `Err`; everything else is reported in the state.
pub fn replay_manifest(dir: &Path) -> Result<ManifestState> {
    let name = read_current(dir)?;
    let path = dir.join(&name);
    if !path.exists() {
        return Err(Error::corruption(dir.join("CURRENT"), 0, format!("CURRENT names missing {name}")));
    }
    let scan = scan_manifest(&path)?;
    Ok(replay_scan(scan))
}

/// Replays the manifest at `path` directly, without `CURRENT` (for a database whose `CURRENT`
/// is lost or damaged). Only a failure to read the file is an `Err`.
pub fn replay_manifest_file(path: &Path) -> Result<ManifestState> {
    Ok(replay_scan(scan_manifest(path)?))
}

/// Replays the decoded records of a manifest (see [`replay_manifest`]).
fn replay_scan(scan: ManifestScan) -> ManifestState {
    let mut families: BTreeMap<u32, Replayed> = BTreeMap::new();
    families.insert(0, Replayed::new("default".to_string()));
    let mut problems = Vec::new();
    let mut next_file_number = 0;
    let mut last_sequence = 0;
    for record in &scan.records {
        let edits = match &record.edits {
            Ok(edits) => edits,
            Err(reason) => {
                problems.push((record.offset, format!("record does not decode: {reason}")));
                continue;
            }
        };
        for edit in edits {
            next_file_number = edit.next_file_number.unwrap_or(next_file_number);
            last_sequence = edit.last_sequence.unwrap_or(last_sequence);
            let mut problem = |text: String| problems.push((record.offset, text));
            apply(&mut families, edit, &mut problem);
        }
    }
    let column_families = families
        .into_iter()
        .map(|(id, family)| {
            let mut files: Vec<LiveFile> =
                family.files.into_values().map(|(level, file)| LiveFile { level, file }).collect();
            files.sort_by_key(|live| (live.level, live.file.number));
            ColumnFamilyState {
                id,
                name: family.name,
                comparator: family.comparator.unwrap_or_else(|| "riptide.bytewise".to_string()),
                log_number: family.log_number,
                files,
                range_tombstones: family
                    .range_tombstones
                    .into_iter()
                    .map(|(sequence, (start, end))| (start, end, sequence))
                    .collect(),
            }
        })
        .collect();
    ManifestState {
        path: scan.path,
        column_families,
        next_file_number,
        last_sequence,
        records: scan.records.len(),
        damage: scan.damage,
        problems,
    }
}

/// Applies one edit to the replayed column families, reporting what recovery would refuse.
fn apply(families: &mut BTreeMap<u32, Replayed>, edit: &EditSummary, problem: &mut dyn FnMut(String)) {
    let id = edit.column_family;
    if let Some(name) = &edit.add_column_family {
        if families.contains_key(&id) {
            problem(format!("edit adds column family {id}, which exists"));
        }
        families.insert(id, Replayed::new(name.clone()));
    }
    if edit.drop_column_family {
        if id == 0 || families.remove(&id).is_none() {
            problem(format!("edit drops column family {id}, which cannot be dropped"));
        }
        return;
    }
    let Some(family) = families.get_mut(&id) else {
        problem(format!("edit names unknown column family {id}"));
        return;
    };
    if let Some(comparator) = &edit.column_family_comparator {
        family.comparator = Some(comparator.clone());
    }
    if let Some(name) = &edit.rename_column_family {
        family.name = name.clone();
    }
    if let Some(log_number) = edit.log_number {
        family.log_number = log_number;
    }
    for &(level, number) in &edit.deleted_files {
        match family.files.remove(&number) {
            Some((found, _)) if found == level => {}
            Some((found, _)) => problem(format!("edit deletes table {number} from level {level}, it is in {found}")),
            None => problem(format!("edit deletes unknown table {number}")),
        }
    }
    for sequence in &edit.dropped_range_tombstones {
        if family.range_tombstones.remove(sequence).is_none() {
            problem(format!("edit removes unknown range tombstone {sequence}"));
        }
    }
    for (start, end, sequence) in &edit.new_range_tombstones {
        if family.range_tombstones.insert(*sequence, (start.clone(), end.clone())).is_some() {
            problem(format!("range tombstone {sequence} added twice"));
        }
    }
    for (level, file) in &edit.new_files {
        if *level as usize >= NUM_LEVELS {
            problem(format!("table {} is in level {level}, beyond the last level", file.number));
            continue;
        }
        if family.files.insert(file.number, (*level, file.clone())).is_some() {
            problem(format!("table {} added twice", file.number));
        }
    }
}

/// Runs the engine's recovery of the manifest (`VersionSet::recover`: `CURRENT`, every record,
/// every check on the resulting versions, I4 included) over the directory, opening each column
/// family with the built-in comparator its replayed state names. Reads only; takes no lock.
pub fn check_recovery(dir: &Path, state: &ManifestState) -> Result<()> {
    let file_system: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let table_cache = Arc::new(TableCache::new(dir.to_path_buf(), Arc::clone(&file_system), None, 16));
    let janitor = Arc::new(FileJanitor { dir: dir.to_path_buf(), file_system: Arc::clone(&file_system), table_cache });
    let comparator_of = |name: &str| {
        let recorded = state.column_family(name).map_or("riptide.bytewise", |family| family.comparator.as_str());
        match builtin_comparator(recorded) {
            Some(comparator) => KeyComparator::new(&comparator),
            None => KeyComparator::Bytewise,
        }
    };
    VersionSet::recover(dir, file_system, janitor, &comparator_of).map(|_| ())
}
