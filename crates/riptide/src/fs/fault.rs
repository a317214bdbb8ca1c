//! A [`FileSystem`] wrapper that fails chosen operations, for I/O-error and crash tests.
//!
//! [`FaultFileSystem`] forwards everything to an inner file system and wraps the files it hands
//! out, so that every operation that changes the disk passes one checkpoint: create, append,
//! flush, sync, rename, remove, sync_dir and create_dir_all. Each gets the next number, counted
//! from 1. When a [`FaultPlan`] asks for it, reads are numbered in the same sequence: `open`,
//! `read_exact_at` (and so `read_all`), `list` and `file_size`. `exists`, `len` and `lock` are
//! never counted and never fail. An operation refused by the checkpoint does not reach the inner
//! file system, with one documented exception: an `append` refused with ENOSPC first appends the
//! first half of its data (rounded down), because a full disk can accept part of a write and the
//! engine must cope with a partial record.
//!
//! Two independent ways to fail:
//! - A [`FaultPlan`] fails the counted operation numbered `fail_at_operation` with EIO or
//!   ENOSPC, and with `persistent` every counted operation after it too. Numbers are absolute
//!   (they are never reset), so a plan whose number has already passed never fires; set plans
//!   as `operation_count() + k`.
//! - [`FaultFileSystem::crash_after`] with `Some(n)` lets the first `n` mutating operations
//!   (counted since this file system was created, reads excluded) through and fails every later
//!   one with EIO: the process is considered dead and nothing more reaches the disk. Reads keep
//!   working. Together with [`super::MemFileSystem::simulate_power_loss`] this lets a test stop a
//!   workload at any operation and reopen.
//!
//! Refused operations, by plan or by crash, still take their number and are counted by
//! [`FaultFileSystem::injected_failure_count`].
//!
//! Concurrency contract: the counters, the plan and the crash point sit behind one mutex taken
//! for a few instructions per operation, so concurrent operations are numbered in a single
//! total order; the inner operation runs after the mutex is released. Clones share the counters.
//!
//! Invariants: `operation_count() >= mutating_operation_count()`; the plan fires at most once
//! per `set_plan` unless persistent; a crashed file system stays crashed until `crash_after` is
//! called again.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSyncer, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The OS error code for a generic I/O error.
const EIO_CODE: i32 = 5;
/// The OS error code for "no space left on device".
const ENOSPC_CODE: i32 = 28;

/// Which error an injected failure carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// An I/O error (`EIO`, OS error 5).
    Eio,
    /// No space left on the device (`ENOSPC`, OS error 28).
    Enospc,
}

impl FaultKind {
    fn os_code(self) -> i32 {
        match self {
            FaultKind::Eio => EIO_CODE,
            FaultKind::Enospc => ENOSPC_CODE,
        }
    }
}

/// Which counted operation fails, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// The number (from 1, as reported by [`FaultFileSystem::operation_count`]) of the first
    /// operation that fails.
    pub fail_at_operation: u64,
    /// The error the failing operations carry.
    pub kind: FaultKind,
    /// When true, every counted operation after the first failure fails too.
    pub persistent: bool,
    /// When true, reads are numbered (and can fail) alongside mutating operations.
    pub include_reads: bool,
}

/// Whether an operation changes the disk or only reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Mutating,
    Read,
}

/// Why the checkpoint refused an operation.
#[derive(Clone, Copy)]
enum Refusal {
    /// The plan fired at this operation number.
    Planned { kind: FaultKind, operation: u64 },
    /// The process is considered dead after `limit` mutating operations.
    Crashed { limit: u64 },
}

impl Refusal {
    fn into_error(self, action: &str, path: &Path) -> Error {
        match self {
            Refusal::Planned { kind, operation } => Error::io(
                format!("{action} {}: injected {kind:?} at operation {operation}", path.display()),
                io::Error::from_raw_os_error(kind.os_code()),
            ),
            Refusal::Crashed { limit } => Error::io(
                format!("{action} {}: simulated crash after mutating operation {limit}", path.display()),
                io::Error::from_raw_os_error(EIO_CODE),
            ),
        }
    }
}

/// The counters and settings behind the mutex.
#[derive(Default)]
struct Control {
    operation_count: u64,
    mutating_operation_count: u64,
    injected_failure_count: u64,
    plan: Option<FaultPlan>,
    /// Set when the current plan has fired, so that a persistent plan keeps failing.
    plan_fired: bool,
    crash_after: Option<u64>,
}

impl Control {
    /// Numbers the operation if it is counted and decides whether it may proceed.
    fn admit(&mut self, access: Access) -> std::result::Result<(), Refusal> {
        let counted = match access {
            Access::Mutating => true,
            Access::Read => self.plan.is_some_and(|plan| plan.include_reads),
        };
        if !counted {
            return Ok(());
        }
        self.operation_count += 1;
        let operation = self.operation_count;
        if access == Access::Mutating {
            self.mutating_operation_count += 1;
            if let Some(limit) = self.crash_after {
                if self.mutating_operation_count > limit {
                    self.injected_failure_count += 1;
                    return Err(Refusal::Crashed { limit });
                }
            }
        }
        if let Some(plan) = self.plan {
            let fires = operation == plan.fail_at_operation || (plan.persistent && self.plan_fired);
            if fires {
                self.plan_fired = true;
                self.injected_failure_count += 1;
                return Err(Refusal::Planned { kind: plan.kind, operation });
            }
        }
        Ok(())
    }
}

/// The state shared by a [`FaultFileSystem`], its clones and the files it handed out.
struct Shared {
    control: Mutex<Control>,
}

impl Shared {
    fn admit(&self, access: Access, action: &str, path: &Path) -> Result<()> {
        self.control.lock().admit(access).map_err(|refusal| refusal.into_error(action, path))
    }
}

/// Wraps a file system and fails chosen operations. Clones share the counters and settings.
#[derive(Clone)]
pub struct FaultFileSystem {
    inner: Arc<dyn FileSystem>,
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultFileSystem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let control = self.shared.control.lock();
        formatter
            .debug_struct("FaultFileSystem")
            .field("operation_count", &control.operation_count)
            .field("mutating_operation_count", &control.mutating_operation_count)
            .field("injected_failure_count", &control.injected_failure_count)
            .field("plan", &control.plan)
            .field("crash_after", &control.crash_after)
            .finish_non_exhaustive()
    }
}

impl FaultFileSystem {
    /// Wraps `inner`. No failure is planned and no crash is set.
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultFileSystem {
        FaultFileSystem { inner, shared: Arc::new(Shared { control: Mutex::new(Control::default()) }) }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn FileSystem> {
        &self.inner
    }

    /// Counted operations so far: every mutating operation, plus reads made while a plan with
    /// `include_reads` was in force. Includes refused operations.
    pub fn operation_count(&self) -> u64 {
        self.shared.control.lock().operation_count
    }

    /// Mutating operations so far, including refused ones; the numbering `crash_after` uses.
    pub fn mutating_operation_count(&self) -> u64 {
        self.shared.control.lock().mutating_operation_count
    }

    /// Operations refused so far, by a plan or by a crash.
    pub fn injected_failure_count(&self) -> u64 {
        self.shared.control.lock().injected_failure_count
    }

    /// Installs a plan (replacing any previous one, which also re-arms a plan that already
    /// fired), or removes it with `None`. The operation numbering is not reset.
    pub fn set_plan(&self, plan: Option<FaultPlan>) {
        let mut control = self.shared.control.lock();
        control.plan = plan;
        control.plan_fired = false;
    }

    /// With `Some(n)`, mutating operations numbered above `n` (counted since creation, reads
    /// excluded) fail with EIO and do nothing; a limit already passed crashes at once. `None`
    /// revives the file system.
    pub fn crash_after(&self, operation: Option<u64>) {
        self.shared.control.lock().crash_after = operation;
    }

    /// True once the crash point is reached: no further mutating operation will succeed.
    pub fn is_crashed(&self) -> bool {
        let control = self.shared.control.lock();
        control.crash_after.is_some_and(|limit| control.mutating_operation_count >= limit)
    }

    fn admit(&self, access: Access, action: &str, path: &Path) -> Result<()> {
        self.shared.admit(access, action, path)
    }
}

/// A writer whose appends, flushes and syncs pass the checkpoint.
struct FaultWritableFile {
    inner: Box<dyn WritableFile>,
    path: std::path::PathBuf,
    shared: Arc<Shared>,
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let refusal = self.shared.control.lock().admit(Access::Mutating);
        match refusal {
            Ok(()) => self.inner.append(data),
            Err(refusal) => {
                if let Refusal::Planned { kind: FaultKind::Enospc, .. } = refusal {
                    // The disk filled up part way: the first half reaches the file. Its own
                    // failure would add nothing, since the operation fails anyway.
                    let _ = self.inner.append(&data[..data.len() / 2]);
                }
                Err(refusal.into_error("append to", &self.path))
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.shared.admit(Access::Mutating, "flush", &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.shared.admit(Access::Mutating, "sync", &self.path)?;
        self.inner.sync()
    }

    fn start_writeback_every(&mut self, interval_bytes: u64) {
        // Only a hint to the operating system: what is durable is still decided by syncs.
        self.inner.start_writeback_every(interval_bytes);
    }

    fn syncer(&mut self) -> Option<Arc<dyn FileSyncer>> {
        let inner = self.inner.syncer()?;
        Some(Arc::new(FaultFileSyncer { inner, path: self.path.clone(), shared: Arc::clone(&self.shared) }))
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn preallocate(&mut self, total_bytes: u64) -> Result<()> {
        self.shared.admit(Access::Mutating, "preallocate", &self.path)?;
        self.inner.preallocate(total_bytes)
    }
}

/// A syncer whose syncs pass the checkpoint like its writer's.
struct FaultFileSyncer {
    inner: Arc<dyn FileSyncer>,
    path: std::path::PathBuf,
    shared: Arc<Shared>,
}

impl FileSyncer for FaultFileSyncer {
    fn sync(&self) -> Result<()> {
        self.shared.admit(Access::Mutating, "sync", &self.path)?;
        self.inner.sync()
    }
}

/// A reader whose reads pass the checkpoint when a plan counts reads.
struct FaultRandomAccessFile {
    inner: Arc<dyn RandomAccessFile>,
    path: std::path::PathBuf,
    shared: Arc<Shared>,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.shared.admit(Access::Read, "read", &self.path)?;
        self.inner.read_exact_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for FaultFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.admit(Access::Mutating, "create", path)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FaultWritableFile { inner, path: path.to_path_buf(), shared: Arc::clone(&self.shared) }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.admit(Access::Read, "open", path)?;
        let inner = self.inner.open(path)?;
        Ok(Arc::new(FaultRandomAccessFile { inner, path: path.to_path_buf(), shared: Arc::clone(&self.shared) }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.admit(Access::Mutating, "rename", from)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.admit(Access::Mutating, "remove", path)?;
        self.inner.remove(path)
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.admit(Access::Mutating, "create directory", path)?;
        self.inner.create_dir_all(path)
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.admit(Access::Mutating, "remove directory", path)?;
        self.inner.remove_dir(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.admit(Access::Read, "list", dir)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.admit(Access::Read, "stat", path)?;
        self.inner.file_size(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.admit(Access::Mutating, "sync directory", dir)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::mem::{MemFileSystem, PowerLossMode};
    use std::path::PathBuf;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    fn file(name: &str) -> PathBuf {
        dir().join(name)
    }

    /// A fault layer over a memory file system whose directory already exists (uncounted).
    fn new_pair() -> (MemFileSystem, FaultFileSystem) {
        let memory = MemFileSystem::new();
        memory.create_dir_all(dir()).unwrap();
        let fault = FaultFileSystem::new(Arc::new(memory.clone()));
        (memory, fault)
    }

    fn os_code(result: Result<()>) -> Option<i32> {
        match result {
            Ok(()) => None,
            Err(Error::Io { source, .. }) => source.raw_os_error(),
            Err(other) => panic!("expected an I/O error, got {other:?}"),
        }
    }

    fn plan(fail_at_operation: u64, kind: FaultKind, persistent: bool, include_reads: bool) -> Option<FaultPlan> {
        Some(FaultPlan { fail_at_operation, kind, persistent, include_reads })
    }

    #[test]
    fn every_mutating_operation_is_numbered() {
        let (_memory, fault) = new_pair();
        fault.create_dir_all(dir()).unwrap();
        let mut writer = fault.create(&file("a")).unwrap();
        writer.append(b"x").unwrap();
        writer.flush().unwrap();
        writer.sync().unwrap();
        fault.rename(&file("a"), &file("b")).unwrap();
        fault.sync_dir(dir()).unwrap();
        fault.remove(&file("b")).unwrap();
        assert_eq!(fault.operation_count(), 8);
        // Reads, `exists`, `len` and `lock` are not counted without a plan asking for reads.
        assert!(!fault.exists(&file("b")));
        assert_eq!(writer.len(), 1);
        assert!(fault.list(dir()).unwrap().is_empty());
        let _lock = fault.lock(&file("LOCK")).unwrap();
        assert_eq!(fault.operation_count(), 8);
        assert_eq!(fault.mutating_operation_count(), 8);
        assert_eq!(fault.injected_failure_count(), 0);
    }

    #[test]
    fn a_syncers_syncs_are_numbered_and_fail_like_the_writers() {
        let (memory, fault) = new_pair();
        let mut writer = fault.create(&file("a")).unwrap();
        memory.sync_dir(dir()).unwrap();
        let syncer = writer.syncer().expect("the in-memory file system underneath offers syncers");
        writer.append(b"one").unwrap();
        syncer.sync().unwrap();
        assert_eq!(fault.mutating_operation_count(), 3);
        // The append is operation 4, the sync 5.
        fault.set_plan(plan(5, FaultKind::Eio, false, false));
        writer.append(b"two").unwrap();
        assert_eq!(os_code(syncer.sync()), Some(EIO_CODE));
        assert_eq!(fault.injected_failure_count(), 1);
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"one", "the failed sync made nothing durable");
    }

    #[test]
    fn fault_at_nth_operation_once() {
        let (memory, fault) = new_pair();
        fault.set_plan(plan(3, FaultKind::Eio, false, false));
        let mut writer = fault.create(&file("a")).unwrap();
        writer.append(b"one").unwrap();
        assert_eq!(os_code(writer.append(b"two")), Some(EIO_CODE));
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"one", "a failed append appends nothing");
        writer.append(b"three").unwrap();
        writer.sync().unwrap();
        assert_eq!(fault.operation_count(), 5);
        assert_eq!(fault.injected_failure_count(), 1);
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"onethree");
    }

    #[test]
    fn persistent_fault_fails_every_later_operation() {
        let (memory, fault) = new_pair();
        fault.set_plan(plan(2, FaultKind::Enospc, true, false));
        let mut writer = fault.create(&file("a")).unwrap();
        assert_eq!(os_code(writer.append(b"abcdef")), Some(ENOSPC_CODE));
        assert_eq!(os_code(writer.sync()), Some(ENOSPC_CODE));
        assert_eq!(os_code(fault.sync_dir(dir())), Some(ENOSPC_CODE));
        assert!(fault.create(&file("b")).is_err());
        assert_eq!(fault.injected_failure_count(), 4);
        // ENOSPC let the first half of the append through; nothing else happened.
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"abc");
        assert!(!memory.exists(&file("b")));
        // Removing the plan heals the file system.
        fault.set_plan(None);
        writer.sync().unwrap();
        assert_eq!(fault.injected_failure_count(), 4);
    }

    #[test]
    fn plan_whose_number_has_passed_never_fires_and_replanning_rearms() {
        let (_memory, fault) = new_pair();
        let mut writer = fault.create(&file("a")).unwrap();
        writer.append(b"1").unwrap();
        fault.set_plan(plan(1, FaultKind::Eio, true, false));
        writer.append(b"2").unwrap();
        fault.set_plan(plan(fault.operation_count() + 1, FaultKind::Eio, false, false));
        assert!(writer.append(b"3").is_err());
        writer.append(b"4").unwrap();
        fault.set_plan(plan(fault.operation_count() + 1, FaultKind::Eio, false, false));
        assert!(writer.append(b"5").is_err());
        assert_eq!(fault.injected_failure_count(), 2);
    }

    #[test]
    fn failed_sync_does_not_sync() {
        let (memory, fault) = new_pair();
        let mut writer = fault.create(&file("a")).unwrap();
        fault.sync_dir(dir()).unwrap();
        writer.append(b"durable").unwrap();
        writer.sync().unwrap();
        writer.append(b" lost").unwrap();
        fault.set_plan(plan(fault.operation_count() + 1, FaultKind::Eio, false, false));
        assert_eq!(os_code(writer.sync()), Some(EIO_CODE));
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"durable");
    }

    #[test]
    fn failed_namespace_operations_have_no_effect() {
        let (memory, fault) = new_pair();
        fault.create(&file("a")).unwrap();
        fault.set_plan(plan(2, FaultKind::Eio, false, false));
        assert!(fault.rename(&file("a"), &file("b")).is_err());
        assert_eq!(memory.list(dir()).unwrap(), vec!["a"]);
        fault.set_plan(plan(3, FaultKind::Eio, false, false));
        assert!(fault.remove(&file("a")).is_err());
        assert!(memory.exists(&file("a")));
        fault.set_plan(plan(4, FaultKind::Eio, false, false));
        assert!(fault.sync_dir(dir()).is_err());
        assert!(memory.durable_file_names(dir()).is_empty());
        fault.set_plan(plan(5, FaultKind::Eio, false, false));
        assert!(fault.create_dir_all(Path::new("/other")).is_err());
        assert!(!memory.exists(Path::new("/other")));
        fault.set_plan(plan(6, FaultKind::Eio, false, false));
        assert!(fault.create(&file("c")).is_err());
        assert!(!memory.exists(&file("c")));
    }

    #[test]
    fn reads_are_counted_only_when_asked() {
        let (_memory, fault) = new_pair();
        let mut writer = fault.create(&file("a")).unwrap();
        writer.append(b"0123456789").unwrap();
        let reader = fault.open(&file("a")).unwrap();
        let mut buffer = [0u8; 4];
        reader.read_exact_at(0, &mut buffer).unwrap();
        fault.file_size(&file("a")).unwrap();
        fault.list(dir()).unwrap();
        assert_eq!(fault.operation_count(), 2);

        // Reads now take numbers 3 (open), 4 (read), 5 (file_size), 6 (list), 7 (read).
        fault.set_plan(plan(7, FaultKind::Eio, false, true));
        let reader = fault.open(&file("a")).unwrap();
        reader.read_exact_at(0, &mut buffer).unwrap();
        fault.file_size(&file("a")).unwrap();
        fault.list(dir()).unwrap();
        assert_eq!(os_code(reader.read_exact_at(0, &mut buffer)), Some(EIO_CODE));
        reader.read_exact_at(0, &mut buffer).unwrap();
        assert_eq!(fault.operation_count(), 8);
        assert_eq!(fault.mutating_operation_count(), 2);
        assert_eq!(fault.injected_failure_count(), 1);

        // A plan without reads fails the next mutating operation, not the reads before it.
        fault.set_plan(plan(9, FaultKind::Eio, false, false));
        assert_eq!(fault.read_all(&file("a")).unwrap(), b"0123456789");
        assert!(writer.append(b"x").is_err());
    }

    #[test]
    fn open_can_fail_when_reads_are_counted() {
        let (_memory, fault) = new_pair();
        fault.create(&file("a")).unwrap();
        fault.set_plan(plan(2, FaultKind::Eio, false, true));
        assert!(fault.open(&file("a")).is_err());
        assert!(fault.read_all(&file("a")).is_ok());
    }

    #[test]
    fn crash_after_stops_every_later_mutation() {
        let (memory, fault) = new_pair();
        fault.crash_after(Some(3));
        assert!(!fault.is_crashed());
        let mut writer = fault.create(&file("a")).unwrap();
        writer.append(b"kept").unwrap();
        assert!(!fault.is_crashed());
        writer.sync().unwrap();
        assert!(fault.is_crashed());
        assert_eq!(os_code(writer.append(b"dropped")), Some(EIO_CODE));
        assert_eq!(os_code(writer.sync()), Some(EIO_CODE));
        assert_eq!(os_code(fault.sync_dir(dir())), Some(EIO_CODE));
        assert!(fault.create(&file("b")).is_err());
        assert_eq!(fault.injected_failure_count(), 4);
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"kept");
        // Reads still work after the crash.
        assert_eq!(fault.read_all(&file("a")).unwrap(), b"kept");
        // The name was never made durable, so the power loss takes the file.
        memory.simulate_power_loss(PowerLossMode::DropUnsynced);
        assert!(!memory.exists(&file("a")));
        // Lifting the crash point revives the layer.
        fault.crash_after(None);
        assert!(!fault.is_crashed());
        fault.create(&file("c")).unwrap();
    }

    #[test]
    fn crash_after_zero_and_passed_limits_crash_at_once() {
        let (memory, fault) = new_pair();
        fault.crash_after(Some(0));
        assert!(fault.is_crashed());
        assert!(fault.create(&file("a")).is_err());
        fault.crash_after(None);
        fault.create(&file("a")).unwrap();
        fault.crash_after(Some(1));
        assert!(fault.is_crashed());
        assert!(fault.remove(&file("a")).is_err());
        assert!(memory.exists(&file("a")));
        assert!(!memory.exists(&file("b")));
    }

    #[test]
    fn crash_refusals_ignore_enospc_prefix() {
        let (memory, fault) = new_pair();
        let mut writer = fault.create(&file("a")).unwrap();
        fault.crash_after(Some(1));
        fault.set_plan(plan(2, FaultKind::Enospc, false, false));
        assert_eq!(os_code(writer.append(b"abcd")), Some(EIO_CODE));
        assert_eq!(memory.read_all(&file("a")).unwrap(), b"");
    }

    /// A small log writer: each record is appended and synced, and the file name is made
    /// durable right after creation. Returns how many records were acknowledged.
    fn logging_workload(fs: &dyn FileSystem, records: &[&[u8]]) -> usize {
        let run = || -> Result<usize> {
            fs.create_dir_all(dir())?;
            let mut writer = fs.create(&file("log"))?;
            fs.sync_dir(dir())?;
            let mut acknowledged = 0;
            for record in records {
                writer.append(record)?;
                writer.sync()?;
                acknowledged += 1;
            }
            fs.rename(&file("log"), &file("log.done"))?;
            fs.sync_dir(dir())?;
            Ok(acknowledged)
        };
        match run() {
            Ok(acknowledged) => acknowledged,
            Err(_) => usize::MAX,
        }
    }

    #[test]
    fn crash_at_every_operation_then_power_loss_keeps_acknowledged_records() {
        let records: [&[u8]; 4] = [b"alpha;", b"beta;", b"gamma;", b"delta;"];
        let expected: Vec<u8> = records.concat();

        // A clean run tells how many mutating operations the workload performs.
        let (_memory, fault) = new_pair();
        assert_eq!(logging_workload(&fault, &records), records.len());
        let total_operations = fault.operation_count();
        assert_eq!(total_operations, 3 + 2 * records.len() as u64 + 2);

        for crash_point in 0..=total_operations {
            for mode in [
                PowerLossMode::DropUnsynced,
                PowerLossMode::KeepUnsyncedPrefix { seed: crash_point },
                PowerLossMode::TornTail { seed: crash_point },
            ] {
                let memory = MemFileSystem::new();
                let fault = FaultFileSystem::new(Arc::new(memory.clone()));
                fault.crash_after(Some(crash_point));
                let completed = logging_workload(&fault, &records) != usize::MAX;
                assert_eq!(completed, crash_point == total_operations);
                // Records whose sync succeeded: count the successful syncs among operations
                // 4, 6, 8, ... (create_dir_all, create, sync_dir come first).
                let synced_records = (crash_point.saturating_sub(3) / 2).min(records.len() as u64) as usize;
                let durable_prefix: Vec<u8> = records[..synced_records].concat();
                memory.simulate_power_loss(mode);
                let names = memory.file_names(dir());
                if crash_point < 3 {
                    assert!(names.is_empty(), "crash point {crash_point}: {names:?}");
                    continue;
                }
                assert_eq!(names.len(), 1, "crash point {crash_point}: {names:?}");
                if crash_point == total_operations {
                    assert_eq!(names, vec!["log.done"]);
                }
                let content = memory.read_all(&file(&names[0])).unwrap();
                assert!(content.starts_with(&durable_prefix), "crash point {crash_point}, {mode:?}");
                if mode == PowerLossMode::DropUnsynced {
                    assert_eq!(content, durable_prefix);
                } else if !matches!(mode, PowerLossMode::TornTail { .. }) {
                    assert!(expected.starts_with(&content));
                }
            }
        }
    }

    #[test]
    fn clones_and_handed_out_files_share_counters() {
        let (_memory, fault) = new_pair();
        let clone = fault.clone();
        let shared: Arc<dyn FileSystem> = Arc::new(fault.clone());
        let mut writer = shared.create(&file("a")).unwrap();
        writer.append(b"x").unwrap();
        clone.sync_dir(dir()).unwrap();
        assert_eq!(fault.operation_count(), 3);
        assert!(format!("{fault:?}").contains("operation_count: 3"));
    }

    #[test]
    fn concurrent_operations_get_distinct_numbers() {
        let (_memory, fault) = new_pair();
        std::thread::scope(|scope| {
            for index in 0..4 {
                let fault = fault.clone();
                scope.spawn(move || {
                    let mut writer = fault.create(&file(&format!("w{index}"))).unwrap();
                    for _ in 0..50 {
                        writer.append(b"data").unwrap();
                    }
                });
            }
        });
        assert_eq!(fault.operation_count(), 4 * 51);
    }
}
