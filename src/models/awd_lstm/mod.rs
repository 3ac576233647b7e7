//! AWD-LSTM (Merity et al. 2017, "Regularizing and Optimizing LSTM Language Models"), the
//! language model ULMFiT (Howard & Ruder 2018) pretrains and fine-tunes, as fastai's
//! `AWD_LSTM` runs it, with fastai's parameter names:
//!
//! - `0.encoder.weight` [vocab, emb_sz]: the word embeddings (fastai's state dict holds them
//!   a second time as `0.encoder_dp.emb.weight`, its embedding dropout's view);
//! - `0.rnns.{l}`: n_layers single-direction LSTMs without projections (PyTorch's `nn.LSTM`),
//!   emb_sz → n_hid → … → n_hid → emb_sz, so that the last layer's output has the
//!   embeddings' width and the decoder can reuse their table. The recurrent matrix is
//!   `weight_hh_l0_raw`: in training fastai's `WeightDropout` drops its entries (DropConnect)
//!   into the wrapped module's `module.weight_hh_l0` before each forward; at inference the two
//!   are equal and the copy is only checked. The input matrix and both biases are the wrapped
//!   module's: `module.{weight_ih_l0, bias_ih_l0, bias_hh_l0}`;
//! - `1.decoder.{weight, bias}`: the LM head, logits = h·Eᵀ + b, its weight tied to the
//!   embeddings (`tie_weights`).
//!
//! The classifier (`AwdLstmForSequenceClassification`, ULMFiT's, fastai's
//! `get_text_classifier`) has the same encoder under `0.module.` and a pooling head under
//! `1.layers.` ([`classifier`]).
//!
//! Every LSTM starts from zero state for each sequence. (fastai keeps the last batch's state
//! between calls while training a language model on a stream of text; `reset()` zeroes it, as
//! at the start of every evaluation and classification.) The dropouts — embedding rows,
//! locked (one mask per sequence) on the input, between layers and on the output, and the
//! weight drop — are training-time only.
//!
//! Batches are right-padded: sequence b's tokens are its first `lengths[b]` positions, and
//! the layers are 0 past them (the logits there are the decoder's bias).

pub mod classifier;
#[cfg(feature = "training")]
pub mod convert;
#[cfg(feature = "training")]
pub mod stages;
#[cfg(feature = "training")]
pub mod train;

use serde::Deserialize;

use self::classifier::{pooling_windows, PoolingClassifier};
use super::config::{config_err, from_json};
use super::family::{Family, Unread};
use super::rnn::{right_padded_lengths, LstmLayer};
#[cfg(feature = "training")]
use super::training::{fresh::Fresh, Objective, Trains};
use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, Result};
use crate::nn::Linear;
use crate::ops::embedding::{lookup, EmbeddingIds};
use crate::ops::pool::concat_pool;
use crate::ops::quantized::Matrix;
use crate::tensor::Tensor;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "awd_lstm",
    name: "AWD-LSTM",
    architectures: &["AwdLstmModel", "AwdLstmForLanguageModeling", "AwdLstmForSequenceClassification"],
    load: |config, weights| Ok(Box::new(AwdLstmModel::load(config, weights)?)),
    vocabulary: Vocabulary::WordLevel,
    // The other heads, when the bare encoder is loaded from a checkpoint with a head.
    unread: &[Unread::Prefix("1.decoder."), Unread::Prefix("1.layers.")],
    dropout_keys: &["embed_p", "input_p", "weight_p", "hidden_p", "output_p"],
    #[cfg(feature = "training")]
    training: Some(&Trains {
        objectives: &[Objective::Clm, Objective::Classify],
        load: train::AwdLstmTraining::load,
        with_head: Some(stages::with_classifier_head),
        fit_to_data: Some(stages::fit_to_data),
        fresh: Some(Fresh::Learnt(stages::fresh_language_model_from_data)),
    }),
};

/// fastai's `awd_lstm_clas_config` dropouts, which a classifier trains with (its language
/// model's are lower): `output_p` is the head's first block's.
pub const CLASSIFIER_DROPOUTS: [(&str, f32); 5] = [("output_p", 0.4), ("hidden_p", 0.3), ("input_p", 0.4), ("embed_p", 0.05), ("weight_p", 0.5)];

/// fastai's `awd_lstm_lm_config` dropouts (the config's defaults), which a language model's
/// config.json states so that `--drop-mult` can scale them.
pub const LANGUAGE_MODEL_DROPOUTS: [(&str, f32); 5] = [("output_p", 0.1), ("hidden_p", 0.15), ("input_p", 0.25), ("embed_p", 0.02), ("weight_p", 0.2)];

/// `config` with these dropout probabilities written into it.
pub fn write_dropouts(config: &mut serde_json::Value, dropouts: &[(&str, f32)]) {
    for &(key, p) in dropouts {
        config[key] = super::family::probability_json(p);
    }
}

/// The longest sequence one forward reads. The recurrence itself has no limit; this bounds
/// what a batch's traces and outputs take (B·T·4·n_hid floats a layer).
pub const MAX_STEPS: usize = 1 << 16;

/// config.json of an AWD-LSTM (`model_type: "awd_lstm"`): fastai's `awd_lstm_lm_config` keys
/// and defaults, with `vocab_size` and the head's fields.
#[derive(Clone, Debug, Deserialize)]
pub struct AwdLstmConfig {
    pub vocab_size: usize,
    #[serde(default = "default_emb_sz")]
    pub emb_sz: usize,
    #[serde(default = "default_n_hid")]
    pub n_hid: usize,
    #[serde(default = "default_n_layers")]
    pub n_layers: usize,
    /// fastai's `xxpad`, id 1 in its vocabularies.
    #[serde(default = "default_pad_token")]
    pub pad_token: u32,
    /// fastai's bidirectional variant (two directions concatenated per layer): not supported.
    #[serde(default)]
    pub bidir: bool,
    /// Dropout on whole embedding rows (words), training only.
    #[serde(default = "default_embed_p")]
    pub embed_p: f32,
    /// Locked dropout on the embeddings' output.
    #[serde(default = "default_input_p")]
    pub input_p: f32,
    /// DropConnect on each recurrent matrix.
    #[serde(default = "default_weight_p")]
    pub weight_p: f32,
    /// Locked dropout between the LSTM layers.
    #[serde(default = "default_hidden_p")]
    pub hidden_p: f32,
    /// Locked dropout before the decoder.
    #[serde(default = "default_output_p")]
    pub output_p: f32,
    /// The decoder reuses the embedding table (and has no weight of its own).
    #[serde(default = "default_true")]
    pub tie_weights: bool,
    /// The decoder has a bias.
    #[serde(default = "default_true")]
    pub out_bias: bool,
    /// The classifier's hidden layer sizes (fastai's `lin_ftrs`).
    #[serde(default = "default_lin_ftrs")]
    pub lin_ftrs: Vec<usize>,
    /// The classifier's chunk length (fastai's `seq_len`).
    #[serde(default = "default_bptt")]
    pub bptt: usize,
    /// The classifier pools over the chunks that start within a text's last `max_len` tokens.
    #[serde(default = "default_max_len")]
    pub max_len: usize,
    /// The dropout of the classifier's blocks after the first (whose is `output_p`); fastai's
    /// default 0.1 each.
    #[serde(default)]
    pub ps: Option<Vec<f32>>,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_emb_sz() -> usize {
    400
}
fn default_n_hid() -> usize {
    1152
}
fn default_n_layers() -> usize {
    3
}
fn default_pad_token() -> u32 {
    1
}
fn default_embed_p() -> f32 {
    0.02
}
fn default_input_p() -> f32 {
    0.25
}
fn default_weight_p() -> f32 {
    0.2
}
fn default_hidden_p() -> f32 {
    0.15
}
fn default_output_p() -> f32 {
    0.1
}
fn default_true() -> bool {
    true
}
fn default_lin_ftrs() -> Vec<usize> {
    vec![50]
}
fn default_bptt() -> usize {
    72
}
fn default_max_len() -> usize {
    1440
}

impl AwdLstmConfig {
    pub fn from_json(json: &[u8]) -> Result<AwdLstmConfig> {
        let c: AwdLstmConfig = from_json(json)?;
        if c.bidir {
            return Err(config_err("bidir: the bidirectional AWD-LSTM is not supported (fastai's ULMFiT models are single-direction)".into()));
        }
        let sizes =
            [("vocab_size", c.vocab_size), ("emb_sz", c.emb_sz), ("n_hid", c.n_hid), ("n_layers", c.n_layers), ("bptt", c.bptt), ("max_len", c.max_len)];
        for (name, size) in sizes.into_iter().chain(c.lin_ftrs.iter().map(|&n| ("lin_ftrs", n))) {
            if size == 0 || size > super::rnn::MAX_SIZE {
                return Err(config_err(format!("{name} {size} must be in 1..={}", super::rnn::MAX_SIZE)));
            }
        }
        if c.max_len < c.bptt {
            return Err(config_err(format!("max_len {} is shorter than bptt {}: the classifier would pool over no chunk of a long text", c.max_len, c.bptt)));
        }
        let named = [("embed_p", c.embed_p), ("input_p", c.input_p), ("weight_p", c.weight_p), ("hidden_p", c.hidden_p), ("output_p", c.output_p)];
        for (name, p) in named.into_iter().chain(c.ps.iter().flatten().map(|&p| ("ps", p))) {
            if !(0.0..1.0).contains(&p) {
                return Err(config_err(format!("{name} must be in [0, 1), got {p}")));
            }
        }
        if let Some(ps) = c.ps.as_ref().filter(|ps| ps.len() != c.lin_ftrs.len()) {
            return Err(config_err(format!("ps has {} dropouts for the {} layers of lin_ftrs", ps.len(), c.lin_ftrs.len())));
        }
        Ok(c)
    }

    /// The classifier's widths: the concat pool's 3·emb_sz, `lin_ftrs`, the classes.
    pub fn classifier_dims(&self) -> Vec<usize> {
        std::iter::once(3 * self.emb_sz).chain(self.lin_ftrs.iter().copied()).chain([self.head.num_labels()]).collect()
    }

    /// The dropout of each classifier block: `output_p`, then `ps` (fastai's
    /// `[output_p] + ps`).
    pub fn classifier_dropouts(&self) -> Vec<f32> {
        let rest = self.ps.clone().unwrap_or_else(|| vec![0.1; self.lin_ftrs.len()]);
        std::iter::once(self.output_p).chain(rest).collect()
    }

    /// (input, hidden) sizes of layer `l`: emb_sz → n_hid → … → n_hid → emb_sz.
    pub fn layer_sizes(&self, l: usize) -> (usize, usize) {
        let input = if l == 0 { self.emb_sz } else { self.n_hid };
        let hidden = if l + 1 == self.n_layers { self.emb_sz } else { self.n_hid };
        (input, hidden)
    }
}

/// Checks fastai's copies of tensors the model reads elsewhere, under the encoder `w`: its
/// embedding dropout's view of the table (`encoder_dp.emb.weight`) and, in fastai v1 state
/// dicts, each layer's `module.weight_hh_l0` (what the last training forward dropped into the
/// wrapped module; the model reads `weight_hh_l0_raw`).
pub(super) fn check_copies(w: &Weights, config: &AwdLstmConfig) -> Result<()> {
    let embedding_dropout = w.pp("encoder_dp").pp("emb");
    if embedding_dropout.contains("weight") {
        embedding_dropout.tied_copy("weight", &[config.vocab_size, config.emb_sz])?;
    }
    for l in 0..config.n_layers {
        let (module, hidden) = (w.pp("rnns").pp(l).pp("module"), config.layer_sizes(l).1);
        if module.contains("weight_hh_l0") {
            module.tied_copy("weight_hh_l0", &[4 * hidden, hidden])?;
        }
    }
    Ok(())
}

/// fastai's `AWD_LSTM` (`0.` of a language model): embeddings and the LSTM stack.
pub struct AwdLstm {
    pub config: AwdLstmConfig,
    /// `encoder.weight` [vocab, emb_sz].
    encoder: Matrix,
    rnns: Vec<LstmLayer>,
}

impl AwdLstm {
    /// Loads the encoder under `w` (`0.` of a language model).
    pub fn load(w: &Weights, config: AwdLstmConfig) -> Result<AwdLstm> {
        let table = [config.vocab_size, config.emb_sz];
        let encoder = w.pp("encoder").matrix("weight", table)?;
        check_copies(w, &config)?;
        // Each layer is fastai's `WeightDropout` around an `nn.LSTM`: the recurrent matrix is
        // `weight_hh_l0_raw`, the rest the wrapped module's.
        let rnns = (0..config.n_layers)
            .map(|l| {
                let (input, hidden) = config.layer_sizes(l);
                let rnn = w.pp("rnns").pp(l);
                LstmLayer::load(&rnn.pp("module"), "_l0", (&rnn, "weight_hh_l0_raw"), input, hidden)
            })
            .collect::<Result<_>>()?;
        Ok(AwdLstm { config, encoder, rnns })
    }

    /// The embeddings [B·T, emb_sz] and every layer's output [B·T, size] (0 past each
    /// sequence's length) of `input_ids` [B, T].
    pub fn layers(&self, input_ids: &[u32], lengths: &[usize], seq: usize) -> Result<Vec<Tensor>> {
        let batch = lengths.len();
        let ids = EmbeddingIds { tokens: input_ids, positions: None, segments: None };
        let mut outputs = vec![lookup(&self.encoder, None, None, &ids, &[batch * seq])?];
        for rnn in &self.rnns {
            let h = rnn.forward(outputs.last().expect("the embeddings are first"), lengths, seq)?;
            outputs.push(h);
        }
        Ok(outputs)
    }
}

/// What is on top of the encoder.
enum Head {
    /// `AwdLstmModel`: the layers only.
    None,
    /// `AwdLstmForLanguageModeling`: fastai's `LinearDecoder` (`1.decoder`).
    LanguageModel(Linear),
    /// `AwdLstmForSequenceClassification`: ULMFiT's pooling classifier (`1.layers`).
    Classifier(PoolingClassifier),
}

/// An AWD-LSTM with the head its config names.
pub struct AwdLstmModel {
    encoder: AwdLstm,
    head: Head,
    architecture: String,
    capabilities: Capabilities,
}

impl AwdLstmModel {
    pub fn load(config_json: &[u8], w: &Weights) -> Result<AwdLstmModel> {
        let config = AwdLstmConfig::from_json(config_json)?;
        let architecture = config.head.architecture("AwdLstmModel").to_string();
        // A classifier's encoder is wrapped in fastai's `SentenceEncoder` (`0.module.`).
        let encoder = AwdLstm::load(&if w.contains("0.module.encoder.weight") { w.pp(0).pp("module") } else { w.pp(0) }, config)?;
        let c = &encoder.config;
        let head = match architecture.as_str() {
            "AwdLstmModel" => Head::None,
            "AwdLstmForLanguageModeling" => {
                let decoder = w.pp(1).pp("decoder");
                let table = [c.vocab_size, c.emb_sz];
                let weight = match decoder.untied_matrix("weight", table, c.tie_weights)? {
                    Some(own) => own,
                    None => encoder.encoder.clone(),
                };
                let bias = if c.out_bias { Some(decoder.tensor("bias", &[c.vocab_size])?) } else { None };
                Head::LanguageModel(Linear::from_matrix(weight, bias))
            }
            "AwdLstmForSequenceClassification" => Head::Classifier(PoolingClassifier::load(&w.pp(1).pp("layers"), &c.classifier_dims())?),
            other => return Err(FAMILY.unsupported(other)),
        };
        let capabilities = match head {
            Head::None => vec![(Capability::Embeddings, "last_hidden_state")],
            Head::LanguageModel(_) => vec![],
            Head::Classifier(_) => vec![(Capability::SequenceClassification, "logits")],
        };
        Ok(AwdLstmModel { encoder, head, architecture, capabilities: Capabilities::new(capabilities) })
    }
}

impl Model for AwdLstmModel {
    fn architecture(&self) -> &str {
        &self.architecture
    }
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    fn sizes(&self) -> ModelSizes {
        let c = &self.encoder.config;
        ModelSizes { layers: c.n_layers, heads: 0, hidden_size: c.emb_sz, vocab_size: c.vocab_size }
    }
    fn max_positions(&self) -> usize {
        MAX_STEPS
    }
    fn head_config(&self) -> &HeadConfig {
        &self.encoder.config.head
    }
    fn inputs(&self) -> InputKinds {
        InputKinds::default()
    }
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        let op = "awd_lstm";
        batch.validate()?;
        if batch.choices.is_some() {
            return Err(arg_err!(op, "an AWD-LSTM reads one sequence per row, not multiple choices"));
        }
        if batch.seq > MAX_STEPS {
            return Err(arg_err!(op, "{} tokens exceed the {MAX_STEPS} one forward reads", batch.seq));
        }
        let lengths = right_padded_lengths(op, batch)?;
        let (b, t) = (batch.batch, batch.seq);
        let layers = self.encoder.layers(&batch.input_ids, &lengths, t)?;
        let shaped = |x: &Tensor| x.reshape(&[b, t, x.shape()[1]]);
        let mut out = ModelOutput::default();
        let last = layers.last().expect("n_layers ≥ 1");
        match &self.head {
            Head::None => {}
            Head::LanguageModel(decoder) => out.push("logits", shaped(&decoder.forward(last)?)?),
            Head::Classifier(head) => {
                let c = &self.encoder.config;
                let pooled = concat_pool(&shaped(last)?, &pooling_windows(&lengths, c.bptt, c.max_len))?;
                out.push("logits", head.forward(&pooled.pooled)?);
            }
        }
        if options.last_hidden_state || matches!(self.head, Head::None) {
            out.push("last_hidden_state", shaped(last)?);
        }
        if options.hidden_states {
            for (i, layer) in layers.iter().enumerate() {
                out.push(format!("hidden_states.{i}"), shaped(layer)?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_language_models_stated_dropouts_are_the_configs_defaults() {
        let config = super::AwdLstmConfig::from_json(br#"{"vocab_size": 10}"#).unwrap();
        let defaults = [
            ("output_p", config.output_p),
            ("hidden_p", config.hidden_p),
            ("input_p", config.input_p),
            ("embed_p", config.embed_p),
            ("weight_p", config.weight_p),
        ];
        assert_eq!(super::LANGUAGE_MODEL_DROPOUTS, defaults);
    }
}
