//! The index guide: a compact, in-memory summary of a table's index block that narrows the
//! binary search of every seek in it to a few restart points.
//!
//! A point read or a seek first searches the table's index block for the data block that may
//! hold its key. The index of a 64 MiB table holds about 16,000 entries (half a megabyte), so a
//! plain binary search over its restart points touches about fourteen cache lines that are
//! rarely cached, and two misses per probe (the restart offset, then the entry) dominated the
//! read path: measured with the benchtool (random gets of 2M keys, every block cached, 8
//! threads), `Block::restart_key` took 27 % of the time. The guide keeps, per restart point of
//! the index, eight bytes of its user key as a big-endian number: the eight bytes that follow
//! the prefix every key of the table shares (`common_prefix`), since keys of a table often agree
//! on their first bytes (fixed-width numbers, table and index prefixes of the SQL layer). The
//! array is an eighth of the index's size or less and is searched first; only the restart
//! points whose numbers equal the target's remain for the real binary search, usually one or
//! two.
//!
//! Why the numbers are a valid guide: for user keys that start with the common prefix, the
//! number is monotone in the bytewise order (a shorter key is padded with zeros, which sort
//! first), so a restart point whose number is below the target's has a smaller user key, hence
//! a smaller internal key, and one whose number is above has a larger one. It holds for the
//! bytewise comparator only; tables of other comparators have no guide.
//!
//! Concurrency contract: immutable once built, shared with its table. Invariants: `prefixes`
//! has one number per restart point of the index it was built from, in restart order, and is
//! non-decreasing; every restart key of that index starts with `common_prefix`.

use crate::key;
use crate::sstable::block::Block;

/// Below this many restart points the plain binary search is cheap enough.
const MIN_RESTARTS_FOR_A_GUIDE: usize = 64;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct IndexGuide {
    /// The bytes every user key of the index's restart points starts with.
    common_prefix: Vec<u8>,
    /// Per restart point, the eight bytes of its user key after the common prefix.
    prefixes: Vec<u64>,
}

impl IndexGuide {
    /// The guide of `index` (an index block of a bytewise-ordered table), or `None` when the
    /// index is too small to need one or a restart key does not decode (the table's own checks
    /// report that).
    pub(crate) fn build(index: &Block) -> Option<IndexGuide> {
        let count = index.restart_count();
        if count < MIN_RESTARTS_FOR_A_GUIDE {
            return None;
        }
        let first = key::user_key(index.restart_key(0).ok()?);
        let last = key::user_key(index.restart_key(count - 1).ok()?);
        // Keys are sorted, so what the first and the last share, every key in between shares.
        let shared = first.iter().zip(last).take_while(|(left, right)| left == right).count();
        let common_prefix = first[..shared].to_vec();
        let mut prefixes = Vec::with_capacity(count);
        for restart in 0..count {
            let user_key = key::user_key(index.restart_key(restart).ok()?);
            if !user_key.starts_with(&common_prefix) {
                return None;
            }
            prefixes.push(number_after(user_key, shared));
        }
        debug_assert!(prefixes.windows(2).all(|pair| pair[0] <= pair[1]), "guide numbers decrease");
        Some(IndexGuide { common_prefix, prefixes })
    }

    /// The restart points `(first, last)` between which the last restart point whose key is
    /// below any internal key with user key `target_user_key` lies (restart 0 when none is).
    pub(crate) fn restart_range(&self, target_user_key: &[u8]) -> (usize, usize) {
        let last_restart = self.prefixes.len() - 1;
        if !target_user_key.starts_with(&self.common_prefix) {
            // The target sorts before or after every key of the index.
            let length = target_user_key.len().min(self.common_prefix.len());
            return if target_user_key[..length] > self.common_prefix[..length] {
                (last_restart, last_restart)
            } else {
                // Either smaller on the shared length, or a proper prefix of the common prefix:
                // below every key.
                (0, 0)
            };
        }
        let target = number_after(target_user_key, self.common_prefix.len());
        // Restart points before `below_end` have smaller user keys; from `not_above_end` on,
        // larger ones.
        let below_end = self.prefixes.partition_point(|&prefix| prefix < target);
        let not_above_end = self.prefixes.partition_point(|&prefix| prefix <= target);
        (below_end.saturating_sub(1), not_above_end.saturating_sub(1))
    }

    /// Bytes held in memory.
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        std::mem::size_of::<IndexGuide>() + self.common_prefix.len() + self.prefixes.len() * 8
    }
}

/// The eight bytes of `user_key` after its first `skip`, as a big-endian number (missing bytes
/// count as zeros).
fn number_after(user_key: &[u8], skip: usize) -> u64 {
    let mut bytes = [0u8; 8];
    let rest = user_key.get(skip..).unwrap_or_default();
    let length = rest.len().min(8);
    bytes[..length].copy_from_slice(&rest[..length]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::KeyComparator;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sstable::block::BlockBuilder;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// A block with `restart_interval` over `user_keys`, which must be sorted and distinct
    /// (index blocks have interval 1; others show that the guide needs no more).
    fn block_with(user_keys: &[Vec<u8>], restart_interval: usize) -> Block {
        let mut builder = BlockBuilder::new(restart_interval);
        for (number, user_key) in user_keys.iter().enumerate() {
            builder.add(&make_internal_key(user_key, 100, ValueKind::Put), &(number as u32).to_le_bytes());
        }
        Block::new(builder.finish().to_vec()).unwrap()
    }

    fn index_block(user_keys: &[Vec<u8>]) -> Block {
        block_with(user_keys, 1)
    }

    /// Where a plain seek and a guided one land, as (valid, key).
    fn both_seeks(block: &Block, guide: &IndexGuide, target: &[u8]) -> ((bool, Vec<u8>), (bool, Vec<u8>)) {
        let comparator = KeyComparator::Bytewise;
        let lookup = make_internal_key(target, 50, ValueKind::Put);
        let mut plain = Block::iter(block);
        plain.seek(&lookup, &comparator);
        let mut guided = Block::iter(block);
        let (first, last) = guide.restart_range(target);
        assert!(first <= last && last < block.restart_count(), "range {first}..={last}");
        guided.seek_in_restarts(&lookup, &comparator, first, last);
        let position = |iter: &crate::sstable::block::BlockIter<&Block>| {
            (iter.valid(), if iter.valid() { iter.key().to_vec() } else { Vec::new() })
        };
        (position(&plain), position(&guided))
    }

    #[test]
    fn guided_seeks_land_where_plain_seeks_do() {
        let mut rng = SmallRng::seed_from_u64(3);
        for round in 0..40 {
            // Keys with a shared prefix of varying length, varying lengths (some shorter than
            // the prefix plus eight bytes, some with zero bytes), sorted and distinct.
            let shared: Vec<u8> = (0..rng.gen_range(0..6)).map(|_| rng.gen_range(b'a'..=b'c')).collect();
            let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(64..600))
                .map(|_| {
                    let mut user_key = shared.clone();
                    let length = rng.gen_range(0..14);
                    user_key.extend((0..length).map(|_| [0u8, 1, b'0', b'5', 0xff][rng.gen_range(0..5)]));
                    user_key
                })
                .collect();
            keys.sort();
            keys.dedup();
            if keys.len() < MIN_RESTARTS_FOR_A_GUIDE {
                continue;
            }
            let restart_interval = [1, 1, 3][round % 3];
            let block = block_with(&keys, restart_interval);
            if block.restart_count() < MIN_RESTARTS_FOR_A_GUIDE {
                continue;
            }
            let guide = IndexGuide::build(&block).expect("a guide");
            let mut targets: Vec<Vec<u8>> = keys.clone();
            for _ in 0..300 {
                let length = rng.gen_range(0..16);
                targets.push(
                    (0..length).map(|_| [0u8, 1, b'0', b'5', b'a', b'b', b'c', 0xff][rng.gen_range(0..8)]).collect(),
                );
                let mut near = keys[rng.gen_range(0..keys.len())].clone();
                near.push(rng.gen_range(0..3));
                targets.push(near);
            }
            for target in &targets {
                let (plain, guided) = both_seeks(&block, &guide, target);
                assert_eq!(plain, guided, "round {round}: target {target:?}");
            }
        }
    }

    #[test]
    fn small_indexes_and_other_shapes() {
        let few: Vec<Vec<u8>> = (0..10u32).map(|number| number.to_be_bytes().to_vec()).collect();
        assert!(IndexGuide::build(&index_block(&few)).is_none(), "too small to need a guide");
        // Fixed-width decimal numbers, as the benchmarks write them: a long common prefix.
        let numbers: Vec<Vec<u8>> = (0..1000u64).map(|number| format!("{:016}", number * 7).into_bytes()).collect();
        let block = index_block(&numbers);
        let guide = IndexGuide::build(&block).unwrap();
        assert_eq!(guide.common_prefix, b"000000000000".to_vec());
        let (first, last) = guide.restart_range(b"0000000000003500");
        assert!(last - first <= 1, "{first}..={last}");
        for target in [&b""[..], b"0", b"00000000000035", b"0000000000003500", b"1", b"\xff"] {
            let (plain, guided) = both_seeks(&block, &guide, target);
            assert_eq!(plain, guided, "target {target:?}");
        }
        assert!(guide.memory_usage_bytes() >= 8000);
    }
}
