//! The encoder families' embeddings: LayerNorm(word + position [+ token type] [+ task type])
//! (no LayerNorm in a pre-LN stack), each table E wide (E = hidden size, or ALBERT's and ELECTRA's smaller `embedding_size`).
//! Their options: token types or none (DistilBERT), positions counted from 0 or after the
//! padding id (RoBERTa), learned or sinusoidal positions (DistilBERT), ERNIE's task types.

use std::borrow::Cow;

use super::{EncoderConfig, EncoderInputs, Norm, Positions};
use crate::error::{arg_err, Result};
use crate::nn::{Gradients, LayerNorm};
use crate::ops::elementwise;
use crate::ops::embedding::{embedding, embedding_backward, embedding_backward_with_padding, lookup, EmbeddingIds};
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::quantized::Matrix;
use crate::tensor::Tensor;
use crate::weights::Weights;

/// The embedding tables and their LayerNorm (`embeddings.*` in every family).
pub struct Embeddings {
    pub(crate) word_embeddings: Matrix,
    position_embeddings: Tensor,
    token_type_embeddings: Option<Tensor>,
    task_type_embeddings: Option<Tensor>,
    /// Absent in a pre-LN stack (its first layer normalizes).
    layer_norm: Option<LayerNorm>,
    positions: Positions,
    /// False for DistilBERT's sinusoidal table, which is fixed.
    positions_trained: bool,
    /// The word row that gets no gradient (`pad_token_id`, 0 by transformers' default).
    pad_token_id: u32,
}

impl Embeddings {
    /// The tables under `w` as `c` sizes them. A sinusoidal position table missing from the
    /// checkpoint is computed (DistilBERT's `sinusoidal_pos_embds`, which transformers also
    /// rebuilds when it loads).
    pub fn load(w: &Weights, c: &EncoderConfig) -> Result<Embeddings> {
        let e = c.embedding_size;
        let table = |name: &str, rows: usize| w.pp(name).tensor("weight", &[rows, e]);
        let word_embeddings = w.pp("word_embeddings").matrix("weight", [c.vocab_size, e])?;
        let positions = w.pp("position_embeddings");
        let shape = [c.max_position_embeddings, e];
        let position_embeddings = match (c.sinusoidal_positions, positions.contains("weight")) {
            (true, false) => Tensor::from_slice(w.gpu(), &sinusoidal_table(c.max_position_embeddings, e), &shape)?,
            (true, true) => positions.frozen().tensor("weight", &shape)?,
            (false, _) => positions.tensor("weight", &shape)?,
        };
        Ok(Embeddings {
            word_embeddings,
            position_embeddings,
            token_type_embeddings: (c.type_vocab_size > 0).then(|| table("token_type_embeddings", c.type_vocab_size)).transpose()?,
            task_type_embeddings: c.task_type_vocab_size.map(|rows| table("task_type_embeddings", rows)).transpose()?,
            layer_norm: (c.norm == Norm::Post).then(|| LayerNorm::load(&w.pp("LayerNorm"), e, c.layer_norm_eps)).transpose()?,
            positions: c.positions,
            positions_trained: !c.sinusoidal_positions,
            pad_token_id: c.head.pad_token_id.unwrap_or(0),
        })
    }

    /// Each token's row of the position table.
    pub(crate) fn position_ids(&self, inputs: &EncoderInputs) -> Vec<u32> {
        match self.positions {
            Positions::FromZero => (0..inputs.batch * inputs.seq).map(|i| (i % inputs.seq) as u32).collect(),
            // RoBERTa: the running count of non-padding tokens after the padding id; padding
            // itself sits at the padding id.
            Positions::AfterPadding(pad) => inputs
                .input_ids
                .chunks(inputs.seq)
                .flat_map(|row| {
                    row.iter().scan(0u32, move |count, &id| {
                        if id == pad {
                            return Some(pad);
                        }
                        *count += 1;
                        Some(pad + *count)
                    })
                })
                .collect(),
        }
    }

    /// LayerNorm(word + position + token type + task type): [B, T, E].
    pub(crate) fn forward(&self, inputs: &EncoderInputs) -> Result<Tensor> {
        let sum = self.sum(inputs)?;
        match &self.layer_norm {
            Some(norm) => norm.forward(&sum),
            None => Ok(sum),
        }
    }

    /// The sum before the LayerNorm.
    fn sum(&self, inputs: &EncoderInputs) -> Result<Tensor> {
        let positions = self.position_ids(inputs);
        let segments = self.token_type_embeddings.as_ref().and(inputs.token_type_ids);
        let ids = EmbeddingIds { tokens: inputs.input_ids, positions: Some(&positions), segments };
        let shape = [inputs.batch, inputs.seq];
        let sum = lookup(&self.word_embeddings, Some(&self.position_embeddings), self.token_type_embeddings.as_ref(), &ids, &shape)?;
        match (&self.task_type_embeddings, inputs.task_type_ids) {
            (Some(table), task_types) => {
                let tokens = task_types.map_or_else(|| Cow::Owned(vec![0; inputs.input_ids.len()]), Cow::Borrowed);
                let tasks = embedding(table, None, None, &EmbeddingIds { tokens: &tokens, ..Default::default() }, &shape)
                    .map_err(|e| arg_err!("forward", "task_type_ids: {e}"))?;
                elementwise::add(&sum, &tasks)
            }
            (None, Some(_)) => Err(arg_err!("forward", "task_type_ids given, but this model has no task type embeddings (ERNIE with use_task_id has)")),
            (None, None) => Ok(sum),
        }
    }

    /// The output and what the backward needs: the sum, and the LayerNorm's statistics
    /// (none in a pre-LN stack, whose output is the sum).
    pub(crate) fn forward_saved(&self, inputs: &EncoderInputs) -> Result<(Tensor, Option<LayerNormOutput>)> {
        let sum = self.sum(inputs)?;
        let norm = self.layer_norm.as_ref().map(|norm| norm.forward_saved(&sum)).transpose()?;
        Ok((sum, norm))
    }

    /// Adds the gradients of the word, position, token type and task type tables (each row by
    /// the tokens that looked it up; the `pad_token_id` row of the word table, and of
    /// RoBERTa's position table, gets none, as transformers' `padding_idx`; DistilBERT's
    /// sinusoidal positions are fixed).
    pub(crate) fn backward(&self, inputs: &EncoderInputs, sum: &Tensor, norm: Option<&LayerNormOutput>, dy: &Tensor, grads: &Gradients) -> Result<()> {
        let d_sum = match (&self.layer_norm, norm) {
            (Some(layer_norm), Some(norm)) => layer_norm.backward(sum, norm, dy, grads)?,
            _ => dy.clone(),
        };
        embedding_backward_with_padding(&d_sum, inputs.input_ids, grads.of(self.word_embeddings.f32()?)?, self.pad_token_id)?;
        let positions = self.position_ids(inputs);
        match (self.positions_trained, self.positions) {
            (false, _) => {}
            (true, Positions::FromZero) => embedding_backward(&d_sum, &positions, grads.of(&self.position_embeddings)?)?,
            (true, Positions::AfterPadding(pad)) => embedding_backward_with_padding(&d_sum, &positions, grads.of(&self.position_embeddings)?, pad)?,
        }
        let zeros = vec![0; inputs.input_ids.len()];
        for (table, ids) in [(&self.token_type_embeddings, inputs.token_type_ids), (&self.task_type_embeddings, inputs.task_type_ids)] {
            if let Some(table) = table {
                embedding_backward(&d_sum, ids.unwrap_or(&zeros), grads.of(table)?)?;
            }
        }
        Ok(())
    }
}

/// DistilBERT's fixed position table [positions, dim]: sin(pos / 10000^(2⌊j/2⌋/dim)) in even
/// columns j, cos in odd ones.
pub fn sinusoidal_table(positions: usize, dim: usize) -> Vec<f32> {
    let mut table = Vec::with_capacity(positions * dim);
    for pos in 0..positions {
        for j in 0..dim {
            let angle = pos as f64 / 10000f64.powf((2 * (j / 2)) as f64 / dim as f64);
            table.push(if j % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    table
}
