//! The kernels, one module per family: its params struct (written once with
//! [`kernel_params!`], checked against the WGSL's), its [`Kernel`] declarations (the WGSL
//! under `shaders/` that they embed) and its host twins, the Rust that computes what each
//! WGSL entry point computes. Ops (`crate::ops`) check operands and dispatch these kernels on
//! whichever device a tensor lives on; the devices (`crate::gpu`, `crate::host`) run them
//! without knowing any one kernel.
//!
//! Nothing here imports the devices, tensors or ops: kernels are the bottom layer.

mod activation_codes;
mod activations;
pub(crate) mod adamw;
pub(crate) mod attention;
pub(crate) mod attention_backward;
pub(crate) mod batch_norm;
pub(crate) mod char_cnn;
pub(crate) mod cross_entropy;
pub(crate) mod distillation;
pub(crate) mod dropout;
pub(crate) mod elementwise;
pub(crate) mod embedding;
pub(crate) mod highway;
mod host_call;
mod int8;
#[cfg(integer_tiles)]
mod integer_gemm;
mod lanes;
pub(crate) mod layer_norm;
pub(crate) mod lstm;
pub(crate) mod lstm_train;
pub(crate) mod matmul;
mod params;
pub(crate) mod pool;
pub(crate) mod quantized;
pub(crate) mod rows;
pub(crate) mod scalar_mix;
mod simd;
pub(crate) mod softmax;
pub(crate) mod sum;
mod threads;
pub(crate) mod topk;

use crate::error::Result;
pub(crate) use host_call::{fault, scratch, HostCall, Slot};
pub(crate) use params::kernel_params;
pub use params::{KernelParams, ParamField, ParamsLayout};
pub(crate) use threads::{each_chunk, each_chunk_pair, pieces, Threads, MIN_SPLIT_VALUES, MIN_SPLIT_WORK};

/// How a kernel reads a storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// A kernel's host twin: computes the whole dispatch from its params and bindings.
pub(crate) type Twin = fn(&mut HostCall<'_>) -> Result<()>;

/// One entry point of one WGSL file. Binding 0 is always the op's uniform params (`params`:
/// the Rust struct the WGSL declares there); `bindings` lists the storage buffers at bindings
/// 1.. in order; `twin` computes it on the host device (`None` for GPU-only variants of a
/// kernel whose host device runs another, e.g. the CPU-adapter matmuls).
#[derive(Debug)]
pub(crate) struct Kernel {
    /// The shader's name: `shaders/<shader>.wgsl`.
    pub shader: &'static str,
    pub source: &'static str,
    pub entry: &'static str,
    pub bindings: &'static [Access],
    pub params: &'static ParamsLayout,
    pub twin: Option<Twin>,
}

/// Every kernel, for the checks that span them (params layouts against the WGSL, every entry
/// point declared).
#[cfg(test)]
pub(crate) fn all() -> Vec<&'static Kernel> {
    [
        adamw::KERNELS,
        attention::KERNELS,
        attention_backward::KERNELS,
        batch_norm::KERNELS,
        char_cnn::KERNELS,
        cross_entropy::KERNELS,
        distillation::KERNELS,
        dropout::KERNELS,
        elementwise::KERNELS,
        embedding::KERNELS,
        highway::KERNELS,
        layer_norm::KERNELS,
        lstm::KERNELS,
        lstm_train::KERNELS,
        matmul::KERNELS,
        quantized::KERNELS,
        pool::KERNELS,
        rows::KERNELS,
        scalar_mix::KERNELS,
        softmax::KERNELS,
        sum::KERNELS,
        topk::KERNELS,
    ]
    .concat()
}
