//! What the recurrent families (AWD-LSTM, CoVe) share: a layer of PyTorch's `nn.LSTM` in one
//! direction, run over a right-padded batch, and the lengths of such a batch.
//!
//! `nn.LSTM`'s tensors for layer k in one direction (suffix `l{k}`, or `l{k}_reverse`):
//! `weight_ih` `[4H, in]`, `bias_ih` `[4H]`, `weight_hh` `[4H, H]`, `bias_hh` `[4H]`, gate blocks
//! input, forget, cell, output. The input half x·W_ihᵀ + b_ih is one matmul over every step;
//! the recurrence runs on the LSTM step kernels. A projected layer (TF's `LSTMCell` with
//! `num_proj`, CVT's) has one bias and `weight_hr` `[P, H]`: h = W_hr (σ(o) tanh(c)), and
//! `weight_hh` is `[4H, P]`.

use super::IdsBatch;
use crate::error::{arg_err, Result};
use crate::nn::{Gradients, Linear};
use crate::ops::lstm::{lstm_sequence, LstmConfig, LstmWeights};
use crate::ops::lstm_train::LstmTensors;
use crate::tensor::Tensor;
use crate::weights::Weights;

/// The largest width (or count) a recurrent family's config.json may name: 2²⁴, so that every
/// product the loaders form (4·hidden, 3·emb_sz) fits in u32 and wasm32's usize.
pub const MAX_SIZE: usize = 1 << 24;

/// One direction of one `nn.LSTM` layer.
pub struct LstmLayer {
    /// x·W_ihᵀ + b_ih for all time steps at once.
    input: Linear,
    /// W_hh and b_hh, laid out for the step kernels.
    recurrent: LstmWeights,
    /// The cell's width (the gates are 4 × cell).
    cell: usize,
    /// The output's width: the hidden size, or a projected layer's projection.
    hidden: usize,
    reverse: bool,
}

impl LstmLayer {
    /// The layer whose `weight_ih`, `bias_ih` and `bias_hh` are `{name}{suffix}` under `w`, and
    /// whose recurrent matrix is `weight_hh` (a view and its leaf: fastai keeps its own).
    /// `_reverse` suffixes run from each sequence's last token to its first.
    pub fn load(w: &Weights, suffix: &str, weight_hh: (&Weights, &str), input: usize, hidden: usize) -> Result<LstmLayer> {
        let gates = 4 * hidden;
        let (hh, hh_leaf) = weight_hh;
        Ok(LstmLayer {
            input: Linear::from_tensors(w.tensor(&format!("weight_ih{suffix}"), &[gates, input])?, Some(w.tensor(&format!("bias_ih{suffix}"), &[gates])?)),
            recurrent: LstmWeights::new(
                w.gpu(),
                &hh.values(hh_leaf, &[gates, hidden])?,
                &w.values(&format!("bias_hh{suffix}"), &[gates])?,
                None,
                hidden,
                hidden,
            )?,
            cell: hidden,
            hidden,
            reverse: suffix.ends_with("_reverse"),
        })
    }

    /// A projected layer: `weight_ih{suffix}` `[4·cell, input]`, `weight_hh{suffix}` `[4·cell,
    /// proj]`, `bias{suffix}` `[4·cell]`, `weight_hr{suffix}` `[proj, cell]` under `w`.
    pub fn projected(w: &Weights, suffix: &str, input: usize, cell: usize, proj: usize) -> Result<LstmLayer> {
        let gates = 4 * cell;
        Ok(LstmLayer {
            input: Linear::from_tensors(w.tensor(&format!("weight_ih{suffix}"), &[gates, input])?, Some(w.tensor(&format!("bias{suffix}"), &[gates])?)),
            recurrent: LstmWeights::new(
                w.gpu(),
                &w.values(&format!("weight_hh{suffix}"), &[gates, proj])?,
                &vec![0.0; gates],
                Some(&w.values(&format!("weight_hr{suffix}"), &[proj, cell])?),
                cell,
                proj,
            )?,
            cell,
            hidden: proj,
            reverse: suffix.ends_with("_reverse"),
        })
    }

    /// x [B·T, in] of B = `lengths.len()` sequences of `seq` positions → h [B·T, hidden], 0
    /// past each sequence's length.
    pub fn forward(&self, x: &Tensor, lengths: &[usize], seq: usize) -> Result<Tensor> {
        let gates = self.input.forward(x)?.reshape(&[lengths.len(), seq, 4 * self.cell])?;
        let cfg = LstmConfig { reverse: self.reverse, ..LstmConfig::default() };
        lstm_sequence(&gates, lengths, &self.recurrent, &cfg)?.outputs.reshape(&[lengths.len() * seq, self.hidden])
    }
}

/// Each sequence's length from a right-padded batch's attention mask (all `seq` without one).
pub fn right_padded_lengths(op: &'static str, batch: &IdsBatch) -> Result<Vec<usize>> {
    let Some(mask) = &batch.attention_mask else {
        return Ok(vec![batch.seq; batch.batch]);
    };
    super::check_mask_values(op, mask)?;
    mask.chunks_exact(batch.seq.max(1))
        .enumerate()
        .map(|(b, row)| {
            let len = row.iter().take_while(|&&m| m == 1).count();
            if len == 0 {
                return Err(arg_err!(op, "sequence {b} is empty or left-padded (attention_mask starts with 0): a recurrent model reads right-padded batches"));
            }
            if row[len..].contains(&1) {
                return Err(arg_err!(op, "sequence {b}'s attention_mask has a gap: a recurrent model reads right-padded batches (1s, then 0s)"));
            }
            Ok(len)
        })
        .collect()
}

/// One direction of an `nn.LSTM` layer as a run trains it: `weight_ih{suffix}` and
/// `bias_ih{suffix}` (the input half, every step at once), `weight_hh{suffix}` and
/// `bias_hh{suffix}` (the step kernels').
pub struct TrainLstmLayer {
    pub input: Linear,
    pub weight_hh: Tensor,
    pub bias_hh: Tensor,
    pub hidden: usize,
    pub reverse: bool,
}

impl TrainLstmLayer {
    /// The direction under `w` with PyTorch's names; `_reverse` suffixes run backwards.
    pub fn load(w: &Weights, suffix: &str, input: usize, hidden: usize) -> Result<TrainLstmLayer> {
        let gates = 4 * hidden;
        Ok(TrainLstmLayer {
            input: Linear::from_tensors(w.tensor(&format!("weight_ih{suffix}"), &[gates, input])?, Some(w.tensor(&format!("bias_ih{suffix}"), &[gates])?)),
            weight_hh: w.tensor(&format!("weight_hh{suffix}"), &[gates, hidden])?,
            bias_hh: w.tensor(&format!("bias_hh{suffix}"), &[gates])?,
            hidden,
            reverse: suffix.ends_with("_reverse"),
        })
    }

    /// The recurrent matrices for the step kernels.
    pub fn tensors(&self) -> LstmTensors<'_> {
        LstmTensors { state_linearity: &self.weight_hh, state_bias: &self.bias_hh, state_projection: None }
    }

    /// Their gradients in `grads`.
    pub fn gradients<'a>(&self, grads: &'a Gradients) -> Result<LstmTensors<'a>> {
        Ok(LstmTensors { state_linearity: grads.of(&self.weight_hh)?, state_bias: grads.of(&self.bias_hh)?, state_projection: None })
    }

    /// The run's config: the direction.
    pub fn config(&self) -> LstmConfig {
        LstmConfig { reverse: self.reverse, ..LstmConfig::default() }
    }
}
