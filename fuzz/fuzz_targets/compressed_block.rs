//! Fuzz target: Stored blocks (trailer, checksum, LZ4, Zstandard and Snappy decompression), with
//! compression round trips.
//!
//! The body is `riptide_stress::fuzz_bodies::compressed_block`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::compressed_block(data));
