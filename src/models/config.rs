//! What every family's `config.json` shares: the fields that choose and size the task head,
//! the decoders' dropout, and the helpers the families' config readers use (each family's
//! own config struct is in its file, with the defaults transformers uses).

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::{Result, SesameError};
use crate::nn::Activation;

pub(crate) fn config_err(message: String) -> SesameError {
    SesameError::Checkpoint(format!("config.json: {message}"))
}

/// Parses config.json into a family's config struct (serde's message names the field).
pub(crate) fn from_json<T: DeserializeOwned>(json: &[u8]) -> Result<T> {
    crate::error::from_json_named(json).map_err(config_err)
}

/// An error unless `width` (named `width_name`) is a positive multiple of `heads`.
pub(crate) fn check_heads(width_name: &str, width: usize, heads_name: &str, heads: usize) -> Result<()> {
    if width == 0 || heads == 0 || !width.is_multiple_of(heads) {
        return Err(config_err(format!("{width_name} {width} is not a positive multiple of {heads_name} {heads}")));
    }
    Ok(())
}

/// The activation `name` (`hidden_act`, `activation_function`, …) names.
pub(crate) fn activation(field: &str, name: &str) -> Result<Activation> {
    Activation::from_config(name).ok_or_else(|| config_err(format!("unsupported {field} `{name}`")))
}

/// The fields every family shares that choose and size the task head.
#[derive(Clone, Debug, Deserialize)]
pub struct HeadConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    /// Classification heads: labels by index (their count is the number of labels).
    #[serde(default)]
    pub id2label: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    /// `multi_label_classification` scores labels with a sigmoid instead of a softmax.
    #[serde(default)]
    pub problem_type: Option<String>,
    /// The output layer (an LM head's decoder) is the word embedding table (transformers'
    /// default), not a tensor of its own.
    #[serde(default = "tied")]
    pub tie_word_embeddings: bool,
}

fn tied() -> bool {
    true
}

impl HeadConfig {
    /// The class named first in `architectures`, or `default` (the bare model).
    pub fn architecture<'a>(&'a self, default: &'a str) -> &'a str {
        self.architectures.first().map_or(default, String::as_str)
    }

    /// The name of label `index`: `id2label`, else transformers' `LABEL_{index}`.
    pub fn label(&self, index: usize) -> String {
        self.id2label.get(&index.to_string()).cloned().unwrap_or_else(|| format!("LABEL_{index}"))
    }

    /// Number of labels of a classification head (transformers' default: 2).
    pub fn num_labels(&self) -> usize {
        if self.id2label.is_empty() {
            2
        } else {
            self.id2label.len()
        }
    }

    /// The index of the label that means entailment (an NLI head's, as transformers'
    /// zero-shot pipeline finds it: the first whose name starts with "entail").
    pub fn entailment_label(&self) -> Option<usize> {
        (0..self.num_labels()).find(|&i| self.label(i).to_lowercase().starts_with("entail"))
    }
}

/// transformers' default for every dropout probability of the BERT and GPT families.
pub(crate) fn default_dropout() -> f32 {
    0.1
}

/// A GPT-2's or GPT's dropout (training only), transformers' default 0.1 each.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct DecoderDropout {
    /// On each block's two branches before their residuals.
    #[serde(default = "default_dropout")]
    pub resid_pdrop: f32,
    #[serde(default = "default_dropout")]
    pub embd_pdrop: f32,
    /// On the attention probabilities.
    #[serde(default = "default_dropout")]
    pub attn_pdrop: f32,
}

impl DecoderDropout {
    /// [embeddings, attention probabilities, block outputs].
    pub fn probabilities(&self) -> [f32; 3] {
        [self.embd_pdrop, self.attn_pdrop, self.resid_pdrop]
    }
}
