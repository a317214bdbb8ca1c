//! The journal: the line protocol by which a driver tells a parent process (or a history file)
//! what it did, in tick order, so that the parent can rebuild the expected state after killing
//! it.
//!
//! Lines, one event each, fields separated by single spaces:
//! - `ready <cycle>`: the database is open and the workload starts.
//! - `B <tick> <kind> <key>=<value>[,<key>=<value>...]`: a write began (it is written to the
//!   pipe before the database sees the write). `<value>` is a hexadecimal value id, or `-` for a
//!   delete. `<kind>` names the operation (put, delete, batch, group, ...), for the history.
//! - `A <begin-tick> <tick>`: the write that began at `<begin-tick>` was acknowledged.
//! - `F <begin-tick> <tick>`: it failed; whether it took effect is unknown.
//! - `R <start-tick> <end-tick> <key>=<value>`: a read saw this (only when reads are recorded,
//!   for a future isolation checker; the crash parent ignores them).
//! - `end <cycle>`: the driver stopped by itself after verifying its state.
//!
//! A begin line must reach the pipe before the write is attempted: if it did not, a killed
//! driver could leave a value the parent never heard of. Acknowledgements may be late (a
//! missing `A` only makes the parent more tolerant).
//!
//! Concurrency contract: a [`Journal`] is shared by all driver threads; one mutex orders the
//! lines and the ticks together, so line order is tick order.
//!
//! Invariants: ticks in `B`, `A` and `F` lines strictly increase down the journal.

use std::io::Write;
use std::sync::Mutex;

use crate::model::{ExpectedState, Tick, ValueId};

/// Where journal lines go.
pub struct Journal {
    sink: Mutex<Option<Box<dyn Write + Send>>>,
    record_reads: bool,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Journal").field("record_reads", &self.record_reads).finish_non_exhaustive()
    }
}

/// Formats `(key, value)` pairs as the journal writes them.
fn format_writes(writes: &[(usize, Option<ValueId>)]) -> String {
    let parts: Vec<String> = writes
        .iter()
        .map(|(key, value)| match value {
            Some(id) => format!("{key}={id:x}"),
            None => format!("{key}=-"),
        })
        .collect();
    parts.join(",")
}

impl Journal {
    /// A journal writing to `sink` (unbuffered writes are expected: each line is one write
    /// call), or to nowhere with `None`; reads are logged only with `record_reads`.
    pub fn new(sink: Option<Box<dyn Write + Send>>, record_reads: bool) -> Journal {
        Journal { sink: Mutex::new(sink), record_reads }
    }

    /// Writes a free-form line (`ready`, `end`).
    pub fn line(&self, text: &str) -> std::io::Result<()> {
        let mut sink = self.sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match sink.as_mut() {
            Some(sink) => {
                sink.write_all(format!("{text}\n").as_bytes())?;
                sink.flush()
            }
            None => Ok(()),
        }
    }

    /// Takes a tick for a write that is about to begin, logs it and registers it in `state`.
    pub fn begin_write(
        &self,
        state: &ExpectedState,
        kind: &str,
        writes: &[(usize, Option<ValueId>)],
    ) -> std::io::Result<Tick> {
        let mut sink = self.sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let tick = state.next_tick();
        state.begin_write(tick, writes);
        if let Some(sink) = sink.as_mut() {
            sink.write_all(format!("B {tick} {kind} {}\n", format_writes(writes)).as_bytes())?;
            sink.flush()?;
        }
        Ok(tick)
    }

    /// Takes a tick for the end of the write that began at `begin`, logs it, and records an
    /// acknowledgement in `state` (a failure leaves the write unfinished forever).
    pub fn end_write(
        &self,
        state: &ExpectedState,
        begin: Tick,
        keys: &[usize],
        acknowledged: bool,
    ) -> std::io::Result<()> {
        let mut sink = self.sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let tick = state.next_tick();
        if acknowledged {
            state.acknowledge_write(begin, tick, keys);
        }
        if let Some(sink) = sink.as_mut() {
            let letter = if acknowledged { 'A' } else { 'F' };
            sink.write_all(format!("{letter} {begin} {tick}\n").as_bytes())?;
            sink.flush()?;
        }
        Ok(())
    }

    /// Logs what a read saw, when reads are recorded.
    pub fn read(&self, start: Tick, end: Tick, key: usize, value: Option<ValueId>) -> std::io::Result<()> {
        if !self.record_reads {
            return Ok(());
        }
        self.line(&format!("R {start} {end} {}", format_writes(&[(key, value)])))
    }
}

/// One parsed journal event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The driver opened the database.
    Ready,
    /// A write began.
    Begin {
        /// Its tick.
        tick: Tick,
        /// Its writes.
        writes: Vec<(usize, Option<ValueId>)>,
    },
    /// A write ended.
    End {
        /// The tick it began at.
        begin: Tick,
        /// Its end tick.
        tick: Tick,
        /// True for `A`, false for `F`.
        acknowledged: bool,
    },
    /// A recorded read.
    Read,
    /// The driver stopped by itself.
    Finished,
}

/// Parses one journal line. A line cut short by a kill is `None` (and must be the last).
pub fn parse_line(line: &str) -> Option<Event> {
    let mut fields = line.split(' ');
    match fields.next()? {
        "ready" => Some(Event::Ready),
        "end" => Some(Event::Finished),
        "R" => Some(Event::Read),
        "B" => {
            let tick = fields.next()?.parse().ok()?;
            let _kind = fields.next()?;
            let mut writes = Vec::new();
            for pair in fields.next()?.split(',') {
                let (key, value) = pair.split_once('=')?;
                let key = key.parse().ok()?;
                let value = if value == "-" { None } else { Some(u64::from_str_radix(value, 16).ok()?) };
                writes.push((key, value));
            }
            Some(Event::Begin { tick, writes })
        }
        letter @ ("A" | "F") => {
            let begin = fields.next()?.parse().ok()?;
            let tick = fields.next()?.parse().ok()?;
            Some(Event::End { begin, tick, acknowledged: letter == "A" })
        }
        _ => None,
    }
}

/// Replays events into `state`, as the driver applied them. Returns the number of writes begun.
pub fn replay(state: &ExpectedState, events: &[Event]) -> usize {
    let mut begun = 0;
    let mut keys_of: std::collections::HashMap<Tick, Vec<usize>> = std::collections::HashMap::new();
    for event in events {
        match event {
            Event::Begin { tick, writes } => {
                state.advance_clock_to(*tick);
                state.begin_write(*tick, writes);
                keys_of.insert(*tick, writes.iter().map(|(key, _)| *key).collect());
                begun += 1;
            }
            Event::End { begin, tick, acknowledged } => {
                state.advance_clock_to(*tick);
                if *acknowledged {
                    let keys = keys_of.remove(begin).unwrap_or_default();
                    state.acknowledge_write(*begin, *tick, &keys);
                }
            }
            Event::Ready | Event::Read | Event::Finished => {}
        }
    }
    begun
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KeySpace;

    #[test]
    fn lines_round_trip_through_a_replay() {
        let state = ExpectedState::new(KeySpace { plain_keys: 4, groups: 0, group_size: 1, column_families: 1 }, &[]);
        let buffer = std::sync::Arc::new(Mutex::new(Vec::<u8>::new()));
        struct Shared(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(data);
                Ok(data.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let journal = Journal::new(Some(Box::new(Shared(buffer.clone()))), true);
        let first = journal.begin_write(&state, "put", &[(1, Some(0xab))]).unwrap();
        journal.end_write(&state, first, &[1], true).unwrap();
        let second = journal.begin_write(&state, "batch", &[(2, None), (3, Some(5))]).unwrap();
        journal.end_write(&state, second, &[2, 3], false).unwrap();
        journal.read(4, 5, 1, Some(0xab)).unwrap();
        let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
        let events: Vec<Event> = text.lines().map(|line| parse_line(line).unwrap()).collect();
        let rebuilt = ExpectedState::new(KeySpace { plain_keys: 4, groups: 0, group_size: 1, column_families: 1 }, &[]);
        assert_eq!(replay(&rebuilt, &events), 2);
        for key in 0..4 {
            assert_eq!(rebuilt.final_values(key), state.final_values(key), "key {key}");
        }
        assert_eq!(rebuilt.final_values(3), vec![None, Some(5)]);
        assert_eq!(parse_line("B 12 put 1="), None);
    }
}
