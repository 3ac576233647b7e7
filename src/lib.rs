//! Sesame: ELMo, GPT and BERT language models on the GPU through WebGPU — in the browser
//! (wasm) and natively (wgpu over Vulkan, Metal or DX12), on one set of WGSL kernels.
//!
//! Layers: [`gpu`] (device, pipelines, buffer pool, command batch) → [`tensor`] (GPU tensors)
//! → [`ops`] (one op per WGSL kernel, each with a CPU reference and parity tests). `kernels`
//! declares each kernel with its Rust twin, which `host` runs on the host device
//! ([`Gpu::host`]).

// In the browser wgpu's handles are neither Send nor Sync (one thread runs everything); the
// Arcs that share devices and tensors natively are harmless there.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod classify;
pub mod embed;
pub mod error;
pub mod fill_mask;
pub mod generate;
pub mod gpu;
pub(crate) mod host;
pub mod info;
pub(crate) mod kernels;
pub mod limits;
pub mod models;
pub mod nn;
pub mod ops;
pub mod perplexity;
pub mod quantize;
pub mod question_answering;
mod sync;
pub mod tensor;
pub mod tokenize;
pub mod weights;

#[cfg(not(target_arch = "wasm32"))]
pub mod files;
#[cfg(all(feature = "hub", not(target_arch = "wasm32")))]
pub mod hub;
#[cfg(not(target_arch = "wasm32"))]
pub mod train;

#[cfg(target_arch = "wasm32")]
mod web;

pub use error::{Result, SesameError};
pub use gpu::{Gpu, GpuOptions, KernelVariant};
pub use tensor::{DType, Tensor};

/// In the threaded browser build: `initThreadPool(n)` starts rayon's global pool of `n` Web
/// Workers (sharing this module's memory), which the host device's kernels split their work
/// over. The package calls it once, in a worker of a cross-origin isolated page, before it
/// makes the device.
#[cfg(all(target_arch = "wasm32", feature = "wasm-threads"))]
pub use wasm_bindgen_rayon::init_thread_pool;
