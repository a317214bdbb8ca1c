//! Fuzz target: Manifest version edits (`VersionEdit::decode`), with a canonical re-encoding round
//! trip.
//!
//! The body is `riptide_stress::fuzz_bodies::version_edit`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::version_edit(data));
