//! Fuzz target: WAL and manifest record framing (`LogReader`) under every recovery policy, with an
//! accounting identity and a rewrite round trip.
//!
//! The body is `riptide_stress::fuzz_bodies::wal_record`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::wal_record(data));
