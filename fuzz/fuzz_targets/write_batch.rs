//! Fuzz target: Write batches as recovery decodes them (`WriteBatch::from_data`), with a re-
//! encoding round trip.
//!
//! The body is `riptide_stress::fuzz_bodies::write_batch`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::write_batch(data));
