//! What `sesame info` prints: the adapter, the kernel variant chosen for it, the limits that
//! decide which models fit, and the features Sesame can use.

use serde::Serialize;

use crate::gpu::Device;

#[derive(Serialize)]
pub struct AdapterReport {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub kernels: &'static str,
    /// The CPU threads the host kernels run on; `None` on a GPU adapter.
    pub threads: Option<usize>,
    pub limits: Vec<(&'static str, u64)>,
    pub features: Vec<String>,
    /// Why this device was picked, where the caller says (the CLI's `info`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picked: Option<String>,
}

impl AdapterReport {
    pub fn of(gpu: &Device) -> Self {
        let info = gpu.adapter_info();
        let l = gpu.limits();
        let limits = vec![
            ("max_buffer_size", l.max_buffer_size),
            ("max_storage_buffer_binding_size", l.max_storage_buffer_binding_size),
            ("max_storage_buffers_per_shader_stage", l.max_storage_buffers_per_shader_stage as u64),
            ("max_compute_workgroup_storage_size", l.max_compute_workgroup_storage_size as u64),
            ("max_compute_invocations_per_workgroup", l.max_compute_invocations_per_workgroup as u64),
            ("max_compute_workgroups_per_dimension", l.max_compute_workgroups_per_dimension as u64),
            ("min_storage_buffer_offset_alignment", l.min_storage_buffer_offset_alignment as u64),
        ];
        AdapterReport {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
            kernels: gpu.kernel_variant().name(),
            threads: gpu.host_threads(),
            limits,
            features: gpu.features().iter_names().map(|(name, _)| name.to_ascii_lowercase().replace('_', "-")).collect(),
            picked: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A human-readable report, one fact per line.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "adapter      {}\nbackend      {}\ndevice type  {}\ndriver       {}\nkernels      {}{}\nfeatures     {}\nlimits\n",
            self.name,
            self.backend,
            self.device_type,
            self.driver,
            self.kernels,
            self.threads.map(|n| format!(", {n} thread{}", if n == 1 { "" } else { "s" })).unwrap_or_default(),
            if self.features.is_empty() { "(none used)".to_string() } else { self.features.join(", ") }
        );
        for (name, value) in &self.limits {
            s += &format!("  {name:<40} {value}\n");
        }
        if let Some(why) = &self.picked {
            s += &format!("picked       {why}\n");
        }
        s
    }
}
