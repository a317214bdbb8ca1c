//! Fuzz target: An API call sequence decoded from the input, run on a `MemFileSystem` against a
//! `BTreeMap`.
//!
//! The body is `riptide_stress::fuzz_bodies::api_sequence`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::api_sequence(data));
