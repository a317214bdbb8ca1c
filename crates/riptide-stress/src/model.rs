//! The expected state: for every key, the set of values it may legally hold while writes are in
//! flight, and the key and value encodings that let a value name its key and its writer.
//!
//! Time is a logical clock of ticks. A write takes one tick when it begins (before it is handed
//! to the database) and one when it ends (after the database returned). A write whose end tick
//! is before another write's begin tick is ordered before it (real-time order); writes whose
//! intervals overlap may take effect in either order. So the value a key holds at a moment is
//! the value of some write that began before that moment and that no later, acknowledged write
//! had superseded by then. [`ExpectedState::legal_values`] answers exactly that question for a
//! read that ran between two ticks; [`ExpectedState::final_values`] answers it for the state left
//! after every thread stopped, or after the process was killed (unfinished writes may or may
//! not have taken effect, so they stay candidates forever).
//!
//! Concurrency contract: [`ExpectedState`] is shared by all driver threads. Each key has its own
//! mutex, held for a few instructions; the clock is an atomic; the registry of reads in progress
//! (which keeps superseded writes alive while a read that may have seen them is running) has one
//! mutex. The caller assigns ticks in a single total order (the journal's), so the same state is
//! rebuilt exactly by a parent process that replays the journal.
//!
//! Invariants: every key always has at least one record whose `superseded_at` is `None` (the
//! last acknowledged write is never superseded by itself); records are only dropped once no
//! read in progress can have started before they were superseded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Identifies one write of one key: unique over the whole life of a database, across processes
/// (the cycle number is part of it), so that an old value that reappears is recognised.
pub type ValueId = u64;

/// A logical time: the journal's line order.
pub type Tick = u64;

/// The ticks at which a record is created for the initial state of a run.
pub const INITIAL_TICK: Tick = 0;

/// The keys the driver uses, in each of its column families: plain keys, written by any
/// operation, and atomic groups, whose members are only ever written together by one batch, so
/// that a reader that sees two members with different values has caught a torn batch or a read
/// that is not one point in time.
///
/// Every column family holds the same key names; a key index names a key in one family
/// (`family * family_keys() + position`), and a value names its index, so a value that shows
/// up in the wrong family is caught. Family 0 is the default one, family 1 is never dropped,
/// and families from 2 on may be dropped and created again (their keys all become absent).
/// The even-numbered groups of families 0 and 1 are *linked*: they are always written together,
/// in one batch across both families, so a torn cross-family batch is caught too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpace {
    /// Keys `k00000` and up, per family.
    pub plain_keys: usize,
    /// Groups `m0000/0` and up, per family.
    pub groups: usize,
    /// Members per group.
    pub group_size: usize,
    /// Column families: the default one and `stress-1` and up.
    pub column_families: usize,
}

impl Default for KeySpace {
    fn default() -> KeySpace {
        KeySpace { plain_keys: 2000, groups: 64, group_size: 4, column_families: 3 }
    }
}

impl KeySpace {
    /// The keys of one column family.
    pub fn family_keys(&self) -> usize {
        self.plain_keys + self.groups * self.group_size
    }

    /// Every key index, family by family, plain keys first in each.
    pub fn total_keys(&self) -> usize {
        self.family_keys() * self.column_families
    }

    /// Every group index, family by family.
    pub fn total_groups(&self) -> usize {
        self.groups * self.column_families
    }

    /// The column family of key index `index`.
    pub fn family_of(&self, index: usize) -> usize {
        index / self.family_keys().max(1)
    }

    /// The key indices of family `family`.
    pub fn family_range(&self, family: usize) -> std::ops::Range<usize> {
        family * self.family_keys()..(family + 1) * self.family_keys()
    }

    /// The name of column family `family` (`None` for the default one).
    pub fn family_name(family: usize) -> Option<String> {
        (family > 0).then(|| format!("stress-{family}"))
    }

    /// The name `rename-family` gives a family (named `name`) between its two renames.
    pub fn temporary_family_name(name: &str) -> String {
        format!("{name}.moving")
    }

    /// True when family `family` may be dropped and created again.
    pub fn family_is_droppable(family: usize) -> bool {
        family >= 2
    }

    /// Plain key `position` of family `family`.
    pub fn plain_key(&self, family: usize, position: usize) -> usize {
        family * self.family_keys() + position
    }

    /// True when key index `index` is a plain key.
    pub fn is_plain(&self, index: usize) -> bool {
        index % self.family_keys().max(1) < self.plain_keys
    }

    /// The key index of member `member` of group `group` (a group index).
    pub fn group_member(&self, group: usize, member: usize) -> usize {
        let family = group / self.groups.max(1);
        family * self.family_keys() + self.plain_keys + (group % self.groups.max(1)) * self.group_size + member
    }

    /// The group a key index belongs to, if it is a group member.
    pub fn group_of(&self, index: usize) -> Option<usize> {
        let family = self.family_of(index);
        let offset = (index % self.family_keys().max(1)).checked_sub(self.plain_keys)?;
        let group = offset / self.group_size;
        (group < self.groups && family < self.column_families).then_some(family * self.groups + group)
    }

    /// The groups written together with `group` in one batch (`group` first): its twin in the
    /// other linked family for a linked group, else `group` alone.
    pub fn linked_groups(&self, group: usize) -> Vec<usize> {
        let family = group / self.groups.max(1);
        let local = group % self.groups.max(1);
        if self.column_families >= 2 && family < 2 && local.is_multiple_of(2) {
            vec![group, (1 - family) * self.groups + local]
        } else {
            vec![group]
        }
    }

    /// The bytes of key `index` (the same bytes in every family). Keys of a family sort in
    /// index order.
    pub fn key(&self, index: usize) -> Vec<u8> {
        let position = index % self.family_keys().max(1);
        match position.checked_sub(self.plain_keys) {
            None => format!("k{position:05}").into_bytes(),
            Some(offset) => format!("m{:04}/{}", offset / self.group_size, offset % self.group_size).into_bytes(),
        }
    }

    /// The index of a key read from family `family`, or `None` if the bytes are no key of this
    /// space.
    pub fn parse_key(&self, family: usize, key: &[u8]) -> Option<usize> {
        let text = std::str::from_utf8(key).ok()?;
        let base = family * self.family_keys();
        if let Some(digits) = text.strip_prefix('k') {
            let position: usize = digits.parse().ok()?;
            return (position < self.plain_keys && self.key(position) == key).then_some(base + position);
        }
        let rest = text.strip_prefix('m')?;
        let (group, member) = rest.split_once('/')?;
        let (group, member): (usize, usize) = (group.parse().ok()?, member.parse().ok()?);
        if group >= self.groups || member >= self.group_size {
            return None;
        }
        let index = base + self.plain_keys + group * self.group_size + member;
        (self.key(index) == key).then_some(index)
    }
}

/// Builds a value id from the cycle (process generation), the thread and a per-thread counter.
pub fn value_id(cycle: u64, thread: u64, counter: u64) -> ValueId {
    (cycle << 40) | ((thread & 0xff) << 32) | (counter & 0xffff_ffff)
}

/// The length of the filler after a value's header, derived from its id: mostly short, now and
/// then a few KiB so that values cross block boundaries.
fn filler_length_bytes(id: ValueId) -> usize {
    let mixed = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    if mixed.is_multiple_of(53) {
        2000 + (mixed % 3000) as usize
    } else {
        (mixed % 160) as usize
    }
}

/// The bytes of value `id` of key `index`: a header naming both, then a deterministic filler.
pub fn value_bytes(index: usize, id: ValueId) -> Vec<u8> {
    let mut value = format!("{index}:{id:x}:").into_bytes();
    let header_length = value.len();
    for position in 0..filler_length_bytes(id) {
        value.push(b'a' + ((position as u64 + id) % 26) as u8);
    }
    debug_assert!(value.len() >= header_length);
    value
}

/// Recovers the value id from the bytes read for key `index`, checking that the whole value is
/// exactly what [`value_bytes`] wrote. `Err` describes a value nobody wrote.
pub fn parse_value(index: usize, bytes: &[u8]) -> Result<ValueId, String> {
    let text = String::from_utf8_lossy(bytes);
    let mut parts = text.splitn(3, ':');
    let (Some(key_part), Some(id_part), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("value {:?} has no header", preview(bytes)));
    };
    if key_part.parse::<usize>().ok() != Some(index) {
        return Err(format!("value {:?} belongs to another key", preview(bytes)));
    }
    let id = u64::from_str_radix(id_part, 16).map_err(|_| format!("value {:?} has a bad id", preview(bytes)))?;
    if value_bytes(index, id) != bytes {
        return Err(format!("value {:?} is damaged (wrong length or filler)", preview(bytes)));
    }
    Ok(id)
}

/// The first bytes of a value, for messages.
fn preview(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned()
}

/// Shows a value (or its absence) in messages.
pub fn describe(value: Option<ValueId>) -> String {
    match value {
        Some(id) => format!("{id:#x}"),
        None => "absent".to_string(),
    }
}

/// One write of one key, as the expected state remembers it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WriteRecord {
    /// The value written, `None` for a delete.
    value: Option<ValueId>,
    /// The tick at which the write began.
    begin: Tick,
    /// The tick at which the database acknowledged it; `None` while in flight, and forever for
    /// a write that failed or was cut short by a kill (it may or may not have taken effect).
    end: Option<Tick>,
    /// The tick from which a later acknowledged write hides this one from every new read.
    superseded_at: Option<Tick>,
}

/// The legal values of every key, shared by the threads of a driver or rebuilt by a parent.
#[derive(Debug)]
pub struct ExpectedState {
    space: KeySpace,
    keys: Vec<Mutex<Vec<WriteRecord>>>,
    clock: AtomicU64,
    /// Start ticks of the reads in progress, with their counts.
    reads_in_progress: Mutex<BTreeMap<Tick, usize>>,
}

/// A read in progress; superseded writes it might have seen are kept until it is dropped.
pub struct ReadGuard<'a> {
    state: &'a ExpectedState,
    start: Tick,
}

impl ReadGuard<'_> {
    /// The tick at which the read started.
    pub fn start(&self) -> Tick {
        self.start
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        let mut reads = lock(&self.state.reads_in_progress);
        if let Some(count) = reads.get_mut(&self.start) {
            *count -= 1;
            if *count == 0 {
                reads.remove(&self.start);
            }
        }
    }
}

/// Locks a mutex, going on with the data if another thread panicked while holding it: the
/// records stay well formed (every update is a single push or field store), and the panic
/// itself is reported by that thread.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ExpectedState {
    /// A state where every key holds `initial[index]` (absent when `None`), as of tick
    /// [`INITIAL_TICK`].
    pub fn new(space: KeySpace, initial: &[Option<ValueId>]) -> ExpectedState {
        let keys = (0..space.total_keys())
            .map(|index| {
                let value = initial.get(index).copied().flatten();
                Mutex::new(vec![WriteRecord {
                    value,
                    begin: INITIAL_TICK,
                    end: Some(INITIAL_TICK),
                    superseded_at: None,
                }])
            })
            .collect();
        ExpectedState {
            space,
            keys,
            clock: AtomicU64::new(INITIAL_TICK),
            reads_in_progress: Mutex::new(BTreeMap::new()),
        }
    }

    /// The key space.
    pub fn space(&self) -> KeySpace {
        self.space
    }

    /// Takes the next tick. The caller must take ticks in the order it logs them.
    pub fn next_tick(&self) -> Tick {
        self.clock.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Moves the clock to at least `tick` (a parent replaying a journal).
    pub fn advance_clock_to(&self, tick: Tick) {
        self.clock.fetch_max(tick, Ordering::SeqCst);
    }

    /// The last tick taken.
    pub fn now(&self) -> Tick {
        self.clock.load(Ordering::SeqCst)
    }

    /// Registers a read starting now.
    pub fn begin_read(&self) -> ReadGuard<'_> {
        let mut reads = lock(&self.reads_in_progress);
        let start = self.now();
        *reads.entry(start).or_insert(0) += 1;
        ReadGuard { state: self, start }
    }

    /// Records that a write of `(key index, value)` pairs began at `begin`. Each key must
    /// appear once (a batch's last operation on a key is its effect).
    pub fn begin_write(&self, begin: Tick, writes: &[(usize, Option<ValueId>)]) {
        for &(index, value) in writes {
            if let Some(records) = self.keys.get(index) {
                lock(records).push(WriteRecord { value, begin, end: None, superseded_at: None });
            }
        }
    }

    /// Records that the write that began at `begin` was acknowledged at `end`: it now hides every
    /// write of the same keys that ended before it began.
    pub fn acknowledge_write(&self, begin: Tick, end: Tick, keys: &[usize]) {
        let oldest_read = lock(&self.reads_in_progress).keys().next().copied().unwrap_or(end);
        for &index in keys {
            let Some(records) = self.keys.get(index) else { continue };
            let mut records = lock(records);
            for record in records.iter_mut() {
                if record.begin == begin && record.end.is_none() {
                    record.end = Some(end);
                } else if record.superseded_at.is_none() && record.end.is_some_and(|other_end| other_end < begin) {
                    record.superseded_at = Some(end);
                }
            }
            // Records hidden before the oldest read in progress began can be seen by nobody.
            records.retain(|record| record.superseded_at.is_none_or(|superseded| superseded > oldest_read));
        }
    }

    /// The values a read of key `index` that started at tick `start` and ended at tick `end` may
    /// legally have returned: those of writes that began by `end` and were not hidden by
    /// `start`. A write hidden at tick `start` itself was hidden before the read began, since
    /// the hiding write's end tick is taken after the database returned and `start` is read
    /// after that. The read must hold a [`ReadGuard`] taken at or before `start`.
    pub fn legal_values(&self, index: usize, start: Tick, end: Tick) -> Vec<Option<ValueId>> {
        let Some(records) = self.keys.get(index) else { return Vec::new() };
        let records = lock(records);
        let mut values: Vec<Option<ValueId>> = records
            .iter()
            .filter(|record| record.begin <= end && record.superseded_at.is_none_or(|superseded| superseded > start))
            .map(|record| record.value)
            .collect();
        values.sort_unstable();
        values.dedup();
        values
    }

    /// The values key `index` may hold once every thread has stopped (or was killed): those of
    /// writes nothing hides.
    pub fn final_values(&self, index: usize) -> Vec<Option<ValueId>> {
        self.legal_values(index, Tick::MAX, Tick::MAX)
    }

    /// True when key `index` has a write that was never acknowledged.
    pub fn has_unfinished_write(&self, index: usize) -> bool {
        self.keys.get(index).is_some_and(|records| lock(records).iter().any(|record| record.end.is_none()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> KeySpace {
        KeySpace { plain_keys: 10, groups: 2, group_size: 3, column_families: 3 }
    }

    #[test]
    fn keys_and_values_round_trip() {
        let space = space();
        for index in 0..space.total_keys() {
            let family = space.family_of(index);
            assert!(space.family_range(family).contains(&index));
            assert_eq!(space.parse_key(family, &space.key(index)), Some(index));
            assert_eq!(
                space.parse_key((family + 1) % 3, &space.key(index)).map(|other| space.key(other)),
                Some(space.key(index))
            );
            let id = value_id(3, 2, index as u64 * 77);
            assert_eq!(parse_value(index, &value_bytes(index, id)), Ok(id));
            assert!(parse_value(index + 1, &value_bytes(index, id)).is_err());
            assert_eq!(space.is_plain(index), space.group_of(index).is_none());
        }
        for group in 0..space.total_groups() {
            for member in 0..space.group_size {
                assert_eq!(space.group_of(space.group_member(group, member)), Some(group));
            }
        }
        assert_eq!(space.group_member(2, 0), space.family_keys() + 10);
        assert_eq!(space.group_of(3), None);
        assert!(space.parse_key(0, b"k00010").is_none());
        assert!(space.parse_key(0, b"m0002/0").is_none());
        let mut damaged = value_bytes(1, 99);
        damaged.push(b'!');
        assert!(parse_value(1, &damaged).is_err());
    }

    #[test]
    fn even_groups_of_the_first_two_families_are_linked() {
        let space = space();
        assert_eq!(space.linked_groups(0), vec![0, 2]);
        assert_eq!(space.linked_groups(2), vec![2, 0]);
        assert_eq!(space.linked_groups(1), vec![1]);
        assert_eq!(space.linked_groups(4), vec![4]);
        let single = KeySpace { column_families: 1, ..space };
        assert_eq!(single.linked_groups(0), vec![0]);
    }

    #[test]
    fn sequential_writes_leave_one_legal_value() {
        let state = ExpectedState::new(space(), &[]);
        let begin = state.next_tick();
        state.begin_write(begin, &[(0, Some(1))]);
        let end = state.next_tick();
        state.acknowledge_write(begin, end, &[0]);
        assert_eq!(state.final_values(0), vec![Some(1)]);
        let begin = state.next_tick();
        state.begin_write(begin, &[(0, None)]);
        let end = state.next_tick();
        state.acknowledge_write(begin, end, &[0]);
        assert_eq!(state.final_values(0), vec![None]);
    }

    #[test]
    fn overlapping_and_unfinished_writes_stay_candidates() {
        let state = ExpectedState::new(space(), &[Some(7)]);
        let first = state.next_tick();
        state.begin_write(first, &[(0, Some(1))]);
        let second = state.next_tick();
        state.begin_write(second, &[(0, Some(2))]);
        let first_end = state.next_tick();
        state.acknowledge_write(first, first_end, &[0]);
        // The initial value ended before the first write began: hidden. The second write is
        // unfinished: it may have landed before or after the first.
        assert_eq!(state.final_values(0), vec![Some(1), Some(2)]);
        assert!(state.has_unfinished_write(0));
        let third = state.next_tick();
        state.begin_write(third, &[(0, Some(3))]);
        let third_end = state.next_tick();
        state.acknowledge_write(third, third_end, &[0]);
        // The first write ended before the third began; the second never ended.
        assert_eq!(state.final_values(0), vec![Some(2), Some(3)]);
    }

    #[test]
    fn a_read_in_progress_keeps_what_it_may_have_seen() {
        let state = ExpectedState::new(space(), &[Some(7)]);
        let guard = state.begin_read();
        let begin = state.next_tick();
        state.begin_write(begin, &[(0, Some(1))]);
        let end = state.next_tick();
        state.acknowledge_write(begin, end, &[0]);
        let read_end = state.now();
        assert_eq!(state.legal_values(0, guard.start(), read_end), vec![Some(1), Some(7)]);
        drop(guard);
        let later = state.begin_read();
        assert_eq!(state.legal_values(0, later.start(), state.now()), vec![Some(1)]);
    }
}
