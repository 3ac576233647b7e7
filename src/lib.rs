//! Sesame runs — and trains — the ELMo / GPT / BERT family of language models on one set of
//! WGSL kernels: on the GPU through WebGPU (in the browser) or wgpu (Vulkan, Metal, DX12), and
//! on the CPU through every kernel's Rust twin (wasm SIMD in the browser). Model folders are
//! Hugging Face's layout (`config.json`, `model.safetensors`, `tokenizer.json`), read and
//! written.
//!
//! # Where to start
//! - A [`Device`]: [`Device::new`] picks a GPU adapter, [`Device::host`] is the CPU.
//! - A model: [`LoadedModel::load`] reads a folder (any family of [`models::registry`]) and
//!   its tokenizer; its capabilities say which tasks it serves.
//! - A task on text: [`classify_text`], [`classify_tokens`], [`zero_shot`], [`fill_mask()`],
//!   [`embed_texts`], [`text_perplexity`], [`answer_question`]; generation is
//!   [`generate_text`] on the model's [`AutoModel::causal_lm`](models::auto::AutoModel::causal_lm).
//! - Training (the `training` feature): a [`RunSpec`] says what `sesame train` would do,
//!   [`prepare`] makes it a run (see [`train::run`] for an example; in a browser,
//!   [`train::run::prepare_from`] reads its files from [`files::MemoryFiles`]); below a run a
//!   [`Trainer`](train::trainer::Trainer) steps a model over batches.
//!
//! ```no_run
//! # async fn example() -> sesame::Result<()> {
//! let device = sesame::Device::host();
//! let bert = sesame::LoadedModel::load(&device, "models/bert-wikitext".as_ref(), false)?;
//! for candidate in &sesame::fill_mask(&bert, "the river runs to the [MASK] .", 3).await?[0] {
//!     println!("{} {:.3}", candidate.token_str, candidate.score);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Layers
//! Imports point down (`tests/layering.rs` keeps it so): [`gpu`] (the device: pipelines,
//! buffer pool, command batch; or the host) → [`tensor`] → [`ops`] (one op per WGSL kernel,
//! its CPU reference and parity tests in its unit tests) → [`nn`] → [`models`] (the families,
//! their registry and their training) → the tasks → [`train`] (the trainer, data, runs).
//! `kernels` declares each kernel with its Rust twin, which `host` runs on the CPU.

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

pub mod files;
#[cfg(all(feature = "hub", not(target_arch = "wasm32")))]
pub mod hub;
#[cfg(feature = "training")]
pub mod train;

#[cfg(target_arch = "wasm32")]
mod web;

pub use classify::{classify_text, classify_tokens, zero_shot};
pub use embed::{embed_texts, Pooling};
pub use error::{Result, SesameError};
pub use fill_mask::fill_mask;
pub use generate::{generate_text, GenerationConfig};
pub use gpu::{Device, DeviceOptions, KernelVariant};
pub use models::auto::{LoadedModel, ModelFiles};
pub use perplexity::text_perplexity;
pub use question_answering::{answer_question, QaOptions};
pub use tensor::{DType, Tensor};
pub use tokenize::TextTokenizer;
#[cfg(all(feature = "training", not(target_arch = "wasm32")))]
pub use train::run::{prepare, RunSpec};

/// In the threaded browser build: `initThreadPool(n)` starts rayon's global pool of `n` Web
/// Workers (sharing this module's memory), which the host device's kernels split their work
/// over. The package calls it once, in a worker of a cross-origin isolated page, before it
/// makes the device.
#[cfg(all(target_arch = "wasm32", feature = "wasm-threads"))]
pub use wasm_bindgen_rayon::init_thread_pool;
