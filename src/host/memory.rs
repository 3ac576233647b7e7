//! A host tensor's storage: 32-bit words (f32 or u32 elements) behind a lock, shared by the
//! tensor's views.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Result, SesameError};

fn out_of_memory(len: usize) -> SesameError {
    SesameError::Gpu(format!("out of memory: the host device could not allocate {len} f32 values ({} MB)", len as u64 * 4 / 1_000_000))
}

pub(crate) struct HostMemory {
    words: RwLock<Vec<u32>>,
}

impl HostMemory {
    /// `len` zeroed words. Running out of memory is an error, not an abort (which in wasm
    /// would be an `unreachable` trap).
    pub fn zeroed(len: usize) -> Result<HostMemory> {
        let mut words = Vec::new();
        words.try_reserve_exact(len).map_err(|_| out_of_memory(len))?;
        words.resize(len, 0);
        Ok(HostMemory { words: RwLock::new(words) })
    }

    pub fn bytes(&self) -> u64 {
        self.read().len() as u64 * 4
    }

    // A poisoned lock means a panic elsewhere mid-kernel; the words are still plain data.
    pub fn read(&self) -> RwLockReadGuard<'_, Vec<u32>> {
        self.words.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Vec<u32>> {
        self.words.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
