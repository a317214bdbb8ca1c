//! Fuzz target: Uncompressed data and index blocks: decoding, restart points and cursor movement.
//!
//! The body is `riptide_stress::fuzz_bodies::block`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::block(data));
