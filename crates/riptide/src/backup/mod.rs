//! Backups: incremental copies of a database in a backup directory, each restorable into a
//! fresh directory and verifiable by checksums ([`BackupEngine`]).
//!
//! A backup directory holds `shared/` (tables and blob files, each stored once under its name
//! and size, `000012_4096.sst`, however many backups hold it), `private/NNNNNN/` (the files of
//! backup N that change from one backup to the next: `CURRENT`, the manifest, the logs), and
//! `meta/NNNNNN` (backup N's description: its files, their sizes and crc32c checksums; format
//! in `docs/format/backup.md`). A backup is a checkpoint (`Db::checkpoint`) taken into a
//! temporary directory inside the backup directory, whose files are then moved into place:
//! a table or blob file already in `shared/` is not stored again, so a backup costs the files
//! written since the previous one. Files are copied into the backup directory, never linked: a
//! backup shares no bytes with the database (the checkpoint's hard links are dropped with its
//! temporary directory). The description is written last (to a temporary name,
//! synced, renamed), so a backup interrupted by a crash does not exist; the leftovers of one
//! are removed by the next `BackupEngine::open`.
//!
//! Concurrency contract: one `BackupEngine` per backup directory at a time (it takes no lock;
//! two engines creating backups at once could take the same id). Backups run beside the
//! database's reads and writes, as checkpoints do.
//!
//! Invariants: every file a description lists is in its place with the listed size and
//! checksum, unless the directory was damaged (which `verify_backup` and `restore` report as
//! `Error::Corruption`); a shared file goes only when no description lists it.

pub(crate) mod meta;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::db::filename::{parse_file_name, FileKind};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::Db;
use meta::{BackupFile, BackupMeta, Storage};

const SHARED_DIR: &str = "shared";
const PRIVATE_DIR: &str = "private";
const META_DIR: &str = "meta";
/// Prefix of the temporary checkpoint directory of a backup being created.
const TEMPORARY_PREFIX: &str = "tmp-";
/// Checksums are computed over pieces of this size.
const READ_PIECE_BYTES: u64 = 1 << 20;

/// What a backup holds, as [`BackupEngine::list_backups`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The backup's id, increasing from 1.
    pub id: u64,
    /// When the backup was taken, in seconds since the Unix epoch.
    pub timestamp_secs: u64,
    /// Files in the backup.
    pub file_count: usize,
    /// Bytes of those files (shared ones counted in every backup that holds them).
    pub size_bytes: u64,
}

impl BackupInfo {
    fn of(meta: &BackupMeta) -> BackupInfo {
        BackupInfo {
            id: meta.id,
            timestamp_secs: meta.timestamp_secs,
            file_count: meta.files.len(),
            size_bytes: meta.files.iter().map(|file| file.size_bytes).sum(),
        }
    }
}

/// A backup directory; see the module documentation.
pub struct BackupEngine {
    dir: PathBuf,
    file_system: Arc<dyn FileSystem>,
}

impl BackupEngine {
    /// Opens (creating if needed) the backup directory `dir` on `file_system`, which must be
    /// the file system of the databases it backs up (`Options::file_system`, the operating
    /// system's by default). Removes what an interrupted backup left behind.
    pub fn open(dir: impl AsRef<Path>, file_system: Arc<dyn FileSystem>) -> Result<BackupEngine> {
        let engine = BackupEngine { dir: dir.as_ref().to_path_buf(), file_system };
        for sub in [SHARED_DIR, PRIVATE_DIR, META_DIR] {
            engine.file_system.create_dir_all(&engine.dir.join(sub))?;
        }
        for name in engine.file_system.list(&engine.dir)? {
            if name.starts_with(TEMPORARY_PREFIX) {
                engine.file_system.remove_dir_and_files(&engine.dir.join(name));
            }
        }
        for name in engine.file_system.list(&engine.dir.join(META_DIR))? {
            if name.starts_with(TEMPORARY_PREFIX) {
                let _ = engine.file_system.remove(&engine.dir.join(META_DIR).join(name));
            }
        }
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// Backs up `db` (a checkpoint of it, taken while it runs) as a new backup and returns
    /// what it holds. Tables and blob files already in the backup directory are not copied
    /// again. Everything is synced before the call returns.
    pub fn create_backup(&self, db: &Db) -> Result<BackupInfo> {
        let metas = self.load_all()?;
        let id = metas.keys().next_back().map_or(1, |last| last + 1);
        let temporary = self.dir.join(format!("{TEMPORARY_PREFIX}{id:06}"));
        let stored = db.checkpoint(&temporary).and_then(|()| self.store_checkpoint(id, &temporary, &metas));
        self.file_system.remove_dir_and_files(&temporary);
        if stored.is_err() {
            // A failed backup does not exist, even if its description made it into place
            // before the failure; the shared files it added are collected at the next open.
            let _ = self.file_system.remove(&self.dir.join(META_DIR).join(meta_file_name(id)));
            self.file_system.remove_dir_and_files(&self.private_dir(id));
        }
        stored
    }

    /// Every backup, oldest first.
    pub fn list_backups(&self) -> Result<Vec<BackupInfo>> {
        Ok(self.load_all()?.values().map(BackupInfo::of).collect())
    }

    /// Reads every file of backup `id` and checks its size and checksum: `Error::Corruption`
    /// naming the first damaged file, `InvalidArgument` for an unknown id.
    pub fn verify_backup(&self, id: u64) -> Result<()> {
        let meta = self.load(id)?;
        for file in &meta.files {
            self.check_file(&self.stored_path(id, file), file, None)?;
        }
        Ok(())
    }

    /// Restores backup `id` into `target`, a directory that must not exist, checking every
    /// file's size and checksum as it copies. `CURRENT` goes last, so a restore that failed
    /// leaves no openable database (and its files are removed). Open the result with
    /// `Db::open` and the options of the database backed up.
    pub fn restore(&self, id: u64, target: impl AsRef<Path>) -> Result<()> {
        let target = target.as_ref();
        if self.file_system.exists(target) {
            return Err(Error::invalid(format!("restore target {} already exists", target.display())));
        }
        let meta = self.load(id)?;
        self.file_system.create_dir_all(target)?;
        let restored = self.restore_files(id, &meta, target);
        if restored.is_err() {
            self.file_system.remove_dir_and_files(target);
        }
        restored
    }

    /// Deletes backup `id`: its description first (the backup is gone once that is durable),
    /// then its private files and the shared files no other backup lists.
    pub fn delete_backup(&self, id: u64) -> Result<()> {
        let meta = self.load(id)?;
        let meta_dir = self.dir.join(META_DIR);
        self.file_system.remove(&meta_dir.join(meta_file_name(meta.id)))?;
        self.file_system.sync_dir(&meta_dir)?;
        self.file_system.remove_dir_and_files(&self.private_dir(meta.id));
        self.collect_garbage()
    }

    /// Removes the private directories and shared files that no description lists (left by a
    /// backup that failed or was interrupted).
    fn collect_garbage(&self) -> Result<()> {
        let metas = self.load_all()?;
        let listed: std::collections::HashSet<&str> = shared_files(&metas).map(|(stored, _)| stored).collect();
        let shared_dir = self.dir.join(SHARED_DIR);
        for name in self.file_system.list(&shared_dir)? {
            if !listed.contains(name.as_str()) {
                let _ = self.file_system.remove(&shared_dir.join(name));
            }
        }
        // An interrupted backup took the id after the last one; its private directory is the
        // only one no description owns.
        let next = metas.keys().next_back().map_or(1, |last| last + 1);
        if self.file_system.exists(&self.private_dir(next)) {
            self.file_system.remove_dir_and_files(&self.private_dir(next));
        }
        Ok(())
    }

    /// Moves the checkpoint in `temporary` into place as backup `id` and writes its description.
    fn store_checkpoint(&self, id: u64, temporary: &Path, metas: &BTreeMap<u64, BackupMeta>) -> Result<BackupInfo> {
        // Checksums of the shared files already stored, by stored name.
        let known: HashMap<&str, (u64, u32)> =
            shared_files(metas).map(|(stored, file)| (stored, (file.size_bytes, file.crc32c))).collect();
        let shared_dir = self.dir.join(SHARED_DIR);
        let private_dir = self.private_dir(id);
        self.file_system.create_dir_all(&private_dir)?;
        let mut names = self.file_system.list(temporary)?;
        names.sort();
        let mut files = Vec::new();
        for name in names {
            let source = temporary.join(&name);
            let size_bytes = self.file_system.file_size(&source)?;
            let shared_name = match parse_file_name(&name) {
                Some(FileKind::Table(number)) => Some(format!("{number:06}_{size_bytes}.sst")),
                Some(FileKind::Blob(number)) => Some(format!("{number:06}_{size_bytes}.blob")),
                _ => None,
            };
            let (storage, crc32c) = match shared_name {
                Some(stored) => {
                    let in_place = shared_dir.join(&stored);
                    match known.get(stored.as_str()) {
                        Some(&(known_size, crc32c))
                            if known_size == size_bytes && self.file_system.exists(&in_place) =>
                        {
                            (Storage::Shared(stored), crc32c)
                        }
                        _ => {
                            // A copy, not the checkpoint's hard link: a backup must not share
                            // its bytes with the database it protects.
                            let crc32c = self.copy_checked(&source, &in_place, size_bytes)?;
                            (Storage::Shared(stored), crc32c)
                        }
                    }
                }
                None => {
                    let crc32c = self.checksum(&source, size_bytes)?;
                    self.file_system.rename(&source, &private_dir.join(&name))?;
                    (Storage::Private, crc32c)
                }
            };
            files.push(BackupFile { name, storage, size_bytes, crc32c });
        }
        self.file_system.sync_dir(&shared_dir)?;
        self.file_system.sync_dir(&private_dir)?;
        let timestamp_secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
        let meta = BackupMeta { id, timestamp_secs, files };
        self.write_meta(&meta)?;
        Ok(BackupInfo::of(&meta))
    }

    /// Writes a description under a temporary name, syncs it and renames it into place.
    fn write_meta(&self, meta: &BackupMeta) -> Result<()> {
        let meta_dir = self.dir.join(META_DIR);
        let temporary = meta_dir.join(format!("{TEMPORARY_PREFIX}{}", meta_file_name(meta.id)));
        let mut file = self.file_system.create(&temporary)?;
        file.append(&meta.encode())?;
        file.sync()?;
        drop(file);
        self.file_system.rename(&temporary, &meta_dir.join(meta_file_name(meta.id)))?;
        self.file_system.sync_dir(&meta_dir)
    }

    fn restore_files(&self, id: u64, meta: &BackupMeta, target: &Path) -> Result<()> {
        // CURRENT last: it makes the directory a database.
        let (current, others): (Vec<&BackupFile>, Vec<&BackupFile>) =
            meta.files.iter().partition(|file| file.name == "CURRENT");
        if current.is_empty() {
            return Err(Error::corruption(
                self.dir.join(META_DIR).join(meta_file_name(id)),
                0,
                "the backup lists no CURRENT file",
            ));
        }
        for file in others.into_iter().chain(current) {
            self.check_file(&self.stored_path(id, file), file, Some(&target.join(&file.name)))?;
        }
        self.file_system.sync_dir(target)
    }

    /// Reads `path` whole, checking it is `file` (size and checksum), and copies it to `copy`
    /// (synced) when given.
    fn check_file(&self, path: &Path, file: &BackupFile, copy: Option<&Path>) -> Result<()> {
        let size_bytes = self.file_system.file_size(path)?;
        if size_bytes != file.size_bytes {
            return Err(Error::corruption(
                path,
                size_bytes.min(file.size_bytes),
                format!("the backup lists {} bytes, the file has {size_bytes}", file.size_bytes),
            ));
        }
        let mut writer = copy.map(|copy| self.file_system.create(copy)).transpose()?;
        let crc = self.read_pieces(path, size_bytes, |piece| match writer.as_mut() {
            Some(writer) => writer.append(piece),
            None => Ok(()),
        })?;
        if crc != file.crc32c {
            return Err(Error::corruption(
                path,
                0,
                format!("checksum {crc:08x}, the backup lists {:08x}", file.crc32c),
            ));
        }
        if let Some(writer) = writer.as_mut() {
            writer.sync()?;
        }
        Ok(())
    }

    /// The crc32c of the first `size_bytes` of `path`.
    fn checksum(&self, path: &Path, size_bytes: u64) -> Result<u32> {
        self.read_pieces(path, size_bytes, |_| Ok(()))
    }

    /// Copies `size_bytes` of `from` into a new file `to` (synced) and returns their crc32c.
    fn copy_checked(&self, from: &Path, to: &Path, size_bytes: u64) -> Result<u32> {
        let mut target = self.file_system.create(to)?;
        let crc = self.read_pieces(from, size_bytes, |piece| target.append(piece))?;
        target.sync()?;
        Ok(crc)
    }

    /// Reads `size_bytes` of `path` in pieces, hands each to `each`, and returns their crc32c.
    fn read_pieces(&self, path: &Path, size_bytes: u64, mut each: impl FnMut(&[u8]) -> Result<()>) -> Result<u32> {
        let source = self.file_system.open(path)?;
        let mut crc = 0u32;
        let mut buffer = vec![0u8; READ_PIECE_BYTES.min(size_bytes) as usize];
        let mut offset = 0;
        while offset < size_bytes {
            let piece = &mut buffer[..(size_bytes - offset).min(READ_PIECE_BYTES) as usize];
            source.read_exact_at(offset, piece)?;
            crc = crc32c::crc32c_append(crc, piece);
            each(piece)?;
            offset += piece.len() as u64;
        }
        Ok(crc)
    }

    fn stored_path(&self, id: u64, file: &BackupFile) -> PathBuf {
        match &file.storage {
            Storage::Shared(stored) => self.dir.join(SHARED_DIR).join(stored),
            Storage::Private => self.private_dir(id).join(&file.name),
        }
    }

    fn private_dir(&self, id: u64) -> PathBuf {
        self.dir.join(PRIVATE_DIR).join(format!("{id:06}"))
    }

    fn load(&self, id: u64) -> Result<BackupMeta> {
        let path = self.dir.join(META_DIR).join(meta_file_name(id));
        if !self.file_system.exists(&path) {
            return Err(Error::invalid(format!("no backup {id} in {}", self.dir.display())));
        }
        BackupMeta::decode(&self.file_system.read_all(&path)?, &path)
    }

    /// Every description, by id.
    fn load_all(&self) -> Result<BTreeMap<u64, BackupMeta>> {
        let mut metas = BTreeMap::new();
        for name in self.file_system.list(&self.dir.join(META_DIR))? {
            if let Ok(id) = name.parse::<u64>() {
                metas.insert(id, self.load(id)?);
            }
        }
        Ok(metas)
    }
}

/// Every shared file the descriptions list, by stored name (once per description listing it).
fn shared_files(metas: &BTreeMap<u64, BackupMeta>) -> impl Iterator<Item = (&str, &BackupFile)> {
    metas.values().flat_map(|meta| meta.files.iter()).filter_map(|file| match &file.storage {
        Storage::Shared(stored) => Some((stored.as_str(), file)),
        Storage::Private => None,
    })
}

fn meta_file_name(id: u64) -> String {
    format!("{id:06}")
}
