//! The file-system abstraction: every byte Riptide reads or writes goes through [`FileSystem`].
//!
//! Three implementations exist: [`OsFileSystem`] (the real one), [`MemFileSystem`] (in memory,
//! fast and deterministic, and able to simulate power loss by forgetting everything that was not
//! synced), and [`FaultFileSystem`] (wraps another file system and fails chosen operations with
//! EIO or ENOSPC, once or persistently).
//!
//! Concurrency contract: a `FileSystem` is shared by all threads (`Send + Sync`). A
//! [`WritableFile`] is owned by one writer at a time. A [`RandomAccessFile`] is shared and
//! supports concurrent positional reads.
//!
//! Durability contract (what the engine relies on, invariant I1 in `docs/invariants.md`):
//! data appended to a file is durable only after [`WritableFile::sync`] returns `Ok`; a new
//! file name, a rename or a removal is durable only after [`FileSystem::sync_dir`] on its parent
//! directory returns `Ok`.

mod fault;
mod mem;
mod os;
mod write_buffer;

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

pub use fault::{FaultFileSystem, FaultKind, FaultPlan};
pub use mem::{MemFileSystem, PowerLossMode};
pub use os::OsFileSystem;

/// How often table and blob file writers ask for early writeback
/// ([`WritableFile::start_writeback_every`]). Without it a flush's final sync waited for the
/// device to take its whole file (149 ms of a 0.55 s load of 4 KiB values, `perf sched`), the
/// memtables filled meanwhile, and the page cache's dirty pages piled up until the kernel
/// throttled the writers themselves. Interleaved with the build before (`riptide-bench run -t 8
/// -b 1000`, 1M puts of 4 KiB values with 256-byte keys, 10M of 100 bytes): with blob files
/// 124-130K puts/s and 19-21 stalls against 76-106K and 35-56 (three rounds), 6.7-7.1 s of
/// system time against 7.8-11.2; without blob files 78-80K against 69-72K; sequential batches
/// 2.71-2.78M against 2.67-2.69M; random batches 0.88-0.91M against 0.85-0.87M (two rounds).
/// The log is not written this way: there it cost a quarter of the throughput of unsynced large
/// writes (bench/README.md).
pub(crate) const TABLE_WRITEBACK_INTERVAL_BYTES: u64 = 1 << 20;

/// A file being written sequentially (WAL, SSTable, manifest).
pub trait WritableFile: Send + Sync {
    /// Appends bytes. They may sit in a buffer (user space or page cache) until `sync`.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system without forcing them to stable storage.
    fn flush(&mut self) -> Result<()>;
    /// Makes every appended byte durable (`fdatasync`). On error, nothing is promised about the
    /// bytes appended since the last successful sync, and the file must not be trusted again.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Makes the file at least `total_bytes` long by writing zeros past everything written so
    /// far, without moving where the next append goes: later appends overwrite the zeros. The
    /// blocks are written, not merely reserved, so that once a sync has made them durable, a
    /// sync of appends inside them changes no file size or block map (on ext4 an `fdatasync`
    /// then writes data only, not a journal commit). Like appends, the zeros are durable only
    /// after [`WritableFile::sync`]. A file system that cannot do this may do nothing; the
    /// default does nothing.
    fn preallocate(&mut self, total_bytes: u64) -> Result<()> {
        let _ = total_bytes;
        Ok(())
    }
    /// Asks the operating system to start writing the file's bytes to the device every
    /// `interval_bytes` handed to it, without waiting (Linux `sync_file_range` with
    /// `SYNC_FILE_RANGE_WRITE`; RocksDB's `bytes_per_sync`). A hint for large files written
    /// once and synced at the end (tables, blob files): their final sync then waits for the
    /// last interval only, instead of for the whole file. It promises no durability: only
    /// [`WritableFile::sync`] does. The default, and file systems without such a call, do
    /// nothing.
    fn start_writeback_every(&mut self, interval_bytes: u64) {
        let _ = interval_bytes;
    }
    /// True when nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A handle that syncs this file while its writer goes on appending (the write-ahead log's
    /// sync stage: one writer syncs while the next ones hand their records to the operating
    /// system). `None` when the file system offers none; callers then sync through the writer.
    fn syncer(&mut self) -> Option<Arc<dyn FileSyncer>> {
        None
    }
}

/// Syncs one file from any thread, concurrently with its writer's appends (see
/// [`WritableFile::syncer`]).
pub trait FileSyncer: Send + Sync {
    /// Makes durable every byte the writer handed to the operating system (appended and
    /// flushed) before this call began, like [`WritableFile::sync`] without its flush. Bytes
    /// handed over while it runs may or may not be covered. On error the same holds as for
    /// `WritableFile::sync`: the file must not be trusted again.
    fn sync(&self) -> Result<()>;
}

/// A file read at arbitrary offsets, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`. Reading past the end is an error (`UnexpectedEof`).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The size of the file when it was opened.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An exclusive lock on a database directory, released on drop (and by the OS when the process
/// dies, so a crash never leaves a lock that blocks the next open).
pub trait FileLock: Send + Sync {}

/// All file operations the engine performs.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file into memory (small files: CURRENT, manifest, WAL during recovery).
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open(path)?;
        let length = usize::try_from(file.len())
            .map_err(|_| crate::Error::invalid(format!("{} is too large to read", path.display())))?;
        let mut buffer = vec![0u8; length];
        file.read_exact_at(0, &mut buffer)?;
        Ok(buffer)
    }
    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Creates a directory and its parents if missing.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Lists the file names (not full paths) in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// True when the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// The current size of a file.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes an exclusive lock, failing at once with [`crate::Error::Busy`] if it is held.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Removes an empty directory. The default fails as unsupported; the engine's file systems
    /// implement it.
    fn remove_dir(&self, path: &Path) -> Result<()> {
        Err(crate::Error::io(
            format!("remove directory {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::Unsupported, "this file system cannot remove directories"),
        ))
    }
    /// Removes the files of `dir`, then the directory. Best effort: what cannot be listed or
    /// removed stays, and nothing is reported (the clean-up of a failed checkpoint or restore
    /// and of a backup's temporary directory). Not recursive: a subdirectory stays, and so
    /// does `dir` then. Nothing is synced. The default lists, removes each file and calls
    /// [`FileSystem::remove_dir`].
    fn remove_dir_and_files(&self, dir: &Path) {
        for name in self.list(dir).unwrap_or_default() {
            let _ = self.remove(&dir.join(name));
        }
        let _ = self.remove_dir(dir);
    }
    /// Makes `to` (which must not exist) hold what the immutable file `from` holds: a hard link
    /// where the file system has them, else a synced copy. Either way the new name is durable
    /// only after a `sync_dir` of its directory. The default copies.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        copy_file_prefix(self, from, to, None)
    }
}

/// Copies the first `length_bytes` of `from` (all of it with `None`) into a new file `to`, in
/// pieces of a mebibyte, and syncs the copy.
pub(crate) fn copy_file_prefix<F: FileSystem + ?Sized>(
    file_system: &F,
    from: &Path,
    to: &Path,
    length_bytes: Option<u64>,
) -> Result<()> {
    const PIECE_BYTES: u64 = 1 << 20;
    let source = file_system.open(from)?;
    let length_bytes = length_bytes.unwrap_or_else(|| source.len()).min(source.len());
    let mut target = file_system.create(to)?;
    let mut buffer = vec![0u8; PIECE_BYTES.min(length_bytes) as usize];
    let mut offset = 0;
    while offset < length_bytes {
        let piece = &mut buffer[..(length_bytes - offset).min(PIECE_BYTES) as usize];
        source.read_exact_at(offset, piece)?;
        target.append(piece)?;
        offset += piece.len() as u64;
    }
    target.sync()
}
