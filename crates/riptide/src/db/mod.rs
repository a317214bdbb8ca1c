//! Placeholder: being written.

/// The database handle.
pub struct Db {}

/// An iterator over user keys.
pub struct DbIterator {}
