//! The lock manager of pessimistic transactions: shared and exclusive locks on (column family,
//! key), FIFO wait queues, lock-wait timeouts, deadlock detection, and lock escalation from row
//! locks to one lock on a whole column family.
//!
//! Locks live in sharded hash tables (a key's shard is chosen by its hash), each shard behind
//! its own mutex, so transactions that lock different keys rarely meet. A lock has holders (one
//! exclusive holder, or any number of shared ones) and a queue of waiters. A request is granted
//! when it is compatible with every other holder and with every waiter queued ahead of it, so
//! waiters are served first come, first served and a stream of shared requests cannot starve an
//! exclusive one. Two exceptions: an upgrade (a shared holder asking for exclusive) goes to the
//! front of the queue, since it already holds the lock the others wait for; and an exclusive
//! request that finds the lock free takes it even when waiters are queued (they were woken by
//! the release and have not run yet). Under snapshot isolation the oldest waiter of a hot key
//! has most likely seen its holder write the key and would only fail with a conflict; a
//! newcomer's snapshot is newer. RocksDB's lock manager lets newcomers in the same way.
//! Measured (benchtool, pessimistic zipfian, 8 threads): 25,000 committed transactions per
//! second with 30 % aborts strictly first come, first served; 34,000 to 41,000 with 21 to 23 %
//! this way. An exclusive waiter can thus be passed by exclusive newcomers; its lock timeout
//! bounds that.
//!
//! Waiting: each transaction has one [`WaitSlot`] (a counter, a mutex and a condition
//! variable). A waiter reads its slot's counter, then checks under the shard mutex whether it
//! may go on; if not, it spins a little, yielding its core now and then, and then sleeps until
//! the counter moves or its deadline passes. Whoever changes a lock (a release, a waiter
//! leaving) bumps the counters of that lock's waiters, so no wake-up is lost: any change after
//! the check moves the counter the waiter compares against.
//!
//! Deadlocks: before it sleeps, a waiter records in the wait-for graph which transactions it
//! waits for (the other holders it conflicts with and the waiters queued ahead of it) and
//! searches the graph for a path back to itself. The waiter whose wait would close a cycle is
//! the victim: it gives up at once with [`Error::Deadlock`] and takes its edges out of the graph
//! in the same critical section, so the cycle is gone before anyone else looks, and no other
//! member of it can fail for it too. Every cycle is closed by some waiter's request, so every
//! cycle is found. Choosing the requester (as RocksDB does) rather than, say, the youngest
//! member keeps a thread hand-off off the path that breaks the deadlock (a victim asleep in
//! another queue would have to be woken and scheduled before its locks go) and needs no victim
//! marks. Throughput is the same either way within this machine's noise (benchtool,
//! pessimistic zipfian, 8 threads, 7 interleaved rounds: medians 39,900 and 39,100 committed
//! transactions per second).
//!
//! Escalation: a transaction with many row locks in one column family may trade them for one
//! exclusive lock on the whole family ([`LockManager::escalate`]), which bounds the memory of a
//! huge transaction. Each shard keeps, per column family, the number of holder and waiter
//! entries of its row locks in that family (its claims), the family's owner while one
//! transaction holds it whole (a mark set and removed in every shard at once), and the
//! transactions waiting for that owner on keys of this shard. Escalation takes every shard
//! mutex (in index order) and succeeds only if the claims of all shards plus the waiters for the
//! family add up to the escalating transaction's own row locks there, that is, if nobody else
//! holds or waits for anything in the family; it then marks the family in every shard, lets the
//! mutexes go, and only then releases its row locks there, so its keys stay locked throughout.
//! A refusal changes nothing (the caller tries again later). A request looks at its shard's mark
//! before it touches a row lock: the owner's own requests are granted at once, with no row lock;
//! anyone else's (shared or exclusive) waits for the owner, exactly like a row-lock wait (the
//! same slot, deadline and deadlock detection; its wait-for edge goes to the owner), registered in its
//! key's shard; the owner's release removes the marks under every shard mutex and bumps every
//! registered waiter. Race freedom rests on one mutex per decision: a row grant or queueing and
//! its claim happen under its shard's mutex, in the same critical section as the look at the
//! mark, and escalation holds every shard mutex while it sums the claims and sets the marks. So a
//! grant is ordered either before the escalation (its claim is counted: refused) or after it
//! (it sees the mark: it waits); there is no third order.
//!
//! Concurrency contract: every method may be called from any thread; one transaction calls
//! them from one thread at a time. Lock order: a transaction's state mutex (its caller holds
//! it through [`LockManager::record_new_row_lock`], which may escalate), then shard mutexes
//! (one, or all of them in index order, as escalation and the release of a column family do;
//! never a second one otherwise), then the registry of escalated families, the wait-for graph's
//! mutex, and last wait slots' mutexes (leaves: nothing is taken while one is held).
//!
//! Invariants: a lock's holders are compatible (at most one exclusive holder, and then no
//! other); a transaction appears at most once among a lock's holders and at most once among
//! its waiters; an empty lock (no holders, no waiters) is removed from its shard, and so is a
//! shard's record of a column family that has no claims, owner or waiters. A column family held
//! whole is marked, with one owner, in every shard or in none; while it is marked no other
//! transaction holds or waits for a row lock in it, and once `escalate` returned neither does
//! its owner (I31).

use crate::hash::{FastHashMap as HashMap, FastHashSet as HashSet};
use std::collections::VecDeque;
// The counters are statistics, not synchronisation: plain `std` atomics even under loom.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// Modelled with loom (`loom_models` below): the shards, the wait-for graph, the registry of
// escalated families and the wait slots.
use crate::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};

/// Identifies a transaction: ids grow with the order transactions began.
pub(crate) type TransactionId = u64;

/// Number of lock table shards. Two under loom: escalation takes every shard mutex, and the
/// models must be able to explore the interleavings of all of them.
#[cfg(not(loom))]
const SHARD_COUNT: usize = 64;
#[cfg(loom)]
const SHARD_COUNT: usize = 2;

/// Approximate memory of one lock entry besides its key: the hash table slot, the holder and
/// waiter vectors. Used for the memory the lock manager reports.
const LOCK_OVERHEAD_BYTES: usize = 96;

/// Approximate memory of a column-family lock: its record in every shard.
const COLUMN_FAMILY_LOCK_BYTES: usize = SHARD_COUNT * 64;

/// A shard's lock table at least this large (in slots) is shrunk when a release leaves it less
/// than a quarter full: a huge transaction's locks should give their memory back when they go,
/// and small tables are not worth rehashing.
const SHRINK_FROM_CAPACITY: usize = 1024;

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

    fn name(self) -> &'static str {
        match self {
            LockMode::Shared => "shared",
            LockMode::Exclusive => "exclusive",
        }
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
    /// It holds the key's column family whole (lock escalation): no row lock was taken, and
    /// there is nothing to release.
    Covered,
}

/// Looks at its slot a waiter takes before it sleeps (a few tens of microseconds at most):
/// a holder of a hot key usually commits within that, and a waiter woken from sleep costs two
/// context switches. Benchtool, pessimistic transactions on Zipfian keys: 64,000-65,000
/// committed a second from 8 threads against 43,800-47,000 with no spin, 48,500-48,700 against
/// 33,000-33,200 from 16; uniform keys, which rarely wait, level. 2,048 looks gained 2-4 % more
/// for 5 % more CPU. Under loom, one look.
const WAIT_SPIN_ITERATIONS: usize = if cfg!(loom) { 1 } else { 512 };

/// A spinning waiter yields its core once every this many looks, so that a holder waiting for
/// a core (8 threads on 2 cores) can run and release the lock.
const WAIT_SPIN_ITERATIONS_PER_YIELD: usize = 16;

/// After this many slow yields (other threads had work for the core) the waiter sleeps instead
/// (see `sync::spin_until`).
const WAIT_MAX_SLOW_YIELDS: usize = 2;

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

    /// Returns once the counter differs from `seen` or `deadline` passed: after a short spin
    /// ([`WAIT_SPIN_ITERATIONS`], which does not look at the deadline), asleep. (Loom models
    /// no clock: there every wait is without deadline, and the models use no timeouts.)
    fn wait(&self, seen: u64, deadline: Option<Instant>) {
        if crate::sync::spin_until(WAIT_SPIN_ITERATIONS, WAIT_SPIN_ITERATIONS_PER_YIELD, WAIT_MAX_SLOW_YIELDS, || {
            self.current() != seen
        }) {
            return;
        }
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

/// What one shard knows of one column family.
#[derive(Default)]
struct ShardFamily {
    /// Holder and waiter entries of this shard's row locks in the family (a shared holder
    /// queued for its upgrade counts twice).
    row_claims: usize,
    /// The transaction that holds the family whole (the same in every shard).
    owner: Option<TransactionId>,
    /// Transactions waiting, for keys of this shard, until the family is let go. They leave
    /// the list themselves when they wake (and still count against an escalation until then,
    /// so that a new owner cannot slip in ahead of them).
    waiters: Vec<(TransactionId, Arc<WaitSlot>)>,
}

/// A shard's records of the column families it has row locks, waiters or marks of.
#[derive(Default)]
struct ShardFamilies(HashMap<u32, ShardFamily>);

impl ShardFamilies {
    fn owner(&self, column_family: u32) -> Option<TransactionId> {
        self.0.get(&column_family).and_then(|family| family.owner)
    }

    fn add_claim(&mut self, column_family: u32) {
        self.0.entry(column_family).or_default().row_claims += 1;
    }

    fn drop_claim(&mut self, column_family: u32) {
        match self.0.get_mut(&column_family) {
            Some(family) if family.row_claims > 0 => family.row_claims -= 1,
            _ => debug_assert!(false, "a row lock's holder or waiter is claimed in its shard"),
        }
        self.settle(column_family);
    }

    fn add_waiter(&mut self, column_family: u32, transaction: TransactionId, slot: &Arc<WaitSlot>) {
        self.0.entry(column_family).or_default().waiters.push((transaction, Arc::clone(slot)));
    }

    fn remove_waiter(&mut self, column_family: u32, transaction: TransactionId) {
        if let Some(family) = self.0.get_mut(&column_family) {
            family.waiters.retain(|(waiter, _)| *waiter != transaction);
        }
        self.settle(column_family);
    }

    /// Forgets a family the shard no longer has anything of.
    fn settle(&mut self, column_family: u32) {
        let unused = self
            .0
            .get(&column_family)
            .is_some_and(|family| family.row_claims == 0 && family.owner.is_none() && family.waiters.is_empty());
        if unused {
            self.0.remove(&column_family);
        }
    }
}

/// A shard's row locks and column-family records, under the shard's mutex.
#[derive(Default)]
struct ShardTable {
    locks: HashMap<LockKey, Lock>,
    families: ShardFamilies,
}

/// What became of a row-lock request that did not wait.
enum RowRequest {
    Granted(Granted),
    /// Queued: the caller waits in the queue.
    Queued,
}

impl ShardTable {
    /// Asks for the row lock on `key` (whose family nobody holds whole): grants it when it can,
    /// else queues the request (an upgrade first, since it holds the lock the others wait for).
    /// A new holder or waiter is claimed in the family.
    fn request_row(
        &mut self,
        transaction: TransactionId,
        slot: &Arc<WaitSlot>,
        key: &LockKey,
        mode: LockMode,
    ) -> RowRequest {
        let lock = self.locks.entry(key.clone()).or_default();
        let held = lock.held_mode(transaction);
        if held.is_some_and(|held| held >= mode) {
            return RowRequest::Granted(Granted::AlreadyHeld);
        }
        // A free lock goes to an exclusive newcomer even when waiters are queued (they were
        // woken by its release and have not run yet): under snapshot isolation the oldest
        // waiter of a hot key has most likely seen its holder write it and would only fail with
        // a conflict, while a newcomer's snapshot is newer. Shared requests never pass waiters,
        // so a stream of them cannot starve an exclusive one.
        let barging = mode == LockMode::Exclusive && lock.holders.is_empty();
        if (lock.waiters.is_empty() || barging) && lock.grantable(transaction, mode, 0) {
            let granted = lock.grant(transaction, mode);
            if granted == Granted::New {
                self.families.add_claim(key.0);
            }
            return RowRequest::Granted(granted);
        }
        let waiter = Waiter { transaction, mode, slot: Arc::clone(slot) };
        if held.is_some() {
            lock.waiters.push_front(waiter);
        } else {
            lock.waiters.push_back(waiter);
        }
        self.families.add_claim(key.0);
        RowRequest::Queued
    }

    /// Removes `transaction` from the holders of `key` and wakes the lock's waiters. False if
    /// it did not hold it.
    fn release_row(&mut self, transaction: TransactionId, key: &LockKey) -> bool {
        let Some(lock) = self.locks.get_mut(key) else {
            return false;
        };
        let before = lock.holders.len();
        lock.holders.retain(|(holder, _)| *holder != transaction);
        let released = lock.holders.len() < before;
        if released {
            self.families.drop_claim(key.0);
        }
        lock.wake_waiters();
        if lock.holders.is_empty() && lock.waiters.is_empty() {
            self.locks.remove(key);
        }
        released
    }

    /// Gives memory back after a large release (see [`SHRINK_FROM_CAPACITY`]).
    fn shrink_if_sparse(&mut self) {
        if self.locks.capacity() >= SHRINK_FROM_CAPACITY && self.locks.len() * 4 < self.locks.capacity() {
            self.locks.shrink_to(self.locks.len() * 2);
        }
    }
}

struct Shard {
    table: Mutex<ShardTable>,
}

/// Who waits for whom: each waiting transaction's blockers, as it last recorded them.
#[derive(Default)]
struct WaitForGraph {
    edges: HashMap<TransactionId, Vec<TransactionId>>,
}

impl WaitForGraph {
    /// A cycle through `start`, if its recorded edges lead back to it: the transactions on it.
    fn cycle_through(&self, start: TransactionId) -> Option<Vec<TransactionId>> {
        // Depth-first search keeping the path, so the cycle's members are known when found.
        let mut path: Vec<(TransactionId, usize)> = vec![(start, 0)];
        let mut visited: HashSet<TransactionId> = HashSet::default();
        visited.insert(start);
        while let Some(&mut (node, ref mut next_edge)) = path.last_mut() {
            let edges = self.edges.get(&node).map(Vec::as_slice).unwrap_or(&[]);
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

/// What a waiter waits for, for its error message.
#[derive(Clone, Copy)]
enum WaitingFor {
    Row(LockMode),
    ColumnFamily { column_family: u32, owner: TransactionId },
}

/// Counters the lock manager keeps for `Db::stats`. A deadlock is counted when its victim
/// fails.
#[derive(Debug, Default)]
pub(crate) struct LockCounters {
    pub(crate) waits: AtomicU64,
    pub(crate) wait_micros: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    /// Escalations that took a column family whole.
    pub(crate) escalations: AtomicU64,
    /// Escalations refused because another transaction held or waited for a lock there.
    pub(crate) escalations_refused: AtomicU64,
    /// Requests that waited for another transaction's column-family lock (also in `waits`).
    pub(crate) column_family_waits: AtomicU64,
}

/// The lock tables; see the module documentation.
pub(crate) struct LockManager {
    shards: Box<[Shard]>,
    graph: Mutex<WaitForGraph>,
    /// The column families each transaction holds whole, for their release (the handle of a
    /// prepared transaction is gone by then, but its id lives on in the prepared registry).
    escalated: Mutex<HashMap<TransactionId, Vec<u32>>>,
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

/// A transaction's account of its locks in one column family.
#[derive(Debug, Default)]
struct FamilyAccount {
    /// Row locks it holds there.
    row_locks: usize,
    /// It holds the family whole: its requests there are covered.
    whole: bool,
    /// The row-lock count from which it tries to escalate again after a refusal.
    retry_at_row_locks: usize,
}

/// A transaction's account of its locks per column family, kept in its state next to the set
/// of its row locks: how many row locks it holds in each family, which families it holds whole,
/// and when it tries to escalate next. Maintained by [`LockManager::record_new_row_lock`].
#[derive(Debug, Default)]
pub(crate) struct ColumnFamilyLocks {
    families: HashMap<u32, FamilyAccount>,
}

impl ColumnFamilyLocks {
    /// True when the transaction holds `column_family` whole.
    pub(crate) fn holds_whole(&self, column_family: u32) -> bool {
        self.families.get(&column_family).is_some_and(|family| family.whole)
    }

    /// True when it holds some column family whole (its end must release it).
    pub(crate) fn holds_any_whole(&self) -> bool {
        self.families.values().any(|family| family.whole)
    }
}

impl Default for LockManager {
    fn default() -> LockManager {
        LockManager::new()
    }
}

impl LockManager {
    pub(crate) fn new() -> LockManager {
        let shards = (0..SHARD_COUNT).map(|_| Shard { table: Mutex::new(ShardTable::default()) }).collect();
        LockManager {
            shards,
            graph: Mutex::new(WaitForGraph::default()),
            escalated: Mutex::new(HashMap::default()),
            lock_count: AtomicUsize::new(0),
            memory_bytes: AtomicUsize::new(0),
            counters: LockCounters::default(),
        }
    }

    fn shard_index(&self, key: &LockKey) -> usize {
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&key.1, u64::from(key.0));
        (hash % SHARD_COUNT as u64) as usize
    }

    fn shard(&self, key: &LockKey) -> &Shard {
        &self.shards[self.shard_index(key)]
    }

    /// Locks held now, by all transactions (a column family held whole counts as one).
    pub(crate) fn lock_count(&self) -> usize {
        self.lock_count.load(Ordering::Relaxed)
    }

    /// Approximate memory of the lock tables.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes.load(Ordering::Relaxed)
    }

    /// Takes `key` in `mode` for `transaction`, waiting as `policy` allows (for the key's
    /// holders, or for the transaction holding its column family whole). On
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
        let mut table = shard.table.lock();
        // The mark first: nothing of a family held whole may be granted to anyone else, and its
        // owner needs no row lock.
        if let Some(owner) = table.families.owner(key.0) {
            if owner == transaction {
                return Ok(Granted::Covered);
            }
            table.families.add_waiter(key.0, transaction, slot);
            drop(table);
            self.counters.column_family_waits.fetch_add(1, Ordering::Relaxed);
            return self
                .timed_wait(policy, |deadline| self.wait_for_family(transaction, slot, key, mode, policy, deadline));
        }
        match table.request_row(transaction, slot, key, mode) {
            RowRequest::Granted(granted) => {
                if granted == Granted::New {
                    self.note_new_lock(key);
                }
                Ok(granted)
            }
            RowRequest::Queued => {
                drop(table);
                self.timed_wait(policy, |deadline| self.wait_in_queue(transaction, slot, key, mode, policy, deadline))
            }
        }
    }

    /// Runs a wait with the deadline `policy` sets from now, counting it and its time.
    fn timed_wait(&self, policy: WaitPolicy, wait: impl FnOnce(Option<Instant>) -> Result<Granted>) -> Result<Granted> {
        self.counters.waits.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let deadline = policy.timeout.map(|timeout| started + timeout);
        let outcome = wait(deadline);
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
                let mut table = shard.table.lock();
                // A queued waiter is claimed, so nobody can have escalated its family (I31).
                debug_assert!(table.families.owner(key.0).is_none(), "a row waiter's column family was escalated");
                let table = &mut *table;
                let Some(lock) = table.locks.get_mut(key) else {
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
                    // A new holder takes over the waiter's claim; an upgrade's holder entry was
                    // claimed already.
                    if granted == Granted::Upgraded {
                        table.families.drop_claim(key.0);
                    }
                    if granted == Granted::New {
                        self.note_new_lock(key);
                    }
                    self.end_wait(transaction);
                    return Ok(granted);
                }
                let failure = self.wait_failure(transaction, policy, deadline, WaitingFor::Row(mode), || {
                    lock.blockers(transaction, mode, position)
                });
                if let Some(error) = failure {
                    lock.waiters.remove(position);
                    lock.wake_waiters();
                    if lock.holders.is_empty() && lock.waiters.is_empty() {
                        table.locks.remove(key);
                    }
                    table.families.drop_claim(key.0);
                    self.end_wait(transaction);
                    return Err(error);
                }
            }
            slot.wait(seen, deadline);
        }
    }

    /// Waits until nobody else holds the column family of `key` whole, then asks for the row
    /// lock (and waits in its queue if it must), within the same deadline. The caller registered
    /// the transaction among the family's waiters in the key's shard.
    fn wait_for_family(
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
            // Read the counter before checking, so that a release after the check wakes us.
            let seen = slot.current();
            {
                let mut table = shard.table.lock();
                let Some(owner) = table.families.owner(key.0) else {
                    // Let go: leave the family's waiters and ask for the row lock in this same
                    // critical section, as a fresh request would.
                    table.families.remove_waiter(key.0, transaction);
                    self.end_wait(transaction);
                    return match table.request_row(transaction, slot, key, mode) {
                        RowRequest::Granted(granted) => {
                            if granted == Granted::New {
                                self.note_new_lock(key);
                            }
                            Ok(granted)
                        }
                        RowRequest::Queued => {
                            drop(table);
                            self.wait_in_queue(transaction, slot, key, mode, policy, deadline)
                        }
                    };
                };
                debug_assert_ne!(owner, transaction, "a transaction never waits for its own column-family lock");
                let waiting_for = WaitingFor::ColumnFamily { column_family: key.0, owner };
                if let Some(error) = self.wait_failure(transaction, policy, deadline, waiting_for, || vec![owner]) {
                    table.families.remove_waiter(key.0, transaction);
                    drop(table);
                    self.end_wait(transaction);
                    return Err(error);
                }
            }
            slot.wait(seen, deadline);
        }
    }

    /// Why a waiter must give up now, if it must: its deadline passed, or (with detection)
    /// waiting for `blockers` would close a deadlock cycle. Called under the mutex of the shard
    /// it waits in.
    fn wait_failure(
        &self,
        transaction: TransactionId,
        policy: WaitPolicy,
        deadline: Option<Instant>,
        waiting_for: WaitingFor,
        blockers: impl FnOnce() -> Vec<TransactionId>,
    ) -> Option<Error> {
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            self.counters.timeouts.fetch_add(1, Ordering::Relaxed);
            let waited = policy.timeout.unwrap_or_default();
            return Some(Error::LockTimeout(match waiting_for {
                WaitingFor::Row(mode) => {
                    format!("transaction {transaction} waited {waited:?} for a {} lock", mode.name())
                }
                WaitingFor::ColumnFamily { column_family, owner } => format!(
                    "transaction {transaction} waited {waited:?} for column family {column_family}, which transaction \
                     {owner} holds whole (lock escalation)"
                ),
            }));
        }
        if policy.detect_deadlocks {
            return self.detect_deadlock(transaction, blockers());
        }
        None
    }

    /// Forgets a wait that ended: its wait-for edges.
    fn end_wait(&self, transaction: TransactionId) {
        self.graph.lock().edges.remove(&transaction);
    }

    /// Records what `transaction` waits for and looks for a cycle through it. Returns the
    /// error for the waiter when its wait would close one: it is the victim (see the module
    /// documentation), and its edges leave the graph before the graph's mutex does.
    fn detect_deadlock(&self, transaction: TransactionId, blockers: Vec<TransactionId>) -> Option<Error> {
        let mut graph = self.graph.lock();
        graph.edges.insert(transaction, blockers);
        let cycle = graph.cycle_through(transaction)?;
        graph.edges.remove(&transaction);
        self.counters.deadlocks.fetch_add(1, Ordering::Relaxed);
        Some(Error::Deadlock(format!(
            "transaction {transaction} would close a deadlock cycle of {} transactions ({cycle:?}) by waiting, \
             and is its victim",
            cycle.len()
        )))
    }

    fn note_new_lock(&self, key: &LockKey) {
        self.lock_count.fetch_add(1, Ordering::Relaxed);
        self.memory_bytes.fetch_add(key.1.len() + LOCK_OVERHEAD_BYTES, Ordering::Relaxed);
    }

    fn note_released_lock(&self, key: &LockKey) {
        self.lock_count.fetch_sub(1, Ordering::Relaxed);
        self.memory_bytes.fetch_sub(key.1.len() + LOCK_OVERHEAD_BYTES, Ordering::Relaxed);
    }

    /// Releases `transaction`'s lock on `key` (which it holds) and wakes the lock's waiters.
    pub(crate) fn release(&self, transaction: TransactionId, key: &LockKey) {
        let released = self.shard(key).table.lock().release_row(transaction, key);
        debug_assert!(released, "released a lock that is not held");
        if released {
            self.note_released_lock(key);
        }
    }

    /// Releases `transaction`'s row locks on `keys` (which it holds), taking each shard's mutex
    /// once for all its keys, and shrinks shard tables that the release left mostly empty.
    pub(crate) fn release_all(&self, transaction: TransactionId, keys: impl IntoIterator<Item = LockKey>) {
        let mut by_shard: Vec<(usize, LockKey)> = keys.into_iter().map(|key| (self.shard_index(&key), key)).collect();
        by_shard.sort_unstable_by_key(|(index, _)| *index);
        for group in by_shard.chunk_by(|first, second| first.0 == second.0) {
            let mut table = self.shards[group[0].0].table.lock();
            for (_, key) in group {
                let released = table.release_row(transaction, key);
                debug_assert!(released, "released a lock that is not held");
                if released {
                    self.note_released_lock(key);
                }
            }
            table.shrink_if_sparse();
        }
    }

    /// Records `key`, just granted to `transaction` as a new row lock, in the transaction's own
    /// accounts (`rows`, its row locks, and `families`), and escalates when that makes it due:
    /// past `threshold` row locks in the key's column family, and after a refusal once
    /// `threshold` more were taken there. On success the family's row locks leave `rows` (and
    /// the lock tables) and its later requests there are covered. The caller holds the
    /// transaction's state mutex, so that nothing else reads or releases `rows` meanwhile.
    pub(crate) fn record_new_row_lock(
        &self,
        transaction: TransactionId,
        key: LockKey,
        threshold: Option<usize>,
        rows: &mut HashSet<LockKey>,
        families: &mut ColumnFamilyLocks,
    ) {
        let column_family = key.0;
        let inserted = rows.insert(key);
        debug_assert!(inserted, "a new row lock is not in the transaction's set yet");
        let family = families.families.entry(column_family).or_default();
        family.row_locks += 1;
        let Some(threshold) = threshold else {
            return;
        };
        if family.row_locks <= threshold || family.row_locks < family.retry_at_row_locks {
            return;
        }
        let row_locks = family.row_locks;
        let escalated = self.escalate(transaction, column_family, row_locks, || {
            // The set is rebuilt rather than emptied in place: `retain` keeps the capacity, and
            // giving the memory back is the point.
            let (taken, kept): (HashSet<LockKey>, HashSet<LockKey>) =
                std::mem::take(rows).into_iter().partition(|(key_family, _)| *key_family == column_family);
            *rows = kept;
            taken
        });
        if escalated {
            family.whole = true;
            family.row_locks = 0;
        } else {
            family.retry_at_row_locks = row_locks + threshold.max(1);
        }
    }

    /// Takes `column_family` whole for `transaction`, which holds `row_locks` row locks there,
    /// if nobody else holds or waits for any lock in it; then releases the row locks `rows`
    /// returns (the transaction's own in the family, now covered). Returns whether it did; a
    /// refusal changes nothing. See the module documentation for why no grant can race it.
    pub(crate) fn escalate<Rows: IntoIterator<Item = LockKey>>(
        &self,
        transaction: TransactionId,
        column_family: u32,
        row_locks: usize,
        rows: impl FnOnce() -> Rows,
    ) -> bool {
        {
            // Every shard mutex, in index order (the only other place that takes more than one,
            // `release_column_families`, takes them in the same order).
            let mut tables: Vec<_> = self.shards.iter().map(|shard| shard.table.lock()).collect();
            let mut claims = 0;
            for table in &tables {
                if let Some(family) = table.families.0.get(&column_family) {
                    if family.owner.is_some() {
                        // Held whole already: by another transaction that cannot be while this
                        // one holds row locks there (I31), and by this one its account would
                        // have said.
                        debug_assert!(false, "escalating a column family that is held whole");
                        return false;
                    }
                    claims += family.row_claims + family.waiters.len();
                }
            }
            if claims != row_locks {
                debug_assert!(claims > row_locks, "a transaction's own row locks are all claimed");
                self.counters.escalations_refused.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            for table in &mut tables {
                table.families.0.entry(column_family).or_default().owner = Some(transaction);
            }
            self.escalated.lock().entry(transaction).or_default().push(column_family);
        }
        self.lock_count.fetch_add(1, Ordering::Relaxed);
        self.memory_bytes.fetch_add(COLUMN_FAMILY_LOCK_BYTES, Ordering::Relaxed);
        self.counters.escalations.fetch_add(1, Ordering::Relaxed);
        // Only now, with the family marked, do the row locks go: their keys are never free.
        let mut released = 0;
        self.release_all(
            transaction,
            rows().into_iter().inspect(|key| {
                debug_assert_eq!(key.0, column_family, "escalation releases row locks of its own family only");
                released += 1;
            }),
        );
        debug_assert_eq!(released, row_locks, "escalation releases exactly the row locks it counted");
        true
    }

    /// Releases the column families `transaction` holds whole and wakes whoever waits for
    /// them. Its row locks are released apart ([`LockManager::release_all`]).
    pub(crate) fn release_column_families(&self, transaction: TransactionId) {
        let Some(families) = self.escalated.lock().remove(&transaction) else {
            return;
        };
        for column_family in families {
            // Every shard mutex, in index order, so that the mark is in every shard or in none.
            let mut tables: Vec<_> = self.shards.iter().map(|shard| shard.table.lock()).collect();
            for table in &mut tables {
                match table.families.0.get_mut(&column_family) {
                    Some(family) if family.owner == Some(transaction) => {
                        family.owner = None;
                        for (_, slot) in &family.waiters {
                            slot.bump();
                        }
                    }
                    _ => debug_assert!(false, "a column family held whole is marked in every shard"),
                }
                table.families.settle(column_family);
            }
            drop(tables);
            self.lock_count.fetch_sub(1, Ordering::Relaxed);
            self.memory_bytes.fetch_sub(COLUMN_FAMILY_LOCK_BYTES, Ordering::Relaxed);
        }
    }

    /// The mode in which `transaction` holds `key`, if it does (tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn held_mode(&self, transaction: TransactionId, key: &LockKey) -> Option<LockMode> {
        self.shard(key).table.lock().locks.get(key).and_then(|lock| lock.held_mode(transaction))
    }

    /// True when no lock, waiter or column-family record is left in any shard (tests).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| {
            let table = shard.table.lock();
            table.locks.is_empty() && table.families.0.is_empty()
        }) && self.escalated.lock().is_empty()
    }
}

#[cfg(all(test, loom))]
mod loom_models;

#[cfg(all(test, not(loom)))]
mod tests;
