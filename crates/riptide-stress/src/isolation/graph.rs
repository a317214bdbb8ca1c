//! The dependency graph among committed transactions and the searches the checker runs on
//! it: strongly connected components, shortest paths and cycles, and reachability between the
//! components of a subgraph.
//!
//! Nodes are transaction ids (positions in the history). An edge carries the set of
//! dependency kinds that hold between its two ends (`WW`, `WR`, `RW`) and, for each kind, one
//! key that gives rise to it, so that a reported cycle can say why each step holds. A
//! [`Subgraph`] keeps some of the nodes and the edges that carry at least one kind of a mask;
//! every search works on a subgraph.
//!
//! When a cycle is classified, an edge counts as its weakest-requirement kind: `ww` if it
//! carries `WW`, else `wr` if it carries `WR`, else `rw`. So an edge is an anti-dependency for
//! classification only when nothing but `RW` holds along it, which makes a cycle through the
//! `WW | WR` subgraph exactly a cycle with no anti-dependency.
//!
//! Concurrency contract: plain data, built and searched on one thread.
//!
//! Invariants: no self edges (a transaction's dependencies on itself are internal and never
//! added); the searches are iterative, so a long chain of transactions cannot overflow the
//! stack.

use std::collections::{BTreeMap, HashMap, VecDeque};

/// A write-write dependency: the source installed the version right before the target's.
pub const WW: u8 = 1;
/// A write-read dependency: the target read the version the source installed.
pub const WR: u8 = 2;
/// A read-write anti-dependency: the source read a version, and the target installed the next
/// one.
pub const RW: u8 = 4;
/// Every kind.
pub const ANY: u8 = WW | WR | RW;

/// The kind an edge with `kinds` counts as in a cycle (see the module documentation).
pub fn counted_kind(kinds: u8) -> u8 {
    if kinds & WW != 0 {
        WW
    } else if kinds & WR != 0 {
        WR
    } else {
        RW
    }
}

/// The short name of one kind.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        WW => "ww",
        WR => "wr",
        _ => "rw",
    }
}

/// What holds along one edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeLabel {
    /// The kinds that hold, as a mask of `WW`, `WR`, `RW`.
    pub kinds: u8,
    /// For `WW`, `WR` and `RW` in that order: a key that gives rise to the kind.
    pub keys: [Option<usize>; 3],
}

impl EdgeLabel {
    /// The key that explains `kind` along this edge.
    pub fn key_for(&self, kind: u8) -> Option<usize> {
        match kind {
            WW => self.keys[0],
            WR => self.keys[1],
            _ => self.keys[2],
        }
    }
}

/// The dependency graph.
#[derive(Clone, Debug, Default)]
pub struct DependencyGraph {
    labels: BTreeMap<(usize, usize), EdgeLabel>,
}

impl DependencyGraph {
    /// Adds dependency `kind` from `from` to `to` because of `key`; a self edge is ignored.
    pub fn add(&mut self, from: usize, to: usize, kind: u8, key: usize) {
        if from == to {
            return;
        }
        let label = self.labels.entry((from, to)).or_default();
        label.kinds |= kind;
        let slot = match kind {
            WW => 0,
            WR => 1,
            _ => 2,
        };
        label.keys[slot].get_or_insert(key);
    }

    /// The label of the edge from `from` to `to`, if there is one.
    pub fn label(&self, from: usize, to: usize) -> Option<&EdgeLabel> {
        self.labels.get(&(from, to))
    }

    /// Every edge with its label.
    pub fn edges(&self) -> impl Iterator<Item = (usize, usize, &EdgeLabel)> {
        self.labels.iter().map(|(&(from, to), label)| (from, to, label))
    }

    /// How many edges carry `kind`.
    pub fn count(&self, kind: u8) -> usize {
        self.labels.values().filter(|label| label.kinds & kind != 0).count()
    }
}

/// Some nodes of a graph and the edges among them that carry a kind of a mask, with local
/// indices for the searches.
pub struct Subgraph {
    /// Node ids, by local index.
    nodes: Vec<usize>,
    /// Local index of each node id.
    local: HashMap<usize, usize>,
    /// Successors by local index, with the kinds of each edge.
    successors: Vec<Vec<(usize, u8)>>,
}

/// Reachability between the strongly connected components of a subgraph.
pub struct Reachability {
    /// The component of each node, by local index.
    component_of: Vec<usize>,
    /// For each component, a bit set of the components it reaches (itself included).
    reaches: Vec<Vec<u64>>,
    /// Node id to local index, shared with the subgraph it came from.
    local: HashMap<usize, usize>,
}

impl Reachability {
    /// True when node `from` reaches node `to` (a node reaches itself).
    pub fn reaches(&self, from: usize, to: usize) -> bool {
        let (Some(&from), Some(&to)) = (self.local.get(&from), self.local.get(&to)) else { return false };
        let target = self.component_of[to];
        self.reaches[self.component_of[from]][target / 64] & (1 << (target % 64)) != 0
    }
}

impl Subgraph {
    /// The subgraph of `graph` on `nodes` with the edges that carry a kind in `mask`.
    pub fn new(graph: &DependencyGraph, nodes: &[usize], mask: u8) -> Subgraph {
        let local: HashMap<usize, usize> = nodes.iter().enumerate().map(|(index, &node)| (node, index)).collect();
        let mut successors = vec![Vec::new(); nodes.len()];
        for (&from, index) in &local {
            // The edges leaving `from` are a contiguous range of the ordered map.
            for (&(_, to), label) in graph.labels.range((from, 0)..=(from, usize::MAX)) {
                if label.kinds & mask != 0 {
                    if let Some(&target) = local.get(&to) {
                        successors[*index].push((target, label.kinds));
                    }
                }
            }
        }
        Subgraph { nodes: nodes.to_vec(), local, successors }
    }

    /// The node ids.
    pub fn nodes(&self) -> &[usize] {
        &self.nodes
    }

    /// The successors of node id `node` with the kinds of each edge, as node ids.
    pub fn successors(&self, node: usize) -> Vec<(usize, u8)> {
        match self.local.get(&node) {
            Some(&index) => self.successors[index].iter().map(|&(target, kinds)| (self.nodes[target], kinds)).collect(),
            None => Vec::new(),
        }
    }

    /// The strongly connected components as lists of node ids, in reverse topological order
    /// (a component comes after every component it reaches), by Tarjan's algorithm run with an
    /// explicit stack.
    pub fn components(&self) -> Vec<Vec<usize>> {
        self.local_components()
            .into_iter()
            .map(|component| component.into_iter().map(|i| self.nodes[i]).collect())
            .collect()
    }

    fn local_components(&self) -> Vec<Vec<usize>> {
        let count = self.nodes.len();
        let unvisited = usize::MAX;
        let mut index = vec![unvisited; count];
        let mut lowlink = vec![0; count];
        let mut on_stack = vec![false; count];
        let mut stack = Vec::new();
        let mut next_index = 0;
        let mut components = Vec::new();
        for root in 0..count {
            if index[root] != unvisited {
                continue;
            }
            index[root] = next_index;
            lowlink[root] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root] = true;
            // Each frame is a node and the position of its next successor to visit.
            let mut frames = vec![(root, 0usize)];
            while let Some(frame) = frames.last_mut() {
                let node = frame.0;
                if let Some(&(next, _)) = self.successors[node].get(frame.1) {
                    frame.1 += 1;
                    if index[next] == unvisited {
                        index[next] = next_index;
                        lowlink[next] = next_index;
                        next_index += 1;
                        stack.push(next);
                        on_stack[next] = true;
                        frames.push((next, 0));
                    } else if on_stack[next] {
                        lowlink[node] = lowlink[node].min(index[next]);
                    }
                    continue;
                }
                frames.pop();
                if let Some(&(parent, _)) = frames.last() {
                    lowlink[parent] = lowlink[parent].min(lowlink[node]);
                }
                if lowlink[node] == index[node] {
                    let mut component = Vec::new();
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        component.push(member);
                        if member == node {
                            break;
                        }
                    }
                    components.push(component);
                }
            }
        }
        components
    }

    /// Which nodes reach which: the components, then bit sets of reachable components built in
    /// reverse topological order (Tarjan's output order), so each set is the union of its
    /// successors' finished sets.
    pub fn reachability(&self) -> Reachability {
        let components = self.local_components();
        let mut component_of = vec![0; self.nodes.len()];
        for (number, component) in components.iter().enumerate() {
            for &member in component {
                component_of[member] = number;
            }
        }
        let words = components.len().div_ceil(64);
        let mut reaches: Vec<Vec<u64>> = Vec::with_capacity(components.len());
        for (number, component) in components.iter().enumerate() {
            let mut set = vec![0u64; words];
            set[number / 64] |= 1 << (number % 64);
            for &member in component {
                for &(next, _) in &self.successors[member] {
                    let other = component_of[next];
                    if other != number {
                        // `other` came earlier in Tarjan's order, so its set is complete.
                        for (word, reached) in set.iter_mut().zip(&reaches[other]) {
                            *word |= reached;
                        }
                    }
                }
            }
            reaches.push(set);
        }
        Reachability { component_of, reaches, local: self.local.clone() }
    }

    /// A shortest path of at least one edge from node `from` to node `to`, as node ids from
    /// `from` to `to` inclusive (with `from == to`, a shortest cycle through `from`, its first
    /// node repeated at the end); `None` when there is none.
    pub fn path(&self, from: usize, to: usize) -> Option<Vec<usize>> {
        let (&start, &target) = (self.local.get(&from)?, self.local.get(&to)?);
        let mut parent: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut visited = vec![false; self.nodes.len()];
        let mut queue = VecDeque::from([start]);
        // The start is never marked visited, so that a cycle can come back to it; the target
        // is recognized when an edge reaches it, which in breadth-first order is the first
        // time any shortest path does.
        while let Some(node) = queue.pop_front() {
            for &(next, _) in &self.successors[node] {
                if next == target {
                    let mut path = vec![self.nodes[target]];
                    let mut current = node;
                    loop {
                        path.push(self.nodes[current]);
                        if current == start {
                            break;
                        }
                        current = parent[current]?;
                    }
                    path.reverse();
                    return Some(path);
                }
                if !visited[next] && next != start {
                    visited[next] = true;
                    parent[next] = Some(node);
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// A shortest walk from node `from` to node `to` that uses at least one edge carrying only
    /// `RW` (an anti-dependency as the module documentation counts them), as node ids from
    /// `from` to `to` inclusive; `None` when there is none. A breadth-first search over pairs
    /// (node, whether such an edge was used); the walk may repeat a node, which the caller
    /// checks.
    pub fn walk_through_anti_dependency(&self, from: usize, to: usize) -> Option<Vec<usize>> {
        let (&start, &target) = (self.local.get(&from)?, self.local.get(&to)?);
        let count = self.nodes.len();
        // State `node + used * count`; parent of each visited state.
        let mut parent: Vec<Option<usize>> = vec![None; 2 * count];
        let mut visited = vec![false; 2 * count];
        let mut queue = VecDeque::new();
        visited[start] = true;
        queue.push_back(start);
        while let Some(state) = queue.pop_front() {
            let (node, used) = (state % count, state / count);
            if node == target && used == 1 {
                let mut walk = vec![self.nodes[node]];
                let mut current = state;
                while let Some(previous) = parent[current] {
                    walk.push(self.nodes[previous % count]);
                    current = previous;
                }
                walk.reverse();
                return Some(walk);
            }
            for &(next, kinds) in &self.successors[node] {
                let next_used = used | usize::from(counted_kind(kinds) == RW);
                let next_state = next + next_used * count;
                if !visited[next_state] {
                    visited[next_state] = true;
                    parent[next_state] = Some(state);
                    queue.push_back(next_state);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(usize, usize, u8)]) -> DependencyGraph {
        let mut graph = DependencyGraph::default();
        for &(from, to, kind) in edges {
            graph.add(from, to, kind, 0);
        }
        graph
    }

    #[test]
    fn components_come_in_reverse_topological_order() {
        // 0 -> {1 <-> 2} -> 3, and 4 alone.
        let graph = graph(&[(0, 1, WW), (1, 2, WW), (2, 1, WR), (2, 3, RW)]);
        let subgraph = Subgraph::new(&graph, &[0, 1, 2, 3, 4], ANY);
        let mut components = subgraph.components();
        for component in &mut components {
            component.sort();
        }
        let position = |members: &[usize]| components.iter().position(|component| component == members);
        assert!(position(&[3]) < position(&[1, 2]));
        assert!(position(&[1, 2]) < position(&[0]));
        assert_eq!(components.len(), 4);
        let only_ww = Subgraph::new(&graph, &[0, 1, 2, 3, 4], WW);
        assert!(only_ww.components().iter().all(|component| component.len() == 1));
    }

    #[test]
    fn reachability_paths_and_cycles() {
        let graph = graph(&[(0, 1, WW), (1, 2, WR), (2, 0, RW), (2, 3, WW)]);
        let subgraph = Subgraph::new(&graph, &[0, 1, 2, 3], ANY);
        let reachability = subgraph.reachability();
        assert!(reachability.reaches(0, 3));
        assert!(!reachability.reaches(3, 0));
        assert_eq!(subgraph.path(0, 0), Some(vec![0, 1, 2, 0]));
        assert_eq!(subgraph.path(3, 3), None);
        assert_eq!(subgraph.path(1, 0), Some(vec![1, 2, 0]));
        let without_anti_dependencies = Subgraph::new(&graph, &[0, 1, 2, 3], WW | WR);
        assert_eq!(without_anti_dependencies.path(0, 0), None);
        assert_eq!(subgraph.walk_through_anti_dependency(1, 1), Some(vec![1, 2, 0, 1]));
        assert_eq!(without_anti_dependencies.walk_through_anti_dependency(0, 2), None);
    }

    #[test]
    fn an_edge_counts_as_its_weakest_kind() {
        assert_eq!(counted_kind(WW | RW), WW);
        assert_eq!(counted_kind(WR | RW), WR);
        assert_eq!(counted_kind(RW), RW);
        let graph = graph(&[(0, 1, RW), (0, 1, WR), (1, 1, WW)]);
        assert_eq!(graph.label(0, 1).map(|label| label.kinds), Some(WR | RW));
        assert!(graph.label(1, 1).is_none(), "self edges are dropped");
    }
}
