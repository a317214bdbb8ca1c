//! Key and value generation: access patterns over a key space, and values of chosen compressibility.
//!
//! A run works on key numbers in `[0, n)` (a little more for `timestamp`), turned into fixed-width
//! lowercase hexadecimal keys padded with `'0'` on the left, so that numeric order is byte order.
//! The patterns are: `seq` (ascending), `reverse` (descending), `random` (a deterministic
//! pseudo-random permutation of the key space: every key exactly once, uniformly spread, built by
//! cycle-walking an invertible mixer, never a byte-reversed counter), `uniform` (uniform draws
//! with replacement), `zipfian` (YCSB's Zipfian generator with skew 0.99, ranks scattered over
//! the key space by the permutation) and `timestamp` (increasing with small jitter: a key may
//! arrive up to 15 positions late, as with clocks of several producers).
//!
//! Values are slices of a pool of pseudo-random bytes in which every 100-byte chunk repeats a
//! random prefix, so that LZ4 compresses them to about the chosen fraction (half by default, as
//! RocksDB's `db_bench` does), never to a tenth like a constant pattern. A key's value is chosen
//! by its number alone, so that reads can be checked (`crate::verify`).

use clap::ValueEnum;

use crate::bail;
use crate::error::Result;

/// How the keys of a run are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyPattern {
    /// Ascending key numbers.
    Seq,
    /// A pseudo-random permutation of the key space (each key once).
    Random,
    /// Zipfian draws with skew 0.99 (hot keys), scattered over the key space.
    Zipfian,
    /// Uniform draws with replacement.
    Uniform,
    /// Increasing key numbers with a small jitter (late arrivals).
    Timestamp,
    /// Descending key numbers.
    Reverse,
}

impl KeyPattern {
    /// The name used on the command line and in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyPattern::Seq => "seq",
            KeyPattern::Random => "random",
            KeyPattern::Zipfian => "zipfian",
            KeyPattern::Uniform => "uniform",
            KeyPattern::Timestamp => "timestamp",
            KeyPattern::Reverse => "reverse",
        }
    }

    /// True when every operation index maps to a distinct key (no draws with replacement).
    pub fn is_injective(self) -> bool {
        !matches!(self, KeyPattern::Zipfian | KeyPattern::Uniform)
    }
}

/// The SplitMix64 generator: small, fast and statistically sound for benchmark inputs.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is determined by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.state)
    }

    /// A uniform draw in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform draw in `[0, bound)`; `bound` must be positive.
    pub fn next_below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// The SplitMix64 finalizer: a bijection on 64-bit values with good avalanche.
pub fn mix64(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// A deterministic bijection on `[0, n)`: an invertible mixer on the smallest power of two
/// holding `n`, applied repeatedly until the value falls below `n` (cycle walking).
#[derive(Clone, Debug)]
pub struct Permutation {
    size: u64,
    bits: u32,
    mask: u64,
    round_adds: [u64; 4],
    round_multipliers: [u64; 4],
}

impl Permutation {
    /// A permutation of `[0, size)` chosen by `seed`.
    pub fn new(size: u64, seed: u64) -> Permutation {
        let bits = if size <= 2 { 1 } else { 64 - (size - 1).leading_zeros() };
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut rng = SplitMix64::new(seed ^ 0x5bd1_e995_7f4a_7c15);
        let mut round_adds = [0u64; 4];
        let mut round_multipliers = [0u64; 4];
        for round in 0..4 {
            round_adds[round] = rng.next_u64() & mask;
            // Odd multipliers are invertible modulo a power of two.
            round_multipliers[round] = rng.next_u64() | 1;
        }
        Permutation { size, bits, mask, round_adds, round_multipliers }
    }

    /// The number of elements permuted.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// One pass of the mixer: a bijection on `[0, 2^bits)`.
    fn mix(&self, mut value: u64) -> u64 {
        let shift = self.bits.div_ceil(2).max(1);
        for round in 0..4 {
            value = value.wrapping_add(self.round_adds[round]) & self.mask;
            value = value.wrapping_mul(self.round_multipliers[round]) & self.mask;
            if shift < self.bits {
                value ^= value >> shift;
            }
        }
        value
    }

    /// The image of `index`, which must be below [`Permutation::size`].
    pub fn apply(&self, index: u64) -> u64 {
        debug_assert!(index < self.size, "permutation index out of range");
        let mut value = self.mix(index);
        while value >= self.size {
            value = self.mix(value);
        }
        value
    }
}

/// YCSB's Zipfian generator over ranks `[0, items)` (Gray et al., "Quickly generating
/// billion-record synthetic databases"): rank 0 is the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
    half_pow_theta: f64,
}

/// The skew used by YCSB and by the `zipfian` pattern.
pub const ZIPFIAN_THETA: f64 = 0.99;

impl Zipfian {
    /// A generator over `items` ranks with skew `theta` (0 < theta < 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        let zeta_n = zeta(items, theta);
        let zeta_2 = zeta(2.min(items), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta =
            if items > 2 { (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n) } else { 0.0 };
        Zipfian { items, theta, alpha, zeta_n, eta, half_pow_theta: 0.5f64.powf(theta) }
    }

    /// The rank for a uniform draw `uniform` in `[0, 1)`.
    pub fn rank(&self, uniform: f64) -> u64 {
        let scaled = uniform * self.zeta_n;
        if scaled < 1.0 {
            return 0;
        }
        if scaled < 1.0 + self.half_pow_theta || self.items <= 2 {
            return 1.min(self.items - 1);
        }
        let rank = (self.items as f64 * (self.eta * uniform - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.items - 1)
    }

    /// The probability of rank `rank` under this distribution.
    pub fn probability(&self, rank: u64) -> f64 {
        1.0 / ((rank + 1) as f64).powf(self.theta) / self.zeta_n
    }
}

/// The generalized harmonic number `sum_{i=1..n} 1 / i^theta`.
fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// The key numbers of a run: a pattern over `[0, operations)`, shared by every thread.
#[derive(Clone, Debug)]
pub struct KeySpace {
    pattern: KeyPattern,
    operations: u64,
    seed: u64,
    permutation: Permutation,
    zipfian: Option<Zipfian>,
}

impl KeySpace {
    /// The key space of `operations` keys under `pattern`; `seed` chooses the permutation and
    /// the draws (the same seed gives the same keys).
    pub fn new(pattern: KeyPattern, operations: u64, seed: u64) -> KeySpace {
        let zipfian = (pattern == KeyPattern::Zipfian).then(|| Zipfian::new(operations, ZIPFIAN_THETA));
        KeySpace { pattern, operations, seed, permutation: Permutation::new(operations.max(1), seed), zipfian }
    }

    /// The pattern of this key space.
    pub fn pattern(&self) -> KeyPattern {
        self.pattern
    }

    /// The number of operation indexes (and, except for `timestamp`, of key numbers).
    pub fn operations(&self) -> u64 {
        self.operations
    }

    /// One past the largest key number this space can produce.
    pub fn key_number_bound(&self) -> u64 {
        match self.pattern {
            KeyPattern::Timestamp => (self.operations + TIMESTAMP_JITTER) * TIMESTAMP_JITTER,
            _ => self.operations,
        }
    }

    /// A cursor for the draw stream `stream` (one per thread and phase); draws of `uniform`
    /// and `zipfian` depend on the seed and the stream only, so a run can be replayed to count
    /// the keys it wrote.
    pub fn cursor(&self, stream: u64) -> KeyCursor<'_> {
        KeyCursor { space: self, rng: SplitMix64::new(mix64(self.seed ^ mix64(stream + 1))) }
    }
}

/// How far (in positions) a `timestamp` key may arrive late; also the spacing of key numbers.
const TIMESTAMP_JITTER: u64 = 16;

/// A thread's view of a [`KeySpace`]: maps operation indexes to key numbers.
#[derive(Clone, Debug)]
pub struct KeyCursor<'a> {
    space: &'a KeySpace,
    rng: SplitMix64,
}

impl KeyCursor<'_> {
    /// The key number for operation `index` (in `[0, operations)`). Injective patterns depend
    /// on `index` only; `uniform` and `zipfian` take the next draw of this cursor.
    pub fn key_number(&mut self, index: u64) -> u64 {
        let space = self.space;
        match space.pattern {
            KeyPattern::Seq => index,
            KeyPattern::Reverse => space.operations - 1 - index,
            KeyPattern::Random => space.permutation.apply(index),
            KeyPattern::Uniform => self.rng.next_below(space.operations.max(1)),
            KeyPattern::Zipfian => {
                let uniform = self.rng.next_f64();
                let rank = space.zipfian.as_ref().map_or(0, |zipfian| zipfian.rank(uniform));
                space.permutation.apply(rank)
            }
            KeyPattern::Timestamp => {
                let jitter = mix64(space.seed ^ index.wrapping_mul(0x2545_f491_4f6c_dd1d)) % TIMESTAMP_JITTER;
                // Distinct indexes give distinct numbers: equal high parts imply indexes closer
                // than the jitter, whose low parts then differ.
                ((index + jitter) * TIMESTAMP_JITTER) | (index % TIMESTAMP_JITTER)
            }
        }
    }
}

/// Writes `number` as lowercase hexadecimal right-aligned in `key`, padded with `'0'`. Keys
/// shorter than 16 bytes keep the lowest digits (see [`check_key_size`]).
pub fn encode_key(number: u64, key: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    key.fill(b'0');
    let mut remaining = number;
    for byte in key.iter_mut().rev() {
        if remaining == 0 {
            break;
        }
        *byte = DIGITS[(remaining & 15) as usize];
        remaining >>= 4;
    }
}

/// Checks that keys of `key_size_bytes` hexadecimal digits can hold every number below
/// `key_number_bound` without two numbers sharing a key.
pub fn check_key_size(key_size_bytes: usize, key_number_bound: u64) -> Result<()> {
    if key_size_bytes == 0 {
        bail!("the key size must be at least 1 byte");
    }
    if key_size_bytes < 16 {
        let capacity = 1u64 << (4 * key_size_bytes as u32);
        if key_number_bound > capacity {
            bail!(
                "{key_size_bytes}-byte keys hold {capacity} distinct hexadecimal keys, fewer than the {key_number_bound} \
                 this run needs; use longer keys"
            );
        }
    }
    Ok(())
}

/// Pseudo-random value bytes of a chosen compressibility, shared by all threads.
#[derive(Clone, Debug)]
pub struct ValuePool {
    bytes: Vec<u8>,
    compressibility: f64,
}

/// Length of the chunks that each repeat a random prefix.
const VALUE_CHUNK_BYTES: usize = 100;

impl ValuePool {
    /// A pool for values of up to `max_value_size_bytes`; `compressibility` is the fraction of
    /// each chunk that is random (1.0: incompressible; 0.5: compresses to about half).
    pub fn new(max_value_size_bytes: usize, compressibility: f64, seed: u64) -> Result<ValuePool> {
        if !(0.0..=1.0).contains(&compressibility) || compressibility.is_nan() {
            bail!("the value compressibility must be between 0 and 1, not {compressibility}");
        }
        let length = (1usize << 20).max(max_value_size_bytes.saturating_mul(4));
        let random_bytes_per_chunk = ((VALUE_CHUNK_BYTES as f64 * compressibility).round() as usize).max(1);
        let mut rng = SplitMix64::new(seed ^ 0x0123_4567_89ab_cdef);
        let mut bytes = Vec::with_capacity(length + VALUE_CHUNK_BYTES);
        let mut prefix = vec![0u8; random_bytes_per_chunk];
        while bytes.len() < length {
            for byte in prefix.iter_mut() {
                *byte = rng.next_u64() as u8;
            }
            let chunk_end = bytes.len() + VALUE_CHUNK_BYTES;
            while bytes.len() < chunk_end {
                let take = (chunk_end - bytes.len()).min(prefix.len());
                bytes.extend_from_slice(&prefix[..take]);
            }
        }
        bytes.truncate(length);
        Ok(ValuePool { bytes, compressibility })
    }

    /// The fraction of random bytes per chunk this pool was built with.
    pub fn compressibility(&self) -> f64 {
        self.compressibility
    }

    /// The value of key number `number`, `length_bytes` long (at most the size the pool was
    /// made for): a stretch of the pool starting at a chunk boundary chosen by hashing the
    /// number. Every write of a key writes this value, whichever thread or phase writes it, so
    /// a reader can check what any engine returns (`crate::verify`); keys that follow each
    /// other get unrelated stretches, so neighbouring values in a block do not compress
    /// against each other (but for the rare two keys that draw the same stretch).
    pub fn value_for_key(&self, number: u64, length_bytes: usize) -> &[u8] {
        let length = length_bytes.min(self.bytes.len());
        let slots = (self.bytes.len() - length) / VALUE_CHUNK_BYTES + 1;
        let start = (mix64(number ^ VALUE_SALT) % slots as u64) as usize * VALUE_CHUNK_BYTES;
        &self.bytes[start..start + length]
    }
}

/// Mixed into key numbers before they choose their value, so that values do not follow the
/// key permutation's own mixer.
const VALUE_SALT: u64 = 0x6a09_e667_f3bc_c908;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection_for_many_sizes() {
        for size in [1u64, 2, 3, 7, 64, 1000, 4097, 12_345, 65_536, 100_003] {
            let permutation = Permutation::new(size, 42);
            let mut seen = vec![false; size as usize];
            for index in 0..size {
                let image = permutation.apply(index);
                assert!(image < size, "image {image} out of range for size {size}");
                assert!(!seen[image as usize], "image {image} repeated for size {size}");
                seen[image as usize] = true;
            }
        }
    }

    #[test]
    fn permutation_is_spread_and_not_a_counter() {
        let size = 1_000_000u64;
        let permutation = Permutation::new(size, 7);
        // The first 10,000 images fall evenly into 10 buckets of the key space.
        let mut buckets = [0u32; 10];
        for index in 0..10_000 {
            buckets[(permutation.apply(index) * 10 / size) as usize] += 1;
        }
        for count in buckets {
            assert!((800..1200).contains(&count), "uneven buckets {buckets:?}");
        }
        // Consecutive indexes are not consecutive keys, and ascending runs are short.
        let images: Vec<u64> = (0..1000).map(|index| permutation.apply(index)).collect();
        let ascending = images.windows(2).filter(|pair| pair[1] > pair[0]).count();
        assert!((400..600).contains(&ascending), "ascending pairs {ascending}");
        let adjacent = images.windows(2).filter(|pair| pair[1].abs_diff(pair[0]) == 1).count();
        assert_eq!(adjacent, 0);
        // Another seed is another permutation.
        let other = Permutation::new(size, 8);
        let same = (0..1000).filter(|&index| other.apply(index) == permutation.apply(index)).count();
        assert!(same < 5);
    }

    #[test]
    fn sequential_and_reverse_are_ordered_and_keys_sort_like_numbers() {
        let space = KeySpace::new(KeyPattern::Seq, 1000, 1);
        let mut cursor = space.cursor(0);
        let mut previous = Vec::new();
        for index in 0..1000 {
            let mut key = vec![0u8; 16];
            encode_key(cursor.key_number(index), &mut key);
            assert!(key > previous, "seq keys must ascend");
            previous = key;
        }
        let reverse = KeySpace::new(KeyPattern::Reverse, 1000, 1);
        let mut cursor = reverse.cursor(3);
        let numbers: Vec<u64> = (0..1000).map(|index| cursor.key_number(index)).collect();
        assert_eq!(numbers[0], 999);
        assert_eq!(numbers[999], 0);
        assert!(numbers.windows(2).all(|pair| pair[0] == pair[1] + 1));
    }

    #[test]
    fn timestamp_keys_are_unique_and_nearly_increasing() {
        let space = KeySpace::new(KeyPattern::Timestamp, 10_000, 5);
        let mut cursor = space.cursor(0);
        let numbers: Vec<u64> = (0..10_000).map(|index| cursor.key_number(index)).collect();
        let mut sorted = numbers.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), numbers.len(), "timestamp keys must be unique");
        assert!(numbers.iter().all(|&number| number < space.key_number_bound()));
        let descending = numbers.windows(2).filter(|pair| pair[1] < pair[0]).count();
        assert!(descending > 0, "some jitter is expected");
        assert!(descending < 5_000, "mostly increasing");
        // A key is never more than the jitter away from its position.
        for (index, &number) in numbers.iter().enumerate() {
            let position = number / TIMESTAMP_JITTER;
            assert!(position >= index as u64 && position < index as u64 + TIMESTAMP_JITTER);
        }
    }

    #[test]
    fn uniform_draws_repeat_and_replay_deterministically() {
        let space = KeySpace::new(KeyPattern::Uniform, 1000, 9);
        let first: Vec<u64> = {
            let mut cursor = space.cursor(2);
            (0..1000).map(|index| cursor.key_number(index)).collect()
        };
        let second: Vec<u64> = {
            let mut cursor = space.cursor(2);
            (0..1000).map(|index| cursor.key_number(index)).collect()
        };
        assert_eq!(first, second);
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        // With replacement, about 1 - 1/e of 1000 keys are distinct.
        assert!((580..690).contains(&distinct.len()), "distinct {}", distinct.len());
    }

    #[test]
    fn zipfian_skew_matches_theory() {
        let items = 1000u64;
        let zipfian = Zipfian::new(items, ZIPFIAN_THETA);
        let mut rng = SplitMix64::new(3);
        let draws = 200_000u64;
        let mut counts = vec![0u64; items as usize];
        for _ in 0..draws {
            counts[zipfian.rank(rng.next_f64()) as usize] += 1;
        }
        // Ranks 0 and 1 are exact in YCSB's generator; higher ranks use a continuous
        // approximation that is within about 15 % of the exact probability.
        for (rank, tolerance) in [(0u64, 0.05), (1, 0.05), (2, 0.2), (5, 0.2)] {
            let expected = zipfian.probability(rank) * draws as f64;
            let observed = counts[rank as usize] as f64;
            assert!((observed - expected).abs() < expected * tolerance, "rank {rank}: {observed} vs {expected}");
        }
        // The hottest 10 % of the ranks take most of the draws (about 72 % at theta 0.99).
        let expected_top: f64 = (0..items / 10).map(|rank| zipfian.probability(rank)).sum();
        let observed_top = counts[..(items / 10) as usize].iter().sum::<u64>() as f64 / draws as f64;
        assert!((observed_top - expected_top).abs() < 0.03, "top mass {observed_top} vs {expected_top}");
        assert!(observed_top > 0.6);
        // Counts fall with rank.
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn zipfian_pattern_stays_in_range() {
        let space = KeySpace::new(KeyPattern::Zipfian, 5000, 11);
        let mut cursor = space.cursor(0);
        for index in 0..20_000 {
            assert!(cursor.key_number(index % 5000) < 5000);
        }
    }

    #[test]
    fn keys_are_fixed_width_hexadecimal() {
        let mut key = [0u8; 16];
        encode_key(0xabc, &mut key);
        assert_eq!(&key, b"0000000000000abc");
        let mut long_key = [0u8; 20];
        encode_key(u64::MAX, &mut long_key);
        assert_eq!(&long_key, b"0000ffffffffffffffff");
        let mut short_key = [0u8; 4];
        encode_key(0x12345, &mut short_key);
        assert_eq!(&short_key, b"2345");
        assert!(check_key_size(4, 1 << 16).is_ok());
        assert!(check_key_size(4, (1 << 16) + 1).is_err());
        assert!(check_key_size(16, u64::MAX).is_ok());
    }

    #[test]
    fn values_compress_to_about_the_chosen_fraction() {
        for compressibility in [0.25, 0.5, 1.0] {
            let pool = ValuePool::new(4096, compressibility, 1).unwrap();
            let mut block = Vec::new();
            let mut number = 0;
            while block.len() < 64 * 1024 {
                block.extend_from_slice(pool.value_for_key(number, 100));
                number += 1;
            }
            let compressed = lz4_flex::block::compress(&block);
            let ratio = compressed.len() as f64 / block.len() as f64;
            assert!(
                ratio > compressibility * 0.85 && ratio < compressibility * 1.2 + 0.02,
                "compressibility {compressibility}: ratio {ratio}"
            );
        }
        assert!(ValuePool::new(100, 1.5, 1).is_err());
    }

    #[test]
    fn a_key_always_gets_its_own_value() {
        let pool = ValuePool::new(4096, 0.5, 1).unwrap();
        assert_eq!(pool.value_for_key(7, 100), pool.value_for_key(7, 100));
        assert_ne!(pool.value_for_key(7, 100), pool.value_for_key(8, 100));
        assert_eq!(pool.value_for_key(7, 4096).len(), 4096);
        let whole = pool.bytes.len();
        assert_eq!(pool.value_for_key(u64::MAX, whole).len(), whole);
        let same_seed = ValuePool::new(4096, 0.5, 1).unwrap();
        assert_eq!(pool.value_for_key(12_345, 64), same_seed.value_for_key(12_345, 64));
    }
}
