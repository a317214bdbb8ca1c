//! The write queue: the group-commit protocol of the write path, apart from what a group does.
//!
//! Writers queue up; the first in line becomes the leader. The leader takes every waiting
//! writer (up to a byte budget) as one group, has the group run (by the write path's
//! `write_group`: sequence numbers, WAL, memtables), and wakes the members with the shared
//! result. It runs further groups while writers keep queueing (up to `MAX_GROUPS_PER_LEADER`),
//! then hands leadership to the writer at the front of the queue, or leaves the queue
//! leaderless when nobody waits. A group may insert in parallel
//! ([`WriteQueue::insert_in_parallel`]): the members insert their own writes while the leader
//! inserts the first one and then waits for them. Waiting writers spin briefly before they
//! sleep. A token ([`WriteQueue::with_leadership`]) queues like a writer but carries no write:
//! it is never taken into a group and only ever leaves the queue as a leader, so whoever holds
//! it runs with no group in flight (flush, dropping a column family).
//!
//! The queue is generic over the write (`W`) and over what a parallel insert shares (`J`), so
//! that its loom model (`make loom`, at the end of this file) runs this very code with small
//! stand-ins; the write path instantiates it with its batches and memtables.
//!
//! Concurrency contract: `write` and `with_leadership` may be called from any number of
//! threads. The queue mutex guards the pending writers and the leader flag; each writer's
//! status has its own mutex and condition variable, so the leader wakes exactly the writer it
//! means to. Everything a leader does to a group (and the holder of a token does) is ordered
//! before the next leader's work through the queue mutex and the status hand-off, which is
//! what lets the write path keep its sequence counter and WAL writer without a lock of their
//! own among groups (self-service writes, which bypass the queue, are kept out by the write
//! gate that each group holds exclusively: `db/self_service.rs`).
//!
//! Invariants: at most one thread holds leadership at a time, and `leader_active` is true
//! exactly while one does; every queued writer gets exactly one outcome (its group's result, or
//! its own admission error) and returns once; a writer leaves the queue only in a group or as
//! a leader; tokens are never part of a group.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::sync::{spin_until, Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

/// A leader runs up to this many groups in a row while writers keep queueing, so that the
/// queue does not wait for a sleeping writer to wake up and take over after every group. Its
/// own write is in the first group; later groups only delay its return a little.
const MAX_GROUPS_PER_LEADER: usize = 16;

/// Busy-wait iterations before a waiting writer sleeps: about 25 microseconds (a PAUSE takes
/// about 27 ns on the machines measured), about one group's WAL write and insert. Measured on
/// 2 cores with 2 and 8 writers of single puts: 200 iterations gave half the throughput of
/// 1,000, and 2,000 no more than 1,000. Under loom every iteration is a scheduling point, so
/// the model spins once: enough to explore the spin's early exit without multiplying the
/// executions a thousandfold.
const SPIN_ITERATIONS: usize = if cfg!(loom) { 1 } else { 1000 };

/// A spinning writer yields its core once every this many iterations (about 3 microseconds) to
/// learn whether another thread wants it; see [`Writer::wait_for_news`].
const SPIN_ITERATIONS_PER_YIELD: usize = 128;

/// After this many slow yields in one spin, the core is taken to be wanted elsewhere. One is
/// not enough: the members the leader just woke run once on the spinner's core and are gone.
const MAX_SLOW_YIELDS: usize = 3;

/// What a waiting writer is told.
enum Status<J> {
    Waiting,
    /// Leadership is yours.
    Lead,
    /// Insert your own write (its sequence is stamped) as part of this parallel insert.
    Insert(Arc<ParallelInsert<J>>),
    /// Your write is done, with this result.
    Done(Result<()>),
}

/// A queued write and the means to tell its writer what to do.
pub(crate) struct Writer<W, J> {
    write: W,
    /// Encoded size of the write, counted against the group's byte budget.
    size_bytes: usize,
    /// True for a token (see [`WriteQueue::with_leadership`]): no write, never in a group.
    is_token: bool,
    status: Mutex<Status<J>>,
    /// Set when `status` changes, so a waiter can spin on it without the mutex.
    has_news: AtomicBool,
    wake: Condvar,
}

impl<W, J> Writer<W, J> {
    fn new(write: W, size_bytes: usize, is_token: bool) -> Writer<W, J> {
        Writer {
            write,
            size_bytes,
            is_token,
            status: Mutex::new(Status::Waiting),
            has_news: AtomicBool::new(false),
            wake: Condvar::new(),
        }
    }

    /// The queued write.
    pub(crate) fn write(&self) -> &W {
        &self.write
    }

    fn set_status(&self, status: Status<J>) {
        let mut current = self.status.lock();
        *current = status;
        self.has_news.store(true, Ordering::Release);
        drop(current);
        self.wake.notify_one();
    }

    /// Waits for a status other than `Waiting` and takes it. With `spin`, it busy-waits briefly
    /// first: the leader usually finishes within microseconds, and a futex sleep plus wake-up
    /// costs more than that. Spinning only pays when the spinner does not take a core from the
    /// leader, so callers spin only when no other writer is queued ahead of them: with
    /// more writers than cores, spinners would starve the leader and throughput collapses.
    ///
    /// A spin pays only while the spinner's core would otherwise be idle. When more threads are
    /// runnable than there are cores (this process's readers, or other processes), the spin
    /// takes a core from a thread with work, possibly the leader. So the spinner yields every
    /// `SPIN_ITERATIONS_PER_YIELD` iterations, and a yield that comes back late shows that
    /// another thread wanted the core: the writer stops spinning and sleeps. Measured on 2
    /// cores with a compiler running beside the benchtool, single puts from 2 threads went from
    /// 77-80K ops/s (spinning regardless) to about 175K; on an idle machine spinning is kept.
    fn wait_for_news(&self, spin: bool) -> Status<J> {
        let spin_iterations = if spin { SPIN_ITERATIONS } else { 0 };
        // Whatever the spin found, the status is taken under its mutex below.
        spin_until(spin_iterations, SPIN_ITERATIONS_PER_YIELD, MAX_SLOW_YIELDS, || {
            self.has_news.load(Ordering::Acquire)
        });
        let mut status = self.status.lock();
        loop {
            let taken = std::mem::replace(&mut *status, Status::Waiting);
            if !matches!(taken, Status::Waiting) {
                self.has_news.store(false, Ordering::Relaxed);
                return taken;
            }
            self.wake.wait(&mut status);
        }
    }
}

/// A group whose members insert their own writes in parallel, so that both cores work on large
/// groups. The leader waits until `remaining` reaches zero before it publishes the group.
pub(crate) struct ParallelInsert<J> {
    shared: J,
    /// Members that have not finished inserting.
    remaining: AtomicUsize,
    finished: Mutex<bool>,
    all_inserted: Condvar,
}

impl<J> ParallelInsert<J> {
    /// Called by each member after its insert. AcqRel: the last member's decrement reads every
    /// earlier member's, so all their inserts happen before it sets `finished` (and so before
    /// the leader returns from `wait`).
    fn member_finished(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.finished.lock() = true;
            self.all_inserted.notify_one();
        }
    }

    fn wait(&self) {
        let mut finished = self.finished.lock();
        while !*finished {
            self.all_inserted.wait(&mut finished);
        }
    }
}

/// The writers waiting for the leader, and whether a leader is active.
struct Pending<W, J> {
    writers: VecDeque<Arc<Writer<W, J>>>,
    leader_active: bool,
}

/// The write queue; see the module documentation.
pub(crate) struct WriteQueue<W, J> {
    pending: Mutex<Pending<W, J>>,
    /// A group never grows past this many bytes (but always takes at least one writer).
    max_group_bytes: usize,
}

impl<W, J> WriteQueue<W, J> {
    /// An empty queue whose groups grow to at most `max_group_bytes`.
    pub(crate) fn new(max_group_bytes: usize) -> WriteQueue<W, J> {
        WriteQueue { pending: Mutex::new(Pending { writers: VecDeque::new(), leader_active: false }), max_group_bytes }
    }

    /// Queues `write` (of `size_bytes`) and returns its outcome: once its group has run, or at
    /// once with the error of `admit` if that rejects it when a group forms.
    ///
    /// While the writer waits it may be asked to insert its own write in a parallel group:
    /// `insert` does that. When it becomes the leader, `admit` is asked about each write as it
    /// joins a group (under the queue lock, so keep it short), and `run_group` runs each group;
    /// its result becomes every member's.
    pub(crate) fn write(
        &self,
        write: W,
        size_bytes: usize,
        insert: impl Fn(&W, &J),
        admit: impl FnMut(&W) -> Result<()>,
        run_group: impl FnMut(&[Arc<Writer<W, J>>]) -> Result<()>,
    ) -> Result<()> {
        let writer = Arc::new(Writer::new(write, size_bytes, false));
        {
            let mut pending = self.pending.lock();
            let queued_ahead = pending.writers.len();
            pending.writers.push_back(Arc::clone(&writer));
            if pending.leader_active {
                drop(pending);
                // Only a writer with nobody queued ahead spins, so at most one spins beside the
                // leader: on two cores, a second spinner would take the leader's core.
                let spin = queued_ahead == 0;
                loop {
                    match writer.wait_for_news(spin) {
                        Status::Waiting => {}
                        Status::Done(result) => return result,
                        Status::Lead => break,
                        Status::Insert(job) => {
                            insert(&writer.write, &job.shared);
                            job.member_finished();
                        }
                    }
                }
            } else {
                pending.leader_active = true;
            }
        }
        self.lead(&writer, admit, run_group)
    }

    /// Runs the group with `own` at its head, and further groups while writers keep queueing
    /// (up to `MAX_GROUPS_PER_LEADER`), then passes leadership on.
    fn lead(
        &self,
        own: &Arc<Writer<W, J>>,
        mut admit: impl FnMut(&W) -> Result<()>,
        mut run_group: impl FnMut(&[Arc<Writer<W, J>>]) -> Result<()>,
    ) -> Result<()> {
        let mut own_result = None;
        for _round in 0..MAX_GROUPS_PER_LEADER {
            let round = usize::from(own_result.is_some());
            let group: Vec<Arc<Writer<W, J>>> = {
                let mut pending = self.pending.lock();
                debug_assert!(round > 0 || pending.writers.front().is_some_and(|w| Arc::ptr_eq(w, own)));
                let mut group = Vec::new();
                let mut group_bytes = 0;
                while let Some(front) = pending.writers.front() {
                    let size = front.size_bytes;
                    // A token is no write: it must leave the queue only as a leader (see
                    // `with_leadership`), so it ends a group and is never the head of a later
                    // round.
                    if front.is_token && (round > 0 || !group.is_empty()) {
                        break;
                    }
                    if !group.is_empty() && group_bytes + size > self.max_group_bytes {
                        break;
                    }
                    let Some(writer) = pending.writers.pop_front() else { break };
                    // A write that may no longer be applied (its column family was dropped
                    // after the writer checked) fails alone.
                    if let Err(error) = admit(&writer.write) {
                        if Arc::ptr_eq(&writer, own) {
                            own_result = Some(Err(error));
                        } else {
                            writer.set_status(Status::Done(Err(error)));
                        }
                        continue;
                    }
                    group_bytes += size;
                    group.push(writer);
                }
                group
            };
            if group.is_empty() {
                break;
            }
            let result = run_group(&group);
            let mut has_own = false;
            for member in &group {
                if Arc::ptr_eq(member, own) {
                    has_own = true;
                    continue;
                }
                member.set_status(Status::Done(match &result {
                    Ok(()) => Ok(()),
                    Err(error) => Err(error.duplicate()),
                }));
            }
            if has_own {
                own_result = Some(result);
            }
        }
        Self::pass_leadership(&mut self.pending.lock());
        own_result.unwrap_or_else(|| Err(Error::Closed("write leader formed no group".to_string())))
    }

    /// Hands leadership to the writer at the front of the queue, or marks the queue leaderless
    /// when nobody waits. Called by the leader with the queue locked.
    fn pass_leadership(pending: &mut Pending<W, J>) {
        match pending.writers.front() {
            Some(next) => next.set_status(Status::Lead),
            None => pending.leader_active = false,
        }
    }

    /// `with_leadership` only if nobody leads or waits now: `None` without running `action`
    /// otherwise. For a background thread that must never wait for writers (a writer stalled
    /// for room waits for the background threads).
    pub(crate) fn try_with_leadership<T>(&self, token: W, action: impl FnOnce() -> T) -> Option<T> {
        {
            let mut pending = self.pending.lock();
            if pending.leader_active || !pending.writers.is_empty() {
                return None;
            }
            pending.writers.push_back(Arc::new(Writer::new(token, 0, true)));
            pending.leader_active = true;
        }
        let result = action();
        let mut pending = self.pending.lock();
        pending.writers.pop_front();
        Self::pass_leadership(&mut pending);
        Some(result)
    }

    /// Runs `action` while holding write leadership, so that no group is in flight meanwhile.
    /// The token that queues for it carries `token` as its write, which no group ever takes.
    pub(crate) fn with_leadership<T>(&self, token: W, action: impl FnOnce() -> T) -> T {
        let token = Arc::new(Writer::new(token, 0, true));
        {
            let mut pending = self.pending.lock();
            pending.writers.push_back(Arc::clone(&token));
            if pending.leader_active {
                drop(pending);
                while !matches!(token.wait_for_news(false), Status::Lead) {}
            } else {
                pending.leader_active = true;
            }
        }
        let result = action();
        let mut pending = self.pending.lock();
        pending.writers.pop_front();
        Self::pass_leadership(&mut pending);
        result
    }

    /// Inserts a group in parallel, called by the leader from its `run_group`: every member but
    /// the first is told to insert its own write (the `insert` given to [`WriteQueue::write`]),
    /// `insert_first` inserts the first write here, and this returns once all are in. `shared`
    /// is what the inserts share (the memtables).
    pub(crate) fn insert_in_parallel(group: &[Arc<Writer<W, J>>], shared: J, insert_first: impl FnOnce(&W, &J)) {
        let Some((first, members)) = group.split_first() else { return };
        let job = Arc::new(ParallelInsert {
            shared,
            remaining: AtomicUsize::new(members.len()),
            finished: Mutex::new(members.is_empty()),
            all_inserted: Condvar::new(),
        });
        for member in members {
            member.set_status(Status::Insert(Arc::clone(&job)));
        }
        insert_first(&first.write, &job.shared);
        job.wait();
    }
}

/// Loom models of the queue (`make loom`): writers on their own threads run this module's code
/// with a stand-in for what a group does, under every interleaving within the preemption bound.
///
/// The stand-in group keeps the write path's discipline: the "sequence counter" is a loom cell
/// written by each leader without a lock, and each write's stamp and "inserted" flag are loom
/// cells written by whoever the protocol says (leader or member) and read by the writer after it
/// returns. So loom itself reports two leaders at once, or a leader, member or writer not ordered
/// after the work it depends on, as a causality violation; a writer left waiting for a wake-up
/// that never comes shows as a deadlock; and the checks after the threads join ask that every
/// writer returned once with its group's result, with sequence ranges that are contiguous and
/// disjoint.
///
/// Shown to fail on a deliberately broken queue (then restored): without the `notify_one` in
/// `set_status`, loom reports a deadlock (a writer sleeps through its `Done`); with
/// `pass_leadership` only clearing `leader_active`, a deadlock (a queued writer is stranded);
/// with a token allowed into a group behind its leader, a deadlock in `token_leads_alone` (the
/// token waits for a leadership that never comes); with the members' `fetch_sub` in
/// `member_finished` weakened from AcqRel to Relaxed, `parallel_insert` reports a causality
/// violation where the leader checks a member's insert. Each within a few seconds.
///
/// Each model also counts how often its executions reached what it is meant to test (a group
/// of several writes, a change of leader, a single group of all writes) and fails if one never
/// happened, so that it cannot pass vacuously.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::model;
    use loom::cell::UnsafeCell;
    use loom::thread;

    /// A write of the model: `entries` sequence numbers' worth, and the cells the protocol
    /// fills in for it. Shared (`Arc`) so that its writer can look at it after the queue let go.
    struct ModelWrite {
        entries: u64,
        /// Rejected by `admit`, as a batch naming a dropped column family is.
        rejected: bool,
        /// The first and last sequence number, stamped by the leader.
        stamp: UnsafeCell<Option<(u64, u64)>>,
        /// Set by whoever inserts the write: the leader, or the writer itself in a parallel
        /// group.
        inserted: UnsafeCell<bool>,
    }

    impl ModelWrite {
        fn insert(&self) {
            // SAFETY: loom checks that no other access to the cell is concurrent with this.
            self.inserted.with_mut(|inserted| unsafe { *inserted = true });
        }

        fn is_inserted(&self) -> bool {
            // SAFETY: as in `insert`.
            self.inserted.with(|inserted| unsafe { *inserted })
        }

        fn stamp(&self) -> Option<(u64, u64)> {
            // SAFETY: as in `insert`.
            self.stamp.with(|stamp| unsafe { *stamp })
        }
    }

    type ModelWriter = Writer<Arc<ModelWrite>, ()>;

    /// The database of the model: the queue, and the last sequence number assigned, which
    /// only leaders (and token holders) touch, without a lock, as in the write path.
    struct ModelDb {
        queue: WriteQueue<Arc<ModelWrite>, ()>,
        last_sequence: UnsafeCell<u64>,
        /// True to insert groups of several writers in parallel.
        parallel: bool,
        /// Each group's leader (the index of its writer) and size, in order. A `std` mutex,
        /// not a modelled one: this is the model's notebook, not part of the protocol, and
        /// nothing inside it can be preempted.
        groups: std::sync::Mutex<Vec<(usize, usize)>>,
    }

    impl ModelDb {
        fn new(max_group_bytes: usize, parallel: bool) -> ModelDb {
            ModelDb {
                queue: WriteQueue::new(max_group_bytes),
                last_sequence: UnsafeCell::new(0),
                parallel,
                groups: std::sync::Mutex::new(Vec::new()),
            }
        }

        /// The leader's part: assigns the group a range of sequence numbers, stamps each write,
        /// has the writes inserted (in parallel or by itself) and then checks them all in, as
        /// the write path must before it publishes the group's sequence numbers.
        fn run_group(&self, leader: usize, group: &[Arc<ModelWriter>]) -> Result<()> {
            self.groups.lock().expect("model notebook").push((leader, group.len()));
            let total: u64 = group.iter().map(|writer| writer.write().entries).sum();
            // SAFETY: loom checks that no other leader's access is concurrent with this.
            let first = self.last_sequence.with_mut(|last| unsafe {
                *last += total;
                *last - total + 1
            });
            let mut next = first;
            for writer in group {
                let write = writer.write();
                // SAFETY: as above.
                write.stamp.with_mut(|stamp| unsafe { *stamp = Some((next, next + write.entries - 1)) });
                next += write.entries;
            }
            if self.parallel && group.len() > 1 {
                WriteQueue::insert_in_parallel(group, (), |write, ()| write.insert());
            } else {
                for writer in group {
                    writer.write().insert();
                }
            }
            for writer in group {
                assert!(writer.write().is_inserted(), "a group was published before all its writes were in");
            }
            Ok(())
        }

        /// One writer's write of `entries` sequence numbers: queue, wait or lead, return. Gives
        /// the outcome and the write, to be looked at after the return as a caller would.
        fn write(&self, index: usize, entries: u64, rejected: bool) -> (Result<()>, Arc<ModelWrite>) {
            let write = Arc::new(ModelWrite {
                entries,
                rejected,
                stamp: UnsafeCell::new(None),
                inserted: UnsafeCell::new(false),
            });
            let result = self.queue.write(
                Arc::clone(&write),
                1,
                |write, ()| write.insert(),
                |write| if write.rejected { Err(Error::invalid("rejected")) } else { Ok(()) },
                |group| self.run_group(index, group),
            );
            (result, write)
        }

        /// True when nobody is queued and no thread holds leadership.
        fn is_idle(&self) -> bool {
            let pending = self.queue.pending.lock();
            pending.writers.is_empty() && !pending.leader_active
        }
    }

    /// How often the executions of a model reached the situations it is meant to test, so
    /// that a model that stopped reaching them (after a change to it or to the queue) fails
    /// instead of passing without testing anything. Plain `std` atomics: they outlive the
    /// executions.
    #[derive(Default)]
    struct Coverage {
        /// Executions with a group of more than one write.
        shared_groups: std::sync::atomic::AtomicUsize,
        /// Executions in which a second writer led after a first one.
        leader_changes: std::sync::atomic::AtomicUsize,
        /// Executions with one group holding every write.
        single_groups: std::sync::atomic::AtomicUsize,
    }

    impl Coverage {
        fn record(&self, groups: &[(usize, usize)], writes: usize) {
            let bump = |counter: &std::sync::atomic::AtomicUsize, reached: bool| {
                if reached {
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            };
            bump(&self.shared_groups, groups.iter().any(|&(_, size)| size > 1));
            bump(&self.leader_changes, groups.windows(2).any(|pair| pair[0].0 != pair[1].0));
            bump(&self.single_groups, groups.iter().any(|&(_, size)| size == writes));
        }

        fn count(counter: &std::sync::atomic::AtomicUsize) -> usize {
            counter.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// Runs one writer per entry of `writes` (entries, rejected) on its own thread, plus
    /// `extra` on the model's main thread, and checks the outcomes: each accepted write
    /// returned `Ok` once, stamped and inserted; each rejected one returned its error,
    /// untouched; the accepted ranges cover 1..=total exactly; and the queue is idle.
    fn run_writers(db: ModelDb, writes: &'static [(u64, bool)], coverage: &Coverage, extra: impl FnOnce(&ModelDb)) {
        let db = Arc::new(db);
        let threads: Vec<_> = writes
            .iter()
            .enumerate()
            .map(|(index, &(entries, rejected))| {
                let db = Arc::clone(&db);
                thread::spawn(move || {
                    let (result, write) = db.write(index, entries, rejected);
                    (result.is_ok(), write.stamp(), write.is_inserted())
                })
            })
            .collect();
        extra(&db);
        let mut ranges = Vec::new();
        for (thread, &(entries, rejected)) in threads.into_iter().zip(writes) {
            let (ok, stamp, inserted) = thread.join().expect("writer");
            assert_eq!(ok, !rejected, "a writer returned the wrong outcome");
            assert_eq!(inserted, !rejected, "a writer returned before its write was in");
            match stamp {
                Some((first, last)) => {
                    assert!(!rejected, "a rejected write was given sequence numbers");
                    assert_eq!(last + 1 - first, entries, "a write got the wrong number of sequence numbers");
                    ranges.push((first, last));
                }
                None => assert!(rejected, "an accepted write returned without sequence numbers"),
            }
        }
        ranges.sort_unstable();
        let mut expected_first = 1;
        for (first, last) in ranges {
            assert_eq!(first, expected_first, "sequence ranges overlap or leave a gap");
            expected_first = last + 1;
        }
        // SAFETY: every thread has been joined.
        let last = db.last_sequence.with(|last| unsafe { *last });
        assert_eq!(last + 1, expected_first, "sequence numbers assigned to no write");
        assert!(db.is_idle(), "the queue kept a writer or a leader");
        coverage.record(&db.groups.lock().expect("model notebook"), writes.len());
    }

    /// Three writers, groups of at most two writes (so a leader runs a second round or hands
    /// leadership over), the leader inserting each group itself, and one write rejected when
    /// its group forms.
    #[test]
    fn groups_hand_off_and_reject() {
        let coverage = std::sync::Arc::new(Coverage::default());
        let seen = std::sync::Arc::clone(&coverage);
        model(3, move || run_writers(ModelDb::new(2, false), &[(1, false), (2, true), (3, false)], &seen, |_| {}));
        assert!(Coverage::count(&coverage.shared_groups) > 0 && Coverage::count(&coverage.leader_changes) > 0);
    }

    /// Three writers in groups of any size, inserting in parallel: the members insert their
    /// own writes while the leader inserts its own and waits for them.
    #[test]
    fn parallel_insert() {
        let coverage = std::sync::Arc::new(Coverage::default());
        let seen = std::sync::Arc::clone(&coverage);
        model(3, move || {
            run_writers(ModelDb::new(usize::MAX, true), &[(1, false), (2, false), (3, false)], &seen, |_| {})
        });
        assert!(Coverage::count(&coverage.single_groups) > 0 && Coverage::count(&coverage.leader_changes) > 0);
    }

    /// Two writers and a token holder (as `flush` is): the token must get leadership alone,
    /// with no group in flight (its action touches the leaders' sequence counter, so an
    /// overlap is a causality violation), and must never be taken into a group (it would then
    /// wait for a leadership that never comes: a deadlock).
    #[test]
    fn token_leads_alone() {
        let coverage = std::sync::Arc::new(Coverage::default());
        let seen = std::sync::Arc::clone(&coverage);
        model(3, move || {
            run_writers(ModelDb::new(usize::MAX, true), &[(1, false), (2, false)], &seen, |db| {
                let token = Arc::new(ModelWrite {
                    entries: 0,
                    rejected: false,
                    stamp: UnsafeCell::new(None),
                    inserted: UnsafeCell::new(false),
                });
                // SAFETY: loom checks that no leader's access is concurrent with this.
                db.queue
                    .with_leadership(Arc::clone(&token), || db.last_sequence.with_mut(|last| unsafe { *last += 0 }));
                assert_eq!(token.stamp(), None, "the token was taken into a group");
            })
        });
        assert!(Coverage::count(&coverage.shared_groups) > 0 && Coverage::count(&coverage.leader_changes) > 0);
    }
}
