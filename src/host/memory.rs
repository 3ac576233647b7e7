//! A host tensor's storage: 32-bit words (f32 or u32 elements) behind a lock, shared by the
//! tensor's views; and the host device's pool of idle storage.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Result, SesameError};
use crate::limits::{PoolStats, MAX_POOLED_BYTES};

pub(crate) struct HostMemory {
    words: RwLock<Vec<u32>>,
}

impl HostMemory {
    // A poisoned lock means a panic elsewhere mid-kernel; the words are still plain data.
    pub fn read(&self) -> RwLockReadGuard<'_, Vec<u32>> {
        self.words.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Vec<u32>> {
        self.words.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn new(words: Vec<u32>) -> HostMemory {
        HostMemory { words: RwLock::new(words) }
    }

    /// The words, for the pool, leaving none.
    fn take(&mut self) -> Vec<u32> {
        std::mem::take(self.words.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// The host device's count of live tensors' storage, and the storage of dropped tensors kept
/// for the next tensors of the same length, as the GPU's buffer pool keeps buffers: a forward
/// pass or a training step allocates the same shapes every time, and memory fresh from the
/// system costs a page fault per page (glibc hands large blocks back to the kernel when they
/// are freed): a quarter of a small GPT's training step on the CPU. Small blocks are left to
/// the allocator, which keeps those itself.
#[derive(Default)]
pub(crate) struct HostPool {
    free: HashMap<usize, Vec<Vec<u32>>>,
    stats: PoolStats,
}

/// Words below which a dropped tensor's storage goes back to the allocator.
const MIN_POOLED_WORDS: usize = 1 << 14;

impl HostPool {
    /// Storage of `len` words for a new tensor (`what` names it in errors), and whether they
    /// are pooled words (which the caller zeroes, outside the device's lock) rather than new
    /// zeroed ones. Refused when the live tensors and it would exceed `limit` bytes (the host
    /// memory budget); running out of memory is an error, not an abort (which in wasm would be
    /// an `unreachable` trap), after the pool has been freed and the allocation tried again.
    pub fn acquire(&mut self, what: impl FnOnce() -> String, len: usize, limit: u64) -> Result<(Vec<u32>, bool)> {
        let bytes = len as u64 * 4;
        let live = self.stats.live_bytes.saturating_add(bytes);
        if live > limit {
            return Err(SesameError::TooLarge {
                what: format!("{} (with {} already held)", what(), crate::limits::describe_bytes(self.stats.live_bytes)),
                bytes: live,
                limit_name: crate::limits::BUDGET_NAME,
                limit,
            });
        }
        let reused = self.free.get_mut(&len).and_then(Vec::pop);
        let pooled = reused.is_some();
        let words = match reused {
            Some(words) => {
                self.stats.pooled_buffers -= 1;
                self.stats.pooled_bytes -= bytes;
                words
            }
            None => {
                // Idle storage gives way to live tensors under the budget, and when the
                // system has no memory left.
                if live.saturating_add(self.stats.pooled_bytes) > limit {
                    self.trim();
                }
                let fresh = || crate::limits::zeroed_vec(|| "a host tensor".into(), len);
                match fresh() {
                    Err(_) if self.stats.pooled_bytes > 0 => {
                        self.trim();
                        fresh()?
                    }
                    words => words?,
                }
            }
        };
        self.stats.live_buffers += 1;
        self.stats.live_bytes = live;
        Ok((words, pooled))
    }

    /// Takes back a dropped tensor's storage: kept for reuse unless it is small or the pool
    /// is full.
    pub fn release(&mut self, memory: &mut HostMemory) {
        let words = memory.take();
        let bytes = words.len() as u64 * 4;
        self.stats.live_buffers -= 1;
        self.stats.live_bytes -= bytes;
        if words.len() < MIN_POOLED_WORDS || self.stats.pooled_bytes + bytes > MAX_POOLED_BYTES {
            return;
        }
        self.stats.pooled_buffers += 1;
        self.stats.pooled_bytes += bytes;
        self.free.entry(words.len()).or_default().push(words);
    }

    /// Frees every pooled block.
    pub fn trim(&mut self) {
        self.free.clear();
        self.stats.pooled_buffers = 0;
        self.stats.pooled_bytes = 0;
    }

    pub fn stats(&self) -> PoolStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(memory: &HostMemory, value: u32) {
        memory.write().fill(value);
    }

    #[test]
    fn dropped_storage_is_reused_and_gives_way_to_live_tensors() {
        let (len, bytes) = (MIN_POOLED_WORDS, MIN_POOLED_WORDS as u64 * 4);
        let mut pool = HostPool::default();
        let acquire = |pool: &mut HostPool, what: &str, len: usize, limit: u64| {
            pool.acquire(|| what.into(), len, limit).map(|(words, pooled)| (HostMemory::new(words), pooled))
        };
        let (mut a, pooled) = acquire(&mut pool, "a", len, u64::MAX).unwrap();
        assert!(!pooled);
        fill(&a, 7);
        pool.release(&mut a);
        assert_eq!(pool.stats(), PoolStats { live_buffers: 0, live_bytes: 0, pooled_buffers: 1, pooled_bytes: bytes });
        // Exactly the length: the same storage, flagged for the caller to zero
        // (`HostDevice::allocate`; the tensor tests check that zeros come out).
        let (mut b, pooled) = acquire(&mut pool, "b", len, u64::MAX).unwrap();
        assert!(pooled && b.read().iter().all(|&w| w == 7));
        assert_eq!(pool.stats(), PoolStats { live_buffers: 1, live_bytes: bytes, pooled_buffers: 0, pooled_bytes: 0 });
        // Another length is new storage; small storage goes back to the allocator.
        let (mut c, _) = acquire(&mut pool, "c", len + 1, u64::MAX).unwrap();
        let (mut small, _) = acquire(&mut pool, "small", 10, u64::MAX).unwrap();
        for memory in [&mut b, &mut c, &mut small] {
            pool.release(memory);
        }
        assert_eq!((pool.stats().live_buffers, pool.stats().pooled_buffers), (0, 2));
        // Under a budget that the live tensor and the pooled storage would exceed together,
        // the pool is freed; past the budget with live tensors alone, an error names them.
        let budget = 3 * bytes;
        let (d, pooled) = acquire(&mut pool, "d", 2 * len, budget).unwrap();
        assert!(!pooled);
        assert_eq!((pool.stats().pooled_buffers, pool.stats().live_bytes), (0, 2 * bytes));
        let err = acquire(&mut pool, "e", 2 * len, budget).err().unwrap().to_string();
        assert!(err.contains("e (with ") && err.contains("already held"), "{err}");
        assert_eq!(pool.stats().live_buffers, 1);
        drop(d);
        pool.trim();
        assert_eq!(pool.stats().pooled_bytes, 0);
    }
}
