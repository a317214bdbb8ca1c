//! `kill -9` test: a child process writes (acknowledging each write on stdout) while the parent
//! kills it with SIGKILL at a random moment, then reopens the database and checks that every
//! acknowledged write is there. A process crash loses nothing the engine acknowledged, synced
//! or not (the operating system still has the bytes). Several cycles run on the same database.
//! Most kills land a random time after the child's first acknowledged write (so every such cycle
//! writes, however slow the machine); one cycle in four kills the child a random time after it
//! starts, which may land in its recovery.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "RIPTIDE_KILL_TEST_CHILD_DIR";

/// A child process running one of this binary's child tests, which prints `ack ...` for every
/// write acknowledged to it; a thread forwards those lines.
struct AcknowledgingChild {
    process: Child,
    acknowledgements: Receiver<String>,
    reader: JoinHandle<()>,
}

impl AcknowledgingChild {
    /// Starts test `test_name` of this binary with `environment_variable` set to `path`.
    fn spawn(test_name: &str, environment_variable: &str, path: &Path) -> AcknowledgingChild {
        let executable = std::env::current_exe().expect("test binary");
        let mut process = Command::new(&executable)
            .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .env(environment_variable, path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = process.stdout.take().expect("stdout");
        let (sender, acknowledgements) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(acknowledged) = line.strip_prefix("ack ") {
                    if sender.send(acknowledged.trim().to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        AcknowledgingChild { process, acknowledgements, reader }
    }

    /// Waits for the first acknowledgement. The limit is generous: it only turns a child that
    /// never writes into a failure.
    fn first_acknowledgement(&self, cycle: usize) -> String {
        match self.acknowledgements.recv_timeout(Duration::from_secs(120)) {
            Ok(acknowledged) => acknowledged,
            Err(error) => panic!("cycle {cycle}: the child acknowledged no write: {error}"),
        }
    }

    /// Lets the child run for `run`, kills it with SIGKILL, and hands every acknowledgement to
    /// `record`, those printed before the kill included.
    fn run_then_kill(mut self, run: Duration, mut record: impl FnMut(&str)) {
        let deadline = Instant::now() + run;
        while Instant::now() < deadline {
            if let Ok(acknowledged) = self.acknowledgements.recv_timeout(Duration::from_millis(10)) {
                record(&acknowledged);
            }
        }
        self.process.kill().expect("SIGKILL");
        let _ = self.process.wait();
        while let Ok(acknowledged) = self.acknowledgements.recv_timeout(Duration::from_millis(50)) {
            record(&acknowledged);
        }
        let _ = self.reader.join();
    }
}

fn kill_cycles() -> usize {
    std::env::var("RIPTIDE_KILL_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

fn options() -> Options {
    Options {
        memtable_size_bytes: 64 << 10,
        target_file_size_bytes: 64 << 10,
        level0_compaction_trigger_files: 2,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:09}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 97) as usize)).into_bytes()
}

/// The child's body: runs only when the parent starts this test binary with the variable set.
#[test]
fn kill_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let db = Db::open(Path::new(&dir), options()).expect("child open");
    // Continue after the highest key present.
    let mut next = 0u64;
    while db.get(&key(next)).expect("get").is_some() {
        next += 1;
    }
    loop {
        let mut batch = WriteBatch::new();
        let count = 1 + next % 5;
        for i in next..next + count {
            batch.put(&key(i), &value(i));
        }
        db.write_opt(batch, &WriteOptions { sync: next.is_multiple_of(10) }).expect("child write");
        next += count;
        println!("ack {}", next - 1);
    }
}

#[test]
fn kill_nine_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut rng = SmallRng::seed_from_u64(42);
    let mut total_acknowledged = 0;
    for cycle in 0..kill_cycles() {
        let child = AcknowledgingChild::spawn("kill_child", CHILD_ENV, &path);
        let kill_early = rng.gen_range(0..4) == 0;
        let run_millis = rng.gen_range(0..750);
        let mut last_acknowledged: Option<u64> = None;
        let mut record = |acknowledged: &str| {
            if let Ok(number) = acknowledged.parse::<u64>() {
                last_acknowledged = Some(number);
            }
        };
        if !kill_early {
            record(&child.first_acknowledgement(cycle));
        }
        child.run_then_kill(Duration::from_millis(run_millis), record);
        let db = Db::open(&path, options()).unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
        if let Some(last) = last_acknowledged {
            for i in 0..=last {
                assert_eq!(db.get(&key(i)).expect("get"), Some(value(i)), "cycle {cycle}: acknowledged key {i} lost");
            }
            total_acknowledged = last + 1;
        }
        // Prefix property: nothing beyond a gap.
        let mut present = 0;
        while db.get(&key(present)).expect("get").is_some() {
            present += 1;
        }
        let mut iterator = db.iter(&Default::default()).expect("iter");
        iterator.seek_to_last();
        if iterator.valid() {
            assert_eq!(iterator.key(), key(present - 1).as_slice(), "cycle {cycle}: keys after a gap");
        }
        db.close().expect("close");
    }
    assert!(total_acknowledged > 0, "the child never acknowledged a write");
}

const THREADED_CHILD_ENV: &str = "RIPTIDE_KILL_TEST_THREADED_CHILD_DIR";

/// Writer threads of the threaded child: more than the cores of the machines measured, so that
/// self-service writes flush each other's records and wait for preempted predecessors.
const CHILD_THREADS: u64 = 4;

/// Thread `thread`'s `index`th key in the threaded child.
fn thread_key(thread: u64, index: u64) -> Vec<u8> {
    format!("t{thread}-{index:09}").into_bytes()
}

/// The threaded child's body: `CHILD_THREADS` threads of single puts (each thread's tenth is
/// synced), each acknowledged on stdout as "ack THREAD INDEX" once the call returned.
#[test]
fn kill_threaded_child() {
    let Ok(dir) = std::env::var(THREADED_CHILD_ENV) else { return };
    let db = std::sync::Arc::new(Db::open(Path::new(&dir), options()).expect("child open"));
    let threads: Vec<_> = (0..CHILD_THREADS)
        .map(|thread| {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                let mut next = 0u64;
                while db.get(&thread_key(thread, next)).expect("get").is_some() {
                    next += 1;
                }
                loop {
                    let options = WriteOptions { sync: next % 10 == 9 };
                    db.put_opt(&thread_key(thread, next), &value(next), &options).expect("child write");
                    println!("ack {thread} {next}");
                    next += 1;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer thread");
    }
}

/// The kill -9 loop with concurrent writers of single puts (self-service writes,
/// `db/self_service.rs`): every write a thread saw acknowledged is there after the kill, and
/// what each thread wrote is a prefix of its writes.
#[test]
fn kill_nine_loses_no_write_of_concurrent_writers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut rng = SmallRng::seed_from_u64(7);
    let mut total_acknowledged = 0u64;
    for cycle in 0..kill_cycles() {
        let child = AcknowledgingChild::spawn("kill_threaded_child", THREADED_CHILD_ENV, &path);
        let mut last_acknowledged: Vec<Option<u64>> = vec![None; CHILD_THREADS as usize];
        let mut record = |acknowledged: &str| {
            let mut fields = acknowledged.split(' ').map(str::parse::<u64>);
            if let (Some(Ok(thread)), Some(Ok(index))) = (fields.next(), fields.next()) {
                let slot = &mut last_acknowledged[thread as usize];
                *slot = Some(slot.map_or(index, |last| last.max(index)));
            }
        };
        record(&child.first_acknowledgement(cycle));
        child.run_then_kill(Duration::from_millis(rng.gen_range(0..500)), record);
        let db = Db::open(&path, options()).unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
        for (thread, last) in last_acknowledged.iter().enumerate() {
            let thread = thread as u64;
            let mut present = 0;
            while db.get(&thread_key(thread, present)).expect("get").is_some() {
                present += 1;
            }
            if let Some(last) = last {
                assert!(
                    present > *last,
                    "cycle {cycle}: thread {thread} acknowledged write {last}, only {present} survived"
                );
                total_acknowledged += 1;
            }
            // Nothing of the thread's after a gap.
            let next_prefix = thread_key(thread, present);
            let upper = format!("t{thread}.").into_bytes();
            let mut iterator = db.iter(&Default::default()).expect("iter");
            iterator.seek(&next_prefix);
            assert!(
                !iterator.valid() || iterator.key() >= upper.as_slice(),
                "cycle {cycle}: thread {thread} has writes after a gap at {present}"
            );
        }
        db.close().expect("close");
    }
    assert!(total_acknowledged > 0, "the child never acknowledged a write");
}
