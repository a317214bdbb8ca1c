//! Fuzz target: A whole manifest replayed by `VersionSet::recover`: record framing, edits, and the
//! checks on the resulting version.
//!
//! The body is `riptide_stress::fuzz_bodies::manifest`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::manifest(data));
