//! Placeholder: being written.

/// A batch of writes applied atomically.
#[derive(Default)]
pub struct WriteBatch {}
