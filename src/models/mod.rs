//! The models, one file each, named after the Hugging Face classes; a model's module tree
//! mirrors its checkpoint's key tree. Deviations from "key = module path", listed once:
//! - GPT-2 / GPT `Conv1D` weights are stored [in, out] (`nn::Linear::load_conv1d`).
//! - Tied output embeddings have no tensor of their own: the LM head reuses the word
//!   embedding table (`cls.predictions.decoder.weight`, `lm_head.weight` are absent).
//! - Checkpoints saved from a bare `BertModel` (MiniLM sentence encoders) have no `bert.`
//!   prefix.

pub mod bert;
pub mod config;
pub mod gpt;
pub mod gpt2;

use crate::tensor::Tensor;

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
