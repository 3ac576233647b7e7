//! CoVe's translation model (McCann et al. 2017, section 3), as a run trains it: the MT-LSTM
//! encoder (this family's [`super::CoveModel`]) under an attentional LSTM decoder.
//!
//! - encoder: H = MT-LSTM(GloVe(wˣ)) [B, S, d], d = 2h; the word vectors stay fixed, as the
//!   paper keeps GloVe (config `train_vectors` trains them, for vectors that are not GloVe's);
//! - decoder: `decoder_layers` unidirectional LSTMs d wide with input feeding,
//!   hᵈᵉᶜₜ = LSTM([zₜ₋₁; h̃ₜ₋₁], hᵈᵉᶜₜ₋₁) from zero state and h̃₀ = 0 (the paper names no initial
//!   state; OpenNMT-py, which trained the release, starts from the encoder's final states);
//! - attention: αₜ = softmax(H (W₁ hᵈᵉᶜₜ + b₁)) over the source's own words,
//!   h̃ₜ = tanh(W₂ [Hᵀαₜ; hᵈᵉᶜₜ] + b₂);
//! - output: p(yₜ | …) = softmax(W_out h̃ₜ + b_out), scored by the mean cross entropy of the
//!   target words (`labels`, −100 past each target's end), with teacher forcing
//!   (`decoder_input_ids` = `<s>` y₁ … yₙ).
//!
//! Tensors (`tests/reference/cove_reference.py` is the reference): the encoder's
//! `vectors.weight` and `rnn.*`, then `decoder.embeddings.weight` [V_t, E_t],
//! `decoder.rnn.{weight_ih,weight_hh,bias_ih,bias_hh}_l{k}` (layer 0 reads [z; h̃]: E_t + d),
//! `decoder.attention.linear_in.{weight,bias}` (W₁ [d, d]),
//! `decoder.attention.linear_out.{weight,bias}` (W₂ [d, 2d] over [context; hᵈᵉᶜ]) and
//! `generator.{weight,bias}` [V_t, d].
//!
//! Input feeding makes each decoder step depend on the one before, so the decoder runs a step
//! at a time on the LSTM step kernels ([`LstmTrace::step`]) with the attention between steps,
//! and backpropagates the same way ([`LstmBackward::step`]); the weights' gradients are summed
//! over the steps at the end. Dropout (config `dropout`) drops h̃ₜ where the generator and the
//! next step read it and each decoder layer's output where the layer above reads it, with
//! fresh masks at every step (OpenNMT-py's).

use serde::Deserialize;

use super::CoveConfig;
use crate::error::{arg_err, Result};
use crate::models::config::{config_err, from_json};
use crate::models::rnn::{right_padded_lengths, TrainLstmLayer};
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::models::{IdsBatch, InputKinds, ModelOutput};
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout, Dropout, DropoutStream};
use crate::ops::elementwise::{add, mul, unary, unary_backward, Unary};
use crate::ops::embedding::{embedding, embedding_backward, EmbeddingIds};
use crate::ops::lstm_train::{lstm_sequence_backward, lstm_sequence_traced, LstmBackward, LstmTrace};
use crate::ops::matmul::{matmul, matmul_accumulate, Matmul};
use crate::ops::rows::{columns, concat_columns, copy_rows};
use crate::ops::softmax::softmax;
use crate::tensor::{DType, Tensor};
use crate::tokenize::TextTokenizer;
use crate::weights::Weights;

/// The decoder's part of a `CoveForTranslation` config.json.
#[derive(Clone, Debug, Deserialize)]
pub struct DecoderConfig {
    pub target_vocab_size: usize,
    pub target_embedding_dim: usize,
    #[serde(default = "default_layers")]
    pub decoder_layers: usize,
    /// Train the source word vectors (GloVe's stay fixed, as in the paper).
    #[serde(default)]
    pub train_vectors: bool,
    /// The dropout on h̃ and between decoder layers (OpenNMT-py's default 0.3).
    #[serde(default = "default_dropout")]
    pub dropout: f32,
    /// The target's `<s>` and `</s>` ids.
    pub decoder_start_token_id: u32,
    pub eos_token_id: u32,
}

fn default_layers() -> usize {
    2
}
fn default_dropout() -> f32 {
    0.3
}

impl DecoderConfig {
    pub fn from_json(json: &[u8]) -> Result<DecoderConfig> {
        let c: DecoderConfig = from_json(json)?;
        for (name, size) in [("target_vocab_size", c.target_vocab_size), ("target_embedding_dim", c.target_embedding_dim), ("decoder_layers", c.decoder_layers)]
        {
            if size == 0 || size > crate::models::rnn::MAX_SIZE {
                return Err(config_err(format!("{name} {size} must be in 1..={}", crate::models::rnn::MAX_SIZE)));
            }
        }
        if !(0.0..1.0).contains(&c.dropout) {
            return Err(config_err(format!("dropout {} must be in [0, 1)", c.dropout)));
        }
        for (name, id) in [("decoder_start_token_id", c.decoder_start_token_id), ("eos_token_id", c.eos_token_id)] {
            if id as usize >= c.target_vocab_size {
                return Err(config_err(format!("{name} {id} is outside the target vocabulary of {}", c.target_vocab_size)));
            }
        }
        Ok(c)
    }
}

/// A translation model's target vocabulary, beside the source's tokenizer.json.
pub const TARGET_TOKENIZER: &str = "target_tokenizer.json";

/// The ids a translation model's config names in its target vocabulary: `<s>`, `</s>`.
pub fn target_ids(target: &TextTokenizer) -> Result<(u32, u32)> {
    let id = |word: &str| target.token_to_id(word).ok_or_else(|| arg_err!("model", "the target vocabulary has no {word}: each target is read as <s> … </s>"));
    Ok((id("<s>")?, id("</s>")?))
}

/// The decoder's settings in a translation model's config.json (a classifier made from it
/// drops them).
pub const DECODER_KEYS: [&str; 7] =
    ["target_vocab_size", "target_embedding_dim", "decoder_layers", "decoder_start_token_id", "eos_token_id", "dropout", "train_vectors"];

/// A batch of sentence pairs: the sources as an [`IdsBatch`] (right-padded, attention mask),
/// the targets as `decoder_input_ids` [batch, target_seq] and `labels` (the next word at each
/// position, −100 past the end).
pub struct TranslationBatch<'a> {
    pub source: &'a IdsBatch,
    pub decoder_input_ids: &'a [u32],
    pub labels: &'a [i64],
    pub target_seq: usize,
}

impl<'a> TranslationBatch<'a> {
    /// A training batch's targets, over its sources `source` (the batch's ids).
    pub fn of(batch: &'a Batch, source: &'a IdsBatch) -> Result<TranslationBatch<'a>> {
        let decoder_input_ids =
            batch.decoder_input_ids.as_deref().ok_or_else(|| arg_err!("train", "objective translation needs decoder_input_ids in every batch"))?;
        Ok(TranslationBatch { source, decoder_input_ids, labels: &batch.labels, target_seq: decoder_input_ids.len() / batch.batch.max(1) })
    }
}

/// The encoder's training forward.
struct EncoderForward {
    /// Each source's length.
    lengths: Vec<usize>,
    /// Each layer's input [B·S, in] and its two directions' records.
    layers: Vec<(Tensor, [LstmTrace; 2])>,
    /// H [B, S, d].
    output: Tensor,
}

/// What one decoder step keeps for its backward, each [B, ·].
struct StepSaved {
    /// The top layer's output (after no dropout: the attention reads it whole).
    h: Tensor,
    query: Tensor,
    /// α [B, 1, S].
    alpha: Tensor,
    /// [context; h] and W₂'s output before the tanh.
    joined: Tensor,
    pre: Tensor,
    /// The drop on h̃ₜ, and on each layer's output but the top's where the next reads it.
    drop: Option<Dropout>,
    between: Vec<Option<Dropout>>,
}

/// A decoder run's tensors: per layer the gates' input half [B, T, 4d] (filled a step at a
/// time), its record and its input rows [B·T, in]; the sources' mask; h̃ [B·T, d].
struct DecoderState {
    batch: usize,
    seq: usize,
    gates: Vec<Tensor>,
    traces: Vec<LstmTrace>,
    inputs: Vec<Tensor>,
    mask: Tensor,
    attended: Tensor,
}

/// The decoder's training forward.
struct DecoderForward {
    /// Per layer: the record and the layer's input rows [B·T, in].
    traces: Vec<LstmTrace>,
    inputs: Vec<Tensor>,
    steps: Vec<StepSaved>,
    /// h̃ after its dropout [B·T, d]: the generator's input.
    attended: Tensor,
}

/// CoVe's translation model with trainable tensors.
pub struct CoveTranslation {
    pub config: CoveConfig,
    pub decoder: DecoderConfig,
    vectors: Tensor,
    encoder: Vec<[TrainLstmLayer; 2]>,
    target_embeddings: Tensor,
    decoder_layers: Vec<TrainLstmLayer>,
    linear_in: Linear,
    linear_out: Linear,
    generator: Linear,
}

/// The rows of step `step` in a [B·T, ·] layout: (row of item i at `step`, i).
fn step_rows(batch: usize, seq: usize, step: usize) -> Vec<(usize, usize)> {
    (0..batch).map(|i| (i * seq + step, i)).collect()
}

/// The additive mask [B, S] of the sources' padding (−∞ there).
fn source_mask(gpu: &crate::gpu::Device, lengths: &[usize], seq: usize) -> Result<Tensor> {
    let mask: Vec<f32> = lengths.iter().flat_map(|&n| (0..seq).map(move |s| if s < n { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_slice(gpu, &mask, &[lengths.len(), seq])
}

/// Row `step` of every item of `x` [B·T, W]: [B, W] (one copy dispatch, where
/// [`Tensor::select_rows`] records a copy per row).
fn gather(x: &Tensor, batch: usize, seq: usize, step: usize) -> Result<Tensor> {
    let out = Tensor::empty(x.gpu(), &[batch, x.shape()[1]], DType::F32)?;
    copy_rows(x, &out, 0, &step_rows(batch, seq, step))?;
    Ok(out)
}

/// Writes `x` [B, W] into row `step` of every item of `into` [B·T, W'] at column `column`.
fn scatter(x: &Tensor, into: &Tensor, column: usize, seq: usize, step: usize) -> Result<()> {
    let pairs: Vec<(usize, usize)> = step_rows(x.shape()[0], seq, step).into_iter().map(|(row, i)| (i, row)).collect();
    copy_rows(x, into, column, &pairs)
}

impl CoveTranslation {
    /// The model's parameters, read through a recording view (the vectors as frozen unless
    /// `train_vectors`).
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CoveTranslation> {
        let config = CoveConfig::from_json(config_json)?;
        let architecture = config.head.architecture("CoveForTranslation");
        if architecture != "CoveForTranslation" {
            return Err(arg_err!("cove_translation", "a translation model is CoveForTranslation (an encoder under its decoder), not `{architecture}`"));
        }
        let decoder = DecoderConfig::from_json(config_json)?;
        let (h, d) = (config.hidden_size, 2 * config.hidden_size);
        let vectors_view = if decoder.train_vectors { w.pp("vectors") } else { w.pp("vectors").frozen() };
        let vectors = vectors_view.tensor("weight", &[config.vocab_size, config.embedding_dim])?;
        let rnn = w.pp("rnn");
        let encoder = (0..config.num_layers)
            .map(|k| {
                let input = if k == 0 { config.embedding_dim } else { d };
                Ok([TrainLstmLayer::load(&rnn, &format!("_l{k}"), input, h)?, TrainLstmLayer::load(&rnn, &format!("_l{k}_reverse"), input, h)?])
            })
            .collect::<Result<_>>()?;
        let dec = w.pp("decoder");
        let target_embeddings = dec.pp("embeddings").tensor("weight", &[decoder.target_vocab_size, decoder.target_embedding_dim])?;
        let decoder_layers = (0..decoder.decoder_layers)
            .map(|k| TrainLstmLayer::load(&dec.pp("rnn"), &format!("_l{k}"), if k == 0 { decoder.target_embedding_dim + d } else { d }, d))
            .collect::<Result<_>>()?;
        let attention = dec.pp("attention");
        Ok(CoveTranslation {
            linear_in: Linear::load(&attention.pp("linear_in"), d, d)?,
            linear_out: Linear::load(&attention.pp("linear_out"), 2 * d, d)?,
            generator: Linear::load(&w.pp("generator"), d, decoder.target_vocab_size)?,
            vectors,
            encoder,
            target_embeddings,
            decoder_layers,
            config,
            decoder,
        })
    }

    /// d: the encoder's output width and the decoder's.
    fn width(&self) -> usize {
        2 * self.config.hidden_size
    }

    /// The MT-LSTM over the source.
    fn encode(&self, source: &IdsBatch) -> Result<EncoderForward> {
        let op = "cove_translation";
        source.validate()?;
        if source.choices.is_some() {
            return Err(arg_err!(op, "a source is one sequence per row, not multiple choices"));
        }
        if source.seq > super::MAX_STEPS {
            return Err(arg_err!(op, "sources of {} tokens exceed the {} one forward reads", source.seq, super::MAX_STEPS));
        }
        let lengths = right_padded_lengths(op, source)?;
        let (b, s) = (source.batch, source.seq);
        let ids = EmbeddingIds { tokens: &source.input_ids, positions: None, segments: None };
        let mut x = embedding(&self.vectors, None, None, &ids, &[b * s])?;
        let mut layers = Vec::with_capacity(self.encoder.len());
        for pair in &self.encoder {
            let traces = pair.each_ref().map(|dir| {
                let gates = dir.input.forward(&x)?.reshape(&[b, s, 4 * dir.hidden])?;
                lstm_sequence_traced(&gates, &lengths, &dir.tensors(), &dir.config())
            });
            let [forward, backward] = traces;
            let traces = [forward?, backward?];
            let h = self.config.hidden_size;
            let out = concat_columns(&[&traces[0].outputs.reshape(&[b * s, h])?, &traces[1].outputs.reshape(&[b * s, h])?])?;
            layers.push((std::mem::replace(&mut x, out), traces));
        }
        Ok(EncoderForward { lengths, layers, output: x.reshape(&[b, s, self.width()])? })
    }

    /// Checks a batch's shapes and ids; returns each target's length (up to its last scored
    /// word: later steps score nothing).
    fn target_lengths(&self, batch: &TranslationBatch) -> Result<Vec<usize>> {
        let op = "cove_translation";
        let (b, t) = (batch.source.batch, batch.target_seq);
        if t > super::MAX_STEPS {
            return Err(arg_err!(op, "targets of {t} tokens exceed the {} one forward reads", super::MAX_STEPS));
        }
        if t == 0 || batch.decoder_input_ids.len() != b * t || batch.labels.len() != b * t {
            return Err(arg_err!(op, "{} decoder_input_ids and {} labels for {b} targets of {t} positions", batch.decoder_input_ids.len(), batch.labels.len()));
        }
        let vocab = self.decoder.target_vocab_size;
        if let Some(bad) = batch.decoder_input_ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(arg_err!(op, "decoder input id {bad} is outside the target vocabulary of {vocab}"));
        }
        if let Some(bad) = batch.labels.iter().find(|&&l| l != DEFAULT_IGNORE_INDEX && (l < 0 || l as usize >= vocab)) {
            return Err(arg_err!(op, "label {bad} is outside the target vocabulary of {vocab} (and not −100)"));
        }
        Ok(batch.labels.chunks_exact(t).map(|row| row.iter().rposition(|&l| l != DEFAULT_IGNORE_INDEX).map_or(1, |last| last + 1)).collect())
    }

    /// The decoder's records for a run of `lengths` steps over `encoded`, before its first
    /// step.
    fn decoder_state(&self, batch: usize, seq: usize, lengths: &[usize], encoded: &EncoderForward) -> Result<DecoderState> {
        let (d, e) = (self.width(), self.decoder.target_embedding_dim);
        let gpu = encoded.output.gpu();
        let zeros = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32);
        let gates: Vec<Tensor> = self.decoder_layers.iter().map(|_| zeros(&[batch, seq, 4 * d])).collect::<Result<_>>()?;
        let traces =
            self.decoder_layers.iter().zip(&gates).map(|(layer, g)| LstmTrace::start(g, lengths, &layer.tensors(), &layer.config())).collect::<Result<_>>()?;
        let inputs = (0..self.decoder_layers.len()).map(|k| zeros(&[batch * seq, if k == 0 { e + d } else { d }])).collect::<Result<_>>()?;
        let mask = source_mask(gpu, &encoded.lengths, encoded.output.shape()[1])?;
        Ok(DecoderState { batch, seq, gates, traces, inputs, mask, attended: zeros(&[batch * seq, d])? })
    }

    /// Decoder step `step` reading the words `z` [B, E_t] (and h̃ of the step before), with
    /// `stream`'s dropout when training: fresh masks at every step, as OpenNMT-py draws them
    /// — step t's sites are t·layers + k, k < layers − 1 for layer k's output where layer
    /// k + 1 reads it, k = layers − 1 for h̃ₜ. Writes h̃ₜ into `state.attended` (and the next
    /// step's input) and returns what the backward needs.
    fn decoder_step(&self, state: &DecoderState, step: usize, z: &Tensor, encoded: &Tensor, stream: Option<&DropoutStream>) -> Result<StepSaved> {
        let (b, t, d, e) = (state.batch, state.seq, self.width(), self.decoder.target_embedding_dim);
        let layers = self.decoder_layers.len();
        let site = |k: usize| stream.map_or(Ok(None), |s| s.site(self.decoder.dropout, (step * layers + k) as u32));
        let between: Vec<Option<Dropout>> = (0..layers - 1).map(site).collect::<Result<_>>()?;
        scatter(z, &state.inputs[0], 0, t, step)?;
        for (k, layer) in self.decoder_layers.iter().enumerate() {
            let x = gather(&state.inputs[k], b, t, step)?;
            scatter(&layer.input.forward(&x)?, &state.gates[k].reshape(&[b * t, 4 * d])?, 0, t, step)?;
            state.traces[k].step(step, &state.gates[k], &layer.tensors())?;
            if k + 1 < layers {
                let h = gather(&state.traces[k].outputs.reshape(&[b * t, d])?, b, t, step)?;
                scatter(&dropout(&h, between[k])?, &state.inputs[k + 1], 0, t, step)?;
            }
        }
        let h = gather(&state.traces[layers - 1].outputs.reshape(&[b * t, d])?, b, t, step)?;
        let query = self.linear_in.forward(&h)?;
        let scores = matmul(&query.reshape(&[b, 1, d])?, encoded, Matmul { trans_b: true, ..Default::default() })?;
        let alpha = softmax(&scores, Some(&state.mask))?;
        let context = matmul(&alpha, encoded, Matmul::default())?.reshape(&[b, d])?;
        let joined = concat_columns(&[&context, &h])?;
        let pre = self.linear_out.forward(&joined)?;
        let drop = site(layers - 1)?;
        let fed = dropout(&unary(&pre, Unary::Tanh)?, drop)?;
        scatter(&fed, &state.attended, 0, t, step)?;
        if step + 1 < t {
            scatter(&fed, &state.inputs[0], e, t, step + 1)?;
        }
        Ok(StepSaved { h, query, alpha, joined, pre, drop, between })
    }

    /// The decoder under teacher forcing over the encoder's output (targets of `lengths`),
    /// with `stream`'s dropout when training.
    fn decode(&self, batch: &TranslationBatch, lengths: &[usize], encoded: &EncoderForward, stream: Option<&DropoutStream>) -> Result<DecoderForward> {
        let (b, t) = (batch.source.batch, batch.target_seq);
        let ids = EmbeddingIds { tokens: batch.decoder_input_ids, positions: None, segments: None };
        let embedded = embedding(&self.target_embeddings, None, None, &ids, &[b * t])?;
        let state = self.decoder_state(b, t, lengths, encoded)?;
        // Positions past every target's last scored word score nothing: not run.
        let last = lengths.iter().copied().max().unwrap_or(1);
        let steps = (0..last).map(|step| self.decoder_step(&state, step, &gather(&embedded, b, t, step)?, &encoded.output, stream)).collect::<Result<_>>()?;
        let DecoderState { traces, inputs, attended, .. } = state;
        Ok(DecoderForward { traces, inputs, steps, attended })
    }

    /// Greedy translation of `source` (right-padded sources of source-vocabulary ids): from
    /// `<s>`, each step's most likely word is the next step's input, until every row has
    /// said `</s>` or `max_words` steps have run. Each row's words, without `<s>` and `</s>`.
    pub async fn translate_greedy(&self, source: &IdsBatch, max_words: usize) -> Result<Vec<Vec<u32>>> {
        let op = "cove_translation";
        if max_words == 0 || max_words > super::MAX_STEPS {
            return Err(arg_err!(op, "max_words {max_words} must be in 1..={}", super::MAX_STEPS));
        }
        let encoded = self.encode(source)?;
        let (b, t) = (source.batch, max_words);
        let state = self.decoder_state(b, t, &vec![t; b], &encoded)?;
        let (start, eos) = (self.decoder.decoder_start_token_id, self.decoder.eos_token_id);
        let mut previous = vec![start; b];
        let mut words: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut done = vec![false; b];
        for step in 0..t {
            let ids = EmbeddingIds { tokens: &previous, positions: None, segments: None };
            let z = embedding(&self.target_embeddings, None, None, &ids, &[b])?;
            self.decoder_step(&state, step, &z, &encoded.output, None)?;
            let logits = self.generator.forward(&gather(&state.attended, b, t, step)?)?;
            let values = logits.to_vec::<f32>().await?;
            let vocab = self.decoder.target_vocab_size;
            for (row, scores) in values.chunks_exact(vocab).enumerate() {
                let best = scores.iter().enumerate().fold(0, |best, (i, &x)| if x > scores[best] { i } else { best }) as u32;
                previous[row] = best;
                if !done[row] {
                    done[row] = best == eos;
                    if !done[row] {
                        words[row].push(best);
                    }
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
        }
        Ok(words)
    }

    /// The target logits [B·T, V_t] without dropout (held-out evaluation).
    pub fn logits(&self, batch: &TranslationBatch) -> Result<Tensor> {
        let lengths = self.target_lengths(batch)?;
        let encoded = self.encode(batch.source)?;
        let decoded = self.decode(batch, &lengths, &encoded, None)?;
        self.generator.forward(&decoded.attended)
    }

    /// The mean cross entropy of the target words and its backward, adding `loss_scale` × the
    /// gradients into `grads`. Returns the loss `[1]`.
    pub fn translation_loss_backward(&self, batch: &TranslationBatch, grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let lengths = self.target_lengths(batch)?;
        let encoded = self.encode(batch.source)?;
        let f = self.decode(batch, &lengths, &encoded, Some(stream))?;
        let logits = self.generator.forward(&f.attended)?;
        let ce = cross_entropy(&logits, batch.labels, DEFAULT_IGNORE_INDEX)?;
        let loss = ce.loss.clone();
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        let d_attended = self.generator.backward(&f.attended, &d_logits, grads)?;
        let d_encoded = self.decoder_backward(batch, &encoded.output, f, &d_attended, grads)?;
        self.encoder_backward(batch.source, encoded, d_encoded, grads)?;
        Ok(loss)
    }

    /// Backpropagates the gradient of h̃ (after its dropout) [B·T, d] through the decoder a
    /// step at a time, from the last; returns the gradient of H [B, S, d].
    fn decoder_backward(&self, batch: &TranslationBatch, encoded: &Tensor, f: DecoderForward, d_attended: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let (b, t, d, e) = (batch.source.batch, batch.target_seq, self.width(), self.decoder.target_embedding_dim);
        let gpu = encoded.gpu();
        let zeros = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32);
        let d_encoded = zeros(encoded.shape())?;
        let layers = self.decoder_layers.len();
        let layer_grads = self.decoder_layers.iter().map(|layer| layer.gradients(grads)).collect::<Result<Vec<_>>>()?;
        let backward = f
            .traces
            .iter()
            .zip(&self.decoder_layers)
            .zip(&layer_grads)
            .map(|((trace, layer), g)| LstmBackward::start(trace, &layer.tensors(), g))
            .collect::<Result<Vec<_>>>()?;
        let d_outputs: Vec<Tensor> = (0..layers).map(|_| zeros(&[b, t, d])).collect::<Result<_>>()?;
        let d_inputs = zeros(&[b * t, e + d])?;
        let transposed_a = Matmul { trans_a: true, ..Default::default() };
        // The gradient of h̃ₜ from step t + 1's input.
        let mut d_fed: Option<Tensor> = None;
        for (step, saved) in f.steps.iter().enumerate().rev() {
            let mut d_h_tilde = gather(d_attended, b, t, step)?;
            if let Some(d_next) = d_fed.take() {
                d_h_tilde = add(&d_h_tilde, &d_next)?;
            }
            let d_pre = unary_backward(&saved.pre, &dropout(&d_h_tilde, saved.drop)?, Unary::Tanh)?;
            let d_joined = self.linear_out.backward(&saved.joined, &d_pre, grads)?;
            let d_context = columns(&d_joined, 0, d)?.reshape(&[b, 1, d])?;
            // context = αH: dα = d_context·Hᵀ, dH += αᵀ·d_context.
            let d_alpha = matmul(&d_context, encoded, Matmul { trans_b: true, ..Default::default() })?;
            matmul_accumulate(&saved.alpha, &d_context, transposed_a, &d_encoded)?;
            // The softmax: d_scores = α ⊙ dα − α·(αᵀdα).
            let weighted = matmul(&saved.alpha, &d_alpha, Matmul { trans_b: true, ..Default::default() })?;
            let d_scores = add(&mul(&saved.alpha, &d_alpha)?, &unary(&matmul(&weighted, &saved.alpha, Matmul::default())?, Unary::Scale(-1.0))?)?;
            // scores = query·Hᵀ: d_query = d_scores·H, dH += d_scoresᵀ·query.
            let d_query = matmul(&d_scores, encoded, Matmul::default())?.reshape(&[b, d])?;
            matmul_accumulate(&d_scores, &saved.query.reshape(&[b, 1, d])?, transposed_a, &d_encoded)?;
            let mut d_h = add(&columns(&d_joined, d, d)?, &self.linear_in.backward(&saved.h, &d_query, grads)?)?;
            for k in (0..layers).rev() {
                scatter(&d_h, &d_outputs[k].reshape(&[b * t, d])?, 0, t, step)?;
                backward[k].step(step, &self.decoder_layers[k].tensors(), &d_outputs[k])?;
                let d_gates = gather(&backward[k].d_gates().reshape(&[b * t, 4 * d])?, b, t, step)?;
                let d_x = self.decoder_layers[k].input.backward_input(&d_gates)?;
                if k > 0 {
                    d_h = dropout(&d_x, saved.between[k - 1])?;
                } else {
                    scatter(&d_x, &d_inputs, 0, t, step)?;
                    d_fed = (step > 0).then(|| columns(&d_x, e, d)).transpose()?;
                }
            }
        }
        for ((layer, backward), (g, input)) in self.decoder_layers.iter().zip(backward).zip(layer_grads.iter().zip(&f.inputs)) {
            let d_gates = backward.finish(g)?;
            layer.input.backward_weights(input, &d_gates.reshape(&[b * t, 4 * d])?, grads)?;
        }
        embedding_backward(&columns(&d_inputs, 0, e)?, batch.decoder_input_ids, grads.of(&self.target_embeddings)?)?;
        Ok(d_encoded)
    }

    /// Backpropagates the gradient of H through the MT-LSTM (and into the vectors when they
    /// train).
    fn encoder_backward(&self, source: &IdsBatch, f: EncoderForward, d_encoded: Tensor, grads: &Gradients) -> Result<()> {
        let (b, s, h) = (source.batch, source.seq, self.config.hidden_size);
        let mut d = d_encoded.reshape(&[b * s, 2 * h])?;
        for (pair, (input, traces)) in self.encoder.iter().zip(&f.layers).rev() {
            let mut d_input: Option<Tensor> = None;
            for (i, (dir, trace)) in pair.iter().zip(traces).enumerate() {
                let d_out = columns(&d, i * h, h)?.reshape(&[b, s, h])?;
                let d_gates = lstm_sequence_backward(trace, &dir.tensors(), &d_out, &dir.gradients(grads)?)?;
                let dx = dir.input.backward(input, &d_gates.reshape(&[b * s, 4 * h])?, grads)?;
                d_input = Some(match d_input {
                    Some(sum) => add(&sum, &dx)?,
                    None => dx,
                });
            }
            d = d_input.expect("two directions");
        }
        if self.decoder.train_vectors {
            embedding_backward(&d, &source.input_ids, grads.of(&self.vectors)?)?;
        }
        Ok(())
    }
}

/// The translation model trains with objective translation, under teacher forcing.
impl Trainable for CoveTranslation {
    fn architecture(&self) -> &str {
        "CoveForTranslation"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::Translation]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    /// About how many f32 values a training batch keeps for its backward: per source token
    /// each encoder direction's records (7h + h); per target token each decoder layer's
    /// (8d plus its gates' input 4d and its input), the attention's rows and the logits.
    /// (A target about as long as its source.)
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        let (source_seq, target_seq) = (seq, seq);
        use crate::limits::saturating_product as product;
        let (h, d) = (self.config.hidden_size as u64, self.width() as u64);
        let encoder = product(&[batch as u64, source_seq as u64, self.config.num_layers as u64, 2 * 8 * h]);
        let per_target = product(&[self.decoder.decoder_layers as u64, 14 * d])
            .saturating_add(6 * d + source_seq as u64)
            .saturating_add(2 * self.decoder.target_vocab_size as u64);
        encoder.saturating_add(product(&[batch as u64, target_seq as u64, per_target]))
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        let source = batch.ids(InputKinds::default());
        self.translation_loss_backward(&TranslationBatch::of(batch, &source)?, grads, step.loss_scale, &step.dropout)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        let source = batch.ids(InputKinds::default());
        Ok(ModelOutput::logits(self.logits(&TranslationBatch::of(batch, &source)?)?))
    }
}
