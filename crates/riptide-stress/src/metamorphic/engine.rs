//! A metamorphic sequence run against the engine, under one option set, on a fresh in-memory
//! file system.
//!
//! Concurrency contract: single-threaded, apart from the engine's own background threads.
//!
//! Invariants: column family handles are looked up by name again after every reopen (a handle
//! does not outlive its database); every column family, created or reopened, uses the option
//! set's column family options.

use std::path::Path;
use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Clock, ColumnFamily, Db, DbIterator, ManualClock, Options, ReadOptions, Snapshot, WriteBatch};

use super::{family_name, Entries, Observation, Operation, Sequence, FAMILY_SLOTS, SNAPSHOT_SLOTS};

/// Reads up to `limit` entries from where `iterator` stands, moving forward or backward.
fn collect(iterator: &mut DbIterator, forward: bool, limit: usize) -> riptide::Result<Entries> {
    let mut entries = Vec::new();
    while iterator.valid() && entries.len() < limit {
        entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
        if forward {
            iterator.next();
        } else {
            iterator.prev();
        }
    }
    iterator.status()?;
    Ok(entries)
}

/// Every live column family, by name, with all its entries.
fn dump(db: &Db) -> riptide::Result<Vec<(String, Entries)>> {
    let mut families = Vec::new();
    for name in db.list_column_families() {
        let Some(handle) = db.column_family(&name) else {
            return Err(riptide::Error::InvalidArgument(format!("listed column family {name} has no handle")));
        };
        let mut iterator = db.iter_cf(&handle, &ReadOptions::default())?;
        iterator.seek_to_first();
        families.push((name, collect(&mut iterator, true, usize::MAX)?));
    }
    families.sort();
    Ok(families)
}

/// The handle of a slot the sequence made live.
fn handle(handles: &[Option<ColumnFamily>], family: usize) -> Result<&ColumnFamily, String> {
    handles[family].as_ref().ok_or_else(|| format!("column family slot {family} holds no family"))
}

/// Runs the sequence against the engine with `options` on a fresh in-memory file system.
pub fn run_engine(sequence: &Sequence, options: &Options) -> Result<Vec<Observation>, String> {
    let path = Path::new("/metamorphic");
    let clock = Arc::new(ManualClock::new(super::CLOCK_START_US));
    let options = Options {
        file_system: Arc::new(MemFileSystem::new()),
        clock: clock.clone(),
        merge_operator: Some(Arc::new(super::AppendOperator)),
        ..options.clone()
    };
    let mut db = Db::open(path, options.clone()).map_err(|error| format!("open: {error}"))?;
    let mut handles: Vec<Option<ColumnFamily>> = vec![None; FAMILY_SLOTS];
    handles[0] = Some(db.default_column_family());
    let mut snapshots: Vec<Option<Snapshot>> = vec![None; SNAPSHOT_SLOTS];
    let key = |index: usize| sequence.keys[index].clone();
    let mut observations = Vec::with_capacity(sequence.operations.len() + 1);
    for (step, operation) in sequence.operations.iter().enumerate() {
        let fail = |error: riptide::Error| format!("step {step} ({operation:?}): {error}");
        let read_options = |slot: Option<usize>| ReadOptions {
            snapshot: slot.and_then(|slot| snapshots[slot].clone()),
            ..ReadOptions::default()
        };
        let observation = match operation {
            Operation::Put(family, k, v) => {
                db.put_cf(handle(&handles, *family)?, &key(*k), &sequence.values[*v]).map_err(fail)?;
                Observation::Done
            }
            Operation::PutWithExpiry(family, k, v, offset_us) => {
                let expires_at_us = clock.now_us().saturating_add_signed(*offset_us);
                let mut batch = WriteBatch::new();
                batch.put_with_expiry_cf(handle(&handles, *family)?, &key(*k), &sequence.values[*v], expires_at_us);
                db.write(batch).map_err(fail)?;
                Observation::Done
            }
            Operation::Merge(family, k, v) => {
                db.merge_cf(handle(&handles, *family)?, &key(*k), &sequence.values[*v]).map_err(fail)?;
                Observation::Done
            }
            Operation::AdvanceClock(by_us) => {
                clock.advance(std::time::Duration::from_micros(*by_us));
                Observation::Done
            }
            Operation::Delete(family, k) => {
                db.delete_cf(handle(&handles, *family)?, &key(*k)).map_err(fail)?;
                Observation::Done
            }
            Operation::SingleDelete(family, k) => {
                db.single_delete_cf(handle(&handles, *family)?, &key(*k)).map_err(fail)?;
                Observation::Done
            }
            Operation::DeleteRange(family, start, end) => {
                db.delete_range_cf(handle(&handles, *family)?, &key(*start), &key(*end)).map_err(fail)?;
                Observation::Done
            }
            Operation::Batch(writes) => {
                let mut batch = WriteBatch::new();
                for (family, k, v) in writes {
                    let family = handle(&handles, *family)?;
                    match v {
                        Some(v) => batch.put_cf(family, &key(*k), &sequence.values[*v]),
                        None => batch.delete_cf(family, &key(*k)),
                    }
                }
                db.write(batch).map_err(fail)?;
                Observation::Done
            }
            Operation::Get(family, k, slot) => Observation::Value(
                db.get_cf_opt(handle(&handles, *family)?, &key(*k), &read_options(*slot)).map_err(fail)?,
            ),
            Operation::Scan { family, lower, upper, forward, limit, snapshot } => {
                let options =
                    ReadOptions { lower_bound: lower.map(key), upper_bound: upper.map(key), ..read_options(*snapshot) };
                let mut iterator = db.iter_cf(handle(&handles, *family)?, &options).map_err(fail)?;
                if *forward {
                    iterator.seek_to_first();
                } else {
                    iterator.seek_to_last();
                }
                Observation::Entries(collect(&mut iterator, *forward, *limit).map_err(fail)?)
            }
            Operation::Seek { family, target, for_prev, steps } => {
                let mut iterator = db.iter_cf(handle(&handles, *family)?, &ReadOptions::default()).map_err(fail)?;
                if *for_prev {
                    iterator.seek_for_prev(&key(*target));
                } else {
                    iterator.seek(&key(*target));
                }
                Observation::Entries(collect(&mut iterator, !*for_prev, steps + 1).map_err(fail)?)
            }
            Operation::TakeSnapshot(slot) => {
                snapshots[*slot] = Some(db.snapshot());
                Observation::Done
            }
            Operation::ReleaseSnapshot(slot) => {
                snapshots[*slot] = None;
                Observation::Done
            }
            Operation::CreateFamily(family) => {
                let created =
                    db.create_column_family(&family_name(*family), options.column_family_options()).map_err(fail)?;
                handles[*family] = Some(created);
                Observation::Done
            }
            Operation::DropFamily(family) => {
                db.drop_column_family(handle(&handles, *family)?).map_err(fail)?;
                handles[*family] = None;
                Observation::Done
            }
            Operation::Flush => {
                db.flush().map_err(fail)?;
                Observation::Done
            }
            Operation::CompactAll => {
                db.compact_all().map_err(fail)?;
                Observation::Done
            }
            Operation::CompactFamily(family) => {
                db.compact_range(handle(&handles, *family)?, None, None).map_err(fail)?;
                Observation::Done
            }
            Operation::WaitForBackgroundWork => {
                db.wait_for_background_work().map_err(fail)?;
                Observation::Done
            }
            Operation::Reopen => {
                snapshots.iter_mut().for_each(|slot| *slot = None);
                let live: Vec<bool> = handles.iter().map(Option::is_some).collect();
                handles.iter_mut().for_each(|handle| *handle = None);
                db.close().map_err(fail)?;
                db = Db::open(path, options.clone()).map_err(fail)?;
                for (slot, was_live) in live.into_iter().enumerate() {
                    if was_live {
                        let name = family_name(slot);
                        let reopened = db.column_family(&name);
                        handles[slot] = Some(
                            reopened.ok_or_else(|| format!("step {step}: column family {name} lost by a reopen"))?,
                        );
                    }
                }
                Observation::Done
            }
        };
        observations.push(observation);
    }
    observations.push(Observation::Families(dump(&db).map_err(|error| format!("final scan: {error}"))?));
    snapshots.clear();
    handles.clear();
    db.close().map_err(|error| format!("close: {error}"))?;
    Ok(observations)
}
