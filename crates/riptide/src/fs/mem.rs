//! An in-memory [`FileSystem`] that can simulate power loss, for fast and deterministic tests.
//!
//! [`MemFileSystem`] keeps two views of everything: the current state (what a running process
//! sees) and the durable state (what would survive a power cut). A file's content becomes durable
//! when the file is synced; a file name (a create, a rename or a removal) becomes durable when
//! its parent directory is synced with [`FileSystem::sync_dir`]. Directory creation is the one
//! exception: it is treated as durable at once, because the engine creates its directory before
//! anything else and never removes one. [`MemFileSystem::simulate_power_loss`] throws the current
//! state away and rebuilds it from the durable state, optionally keeping a seeded random part of
//! the unsynced appends (the disk may have written some of them) and tearing the last sector.
//!
//! Semantics chosen where a real file system leaves room:
//! - Appends go straight into the current content (there is no user-space buffer), so they are
//!   visible to `file_size`, `read_all` and later `open` calls at once; `flush` does nothing.
//! - `create` on an existing path truncates that same file (the same identity, as `O_TRUNC`
//!   does); the truncation itself becomes durable only when the file is synced.
//! - A reader sees a snapshot of the bytes present when it was opened, also after the file is
//!   appended to, removed, damaged with [`MemFileSystem::corrupt_byte`] or lost to a power cut.
//! - Writing to a removed file (one no name refers to) succeeds and the bytes go nowhere, as
//!   with an unlinked file on Unix.
//! - After a power loss, every operation on a writer opened before it fails with EIO, and
//!   nothing it does reaches the new state (the process that owned it is dead).
//! - `lock` creates an empty lock file if none exists, like the OS implementation; the new name
//!   is not durable until its directory is synced. A power loss releases every lock.
//! - `list` returns the names of files only, not of subdirectories.
//!
//! Concurrency contract: a `MemFileSystem` is a cheap handle; clones share one state behind a
//! mutex, which every operation holds for its whole (short) duration, so operations are atomic
//! with respect to each other. Readers hold their snapshot outside the mutex, so concurrent
//! positional reads never contend. The snapshot is shared copy-on-write: the first append to a
//! file while a reader of it is open copies the file's bytes once.
//!
//! Invariants: every file identity named by the current or the durable namespace has an entry in
//! the file table, and entries no namespace names are dropped at once (their bytes live on only
//! in reader snapshots); a file's durable content is always either a prefix of its current
//! content or held apart after a truncating `create`; the parent of every file name is a known
//! directory or a root.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSyncer, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The size of the region a torn write may damage at the end of a file, one disk sector.
const TORN_SECTOR_BYTES: usize = 512;

/// The OS error code for a generic I/O error, used for writers that outlived a power loss.
const EIO_CODE: i32 = 5;

/// What [`MemFileSystem::simulate_power_loss`] keeps of the bytes appended since a file's last
/// sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerLossMode {
    /// Every file holds exactly its durable bytes: nothing unsynced survives.
    DropUnsynced,
    /// Every file keeps its durable bytes plus a random prefix (possibly empty, possibly all) of
    /// the bytes appended since its last sync, as if the disk had written some of them.
    KeepUnsyncedPrefix {
        /// Seeds the choice of prefix lengths; the same seed on the same state gives the same
        /// result.
        seed: u64,
    },
    /// Like [`PowerLossMode::KeepUnsyncedPrefix`], but when a file keeps some unsynced bytes,
    /// the last 1 to 512 of them (never durable bytes) are replaced by zeros or by random
    /// garbage, as a sector torn by the power cut would be.
    TornTail {
        /// Seeds the prefix lengths, the torn lengths and the garbage.
        seed: u64,
    },
}

/// Identifies a file independently of its names (an inode number). Identities are never reused.
type FileIdentity = u64;

/// What survives a power loss of one file's content.
enum DurableContent {
    /// The durable content is the first `length_bytes` of the current content: the file has only
    /// been appended to since its last sync. Keeping a length instead of a second buffer keeps
    /// append-then-sync loops free of copies.
    Prefix { length_bytes: usize },
    /// A truncating `create` replaced the current content since the last sync, so the durable
    /// content is kept apart.
    Detached(Arc<Vec<u8>>),
}

/// One file's bytes.
struct FileData {
    /// The content a running process sees. Shared copy-on-write with reader snapshots.
    current: Arc<Vec<u8>>,
    /// The content as of the last successful sync.
    durable: DurableContent,
    /// Zeros that `preallocate` wrote past the written bytes and a sync made durable: after a
    /// power loss the file is at least this much longer than its durable bytes, and holds
    /// zeros there wherever no unsynced write survived (the file size and the zero blocks were
    /// durable; the writes into them since were not).
    durable_zero_tail_bytes: usize,
    /// Where the appended bytes end; past it, `current` holds only preallocated zeros.
    written_bytes: usize,
}

impl FileData {
    fn empty() -> FileData {
        FileData::with_content(Vec::new())
    }

    /// A file whose current content is all durable.
    fn with_content(content: Vec<u8>) -> FileData {
        let length_bytes = content.len();
        FileData {
            current: Arc::new(content),
            durable: DurableContent::Prefix { length_bytes },
            durable_zero_tail_bytes: 0,
            written_bytes: length_bytes,
        }
    }

    /// A sync: the first `written_bytes` bytes (everything appended) become durable, and so do
    /// the preallocated zeros past them.
    fn make_written_bytes_durable(&mut self, written_bytes: usize) {
        let written_bytes = written_bytes.min(self.current.len());
        self.durable = DurableContent::Prefix { length_bytes: written_bytes };
        self.durable_zero_tail_bytes = self.current.len() - written_bytes;
    }

    /// The durable bytes followed by the durable zero tail, as one buffer.
    fn durable_bytes_with_zero_tail(&self) -> Vec<u8> {
        let mut bytes = self.durable_bytes().to_vec();
        bytes.resize(bytes.len() + self.durable_zero_tail_bytes, 0);
        bytes
    }

    fn durable_bytes(&self) -> &[u8] {
        match &self.durable {
            DurableContent::Prefix { length_bytes } => &self.current[..*length_bytes],
            DurableContent::Detached(bytes) => bytes,
        }
    }

    /// The bytes appended since the last sync, which a power cut may partly keep. Empty when a
    /// truncating `create` detached the durable content: what the disk would show after a torn
    /// truncate-and-rewrite is not modelled, so only the durable content survives.
    ///
    /// Preallocated zeros are not among them: those a sync covered stay durable where no
    /// append overwrote them (they are not torn), and those written since read as zeros
    /// whether or not they survive.
    fn unsynced_appended_bytes(&self) -> &[u8] {
        match &self.durable {
            DurableContent::Prefix { length_bytes } => {
                let end = self.written_bytes.clamp(*length_bytes, self.current.len());
                &self.current[*length_bytes..end]
            }
            DurableContent::Detached(_) => &[],
        }
    }
}

/// Everything behind the mutex.
struct State {
    /// File contents by identity.
    files: HashMap<FileIdentity, FileData>,
    /// The names a running process sees.
    current_names: BTreeMap<PathBuf, FileIdentity>,
    /// The names that would survive a power cut.
    durable_names: BTreeMap<PathBuf, FileIdentity>,
    /// Every directory created so far (always durable). Roots ("/" and "") are implicit.
    directories: BTreeSet<PathBuf>,
    /// Held locks: path to the identity of the live lock object.
    locks: HashMap<PathBuf, u64>,
    next_file_identity: FileIdentity,
    next_lock_identity: u64,
    /// Counts power losses, so that handles opened before one can tell they are stale.
    epoch: u64,
}

impl State {
    fn new() -> State {
        State {
            files: HashMap::new(),
            current_names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            directories: BTreeSet::new(),
            locks: HashMap::new(),
            next_file_identity: 1,
            next_lock_identity: 1,
            epoch: 0,
        }
    }

    fn directory_exists(&self, path: &Path) -> bool {
        is_root(path) || self.directories.contains(path)
    }

    /// Fails unless the parent of `path` is a directory and `path` itself is not one.
    fn check_file_path(&self, action: &str, path: &Path) -> Result<()> {
        if !self.directory_exists(parent_of(path)) {
            return Err(failure(action, path, io::ErrorKind::NotFound, "parent directory does not exist"));
        }
        if self.directory_exists(path) {
            return Err(failure(action, path, io::ErrorKind::IsADirectory, "path is a directory"));
        }
        Ok(())
    }

    fn current_file(&self, action: &str, path: &Path) -> Result<&FileData> {
        self.current_names
            .get(path)
            .and_then(|identity| self.files.get(identity))
            .ok_or_else(|| failure(action, path, io::ErrorKind::NotFound, "no such file"))
    }

    fn current_file_mut(&mut self, action: &str, path: &Path) -> Result<&mut FileData> {
        match self.current_names.get(path) {
            Some(identity) => match self.files.get_mut(identity) {
                Some(file) => Ok(file),
                None => unreachable!("a current name refers to a file missing from the file table"),
            },
            None => Err(failure(action, path, io::ErrorKind::NotFound, "no such file")),
        }
    }

    /// Creates an empty file under `path` (which must not be named yet) in the current namespace.
    fn insert_new_file(&mut self, path: PathBuf) -> FileIdentity {
        let identity = self.next_file_identity;
        self.next_file_identity += 1;
        self.files.insert(identity, FileData::empty());
        self.current_names.insert(path, identity);
        identity
    }

    /// Drops the file if no name in either namespace refers to it any more. Its bytes then live
    /// on only in reader snapshots, and writers still holding it write into nothing.
    fn forget_if_unnamed(&mut self, identity: FileIdentity) {
        let named = self.current_names.values().chain(self.durable_names.values()).any(|&other| other == identity);
        if !named {
            self.files.remove(&identity);
        }
    }

    /// Drops every file that no name refers to.
    fn forget_unnamed_files(&mut self) {
        let named: BTreeSet<FileIdentity> =
            self.current_names.values().chain(self.durable_names.values()).copied().collect();
        self.files.retain(|identity, _| named.contains(identity));
    }

    /// Names of the files directly inside `dir` in one namespace, sorted.
    fn names_in(names: &BTreeMap<PathBuf, FileIdentity>, dir: &Path) -> Vec<String> {
        let mut found: Vec<String> = names
            .keys()
            .filter(|path| parent_of(path) == dir)
            .filter_map(|path| path.file_name().and_then(|name| name.to_str()).map(str::to_string))
            .collect();
        found.sort();
        found
    }
}

/// Builds an I/O error with the same context style as the OS file system.
fn failure(action: &str, path: &Path, kind: io::ErrorKind, message: &str) -> Error {
    Error::io(format!("{action} {}", path.display()), io::Error::new(kind, message.to_string()))
}

/// The error for any use of a writer opened before a power loss.
fn stale_handle(action: &str, path: &Path) -> Error {
    Error::io(
        format!("{action} {}: the handle was opened before a simulated power loss", path.display()),
        io::Error::from_raw_os_error(EIO_CODE),
    )
}

/// Removes `.` components and redundant separators, so that `db/./x` and `db//x` name `db/x`.
/// `..` is kept as is: the engine never uses it, and resolving it needs no support here.
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|component| !matches!(component, Component::CurDir)).collect()
}

/// True for "/" and "" (the current directory), which always exist.
fn is_root(path: &Path) -> bool {
    path.parent().is_none()
}

/// The directory holding `path`; "" for a bare file name.
fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// A small deterministic generator (SplitMix64). The library cannot depend on `rand`, and power
/// loss only needs reproducible, well-mixed numbers, not cryptographic ones.
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A number in `0..=maximum`. The modulo bias is irrelevant for the small ranges used here.
    fn up_to(&mut self, maximum: usize) -> usize {
        match (maximum as u64).checked_add(1) {
            Some(range) => (self.next_u64() % range) as usize,
            // The range covers every u64, so any draw is in it.
            None => self.next_u64() as usize,
        }
    }
}

/// The content a file shows after a power loss in `mode`, drawing randomness from `generator`.
fn content_after_power_loss(file: &FileData, mode: PowerLossMode, generator: &mut SplitMix64) -> Vec<u8> {
    let mut content = content_after_power_loss_without_zero_tail(file, mode, generator);
    // The durable size holds: what no surviving write covered still reads as the zeros that
    // preallocation made durable.
    let durable_size_bytes = file.durable_bytes().len() + file.durable_zero_tail_bytes;
    if content.len() < durable_size_bytes {
        content.resize(durable_size_bytes, 0);
    }
    content
}

/// The durable bytes plus, by `mode`, part of the unsynced ones.
fn content_after_power_loss_without_zero_tail(
    file: &FileData,
    mode: PowerLossMode,
    generator: &mut SplitMix64,
) -> Vec<u8> {
    let mut content = file.durable_bytes().to_vec();
    let unsynced = file.unsynced_appended_bytes();
    if unsynced.is_empty() {
        return content;
    }
    match mode {
        PowerLossMode::DropUnsynced => {}
        PowerLossMode::KeepUnsyncedPrefix { .. } => {
            let kept_bytes = generator.up_to(unsynced.len());
            content.extend_from_slice(&unsynced[..kept_bytes]);
        }
        PowerLossMode::TornTail { .. } => {
            let kept_bytes = generator.up_to(unsynced.len());
            content.extend_from_slice(&unsynced[..kept_bytes]);
            if kept_bytes > 0 {
                let torn_bytes = 1 + generator.up_to(kept_bytes.min(TORN_SECTOR_BYTES) - 1);
                let torn_start = content.len() - torn_bytes;
                let use_zeros = generator.next_u64() & 1 == 0;
                for byte in &mut content[torn_start..] {
                    *byte = if use_zeros { 0 } else { generator.next_u64() as u8 };
                }
            }
        }
    }
    content
}

/// An in-memory file system with power-loss simulation. Clones share the same files.
#[derive(Clone)]
pub struct MemFileSystem {
    state: Arc<Mutex<State>>,
}

impl Default for MemFileSystem {
    fn default() -> MemFileSystem {
        MemFileSystem::new()
    }
}

impl fmt::Debug for MemFileSystem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        formatter
            .debug_struct("MemFileSystem")
            .field("files", &state.current_names.len())
            .field("durable_files", &state.durable_names.len())
            .field("power_losses", &state.epoch)
            .finish_non_exhaustive()
    }
}

impl MemFileSystem {
    /// Creates an empty file system. Only the roots ("/" and "") exist as directories.
    pub fn new() -> MemFileSystem {
        MemFileSystem { state: Arc::new(Mutex::new(State::new())) }
    }

    /// Replaces the state with what a machine would find after a power cut: the namespace
    /// reverts to the durable namespace, every surviving file to its durable content (plus, by
    /// `mode`, part of its unsynced appends), and every lock is released. Files whose name was
    /// never made durable disappear even if their content was synced. Readers opened before keep
    /// their snapshots; writers opened before fail with EIO from now on.
    pub fn simulate_power_loss(&self, mode: PowerLossMode) {
        let seed = match mode {
            PowerLossMode::DropUnsynced => 0,
            PowerLossMode::KeepUnsyncedPrefix { seed } | PowerLossMode::TornTail { seed } => seed,
        };
        let mut generator = SplitMix64::new(seed);
        let mut state = self.state.lock();
        let mut surviving: HashMap<FileIdentity, FileData> = HashMap::new();
        // The durable namespace is walked in path order, so the random draws, and therefore the
        // result, depend only on the state and the seed. A file durable under two names (a
        // cross-directory rename synced on one side only) is rebuilt once and shared.
        for identity in state.durable_names.values() {
            if surviving.contains_key(identity) {
                continue;
            }
            let Some(file) = state.files.get(identity) else {
                unreachable!("a durable name refers to a file missing from the file table");
            };
            let content = content_after_power_loss(file, mode, &mut generator);
            surviving.insert(*identity, FileData::with_content(content));
        }
        state.files = surviving;
        state.current_names = state.durable_names.clone();
        state.locks.clear();
        state.epoch += 1;
    }

    /// Flips every bit of the byte at `offset` of a file, in both its current and its durable
    /// content (it models damage already on the medium). Readers already open keep their
    /// snapshots and do not see the damage.
    pub fn corrupt_byte(&self, path: impl AsRef<Path>, offset: u64) -> Result<()> {
        let path = normalize(path.as_ref());
        let mut state = self.state.lock();
        let file = state.current_file_mut("corrupt", &path)?;
        let position = usize::try_from(offset).ok().filter(|&position| position < file.current.len());
        let Some(position) = position else {
            return Err(Error::invalid(format!(
                "cannot corrupt offset {offset} of {}: the file holds {} bytes",
                path.display(),
                file.current.len()
            )));
        };
        Arc::make_mut(&mut file.current)[position] ^= 0xff;
        // A prefix durable content shares the current buffer and is already damaged.
        if let DurableContent::Detached(durable) = &mut file.durable {
            if let Some(byte) = Arc::make_mut(durable).get_mut(position) {
                *byte ^= 0xff;
            }
        }
        Ok(())
    }

    /// Shortens a file to `length_bytes`, in both its current and its durable content (it models
    /// damage already on the medium, such as a lost tail). Growing a file is refused.
    pub fn truncate(&self, path: impl AsRef<Path>, length_bytes: u64) -> Result<()> {
        let path = normalize(path.as_ref());
        let mut state = self.state.lock();
        let file = state.current_file_mut("truncate", &path)?;
        let new_length = usize::try_from(length_bytes).ok().filter(|&length| length <= file.current.len());
        let Some(new_length) = new_length else {
            return Err(Error::invalid(format!(
                "cannot truncate {} to {length_bytes} bytes: the file holds only {} bytes",
                path.display(),
                file.current.len()
            )));
        };
        let durable_size_bytes = (file.durable_bytes().len() + file.durable_zero_tail_bytes).min(new_length);
        Arc::make_mut(&mut file.current).truncate(new_length);
        file.written_bytes = file.written_bytes.min(new_length);
        match &mut file.durable {
            DurableContent::Prefix { length_bytes } => *length_bytes = (*length_bytes).min(new_length),
            DurableContent::Detached(durable) => {
                if durable.len() > new_length {
                    Arc::make_mut(durable).truncate(new_length);
                }
            }
        }
        file.durable_zero_tail_bytes = durable_size_bytes - file.durable_bytes().len();
        Ok(())
    }

    /// The sorted names of the files directly inside `dir` that a running process sees; empty
    /// when there are none or the directory does not exist.
    pub fn file_names(&self, dir: impl AsRef<Path>) -> Vec<String> {
        let dir = normalize(dir.as_ref());
        State::names_in(&self.state.lock().current_names, &dir)
    }

    /// The sorted names of the files directly inside `dir` that would survive a power cut now.
    pub fn durable_file_names(&self, dir: impl AsRef<Path>) -> Vec<String> {
        let dir = normalize(dir.as_ref());
        State::names_in(&self.state.lock().durable_names, &dir)
    }

    /// The total current size of all files a running process sees, each file counted once.
    pub fn total_bytes(&self) -> u64 {
        let state = self.state.lock();
        let identities: BTreeSet<FileIdentity> = state.current_names.values().copied().collect();
        identities.iter().filter_map(|identity| state.files.get(identity)).map(|file| file.current.len() as u64).sum()
    }
}

/// Syncs one file identity of a [`MemFileSystem`] beside its writer (see
/// [`WritableFile::syncer`]). Appends reach the shared state at once (nothing is buffered), so a
/// sync covers every byte written before it took the state's lock.
struct MemFileSyncer {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    identity: FileIdentity,
    epoch: u64,
}

impl FileSyncer for MemFileSyncer {
    fn sync(&self) -> Result<()> {
        let mut state = self.state.lock();
        if state.epoch != self.epoch {
            return Err(stale_handle("sync", &self.path));
        }
        if let Some(file) = state.files.get_mut(&self.identity) {
            let written_bytes = file.written_bytes;
            file.make_written_bytes_durable(written_bytes);
        }
        Ok(())
    }
}

/// A writer appending to one file identity of a [`MemFileSystem`].
struct MemWritableFile {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    identity: FileIdentity,
    /// The power-loss epoch the writer was opened in; any other epoch makes it stale.
    epoch: u64,
    length_bytes: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut state = self.state.lock();
        if state.epoch != self.epoch {
            return Err(stale_handle("append to", &self.path));
        }
        // A file no name refers to any more was removed: its bytes go nowhere.
        if let Some(file) = state.files.get_mut(&self.identity) {
            let current = Arc::make_mut(&mut file.current);
            // Appends overwrite preallocated zeros first, then extend the file.
            let start = (self.length_bytes as usize).min(current.len());
            let overwritten = (current.len() - start).min(data.len());
            current[start..start + overwritten].copy_from_slice(&data[..overwritten]);
            current.extend_from_slice(&data[overwritten..]);
            file.written_bytes = file.written_bytes.max(start + data.len());
        }
        self.length_bytes += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let state = self.state.lock();
        if state.epoch != self.epoch {
            return Err(stale_handle("flush", &self.path));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut state = self.state.lock();
        if state.epoch != self.epoch {
            return Err(stale_handle("sync", &self.path));
        }
        if let Some(file) = state.files.get_mut(&self.identity) {
            file.make_written_bytes_durable(self.length_bytes as usize);
        }
        Ok(())
    }

    fn syncer(&mut self) -> Option<Arc<dyn FileSyncer>> {
        Some(Arc::new(MemFileSyncer {
            state: Arc::clone(&self.state),
            path: self.path.clone(),
            identity: self.identity,
            epoch: self.epoch,
        }))
    }

    fn len(&self) -> u64 {
        self.length_bytes
    }

    fn preallocate(&mut self, total_bytes: u64) -> Result<()> {
        let mut state = self.state.lock();
        if state.epoch != self.epoch {
            return Err(stale_handle("preallocate", &self.path));
        }
        let total_bytes = usize::try_from(total_bytes)
            .map_err(|_| Error::invalid(format!("cannot preallocate {total_bytes} bytes in memory")))?;
        if let Some(file) = state.files.get_mut(&self.identity) {
            if file.current.len() < total_bytes {
                Arc::make_mut(&mut file.current).resize(total_bytes, 0);
            }
        }
        Ok(())
    }
}

/// A reader over a snapshot of a file's bytes taken when it was opened.
struct MemRandomAccessFile {
    path: PathBuf,
    bytes: Arc<Vec<u8>>,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| start.checked_add(buf.len()).map(|end| start..end))
            .filter(|range| range.end <= self.bytes.len());
        match range {
            Some(range) => {
                buf.copy_from_slice(&self.bytes[range]);
                Ok(())
            }
            None => Err(failure(
                "read",
                &self.path,
                io::ErrorKind::UnexpectedEof,
                &format!("{} bytes at offset {offset} reach past the end ({} bytes)", buf.len(), self.bytes.len()),
            )),
        }
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// A held lock; dropping it releases the path unless a power loss already did.
struct MemFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    identity: u64,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        // After a power loss the path may be held by a newer lock, which must stay held.
        if state.locks.get(&self.path) == Some(&self.identity) {
            state.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let path = normalize(path);
        let mut state = self.state.lock();
        state.check_file_path("create", &path)?;
        let identity = match state.current_names.get(&path).copied() {
            Some(identity) => {
                if let Some(file) = state.files.get_mut(&identity) {
                    // Truncating keeps the identity; the old content stays durable until a sync.
                    if let DurableContent::Prefix { length_bytes } = file.durable {
                        let durable = if length_bytes == file.current.len() {
                            Arc::clone(&file.current)
                        } else {
                            Arc::new(file.durable_bytes_with_zero_tail())
                        };
                        file.durable = DurableContent::Detached(durable);
                        file.durable_zero_tail_bytes = 0;
                    }
                    file.current = Arc::new(Vec::new());
                    file.written_bytes = 0;
                }
                identity
            }
            None => state.insert_new_file(path.clone()),
        };
        let epoch = state.epoch;
        Ok(Box::new(MemWritableFile { state: Arc::clone(&self.state), path, identity, epoch, length_bytes: 0 }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let path = normalize(path);
        let state = self.state.lock();
        let bytes = Arc::clone(&state.current_file("open", &path)?.current);
        Ok(Arc::new(MemRandomAccessFile { path, bytes }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let from = normalize(from);
        let to = normalize(to);
        let mut state = self.state.lock();
        let Some(&identity) = state.current_names.get(&from) else {
            return Err(failure("rename", &from, io::ErrorKind::NotFound, "no such file"));
        };
        state.check_file_path("rename to", &to)?;
        if from == to {
            return Ok(());
        }
        state.current_names.remove(&from);
        if let Some(replaced) = state.current_names.insert(to, identity) {
            state.forget_if_unnamed(replaced);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let path = normalize(path);
        let mut state = self.state.lock();
        let Some(identity) = state.current_names.remove(&path) else {
            return Err(failure("remove", &path, io::ErrorKind::NotFound, "no such file"));
        };
        state.forget_if_unnamed(identity);
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if is_root(&path) || !state.directories.contains(&path) {
            return Err(failure("remove directory", &path, io::ErrorKind::NotFound, "no such directory"));
        }
        let holds_something = state.current_names.keys().any(|name| name.parent() == Some(path.as_path()))
            || state.directories.iter().any(|directory| directory.parent() == Some(path.as_path()));
        if holds_something {
            return Err(failure("remove directory", &path, io::ErrorKind::DirectoryNotEmpty, "directory not empty"));
        }
        state.directories.remove(&path);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let path = normalize(path);
        let mut state = self.state.lock();
        let missing: Vec<PathBuf> =
            path.ancestors().filter(|ancestor| !state.directory_exists(ancestor)).map(Path::to_path_buf).collect();
        for directory in &missing {
            if state.current_names.contains_key(directory) {
                return Err(failure(
                    "create directory",
                    &path,
                    io::ErrorKind::NotADirectory,
                    &format!("{} is a file", directory.display()),
                ));
            }
        }
        state.directories.extend(missing);
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let dir = normalize(dir);
        let state = self.state.lock();
        if !state.directory_exists(&dir) {
            return Err(failure("list", &dir, io::ErrorKind::NotFound, "no such directory"));
        }
        Ok(State::names_in(&state.current_names, &dir))
    }

    fn exists(&self, path: &Path) -> bool {
        let path = normalize(path);
        let state = self.state.lock();
        state.current_names.contains_key(&path) || state.directory_exists(&path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let path = normalize(path);
        let state = self.state.lock();
        Ok(state.current_file("stat", &path)?.current.len() as u64)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        let mut state = self.state.lock();
        if !state.directory_exists(&dir) {
            return Err(failure("sync directory", &dir, io::ErrorKind::NotFound, "no such directory"));
        }
        let State { current_names, durable_names, .. } = &mut *state;
        durable_names.retain(|path, _| parent_of(path) != dir);
        for (path, identity) in current_names.iter() {
            if parent_of(path) == dir {
                durable_names.insert(path.clone(), *identity);
            }
        }
        state.forget_unnamed_files();
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let path = normalize(path);
        let mut state = self.state.lock();
        if state.locks.contains_key(&path) {
            return Err(Error::Busy(format!("{} is locked: the database is open in another handle", path.display())));
        }
        if !state.current_names.contains_key(&path) {
            state.check_file_path("open lock file", &path)?;
            state.insert_new_file(path.clone());
        }
        let identity = state.next_lock_identity;
        state.next_lock_identity += 1;
        state.locks.insert(path.clone(), identity);
        Ok(Box::new(MemFileLock { state: Arc::clone(&self.state), path, identity }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    fn file(name: &str) -> PathBuf {
        dir().join(name)
    }

    fn new_fs() -> MemFileSystem {
        let fs = MemFileSystem::new();
        fs.create_dir_all(dir()).unwrap();
        fs
    }

    /// Writes `synced` and syncs it, appends `unsynced` without syncing, and makes the name
    /// durable.
    fn write_file(fs: &MemFileSystem, name: &str, synced: &[u8], unsynced: &[u8]) {
        let mut writer = fs.create(&file(name)).unwrap();
        writer.append(synced).unwrap();
        writer.sync().unwrap();
        writer.append(unsynced).unwrap();
        fs.sync_dir(dir()).unwrap();
    }

    fn pattern(length_bytes: usize, salt: u8) -> Vec<u8> {
        (0..length_bytes).map(|index| (index as u8).wrapping_mul(31).wrapping_add(salt)).collect()
    }

    #[test]
    fn write_read_and_sizes() {
        let fs = new_fs();
        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"hello ").unwrap();
        writer.append(b"world").unwrap();
        writer.flush().unwrap();
        assert_eq!(writer.len(), 11);
        assert_eq!(fs.file_size(&file("a")).unwrap(), 11);
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"hello world");
        let reader = fs.open(&file("a")).unwrap();
        let mut buffer = [0u8; 5];
        reader.read_exact_at(6, &mut buffer).unwrap();
        assert_eq!(&buffer, b"world");
        assert_eq!(fs.total_bytes(), 11);
        assert!(fs.exists(&file("a")));
        assert!(fs.exists(dir()));
        assert!(!fs.exists(&file("b")));
        assert!(fs.file_size(&file("b")).is_err());
    }

    #[test]
    fn only_an_empty_directory_is_removed() {
        let fs = new_fs();
        fs.create_dir_all(Path::new("/db/sub/deeper")).unwrap();
        fs.create(&file("a")).unwrap();
        assert!(fs.remove_dir(dir()).is_err(), "holds a file and a directory");
        assert!(fs.remove_dir(Path::new("/db/sub")).is_err(), "holds a directory");
        fs.remove_dir(Path::new("/db/sub/deeper")).unwrap();
        fs.remove_dir(Path::new("/db/sub")).unwrap();
        assert!(!fs.exists(Path::new("/db/sub")));
        assert!(fs.remove_dir(Path::new("/db/sub")).is_err(), "already gone");
        assert!(fs.remove_dir(Path::new("/")).is_err(), "the root stays");
        fs.remove(&file("a")).unwrap();
        fs.remove_dir(dir()).unwrap();
        assert!(!fs.exists(dir()));
    }

    #[test]
    fn paths_are_normalized() {
        let fs = new_fs();
        fs.create(Path::new("/db/./x")).unwrap().append(b"1").unwrap();
        assert!(fs.exists(Path::new("/db//x")));
        assert_eq!(fs.list(Path::new("/db/")).unwrap(), vec!["x"]);
    }

    #[test]
    fn reader_sees_snapshot_at_open() {
        let fs = new_fs();
        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"abc").unwrap();
        let reader = fs.open(&file("a")).unwrap();
        writer.append(b"def").unwrap();
        assert_eq!(reader.len(), 3);
        let mut buffer = [0u8; 4];
        assert!(reader.read_exact_at(0, &mut buffer).is_err());
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"abcdef");
    }

    #[test]
    fn reads_past_end_are_unexpected_eof() {
        let fs = new_fs();
        fs.create(&file("a")).unwrap().append(b"0123456789").unwrap();
        let reader = fs.open(&file("a")).unwrap();
        let mut buffer = [0u8; 4];
        reader.read_exact_at(6, &mut buffer).unwrap();
        for offset in [7, 10, 11, u64::MAX] {
            match reader.read_exact_at(offset, &mut buffer) {
                Err(Error::Io { source, .. }) => assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof),
                other => panic!("expected UnexpectedEof at {offset}, got {other:?}"),
            }
        }
        reader.read_exact_at(10, &mut []).unwrap();
    }

    #[test]
    fn readers_survive_removal() {
        let fs = new_fs();
        write_file(&fs, "a", b"keep me", b"");
        let reader = fs.open(&file("a")).unwrap();
        fs.remove(&file("a")).unwrap();
        fs.sync_dir(dir()).unwrap();
        assert!(!fs.exists(&file("a")));
        assert!(fs.open(&file("a")).is_err());
        let mut buffer = [0u8; 7];
        reader.read_exact_at(0, &mut buffer).unwrap();
        assert_eq!(&buffer, b"keep me");
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        reader.read_exact_at(0, &mut buffer).unwrap();
        assert_eq!(&buffer, b"keep me");
        assert_eq!(fs.total_bytes(), 0);
    }

    #[test]
    fn writing_to_a_removed_file_goes_nowhere() {
        let fs = new_fs();
        let mut writer = fs.create(&file("a")).unwrap();
        fs.remove(&file("a")).unwrap();
        writer.append(b"lost").unwrap();
        writer.sync().unwrap();
        assert_eq!(writer.len(), 4);
        assert!(fs.list(dir()).unwrap().is_empty());
        assert_eq!(fs.total_bytes(), 0);
    }

    #[test]
    fn missing_parent_and_directory_conflicts_fail() {
        let fs = new_fs();
        assert!(fs.create(Path::new("/nowhere/a")).is_err());
        assert!(fs.create(dir()).is_err());
        assert!(fs.list(Path::new("/nowhere")).is_err());
        assert!(fs.sync_dir(Path::new("/nowhere")).is_err());
        fs.create(&file("plain")).unwrap();
        assert!(fs.create_dir_all(&file("plain").join("sub")).is_err());
        // Creating a directory again, or a root, is fine.
        fs.create_dir_all(dir()).unwrap();
        fs.create_dir_all(Path::new("/")).unwrap();
        fs.create(Path::new("/at_root")).unwrap();
        fs.create(Path::new("relative")).unwrap();
        assert_eq!(fs.list(Path::new("")).unwrap(), vec!["relative"]);
    }

    #[test]
    fn list_returns_sorted_direct_children() {
        let fs = new_fs();
        fs.create_dir_all(&file("sub")).unwrap();
        for name in ["c", "a", "b"] {
            fs.create(&file(name)).unwrap();
        }
        fs.create(&file("sub").join("deep")).unwrap();
        assert_eq!(fs.list(dir()).unwrap(), vec!["a", "b", "c"]);
        assert_eq!(fs.file_names(dir()), vec!["a", "b", "c"]);
        assert_eq!(fs.list(&file("sub")).unwrap(), vec!["deep"]);
        assert!(fs.file_names("/missing").is_empty());
    }

    #[test]
    fn rename_replaces_target() {
        let fs = new_fs();
        fs.create(&file("old")).unwrap().append(b"old").unwrap();
        fs.create(&file("new")).unwrap().append(b"new").unwrap();
        fs.rename(&file("new"), &file("old")).unwrap();
        assert_eq!(fs.read_all(&file("old")).unwrap(), b"new");
        assert!(!fs.exists(&file("new")));
        assert_eq!(fs.total_bytes(), 3);
        assert!(fs.rename(&file("missing"), &file("x")).is_err());
        fs.rename(&file("old"), &file("old")).unwrap();
        assert_eq!(fs.read_all(&file("old")).unwrap(), b"new");
    }

    #[test]
    fn preallocated_zeros_are_overwritten_in_place_and_keep_the_durable_size() {
        let fs = new_fs();
        let mut writer = fs.create(&file("log")).unwrap();
        writer.append(b"first").unwrap();
        writer.preallocate(16).unwrap();
        // Preallocating less than the file holds changes nothing.
        writer.preallocate(8).unwrap();
        assert_eq!(fs.read_all(&file("log")).unwrap(), b"first\0\0\0\0\0\0\0\0\0\0\0");
        writer.append(b"-second").unwrap();
        assert_eq!(writer.len(), 12);
        assert_eq!(fs.read_all(&file("log")).unwrap(), b"first-second\0\0\0\0");
        writer.sync().unwrap();
        fs.sync_dir(dir()).unwrap();
        // Unsynced appends into the durable zeros, and past them.
        writer.append(b"+third+beyond").unwrap();
        assert_eq!(fs.read_all(&file("log")).unwrap(), b"first-second+third+beyond");
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        // The durable size (16) holds, with the zeros where the unsynced write went.
        assert_eq!(fs.read_all(&file("log")).unwrap(), b"first-second\0\0\0\0");
        // A prefix of the unsynced bytes may survive; the rest of the durable size reads as zeros.
        let fs = new_fs();
        let mut writer = fs.create(&file("log")).unwrap();
        writer.append(b"first").unwrap();
        writer.preallocate(64).unwrap();
        writer.sync().unwrap();
        fs.sync_dir(dir()).unwrap();
        writer.append(&pattern(100, 3)).unwrap();
        fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 7 });
        let content = fs.read_all(&file("log")).unwrap();
        assert!(content.len() >= 64 && content.len() <= 105, "{} bytes", content.len());
        assert_eq!(&content[..5], b"first");
        let kept =
            content[5..].iter().zip(pattern(100, 3)).take_while(|(stored, written)| **stored == *written).count();
        assert!(content[5 + kept..].iter().all(|&byte| byte == 0), "garbage after the kept prefix");
    }

    #[test]
    fn power_loss_drop_unsynced_keeps_exactly_durable_bytes() {
        let fs = new_fs();
        write_file(&fs, "a", b"durable", b" unsynced");
        write_file(&fs, "b", b"", b"all unsynced");
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"durable unsynced");
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"durable");
        assert_eq!(fs.read_all(&file("b")).unwrap(), b"");
        assert_eq!(fs.list(dir()).unwrap(), vec!["a", "b"]);
    }

    #[test]
    fn power_loss_keep_unsynced_prefix_is_seeded_and_deterministic() {
        let durable = pattern(100, 1);
        let unsynced = pattern(1000, 2);
        let mut kept_lengths = BTreeSet::new();
        for seed in 0..32 {
            let mut results = Vec::new();
            for _ in 0..2 {
                let fs = new_fs();
                write_file(&fs, "a", &durable, &unsynced);
                write_file(&fs, "b", &durable, &unsynced);
                fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed });
                results.push((fs.read_all(&file("a")).unwrap(), fs.read_all(&file("b")).unwrap()));
            }
            assert_eq!(results[0], results[1], "seed {seed} is not deterministic");
            for content in [&results[0].0, &results[0].1] {
                assert!(content.len() >= durable.len() && content.len() <= durable.len() + unsynced.len());
                assert_eq!(&content[..durable.len()], &durable[..]);
                assert_eq!(&content[durable.len()..], &unsynced[..content.len() - durable.len()]);
                kept_lengths.insert(content.len());
            }
        }
        assert!(kept_lengths.len() > 16, "prefix lengths should vary: {kept_lengths:?}");
    }

    #[test]
    fn power_loss_torn_tail_damages_only_the_last_kept_unsynced_bytes() {
        let durable = pattern(700, 3);
        let unsynced = pattern(3000, 4);
        let mut saw_damage = false;
        for seed in 0..32 {
            let mut results = Vec::new();
            for _ in 0..2 {
                let fs = new_fs();
                write_file(&fs, "a", &durable, &unsynced);
                fs.simulate_power_loss(PowerLossMode::TornTail { seed });
                results.push(fs.read_all(&file("a")).unwrap());
            }
            assert_eq!(results[0], results[1], "seed {seed} is not deterministic");
            let content = &results[0];
            assert!(content.len() >= durable.len() && content.len() <= durable.len() + unsynced.len());
            assert_eq!(&content[..durable.len()], &durable[..], "durable bytes must never be torn");
            let kept = &content[durable.len()..];
            let intact_bytes = kept.len().saturating_sub(TORN_SECTOR_BYTES);
            assert_eq!(&kept[..intact_bytes], &unsynced[..intact_bytes]);
            if kept != &unsynced[..kept.len()] {
                saw_damage = true;
            }
        }
        assert!(saw_damage, "some seed should tear the tail");
    }

    #[test]
    fn power_loss_keeps_synced_files_whole_in_every_mode() {
        for mode in [
            PowerLossMode::DropUnsynced,
            PowerLossMode::KeepUnsyncedPrefix { seed: 7 },
            PowerLossMode::TornTail { seed: 7 },
        ] {
            let fs = new_fs();
            write_file(&fs, "a", b"all synced", b"");
            fs.simulate_power_loss(mode);
            assert_eq!(fs.read_all(&file("a")).unwrap(), b"all synced", "{mode:?}");
        }
    }

    #[test]
    fn create_without_sync_dir_disappears() {
        let fs = new_fs();
        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"synced data").unwrap();
        writer.sync().unwrap();
        assert_eq!(fs.durable_file_names(dir()), Vec::<String>::new());
        fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 1 });
        assert!(!fs.exists(&file("a")));
        assert!(fs.list(dir()).unwrap().is_empty());
        // Directories survive: their creation is durable at once.
        assert!(fs.exists(dir()));
    }

    #[test]
    fn rename_without_sync_dir_reverts() {
        let fs = new_fs();
        write_file(&fs, "temp", b"payload", b"");
        write_file(&fs, "target", b"previous", b"");
        fs.rename(&file("temp"), &file("target")).unwrap();
        assert_eq!(fs.read_all(&file("target")).unwrap(), b"payload");
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.list(dir()).unwrap(), vec!["target", "temp"]);
        assert_eq!(fs.read_all(&file("target")).unwrap(), b"previous");
        assert_eq!(fs.read_all(&file("temp")).unwrap(), b"payload");

        fs.rename(&file("temp"), &file("target")).unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.list(dir()).unwrap(), vec!["target"]);
        assert_eq!(fs.read_all(&file("target")).unwrap(), b"payload");
    }

    #[test]
    fn remove_without_sync_dir_reappears() {
        let fs = new_fs();
        write_file(&fs, "a", b"still here", b"");
        fs.remove(&file("a")).unwrap();
        assert!(!fs.exists(&file("a")));
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"still here");

        fs.remove(&file("a")).unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert!(!fs.exists(&file("a")));
    }

    #[test]
    fn sync_dir_only_affects_its_own_directory() {
        let fs = new_fs();
        fs.create_dir_all(Path::new("/other")).unwrap();
        fs.create(&file("a")).unwrap();
        fs.create(Path::new("/other/b")).unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.list(dir()).unwrap(), vec!["a"]);
        assert!(fs.list(Path::new("/other")).unwrap().is_empty());
    }

    #[test]
    fn a_syncer_makes_what_was_appended_before_it_durable_while_the_writer_goes_on() {
        let fs = new_fs();
        let mut writer = fs.create(&file("log")).unwrap();
        fs.sync_dir(dir()).unwrap();
        let syncer = writer.syncer().expect("the in-memory file system offers syncers");
        writer.append(b"synced").unwrap();
        syncer.sync().unwrap();
        writer.append(b"-not-synced").unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.read_all(&file("log")).unwrap(), b"synced");
        // A syncer from before the power loss is stale, like its writer.
        assert!(syncer.sync().is_err());
    }

    #[test]
    fn a_syncer_keeps_synced_preallocated_zeros_like_the_writers_sync() {
        let fs = new_fs();
        let mut writer = fs.create(&file("log")).unwrap();
        fs.sync_dir(dir()).unwrap();
        writer.append(b"abc").unwrap();
        writer.preallocate(16).unwrap();
        let syncer = writer.syncer().unwrap();
        syncer.sync().unwrap();
        writer.append(b"def").unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        let mut expected = b"abc".to_vec();
        expected.resize(16, 0);
        assert_eq!(fs.read_all(&file("log")).unwrap(), expected);
    }

    #[test]
    fn truncating_create_is_durable_only_after_sync() {
        let fs = new_fs();
        write_file(&fs, "a", b"old content", b"");
        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"new").unwrap();
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"new");
        fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 3 });
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"old content");

        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"new").unwrap();
        writer.sync().unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"new");
    }

    #[test]
    fn writers_from_before_power_loss_fail_and_change_nothing() {
        let fs = new_fs();
        let mut writer = fs.create(&file("a")).unwrap();
        writer.append(b"durable").unwrap();
        writer.sync().unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        for result in [writer.append(b"ghost"), writer.flush(), writer.sync()] {
            match result {
                Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(EIO_CODE)),
                other => panic!("expected EIO, got {other:?}"),
            }
        }
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"durable");
        fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 9 });
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"durable");
    }

    #[test]
    fn lock_is_exclusive_and_released_on_drop() {
        let fs = new_fs();
        let lock_path = file("LOCK");
        let lock = fs.lock(&lock_path).unwrap();
        assert!(fs.exists(&lock_path));
        match fs.lock(&lock_path) {
            Err(Error::Busy(_)) => {}
            Err(other) => panic!("expected Busy, got {other:?}"),
            Ok(_) => panic!("expected Busy, got a second lock"),
        }
        // A clone shares the state, so it sees the lock too.
        assert!(matches!(fs.clone().lock(&lock_path), Err(Error::Busy(_))));
        let other = fs.lock(&file("OTHER")).unwrap();
        drop(lock);
        let again = fs.lock(&lock_path).unwrap();
        drop(again);
        drop(other);
        assert!(fs.lock(Path::new("/nowhere/LOCK")).is_err());
    }

    #[test]
    fn power_loss_releases_locks_without_freeing_newer_ones() {
        let fs = new_fs();
        let lock_path = file("LOCK");
        let stale = fs.lock(&lock_path).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        let fresh = fs.lock(&lock_path).unwrap();
        drop(stale);
        assert!(matches!(fs.lock(&lock_path), Err(Error::Busy(_))));
        drop(fresh);
        fs.lock(&lock_path).unwrap();
    }

    #[test]
    fn corrupt_byte_damages_current_and_durable_content() {
        let fs = new_fs();
        write_file(&fs, "a", b"abcdef", b"gh");
        let reader = fs.open(&file("a")).unwrap();
        fs.corrupt_byte(file("a"), 1).unwrap();
        fs.corrupt_byte(file("a"), 7).unwrap();
        let content = fs.read_all(&file("a")).unwrap();
        assert_eq!(content[1], b'b' ^ 0xff);
        assert_eq!(content[7], b'h' ^ 0xff);
        let mut buffer = [0u8; 2];
        reader.read_exact_at(0, &mut buffer).unwrap();
        assert_eq!(&buffer, b"ab", "an open reader keeps its snapshot");
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.read_all(&file("a")).unwrap(), [b'a', b'b' ^ 0xff, b'c', b'd', b'e', b'f']);
        assert!(fs.corrupt_byte(file("a"), 6).is_err());
        assert!(fs.corrupt_byte(file("missing"), 0).is_err());
    }

    #[test]
    fn corrupt_byte_reaches_detached_durable_content() {
        let fs = new_fs();
        write_file(&fs, "a", b"old content", b"");
        fs.create(&file("a")).unwrap().append(b"new").unwrap();
        fs.corrupt_byte(file("a"), 0).unwrap();
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(
            fs.read_all(&file("a")).unwrap(),
            [b'o' ^ 0xff, b'l', b'd', b' ', b'c', b'o', b'n', b't', b'e', b'n', b't']
        );
    }

    #[test]
    fn truncate_shortens_current_and_durable_content() {
        let fs = new_fs();
        write_file(&fs, "a", b"0123456789", b"abc");
        fs.truncate(file("a"), 12).unwrap();
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"0123456789ab");
        fs.truncate(file("a"), 4).unwrap();
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"0123");
        assert!(fs.truncate(file("a"), 5).is_err());
        fs.simulate_power_loss(PowerLossMode::KeepUnsyncedPrefix { seed: 5 });
        assert_eq!(fs.read_all(&file("a")).unwrap(), b"0123");
    }

    #[test]
    fn total_bytes_and_file_names_follow_the_current_namespace() {
        let fs = new_fs();
        write_file(&fs, "a", b"12345", b"678");
        fs.create(&file("b")).unwrap().append(b"xy").unwrap();
        assert_eq!(fs.total_bytes(), 10);
        assert_eq!(fs.file_names(dir()), vec!["a", "b"]);
        assert_eq!(fs.durable_file_names(dir()), vec!["a"]);
        fs.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(fs.total_bytes(), 5);
        assert_eq!(fs.file_names(dir()), vec!["a"]);
    }

    #[test]
    fn concurrent_readers_and_writers() {
        let fs = new_fs();
        write_file(&fs, "shared", &pattern(4096, 9), b"");
        let reader = fs.open(&file("shared")).unwrap();
        std::thread::scope(|scope| {
            for index in 0..4 {
                let fs = fs.clone();
                let reader = Arc::clone(&reader);
                scope.spawn(move || {
                    let mut writer = fs.create(&file(&format!("w{index}"))).unwrap();
                    for _ in 0..100 {
                        writer.append(&[index as u8; 10]).unwrap();
                        let mut buffer = [0u8; 16];
                        reader.read_exact_at(100, &mut buffer).unwrap();
                        assert_eq!(&buffer[..], &pattern(4096, 9)[100..116]);
                    }
                    writer.sync().unwrap();
                });
            }
        });
        assert_eq!(fs.total_bytes(), 4096 + 4 * 1000);
    }
}
