//! What a script attempted before its crash, and the states recovery may legally show.
//!
//! Two records survive a power cut independently. The logs keep a prefix of the writes in the
//! order they were made, at least as long as the durable part (every write before the last
//! acknowledged sync, flush, `compact_all` or close). The manifest keeps the column family
//! lifecycle steps (create, drop, rename): every acknowledged one, in order, and perhaps some
//! that failed (the one in flight at a crash; or, where the script went on after a failed
//! step, one whose record reached the manifest before its sync failed). A lifecycle step does
//! not sync the logs, so an unsynced write before a `create_column_family` that survived may
//! itself be lost; but the writes' prefix must be whole, and a write lands in the family it
//! was made in, whatever that family is called later (a re-created name is another family).
//!
//! Concurrency contract: plain data, used on one thread.
//!
//! Invariants checked: I1, I2, I12, I13, I14 (prefixes, durability), and that a dropped
//! family's data never comes back under a re-created name.

use std::collections::BTreeMap;

use super::workloads::{FamilyIndex, Step, Write};

/// A key-value model of one column family.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every live column family's contents, by name.
pub type State = BTreeMap<String, Model>;

/// What running a script left.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every write attempted, in order.
    pub writes: Vec<Write>,
    /// How many of the first writes are known to be durable.
    pub durable_writes: usize,
    /// Every lifecycle step attempted, in order.
    pub lifecycle: Vec<Step>,
    /// How many of the first writes were acknowledged (synced or not).
    pub acknowledged_writes: usize,
    /// The lifecycle steps that failed (the others were acknowledged).
    pub failed_lifecycle: Vec<FailedStep>,
    /// Something the script saw go wrong on a healthy path (a family missing after a reopen).
    pub anomaly: Option<String>,
    /// Prepared transactions (two-phase commit), in the order they were prepared.
    pub prepared: Vec<PreparedHistory>,
}

/// What happened to one prepared transaction.
#[derive(Clone, Debug)]
pub struct PreparedHistory {
    /// Its xid.
    pub xid: Vec<u8>,
    /// Its operations, applied when it commits.
    pub write: Write,
    /// Whether `prepare` returned `Ok` (the transaction is then durable).
    pub acknowledged: bool,
    /// The decision attempted, if any.
    pub decision: Option<Decision>,
}

/// A commit or rollback of a prepared transaction.
#[derive(Clone, Copy, Debug)]
pub struct Decision {
    /// True for a commit; its write is then `History::writes[write_index]`.
    pub commit: bool,
    /// The position of the committed write among the attempted writes (commits only).
    pub write_index: usize,
    /// Whether the call returned `Ok`.
    pub acknowledged: bool,
}

/// A lifecycle step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailedStep {
    /// Its position in `History::lifecycle`.
    pub position: usize,
    /// How many writes had been attempted before it.
    pub writes_before: usize,
}

/// The most failed lifecycle steps a history may hold: the check tries every subset of them.
pub const MAX_FAILED_LIFECYCLE_STEPS: usize = 4;

impl History {
    /// The acknowledged lifecycle steps, in order.
    pub fn acknowledged_lifecycle(&self) -> Vec<Step> {
        self.lifecycle_with(0)
    }

    /// The acknowledged lifecycle steps and the failed ones whose bit is set in `mask` (bit i
    /// for `failed_lifecycle[i]`), in order.
    fn lifecycle_with(&self, mask: u32) -> Vec<Step> {
        let included =
            |position: usize| match self.failed_lifecycle.iter().position(|failed| failed.position == position) {
                Some(bit) => mask & (1 << bit) != 0,
                None => true,
            };
        self.lifecycle
            .iter()
            .enumerate()
            .filter(|(position, _)| included(*position))
            .map(|(_, step)| step.clone())
            .collect()
    }
}

/// The live column families after `lifecycle`, by index.
pub fn live_families(lifecycle: &[Step]) -> BTreeMap<FamilyIndex, String> {
    let mut live = BTreeMap::from([(0, "default".to_string())]);
    for step in lifecycle {
        match step {
            Step::CreateFamily { family, name, .. } | Step::RenameFamily { family, name } => {
                live.insert(*family, name.clone());
            }
            Step::DropFamily { family } => {
                live.remove(family);
            }
            _ => {}
        }
    }
    live
}

fn apply(contents: &mut BTreeMap<FamilyIndex, Model>, write: &Write) {
    for operation in write {
        let model = contents.entry(operation.family).or_default();
        let expired = operation.expires_at_us.is_some_and(|expiry| expiry <= super::workloads::CLOCK_US);
        match (&operation.value, &operation.range_end) {
            (Some(_), _) if expired => {
                model.remove(&operation.key);
            }
            (Some(operand), _) if operation.merge => {
                let merged = super::workloads::append(model.get(&operation.key).map(Vec::as_slice), operand);
                model.insert(operation.key.clone(), merged);
            }
            (Some(value), _) => {
                model.insert(operation.key.clone(), value.clone());
            }
            (None, Some(end)) => model.retain(|key, _| !(*key >= operation.key && key < end)),
            (None, None) => {
                model.remove(&operation.key);
            }
        }
    }
}

/// Whether the families `live`, holding `contents`, are exactly `actual`.
fn same_state(live: &BTreeMap<FamilyIndex, String>, contents: &BTreeMap<FamilyIndex, Model>, actual: &State) -> bool {
    let empty = Model::new();
    live.len() == actual.len()
        && live.iter().all(|(family, name)| actual.get(name) == Some(contents.get(family).unwrap_or(&empty)))
}

/// An explanation of `actual`, if there is one: which failed lifecycle steps took effect (a
/// mask over `failed_lifecycle`, besides every acknowledged step) and how many writes (at
/// least every durable one). A failed step that was followed by an acknowledged write cannot
/// have taken effect: a failed change stops writes, so a write acknowledged after it proves
/// the change never happened (or was refused before anything was written), and a family whose
/// failed drop came back at recovery would take those writes with it.
pub fn matching_prefixes(history: &History, actual: &State) -> Option<(u32, usize)> {
    assert!(history.failed_lifecycle.len() <= MAX_FAILED_LIFECYCLE_STEPS, "too many failed lifecycle steps");
    for mask in 0..1u32 << history.failed_lifecycle.len() {
        let impossible = history
            .failed_lifecycle
            .iter()
            .enumerate()
            .any(|(bit, failed)| mask & (1 << bit) != 0 && history.acknowledged_writes > failed.writes_before);
        if impossible {
            continue;
        }
        let live = live_families(&history.lifecycle_with(mask));
        let names_match = live.len() == actual.len() && live.values().all(|name| actual.contains_key(name));
        if !names_match {
            continue;
        }
        let mut contents = BTreeMap::new();
        for (index, write) in history.writes.iter().enumerate() {
            if index >= history.durable_writes && same_state(&live, &contents, actual) {
                return Some((mask, index));
            }
            apply(&mut contents, write);
        }
        if same_state(&live, &contents, actual) {
            return Some((mask, history.writes.len()));
        }
    }
    None
}

/// How `actual` differs from the state after every attempted write and every acknowledged
/// lifecycle step, for failure reports: per family, keys missing, extra, or with another value.
pub fn describe_difference(history: &History, actual: &State) -> String {
    let live = live_families(&history.acknowledged_lifecycle());
    let mut contents = BTreeMap::new();
    for write in &history.writes {
        apply(&mut contents, write);
    }
    let empty = Model::new();
    let mut parts = Vec::new();
    for (family, name) in &live {
        let expected = contents.get(family).unwrap_or(&empty);
        let Some(found) = actual.get(name) else {
            parts.push(format!("{name}: missing"));
            continue;
        };
        let show = |key: &Vec<u8>| String::from_utf8_lossy(key).into_owned();
        let missing: Vec<String> = expected.keys().filter(|key| !found.contains_key(*key)).map(show).collect();
        let extra: Vec<String> = found.keys().filter(|key| !expected.contains_key(*key)).map(show).collect();
        let changed: Vec<String> = expected
            .iter()
            .filter(|(key, value)| found.get(*key).is_some_and(|other| other != *value))
            .map(|(key, _)| show(key))
            .collect();
        if !(missing.is_empty() && extra.is_empty() && changed.is_empty()) {
            parts.push(format!("{name}: missing {missing:?}, extra {extra:?}, other value {changed:?}"));
        }
    }
    format!("against all writes: {}", if parts.is_empty() { "the same".to_string() } else { parts.join("; ") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power_loss::workloads::Operation;

    fn put(family: FamilyIndex, key: &str, value: &str) -> Write {
        vec![Operation::plain(family, key.into(), Some(value.into()))]
    }

    fn state(families: &[(&str, &[(&str, &str)])]) -> State {
        families
            .iter()
            .map(|(name, pairs)| {
                let model = pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect();
                (name.to_string(), model)
            })
            .collect()
    }

    fn history() -> History {
        History {
            writes: vec![put(0, "k", "1"), put(1, "k", "2"), put(0, "k", "3")],
            durable_writes: 1,
            lifecycle: vec![
                Step::CreateFamily { family: 1, name: "a".into(), memtable_size_bytes: 4096 },
                Step::DropFamily { family: 1 },
                Step::CreateFamily { family: 2, name: "a".into(), memtable_size_bytes: 4096 },
            ],
            acknowledged_writes: 3,
            failed_lifecycle: vec![FailedStep { position: 2, writes_before: 3 }],
            anomaly: None,
            prepared: Vec::new(),
        }
    }

    #[test]
    fn the_prefixes_are_independent_but_each_whole() {
        let history = history();
        // The failed create did not take effect; writes cut after the first one.
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[("k", "1")])])), Some((0, 1)));
        // The failed create took effect; all writes survived.
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[("k", "3")]), ("a", &[])])), Some((1, 3)));
    }

    #[test]
    fn lost_durable_writes_and_lost_acknowledged_steps_are_refused() {
        let history = history();
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[])])), None, "durable write lost");
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[("k", "1")]), ("a", &[("k", "2")])])), None);
    }

    #[test]
    fn a_dropped_familys_data_never_reappears_under_its_old_name() {
        let history = history();
        // Family 1's write must not show in family 2, which re-used the name.
        let actual = state(&[("default", &[("k", "3")]), ("a", &[("k", "2")])]);
        assert_eq!(matching_prefixes(&history, &actual), None);
    }
}

#[cfg(test)]
mod failed_step_tests {
    use super::*;
    use crate::power_loss::workloads::Operation;

    /// Story: a failed drop followed by acknowledged writes to the family came back at
    /// recovery and took the writes with it; the check must not call that legal.
    #[test]
    fn a_failed_drop_followed_by_acknowledged_writes_cannot_have_taken_effect() {
        let write = |value: &str| vec![Operation::plain(1, b"k".to_vec(), Some(value.into()))];
        let history = History {
            writes: vec![write("1"), write("2")],
            durable_writes: 2,
            acknowledged_writes: 2,
            lifecycle: vec![
                Step::CreateFamily { family: 1, name: "a".into(), memtable_size_bytes: 4096 },
                Step::DropFamily { family: 1 },
            ],
            failed_lifecycle: vec![FailedStep { position: 1, writes_before: 1 }],
            anomaly: None,
            prepared: Vec::new(),
        };
        let dropped = State::from([("default".to_string(), Model::new())]);
        assert_eq!(matching_prefixes(&history, &dropped), None);
        let kept = State::from([
            ("default".to_string(), Model::new()),
            ("a".to_string(), Model::from([(b"k".to_vec(), b"2".to_vec())])),
        ]);
        assert_eq!(matching_prefixes(&history, &kept), Some((0, 2)));
    }
}
