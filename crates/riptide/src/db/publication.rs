//! Publication of self-service writes: the visible sequence advances over writes that finish
//! out of order, and only ever over a contiguous prefix of them.
//!
//! A self-service write (see `self_service`) gets a ticket when it is sequenced: tickets
//! are consecutive, in the order of the writes' sequence numbers and WAL records. Once its
//! record is with the operating system and its entries are in the memtable, the writer
//! completes its ticket: it stores the ticket and its last sequence number in the ticket's slot
//! of a ring, then advances the published ticket over every completed ticket that follows it,
//! raising the visible sequence to each one's last sequence. So whoever finishes last publishes
//! for everyone before it, and no writer waits for a predecessor to publish its own write: it
//! waits only while a predecessor is still inserting (or was preempted while doing so). Then the
//! writer waits until the visible sequence covers its own write, spinning briefly and sleeping
//! on a condition variable after that.
//!
//! Concurrency contract: tickets are issued by one thread at a time (under the WAL stage's
//! mutex), each at most [`Publication::SLOTS`] - 1 ahead of the published ticket
//! ([`Publication::has_room`]), so that two unpublished tickets never share a slot; `complete`
//! and `wait_until_visible` may run on any number of threads. While the write gate is held
//! exclusively (by a group of the write queue, or a holder of write leadership), no ticket is
//! in flight, and the holder may store the visible sequence directly.
//!
//! Invariants (I46): the published ticket only moves forward, one ticket at a time, and only
//! onto a completed ticket; the visible sequence only moves forward, and never past the last
//! sequence of an incomplete ticket; when every issued ticket has completed and every
//! `complete` call returned, the published ticket is the last ticket issued (no completion is
//! lost between two writers finishing at once), and every sleeping waiter whose sequence is
//! visible has been woken. The loom model at the end of this file checks both.

use crate::sync::{fence, spin_until, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};

/// Busy-wait iterations before a waiting writer sleeps: a predecessor still inserting on the
/// other core usually finishes within a few microseconds. Under loom, once.
const SPIN_ITERATIONS: usize = if cfg!(loom) { 1 } else { 1000 };

/// A spinning waiter yields its core once every this many iterations, to learn whether another
/// thread (possibly the predecessor it waits for) wants it.
const SPIN_ITERATIONS_PER_YIELD: usize = 64;

/// After this many slow yields (see `sync::spin_until`) the waiter stops spinning.
const MAX_SLOW_YIELDS: usize = 2;

/// The visible sequence the ring raises: the database's `std` atomic, or loom's in the model.
pub(crate) trait VisibleSequence {
    fn load_visible(&self) -> u64;
    fn raise_visible(&self, sequence: u64);
}

impl VisibleSequence for std::sync::atomic::AtomicU64 {
    fn load_visible(&self) -> u64 {
        self.load(std::sync::atomic::Ordering::Acquire)
    }

    fn raise_visible(&self, sequence: u64) {
        self.fetch_max(sequence, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(loom)]
impl VisibleSequence for loom::sync::atomic::AtomicU64 {
    fn load_visible(&self) -> u64 {
        self.load(Ordering::Acquire)
    }

    fn raise_visible(&self, sequence: u64) {
        self.fetch_max(sequence, Ordering::AcqRel);
    }
}

/// One ticket's place in the ring.
struct Slot {
    /// The ticket that completed here last (0: none yet; tickets start at 1).
    done_ticket: AtomicU64,
    /// That ticket's last sequence number; written before `done_ticket`.
    last_sequence: AtomicU64,
}

/// The ring of completed tickets and the published ticket; see the module documentation.
pub(crate) struct Publication {
    slots: Box<[Slot]>,
    /// Every ticket up to this one has completed and is visible (or about to be: see
    /// `advance`).
    published_ticket: AtomicU64,
    /// Writers sleeping in `wait_until_visible`.
    waiters: AtomicUsize,
    sleep: Mutex<()>,
    advanced: Condvar,
}

impl Publication {
    /// Slots in the ring: the most tickets that may be in flight at once, plus one.
    pub(crate) const SLOTS: u64 = if cfg!(loom) { 4 } else { 4096 };

    /// A ring with nothing in flight: the first ticket issued is 1.
    pub(crate) fn new() -> Publication {
        let slots = (0..Self::SLOTS).map(|_| Slot { done_ticket: AtomicU64::new(0), last_sequence: AtomicU64::new(0) });
        Publication {
            slots: slots.collect(),
            published_ticket: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            advanced: Condvar::new(),
        }
    }

    /// Whether `ticket` may be issued now: fewer than `SLOTS` tickets would be unpublished.
    /// Called by the thread that issues tickets, before it issues `ticket`.
    pub(crate) fn has_room(&self, ticket: u64) -> bool {
        ticket - self.published_ticket.load(Ordering::Acquire) < Self::SLOTS
    }

    /// The last published ticket.
    pub(crate) fn published_ticket(&self) -> u64 {
        self.published_ticket.load(Ordering::Acquire)
    }

    fn slot(&self, ticket: u64) -> &Slot {
        &self.slots[(ticket % Self::SLOTS) as usize]
    }

    /// Marks `ticket` complete (its write, through `last_sequence`, is logged and inserted) and
    /// publishes every completed ticket that now follows the published one.
    pub(crate) fn complete(&self, ticket: u64, last_sequence: u64, visible_sequence: &impl VisibleSequence) {
        debug_assert!(ticket > self.published_ticket(), "I46: a ticket completes once");
        let slot = self.slot(ticket);
        slot.last_sequence.store(last_sequence, Ordering::Relaxed);
        slot.done_ticket.store(ticket, Ordering::Release);
        // Two writers completing neighbouring tickets at once each store, then load the
        // other's slot (here and in `advance`). Without a full fence between the store and the
        // loads, both loads may miss both stores, each writer stops at the other's ticket, and
        // neither is ever published. With it, at least one sees the other's completion.
        fence(Ordering::SeqCst);
        self.advance(visible_sequence);
    }

    /// Moves the published ticket over every completed ticket after it, one CAS at a time
    /// (several writers may advance at once; each step is taken by exactly one of them).
    fn advance(&self, visible_sequence: &impl VisibleSequence) {
        let mut published = self.published_ticket.load(Ordering::Acquire);
        let mut moved = false;
        loop {
            let next = published + 1;
            let slot = self.slot(next);
            if slot.done_ticket.load(Ordering::Acquire) != next {
                break;
            }
            // Ticket `next` cannot be overwritten by ticket `next + SLOTS` before the CAS below
            // decides: that ticket is issued only once `next` is published, and then the CAS
            // fails. So on success this is `next`'s sequence.
            let last_sequence = slot.last_sequence.load(Ordering::Relaxed);
            match self.published_ticket.compare_exchange(published, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // A maximum, not a store: another writer may publish a later ticket
                    // between the CAS and this line, and the visible sequence never goes back.
                    visible_sequence.raise_visible(last_sequence);
                    published = next;
                    moved = true;
                }
                Err(current) => published = current,
            }
        }
        if !moved {
            return;
        }
        // Pairs with the fence in `wait_until_visible`: either this load sees the sleeper's
        // count, or the sleeper's check sees the visible sequence raised above.
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) > 0 {
            let _sleeping = self.sleep.lock();
            self.advanced.notify_all();
        }
    }

    /// Returns once `visible_sequence` is at least `sequence`.
    pub(crate) fn wait_until_visible(&self, sequence: u64, visible_sequence: &impl VisibleSequence) {
        // Other threads wanting the cores (possibly the writer this one waits for) end the
        // spin: the waiter sleeps instead of taking turns with them.
        if spin_until(SPIN_ITERATIONS, SPIN_ITERATIONS_PER_YIELD, MAX_SLOW_YIELDS, || {
            visible_sequence.load_visible() >= sequence
        }) {
            return;
        }
        let mut sleeping = self.sleep.lock();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        while visible_sequence.load_visible() < sequence {
            self.advanced.wait(&mut sleeping);
        }
        self.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Loom model of the ring (`make loom`): writers complete their tickets in every order and
/// interleaving; each waits until its write is visible. Checks that nobody sleeps forever (loom
/// reports a lost wake-up as a deadlock), that the visible sequence never passes an incomplete
/// write, and that everything is published at the end.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::{model, Arc, AtomicBool};
    use loom::thread;

    /// Three writers, tickets 1-3 holding sequences 1-2, 3 and 4-6, each completing and
    /// waiting on its own thread (the main thread takes the last). Each checks, once its write
    /// is visible, that every earlier write completed.
    #[test]
    fn out_of_order_completions_publish_a_prefix() {
        model(2, || {
            let publication = Arc::new(Publication::new());
            let visible = Arc::new(AtomicU64::new(0));
            let completed: Arc<Vec<AtomicBool>> = Arc::new((0..3).map(|_| AtomicBool::new(false)).collect());
            let writes = [(1u64, 2u64), (2, 3), (3, 6)];
            let run = {
                let publication = Arc::clone(&publication);
                let visible = Arc::clone(&visible);
                let completed = Arc::clone(&completed);
                move |index: usize| {
                    let (ticket, last_sequence) = writes[index];
                    completed[index].store(true, Ordering::Release);
                    publication.complete(ticket, last_sequence, &*visible);
                    publication.wait_until_visible(last_sequence, &*visible);
                    for earlier in completed.iter().take(index + 1) {
                        assert!(earlier.load(Ordering::Acquire), "visible before an earlier write completed");
                    }
                }
            };
            let handles: Vec<_> = (0..2)
                .map(|index| {
                    let run = run.clone();
                    thread::spawn(move || run(index))
                })
                .collect();
            run(2);
            for handle in handles {
                handle.join().expect("writer");
            }
            assert_eq!(publication.published_ticket(), 3);
            assert_eq!(visible.load(Ordering::Acquire), 6);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn publishes_only_a_prefix_of_completed_tickets() {
        let publication = Publication::new();
        let visible = AtomicU64::new(10);
        publication.published_ticket.store(4, Ordering::Relaxed);
        // Ticket 6 completes first: ticket 5 is still out, so nothing moves.
        publication.complete(6, 20, &visible);
        assert_eq!((publication.published_ticket(), visible.load(Ordering::Relaxed)), (4, 10));
        // Ticket 5 completes: both go, and the visible sequence is ticket 6's last.
        publication.complete(5, 15, &visible);
        assert_eq!((publication.published_ticket(), visible.load(Ordering::Relaxed)), (6, 20));
    }

    #[test]
    fn room_is_bounded_by_the_ring() {
        let publication = Publication::new();
        assert!(publication.has_room(1));
        assert!(publication.has_room(Publication::SLOTS - 1));
        assert!(!publication.has_room(Publication::SLOTS));
    }

    #[test]
    fn many_threads_completing_out_of_order_all_return() {
        // Eight threads take tickets from a shared counter in order (as the stage issues
        // them), complete them after a random pause and wait; everyone returns and the visible
        // sequence ends at the last write's.
        let publication = Arc::new(Publication::new());
        let visible = Arc::new(AtomicU64::new(0));
        let issuer = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..8u64)
            .map(|thread| {
                let (publication, visible, issuer) =
                    (Arc::clone(&publication), Arc::clone(&visible), Arc::clone(&issuer));
                std::thread::spawn(move || {
                    let mut seed = thread + 1;
                    for _ in 0..2000 {
                        let ticket = {
                            let mut next = issuer.lock();
                            while !publication.has_room(*next + 1) {
                                std::thread::yield_now();
                            }
                            *next += 1;
                            *next
                        };
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        for _ in 0..(seed >> 60) {
                            std::thread::yield_now();
                        }
                        publication.complete(ticket, ticket * 2, &*visible);
                        publication.wait_until_visible(ticket * 2, &*visible);
                        assert!(publication.published_ticket() >= ticket);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        assert_eq!(publication.published_ticket(), 16_000);
        assert_eq!(visible.load(Ordering::Relaxed), 32_000);
    }
}
