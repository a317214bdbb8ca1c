//! Placeholder: being written.

#[doc(hidden)]
pub mod bench_support {}
