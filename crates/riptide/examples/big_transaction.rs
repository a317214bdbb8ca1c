//! One large transaction: loads N rows, then updates every one of them in a single pessimistic
//! transaction (an `UPDATE` of the whole table), commits, and prints the time, the
//! transaction's write-set memory, its lock count and the process's peak RSS.
//!
//! ```text
//! cargo run --release --example big_transaction -- --rows 1000000 --value-bytes 100
//! ```
//!
//! The figure the transactions issue asks for is `--rows 10000000` (about 1 GB of writes).
//! Until write sets spill to disk (see "Not yet built" in docs/transactions.md), a transaction
//! commits as one batch, and the write that would take it past `max_batch_size_bytes` fails
//! with `InvalidArgument`; this program shows how far that goes and what it costs.

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

fn main() -> Result<(), riptide::Error> {
    let rows = argument("--rows", 1_000_000);
    let value_bytes = argument("--value-bytes", 100) as usize;
    let directory = tempfile::tempdir()
        .map_err(|error| riptide::Error::Io { context: "creating a temporary directory".to_string(), source: error })?;
    let db = Db::open(directory.path(), Options::default())?;
    let started = Instant::now();
    let mut batch = WriteBatch::new();
    for row in 0..rows {
        batch.put(&key(row), &vec![b'a'; value_bytes]);
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    db.flush()?;
    println!("loaded {rows} rows of {value_bytes} bytes in {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    let transaction = db.begin(&TransactionOptions::default())?;
    let updated = vec![b'b'; value_bytes];
    let mut updated_rows = 0;
    for row in 0..rows {
        if let Err(error) = transaction.put(&key(row), &updated) {
            println!("the update of row {row} failed: {error}");
            break;
        }
        updated_rows += 1;
    }
    let write_seconds = started.elapsed().as_secs_f64();
    let write_set_mib = transaction.write_memory_bytes() as f64 / (1 << 20) as f64;
    let stats = db.stats().transactions;
    println!(
        "updated {updated_rows} rows in {write_seconds:.1} s: write set {write_set_mib:.0} MiB, {} locks ({:.0} MiB), peak RSS {:.0} MiB",
        stats.locks_held,
        stats.lock_memory_bytes as f64 / (1 << 20) as f64,
        peak_rss_mib()
    );
    let started = Instant::now();
    let outcome = transaction.commit();
    println!(
        "commit after {:.1} s: {}; peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        match &outcome {
            Ok(()) => "committed".to_string(),
            Err(error) => format!("failed: {error}"),
        },
        peak_rss_mib()
    );
    db.close()
}
