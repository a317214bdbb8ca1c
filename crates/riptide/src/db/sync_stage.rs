//! The sync stage of self-service writes: synced writes share `fdatasync` calls without a
//! leader handing work from thread to thread.
//!
//! A synced self-service write first hands its record to the operating system like any
//! self-service write (the stage's flush, `self_service`), then asks this stage for a sync that
//! covers its record's end. At most one sync of the stage runs at a time. A writer that finds
//! one running waits for it; when it ends, every waiter it covered returns, and the next sync,
//! which covers every record handed over in the meantime, is run by the same thread when two
//! or more waiters are left uncovered, or by the one waiter left otherwise. So while
//! one writer syncs, the others hand their records over and queue behind it, and the next sync
//! serves them all; nobody has to wake a sleeping writer to take over a queue before the log can
//! move on, which is what held synced writes back when they queued for a group leader (a leader
//! that kept leading held its own thread back, and handing leadership on waited for the
//! scheduler; bench/README.md).
//!
//! Before each sync its runner gathers (`gather`): it waits, yielding its core, until as many
//! writers wait for the sync as the last sync left waiting or returned, for at most a quarter
//! of a sync. Writers returned by one sync come back for the next within microseconds of each
//! other, and without the wait the first of them would sync alone.
//!
//! Positions are the self-service stage's byte counts (`self_service`: bytes ever staged since
//! the database opened), not file offsets: a sync covers everything flushed before it began,
//! whichever log file it went to, because the caller's sync action syncs closed logs too.
//!
//! Concurrency contract: `sync_through` may be called from any number of threads; the `sync`
//! action it is given runs with no other action of the stage running, and returns the position
//! it made durable (a position reached before the action began). A failed action covers
//! nothing: its caller returns the error, and the next waiter runs its own action, which fails
//! the same way once the log refuses work (I10).
//!
//! Invariants (I50): `synced_end_bytes` only grows, and only to a position an action returned;
//! a call returns `Ok` only once a successful action that began after its position was flushed
//! has ended, or its own action succeeded; at most one action runs at a time; a waiter sleeps
//! only while some thread owns the stage's sync, and is told exactly once, either that a sync
//! covered it or that the next action is its own. The loom model at the end of this file checks
//! these with three writers.

use crate::error::Result;
use crate::sync::{Arc, Condvar, Mutex};

/// The action's runner syncs on for the waiters it did not cover when at least this many wait:
/// they all come back from one more sync, and nobody waits for a sleeping thread to be
/// scheduled first. With fewer, the first of them runs the next action, so that the runner
/// returns to its own next write while the device works.
const SYNC_ON_MIN_WAITERS: usize = 2;

/// A runner syncs on at most this many times after its own sync, so that its own write is not
/// held back for long while writers keep coming.
const MAX_SYNCS_PER_RUNNER: usize = 4;

/// A runner about to start a sync waits for the writers the previous sync returned for at most
/// this fraction of the previous sync's duration ...
const GATHER_FRACTION_OF_SYNC: u32 = 4;

/// ... and never longer than this.
const MAX_GATHER: std::time::Duration = std::time::Duration::from_micros(250);

/// What a waiter is told.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Turn {
    Waiting,
    /// A sync covered your position.
    Covered,
    /// Run the next action: the stage's sync is yours now.
    Run,
}

/// One writer waiting for a sync; woken alone, under its own mutex.
struct Waiter {
    end_bytes: u64,
    turn: Mutex<Turn>,
    told: Condvar,
}

impl Waiter {
    fn tell(&self, turn: Turn) {
        *self.turn.lock() = turn;
        self.told.notify_one();
    }

    fn wait(&self) -> Turn {
        let mut turn = self.turn.lock();
        while *turn == Turn::Waiting {
            self.told.wait(&mut turn);
        }
        *turn
    }
}

/// What the stage knows, under its mutex.
struct State {
    /// Every position up to this one is durable.
    synced_end_bytes: u64,
    /// True while some thread owns the stage's sync (runs an action or is about to).
    syncing: bool,
    /// Writers waiting for a sync, in arrival order (so in position order, give or take the
    /// order in which their flushes and their arrivals here interleave).
    waiters: Vec<Arc<Waiter>>,
    /// How many writers the next sync may expect: those still waiting when the last sync
    /// ended plus those it returned to their callers (its runner included when it left), who
    /// are likely to come back with their next writes. 0 after a failed sync.
    expected_next_group: usize,
    /// How long the last sync action took.
    last_sync_duration: std::time::Duration,
}

/// The stage; one per database (see the module documentation).
pub(crate) struct SyncStage {
    state: Mutex<State>,
}

impl SyncStage {
    pub(crate) fn new() -> SyncStage {
        SyncStage {
            state: Mutex::new(State {
                synced_end_bytes: 0,
                syncing: false,
                waiters: Vec::new(),
                expected_next_group: 0,
                last_sync_duration: std::time::Duration::ZERO,
            }),
        }
    }

    /// Returns once every position up to `end_bytes` (already flushed) is durable: after an
    /// action that covered it, run here or by another writer. `sync` makes everything flushed
    /// so far durable and returns that position; it may run more than once here, on behalf of
    /// writers waiting behind this one.
    pub(crate) fn sync_through(&self, end_bytes: u64, mut sync: impl FnMut() -> Result<u64>) -> Result<()> {
        {
            let mut state = self.state.lock();
            if state.synced_end_bytes >= end_bytes {
                return Ok(());
            }
            if state.syncing {
                let waiter = Arc::new(Waiter { end_bytes, turn: Mutex::new(Turn::Waiting), told: Condvar::new() });
                state.waiters.push(Arc::clone(&waiter));
                drop(state);
                if waiter.wait() == Turn::Covered {
                    return Ok(());
                }
            } else {
                state.syncing = true;
            }
        }
        // This thread owns the stage's sync now. Its action runs without the mutex, so that
        // writers queue while it waits for the device.
        let mut own_result = None;
        for syncs in 1.. {
            // The runner takes part in its first sync only; later ones are for the others.
            self.gather(syncs == 1);
            let sync_start = std::time::Instant::now();
            let synced = sync();
            let sync_duration = sync_start.elapsed();
            let mut state = self.state.lock();
            let covered: Vec<Arc<Waiter>> = match &synced {
                Ok(position) => {
                    debug_assert!(*position >= end_bytes, "I50: a sync action covers its runner's position");
                    state.synced_end_bytes = state.synced_end_bytes.max(*position);
                    let synced_end_bytes = state.synced_end_bytes;
                    let (covered, waiting) =
                        std::mem::take(&mut state.waiters).into_iter().partition(|w| w.end_bytes <= synced_end_bytes);
                    state.waiters = waiting;
                    covered
                }
                // A failed action covers nothing; the next waiter runs its own, which fails the
                // same way once the log refuses work.
                Err(_) => Vec::new(),
            };
            if own_result.is_none() {
                own_result = Some(synced.as_ref().map(|_| ()).map_err(|error| error.duplicate()));
            }
            let sync_on = synced.is_ok() && state.waiters.len() >= SYNC_ON_MIN_WAITERS && syncs < MAX_SYNCS_PER_RUNNER;
            state.expected_next_group =
                if synced.is_ok() { state.waiters.len() + covered.len() + usize::from(!sync_on) } else { 0 };
            state.last_sync_duration = sync_duration;
            let next = if sync_on || state.waiters.is_empty() { None } else { Some(state.waiters.remove(0)) };
            if !sync_on && next.is_none() {
                state.syncing = false;
            }
            drop(state);
            // The next runner first: the device waits for it.
            if let Some(next) = next {
                next.tell(Turn::Run);
            }
            for waiter in covered {
                waiter.tell(Turn::Covered);
            }
            if !sync_on {
                break;
            }
        }
        own_result.unwrap_or(Ok(()))
    }

    /// Before a sync: while fewer writers wait for it than the last sync left waiting or
    /// returned (`expected_next_group`; the runner counts when the sync is also its own,
    /// `runner_takes_part`), waits a little for the rest, yielding its core, so that one sync
    /// serves them all. Writers returned together come back together, each after a few
    /// microseconds of work, but the first to come back runs the next sync; with no wait, a
    /// sync took whoever had come back by then and the rest queued for the one after it, so
    /// two writers took a sync each and four split into groups of one and three
    /// (bench/README.md). The wait is bounded by a fraction of a sync, so a writer that does
    /// not come back (a connection busy with its next statement) costs little, and the next
    /// sync expects only the writers this one returns. Models under loom do not wait (the
    /// wait decides only how syncs are grouped, not what they cover).
    fn gather(&self, runner_takes_part: bool) {
        if cfg!(loom) {
            return;
        }
        let runner = usize::from(runner_takes_part);
        let (expected_writers, wait_limit) = {
            let state = self.state.lock();
            (state.expected_next_group, (state.last_sync_duration / GATHER_FRACTION_OF_SYNC).min(MAX_GATHER))
        };
        if expected_writers <= runner {
            return;
        }
        let start = std::time::Instant::now();
        while self.state.lock().waiters.len() + runner < expected_writers && start.elapsed() < wait_limit {
            std::thread::yield_now();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_covered_position_returns_without_an_action() {
        let stage = SyncStage::new();
        stage.sync_through(100, || Ok(150)).unwrap();
        stage.sync_through(150, || panic!("position 150 was covered already")).unwrap();
        let mut ran = 0;
        stage
            .sync_through(151, || {
                ran += 1;
                Ok(151)
            })
            .unwrap();
        assert_eq!(ran, 1);
    }

    #[test]
    fn a_failed_action_covers_nothing_and_the_next_caller_runs_its_own() {
        let stage = SyncStage::new();
        let failed = stage.sync_through(10, || Err(Error::invalid("device gone")));
        assert!(failed.is_err());
        let mut ran = 0;
        stage
            .sync_through(10, || {
                ran += 1;
                Ok(10)
            })
            .unwrap();
        assert_eq!(ran, 1, "the failure must not count as a sync");
    }

    #[test]
    fn the_next_sync_expects_the_writers_the_last_one_returned() {
        // A runner alone: the next sync expects it back, and nobody else, so a lone writer
        // never waits before its syncs.
        let stage = SyncStage::new();
        stage.sync_through(10, || Ok(10)).unwrap();
        assert_eq!(stage.state.lock().expected_next_group, 1);
        // A failed sync returns nobody: the next runner does not wait for anyone.
        assert!(stage.sync_through(20, || Err(Error::invalid("device gone"))).is_err());
        assert_eq!(stage.state.lock().expected_next_group, 0);
        // Two writers queued behind a running sync: the runner syncs on for them, and the
        // next sync expects all three back (the runner left after its second sync).
        let stage = Arc::new(SyncStage::new());
        let (entered_sender, entered) = std::sync::mpsc::channel();
        let (release_sender, release) = std::sync::mpsc::channel::<()>();
        let runner = {
            let stage = Arc::clone(&stage);
            std::thread::spawn(move || {
                let mut actions = 0;
                stage
                    .sync_through(1, || {
                        actions += 1;
                        if actions == 1 {
                            // The first sync began before the others flushed: it covers
                            // only the runner's position.
                            entered_sender.send(()).unwrap();
                            release.recv().unwrap();
                            return Ok(1);
                        }
                        Ok(3)
                    })
                    .unwrap();
                assert_eq!(actions, 2, "the runner synced on for the two left uncovered");
            })
        };
        entered.recv().unwrap();
        let queued: Vec<_> = (2..=3)
            .map(|position| {
                let stage = Arc::clone(&stage);
                std::thread::spawn(move || stage.sync_through(position, || panic!("the runner syncs on")).unwrap())
            })
            .collect();
        while stage.state.lock().waiters.len() < 2 {
            std::thread::yield_now();
        }
        release_sender.send(()).unwrap();
        runner.join().unwrap();
        for writer in queued {
            writer.join().unwrap();
        }
        assert_eq!(stage.state.lock().expected_next_group, 3);
    }

    /// Many threads flush and sync positions of their own: no action overlaps another, and
    /// every call returns only once an action that began after its position was flushed ended.
    #[test]
    fn concurrent_callers_are_covered_by_syncs_that_began_after_their_flush() {
        let stage = Arc::new(SyncStage::new());
        // The "log": positions handed over so far, and the position the last finished action
        // made durable.
        let flushed = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicU64::new(0));
        let actions = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (stage, flushed, durable, running, actions) = (
                    Arc::clone(&stage),
                    Arc::clone(&flushed),
                    Arc::clone(&durable),
                    Arc::clone(&running),
                    Arc::clone(&actions),
                );
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        let end = flushed.fetch_add(1, Ordering::SeqCst) + 1;
                        stage
                            .sync_through(end, || {
                                assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "two actions overlap");
                                actions.fetch_add(1, Ordering::Relaxed);
                                let target = flushed.load(Ordering::SeqCst);
                                std::hint::spin_loop();
                                durable.fetch_max(target, Ordering::SeqCst);
                                running.fetch_sub(1, Ordering::SeqCst);
                                Ok(target)
                            })
                            .unwrap();
                        assert!(durable.load(Ordering::SeqCst) >= end, "returned before its position was durable");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert!(actions.load(Ordering::Relaxed) <= 8_000);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::{Arc, AtomicU64, Ordering};

    /// Three writers, each flushing one position and syncing through it, with actions that
    /// cover whatever was flushed when they began: every writer returns with its position
    /// durable, no two actions overlap, and nobody sleeps forever.
    #[test]
    fn loom_models_sync_stage_covers_every_writer() {
        crate::sync::model(3, || {
            let stage = Arc::new(SyncStage::new());
            let flushed = Arc::new(AtomicU64::new(0));
            let durable = Arc::new(AtomicU64::new(0));
            let running = Arc::new(AtomicU64::new(0));
            let writers: Vec<_> = (0..3)
                .map(|_| {
                    let (stage, flushed, durable, running) =
                        (Arc::clone(&stage), Arc::clone(&flushed), Arc::clone(&durable), Arc::clone(&running));
                    loom::thread::spawn(move || {
                        let end = flushed.fetch_add(1, Ordering::SeqCst) + 1;
                        stage
                            .sync_through(end, || {
                                assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "two actions overlap");
                                let target = flushed.load(Ordering::SeqCst);
                                durable.fetch_max(target, Ordering::SeqCst);
                                running.fetch_sub(1, Ordering::SeqCst);
                                Ok(target)
                            })
                            .unwrap();
                        assert!(durable.load(Ordering::SeqCst) >= end);
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
        });
    }
}
