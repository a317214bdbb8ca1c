//! The lock manager under loom: no lost wake-up when a holder releases, a deadlock between
//! two transactions always broken, exactly once, in every interleaving of the waits, the
//! cycle search, the victim's marking and its wake-up; an escalation racing a row-lock
//! request in its column family never lets both hold, and leaves no gap on the escalating
//! transaction's own keys; and a waiter for a column family held whole is woken when it is
//! let go.

use super::*;
use crate::sync::model;
use loom::sync::atomic::AtomicUsize as ModelAtomicUsize;
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
        // Both waiting at once is a deadlock, broken by failing the one whose request closed
        // it; if one got its lock before the other asked, nobody fails. Never both.
        assert!(!(old_failed && young_failed), "both members of one cycle failed");
        let deadlocks = manager.counters.deadlocks.load(Ordering::Relaxed);
        assert_eq!(deadlocks, u64::from(old_failed || young_failed));
        assert_eq!(manager.lock_count(), 0);
    });
}

/// Transaction 1 holds row lock "a" in column family 0 and escalates while transaction 2
/// asks for `wanted` in the family. Each counts the time it holds something that excludes
/// the other in a counter that must never reach 2: the requester from its grant to its
/// release; the escalator while it holds the family whole, and, when the requester wants
/// "a", from the start (its row lock, then the family lock with no gap between them). The
/// requester waits forever when it must, so a lost wake-up at the family's release is a
/// loom deadlock too.
fn escalation_races_a_request(wanted: &'static str) {
    model(4, move || {
        let manager = Arc::new(LockManager::new());
        let excluded_from_start = wanted == "a";
        let holding = Arc::new(ModelAtomicUsize::new(usize::from(excluded_from_start)));
        let slot = Arc::new(WaitSlot::default());
        manager.acquire(1, &slot, &key("a"), LockMode::Exclusive, forever()).unwrap();
        let escalator = {
            let (manager, holding) = (Arc::clone(&manager), Arc::clone(&holding));
            thread::spawn(move || {
                let escalated = manager.escalate(1, 0, 1, || vec![key("a")]);
                if escalated && !excluded_from_start {
                    assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "escalated while a row was granted");
                }
                if escalated || excluded_from_start {
                    holding.fetch_sub(1, Ordering::SeqCst);
                }
                if escalated {
                    manager.release_column_families(1);
                } else {
                    manager.release(1, &key("a"));
                }
                escalated
            })
        };
        let requester = {
            let (manager, holding) = (Arc::clone(&manager), Arc::clone(&holding));
            thread::spawn(move || {
                let slot = Arc::new(WaitSlot::default());
                let granted = manager.acquire(2, &slot, &key(wanted), LockMode::Exclusive, forever()).unwrap();
                assert_eq!(granted, Granted::New);
                assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "granted what transaction 1 held");
                holding.fetch_sub(1, Ordering::SeqCst);
                manager.release(2, &key(wanted));
            })
        };
        let escalated = escalator.join().unwrap();
        requester.join().unwrap();
        let counters = &manager.counters;
        assert_eq!(counters.escalations.load(Ordering::Relaxed), u64::from(escalated));
        assert_eq!(counters.escalations_refused.load(Ordering::Relaxed), u64::from(!escalated));
        assert_eq!((manager.lock_count(), manager.memory_bytes()), (0, 0));
        assert!(manager.is_empty());
    });
}

#[test]
fn an_escalation_racing_a_grant_never_lets_both_hold() {
    escalation_races_a_request("b");
}

#[test]
fn an_escalating_transactions_own_key_is_never_free() {
    escalation_races_a_request("a");
}

#[test]
fn a_release_of_a_column_family_wakes_its_waiter() {
    model(4, || {
        let manager = Arc::new(LockManager::new());
        let slot = Arc::new(WaitSlot::default());
        manager.acquire(1, &slot, &key("a"), LockMode::Exclusive, forever()).unwrap();
        assert!(manager.escalate(1, 0, 1, || vec![key("a")]));
        let waiter = {
            let manager = Arc::clone(&manager);
            thread::spawn(move || {
                let slot = Arc::new(WaitSlot::default());
                manager.acquire(2, &slot, &key("b"), LockMode::Shared, forever())
            })
        };
        manager.release_column_families(1);
        // A lost wake-up leaves the waiter asleep forever: loom reports the deadlock.
        assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
        manager.release(2, &key("b"));
        assert_eq!((manager.lock_count(), manager.memory_bytes()), (0, 0));
        assert!(manager.is_empty());
    });
}
