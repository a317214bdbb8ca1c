//! A concurrent skiplist of internal keys whose nodes live in an [`Arena`].
//!
//! Each entry is one arena block laid out as
//! `[tower slot height-1] .. [tower slot 0] [header] [internal key] [value] [run hint]`: the node
//! pointer addresses the header, the tower of next-pointers grows downwards from it (so the slot
//! of level `l` is at a fixed offset whatever the node's height), and the key and value follow the
//! header contiguously. The run hint (aligned after the value) is there only in a new version of a
//! key already present: it points to where that key's versions ended when the node was linked, so
//! scans jump over a hot key's versions (I44). A scan reads it right after the value it returns.
//! Nothing is allocated per node besides that one block, and nothing is freed until the list (and
//! its arena) is dropped.
//!
//! Concurrency contract: `insert` takes `&self` and is lock-free: a writer links its node level by
//! level, bottom up, with one compare-and-swap per level, and when a CAS fails because another
//! writer linked a node at the same place it searches forward again from its predecessor at that
//! level only. Each thread remembers where its previous insert into a list went (a splice: the
//! neighbours at every level) and starts from there when the new key still falls between them,
//! which makes sequential inserts nearly search-free; each reused level is checked to bracket
//! the new key, because other writers may have made the remembered neighbours stale.
//!
//! Readers (`seek`, `first`, `last`, `before`, [`NodeRef::next`]) never block and never write. A
//! node's header, key, value and tower slots are written before the Release CAS that links it at
//! level 0, and every link is read with Acquire, so a reader that reaches a node sees all of it;
//! key and value bytes never change afterwards. A node is reachable at level `l` only after it is
//! linked at every level below `l`, and it never leaves the list.
//!
//! The loom models at the end of this file (`make loom`) run this code, arena included, under
//! every interleaving of two writers and a reader within a preemption bound.
//!
//! Invariants: every level is a singly linked list sorted strictly ascending in internal-key
//! order under the list's comparator (user key in the column family's order, then trailer
//! descending); level 0 holds every inserted node; no internal key appears
//! twice (the engine never reuses a (user key, sequence) pair); `height` is at least the height
//! of every linked node; a run hint names a later node of the same user key with only that key's
//! nodes between (I44).

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::{self, NonNull};

use super::arena::{Arena, ARENA_ALIGNMENT_BYTES};
use crate::comparator::KeyComparator;
use crate::key::TRAILER_SIZE_BYTES;
// The links, the height and the thread-local splice come from the shim so that the loom model
// (`make loom`, at the end of this file) runs this very code; normal builds get `std`'s types.
use crate::sync::{const_thread_local, AtomicPtr, AtomicUsize, Ordering as MemoryOrdering, PublishedOnce};

/// The tallest tower. With branching factor 1/4, sixteen levels keep searches logarithmic up to
/// about 4^16 (four billion) entries, far beyond what a 2 GiB memtable can hold.
pub(crate) const MAX_HEIGHT: usize = 16;
/// How many nodes of one level each node of the level above stands for, on average (see
/// [`random_height`]).
const HEIGHT_BRANCHING: u64 = 4;

/// The fixed part of a node, at the node's address. The tower lies just below it and the key and
/// value just above it.
#[repr(C)]
pub(crate) struct Node {
    /// Length of the internal key (user key plus 8-byte trailer).
    key_length_bytes: u32,
    /// Length of the value.
    value_length_bytes: u32,
    /// Stands for the header, key and value, which are written before the node is linked and
    /// never after. Zero-sized in normal builds; under loom it lets the model check that every
    /// thread reading them is ordered after their writing.
    payload: PublishedOnce,
}

/// Bytes of one tower slot.
const TOWER_SLOT_BYTES: usize = size_of::<AtomicPtr<Node>>();

/// Bytes of the node header.
const HEADER_BYTES: usize = size_of::<Node>();

/// Set in [`Node::value_length_bytes`] when a run hint follows the value (see
/// [`run_hint_slot`]). Values are capped at 1 GiB, so the bit is free; keeping it out of the
/// key's length leaves the key's place fixed, which every search step reads.
const RUN_HINT_FLAG: u32 = 1 << 31;

/// Bytes of a run hint: one node pointer.
const RUN_HINT_BYTES: usize = size_of::<AtomicPtr<Node>>();

// The header sits `height * TOWER_SLOT_BYTES` past an aligned block start and the tower slots
// below it must stay aligned, so both sizes must keep the arena's alignment guarantee useful.
const _: () = assert!(std::mem::align_of::<Node>() <= ARENA_ALIGNMENT_BYTES);
const _: () = assert!(std::mem::align_of::<AtomicPtr<Node>>() <= TOWER_SLOT_BYTES);
const _: () = {
    let slot_alignment_bytes = std::mem::align_of::<AtomicPtr<Node>>();
    assert!(HEADER_BYTES / slot_alignment_bytes * slot_alignment_bytes == HEADER_BYTES);
};

/// The tower slot of `node` at `level`.
///
/// # Safety
/// `node` is a node of a live skiplist with height greater than `level`, and its tower slots were
/// initialised (true for every node reachable from the list and for a node being inserted once
/// `insert` has written its tower).
#[inline]
unsafe fn tower_slot<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
    // SAFETY: the slots of a node of height `h` occupy the `h * TOWER_SLOT_BYTES` bytes directly
    // below the header inside the node's block, and `level < h`.
    unsafe { &*node.cast::<u8>().sub((level + 1) * TOWER_SLOT_BYTES).cast::<AtomicPtr<Node>>() }
}

/// Starts loading the node that `node` links to one level below `level` (nothing at level 0),
/// without waiting for it. A search that has just loaded `node`'s link at `level` goes either
/// right along that level or down to the link one level lower; both nodes are usually cache
/// misses, and they are independent, so fetching the lower one meanwhile overlaps the two misses
/// instead of paying them one after the other. Prefetching never faults, so a null link costs
/// nothing but the instruction. Under loom the link is not read at all: the models check the
/// links a search follows, not hints to the cache.
///
/// # Safety
/// `node` is the head or a fully written node of height greater than `level`.
#[inline(always)]
unsafe fn prefetch_level_below(node: *const Node, level: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    if level > 0 {
        // SAFETY: the caller's height guarantee covers `level - 1`.
        let below = unsafe { tower_slot(node, level - 1) }.load(MemoryOrdering::Relaxed);
        // SAFETY: a prefetch reads nothing architecturally and cannot fault, whatever the
        // address; SSE is part of the x86_64 baseline.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(below.cast::<i8>()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = (node, level);
}

/// The internal key stored in `node`.
///
/// # Safety
/// `node` is a fully written node of a skiplist that outlives `'a`.
#[inline]
unsafe fn node_key<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: the header is initialised and immutable once the node is written.
    unsafe { (*node).payload.read() };
    // SAFETY: as above.
    let length = unsafe { (*node).key_length_bytes } as usize;
    // SAFETY: the key bytes follow the header inside the node's block and never change.
    unsafe { std::slice::from_raw_parts(node.cast::<u8>().add(HEADER_BYTES), length) }
}

/// The offset from the node pointer of the run hint of a node whose key and value have these
/// lengths: the first multiple of the slot size after the value.
#[inline]
fn run_hint_offset(key_length_bytes: usize, value_length_bytes: usize) -> usize {
    (HEADER_BYTES + key_length_bytes + value_length_bytes).next_multiple_of(RUN_HINT_BYTES)
}

/// The run hint slot of `node`, when it has one: a node of the same user key, at or after
/// `node`, such that every node between the two holds that user key too (a later version of a
/// key points to where the key's versions ended when it was inserted). Versions of a key never
/// leave the list and anything inserted between two of them sorts between them, so a hint
/// stays true forever (I44); it may fall short of the run's end (older versions inserted later).
///
/// # Safety
/// `node` is a fully written node.
#[inline]
unsafe fn run_hint_slot<'a>(node: *const Node) -> Option<&'a AtomicPtr<Node>> {
    // SAFETY: forwarded to the caller; a flagged node's block holds the slot after its value,
    // aligned for it (`allocate_node`).
    unsafe {
        let value_length = (*node).value_length_bytes;
        (value_length & RUN_HINT_FLAG != 0).then(|| {
            let offset = run_hint_offset((*node).key_length_bytes as usize, (value_length & !RUN_HINT_FLAG) as usize);
            &*node.cast::<u8>().add(offset).cast::<AtomicPtr<Node>>()
        })
    }
}

/// The value stored in `node`.
///
/// # Safety
/// `node` is a fully written node of a skiplist that outlives `'a`.
#[inline]
unsafe fn node_value<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: the header is initialised and immutable once the node is written.
    unsafe { (*node).payload.read() };
    // SAFETY: as above.
    let (key_length, value_length) =
        unsafe { ((*node).key_length_bytes as usize, ((*node).value_length_bytes & !RUN_HINT_FLAG) as usize) };
    // SAFETY: the value bytes follow the key inside the node's block and never change.
    unsafe { std::slice::from_raw_parts(node.cast::<u8>().add(HEADER_BYTES + key_length), value_length) }
}

/// A reference to a node of a skiplist borrowed for `'a`: its key and value live as long.
#[derive(Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    node: NonNull<Node>,
    list: PhantomData<&'a SkipList>,
}

impl<'a> NodeRef<'a> {
    /// Wraps a node pointer.
    ///
    /// # Safety
    /// `node` is a linked (fully written) node of a skiplist that lives for `'a`.
    #[inline]
    unsafe fn new(node: NonNull<Node>) -> NodeRef<'a> {
        NodeRef { node, list: PhantomData }
    }

    /// Wraps a possibly null node pointer read from a link.
    ///
    /// # Safety
    /// As for [`NodeRef::new`] when `node` is not null.
    #[inline]
    unsafe fn from_link(node: *mut Node) -> Option<NodeRef<'a>> {
        // SAFETY: forwarded to the caller.
        NonNull::new(node).map(|node| unsafe { NodeRef::new(node) })
    }

    /// The full internal key (user key followed by the 8-byte trailer).
    #[inline]
    pub(crate) fn key(self) -> &'a [u8] {
        // SAFETY: a `NodeRef` only exists for fully written nodes of a list alive for `'a`.
        unsafe { node_key(self.node.as_ptr()) }
    }

    /// The value bytes (empty for tombstones).
    #[inline]
    pub(crate) fn value(self) -> &'a [u8] {
        // SAFETY: as for `key`.
        unsafe { node_value(self.node.as_ptr()) }
    }

    /// The node its run hint names (see [`run_hint_slot`]), if it has one.
    #[inline]
    fn run_end(self) -> Option<NodeRef<'a>> {
        // SAFETY: a `NodeRef` only exists for fully written nodes; the hint was stored before
        // the node was published and names a node published before it.
        unsafe {
            run_hint_slot(self.node.as_ptr()).and_then(|slot| NodeRef::from_link(slot.load(MemoryOrdering::Acquire)))
        }
    }

    /// The following node at level 0, or `None` at the end of the list.
    #[inline]
    pub(crate) fn next(self) -> Option<NodeRef<'a>> {
        // SAFETY: every linked node has height at least 1 and initialised slots. The Acquire
        // load pairs with the Release CAS that linked the successor, so it is fully written.
        unsafe { NodeRef::from_link(tower_slot(self.node.as_ptr(), 0).load(MemoryOrdering::Acquire)) }
    }

    /// An owned handle to this node that can be stored without borrowing the list.
    #[inline]
    pub(crate) fn position(self) -> Position {
        Position { node: self.node }
    }
}

/// Oldest versions a level must hold for a range sample to estimate the keys from them. With
/// 8, a simulation of the sampling put the estimate 5-13 % high on average, outside half to
/// twice the true count in up to 5 % of ranges and outside a quarter to four times in about 1
/// in 5,000, for ranges of 30 to 1,000 keys.
const RANGE_SAMPLE_MIN_OLDEST: u64 = 8;
/// Nodes a level must hold for a range sample to estimate the range's versions from it.
const RANGE_SAMPLE_MIN_NODES: u64 = 8;
/// Nodes a level must hold before a range sample may judge the range to be hot keys.
const RANGE_SAMPLE_HOT_MIN_NODES: u64 = 16;
/// Nodes a range sample walks on one level at most.
const RANGE_SAMPLE_MAX_STEPS: u64 = 64;

/// What [`SkipList::sample_range`] found for a key range.
#[derive(Clone, Copy)]
pub(crate) struct RangeSample<'a> {
    /// The first node at or after the range's start, if any (it may lie past the range's end).
    pub(crate) first: Option<NodeRef<'a>>,
    /// The estimated user keys in the range; `None` for a range too short to sample.
    pub(crate) estimated_user_keys: Option<u64>,
}

/// A node address detached from any borrow, for cursors that keep their list alive by other
/// means (an `Arc`). It can be turned back into a [`NodeRef`] only through the list it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    node: NonNull<Node>,
}

// SAFETY: a `Position` is only an address; it is dereferenced solely through
// `SkipList::resolve`, whose caller must prove the owning list is alive, and the nodes it points
// to are immutable apart from atomics, so the address may be sent and shared between threads.
unsafe impl Send for Position {}
// SAFETY: see the `Send` implementation above.
unsafe impl Sync for Position {}

/// Where a search passed through a list: for every level, a node (or the head) before the
/// target of the search that recorded it, whose height exceeds the level. Forward searches
/// start from it ([`SkipList::seek_from`]). It holds addresses only, like [`Position`], and is
/// used only with the list it came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SearchPath {
    predecessors: [Position; MAX_HEIGHT],
}

impl SearchPath {
    /// Records `node` (the head or a node of the list, never null) as the last node before
    /// the target at `level`.
    #[inline]
    fn record(&mut self, level: usize, node: *mut Node) {
        // SAFETY: searches hand over the head or nodes reached through links, never null.
        self.predecessors[level] = Position { node: unsafe { NonNull::new_unchecked(node) } };
    }
}

/// The concurrent skiplist; see the module documentation.
pub(crate) struct SkipList {
    /// Owns every node, including the head.
    arena: Arena,
    /// A sentinel of height `MAX_HEIGHT` with an empty key that precedes every entry. It is never
    /// compared or returned.
    head: NonNull<Node>,
    /// Identifies this list among all lists the process ever created, so a thread's remembered
    /// splice is only reused on the list it was recorded on.
    id: u64,
    /// The height of the tallest node ever inserted (at least 1). Raised before the node is
    /// linked; only a search hint, so Relaxed suffices: a search that starts lower still finds
    /// every node through level 0, and one that starts higher finds null head slots.
    height: AtomicUsize,
    /// The order of user keys (the column family's).
    comparator: KeyComparator,
}

// SAFETY: the list owns its arena and all nodes in it; `head` points into that arena.
unsafe impl Send for SkipList {}
// SAFETY: all shared mutation goes through atomics (tower slots, `height`) or the arena, which
// is `Sync`; node bytes other than tower slots are written only before publication and are
// immutable afterwards, as the module documentation explains.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// Creates an empty list ordered by `comparator` whose arena is sized from
    /// `capacity_hint_bytes`.
    #[cfg(any(test, loom))]
    pub(crate) fn new(capacity_hint_bytes: usize, comparator: KeyComparator) -> SkipList {
        SkipList::with_chunk_pool(capacity_hint_bytes, comparator, None)
    }

    /// [`SkipList::new`], its arena recycling chunks through `pool`.
    pub(crate) fn with_chunk_pool(
        capacity_hint_bytes: usize,
        comparator: KeyComparator,
        pool: Option<std::sync::Arc<super::arena::ChunkPool>>,
    ) -> SkipList {
        let arena = Arena::with_pool(capacity_hint_bytes, pool);
        let head = allocate_node(&arena, MAX_HEIGHT, &[], 0, &[], false);
        let id = NEXT_LIST_ID.fetch_add(1, MemoryOrdering::Relaxed);
        SkipList { arena, head, id, height: AtomicUsize::new(1), comparator }
    }

    /// The order of the list's user keys.
    pub(crate) fn comparator(&self) -> &KeyComparator {
        &self.comparator
    }

    /// Compares a stored internal key with a target given as its parts, in internal-key order
    /// (user key in the list's order, trailer descending). Splitting the target once saves
    /// re-parsing it at every node visited.
    #[inline]
    fn compare_with_target(&self, stored_key: &[u8], target_user_key: &[u8], target_trailer: u64) -> Ordering {
        let split = stored_key.len() - TRAILER_SIZE_BYTES;
        let (stored_user_key, stored_trailer_bytes) = stored_key.split_at(split);
        match self.comparator.compare_user_keys(stored_user_key, target_user_key) {
            Ordering::Equal => {
                let mut trailer_bytes = [0u8; TRAILER_SIZE_BYTES];
                trailer_bytes.copy_from_slice(stored_trailer_bytes);
                target_trailer.cmp(&u64::from_le_bytes(trailer_bytes))
            }
            other => other,
        }
    }

    /// Bytes of memory the list holds (its arena's chunks).
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        self.arena.memory_usage_bytes()
    }

    /// Inserts the entry whose internal key is `user_key ++ trailer` (little endian) with `value`.
    /// The internal key must not already be present.
    pub(crate) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        self.insert_with_height(random_height(), user_key, trailer, value);
    }

    /// [`SkipList::insert`] with a tower of `height` levels. The loom model chooses the heights,
    /// so that its runs are repeatable and its towers meet at the levels it means to test.
    #[inline]
    fn insert_with_height(&self, height: usize, user_key: &[u8], trailer: u64, value: &[u8]) {
        let list_height = self.raise_height(height);
        // Start from this thread's splice of its previous insert: consecutive inserts of nearby
        // keys (sequential loads, sorted batches) then skip most of the search. The thread-local
        // is unavailable only during thread teardown or (impossibly) re-entrance; a fresh splice
        // is correct, just slower.
        let inserted = INSERT_SPLICE.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut splice) => {
                self.insert_with_splice(&mut splice, height, list_height, user_key, trailer, value);
                true
            }
            Err(_) => false,
        });
        if !matches!(inserted, Ok(true)) {
            let mut fresh = Splice::EMPTY;
            self.insert_with_splice(&mut fresh, height, list_height, user_key, trailer, value);
        }
    }

    /// Makes the list's height at least `height` (before a node that tall is linked) and
    /// returns a height to search from: at least `height`, at most the list's. Raised only by
    /// the rare tall node: a `fetch_max` on every insert would write the line holding the
    /// height from every inserting core (2.5 % of sequential batched writes from 8 threads went
    /// to it).
    #[inline]
    fn raise_height(&self, height: usize) -> usize {
        let current_height = self.height.load(MemoryOrdering::Relaxed);
        if height > current_height {
            self.height.fetch_max(height, MemoryOrdering::Relaxed).max(height)
        } else {
            current_height
        }
    }

    /// Finds where the entry goes (updating `splice`), allocates its node and links it.
    fn insert_with_splice(
        &self,
        splice: &mut Splice,
        height: usize,
        list_height: usize,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) {
        self.prepare_splice(splice, list_height, user_key, trailer);
        // A new version of a key already present goes right before the key's versions (newer
        // trailers sort first): it gets a run hint, so that scans can jump over them all. Only
        // such nodes pay for the hint's bytes.
        let with_run_hint = self.run_end_after(splice.successors[0], user_key).is_some();
        let node = allocate_node(&self.arena, height, user_key, trailer, value, with_run_hint);
        self.link(node, height, splice, user_key, trailer);
    }

    /// The run end a node of `user_key` inserted right before `successor` (at level 0) gets as
    /// its hint: `successor`'s own hint, or `successor`, when `successor` holds the same user
    /// key; `None` otherwise. Keys that compare equal are byte-identical (the comparator's
    /// contract), so bytes are compared. This is what keeps I44.
    fn run_end_after(&self, successor: *mut Node, user_key: &[u8]) -> Option<*mut Node> {
        if successor.is_null() {
            return None;
        }
        // SAFETY: splice successors of this list are live, fully written nodes.
        let successor_key = unsafe { node_key(successor) };
        if split_internal_key(successor_key).0 != user_key {
            return None;
        }
        // SAFETY: as above.
        let hint =
            unsafe { run_hint_slot(successor) }.map_or(ptr::null_mut(), |slot| slot.load(MemoryOrdering::Acquire));
        Some(if hint.is_null() { successor } else { hint })
    }

    /// Links `node` (of `height` levels, with key `user_key ++ trailer`) at every level, using
    /// and then updating `splice`, which `prepare_splice` made ready.
    fn link(&self, node: NonNull<Node>, height: usize, splice: &mut Splice, user_key: &[u8], trailer: u64) {
        // SAFETY: a freshly allocated node.
        let run_hint = unsafe { run_hint_slot(node.as_ptr()) };
        for level in 0..height {
            loop {
                let predecessor = splice.predecessors[level];
                let successor = splice.successors[level];
                if level == 0 {
                    if let Some(slot) = run_hint {
                        // The successor decides the hint; a retry may bring another (or a node
                        // of another key, then the hint stays null: no jump, still correct).
                        // Published by the Release CAS below, like the tower slots.
                        let hint = self.run_end_after(successor, user_key).unwrap_or(ptr::null_mut());
                        slot.store(hint, MemoryOrdering::Relaxed);
                    }
                }
                // SAFETY: `node` has height `height > level` and its slots were initialised by
                // `allocate_node`; until the CAS below succeeds no other thread can reach this
                // slot, so a Relaxed store suffices: the Release CAS publishes it.
                unsafe { tower_slot(node.as_ptr(), level) }.store(successor, MemoryOrdering::Relaxed);
                // SAFETY: `predecessor` is the head or a node that was linked at this level when
                // it was recorded, hence of height greater than `level`.
                let link = unsafe { tower_slot(predecessor, level) };
                // Release publishes the node's header, key, value and slots to any thread that
                // Acquire-loads this link. On failure the fresh search below reloads with Acquire.
                let linked = link
                    .compare_exchange(successor, node.as_ptr(), MemoryOrdering::Release, MemoryOrdering::Relaxed)
                    .is_ok();
                if linked {
                    if level == 0 {
                        self.debug_check_unique(predecessor, successor, user_key, trailer);
                    }
                    break;
                }
                // The link changed since the splice was recorded (another writer linked a node
                // right after `predecessor`). Nodes never move or leave, so `predecessor` still
                // sorts before the new key: search on from it.
                let (predecessor, successor) =
                    self.find_splice_at_level(predecessor, level, user_key, trailer, ptr::null_mut());
                splice.predecessors[level] = predecessor;
                splice.successors[level] = successor;
            }
        }
        // The next key inserted by this thread is likely just after this one: the new node is
        // its predecessor wherever the new node is linked; above, nothing changed.
        for predecessor in &mut splice.predecessors[..height] {
            *predecessor = node.as_ptr();
        }
    }

    /// Makes `splice` hold, for every level below `list_height`, a node before the target and a
    /// node after it (or null) that are adjacent at that level or were when recorded; a stale
    /// pair only costs a failed CAS later.
    ///
    /// A recorded splice of this list is reused, from the top level down, as long as each level's
    /// pair was recorded and still brackets the target; from the first level where that fails,
    /// the levels are searched again, each from the predecessor one level up. Every level is
    /// checked on its own: under concurrent inserts a recorded splice need not be consistent
    /// across levels, and linking between a pair that does not bracket the key would break the
    /// order.
    fn prepare_splice(&self, splice: &mut Splice, list_height: usize, user_key: &[u8], trailer: u64) {
        let head = self.head.as_ptr();
        // Only levels recorded on this list can be reused; a (head, end) pair at a level the
        // splice never saw would "bracket" every key while possibly spanning the whole list.
        let recorded_height = if splice.list_id == self.id { splice.height } else { 0 };
        splice.list_id = self.id;
        splice.height = list_height;

        let mut reusing = true;
        // The pair of the level above, already known to bracket the target; consecutive levels
        // often share nodes, which then need no second comparison.
        let mut verified_predecessor = head;
        let mut verified_successor: *mut Node = ptr::null_mut();
        for level in (0..list_height).rev() {
            let predecessor = splice.predecessors[level];
            let successor = splice.successors[level];
            reusing = reusing
                && level < recorded_height
                && (ptr::eq(predecessor, verified_predecessor)
                    || self.sorts_before_target(predecessor, user_key, trailer))
                && (ptr::eq(successor, verified_successor) || self.sorts_after_target(successor, user_key, trailer));
            if !reusing {
                let (predecessor, successor) =
                    self.find_splice_at_level(verified_predecessor, level, user_key, trailer, verified_successor);
                splice.predecessors[level] = predecessor;
                splice.successors[level] = successor;
            }
            verified_predecessor = splice.predecessors[level];
            verified_successor = splice.successors[level];
        }
    }

    /// True when `node` is the head or its key sorts before the target.
    #[inline]
    fn sorts_before_target(&self, node: *mut Node, user_key: &[u8], trailer: u64) -> bool {
        ptr::eq(node, self.head.as_ptr())
            // SAFETY: splice entries of this list (checked by id) are live, fully written nodes.
            || self.compare_with_target(unsafe { node_key(node) }, user_key, trailer) == Ordering::Less
    }

    /// True when `node` is null (the end) or its key sorts after the target.
    #[inline]
    fn sorts_after_target(&self, node: *mut Node, user_key: &[u8], trailer: u64) -> bool {
        node.is_null()
            // SAFETY: splice entries of this list (checked by id) are live, fully written nodes.
            || self.compare_with_target(unsafe { node_key(node) }, user_key, trailer) == Ordering::Greater
    }

    /// The first node whose internal key is `>= user_key ++ trailer`.
    pub(crate) fn seek(&self, user_key: &[u8], trailer: u64) -> Option<NodeRef<'_>> {
        let top_level = self.height.load(MemoryOrdering::Relaxed) - 1;
        self.descend(self.head.as_ptr(), top_level, user_key, trailer, |_, _| {})
    }

    /// A search path at the head of the list, before every entry: the start of a cursor's
    /// forward searches before its first [`SkipList::seek_recording`].
    pub(crate) fn path_at_head(&self) -> SearchPath {
        SearchPath { predecessors: [Position { node: self.head }; MAX_HEIGHT] }
    }

    /// [`SkipList::seek`] that records in `path`, for every level, the last node it passed
    /// before the target (the head where it passed none), for later forward searches
    /// ([`SkipList::seek_from`]).
    pub(crate) fn seek_recording(&self, user_key: &[u8], trailer: u64, path: &mut SearchPath) -> Option<NodeRef<'_>> {
        *path = self.path_at_head();
        let top_level = self.height.load(MemoryOrdering::Relaxed) - 1;
        self.descend(self.head.as_ptr(), top_level, user_key, trailer, |level, node| path.record(level, node))
    }

    /// The first node at or after the target, searched from `path` rather than from the head:
    /// a finger search whose cost grows with the logarithm of the distance from the path's
    /// last search, not of the list's length. A scan that must step over many versions of one
    /// key jumps over them this way. `path` comes from this list ([`SkipList::path_at_head`],
    /// `seek_recording` or `seek_from`), and every node in it must precede the target: the
    /// targets of one path never go backward. The path is updated for the next search.
    pub(crate) fn seek_from(&self, user_key: &[u8], trailer: u64, path: &mut SearchPath) -> Option<NodeRef<'_>> {
        let height = self.height.load(MemoryOrdering::Relaxed);
        // Climb from level 0 while the path's successor at a level is still before the target;
        // the first level whose successor is not is where the target lies, and the levels
        // above keep their predecessors. Nodes inserted since the path was recorded are found
        // too: a predecessor stays before the target, and the walk reads the current links.
        let mut level = 0;
        loop {
            let predecessor = path.predecessors[level].node.as_ptr();
            // SAFETY: a path's node at `level` is the head or was reached at `level`, so its
            // height exceeds `level`.
            let next = unsafe { tower_slot(predecessor, level) }.load(MemoryOrdering::Acquire);
            let next_is_before = !next.is_null()
                // SAFETY: `next` was Acquire-loaded from a link, so it is a fully written node.
                && self.compare_with_target(unsafe { node_key(next) }, user_key, trailer) == Ordering::Less;
            if !next_is_before {
                if level == 0 {
                    // SAFETY: a linked node of this list, which `&self` keeps alive.
                    return unsafe { NodeRef::from_link(next) };
                }
                // The levels below restart from their own predecessors, which follow this one.
                let below = path.predecessors[level - 1].node.as_ptr();
                return self.descend(below, level - 1, user_key, trailer, |level, node| path.record(level, node));
            }
            if level + 1 >= height {
                // Even the top level's successor is before the target: walk on from there.
                return self.descend(predecessor, level, user_key, trailer, |level, node| path.record(level, node));
            }
            level += 1;
        }
    }

    /// For a cursor on `node` moving forward to a target after it: the first node at or after
    /// the target, when `node`'s run hint lies before the target and a few steps from there
    /// reach it (`Some(None)` when the list ends first); `None` when the caller must search.
    /// This is how a scan passes the versions of a hot key: one jump to where they end instead
    /// of a step, and a cache miss, per version.
    pub(crate) fn skip_run<'a>(
        &'a self,
        node: NodeRef<'a>,
        user_key: &[u8],
        trailer: u64,
    ) -> Option<Option<NodeRef<'a>>> {
        /// Steps taken past the run's end before giving up on the hint: older versions inserted
        /// after the hint was set, or nodes between the run and the target.
        const STEPS_PAST_RUN_END: usize = 4;
        let run_end = node.run_end()?;
        // Every node between `node` and its run end sorts before the run end, hence before the
        // target when the run end does.
        if self.compare_with_target(run_end.key(), user_key, trailer) != Ordering::Less {
            return None;
        }
        self.step_past(run_end, user_key, trailer, STEPS_PAST_RUN_END)
    }

    /// For a cursor on `node` moving forward to a target not before it: the first node at or
    /// after the target when it is `node` or at most two steps along level 0 (`Some(None)`
    /// when the list ends first); `None` when the caller must search.
    pub(crate) fn step_to<'a>(
        &'a self,
        node: NodeRef<'a>,
        user_key: &[u8],
        trailer: u64,
    ) -> Option<Option<NodeRef<'a>>> {
        const STEPS: usize = 2;
        if self.compare_with_target(node.key(), user_key, trailer) != Ordering::Less {
            return Some(Some(node));
        }
        self.step_past(node, user_key, trailer, STEPS)
    }

    /// From `node`, before the target, up to `steps` steps along level 0: the first node at or
    /// after the target (`Some(None)` when the list ends first), or `None` when the steps run
    /// out before it.
    fn step_past<'a>(
        &'a self,
        node: NodeRef<'a>,
        user_key: &[u8],
        trailer: u64,
        steps: usize,
    ) -> Option<Option<NodeRef<'a>>> {
        let mut current = node;
        for _ in 0..steps {
            match current.next() {
                None => return Some(None),
                Some(next) if self.compare_with_target(next.key(), user_key, trailer) != Ordering::Less => {
                    return Some(Some(next));
                }
                Some(next) => current = next,
            }
        }
        None
    }

    /// The search of `seek`, from node `start` (the head, or a node before the target whose
    /// height exceeds `top_level`) down from `top_level`, handing `record` the last node
    /// before the target at each level (a search path; plain seeks ignore it, and the closure
    /// compiles away).
    #[inline]
    fn descend(
        &self,
        start: *mut Node,
        top_level: usize,
        user_key: &[u8],
        trailer: u64,
        mut record: impl FnMut(usize, *mut Node),
    ) -> Option<NodeRef<'_>> {
        let mut current = start;
        let mut level = top_level;
        // A successor already found to be >= the target at a higher level is skipped without a
        // second comparison when the search descends onto it.
        let mut known_not_less: *mut Node = ptr::null_mut();
        loop {
            // SAFETY: `current` is `start` or a node reached at a level >= `level`, so its height
            // exceeds `level`.
            let next = unsafe { tower_slot(current, level) }.load(MemoryOrdering::Acquire);
            // SAFETY: as above.
            unsafe { prefetch_level_below(current, level) };
            let next_is_before = !next.is_null()
                && next != known_not_less
                // SAFETY: `next` was Acquire-loaded from a link, so it is a fully written node.
                && self.compare_with_target(unsafe { node_key(next) }, user_key, trailer) == Ordering::Less;
            if next_is_before {
                current = next;
                continue;
            }
            record(level, current);
            if level == 0 {
                // SAFETY: a linked node of this list, which `&self` keeps alive.
                return unsafe { NodeRef::from_link(next) };
            }
            known_not_less = next;
            level -= 1;
        }
    }

    /// The first node of the list.
    pub(crate) fn first(&self) -> Option<NodeRef<'_>> {
        // SAFETY: the head has `MAX_HEIGHT` initialised slots; the Acquire load pairs with the
        // Release CAS that linked the loaded node, which belongs to this list.
        unsafe { NodeRef::from_link(tower_slot(self.head.as_ptr(), 0).load(MemoryOrdering::Acquire)) }
    }

    /// The last node of the list.
    pub(crate) fn last(&self) -> Option<NodeRef<'_>> {
        let mut current = self.head.as_ptr();
        let mut level = self.height.load(MemoryOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `seek`, `current` has height greater than `level`.
            let next = unsafe { tower_slot(current, level) }.load(MemoryOrdering::Acquire);
            if !next.is_null() {
                current = next;
                continue;
            }
            if level == 0 {
                break;
            }
            level -= 1;
        }
        self.non_head(current)
    }

    /// The last node whose internal key is `< target` (a well-formed internal key).
    pub(crate) fn before(&self, target: &[u8]) -> Option<NodeRef<'_>> {
        let (user_key, trailer) = split_internal_key(target);
        let mut current = self.head.as_ptr();
        let mut level = self.height.load(MemoryOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `seek`, `current` has height greater than `level`.
            let next = unsafe { tower_slot(current, level) }.load(MemoryOrdering::Acquire);
            // SAFETY: as above.
            unsafe { prefetch_level_below(current, level) };
            let next_is_before = !next.is_null()
                // SAFETY: `next` was Acquire-loaded from a link, so it is a fully written node.
                && self.compare_with_target(unsafe { node_key(next) }, user_key, trailer) == Ordering::Less;
            if next_is_before {
                current = next;
                continue;
            }
            if level == 0 {
                break;
            }
            level -= 1;
        }
        self.non_head(current)
    }

    /// An estimate of the user keys in `[start, end)` (internal keys given as user key and
    /// trailer; `start` is a lookup key, never a stored one) that visits a few tens of nodes
    /// at most, and the first node at or after `start`: a SQL optimizer asks for the size of
    /// every range it considers, and a count along level 0 costs a cache miss or two per key.
    ///
    /// A node of level `l` stands for about `4^l` nodes. A node without a run hint was the
    /// first of its user key in the list, so it is the oldest version of its key (up to
    /// concurrent inserts of one key, which may leave two without a hint), and a key's oldest
    /// version reaches level `l` with probability `4^-l` whatever versions the key has. From the
    /// top level down, the sample walks the range's nodes on each level above 0 (at most
    /// `RANGE_SAMPLE_MAX_STEPS`):
    /// - a level with at least `RANGE_SAMPLE_MIN_OLDEST` oldest versions estimates the keys as
    ///   their number times `4^l`;
    /// - a level where newer versions outnumber the oldest four to one (or too long to walk)
    ///   is a range of hot keys: the keys are estimated as the versions (from the first level
    ///   that held enough nodes) times the share of oldest versions among the nodes walked,
    ///   plus one in both, so that a walk that met none still counts some keys. This runs high,
    ///   a few times at worst, where counting versions would be tens of times off;
    /// - a range with no such level is short, and `None` asks the caller to count it.
    pub(crate) fn sample_range(
        &self,
        (start_key, start_trailer): (&[u8], u64),
        (end_key, end_trailer): (&[u8], u64),
    ) -> RangeSample<'_> {
        // The first node at or after `start` on every level: the successors of an insert's
        // splice for it, searched from scratch.
        let height = self.height.load(MemoryOrdering::Relaxed);
        let mut splice = Splice::EMPTY;
        self.prepare_splice(&mut splice, height, start_key, start_trailer);
        let first_in_range = splice.successors;
        // SAFETY: a node found by the search is a linked node of this list.
        let first = unsafe { NodeRef::from_link(first_in_range[0]) };
        let mut versions_estimate: Option<u64> = None;
        for level in (1..height).rev() {
            let weight = HEIGHT_BRANCHING.saturating_pow(u32::try_from(level).unwrap_or(u32::MAX));
            let (mut nodes, mut oldest, mut complete) = (0u64, 0u64, true);
            let mut node = first_in_range[level];
            while !node.is_null()
                // SAFETY: `node` was Acquire-loaded from a link, so it is a fully written node.
                && self.compare_with_target(unsafe { node_key(node) }, end_key, end_trailer) == Ordering::Less
            {
                if nodes == RANGE_SAMPLE_MAX_STEPS {
                    complete = false;
                    break;
                }
                nodes += 1;
                // SAFETY: as above.
                if unsafe { run_hint_slot(node) }.is_none() {
                    oldest += 1;
                }
                // SAFETY: `node` is linked at this level, so its height exceeds `level`.
                node = unsafe { tower_slot(node, level) }.load(MemoryOrdering::Acquire);
            }
            if complete && oldest >= RANGE_SAMPLE_MIN_OLDEST {
                return RangeSample { first, estimated_user_keys: Some(oldest.saturating_mul(weight)) };
            }
            let level_versions = nodes.saturating_mul(weight);
            if complete && nodes >= RANGE_SAMPLE_MIN_NODES && versions_estimate.is_none() {
                versions_estimate = Some(level_versions);
            }
            let hot = !complete || (nodes >= RANGE_SAMPLE_HOT_MIN_NODES && oldest * 4 < nodes);
            if hot {
                // An incomplete walk counted a lower bound of the versions.
                let versions = versions_estimate.map_or(level_versions, |estimate| estimate.max(level_versions));
                let keys = u128::from(versions) * u128::from(oldest + 1) / u128::from(nodes + 1);
                return RangeSample {
                    first,
                    estimated_user_keys: Some(u64::try_from(keys).unwrap_or(u64::MAX).max(1)),
                };
            }
        }
        RangeSample { first, estimated_user_keys: None }
    }

    /// Turns a position back into a node reference.
    ///
    /// # Safety
    /// `position` came from a [`NodeRef`] of this very list.
    #[inline]
    pub(crate) unsafe fn resolve(&self, position: Position) -> NodeRef<'_> {
        // SAFETY: the caller guarantees the node belongs to this list, which `&self` keeps alive.
        unsafe { NodeRef::new(position.node) }
    }

    /// Wraps `node` unless it is the head sentinel.
    fn non_head(&self, node: *mut Node) -> Option<NodeRef<'_>> {
        if ptr::eq(node, self.head.as_ptr()) {
            None
        } else {
            // SAFETY: `node` is a linked node of this list reached through Acquire loads.
            unsafe { NodeRef::from_link(node) }
        }
    }

    /// Walks level `level` forward from `start` (which sorts before the target) and returns the
    /// last node before the target and the first node not before it (null at the end).
    /// `known_successor` is a node already known not to sort before the target (the successor
    /// found one level up, or null); meeting it ends the walk without another key comparison.
    #[inline]
    fn find_splice_at_level(
        &self,
        start: *mut Node,
        level: usize,
        user_key: &[u8],
        trailer: u64,
        known_successor: *mut Node,
    ) -> (*mut Node, *mut Node) {
        let mut predecessor = start;
        loop {
            // SAFETY: `predecessor` is the head or a node linked at this level (reached at it, or
            // recorded in a splice at it), so its height exceeds `level`.
            let next = unsafe { tower_slot(predecessor, level) }.load(MemoryOrdering::Acquire);
            // SAFETY: as above.
            unsafe { prefetch_level_below(predecessor, level) };
            if next.is_null() || next == known_successor {
                return (predecessor, next);
            }
            // SAFETY: `next` was Acquire-loaded from a link, so it is a fully written node.
            match self.compare_with_target(unsafe { node_key(next) }, user_key, trailer) {
                Ordering::Less => predecessor = next,
                Ordering::Equal => {
                    debug_assert!(false, "internal key inserted twice into a memtable");
                    return (predecessor, next);
                }
                Ordering::Greater => return (predecessor, next),
            }
        }
    }

    /// In debug builds, checks that the neighbours of a freshly linked node do not carry the same
    /// user key and sequence number (with another kind), which the engine promises never to
    /// insert.
    fn debug_check_unique(&self, predecessor: *mut Node, successor: *mut Node, user_key: &[u8], trailer: u64) {
        if !cfg!(debug_assertions) {
            return;
        }
        for neighbour in [predecessor, successor] {
            if neighbour.is_null() || ptr::eq(neighbour, self.head.as_ptr()) {
                continue;
            }
            // SAFETY: a linked node of this list.
            let (neighbour_user_key, neighbour_trailer) = split_internal_key(unsafe { node_key(neighbour) });
            debug_assert!(
                neighbour_user_key != user_key || neighbour_trailer >> 8 != trailer >> 8,
                "user key inserted twice with sequence {} into a memtable",
                trailer >> 8
            );
        }
    }
}

#[cfg(test)]
impl SkipList {
    /// Checks the structural invariants: every level strictly ascending, and every node linked
    /// at a level also linked at the level below. Returns the number of entries. Must not run
    /// concurrently with inserts.
    pub(crate) fn verify_structure(&self) -> usize {
        let height = self.height.load(MemoryOrdering::Relaxed);
        let mut lower_level: std::collections::HashSet<usize> = std::collections::HashSet::new();
        let mut entry_count = 0;
        for level in 0..height {
            let mut this_level = std::collections::HashSet::new();
            let mut previous: Option<&[u8]> = None;
            // SAFETY: the head has `MAX_HEIGHT` slots; every loaded pointer is a linked node of
            // height greater than `level`.
            let mut node = unsafe { tower_slot(self.head.as_ptr(), level) }.load(MemoryOrdering::Acquire);
            while !node.is_null() {
                // SAFETY: as above.
                let key = unsafe { node_key(node) };
                if let Some(previous) = previous {
                    assert!(self.comparator.compare_internal_keys(previous, key).is_lt(), "level {level} out of order");
                }
                assert!(level == 0 || lower_level.contains(&(node as usize)), "node at level {level} missing below");
                this_level.insert(node as usize);
                previous = Some(key);
                // SAFETY: as above.
                node = unsafe { tower_slot(node, level) }.load(MemoryOrdering::Acquire);
            }
            if level == 0 {
                entry_count = this_level.len();
            }
            lower_level = this_level;
        }
        self.verify_run_hints();
        entry_count
    }

    /// Checks every run hint: it names a later node of the same user key, and every node
    /// between holds that user key too.
    fn verify_run_hints(&self) {
        let mut node = self.first();
        while let Some(current) = node {
            if let Some(run_end) = current.run_end() {
                let user_key = split_internal_key(current.key()).0;
                let mut walker = current;
                while walker.position() != run_end.position() {
                    walker = walker.next().expect("a run hint names a node further along level 0");
                    assert_eq!(split_internal_key(walker.key()).0, user_key, "a run hint spans another user key");
                }
            }
            node = current.next();
        }
    }
}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SkipList")
            .field("height", &self.height.load(MemoryOrdering::Relaxed))
            .field("arena", &self.arena)
            .finish()
    }
}

/// Splits an internal key into its user key and trailer. A key shorter than the trailer is not a
/// valid internal key; it is treated as a bare user key with the largest trailer, which sorts
/// before every entry of that user key, so seeks with it still land somewhere sensible.
#[inline]
pub(crate) fn split_internal_key(internal_key: &[u8]) -> (&[u8], u64) {
    match internal_key.len().checked_sub(TRAILER_SIZE_BYTES) {
        Some(split) => {
            let (user_key, trailer_bytes) = internal_key.split_at(split);
            let mut bytes = [0u8; TRAILER_SIZE_BYTES];
            bytes.copy_from_slice(trailer_bytes);
            (user_key, u64::from_le_bytes(bytes))
        }
        None => (internal_key, u64::MAX),
    }
}

/// Allocates and fills a node of `height` levels with null links. The node is private to the
/// caller until linked.
fn allocate_node(
    arena: &Arena,
    height: usize,
    user_key: &[u8],
    trailer: u64,
    value: &[u8],
    with_run_hint: bool,
) -> NonNull<Node> {
    debug_assert!((1..=MAX_HEIGHT).contains(&height));
    let key_length_bytes = user_key.len() + TRAILER_SIZE_BYTES;
    // The engine caps keys at 1 MiB and values at 1 GiB, so the lengths fit the u32 header (the
    // value's with its top bit to spare for the run hint flag); this check keeps a broken caller
    // from silently truncating an entry.
    let (Ok(stored_key_length), Ok(stored_value_length)) =
        (u32::try_from(key_length_bytes), u32::try_from(value.len()))
    else {
        panic!("memtable entry too large: key {key_length_bytes} bytes, value {} bytes", value.len());
    };
    assert!(stored_value_length & RUN_HINT_FLAG == 0, "memtable value too large: {} bytes", value.len());
    let stored_value_length = if with_run_hint { stored_value_length | RUN_HINT_FLAG } else { stored_value_length };
    let tower_bytes = height * TOWER_SLOT_BYTES;
    let node_bytes = if with_run_hint {
        run_hint_offset(key_length_bytes, value.len()) + RUN_HINT_BYTES
    } else {
        HEADER_BYTES + key_length_bytes + value.len()
    };
    let total_bytes = tower_bytes + node_bytes;
    let block = arena.allocate(total_bytes);
    // SAFETY: the block is at least `total_bytes` long, aligned to `ARENA_ALIGNMENT_BYTES`, and
    // exclusively ours. The header lands at `tower_bytes`, a multiple of the slot size, so it and
    // every slot are suitably aligned (see the const assertions). All writes below stay inside
    // the block.
    unsafe {
        let node = block.as_ptr().add(tower_bytes).cast::<Node>();
        node.write(Node {
            key_length_bytes: stored_key_length,
            value_length_bytes: stored_value_length,
            payload: PublishedOnce::new(),
        });
        if with_run_hint {
            // After the value, at a multiple of the slot size like the tower slots.
            let slot = node.cast::<u8>().add(run_hint_offset(key_length_bytes, value.len())).cast::<AtomicPtr<Node>>();
            slot.write(AtomicPtr::new(ptr::null_mut()));
        }
        let key_start = node.cast::<u8>().add(HEADER_BYTES);
        ptr::copy_nonoverlapping(user_key.as_ptr(), key_start, user_key.len());
        let trailer_bytes = trailer.to_le_bytes();
        ptr::copy_nonoverlapping(trailer_bytes.as_ptr(), key_start.add(user_key.len()), TRAILER_SIZE_BYTES);
        ptr::copy_nonoverlapping(value.as_ptr(), key_start.add(key_length_bytes), value.len());
        for level in 0..height {
            let slot = node.cast::<u8>().sub((level + 1) * TOWER_SLOT_BYTES).cast::<AtomicPtr<Node>>();
            slot.write(AtomicPtr::new(ptr::null_mut()));
        }
        // Everything but the links is final now; only the linking CAS publishes it.
        (*node).payload.written();
        NonNull::new_unchecked(node)
    }
}

/// Where the previous insert of a thread went: for each level, the node before the inserted key
/// and the node after it.
#[derive(Clone, Copy)]
struct Splice {
    /// The list the splice belongs to; 0 for none. Pointers are only used when it matches, and
    /// ids are never reused, so pointers into a dropped list are never followed.
    list_id: u64,
    /// Levels recorded (below it, entries are meaningful).
    height: usize,
    predecessors: [*mut Node; MAX_HEIGHT],
    successors: [*mut Node; MAX_HEIGHT],
}

impl Splice {
    const EMPTY: Splice = Splice {
        list_id: 0,
        height: 0,
        predecessors: [ptr::null_mut(); MAX_HEIGHT],
        successors: [ptr::null_mut(); MAX_HEIGHT],
    };
}

/// Source of list ids; starts at 1 so that 0 means "no list". Always `std`'s atomic, also under
/// loom (whose atomics cannot be statics): ids only need to be unique, and the id is no part of
/// what other threads of the list synchronise on.
static NEXT_LIST_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

const_thread_local! {
    /// The splice of this thread's most recent insert.
    static INSERT_SPLICE: RefCell<Splice> = const { RefCell::new(Splice::EMPTY) };
    /// Per-thread xorshift state for tower heights; zero means "not seeded yet".
    static HEIGHT_RANDOM_STATE: Cell<u64> = const { Cell::new(0) };
}

/// Distinguishes the seeds of different threads. Always `std`'s atomic, like `NEXT_LIST_ID`.
static HEIGHT_SEED_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A random tower height: 1 with probability 3/4, then each further level with probability 1/4,
/// capped at `MAX_HEIGHT`. Uses a per-thread generator so concurrent writers share no state.
fn random_height() -> usize {
    let random = HEIGHT_RANDOM_STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            // Mix a per-thread counter with splitmix64 so threads start far apart; `| 1` keeps
            // the xorshift state non-zero.
            let counter = HEIGHT_SEED_COUNTER.fetch_add(1, MemoryOrdering::Relaxed);
            let mut seed = counter.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            seed = (seed ^ (seed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            seed = (seed ^ (seed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x = (seed ^ (seed >> 31)) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        // xorshift64*: the multiply spreads the state into well-mixed high bits.
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    });
    // Each extra level needs two more trailing zero bits: probability 1/4 per level.
    let height = 1 + (random.trailing_zeros() / 2) as usize;
    height.min(MAX_HEIGHT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The range sample's estimate of user keys, over many ranges: close on average to the
    /// keys (not the nodes) when keys have a few versions, a few times high at worst for hot
    /// keys with fifty versions each, and never taken in a range too short to sample.
    #[test]
    fn range_samples_estimate_user_keys_not_versions() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut random = SmallRng::seed_from_u64(44);
        let key = |n: u64| format!("key{n:08}");
        let estimate = |list: &SkipList, from: u64, to: u64| {
            let (start, end) = (key(from), key(to));
            list.sample_range((start.as_bytes(), u64::MAX), (end.as_bytes(), u64::MAX)).estimated_user_keys
        };
        // Mean ratio of estimate to keys over the ranges estimated, how many were, and how
        // many were off by more than 2x.
        let survey = |list: &SkipList, total: u64, length: u64, random: &mut SmallRng| {
            let (mut ratio_sum, mut outside_2x, mut estimated) = (0.0, 0, 0u32);
            for _ in 0..200 {
                let from = random.gen_range(0..total - length);
                let Some(keys) = estimate(list, from, from + length) else { continue };
                estimated += 1;
                let ratio = keys as f64 / length as f64;
                ratio_sum += ratio;
                if !(0.5..=2.0).contains(&ratio) {
                    outside_2x += 1;
                }
            }
            (ratio_sum / f64::from(estimated.max(1)), estimated, outside_2x)
        };
        // Builds a list of `total` keys in a scattered order, key `n` with `versions(n)` versions.
        let build = |total: u64, versions: &dyn Fn(u64) -> u64| {
            let list = SkipList::new(1 << 20, KeyComparator::Bytewise);
            for i in 0..total {
                let n = (i * 7_919) % total;
                for version in 1..=versions(n) {
                    list.insert(key(n).as_bytes(), version << 8, b"v");
                }
            }
            list
        };

        // Three keys in ten have a second version, as after updates.
        let total = 60_000;
        let list = build(total, &|n| if n % 10 < 3 { 2 } else { 1 });
        for length in [40u64, 100, 1_000] {
            let (mean, estimated, outside_2x) = survey(&list, total, length, &mut random);
            assert!(estimated >= 100, "{length} keys: only {estimated} of 200 ranges were estimated");
            // The sample runs 5-13 % high (it stops at the first level with enough oldest
            // versions), and overlapping ranges share their tall nodes, so the mean varies
            // from list to list by several percent.
            assert!((0.75..=1.4).contains(&mean), "{length} keys: estimates average {mean:.2} times the keys");
            assert!(outside_2x * 4 <= estimated, "{length} keys: {outside_2x} of {estimated} estimates off by 2x");
        }
        for length in [1u64, 3, 7] {
            for _ in 0..50 {
                let from = random.gen_range(0..total - length);
                assert_eq!(estimate(&list, from, from + length), None, "a range of {length} keys has too few nodes");
            }
        }
        // Four versions of every key: still counted as keys, from the oldest versions.
        let four = build(10_000, &|_| 4);
        let (mean, estimated, _) = survey(&four, 10_000, 40, &mut random);
        assert!(estimated >= 100, "only {estimated} of 200 ranges of four-version keys were estimated");
        assert!((0.8..=1.25).contains(&mean), "estimates of four-version keys average {mean:.2} times the keys");
        // Fifty versions of every key: a hot range, estimated high (2.5-5 times over 400 lists)
        // but far below the versions (50 times).
        let hot = build(2_000, &|_| 50);
        let (mean, estimated, _) = survey(&hot, 2_000, 100, &mut random);
        assert_eq!(estimated, 200, "a hot range of 100 keys holds enough nodes to sample");
        assert!((0.8..=8.0).contains(&mean), "estimates of hot keys average {mean:.2} times the keys");
    }

    /// Forward searches from a path (`seek_from`) must find exactly what a fresh `seek` finds,
    /// also when entries were inserted since the path was recorded: before the path's nodes,
    /// between them and the target, and beyond.
    #[test]
    fn forward_searches_from_a_path_find_what_a_seek_finds_while_the_list_grows() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        for seed in 0..40u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let list = SkipList::new(1 << 16, KeyComparator::Bytewise);
            let mut present = std::collections::HashSet::new();
            let mut insert = |rng: &mut SmallRng, list: &SkipList| loop {
                let number: u64 = rng.gen_range(0..20_000);
                if present.insert(number) {
                    list.insert(&number.to_be_bytes(), 1 << 8 | 1, b"v");
                    return;
                }
            };
            for _ in 0..rng.gen_range(0..3_000) {
                insert(&mut rng, &list);
            }
            let mut path = list.path_at_head();
            let mut target = 0u64;
            for round in 0..400 {
                for _ in 0..rng.gen_range(0..4) {
                    insert(&mut rng, &list);
                }
                // Mostly short hops (versions of one key), sometimes long ones.
                target += if rng.gen_bool(0.9) { rng.gen_range(0..8) } else { rng.gen_range(0..2_000) };
                let key = target.to_be_bytes();
                let fresh = list.seek(&key, u64::MAX).map(|node| node.key().to_vec());
                let found = if rng.gen_bool(0.05) {
                    list.seek_recording(&key, u64::MAX, &mut path)
                } else {
                    list.seek_from(&key, u64::MAX, &mut path)
                };
                assert_eq!(found.map(|node| node.key().to_vec()), fresh, "seed {seed}, round {round}, target {target}");
            }
        }
    }

    /// Versions of a few keys inserted with sequences in random order (as concurrent writers
    /// can): the hints stay within their runs (checked by `verify_structure`), later versions
    /// of a key get them, and `skip_run` lands where a seek lands.
    #[test]
    fn run_hints_stay_within_their_key_and_skip_to_the_next_key() {
        use rand::rngs::SmallRng;
        use rand::seq::SliceRandom;
        use rand::{Rng, SeedableRng};
        for seed in 0..30u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let list = SkipList::new(1 << 16, KeyComparator::Bytewise);
            let mut entries: Vec<(u64, u64)> = Vec::new();
            let mut sequence = 0;
            for key in 0..rng.gen_range(1..40u64) {
                for _ in 0..rng.gen_range(1..60) {
                    sequence += 1;
                    entries.push((key * 3, sequence));
                }
            }
            // Mostly in order, with some local shuffling, like writers racing.
            for chunk in entries.chunks_mut(rng.gen_range(1..6)) {
                chunk.shuffle(&mut rng);
            }
            for &(key, sequence) in &entries {
                list.insert(&key.to_be_bytes(), sequence << 8 | 1, b"v");
            }
            assert_eq!(list.verify_structure(), entries.len());
            let hinted =
                std::iter::successors(list.first(), |node| node.next()).filter(|node| node.run_end().is_some()).count();
            assert!(hinted > 0, "seed {seed}: no version got a run hint");
            // From every node, jumping past its key's versions lands on the next key's first
            // node (or the end), whenever the hint allows a jump.
            let mut node = list.first();
            while let Some(current) = node {
                let user_key = split_internal_key(current.key()).0.to_vec();
                let expected = list.seek(&user_key, 0).map(|found| found.key().to_vec());
                if let Some(found) = list.skip_run(current, &user_key, 0) {
                    assert_eq!(found.map(|found| found.key().to_vec()), expected, "seed {seed}");
                }
                node = current.next();
            }
        }
    }

    #[test]
    fn heights_follow_a_quarter_branching() {
        let mut counts = [0usize; MAX_HEIGHT + 1];
        let samples = 400_000;
        for _ in 0..samples {
            counts[random_height()] += 1;
        }
        assert_eq!(counts[0], 0);
        // Expected share of height 1 is 3/4 and of height >= 2 is 1/4; allow generous slack.
        let height_one = counts[1] as f64 / samples as f64;
        assert!((0.73..0.77).contains(&height_one), "height 1 share {height_one}");
        let at_least_three: usize = counts[3..].iter().sum();
        let share = at_least_three as f64 / samples as f64;
        assert!((0.055..0.07).contains(&share), "height >= 3 share {share}");
    }

    /// Inserts `number` (as an 8-byte big-endian user key) with a chosen height and splice.
    fn insert_with(list: &SkipList, number: u64, height: usize, splice: &mut Splice) -> *mut Node {
        let user_key = number.to_be_bytes();
        let list_height = list.raise_height(height);
        list.prepare_splice(splice, list_height, &user_key, number << 8 | 1);
        let node = allocate_node(&list.arena, height, &user_key, number << 8 | 1, b"", false);
        list.link(node, height, splice, &user_key, number << 8 | 1);
        node.as_ptr()
    }

    #[test]
    fn stale_splice_is_checked_at_every_level() {
        let list = SkipList::new(4096, KeyComparator::Bytewise);
        let mut fresh = Splice::EMPTY;
        let ten = insert_with(&list, 10, 2, &mut fresh);
        let twenty = insert_with(&list, 20, 2, &mut fresh);
        let thirty = insert_with(&list, 30, 2, &mut fresh);
        // A splice as concurrent inserts can leave it: level 0 still brackets 25 (from 10 to 30,
        // although 20 now sits between), but level 1 ends at 20, before 25. Reusing level 1
        // because level 0 brackets would link 25 between 10 and 20.
        let mut stale = Splice::EMPTY;
        stale.list_id = list.id;
        stale.height = 2;
        stale.predecessors[0] = ten;
        stale.successors[0] = thirty;
        stale.predecessors[1] = ten;
        stale.successors[1] = twenty;
        insert_with(&list, 25, 2, &mut stale);
        assert_eq!(list.verify_structure(), 4);
        let keys: Vec<u64> = std::iter::successors(list.first(), |node| node.next())
            .map(|node| u64::from_be_bytes(node.key()[..8].try_into().unwrap()))
            .collect();
        assert_eq!(keys, [10, 20, 25, 30]);
        // A splice from another list is ignored entirely.
        let other = SkipList::new(4096, KeyComparator::Bytewise);
        insert_with(&other, 5, 1, &mut stale);
        assert_eq!(other.verify_structure(), 1);
        assert_eq!(list.verify_structure(), 4);
    }

    #[test]
    fn split_handles_short_keys() {
        assert_eq!(split_internal_key(b"abc"), (&b"abc"[..], u64::MAX));
        let key = crate::key::make_internal_key(b"k", 5, crate::key::ValueKind::Put);
        assert_eq!(split_internal_key(&key), (&b"k"[..], (5 << 8) | 1));
    }
}

/// Loom models of the lock-free insert and the readers (`make loom`). They run the list's own
/// code, arena included, with loom's atomics in the towers: loom tries every interleaving of
/// the writers' searches and CASes with the reader's walks, and every value each Acquire or
/// Relaxed load may return, and the node payload marker reports any read of a key or value not
/// ordered after its writing.
///
/// Heights are chosen (`insert_with_height`) rather than random, because loom replays each
/// execution and needs the same choices every time, and so that towers meet where a model wants
/// a conflict.
///
/// Each model was shown to fail on a deliberately broken list (then restored): with the linking
/// CAS's success ordering weakened from Release to Relaxed, both models report a causality
/// violation at another thread's read of the new node's key; with the CAS replaced by a plain
/// store, `one_gap_two_writers_and_a_reader` finds only 4 of its 6 entries linked; with
/// `prepare_splice` checking only the top level of a cached splice, it finds level 0 out of
/// order; with the arena's `current` store weakened to Relaxed, `writers_switch_arena_chunks`
/// reports a causality violation at the fresh chunk's claim counter. Each failed within a
/// fraction of a second.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::model;
    use loom::sync::Arc;
    use loom::thread;

    /// The trailer of the put with sequence `number`.
    fn trailer_of(number: u64) -> u64 {
        number << 8 | 1
    }

    /// A value that names its key, `length` bytes long, so a torn or misplaced payload shows.
    fn value_of(number: u64, length: usize) -> Vec<u8> {
        (0..length).map(|index| (number as u8).wrapping_add(index as u8)).collect()
    }

    /// Inserts `number` (an 8-byte big-endian user key) with a chosen height and a value of
    /// `value_length` bytes, through the thread's own splice, as `SkipList::insert` does.
    fn insert(list: &SkipList, number: u64, height: usize, value_length: usize) {
        list.insert_with_height(height, &number.to_be_bytes(), trailer_of(number), &value_of(number, value_length));
    }

    /// The key number of `node`, after checking that its key and value are whole.
    fn checked_number(node: NodeRef<'_>, value_length: usize) -> u64 {
        let key = node.key();
        assert_eq!(key.len(), 8 + TRAILER_SIZE_BYTES, "torn key");
        let (user_key, trailer) = split_internal_key(key);
        let number = u64::from_be_bytes(user_key.try_into().expect("8-byte user key"));
        assert_eq!(trailer, trailer_of(number), "torn trailer");
        assert_eq!(node.value(), value_of(number, value_length), "torn value");
        number
    }

    /// The key numbers along level 0, each entry checked whole, asserting strict order.
    fn walk(list: &SkipList, value_length: usize) -> Vec<u64> {
        let numbers: Vec<u64> = std::iter::successors(list.first(), |node| node.next())
            .map(|node| checked_number(node, value_length))
            .collect();
        assert!(numbers.windows(2).all(|pair| pair[0] < pair[1]), "level 0 out of order: {numbers:?}");
        numbers
    }

    /// Two writers insert into the same gap between 10 and 40, at levels 0 and 1, so CASes of
    /// the two conflict and the loser searches on; each then inserts again from its cached
    /// splice, which the other writer may have made stale at level 0 only (30 is linked at level
    /// 0 alone, so the splice of 20 can still bracket 33 at level 1 but not at level 0). A
    /// reader walks level 0 and seeks meanwhile. Every entry must end up linked exactly once
    /// with every level sorted, and the reader must see only whole entries, in order, always
    /// including the ones inserted before it started.
    #[test]
    fn one_gap_two_writers_and_a_reader() {
        const VALUE_BYTES: usize = 3;
        model(2, || {
            let list = Arc::new(SkipList::new(0, KeyComparator::Bytewise));
            insert(&list, 10, 2, VALUE_BYTES);
            insert(&list, 40, 2, VALUE_BYTES);
            let writers: Vec<_> = [[(20, 2), (33, 1)], [(30, 1), (35, 2)]]
                .into_iter()
                .map(|entries| {
                    let list = Arc::clone(&list);
                    thread::spawn(move || {
                        for (number, height) in entries {
                            insert(&list, number, height, VALUE_BYTES);
                        }
                    })
                })
                .collect();
            let reader = {
                let list = Arc::clone(&list);
                thread::spawn(move || {
                    let seen = walk(&list, VALUE_BYTES);
                    assert!(
                        seen.contains(&10) && seen.contains(&40),
                        "an entry inserted before the reader is missing: {seen:?}"
                    );
                    let found =
                        list.seek(&40u64.to_be_bytes(), trailer_of(40)).map(|node| checked_number(node, VALUE_BYTES));
                    assert_eq!(found, Some(40));
                })
            };
            for writer in writers {
                writer.join().expect("writer");
            }
            reader.join().expect("reader");
            assert_eq!(list.verify_structure(), 6);
            assert_eq!(walk(&list, VALUE_BYTES), [10, 20, 30, 33, 35, 40]);
        });
    }

    /// A reader searching forward from a recorded path while a writer inserts into the gap it
    /// searches: each search must return an entry at or after its target and none that was
    /// linked before the search began and lies between the target and what it returned.
    #[test]
    fn forward_search_from_a_path_while_a_writer_inserts() {
        const VALUE_BYTES: usize = 2;
        model(2, || {
            let list = Arc::new(SkipList::new(0, KeyComparator::Bytewise));
            insert(&list, 10, 2, VALUE_BYTES);
            insert(&list, 40, 2, VALUE_BYTES);
            let writer = {
                let list = Arc::clone(&list);
                thread::spawn(move || {
                    insert(&list, 20, 2, VALUE_BYTES);
                    insert(&list, 30, 1, VALUE_BYTES);
                })
            };
            let mut path = list.path_at_head();
            let first = list
                .seek_recording(&12u64.to_be_bytes(), u64::MAX, &mut path)
                .map(|node| checked_number(node, VALUE_BYTES));
            assert!(matches!(first, Some(20 | 40)), "{first:?}");
            let second =
                list.seek_from(&25u64.to_be_bytes(), u64::MAX, &mut path).map(|node| checked_number(node, VALUE_BYTES));
            assert!(matches!(second, Some(30 | 40)), "{second:?}");
            let third =
                list.seek_from(&35u64.to_be_bytes(), u64::MAX, &mut path).map(|node| checked_number(node, VALUE_BYTES));
            assert_eq!(third, Some(40));
            writer.join().expect("writer");
            let last =
                list.seek_from(&36u64.to_be_bytes(), u64::MAX, &mut path).map(|node| checked_number(node, VALUE_BYTES));
            assert_eq!(last, Some(40));
            let mut fresh = list.path_at_head();
            let after_writer = list
                .seek_from(&21u64.to_be_bytes(), u64::MAX, &mut fresh)
                .map(|node| checked_number(node, VALUE_BYTES));
            assert_eq!(after_writer, Some(30), "a search after the writer finished sees its entries");
        });
    }

    /// Two writers add versions of one key while a reader, standing on the key's newest
    /// version it found, jumps past the key's versions by the run hint: the jump must land on
    /// the next key or give up, never on a version of the key or past the next key, and every
    /// hint must stay within its key's run.
    #[test]
    fn versions_of_one_key_from_two_writers_and_a_jumping_reader() {
        let key = 10u64.to_be_bytes();
        model(2, move || {
            let list = Arc::new(SkipList::new(0, KeyComparator::Bytewise));
            list.insert_with_height(1, &key, 1 << 8 | 1, b"v");
            list.insert_with_height(1, &key, 2 << 8 | 1, b"v");
            list.insert_with_height(1, &40u64.to_be_bytes(), 1 << 8 | 1, b"v");
            let writers: Vec<_> = [4u64, 3]
                .into_iter()
                .map(|sequence| {
                    let list = Arc::clone(&list);
                    thread::spawn(move || list.insert_with_height(1, &key, sequence << 8 | 1, b"v"))
                })
                .collect();
            let newest = list.seek(&key, u64::MAX).expect("a version of the key");
            assert_eq!(split_internal_key(newest.key()).0, key);
            if let Some(found) = list.skip_run(newest, &key, 0) {
                let found = found.expect("the next key is there");
                assert_eq!(split_internal_key(found.key()).0, 40u64.to_be_bytes(), "the jump lands on the next key");
            }
            for writer in writers {
                writer.join().expect("writer");
            }
            assert_eq!(list.verify_structure(), 5);
        });
    }

    /// Two writers whose entries no longer fit the arena's current chunk: both claims fail, and
    /// both race to install a fresh chunk (one does, the other finds it done), or the second
    /// writer loads the fresh chunk directly. Each entry must land whole in a block of its own.
    #[test]
    fn writers_switch_arena_chunks() {
        // With a 1 KiB chunk (the smallest), the head and three entries of this size leave too
        // little room for a fourth entry.
        const VALUE_BYTES: usize = 200;
        model(2, || {
            let list = Arc::new(SkipList::new(0, KeyComparator::Bytewise));
            for number in [10, 20, 30] {
                insert(&list, number, 1, VALUE_BYTES);
            }
            let chunk_bytes = list.memory_usage_bytes();
            let writers: Vec<_> = [15, 25]
                .into_iter()
                .map(|number| {
                    let list = Arc::clone(&list);
                    thread::spawn(move || insert(&list, number, 1, VALUE_BYTES))
                })
                .collect();
            for writer in writers {
                writer.join().expect("writer");
            }
            assert_eq!(list.memory_usage_bytes(), 2 * chunk_bytes, "exactly one fresh chunk");
            assert_eq!(list.verify_structure(), 5);
            assert_eq!(walk(&list, VALUE_BYTES), [10, 15, 20, 25, 30]);
        });
    }
}
