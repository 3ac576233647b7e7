//! The threads a host twin may split its work over. Natively: the host device's rayon pool.
//! In the threaded browser build (`cfg(host_threads)` on wasm32, the `wasm-threads` feature):
//! rayon's global pool, whose Web Workers the page started with `initThreadPool` before
//! making the device. The single-threaded browser build has none, and every twin runs on the
//! calling thread.
//!
//! Twins hand their work out as disjoint chunks of an output ([`each_chunk`]), so
//! that a split computes exactly what the sequential loop computes, in any order.

use crate::error::Result;
#[cfg(host_threads)]
use rayon::prelude::*;

/// Values a piece of an elementwise or row-wise twin holds at least when its work is split
/// over threads (the tests' small shapes split too).
pub(crate) const MIN_SPLIT_VALUES: usize = if cfg!(test) { 64 } else { 1 << 15 };

/// Multiply-adds a piece of split work (a band of a product, a group of attention heads) does
/// at least: below this, handing work to another thread costs more than it saves.
pub(crate) const MIN_SPLIT_WORK: usize = if cfg!(test) { 1 << 8 } else { 1 << 18 };

/// A pool of more than one thread.
#[derive(Clone, Copy)]
pub(crate) struct Threads<'a> {
    #[cfg(not(target_arch = "wasm32"))]
    pool: &'a rayon::ThreadPool,
    #[cfg(target_arch = "wasm32")]
    global: std::marker::PhantomData<&'a ()>,
}

impl<'a> Threads<'a> {
    /// The host device's pool natively.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(pool: &'a rayon::ThreadPool) -> Threads<'a> {
        Threads { pool }
    }

    /// Rayon's global pool, in the threaded browser build.
    #[cfg(all(target_arch = "wasm32", host_threads))]
    pub fn global() -> Threads<'a> {
        Threads { global: std::marker::PhantomData }
    }

    pub fn count(self) -> usize {
        #[cfg(not(target_arch = "wasm32"))]
        return self.pool.current_num_threads();
        #[cfg(all(target_arch = "wasm32", host_threads))]
        return rayon::current_num_threads();
        #[cfg(not(host_threads))]
        1
    }

    /// Runs `work` where rayon's parallel iterators use this pool.
    #[cfg(host_threads)]
    pub fn install<R: Send>(self, work: impl FnOnce() -> R + Send) -> R {
        #[cfg(not(target_arch = "wasm32"))]
        return self.pool.install(work);
        #[cfg(target_arch = "wasm32")]
        work()
    }
}

/// Runs `task(i, chunk)` on each `size`-long chunk of `values` (the last may be shorter): over
/// `threads` where there are some, else in order on the calling thread. An error a task
/// returns is the answer (with threads, any one of them; the other tasks may have run).
pub(crate) fn each_chunk<T: Send>(
    threads: Option<Threads<'_>>,
    values: &mut [T],
    size: usize,
    task: impl Fn(usize, &mut [T]) -> Result<()> + Sync + Send,
) -> Result<()> {
    // Paired with as many zero-sized values as there are chunks (no allocation).
    let chunks = values.len().div_ceil(size.max(1));
    each_chunk_pair(threads, (values, size), (&mut vec![(); chunks], 1), |i, chunk, _| task(i, chunk))
}

/// Runs `task(i, a_chunk, b_chunk)` on the i-th `a_size`-long chunk of `a` with the i-th
/// `b_size`-long chunk of `b` (two outputs cut alike), as [`each_chunk`] does.
#[cfg_attr(not(host_threads), allow(unused_variables))]
pub(crate) fn each_chunk_pair<T: Send, U: Send>(
    threads: Option<Threads<'_>>,
    (a, a_size): (&mut [T], usize),
    (b, b_size): (&mut [U], usize),
    task: impl Fn(usize, &mut [T], &mut [U]) -> Result<()> + Sync + Send,
) -> Result<()> {
    let (a_size, b_size) = (a_size.max(1), b_size.max(1));
    #[cfg(host_threads)]
    if let Some(threads) = threads.filter(|_| a.len() > a_size) {
        return threads.install(|| a.par_chunks_mut(a_size).zip(b.par_chunks_mut(b_size)).enumerate().try_for_each(|(i, (a, b))| task(i, a, b)));
    }
    a.chunks_mut(a_size).zip(b.chunks_mut(b_size)).enumerate().try_for_each(|(i, (a, b))| task(i, a, b))
}

/// How many pieces to cut `len` items into, of at least `min_piece` items each, for `threads`:
/// about two a thread (so that an uneven split still keeps every thread busy), 1 without threads.
pub(crate) fn pieces(threads: Option<Threads<'_>>, len: usize, min_piece: usize) -> usize {
    let wanted = threads.map_or(1, |t| 2 * t.count());
    wanted.min(len / min_piece.max(1)).max(1)
}
