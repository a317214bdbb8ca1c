//! The checker: from a recorded [`History`], the version order of every key, the dependency
//! graph among committed transactions, and every anomaly of Adya's taxonomy that a list-append
//! history can show, after the design of Elle (Kingsbury and Alvaro, 2020), in our own code.
//!
//! **Versions.** A committed transaction installs one version of each key it appended to: the
//! list of its last append there that no rollback to a savepoint undid (its earlier appends to
//! that key are intermediate states that no one else may see, and undone ones are as if
//! aborted). The initial version of every key is the empty list. Because an append
//! writes what its transaction saw plus one new element, a version's list names its whole
//! ancestry, and the version order of a key follows from the data: the versions whose lists
//! are prefixes of the key's final list come in the order of their lengths (the final list's
//! element order is the write order). A committed version whose list is not a prefix of the
//! final list was overwritten by a writer that had not seen it (a lost update, allowed under
//! READ COMMITTED only); such versions have no place in the data's order, so when a key has
//! any, its versions are ordered by the sequence numbers their commits returned, which is the
//! engine's install order. Either way, the final list must be the last version's list.
//!
//! **Reads.** A read whose list is not the read's own transaction's latest write of the key
//! (an external read) must show exactly one committed version: its last element names the
//! writer, and the list must equal that writer's version. Otherwise it is G1a (an element of an
//! aborted transaction, or undone by a rollback to a savepoint), G1b (a prefix of a committed version ending in that writer's own
//! intermediate element), or an incompatible read (an element nobody appended, appended to
//! another key, repeated, or a list that is no version). A read after the transaction's own
//! append to the key must show that append exactly (internal consistency, read-your-writes).
//! Reads of aborted transactions are checked the same way, since the engine never shows
//! uncommitted data to anyone; only committed transactions enter the graph.
//!
//! **Dependencies.** Between committed transactions: `ww` from the writer of each version to
//! the writer of the next, `wr` from a version's writer to each transaction that read it
//! externally, `rw` from each such reader to the writer of the next version. A transaction's
//! dependencies on itself are internal and ignored.
//!
//! **Cycles.** In every strongly connected component of the graph: G0 is a cycle of `ww`
//! edges, G1c a cycle of `ww` and `wr` edges with at least one `wr`, G-single a cycle with
//! exactly one `rw` edge (an `rw` edge from `a` to `b` and a `ww`/`wr` path back from `b` to
//! `a`), G2-item a cycle with two or more (edges count as their weakest kind: see `graph`).
//! The searches for G0, G1c and G-single are exact. For G2-item, a component where none of
//! the others was found holds only cycles with two or more `rw` edges, so any cycle found
//! there is one; in a component that also holds another anomaly a bounded search looks for a
//! simple cycle with two or more. Every component with a cycle is reported, so no cycle
//! passes SERIALIZABLE unseen.
//!
//! **Sequence numbers.** Where the history has them, three more checks use them: `ww` and
//! `wr` edges must run forward in commit order at every level (a writer commits after the
//! version it overwrote or read); under SERIALIZABLE `rw` edges between writers must too (the
//! documented promise: equivalent to a serial run in commit order); and every external read of
//! a transaction with a snapshot must show the last version committed at or below the
//! snapshot's sequence number.
//!
//! Concurrency contract: runs on one thread over an immutable history.
//!
//! Invariants: every anomaly is counted in [`CheckReport::counts`]; at most
//! [`EXAMPLES_PER_KIND`] of each kind keep a description, which names the transactions
//! involved with their operations.

use std::collections::{BTreeMap, HashMap, HashSet};

use riptide::IsolationLevel;

use super::graph::{counted_kind, kind_name, DependencyGraph, Subgraph, ANY, RW, WR, WW};
use super::history::{describe_key, describe_list, Element, History, Operation, Outcome};

/// How many anomalies of each kind keep a description.
pub const EXAMPLES_PER_KIND: usize = 4;

/// How many anti-dependency edges of one component the bounded G2-item search starts from,
/// when the component also holds another anomaly.
const G2_SEARCH_ATTEMPTS: usize = 64;

/// A kind of anomaly the checker reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    /// A cycle of write-write dependencies (dirty write).
    G0,
    /// A read of an element appended by an aborted transaction (aborted read).
    G1a,
    /// A read of a state a committed transaction overwrote itself (intermediate read).
    G1b,
    /// A cycle of write-write and write-read dependencies with at least one write-read
    /// (circular information flow).
    G1c,
    /// A cycle with exactly one anti-dependency (read skew, lost update, ...).
    GSingle,
    /// A cycle with two or more anti-dependencies (write skew, ...).
    G2Item,
    /// A read that is no version of its key: an element nobody appended, or appended to
    /// another key, a repeated element, or an order no writer wrote.
    IncompatibleRead,
    /// A read after the transaction's own append that does not show it, or a read of the
    /// transaction's own element before it appended it.
    Internal,
    /// The final state of a key is not its last committed version.
    FinalState,
    /// A `ww` or `wr` edge that runs backward in commit order.
    CommitOrder,
    /// An external read that does not show the last version committed at or below the
    /// transaction's snapshot.
    SnapshotRead,
    /// An `rw` edge between writers that runs backward in commit order (allowed by snapshot
    /// isolation, not by SERIALIZABLE's promise of commit-order equivalence).
    SerialOrder,
}

impl AnomalyKind {
    /// Every kind.
    pub const ALL: [AnomalyKind; 12] = [
        AnomalyKind::G0,
        AnomalyKind::G1a,
        AnomalyKind::G1b,
        AnomalyKind::G1c,
        AnomalyKind::GSingle,
        AnomalyKind::G2Item,
        AnomalyKind::IncompatibleRead,
        AnomalyKind::Internal,
        AnomalyKind::FinalState,
        AnomalyKind::CommitOrder,
        AnomalyKind::SnapshotRead,
        AnomalyKind::SerialOrder,
    ];

    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1a => "G1a",
            AnomalyKind::G1b => "G1b",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::G2Item => "G2-item",
            AnomalyKind::IncompatibleRead => "incompatible-read",
            AnomalyKind::Internal => "internal",
            AnomalyKind::FinalState => "final-state",
            AnomalyKind::CommitOrder => "commit-order",
            AnomalyKind::SnapshotRead => "snapshot-read",
            AnomalyKind::SerialOrder => "serial-order",
        }
    }

    /// True when `level` forbids this anomaly. READ UNCOMMITTED runs as READ COMMITTED in
    /// Riptide, and a level this harness does not know is held to the strictest rules.
    pub fn forbidden_at(self, level: IsolationLevel) -> bool {
        let strength = match level {
            IsolationLevel::ReadUncommitted | IsolationLevel::ReadCommitted => 0,
            IsolationLevel::RepeatableRead => 1,
            _ => 2,
        };
        match self {
            // Commits are atomic and reads see committed data only, so a cycle of ww and wr
            // edges is impossible at every level, as are reads of states no commit installed.
            AnomalyKind::G0
            | AnomalyKind::G1a
            | AnomalyKind::G1b
            | AnomalyKind::G1c
            | AnomalyKind::IncompatibleRead
            | AnomalyKind::Internal
            | AnomalyKind::FinalState
            | AnomalyKind::CommitOrder => true,
            AnomalyKind::GSingle | AnomalyKind::SnapshotRead => strength >= 1,
            AnomalyKind::G2Item | AnomalyKind::SerialOrder => strength >= 2,
        }
    }
}

/// One anomaly found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anomaly {
    /// Its kind.
    pub kind: AnomalyKind,
    /// What was seen, with the transactions involved.
    pub description: String,
}

/// How many edges of each kind the graph holds (an edge carrying two kinds counts in both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeCounts {
    /// Write-write dependencies.
    pub ww: usize,
    /// Write-read dependencies.
    pub wr: usize,
    /// Read-write anti-dependencies.
    pub rw: usize,
}

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Transactions in the history.
    pub transactions: usize,
    /// Those that committed.
    pub committed: usize,
    /// Those the engine refused (conflict, deadlock, lock timeout).
    pub aborted: usize,
    /// Those the workload rolled back on purpose.
    pub rolled_back: usize,
    /// Edges among committed transactions.
    pub edges: EdgeCounts,
    /// Anomalies by kind. For G-single, the number of anti-dependency edges that close a
    /// cycle; for G0, G1c and G2-item, the number of components holding one; otherwise the
    /// number of reads, keys or edges at fault.
    pub counts: BTreeMap<AnomalyKind, usize>,
    /// Up to [`EXAMPLES_PER_KIND`] described anomalies of each kind.
    pub examples: Vec<Anomaly>,
}

impl CheckReport {
    /// How many anomalies of `kind` were found.
    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// True when at least one anomaly of `kind` was found.
    pub fn found(&self, kind: AnomalyKind) -> bool {
        self.count(kind) > 0
    }

    /// How many anomalies `level` forbids.
    pub fn forbidden_count(&self, level: IsolationLevel) -> usize {
        self.counts.iter().filter(|(kind, _)| kind.forbidden_at(level)).map(|(_, count)| count).sum()
    }

    /// The described anomalies that `level` forbids.
    pub fn forbidden_examples(&self, level: IsolationLevel) -> Vec<&Anomaly> {
        self.examples.iter().filter(|anomaly| anomaly.kind.forbidden_at(level)).collect()
    }

    /// The anomalies `level` forbids, described, one paragraph each; empty when there are none.
    pub fn describe_forbidden(&self, level: IsolationLevel) -> String {
        self.forbidden_examples(level)
            .iter()
            .map(|anomaly| format!("{}: {}", anomaly.kind.name(), anomaly.description))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One line: transactions, outcomes, edges and anomaly counts.
    pub fn summary(&self) -> String {
        let anomalies: Vec<String> =
            self.counts.iter().map(|(kind, count)| format!("{} {count}", kind.name())).collect();
        format!(
            "{} transactions ({} committed, {} aborted, {} rolled back); edges ww {} wr {} rw {}; anomalies: {}",
            self.transactions,
            self.committed,
            self.aborted,
            self.rolled_back,
            self.edges.ww,
            self.edges.wr,
            self.edges.rw,
            if anomalies.is_empty() { "none".to_string() } else { anomalies.join(", ") }
        )
    }
}

/// A version of a key: the transaction that installed it, or `None` for the initial (empty)
/// version.
type Version = Option<usize>;

/// Where an element was appended.
#[derive(Clone, Copy, Debug)]
struct AppendSite {
    transaction: usize,
    key: usize,
    /// A rollback to a savepoint undid the append.
    undone: bool,
}

/// A transaction's own writes as its operations go, with its open savepoints.
#[derive(Default)]
struct OwnWrites {
    /// The list the transaction last wrote to each key.
    lists: HashMap<usize, Vec<Element>>,
    /// The open savepoints, oldest first.
    savepoints: Vec<OpenSavepoint>,
}

/// An open savepoint of a transaction.
struct OpenSavepoint {
    /// The transaction's own lists as they were when it opened.
    lists: HashMap<usize, Vec<Element>>,
    /// The elements appended since.
    appended: Vec<Element>,
}

impl OwnWrites {
    /// Applies the writes of `operation`; returns the elements a rollback to a savepoint undid.
    fn apply(&mut self, operation: &Operation) -> Vec<Element> {
        match operation {
            Operation::Append { key, element, read } => {
                let mut written = read.clone();
                written.push(*element);
                self.lists.insert(*key, written);
                if let Some(savepoint) = self.savepoints.last_mut() {
                    savepoint.appended.push(*element);
                }
            }
            Operation::Savepoint => {
                self.savepoints.push(OpenSavepoint { lists: self.lists.clone(), appended: Vec::new() })
            }
            Operation::RollbackToSavepoint => {
                if let Some(savepoint) = self.savepoints.pop() {
                    self.lists = savepoint.lists;
                    return savepoint.appended;
                }
            }
            Operation::ReleaseSavepoint => {
                // The released savepoint's appends now belong to the enclosing one, if any.
                if let Some(savepoint) = self.savepoints.pop() {
                    if let Some(enclosing) = self.savepoints.last_mut() {
                        enclosing.appended.extend(savepoint.appended);
                    }
                }
            }
            Operation::Read { .. } | Operation::RangeRead { .. } => {}
        }
        Vec::new()
    }
}

/// An external read that showed a version.
#[derive(Clone, Copy, Debug)]
struct ExternalRead {
    reader: usize,
    key: usize,
    version: Version,
}

/// Checks `history`; see the module documentation.
pub fn check(history: &History) -> CheckReport {
    let mut checker = Checker::new(history);
    checker.index_appends();
    let reads = checker.check_reads();
    let orders = checker.version_orders();
    let graph = checker.build_graph(&reads, &orders);
    checker.check_commit_order(&graph);
    checker.check_snapshots(&reads);
    checker.search_cycles(&graph);
    checker.report
}

struct Checker<'a> {
    history: &'a History,
    report: CheckReport,
    /// Every appended element.
    sites: HashMap<Element, AppendSite>,
    /// The version each committed transaction installed, by (transaction, key).
    installed: HashMap<(usize, usize), Vec<Element>>,
    /// Whether each final list is a version (when it is not, it was reported already).
    final_is_version: Vec<bool>,
}

impl<'a> Checker<'a> {
    fn new(history: &'a History) -> Checker<'a> {
        let transactions = &history.transactions;
        let report = CheckReport {
            transactions: transactions.len(),
            committed: transactions.iter().filter(|record| record.outcome.committed()).count(),
            aborted: transactions.iter().filter(|record| matches!(record.outcome, Outcome::Aborted(_))).count(),
            rolled_back: transactions.iter().filter(|record| record.outcome == Outcome::RolledBack).count(),
            ..CheckReport::default()
        };
        Checker {
            history,
            report,
            sites: HashMap::new(),
            installed: HashMap::new(),
            final_is_version: vec![true; history.keys()],
        }
    }

    fn committed(&self, transaction: usize) -> bool {
        self.history.transactions.get(transaction).is_some_and(|record| record.outcome.committed())
    }

    fn sequence(&self, transaction: usize) -> Option<u64> {
        self.history.transactions.get(transaction).and_then(|record| record.commit_sequence)
    }

    fn wants_example(&self, kind: AnomalyKind) -> bool {
        self.report.examples.iter().filter(|anomaly| anomaly.kind == kind).count() < EXAMPLES_PER_KIND
    }

    /// Counts an anomaly and keeps its description if fewer than the limit of its kind are
    /// kept.
    fn note(&mut self, kind: AnomalyKind, description: impl FnOnce(&Self) -> String) {
        *self.report.counts.entry(kind).or_insert(0) += 1;
        if self.wants_example(kind) {
            let description = description(self);
            self.report.examples.push(Anomaly { kind, description });
        }
    }

    /// Records where every element was appended and the version each committed transaction
    /// installed.
    fn index_appends(&mut self) {
        for (id, record) in self.history.transactions.iter().enumerate() {
            let mut own = OwnWrites::default();
            for operation in &record.operations {
                if let Operation::Append { key, element, .. } = operation {
                    let site = AppendSite { transaction: id, key: *key, undone: false };
                    if let Some(earlier) = self.sites.insert(*element, site) {
                        let element = *element;
                        self.note(AnomalyKind::IncompatibleRead, |checker| {
                            format!(
                                "element {element} was appended twice (elements must be unique):\n  {}\n  {}",
                                checker.history.describe_transaction(earlier.transaction),
                                checker.history.describe_transaction(id)
                            )
                        });
                    }
                }
                for element in own.apply(operation) {
                    if let Some(site) = self.sites.get_mut(&element) {
                        site.undone = true;
                    }
                }
            }
            if record.outcome.committed() {
                for (key, list) in own.lists {
                    self.installed.insert((id, key), list);
                }
            }
        }
    }

    /// Checks every read of every transaction and returns the external reads of versions.
    fn check_reads(&mut self) -> Vec<ExternalRead> {
        let mut external = Vec::new();
        for (id, record) in self.history.transactions.iter().enumerate() {
            let mut own = OwnWrites::default();
            for operation in &record.operations {
                for (key, list) in operation.reads() {
                    match own.lists.get(&key) {
                        Some(written) if written.as_slice() != list => {
                            let (written, list) = (written.clone(), list.to_vec());
                            self.note(AnomalyKind::Internal, |checker| {
                                format!(
                                    "T{id} read {} = {} after its own append left it {}:\n  {}",
                                    describe_key(key),
                                    describe_list(&list),
                                    describe_list(&written),
                                    checker.history.describe_transaction(id)
                                )
                            });
                        }
                        Some(_) => {}
                        None => {
                            let context = format!("T{id}'s read of {}", describe_key(key));
                            if let Some(version) = self.classify(Some(id), key, list, &context) {
                                external.push(ExternalRead { reader: id, key, version });
                            }
                        }
                    }
                }
                own.apply(operation);
            }
        }
        for key in 0..self.history.keys() {
            let list = self.history.final_lists[key].clone();
            let context = format!("the final state of {}", describe_key(key));
            self.final_is_version[key] = self.classify(None, key, &list, &context).is_some();
        }
        external
    }

    /// The version an external read of `list` from `key` showed, or `None` after noting why it
    /// is none. `reader` is the reading transaction (`None` for the final state).
    fn classify(&mut self, reader: Option<usize>, key: usize, list: &[Element], context: &str) -> Option<Version> {
        let describe_reader = |checker: &Checker<'_>| match reader {
            Some(id) => format!("\n  {}", checker.history.describe_transaction(id)),
            None => String::new(),
        };
        let mut seen = HashSet::new();
        if let Some(repeated) = list.iter().find(|element| !seen.insert(**element)) {
            let repeated = *repeated;
            self.note(AnomalyKind::IncompatibleRead, |checker| {
                format!("{context} = {} repeats element {repeated}{}", describe_list(list), describe_reader(checker))
            });
            return None;
        }
        for &element in list {
            let Some(site) = self.sites.get(&element).copied() else {
                self.note(AnomalyKind::IncompatibleRead, |checker| {
                    format!(
                        "{context} = {} holds element {element}, which nobody appended{}",
                        describe_list(list),
                        describe_reader(checker)
                    )
                });
                return None;
            };
            if site.key != key {
                self.note(AnomalyKind::IncompatibleRead, |checker| {
                    format!(
                        "{context} = {} holds element {element}, which T{} appended to {}{}",
                        describe_list(list),
                        site.transaction,
                        describe_key(site.key),
                        describe_reader(checker)
                    )
                });
                return None;
            }
            if reader == Some(site.transaction) {
                self.note(AnomalyKind::Internal, |checker| {
                    format!(
                        "{context} = {} holds the transaction's own element {element}, which it had not \
                         appended yet or had rolled back to a savepoint{}",
                        describe_list(list),
                        describe_reader(checker)
                    )
                });
                return None;
            }
            if !self.committed(site.transaction) || site.undone {
                let how = if site.undone { "undone by a rollback to a savepoint of" } else { "of aborted transaction" };
                self.note(AnomalyKind::G1a, |checker| {
                    format!(
                        "{context} = {} holds element {element} {how} T{}:{}\n  {}",
                        describe_list(list),
                        site.transaction,
                        describe_reader(checker),
                        checker.history.describe_transaction(site.transaction)
                    )
                });
                return None;
            }
        }
        let Some(&last) = list.last() else { return Some(None) };
        let writer = self.sites.get(&last).map(|site| site.transaction)?;
        let installed = self.installed.get(&(writer, key)).cloned().unwrap_or_default();
        if installed.as_slice() == list {
            return Some(Some(writer));
        }
        let kind = if installed.starts_with(list) { AnomalyKind::G1b } else { AnomalyKind::IncompatibleRead };
        self.note(kind, |checker| {
            let what = if kind == AnomalyKind::G1b {
                "an intermediate state of"
            } else {
                "no version: its last element was appended by"
            };
            format!(
                "{context} = {} is {what} T{writer}, which installed {}{}\n  {}",
                describe_list(list),
                describe_list(&installed),
                describe_reader(checker),
                checker.history.describe_transaction(writer)
            )
        });
        None
    }

    /// The version order of every key, initial version first; see the module documentation.
    fn version_orders(&mut self) -> Vec<Vec<Version>> {
        let mut by_key: Vec<Vec<(usize, Vec<Element>)>> = vec![Vec::new(); self.history.keys()];
        for (&(transaction, key), list) in &self.installed {
            if let Some(versions) = by_key.get_mut(key) {
                versions.push((transaction, list.clone()));
            }
        }
        let mut orders = Vec::with_capacity(by_key.len());
        for (key, mut versions) in by_key.into_iter().enumerate() {
            let final_list = self.history.final_lists[key].clone();
            versions.sort_by_key(|(transaction, _)| *transaction);
            let (mut spine, lost): (Vec<_>, Vec<_>) =
                versions.into_iter().partition(|(_, list)| final_list.starts_with(list));
            spine.sort_by_key(|(_, list)| list.len());
            let mut order: Vec<Version> = vec![None];
            if lost.is_empty() {
                order.extend(spine.iter().map(|(transaction, _)| Some(*transaction)));
            } else {
                let mut all: Vec<(usize, Vec<Element>)> = spine.into_iter().chain(lost.iter().cloned()).collect();
                if all.iter().all(|(transaction, _)| self.sequence(*transaction).is_some()) {
                    all.sort_by_key(|(transaction, _)| self.sequence(*transaction));
                } else {
                    let lost_names: Vec<String> =
                        lost.iter().map(|(transaction, _)| format!("T{transaction}")).collect();
                    self.note(AnomalyKind::IncompatibleRead, |_| {
                        format!(
                            "{}: versions of {} are not prefixes of the final list {} and have no commit sequence \
                             numbers to order them by",
                            describe_key(key),
                            lost_names.join(", "),
                            describe_list(&final_list)
                        )
                    });
                }
                order.extend(all.iter().map(|(transaction, _)| Some(*transaction)));
            }
            if self.final_is_version[key] {
                let last = order.last().copied().flatten();
                let last_list = last.and_then(|writer| self.installed.get(&(writer, key)).cloned()).unwrap_or_default();
                if last_list != final_list {
                    self.note(AnomalyKind::FinalState, |checker| {
                        let writer = match last {
                            Some(writer) => checker.history.describe_transaction(writer),
                            None => "the initial version".to_string(),
                        };
                        format!(
                            "the final state of {} is {}, but the last committed version is {} of {writer}",
                            describe_key(key),
                            describe_list(&final_list),
                            describe_list(&last_list)
                        )
                    });
                }
            }
            orders.push(order);
        }
        orders
    }

    /// The dependency graph among committed transactions.
    fn build_graph(&mut self, reads: &[ExternalRead], orders: &[Vec<Version>]) -> DependencyGraph {
        let mut graph = DependencyGraph::default();
        let mut position: HashMap<(usize, Version), usize> = HashMap::new();
        for (key, order) in orders.iter().enumerate() {
            for (index, version) in order.iter().enumerate() {
                position.insert((key, *version), index);
            }
            for pair in order.windows(2) {
                if let [Some(before), Some(after)] = pair {
                    graph.add(*before, *after, WW, key);
                }
            }
        }
        for read in reads.iter().filter(|read| self.committed(read.reader)) {
            if let Some(writer) = read.version {
                graph.add(writer, read.reader, WR, read.key);
            }
            let Some(&index) = position.get(&(read.key, read.version)) else { continue };
            if let Some(Some(next)) = orders[read.key].get(index + 1) {
                graph.add(read.reader, *next, RW, read.key);
            }
        }
        self.report.edges = EdgeCounts { ww: graph.count(WW), wr: graph.count(WR), rw: graph.count(RW) };
        graph
    }

    /// `ww` and `wr` edges must run forward in commit order; `rw` edges between writers too,
    /// as SERIALIZABLE promises (the kind says which).
    fn check_commit_order(&mut self, graph: &DependencyGraph) {
        for (from, to, label) in graph.edges() {
            let (Some(from_sequence), Some(to_sequence)) = (self.sequence(from), self.sequence(to)) else { continue };
            if from_sequence < to_sequence {
                continue;
            }
            let kind = if label.kinds & (WW | WR) != 0 { AnomalyKind::CommitOrder } else { AnomalyKind::SerialOrder };
            let shown = counted_kind(label.kinds);
            let key = label.key_for(shown).map(describe_key).unwrap_or_default();
            self.note(kind, |checker| {
                format!(
                    "T{from} -{}({key})-> T{to}, but T{from} committed at sequence {from_sequence} and T{to} at \
                     {to_sequence}:\n  {}\n  {}",
                    kind_name(shown),
                    checker.history.describe_transaction(from),
                    checker.history.describe_transaction(to)
                )
            });
        }
    }

    /// Every external read of a transaction with a snapshot shows the last version committed
    /// at or below it (keys whose versions all have commit sequence numbers).
    fn check_snapshots(&mut self, reads: &[ExternalRead]) {
        let mut by_key: HashMap<usize, Vec<(u64, usize)>> = HashMap::new();
        let mut unordered: HashSet<usize> = HashSet::new();
        for &(transaction, key) in self.installed.keys() {
            match self.sequence(transaction) {
                Some(sequence) => by_key.entry(key).or_default().push((sequence, transaction)),
                None => {
                    unordered.insert(key);
                }
            }
        }
        for versions in by_key.values_mut() {
            versions.sort_unstable();
        }
        for read in reads {
            let Some(snapshot) = self.history.transactions[read.reader].snapshot else { continue };
            if unordered.contains(&read.key) {
                continue;
            }
            let versions = by_key.get(&read.key).map(Vec::as_slice).unwrap_or_default();
            let visible = versions.partition_point(|(sequence, _)| *sequence <= snapshot);
            let expected: Version = visible.checked_sub(1).map(|index| versions[index].1);
            if expected == read.version {
                continue;
            }
            let describe_version = |checker: &Checker<'_>, version: Version| match version {
                Some(writer) => format!("T{writer}'s (sequence {})", checker.sequence(writer).unwrap_or_default()),
                None => "the initial one".to_string(),
            };
            let read = *read;
            self.note(AnomalyKind::SnapshotRead, |checker| {
                format!(
                    "T{} read {} at snapshot {snapshot} and saw version {}, but the version visible there is {}:\n  {}",
                    read.reader,
                    describe_key(read.key),
                    describe_version(checker, read.version),
                    describe_version(checker, expected),
                    checker.history.describe_transaction(read.reader)
                )
            });
        }
    }

    /// Finds and classifies the cycles of every strongly connected component.
    fn search_cycles(&mut self, graph: &DependencyGraph) {
        let committed: Vec<usize> =
            (0..self.history.transactions.len()).filter(|&transaction| self.committed(transaction)).collect();
        let full = Subgraph::new(graph, &committed, ANY);
        for component in full.components().into_iter().filter(|component| component.len() > 1) {
            self.search_component(graph, &component);
        }
    }

    fn search_component(&mut self, graph: &DependencyGraph, component: &[usize]) {
        let mut found_other = false;
        let write_write = Subgraph::new(graph, component, WW);
        for inner in write_write.components().into_iter().filter(|inner| inner.len() > 1) {
            found_other = true;
            let cycle = write_write.path(inner[0], inner[0]).map(|mut path| {
                path.pop();
                path
            });
            self.note_cycle(graph, AnomalyKind::G0, cycle);
        }
        let without_anti = Subgraph::new(graph, component, WW | WR);
        for inner in without_anti.components().into_iter().filter(|inner| inner.len() > 1) {
            let members: HashSet<usize> = inner.iter().copied().collect();
            let read_edge = inner.iter().find_map(|&from| {
                without_anti
                    .successors(from)
                    .into_iter()
                    .find(|&(to, kinds)| members.contains(&to) && counted_kind(kinds) == WR)
                    .map(|(to, _)| (from, to))
            });
            if let Some((from, to)) = read_edge {
                found_other = true;
                let cycle = without_anti.path(to, from).map(|path| close_cycle(from, path));
                self.note_cycle(graph, AnomalyKind::G1c, cycle);
            }
        }
        let reachability = without_anti.reachability();
        let full = Subgraph::new(graph, component, ANY);
        for &from in component {
            for (to, kinds) in full.successors(from) {
                if counted_kind(kinds) == RW && reachability.reaches(to, from) {
                    found_other = true;
                    let cycle = if self.wants_example(AnomalyKind::GSingle) {
                        without_anti.path(to, from).map(|path| close_cycle(from, path))
                    } else {
                        None
                    };
                    self.note_cycle(graph, AnomalyKind::GSingle, cycle);
                }
            }
        }
        if !found_other {
            // Every cycle here has two or more anti-dependencies, and the component has one.
            let cycle = full.path(component[0], component[0]).map(|mut path| {
                path.pop();
                path
            });
            self.note_cycle(graph, AnomalyKind::G2Item, cycle);
            return;
        }
        let anti_edges = component.iter().flat_map(|&from| {
            full.successors(from)
                .into_iter()
                .filter(|(_, kinds)| counted_kind(*kinds) == RW)
                .map(move |(to, _)| (from, to))
        });
        for (from, to) in anti_edges.take(G2_SEARCH_ATTEMPTS).collect::<Vec<_>>() {
            let Some(walk) = full.walk_through_anti_dependency(to, from) else { continue };
            let cycle = close_cycle(from, walk);
            let distinct: HashSet<usize> = cycle.iter().copied().collect();
            if distinct.len() == cycle.len() {
                self.note_cycle(graph, AnomalyKind::G2Item, Some(cycle));
                return;
            }
        }
    }

    /// Notes a cycle anomaly; `cycle` lists its transactions, each with an edge to the next and
    /// the last with one to the first (`None` when no example is wanted or none was found).
    fn note_cycle(&mut self, graph: &DependencyGraph, kind: AnomalyKind, cycle: Option<Vec<usize>>) {
        self.note(kind, |checker| match cycle {
            Some(cycle) => checker.describe_cycle(graph, &cycle),
            None => "a cycle (not reconstructed)".to_string(),
        });
    }

    fn describe_cycle(&self, graph: &DependencyGraph, cycle: &[usize]) -> String {
        let mut steps = Vec::new();
        for (index, &from) in cycle.iter().enumerate() {
            let to = cycle[(index + 1) % cycle.len()];
            let step = match graph.label(from, to) {
                Some(label) => {
                    let kind = counted_kind(label.kinds);
                    let key = label.key_for(kind).map(describe_key).unwrap_or_default();
                    format!("T{from} -{}({key})->", kind_name(kind))
                }
                None => format!("T{from} -?->"),
            };
            steps.push(step);
        }
        let first = cycle.first().map(|transaction| format!(" T{transaction}")).unwrap_or_default();
        let transactions: Vec<String> = cycle
            .iter()
            .map(|&transaction| format!("\n  {}", self.history.describe_transaction(transaction)))
            .collect();
        format!("cycle {}{first}{}", steps.join(" "), transactions.concat())
    }
}

/// The cycle made of an edge from `from` to the start of `path`, and `path` back to `from`
/// (its last node), as a list of distinct transactions.
fn close_cycle(from: usize, mut path: Vec<usize>) -> Vec<usize> {
    path.pop();
    let mut cycle = vec![from];
    cycle.extend(path);
    cycle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::history::{ReadLock, TransactionRecord};

    fn read(key: usize, list: &[Element]) -> Operation {
        Operation::Read { key, list: list.to_vec(), lock: ReadLock::None }
    }

    fn append(key: usize, element: Element, saw: &[Element]) -> Operation {
        Operation::Append { key, element, read: saw.to_vec() }
    }

    fn history(transactions: Vec<TransactionRecord>, final_lists: &[&[Element]]) -> History {
        History { transactions, final_lists: final_lists.iter().map(|list| list.to_vec()).collect() }
    }

    fn committed(operations: Vec<Operation>) -> TransactionRecord {
        TransactionRecord::committed(0, operations)
    }

    /// Asserts that the checker finds `kind` in `history`, that the description names a
    /// transaction, and that `level` forbids it.
    fn assert_finds(history: &History, kind: AnomalyKind, forbidden_at: IsolationLevel) -> CheckReport {
        let report = check(history);
        assert!(report.found(kind), "{} not found: {}", kind.name(), report.summary());
        let example = report.examples.iter().find(|anomaly| anomaly.kind == kind).expect("a described example");
        assert!(example.description.contains('T'), "{}", example.description);
        assert!(report.forbidden_count(forbidden_at) > 0, "{}", report.summary());
        report
    }

    #[test]
    fn a_clean_serial_history_passes_at_every_level() {
        let history = history(
            vec![
                committed(vec![append(0, 1, &[]), append(1, 2, &[])]).at_sequence(10).with_snapshot(5),
                committed(vec![read(0, &[1]), append(0, 3, &[1]), read(0, &[1, 3])]).at_sequence(12).with_snapshot(11),
                committed(vec![Operation::RangeRead {
                    start: 0,
                    end: 3,
                    reverse: false,
                    lists: vec![(0, vec![1, 3]), (1, vec![2]), (2, vec![])],
                }])
                .with_snapshot(13),
                committed(vec![append(1, 4, &[2]), append(1, 5, &[2, 4]), append(2, 6, &[])])
                    .at_sequence(14)
                    .with_snapshot(13),
                TransactionRecord::aborted(1, vec![read(1, &[2]), append(1, 7, &[2])]).with_snapshot(13),
                committed(vec![read(1, &[2, 4, 5]), read(2, &[6])]).with_snapshot(20),
            ],
            &[&[1, 3], &[2, 4, 5], &[6]],
        );
        let report = check(&history);
        assert!(report.counts.is_empty(), "{}\n{:?}", report.summary(), report.examples);
        assert_eq!(report.forbidden_count(IsolationLevel::Serializable), 0);
        assert!(report.edges.ww > 0 && report.edges.wr > 0 && report.edges.rw > 0, "{}", report.summary());
        assert_eq!((report.committed, report.aborted), (5, 1));
    }

    #[test]
    fn g0_write_cycle() {
        // T0 is before T1 on key 0, after it on key 1.
        let history = history(
            vec![
                committed(vec![append(0, 1, &[]), append(1, 2, &[4])]),
                committed(vec![append(0, 3, &[1]), append(1, 4, &[])]),
            ],
            &[&[1, 3], &[4, 2]],
        );
        assert_finds(&history, AnomalyKind::G0, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn g1a_aborted_read() {
        let history = history(
            vec![TransactionRecord::aborted(0, vec![append(0, 1, &[])]), committed(vec![read(0, &[1])])],
            &[&[]],
        );
        let report = assert_finds(&history, AnomalyKind::G1a, IsolationLevel::ReadCommitted);
        assert_eq!(report.count(AnomalyKind::G1a), 1);
    }

    #[test]
    fn g1a_in_the_final_state() {
        let history = history(vec![TransactionRecord::aborted(0, vec![append(0, 1, &[])])], &[&[1]]);
        assert_finds(&history, AnomalyKind::G1a, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn g1b_intermediate_read() {
        let history = history(
            vec![committed(vec![append(0, 1, &[]), append(0, 2, &[1])]), committed(vec![read(0, &[1])])],
            &[&[1, 2]],
        );
        assert_finds(&history, AnomalyKind::G1b, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn g1c_circular_information_flow() {
        // Each read the other's write.
        let history = history(
            vec![committed(vec![append(0, 1, &[]), read(1, &[2])]), committed(vec![append(1, 2, &[]), read(0, &[1])])],
            &[&[1], &[2]],
        );
        let report = assert_finds(&history, AnomalyKind::G1c, IsolationLevel::ReadCommitted);
        assert!(!report.found(AnomalyKind::G0), "{}", report.summary());
    }

    #[test]
    fn g_single_read_skew() {
        // T1 saw key 0 before T0 and key 1 after it.
        let history = history(
            vec![committed(vec![append(0, 1, &[]), append(1, 2, &[])]), committed(vec![read(0, &[]), read(1, &[2])])],
            &[&[1], &[2]],
        );
        let report = assert_finds(&history, AnomalyKind::GSingle, IsolationLevel::RepeatableRead);
        assert_eq!(report.forbidden_count(IsolationLevel::ReadCommitted), 0, "read skew is allowed at READ COMMITTED");
        assert!(!report.found(AnomalyKind::G2Item), "{}", report.summary());
    }

    #[test]
    fn g_single_lost_update_ordered_by_commit_sequence() {
        // Both saw the empty list; T1's version overwrote T0's, which is missing from the final
        // state.
        let history = history(
            vec![committed(vec![append(0, 1, &[])]).at_sequence(5), committed(vec![append(0, 2, &[])]).at_sequence(7)],
            &[&[2]],
        );
        let report = assert_finds(&history, AnomalyKind::GSingle, IsolationLevel::RepeatableRead);
        assert_eq!(report.forbidden_count(IsolationLevel::ReadCommitted), 0, "{}", report.summary());
    }

    #[test]
    fn g2_item_write_skew() {
        let history = history(
            vec![
                committed(vec![read(0, &[]), read(1, &[]), append(0, 1, &[])]),
                committed(vec![read(0, &[]), read(1, &[]), append(1, 2, &[])]),
            ],
            &[&[1], &[2]],
        );
        let report = assert_finds(&history, AnomalyKind::G2Item, IsolationLevel::Serializable);
        assert_eq!(report.forbidden_count(IsolationLevel::RepeatableRead), 0, "write skew is allowed under SI");
        assert!(!report.found(AnomalyKind::GSingle), "{}", report.summary());
    }

    #[test]
    fn g2_item_through_a_phantom() {
        // Each scanned the range while the other's key was still absent.
        let scan = |lists: Vec<(usize, Vec<Element>)>| Operation::RangeRead { start: 0, end: 2, reverse: true, lists };
        let history = history(
            vec![
                committed(vec![scan(vec![(0, vec![]), (1, vec![])]), append(0, 1, &[])]),
                committed(vec![scan(vec![(0, vec![]), (1, vec![])]), append(1, 2, &[])]),
            ],
            &[&[1], &[2]],
        );
        assert_finds(&history, AnomalyKind::G2Item, IsolationLevel::Serializable);
    }

    #[test]
    fn g2_item_beside_a_g_single_in_one_component() {
        // T0 and T1 write skew on keys 0 and 1; T2 reads key 2 before T0's append and key 3
        // after T0's, a G-single with T0 joined to the same component through T1.
        let history = history(
            vec![
                committed(vec![read(0, &[]), read(1, &[]), append(0, 1, &[]), append(2, 3, &[]), append(3, 4, &[])]),
                committed(vec![read(0, &[]), read(1, &[]), append(1, 2, &[])]),
                committed(vec![read(2, &[]), read(3, &[4])]),
            ],
            &[&[1], &[2], &[3], &[4]],
        );
        let report = check(&history);
        assert!(report.found(AnomalyKind::GSingle), "{}", report.summary());
        assert!(report.found(AnomalyKind::G2Item), "{}", report.summary());
    }

    #[test]
    fn appends_undone_by_a_rollback_to_a_savepoint_are_never_seen() {
        let writer = committed(vec![
            append(0, 1, &[]),
            Operation::Savepoint,
            append(0, 2, &[1]),
            append(1, 3, &[]),
            Operation::RollbackToSavepoint,
            read(0, &[1]),
            read(1, &[]),
            Operation::Savepoint,
            append(2, 4, &[]),
            Operation::ReleaseSavepoint,
        ]);
        let clean = history(vec![writer.clone(), committed(vec![read(0, &[1]), read(2, &[4])])], &[&[1], &[], &[4]]);
        let report = check(&clean);
        assert!(report.counts.is_empty(), "{}\n{:?}", report.summary(), report.examples);

        let undone_read = history(vec![writer.clone(), committed(vec![read(1, &[3])])], &[&[1], &[], &[4]]);
        assert_finds(&undone_read, AnomalyKind::G1a, IsolationLevel::ReadCommitted);

        let mut stale_own = writer;
        stale_own.operations.push(read(0, &[1, 2]));
        let history = history(vec![stale_own], &[&[1], &[], &[4]]);
        assert_finds(&history, AnomalyKind::Internal, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn internal_read_your_writes() {
        let history = history(vec![committed(vec![append(0, 1, &[]), read(0, &[])])], &[&[1]]);
        assert_finds(&history, AnomalyKind::Internal, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn incompatible_and_final_state() {
        let history = history(
            vec![
                committed(vec![append(0, 1, &[])]).at_sequence(1),
                committed(vec![append(0, 2, &[1])]).at_sequence(2),
                committed(vec![read(0, &[2, 1])]),
                committed(vec![read(0, &[9])]),
            ],
            &[&[1]],
        );
        let report = check(&history);
        assert_eq!(report.count(AnomalyKind::IncompatibleRead), 2, "{}", report.summary());
        assert!(report.found(AnomalyKind::FinalState), "{}", report.summary());
    }

    #[test]
    fn commit_order_and_snapshot_reads() {
        // T1 read T0's version but committed before it; T2's snapshot covers T0's commit but
        // it saw the initial version.
        let history = history(
            vec![
                committed(vec![append(0, 1, &[])]).at_sequence(20),
                committed(vec![read(0, &[1]), append(1, 2, &[])]).at_sequence(10),
                committed(vec![read(0, &[])]).with_snapshot(25),
            ],
            &[&[1], &[2]],
        );
        let report = check(&history);
        assert!(report.found(AnomalyKind::CommitOrder), "{}", report.summary());
        assert!(report.found(AnomalyKind::SnapshotRead), "{}", report.summary());
        assert!(!AnomalyKind::SnapshotRead.forbidden_at(IsolationLevel::ReadCommitted));
    }

    #[test]
    fn serializable_needs_anti_dependencies_in_commit_order() {
        // Write skew with sequences: one of the two rw edges runs backward.
        let history = history(
            vec![
                committed(vec![read(1, &[]), append(0, 1, &[])]).at_sequence(3),
                committed(vec![read(0, &[]), append(1, 2, &[])]).at_sequence(4),
            ],
            &[&[1], &[2]],
        );
        let report = check(&history);
        assert!(report.found(AnomalyKind::SerialOrder), "{}", report.summary());
        assert!(AnomalyKind::SerialOrder.forbidden_at(IsolationLevel::Serializable));
        assert!(!AnomalyKind::SerialOrder.forbidden_at(IsolationLevel::RepeatableRead));
    }
}
