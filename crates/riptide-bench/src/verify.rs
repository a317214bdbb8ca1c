//! Checks of every engine's answers: gets return the value written, seeks land on the target.
//!
//! An engine whose iterator lands in the wrong place, or whose get finds nothing, looks very
//! fast, so every read workload checks what each engine answers against what the run wrote.
//! Values are a function of their key ([`crate::keys::ValuePool::value_for_key`]), and the keys
//! a populate phase wrote are known exactly ([`PopulatedKeys`], a bitmap replayed from its key
//! streams), so the answer to every get and scan is known in advance:
//!
//! - a get of a populated key returns that key's value; a get of any other key finds nothing;
//! - a scan's first key is the first populated key at or after its target (the target itself
//!   when it exists), its first value is that key's value, and it returns as many entries as
//!   there are populated keys from there, up to the requested count;
//! - every eighth scan ([`FULL_CHECK_INTERVAL`]) is checked key by key: each key is the next
//!   populated one, so keys ascend with no gap and no repeat. The others are checked by their
//!   first key, first value and count only, which costs a scan about as much as a get costs a
//!   get, so that checking stays small next to what is measured.
//!
//! A worker counts the answers it checked and the wrong ones, keeping the first few wrong ones
//! described; a run with any wrong answer fails (see `crate::workload::run_and_record`).

use crate::engine::ScanCapture;
use crate::keys::{encode_key, ValuePool};

/// Every this many scans (by operation index) one is checked key by key.
pub const FULL_CHECK_INTERVAL: u64 = 8;
/// Wrong answers described in the error of a failed run (per worker thread).
pub const DESCRIBED_WRONG_ANSWERS: usize = 4;

/// The key numbers a populate phase wrote, as a bitmap.
#[derive(Clone, Debug, Default)]
pub struct PopulatedKeys {
    words: Vec<u64>,
}

impl PopulatedKeys {
    /// An empty set for key numbers below `bound`.
    pub fn new(bound: u64) -> PopulatedKeys {
        PopulatedKeys { words: vec![0; bound.div_ceil(64) as usize] }
    }

    /// Adds (`present`) or removes key number `number`, which must be below the bound.
    pub fn set(&mut self, number: u64, present: bool) {
        let (word, bit) = ((number / 64) as usize, number % 64);
        if let Some(slot) = self.words.get_mut(word) {
            if present {
                *slot |= 1 << bit;
            } else {
                *slot &= !(1 << bit);
            }
        }
    }

    /// True when `number` was written.
    pub fn contains(&self, number: u64) -> bool {
        self.words.get((number / 64) as usize).is_some_and(|word| word & (1 << (number % 64)) != 0)
    }

    /// How many numbers are present.
    pub fn len(&self) -> u64 {
        self.words.iter().map(|word| u64::from(word.count_ones())).sum()
    }

    /// True when no number is present.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&word| word == 0)
    }

    /// The smallest present number `>= number`.
    pub fn next_at_or_after(&self, number: u64) -> Option<u64> {
        let mut index = (number / 64) as usize;
        let mut word = *self.words.get(index)? & (u64::MAX << (number % 64));
        loop {
            if word != 0 {
                return Some(index as u64 * 64 + u64::from(word.trailing_zeros()));
            }
            index += 1;
            word = *self.words.get(index)?;
        }
    }

    /// How many present numbers are `>= number`, counting no further than `limit`.
    pub fn count_from(&self, number: u64, limit: u64) -> u64 {
        let mut index = (number / 64) as usize;
        let Some(&first) = self.words.get(index) else {
            return 0;
        };
        let mut count = u64::from((first & (u64::MAX << (number % 64))).count_ones());
        while count < limit {
            index += 1;
            match self.words.get(index) {
                Some(word) => count += u64::from(word.count_ones()),
                None => break,
            }
        }
        count.min(limit)
    }
}

/// What a worker found checking answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// Answers checked.
    pub checked: u64,
    /// Answers that were wrong.
    pub wrong: u64,
    /// The first wrong answers, described.
    pub examples: Vec<String>,
}

impl Verdicts {
    /// Adds another worker's verdicts.
    pub fn add(&mut self, other: &Verdicts) {
        self.checked += other.checked;
        self.wrong += other.wrong;
        for example in &other.examples {
            if self.examples.len() < DESCRIBED_WRONG_ANSWERS * 2 {
                self.examples.push(example.clone());
            }
        }
    }

    fn wrong(&mut self, describe: impl FnOnce() -> String) {
        self.wrong += 1;
        if self.examples.len() < DESCRIBED_WRONG_ANSWERS {
            self.examples.push(describe());
        }
    }
}

/// The checks of one worker thread.
pub struct Checker<'a> {
    populated: Option<&'a PopulatedKeys>,
    pool: &'a ValuePool,
    value_size: usize,
    expected_key: Vec<u8>,
    /// What this worker found.
    pub verdicts: Verdicts,
}

impl<'a> Checker<'a> {
    /// Checks against `populated` (`None`: the run populated nothing, so only the answers the
    /// caller knows to expect are checked), with values of `value_size` bytes from `pool`.
    pub fn new(
        populated: Option<&'a PopulatedKeys>,
        pool: &'a ValuePool,
        key_size: usize,
        value_size: usize,
    ) -> Checker<'a> {
        Checker { populated, pool, value_size, expected_key: vec![0; key_size], verdicts: Verdicts::default() }
    }

    /// Checks a get of key number `number`: `found` is the value it returned, if any;
    /// `must_exist` says the caller knows the key was written (a key it wrote itself).
    pub fn check_get(&mut self, number: u64, found: Option<&[u8]>, must_exist: bool) {
        self.verdicts.checked += 1;
        let exists = must_exist || self.populated.is_some_and(|keys| keys.contains(number));
        match found {
            None if exists => self.verdicts.wrong(|| format!("get of key {number} found nothing; it was written")),
            None => {}
            Some(_) if !exists && self.populated.is_some() => {
                self.verdicts.wrong(|| format!("get of key {number} found a value; the key was never written"))
            }
            Some(value) if value != self.pool.value_for_key(number, self.value_size) => {
                self.verdicts.wrong(|| {
                    format!("get of key {number} returned {} bytes that are not the value written", value.len())
                });
            }
            Some(_) => {}
        }
    }

    /// Checks a scan that sought key number `target` and asked for `limit` entries, returned
    /// `entries` and noted them in `capture` (every key when `capture.all_keys`).
    pub fn check_scan(&mut self, target: u64, limit: usize, entries: u64, capture: &ScanCapture) {
        let Some(populated) = self.populated else {
            return;
        };
        self.verdicts.checked += 1;
        let expected_count = populated.count_from(target, limit as u64);
        if entries != expected_count {
            self.verdicts.wrong(|| {
                format!("scan from key {target} for {limit} entries returned {entries}, expected {expected_count}")
            });
            return;
        }
        let Some(first) = populated.next_at_or_after(target) else {
            return;
        };
        let recorded = if capture.all_keys { entries as usize } else { 1 };
        if capture.key_lengths.len() != recorded
            || capture.key_lengths.iter().any(|&length| length != self.expected_key.len())
        {
            self.verdicts.wrong(|| {
                format!("scan from key {target}: {} keys noted of unexpected lengths", capture.key_lengths.len())
            });
            return;
        }
        let mut expected = first;
        for (position, key) in capture.keys.chunks_exact(self.expected_key.len()).enumerate() {
            if position > 0 {
                match populated.next_at_or_after(expected + 1) {
                    Some(next) => expected = next,
                    None => break,
                }
            }
            encode_key(expected, &mut self.expected_key);
            if key != self.expected_key.as_slice() {
                let got = String::from_utf8_lossy(key).into_owned();
                self.verdicts.wrong(|| {
                    format!("scan from key {target}: entry {position} is key {got:?}, expected key {expected}")
                });
                return;
            }
        }
        if capture.first_value.as_slice() != self.pool.value_for_key(first, self.value_size) {
            self.verdicts.wrong(|| format!("scan from key {target}: the first value is not the value of key {first}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture_of(numbers: &[u64], pool: &ValuePool, all_keys: bool) -> ScanCapture {
        let mut capture = ScanCapture::default();
        capture.clear(all_keys);
        let mut key = vec![0u8; 16];
        for (position, &number) in numbers.iter().enumerate() {
            encode_key(number, &mut key);
            capture.record(position as u64, &key, pool.value_for_key(number, 100));
        }
        capture
    }

    #[test]
    fn the_bitmap_finds_the_next_key_and_counts() {
        let mut keys = PopulatedKeys::new(300);
        for number in [3u64, 64, 65, 200, 299] {
            keys.set(number, true);
        }
        assert_eq!(keys.len(), 5);
        assert!(keys.contains(64) && !keys.contains(4));
        assert_eq!(keys.next_at_or_after(0), Some(3));
        assert_eq!(keys.next_at_or_after(4), Some(64));
        assert_eq!(keys.next_at_or_after(66), Some(200));
        assert_eq!(keys.next_at_or_after(300), None);
        assert_eq!(keys.count_from(0, 100), 5);
        assert_eq!(keys.count_from(65, 100), 3);
        assert_eq!(keys.count_from(4, 2), 2);
        assert_eq!(keys.count_from(1000, 10), 0);
        keys.set(64, false);
        assert_eq!(keys.next_at_or_after(4), Some(65));
    }

    #[test]
    fn right_answers_pass_and_wrong_ones_are_counted() {
        let pool = ValuePool::new(100, 0.5, 1).unwrap();
        let mut keys = PopulatedKeys::new(1000);
        for number in (0..1000).filter(|number| number % 3 != 0) {
            keys.set(number, true);
        }
        let mut checker = Checker::new(Some(&keys), &pool, 16, 100);
        checker.check_get(1, Some(pool.value_for_key(1, 100)), false);
        checker.check_get(3, None, false);
        checker.check_scan(3, 4, 4, &capture_of(&[4, 5, 7, 8], &pool, true));
        checker.check_scan(3, 4, 4, &capture_of(&[4], &pool, false));
        checker.check_scan(996, 10, 2, &capture_of(&[997, 998], &pool, true));
        assert_eq!(checker.verdicts, Verdicts { checked: 5, wrong: 0, examples: Vec::new() });
        // A get that misses, a value of another key, a key found that was never written.
        checker.check_get(2, None, false);
        checker.check_get(2, Some(pool.value_for_key(4, 100)), false);
        checker.check_get(6, Some(pool.value_for_key(6, 100)), false);
        // A seek that lands one key late, one that skips a key, one that returns too few.
        checker.check_scan(3, 4, 4, &capture_of(&[5, 7, 8, 10], &pool, false));
        checker.check_scan(3, 4, 4, &capture_of(&[4, 7, 8, 10], &pool, true));
        checker.check_scan(3, 4, 3, &capture_of(&[4, 5, 7], &pool, true));
        assert_eq!(checker.verdicts.checked, 11);
        assert_eq!(checker.verdicts.wrong, 6);
        assert_eq!(checker.verdicts.examples.len(), DESCRIBED_WRONG_ANSWERS);
    }

    #[test]
    fn without_a_populate_only_expected_keys_must_be_found() {
        let pool = ValuePool::new(100, 0.5, 1).unwrap();
        let mut checker = Checker::new(None, &pool, 16, 100);
        checker.check_get(7, None, false);
        checker.check_get(7, Some(pool.value_for_key(7, 100)), false);
        assert_eq!(checker.verdicts.wrong, 0);
        checker.check_get(8, None, true);
        checker.check_get(8, Some(pool.value_for_key(9, 100)), false);
        assert_eq!(checker.verdicts.wrong, 2);
    }
}
