//! The `BTreeMap` model of a metamorphic sequence: what every option set must show.
//!
//! Each column family slot holds a generation number and a map of values with their expiries.
//! Reads see the values that have not expired at their read time: the clock's, or the time a
//! snapshot was taken. A snapshot copies every slot;
//! a snapshot read of a family created after the snapshot was taken (another generation than
//! the one copied) sees it empty, as the engine does: the new family's entries all carry later
//! sequence numbers.
//!
//! Concurrency contract: single-threaded, plain data.
//!
//! Invariants: the model never reads a slot the sequence has not made live.

use std::collections::BTreeMap;

use super::{family_name, Entries, Observation, Operation, Sequence, FAMILY_SLOTS, SNAPSHOT_SLOTS};

/// A key's last full write (its value and expiry, none for a plain put) and the merge operands
/// written since, oldest first.
#[derive(Clone, Debug)]
struct Written {
    base: Option<(Vec<u8>, Option<u64>)>,
    operands: Vec<Vec<u8>>,
}

impl Written {
    fn put(value: Vec<u8>, expiry: Option<u64>) -> Written {
        Written { base: Some((value, expiry)), operands: Vec::new() }
    }
}

/// Every key's writes.
type Model = BTreeMap<Vec<u8>, Written>;

/// The entries of `model` a reader at `read_time_us` sees: unexpired values with the operands
/// after them applied by [`super::AppendOperator`].
fn live(model: &Model, read_time_us: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    model
        .iter()
        .filter_map(|(key, written)| {
            let base = written
                .base
                .as_ref()
                .filter(|(_, expiry)| expiry.is_none_or(|expiry| expiry > read_time_us))
                .map(|(value, _)| value.as_slice());
            if written.operands.is_empty() {
                return base.map(|value| (key.clone(), value.to_vec()));
            }
            let operands: Vec<&[u8]> = written.operands.iter().map(Vec::as_slice).collect();
            Some((key.clone(), super::append(base, &operands)))
        })
        .collect()
}

/// One family slot: `(generation, contents)` while a family lives in it.
type Slot = Option<(u64, Model)>;

fn in_bounds(key: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    lower.is_none_or(|lower| key >= lower) && upper.is_none_or(|upper| key < upper)
}

/// A snapshot: every slot as it was, and the clock's time then.
type Taken = (Vec<Slot>, u64);

/// The contents `family` holds at `snapshot` (or the latest state), with the read time to see
/// them at.
fn visible<'a>(
    families: &'a [Slot],
    snapshots: &'a [Option<Taken>],
    family: usize,
    snapshot: Option<usize>,
    now_us: u64,
) -> (&'a Model, u64) {
    static EMPTY: Model = Model::new();
    let Some((generation, latest)) = &families[family] else { return (&EMPTY, now_us) };
    match snapshot.and_then(|slot| snapshots[slot].as_ref()) {
        None => (latest, now_us),
        Some((taken, read_time_us)) => match &taken[family] {
            Some((taken_generation, contents)) if taken_generation == generation => (contents, *read_time_us),
            _ => (&EMPTY, *read_time_us),
        },
    }
}

fn contents_mut(families: &mut [Slot], family: usize) -> &mut Model {
    match &mut families[family] {
        Some((_, contents)) => contents,
        None => panic!("the sequence writes to column family slot {family}, which holds none"),
    }
}

/// Runs the sequence against the model.
pub fn run_model(sequence: &Sequence) -> Vec<Observation> {
    let mut families: Vec<Slot> = vec![None; FAMILY_SLOTS];
    families[0] = Some((0, Model::new()));
    let mut next_generation = 1;
    let mut snapshots: Vec<Option<Taken>> = vec![None; SNAPSHOT_SLOTS];
    let mut now_us = super::CLOCK_START_US;
    let key = |index: usize| sequence.keys[index].clone();
    let value = |index: usize| sequence.values[index].clone();
    let mut observations = Vec::with_capacity(sequence.operations.len());
    for operation in &sequence.operations {
        let observation = match operation {
            Operation::Put(family, k, v) => {
                contents_mut(&mut families, *family).insert(key(*k), Written::put(value(*v), None));
                Observation::Done
            }
            Operation::Merge(family, k, v) => {
                let contents = contents_mut(&mut families, *family);
                let written = contents.entry(key(*k)).or_insert(Written { base: None, operands: Vec::new() });
                written.operands.push(value(*v));
                Observation::Done
            }
            Operation::PutWithExpiry(family, k, v, offset_us) => {
                let expiry = now_us.saturating_add_signed(*offset_us);
                contents_mut(&mut families, *family).insert(key(*k), Written::put(value(*v), Some(expiry)));
                Observation::Done
            }
            Operation::AdvanceClock(by_us) => {
                now_us += by_us;
                Observation::Done
            }
            Operation::Delete(family, k) => {
                contents_mut(&mut families, *family).remove(&key(*k));
                Observation::Done
            }
            Operation::SingleDelete(family, k) => {
                contents_mut(&mut families, *family).remove(&key(*k));
                Observation::Done
            }
            Operation::DeleteRange(family, start, end) => {
                let (start, end) = (key(*start), key(*end));
                contents_mut(&mut families, *family).retain(|k, _| !(*k >= start && *k < end));
                Observation::Done
            }
            Operation::Batch(writes) => {
                for (family, k, v) in writes {
                    let contents = contents_mut(&mut families, *family);
                    match v {
                        Some(v) => contents.insert(key(*k), Written::put(value(*v), None)),
                        None => contents.remove(&key(*k)),
                    };
                }
                Observation::Done
            }
            Operation::Get(family, k, slot) => {
                let (source, read_time_us) = visible(&families, &snapshots, *family, *slot, now_us);
                Observation::Value(live(source, read_time_us).remove(&key(*k)))
            }
            Operation::Scan { family, lower, upper, forward, limit, snapshot } => {
                let (source, read_time_us) = visible(&families, &snapshots, *family, *snapshot, now_us);
                let lower = lower.map(key);
                let upper = upper.map(key);
                let view = live(source, read_time_us);
                let matching = view.iter().filter(|(k, _)| in_bounds(k, lower.as_deref(), upper.as_deref()));
                let entries: Entries = if *forward {
                    matching.take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                } else {
                    matching.rev().take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Observation::Entries(entries)
            }
            Operation::Seek { family, target, for_prev, steps } => {
                let (source, read_time_us) = visible(&families, &snapshots, *family, None, now_us);
                let target = key(*target);
                let view = live(source, read_time_us);
                let entries: Entries = if *for_prev {
                    view.iter()
                        .filter(|(k, _)| **k <= target)
                        .rev()
                        .take(steps + 1)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    view.iter()
                        .filter(|(k, _)| **k >= target)
                        .take(steps + 1)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                };
                Observation::Entries(entries)
            }
            Operation::TakeSnapshot(slot) => {
                snapshots[*slot] = Some((families.clone(), now_us));
                Observation::Done
            }
            Operation::ReleaseSnapshot(slot) => {
                snapshots[*slot] = None;
                Observation::Done
            }
            Operation::CreateFamily(family) => {
                assert!(families[*family].is_none(), "the sequence creates slot {family} twice");
                families[*family] = Some((next_generation, Model::new()));
                next_generation += 1;
                Observation::Done
            }
            Operation::DropFamily(family) => {
                assert!(families[*family].take().is_some(), "the sequence drops empty slot {family}");
                Observation::Done
            }
            Operation::Reopen => {
                snapshots.iter_mut().for_each(|slot| *slot = None);
                Observation::Done
            }
            Operation::Flush
            | Operation::CompactAll
            | Operation::CompactFamily(_)
            | Operation::WaitForBackgroundWork => Observation::Done,
        };
        observations.push(observation);
    }
    let mut live: Vec<(String, Entries)> = families
        .into_iter()
        .enumerate()
        .filter_map(|(slot, family)| {
            family.map(|(_, contents)| {
                let entries = live(&contents, now_us).into_iter().collect();
                (family_name(slot), entries)
            })
        })
        .collect();
    live.sort();
    observations.push(Observation::Families(live));
    observations
}
