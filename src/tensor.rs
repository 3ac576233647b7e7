//! Tensors on the GPU: a pooled buffer, a shape and a dtype. Always contiguous row-major;
//! views (reshape, narrowing the leading dimension) share the buffer without copying.

use std::sync::Arc;

use crate::error::{arg_err, shape_err, Result, SesameError};
use crate::gpu::{Backend, Bind, Binding, Device, WebGpu};
use crate::host::{HostMemory, HostView};
use crate::sync::lock;

/// Element type of a tensor. Kernels compute in f32; `F16` is reserved for half-precision
/// weight storage, `U32` holds ids and indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    U32,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 => 4,
            DType::F16 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::U32 => "u32",
        }
    }
}

/// Host element types that tensors upload from and download to.
pub trait Element: bytemuck::Pod {
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}

impl Element for u32 {
    const DTYPE: DType = DType::U32;
}

/// The memory behind one or more tensor views: a GPU buffer, or words on the host device.
/// Hands a buffer back to the pool when the last view is dropped.
struct Storage {
    gpu: Device,
    memory: Memory,
}

enum Memory {
    /// `Some` until drop.
    Buffer(Option<wgpu::Buffer>),
    Host(HostMemory),
}

impl Drop for Storage {
    fn drop(&mut self) {
        match (&mut self.memory, &self.gpu.inner.backend) {
            (Memory::Buffer(buffer), Backend::WebGpu(webgpu)) => {
                if let Some(buffer) = buffer.take() {
                    lock(&webgpu.pool).release(buffer);
                }
            }
            (Memory::Host(memory), Backend::Host(host)) => host.release(memory),
            _ => {}
        }
    }
}

#[derive(Clone)]
pub struct Tensor {
    storage: Arc<Storage>,
    shape: Vec<usize>,
    /// Offset into the buffer, in elements.
    offset: usize,
    dtype: DType,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({:?}, {})", self.shape, self.dtype.name())
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl Tensor {
    /// A tensor whose contents are undefined until a kernel writes them (a pooled buffer may
    /// hold a previous tensor's data; a debug build fills host storage with NaNs).
    pub fn empty(gpu: &Device, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::allocate(gpu, shape, dtype, false)
    }

    /// A tensor of zeros (on a GPU, cleared in the pending batch, so ordered with other
    /// commands; on the host, zeroed when it is handed out).
    pub fn zeros(gpu: &Device, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let t = Tensor::allocate(gpu, shape, dtype, true)?;
        if let (Memory::Buffer(Some(buffer)), Some(webgpu)) = (&t.storage.memory, gpu.webgpu()) {
            webgpu.clear_buffer(buffer, 0, buffer.size());
        }
        Ok(t)
    }

    /// Storage for a tensor of `shape`; host storage zeroed when `zeroed`.
    fn allocate(gpu: &Device, shape: &[usize], dtype: DType, zeroed: bool) -> Result<Tensor> {
        let bytes =
            shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64)).ok_or_else(|| arg_err!("tensor", "shape {shape:?} overflows"))?;
        gpu.check_size(|| format!("a {} tensor of shape {shape:?}", dtype.name()), bytes)?;
        let memory = match &gpu.inner.backend {
            Backend::WebGpu(webgpu) => {
                let class = crate::gpu::pool_size_class(bytes, gpu.limits().max_buffer_size);
                let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
                Memory::Buffer(Some(lock(&webgpu.pool).acquire(&webgpu.device, class, usage)))
            }
            Backend::Host(host) => {
                if dtype == DType::F16 {
                    return Err(arg_err!("tensor", "the host device holds f32 and u32 tensors, not f16"));
                }
                let what = || format!("a {} tensor of shape {shape:?} on the host device", dtype.name());
                Memory::Host(host.allocate(what, numel(shape), zeroed)?)
            }
        };
        Ok(Tensor { storage: Arc::new(Storage { gpu: gpu.clone(), memory }), shape: shape.to_vec(), offset: 0, dtype })
    }

    /// Uploads host data. `data.len()` must equal the product of `shape`.
    pub fn from_slice<T: Element>(gpu: &Device, data: &[T], shape: &[usize]) -> Result<Tensor> {
        if data.len() != numel(shape) {
            return Err(shape_err!("tensor upload", "{} values do not fill shape {shape:?}", data.len()));
        }
        let t = Tensor::empty(gpu, shape, T::DTYPE)?;
        if data.is_empty() {
            return Ok(t);
        }
        match (&t.storage.memory, gpu.webgpu()) {
            (Memory::Buffer(Some(buffer)), Some(webgpu)) => {
                // `write_buffer` lands before the pending batch runs; a pooled buffer may
                // still be read by that batch, so submit it first.
                if webgpu.has_pending() {
                    gpu.flush()?;
                }
                webgpu.queue.write_buffer(buffer, 0, bytemuck::cast_slice(data));
                webgpu.staged(std::mem::size_of_val(data) as u64);
            }
            (Memory::Host(memory), _) => bytemuck::cast_slice_mut::<u32, u8>(&mut memory.write()).copy_from_slice(bytemuck::cast_slice(data)),
            _ => return Err(t.misplaced()),
        }
        Ok(t)
    }

    /// Downloads the tensor (submitting all pending work first).
    pub async fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(SesameError::DType { op: "download", operand: "tensor", expected: T::DTYPE.name(), actual: self.dtype.name() });
        }
        if self.numel() == 0 {
            return Ok(Vec::new());
        }
        let bytes = match (&self.storage.memory, self.gpu().webgpu()) {
            (Memory::Buffer(Some(buffer)), Some(webgpu)) => self.gpu().read_buffer(webgpu, buffer, self.byte_offset(), self.byte_len()).await?,
            (Memory::Host(_), _) => {
                #[cfg(target_arch = "wasm32")]
                crate::host::yield_to_event_loop().await;
                return self.host_values();
            }
            _ => return Err(self.misplaced()),
        };
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The values of a tensor in host memory, read at once; a GPU tensor's are an error (they
    /// must be awaited: [`Tensor::to_vec`]).
    pub fn host_values<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(SesameError::DType { op: "download", operand: "tensor", expected: T::DTYPE.name(), actual: self.dtype.name() });
        }
        match &self.storage.memory {
            Memory::Host(memory) => Ok(bytemuck::cast_slice(&memory.read()[self.element_range()]).to_vec()),
            _ => Err(self.misplaced()),
        }
    }

    pub fn gpu(&self) -> &Device {
        &self.storage.gpu
    }

    /// Whether `other` is the same view of the same buffer (same offset and shape).
    pub fn same_view(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage) && self.offset == other.offset && self.shape == other.shape
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The words of this view within its host storage (host tensors are never f16).
    fn element_range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.numel()
    }

    /// The buffer and device of a GPU tensor.
    fn gpu_buffer(&self) -> Result<(&wgpu::Buffer, &WebGpu)> {
        match (&self.storage.memory, self.gpu().webgpu()) {
            (Memory::Buffer(Some(buffer)), Some(webgpu)) => Ok((buffer, webgpu)),
            _ => Err(self.misplaced()),
        }
    }

    /// The error for memory that does not belong to the device it is used on: a bug, reported.
    fn misplaced(&self) -> SesameError {
        SesameError::Device(format!("tensor {:?} is not in the memory of its device ({})", self.shape, self.gpu().adapter_info().name))
    }

    /// Copies `len` elements from `src` at element `src_at` of its storage to `dst` at `dst_at`
    /// (on a GPU, recorded in the pending batch). Both are of one dtype and one device.
    fn copy_elements(src: &Tensor, src_at: usize, dst: &Tensor, dst_at: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        if let (Memory::Host(from), Memory::Host(to), Backend::Host(host)) = (&src.storage.memory, &dst.storage.memory, &dst.gpu().inner.backend) {
            let _running = host.exclusive();
            if std::ptr::eq(from, to) {
                to.write().copy_within(src_at..src_at + len, dst_at);
            } else {
                to.write()[dst_at..dst_at + len].copy_from_slice(&from.read()[src_at..src_at + len]);
            }
            return Ok(());
        }
        let ((from, webgpu), (to, _)) = (src.gpu_buffer()?, dst.gpu_buffer()?);
        let size = src.dtype.size() as u64;
        webgpu.copy_buffer(from, src_at as u64 * size, to, dst_at as u64 * size, len as u64 * size);
        Ok(())
    }

    pub(crate) fn byte_offset(&self) -> u64 {
        (self.offset * self.dtype.size()) as u64
    }

    pub(crate) fn byte_len(&self) -> u64 {
        (self.numel() * self.dtype.size()) as u64
    }

    /// The same data under another shape (no copy).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if numel(shape) != self.numel() {
            return Err(shape_err!("reshape", "cannot view {:?} ({} elements) as {shape:?}", self.shape, self.numel()));
        }
        Ok(Tensor { shape: shape.to_vec(), ..self.clone() })
    }

    /// Rows `start..start + len` of the leading dimension. A view when the offset meets the
    /// device's binding alignment, otherwise a copy.
    pub fn narrow(&self, start: usize, len: usize) -> Result<Tensor> {
        let rows = *self.shape.first().ok_or_else(|| shape_err!("narrow", "cannot narrow a scalar"))?;
        if start + len > rows {
            return Err(shape_err!("narrow", "rows {start}..{} out of range for shape {:?}", start + len, self.shape));
        }
        let row = numel(&self.shape[1..]);
        let mut shape = self.shape.clone();
        shape[0] = len;
        let view = Tensor { shape, offset: self.offset + start * row, ..self.clone() };
        let align = self.gpu().limits().min_storage_buffer_offset_alignment as u64;
        if view.byte_offset().is_multiple_of(align) {
            return Ok(view);
        }
        let copy = Tensor::empty(self.gpu(), &view.shape, self.dtype)?;
        Tensor::copy_elements(&view, view.offset, &copy, 0, view.numel())?;
        Ok(copy)
    }

    /// Splits the leading dimension into (start, len) row ranges of at most `binding_limit`
    /// bytes each, starting at byte offsets the device can bind: how an op reads a table
    /// larger than one storage binding (GPT-2's 147 MiB token embeddings on a 128 MiB limit).
    pub fn row_chunks(&self, binding_limit: u64) -> Result<Vec<(usize, usize)>> {
        let rows = *self.shape.first().ok_or_else(|| shape_err!("row_chunks", "a scalar has no rows"))?;
        let row_bytes = (numel(&self.shape[1..]) * self.dtype.size()) as u64;
        if self.byte_len() <= binding_limit || row_bytes == 0 {
            return Ok(vec![(0, rows)]);
        }
        let align = self.gpu().limits().min_storage_buffer_offset_alignment as u64;
        let step = (align / gcd(row_bytes, align)) as usize;
        let per_chunk = ((binding_limit / row_bytes) as usize / step) * step;
        if per_chunk == 0 {
            return Err(SesameError::TooLarge {
                what: format!("binding rows of a tensor of shape {:?}", self.shape),
                bytes: row_bytes * step as u64,
                limit_name: "max_storage_buffer_binding_size",
                limit: binding_limit,
            });
        }
        Ok((0..rows).step_by(per_chunk).map(|start| (start, per_chunk.min(rows - start))).collect())
    }

    /// Sets every element to zero (on a GPU, recorded in the pending batch).
    pub fn fill_zeros(&self) {
        if self.numel() == 0 {
            return;
        }
        match (&self.storage.memory, self.gpu().webgpu()) {
            (Memory::Buffer(Some(buffer)), Some(webgpu)) => webgpu.clear_buffer(buffer, self.byte_offset(), self.byte_len()),
            (Memory::Host(memory), _) => memory.write()[self.element_range()].fill(0),
            _ => {}
        }
    }

    /// Copies `src` into rows `start..` of this tensor's leading dimension (recorded in the
    /// pending batch). Used to append to caches.
    pub fn write_rows(&self, start: usize, src: &Tensor) -> Result<()> {
        let row: usize = numel(self.shape.get(1..).unwrap_or(&[]));
        let fits = self.rank() >= 1 && src.dtype == self.dtype && src.numel().is_multiple_of(row.max(1)) && start * row + src.numel() <= self.numel();
        if !fits {
            return Err(shape_err!("write_rows", "cannot write {:?} {} at row {start} of {:?} {}", src.shape, src.dtype.name(), self.shape, self.dtype.name()));
        }
        Tensor::copy_elements(src, src.offset, self, self.offset + start * row, src.numel())
    }

    /// Rows `rows` of the leading dimension, gathered into a new tensor `[rows.len(), ..]` by
    /// copies recorded in the pending batch (e.g. the `[CLS]` token of every sequence).
    pub fn select_rows(&self, rows: &[usize]) -> Result<Tensor> {
        let count = *self.shape.first().ok_or_else(|| shape_err!("select_rows", "cannot select rows of a scalar"))?;
        if let Some(bad) = rows.iter().find(|&&r| r >= count) {
            return Err(shape_err!("select_rows", "row {bad} out of range for shape {:?}", self.shape));
        }
        let mut shape = self.shape.clone();
        shape[0] = rows.len();
        let out = Tensor::empty(self.gpu(), &shape, self.dtype)?;
        let row = numel(&self.shape[1..]);
        for (i, &r) in rows.iter().enumerate() {
            Tensor::copy_elements(self, self.offset + r * row, &out, i * row, row)?;
        }
        Ok(out)
    }
}

impl Bind for Tensor {
    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn device(&self) -> &Device {
        self.gpu()
    }

    fn gpu_binding(&self) -> Result<wgpu::BufferBinding<'_>> {
        let (buffer, _) = self.gpu_buffer()?;
        let size = wgpu::BufferSize::new(self.byte_len()).ok_or_else(|| arg_err!("dispatch", "cannot bind an empty tensor of shape {:?}", self.shape))?;
        let limit = self.gpu().limits().max_storage_buffer_binding_size;
        if self.byte_len() > limit {
            return Err(SesameError::TooLarge {
                what: format!("binding a {} tensor of shape {:?}", self.dtype.name(), self.shape),
                bytes: self.byte_len(),
                limit_name: "max_storage_buffer_binding_size",
                limit,
            });
        }
        Ok(wgpu::BufferBinding { buffer, offset: self.byte_offset(), size: Some(size) })
    }

    fn host_view(&self) -> Result<HostView<'_>> {
        match &self.storage.memory {
            Memory::Host(memory) => Ok(HostView { memory, words: self.element_range() }),
            Memory::Buffer(_) => Err(self.misplaced()),
        }
    }
}

impl<'a> From<&'a Tensor> for Binding<'a> {
    fn from(t: &'a Tensor) -> Self {
        Binding::Tensor(t)
    }
}

impl<'a> From<Option<&'a Tensor>> for Binding<'a> {
    fn from(t: Option<&'a Tensor>) -> Self {
        t.map_or(Binding::Absent, |t| Binding::Tensor(t))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::{devices, gpu};
    use pollster::block_on;

    #[test]
    fn upload_download_round_trip_and_views() {
        for gpu in devices() {
            let data: Vec<f32> = (0..300).map(|i| i as f32 * 0.5).collect();
            let t = Tensor::from_slice(gpu, &data, &[100, 3]).unwrap();
            assert_eq!(block_on(t.to_vec::<f32>()).unwrap(), data);
            let r = t.reshape(&[3, 100]).unwrap();
            assert_eq!(r.shape(), &[3, 100]);
            assert!(t.reshape(&[7, 7]).is_err());
            // Row 1 of [100, 3] starts at byte 12: on a GPU not aligned, so narrow copies.
            let n = t.narrow(1, 2).unwrap();
            assert_eq!(block_on(n.to_vec::<f32>()).unwrap(), data[3..9].to_vec());
            assert_eq!(block_on(n.narrow(1, 1).unwrap().to_vec::<f32>()).unwrap(), data[6..9].to_vec(), "a view of a view");
            assert!(t.narrow(99, 2).is_err());
            assert!(block_on(t.to_vec::<u32>()).is_err(), "dtype mismatch on download");
        }
    }

    #[test]
    fn select_rows_gathers_by_copy() {
        for gpu in devices() {
            let t = Tensor::from_slice(gpu, &[0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0], &[3, 2]).unwrap();
            let picked = t.select_rows(&[2, 0, 2]).unwrap();
            assert_eq!(picked.shape(), &[3, 2]);
            assert_eq!(block_on(picked.to_vec::<f32>()).unwrap(), vec![20.0, 21.0, 0.0, 1.0, 20.0, 21.0]);
            assert!(t.select_rows(&[3]).is_err());
        }
    }

    #[test]
    fn zeros_and_write_rows() {
        for gpu in devices() {
            let cache = Tensor::zeros(gpu, &[4, 2], DType::F32).unwrap();
            let rows = Tensor::from_slice(gpu, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
            cache.write_rows(1, &rows).unwrap();
            assert_eq!(block_on(cache.to_vec::<f32>()).unwrap(), vec![0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
            assert!(cache.write_rows(3, &rows).is_err(), "overflowing write is rejected");
            // Rows of the same storage: the copy reads before it writes.
            cache.write_rows(0, &cache.narrow(1, 2).unwrap()).unwrap();
            assert_eq!(block_on(cache.to_vec::<f32>()).unwrap(), vec![1.0, 2.0, 3.0, 4.0, 3.0, 4.0, 0.0, 0.0]);
            // A view at an offset every device can bind (rows of 256 bytes): fill_zeros
            // clears its rows only.
            let wide = Tensor::from_slice(gpu, &[1.0f32; 4 * 64], &[4, 64]).unwrap();
            wide.narrow(2, 2).unwrap().fill_zeros();
            let want: Vec<f32> = (0..4 * 64).map(|i| if i < 2 * 64 { 1.0 } else { 0.0 }).collect();
            assert_eq!(block_on(wide.to_vec::<f32>()).unwrap(), want, "fill_zeros of a view");
        }
    }

    #[test]
    fn host_tensors_are_counted_until_dropped() {
        // A private host device, so that parallel tests do not disturb the counts.
        let host = Device::host();
        let a = Tensor::from_slice(&host, &[1.0f32; 1000], &[1000]).unwrap();
        let view = a.reshape(&[10, 100]).unwrap();
        let sum = crate::ops::elementwise::add(&a, &a).unwrap();
        assert_eq!(host.stats().live_buffers, 2);
        assert_eq!(host.stats().live_bytes, 8000);
        drop((a, view, sum));
        assert_eq!(host.stats(), crate::gpu::PoolStats::default());
        assert!(Tensor::empty(&host, &[2], DType::F16).unwrap_err().to_string().contains("f16"));
        // A large tensor's storage is pooled when dropped and handed out again zeroed.
        let large = Tensor::from_slice(&host, &vec![1.0f32; 1 << 16], &[1 << 16]).unwrap();
        drop(large);
        assert_eq!((host.stats().live_buffers, host.stats().pooled_buffers), (0, 1));
        let zeros = Tensor::zeros(&host, &[1 << 8, 1 << 8], DType::F32).unwrap();
        assert_eq!(host.stats().pooled_buffers, 0);
        assert!(block_on(zeros.to_vec::<f32>()).unwrap().iter().all(|&v| v == 0.0));
        drop(zeros);
        // `empty` storage is the canary in a debug build (as the tests build), pooled or fresh.
        let pooled = Tensor::empty(&host, &[1 << 16], DType::U32).unwrap();
        let fresh = Tensor::empty(&host, &[3], DType::U32).unwrap();
        if cfg!(debug_assertions) {
            for t in [pooled, fresh] {
                assert!(block_on(t.to_vec::<u32>()).unwrap().iter().all(|&w| w == crate::host::UNDEFINED_WORD));
            }
        }
        host.trim_pool();
        assert_eq!(host.stats(), crate::gpu::PoolStats::default());
    }

    #[test]
    fn oversized_tensor_is_a_typed_error() {
        let gpu = gpu();
        let err = Tensor::empty(gpu, &[1 << 20, 1 << 20], DType::F32).unwrap_err();
        assert!(matches!(err, SesameError::TooLarge { .. }), "{err}");
        assert!(Tensor::from_slice(gpu, &[1.0f32; 5], &[2, 2]).is_err());
    }

    #[test]
    fn dropped_tensors_return_their_buffers_to_the_pool() {
        // A private device, so that parallel tests do not disturb the counts.
        let gpu = block_on(Device::new(Default::default())).unwrap();
        let a = Tensor::from_slice(&gpu, &[1.0f32; 1000], &[1000]).unwrap();
        let view = a.reshape(&[10, 100]).unwrap();
        assert_eq!(gpu.stats().live_buffers, 1);
        drop(a);
        assert_eq!(gpu.stats().live_buffers, 1, "a view keeps the buffer alive");
        drop(view);
        let stats = gpu.stats();
        assert_eq!((stats.live_buffers, stats.live_bytes, stats.pooled_buffers), (0, 0, 1));
        let b = Tensor::empty(&gpu, &[999], DType::F32).unwrap();
        assert_eq!(gpu.stats().pooled_buffers, 0, "the same size class is reused");
        drop(b);
        gpu.trim_pool();
        assert_eq!(gpu.stats(), crate::gpu::PoolStats::default());
    }

    #[test]
    fn a_buffer_freed_while_a_pending_command_reads_it_stays_valid_until_the_command_runs() {
        // Freeing a pooled buffer (trim_pool, or a release past the pool's cap) while the
        // unsubmitted batch still reads it must not invalidate the batch.
        let gpu = block_on(Device::new(Default::default())).unwrap();
        let a = Tensor::from_slice(&gpu, &[1.0f32, 2.0], &[2]).unwrap();
        let sum = crate::ops::elementwise::add(&a, &a).unwrap();
        assert!(gpu.webgpu().unwrap().has_pending());
        drop(a);
        gpu.trim_pool();
        assert_eq!(block_on(sum.to_vec::<f32>()).unwrap(), vec![2.0, 4.0]);
    }
}
