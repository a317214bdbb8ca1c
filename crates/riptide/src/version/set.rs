//! The version set: the current [`Version`], the counters that must survive restarts, and the
//! manifest that records every change to them.
//!
//! Every change to the set of live files goes through [`VersionSet::log_and_apply`], which
//! appends a [`VersionEdit`] to the manifest and syncs it before the new version is installed
//! (invariant I2: a file is referenced by the current version only after the manifest record
//! naming it is durable, and the file itself was synced before). A new manifest starts with a
//! full snapshot of the version and becomes live when `CURRENT` is switched to it by
//! write-temp, sync, rename, sync-directory.
//!
//! Each column family has its own version and log number; file numbers, the sequence counter
//! and the manifest are shared. A file number belongs to exactly one column family.
//!
//! Concurrency contract: the version set is owned by the database state and used under its
//! mutex; versions it hands out are immutable `Arc`s.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::batch::DEFAULT_COLUMN_FAMILY_ID;
use crate::db::filename::{manifest_file_name, manifest_path, temp_file_name, CURRENT_FILE_NAME};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::WalRecovery;
// Versions and table files are shared through the shim's `Arc`, so that the loom model of
// their reference counting (in `tree.rs`) counts them; the file system and the janitor are
// plain shared services.
use crate::sync::Arc;
use crate::version::edit::{FileMetadata, VersionEdit};
use crate::version::tree::{FileJanitor, TableFile, Version, NUM_LEVELS};
use crate::wal::{LogReader, LogWriter, RECORD_HEADER_SIZE_BYTES};

/// The name written to and checked in every manifest.
pub(crate) const COMPARATOR_NAME: &str = "riptide.bytewise";

/// The name of the column family that always exists (id 0).
pub(crate) const DEFAULT_COLUMN_FAMILY_NAME: &str = "default";

/// A manifest larger than this is replaced by a fresh snapshot at the next edit.
const MANIFEST_ROLL_SIZE_BYTES: u64 = 64 << 20;

/// One column family as the version set knows it.
pub(crate) struct ColumnFamilyVersion {
    pub(crate) name: String,
    pub(crate) current: Arc<Version>,
    /// Logs numbered below this one hold nothing of this column family that is not in its
    /// tables.
    pub(crate) log_number: u64,
}

pub(crate) struct VersionSet {
    dir: PathBuf,
    file_system: std::sync::Arc<dyn FileSystem>,
    janitor: std::sync::Arc<FileJanitor>,
    column_families: BTreeMap<u32, ColumnFamilyVersion>,
    /// The largest column family id ever handed out; ids are never reused, so a record of a
    /// dropped column family in an old log can never be taken for a new one's.
    max_column_family: u32,
    next_file_number: u64,
    last_sequence: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
}

/// A column family being rebuilt from the manifest.
struct RecoveredColumnFamily {
    name: String,
    files: HashMap<u64, (u32, FileMetadata)>,
    log_number: u64,
}

impl VersionSet {
    /// A version set for a brand-new database: nothing is written until the first
    /// `log_and_apply`, which creates the first manifest and `CURRENT`.
    pub(crate) fn new_empty(
        dir: &Path,
        file_system: std::sync::Arc<dyn FileSystem>,
        janitor: std::sync::Arc<FileJanitor>,
    ) -> VersionSet {
        let mut column_families = BTreeMap::new();
        column_families.insert(
            DEFAULT_COLUMN_FAMILY_ID,
            ColumnFamilyVersion {
                name: DEFAULT_COLUMN_FAMILY_NAME.to_string(),
                current: Arc::new(Version::empty()),
                log_number: 0,
            },
        );
        VersionSet {
            dir: dir.to_path_buf(),
            file_system,
            janitor,
            column_families,
            max_column_family: DEFAULT_COLUMN_FAMILY_ID,
            next_file_number: 1,
            last_sequence: 0,
            manifest: None,
            manifest_number: 0,
        }
    }

    /// Reads `CURRENT` and the manifest it names and rebuilds every column family's version.
    pub(crate) fn recover(
        dir: &Path,
        file_system: std::sync::Arc<dyn FileSystem>,
        janitor: std::sync::Arc<FileJanitor>,
    ) -> Result<VersionSet> {
        let current_path = dir.join(CURRENT_FILE_NAME);
        let current = file_system.read_all(&current_path)?;
        let manifest_number = parse_current(&current)
            .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a manifest"))?;
        let path = manifest_path(dir, manifest_number);
        if !file_system.exists(&path) {
            return Err(Error::corruption(&current_path, 0, format!("CURRENT names missing {}", path.display())));
        }
        let data = file_system.read_all(&path)?;
        // The last record of the manifest may be torn by a crash; such an edit was never acted
        // on (installation waits for the sync), so dropping it is safe.
        let mut reader = LogReader::new(data, path.clone(), WalRecovery::TolerateTornTail, true);
        let mut families: BTreeMap<u32, RecoveredColumnFamily> = BTreeMap::new();
        families.insert(
            DEFAULT_COLUMN_FAMILY_ID,
            RecoveredColumnFamily {
                name: DEFAULT_COLUMN_FAMILY_NAME.to_string(),
                files: HashMap::new(),
                log_number: 0,
            },
        );
        let mut comparator = None;
        let mut next_file_number = None;
        let mut last_sequence = None;
        let mut max_column_family = DEFAULT_COLUMN_FAMILY_ID;
        let mut saw_default_log_number = false;
        while let Some((offset, record)) = reader.next_record()? {
            let edit = VersionEdit::decode(record, &path, offset + RECORD_HEADER_SIZE_BYTES as u64)?;
            if edit.comparator.is_some() {
                comparator = edit.comparator.clone();
            }
            next_file_number = edit.next_file_number.or(next_file_number);
            last_sequence = edit.last_sequence.or(last_sequence);
            if let Some(max) = edit.max_column_family {
                max_column_family = max_column_family.max(max);
            }
            saw_default_log_number |= edit.column_family == DEFAULT_COLUMN_FAMILY_ID && edit.log_number.is_some();
            apply_to_families(&mut families, &edit).map_err(|reason| Error::corruption(&path, offset, reason))?;
        }
        let missing = |what: &str| Error::corruption(&path, 0, format!("manifest has no {what}"));
        let comparator = comparator.ok_or_else(|| missing("comparator"))?;
        if comparator != COMPARATOR_NAME {
            return Err(Error::invalid(format!(
                "database uses comparator {comparator:?}, this build provides {COMPARATOR_NAME:?}"
            )));
        }
        if !saw_default_log_number {
            return Err(missing("log number"));
        }
        let next_file_number = next_file_number.ok_or_else(|| missing("next file number"))?;
        let last_sequence = last_sequence.ok_or_else(|| missing("last sequence"))?;
        let mut column_families = BTreeMap::new();
        for (id, family) in families {
            if id > max_column_family {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!("column family {id} exceeds the largest id handed out"),
                ));
            }
            if let Some(&number) = family.files.keys().find(|&&number| number >= next_file_number) {
                return Err(Error::corruption(&path, 0, format!("file {number} is not below next file number")));
            }
            let version = build_version(&family.files, &janitor);
            check_levels_disjoint(&version).map_err(|reason| Error::corruption(&path, 0, reason))?;
            column_families.insert(
                id,
                ColumnFamilyVersion { name: family.name, current: Arc::new(version), log_number: family.log_number },
            );
        }
        Ok(VersionSet {
            dir: dir.to_path_buf(),
            file_system,
            janitor,
            column_families,
            max_column_family,
            next_file_number: next_file_number.max(manifest_number + 1),
            last_sequence,
            // Recovery always starts a new manifest, so a torn tail is never appended to.
            manifest: None,
            manifest_number,
        })
    }

    /// The current version of column family `id`; an empty version if it does not exist (the
    /// callers hold ids of live column families, so that only happens after a drop).
    pub(crate) fn current(&self, id: u32) -> Arc<Version> {
        match self.column_families.get(&id) {
            Some(family) => Arc::clone(&family.current),
            None => Arc::new(Version::empty()),
        }
    }

    /// Every live column family, by id.
    pub(crate) fn column_families(&self) -> &BTreeMap<u32, ColumnFamilyVersion> {
        &self.column_families
    }

    /// A fresh column family id (recorded in the manifest by the edit that creates it).
    pub(crate) fn new_column_family_id(&mut self) -> u32 {
        self.max_column_family += 1;
        self.max_column_family
    }

    pub(crate) fn new_file_number(&mut self) -> u64 {
        let number = self.next_file_number;
        self.next_file_number += 1;
        number
    }

    /// Makes sure later file numbers are above `number` (used for WALs found at recovery).
    pub(crate) fn mark_file_number_used(&mut self, number: u64) {
        if self.next_file_number <= number {
            self.next_file_number = number + 1;
        }
    }

    pub(crate) fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    pub(crate) fn set_last_sequence(&mut self, sequence: u64) {
        debug_assert!(sequence >= self.last_sequence);
        self.last_sequence = sequence;
    }

    /// The log number of column family `id` (0 if it does not exist).
    pub(crate) fn log_number(&self, id: u32) -> u64 {
        self.column_families.get(&id).map_or(0, |family| family.log_number)
    }

    /// The oldest log any column family may still need at recovery.
    pub(crate) fn min_log_number(&self) -> u64 {
        self.column_families.values().map(|family| family.log_number).min().unwrap_or(0)
    }

    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Records `edit` durably in the manifest and installs the resulting version of its column
    /// family. On error nothing changes and the next call starts a fresh manifest (the old one
    /// may end in a record whose durability is unknown).
    pub(crate) fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        let id = edit.column_family;
        let existing = self.column_families.get(&id);
        if edit.add_column_family.is_some() {
            if existing.is_some() || id > self.max_column_family {
                return Err(Error::invalid(format!("internal error: column family {id} cannot be added")));
            }
            edit.max_column_family = Some(self.max_column_family);
        } else if existing.is_none() {
            return Err(Error::invalid(format!("column family {id} does not exist")));
        }
        if let Some(log_number) = edit.log_number {
            debug_assert!(log_number >= self.log_number(id), "log numbers never go back");
            debug_assert!(log_number < self.next_file_number);
        }
        edit.last_sequence = Some(self.last_sequence);
        let new_version = if edit.drop_column_family { None } else { Some(self.apply(&edit)?) };
        let manifest_too_large = self.manifest.as_ref().is_some_and(|m| m.size_bytes() >= MANIFEST_ROLL_SIZE_BYTES);
        if self.manifest.is_none() || manifest_too_large {
            // The new manifest's number must be recorded inside it as used.
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let snapshot = self.snapshot_edits(&edit, new_version.as_ref());
            match self.write_new_manifest(number, &snapshot) {
                Ok(writer) => {
                    let old_number = self.manifest_number;
                    self.manifest = Some(writer);
                    self.manifest_number = number;
                    if old_number != 0 && old_number != number {
                        // The old manifest is no longer named by CURRENT.
                        let _ = self.file_system.remove(&manifest_path(&self.dir, old_number));
                    }
                }
                Err(error) => {
                    self.manifest = None;
                    return Err(error);
                }
            }
        } else {
            edit.next_file_number = Some(self.next_file_number);
            let mut record = Vec::new();
            edit.encode(&mut record);
            let written = match self.manifest.as_mut() {
                Some(writer) => writer.add_record(&record).and_then(|()| writer.sync()),
                None => Err(Error::Closed("manifest is not open".to_string())),
            };
            if let Err(error) = written {
                self.manifest = None;
                return Err(error);
            }
        }
        self.install(new_version, &edit);
        Ok(())
    }

    fn install(&mut self, new_version: Option<Version>, edit: &VersionEdit) {
        let id = edit.column_family;
        let Some(new_version) = new_version else {
            // A dropped column family's files go once no reader holds them.
            if let Some(family) = self.column_families.remove(&id) {
                for file in family.current.levels.iter().flatten() {
                    file.mark_obsolete();
                }
            }
            return;
        };
        let family = self.column_families.entry(id).or_insert_with(|| ColumnFamilyVersion {
            name: String::new(),
            current: Arc::new(Version::empty()),
            log_number: 0,
        });
        for &(level, number) in &edit.deleted_files {
            // A file deleted and added by the same edit was moved to another level: it stays.
            if edit.new_files.iter().any(|(_, meta)| meta.number == number) {
                continue;
            }
            if let Some(file) = family.current.levels[level as usize].iter().find(|f| f.number() == number) {
                file.mark_obsolete();
            }
        }
        if let Some(name) = edit.add_column_family.as_ref().or(edit.rename_column_family.as_ref()) {
            family.name = name.clone();
        }
        if let Some(log_number) = edit.log_number {
            family.log_number = log_number;
        }
        family.current = Arc::new(new_version);
    }

    /// The version of the edit's column family that results from applying `edit`.
    fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let base = match self.column_families.get(&edit.column_family) {
            Some(family) => Arc::clone(&family.current),
            None => Arc::new(Version::empty()),
        };
        let mut levels: Vec<Vec<Arc<TableFile>>> = base.levels.clone();
        let mut removed: Vec<Arc<TableFile>> = Vec::new();
        for &(level, number) in &edit.deleted_files {
            let files =
                levels.get_mut(level as usize).ok_or_else(|| Error::invalid(format!("edit names level {level}")))?;
            let index = files
                .iter()
                .position(|f| f.number() == number)
                .ok_or_else(|| Error::invalid(format!("edit deletes file {number} not in level {level}")))?;
            removed.push(files.remove(index));
        }
        for (level, meta) in &edit.new_files {
            let files =
                levels.get_mut(*level as usize).ok_or_else(|| Error::invalid(format!("edit names level {level}")))?;
            // A moved file keeps its handle: one file, one owner count, one deleter.
            let file = match removed.iter().find(|f| f.number() == meta.number) {
                Some(moved) => Arc::clone(moved),
                None => Arc::new(TableFile::new(meta.clone(), std::sync::Arc::clone(&self.janitor))),
            };
            files.push(file);
        }
        let version = Version::from_files(levels);
        // I4 is a property of this process's own edits; breaking it is a bug, reported as an
        // error rather than a panic in a background thread.
        check_levels_disjoint(&version).map_err(|reason| Error::invalid(format!("internal error (I4): {reason}")))?;
        Ok(version)
    }

    /// The records that open a new manifest: one full edit per column family as it will be
    /// once `edit` is applied, the first also carrying the comparator and the counters.
    fn snapshot_edits(&self, edit: &VersionEdit, new_version: Option<&Version>) -> Vec<VersionEdit> {
        let mut edits = Vec::new();
        let mut ids: Vec<u32> = self.column_families.keys().copied().collect();
        if !ids.contains(&edit.column_family) {
            ids.push(edit.column_family);
        }
        for id in ids {
            let (name, version, log_number) = if id == edit.column_family {
                let Some(version) = new_version else { continue };
                let name = edit
                    .add_column_family
                    .clone()
                    .or_else(|| edit.rename_column_family.clone())
                    .or_else(|| self.column_families.get(&id).map(|f| f.name.clone()))
                    .unwrap_or_default();
                (name, version, edit.log_number.unwrap_or_else(|| self.log_number(id)))
            } else {
                let Some(family) = self.column_families.get(&id) else { continue };
                (family.name.clone(), family.current.as_ref(), family.log_number)
            };
            let mut family_edit = VersionEdit {
                column_family: id,
                add_column_family: (id != DEFAULT_COLUMN_FAMILY_ID).then_some(name),
                log_number: Some(log_number),
                ..VersionEdit::default()
            };
            for (level, files) in version.levels.iter().enumerate() {
                for file in files {
                    family_edit.new_files.push((level as u32, file.meta.clone()));
                }
            }
            edits.push(family_edit);
        }
        // The default column family always exists and sorts first, so the first edit is its.
        if let Some(first) = edits.first_mut() {
            first.comparator = Some(COMPARATOR_NAME.to_string());
            first.next_file_number = edit.next_file_number;
            first.last_sequence = edit.last_sequence;
            first.max_column_family = Some(self.max_column_family);
        }
        edits
    }

    fn write_new_manifest(&self, number: u64, snapshot: &[VersionEdit]) -> Result<LogWriter> {
        let path = manifest_path(&self.dir, number);
        let file = self.file_system.create(&path)?;
        let mut writer = LogWriter::new(file, path);
        for edit in snapshot {
            let mut record = Vec::new();
            edit.encode(&mut record);
            writer.add_record(&record)?;
        }
        writer.sync()?;
        set_current_file(self.file_system.as_ref(), &self.dir, number)?;
        Ok(writer)
    }
}

/// Points `CURRENT` at manifest `number`: write a temporary file, sync it, rename it over
/// `CURRENT`, sync the directory. A crash at any point leaves either the old or the new name.
pub(crate) fn set_current_file(file_system: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let temp_path = dir.join(temp_file_name(number));
    let mut file = file_system.create(&temp_path)?;
    let contents = format!("{}\n", manifest_file_name(number));
    file.append(contents.as_bytes())?;
    file.sync()?;
    drop(file);
    file_system.rename(&temp_path, &dir.join(CURRENT_FILE_NAME))?;
    file_system.sync_dir(dir)
}

fn parse_current(contents: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(contents).ok()?;
    let name = text.strip_suffix('\n')?;
    match crate::db::filename::parse_file_name(name)? {
        crate::db::filename::FileKind::Manifest(number) => Some(number),
        _ => None,
    }
}

/// Applies one manifest edit to the column families being recovered.
fn apply_to_families(
    families: &mut BTreeMap<u32, RecoveredColumnFamily>,
    edit: &VersionEdit,
) -> std::result::Result<(), String> {
    let id = edit.column_family;
    if let Some(name) = &edit.add_column_family {
        if id == DEFAULT_COLUMN_FAMILY_ID || families.contains_key(&id) {
            return Err(format!("edit adds column family {id}, which exists"));
        }
        families.insert(id, RecoveredColumnFamily { name: name.clone(), files: HashMap::new(), log_number: 0 });
    }
    if edit.drop_column_family {
        if id == DEFAULT_COLUMN_FAMILY_ID || families.remove(&id).is_none() {
            return Err(format!("edit drops column family {id}, which cannot be dropped"));
        }
        return Ok(());
    }
    let family = families.get_mut(&id).ok_or_else(|| format!("edit names unknown column family {id}"))?;
    if let Some(name) = &edit.rename_column_family {
        family.name = name.clone();
    }
    if let Some(log_number) = edit.log_number {
        family.log_number = log_number;
    }
    let files = &mut family.files;
    for &(level, number) in &edit.deleted_files {
        match files.remove(&number) {
            Some((found_level, _)) if found_level == level => {}
            Some((found_level, _)) => {
                return Err(format!("edit deletes file {number} from level {level}, it is in {found_level}"))
            }
            None => return Err(format!("edit deletes unknown file {number}")),
        }
    }
    for (level, meta) in &edit.new_files {
        if *level as usize >= NUM_LEVELS {
            return Err(format!("file {} is in level {level}, beyond the last level", meta.number));
        }
        if files.insert(meta.number, (*level, meta.clone())).is_some() {
            return Err(format!("file {} added twice", meta.number));
        }
    }
    Ok(())
}

/// Invariant I4, checked on what the manifest says: files of levels 1 and deeper must not
/// overlap (a damaged manifest that passes its checksums must not lead to wrong reads).
fn check_levels_disjoint(version: &Version) -> std::result::Result<(), String> {
    for (level, files) in version.levels.iter().enumerate().skip(1) {
        for pair in files.windows(2) {
            if pair[0].largest_user_key() >= pair[1].smallest_user_key() {
                return Err(format!("files {} and {} of level {level} overlap", pair[0].number(), pair[1].number()));
            }
        }
    }
    Ok(())
}

fn build_version(files: &HashMap<u64, (u32, FileMetadata)>, janitor: &std::sync::Arc<FileJanitor>) -> Version {
    let mut levels: Vec<Vec<Arc<TableFile>>> = vec![Vec::new(); NUM_LEVELS];
    for (level, meta) in files.values() {
        levels[*level as usize].push(Arc::new(TableFile::new(meta.clone(), std::sync::Arc::clone(janitor))));
    }
    Version::from_files(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_parsing() {
        assert_eq!(parse_current(b"MANIFEST-000012\n"), Some(12));
        assert_eq!(parse_current(b"MANIFEST-000012"), None);
        assert_eq!(parse_current(b"000012.log\n"), None);
        assert_eq!(parse_current(b"\xff\n"), None);
    }
}
