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

#[cfg(not(target_arch = "wasm32"))]
pub mod convert;
pub mod translation;

use serde::Deserialize;

use super::config::{config_err, from_json};
use super::registry::{Family, Unread};
use super::rnn::{right_padded_lengths, LstmLayer};
use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, Result};
use crate::ops::embedding::{lookup, EmbeddingIds};
use crate::ops::quantized::Matrix;
use crate::ops::rows::concat_columns;
use crate::tensor::Tensor;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "cove",
    name: "CoVe",
    architectures: &["CoveModel", "CoveForTranslation"],
    load: |config, weights| Ok(Box::new(CoveModel::load(config, weights)?)),
    vocabulary: Vocabulary::WordLevel,
    // A translation model's decoder: inference reads its encoder, CoVe.
    unread: &[Unread::Prefix("decoder."), Unread::Prefix("generator.")],
    dropout_keys: &["dropout"],
};

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
    #[serde(flatten)]
    pub head: HeadConfig,
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
        for (name, size) in [("vocab_size", c.vocab_size), ("embedding_dim", c.embedding_dim), ("hidden_size", c.hidden_size), ("num_layers", c.num_layers)] {
            if size == 0 || size > super::rnn::MAX_SIZE {
                return Err(config_err(format!("{name} {size} must be in 1..={}", super::rnn::MAX_SIZE)));
            }
        }
        Ok(c)
    }

    /// The width of `last_hidden_state`.
    pub fn output_size(&self) -> usize {
        2 * self.hidden_size + if self.residual_embeddings { self.embedding_dim } else { 0 }
    }
}

/// The MT-LSTM encoder.
pub struct CoveModel {
    pub config: CoveConfig,
    /// `vectors.weight` [vocab, E].
    vectors: Matrix,
    /// Per layer: forward, backward.
    layers: Vec<[LstmLayer; 2]>,
    capabilities: Capabilities,
}

impl CoveModel {
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CoveModel> {
        let config = CoveConfig::from_json(config_json)?;
        let architecture = config.head.architecture("CoveModel");
        if !FAMILY.architectures.contains(&architecture) {
            return Err(FAMILY.unsupported(architecture));
        }
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
        Ok(CoveModel { config, vectors, layers, capabilities: Capabilities::new(vec![(Capability::Embeddings, "last_hidden_state")]) })
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
        let last = if self.config.residual_embeddings { concat_columns(&[&vectors, top])? } else { top.clone() };
        let shaped = |x: &Tensor| x.reshape(&[b, t, x.shape()[1]]);
        let mut out = ModelOutput::default();
        out.push("last_hidden_state", shaped(&last)?);
        if options.hidden_states {
            for (i, layer) in layers.iter().enumerate() {
                out.push(format!("hidden_states.{i}"), shaped(layer)?);
            }
        }
        Ok(out)
    }
}
