//! The Rust side of `make capi-bench`: the same puts and gets as `bench/abi_bench.c`, through
//! the Rust API, so that the difference is the C ABI's cost per call.
//!
//! Usage: `rust_bench DIR [N]`.

use std::time::Instant;

use riptide_engine::{Db, Options};

fn key(i: usize) -> Vec<u8> {
    format!("key{:013}", (i * 7919) % 1_000_003).into_bytes()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: rust_bench DIR [N]")?;
    let n: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(200_000);
    let db = Db::open(&dir, Options::default())?;
    let value = [b'v'; 100];
    // Keys are formatted into a reused buffer, as the C side does with snprintf.
    let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    let start = Instant::now();
    for key in &keys {
        db.put(key, &value)?;
    }
    let put = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    let mut total = 0;
    for key in &keys {
        total += db.get(key)?.ok_or("missing key")?.len();
    }
    let get = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    for key in &keys {
        let mut absent = key.clone();
        absent[0] = b'x';
        if db.get(&absent)?.is_some() {
            return Err("unexpected key".into());
        }
    }
    let missing = start.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(total, n * value.len());
    db.close()?;
    println!("rust   put {put:.0} ns/call  get {get:.0} ns/call  get(absent) {missing:.0} ns/call  (n={n})");
    Ok(())
}
