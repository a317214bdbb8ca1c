//! `kill -9` test: a child process writes (acknowledging each write on stdout) while the parent
//! kills it with SIGKILL at a random moment, then reopens the database and checks that every
//! acknowledged write is there. A process crash loses nothing the engine acknowledged, synced
//! or not (the operating system still has the bytes). Several cycles run on the same database.
//! Most kills land a random time after the child's first acknowledged write (so every such cycle
//! writes, however slow the machine); one cycle in four kills the child a random time after it
//! starts, which may land in its recovery.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::{Db, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "RIPTIDE_KILL_TEST_CHILD_DIR";

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
    let executable = std::env::current_exe().expect("test binary");
    let mut rng = SmallRng::seed_from_u64(42);
    let cycles = std::env::var("RIPTIDE_KILL_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let mut total_acknowledged = 0;
    for cycle in 0..cycles {
        let mut child = Command::new(&executable)
            .args(["--exact", "kill_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let kill_early = rng.gen_range(0..4) == 0;
        let run_millis = rng.gen_range(0..750);
        let (sender, receiver) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(number) = line.strip_prefix("ack ") {
                    if let Ok(number) = number.trim().parse::<u64>() {
                        if sender.send(number).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut last_acknowledged: Option<u64> = None;
        if !kill_early {
            // A generous limit that only turns a child that never writes into a failure.
            match receiver.recv_timeout(Duration::from_secs(120)) {
                Ok(number) => last_acknowledged = Some(number),
                Err(error) => panic!("cycle {cycle}: the child acknowledged no write: {error}"),
            }
        }
        let deadline = Instant::now() + Duration::from_millis(run_millis);
        while Instant::now() < deadline {
            if let Ok(number) = receiver.recv_timeout(Duration::from_millis(10)) {
                last_acknowledged = Some(number);
            }
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // Acknowledgements already printed before the kill count too.
        while let Ok(number) = receiver.recv_timeout(Duration::from_millis(50)) {
            last_acknowledged = Some(number);
        }
        let _ = reader.join();
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
    let executable = std::env::current_exe().expect("test binary");
    let mut rng = SmallRng::seed_from_u64(7);
    let cycles = std::env::var("RIPTIDE_KILL_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let mut total_acknowledged = 0u64;
    for cycle in 0..cycles {
        let mut child = Command::new(&executable)
            .args(["--exact", "kill_threaded_child", "--nocapture", "--test-threads=1"])
            .env(THREADED_CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = std::sync::mpsc::channel::<(u64, u64)>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut fields = line.strip_prefix("ack ").unwrap_or("").split(' ').map(str::parse::<u64>);
                if let (Some(Ok(thread)), Some(Ok(index))) = (fields.next(), fields.next()) {
                    if sender.send((thread, index)).is_err() {
                        break;
                    }
                }
            }
        });
        let mut last_acknowledged: Vec<Option<u64>> = vec![None; CHILD_THREADS as usize];
        let mut record = |(thread, index): (u64, u64)| {
            let slot = &mut last_acknowledged[thread as usize];
            *slot = Some(slot.map_or(index, |last| last.max(index)));
        };
        // A generous limit that only turns a child that never writes into a failure.
        match receiver.recv_timeout(Duration::from_secs(120)) {
            Ok(ack) => record(ack),
            Err(error) => panic!("cycle {cycle}: the child acknowledged no write: {error}"),
        }
        let deadline = Instant::now() + Duration::from_millis(rng.gen_range(0..500));
        while Instant::now() < deadline {
            if let Ok(ack) = receiver.recv_timeout(Duration::from_millis(10)) {
                record(ack);
            }
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        while let Ok(ack) = receiver.recv_timeout(Duration::from_millis(50)) {
            record(ack);
        }
        let _ = reader.join();
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
