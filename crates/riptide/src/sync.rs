//! The synchronisation primitives of the modules that have concurrency models, switchable to
//! loom's model of them.
//!
//! Normal builds re-export the real types: `std`'s `Arc` and atomics and `parking_lot`'s `Mutex`
//! and `Condvar`, so a module importing from here compiles to exactly what it would with direct
//! imports. Under `--cfg loom` (`make loom`) the same names are loom's model types, which let
//! loom run a test body under every interleaving of its threads, every value a load may legally
//! return under the C++ memory model, and report lost wake-ups as deadlocks. The memtable's
//! skiplist and arena, the write queue, and the versions and table files (whose `Arc`s are the
//! reference counts that decide when a file is deleted) import from here; their models live
//! in `#[cfg(all(test, loom))]` modules next to the code. So does the transactions' lock
//! manager (`txn/lock.rs`).
//!
//! parking_lot's locks hand out guards directly and wait on a `&mut` guard, while loom follows
//! `std` (poisoning results, waiting by value); the loom half wraps loom's types to offer
//! parking_lot's interface, so the modelled code is the production code, unchanged.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom_locks::{Condvar, Mutex};

/// A yield that takes longer than this ran another thread.
const SLOW_YIELD: std::time::Duration = std::time::Duration::from_micros(10);

/// Busy-waits until `done` returns true, for at most `iterations` looks, and says whether it
/// did. Every `iterations_per_yield` looks the spinner yields its core; a yield that comes back
/// late shows that another thread wanted the core (possibly the one being waited for), and after
/// `max_slow_yields` such yields the spin ends early, since it then takes a core from a thread
/// with work. Callers sleep on their own condition variable after a spin that did not succeed.
/// The write queue's followers and self-service writers waiting to be visible both wait so.
/// Models under loom spin once, which never reaches a yield.
pub(crate) fn spin_until(
    iterations: usize,
    iterations_per_yield: usize,
    max_slow_yields: usize,
    mut done: impl FnMut() -> bool,
) -> bool {
    let mut slow_yields = 0;
    for iteration in 1..=iterations {
        if done() {
            return true;
        }
        if iteration % iterations_per_yield == 0 {
            let yield_start = std::time::Instant::now();
            std::thread::yield_now();
            if yield_start.elapsed() > SLOW_YIELD {
                slow_yields += 1;
                if slow_yields == max_slow_yields {
                    return false;
                }
            }
        }
        spin_loop();
    }
    false
}

/// `thread_local!` for statics with a constant initialiser (`= const { .. };`): `std`'s
/// macro in normal builds, and loom's per-model-thread one under loom, which does not accept
/// the `const` form, so there the initialiser is an ordinary expression.
#[cfg(not(loom))]
macro_rules! const_thread_local {
    ($($(#[$attribute:meta])* static $name:ident: $type:ty = const $init:block;)*) => {
        std::thread_local! { $($(#[$attribute])* static $name: $type = const $init;)* }
    };
}

/// See the normal build's `const_thread_local!` above.
#[cfg(loom)]
macro_rules! const_thread_local {
    ($($(#[$attribute:meta])* static $name:ident: $type:ty = const $init:block;)*) => {
        loom::thread_local! { $($(#[$attribute])* static $name: $type = $init;)* }
    };
}

pub(crate) use const_thread_local;

/// A marker for memory that is written once, by one thread, before it is published to others,
/// and only read afterwards (a skiplist node's header, key and value). It is free in normal
/// builds. Under loom it records the completed write and every read, and loom reports a read
/// that is not ordered after the write by a happens-before edge: exactly what publishing with
/// too weak an ordering, or writing after publishing, would allow.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct PublishedOnce;

#[cfg(not(loom))]
impl PublishedOnce {
    /// A marker for memory its owner is about to write.
    #[inline(always)]
    pub(crate) fn new() -> PublishedOnce {
        PublishedOnce
    }

    /// Records that the owner finished writing the marked memory.
    #[inline(always)]
    pub(crate) fn written(&self) {}

    /// Records a read of the marked memory.
    #[inline(always)]
    pub(crate) fn read(&self) {}
}

/// The loom half of [`PublishedOnce`].
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct PublishedOnce(loom::cell::UnsafeCell<()>);

#[cfg(loom)]
impl PublishedOnce {
    /// A marker for memory its owner is about to write.
    pub(crate) fn new() -> PublishedOnce {
        PublishedOnce(loom::cell::UnsafeCell::new(()))
    }

    /// Records that the owner finished writing the marked memory: every later read must happen
    /// after this call.
    pub(crate) fn written(&self) {
        self.0.with_mut(|_| ());
    }

    /// Records a read of the marked memory; loom panics with a causality violation when the
    /// completed write is not known to have happened before it.
    pub(crate) fn read(&self) {
        self.0.with(|_| ());
    }
}

/// parking_lot-shaped wrappers around loom's `Mutex` and `Condvar`.
#[cfg(loom)]
mod loom_locks {
    use std::ops::{Deref, DerefMut};
    use std::sync::PoisonError;

    /// A mutex whose `lock` returns the guard, as parking_lot's does. A panic while locked (a
    /// failed model assertion) does not poison it: the model has failed already, and the
    /// production type has no poisoning either.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard { inner: Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)) }
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// The guard of [`Mutex`]. loom's condition variable takes the guard by value, so it sits in
    /// an `Option` that is empty only while a condition variable waits with it.
    pub(crate) struct MutexGuard<'a, T> {
        inner: Option<loom::sync::MutexGuard<'a, T>>,
    }

    impl<T> MutexGuard<'_, T> {
        fn held(&self) -> &loom::sync::MutexGuard<'_, T> {
            match &self.inner {
                Some(guard) => guard,
                None => unreachable!("a mutex guard is empty only while its condition variable waits"),
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            self.held()
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut self.inner {
                Some(guard) => guard,
                None => unreachable!("a mutex guard is empty only while its condition variable waits"),
            }
        }
    }

    /// A condition variable that waits on `&mut` guard, as parking_lot's does.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let Some(held) = guard.inner.take() else {
                unreachable!("a mutex guard is empty only while its condition variable waits")
            };
            guard.inner = Some(self.0.wait(held).unwrap_or_else(PoisonError::into_inner));
        }

        // parking_lot's notification reports whether it woke a thread; loom's does not say, so
        // this returns nothing, and the modelled code never looks.
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        // As `notify_one`: parking_lot's count of woken threads is not modelled.
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

/// Runs `body` under loom: once for every interleaving and every allowed load result that
/// loom explores within `preemption_bound` preemptions per execution (`LOOM_MAX_PREEMPTIONS`
/// overrides it), panicking with the failing schedule's story when an assertion, a causality
/// check or the deadlock detector fails in one of them. Bugs of the kinds modelled here (a
/// missing happens-before edge, a lost wake-up, a lost CAS race) need one or two preemptions to
/// show; each more multiplies the run time, so each model picks the bound it can afford.
#[cfg(all(test, loom))]
pub(crate) fn model<F>(preemption_bound: usize, body: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemption_bound);
    }
    // Counted with a plain `std` atomic: loom's objects live only inside one execution.
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    let started = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        body();
    });
    // Shown with `--nocapture`, so that a model's cost is visible when it is changed.
    println!(
        "loom: {} executions in {:.1} s (preemption bound {:?})",
        executions.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        builder.preemption_bound
    );
}
