//! `config.json` of a Hugging Face checkpoint: the fields Sesame's models read, with the
//! defaults transformers uses when a field is absent.

use serde::Deserialize;

use crate::error::{arg_err, Result, SesameError};
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
    /// Dropout on the embeddings' and each block's output (training only).
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f32,
    /// Dropout on the attention probabilities (training only).
    #[serde(default = "default_dropout")]
    pub attention_probs_dropout_prob: f32,
    /// Dropout before a sequence-classification head; default hidden_dropout_prob.
    #[serde(default)]
    pub classifier_dropout: Option<f32>,
    #[serde(flatten)]
    pub head: HeadConfig,
}

/// The fields every family shares that choose and size the task head.
#[derive(Clone, Debug, Default, Deserialize)]
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
        if self.id2label.is_empty() { 2 } else { self.id2label.len() }
    }
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
/// transformers' default for every dropout probability of BERT and GPT-2.
fn default_dropout() -> f32 {
    0.1
}

impl BertConfig {
    pub fn from_json(json: &[u8]) -> Result<BertConfig> {
        let c: BertConfig = serde_json::from_slice(json).map_err(|e| config_err(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<()> {
        if self.hidden_size == 0 || self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(config_err(format!("hidden_size {} is not a positive multiple of num_attention_heads {}", self.hidden_size, self.num_attention_heads)));
        }
        self.activation()?;
        Ok(())
    }

    pub fn activation(&self) -> Result<Activation> {
        Activation::from_config(&self.hidden_act).ok_or_else(|| config_err(format!("unsupported hidden_act `{}`", self.hidden_act)))
    }
}

/// GPT-2 config (`model_type: "gpt2"`).
#[derive(Clone, Debug, Deserialize)]
pub struct Gpt2Config {
    pub vocab_size: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_positions: usize,
    /// Width of the MLP; transformers' default 4·n_embd.
    #[serde(default)]
    pub n_inner: Option<usize>,
    #[serde(default = "default_gelu_new")]
    pub activation_function: String,
    #[serde(default = "default_gpt_eps")]
    pub layer_norm_epsilon: f64,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    #[serde(flatten)]
    pub dropout: DecoderDropout,
    #[serde(flatten)]
    pub head: HeadConfig,
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

/// GPT config (`model_type: "openai-gpt"`).
#[derive(Clone, Debug, Deserialize)]
pub struct OpenAiGptConfig {
    pub vocab_size: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_positions: usize,
    /// The activation: transformers maps `gelu` to the tanh form for this model.
    #[serde(default = "default_gelu")]
    pub afn: String,
    #[serde(default = "default_gpt_eps")]
    pub layer_norm_epsilon: f64,
    #[serde(flatten)]
    pub dropout: DecoderDropout,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_gelu_new() -> String {
    "gelu_new".into()
}
fn default_gpt_eps() -> f64 {
    1e-5
}

fn check_heads(width: usize, heads: usize) -> Result<()> {
    if width == 0 || heads == 0 || !width.is_multiple_of(heads) {
        return Err(config_err(format!("n_embd {width} is not a positive multiple of n_head {heads}")));
    }
    Ok(())
}

impl Gpt2Config {
    pub fn from_json(json: &[u8]) -> Result<Gpt2Config> {
        let c: Gpt2Config = serde_json::from_slice(json).map_err(|e| config_err(e.to_string()))?;
        check_heads(c.n_embd, c.n_head)?;
        c.activation()?;
        Ok(c)
    }

    pub fn activation(&self) -> Result<Activation> {
        Activation::from_config(&self.activation_function).ok_or_else(|| config_err(format!("unsupported activation_function `{}`", self.activation_function)))
    }

    pub fn inner(&self) -> usize {
        self.n_inner.unwrap_or(4 * self.n_embd)
    }
}

impl OpenAiGptConfig {
    pub fn from_json(json: &[u8]) -> Result<OpenAiGptConfig> {
        let c: OpenAiGptConfig = serde_json::from_slice(json).map_err(|e| config_err(e.to_string()))?;
        check_heads(c.n_embd, c.n_head)?;
        c.activation()?;
        Ok(c)
    }

    /// transformers' `ACT_FNS` for openai-gpt maps "gelu" to `gelu_new` (the tanh form).
    pub fn activation(&self) -> Result<Activation> {
        match self.afn.as_str() {
            "gelu" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(config_err(format!("unsupported afn `{other}`"))),
        }
    }
}

/// `config_json` with every dropout probability of its model set to `p` (what `sesame train
/// --dropout` trains with and saves).
pub fn with_dropout(config_json: &[u8], p: f32) -> Result<Vec<u8>> {
    let op = "config";
    if !(0.0..1.0).contains(&p) {
        return Err(arg_err!(op, "dropout must be in [0, 1), got {p}"));
    }
    let mut config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!(op, "config.json is not valid JSON: {e}"))?;
    let keys: &[&str] = match config.get("model_type").and_then(|t| t.as_str()) {
        Some("bert") => &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
        Some("gpt2" | "openai-gpt") => &["resid_pdrop", "embd_pdrop", "attn_pdrop"],
        other => return Err(arg_err!(op, "no dropout settings known for model_type {other:?}")),
    };
    let object = config.as_object_mut().ok_or_else(|| arg_err!(op, "config.json is not a JSON object"))?;
    // The f32's shortest decimal (0.1, not the f64 widening 0.10000000149011612), as a user
    // or transformers writes it.
    let decimal: f64 = p.to_string().parse().map_err(|e| arg_err!(op, "dropout {p}: {e}"))?;
    for key in keys {
        object.insert(key.to_string(), serde_json::json!(decimal));
    }
    serde_json::to_vec_pretty(&config).map_err(|e| arg_err!(op, "{e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn dropout_is_written_as_its_shortest_decimal() {
        let config = super::with_dropout(br#"{"model_type": "bert", "hidden_dropout_prob": 0.0}"#, 0.1).unwrap();
        let text = String::from_utf8(config).unwrap();
        assert!(text.contains("\"hidden_dropout_prob\": 0.1,") && text.contains("\"classifier_dropout\": 0.1"), "{text}");
        assert!(super::with_dropout(br#"{"model_type": "bert"}"#, 1.0).is_err());
    }
}
