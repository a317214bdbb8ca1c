//! The whole-table bloom filter over user keys, blocked by cache line: every probe for one key
//! lands in the same 64-byte line, so a query costs at most one cache miss.
//!
//! A key's 64-bit xxh3 hash picks the line from its upper 32 bits (multiply-shift range
//! reduction) and the bit positions inside the line from its lower 32 bits: each probe takes the
//! top nine bits of a 32-bit state that is multiplied by an odd constant between probes.
//!
//! Serialized form: the lines (each eight little-endian u64 words), then the probe count (u8),
//! then the line count (u32 LE).
//!
//! Concurrency contract: a [`BloomFilter`] is immutable and shared by all readers of a table; a
//! [`BloomFilterBuilder`] belongs to one table builder. Invariants: a filter never reports a key
//! absent that was added (no false negatives); decoding checks that the length matches the line
//! count and that the probe count is in range, and otherwise fails instead of panicking.

use xxhash_rust::xxh3::xxh3_64;

use crate::coding::read_u32;

/// Bits in one cache line.
const BITS_PER_LINE: u64 = 512;

/// Bytes in one cache line.
const LINE_SIZE_BYTES: usize = 64;

/// Bytes after the lines: probe count and line count.
const FILTER_METADATA_SIZE_BYTES: usize = 5;

/// Largest accepted probe count; more probes than this only cost time.
const MAX_PROBES: u32 = 30;

/// The odd multiplier that derives the next probe from the previous one (2^32 divided by the
/// golden ratio); multiplication by an odd number permutes 32-bit values, so probes stay well
/// spread.
const PROBE_MULTIPLIER: u32 = 0x9e37_79b9;

/// One 64-byte line of filter bits, aligned so that it occupies exactly one hardware cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct CacheLine([u64; 8]);

/// The hash the filter uses for a user key.
#[inline]
pub(crate) fn bloom_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// The probe count for a bits-per-key budget: about `ln 2` times the bits, which minimises the
/// false-positive rate of a classic bloom filter; blocking by cache line shifts the optimum
/// slightly lower, hence the rounding down.
fn probes_for(bits_per_key: u32) -> u32 {
    (bits_per_key * 69 / 100).clamp(1, MAX_PROBES)
}

/// Which line a hash selects among `num_lines`.
#[inline]
fn line_index(hash: u64, num_lines: usize) -> usize {
    (((hash >> 32) * num_lines as u64) >> 32) as usize
}

/// Collects key hashes and builds a filter sized for them.
#[derive(Debug)]
pub(crate) struct BloomFilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// A builder spending about `bits_per_key` bits per distinct key; must be positive.
    pub(crate) fn new(bits_per_key: u32) -> BloomFilterBuilder {
        assert!(bits_per_key > 0, "a filter needs at least one bit per key");
        BloomFilterBuilder { bits_per_key, hashes: Vec::new() }
    }

    /// Adds a user key.
    pub(crate) fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(bloom_hash(user_key));
    }

    /// Bytes the builder holds: the hashes collected so far.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.hashes.capacity() * std::mem::size_of::<u64>()
    }

    /// Bytes the encoded filter would take now.
    pub(crate) fn estimated_size_bytes(&self) -> usize {
        self.num_lines() * LINE_SIZE_BYTES + FILTER_METADATA_SIZE_BYTES
    }

    fn num_lines(&self) -> usize {
        let bits = self.hashes.len() as u64 * u64::from(self.bits_per_key);
        (bits.div_ceil(BITS_PER_LINE) as usize).max(1)
    }

    /// Appends the encoded filter to `out`.
    pub(crate) fn finish(&self, out: &mut Vec<u8>) {
        let num_lines = self.num_lines();
        let num_probes = probes_for(self.bits_per_key);
        let mut lines = vec![CacheLine::default(); num_lines];
        for &hash in &self.hashes {
            let line = &mut lines[line_index(hash, num_lines)];
            let mut state = hash as u32;
            for _ in 0..num_probes {
                let bit = state >> 23;
                line.0[(bit >> 6) as usize] |= 1 << (bit & 63);
                state = state.wrapping_mul(PROBE_MULTIPLIER);
            }
        }
        out.reserve(num_lines * LINE_SIZE_BYTES + FILTER_METADATA_SIZE_BYTES);
        for line in &lines {
            for word in line.0 {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        out.push(num_probes as u8);
        assert!(num_lines <= u32::MAX as usize, "bloom filter exceeds 2^32 lines");
        out.extend_from_slice(&(num_lines as u32).to_le_bytes());
    }
}

/// A decoded filter, ready for queries.
#[derive(Clone, Debug)]
pub(crate) struct BloomFilter {
    lines: Vec<CacheLine>,
    num_probes: u32,
}

impl BloomFilter {
    /// Decodes a filter written by [`BloomFilterBuilder::finish`]; `Err` names what is wrong.
    pub(crate) fn decode(input: &[u8]) -> Result<BloomFilter, &'static str> {
        let lines_length =
            input.len().checked_sub(FILTER_METADATA_SIZE_BYTES).ok_or("filter shorter than its metadata")?;
        let num_probes = u32::from(input.get(lines_length).copied().unwrap_or(0));
        let num_lines = read_u32(input, lines_length + 1).ok_or("filter metadata truncated")? as usize;
        if !(1..=MAX_PROBES).contains(&num_probes) {
            return Err("filter probe count out of range");
        }
        if num_lines == 0 || num_lines.checked_mul(LINE_SIZE_BYTES) != Some(lines_length) {
            return Err("filter length does not match its line count");
        }
        let bits = input.get(..lines_length).unwrap_or_default();
        let lines = bits
            .chunks_exact(LINE_SIZE_BYTES)
            .map(|line_bytes| {
                let mut line = CacheLine::default();
                for (word, word_bytes) in line.0.iter_mut().zip(line_bytes.chunks_exact(8)) {
                    let mut buffer = [0u8; 8];
                    buffer.copy_from_slice(word_bytes);
                    *word = u64::from_le_bytes(buffer);
                }
                line
            })
            .collect();
        Ok(BloomFilter { lines, num_probes })
    }

    /// False when the key was certainly not added; true when it may have been.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(user_key))
    }

    /// [`BloomFilter::may_contain`] for a precomputed [`bloom_hash`].
    #[inline]
    pub(crate) fn may_contain_hash(&self, hash: u64) -> bool {
        let Some(line) = self.lines.get(line_index(hash, self.lines.len())) else {
            return true;
        };
        let mut state = hash as u32;
        for _ in 0..self.num_probes {
            let bit = state >> 23;
            if line.0[(bit >> 6) as usize] & (1 << (bit & 63)) == 0 {
                return false;
            }
            state = state.wrapping_mul(PROBE_MULTIPLIER);
        }
        true
    }

    /// Bytes held in memory.
    pub(crate) fn memory_usage_bytes(&self) -> usize {
        self.lines.len() * LINE_SIZE_BYTES + std::mem::size_of::<BloomFilter>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: u32) -> BloomFilter {
        let mut builder = BloomFilterBuilder::new(bits_per_key);
        for key in keys {
            builder.add_key(&key);
        }
        let mut encoded = Vec::new();
        builder.finish(&mut encoded);
        assert_eq!(encoded.len(), builder.estimated_size_bytes());
        BloomFilter::decode(&encoded).unwrap()
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        for count in [1usize, 10, 1000, 100_000] {
            let filter = build((0..count).map(|i| format!("key{i}").into_bytes()), 10);
            for i in 0..count {
                assert!(filter.may_contain(format!("key{i}").as_bytes()), "false negative for key{i}");
            }
            let probes = 100_000;
            let false_positives = (0..probes).filter(|i| filter.may_contain(format!("absent{i}").as_bytes())).count();
            let rate = false_positives as f64 / probes as f64;
            if count >= 1000 {
                assert!(rate < 0.02, "false-positive rate {rate} with {count} keys");
            }
        }
    }

    #[test]
    fn more_bits_give_fewer_false_positives() {
        let keys = || (0..20_000).map(|i: u32| i.to_be_bytes().to_vec());
        let rate = |filter: &BloomFilter| {
            (20_000u32..120_000).filter(|i| filter.may_contain(&i.to_be_bytes())).count() as f64 / 100_000.0
        };
        let sparse = rate(&build(keys(), 4));
        let dense = rate(&build(keys(), 20));
        assert!(dense < sparse, "{dense} >= {sparse}");
        assert!(dense < 0.002, "{dense}");
    }

    #[test]
    fn decode_rejects_malformed_input() {
        let mut encoded = Vec::new();
        let mut builder = BloomFilterBuilder::new(10);
        builder.add_key(b"a");
        builder.finish(&mut encoded);
        assert!(BloomFilter::decode(&encoded[..4]).is_err());
        assert!(BloomFilter::decode(&encoded[1..]).is_err());
        let mut zero_probes = encoded.clone();
        zero_probes[64] = 0;
        assert!(BloomFilter::decode(&zero_probes).is_err());
        let mut huge_lines = encoded.clone();
        huge_lines[65..69].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(BloomFilter::decode(&huge_lines).is_err());
        assert!(BloomFilter::decode(&[]).is_err());
    }
}
