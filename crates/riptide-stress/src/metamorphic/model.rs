//! The `BTreeMap` model of a metamorphic sequence: what every option set must show.
//!
//! Each column family slot holds a generation number and a map. A snapshot copies every slot;
//! a snapshot read of a family created after the snapshot was taken (another generation than
//! the one copied) sees it empty, as the engine does: the new family's entries all carry later
//! sequence numbers.
//!
//! Concurrency contract: single-threaded, plain data.
//!
//! Invariants: the model never reads a slot the sequence has not made live.

use std::collections::BTreeMap;

use super::{family_name, Entries, Observation, Operation, Sequence, FAMILY_SLOTS, SNAPSHOT_SLOTS};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One family slot: `(generation, contents)` while a family lives in it.
type Slot = Option<(u64, Model)>;

fn in_bounds(key: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    lower.is_none_or(|lower| key >= lower) && upper.is_none_or(|upper| key < upper)
}

/// The contents `family` shows at `snapshot` (or the latest state).
fn visible<'a>(
    families: &'a [Slot],
    snapshots: &'a [Option<Vec<Slot>>],
    family: usize,
    snapshot: Option<usize>,
) -> &'a Model {
    static EMPTY: Model = Model::new();
    let Some((generation, latest)) = &families[family] else { return &EMPTY };
    match snapshot.and_then(|slot| snapshots[slot].as_ref()) {
        None => latest,
        Some(taken) => match &taken[family] {
            Some((taken_generation, contents)) if taken_generation == generation => contents,
            _ => &EMPTY,
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
    let mut snapshots: Vec<Option<Vec<Slot>>> = vec![None; SNAPSHOT_SLOTS];
    let key = |index: usize| sequence.keys[index].clone();
    let value = |index: usize| sequence.values[index].clone();
    let mut observations = Vec::with_capacity(sequence.operations.len());
    for operation in &sequence.operations {
        let observation = match operation {
            Operation::Put(family, k, v) => {
                contents_mut(&mut families, *family).insert(key(*k), value(*v));
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
                        Some(v) => contents.insert(key(*k), value(*v)),
                        None => contents.remove(&key(*k)),
                    };
                }
                Observation::Done
            }
            Operation::Get(family, k, slot) => {
                Observation::Value(visible(&families, &snapshots, *family, *slot).get(&key(*k)).cloned())
            }
            Operation::Scan { family, lower, upper, forward, limit, snapshot } => {
                let source = visible(&families, &snapshots, *family, *snapshot);
                let lower = lower.map(key);
                let upper = upper.map(key);
                let matching = source.iter().filter(|(k, _)| in_bounds(k, lower.as_deref(), upper.as_deref()));
                let entries: Entries = if *forward {
                    matching.take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                } else {
                    matching.rev().take(*limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Observation::Entries(entries)
            }
            Operation::Seek { family, target, for_prev, steps } => {
                let source = visible(&families, &snapshots, *family, None);
                let target = key(*target);
                let entries: Entries = if *for_prev {
                    source.range(..=target).rev().take(steps + 1).map(|(k, v)| (k.clone(), v.clone())).collect()
                } else {
                    source.range(target..).take(steps + 1).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Observation::Entries(entries)
            }
            Operation::TakeSnapshot(slot) => {
                snapshots[*slot] = Some(families.clone());
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
        .filter_map(|(slot, family)| family.map(|(_, contents)| (family_name(slot), contents.into_iter().collect())))
        .collect();
    live.sort();
    observations.push(Observation::Families(live));
    observations
}
