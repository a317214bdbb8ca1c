//! A file system wrapper that makes table writes slow, for tests that need flushes and
//! compactions to take a long (and controllable) time without writing much data.
//!
//! Only appends to `.sst` files are delayed: the WAL and the manifest stay fast, so writers and
//! version changes are not slowed directly, only the background work that builds tables. The
//! delay is read on every append, so a test can load data quickly and slow things down later.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use riptide::fs::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use riptide::Result;

/// Wraps a file system; clones share the delay setting.
#[derive(Clone)]
pub struct SlowTableFileSystem {
    inner: Arc<dyn FileSystem>,
    append_delay_micros: Arc<AtomicU64>,
    table_appends: Arc<AtomicU64>,
}

impl SlowTableFileSystem {
    pub fn new(inner: Arc<dyn FileSystem>) -> SlowTableFileSystem {
        SlowTableFileSystem {
            inner,
            append_delay_micros: Arc::new(AtomicU64::new(0)),
            table_appends: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sets the sleep before every append to a table file (0: none).
    pub fn set_append_delay(&self, delay: Duration) {
        self.append_delay_micros.store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// Appends to table files so far.
    pub fn table_appends(&self) -> u64 {
        self.table_appends.load(Ordering::Relaxed)
    }
}

struct SlowWritableFile {
    inner: Box<dyn WritableFile>,
    append_delay_micros: Arc<AtomicU64>,
    table_appends: Arc<AtomicU64>,
}

impl WritableFile for SlowWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.table_appends.fetch_add(1, Ordering::Relaxed);
        let micros = self.append_delay_micros.load(Ordering::Relaxed);
        if micros > 0 {
            std::thread::sleep(Duration::from_micros(micros));
        }
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for SlowTableFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = self.inner.create(path)?;
        if path.extension().is_some_and(|extension| extension == "sst") {
            Ok(Box::new(SlowWritableFile {
                inner: file,
                append_delay_micros: Arc::clone(&self.append_delay_micros),
                table_appends: Arc::clone(&self.table_appends),
            }))
        } else {
            Ok(file)
        }
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}
