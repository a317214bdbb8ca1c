//! Fuzz target: Bloom filter blocks: decoding arbitrary bytes, and no false negatives for built
//! filters.
//!
//! The body is `riptide_stress::fuzz_bodies::bloom_filter`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::bloom_filter(data));
