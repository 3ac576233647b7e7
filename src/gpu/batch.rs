//! The pending command batch: one command encoder that ops record dispatches and copies into,
//! and an arena for their uniform params, submitted together at a flush or a read-back.
//! Batching matters in WebGPU, where each submit and each buffer creation is expensive.

use super::pipelines::CompiledKernel;
use crate::kernels::{Access, Kernel};

const ARENA_CHUNK: u64 = 256 * 1024;

/// Uniform params of the pending batch: staged on the CPU, written with one `write_buffer`
/// per chunk just before the submit. A chunk is reused by the next batch; queue ordering
/// makes that safe (the write lands after the previous submission has consumed it).
struct UniformArena {
    align: u64,
    chunks: Vec<(wgpu::Buffer, Vec<u8>)>,
    current: usize,
}

impl UniformArena {
    /// Stages `bytes` and returns (chunk index, offset).
    fn push(&mut self, device: &wgpu::Device, bytes: &[u8]) -> (usize, u64) {
        loop {
            if self.current == self.chunks.len() {
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("uniform arena"),
                    size: ARENA_CHUNK,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.chunks.push((buffer, Vec::with_capacity(ARENA_CHUNK as usize)));
            }
            let staged = &mut self.chunks[self.current].1;
            let offset = (staged.len() as u64).next_multiple_of(self.align);
            if offset + bytes.len() as u64 <= ARENA_CHUNK {
                staged.resize(offset as usize, 0);
                staged.extend_from_slice(bytes);
                return (self.current, offset);
            }
            self.current += 1;
        }
    }

    fn upload_and_reset(&mut self, queue: &wgpu::Queue) {
        for (buffer, staged) in &mut self.chunks {
            if !staged.is_empty() {
                queue.write_buffer(buffer, 0, staged);
                staged.clear();
            }
        }
        self.current = 0;
    }
}

pub(crate) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    uniforms: UniformArena,
    /// 16-byte buffers bound where an optional operand is absent: [0] for every absent
    /// read-only binding, [1 + i] for the i-th absent read-write one of a dispatch (a
    /// writable binding may not share its buffer with any other binding).
    placeholders: Vec<wgpu::Buffer>,
}

impl Batch {
    pub fn new(uniform_align: u64) -> Self {
        Batch { encoder: None, uniforms: UniformArena { align: uniform_align.max(16), chunks: Vec::new(), current: 0 }, placeholders: Vec::new() }
    }

    fn ensure_placeholders(&mut self, device: &wgpu::Device, count: usize) {
        while self.placeholders.len() < count {
            self.placeholders.push(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("absent operand"),
                size: 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            }));
        }
    }

    pub fn has_pending(&self) -> bool {
        self.encoder.is_some()
    }

    pub fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sesame batch") }))
    }

    /// Records `kernel` (declared by `decl`) on `bindings`, `None` where an optional operand is
    /// absent (one per declared binding: the device has checked).
    pub fn dispatch(
        &mut self,
        device: &wgpu::Device,
        kernel: &CompiledKernel,
        decl: &Kernel,
        params: &[u8],
        bindings: Vec<Option<wgpu::BufferBinding<'_>>>,
        workgroups: [u32; 3],
    ) {
        self.ensure_placeholders(device, 1 + decl.bindings.len());
        let (chunk, offset) = self.uniforms.push(device, params);
        let uniform = wgpu::BufferBinding { buffer: &self.uniforms.chunks[chunk].0, offset, size: wgpu::BufferSize::new(params.len() as u64) };
        let mut entries = vec![wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::Buffer(uniform) }];
        let mut absent_writable = 0;
        for (i, (binding, access)) in bindings.into_iter().zip(decl.bindings).enumerate() {
            let resource = match (binding, access) {
                (Some(binding), _) => binding,
                (None, Access::Read) => self.placeholders[0].as_entire_buffer_binding(),
                (None, Access::ReadWrite) => {
                    absent_writable += 1;
                    self.placeholders[absent_writable].as_entire_buffer_binding()
                }
            };
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: wgpu::BindingResource::Buffer(resource) });
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(decl.entry), layout: &kernel.layout, entries: &entries });
        let encoder = self.encoder(device);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(decl.entry), timestamp_writes: None });
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
    }

    pub fn submit(&mut self, queue: &wgpu::Queue) {
        if let Some(encoder) = self.encoder.take() {
            self.uniforms.upload_and_reset(queue);
            queue.submit([encoder.finish()]);
        }
    }
}
