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
//! Each column family has its own version, log number and comparator; file numbers, the sequence
//! counter and the manifest are shared. A file number belongs to exactly one column family. A
//! column family's comparator is fixed when it is created: the manifest records its name (tag
//! 12, left out for the bytewise order, which is what a column family without one uses), and
//! recovery refuses a comparator of another name.
//!
//! Concurrency contract: the version set is owned by the database state and used under its
//! mutex; versions it hands out are immutable `Arc`s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::batch::DEFAULT_COLUMN_FAMILY_ID;
use crate::blob::{BlobFile, BlobFileMetadata, BlobFiles};
use crate::comparator::{KeyComparator, BYTEWISE_COMPARATOR_NAME};
use crate::db::filename::{manifest_file_name, manifest_path, temp_file_name, CURRENT_FILE_NAME};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::WalRecovery;
use crate::range_tombstone::RangeTombstone;
// Versions and table files are shared through the shim's `Arc`, so that the loom model of
// their reference counting (in `tree.rs`) counts them; the file system and the janitor are
// plain shared services.
use crate::sync::Arc;
use crate::version::edit::{BlobGarbage, FileMetadata, VersionEdit};
use crate::version::tree::{FileJanitor, TableFile, Version, NUM_LEVELS};
use crate::wal::{LogReader, LogWriter, RECORD_HEADER_SIZE_BYTES};

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

impl ColumnFamilyVersion {
    /// The order of the column family's keys.
    pub(crate) fn comparator(&self) -> &KeyComparator {
        &self.current.comparator
    }
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
    /// Prepared transactions committed by a manifest record (tag 14) whose files may still
    /// exist: every new manifest's snapshot repeats them, so that recovery never takes such a
    /// transaction for undecided (I32). A number leaves once its file's removal is durable.
    prepared_committed: BTreeSet<u64>,
}

/// A column family being rebuilt from the manifest.
struct RecoveredColumnFamily {
    name: String,
    files: HashMap<u64, (u32, FileMetadata)>,
    log_number: u64,
    /// The comparator name recorded at creation; `None` means bytewise.
    comparator_name: Option<String>,
    /// Blob files listed so far, with the garbage (records, bytes) recorded for them.
    blob_files: HashMap<u64, (BlobFileMetadata, u64, u64)>,
    /// Range tombstones listed so far, by sequence.
    range_tombstones: BTreeMap<u64, RangeTombstone>,
}

impl RecoveredColumnFamily {
    fn new(name: String) -> RecoveredColumnFamily {
        RecoveredColumnFamily {
            name,
            files: HashMap::new(),
            log_number: 0,
            comparator_name: None,
            blob_files: HashMap::new(),
            range_tombstones: BTreeMap::new(),
        }
    }
}

/// The comparator name a manifest edit records for a column family of this order: none for the
/// bytewise order, which is what a column family without one uses (so databases that use only
/// bytewise column families keep the manifest format older builds read).
fn recorded_comparator_name(comparator: &KeyComparator) -> Option<String> {
    (!comparator.is_bytewise()).then(|| comparator.name().to_string())
}

impl VersionSet {
    /// A version set for a brand-new database whose default column family is ordered by
    /// `default_comparator`: nothing is written until the first `log_and_apply`, which creates
    /// the first manifest and `CURRENT`.
    pub(crate) fn new_empty(
        dir: &Path,
        file_system: std::sync::Arc<dyn FileSystem>,
        janitor: std::sync::Arc<FileJanitor>,
        default_comparator: KeyComparator,
    ) -> VersionSet {
        let mut column_families = BTreeMap::new();
        column_families.insert(
            DEFAULT_COLUMN_FAMILY_ID,
            ColumnFamilyVersion {
                name: DEFAULT_COLUMN_FAMILY_NAME.to_string(),
                current: Arc::new(Version::empty(default_comparator)),
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
            prepared_committed: BTreeSet::new(),
        }
    }

    /// Reads `CURRENT` and the manifest it names and rebuilds every column family's version.
    /// `comparator_of(name)` is the comparator the caller opens column family `name` with; one
    /// whose name differs from the recorded one is refused with `InvalidArgument`.
    pub(crate) fn recover(
        dir: &Path,
        file_system: std::sync::Arc<dyn FileSystem>,
        janitor: std::sync::Arc<FileJanitor>,
        comparator_of: &dyn Fn(&str) -> KeyComparator,
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
        families.insert(DEFAULT_COLUMN_FAMILY_ID, RecoveredColumnFamily::new(DEFAULT_COLUMN_FAMILY_NAME.to_string()));
        let mut comparator = None;
        let mut next_file_number = None;
        let mut last_sequence = None;
        let mut max_column_family = DEFAULT_COLUMN_FAMILY_ID;
        let mut saw_default_log_number = false;
        let mut first_record = true;
        let mut prepared_committed = BTreeSet::new();
        while let Some((offset, record)) = reader.next_record()? {
            for edit in VersionEdit::decode_record(record, &path, offset + RECORD_HEADER_SIZE_BYTES as u64)? {
                prepared_committed.extend(edit.prepared_committed.iter().copied());
                if edit.comparator.is_some() {
                    comparator = edit.comparator.clone();
                }
                next_file_number = edit.next_file_number.or(next_file_number);
                last_sequence = edit.last_sequence.or(last_sequence);
                if let Some(max) = edit.max_column_family {
                    max_column_family = max_column_family.max(max);
                }
                saw_default_log_number |= edit.column_family == DEFAULT_COLUMN_FAMILY_ID && edit.log_number.is_some();
                apply_to_families(&mut families, &edit, first_record)
                    .map_err(|reason| Error::corruption(&path, offset, reason))?;
                first_record = false;
            }
        }
        let missing = |what: &str| Error::corruption(&path, 0, format!("manifest has no {what}"));
        let comparator = comparator.ok_or_else(|| missing("comparator"))?;
        // Tag 1 names the order of column families that record none of their own; every
        // database so far has written the bytewise one there.
        if comparator != BYTEWISE_COMPARATOR_NAME {
            return Err(Error::invalid(format!(
                "database uses comparator {comparator:?}, this build provides {BYTEWISE_COMPARATOR_NAME:?}"
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
            if let Some(&number) =
                family.files.keys().chain(family.blob_files.keys()).find(|&&number| number >= next_file_number)
            {
                return Err(Error::corruption(&path, 0, format!("file {number} is not below next file number")));
            }
            // I25: a column family is read only in the order it was written in.
            let recorded = family.comparator_name.as_deref().unwrap_or(BYTEWISE_COMPARATOR_NAME);
            let comparator = comparator_of(&family.name);
            if comparator.name() != recorded {
                return Err(Error::invalid(format!(
                    "column family {:?} was created with comparator {recorded:?}, but is opened with comparator {:?}",
                    family.name,
                    comparator.name()
                )));
            }
            check_key_ranges(&family.files, &comparator).map_err(|reason| Error::corruption(&path, 0, reason))?;
            let blob_files =
                recovered_blob_files(&family, &janitor).map_err(|reason| Error::corruption(&path, 0, reason))?;
            let version = build_version(&family.files, &janitor, comparator)
                .with_blob_files(blob_files)
                .with_range_tombstones(family.range_tombstones.into_values().collect());
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
            prepared_committed,
        })
    }

    /// The current version of column family `id`; an empty version if it does not exist (the
    /// callers hold ids of live column families, so that only happens after a drop, when the
    /// empty version's order no longer matters).
    pub(crate) fn current(&self, id: u32) -> Arc<Version> {
        match self.column_families.get(&id) {
            Some(family) => Arc::clone(&family.current),
            None => Arc::new(Version::empty(KeyComparator::Bytewise)),
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
    /// may end in a record whose durability is unknown). Column families are created with
    /// [`VersionSet::add_column_family`] instead, which knows their comparator.
    pub(crate) fn log_and_apply(&mut self, edit: VersionEdit) -> Result<()> {
        if edit.add_column_family.is_some() {
            return Err(Error::invalid("internal error: column families are added with add_column_family"));
        }
        self.log_and_apply_with(edit, None)
    }

    /// Records the edit that creates column family `edit.column_family` (named by
    /// `edit.add_column_family`), ordered by `comparator`, as [`VersionSet::log_and_apply`] does.
    pub(crate) fn add_column_family(&mut self, mut edit: VersionEdit, comparator: KeyComparator) -> Result<()> {
        if edit.add_column_family.is_none() {
            return Err(Error::invalid("internal error: add_column_family needs a column family name"));
        }
        edit.column_family_comparator = recorded_comparator_name(&comparator);
        self.log_and_apply_with(edit, Some(comparator))
    }

    /// The body of `log_and_apply`; `new_comparator` is the order of the column family the edit
    /// adds, if it adds one.
    fn log_and_apply_with(&mut self, mut edit: VersionEdit, new_comparator: Option<KeyComparator>) -> Result<()> {
        let id = edit.column_family;
        let existing = self.column_families.get(&id);
        if edit.add_column_family.is_some() {
            if existing.is_some() || id > self.max_column_family || new_comparator.is_none() {
                return Err(Error::invalid(format!("internal error: column family {id} cannot be added")));
            }
            edit.max_column_family = Some(self.max_column_family);
        } else if existing.is_none() {
            return Err(Error::invalid(format!("column family {id} does not exist")));
        } else if edit.column_family_comparator.is_some() {
            return Err(Error::invalid(format!("internal error: the comparator of column family {id} cannot change")));
        }
        if let Some(log_number) = edit.log_number {
            debug_assert!(log_number >= self.log_number(id), "log numbers never go back");
            debug_assert!(log_number < self.next_file_number);
        }
        edit.last_sequence = Some(self.last_sequence);
        let mut new_version = if edit.drop_column_family { None } else { Some(self.apply(&edit, new_comparator)?) };
        if let Some(version) = new_version.take() {
            // I40: a range tombstone leaves in the edit that removes the last data it hides.
            let obsolete = version.obsolete_range_tombstones();
            new_version = Some(if obsolete.is_empty() {
                version
            } else {
                let kept = version
                    .range_tombstones
                    .list()
                    .iter()
                    .filter(|t| !obsolete.contains(&t.sequence))
                    .cloned()
                    .collect();
                // One the edit itself adds is simply not added.
                let (added, older): (Vec<u64>, Vec<u64>) = obsolete
                    .into_iter()
                    .partition(|&sequence| edit.new_range_tombstones.iter().any(|t| t.sequence == sequence));
                edit.new_range_tombstones.retain(|t| !added.contains(&t.sequence));
                edit.dropped_range_tombstones.extend(older);
                version.with_range_tombstones(kept)
            });
        }
        if self.needs_new_manifest() {
            self.start_new_manifest(&mut edit, new_version.as_ref())?;
        } else {
            edit.next_file_number = Some(self.next_file_number);
            let mut record = Vec::new();
            edit.encode(&mut record);
            self.append_manifest_record(&record)?;
        }
        self.install(new_version, &edit);
        Ok(())
    }

    /// True when the next edit must start a new manifest: none is open (the first edit after
    /// open, or after a failed write), or the current one has reached its roll size.
    fn needs_new_manifest(&self) -> bool {
        self.manifest.as_ref().is_none_or(|manifest| manifest.size_bytes() >= MANIFEST_ROLL_SIZE_BYTES)
    }

    /// Appends `record` to the open manifest and syncs it. On error the manifest is dropped,
    /// so the next edit starts a fresh one (this one may end in a record of unknown
    /// durability).
    fn append_manifest_record(&mut self, record: &[u8]) -> Result<()> {
        let written = match self.manifest.as_mut() {
            Some(writer) => writer.add_record(record).and_then(|()| writer.sync()),
            None => Err(Error::Closed("manifest is not open".to_string())),
        };
        if written.is_err() {
            self.manifest = None;
        }
        written
    }

    /// Starts a new manifest holding the state after `edit` (whose new version of its column
    /// family is `new_version`) and points `CURRENT` at it.
    fn start_new_manifest(&mut self, edit: &mut VersionEdit, new_version: Option<&Version>) -> Result<()> {
        // The new manifest's number must be recorded inside it as used.
        let number = self.new_file_number();
        edit.next_file_number = Some(self.next_file_number);
        let snapshot = self.snapshot_edits(edit, new_version);
        match self.write_new_manifest(number, &snapshot) {
            Ok(writer) => {
                let old_number = self.manifest_number;
                self.manifest = Some(writer);
                self.manifest_number = number;
                if old_number != 0 && old_number != number {
                    // The old manifest is no longer named by CURRENT.
                    let _ = self.file_system.remove(&manifest_path(&self.dir, old_number));
                }
                Ok(())
            }
            Err(error) => {
                self.manifest = None;
                Err(error)
            }
        }
    }

    /// Records `edits` (each of a different, existing column family; no column family
    /// creations, drops or renames) in one manifest record, so that a crash keeps all of them
    /// or none, and installs the resulting versions. Used by the commit of a spilled
    /// transaction, whose tables in several column families must appear together.
    pub(crate) fn log_and_apply_group(&mut self, mut edits: Vec<VersionEdit>) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for edit in &edits {
            let structural = edit.add_column_family.is_some()
                || edit.drop_column_family
                || edit.rename_column_family.is_some()
                || edit.column_family_comparator.is_some();
            if structural || !seen.insert(edit.column_family) {
                return Err(Error::invalid(
                    "internal error: an edit group changes files of distinct column families only",
                ));
            }
            if !self.column_families.contains_key(&edit.column_family) {
                return Err(Error::invalid(format!("column family {} does not exist", edit.column_family)));
            }
        }
        if edits.len() <= 1 {
            return match edits.pop() {
                Some(edit) => self.log_and_apply(edit),
                None => Ok(()),
            };
        }
        let mut versions = Vec::with_capacity(edits.len());
        for edit in &mut edits {
            edit.last_sequence = Some(self.last_sequence);
            versions.push(self.apply(edit, None)?);
        }
        if self.needs_new_manifest() {
            // A fresh manifest holding the state before the group; the group follows it.
            let mut unchanged = VersionEdit { last_sequence: Some(self.last_sequence), ..VersionEdit::default() };
            let current = Arc::clone(&self.current(DEFAULT_COLUMN_FAMILY_ID));
            self.start_new_manifest(&mut unchanged, Some(&current))?;
        }
        for edit in &mut edits {
            edit.next_file_number = Some(self.next_file_number);
        }
        let mut record = Vec::new();
        VersionEdit::encode_group(&edits, &mut record);
        self.append_manifest_record(&record)?;
        for (edit, version) in edits.iter().zip(versions) {
            self.install(Some(version), edit);
        }
        Ok(())
    }

    fn install(&mut self, new_version: Option<Version>, edit: &VersionEdit) {
        self.prepared_committed.extend(edit.prepared_committed.iter().copied());
        let id = edit.column_family;
        let Some(new_version) = new_version else {
            // A dropped column family's files go once no reader holds them.
            if let Some(family) = self.column_families.remove(&id) {
                for file in family.current.levels.iter().flatten() {
                    file.mark_obsolete();
                }
                for file in family.current.blob_files.values() {
                    file.mark_obsolete();
                }
            }
            return;
        };
        let family = self.column_families.entry(id).or_insert_with(|| ColumnFamilyVersion {
            name: String::new(),
            current: Arc::new(Version::empty(new_version.comparator.clone())),
            log_number: 0,
        });
        for garbage in &edit.blob_garbage {
            if let Some(file) = new_version.blob_files.get(&garbage.number) {
                file.add_garbage(garbage.count, garbage.bytes);
            }
        }
        // I35: the manifest no longer lists a blob file no table of the new version
        // references; it goes once the versions that still hold it are dropped.
        for (number, file) in family.current.blob_files.iter() {
            if !new_version.blob_files.contains_key(number) {
                file.mark_obsolete();
            }
        }
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

    /// The prepared transactions a manifest record committed whose files may still exist.
    pub(crate) fn prepared_committed(&self) -> &BTreeSet<u64> {
        &self.prepared_committed
    }

    /// Forgets that prepared transaction `number` was committed, once its file's removal is
    /// durable: the next new manifest no longer repeats it.
    pub(crate) fn forget_prepared_committed(&mut self, number: u64) {
        self.prepared_committed.remove(&number);
    }

    /// The version of the edit's column family that results from applying `edit`;
    /// `new_comparator` orders a column family the edit adds.
    fn apply(&self, edit: &VersionEdit, new_comparator: Option<KeyComparator>) -> Result<Version> {
        let base = match (self.column_families.get(&edit.column_family), new_comparator) {
            (Some(family), _) => Arc::clone(&family.current),
            (None, Some(comparator)) => Arc::new(Version::empty(comparator)),
            (None, None) => {
                return Err(Error::invalid(format!(
                    "internal error: column family {} has no order",
                    edit.column_family
                )))
            }
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
        let mut blob_files: BTreeMap<u64, std::sync::Arc<BlobFile>> = (*base.blob_files).clone();
        for meta in &edit.new_blob_files {
            if blob_files.contains_key(&meta.number) {
                return Err(Error::invalid(format!("internal error: blob file {} added twice", meta.number)));
            }
            blob_files
                .insert(meta.number, std::sync::Arc::new(BlobFile::new(*meta, std::sync::Arc::clone(&self.janitor))));
        }
        let referenced = referenced_blob_files(&levels);
        if let Some(missing) = referenced.iter().find(|number| !blob_files.contains_key(number)) {
            return Err(Error::invalid(format!(
                "internal error (I34): a table references unknown blob file {missing}"
            )));
        }
        blob_files.retain(|number, _| referenced.contains(number));
        let mut version =
            Version::from_files(levels, base.comparator.clone()).with_blob_files(BlobFiles::new(blob_files));
        if edit.new_range_tombstones.is_empty() && edit.dropped_range_tombstones.is_empty() {
            version.range_tombstones = base.range_tombstones.clone();
        } else {
            let mut tombstones = base.range_tombstones.list().to_vec();
            for &sequence in &edit.dropped_range_tombstones {
                let index = tombstones.iter().position(|t| t.sequence == sequence).ok_or_else(|| {
                    Error::invalid(format!("internal error: edit drops unknown range tombstone {sequence}"))
                })?;
                tombstones.remove(index);
            }
            for tombstone in &edit.new_range_tombstones {
                if tombstones.iter().any(|t| t.sequence == tombstone.sequence) {
                    return Err(Error::invalid(format!(
                        "internal error: range tombstone {} added twice",
                        tombstone.sequence
                    )));
                }
                tombstones.push(tombstone.clone());
            }
            version = version.with_range_tombstones(tombstones);
        }
        // I4 is a property of this process's own edits; breaking it is a bug, reported as an
        // error rather than a panic in a background thread.
        check_levels_disjoint(&version).map_err(|reason| Error::invalid(format!("internal error (I4): {reason}")))?;
        Ok(version)
    }

    /// For a checkpoint: a manifest number, reserved from the counter so that no file of this
    /// database ever takes it, and the records of a manifest that describes every column
    /// family as it is now, with `last_sequence` (the database's) and a next file number above
    /// every number used so far.
    pub(crate) fn checkpoint_manifest(&mut self, last_sequence: u64) -> (u64, Vec<VersionEdit>) {
        let number = self.new_file_number();
        let edit = VersionEdit {
            column_family: DEFAULT_COLUMN_FAMILY_ID,
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        };
        let current = self.current(DEFAULT_COLUMN_FAMILY_ID);
        (number, self.snapshot_edits(&edit, Some(&current)))
    }

    /// The records that open a new manifest: one full edit per column family as it will be
    /// once `edit` is applied (with its comparator unless bytewise), the first also carrying the
    /// global comparator and the counters.
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
                column_family_comparator: recorded_comparator_name(&version.comparator),
                log_number: Some(log_number),
                ..VersionEdit::default()
            };
            for (level, files) in version.levels.iter().enumerate() {
                for file in files {
                    family_edit.new_files.push((level as u32, file.meta.clone()));
                }
            }
            family_edit.new_range_tombstones = version.range_tombstones.list().to_vec();
            for file in version.blob_files.values() {
                family_edit.new_blob_files.push(file.meta);
                let (mut count, mut bytes) = file.garbage();
                // The edit's own garbage is installed after this snapshot is written.
                if id == edit.column_family {
                    for garbage in edit.blob_garbage.iter().filter(|garbage| garbage.number == file.number()) {
                        count += garbage.count;
                        bytes += garbage.bytes;
                    }
                }
                if bytes > 0 || count > 0 {
                    family_edit.blob_garbage.push(BlobGarbage { number: file.number(), count, bytes });
                }
            }
            edits.push(family_edit);
        }
        // The default column family always exists and sorts first, so the first edit is its.
        if let Some(first) = edits.first_mut() {
            first.comparator = Some(BYTEWISE_COMPARATOR_NAME.to_string());
            first.next_file_number = edit.next_file_number;
            first.last_sequence = edit.last_sequence;
            first.max_column_family = Some(self.max_column_family);
            let mut committed = self.prepared_committed.clone();
            committed.extend(edit.prepared_committed.iter().copied());
            first.prepared_committed = committed.into_iter().collect();
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

/// Applies one manifest edit to the column families being recovered. `first_record` is true
/// for the manifest's first record, the only one that may record the default column family's
/// comparator (it opens the snapshot, and the default column family is never added).
fn apply_to_families(
    families: &mut BTreeMap<u32, RecoveredColumnFamily>,
    edit: &VersionEdit,
    first_record: bool,
) -> std::result::Result<(), String> {
    let id = edit.column_family;
    if let Some(name) = &edit.add_column_family {
        if id == DEFAULT_COLUMN_FAMILY_ID || families.contains_key(&id) {
            return Err(format!("edit adds column family {id}, which exists"));
        }
        families.insert(id, RecoveredColumnFamily::new(name.clone()));
    }
    if let Some(comparator) = &edit.column_family_comparator {
        // A column family's order is fixed when it is created; recording it anywhere else
        // could make one column family's tables be read in two orders.
        let at_creation = edit.add_column_family.is_some() || (id == DEFAULT_COLUMN_FAMILY_ID && first_record);
        if !at_creation || edit.drop_column_family {
            return Err(format!("edit sets the comparator of column family {id} after its creation"));
        }
        if let Some(family) = families.get_mut(&id) {
            family.comparator_name = Some(comparator.clone());
        }
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
    for meta in &edit.new_blob_files {
        if family.blob_files.insert(meta.number, (*meta, 0, 0)).is_some() {
            return Err(format!("blob file {} added twice", meta.number));
        }
    }
    for garbage in &edit.blob_garbage {
        // Garbage of a file no longer listed changes nothing.
        if let Some((_, count, bytes)) = family.blob_files.get_mut(&garbage.number) {
            *count = count.saturating_add(garbage.count);
            *bytes = bytes.saturating_add(garbage.bytes);
        }
    }
    for &sequence in &edit.dropped_range_tombstones {
        if family.range_tombstones.remove(&sequence).is_none() {
            return Err(format!("edit drops unknown range tombstone {sequence}"));
        }
    }
    for tombstone in &edit.new_range_tombstones {
        if family.range_tombstones.insert(tombstone.sequence, tombstone.clone()).is_some() {
            return Err(format!("range tombstone {} added twice", tombstone.sequence));
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

/// Every file's smallest key sorts at or before its largest in the column family's order.
fn check_key_ranges(
    files: &HashMap<u64, (u32, FileMetadata)>,
    comparator: &KeyComparator,
) -> std::result::Result<(), String> {
    match files.values().find(|(_, meta)| comparator.compare_internal_keys(&meta.smallest, &meta.largest).is_gt()) {
        Some((_, meta)) => Err(format!("file {}: smallest key sorts after largest key", meta.number)),
        None => Ok(()),
    }
}

/// Invariant I4, checked on what the manifest says: files of levels 1 and deeper must not
/// overlap (a damaged manifest that passes its checksums must not lead to wrong reads).
fn check_levels_disjoint(version: &Version) -> std::result::Result<(), String> {
    for (level, files) in version.levels.iter().enumerate().skip(1) {
        for pair in files.windows(2) {
            if version.comparator.compare_user_keys(pair[0].largest_user_key(), pair[1].smallest_user_key()).is_ge() {
                return Err(format!("files {} and {} of level {level} overlap", pair[0].number(), pair[1].number()));
            }
        }
    }
    Ok(())
}

/// The blob files some table of `levels` references.
fn referenced_blob_files(levels: &[Vec<Arc<TableFile>>]) -> BTreeSet<u64> {
    levels.iter().flatten().flat_map(|file| file.meta.blob_references.iter().copied()).collect()
}

/// The blob files of a recovered column family that its tables reference (I35: the others
/// are garbage, left for open to delete); a reference to a file the manifest does not list is
/// corruption.
fn recovered_blob_files(
    family: &RecoveredColumnFamily,
    janitor: &std::sync::Arc<FileJanitor>,
) -> std::result::Result<BlobFiles, String> {
    let mut blob_files = BTreeMap::new();
    for (table, (_, meta)) in &family.files {
        for number in &meta.blob_references {
            let Some((blob, count, bytes)) = family.blob_files.get(number) else {
                return Err(format!("table {table} references blob file {number}, which the manifest does not list"));
            };
            blob_files.entry(*number).or_insert_with(|| {
                let file = BlobFile::new(*blob, std::sync::Arc::clone(janitor));
                file.add_garbage(*count, *bytes);
                std::sync::Arc::new(file)
            });
        }
    }
    Ok(BlobFiles::new(blob_files))
}

fn build_version(
    files: &HashMap<u64, (u32, FileMetadata)>,
    janitor: &std::sync::Arc<FileJanitor>,
    comparator: KeyComparator,
) -> Version {
    let mut levels: Vec<Vec<Arc<TableFile>>> = vec![Vec::new(); NUM_LEVELS];
    for (level, meta) in files.values() {
        levels[*level as usize].push(Arc::new(TableFile::new(meta.clone(), std::sync::Arc::clone(janitor))));
    }
    Version::from_files(levels, comparator)
}

#[cfg(test)]
mod tests {
    // The file system, janitor and comparators are shared through `std`'s `Arc` in every
    // build; only versions and table files use the shim's (loom's under `--cfg loom`).
    use std::sync::Arc;

    use super::*;
    use crate::comparator::ReverseBytewiseComparator;
    use crate::db::table_cache::TableCache;
    use crate::fs::MemFileSystem;
    use crate::key::{make_internal_key, ValueKind};

    fn reverse() -> KeyComparator {
        KeyComparator::Custom(Arc::new(ReverseBytewiseComparator))
    }

    /// An in-memory directory and the janitor a version set needs.
    fn directory() -> (Arc<dyn FileSystem>, PathBuf, Arc<FileJanitor>) {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = PathBuf::from("/db");
        file_system.create_dir_all(&dir).expect("mkdir");
        let table_cache = Arc::new(TableCache::new(dir.clone(), Arc::clone(&file_system), None, 16));
        let janitor = Arc::new(FileJanitor { dir: dir.clone(), file_system: Arc::clone(&file_system), table_cache });
        (file_system, dir, janitor)
    }

    /// Writes `edits` as manifest 1 and points `CURRENT` at it.
    fn write_manifest(file_system: &Arc<dyn FileSystem>, dir: &Path, edits: &[VersionEdit]) {
        let path = manifest_path(dir, 1);
        let mut writer = LogWriter::new(file_system.create(&path).expect("create"), path);
        for edit in edits {
            let mut record = Vec::new();
            edit.encode(&mut record);
            writer.add_record(&record).expect("append");
        }
        writer.sync().expect("sync");
        set_current_file(file_system.as_ref(), dir, 1).expect("CURRENT");
    }

    /// The first record of a manifest: the global fields and the default column family.
    fn first_record() -> VersionEdit {
        VersionEdit {
            comparator: Some(BYTEWISE_COMPARATOR_NAME.to_string()),
            log_number: Some(0),
            next_file_number: Some(10),
            last_sequence: Some(0),
            max_column_family: Some(3),
            ..VersionEdit::default()
        }
    }

    fn file(number: u64, smallest: &[u8], largest: &[u8]) -> FileMetadata {
        FileMetadata {
            number,
            file_size_bytes: 100,
            smallest: make_internal_key(smallest, 5, ValueKind::Put),
            largest: make_internal_key(largest, 5, ValueKind::Put),
            smallest_sequence: 5,
            largest_sequence: 5,
            num_entries: 2,
            num_deletions: 0,
            blob_references: Vec::new(),
            range_tombstones_applied_through: 0,
            expiry: Default::default(),
            num_merge_operands: 0,
        }
    }

    fn recover_with(
        file_system: &Arc<dyn FileSystem>,
        dir: &Path,
        janitor: &Arc<FileJanitor>,
        comparator_of: &dyn Fn(&str) -> KeyComparator,
    ) -> Result<VersionSet> {
        VersionSet::recover(dir, Arc::clone(file_system), Arc::clone(janitor), comparator_of)
    }

    #[test]
    fn comparators_are_recorded_only_when_not_bytewise_and_survive_recovery() {
        let (file_system, dir, janitor) = directory();
        let mut set = VersionSet::new_empty(&dir, Arc::clone(&file_system), Arc::clone(&janitor), reverse());
        let id = set.new_column_family_id();
        let add = |name: &str, id: u32| VersionEdit {
            column_family: id,
            add_column_family: Some(name.to_string()),
            log_number: Some(0),
            ..VersionEdit::default()
        };
        set.add_column_family(add("bytes", id), KeyComparator::Bytewise).expect("add bytes");
        let id = set.new_column_family_id();
        set.add_column_family(add("descending", id), reverse()).expect("add descending");
        // A file whose keys are in reverse order, valid only in a reverse column family.
        let number = set.new_file_number();
        let edit =
            VersionEdit { column_family: id, new_files: vec![(1, file(number, b"z", b"a"))], ..VersionEdit::default() };
        set.log_and_apply(edit).expect("file");
        // Adding goes through add_column_family, which knows the order.
        assert!(set.log_and_apply(add("other", 9)).is_err());
        let changing = VersionEdit {
            column_family: id,
            column_family_comparator: Some("other".to_string()),
            ..VersionEdit::default()
        };
        assert!(set.log_and_apply(changing).is_err(), "the comparator of a column family cannot change");

        // The manifest records the non-bytewise orders only.
        let manifest = file_system.read_all(&manifest_path(&dir, set.manifest_number())).expect("manifest");
        let mut reader = LogReader::new(manifest, PathBuf::from("m"), WalRecovery::Absolute, true);
        let mut recorded = Vec::new();
        while let Some((_, record)) = reader.next_record().expect("record") {
            let edit = VersionEdit::decode(record, Path::new("m"), 0).expect("edit");
            recorded.push((edit.column_family, edit.column_family_comparator));
        }
        let reverse_name = Some(reverse().name().to_string());
        assert_eq!(recorded, vec![(0, reverse_name.clone()), (1, None), (2, reverse_name.clone()), (2, None)]);

        let by_name = |name: &str| if name == "bytes" { KeyComparator::Bytewise } else { reverse() };
        let recovered = recover_with(&file_system, &dir, &janitor, &by_name).expect("recover");
        let names: Vec<(&str, &str)> = recovered
            .column_families()
            .values()
            .map(|family| (family.name.as_str(), family.comparator().name()))
            .collect();
        assert_eq!(
            names,
            [
                ("default", "riptide.reverse_bytewise"),
                ("bytes", "riptide.bytewise"),
                ("descending", "riptide.reverse_bytewise")
            ]
        );
        assert_eq!(recovered.current(id).levels[1].len(), 1);

        // Any other comparator for any of them is refused, naming both orders.
        for wrong in ["default", "bytes", "descending"] {
            let swapped = |name: &str| {
                let right = by_name(name);
                match (name == wrong, right.is_bytewise()) {
                    (false, _) => right,
                    (true, true) => reverse(),
                    (true, false) => KeyComparator::Bytewise,
                }
            };
            match recover_with(&file_system, &dir, &janitor, &swapped) {
                Err(Error::InvalidArgument(message)) => {
                    assert!(message.contains(wrong) && message.contains("riptide.reverse_bytewise"), "{message}");
                    assert!(message.contains("riptide.bytewise"), "{message}");
                }
                other => panic!("{wrong}: expected InvalidArgument, got {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn comparators_are_accepted_only_where_a_column_family_is_created() {
        let (file_system, dir, janitor) = directory();
        let reverse_name = Some(reverse().name().to_string());
        let always_reverse = |_: &str| reverse();
        let expect_corruption = |edits: &[VersionEdit], what: &str| {
            write_manifest(&file_system, &dir, edits);
            match recover_with(&file_system, &dir, &janitor, &always_reverse) {
                Err(error) if error.is_corruption() => {}
                other => panic!("{what}: expected corruption, got {:?}", other.map(|_| ())),
            }
        };
        // The default column family's comparator belongs in the first record.
        let first = VersionEdit { column_family_comparator: reverse_name.clone(), ..first_record() };
        write_manifest(&file_system, &dir, &[first]);
        recover_with(&file_system, &dir, &janitor, &always_reverse).expect("in the first record");
        let later = VersionEdit { column_family_comparator: reverse_name.clone(), ..VersionEdit::default() };
        expect_corruption(&[first_record(), later], "default column family, later record");
        // Another column family's comparator belongs in the edit that adds it.
        let add = VersionEdit {
            column_family: 1,
            add_column_family: Some("one".to_string()),
            column_family_comparator: reverse_name.clone(),
            ..VersionEdit::default()
        };
        let default_reverse = VersionEdit { column_family_comparator: reverse_name.clone(), ..first_record() };
        write_manifest(&file_system, &dir, &[default_reverse.clone(), add.clone()]);
        recover_with(&file_system, &dir, &janitor, &always_reverse).expect("with the add");
        let set_later =
            VersionEdit { column_family: 1, column_family_comparator: reverse_name, ..VersionEdit::default() };
        let add_bytewise = VersionEdit { column_family_comparator: None, ..add };
        expect_corruption(&[default_reverse, add_bytewise, set_later], "after the add");
    }

    #[test]
    fn a_manifest_without_comparators_is_bytewise_and_key_ranges_follow_the_order() {
        let (file_system, dir, janitor) = directory();
        // Keys "z".."a" are a valid range in reverse order only.
        let reversed_file = VersionEdit { new_files: vec![(1, file(3, b"z", b"a"))], ..VersionEdit::default() };
        write_manifest(&file_system, &dir, &[first_record(), reversed_file]);
        match recover_with(&file_system, &dir, &janitor, &|_| KeyComparator::Bytewise) {
            Err(error) if error.is_corruption() => {}
            other => panic!("a reversed range in a bytewise column family: {:?}", other.map(|_| ())),
        }
        // Without tag 12 the column family is bytewise, so a reverse comparator is refused.
        match recover_with(&file_system, &dir, &janitor, &|_| reverse()) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
        }
        let ordered_file = VersionEdit { new_files: vec![(1, file(3, b"a", b"z"))], ..VersionEdit::default() };
        write_manifest(&file_system, &dir, &[first_record(), ordered_file]);
        let set = recover_with(&file_system, &dir, &janitor, &|_| KeyComparator::Bytewise).expect("bytewise");
        assert!(set.current(0).comparator.is_bytewise());
    }

    #[test]
    fn current_parsing() {
        assert_eq!(parse_current(b"MANIFEST-000012\n"), Some(12));
        assert_eq!(parse_current(b"MANIFEST-000012"), None);
        assert_eq!(parse_current(b"000012.log\n"), None);
        assert_eq!(parse_current(b"\xff\n"), None);
    }
}
