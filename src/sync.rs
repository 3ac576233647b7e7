//! Locking shared by the devices' caches, pools and batches.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if another thread panicked while holding it (the data
/// here — pools and caches — stays consistent at every unlock point).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
