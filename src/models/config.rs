//! `config.json` of a Hugging Face checkpoint: the fields Sesame's models read, with the
//! defaults transformers uses when a field is absent.

use serde::Deserialize;

use crate::error::{Result, SesameError};
use crate::nn::Activation;

fn config_err(message: String) -> SesameError {
    SesameError::Checkpoint(format!("config.json: {message}"))
}

/// BERT-architecture config (`model_type: "bert"`; MiniLM sentence encoders too).
#[derive(Clone, Debug, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_gelu")]
    pub hidden_act: String,
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_bert_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub architectures: Vec<String>,
    /// Classification heads: labels by index (their count is the number of labels).
    #[serde(default)]
    pub id2label: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
}

fn default_gelu() -> String {
    "gelu".into()
}
fn default_max_positions() -> usize {
    512
}
fn default_type_vocab() -> usize {
    2
}
fn default_bert_eps() -> f64 {
    1e-12
}

impl BertConfig {
    pub fn from_json(json: &[u8]) -> Result<BertConfig> {
        let c: BertConfig = serde_json::from_slice(json).map_err(|e| config_err(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<()> {
        if self.hidden_size == 0 || self.num_attention_heads == 0 || self.hidden_size % self.num_attention_heads != 0 {
            return Err(config_err(format!("hidden_size {} is not a positive multiple of num_attention_heads {}", self.hidden_size, self.num_attention_heads)));
        }
        self.activation()?;
        Ok(())
    }

    pub fn activation(&self) -> Result<Activation> {
        Activation::from_config(&self.hidden_act).ok_or_else(|| config_err(format!("unsupported hidden_act `{}`", self.hidden_act)))
    }

    /// Number of labels of a classification head (transformers' default: 2).
    pub fn num_labels(&self) -> usize {
        if self.id2label.is_empty() { 2 } else { self.id2label.len() }
    }
}
