//! Training an AWD-LSTM (Merity et al. 2017) as fastai does, each batch from zero state, with
//! its five regularizers at the config's probabilities:
//! - `embed_p`: whole words dropped from the embedding table (a mask per vocabulary row,
//!   applied to the table before the lookup: every occurrence of a word goes together);
//! - `input_p`, `hidden_p` (between layers), `output_p` (before the decoder, or on the
//!   classifier's first block): locked dropout, one mask per (sequence, feature) shared by
//!   all time steps;
//! - `weight_p`: DropConnect on each recurrent matrix `weight_hh_l0_raw`, drawn once per
//!   batch; its gradient flows to the raw matrix through the same mask.
//!
//! Two heads: the language model's tied decoder (`--objective clm`), and ULMFiT's classifier
//! (`--objective classify`): concat pooling, then blocks of BatchNorm1d (batch statistics,
//! running ones updated) → dropout (`output_p`, then `ps`) → Linear → ReLU. A classifier reads
//! each text whole with one set of masks (fastai reads it in chunks of `bptt` tokens with
//! fresh masks and truncated backpropagation between them: the same for texts up to `bptt`).
//!
//! Dropout sites are numbered in the order fastai's modules draw their masks, so a PyTorch
//! run fed the same masks matches: 0 the embeddings, 1 the input, then per layer l 2 + 2l its
//! weight drop and 3 + 2l the dropout after it (none after the last layer), then the head's:
//! 2·L + 1 the decoder's input, or 2·L + 1 + i the classifier's block i. The parameters are
//! the tensors the inference model reads, under fastai's names, kept row-major here because
//! the optimizer updates them every step.

use super::classifier::{head_block, pooling_windows};
use super::{check_copies, AwdLstmConfig};
use crate::error::{arg_err, Result};
use crate::models::decoder::train::LmBatch;
use crate::models::rnn::right_padded_lengths;
use crate::models::training::{not_trained, Batch, Objective, StepOptions, Trainable};
use crate::models::{IdsBatch, ModelOutput};
use crate::nn::{Gradients, Linear};
use crate::ops::batch_norm::{batch_norm_backward, batch_norm_eval, batch_norm_train, BatchNorm, BatchNormSaved};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout, dropout_accumulate, dropout_shaped, Dropout, DropoutStream, MaskShape};
use crate::ops::elementwise::{unary, unary_backward, Unary};
use crate::ops::embedding::{embedding, embedding_backward_with_padding, EmbeddingIds};
use crate::ops::lstm::LstmConfig;
use crate::ops::lstm_train::{lstm_sequence_backward, lstm_sequence_traced, LstmTensors, LstmTrace};
use crate::ops::pool::{concat_pool, concat_pool_backward, ConcatPool};
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// One LSTM layer's parameters (`rnns.{l}`).
struct TrainRnn {
    /// `module.weight_ih_l0` and `module.bias_ih_l0`.
    input: Linear,
    /// `weight_hh_l0_raw`, before the weight drop.
    weight_hh: Tensor,
    /// `module.bias_hh_l0`.
    bias_hh: Tensor,
    hidden: usize,
}

/// fastai's `AWD_LSTM` with trainable tensors.
struct TrainEncoder {
    /// `encoder.weight` [vocab, emb_sz].
    table: Tensor,
    rnns: Vec<TrainRnn>,
}

/// A layer's forward, kept for the backward.
struct RnnSaved {
    /// Its input [B·T, in] (after the dropout before it).
    input: Tensor,
    /// The recurrent matrix it ran with (weight-dropped) and the drop.
    weight_hh: Tensor,
    weight_drop: Option<Dropout>,
    trace: LstmTrace,
    /// The locked dropout on its output (None after the last layer).
    after: Option<Dropout>,
}

/// The encoder's training forward: the batch, its masks and each layer's records.
struct EncoderForward {
    ids: Vec<u32>,
    lengths: Vec<usize>,
    seq: usize,
    embed_drop: Option<Dropout>,
    input_drop: Option<Dropout>,
    rnns: Vec<RnnSaved>,
    /// The last layer's output [B·T, emb_sz].
    output: Tensor,
}

/// One block of the classifier's head (`1.layers.{i}`).
struct HeadBlock {
    /// `.0`: BatchNorm1d's weight and bias, and its running statistics (buffers).
    norm: [Tensor; 4],
    /// `.2` (or `.1`): the Linear, no bias.
    linear: Linear,
    /// The dropout between the two.
    p: f32,
}

impl HeadBlock {
    fn norm(&self) -> BatchNorm<'_> {
        BatchNorm { weight: &self.norm[0], bias: &self.norm[1], running_mean: &self.norm[2], running_var: &self.norm[3] }
    }
}

/// A head block's training forward.
struct BlockSaved {
    input: Tensor,
    norm: BatchNormSaved,
    drop: Option<Dropout>,
    /// The Linear's input (after the dropout) and output (before the ReLU).
    linear_input: Tensor,
    linear_output: Tensor,
}

enum TrainHead {
    /// `1.decoder`: the table (tied) or its own weight, and its bias.
    LanguageModel(Linear),
    /// `1.layers`: ULMFiT's pooling classifier.
    Classifier(Vec<HeadBlock>),
}

/// An AWD-LSTM language model or ULMFiT classifier as a run trains it.
pub struct AwdLstmTraining {
    pub config: AwdLstmConfig,
    encoder: TrainEncoder,
    head: TrainHead,
}

/// The dropout of `p` at `site`, when training (`stream`) and p > 0.
fn site(stream: Option<&DropoutStream>, p: f32, site: usize) -> Result<Option<Dropout>> {
    stream.map_or(Ok(None), |d| d.site(p, site as u32))
}

impl TrainEncoder {
    /// Loads `AWD_LSTM` under `w` (`0.` of a language model, `0.module.` of a classifier).
    fn load(w: &Weights, config: &AwdLstmConfig) -> Result<TrainEncoder> {
        let table_shape = [config.vocab_size, config.emb_sz];
        let table = w.pp("encoder").tensor("weight", &table_shape)?;
        check_copies(w, config)?;
        let rnns = (0..config.n_layers)
            .map(|l| {
                let (input, hidden) = config.layer_sizes(l);
                let (rnn, gates) = (w.pp("rnns").pp(l), 4 * hidden);
                let module = rnn.pp("module");
                Ok(TrainRnn {
                    input: Linear::from_tensors(module.tensor("weight_ih_l0", &[gates, input])?, Some(module.tensor("bias_ih_l0", &[gates])?)),
                    weight_hh: rnn.tensor("weight_hh_l0_raw", &[gates, hidden])?,
                    bias_hh: module.tensor("bias_hh_l0", &[gates])?,
                    hidden,
                })
            })
            .collect::<Result<_>>()?;
        Ok(TrainEncoder { table, rnns })
    }

    /// The forward over `batch`'s ids, with `stream`'s masks when training.
    fn forward(&self, c: &AwdLstmConfig, batch: &LmBatch, stream: Option<&DropoutStream>) -> Result<EncoderForward> {
        let op = "awd_lstm";
        let ids_batch = IdsBatch {
            input_ids: batch.input_ids.to_vec(),
            attention_mask: batch.attention_mask.map(<[u32]>::to_vec),
            batch: batch.batch,
            seq: batch.seq,
            ..IdsBatch::default()
        };
        ids_batch.validate()?;
        let lengths = right_padded_lengths(op, &ids_batch)?;
        let (rows, seq, n) = (batch.batch * batch.seq, batch.seq, c.n_layers);
        let (embed_drop, input_drop) = (site(stream, c.embed_p, 0)?, site(stream, c.input_p, 1)?);
        let locked = |width: usize| MaskShape::Locked { seq, width };

        let table = dropout_shaped(&self.table, embed_drop, MaskShape::Rows { width: c.emb_sz })?;
        let ids = EmbeddingIds { tokens: batch.input_ids, positions: None, segments: None };
        let mut x = dropout_shaped(&embedding(&table, None, None, &ids, &[rows])?, input_drop, locked(c.emb_sz))?;
        let mut saved = Vec::with_capacity(n);
        for (l, rnn) in self.rnns.iter().enumerate() {
            let weight_drop = site(stream, c.weight_p, 2 + 2 * l)?;
            let weight_hh = dropout_shaped(&rnn.weight_hh, weight_drop, MaskShape::Elements)?;
            let gates = rnn.input.forward(&x)?.reshape(&[batch.batch, seq, 4 * rnn.hidden])?;
            let weights = LstmTensors { state_linearity: &weight_hh, state_bias: &rnn.bias_hh, state_projection: None };
            let trace = lstm_sequence_traced(&gates, &lengths, &weights, &LstmConfig::default())?;
            let h = trace.outputs.reshape(&[rows, rnn.hidden])?;
            let after = if l + 1 < n { site(stream, c.hidden_p, 3 + 2 * l)? } else { None };
            let input = std::mem::replace(&mut x, dropout_shaped(&h, after, locked(rnn.hidden))?);
            saved.push(RnnSaved { input, weight_hh, weight_drop, trace, after });
        }
        Ok(EncoderForward { ids: batch.input_ids.to_vec(), lengths, seq, embed_drop, input_drop, rnns: saved, output: x })
    }

    /// Backpropagates the gradient of the last layer's output [B·T, emb_sz] into `grads`.
    fn backward(&self, c: &AwdLstmConfig, f: EncoderForward, d_output: Tensor, grads: &Gradients) -> Result<()> {
        let locked = |width: usize| MaskShape::Locked { seq: f.seq, width };
        let batch = f.lengths.len();
        let mut d = d_output;
        for (rnn, s) in self.rnns.iter().zip(&f.rnns).rev() {
            // d is the gradient of this layer's output after its dropout: undo the dropout.
            let d_h = dropout_shaped(&d, s.after, locked(rnn.hidden))?.reshape(&[batch, f.seq, rnn.hidden])?;
            let weights = LstmTensors { state_linearity: &s.weight_hh, state_bias: &rnn.bias_hh, state_projection: None };
            // The dropped matrix's gradient reaches the raw one through the same mask.
            let d_weight_hh = match s.weight_drop {
                Some(_) => Tensor::zeros(rnn.weight_hh.gpu(), rnn.weight_hh.shape(), DType::F32)?,
                None => grads.of(&rnn.weight_hh)?.clone(),
            };
            let layer_grads = LstmTensors { state_linearity: &d_weight_hh, state_bias: grads.of(&rnn.bias_hh)?, state_projection: None };
            let d_gates = lstm_sequence_backward(&s.trace, &weights, &d_h, &layer_grads)?;
            if s.weight_drop.is_some() {
                dropout_accumulate(&d_weight_hh, s.weight_drop, MaskShape::Elements, grads.of(&rnn.weight_hh)?)?;
            }
            d = rnn.input.backward(&s.input, &d_gates.reshape(&[batch * f.seq, 4 * rnn.hidden])?, grads)?;
        }
        let d_embedded = dropout_shaped(&d, f.input_drop, locked(c.emb_sz))?;
        // The table's rows were dropped before the lookup: the gradient of the dropped table
        // reaches the table through the same row mask. PyTorch's padding row gets none.
        let d_table = match f.embed_drop {
            Some(_) => Tensor::zeros(self.table.gpu(), self.table.shape(), DType::F32)?,
            None => grads.of(&self.table)?.clone(),
        };
        embedding_backward_with_padding(&d_embedded, &f.ids, &d_table, c.pad_token)?;
        if f.embed_drop.is_some() {
            dropout_accumulate(&d_table, f.embed_drop, MaskShape::Rows { width: c.emb_sz }, grads.of(&self.table)?)?;
        }
        Ok(())
    }
}

impl AwdLstmTraining {
    /// The parameters (and BatchNorm's running statistics, as buffers) of a language model's
    /// or a classifier's checkpoint, read through a recording view so the run trains and
    /// saves them under their names.
    pub fn load(config_json: &[u8], w: &Weights) -> Result<AwdLstmTraining> {
        let config = AwdLstmConfig::from_json(config_json)?;
        let c = &config;
        let (encoder, head) = match c.head.architecture("AwdLstmModel") {
            "AwdLstmForLanguageModeling" => {
                let encoder = TrainEncoder::load(&w.pp(0), c)?;
                let decoder = w.pp(1).pp("decoder");
                let weight = match decoder.untied("weight", &[c.vocab_size, c.emb_sz], c.tie_weights)? {
                    Some(own) => own,
                    None => encoder.table.clone(),
                };
                let bias = if c.out_bias { Some(decoder.tensor("bias", &[c.vocab_size])?) } else { None };
                (encoder, TrainHead::LanguageModel(Linear::from_tensors(weight, bias)))
            }
            "AwdLstmForSequenceClassification" => {
                let encoder = TrainEncoder::load(&w.pp(0).pp("module"), c)?;
                let dims = c.classifier_dims();
                let blocks = dims
                    .windows(2)
                    .zip(c.classifier_dropouts())
                    .enumerate()
                    .map(|(i, (io, p))| {
                        let (norm, linear) = head_block(&w.pp(1).pp("layers"), i)?;
                        let (input, output) = (io[0], io[1]);
                        Ok(HeadBlock {
                            norm: [
                                norm.tensor("weight", &[input])?,
                                norm.tensor("bias", &[input])?,
                                norm.buffer("running_mean", &[input])?,
                                norm.buffer("running_var", &[input])?,
                            ],
                            linear: Linear::from_tensors(linear.tensor("weight", &[output, input])?, None),
                            p,
                        })
                    })
                    .collect::<Result<_>>()?;
                (encoder, TrainHead::Classifier(blocks))
            }
            other => {
                return Err(arg_err!(
                "train",
                "an AWD-LSTM trains as a language model (AwdLstmForLanguageModeling) or ULMFiT's classifier (AwdLstmForSequenceClassification), not `{other}`"
            ))
            }
        };
        Ok(AwdLstmTraining { config, encoder, head })
    }

    pub fn is_classifier(&self) -> bool {
        matches!(self.head, TrainHead::Classifier(_))
    }

    /// The causal-LM loss of `batch` (position t predicting labels[t + 1]) and its backward,
    /// adding `loss_scale` × the gradients into `grads`. Returns the loss `[1]`.
    pub fn lm_loss_backward(&self, batch: &LmBatch, grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let TrainHead::LanguageModel(decoder) = &self.head else {
            return Err(arg_err!("train", "objective clm trains an AWD-LSTM language model, not ULMFiT's classifier"));
        };
        let c = &self.config;
        let forward = self.encoder.forward(c, batch, Some(stream))?;
        let drop = site(Some(stream), c.output_p, 2 * c.n_layers + 1)?;
        let locked = MaskShape::Locked { seq: batch.seq, width: c.emb_sz };
        let decoder_input = dropout_shaped(&forward.output, drop, locked)?;
        let logits = decoder.forward(&decoder_input)?;
        let ce = cross_entropy(&logits, &batch.shifted_targets(), DEFAULT_IGNORE_INDEX)?;
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        let d_output = dropout_shaped(&decoder.backward(&decoder_input, &d_logits, grads)?, drop, locked)?;
        self.encoder.backward(c, forward, d_output, grads)?;
        Ok(ce.loss)
    }

    /// The classifier's cross entropy over `labels` (one per sequence of `batch`) and its
    /// backward. Returns the loss `[1]`.
    pub fn classification_loss_backward(&self, batch: &LmBatch, labels: &[i64], grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let TrainHead::Classifier(blocks) = &self.head else {
            return Err(arg_err!("train", "objective classify trains ULMFiT's classifier (AwdLstmForSequenceClassification), not a language model"));
        };
        let c = &self.config;
        let forward = self.encoder.forward(c, batch, Some(stream))?;
        let pool = self.pool(&forward, batch)?;
        let mut x = pool.pooled.clone();
        let mut saved = Vec::with_capacity(blocks.len());
        for (i, block) in blocks.iter().enumerate() {
            let (normalized, norm) = batch_norm_train(&x, &block.norm())?;
            let drop = site(Some(stream), block.p, 2 * c.n_layers + 1 + i)?;
            let linear_input = dropout(&normalized, drop)?;
            let linear_output = block.linear.forward(&linear_input)?;
            let next = if i + 1 < blocks.len() { unary(&linear_output, Unary::Relu)? } else { linear_output.clone() };
            saved.push(BlockSaved { input: std::mem::replace(&mut x, next), norm, drop, linear_input, linear_output });
        }
        let ce = cross_entropy(&x, labels, DEFAULT_IGNORE_INDEX)?;
        let mut d = cross_entropy_backward(x, &ce, loss_scale)?;
        for (i, (block, s)) in blocks.iter().zip(&saved).enumerate().rev() {
            if i + 1 < blocks.len() {
                d = unary_backward(&s.linear_output, &d, Unary::Relu)?;
            }
            let d_normalized = dropout(&block.linear.backward(&s.linear_input, &d, grads)?, s.drop)?;
            let norm = block.norm();
            d = batch_norm_backward(&s.input, &norm, &s.norm, &d_normalized, grads.of(norm.weight)?, grads.of(norm.bias)?)?;
        }
        let d_output = concat_pool_backward(&pool, &d)?;
        self.encoder.backward(c, forward, d_output.reshape(&[batch.batch * batch.seq, c.emb_sz])?, grads)?;
        Ok(ce.loss)
    }

    /// The last layer's concat pooling over each text's window.
    fn pool(&self, f: &EncoderForward, batch: &LmBatch) -> Result<ConcatPool> {
        let c = &self.config;
        concat_pool(&f.output.reshape(&[batch.batch, batch.seq, c.emb_sz])?, &pooling_windows(&f.lengths, c.bptt, c.max_len))
    }

    /// The logits without dropout (held-out evaluation): [B, T, vocab] of a language model,
    /// [B, classes] of a classifier (BatchNorm with its running statistics).
    pub fn logits(&self, batch: &LmBatch) -> Result<Tensor> {
        let c = &self.config;
        let forward = self.encoder.forward(c, batch, None)?;
        match &self.head {
            TrainHead::LanguageModel(decoder) => decoder.forward(&forward.output)?.reshape(&[batch.batch, batch.seq, c.vocab_size]),
            TrainHead::Classifier(blocks) => {
                let mut x = self.pool(&forward, batch)?.pooled;
                for (i, block) in blocks.iter().enumerate() {
                    x = block.linear.forward(&batch_norm_eval(&x, &block.norm())?)?;
                    if i + 1 < blocks.len() {
                        x = unary(&x, Unary::Relu)?;
                    }
                }
                Ok(x)
            }
        }
    }
}

/// An AWD-LSTM trains as a language model (ULMFiT's first two stages) or as ULMFiT's
/// classifier (its third).
impl Trainable for AwdLstmTraining {
    fn architecture(&self) -> &str {
        self.config.head.architecture("AwdLstmModel")
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![if self.is_classifier() { Objective::Classify } else { Objective::Clm }]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    /// About how many f32 values a training batch of `batch` × `seq` keeps for its backward:
    /// per token and layer the LSTM's records (gates 4H, cells 2H, m, h_pre and h) and the
    /// layer's input; a language model's logits and their gradient; with word dropout, two
    /// copies of the embedding table.
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let tokens = product(&[batch as u64, seq as u64]);
        let per_token: u64 = (0..self.config.n_layers).map(|l| 10 * self.config.layer_sizes(l).1 as u64).sum();
        let logits = if self.is_classifier() { 0 } else { product(&[2, tokens, self.config.vocab_size as u64]) };
        // Word dropout copies the table and its gradient's scratch every step.
        let tables = if self.config.embed_p > 0.0 { product(&[2, self.config.vocab_size as u64, self.config.emb_sz as u64]) } else { 0 };
        product(&[tokens, per_token]).saturating_add(logits).saturating_add(tables)
    }

    /// The layer group of parameter `name` and the number of groups (fastai's splits):
    /// a language model's LSTM layers 0 … L − 1, then the embeddings with the tied decoder on
    /// top; a classifier's embeddings 0, LSTM layers 1 … L, the head L + 1.
    fn layer_group(&self, name: &str) -> Option<(usize, usize)> {
        let layers = self.config.n_layers;
        let layer = |rest: &str| rest.strip_prefix("rnns.")?.split('.').next()?.parse::<usize>().ok();
        match &self.head {
            TrainHead::LanguageModel(_) => match name.strip_prefix("0.") {
                Some(rest) if rest.starts_with("rnns.") => layer(rest).map(|l| (l, layers + 1)),
                _ => Some((layers, layers + 1)),
            },
            TrainHead::Classifier(_) => match name.strip_prefix("0.module.") {
                Some(rest) if rest.starts_with("rnns.") => layer(rest).map(|l| (1 + l, layers + 2)),
                Some(_) => Some((0, layers + 2)),
                None => Some((layers + 1, layers + 2)),
            },
        }
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        match objective {
            Objective::Clm => self.lm_loss_backward(&LmBatch::of(batch), grads, step.loss_scale, &step.dropout),
            Objective::Classify => self.classification_loss_backward(&LmBatch::of(batch), &batch.labels, grads, step.loss_scale, &step.dropout),
            other => Err(not_trained(self.architecture(), &self.objectives(), other)),
        }
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        Ok(ModelOutput::logits(self.logits(&LmBatch::of(batch))?))
    }
}
