//! What a dispatch binds at its storage bindings. The devices see a bound tensor only through
//! [`Bind`] (implemented by `crate::tensor`, which sits above them): its shape, and its memory
//! as a GPU buffer range or host words.

use crate::error::Result;
use crate::host::HostView;

/// A tensor view that kernels can bind.
pub(crate) trait Bind {
    fn shape(&self) -> &[usize];
    /// The device whose memory holds it.
    fn device(&self) -> &super::Device;
    /// The buffer range of a view in a GPU buffer, checked against the binding size limit.
    fn gpu_binding(&self) -> Result<wgpu::BufferBinding<'_>>;
    /// The storage and words of a view in host memory.
    fn host_view(&self) -> Result<HostView<'_>>;
}

/// What is bound at one storage binding of a dispatch.
pub(crate) enum Binding<'a> {
    Tensor(&'a dyn Bind),
    /// An optional operand that is absent (the kernel is told so in its params).
    Absent,
}
