//! The real file system, through `std::fs` with positional reads (`pread`).
//!
//! Writes are buffered in user space (an [`AlignedWriteBuffer`] of 1 MiB per file) and reach the
//! kernel when the buffer fills, or on `flush` or `sync`; `sync` is `fdatasync`. Directory sync
//! opens the directory and calls `fsync` on it.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::write_buffer::AlignedWriteBuffer;
use super::{FileLock, FileSyncer, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

fn io_error(action: &str, path: &Path, source: std::io::Error) -> Error {
    Error::io(format!("{action} {}", path.display()), source)
}

struct OsWritableFile {
    path: PathBuf,
    file: File,
    buffer: AlignedWriteBuffer,
    length_bytes: u64,
    /// The file's size on disk: `length_bytes`, or more once `preallocate` wrote zeros past it.
    allocated_bytes: u64,
    /// Early writeback (see [`WritableFile::start_writeback_every`]): the interval, 0 for none,
    /// and the offset up to which writeback was started.
    writeback_interval_bytes: u64,
    writeback_started_bytes: u64,
}

impl OsWritableFile {
    /// A writer of the new, empty `file` named `path`, gathering `buffer_bytes` per write.
    fn new(path: &Path, file: File, buffer_bytes: usize) -> OsWritableFile {
        OsWritableFile {
            path: path.to_path_buf(),
            file,
            buffer: AlignedWriteBuffer::new(buffer_bytes, 0),
            length_bytes: 0,
            allocated_bytes: 0,
            writeback_interval_bytes: 0,
            writeback_started_bytes: 0,
        }
    }

    /// Starts writeback of what the buffer handed to the kernel since the last start, once that
    /// is at least an interval. Failures are ignored: the call is a hint, and a file that
    /// cannot be written shows it at its sync.
    fn start_due_writeback(&mut self) {
        let written_bytes = self.buffer.written_bytes();
        if self.writeback_interval_bytes == 0
            || written_bytes < self.writeback_started_bytes.saturating_add(self.writeback_interval_bytes)
        {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (Ok(offset), Ok(length)) = (
                i64::try_from(self.writeback_started_bytes),
                i64::try_from(written_bytes - self.writeback_started_bytes),
            ) else {
                return;
            };
            // SAFETY: a system call on a descriptor this file owns, with no memory passed.
            unsafe {
                libc::sync_file_range(self.file.as_raw_fd(), offset, length, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        self.writeback_started_bytes = written_bytes;
    }
}

/// Syncs a file through its own descriptor (see [`WritableFile::syncer`]).
struct OsFileSyncer {
    path: PathBuf,
    file: File,
}

impl FileSyncer for OsFileSyncer {
    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| io_error("sync", &self.path, e))
    }
}

/// The user-space buffer of each file being written. Large appends (a group commit's batches,
/// up to megabytes) are copied through it rather than written from the caller's memory, and the
/// kernel gets them in writes of this size. Measured with `riptide-bench run -w write -o 100000
/// -k 256 -v 4096 -t 8 -b 1000` (three interleaved rounds each): 64 KiB 148-169K puts/s, 256 KiB
/// 170-184K, 1 MiB 169-196K, 4 MiB 101-115K (a buffer larger than this machine's 2 MiB L2 cache
/// is cold when the kernel copies it); the `BufWriter` of 64 KiB before, which wrote large
/// appends straight from the caller's memory, 133-162K.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Zeros written per call by `preallocate`: one page. The page cache sizes its folios by the
/// writes that create them, and a later small write dirties (and the process is charged for) its
/// whole folio. Measured on this machine (kernel 6.18, ext4; 116-byte appends each followed by
/// `fdatasync` into 4 MiB of zeros): written in 256 KiB pieces, `/proc/self/io` charged 2,260
/// bytes per byte appended; in 64 KiB pieces 566; in 4 KiB pieces 36, as for a file grown by
/// appends (the disk itself wrote about 37 bytes per byte in every case, and 72 for the
/// growing file, whose syncs also commit its size).
const PREALLOCATE_PIECE_BYTES: usize = 4096;

impl WritableFile for OsWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.buffer.append(&mut self.file, data).map_err(|e| io_error("append to", &self.path, e))?;
        self.length_bytes += data.len() as u64;
        self.start_due_writeback();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.buffer.write_out(&mut self.file).map_err(|e| io_error("flush", &self.path, e))?;
        self.start_due_writeback();
        Ok(())
    }

    fn start_writeback_every(&mut self, interval_bytes: u64) {
        self.writeback_interval_bytes = interval_bytes;
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data().map_err(|e| io_error("sync", &self.path, e))
    }

    fn syncer(&mut self) -> Option<Arc<dyn FileSyncer>> {
        // A second descriptor of the same open file: `fdatasync` through it covers every
        // `write` made through the first before it began. Without one, the writer syncs.
        let file = self.file.try_clone().ok()?;
        Some(Arc::new(OsFileSyncer { path: self.path.clone(), file }))
    }

    fn len(&self) -> u64 {
        self.length_bytes
    }

    fn preallocate(&mut self, total_bytes: u64) -> Result<()> {
        let mut offset = self.allocated_bytes.max(self.length_bytes);
        if total_bytes <= offset {
            return Ok(());
        }
        // Buffered appends reach the file first, so the zeros never land under bytes still in
        // the buffer. The zeros go in with positional writes: the file cursor, where appends
        // continue, stays put (the file is not opened with O_APPEND, which would ignore it).
        self.flush()?;
        let zeros = [0u8; PREALLOCATE_PIECE_BYTES];
        while offset < total_bytes {
            let piece = (total_bytes - offset).min(PREALLOCATE_PIECE_BYTES as u64) as usize;
            self.file.write_all_at(&zeros[..piece], offset).map_err(|e| io_error("preallocate", &self.path, e))?;
            offset += piece as u64;
        }
        self.allocated_bytes = total_bytes;
        Ok(())
    }
}

struct OsRandomAccessFile {
    path: PathBuf,
    file: File,
    length_bytes: u64,
}

impl RandomAccessFile for OsRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| io_error("read", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.length_bytes
    }
}

struct OsFileLock {
    _file: File,
}

impl FileLock for OsFileLock {}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io_error("create", path, e))?;
        Ok(Box::new(OsWritableFile::new(path, file, WRITE_BUFFER_BYTES)))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| io_error("open", path, e))?;
        let length_bytes = file.metadata().map_err(|e| io_error("stat", path, e))?.len();
        Ok(Arc::new(OsRandomAccessFile { path: path.to_path_buf(), file, length_bytes }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| io_error("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| io_error("remove", path, e))
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        std::fs::remove_dir(path).map_err(|e| io_error("remove directory", path, e))
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        // A hard link fails across file systems (and on some that have none): copy then.
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Err(io_error("link", to, error)),
            Err(_) => super::copy_file_prefix(self, from, to, None),
        }
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| io_error("create directory", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_error("list", dir, e))? {
            let entry = entry.map_err(|e| io_error("list", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path).map_err(|e| io_error("stat", path, e))?.len())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let handle = File::open(dir).map_err(|e| io_error("open directory", dir, e))?;
        handle.sync_all().map_err(|e| io_error("sync directory", dir, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_error("open lock file", path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsFileLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Busy(format!(
                "{} is locked: the database is open in another handle or process",
                path.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(io_error("lock", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Early writeback is started once an interval has reached the kernel, covers everything
    /// written up to then, and leaves the file's contents as appended (it is only a hint).
    #[test]
    fn writeback_starts_every_interval_and_leaves_the_contents_alone() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("000007.sst");
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(&path).unwrap();
        let mut writer = OsWritableFile::new(&path, file, 4096);
        let mut expected = Vec::new();
        let mut append = |writer: &mut OsWritableFile, count: usize| {
            for index in 0..count {
                let piece = [(index % 251) as u8; 1000];
                writer.append(&piece).unwrap();
                expected.extend_from_slice(&piece);
            }
        };
        append(&mut writer, 20);
        assert_eq!(writer.writeback_started_bytes, 0, "no writeback before it is asked for");
        writer.start_writeback_every(10_000);
        // The first write to the kernel after the request covers an interval from offset 0.
        append(&mut writer, 1);
        assert_eq!((writer.buffer.written_bytes(), writer.writeback_started_bytes), (20_480, 20_480));
        // From then on a start follows each write that completes an interval since the last.
        let mut starts = 1;
        for _ in 0..40 {
            let started_before = writer.writeback_started_bytes;
            append(&mut writer, 1);
            let written = writer.buffer.written_bytes();
            if written >= started_before + 10_000 {
                assert_eq!(writer.writeback_started_bytes, written);
                starts += 1;
            } else {
                assert_eq!(writer.writeback_started_bytes, started_before);
            }
        }
        assert_eq!(starts, 4, "61,000 bytes: starts at 20,480, 32,768, 45,056 and 57,344");
        writer.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    /// Appends of every size (from one byte to several buffers' worth), flushes and
    /// preallocations in a random order: the file must read back as exactly the bytes appended,
    /// then the preallocated zeros, whatever the buffer's alignment did with them.
    /// A syncer's `fdatasync` runs on another thread while the writer appends and flushes; the
    /// file then holds every append in order (what a sync makes durable cannot be observed
    /// without a power cut; `fs/mem.rs` tests that).
    #[test]
    fn a_syncer_syncs_from_another_thread_while_the_writer_appends() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("log");
        let mut writer = OsFileSystem.create(&path).unwrap();
        let syncer = writer.syncer().expect("the OS file system offers syncers");
        let syncing = {
            let syncer = Arc::clone(&syncer);
            std::thread::spawn(move || (0..50).try_for_each(|_| syncer.sync()))
        };
        let mut expected = Vec::new();
        for index in 0..2_000u32 {
            let record = index.to_le_bytes();
            writer.append(&record).unwrap();
            writer.flush().unwrap();
            expected.extend_from_slice(&record);
        }
        syncing.join().unwrap().unwrap();
        syncer.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn appends_of_any_size_read_back_exactly_around_flushes_and_preallocation() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let file_system = OsFileSystem;
        for seed in 0..4u64 {
            let path = directory.path().join(format!("{seed}.log"));
            let mut random = SmallRng::seed_from_u64(seed);
            let mut file = file_system.create(&path).unwrap();
            let mut expected: Vec<u8> = Vec::new();
            let mut preallocated_until = 0u64;
            for step in 0..60 {
                let length = match random.gen_range(0..4) {
                    0 => random.gen_range(1..64),
                    1 => random.gen_range(64..8192),
                    2 => random.gen_range(8192..(WRITE_BUFFER_BYTES + 100)),
                    _ => random.gen_range(WRITE_BUFFER_BYTES..3 * WRITE_BUFFER_BYTES),
                };
                let data: Vec<u8> = (0..length).map(|index| (index as u64 * 131 + seed * 7 + step) as u8 | 1).collect();
                file.append(&data).unwrap();
                expected.extend_from_slice(&data);
                assert_eq!(file.len(), expected.len() as u64);
                match random.gen_range(0..6) {
                    0 => file.flush().unwrap(),
                    1 => file.sync().unwrap(),
                    2 => {
                        preallocated_until = expected.len() as u64 + random.gen_range(1..(1u64 << 20));
                        file.preallocate(preallocated_until).unwrap();
                    }
                    _ => {}
                }
            }
            file.sync().unwrap();
            drop(file);
            let written = std::fs::read(&path).unwrap();
            assert_eq!(written.len() as u64, (expected.len() as u64).max(preallocated_until), "seed {seed}");
            assert!(written[..expected.len()] == expected[..], "seed {seed}: appended bytes differ");
            assert!(written[expected.len()..].iter().all(|&byte| byte == 0), "seed {seed}: the tail is not zeros");
        }
    }
}
