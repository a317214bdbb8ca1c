//! Versions: which table files are live, by level, and the manifest that makes every change to
//! that set durable.
//!
//! - `edit`: the manifest record ([`edit::VersionEdit`]) and per-file metadata.
//! - `tree`: an immutable [`tree::Version`] (the files of each level) and the ref-counted
//!   [`tree::TableFile`] handles that delete obsolete files when the last reader lets go.
//! - `set`: the [`set::VersionSet`] that owns the current version, the counters, the manifest
//!   and `CURRENT`.

pub(crate) mod edit;
pub(crate) mod set;
pub(crate) mod tree;
