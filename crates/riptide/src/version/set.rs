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
//! Concurrency contract: the version set is owned by the database state and used under its
//! mutex; versions it hands out are immutable `Arc`s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::db::filename::{manifest_file_name, manifest_path, temp_file_name, CURRENT_FILE_NAME};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::WalRecovery;
use crate::version::edit::{FileMetadata, VersionEdit};
use crate::version::tree::{FileJanitor, TableFile, Version, NUM_LEVELS};
use crate::wal::{LogReader, LogWriter, RECORD_HEADER_SIZE_BYTES};

/// The name written to and checked in every manifest.
pub(crate) const COMPARATOR_NAME: &str = "riptide.bytewise";

/// A manifest larger than this is replaced by a fresh snapshot at the next edit.
const MANIFEST_ROLL_SIZE_BYTES: u64 = 64 << 20;

pub(crate) struct VersionSet {
    dir: PathBuf,
    file_system: Arc<dyn FileSystem>,
    janitor: Arc<FileJanitor>,
    current: Arc<Version>,
    next_file_number: u64,
    last_sequence: u64,
    log_number: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
}

impl VersionSet {
    /// A version set for a brand-new database: nothing is written until the first
    /// `log_and_apply`, which creates the first manifest and `CURRENT`.
    pub(crate) fn new_empty(dir: &Path, file_system: Arc<dyn FileSystem>, janitor: Arc<FileJanitor>) -> VersionSet {
        VersionSet {
            dir: dir.to_path_buf(),
            file_system,
            janitor,
            current: Arc::new(Version::empty()),
            next_file_number: 1,
            last_sequence: 0,
            log_number: 0,
            manifest: None,
            manifest_number: 0,
        }
    }

    /// Reads `CURRENT` and the manifest it names and rebuilds the version.
    pub(crate) fn recover(
        dir: &Path,
        file_system: Arc<dyn FileSystem>,
        janitor: Arc<FileJanitor>,
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
        let mut files: HashMap<u64, (u32, FileMetadata)> = HashMap::new();
        let mut comparator = None;
        let mut log_number = None;
        let mut next_file_number = None;
        let mut last_sequence = None;
        while let Some((offset, record)) = reader.next_record()? {
            let edit = VersionEdit::decode(record, &path, offset + RECORD_HEADER_SIZE_BYTES as u64)?;
            if edit.comparator.is_some() {
                comparator = edit.comparator.clone();
            }
            log_number = edit.log_number.or(log_number);
            next_file_number = edit.next_file_number.or(next_file_number);
            last_sequence = edit.last_sequence.or(last_sequence);
            apply_to_map(&mut files, &edit).map_err(|reason| Error::corruption(&path, offset, reason))?;
        }
        let missing = |what: &str| Error::corruption(&path, 0, format!("manifest has no {what}"));
        let comparator = comparator.ok_or_else(|| missing("comparator"))?;
        if comparator != COMPARATOR_NAME {
            return Err(Error::invalid(format!(
                "database uses comparator {comparator:?}, this build provides {COMPARATOR_NAME:?}"
            )));
        }
        let log_number = log_number.ok_or_else(|| missing("log number"))?;
        let next_file_number = next_file_number.ok_or_else(|| missing("next file number"))?;
        let last_sequence = last_sequence.ok_or_else(|| missing("last sequence"))?;
        if let Some(&number) = files.keys().find(|&&number| number >= next_file_number) {
            return Err(Error::corruption(&path, 0, format!("file {number} is not below next file number")));
        }
        let version = build_version(&files, &janitor);
        check_levels_disjoint(&version).map_err(|reason| Error::corruption(&path, 0, reason))?;
        Ok(VersionSet {
            dir: dir.to_path_buf(),
            file_system,
            janitor,
            current: Arc::new(version),
            next_file_number: next_file_number.max(manifest_number + 1),
            last_sequence,
            log_number,
            // Recovery always starts a new manifest, so a torn tail is never appended to.
            manifest: None,
            manifest_number,
        })
    }

    pub(crate) fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
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

    pub(crate) fn log_number(&self) -> u64 {
        self.log_number
    }

    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Records `edit` durably in the manifest and installs the resulting version. On error the
    /// current version is unchanged and the next call starts a fresh manifest (the old one may
    /// end in a record whose durability is unknown).
    pub(crate) fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        if let Some(log_number) = edit.log_number {
            debug_assert!(log_number >= self.log_number, "log numbers never go back");
            debug_assert!(log_number < self.next_file_number);
        } else {
            edit.log_number = Some(self.log_number);
        }
        edit.last_sequence = Some(self.last_sequence);
        let new_version = self.apply(&edit)?;
        let manifest_too_large = self.manifest.as_ref().is_some_and(|m| m.size_bytes() >= MANIFEST_ROLL_SIZE_BYTES);
        if self.manifest.is_none() || manifest_too_large {
            // The new manifest's number must be recorded inside it as used.
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let mut snapshot = snapshot_edit(&new_version);
            snapshot.log_number = edit.log_number;
            snapshot.next_file_number = Some(self.next_file_number);
            snapshot.last_sequence = edit.last_sequence;
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

    fn install(&mut self, new_version: Version, edit: &VersionEdit) {
        for &(level, number) in &edit.deleted_files {
            // A file deleted and added by the same edit was moved to another level: it stays.
            if edit.new_files.iter().any(|(_, meta)| meta.number == number) {
                continue;
            }
            if let Some(file) = self.current.levels[level as usize].iter().find(|f| f.number() == number) {
                file.mark_obsolete();
            }
        }
        if let Some(log_number) = edit.log_number {
            self.log_number = log_number;
        }
        self.current = Arc::new(new_version);
    }

    /// The version that results from applying `edit` to the current one.
    fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let mut levels: Vec<Vec<Arc<TableFile>>> = self.current.levels.clone();
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
                None => Arc::new(TableFile::new(meta.clone(), Arc::clone(&self.janitor))),
            };
            files.push(file);
        }
        let version = Version::from_files(levels);
        // I4 is a property of this process's own edits; breaking it is a bug, reported as an
        // error rather than a panic in a background thread.
        check_levels_disjoint(&version).map_err(|reason| Error::invalid(format!("internal error (I4): {reason}")))?;
        Ok(version)
    }

    fn write_new_manifest(&self, number: u64, snapshot: &VersionEdit) -> Result<LogWriter> {
        let path = manifest_path(&self.dir, number);
        let file = self.file_system.create(&path)?;
        let mut writer = LogWriter::new(file, path);
        let mut record = Vec::new();
        snapshot.encode(&mut record);
        writer.add_record(&record)?;
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

/// A full description of `version` as one edit (the first record of every manifest).
fn snapshot_edit(version: &Version) -> VersionEdit {
    let mut edit = VersionEdit { comparator: Some(COMPARATOR_NAME.to_string()), ..VersionEdit::default() };
    for (level, files) in version.levels.iter().enumerate() {
        for file in files {
            edit.new_files.push((level as u32, file.meta.clone()));
        }
    }
    edit
}

fn apply_to_map(files: &mut HashMap<u64, (u32, FileMetadata)>, edit: &VersionEdit) -> std::result::Result<(), String> {
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

fn build_version(files: &HashMap<u64, (u32, FileMetadata)>, janitor: &Arc<FileJanitor>) -> Version {
    let mut levels: Vec<Vec<Arc<TableFile>>> = vec![Vec::new(); NUM_LEVELS];
    for (level, meta) in files.values() {
        levels[*level as usize].push(Arc::new(TableFile::new(meta.clone(), Arc::clone(janitor))));
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
