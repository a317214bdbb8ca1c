//! A file system wrapper that lets a test hold table writes at a gate, so that flushes and
//! compactions stop exactly where the test needs them and go on when the test says so.
//!
//! Only appends to `.sst` files pass the gate: the WAL and the manifest stay free, so writers
//! and version changes are not held, only the background work that builds tables. While the
//! gate is closed, every table append waits inside the wrapper; [`TableGate::wait_for_held`]
//! tells the test that a flush or compaction has reached the gate (and therefore runs now and
//! cannot finish), and [`TableGate::release`] lets everything through again. No sleep decides an
//! order: a test that uses the gate gets the same interleaving on an idle and a loaded machine.
//!
//! Appends may also be slowed ([`TableGate::set_append_delay`]). That never decides an order; it
//! only makes a job long, for a test that asserts, in appends rather than seconds, that
//! something stopped the job well before its end (see `tests/README.md`).
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use riptide::fs::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use riptide::Result;

/// How long a test waits for a condition before it calls the wait a hang and fails. Generous:
/// it exists to turn a hang into a failure, never to decide an order.
pub const HANG_LIMIT: Duration = Duration::from_secs(120);

/// Which table appends a closed gate holds.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Held {
    /// None: the gate is open.
    #[default]
    Nothing,
    /// Every table append: flushes and compactions.
    Everything,
    /// Appends made on any thread but a flush thread (the engine names them `riptide-flush-N`):
    /// compactions, their sub-compactions and `compact_range` callers. Flushes pass.
    Compactions,
    /// None held: every table append fails with EIO instead, and held ones wake to fail.
    Failing,
}

impl Held {
    fn holds_this_thread(self) -> bool {
        match self {
            Held::Nothing | Held::Failing => false,
            Held::Everything => true,
            Held::Compactions => !std::thread::current().name().is_some_and(|name| name.starts_with("riptide-flush-")),
        }
    }
}

#[derive(Default)]
struct GateState {
    held_kind: Held,
    /// Appends waiting at the closed gate now.
    held: usize,
    /// Appends to table files that passed the gate so far.
    appends: u64,
    append_delay: Duration,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Called before every table append: waits while the gate is closed, then counts it, or
    /// refuses it when the gate fails appends.
    fn pass(&self) -> Result<()> {
        let mut state = self.lock();
        if state.held_kind.holds_this_thread() {
            state.held += 1;
            self.changed.notify_all();
            while state.held_kind.holds_this_thread() {
                state = self.changed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            state.held -= 1;
        }
        if state.held_kind == Held::Failing {
            return Err(power_off("table append"));
        }
        state.appends += 1;
        let delay = state.append_delay;
        drop(state);
        self.changed.notify_all();
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        Ok(())
    }
}

/// The EIO a failing gate answers with.
fn power_off(what: &str) -> riptide::Error {
    riptide::Error::Io {
        context: format!("{what} refused by the test gate (the power is off)"),
        source: std::io::Error::from_raw_os_error(5),
    }
}

/// Wraps a file system; clones share the gate.
#[derive(Clone)]
pub struct TableGate {
    inner: Arc<dyn FileSystem>,
    gate: Arc<Gate>,
}

impl TableGate {
    /// A wrapper over `inner` with the gate open.
    pub fn new(inner: Arc<dyn FileSystem>) -> TableGate {
        TableGate { inner, gate: Arc::new(Gate::default()) }
    }

    /// Holds every table append from now on (those already past the gate finish).
    pub fn hold(&self) {
        self.gate.lock().held_kind = Held::Everything;
    }

    /// Holds the table appends of compactions (and of `compact_range`) from now on; flushes
    /// pass.
    pub fn hold_compactions(&self) {
        self.gate.lock().held_kind = Held::Compactions;
    }

    /// Lets every held append, and every later one, through.
    pub fn release(&self) {
        self.gate.lock().held_kind = Held::Nothing;
        self.gate.changed.notify_all();
    }

    /// Fails every table creation and append from now on with EIO, the held ones included: for a test that
    /// cut the power, so that a flush or compaction still running in the dead process can write
    /// no table (in a real power cut nothing runs after it).
    pub fn fail(&self) {
        self.gate.lock().held_kind = Held::Failing;
        self.gate.changed.notify_all();
    }

    /// Waits until at least `count` appends are held at the gate; panics after [`HANG_LIMIT`].
    pub fn wait_for_held(&self, count: usize) {
        self.wait_for(&format!("{count} table appends held at the gate"), |state| state.held >= count);
    }

    /// Appends held at the gate now.
    pub fn held(&self) -> usize {
        self.gate.lock().held
    }

    /// Waits until at least `count` table appends have passed the gate in all.
    pub fn wait_for_appends(&self, count: u64) {
        self.wait_for(&format!("{count} table appends"), |state| state.appends >= count);
    }

    /// Table appends that passed the gate so far.
    pub fn table_appends(&self) -> u64 {
        self.gate.lock().appends
    }

    /// Sleeps this long after every table append that passes (zero: none). Makes jobs long;
    /// never use it to decide an order.
    pub fn set_append_delay(&self, delay: Duration) {
        self.gate.lock().append_delay = delay;
    }

    fn wait_for(&self, what: &str, condition: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + HANG_LIMIT;
        let mut state = self.gate.lock();
        while !condition(&state) {
            let now = Instant::now();
            assert!(now < deadline, "waited {HANG_LIMIT:?} for {what}: a hang");
            state = self.gate.changed.wait_timeout(state, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// Waits until `condition` holds, checking every millisecond; panics after [`HANG_LIMIT`] with
/// `what`. For conditions the engine exposes (stats, level counts), not for ordering by time.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_LIMIT;
    while !condition() {
        assert!(Instant::now() < deadline, "waited {HANG_LIMIT:?} for {what}: a hang");
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct GatedWritableFile {
    inner: Box<dyn WritableFile>,
    gate: Arc<Gate>,
}

impl WritableFile for GatedWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.gate.pass()?;
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

impl FileSystem for TableGate {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let table = path.extension().is_some_and(|extension| extension == "sst");
        if table && self.gate.lock().held_kind == Held::Failing {
            return Err(power_off(&format!("creating {}", path.display())));
        }
        let file = self.inner.create(path)?;
        if table {
            Ok(Box::new(GatedWritableFile { inner: file, gate: Arc::clone(&self.gate) }))
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

    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.inner.remove_dir(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}
