//! What a compaction does with blob references: it carries the references of the entries it
//! keeps into its output tables (the values stay where they are), counts the records of the
//! entries it drops as garbage of their blob files, and moves the live values of the blob files
//! chosen for garbage collection into new blob files (or back into the table, when key-value
//! separation was turned off), so that those files stop being referenced and can be deleted.
//!
//! Concurrency contract: a [`BlobRelocation`] belongs to one compaction (or sub-compaction)
//! thread; it reads blob files through their shared handles and writes its own new files.
//!
//! Invariants: I34 (a new blob file is synced by [`BlobRelocation::finish`], before the
//! compaction's manifest record names it) and I35 (the files chosen for relocation lose the
//! references this compaction rewrites; they are deleted only once no live table references
//! them).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use super::format::BlobReference;
use super::{BlobFileBuilder, BlobFileMetadata, BlobFiles};
use crate::db::filename::blob_path;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::{ParsedKey, ValueKind};
use crate::options::Compression;

/// The blob files whose live values a compaction moves: those whose garbage is at least
/// `ratio` of their bytes, and the oldest `age_cutoff` share of them by number.
pub(crate) fn files_to_relocate(files: &BlobFiles, ratio: f64, age_cutoff: f64) -> HashSet<u64> {
    let oldest_count = (files.len() as f64 * age_cutoff).floor() as usize;
    files
        .values()
        .enumerate()
        .filter(|(position, file)| *position < oldest_count || file.garbage_ratio() >= ratio)
        .map(|(_, file)| file.number())
        .collect()
}

/// How a kept entry is written to the output table.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum KeptEntry {
    /// As it was read; a `BlobIndex` entry keeps referencing this blob file.
    Unchanged { referenced: Option<u64> },
    /// With this kind and the value left in the caller's buffer; a `BlobIndex` entry now
    /// references this (new) blob file.
    Rewritten { kind: ValueKind, referenced: Option<u64> },
}

/// The blob side of one compaction; see the module documentation.
pub(crate) struct BlobRelocation<'a> {
    dir: &'a Path,
    file_system: &'a dyn FileSystem,
    column_family_id: u32,
    files: BlobFiles,
    relocate: HashSet<u64>,
    min_blob_size_bytes: Option<usize>,
    blob_file_size_bytes: u64,
    /// How the moved values are stored in the new blob files.
    blob_compression: Compression,
    new_file_number: &'a (dyn Fn() -> u64 + Sync),
    builder: Option<BlobFileBuilder>,
    /// Blob files written and synced.
    pub(crate) finished: Vec<BlobFileMetadata>,
    /// Every blob file created, finished or not (to remove after a failure).
    pub(crate) created: Vec<u64>,
    /// Garbage found per blob file: (records, bytes).
    pub(crate) garbage: BTreeMap<u64, (u64, u64)>,
}

impl<'a> BlobRelocation<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dir: &'a Path,
        file_system: &'a dyn FileSystem,
        column_family_id: u32,
        files: BlobFiles,
        relocate: HashSet<u64>,
        min_blob_size_bytes: Option<usize>,
        blob_file_size_bytes: u64,
        blob_compression: Compression,
        new_file_number: &'a (dyn Fn() -> u64 + Sync),
    ) -> BlobRelocation<'a> {
        BlobRelocation {
            dir,
            file_system,
            column_family_id,
            files,
            relocate,
            min_blob_size_bytes,
            blob_file_size_bytes,
            blob_compression,
            new_file_number,
            builder: None,
            finished: Vec::new(),
            created: Vec::new(),
            garbage: BTreeMap::new(),
        }
    }

    fn decode(value: &[u8]) -> Result<BlobReference> {
        BlobReference::decode(value).map_err(|reason| Error::corruption("<compaction input>", 0, reason))
    }

    fn add_garbage(&mut self, reference: &BlobReference, user_key: &[u8]) {
        let entry = self.garbage.entry(reference.file_number).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += reference.record_size_bytes(user_key.len());
    }

    /// An entry the compaction drops: its blob record, if it has one, becomes garbage.
    pub(crate) fn dropped(&mut self, parsed: &ParsedKey<'_>, value: &[u8]) -> Result<()> {
        if parsed.kind == ValueKind::BlobIndex {
            let reference = Self::decode(value)?;
            self.add_garbage(&reference, parsed.user_key);
        }
        Ok(())
    }

    /// An entry the compaction keeps. When its value must move, the new value (the value
    /// itself, or a reference to its new record) is left in `rewritten`.
    pub(crate) fn kept(&mut self, parsed: &ParsedKey<'_>, value: &[u8], rewritten: &mut Vec<u8>) -> Result<KeptEntry> {
        if parsed.kind != ValueKind::BlobIndex {
            return Ok(KeptEntry::Unchanged { referenced: None });
        }
        let reference = Self::decode(value)?;
        if !self.relocate.contains(&reference.file_number) {
            return Ok(KeptEntry::Unchanged { referenced: Some(reference.file_number) });
        }
        let file = self.files.get(&reference.file_number).ok_or_else(|| {
            Error::corruption(
                "<compaction input>",
                0,
                format!("entry references blob file {} that no version lists", reference.file_number),
            )
        })?;
        // Relocation reads every value once; caching them would only evict the readers' blocks.
        let live_value = file.read_value(parsed.user_key, &reference, None, false)?;
        self.add_garbage(&reference, parsed.user_key);
        rewritten.clear();
        let separate = self.min_blob_size_bytes.is_some_and(|threshold| live_value.len() >= threshold);
        if !separate {
            rewritten.extend_from_slice(&live_value);
            return Ok(KeptEntry::Rewritten { kind: ValueKind::Put, referenced: None });
        }
        if self.builder.as_ref().is_some_and(|builder| builder.size_bytes() >= self.blob_file_size_bytes) {
            self.finish_current()?;
        }
        let builder = match self.builder.as_mut() {
            Some(builder) => builder,
            None => {
                let number = (self.new_file_number)();
                let path = blob_path(self.dir, number);
                self.created.push(number);
                let file = self.file_system.create(&path)?;
                self.builder.insert(BlobFileBuilder::new(file, number, self.column_family_id, self.blob_compression)?)
            }
        };
        let moved = builder.add(parsed.user_key, &live_value)?;
        moved.encode(rewritten);
        Ok(KeptEntry::Rewritten { kind: ValueKind::BlobIndex, referenced: Some(moved.file_number) })
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some(builder) = self.builder.take() {
            self.finished.push(builder.finish()?);
        }
        Ok(())
    }

    /// Finishes and syncs the blob file being written (I34).
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.finish_current()
    }

    /// Removes every blob file this compaction created (after a failure).
    pub(crate) fn remove_created(&mut self) {
        self.builder = None;
        for &number in &self.created {
            let _ = self.file_system.remove(&blob_path(self.dir, number));
        }
    }
}

/// Adds one table's blob references to `set` as the table is written.
pub(crate) fn note_reference(set: &mut BTreeSet<u64>, entry: &KeptEntry) {
    match entry {
        KeptEntry::Unchanged { referenced: Some(number) } | KeptEntry::Rewritten { referenced: Some(number), .. } => {
            set.insert(*number);
        }
        _ => {}
    }
}
