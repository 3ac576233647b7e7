//! CoVe (McCann et al. 2017, "Learned in Translation: Contextualized Word Vectors"): the
//! encoder of an attentional translation model, reused as contextual word vectors. As
//! salesforce/cove's `MTLSTM` runs it: GloVe vectors (`vectors.weight` [vocab, E]), then a
//! two-layer bidirectional `nn.LSTM` (`rnn.`, PyTorch's names: `weight_ih_l{k}`,
//! `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}` and their `_reverse`), the second layer
//! reading the first's [forward; backward]. CoVe(w) is the top layer [B, T, 2H]; with
//! `residual_embeddings` the output is [GloVe(w); CoVe(w)], as the paper feeds its tasks.
//!
//! Batches are right-padded; each direction runs over a sequence's own tokens (the backward
//! one from its last token), as packed sequences do, and the layers are 0 past its length.
//!
//! A translation model's folder (`CoveForTranslation`, [`translation`]) loads as its
//! encoder: CoVe is what translation training leaves behind.
//!
//! `CoveForSequenceClassification` classifies texts with CoVe's features, the simpler of the
//! paper's two ways (it reports a biattentive classification network): the output of each
//! text's own words pooled as ULMFiT pools ([h_last; max; mean], `ops::pool`), then
//! `pre_classifier` (a Linear to `classifier_hidden_size`), ReLU, `classifier` (a Linear to
//! the labels). Its encoder stays fixed in training, as the paper keeps CoVe's ([`classify`]).

pub mod classify;
#[cfg(not(target_arch = "wasm32"))]
pub mod convert;
#[cfg(feature = "training")]
pub mod fresh;
pub mod translation;

use serde::Deserialize;

use super::config::{config_err, from_json};
use super::family::{Family, Unread};
use super::rnn::{right_padded_lengths, LstmLayer};
#[cfg(feature = "training")]
use super::training::fresh::{Fresh, RunData, TrainingFolder};
#[cfg(feature = "training")]
use super::training::{FamilyTraining, Objective, Trainable};
use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, Result};
use crate::nn::{Activation, Linear};
use crate::ops::embedding::{lookup, EmbeddingIds};
use crate::ops::pool::{concat_pool, ConcatPool};
use crate::ops::quantized::Matrix;
use crate::ops::rows::concat_columns;
use crate::tensor::Tensor;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "cove",
    name: "CoVe",
    architectures: &["CoveModel", "CoveForTranslation", "CoveForSequenceClassification"],
    load: |config, weights| Ok(Box::new(CoveModel::load(config, weights)?)),
    vocabulary: Vocabulary::WordLevel,
    // A translation model's decoder: inference reads its encoder, CoVe.
    unread: &[Unread::Prefix("decoder."), Unread::Prefix("generator.")],
    dropout_keys: &["dropout", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&CoveTraining),
};

/// CoVe trains as the encoder of its translation model (objective translation) and gives its
/// fixed features to a classifier (classify).
#[cfg(feature = "training")]
struct CoveTraining;

#[cfg(feature = "training")]
impl FamilyTraining for CoveTraining {
    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::Translation, Objective::Classify]
    }

    fn load(&self, config_json: &[u8], weights: &Weights, objective: Objective) -> Result<Box<dyn Trainable>> {
        Ok(match objective {
            Objective::Classify => Box::new(classify::CoveClassifierTraining::load(config_json, weights)?),
            _ => Box::new(translation::CoveTranslation::load(config_json, weights)?),
        })
    }

    /// A classifier's pooled head; a translation model's decoder is added by its run, over the
    /// target words of its data.
    fn with_head(&self, objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        match objective {
            Objective::Classify => classify::with_classifier_head(config_json, safetensors, labels, seed),
            _ => Ok((config_json.to_vec(), safetensors)),
        }
    }

    fn fit_to_data(&self, folder: TrainingFolder, run: &RunData) -> Result<TrainingFolder> {
        fresh::fit_to_data(folder, run)
    }

    fn fresh(&self) -> Option<&Fresh> {
        Some(&Fresh::Learnt(fresh::fresh_translation_model))
    }
}

/// The longest sequence one forward reads (as the AWD-LSTM's: the recurrence has no limit).
pub const MAX_STEPS: usize = super::awd_lstm::MAX_STEPS;

/// config.json of a CoVe encoder (`model_type: "cove"`); the release's sizes by default.
#[derive(Clone, Debug, Deserialize)]
pub struct CoveConfig {
    pub vocab_size: usize,
    /// The word vectors' width (GloVe 840B: 300).
    #[serde(default = "default_size")]
    pub embedding_dim: usize,
    /// Each direction's hidden size.
    #[serde(default = "default_size")]
    pub hidden_size: usize,
    #[serde(default = "default_layers")]
    pub num_layers: usize,
    /// The output is [word vectors; top layer] (MTLSTM's `residual_embeddings`).
    #[serde(default)]
    pub residual_embeddings: bool,
    /// `CoveForSequenceClassification`: the width of the layer between the pooled features
    /// and the labels, and the dropout before each of its Linears in training.
    #[serde(default = "default_size")]
    pub classifier_hidden_size: usize,
    #[serde(default = "default_classifier_dropout")]
    pub classifier_dropout: f32,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_classifier_dropout() -> f32 {
    0.2
}

fn default_size() -> usize {
    300
}
fn default_layers() -> usize {
    2
}

impl CoveConfig {
    pub fn from_json(json: &[u8]) -> Result<CoveConfig> {
        let c: CoveConfig = from_json(json)?;
        let sizes = [
            ("vocab_size", c.vocab_size),
            ("embedding_dim", c.embedding_dim),
            ("hidden_size", c.hidden_size),
            ("num_layers", c.num_layers),
            ("classifier_hidden_size", c.classifier_hidden_size),
        ];
        for (name, size) in sizes {
            if size == 0 || size > super::rnn::MAX_SIZE {
                return Err(config_err(format!("{name} {size} must be in 1..={}", super::rnn::MAX_SIZE)));
            }
        }
        if !(0.0..1.0).contains(&c.classifier_dropout) {
            return Err(config_err(format!("classifier_dropout {} must be in [0, 1)", c.classifier_dropout)));
        }
        Ok(c)
    }

    /// The width of `last_hidden_state`.
    pub fn output_size(&self) -> usize {
        2 * self.hidden_size + if self.residual_embeddings { self.embedding_dim } else { 0 }
    }
}

/// The MT-LSTM: word vectors into bidirectional LSTM layers.
pub struct MtLstm {
    /// `vectors.weight` [vocab, E].
    vectors: Matrix,
    /// Per layer: forward, backward.
    layers: Vec<[LstmLayer; 2]>,
    residual_embeddings: bool,
}

/// The MT-LSTM's output of a batch, rows [B·T, ·].
pub struct MtLstmOutput {
    /// The vectors, then each layer's [forward; backward].
    pub layers: Vec<Tensor>,
    /// CoVe, or [GloVe; CoVe] with `residual_embeddings`.
    pub last: Tensor,
    /// Each sequence's length.
    pub lengths: Vec<usize>,
}

impl MtLstm {
    /// `vectors.weight` and `rnn.*` under `w`.
    pub fn load(config: &CoveConfig, w: &Weights) -> Result<MtLstm> {
        let vectors = w.pp("vectors").matrix("weight", [config.vocab_size, config.embedding_dim])?;
        let rnn = w.pp("rnn");
        let h = config.hidden_size;
        let layers = (0..config.num_layers)
            .map(|k| {
                let input = if k == 0 { config.embedding_dim } else { 2 * h };
                let direction = |suffix: String| LstmLayer::load(&rnn, &suffix, (&rnn, &format!("weight_hh{suffix}")), input, h);
                Ok([direction(format!("_l{k}"))?, direction(format!("_l{k}_reverse"))?])
            })
            .collect::<Result<_>>()?;
        Ok(MtLstm { vectors, layers, residual_embeddings: config.residual_embeddings })
    }

    /// The encoder over a right-padded batch of one sequence per row.
    pub fn forward(&self, batch: &IdsBatch) -> Result<MtLstmOutput> {
        let op = "cove";
        batch.validate()?;
        if batch.choices.is_some() {
            return Err(arg_err!(op, "CoVe reads one sequence per row, not multiple choices"));
        }
        if batch.seq > MAX_STEPS {
            return Err(arg_err!(op, "{} tokens exceed the {MAX_STEPS} one forward reads", batch.seq));
        }
        let lengths = right_padded_lengths(op, batch)?;
        let (b, t) = (batch.batch, batch.seq);
        let ids = EmbeddingIds { tokens: &batch.input_ids, positions: None, segments: None };
        let vectors = lookup(&self.vectors, None, None, &ids, &[b * t])?;
        let mut layers = vec![vectors.clone()];
        for [forward, backward] in &self.layers {
            let x = layers.last().expect("the vectors are first");
            let both = concat_columns(&[&forward.forward(x, &lengths, t)?, &backward.forward(x, &lengths, t)?])?;
            layers.push(both);
        }
        let top = layers.last().expect("num_layers ≥ 1");
        let last = if self.residual_embeddings { concat_columns(&[&vectors, top])? } else { top.clone() };
        Ok(MtLstmOutput { layers, last, lengths })
    }
}

/// CoVe's features of `out` pooled over each sequence's words: [B, 3·width] (h_last, max,
/// mean).
pub fn pooled_features(out: &MtLstmOutput, seq: usize) -> Result<ConcatPool> {
    let width = out.last.shape()[1];
    let windows: Vec<(usize, usize)> = out.lengths.iter().map(|&n| (0, n)).collect();
    concat_pool(&out.last.reshape(&[out.lengths.len(), seq, width])?, &windows)
}

/// The MT-LSTM encoder, with `CoveForSequenceClassification`'s head when the config names it.
pub struct CoveModel {
    pub config: CoveConfig,
    encoder: MtLstm,
    /// `pre_classifier` and `classifier`.
    classifier: Option<(Linear, Linear)>,
    capabilities: Capabilities,
}

impl CoveModel {
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CoveModel> {
        let config = CoveConfig::from_json(config_json)?;
        let architecture = config.head.architecture("CoveModel");
        if !FAMILY.architectures.contains(&architecture) {
            return Err(FAMILY.unsupported(architecture));
        }
        let encoder = MtLstm::load(&config, w)?;
        let mut capabilities = vec![(Capability::Embeddings, "last_hidden_state")];
        let classifier = match architecture {
            "CoveForSequenceClassification" => {
                capabilities.push((Capability::SequenceClassification, "logits"));
                let (features, hidden) = (3 * config.output_size(), config.classifier_hidden_size);
                Some((Linear::load(&w.pp("pre_classifier"), features, hidden)?, Linear::load(&w.pp("classifier"), hidden, config.head.num_labels())?))
            }
            _ => None,
        };
        Ok(CoveModel { config, encoder, classifier, capabilities: Capabilities::new(capabilities) })
    }
}

impl Model for CoveModel {
    fn architecture(&self) -> &str {
        "CoveModel"
    }
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    fn sizes(&self) -> ModelSizes {
        let c = &self.config;
        ModelSizes { layers: c.num_layers, heads: 0, hidden_size: c.output_size(), vocab_size: c.vocab_size }
    }
    fn max_positions(&self) -> usize {
        MAX_STEPS
    }
    fn head_config(&self) -> &HeadConfig {
        &self.config.head
    }
    fn inputs(&self) -> InputKinds {
        InputKinds::default()
    }
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        let (b, t) = (batch.batch, batch.seq);
        let encoded = self.encoder.forward(batch)?;
        let shaped = |x: &Tensor| x.reshape(&[b, t, x.shape()[1]]);
        let mut out = ModelOutput::default();
        if let Some((pre_classifier, classifier)) = &self.classifier {
            let pooled = pooled_features(&encoded, t)?.pooled;
            out.push("logits", classifier.forward(&Activation::Relu.forward(&pre_classifier.forward(&pooled)?)?)?);
        }
        out.push("last_hidden_state", shaped(&encoded.last)?);
        if options.hidden_states {
            for (i, layer) in encoded.layers.iter().enumerate() {
                out.push(format!("hidden_states.{i}"), shaped(layer)?);
            }
        }
        Ok(out)
    }
}
