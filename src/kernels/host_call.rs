//! What a kernel's host twin is handed: the dispatch's params and its bindings as slices of
//! words, plus the threads of the host device. Twins compute from these alone, so they sit
//! below the devices: the host device builds a [`HostCall`] from its tensors and runs the twin
//! named by the [`Kernel`].

use super::threads::Threads;
use super::{Kernel, KernelParams, ParamsLayout};
use crate::error::{Result, SesameError};

/// Scratch memory for a twin: `len` zeros, counted against the host memory budget.
pub(crate) fn scratch<T: Copy + Default>(len: usize) -> Result<Vec<T>> {
    crate::limits::zeroed_vec(|| "a host kernel's scratch memory".into(), len)
}

/// One storage binding as a twin sees it: the words of the bound tensor view.
pub(crate) enum Slot<'a> {
    Read(&'a [u32]),
    Write(Option<&'a mut [u32]>),
    Absent,
}

/// The params and bindings of one dispatch, handed to a kernel's twin. Bindings are numbered
/// from 0 in the kernel's declared order (WGSL's binding i + 1).
pub(crate) struct HostCall<'a> {
    entry: &'static str,
    /// The params struct the kernel declares (`ParamsLayout::name`), which a twin must read.
    params_name: &'static str,
    params: &'a [u8],
    slots: Vec<Slot<'a>>,
    threads: Option<Threads<'a>>,
    #[cfg(not(target_arch = "wasm32"))]
    portable: bool,
}

impl<'a> HostCall<'a> {
    /// The call of `kernel`'s twin with `params` (its bytes), one slot per declared binding and
    /// the threads it may split its work over (`None`: the calling thread alone).
    pub fn new(
        kernel: &Kernel,
        params: &'a [u8],
        slots: Vec<Slot<'a>>,
        threads: Option<Threads<'a>>,
        #[cfg(not(target_arch = "wasm32"))] portable: bool,
    ) -> HostCall<'a> {
        HostCall {
            entry: kernel.entry,
            params_name: kernel.params.name,
            params,
            slots,
            threads,
            #[cfg(not(target_arch = "wasm32"))]
            portable,
        }
    }

    /// The threads the twin may split its work over, if it has more than its own.
    pub fn threads(&self) -> Option<Threads<'a>> {
        self.threads
    }

    /// The native GEMM's threads: `Some(threads)` (`None` inside for one thread) unless the
    /// twin must compute as the browser build does.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn native_gemm(&self) -> Option<Option<Threads<'a>>> {
        (!self.portable).then_some(self.threads)
    }

    /// Whether the twin must compute as the browser build does (natively too).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn portable(&self) -> bool {
        self.portable
    }

    /// The uniform params, as the op filled them: `P` must be the struct the kernel declares.
    pub fn params<P: KernelParams>(&self) -> Result<P> {
        Ok(bytemuck::pod_read_unaligned(self.params_bytes(P::LAYOUT)?))
    }

    /// The params' bytes, once checked to be the struct of `layout`.
    fn params_bytes(&self, layout: &ParamsLayout) -> Result<&'a [u8]> {
        if layout.name != self.params_name {
            return Err(self.fault(format!("the twin reads {} where the kernel takes {}", layout.name, self.params_name)));
        }
        if self.params.len() != layout.size {
            return Err(self.fault(format!("params of {} bytes, expected {}", self.params.len(), layout.size)));
        }
        Ok(self.params)
    }

    pub fn read(&self, binding: usize) -> Result<&'a [f32]> {
        Ok(bytemuck::cast_slice(self.read_u32(binding)?))
    }

    pub fn read_u32(&self, binding: usize) -> Result<&'a [u32]> {
        self.optional_read_u32(binding)?.ok_or_else(|| self.fault(format!("binding {binding} is absent")))
    }

    /// A read binding that may be absent (an optional operand such as a bias).
    pub fn optional_read(&self, binding: usize) -> Result<Option<&'a [f32]>> {
        Ok(self.optional_read_u32(binding)?.map(bytemuck::cast_slice))
    }

    fn optional_read_u32(&self, binding: usize) -> Result<Option<&'a [u32]>> {
        match self.slots.get(binding) {
            Some(Slot::Read(words)) => Ok(Some(words)),
            Some(Slot::Absent) => Ok(None),
            _ => Err(self.fault(format!("binding {binding} is not a read binding"))),
        }
    }

    /// A written binding (each can be taken once).
    pub fn write(&mut self, binding: usize) -> Result<&'a mut [f32]> {
        Ok(bytemuck::cast_slice_mut(self.write_u32(binding)?))
    }

    pub fn write_u32(&mut self, binding: usize) -> Result<&'a mut [u32]> {
        self.optional_write_u32(binding)?.ok_or_else(|| self.fault(format!("binding {binding} is absent")))
    }

    /// A written binding that may be absent (an optional output).
    pub fn optional_write(&mut self, binding: usize) -> Result<Option<&'a mut [f32]>> {
        Ok(self.optional_write_u32(binding)?.map(bytemuck::cast_slice_mut))
    }

    fn optional_write_u32(&mut self, binding: usize) -> Result<Option<&'a mut [u32]>> {
        let entry = self.entry;
        match self.slots.get_mut(binding) {
            Some(Slot::Write(words)) => words.take().map(Some).ok_or_else(|| fault(entry, format!("binding {binding} was taken twice"))),
            Some(Slot::Absent) => Ok(None),
            _ => Err(fault(entry, format!("binding {binding} is not a written binding"))),
        }
    }

    pub fn fault(&self, message: String) -> SesameError {
        fault(self.entry, message)
    }
}

/// An op and its kernel's twin disagree: a bug in Sesame, reported rather than panicking.
pub(crate) fn fault(entry: &str, message: String) -> SesameError {
    SesameError::Device(format!("host kernel `{entry}`: {message}"))
}
