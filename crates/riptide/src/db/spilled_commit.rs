//! The commit of a transaction whose writes were spilled (`txn/spill.rs`): its writes become
//! level-0 tables at one new sequence number instead of one write batch.
//!
//! Holding write leadership (so no write group is in flight and none starts), the commit:
//! 1. switches and flushes the memtables of the column families it writes, so that no memtable
//!    holds an older version of a key its tables will hold (reads take the first version found,
//!    memtables first: I17, I30);
//! 2. validates what it read (REPEATABLE READ's `get_for_update` keys, SERIALIZABLE's reads and
//!    ranges) against the commit history, as a batch commit does;
//! 3. takes sequence number S = last + 1 and writes, per column family, one table merging
//!    every layer of the write set (newest write of each key; deletes as tombstones), all at S,
//!    checking each key against the history (first committer wins) and the prepared
//!    transactions' guards as it goes;
//! 4. syncs the WAL (so every earlier write is durable before this commit is: what survives a
//!    power loss stays a prefix of the write history, I12) and records all the tables in one
//!    manifest record (`VersionSet::log_and_apply_group`): that record is the commit point, so
//!    a crash leaves all of the transaction or none of it;
//! 5. publishes the new versions, then the sequence, and appends a marker record at S to the
//!    WAL, which keeps the logs' sequence numbers contiguous for recovery (I12).
//!
//! The commit history does not list the transaction's keys (there may be millions): it records
//! one span per table instead, from its smallest to its largest key, at S; an open transaction
//! whose snapshot is older than S fails its validation when it touched a key inside a span
//! (whether or not the commit wrote that key: coarse, and correct).
//!
//! The commit is durable when it returns (the manifest record is synced), whatever the
//! transaction's `sync` option. It holds the write path for as long as writing the tables
//! takes: other writers wait.
//!
//! Concurrency contract: runs on the committing transaction's thread under write leadership;
//! takes the state mutex, the history mutex and the WAL mutex one at a time, never two at once.

use super::compaction::meta_from_properties;
use super::filename::table_path;
use super::write::{
    append_to_wal, check_column_families_live, make_room_for_write, sync_wal, wait_until_flushed, with_write_leadership,
};
use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{append_internal_key, user_key, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::sstable::{TableBuilder, TableOptions};
use crate::txn::history::Validation;
use crate::txn::own_cursor::OwnCursor;
use crate::txn::prepared::MARKER_COLUMN_FAMILY_ID;
use crate::txn::spill::kind_of;
use crate::version::edit::{FileMetadata, VersionEdit};
use std::sync::atomic::Ordering;

/// What a spilled transaction commits: a cursor over its writes per column family, and what
/// its reads must be validated against (`validation.written` is empty: the written keys are
/// checked while the tables are written).
pub(crate) struct SpilledCommit {
    pub(crate) families: Vec<(u32, OwnCursor)>,
    pub(crate) validation: Validation,
}

/// Commits `request`; returns its sequence number. [`Error::Conflict`] when validation failed
/// (nothing was written).
pub(crate) fn commit(inner: &DbInner, request: SpilledCommit) -> Result<u64> {
    let ids: Vec<u32> = request.families.iter().map(|(id, _)| *id).collect();
    check_column_families_live(inner, &ids)?;
    let result = with_write_leadership(inner, || commit_as_leader(inner, request, &ids));
    if let Err(error) = &result {
        // A failed write or sync of the commit's tables, of the WAL or of the directory stops
        // every later write until a reopen, as a failed flush does (I10): after a failed sync
        // the engine cannot know what is durable. A conflict or a dropped column family is no
        // such failure.
        if error.is_io() || matches!(error, Error::Corruption { .. }) {
            let mut state = inner.state.lock();
            inner.set_background_error(&mut state, error.duplicate());
        }
    }
    result
}

fn commit_as_leader(inner: &DbInner, request: SpilledCommit, ids: &[u32]) -> Result<u64> {
    // Column families dropped while the commit queued fail it here (drops take leadership).
    check_column_families_live(inner, ids)?;
    flush_memtables(inner, ids)?;
    let order_of = |id: u32| inner.column_family_order(id);
    inner.transactions.history.lock().validate(&request.validation, &order_of)?;
    let sequence = inner.last_sequence.load(Ordering::Acquire) + 1;
    if sequence > MAX_SEQUENCE_NUMBER {
        return Err(Error::invalid("sequence numbers exhausted"));
    }
    let mut built: Vec<(u32, FileMetadata)> = Vec::new();
    let result = (|| {
        for (id, cursor) in request.families {
            if let Some(meta) = write_table(inner, id, cursor, sequence, &request.validation)? {
                built.push((id, meta));
            }
        }
        inner.file_system.sync_dir(&inner.dir)?;
        let mut wal = inner.wal.lock();
        sync_wal(inner, &mut wal)
    })();
    if let Err(error) = result {
        for (_, meta) in &built {
            let _ = inner.file_system.remove(&table_path(&inner.dir, meta.number));
        }
        return Err(error);
    }
    install(inner, built, sequence, request.validation.commits_prepared)?;
    Ok(sequence)
}

/// Switches the memtables of `ids` and waits until they are flushed (under leadership, so no
/// write refills them meanwhile).
fn flush_memtables(inner: &DbInner, ids: &[u32]) -> Result<()> {
    let mut state = inner.state.lock();
    make_room_for_write(inner, &mut state, ids, true)?;
    wait_until_flushed(inner, &mut state, ids)
}

/// Writes column family `id`'s merged writes as one table at `sequence`, checking each key.
/// `None` when there was nothing to write.
fn write_table(
    inner: &DbInner,
    id: u32,
    mut cursor: OwnCursor,
    sequence: u64,
    validation: &Validation,
) -> Result<Option<FileMetadata>> {
    let (options, number) = {
        let mut state = inner.state.lock();
        let family =
            state.column_families.get(&id).ok_or_else(|| Error::invalid(format!("column family {id} was dropped")))?;
        let options = family.shared.options();
        (options, state.versions.new_file_number())
    };
    let path = table_path(&inner.dir, number);
    let order_of = |id: u32| inner.column_family_order(id);
    let written = (|| {
        let file = inner.file_system.create(&path)?;
        let mut builder = TableBuilder::new(file, path.clone(), TableOptions::for_level(&options, 0, false))
            .with_memory_charge(inner.memory.builder_charge());
        let mut internal_key = Vec::new();
        // I42: puts into a column family with a `ttl` expire that long after the commit, as
        // they would in a committed batch.
        let expires_at_us =
            options.ttl.map(|ttl| inner.snapshots.clock().now_us().saturating_add(crate::ttl::duration_us(ttl)));
        let mut stored = Vec::new();
        cursor.seek_to_first();
        while let Some((key, written)) = cursor.current() {
            inner.transactions.history.lock().validate_written_key(validation, id, key, &order_of)?;
            internal_key.clear();
            match (written, expires_at_us) {
                (Some(value), Some(expires_at_us)) => {
                    append_internal_key(&mut internal_key, key, sequence, ValueKind::PutWithExpiry);
                    stored.clear();
                    crate::ttl::encode_expiring(&mut stored, expires_at_us, value);
                    builder.add(&internal_key, &stored)?;
                }
                _ => {
                    append_internal_key(&mut internal_key, key, sequence, kind_of(written));
                    builder.add(&internal_key, written.as_deref().unwrap_or_default())?;
                }
            }
            cursor.next();
        }
        cursor.status()?;
        if builder.num_entries() == 0 {
            return Ok(None);
        }
        let properties = builder.finish()?;
        Ok(Some(meta_from_properties(number, &properties)))
    })();
    if !matches!(written, Ok(Some(_))) {
        let _ = inner.file_system.remove(&path);
    }
    written
}

/// Records the tables in one manifest record, publishes them at `sequence` and logs the marker.
/// `prepared` is the number of the prepared transaction this commits, if it is one.
fn install(inner: &DbInner, built: Vec<(u32, FileMetadata)>, sequence: u64, prepared: Option<u64>) -> Result<()> {
    {
        let mut state = inner.state.lock();
        // I30: under leadership nothing refilled the memtables flushed before the tables were
        // written, so no memtable holds a version older than the tables' of their keys.
        debug_assert!(
            built.iter().all(|(id, _)| state
                .column_families
                .get(id)
                .is_none_or(|family| family.memtable.is_empty() && family.immutables.is_empty())),
            "I30: a spilled commit's column families have empty memtables"
        );
        debug_assert_eq!(inner.last_sequence.load(Ordering::Acquire) + 1, sequence, "I30: S is the next sequence");
        inner.last_sequence.store(sequence, Ordering::Release);
        inner.record_assigned_sequences(&mut state);
        let mut edits: Vec<VersionEdit> = built
            .iter()
            .map(|(id, meta)| VersionEdit {
                column_family: *id,
                new_files: vec![(0, meta.clone())],
                ..VersionEdit::default()
            })
            .collect();
        if let Some(number) = prepared {
            // The record that installs the tables also names the prepared transaction it
            // commits: it is that transaction's commit point (I32).
            match edits.first_mut() {
                Some(first) => first.prepared_committed.push(number),
                None => edits.push(VersionEdit { prepared_committed: vec![number], ..VersionEdit::default() }),
            }
        }
        if let Err(error) = state.versions.log_and_apply_group(edits) {
            // The record may or may not have reached the manifest: only a reopen can tell, so
            // writes stop until then (I10), and the tables stay (a reopen removes them if the
            // manifest does not name them).
            inner.set_background_error(&mut state, error.duplicate());
            return Err(error);
        }
        state.stats.level_bytes_written[0] += built.iter().map(|(_, meta)| meta.file_size_bytes).sum::<u64>();
        for (id, _) in &built {
            inner.install_read_view(&state, *id);
        }
    }
    // The commit history lists a span per table instead of the keys (I30).
    let spans: Vec<(u32, Vec<u8>, Vec<u8>)> = built
        .iter()
        .map(|(id, meta)| (*id, user_key(&meta.smallest).to_vec(), user_key(&meta.largest).to_vec()))
        .collect();
    {
        let mut history = inner.transactions.history.lock();
        history.committed_unlisted(sequence, spans);
        if let Some(number) = prepared {
            history.remove_guard(number);
        }
    }
    inner.visible_sequence.store(sequence, Ordering::Release);
    // The marker: one record at `sequence` that no memtable takes.
    let mut marker = WriteBatch::new();
    marker.put_in(MARKER_COLUMN_FAMILY_ID, &[], &[]);
    marker.set_sequence(sequence);
    let marker = parking_lot::Mutex::new(marker);
    let appended = {
        let mut wal = inner.wal.lock();
        append_to_wal(inner, &mut wal, &[marker.lock()], false)
    };
    if let Err(error) = appended {
        // The transaction is committed (the manifest names its tables); later writes stop
        // until a reopen, which finds it.
        let mut state = inner.state.lock();
        inner.set_background_error(&mut state, error);
    }
    inner.work_available.notify_all();
    Ok(())
}
