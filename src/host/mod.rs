//! The host device: tensors in memory and each kernel's Rust twin, run when it is dispatched,
//! split over the device's threads where it has them (natively a rayon pool of its own; in
//! the threaded browser build rayon's global pool of Web Workers).
//!
//! Ops do not know which device they run on: they fill the same params struct and bindings
//! for a WGSL kernel, and [`run`] hands them to the kernel's twin (`Kernel::twin`, declared
//! beside the kernel in `crate::kernels`). A twin computes what the whole dispatch computes, from the
//! params alone (workgroup counts do not matter on the host). The op parity tests run on both
//! devices, so each twin is proven against the same CPU reference as its WGSL.
//!
//! Why: in browsers whose WebGPU is SwiftShader (a CPU rasterizer), WGSL runs at about
//! 5 GFLOP/s, while wasm SIMD128 reaches about 50 on one thread (BENCHMARKS.md); and natively
//! on a machine without a GPU, where lavapipe's WGSL is slower than the twins. Every kernel,
//! training's backward passes and optimizers included, has a twin, so `sesame --adapter host
//! train` trains on the CPU.

mod memory;

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

pub(crate) use memory::HostMemory;
use memory::HostPool;

use crate::error::{Result, SesameError};
use crate::kernels::{fault, Access, HostCall, Kernel, Slot, Threads};
use crate::limits::PoolStats;
use crate::sync::lock;

/// What a debug build fills an uninitialized tensor's storage with: a quiet NaN as f32 (it
/// spreads into every output it touches) and an id no vocabulary has as u32.
pub(crate) const UNDEFINED_WORD: u32 = 0x7fc0_dead;

/// The host device's memory: live tensors' storage counted (for `stats()`, leak tests and
/// the host memory budget) and dropped tensors' storage pooled for reuse; a lock that runs one
/// kernel or copy at a time, so that work from several threads cannot
/// take the tensors' locks in crossing orders; and the threads a kernel may split its work
/// over.
pub(crate) struct HostDevice {
    memory: Mutex<HostPool>,
    running: Mutex<()>,
    /// Only the twins the browser runs (natively the matmul twin calls the `gemm` crate):
    /// for the tests that keep those proven natively.
    #[cfg(not(target_arch = "wasm32"))]
    portable: bool,
    #[cfg(not(target_arch = "wasm32"))]
    pool: Option<rayon::ThreadPool>,
    /// In the threaded browser build: whether kernels split work over rayon's global pool
    /// (which the page started with more than one thread).
    #[cfg(all(target_arch = "wasm32", host_threads))]
    global_pool: bool,
}

impl HostDevice {
    /// A host device whose kernels use up to `threads` threads (at least one). Natively it
    /// starts a pool of its own; the threaded browser build uses rayon's global pool where
    /// `threads` > 1 (its size is the page's choice); the plain browser build has one thread.
    pub fn new(threads: usize) -> Result<HostDevice> {
        #[allow(unused_mut)] // the plain browser build keeps its one thread
        let mut device = HostDevice::single_threaded();
        #[cfg(not(target_arch = "wasm32"))]
        if threads > 1 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("sesame-host-{i}")).build();
            device.pool = Some(pool.map_err(|e| SesameError::Device(format!("host device: cannot start {threads} threads: {e}")))?);
        }
        #[cfg(all(target_arch = "wasm32", host_threads))]
        {
            device.global_pool = threads > 1 && rayon::current_num_threads() > 1;
        }
        #[cfg(all(target_arch = "wasm32", not(host_threads)))]
        let _ = threads;
        Ok(device)
    }

    /// One thread, no pool.
    pub fn single_threaded() -> HostDevice {
        HostDevice {
            memory: Mutex::default(),
            running: Mutex::default(),
            #[cfg(not(target_arch = "wasm32"))]
            portable: false,
            #[cfg(not(target_arch = "wasm32"))]
            pool: None,
            #[cfg(all(target_arch = "wasm32", host_threads))]
            global_pool: false,
        }
    }

    /// The browser build's twins run natively (for tests), on `threads` threads.
    #[cfg(all(test, not(target_arch = "wasm32")))]
    pub fn portable(threads: usize) -> Result<HostDevice> {
        Ok(HostDevice { portable: true, ..HostDevice::new(threads)? })
    }

    /// The threads of this machine (natively), or of the page's pool (the threaded browser
    /// build): the default of [`HostDevice::new`].
    pub fn available_threads() -> usize {
        #[cfg(all(target_arch = "wasm32", host_threads))]
        return rayon::current_num_threads();
        #[allow(unreachable_code)]
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// The threads a kernel may split its work over, if more than the calling one.
    fn kernel_threads(&self) -> Option<Threads<'_>> {
        #[cfg(not(target_arch = "wasm32"))]
        return self.pool.as_ref().map(Threads::new);
        #[cfg(all(target_arch = "wasm32", host_threads))]
        return self.global_pool.then(Threads::global);
        #[cfg(all(target_arch = "wasm32", not(host_threads)))]
        None
    }

    /// The threads a kernel may use.
    pub fn threads(&self) -> usize {
        self.kernel_threads().map_or(1, Threads::count)
    }

    /// The adapter description and limits the host device reports. The limits are what the
    /// memory of this process allows: one binding may span a whole tensor.
    pub fn description() -> (wgpu::AdapterInfo, wgpu::Limits) {
        let info = wgpu::AdapterInfo {
            name: format!("Sesame host ({})", if cfg!(target_arch = "wasm32") { "wasm SIMD128" } else { "native" }),
            driver: "sesame".into(),
            driver_info: env!("CARGO_PKG_VERSION").into(),
            ..wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Noop)
        };
        let max = isize::MAX as u64;
        let limits = wgpu::Limits {
            max_buffer_size: max,
            max_storage_buffer_binding_size: max,
            max_compute_workgroups_per_dimension: u32::MAX,
            min_storage_buffer_offset_alignment: 4,
            ..wgpu::Limits::default()
        };
        (info, limits)
    }

    pub fn stats(&self) -> PoolStats {
        lock(&self.memory).stats()
    }

    /// Held while a kernel or a copy runs.
    pub fn exclusive(&self) -> MutexGuard<'_, ()> {
        lock(&self.running)
    }

    /// Storage of `len` words for a new tensor, refused when the live tensors and it would
    /// exceed the host memory budget (`what` names it in the error). Zeroed when `zeroed`;
    /// otherwise pooled storage keeps a dropped tensor's words, for a kernel that writes every
    /// element (skipping the fill is a few percent of a forward pass). Debug builds fill such
    /// storage with [`UNDEFINED_WORD`] whether pooled or fresh, so that a kernel reading an
    /// element it did not write fails the tests instead of finding the zero a fresh block has.
    pub fn allocate(&self, what: impl FnOnce() -> String, len: usize, zeroed: bool) -> Result<HostMemory> {
        let (mut words, pooled) = lock(&self.memory).acquire(what, len, crate::limits::host_memory_budget())?;
        if zeroed && pooled {
            words.fill(0);
        } else if !zeroed && cfg!(debug_assertions) {
            words.fill(UNDEFINED_WORD);
        }
        Ok(HostMemory::new(words))
    }

    /// Takes back a dropped tensor's storage, for reuse.
    pub fn release(&self, memory: &mut HostMemory) {
        lock(&self.memory).release(memory);
    }

    /// Frees the pooled storage that no tensor uses.
    pub fn trim_pool(&self) {
        lock(&self.memory).trim();
    }
}

/// Lets the browser's event loop run a task, as awaiting a WebGPU read-back does. The host
/// device computes on the calling thread, so without this a worker generating text would
/// take no message (a stop request) until it finished.
#[cfg(target_arch = "wasm32")]
pub(crate) async fn yield_to_event_loop() {
    #[wasm_bindgen::prelude::wasm_bindgen(
        inline_js = "export function nextTask() { return new Promise((resolve) => { const channel = new MessageChannel(); channel.port1.onmessage = () => { channel.port1.close(); resolve(); }; channel.port2.postMessage(null); }); }"
    )]
    extern "C" {
        #[wasm_bindgen(js_name = nextTask)]
        fn next_task() -> js_sys::Promise;
    }
    // A MessageChannel task, unlike setTimeout(0), is not clamped to 4 ms when repeated. The
    // port is closed after: in Node.js an open port with a listener keeps the process alive.
    let _ = wasm_bindgen_futures::JsFuture::from(next_task()).await;
}

/// One bound tensor view as the host device sees it: its storage and the words of the view.
pub(crate) struct HostView<'a> {
    pub memory: &'a HostMemory,
    pub words: Range<usize>,
}

/// Runs the twin of `kernel` on `bindings` (`None` where an optional operand is absent), as
/// the GPU would run the dispatch (the device has checked the binding count and that no bound
/// view is empty, and skipped grids with no workgroups). Each storage is locked once, for
/// writing where the kernel writes it, so a written view may share its storage with no other
/// binding (WebGPU forbids mixing read and written uses of a buffer, but would allow two
/// written ones; no op binds those). Pipeline overrides (workgroup shapes and tiles) do not
/// change what a kernel computes, so twins do not see them.
pub(crate) fn run(host: &HostDevice, kernel: &Kernel, params: &[u8], bindings: &[Option<HostView<'_>>]) -> Result<()> {
    let twin = kernel.twin.ok_or_else(|| SesameError::InvalidArgument {
        op: "host device",
        message: format!("kernel `{}` ({}.wgsl) has no host implementation; run it on a GPU adapter", kernel.entry, kernel.shader),
    })?;
    let _running = host.exclusive();
    let views = || bindings.iter().zip(kernel.bindings).filter_map(|(view, &access)| view.as_ref().map(|view| (view, access)));
    for (i, (view, access)) in views().enumerate() {
        if access == Access::ReadWrite && views().enumerate().any(|(j, (other, _))| j != i && std::ptr::eq(view.memory, other.memory)) {
            return Err(fault(kernel.entry, "a written tensor shares its storage with another binding".into()));
        }
    }
    // Lock every distinct storage once; then cut each binding's view from its guard.
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for (view, access) in views() {
        match access {
            Access::ReadWrite => writers.push(view.memory.write()),
            Access::Read if !readers.iter().any(|(m, _)| std::ptr::eq(*m, view.memory)) => readers.push((view.memory, view.memory.read())),
            Access::Read => {}
        }
    }
    let mut writers = writers.iter_mut();
    let mut slots = Vec::with_capacity(bindings.len());
    for (view, &access) in bindings.iter().zip(kernel.bindings) {
        let slot = match (view, access) {
            (None, _) => Slot::Absent,
            (Some(view), Access::Read) => {
                let (_, guard) = readers.iter().find(|(m, _)| std::ptr::eq(*m, view.memory)).ok_or_else(|| fault(kernel.entry, "unlocked read".into()))?;
                Slot::Read(guard.get(view.words.clone()).ok_or_else(|| fault(kernel.entry, "a view outside its storage".into()))?)
            }
            (Some(view), Access::ReadWrite) => {
                let guard = writers.next().ok_or_else(|| fault(kernel.entry, "unlocked write".into()))?;
                Slot::Write(Some(guard.get_mut(view.words.clone()).ok_or_else(|| fault(kernel.entry, "a view outside its storage".into()))?))
            }
        };
        slots.push(slot);
    }
    let mut call = HostCall::new(
        kernel,
        params,
        slots,
        host.kernel_threads(),
        #[cfg(not(target_arch = "wasm32"))]
        host.portable,
    );
    twin(&mut call)
}
