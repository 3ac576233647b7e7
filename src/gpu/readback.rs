//! Asynchronous read-back: copy into a mappable staging buffer, submit, and await the map.
//! In the browser the map callback fires from the event loop, so awaiting never blocks the
//! page's thread; natively we drive the device with a blocking poll first.

use super::{lock, pool::size_class, Device, WebGpu};
use crate::error::{Result, SesameError};

impl Device {
    /// Reads `bytes` bytes at `offset` of `src` (flushing everything recorded before).
    pub(crate) async fn read_buffer(&self, webgpu: &WebGpu, src: &wgpu::Buffer, offset: u64, bytes: u64) -> Result<Vec<u8>> {
        let usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let class = size_class(bytes, self.inner.limits.max_buffer_size);
        let staging = lock(&webgpu.pool).acquire(&webgpu.device, class, usage);
        webgpu.copy_buffer(src, offset, &staging, 0, bytes);
        let result = self.map_and_copy(webgpu, &staging, bytes).await;
        lock(&webgpu.pool).release(staging);
        result
    }

    async fn map_and_copy(&self, webgpu: &WebGpu, staging: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.flush()?;
        let (sender, receiver) = futures_channel::oneshot::channel();
        let slice = staging.slice(0..bytes);
        slice.map_async(wgpu::MapMode::Read, move |result| {
            let _ = sender.send(result);
        });
        // In the browser the event loop drives the map; natively we poll.
        #[cfg(target_arch = "wasm32")]
        let _ = webgpu;
        #[cfg(not(target_arch = "wasm32"))]
        webgpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| SesameError::Readback(e.to_string()))?;
        let mapped = receiver.await.map_err(|_| SesameError::Readback("the map request was dropped".into()))?;
        self.check_fault()?;
        mapped.map_err(|e| SesameError::Readback(e.to_string()))?;
        let data = slice.get_mapped_range().map_err(|e| SesameError::Readback(e.to_string()))?.to_vec();
        staging.unmap();
        Ok(data)
    }
}
