//! Training an AWD-LSTM language model (Merity et al. 2017) as fastai does, one batch from
//! zero state, with its five regularizers at the config's probabilities:
//! - `embed_p`: whole words dropped from the embedding table (a mask per vocabulary row,
//!   applied to the table before the lookup: every occurrence of a word goes together);
//! - `input_p`, `hidden_p` (between layers), `output_p` (before the decoder): locked dropout,
//!   one mask per (sequence, feature) shared by all time steps;
//! - `weight_p`: DropConnect on each recurrent matrix `weight_hh_l0_raw`, drawn once per
//!   batch; its gradient flows to the raw matrix through the same mask.
//!
//! Dropout sites are numbered in the order fastai's modules draw their masks, so a PyTorch
//! run fed the same masks matches: 0 the embeddings, 1 the input, then per layer l 2 + 2l its
//! weight drop and 3 + 2l the dropout after it (none after the last layer), and 2·L + 1 the
//! output. The parameters are the tensors the inference model reads, under fastai's names,
//! kept row-major here because the optimizer updates them every step.

use super::AwdLstmConfig;
use crate::error::{arg_err, Result};
use crate::models::decoder::train::LmBatch;
use crate::models::rnn::right_padded_lengths;
use crate::models::IdsBatch;
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout_accumulate, dropout_shaped, Dropout, DropoutStream, MaskShape};
use crate::ops::embedding::{embedding, embedding_backward_with_padding, EmbeddingIds};
use crate::ops::lstm::LstmConfig;
use crate::ops::lstm_train::{lstm_sequence_backward, lstm_sequence_traced, LstmTensors, LstmTrace};
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// One LSTM layer's parameters (`0.rnns.{l}`).
struct TrainRnn {
    /// `module.weight_ih_l0` and `module.bias_ih_l0`.
    input: Linear,
    /// `weight_hh_l0_raw`, before the weight drop.
    weight_hh: Tensor,
    /// `module.bias_hh_l0`.
    bias_hh: Tensor,
    hidden: usize,
}

/// An AWD-LSTM language model as a run trains it.
pub struct AwdLstmTraining {
    pub config: AwdLstmConfig,
    /// `0.encoder.weight` [vocab, emb_sz].
    table: Tensor,
    rnns: Vec<TrainRnn>,
    /// `1.decoder`: the table (tied) or its own weight, and its bias.
    decoder: Linear,
}

/// A layer's forward, kept for the backward.
struct RnnSaved {
    /// Its input [B·T, in] (after the dropout before it).
    input: Tensor,
    /// The recurrent matrix it ran with (weight-dropped) and the drop.
    weight_hh: Tensor,
    weight_drop: Option<Dropout>,
    trace: LstmTrace,
    /// The locked dropout on its output (None for the last layer's, and at p = 0).
    after: Option<Dropout>,
}

/// A training forward, kept for the backward.
struct Forward {
    ids: Vec<u32>,
    lengths: Vec<usize>,
    seq: usize,
    embed_drop: Option<Dropout>,
    input_drop: Option<Dropout>,
    output_drop: Option<Dropout>,
    rnns: Vec<RnnSaved>,
    /// The decoder's input [B·T, emb_sz] and its logits [B·T, vocab].
    decoder_input: Tensor,
    logits: Tensor,
}

impl AwdLstmTraining {
    /// The parameters of a language model's checkpoint (`AwdLstmForLanguageModeling`), read
    /// through a recording view so the run trains and saves them under their names.
    pub fn load(config_json: &[u8], w: &Weights) -> Result<AwdLstmTraining> {
        let config = AwdLstmConfig::from_json(config_json)?;
        let architecture = config.head.architecture("AwdLstmModel");
        if architecture != "AwdLstmForLanguageModeling" {
            return Err(arg_err!("train", "an AWD-LSTM trains as a language model (AwdLstmForLanguageModeling), not `{architecture}`"));
        }
        let encoder = w.pp(0);
        let table_shape = [config.vocab_size, config.emb_sz];
        let table = encoder.pp("encoder").tensor("weight", &table_shape)?;
        if encoder.contains("encoder_dp.emb.weight") {
            encoder.pp("encoder_dp").pp("emb").tied_copy("weight", &table_shape)?;
        }
        let rnns = (0..config.n_layers)
            .map(|l| {
                let (input, hidden) = config.layer_sizes(l);
                let rnn = encoder.pp("rnns").pp(l);
                let module = rnn.pp("module");
                let gates = 4 * hidden;
                if module.contains("weight_hh_l0") {
                    module.tied_copy("weight_hh_l0", &[gates, hidden])?;
                }
                Ok(TrainRnn {
                    input: Linear::from_tensors(module.tensor("weight_ih_l0", &[gates, input])?, Some(module.tensor("bias_ih_l0", &[gates])?)),
                    weight_hh: rnn.tensor("weight_hh_l0_raw", &[gates, hidden])?,
                    bias_hh: module.tensor("bias_hh_l0", &[gates])?,
                    hidden,
                })
            })
            .collect::<Result<_>>()?;
        let decoder = w.pp(1).pp("decoder");
        let weight = match decoder.untied("weight", &table_shape, config.tie_weights)? {
            Some(own) => own,
            None => table.clone(),
        };
        let bias = if config.out_bias { Some(decoder.tensor("bias", &[config.vocab_size])?) } else { None };
        Ok(AwdLstmTraining { decoder: Linear::from_tensors(weight, bias), table, rnns, config })
    }

    /// The causal-LM loss of `batch` (position t predicting labels[t + 1]) and its backward,
    /// adding `loss_scale` × the gradients into `grads`. Returns the loss [1].
    pub fn lm_loss_backward(&self, batch: &LmBatch, grads: &Gradients, loss_scale: f32, dropout: &DropoutStream) -> Result<Tensor> {
        let forward = self.forward_saved(batch, Some(dropout))?;
        let targets = batch.shifted_targets();
        let ce = cross_entropy(&forward.logits, &targets, DEFAULT_IGNORE_INDEX)?;
        let loss = ce.loss.clone();
        let d_logits = cross_entropy_backward(forward.logits.clone(), &ce, loss_scale)?;
        self.backward(forward, &d_logits, grads)?;
        Ok(loss)
    }

    /// The logits [B, T, vocab] of `batch` without dropout (held-out evaluation).
    pub fn logits(&self, batch: &LmBatch) -> Result<Tensor> {
        let forward = self.forward_saved(batch, None)?;
        forward.logits.reshape(&[batch.batch, batch.seq, self.config.vocab_size])
    }

    /// The forward pass, with `dropout`'s masks when training.
    fn forward_saved(&self, batch: &LmBatch, dropout: Option<&DropoutStream>) -> Result<Forward> {
        let op = "awd_lstm";
        let c = &self.config;
        let ids_batch = IdsBatch {
            input_ids: batch.input_ids.to_vec(),
            attention_mask: batch.attention_mask.map(<[u32]>::to_vec),
            batch: batch.batch,
            seq: batch.seq,
            ..IdsBatch::default()
        };
        ids_batch.validate()?;
        let lengths = right_padded_lengths(op, &ids_batch)?;
        let (rows, seq) = (batch.batch * batch.seq, batch.seq);
        let site = |p: f32, site: usize| dropout.map_or(Ok(None), |d| d.site(p, site as u32));
        let n = c.n_layers;
        let (embed_drop, input_drop, output_drop) = (site(c.embed_p, 0)?, site(c.input_p, 1)?, site(c.output_p, 2 * n + 1)?);
        let locked = |width: usize| MaskShape::Locked { seq, width };

        let table = dropout_shaped(&self.table, embed_drop, MaskShape::Rows { width: c.emb_sz })?;
        let ids = EmbeddingIds { tokens: batch.input_ids, positions: None, segments: None };
        let mut x = dropout_shaped(&embedding(&table, None, None, &ids, &[rows])?, input_drop, locked(c.emb_sz))?;
        let mut saved = Vec::with_capacity(n);
        for (l, rnn) in self.rnns.iter().enumerate() {
            let weight_drop = site(c.weight_p, 2 + 2 * l)?;
            let weight_hh = dropout_shaped(&rnn.weight_hh, weight_drop, MaskShape::Elements)?;
            let gates = rnn.input.forward(&x)?.reshape(&[batch.batch, seq, 4 * rnn.hidden])?;
            let weights = LstmTensors { state_linearity: &weight_hh, state_bias: &rnn.bias_hh, state_projection: None };
            let trace = lstm_sequence_traced(&gates, &lengths, &weights, &LstmConfig::default())?;
            let h = trace.outputs.reshape(&[rows, rnn.hidden])?;
            let after = if l + 1 < n { site(c.hidden_p, 3 + 2 * l)? } else { None };
            let input = std::mem::replace(&mut x, dropout_shaped(&h, after, locked(rnn.hidden))?);
            saved.push(RnnSaved { input, weight_hh, weight_drop, trace, after });
        }
        let decoder_input = dropout_shaped(&x, output_drop, locked(c.emb_sz))?;
        let logits = self.decoder.forward(&decoder_input)?;
        Ok(Forward { ids: batch.input_ids.to_vec(), lengths, seq, embed_drop, input_drop, output_drop, rnns: saved, decoder_input, logits })
    }

    /// Backpropagates d_logits [B·T, vocab] through the saved forward into `grads`.
    fn backward(&self, f: Forward, d_logits: &Tensor, grads: &Gradients) -> Result<()> {
        let c = &self.config;
        let locked = |width: usize| MaskShape::Locked { seq: f.seq, width };
        let batch = f.lengths.len();
        let mut d = dropout_shaped(&self.decoder.backward(&f.decoder_input, d_logits, grads)?, f.output_drop, locked(c.emb_sz))?;
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

    /// About how many f32 values a training batch of `batch` × `seq` keeps for its backward:
    /// per token and layer the LSTM's records (gates 4H, cells 2H, m, h_pre and h) and the
    /// layer's input; the logits and their gradient.
    pub fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let tokens = product(&[batch as u64, seq as u64]);
        let per_token: u64 = (0..self.config.n_layers).map(|l| 10 * self.config.layer_sizes(l).1 as u64).sum();
        product(&[tokens, per_token]).saturating_add(product(&[2, tokens, self.config.vocab_size as u64]))
    }
}
