//! A pool of GPU buffers keyed by size class and usage. Creating a buffer (and binding it for
//! the first time) is expensive in WebGPU, and activations of the same shapes come and go on
//! every forward pass, so dropped tensors hand their buffers back here for reuse.
//!
//! Reuse within one pending batch is safe: commands run in recording order, so a buffer handed
//! to a new tensor is written only after the commands that read its old contents.

use std::collections::HashMap;

use crate::limits::{PoolStats, MAX_POOLED_BYTES};

#[derive(Default)]
pub(crate) struct BufferPool {
    free: HashMap<(u64, u32), Vec<wgpu::Buffer>>,
    stats: PoolStats,
}

/// Rounds a request up to its size class: a multiple of 1/8 of its power of two (at most
/// 12.5% waste), at least 256 bytes, so that nearby sizes share buffers.
pub(crate) fn size_class(bytes: u64, max_buffer_size: u64) -> u64 {
    let bytes = bytes.max(16);
    let granule = (bytes.next_power_of_two() / 8).max(256);
    let class = bytes.next_multiple_of(granule);
    if class > max_buffer_size {
        bytes.next_multiple_of(4)
    } else {
        class
    }
}

impl BufferPool {
    /// A buffer of exactly `class` bytes (a value from [`size_class`]) with `usage`.
    pub fn acquire(&mut self, device: &wgpu::Device, class: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        let reused = self.free.get_mut(&(class, usage.bits())).and_then(Vec::pop);
        let buffer = match reused {
            Some(buffer) => {
                self.stats.pooled_buffers -= 1;
                self.stats.pooled_bytes -= class;
                buffer
            }
            None => device.create_buffer(&wgpu::BufferDescriptor { label: None, size: class, usage, mapped_at_creation: false }),
        };
        self.stats.live_buffers += 1;
        self.stats.live_bytes += class;
        buffer
    }

    pub fn release(&mut self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        self.stats.live_buffers -= 1;
        self.stats.live_bytes -= class;
        if self.stats.pooled_bytes + class > MAX_POOLED_BYTES {
            // Dropped, not destroyed: commands recorded but not yet submitted may still read
            // it, and wgpu frees it once they have run.
            drop(buffer);
            return;
        }
        self.stats.pooled_buffers += 1;
        self.stats.pooled_bytes += class;
        self.free.entry((class, buffer.usage().bits())).or_default().push(buffer);
    }

    /// Frees every pooled buffer (once the commands that use them have run, as in `release`).
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
    use super::size_class;

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth() {
        assert_eq!(size_class(1, u64::MAX), 256);
        assert_eq!(size_class(1000, u64::MAX), 1024);
        assert_eq!(size_class(4096 * 3 + 4, u64::MAX), 4096 * 3 + 2048);
        // Above the 256-byte floor, the waste is at most an eighth of the power of two.
        for bytes in [3000u64, 5000, 123_457, 10_000_000] {
            let class = size_class(bytes, u64::MAX);
            assert!(class >= bytes && (class - bytes) * 8 <= bytes.next_power_of_two(), "{bytes} -> {class}");
        }
        // A class above the device's buffer limit falls back to the exact (4-aligned) size.
        assert_eq!(size_class(1001, 1002), 1004);
    }
}
