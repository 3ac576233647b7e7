//! The models, one file each, named after the Hugging Face classes; a model's module tree
//! mirrors its checkpoint's key tree. Deviations from "key = module path", listed once:
//! - GPT-2 / GPT `Conv1D` weights are stored [in, out] (`nn::Linear::load_conv1d`).
//! - Tied output embeddings have no tensor of their own: the LM head reuses the word
//!   embedding table (`cls.predictions.decoder.weight`, `lm_head.weight` are absent).
//! - Checkpoints saved from a bare `BertModel` (MiniLM sentence encoders) have no `bert.`
//!   prefix.

pub mod auto;
pub mod causal_lm;
pub mod bert;
pub mod config;
pub mod elmo;
pub mod gpt;
pub mod gpt2;

use crate::error::Result;
use crate::tensor::{DType, Tensor};

/// A model's outputs under the attribute names of the transformers output object
/// (`logits`, `last_hidden_state`, `hidden_states.{i}`, `attentions.{i}`, …).
#[derive(Default)]
pub struct ModelOutput {
    pub tensors: Vec<(String, Tensor)>,
}

impl ModelOutput {
    pub fn push(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.push((name.into(), t));
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

impl ModelOutput {
    /// Downloads every tensor and serializes them as one safetensors file (f32, ids as u32).
    pub async fn to_safetensors(&self) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.tensors.len());
        for (name, t) in &self.tensors {
            let (dtype, bytes) = match t.dtype() {
                DType::U32 => (safetensors::Dtype::U32, bytemuck::cast_slice(&t.to_vec::<u32>().await?).to_vec()),
                _ => (safetensors::Dtype::F32, bytemuck::cast_slice(&t.to_vec::<f32>().await?).to_vec()),
            };
            data.push((name.clone(), dtype, t.shape().to_vec(), bytes));
        }
        let entries: Vec<_> = data.iter().map(|(name, dtype, shape, bytes)| (name.as_str(), *dtype, shape.as_slice(), bytes.as_slice())).collect();
        crate::weights::serialize(&entries)
    }
}
