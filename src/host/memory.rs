//! A host tensor's storage: 32-bit words (f32 or u32 elements) behind a lock, shared by the
//! tensor's views.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::Result;

pub(crate) struct HostMemory {
    words: RwLock<Vec<u32>>,
}

impl HostMemory {
    /// `len` zeroed words. Running out of memory is an error, not an abort (which in wasm
    /// would be an `unreachable` trap).
    pub fn zeroed(len: usize) -> Result<HostMemory> {
        let words = crate::limits::zeroed_vec(|| "a host tensor".into(), len)?;
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
