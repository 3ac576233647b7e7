//! The device context: adapter and device, the pipeline cache, the buffer pool and the command
//! batch that ops record into. One code path for native (wgpu over Vulkan/Metal/DX12) and the
//! browser (wgpu over WebGPU); the only difference is who drives buffer mapping (see
//! `readback`). A [`Device`] may instead be the host device ([`Device::host`]), which runs each
//! kernel's Rust twin on the CPU (see `crate::host`).

mod batch;
mod binding;
mod pipelines;
mod pool;
mod readback;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use crate::limits::PoolStats;
pub(crate) use binding::{Bind, Binding};
pub(crate) use pool::size_class as pool_size_class;

use crate::error::{Result, SesameError};
use crate::host::HostDevice;
use crate::kernels::{Kernel, KernelParams};
use crate::sync::lock;
use batch::Batch;
use pipelines::PipelineCache;
use pool::BufferPool;

/// Which family of kernels suits the adapter.
///
/// Real GPUs want shared-memory tiling; CPU adapters (lavapipe, SwiftShader) run invocations
/// as SIMD lanes of a few threads, where barriers are expensive and register blocking wins
/// (about 15× on matmul, measured on lavapipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelVariant {
    /// Workgroup shared-memory tiles: for discrete and integrated GPUs.
    Tiled,
    /// Register-blocked, barrier-free vec4 kernels: for CPU adapters.
    Blocked,
    /// No WGSL: the kernels' Rust twins on the host device.
    Host,
}

impl KernelVariant {
    pub fn name(self) -> &'static str {
        match self {
            KernelVariant::Tiled => "tiled",
            KernelVariant::Blocked => "blocked",
            KernelVariant::Host => "host",
        }
    }

    /// The variant for an adapter: `Blocked` for CPU rasterizers, `Tiled` otherwise.
    pub fn for_adapter(info: &wgpu::AdapterInfo) -> Self {
        if is_cpu_rasterizer(info) {
            KernelVariant::Blocked
        } else {
            KernelVariant::Tiled
        }
    }
}

/// Whether an adapter is a CPU rasterizer (Mesa's llvmpipe/lavapipe, SwiftShader, WARP), by
/// device type or name: WGSL run there is slower than the host device's kernels.
pub fn is_cpu_rasterizer(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_ascii_lowercase();
    let software = ["llvmpipe", "lavapipe", "swiftshader", "warp"];
    info.device_type == wgpu::DeviceType::Cpu || software.iter().any(|s| name.contains(s))
}

impl std::str::FromStr for KernelVariant {
    type Err = SesameError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tiled" => Ok(KernelVariant::Tiled),
            "blocked" => Ok(KernelVariant::Blocked),
            other => {
                Err(SesameError::InvalidArgument { op: "kernel variant", message: format!("unknown kernel variant `{other}` (expected `tiled` or `blocked`)") })
            }
        }
    }
}

/// How to pick the adapter and kernels. `Default` picks the high-performance adapter and the
/// kernel variant that suits it.
#[derive(Clone, Debug, Default)]
pub struct DeviceOptions {
    /// Use the first adapter whose name contains this (case-insensitive); native only.
    pub adapter_name: Option<String>,
    /// Force a kernel variant instead of choosing from the adapter's device type.
    pub kernels: Option<KernelVariant>,
}

/// A handle to the device and everything shared by the tensors made on it. Cheap to clone.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<GpuInner>,
}

pub(crate) struct GpuInner {
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    pub(crate) features: wgpu::Features,
    pub(crate) kernels: KernelVariant,
    pub(crate) backend: Backend,
}

/// Where tensors live and kernels run. (One per device, so the WebGPU variant's size is not
/// worth a box.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    WebGpu(WebGpu),
    Host(HostDevice),
}

/// A wgpu device and what its tensors and dispatches share.
pub(crate) struct WebGpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pipelines: PipelineCache,
    pub(crate) pool: Mutex<BufferPool>,
    batch: Mutex<Batch>,
    /// The first error the device reported outside an error scope, and whether it was lost.
    fault: Arc<Mutex<Option<SesameError>>>,
    /// Bytes written with `write_buffer` since uploads were last submitted, which wait in
    /// host staging memory until then.
    staged_bytes: AtomicU64,
}

impl WebGpu {
    /// Notes `bytes` staged by `write_buffer`. Past 16 MiB they are submitted (and natively
    /// waited for), so that their staging memory is given back: loading a checkpoint would
    /// otherwise stage all of it before the first submission, doubling loading's memory peak
    /// (bert-base on lavapipe: 950 MB → 605 MB, measured; 64 MiB gave 756 MB).
    pub(crate) fn staged(&self, bytes: u64) {
        const STAGING_BOUND: u64 = 16 << 20;
        if self.staged_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes < STAGING_BOUND {
            return;
        }
        self.staged_bytes.store(0, Ordering::Relaxed);
        self.queue.submit(std::iter::empty());
        // A failed wait is the device lost, which the next check reports.
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
    }
}

impl Device {
    /// Finds an adapter and creates a device with the adapter's own limits (the WebGPU
    /// defaults, e.g. a 128 MiB storage binding, are too small for real models).
    pub async fn new(options: DeviceOptions) -> Result<Device> {
        let backends =
            if cfg!(target_arch = "wasm32") { wgpu::Backends::BROWSER_WEBGPU } else { wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12 };
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            flags: wgpu::InstanceFlags::empty(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = Self::pick_adapter(&instance, backends, options.adapter_name.as_deref()).await?;
        let info = adapter.get_info();
        let wanted = wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("sesame"),
                required_features: features,
                required_limits: limits.clone(),
                memory_hints: wgpu::MemoryHints::Performance,
                ..Default::default()
            })
            .await
            .map_err(SesameError::DeviceRequest)?;

        let fault: Arc<Mutex<Option<SesameError>>> = Arc::new(Mutex::new(None));
        let on_error = fault.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let mut slot = lock(&on_error);
            if slot.is_none() {
                *slot = Some(SesameError::Device(error.to_string()));
            }
        }));
        let on_lost = fault.clone();
        device.set_device_lost_callback(move |reason, message| {
            *lock(&on_lost) = Some(SesameError::DeviceLost(format!("{reason:?}: {message}")));
        });

        let kernels = options.kernels.unwrap_or_else(|| KernelVariant::for_adapter(&info));
        let uniform_align = limits.min_uniform_buffer_offset_alignment as u64;
        let webgpu = WebGpu {
            device,
            queue,
            pipelines: PipelineCache::default(),
            pool: Mutex::new(BufferPool::default()),
            batch: Mutex::new(Batch::new(uniform_align)),
            fault,
            staged_bytes: AtomicU64::new(0),
        };
        Ok(Device { inner: Arc::new(GpuInner { info, limits, features, kernels, backend: Backend::WebGpu(webgpu) }) })
    }

    /// The device to use when none is named, and a sentence saying why it was picked: the
    /// best GPU adapter where there is one; the host device where there is none, or where the
    /// best adapter is a CPU rasterizer ([`is_cpu_rasterizer`]), whose WGSL runs several times
    /// slower than the host kernels — unless `kernels` asks for WGSL kernels, which then run on
    /// whatever adapter there is. The host device gets `host_threads` threads (default: every
    /// core natively; the page's pool in the browser).
    pub async fn auto(kernels: Option<KernelVariant>, host_threads: Option<usize>) -> Result<(Device, String)> {
        let host = |why: String| -> Result<(Device, String)> {
            let device = match host_threads {
                Some(threads) => Device::host_with_threads(threads)?,
                None => Device::host(),
            };
            Ok((device, why))
        };
        match Device::new(DeviceOptions { kernels, ..Default::default() }).await {
            Ok(gpu) if kernels.is_some() => {
                let why = format!("the {} kernels asked for run on the best adapter, {}", gpu.kernel_variant().name(), gpu.adapter_info().name);
                Ok((gpu, why))
            }
            Ok(gpu) if !is_cpu_rasterizer(gpu.adapter_info()) => {
                let why = format!("{} is the best adapter here, and a GPU", gpu.adapter_info().name);
                Ok((gpu, why))
            }
            Ok(rasterizer) => host(format!(
                "the best adapter here, {}, is a CPU rasterizer, whose WGSL runs several times slower than the host kernels",
                rasterizer.adapter_info().name
            )),
            // An adapter that gives no device is as good as none.
            Err(SesameError::NoAdapter(_) | SesameError::DeviceRequest(_)) => host("there is no GPU adapter here".into()),
            Err(other) => Err(other),
        }
    }

    /// The host device: tensors in memory, kernels run by their Rust twins, natively on all
    /// of the machine's threads (see [`Device::host_with_threads`]), in the browser on the
    /// calling one (the threaded build: on the page's pool). There it is the fast path where WebGPU is missing or is itself a CPU
    /// rasterizer (SwiftShader), whose WGSL runs several times slower than wasm SIMD.
    pub fn host() -> Device {
        Device::host_with_threads(HostDevice::available_threads()).unwrap_or_else(|_| Device::host_on(HostDevice::single_threaded()))
    }

    /// The host device with kernels split over `threads` threads (natively a pool of its
    /// own; the threaded browser build uses the page's pool, the plain one has one thread).
    /// Several models training side by side each want one.
    pub fn host_with_threads(threads: usize) -> Result<Device> {
        Ok(Device::host_on(HostDevice::new(threads)?))
    }

    /// The host device computing as the browser build does (no native GEMM; the plain build
    /// on one thread, the threaded build on several), so that tests keep those twins proven
    /// natively.
    #[cfg(all(test, not(target_arch = "wasm32")))]
    pub(crate) fn host_portable(threads: usize) -> Device {
        Device::host_on(HostDevice::portable(threads).expect("a test's thread pool"))
    }

    fn host_on(device: HostDevice) -> Device {
        let (info, limits) = HostDevice::description();
        Device { inner: Arc::new(GpuInner { info, limits, features: wgpu::Features::empty(), kernels: KernelVariant::Host, backend: Backend::Host(device) }) }
    }

    /// The threads of the host device's kernels, or `None` for a GPU adapter.
    pub fn host_threads(&self) -> Option<usize> {
        match &self.inner.backend {
            Backend::Host(host) => Some(host.threads()),
            Backend::WebGpu(_) => None,
        }
    }

    async fn pick_adapter(instance: &wgpu::Instance, backends: wgpu::Backends, name: Option<&str>) -> Result<wgpu::Adapter> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(wanted) = name {
            let wanted = wanted.to_ascii_lowercase();
            let adapters = instance.enumerate_adapters(backends).await;
            let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
            return adapters
                .into_iter()
                .find(|a| a.get_info().name.to_ascii_lowercase().contains(&wanted))
                .ok_or_else(|| SesameError::NoAdapter(format!("none named like `{wanted}` among {names:?}")));
        }
        let _ = (backends, name);
        instance.request_adapter(&wgpu::RequestAdapterOptions { power_preference: wgpu::PowerPreference::HighPerformance, ..Default::default() }).await.map_err(
            |e| {
                let hint = if cfg!(target_arch = "wasm32") {
                    "this browser does not expose WebGPU (try a recent Chrome or Edge, or enable WebGPU)"
                } else {
                    "install a Vulkan driver (on Linux without a GPU: apt-get install mesa-vulkan-drivers)"
                };
                SesameError::NoAdapter(format!("{e}; {hint}"))
            },
        )
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.inner.info
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.inner.limits
    }

    pub fn features(&self) -> wgpu::Features {
        self.inner.features
    }

    pub fn kernel_variant(&self) -> KernelVariant {
        self.inner.kernels
    }

    /// The wgpu device and queue, or `None` on the host device.
    pub(crate) fn webgpu(&self) -> Option<&WebGpu> {
        match &self.inner.backend {
            Backend::WebGpu(webgpu) => Some(webgpu),
            Backend::Host(_) => None,
        }
    }

    pub fn is_host(&self) -> bool {
        matches!(self.inner.backend, Backend::Host(_))
    }

    /// Why the device was lost, if it was: it then runs nothing again, and the models on it
    /// must be loaded onto a new one.
    pub fn lost(&self) -> Option<String> {
        match &*lock(&self.webgpu()?.fault) {
            Some(SesameError::DeviceLost(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Live and pooled buffers, for leak checks and memory reports.
    pub fn stats(&self) -> PoolStats {
        match &self.inner.backend {
            Backend::WebGpu(webgpu) => lock(&webgpu.pool).stats(),
            Backend::Host(host) => host.stats(),
        }
    }

    /// Frees the pooled (currently unused) buffers.
    pub fn trim_pool(&self) {
        match &self.inner.backend {
            Backend::WebGpu(webgpu) => lock(&webgpu.pool).trim(),
            Backend::Host(host) => host.trim_pool(),
        }
    }

    /// One compute dispatch: on a GPU recorded into the pending batch, on the host device run
    /// by the kernel's twin at once. `params` goes to binding 0 as a uniform; `bindings` fill
    /// bindings 1.. in the kernel's declared order.
    pub(crate) fn dispatch<P: KernelParams>(
        &self,
        kernel: &Kernel,
        overrides: &[(&'static str, u32)],
        params: &P,
        bindings: &[Binding<'_>],
        workgroups: [u32; 3],
    ) -> Result<()> {
        self.dispatch_bytes(kernel, overrides, P::LAYOUT.name, bytemuck::bytes_of(params), bindings, workgroups)
    }

    /// [`Device::dispatch`] with the params as bytes of the struct named `params_name` (not
    /// generic, so that the browser build holds one copy).
    fn dispatch_bytes(
        &self,
        kernel: &Kernel,
        overrides: &[(&'static str, u32)],
        params_name: &str,
        params: &[u8],
        bindings: &[Binding<'_>],
        workgroups: [u32; 3],
    ) -> Result<()> {
        if params_name != kernel.params.name {
            return Err(SesameError::Device(format!("kernel `{}` takes {}, not {params_name}: a bug in Sesame", kernel.entry, kernel.params.name)));
        }
        if bindings.len() != kernel.bindings.len() {
            let message = format!("{} bindings for the {} it declares: a bug in Sesame", bindings.len(), kernel.bindings.len());
            return Err(SesameError::Device(format!("kernel `{}`: {message}", kernel.entry)));
        }
        let max = self.inner.limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&w| w > max) {
            return Err(SesameError::TooLarge {
                what: format!("kernel `{}` dispatch of {workgroups:?} workgroups", kernel.entry),
                bytes: workgroups.iter().copied().max().unwrap_or(0) as u64,
                limit_name: "max_compute_workgroups_per_dimension",
                limit: max as u64,
            });
        }
        self.check_fault()?;
        if workgroups.contains(&0) {
            return Ok(());
        }
        let tensors = || bindings.iter().filter_map(|b| if let Binding::Tensor(t) = b { Some(*t) } else { None });
        if let Some(empty) = tensors().find(|t| t.shape().contains(&0)) {
            return Err(SesameError::InvalidArgument { op: "dispatch", message: format!("cannot bind an empty tensor of shape {:?}", empty.shape()) });
        }
        if let Some(other) = tensors().find(|t| !Arc::ptr_eq(&t.device().inner, &self.inner)) {
            let message = format!(
                "a tensor of shape {:?} is on another device ({}) than kernel `{}` runs on",
                other.shape(),
                other.device().adapter_info().name,
                kernel.entry
            );
            return Err(SesameError::InvalidArgument { op: "dispatch", message });
        }
        match &self.inner.backend {
            Backend::Host(host) => {
                let views = bindings.iter().map(|b| if let Binding::Tensor(t) = b { t.host_view().map(Some) } else { Ok(None) });
                crate::host::run(host, kernel, params, &views.collect::<Result<Vec<_>>>()?)
            }
            Backend::WebGpu(webgpu) => {
                let pipeline = webgpu.pipelines.get(self, webgpu, kernel, overrides)?;
                let buffers = bindings.iter().map(|b| if let Binding::Tensor(t) = b { t.gpu_binding().map(Some) } else { Ok(None) });
                let buffers = buffers.collect::<Result<Vec<_>>>()?;
                lock(&webgpu.batch).dispatch(&webgpu.device, &pipeline, kernel, params, buffers, workgroups);
                Ok(())
            }
        }
    }

    /// Submits everything recorded so far (nothing to do on the host device, whose kernels
    /// run when they are dispatched).
    pub fn flush(&self) -> Result<()> {
        if let Some(webgpu) = self.webgpu() {
            lock(&webgpu.batch).submit(&webgpu.queue);
        }
        self.check_fault()
    }

    /// Waits until the GPU has finished all submitted work (native; a no-op in the browser,
    /// where read-back is the way to wait).
    pub fn wait_idle(&self) -> Result<()> {
        self.flush()?;
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(webgpu) = self.webgpu() {
            webgpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| SesameError::Device(e.to_string()))?;
        }
        self.check_fault()
    }

    /// Returns (and clears, unless the device is lost) the first error the device reported.
    pub(crate) fn check_fault(&self) -> Result<()> {
        let Some(webgpu) = self.webgpu() else { return Ok(()) };
        let mut slot = lock(&webgpu.fault);
        match slot.take() {
            None => Ok(()),
            Some(SesameError::DeviceLost(m)) => {
                *slot = Some(SesameError::DeviceLost(m.clone()));
                Err(SesameError::DeviceLost(m))
            }
            Some(other) => Err(other),
        }
    }

    /// Checks `bytes` against the device's buffer size limit. (Binding a tensor is checked
    /// against the smaller binding limit when it is bound: ops may bind a big tensor in parts.)
    pub(crate) fn check_size(&self, what: impl FnOnce() -> String, bytes: u64) -> Result<()> {
        let limit = self.inner.limits.max_buffer_size;
        if bytes > limit {
            return Err(SesameError::TooLarge { what: what(), bytes, limit_name: "max_buffer_size", limit });
        }
        Ok(())
    }
}

impl WebGpu {
    /// Records a buffer-to-buffer copy into the pending batch (ordered with the dispatches).
    pub(crate) fn copy_buffer(&self, src: &wgpu::Buffer, src_offset: u64, dst: &wgpu::Buffer, dst_offset: u64, bytes: u64) {
        lock(&self.batch).encoder(&self.device).copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
    }

    /// Records a fill with zeros into the pending batch.
    pub(crate) fn clear_buffer(&self, buffer: &wgpu::Buffer, offset: u64, bytes: u64) {
        lock(&self.batch).encoder(&self.device).clear_buffer(buffer, offset, Some(bytes));
    }

    /// Whether commands are recorded but not yet submitted.
    pub(crate) fn has_pending(&self) -> bool {
        lock(&self.batch).has_pending()
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({}, {:?}, {} kernels)", self.inner.info.name, self.inner.info.backend, self.inner.kernels.name())
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing {
    //! One device per test process, shared by the parity tests (they run in parallel).
    use super::*;
    use std::sync::OnceLock;

    pub fn gpu() -> &'static Device {
        static GPU: OnceLock<Device> = OnceLock::new();
        GPU.get_or_init(|| {
            let kernels = std::env::var("SESAME_KERNELS").ok().map(|v| v.parse().expect("SESAME_KERNELS"));
            pollster::block_on(Device::new(DeviceOptions { kernels, ..Default::default() }))
                .expect("parity tests need a GPU adapter (lavapipe: apt-get install mesa-vulkan-drivers)")
        })
    }

    /// The host device, shared like [`gpu`].
    pub fn host() -> &'static Device {
        static HOST: OnceLock<Device> = OnceLock::new();
        HOST.get_or_init(Device::host)
    }

    /// The host device as the threaded browser build has it: the hand-written twins, not the
    /// `gemm` crate (natively the twins that have both take gemm's path), their work split
    /// over three threads (an odd count, so that splits are uneven).
    pub fn portable_host() -> &'static Device {
        static HOST: OnceLock<Device> = OnceLock::new();
        HOST.get_or_init(|| Device::host_portable(3))
    }

    /// The host device as the plain browser build has it: the hand-written twins on one thread.
    pub fn portable_one_thread() -> &'static Device {
        static HOST: OnceLock<Device> = OnceLock::new();
        HOST.get_or_init(|| Device::host_portable(1))
    }

    /// Both devices: what parity tests of inference kernels run on, so that each kernel's
    /// WGSL and its host twin answer to the same reference.
    pub fn devices() -> [&'static Device; 2] {
        [gpu(), host()]
    }

    /// The GPU adapter, the native host device and the browser builds' hosts (three threads
    /// and one): what parity tests of twins that split their work run on.
    pub fn every_device() -> [&'static Device; 4] {
        [gpu(), host(), portable_host(), portable_one_thread()]
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::kernels::kernel_params;
    use crate::tensor::{DType, Tensor};
    use pollster::block_on;

    kernel_params! {
        struct Nothing {
            _pad: [u32; 4],
        }
    }

    #[test]
    fn cpu_rasterizers_are_known_by_device_type_or_name() {
        let adapter = |name: &str, device_type| wgpu::AdapterInfo { name: name.into(), ..wgpu::AdapterInfo::new(device_type, wgpu::Backend::Vulkan) };
        for (name, device_type, rasterizer) in [
            ("NVIDIA GeForce RTX 4090", wgpu::DeviceType::DiscreteGpu, false),
            ("AMD Radeon Graphics (RADV GFX1103_R1)", wgpu::DeviceType::IntegratedGpu, false),
            ("llvmpipe (LLVM 15.0.6, 256 bits)", wgpu::DeviceType::Cpu, true),
            ("SwiftShader Device (Subzero)", wgpu::DeviceType::Other, true),
            ("Microsoft Basic Render Driver", wgpu::DeviceType::Cpu, true),
        ] {
            assert_eq!(is_cpu_rasterizer(&adapter(name, device_type)), rasterizer, "{name}");
        }
    }

    #[test]
    fn auto_prefers_the_host_device_to_a_cpu_rasterizer_and_a_gpu_to_both() {
        let best = block_on(Device::new(DeviceOptions::default())).unwrap();
        let (picked, why) = block_on(Device::auto(None, Some(1))).unwrap();
        if is_cpu_rasterizer(best.adapter_info()) {
            assert_eq!((picked.kernel_variant(), picked.host_threads()), (KernelVariant::Host, Some(1)), "{why}");
            assert!(why.contains("CPU rasterizer") && why.contains(&best.adapter_info().name), "{why}");
        } else {
            assert_eq!(picked.adapter_info().name, best.adapter_info().name, "{why}");
        }
        // Kernels asked for are WGSL kernels: the best adapter runs them, whatever it is.
        let (forced, why) = block_on(Device::auto(Some(KernelVariant::Blocked), None)).unwrap();
        assert_eq!((forced.kernel_variant(), forced.adapter_info().name.as_str()), (KernelVariant::Blocked, best.adapter_info().name.as_str()), "{why}");
    }

    #[test]
    fn a_broken_shader_is_a_typed_error_each_time() {
        // A private device: errors are per device, and the shared one serves parallel tests.
        let gpu = &block_on(Device::new(DeviceOptions::default())).unwrap();
        const BROKEN: Kernel = Kernel {
            shader: "broken_for_test",
            source: "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_name; }",
            entry: "main",
            bindings: &[],
            params: Nothing::LAYOUT,
            twin: None,
        };
        for _ in 0..2 {
            let err = gpu.dispatch(&BROKEN, &[], &Nothing { _pad: [0; 4] }, &[], [1, 1, 1]).unwrap_err();
            match err {
                SesameError::ShaderCompilation { shader, message } => {
                    assert!(shader.contains("broken_for_test"), "{shader}");
                    assert!(message.contains("undefined_name"), "{message}");
                }
                other => panic!("expected a shader compilation error, got {other}"),
            }
        }
    }

    #[test]
    fn params_other_than_the_kernels_are_refused() {
        kernel_params! {
            struct Other {
                _pad: [u32; 4],
            }
        }
        const KERNEL: Kernel = Kernel { shader: "params_test", source: "", entry: "main", bindings: &[], params: Nothing::LAYOUT, twin: None };
        for gpu in [&block_on(Device::new(DeviceOptions::default())).unwrap(), &Device::host()] {
            let err = gpu.dispatch(&KERNEL, &[], &Other { _pad: [0; 4] }, &[], [1, 1, 1]).unwrap_err().to_string();
            assert!(err.contains("kernel `main` takes sesame::gpu::tests::Nothing, not sesame::gpu::tests::Other"), "{err}");
        }
    }

    #[test]
    fn an_unknown_adapter_name_is_a_no_adapter_error() {
        let options = DeviceOptions { adapter_name: Some("no-such-adapter-xyz".into()), kernels: None };
        let err = block_on(Device::new(options)).unwrap_err();
        assert!(matches!(err, SesameError::NoAdapter(_)), "{err}");
        assert!(err.to_string().contains("no-such-adapter-xyz"));
    }

    #[test]
    fn a_lost_device_is_reported_and_stays_lost() {
        let gpu = block_on(Device::new(DeviceOptions::default())).unwrap();
        let t = Tensor::from_slice(&gpu, &[1.0f32, 2.0], &[2]).unwrap();
        let device = &gpu.webgpu().unwrap().device;
        assert_eq!(gpu.lost(), None);
        device.destroy();
        let _ = device.poll(wgpu::PollType::Poll);
        let first = block_on(t.to_vec::<f32>()).unwrap_err();
        assert!(matches!(first, SesameError::DeviceLost(_)), "{first}");
        let again = gpu.flush().unwrap_err();
        assert!(matches!(again, SesameError::DeviceLost(_)), "{again}");
        assert!(gpu.lost().is_some_and(|why| why.contains("Destroyed")), "{:?}", gpu.lost());
        assert!(Tensor::zeros(&gpu, &[4], DType::F32).and_then(|z| block_on(z.to_vec::<f32>())).is_err());
    }
}
