//! ELMo's pretraining objective, the bidirectional language model (Peters et al. 2018 §3.1,
//! bilm-tf; AllenNLP's `LanguageModel`): the token encoder and the stacked biLSTM of
//! [`super::ElmoModel`], and a softmax over a word vocabulary shared by both directions. At
//! every position of `<S>` w₁ … wₙ `</S>` the forward LSTM's top layer predicts the next
//! token and the backward LSTM's the previous one; the loss is
//! ½·(Σ forward cross-entropies + Σ backward cross-entropies) / N with N = n + 1 targets per
//! direction and sentence, summed over the batch: one mean over the 2N rows.

use std::ops::Range;

use super::encoder::{sentence_char_ids, EncoderSaved, TokenEncoder};
use super::{token_rows, ElmoOptions};
use crate::error::{arg_err, shape_err, Result};
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::models::ModelOutput;
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, CrossEntropyOutput, DEFAULT_IGNORE_INDEX};
use crate::ops::elementwise::{add, mul};
use crate::ops::lstm::LstmConfig;
use crate::ops::lstm_train::{lstm_sequence_backward, lstm_sequence_traced, LstmTensors, LstmTrace};
use crate::ops::rows::copy_rows;
use crate::ops::sum::column_sums_into;
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// One direction of one biLSTM layer with its weights as plain parameters.
struct LstmLayer {
    /// `input_linearity`: x·W_inputᵀ (no bias).
    input_linearity: Linear,
    /// `state_linearity.weight` [4·cell, proj], `state_linearity.bias` [4·cell],
    /// `state_projection.weight` [proj, cell].
    state_linearity: Tensor,
    state_bias: Tensor,
    state_projection: Tensor,
}

impl LstmLayer {
    fn tensors(&self) -> LstmTensors<'_> {
        LstmTensors { state_linearity: &self.state_linearity, state_bias: &self.state_bias, state_projection: Some(&self.state_projection) }
    }
}

/// A batch of sentences (words, without boundaries) and each wrapped sentence's word ids:
/// `targets[i]` holds `words[i].len() + 2` ids, `<S>`'s first and `</S>`'s last.
#[derive(Clone, Copy, Debug)]
pub struct BiLmBatch<'a> {
    pub sentences: &'a [Vec<String>],
    pub targets: &'a [Vec<u32>],
}

/// The loss of a batch and its parts, each `[1]`.
pub struct BiLmLosses {
    /// The mean over both directions' predictions.
    pub loss: Tensor,
    /// The forward LM's mean cross-entropy (next word), and the backward LM's (previous word).
    pub forward: Tensor,
    pub backward: Tensor,
}

/// The forward pass of a batch, kept for the backward.
struct BiLmForward {
    /// The character ids, the encoder's output over real tokens and what it saved.
    ids: Vec<u32>,
    compact: Tensor,
    encoder_saved: EncoderSaved,
    /// (encoder row, [B·steps] row) of every real token.
    placed: Vec<(usize, usize)>,
    saved: Vec<[LayerSaved; 2]>,
    /// Per softmax row: (direction, [B·steps] row of its top layer).
    sources: Vec<(usize, usize)>,
    chunks: Vec<SoftmaxChunk>,
    loss: Tensor,
    batch_size: usize,
    steps: usize,
}

/// Softmax rows `slots`: their hidden states, logits and cross-entropy.
struct SoftmaxChunk {
    slots: Range<usize>,
    hidden: Tensor,
    logits: Tensor,
    ce: CrossEntropyOutput,
}

/// The forward of one layer direction, kept for the backward.
struct LayerSaved {
    input: Tensor,
    trace: LstmTrace,
}

/// ELMo with its biLM softmax, for training.
pub struct ElmoBiLm {
    pub options: ElmoOptions,
    encoder: TokenEncoder,
    /// Per layer: forward, backward.
    lstm: Vec<[LstmLayer; 2]>,
    /// `softmax.weight` [V, proj], `softmax.bias` [V].
    softmax: Linear,
    /// The softmax runs over this many rows at a time: by default as many as one storage
    /// binding holds the logits of.
    pub softmax_chunk_rows: usize,
}

impl ElmoBiLm {
    /// Loads AllenNLP `Elmo` names (as [`super::ElmoModel::load`]) plus `softmax.weight`
    /// `[V, proj]` and `softmax.bias` `[V]` for a vocabulary of `vocab` words.
    pub fn load(options: ElmoOptions, w: &Weights, vocab: usize) -> Result<ElmoBiLm> {
        let encoder = TokenEncoder::load(&options, w)?;
        let (cell, proj) = (options.lstm.dim, options.lstm.projection_dim);
        let layer = |direction: &str, i: usize| -> Result<LstmLayer> {
            let layer = w.pp(format!("_elmo_lstm._elmo_lstm.{direction}_layer_{i}"));
            Ok(LstmLayer {
                input_linearity: Linear::from_tensors(layer.pp("input_linearity").tensor("weight", &[4 * cell, proj])?, None),
                state_linearity: layer.tensor("state_linearity.weight", &[4 * cell, proj])?,
                state_bias: layer.tensor("state_linearity.bias", &[4 * cell])?,
                state_projection: layer.tensor("state_projection.weight", &[proj, cell])?,
            })
        };
        let lstm = (0..options.lstm.n_layers).map(|i| Ok([layer("forward", i)?, layer("backward", i)?])).collect::<Result<Vec<_>>>()?;
        let softmax = Linear::load(&w.pp("softmax"), proj, vocab)?;
        // A row of the logits [rows, V] or of the hidden states [rows, proj].
        let row_bytes = vocab.max(proj).max(1) as u64 * 4;
        let softmax_chunk_rows = (w.gpu().limits().max_storage_buffer_binding_size / row_bytes).max(1) as usize;
        Ok(ElmoBiLm { options, encoder, lstm, softmax, softmax_chunk_rows })
    }

    fn lstm_config(&self, reverse: bool) -> LstmConfig {
        LstmConfig { cell_clip: self.options.lstm.cell_clip, proj_clip: self.options.lstm.proj_clip, reverse }
    }

    /// The biLM loss of `batch` and its backward: adds `loss_scale` × the gradient of every
    /// parameter into `grads`. Returns the loss `[1]` (recorded on the GPU, not read back).
    pub fn bilm_loss_backward(&self, batch: &BiLmBatch, grads: &Gradients, loss_scale: f32) -> Result<Tensor> {
        let forward = self.forward_saved(batch)?;
        self.backward(forward, grads, loss_scale)
    }

    /// The loss of `batch` (as [`ElmoBiLm::bilm_loss_backward`]'s, without gradients) and each
    /// direction's mean cross-entropy, all `[1]`.
    pub fn losses(&self, batch: &BiLmBatch) -> Result<BiLmLosses> {
        let f = self.forward_saved(batch)?;
        // The forward direction's rows come first, as many as the backward's.
        let (rows, half) = (f.sources.len(), f.sources.len() / 2);
        Ok(BiLmLosses { forward: mean_of_rows(&f.chunks, 0..half)?, backward: mean_of_rows(&f.chunks, half..rows)?, loss: f.loss })
    }

    /// The forward pass of `batch`, keeping what the backward needs.
    fn forward_saved(&self, batch: &BiLmBatch) -> Result<BiLmForward> {
        let op = "elmo_bilm";
        let vocab = self.softmax.weight.shape()[0];
        if batch.sentences.is_empty() {
            return Err(arg_err!(op, "no sentences given"));
        }
        if batch.targets.len() != batch.sentences.len() {
            return Err(shape_err!(op, "{} target rows for {} sentences", batch.targets.len(), batch.sentences.len()));
        }
        for (i, (sentence, targets)) in batch.sentences.iter().zip(batch.targets).enumerate() {
            if sentence.is_empty() {
                return Err(arg_err!(op, "sentence {i} has no words"));
            }
            if targets.len() != sentence.len() + 2 {
                return Err(shape_err!(op, "sentence {i} has {} words but {} target ids (expected words + 2 for <S> and </S>)", sentence.len(), targets.len()));
            }
            if let Some(bad) = targets.iter().find(|&&id| id as usize >= vocab) {
                return Err(arg_err!(op, "target id {bad} of sentence {i} is outside the vocabulary of {vocab}"));
            }
        }
        let batch_size = batch.sentences.len();
        let lengths: Vec<usize> = batch.sentences.iter().map(|s| s.len() + 2).collect();
        let steps = lengths.iter().copied().max().unwrap_or(0);
        let (proj, rows) = (self.options.lstm.projection_dim, batch_size * steps);

        // Token layer in the [B·steps, proj] layout, 0 at padding.
        let ids = sentence_char_ids(batch.sentences);
        let (compact, encoder_saved) = self.encoder.forward_saved(&ids)?;
        let gpu = compact.gpu();
        let placed = token_rows(&lengths, steps);
        let token_layer = Tensor::zeros(gpu, &[rows, proj], DType::F32)?;
        copy_rows(&compact, &token_layer, 0, &placed)?;

        // The biLSTM: each direction reads its own previous layer.
        let skip = self.options.lstm.use_skip_connections;
        let mut inputs = [token_layer.clone(), token_layer];
        let mut saved: Vec<[LayerSaved; 2]> = Vec::with_capacity(self.lstm.len());
        for (i, layer) in self.lstm.iter().enumerate() {
            let run = |direction: usize| -> Result<(Tensor, LayerSaved)> {
                let lstm = &layer[direction];
                let input = inputs[direction].clone();
                let gates = lstm.input_linearity.forward(&input)?.reshape(&[batch_size, steps, 4 * self.options.lstm.dim])?;
                let trace = lstm_sequence_traced(&gates, &lengths, &lstm.tensors(), &self.lstm_config(direction == 1))?;
                let mut out = trace.outputs.reshape(&[rows, proj])?;
                if i > 0 && skip {
                    out = add(&out, &input)?;
                }
                Ok((out, LayerSaved { input, trace }))
            };
            let ((forward, f), (backward, b)) = (run(0)?, run(1)?);
            inputs = [forward, backward];
            saved.push([f, b]);
        }

        // Softmax rows: forward top at t < len − 1 predicts token t + 1, backward top at
        // t ≥ 1 predicts token t − 1; the forward rows first.
        let mut sources = Vec::new();
        let mut targets = Vec::new();
        for direction in 0..2 {
            for (b, ids) in batch.targets.iter().enumerate() {
                for t in 0..ids.len() - 1 {
                    let (at, predicts) = if direction == 0 { (t, t + 1) } else { (t + 1, t) };
                    sources.push((direction, b * steps + at));
                    targets.push(ids[predicts] as i64);
                }
            }
        }
        let mut chunks = Vec::new();
        for start in (0..targets.len()).step_by(self.softmax_chunk_rows.max(1)) {
            let slots = start..targets.len().min(start + self.softmax_chunk_rows.max(1));
            let hidden = Tensor::zeros(gpu, &[slots.len(), proj], DType::F32)?;
            for (direction, top) in inputs.iter().enumerate() {
                copy_rows(top, &hidden, 0, &chunk_pairs(&sources, &slots, direction))?;
            }
            let logits = self.softmax.forward(&hidden)?;
            let ce = cross_entropy(&logits, &targets[slots.clone()], DEFAULT_IGNORE_INDEX)?;
            chunks.push(SoftmaxChunk { slots, hidden, logits, ce });
        }
        let loss = mean_of_rows(&chunks, 0..targets.len())?;
        Ok(BiLmForward { ids, compact, encoder_saved, placed, saved, sources, chunks, loss, batch_size, steps })
    }

    /// The backward of [`ElmoBiLm::forward_saved`]: returns the loss.
    fn backward(&self, forward: BiLmForward, grads: &Gradients, loss_scale: f32) -> Result<Tensor> {
        let BiLmForward { ids, compact, encoder_saved, placed, saved, sources, chunks, loss, batch_size, steps } = forward;
        let (proj, skip) = (self.options.lstm.projection_dim, self.options.lstm.use_skip_connections);
        let rows = batch_size * steps;
        let gpu = compact.gpu();
        let mut d_outputs = [Tensor::zeros(gpu, &[rows, proj], DType::F32)?, Tensor::zeros(gpu, &[rows, proj], DType::F32)?];
        for SoftmaxChunk { slots, hidden, logits, ce } in chunks {
            // Each chunk's mean is over its rows; the loss is over all of them.
            let d_logits = cross_entropy_backward(logits, &ce, loss_scale * slots.len() as f32 / sources.len() as f32)?;
            let d_hidden = self.softmax.backward(&hidden, &d_logits, grads)?;
            for (direction, d_top) in d_outputs.iter().enumerate() {
                let back: Vec<(usize, usize)> = chunk_pairs(&sources, &slots, direction).into_iter().map(|(row, slot)| (slot, row)).collect();
                copy_rows(&d_hidden, d_top, 0, &back)?;
            }
        }
        for (i, (layer, saved)) in self.lstm.iter().zip(&saved).enumerate().rev() {
            for direction in 0..2 {
                let (lstm, s) = (&layer[direction], &saved[direction]);
                let weight_grads = LstmTensors {
                    state_linearity: grads.of(&lstm.state_linearity)?,
                    state_bias: grads.of(&lstm.state_bias)?,
                    state_projection: Some(grads.of(&lstm.state_projection)?),
                };
                let d_out = &d_outputs[direction];
                let d_gates = lstm_sequence_backward(&s.trace, &lstm.tensors(), &d_out.reshape(&[batch_size, steps, proj])?, &weight_grads)?;
                let mut d_input = lstm.input_linearity.backward(&s.input, &d_gates.reshape(&[rows, 4 * self.options.lstm.dim])?, grads)?;
                if i > 0 && skip {
                    d_input = add(&d_input, d_out)?;
                }
                d_outputs[direction] = d_input;
            }
        }
        // Both directions read the token layer; its padding rows have no token behind them.
        let d_token_layer = add(&d_outputs[0], &d_outputs[1])?;
        let d_compact = Tensor::zeros(gpu, compact.shape(), DType::F32)?;
        let back: Vec<(usize, usize)> = placed.iter().map(|&(token, row)| (row, token)).collect();
        copy_rows(&d_token_layer, &d_compact, 0, &back)?;
        self.encoder.backward(&ids, &encoder_saved, &d_compact, grads)?;
        Ok(loss)
    }
}

/// (top-layer row, row within the chunk) of the predictions of `direction` in `slots`.
fn chunk_pairs(sources: &[(usize, usize)], slots: &Range<usize>, direction: usize) -> Vec<(usize, usize)> {
    slots.clone().filter(|&slot| sources[slot].0 == direction).map(|slot| (sources[slot].1, slot - slots.start)).collect()
}

/// The mean cross-entropy of the softmax rows `rows` (none ignored), [1].
fn mean_of_rows(chunks: &[SoftmaxChunk], rows: Range<usize>) -> Result<Tensor> {
    let gpu = chunks.first().ok_or_else(|| arg_err!("elmo_bilm", "no predictions"))?.logits.gpu();
    let sum = Tensor::zeros(gpu, &[1], DType::F32)?;
    for chunk in chunks {
        let (start, end) = (rows.start.max(chunk.slots.start), rows.end.min(chunk.slots.end));
        if start < end {
            let losses = chunk.ce.losses.narrow(start - chunk.slots.start, end - start)?;
            column_sums_into(&losses.reshape(&[end - start, 1])?, &sum)?;
        }
    }
    mul(&sum, &Tensor::from_slice(gpu, &[1.0 / rows.len().max(1) as f32], &[1])?)
}

impl<'a> BiLmBatch<'a> {
    /// A training batch's sentences and their word ids.
    pub fn of(batch: &'a Batch) -> Result<BiLmBatch<'a>> {
        let s = batch.sentences.as_ref().ok_or_else(|| arg_err!("train", "objective bilm needs batches of sentences (ELMo reads words, not token ids)"))?;
        Ok(BiLmBatch { sentences: &s.sentences, targets: &s.targets })
    }
}

/// About how many f32 values an ELMo keeps per training micro-batch of `tokens` tokens: its
/// gates, cells and states per direction and layer, and its character convolutions.
pub fn elmo_activation_values(options: &ElmoOptions, tokens: u64) -> u64 {
    use crate::limits::saturating_product as product;
    let (lstm, filters) = (&options.lstm, options.n_filters() as u64);
    let per_token = product(&[2, lstm.n_layers as u64, 6 * lstm.dim as u64 + 2 * lstm.projection_dim as u64])
        .saturating_add(product(&[50, 2, filters]))
        .saturating_add(product(&[2, options.char_cnn.n_highway as u64, filters]));
    product(&[tokens, per_token])
}

/// The biLM trains with objective bilm, its loss the mean of its two directions'.
impl Trainable for ElmoBiLm {
    fn architecture(&self) -> &str {
        "ELMo's biLM"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::BiLm]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        elmo_activation_values(&self.options, crate::limits::saturating_product(&[batch as u64, seq as u64]))
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        self.bilm_loss_backward(&BiLmBatch::of(batch)?, grads, step.loss_scale)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        let losses = self.losses(&BiLmBatch::of(batch)?)?;
        let mut out = ModelOutput::default();
        out.push("loss", losses.loss);
        out.push("forward_loss", losses.forward);
        out.push("backward_loss", losses.backward);
        Ok(out)
    }
}
