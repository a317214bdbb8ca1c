//! What a script attempted before its crash, and the states recovery may legally show.
//!
//! Two records survive a power cut independently. The logs keep a prefix of the writes in the
//! order they were made, at least as long as the durable part (every write before the last
//! acknowledged sync, flush, `compact_all` or close). The manifest keeps a prefix of the
//! column family lifecycle steps (create, drop, rename): every acknowledged one, and perhaps
//! the one in flight. A lifecycle step does not sync the logs, so an unsynced write before a
//! `create_column_family` that survived may itself be lost; but the two prefixes must each be
//! whole, and a write lands in the family it was made in, whatever that family is called
//! later (a re-created name is another family).
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
    /// How many of the first lifecycle steps were acknowledged.
    pub acknowledged_lifecycle: usize,
    /// Something the script saw go wrong on a healthy path (a family missing after a reopen).
    pub anomaly: Option<String>,
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
        match &operation.value {
            Some(value) => model.insert(operation.key.clone(), value.clone()),
            None => model.remove(&operation.key),
        };
    }
}

/// Whether the families `live`, holding `contents`, are exactly `actual`.
fn same_state(live: &BTreeMap<FamilyIndex, String>, contents: &BTreeMap<FamilyIndex, Model>, actual: &State) -> bool {
    let empty = Model::new();
    live.len() == actual.len()
        && live.iter().all(|(family, name)| actual.get(name) == Some(contents.get(family).unwrap_or(&empty)))
}

/// The lengths `(lifecycle steps, writes)` of prefixes that explain `actual`, if any: at least
/// every acknowledged lifecycle step and every durable write.
pub fn matching_prefixes(history: &History, actual: &State) -> Option<(usize, usize)> {
    for lifecycle_length in history.acknowledged_lifecycle..=history.lifecycle.len() {
        let live = live_families(&history.lifecycle[..lifecycle_length]);
        let names_match = live.len() == actual.len() && live.values().all(|name| actual.contains_key(name));
        if !names_match {
            continue;
        }
        let mut contents = BTreeMap::new();
        for (index, write) in history.writes.iter().enumerate() {
            if index >= history.durable_writes && same_state(&live, &contents, actual) {
                return Some((lifecycle_length, index));
            }
            apply(&mut contents, write);
        }
        if same_state(&live, &contents, actual) {
            return Some((lifecycle_length, history.writes.len()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power_loss::workloads::Operation;

    fn put(family: FamilyIndex, key: &str, value: &str) -> Write {
        vec![Operation { family, key: key.into(), value: Some(value.into()) }]
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
            acknowledged_lifecycle: 2,
            anomaly: None,
        }
    }

    #[test]
    fn the_prefixes_are_independent_but_each_whole() {
        let history = history();
        // Lifecycle cut after the drop, writes after the first one.
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[("k", "1")])])), Some((2, 1)));
        // The in-flight create survived; all writes too.
        assert_eq!(matching_prefixes(&history, &state(&[("default", &[("k", "3")]), ("a", &[])])), Some((3, 3)));
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
