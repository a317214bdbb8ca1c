//! The lock manager of pessimistic transactions: shared and exclusive locks on (column family,
//! key), FIFO wait queues, lock-wait timeouts and deadlock detection.
//!
//! Locks live in sharded hash tables (a key's shard is chosen by its hash), each shard behind
//! its own mutex, so transactions that lock different keys rarely meet. A lock has holders (one
//! exclusive holder, or any number of shared ones) and a queue of waiters. A request is granted
//! when it is compatible with every other holder and with every waiter queued ahead of it, so
//! waiters are served first come, first served and a stream of shared requests cannot starve an
//! exclusive one. The one exception is an upgrade (a shared holder asking for exclusive): it
//! goes to the front of the queue, since it already holds the lock the others wait for.
//!
//! Waiting: each transaction has one [`WaitSlot`] (a counter, a mutex and a condition
//! variable). A waiter reads its slot's counter, then checks under the shard mutex whether it
//! may go on; if not, it sleeps until the counter moves or its deadline passes. Whoever changes
//! a lock (a release, a waiter leaving) bumps the counters of that lock's waiters, and the
//! deadlock detector bumps a victim's, so no wake-up is lost: any change after the check moves
//! the counter the waiter compares against.
//!
//! Deadlocks: before it sleeps, a waiter records in the wait-for graph which transactions it
//! waits for (the other holders it conflicts with and the waiters queued ahead of it) and
//! searches the graph for a path back to itself. A cycle's youngest transaction (the highest
//! id: the one that began last and so has likely done the least work) is the victim: if that is
//! the waiter itself it gives up at once with [`Error::Deadlock`]; otherwise the victim is
//! marked and woken, and gives up when it sees the mark.
//!
//! Concurrency contract: every method may be called from any thread; one transaction calls
//! them from one thread at a time. Lock order: a shard mutex, then the wait-for graph's mutex,
//! then wait slots' mutexes (leaves: nothing is taken while one is held).
//!
//! Invariants: a lock's holders are compatible (at most one exclusive holder, and then no
//! other); a transaction appears at most once among a lock's holders and at most once among
//! its waiters; an empty lock (no holders, no waiters) is removed from its shard.

use std::collections::{HashMap, HashSet, VecDeque};
// The counters are statistics, not synchronisation: plain `std` atomics even under loom.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// Modelled with loom (`loom_models` below): the shards, the wait-for graph and the wait slots.
use crate::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};

/// Identifies a transaction: ids grow with the order transactions began.
pub(crate) type TransactionId = u64;

/// Number of lock table shards.
const SHARD_COUNT: usize = 64;

/// Approximate memory of one lock entry besides its key: the hash table slot, the holder and
/// waiter vectors. Used for the memory the lock manager reports.
const LOCK_OVERHEAD_BYTES: usize = 96;

/// Shared (read) or exclusive (write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockMode {
    Shared,
    Exclusive,
}

impl LockMode {
    fn compatible(self, other: LockMode) -> bool {
        self == LockMode::Shared && other == LockMode::Shared
    }
}

/// What a granted request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granted {
    /// The transaction did not hold the lock before: it must release it later.
    New,
    /// It already held the lock in this mode or a stronger one.
    AlreadyHeld,
    /// It held the lock shared and now holds it exclusive.
    Upgraded,
}

/// The key a lock protects: a column family id and a user key.
pub(crate) type LockKey = (u32, Vec<u8>);

/// Where a transaction sleeps while it waits for a lock.
#[derive(Debug, Default)]
pub(crate) struct WaitSlot {
    changes: Mutex<u64>,
    changed: Condvar,
}

impl WaitSlot {
    fn current(&self) -> u64 {
        *self.changes.lock()
    }

    fn bump(&self) {
        let mut changes = self.changes.lock();
        *changes += 1;
        self.changed.notify_all();
    }

    /// Sleeps until the counter differs from `seen` or `deadline` passes. (Loom models no
    /// clock: there every wait is without deadline, and the models use no timeouts.)
    fn wait(&self, seen: u64, deadline: Option<Instant>) {
        let mut changes = self.changes.lock();
        while *changes == seen {
            match deadline {
                #[cfg(not(loom))]
                Some(deadline) => {
                    if self.changed.wait_until(&mut changes, deadline).timed_out() {
                        return;
                    }
                }
                _ => self.changed.wait(&mut changes),
            }
        }
    }
}

struct Waiter {
    transaction: TransactionId,
    mode: LockMode,
    slot: Arc<WaitSlot>,
}

#[derive(Default)]
struct Lock {
    holders: Vec<(TransactionId, LockMode)>,
    waiters: VecDeque<Waiter>,
}

impl Lock {
    fn held_mode(&self, transaction: TransactionId) -> Option<LockMode> {
        self.holders.iter().find(|(holder, _)| *holder == transaction).map(|(_, mode)| *mode)
    }

    fn waiter_position(&self, transaction: TransactionId) -> Option<usize> {
        self.waiters.iter().position(|waiter| waiter.transaction == transaction)
    }

    /// True when `transaction`, queued at `position`, may take the lock in `mode` now.
    fn grantable(&self, transaction: TransactionId, mode: LockMode, position: usize) -> bool {
        let holders_allow = self.holders.iter().all(|&(holder, held)| holder == transaction || mode.compatible(held));
        let queue_allows = self.waiters.iter().take(position).all(|ahead| mode.compatible(ahead.mode));
        holders_allow && queue_allows
    }

    /// The transactions `transaction` (queued at `position`, asking for `mode`) waits for.
    fn blockers(&self, transaction: TransactionId, mode: LockMode, position: usize) -> Vec<TransactionId> {
        let mut blockers: Vec<TransactionId> = self
            .holders
            .iter()
            .filter(|&&(holder, held)| holder != transaction && !mode.compatible(held))
            .map(|&(holder, _)| holder)
            .collect();
        blockers.extend(self.waiters.iter().take(position).map(|ahead| ahead.transaction));
        blockers
    }

    fn grant(&mut self, transaction: TransactionId, mode: LockMode) -> Granted {
        match self.holders.iter_mut().find(|(holder, _)| *holder == transaction) {
            Some(entry) => {
                debug_assert!(entry.1 < mode, "a holder asks again only to upgrade");
                entry.1 = mode;
                Granted::Upgraded
            }
            None => {
                self.holders.push((transaction, mode));
                Granted::New
            }
        }
    }

    fn wake_waiters(&self) {
        for waiter in &self.waiters {
            waiter.slot.bump();
        }
    }
}

struct Shard {
    locks: Mutex<HashMap<LockKey, Lock>>,
}

/// Who waits for whom, and the victims chosen but not yet gone.
#[derive(Default)]
struct WaitForGraph {
    edges: HashMap<TransactionId, (Vec<TransactionId>, Arc<WaitSlot>)>,
    victims: HashSet<TransactionId>,
}

impl WaitForGraph {
    /// A cycle through `start`, if its recorded edges lead back to it: the transactions on it.
    fn cycle_through(&self, start: TransactionId) -> Option<Vec<TransactionId>> {
        // Depth-first search keeping the path, so the cycle's members are known when found.
        let mut path: Vec<(TransactionId, usize)> = vec![(start, 0)];
        let mut visited: HashSet<TransactionId> = HashSet::new();
        visited.insert(start);
        while let Some(&mut (node, ref mut next_edge)) = path.last_mut() {
            let edges = self.edges.get(&node).map(|(edges, _)| edges.as_slice()).unwrap_or(&[]);
            if *next_edge >= edges.len() {
                path.pop();
                continue;
            }
            let target = edges[*next_edge];
            *next_edge += 1;
            if target == start {
                return Some(path.iter().map(|&(member, _)| member).collect());
            }
            if visited.insert(target) {
                path.push((target, 0));
            }
        }
        None
    }
}

/// Counters the lock manager keeps for `Db::stats`. A deadlock is counted when its victim
/// fails (a victim granted its lock before it saw the mark breaks the cycle by itself).
#[derive(Debug, Default)]
pub(crate) struct LockCounters {
    pub(crate) waits: AtomicU64,
    pub(crate) wait_micros: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    pub(crate) timeouts: AtomicU64,
}

/// The lock tables; see the module documentation.
pub(crate) struct LockManager {
    shards: Box<[Shard]>,
    graph: Mutex<WaitForGraph>,
    lock_count: AtomicUsize,
    memory_bytes: AtomicUsize,
    pub(crate) counters: LockCounters,
}

/// How long and whether a request may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitPolicy {
    /// `None`: wait without limit.
    pub(crate) timeout: Option<Duration>,
    pub(crate) detect_deadlocks: bool,
}

impl Default for LockManager {
    fn default() -> LockManager {
        LockManager::new()
    }
}

impl LockManager {
    pub(crate) fn new() -> LockManager {
        let shards = (0..SHARD_COUNT).map(|_| Shard { locks: Mutex::new(HashMap::new()) }).collect();
        LockManager {
            shards,
            graph: Mutex::new(WaitForGraph::default()),
            lock_count: AtomicUsize::new(0),
            memory_bytes: AtomicUsize::new(0),
            counters: LockCounters::default(),
        }
    }

    fn shard(&self, key: &LockKey) -> &Shard {
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&key.1, u64::from(key.0));
        &self.shards[(hash % SHARD_COUNT as u64) as usize]
    }

    /// Locks held now, by all transactions.
    pub(crate) fn lock_count(&self) -> usize {
        self.lock_count.load(Ordering::Relaxed)
    }

    /// Approximate memory of the lock tables.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes.load(Ordering::Relaxed)
    }

    /// Takes `key` in `mode` for `transaction`, waiting as `policy` allows. On
    /// [`Error::LockTimeout`] and [`Error::Deadlock`] nothing changed: the transaction holds what
    /// it held before.
    pub(crate) fn acquire(
        &self,
        transaction: TransactionId,
        slot: &Arc<WaitSlot>,
        key: &LockKey,
        mode: LockMode,
        policy: WaitPolicy,
    ) -> Result<Granted> {
        let shard = self.shard(key);
        let mut locks = shard.locks.lock();
        let lock = locks.entry(key.clone()).or_default();
        let held = lock.held_mode(transaction);
        if held.is_some_and(|held| held >= mode) {
            return Ok(Granted::AlreadyHeld);
        }
        if lock.waiters.is_empty() && lock.grantable(transaction, mode, 0) {
            let granted = lock.grant(transaction, mode);
            if granted == Granted::New {
                self.note_new_lock(key);
            }
            return Ok(granted);
        }
        // Queue up: an upgrade goes first (it holds the lock the others wait for).
        let waiter = Waiter { transaction, mode, slot: Arc::clone(slot) };
        if held.is_some() {
            lock.waiters.push_front(waiter);
        } else {
            lock.waiters.push_back(waiter);
        }
        drop(locks);
        self.counters.waits.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let deadline = policy.timeout.map(|timeout| started + timeout);
        let outcome = self.wait_in_queue(transaction, slot, key, mode, policy, deadline);
        self.counters.wait_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        outcome
    }

    fn wait_in_queue(
        &self,
        transaction: TransactionId,
        slot: &Arc<WaitSlot>,
        key: &LockKey,
        mode: LockMode,
        policy: WaitPolicy,
        deadline: Option<Instant>,
    ) -> Result<Granted> {
        let shard = self.shard(key);
        loop {
            // Read the counter before checking, so that a change after the check wakes us.
            let seen = slot.current();
            {
                let mut locks = shard.locks.lock();
                let Some(lock) = locks.get_mut(key) else {
                    debug_assert!(false, "a lock with a waiter is never removed");
                    return Err(Error::invalid("internal error: lock vanished while waited for"));
                };
                let Some(position) = lock.waiter_position(transaction) else {
                    debug_assert!(false, "a waiter leaves its queue only by itself");
                    return Err(Error::invalid("internal error: lock waiter vanished"));
                };
                if lock.grantable(transaction, mode, position) {
                    lock.waiters.remove(position);
                    let granted = lock.grant(transaction, mode);
                    // Waiters behind may be grantable too (shared after shared).
                    lock.wake_waiters();
                    drop(locks);
                    // A victim mark that came too late (the lock was granted first) is void:
                    // whatever cycle it was meant to break is gone, since this waiter no longer
                    // waits.
                    let mut graph = self.graph.lock();
                    graph.edges.remove(&transaction);
                    graph.victims.remove(&transaction);
                    drop(graph);
                    if granted == Granted::New {
                        self.note_new_lock(key);
                    }
                    return Ok(granted);
                }
                let failure = if self.take_victim_mark(transaction) {
                    self.counters.deadlocks.fetch_add(1, Ordering::Relaxed);
                    Some(Error::Deadlock(format!(
                        "transaction {transaction} was chosen as the victim of a deadlock while waiting for a lock"
                    )))
                } else if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                    self.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                    Some(Error::LockTimeout(format!(
                        "transaction {transaction} waited {:?} for a {} lock",
                        policy.timeout.unwrap_or_default(),
                        if mode == LockMode::Exclusive { "exclusive" } else { "shared" }
                    )))
                } else if policy.detect_deadlocks {
                    let blockers = lock.blockers(transaction, mode, position);
                    self.detect_deadlock(transaction, slot, blockers)
                } else {
                    None
                };
                if let Some(error) = failure {
                    lock.waiters.remove(position);
                    lock.wake_waiters();
                    if lock.holders.is_empty() && lock.waiters.is_empty() {
                        locks.remove(key);
                    }
                    drop(locks);
                    let mut graph = self.graph.lock();
                    graph.edges.remove(&transaction);
                    graph.victims.remove(&transaction);
                    return Err(error);
                }
            }
            slot.wait(seen, deadline);
        }
    }

    fn take_victim_mark(&self, transaction: TransactionId) -> bool {
        self.graph.lock().victims.remove(&transaction)
    }

    /// Records what `transaction` waits for and looks for a cycle through it. Returns the
    /// error for the waiter when it is the victim; marks and wakes the victim otherwise.
    fn detect_deadlock(
        &self,
        transaction: TransactionId,
        slot: &Arc<WaitSlot>,
        blockers: Vec<TransactionId>,
    ) -> Option<Error> {
        let mut graph = self.graph.lock();
        graph.edges.insert(transaction, (blockers, Arc::clone(slot)));
        let cycle = graph.cycle_through(transaction)?;
        // A cycle that already has a victim on its way out breaks by itself.
        if cycle.iter().any(|member| graph.victims.contains(member)) {
            return None;
        }
        let victim = cycle.iter().copied().max().unwrap_or(transaction);
        if victim == transaction {
            self.counters.deadlocks.fetch_add(1, Ordering::Relaxed);
            return Some(Error::Deadlock(format!(
                "transaction {transaction} would close a deadlock cycle of {} transactions ({cycle:?}) \
                 and is its youngest member",
                cycle.len()
            )));
        }
        graph.victims.insert(victim);
        if let Some((_, victim_slot)) = graph.edges.get(&victim) {
            victim_slot.bump();
        }
        None
    }

    fn note_new_lock(&self, key: &LockKey) {
        self.lock_count.fetch_add(1, Ordering::Relaxed);
        self.memory_bytes.fetch_add(key.1.len() + LOCK_OVERHEAD_BYTES, Ordering::Relaxed);
    }

    /// Releases `transaction`'s lock on `key` (which it holds) and wakes the lock's waiters.
    pub(crate) fn release(&self, transaction: TransactionId, key: &LockKey) {
        let shard = self.shard(key);
        let mut locks = shard.locks.lock();
        let Some(lock) = locks.get_mut(key) else {
            debug_assert!(false, "released a lock that is not held");
            return;
        };
        let before = lock.holders.len();
        lock.holders.retain(|(holder, _)| *holder != transaction);
        debug_assert_eq!(lock.holders.len() + 1, before, "released a lock that is not held");
        if lock.holders.len() < before {
            self.lock_count.fetch_sub(1, Ordering::Relaxed);
            self.memory_bytes.fetch_sub(key.1.len() + LOCK_OVERHEAD_BYTES, Ordering::Relaxed);
        }
        lock.wake_waiters();
        if lock.holders.is_empty() && lock.waiters.is_empty() {
            locks.remove(key);
        }
    }

    /// The mode in which `transaction` holds `key`, if it does (tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn held_mode(&self, transaction: TransactionId, key: &LockKey) -> Option<LockMode> {
        self.shard(key).locks.lock().get(key).and_then(|lock| lock.held_mode(transaction))
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! The lock manager under loom: no lost wake-up when a holder releases, and a deadlock
    //! between two transactions always broken, exactly once, in every interleaving of the
    //! waits, the cycle search, the victim's marking and its wake-up.
    use super::*;
    use crate::sync::model;
    use loom::thread;

    fn key(name: &str) -> LockKey {
        (0, name.as_bytes().to_vec())
    }

    fn forever() -> WaitPolicy {
        WaitPolicy { timeout: None, detect_deadlocks: true }
    }

    #[test]
    fn a_release_wakes_the_waiter() {
        model(4, || {
            let manager = Arc::new(LockManager::new());
            let holder_slot = Arc::new(WaitSlot::default());
            manager.acquire(1, &holder_slot, &key("k"), LockMode::Exclusive, forever()).unwrap();
            let waiter = {
                let manager = Arc::clone(&manager);
                thread::spawn(move || {
                    let slot = Arc::new(WaitSlot::default());
                    manager.acquire(2, &slot, &key("k"), LockMode::Shared, forever())
                })
            };
            manager.release(1, &key("k"));
            // A lost wake-up leaves the waiter asleep forever: loom reports the deadlock.
            assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
            manager.release(2, &key("k"));
            assert_eq!(manager.lock_count(), 0);
        });
    }

    #[test]
    fn a_deadlock_is_broken_exactly_once() {
        model(3, || {
            let manager = Arc::new(LockManager::new());
            let run = |transaction: TransactionId, own: &'static str, wanted: &'static str| {
                let manager = Arc::clone(&manager);
                let slot = Arc::new(WaitSlot::default());
                manager.acquire(transaction, &slot, &key(own), LockMode::Exclusive, forever()).unwrap();
                thread::spawn(move || {
                    let outcome = manager.acquire(transaction, &slot, &key(wanted), LockMode::Exclusive, forever());
                    // Whatever happened, the transaction ends and lets its locks go, as a
                    // rollback or a commit does.
                    if outcome.is_ok() {
                        manager.release(transaction, &key(wanted));
                    }
                    manager.release(transaction, &key(own));
                    outcome.is_err()
                })
            };
            let old = run(1, "a", "b");
            let young = run(2, "b", "a");
            let old_failed = old.join().unwrap();
            let young_failed = young.join().unwrap();
            // Both waiting at once is a deadlock, broken by failing the youngest; if one got
            // its lock before the other asked, nobody fails. Never both.
            assert!(!old_failed, "the older transaction was chosen over the younger one");
            let deadlocks = manager.counters.deadlocks.load(Ordering::Relaxed);
            assert_eq!(deadlocks, u64::from(young_failed));
            assert_eq!(manager.lock_count(), 0);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;

    fn key(name: &str) -> LockKey {
        (0, name.as_bytes().to_vec())
    }

    fn forever() -> WaitPolicy {
        WaitPolicy { timeout: None, detect_deadlocks: true }
    }

    fn slot() -> Arc<WaitSlot> {
        Arc::new(WaitSlot::default())
    }

    #[test]
    fn shared_locks_share_and_exclusive_excludes() {
        let manager = LockManager::new();
        let (a, b) = (slot(), slot());
        assert_eq!(manager.acquire(1, &a, &key("k"), LockMode::Shared, forever()).unwrap(), Granted::New);
        assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Shared, forever()).unwrap(), Granted::New);
        let no_wait = WaitPolicy { timeout: Some(Duration::ZERO), detect_deadlocks: true };
        assert!(matches!(manager.acquire(2, &b, &key("k"), LockMode::Exclusive, no_wait), Err(Error::LockTimeout(_))));
        // The failed upgrade left the shared lock in place.
        assert_eq!(manager.held_mode(2, &key("k")), Some(LockMode::Shared));
        manager.release(1, &key("k"));
        assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Exclusive, no_wait).unwrap(), Granted::Upgraded);
        assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Shared, no_wait).unwrap(), Granted::AlreadyHeld);
        assert_eq!(manager.lock_count(), 1);
        manager.release(2, &key("k"));
        assert_eq!(manager.lock_count(), 0);
        assert_eq!(manager.memory_bytes(), 0);
        assert!(manager.shards.iter().all(|shard| shard.locks.lock().is_empty()));
    }

    #[test]
    fn waiter_is_granted_when_holder_releases() {
        let manager = Arc::new(LockManager::new());
        manager.acquire(1, &slot(), &key("k"), LockMode::Exclusive, forever()).unwrap();
        let (sender, receiver) = mpsc::channel();
        let waiter = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || {
                let result = manager.acquire(2, &slot(), &key("k"), LockMode::Exclusive, forever());
                sender.send(()).unwrap();
                result
            })
        };
        // The waiter is queued (counted) before the holder lets go.
        while manager.counters.waits.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        assert!(receiver.try_recv().is_err(), "granted while the holder still held the lock");
        manager.release(1, &key("k"));
        assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
        assert_eq!(manager.held_mode(2, &key("k")), Some(LockMode::Exclusive));
    }

    #[test]
    fn two_way_deadlock_picks_the_youngest() {
        let manager = Arc::new(LockManager::new());
        let (old, young) = (slot(), slot());
        manager.acquire(1, &old, &key("a"), LockMode::Exclusive, forever()).unwrap();
        manager.acquire(2, &young, &key("b"), LockMode::Exclusive, forever()).unwrap();
        // The old transaction waits for b; the young one then asks for a and closes the cycle.
        let old_waiter = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || manager.acquire(1, &old, &key("b"), LockMode::Exclusive, forever()))
        };
        while manager.counters.waits.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        let young_result = manager.acquire(2, &young, &key("a"), LockMode::Exclusive, forever());
        match young_result {
            Err(Error::Deadlock(_)) => {}
            // The young one may have asked before the old one recorded its edge; then the old
            // one found the cycle, and chose the young one, which was waiting.
            other => panic!("expected the youngest to be the victim, got {other:?}"),
        }
        manager.release(2, &key("b"));
        assert_eq!(old_waiter.join().unwrap().unwrap(), Granted::New);
        assert_eq!(manager.counters.deadlocks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn victim_waiting_elsewhere_is_woken() {
        // The young transaction waits first; the old one closes the cycle, and the young one,
        // asleep, must be woken and fail.
        let manager = Arc::new(LockManager::new());
        let (old, young) = (slot(), slot());
        manager.acquire(1, &old, &key("a"), LockMode::Exclusive, forever()).unwrap();
        manager.acquire(2, &young, &key("b"), LockMode::Exclusive, forever()).unwrap();
        let young_waiter = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || manager.acquire(2, &young, &key("a"), LockMode::Exclusive, forever()))
        };
        while manager.counters.waits.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        let old_waiter = {
            let manager = Arc::clone(&manager);
            let old = Arc::clone(&old);
            thread::spawn(move || manager.acquire(1, &old, &key("b"), LockMode::Exclusive, forever()))
        };
        assert!(matches!(young_waiter.join().unwrap(), Err(Error::Deadlock(_))));
        manager.release(2, &key("b"));
        assert_eq!(old_waiter.join().unwrap().unwrap(), Granted::New);
    }

    #[test]
    fn queue_is_first_come_first_served() {
        // A shared request behind a queued exclusive one waits, so readers cannot starve a
        // writer.
        let manager = Arc::new(LockManager::new());
        manager.acquire(1, &slot(), &key("k"), LockMode::Shared, forever()).unwrap();
        let writer = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || manager.acquire(2, &slot(), &key("k"), LockMode::Exclusive, forever()))
        };
        while manager.counters.waits.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        let no_wait = WaitPolicy { timeout: Some(Duration::ZERO), detect_deadlocks: true };
        assert!(matches!(
            manager.acquire(3, &slot(), &key("k"), LockMode::Shared, no_wait),
            Err(Error::LockTimeout(_))
        ));
        manager.release(1, &key("k"));
        assert_eq!(writer.join().unwrap().unwrap(), Granted::New);
    }

    #[test]
    fn cycle_search_finds_long_cycles_only() {
        let mut graph = WaitForGraph::default();
        let slot = slot();
        for (from, to) in [(1, 2), (2, 3), (3, 4), (4, 2)] {
            graph.edges.insert(from, (vec![to], Arc::clone(&slot)));
        }
        // 1 reaches a cycle but is not on it.
        assert_eq!(graph.cycle_through(1), None);
        let mut cycle = graph.cycle_through(2).unwrap();
        cycle.sort_unstable();
        assert_eq!(cycle, vec![2, 3, 4]);
    }
}
