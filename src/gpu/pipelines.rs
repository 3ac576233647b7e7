//! Compute pipelines, compiled on first use and cached by (shader, entry point, overrides).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Device, WebGpu};
use crate::error::{Result, SesameError};
use crate::kernels::{Access, Kernel};
use crate::sync::lock;

pub(crate) struct CompiledKernel {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

type Key = (&'static str, &'static str, Vec<(&'static str, u32)>);

#[derive(Default)]
pub(crate) struct PipelineCache {
    modules: Mutex<HashMap<&'static str, Arc<wgpu::ShaderModule>>>,
    pipelines: Mutex<HashMap<Key, Arc<CompiledKernel>>>,
}

impl PipelineCache {
    pub fn get(&self, gpu: &Device, webgpu: &WebGpu, kernel: &Kernel, overrides: &[(&'static str, u32)]) -> Result<Arc<CompiledKernel>> {
        let key = (kernel.shader, kernel.entry, overrides.to_vec());
        if let Some(found) = lock(&self.pipelines).get(&key) {
            return Ok(found.clone());
        }
        let compiled = Arc::new(self.compile(gpu, webgpu, kernel, overrides)?);
        lock(&self.pipelines).insert(key, compiled.clone());
        Ok(compiled)
    }

    fn module(&self, webgpu: &WebGpu, kernel: &Kernel) -> Arc<wgpu::ShaderModule> {
        lock(&self.modules)
            .entry(kernel.shader)
            .or_insert_with(|| {
                Arc::new(
                    webgpu.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(kernel.shader),
                        source: wgpu::ShaderSource::Wgsl(kernel.source.into()),
                    }),
                )
            })
            .clone()
    }

    fn compile(&self, gpu: &Device, webgpu: &WebGpu, kernel: &Kernel, overrides: &[(&'static str, u32)]) -> Result<CompiledKernel> {
        let device = &webgpu.device;
        let module = self.module(webgpu, kernel);
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Uniform, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        }];
        for (i, access) in kernel.bindings.iter().enumerate() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: *access == Access::Read },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(kernel.entry), entries: &entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(kernel.entry),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let constants: Vec<(&str, f64)> = overrides.iter().map(|&(k, v)| (k, v as f64)).collect();
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(kernel.entry),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, zero_initialize_workgroup_memory: false },
            cache: None,
        });
        // Native validation is synchronous: a bad shader has reported itself by now. In the
        // browser the report arrives later and surfaces at the next flush or read-back.
        gpu.check_fault().map_err(|e| {
            // Forget the module, so that a later call reports the parse error again.
            lock(&self.modules).remove(kernel.shader);
            match e {
                SesameError::Device(message) => SesameError::ShaderCompilation { shader: format!("{}.wgsl ({})", kernel.shader, kernel.entry), message },
                other => other,
            }
        })?;
        Ok(CompiledKernel { pipeline, layout })
    }
}
