//! Fuzz target: Whole SSTables through `Table::open` (footer, properties, index, filter) and full
//! iteration and lookups.
//!
//! The body is `riptide_stress::fuzz_bodies::table`, shared with the stable replay test.
//! Concurrency contract: libFuzzer calls it on one thread. Invariant: it panics only on a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| riptide_stress::fuzz_bodies::table(data));
