//! One large transaction: loads N rows, then reads and updates every one of them in a single
//! pessimistic transaction (an `UPDATE` of the whole table: `get_for_update`, then `put`),
//! commits, checks a sample of rows, and prints the times, the transaction's memory, what it
//! spilled, its locks and the process's peak RSS.
//!
//! ```text
//! cargo run --release --example big_transaction -- --rows 10000000 --value-bytes 100
//! ```
//!
//! `--rows 10000000` is the figure the transactions issue asks for (about 1.2 GB of writes).
//! `--prepare 1` prepares the transaction (two-phase commit) and commits it by xid.
//! The write set spills past `TransactionOptions::write_memory_limit_bytes` (32 MiB by
//! default, `--limit-mib` here) and the locks escalate to a column-family lock past
//! `lock_escalation_threshold`; see "Huge transactions" in docs/transactions.md.

use std::time::Instant;

use riptide::{Db, Options, TransactionOptions, WriteBatch};

fn argument(name: &str, default: u64) -> u64 {
    let arguments: Vec<String> = std::env::args().collect();
    arguments
        .iter()
        .position(|argument| argument == name)
        .and_then(|position| arguments.get(position + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The process's peak resident set (`VmHWM`), in MiB, on Linux; 0 elsewhere.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn key(row: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(b"row/key/");
    key[8..].copy_from_slice(&row.to_be_bytes());
    key
}

/// A value of `length` bytes that does not compress (so the figures are about the bytes
/// written, not about the compressor): splitmix64 output seeded by row and round.
fn value(row: u64, round: u64, length: usize) -> Vec<u8> {
    let mut state = row.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ round.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut bytes = Vec::with_capacity(length + 8);
    while bytes.len() < length {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bytes.extend_from_slice(&(mixed ^ (mixed >> 31)).to_le_bytes());
    }
    bytes.truncate(length);
    bytes
}

fn main() -> Result<(), riptide::Error> {
    let rows = argument("--rows", 1_000_000);
    let value_bytes = argument("--value-bytes", 100) as usize;
    let directory = tempfile::tempdir()
        .map_err(|error| riptide::Error::Io { context: "creating a temporary directory".to_string(), source: error })?;
    let db = Db::open(directory.path(), Options::default())?;
    let started = Instant::now();
    let mut batch = WriteBatch::new();
    for row in 0..rows {
        batch.put(&key(row), &value(row, 0, value_bytes));
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    db.flush()?;
    println!("loaded {rows} rows of {value_bytes} bytes in {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    let limit_mib = argument("--limit-mib", 32) as usize;
    let options = TransactionOptions { write_memory_limit_bytes: limit_mib << 20, ..TransactionOptions::default() };
    let transaction = db.begin(&options)?;
    let mut updated_rows = 0;
    let mut largest_write_memory = 0;
    for row in 0..rows {
        let written = transaction.get_for_update(&key(row)).and_then(|old| {
            if old.is_none() {
                println!("row {row} is missing");
            }
            transaction.put(&key(row), &value(row, 1, value_bytes))
        });
        if let Err(error) = written {
            println!("the update of row {row} failed: {error}");
            break;
        }
        updated_rows += 1;
        if row % 4096 == 0 {
            largest_write_memory = largest_write_memory.max(transaction.write_memory_bytes());
        }
    }
    let write_seconds = started.elapsed().as_secs_f64();
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    let write_set_mib = mib(largest_write_memory.max(transaction.write_memory_bytes()) as u64);
    let stats = db.stats().transactions;
    println!(
        "updated {updated_rows} rows in {write_seconds:.1} s: write set at most {write_set_mib:.1} MiB in memory \
         (limit {limit_mib} MiB), {:.0} MiB spilled, {} row locks ({:.1} MiB), peak RSS {:.0} MiB",
        mib(transaction.spilled_bytes()),
        stats.locks_held,
        mib(stats.lock_memory_bytes as u64),
        peak_rss_mib()
    );
    // `--prepare 1`: two-phase commit, as MariaDB does with the binary log on: prepare, then
    // commit by xid after the handle is gone.
    let outcome = if argument("--prepare", 0) == 1 {
        let started = Instant::now();
        transaction.prepare(b"big-update")?;
        drop(transaction);
        println!("prepare after {:.1} s; peak RSS {:.0} MiB", started.elapsed().as_secs_f64(), peak_rss_mib());
        let started = Instant::now();
        let outcome = db.commit_prepared(b"big-update");
        (started, outcome)
    } else {
        let started = Instant::now();
        (started, transaction.commit())
    };
    let (started, outcome) = outcome;
    println!(
        "commit after {:.1} s: {}; peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        match &outcome {
            Ok(()) => "committed".to_string(),
            Err(error) => format!("failed: {error}"),
        },
        peak_rss_mib()
    );
    if outcome.is_ok() {
        let started = Instant::now();
        let step = (rows / 1000).max(1);
        let wrong = (0..rows)
            .step_by(step as usize)
            .filter(|&row| db.get(&key(row)).ok().flatten() != Some(value(row, 1, value_bytes)))
            .count();
        println!("checked {} rows in {:.2} s: {wrong} wrong", rows.div_ceil(step), started.elapsed().as_secs_f64());
    }
    db.close()
}
