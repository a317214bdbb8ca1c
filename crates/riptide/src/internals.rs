//! Internal types re-exported for the criterion benches and the fuzz targets only. Not part of
//! the supported API: names and signatures here change without notice.

pub use crate::memtable::bench_support as memtable;
pub use crate::sstable::bench_support as sstable;
