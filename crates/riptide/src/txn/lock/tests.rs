//! Unit tests of the lock manager.

use super::*;
use std::sync::mpsc;
use std::thread;

fn key(name: &str) -> LockKey {
    (0, name.as_bytes().to_vec())
}

fn key_in(column_family: u32, name: &str) -> LockKey {
    (column_family, name.as_bytes().to_vec())
}

fn forever() -> WaitPolicy {
    WaitPolicy { timeout: None, detect_deadlocks: true }
}

fn no_wait() -> WaitPolicy {
    WaitPolicy { timeout: Some(Duration::ZERO), detect_deadlocks: true }
}

fn slot() -> Arc<WaitSlot> {
    Arc::new(WaitSlot::default())
}

/// Waits until `count` lock requests have had to wait (each waiter is counted once it is
/// queued or registered, before it sleeps).
fn wait_for_waits(manager: &LockManager, count: u64) {
    while manager.counters.waits.load(Ordering::Relaxed) < count {
        thread::yield_now();
    }
}

/// Waits until `transaction` has recorded whom it waits for in the wait-for graph: from then on,
/// a request that closes a cycle through it finds the cycle.
fn wait_for_edge(manager: &LockManager, transaction: TransactionId) {
    while !manager.graph.lock().edges.contains_key(&transaction) {
        thread::yield_now();
    }
}

/// A transaction's own accounts, as its state keeps them.
#[derive(Default)]
struct Accounts {
    rows: HashSet<LockKey>,
    families: ColumnFamilyLocks,
}

impl Accounts {
    /// Locks `key` exclusively for `transaction` as `Transaction::lock_key` does.
    fn lock(&mut self, manager: &LockManager, transaction: TransactionId, key: LockKey, threshold: Option<usize>) {
        let granted = manager.acquire(transaction, &slot(), &key, LockMode::Exclusive, no_wait()).unwrap();
        if granted == Granted::New {
            manager.record_new_row_lock(transaction, key, threshold, &mut self.rows, &mut self.families);
        }
    }

    fn rows_in(&self, column_family: u32) -> usize {
        self.rows.iter().filter(|(family, _)| *family == column_family).count()
    }
}

#[test]
fn shared_locks_share_and_exclusive_excludes() {
    let manager = LockManager::new();
    let (a, b) = (slot(), slot());
    assert_eq!(manager.acquire(1, &a, &key("k"), LockMode::Shared, forever()).unwrap(), Granted::New);
    assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Shared, forever()).unwrap(), Granted::New);
    assert!(matches!(manager.acquire(2, &b, &key("k"), LockMode::Exclusive, no_wait()), Err(Error::LockTimeout(_))));
    // The failed upgrade left the shared lock in place.
    assert_eq!(manager.held_mode(2, &key("k")), Some(LockMode::Shared));
    manager.release(1, &key("k"));
    assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Exclusive, no_wait()).unwrap(), Granted::Upgraded);
    assert_eq!(manager.acquire(2, &b, &key("k"), LockMode::Shared, no_wait()).unwrap(), Granted::AlreadyHeld);
    assert_eq!(manager.lock_count(), 1);
    manager.release(2, &key("k"));
    assert_eq!(manager.lock_count(), 0);
    assert_eq!(manager.memory_bytes(), 0);
    assert!(manager.is_empty());
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
    wait_for_waits(&manager, 1);
    assert!(receiver.try_recv().is_err(), "granted while the holder still held the lock");
    manager.release(1, &key("k"));
    assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
    assert_eq!(manager.held_mode(2, &key("k")), Some(LockMode::Exclusive));
}

#[test]
fn a_deadlock_fails_the_request_that_closes_it() {
    // Either transaction may close the cycle; the one that does fails at once, whatever its
    // age, and the other one gets its lock once the victim lets its own go.
    for young_closes in [true, false] {
        let manager = Arc::new(LockManager::new());
        let (old, young) = (slot(), slot());
        manager.acquire(1, &old, &key("a"), LockMode::Exclusive, forever()).unwrap();
        manager.acquire(2, &young, &key("b"), LockMode::Exclusive, forever()).unwrap();
        let (waiter, waiter_key, closer, closer_slot, closer_key, closer_held) =
            if young_closes { (1, "b", 2, &young, "a", "b") } else { (2, "a", 1, &old, "b", "a") };
        let waiter_slot = if young_closes { Arc::clone(&old) } else { Arc::clone(&young) };
        let waiting = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || {
                manager.acquire(waiter, &waiter_slot, &key(waiter_key), LockMode::Exclusive, forever())
            })
        };
        wait_for_edge(&manager, waiter);
        let closed = manager.acquire(closer, closer_slot, &key(closer_key), LockMode::Exclusive, forever());
        assert!(matches!(closed, Err(Error::Deadlock(_))), "young closes: {young_closes}: {closed:?}");
        // The victim's edges left the graph with its failure.
        assert!(!manager.graph.lock().edges.contains_key(&closer));
        manager.release(closer, &key(closer_held));
        assert_eq!(waiting.join().unwrap().unwrap(), Granted::New);
        assert_eq!(manager.counters.deadlocks.load(Ordering::Relaxed), 1);
    }
}

#[test]
fn a_woken_member_of_a_broken_cycle_does_not_fail_too() {
    // The victim of a deadlock fails at once but lets its locks go only when its transaction
    // rolls back, a moment later. A member of the broken cycle woken in between (here by a
    // spurious bump) checks the graph again and must not find the cycle a second time: the
    // victim's edges left the graph when it failed.
    let manager = Arc::new(LockManager::new());
    let (old, young) = (slot(), slot());
    manager.acquire(1, &old, &key("a"), LockMode::Exclusive, forever()).unwrap();
    manager.acquire(2, &young, &key("b"), LockMode::Exclusive, forever()).unwrap();
    let old_waiter = {
        let (manager, old) = (Arc::clone(&manager), Arc::clone(&old));
        thread::spawn(move || manager.acquire(1, &old, &key("b"), LockMode::Exclusive, forever()))
    };
    wait_for_edge(&manager, 1);
    assert!(matches!(manager.acquire(2, &young, &key("a"), LockMode::Exclusive, forever()), Err(Error::Deadlock(_))));
    let waits_seen = manager.counters.waits.load(Ordering::Relaxed);
    old.bump();
    // Give the woken waiter time to look again: it must go back to sleep, still waiting.
    thread::sleep(Duration::from_millis(20));
    assert!(!old_waiter.is_finished(), "the surviving member failed or was granted a held lock");
    assert_eq!(manager.counters.waits.load(Ordering::Relaxed), waits_seen);
    manager.release(2, &key("b"));
    assert_eq!(old_waiter.join().unwrap().unwrap(), Granted::New);
    assert_eq!(manager.counters.deadlocks.load(Ordering::Relaxed), 1);
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
    wait_for_waits(&manager, 1);
    assert!(matches!(manager.acquire(3, &slot(), &key("k"), LockMode::Shared, no_wait()), Err(Error::LockTimeout(_))));
    manager.release(1, &key("k"));
    assert_eq!(writer.join().unwrap().unwrap(), Granted::New);
}

#[test]
fn cycle_search_finds_long_cycles_only() {
    let mut graph = WaitForGraph::default();
    for (from, to) in [(1, 2), (2, 3), (3, 4), (4, 2)] {
        graph.edges.insert(from, vec![to]);
    }
    // 1 reaches a cycle but is not on it.
    assert_eq!(graph.cycle_through(1), None);
    let mut cycle = graph.cycle_through(2).unwrap();
    cycle.sort_unstable();
    assert_eq!(cycle, vec![2, 3, 4]);
}

#[test]
fn escalation_trades_row_locks_for_the_column_family() {
    let manager = LockManager::new();
    let mut owner = Accounts::default();
    owner.lock(&manager, 1, key_in(1, "elsewhere"), Some(5));
    for index in 0..5 {
        owner.lock(&manager, 1, key_in(0, &format!("row{index}")), Some(5));
    }
    // At the threshold: still row locks.
    assert_eq!((owner.rows_in(0), manager.lock_count()), (5, 6));
    assert!(!owner.families.holds_whole(0));
    owner.lock(&manager, 1, key_in(0, "row5"), Some(5));
    // Past it: the family whole, its row locks gone from both accounts, the other family's
    // kept.
    assert!(owner.families.holds_whole(0) && owner.families.holds_any_whole());
    assert_eq!(owner.rows_in(0), 0);
    assert_eq!(owner.rows.len(), 1);
    assert_eq!(manager.lock_count(), 2);
    assert_eq!(manager.memory_bytes(), COLUMN_FAMILY_LOCK_BYTES + LOCK_OVERHEAD_BYTES + "elsewhere".len());
    assert_eq!(manager.held_mode(1, &key_in(0, "row0")), None);
    assert_eq!(manager.counters.escalations.load(Ordering::Relaxed), 1);
    // Its own requests there are covered, in any mode, with nothing to record.
    for name in ["row0", "new"] {
        for mode in [LockMode::Shared, LockMode::Exclusive] {
            assert_eq!(manager.acquire(1, &slot(), &key_in(0, name), mode, no_wait()).unwrap(), Granted::Covered);
        }
    }
    assert_eq!(manager.lock_count(), 2);
    // Anyone else's wait for it, shared or exclusive, on old keys and new ones; the other
    // family is free.
    let other = slot();
    for (name, mode) in [("row0", LockMode::Exclusive), ("new", LockMode::Shared)] {
        let error = manager.acquire(2, &other, &key_in(0, name), mode, no_wait()).unwrap_err();
        assert!(matches!(&error, Error::LockTimeout(message) if message.contains("holds whole")), "{error}");
    }
    assert_eq!(manager.counters.column_family_waits.load(Ordering::Relaxed), 2);
    assert_eq!(manager.acquire(2, &other, &key_in(1, "free"), LockMode::Exclusive, no_wait()).unwrap(), Granted::New);
    // Let go: the others are served, and nothing is left behind.
    manager.release_column_families(1);
    manager.release_all(1, std::mem::take(&mut owner.rows));
    assert_eq!(manager.acquire(2, &other, &key_in(0, "row0"), LockMode::Exclusive, no_wait()).unwrap(), Granted::New);
    manager.release_all(2, [key_in(0, "row0"), key_in(1, "free")]);
    assert_eq!((manager.lock_count(), manager.memory_bytes()), (0, 0));
    assert!(manager.is_empty());
}

#[test]
fn escalation_is_refused_while_another_holds_a_lock_there_and_tried_again_later() {
    let manager = LockManager::new();
    let other = slot();
    manager.acquire(2, &other, &key_in(0, "theirs"), LockMode::Shared, no_wait()).unwrap();
    let mut owner = Accounts::default();
    for index in 0..4 {
        owner.lock(&manager, 1, key_in(0, &format!("row{index}")), Some(3));
    }
    // Refused at 4: the row locks stay, and stay exclusive.
    assert!(!owner.families.holds_whole(0));
    assert_eq!(owner.rows_in(0), 4);
    assert_eq!(manager.counters.escalations_refused.load(Ordering::Relaxed), 1);
    assert!(matches!(
        manager.acquire(2, &other, &key_in(0, "row0"), LockMode::Shared, no_wait()),
        Err(Error::LockTimeout(_))
    ));
    manager.release(2, &key_in(0, "theirs"));
    // Not tried again before three more row locks (at 7), then granted.
    for index in 4..6 {
        owner.lock(&manager, 1, key_in(0, &format!("row{index}")), Some(3));
    }
    assert_eq!(manager.counters.escalations_refused.load(Ordering::Relaxed), 1);
    assert_eq!((owner.rows_in(0), manager.lock_count()), (6, 6));
    owner.lock(&manager, 1, key_in(0, "row6"), Some(3));
    assert!(owner.families.holds_whole(0));
    assert_eq!((owner.rows.len(), manager.lock_count()), (0, 1));
    manager.release_column_families(1);
    assert!(manager.is_empty());
}

#[test]
fn escalation_is_refused_while_another_waits_for_a_lock_there() {
    let manager = Arc::new(LockManager::new());
    let mut owner = Accounts::default();
    owner.lock(&manager, 1, key("a"), None);
    let waiter = {
        let manager = Arc::clone(&manager);
        thread::spawn(move || manager.acquire(2, &slot(), &key("a"), LockMode::Exclusive, forever()))
    };
    wait_for_waits(&manager, 1);
    // A waiter is a claim in the family: taking it whole would leave the waiter queued on a
    // row nobody may be granted.
    assert!(!manager.escalate(1, 0, 1, || vec![key("a")]));
    assert_eq!(manager.held_mode(1, &key("a")), Some(LockMode::Exclusive));
    manager.release_all(1, std::mem::take(&mut owner.rows));
    assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
    manager.release(2, &key("a"));
    assert!(manager.is_empty());
}

#[test]
fn without_a_threshold_nothing_escalates() {
    let manager = LockManager::new();
    let mut owner = Accounts::default();
    for index in 0..100 {
        owner.lock(&manager, 1, key(&format!("row{index}")), None);
    }
    assert_eq!((owner.rows.len(), manager.lock_count()), (100, 100));
    assert_eq!(manager.counters.escalations.load(Ordering::Relaxed), 0);
    manager.release_all(1, std::mem::take(&mut owner.rows));
    assert!(manager.is_empty());
}

#[test]
fn a_waiter_for_a_column_family_is_granted_when_it_is_let_go() {
    let manager = Arc::new(LockManager::new());
    let mut owner = Accounts::default();
    owner.lock(&manager, 1, key("a"), Some(0));
    assert!(owner.families.holds_whole(0));
    let waiter = {
        let manager = Arc::clone(&manager);
        thread::spawn(move || manager.acquire(2, &slot(), &key("a"), LockMode::Exclusive, forever()))
    };
    wait_for_waits(&manager, 1);
    assert_eq!(manager.counters.column_family_waits.load(Ordering::Relaxed), 1);
    manager.release_column_families(1);
    assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
    manager.release(2, &key("a"));
    assert!(manager.is_empty());
}

#[test]
fn a_deadlock_through_a_column_family_fails_whoever_closes_it() {
    for young_waits_first in [false, true] {
        // The old transaction holds family 0 whole; the young one holds a row of family 1.
        // Each then asks for what the other holds; the second to ask closes the cycle.
        let manager = Arc::new(LockManager::new());
        let (old, young) = (slot(), slot());
        let mut old_accounts = Accounts::default();
        old_accounts.lock(&manager, 1, key_in(0, "a"), Some(0));
        manager.acquire(2, &young, &key_in(1, "b"), LockMode::Exclusive, forever()).unwrap();
        if young_waits_first {
            let young_waiter = {
                let (manager, young) = (Arc::clone(&manager), Arc::clone(&young));
                thread::spawn(move || manager.acquire(2, &young, &key_in(0, "x"), LockMode::Shared, forever()))
            };
            wait_for_edge(&manager, 2);
            // The old one closes the cycle through the family lock and fails; the young one,
            // asleep on the family, gets its key once the old one lets the family go.
            let old_result = manager.acquire(1, &old, &key_in(1, "b"), LockMode::Exclusive, forever());
            assert!(matches!(old_result, Err(Error::Deadlock(_))), "{old_result:?}");
            manager.release_column_families(1);
            assert_eq!(young_waiter.join().unwrap().unwrap(), Granted::New);
            manager.release(2, &key_in(0, "x"));
            manager.release(2, &key_in(1, "b"));
        } else {
            let old_waiter = {
                let (manager, old) = (Arc::clone(&manager), Arc::clone(&old));
                thread::spawn(move || manager.acquire(1, &old, &key_in(1, "b"), LockMode::Exclusive, forever()))
            };
            wait_for_edge(&manager, 1);
            let young_result = manager.acquire(2, &young, &key_in(0, "x"), LockMode::Shared, forever());
            assert!(matches!(young_result, Err(Error::Deadlock(_))), "{young_result:?}");
            manager.release(2, &key_in(1, "b"));
            assert_eq!(old_waiter.join().unwrap().unwrap(), Granted::New);
            manager.release(1, &key_in(1, "b"));
            manager.release_column_families(1);
        }
        assert_eq!(manager.counters.deadlocks.load(Ordering::Relaxed), 1);
        assert!(manager.is_empty(), "young waits first: {young_waits_first}");
    }
}

#[test]
fn a_free_lock_goes_to_an_exclusive_newcomer_before_woken_waiters_but_never_to_a_shared_one() {
    // The state right after a release: no holder, one waiter woken but not yet running.
    let key = key("hot");
    let table_with_waiter = || {
        let mut table = ShardTable::default();
        let mut lock = Lock::default();
        lock.waiters.push_back(Waiter { transaction: 1, mode: LockMode::Exclusive, slot: slot() });
        table.locks.insert(key.clone(), lock);
        table.families.add_claim(key.0);
        table
    };
    let mut table = table_with_waiter();
    assert!(matches!(table.request_row(2, &slot(), &key, LockMode::Exclusive), RowRequest::Granted(Granted::New)));
    // The waiter now finds a holder and waits on.
    let lock = &table.locks[&key];
    assert!(!lock.grantable(1, LockMode::Exclusive, 0));
    let mut table = table_with_waiter();
    assert!(matches!(table.request_row(3, &slot(), &key, LockMode::Shared), RowRequest::Queued));
    // A lock with a holder is no free lock: an exclusive newcomer queues behind the waiter.
    let mut table = table_with_waiter();
    table.locks.get_mut(&key).unwrap().holders.push((4, LockMode::Shared));
    assert!(matches!(table.request_row(5, &slot(), &key, LockMode::Exclusive), RowRequest::Queued));
}
