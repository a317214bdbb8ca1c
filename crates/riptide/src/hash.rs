//! The hasher of the engine's in-memory hash maps on hot paths: the lock tables, the commit
//! history, a transaction's write set, read set and lock list, and the table cache.
//!
//! The standard library's default (SipHash-1-3) costs about 300 instructions for a 20-byte key;
//! a short read-modify-write transaction hashes some fifty keys and family ids, so SipHash was
//! an eighth of such a transaction's instructions (callgrind, benchtool `transaction` workload).
//! Here byte strings go through one-shot xxh3 (a few dozen instructions for short keys) and
//! integers through one folded multiplication.
//!
//! Keys of these maps come from users, so the hasher is seeded: every map built with
//! [`KeyHashState::default`] shares one seed drawn at random once per process (from the
//! standard library's own randomly keyed state), so a client cannot choose keys that collide
//! without learning the seed. That is the same protection the default hasher's per-process keys
//! give in practice; no map here relies on collisions being rare for correctness, only speed.
//!
//! Concurrency: the seed is set once through a `OnceLock`; hashers are per call and unshared.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A `HashMap` with the engine's hasher.
pub(crate) type FastHashMap<K, V> = std::collections::HashMap<K, V, KeyHashState>;
/// A `HashSet` with the engine's hasher.
pub(crate) type FastHashSet<K> = std::collections::HashSet<K, KeyHashState>;

/// An odd constant with well-spread bits (the 64-bit golden ratio), for the multiplications.
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// Multiplies as 128 bits and folds the halves together, so every input bit reaches the low
/// bits the table indexes with and the high bits it keeps as tags.
#[inline(always)]
fn folded_multiply(left: u64, right: u64) -> u64 {
    let product = u128::from(left) * u128::from(right);
    (product as u64) ^ ((product >> 64) as u64)
}

fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        // The standard library keys each RandomState from the operating system's randomness
        // (once per thread, then incremented); hashing a constant with it yields a random seed.
        std::collections::hash_map::RandomState::new().hash_one(0x5249_5054_4944_4521u64)
    })
}

/// Builds [`KeyHasher`]s with the process seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHashState {
    seed: u64,
}

impl Default for KeyHashState {
    fn default() -> KeyHashState {
        KeyHashState { seed: process_seed() }
    }
}

impl BuildHasher for KeyHashState {
    type Hasher = KeyHasher;

    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { state: self.seed }
    }
}

/// A seeded hasher: each write folds its input into the 64-bit state.
pub(crate) struct KeyHasher {
    state: u64,
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // The state so far seeds the hash of the bytes, so earlier writes (a column family id,
        // a length prefix) change how these bytes hash.
        self.state = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.state);
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.write_u64(u64::from(value));
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.state = folded_multiply(self.state ^ value, MULTIPLIER);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // One more round, so that a single integer write (or bytes whose hash is the state)
        // also ends well mixed.
        folded_multiply(self.state, MULTIPLIER ^ 0xA076_1D64_78BD_642F)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash_of<T: Hash>(value: &T) -> u64 {
        KeyHashState::default().hash_one(value)
    }

    #[test]
    fn equal_values_hash_equal_and_the_seed_is_shared() {
        let key: (u32, Vec<u8>) = (7, b"user:000042".to_vec());
        assert_eq!(hash_of(&key), hash_of(&key.clone()));
        assert_eq!(KeyHashState::default().seed, KeyHashState::default().seed);
    }

    #[test]
    fn family_id_key_bytes_and_their_boundary_all_count() {
        let base = hash_of(&(1u32, b"abc".to_vec()));
        assert_ne!(base, hash_of(&(2u32, b"abc".to_vec())));
        assert_ne!(base, hash_of(&(1u32, b"abd".to_vec())));
        // The length prefix keeps ("ab", "c") apart from ("a", "bc").
        assert_ne!(hash_of(&(b"ab".to_vec(), b"c".to_vec())), hash_of(&(b"a".to_vec(), b"bc".to_vec())));
    }

    #[test]
    fn a_different_seed_gives_different_hashes() {
        let one = KeyHashState { seed: 1 };
        let two = KeyHashState { seed: 2 };
        assert_ne!(one.hash_one(b"key".as_slice()), two.hash_one(b"key".as_slice()));
        assert_ne!(one.hash_one(42u64), two.hash_one(42u64));
    }

    #[test]
    fn low_bits_of_sequential_integers_spread_over_buckets() {
        // hashbrown indexes buckets with the low bits: consecutive ids (transaction ids,
        // family ids) must not pile into a few of 64 buckets.
        let state = KeyHashState { seed: 12345 };
        let mut counts = [0u32; 64];
        for id in 0u64..64 * 256 {
            counts[(state.hash_one(id) & 63) as usize] += 1;
        }
        let (least, most) = (counts.iter().min().copied(), counts.iter().max().copied());
        assert!(least.is_some_and(|count| count > 160), "{counts:?}");
        assert!(most.is_some_and(|count| count < 360), "{counts:?}");
    }
}
