//! An exhaustive interleaving model of the stress driver's expected-state protocol, the harness's
//! own small concurrency model (no loom or shuttle needed: the protocol's shared steps are few
//! enough to enumerate every schedule).
//!
//! Threads run scripts of writes (begin tick, apply to a simulated linearizable database, end
//! tick) and reads (register, observe, check) over one or two keys. For every interleaving of
//! their steps, and at every point of it (a SIGKILL can land anywhere), the test checks that the
//! `ExpectedState` (1) accepts what the simulated database shows (no false alarm), and (2)
//! offers exactly the values an independent oracle computed from step order allows (so it would
//! reject a lost acknowledged write or a stale read, not merely accept everything).

use std::collections::BTreeSet;

use riptide_stress::model::{ExpectedState, KeySpace, ReadGuard, Tick, ValueId};

/// One step of a thread's script.
#[derive(Clone, Debug)]
enum Step {
    /// A write of these keys takes its begin tick.
    Begin(Vec<(usize, Option<ValueId>)>),
    /// The database applies the thread's current write atomically.
    Apply,
    /// The write is acknowledged.
    End,
    /// A read of a key registers.
    StartRead(usize),
    /// The read observes the database.
    Observe,
    /// The read ends and is checked.
    FinishRead,
}

fn write(writes: &[(usize, ValueId)]) -> Vec<Step> {
    vec![Step::Begin(writes.iter().map(|&(key, value)| (key, Some(value))).collect()), Step::Apply, Step::End]
}

fn read(key: usize) -> Vec<Step> {
    vec![Step::StartRead(key), Step::Observe, Step::FinishRead]
}

/// What the oracle knows about a write: its keys, and the global step numbers of its begin and
/// end (`None` while unacknowledged).
#[derive(Clone, Debug)]
struct OracleWrite {
    writes: Vec<(usize, Option<ValueId>)>,
    begin: usize,
    end: Option<usize>,
}

/// The oracle's legal values of `key` for a read that started at step `start` and ended at step
/// `end` (`usize::MAX` for both: the state after a kill).
fn oracle_values(history: &[OracleWrite], key: usize, start: usize, end: usize) -> BTreeSet<Option<ValueId>> {
    // The initial value (absent) acts as a write that ended at step 0, before everything.
    let initial = OracleWrite { writes: vec![(key, None)], begin: 0, end: Some(0) };
    let candidates: Vec<&OracleWrite> = std::iter::once(&initial)
        .chain(history.iter().filter(|write| write.writes.iter().any(|(written, _)| *written == key)))
        .collect();
    candidates
        .iter()
        .filter(|write| write.begin <= end)
        .filter(|write| {
            // Hidden when an acknowledged write of the key began after this one ended and was
            // itself acknowledged before the read started.
            !candidates.iter().any(|other| match (write.end, other.end) {
                (Some(write_end), Some(other_end)) => other.begin > write_end && other_end < start,
                _ => false,
            })
        })
        .map(|write| write.writes.iter().find(|(written, _)| *written == key).and_then(|(_, value)| *value))
        .collect()
}

/// A write in flight: its begin tick, its writes, and its index in the oracle's history.
type WriteInFlight = (Tick, Vec<(usize, Option<ValueId>)>, usize);

/// A read in flight: its registration, key, start step and what it observed.
type ReadInFlight<'a> = (ReadGuard<'a>, usize, usize, Option<ValueId>);

/// Replays `schedule` (thread numbers, one per step) and checks every point of it.
fn check_schedule(scripts: &[Vec<Step>], schedule: &[usize], keys: usize) {
    let space = KeySpace { plain_keys: keys, groups: 0, group_size: 1, column_families: 1 };
    let state = ExpectedState::new(space, &[]);
    let mut database: Vec<Option<ValueId>> = vec![None; keys];
    let mut position = vec![0usize; scripts.len()];
    let mut current_write: Vec<Option<WriteInFlight>> = vec![None; scripts.len()];
    let mut current_read: Vec<Option<ReadInFlight<'_>>> = (0..scripts.len()).map(|_| None).collect();
    let mut history: Vec<OracleWrite> = Vec::new();
    for (index, &thread) in schedule.iter().enumerate() {
        let step_number = index + 1;
        let step = &scripts[thread][position[thread]];
        position[thread] += 1;
        match step {
            Step::Begin(writes) => {
                let tick = state.next_tick();
                state.begin_write(tick, writes);
                history.push(OracleWrite { writes: writes.clone(), begin: step_number, end: None });
                current_write[thread] = Some((tick, writes.clone(), history.len() - 1));
            }
            Step::Apply => {
                let (_, writes, _) = current_write[thread].as_ref().expect("a write began");
                for (key, value) in writes {
                    database[*key] = *value;
                }
            }
            Step::End => {
                let (begin, writes, oracle_index) = current_write[thread].take().expect("a write began");
                let end = state.next_tick();
                let keys: Vec<usize> = writes.iter().map(|(key, _)| *key).collect();
                state.acknowledge_write(begin, end, &keys);
                history[oracle_index].end = Some(step_number);
            }
            Step::StartRead(key) => {
                current_read[thread] = Some((state.begin_read(), *key, step_number, None));
            }
            Step::Observe => {
                let read = current_read[thread].as_mut().expect("a read started");
                read.3 = database[read.1];
            }
            Step::FinishRead => {
                let (guard, key, start_step, observed) = current_read[thread].take().expect("a read started");
                let legal: BTreeSet<Option<ValueId>> =
                    state.legal_values(key, guard.start(), state.now()).into_iter().collect();
                assert!(
                    legal.contains(&observed),
                    "schedule {schedule:?}: read of key {key} saw {observed:?}, legal {legal:?}"
                );
                let oracle = oracle_values(&history, key, start_step, step_number);
                assert_eq!(legal, oracle, "schedule {schedule:?}: read of key {key} at step {step_number}");
            }
        }
        // A kill here: what the database holds must be legal, and the legal set must be
        // exactly the oracle's.
        for (key, held) in database.iter().enumerate() {
            let legal: BTreeSet<Option<ValueId>> = state.final_values(key).into_iter().collect();
            assert!(legal.contains(held), "schedule {schedule:?}: a kill after step {step_number} flags key {key}");
            let oracle = oracle_values(&history, key, usize::MAX, usize::MAX);
            assert_eq!(legal, oracle, "schedule {schedule:?}: final values of key {key} after step {step_number}");
        }
    }
}

/// Every interleaving of the scripts, as sequences of thread numbers.
fn schedules(lengths: &[usize]) -> Vec<Vec<usize>> {
    fn extend(remaining: &mut Vec<usize>, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if remaining.iter().all(|&left| left == 0) {
            out.push(prefix.clone());
            return;
        }
        for thread in 0..remaining.len() {
            if remaining[thread] > 0 {
                remaining[thread] -= 1;
                prefix.push(thread);
                extend(remaining, prefix, out);
                prefix.pop();
                remaining[thread] += 1;
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut lengths.to_vec(), &mut Vec::new(), &mut out);
    out
}

fn check_all(scripts: &[Vec<Step>], keys: usize) -> usize {
    let lengths: Vec<usize> = scripts.iter().map(Vec::len).collect();
    let all = schedules(&lengths);
    for schedule in &all {
        check_schedule(scripts, schedule, keys);
    }
    all.len()
}

#[test]
fn two_writers_and_a_reader_of_one_key() {
    let scripts = vec![write(&[(0, 1)]), write(&[(0, 2)]), [read(0), read(0)].concat()];
    assert_eq!(check_all(&scripts, 1), 18_480);
}

#[test]
fn a_batch_racing_single_writes_and_reads_of_two_keys() {
    let scripts =
        vec![[write(&[(0, 1)]), read(1), write(&[(1, 4)])].concat(), [write(&[(0, 2), (1, 2)]), read(0)].concat()];
    assert_eq!(check_all(&scripts, 2), 5_005);
}

#[test]
fn the_oracle_rejects_a_lost_acknowledged_write() {
    // Sequential writes 1 then 2: after both are acknowledged, only 2 is legal; a database that
    // shows 1 (the second write lost) must be flagged.
    let space = KeySpace { plain_keys: 1, groups: 0, group_size: 1, column_families: 1 };
    let state = ExpectedState::new(space, &[]);
    for value in [1, 2] {
        let begin = state.next_tick();
        state.begin_write(begin, &[(0, Some(value))]);
        let end = state.next_tick();
        state.acknowledge_write(begin, end, &[0]);
    }
    assert_eq!(state.final_values(0), vec![Some(2)]);
    let guard = state.begin_read();
    assert!(!state.legal_values(0, guard.start(), state.now()).contains(&Some(1)), "a stale read is accepted");
}
