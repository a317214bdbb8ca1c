//! Riptide's benchtool: Riptide, RocksDB and TidesDB side by side, with CSV results, reports and charts.
//!
//! The binary `riptide-bench` runs one workload on one engine (`run`), a whole suite on every
//! engine (`suite`, each run in a child process of its own), regenerates a suite's report
//! (`report`), or compares two result files (`compare`). The library holds the pieces so that
//! tests can drive them: key and value generation ([`keys`]), the engines ([`engine`]), one
//! measured run ([`workload`]), the transaction workload's read-modify-write transactions
//! ([`transaction`]), metric arithmetic and `/proc` counters ([`metrics`]), result
//! files ([`csv`]), throughput over time ([`timeline`]), reports ([`report`]), suites ([`suite`]),
//! comparisons ([`compare`]), the checks of every engine's answers ([`verify`]) and the kill -9 test
//! of unsynced writes ([`durability`]).

pub mod compare;
pub mod csv;
pub mod durability;
pub mod engine;
pub mod error;
pub mod keys;
pub mod metrics;
pub mod report;
pub mod suite;
pub mod system;
pub mod timeline;
pub mod transaction;
pub mod verify;
pub mod workload;
