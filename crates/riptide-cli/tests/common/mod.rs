//! Helpers shared by the integration tests of the `riptide` binary: running it, and building
//! (and damaging) databases the way the engine's corruption tests do.
//!
//! The fixtures reuse the engine's own test helpers (`crates/riptide/tests/common`: tiny
//! memtables and blocks, deterministic keys and values that name their key) on the real file
//! system, and damage files as the engine's `MemFileSystem::corrupt_byte` does (every bit of
//! one byte flipped) or by truncation.
//!
//! Concurrency contract: each test works in its own temporary directory, and the tests of one
//! binary run one at a time (see `SERIAL`).
//!
//! Invariants: `run` never lets a panic of the binary pass: it fails the test when stderr
//! shows one.
#![allow(dead_code)]

#[path = "../../../riptide/tests/common/mod.rs"]
mod engine;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, MutexGuard};

pub use engine::{key, small_options, value};
use riptide::fs::OsFileSystem;
use riptide::{Db, Options, WriteOptions};

/// What a run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Stdout's lines.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// Runs `riptide` with `arguments`.
pub fn run<S: AsRef<std::ffi::OsStr>>(arguments: &[S]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_riptide")).args(arguments).output().expect("run riptide");
    let run = Run {
        code: output.status.code().expect("riptide exited by a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "riptide panicked: {}", run.stderr);
    run
}

/// Runs `riptide` and expects exit code `code`.
pub fn run_expect<S: AsRef<std::ffi::OsStr>>(arguments: &[S], code: i32) -> Run {
    let run = run(arguments);
    assert_eq!(
        run.code,
        code,
        "riptide {:?}\nstdout: {}\nstderr: {}",
        arguments.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>(),
        run.stdout,
        run.stderr
    );
    run
}

/// Serialises the tests of one test binary. A child process started while a test of the
/// same process has a database open inherits the descriptor of its `LOCK` file between `fork`
/// and `exec`, and an OS file lock lives as long as any descriptor of it: another test that
/// closed its database and at once ran the binary on it could find it still locked.
static SERIAL: Mutex<()> = Mutex::new(());

/// A test's temporary directory; holds the test binary's serialisation lock while it lives.
pub struct Scratch {
    dir: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

impl Scratch {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A fresh temporary directory and the path of a database inside it (not created).
pub fn scratch() -> (Scratch, PathBuf) {
    let serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("db");
    (Scratch { dir, _serial: serial }, db)
}

/// The engine tests' small options, on the real file system.
pub fn options() -> Options {
    Options { memtable_size_bytes: 1 << 20, ..small_options(Arc::new(OsFileSystem)) }
}

/// Writes `count` keys into tables (flushed), as the engine's `database_in_tables` does.
pub fn database_in_tables(path: &Path, count: u64) {
    let db = Db::open(path, options()).expect("open");
    for i in 0..count {
        db.put(&key(i), &value(i, 1, 60)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
}

/// Writes `count` keys and closes without flushing, so they sit in the log, as the engine's
/// `database_in_wal` does.
pub fn database_in_wal(path: &Path, count: u64) {
    let db = Db::open(path, options()).expect("open");
    for i in 0..count {
        db.put_opt(&key(i), &value(i, 1, 50), &WriteOptions { sync: false }).expect("put");
    }
    db.close().expect("close");
}

/// The files of `dir` whose names end with `suffix`, sorted.
pub fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_file() && path.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// The manifest `CURRENT` names.
pub fn current_manifest(dir: &Path) -> PathBuf {
    let name = std::fs::read_to_string(dir.join("CURRENT")).expect("CURRENT");
    dir.join(name.trim_end())
}

/// Flips every bit of the byte at `offset`, as `MemFileSystem::corrupt_byte` does.
pub fn corrupt_byte(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset as usize] ^= 0xff;
    std::fs::write(path, bytes).expect("write");
}

/// Cuts the file to `length` bytes.
pub fn truncate(path: &Path, length: u64) {
    std::fs::OpenOptions::new().write(true).open(path).expect("open").set_len(length).expect("truncate");
}

/// The path as a string argument.
pub fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
