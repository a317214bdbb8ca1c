//! Fuzz target: the decoder of backup descriptions (`meta/NNNNNN` in a backup directory).
//!
//! The body is `riptide_stress::fuzz_bodies::backup_meta`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::backup_meta(data));
