//! [`MemoryCharge`]: one owner's share of a memory counter that many owners add to.
//!
//! The memory cap counts memtables, the block cache and open tables in the governor
//! (`db/memory.rs`); work in flight that holds memory of its own (a table builder's index, filter
//! and block buffers) charges it through a `MemoryCharge`, so the governor's total sees it while
//! the work runs and forgets it when the work ends, whatever path ends it (the charge is released
//! on drop, so an error or a cancelled job cannot leak it).
//!
//! Concurrency contract: a charge has one owner (`&mut self`); the shared counter is an atomic
//! that any number of charges update at once. Invariant: the counter equals the sum of the
//! amounts of the live charges on it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A share of a shared counter, released on drop.
#[derive(Debug)]
pub(crate) struct MemoryCharge {
    counter: Arc<AtomicU64>,
    charged_bytes: u64,
}

impl MemoryCharge {
    /// A charge of zero bytes on `counter`.
    pub(crate) fn new(counter: Arc<AtomicU64>) -> MemoryCharge {
        MemoryCharge { counter, charged_bytes: 0 }
    }

    /// Makes this charge `bytes`, adjusting the counter by the difference.
    pub(crate) fn set(&mut self, bytes: u64) {
        if bytes > self.charged_bytes {
            self.counter.fetch_add(bytes - self.charged_bytes, Ordering::Relaxed);
        } else if bytes < self.charged_bytes {
            self.counter.fetch_sub(self.charged_bytes - bytes, Ordering::Relaxed);
        }
        self.charged_bytes = bytes;
    }
}

impl Drop for MemoryCharge {
    fn drop(&mut self) {
        self.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_the_sum_of_live_charges() {
        let counter = Arc::new(AtomicU64::new(0));
        let mut first = MemoryCharge::new(Arc::clone(&counter));
        let mut second = MemoryCharge::new(Arc::clone(&counter));
        first.set(100);
        second.set(50);
        assert_eq!(counter.load(Ordering::Relaxed), 150);
        first.set(30);
        assert_eq!(counter.load(Ordering::Relaxed), 80);
        drop(second);
        assert_eq!(counter.load(Ordering::Relaxed), 30);
        drop(first);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
}
