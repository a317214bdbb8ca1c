//! A small loader: writes N keys from T threads in batches of B and prints the rate.
//!
//! ```text
//! cargo run --release --example loader -- --keys 1000000 --threads 2 --batch 100 --pattern random
//! ```
//!
//! Keys are 16 bytes; values are 100 bytes that compress to about half. `random` writes a
//! pseudo-random permutation of the key space (every key once, uniformly spread); `seq` writes
//! in ascending order. Each thread takes a disjoint share of the keys. The last line printed is
//! CSV: `pattern,keys,threads,batch,seconds,ops_per_second`.

use std::sync::Arc;
use std::time::Instant;

use riptide::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

struct Arguments {
    keys: u64,
    threads: u64,
    batch: u64,
    value_size_bytes: usize,
    pattern: String,
    dir: Option<String>,
    sync: bool,
    reads: u64,
    scans: u64,
}

fn parse_arguments() -> Result<Arguments, String> {
    let mut arguments = Arguments {
        keys: 1_000_000,
        threads: 2,
        batch: 100,
        value_size_bytes: 100,
        pattern: "random".to_string(),
        dir: None,
        sync: false,
        reads: 0,
        scans: 0,
    };
    let mut raw = std::env::args().skip(1);
    while let Some(flag) = raw.next() {
        let mut value = || raw.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--keys" => arguments.keys = value()?.parse().map_err(|e| format!("--keys: {e}"))?,
            "--threads" => arguments.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--batch" => arguments.batch = value()?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--value-size" => {
                arguments.value_size_bytes = value()?.parse().map_err(|e| format!("--value-size: {e}"))?
            }
            "--pattern" => arguments.pattern = value()?,
            "--dir" => arguments.dir = Some(value()?),
            "--sync" => arguments.sync = true,
            "--reads" => arguments.reads = value()?.parse().map_err(|e| format!("--reads: {e}"))?,
            "--scans" => arguments.scans = value()?.parse().map_err(|e| format!("--scans: {e}"))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !["seq", "random"].contains(&arguments.pattern.as_str()) {
        return Err("--pattern must be seq or random".to_string());
    }
    if arguments.threads == 0 || arguments.batch == 0 {
        return Err("--threads and --batch must be positive".to_string());
    }
    Ok(arguments)
}

/// A bijection on [0, 2^64) (an invertible mixer), so `permute(i)` for i in 0..n gives n
/// distinct, uniformly spread keys.
fn permute(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn make_value(seed: u64, length_bytes: usize) -> Vec<u8> {
    // Half random bytes, half a repeated byte: compresses to about half, like db_bench.
    let mut value = Vec::with_capacity(length_bytes);
    let mut state = seed | 1;
    while value.len() < length_bytes / 2 {
        state = permute(state);
        value.extend_from_slice(&state.to_le_bytes());
    }
    value.truncate(length_bytes / 2);
    value.resize(length_bytes, b'v');
    value
}

fn main() {
    let arguments = match parse_arguments() {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("loader: {message}");
            std::process::exit(2);
        }
    };
    let temporary = tempfile::tempdir().expect("temporary directory");
    let dir = arguments.dir.clone().map_or_else(|| temporary.path().join("db"), Into::into);
    let db = Arc::new(Db::open(&dir, Options::default()).expect("open"));
    let started = Instant::now();
    let per_thread = arguments.keys / arguments.threads;
    let handles: Vec<_> = (0..arguments.threads)
        .map(|thread| {
            let db = Arc::clone(&db);
            let pattern = arguments.pattern.clone();
            let (batch_size, value_size_bytes, sync) = (arguments.batch, arguments.value_size_bytes, arguments.sync);
            std::thread::spawn(move || {
                let options = WriteOptions { sync };
                let first = thread * per_thread;
                let mut index = first;
                while index < first + per_thread {
                    let mut batch = WriteBatch::new();
                    let end = (index + batch_size).min(first + per_thread);
                    for i in index..end {
                        let number = if pattern == "seq" { i } else { permute(i) };
                        let key = format!("{number:016x}");
                        batch.put(key.as_bytes(), &make_value(i, value_size_bytes));
                    }
                    db.write_opt(batch, &options).expect("write");
                    index = end;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("writer thread");
    }
    let seconds = started.elapsed().as_secs_f64();
    let written = per_thread * arguments.threads;
    let rate = written as f64 / seconds;
    eprintln!("wrote {written} keys in {seconds:.2} s: {rate:.0} ops/s; level files {:?}", db.level_file_counts());
    println!("{},{},{},{},{seconds:.3},{rate:.0}", arguments.pattern, written, arguments.threads, arguments.batch);
    if arguments.reads > 0 {
        let rate = timed_by_threads(&db, arguments.threads, arguments.reads, written, &arguments.pattern, |db, key| {
            assert!(db.get(key).expect("get").is_some(), "a written key is missing");
        });
        eprintln!("random point reads: {rate:.0} ops/s");
        println!("read,{},{},{rate:.0}", arguments.reads, arguments.threads);
    }
    if arguments.scans > 0 {
        let rate = timed_by_threads(&db, arguments.threads, arguments.scans, written, &arguments.pattern, |db, key| {
            let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
            iterator.seek(key);
            let mut seen = 0;
            while iterator.valid() && seen < 100 {
                seen += 1;
                iterator.next();
            }
            iterator.status().expect("scan");
        });
        eprintln!("100-key range scans: {rate:.0} scans/s");
        println!("scan,{},{},{rate:.0}", arguments.scans, arguments.threads);
    }
}

/// Runs `operation` `count` times over keys drawn from the written key space, split across
/// threads, and returns operations per second.
fn timed_by_threads(
    db: &Arc<Db>,
    threads: u64,
    count: u64,
    written: u64,
    pattern: &str,
    operation: impl Fn(&Db, &[u8]) + Send + Sync + Copy + 'static,
) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let db = Arc::clone(db);
            let sequential = pattern == "seq";
            std::thread::spawn(move || {
                for i in 0..count / threads {
                    let index = permute(thread * 1_000_003 + i) % written;
                    let number = if sequential { index } else { permute(index) };
                    operation(&db, format!("{number:016x}").as_bytes());
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("reader thread");
    }
    (count / threads * threads) as f64 / started.elapsed().as_secs_f64()
}
