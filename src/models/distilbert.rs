//! DistilBERT (Sanh et al. 2019), as transformers' `modeling_distilbert.py`: BERT's encoder
//! at half the depth, distilled from BERT — word + position embeddings (no token types; the
//! positions learned or sinusoidal), layers named `q_lin`, `sa_layer_norm`, `ffn.lin1`, …, no
//! pooler, and heads on the first token's hidden state.

use serde::Deserialize;

use super::config::{activation, check_heads, default_dropout, from_json};
use super::encoder::{
    Embeddings, Encoder, EncoderConfig, EncoderHead, EncoderLayer, EncoderParts, LayerNames, LmHeadNames, MaskedLmHead, MlpHead, Norm, Positions, SequenceHead,
    SpanHead,
};
use super::registry::{Family, Unread};
use super::HeadConfig;
use crate::error::Result;
use crate::nn::{Activation, Linear};
use crate::ops::dropout::LayerSites;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "distilbert",
    name: "DistilBERT",
    architectures: &[
        "DistilBertModel",
        "DistilBertForMaskedLM",
        "DistilBertForSequenceClassification",
        "DistilBertForTokenClassification",
        "DistilBertForQuestionAnswering",
        "DistilBertForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::WordPiece,
    unread: &[
        Unread::Prefix("vocab_transform."),
        Unread::Prefix("vocab_layer_norm."),
        Unread::Prefix("vocab_projector."),
        Unread::Prefix("pre_classifier."),
        Unread::Prefix("classifier."),
        Unread::Prefix("qa_outputs."),
    ],
    dropout_keys: &["dropout", "attention_dropout", "seq_classif_dropout", "qa_dropout"],
};

/// DistilBERT config (`model_type: "distilbert"`).
#[derive(Clone, Debug, Deserialize)]
pub struct DistilBertConfig {
    pub vocab_size: usize,
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    /// The feed-forward block's width.
    pub hidden_dim: usize,
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub sinusoidal_pos_embds: bool,
    #[serde(default = "default_gelu")]
    pub activation: String,
    #[serde(default = "default_dropout")]
    pub dropout: f32,
    #[serde(default = "default_dropout")]
    pub attention_dropout: f32,
    /// Dropout before the sequence classifier.
    #[serde(default = "default_seq_classif_dropout")]
    pub seq_classif_dropout: f32,
    /// Dropout before the span head (question answering).
    #[serde(default = "default_dropout")]
    pub qa_dropout: f32,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_max_positions() -> usize {
    512
}
fn default_gelu() -> String {
    "gelu".into()
}
fn default_seq_classif_dropout() -> f32 {
    0.2
}

impl DistilBertConfig {
    pub fn encoder_config(&self) -> Result<EncoderConfig> {
        check_heads("dim", self.dim, "n_heads", self.n_heads)?;
        Ok(EncoderConfig {
            vocab_size: self.vocab_size,
            hidden_size: self.dim,
            embedding_size: self.dim,
            num_hidden_layers: self.n_layers,
            num_attention_heads: self.n_heads,
            intermediate_size: self.hidden_dim,
            activation: activation("activation", &self.activation)?,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: 0,
            positions: Positions::FromZero,
            sinusoidal_positions: self.sinusoidal_pos_embds,
            task_type_vocab_size: None,
            norm: Norm::Post,
            // Fixed in transformers' DistilBERT, whatever the config says.
            layer_norm_eps: 1e-12,
            hidden_dropout_prob: self.dropout,
            attention_probs_dropout_prob: self.attention_dropout,
            // The sequence classifier (and multiple choice) drop out at seq_classif_dropout; the
            // token classifier at `dropout`, the span head at qa_dropout.
            classifier_dropout: (!self.head.architecture("").ends_with("ForTokenClassification")).then_some(self.seq_classif_dropout),
            span_dropout: Some(self.qa_dropout),
            // DistilBERT's attention drops nothing after its output projection.
            dropout_sites: LayerSites { attention_output: false, feed_forward_output: true },
            head: self.head.clone(),
        })
    }
}

/// `transformer.layer.{i}`.
const LAYER: LayerNames = LayerNames {
    query: "attention.q_lin",
    key: "attention.k_lin",
    value: "attention.v_lin",
    attention_output: "attention.out_lin",
    attention_norm: "sa_layer_norm",
    intermediate: "ffn.lin1",
    output: "ffn.lin2",
    output_norm: "output_layer_norm",
};

/// `vocab_transform`, the activation, `vocab_layer_norm`, and `vocab_projector` (tied, with
/// its own bias).
const LM_HEAD: LmHeadNames = LmHeadNames { dense: "vocab_transform", layer_norm: "vocab_layer_norm", decoder: "vocab_projector", bias: None };

/// Loads a DistilBERT checkpoint in the Hugging Face layout (the `distilbert.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Encoder> {
    let config: DistilBertConfig = from_json(config_json)?;
    let c = config.encoder_config()?;
    let w = if root.contains("distilbert.embeddings.word_embeddings.weight") { root.pp("distilbert") } else { root.clone() };
    let h = c.hidden_size;
    let embeddings = Embeddings::load(&w.pp("embeddings"), &c)?;
    let layers = (0..c.num_hidden_layers).map(|i| EncoderLayer::load(&w.pp("transformer.layer").pp(i), &c, &LAYER)).collect::<Result<Vec<_>>>()?;
    let architecture = c.head.architecture("DistilBertModel").to_string();
    let labels = c.head.num_labels();
    // `pre_classifier`, ReLU, `classifier` on the first token.
    let first_token = |outputs| MlpHead::load(&root.pp("pre_classifier"), Activation::Relu, &root.pp("classifier"), h, outputs);
    let head = match architecture.strip_prefix("DistilBert") {
        Some("Model") => EncoderHead::Base,
        Some("ForMaskedLM") => EncoderHead::MaskedLm(MaskedLmHead::load(root, &LM_HEAD, &c, c.activation, &embeddings.word_embeddings)?),
        Some("ForSequenceClassification") => EncoderHead::SequenceClassification(SequenceHead::FirstToken(first_token(labels)?)),
        Some("ForTokenClassification") => EncoderHead::TokenClassification(Linear::load(&root.pp("classifier"), h, labels)?),
        Some("ForQuestionAnswering") => EncoderHead::QuestionAnswering(SpanHead::load(root, h)?),
        Some("ForMultipleChoice") => EncoderHead::MultipleChoice(SequenceHead::FirstToken(first_token(1)?)),
        _ => return Err(FAMILY.unsupported(&architecture)),
    };
    let schedule = (0..layers.len()).collect();
    Ok(Encoder::new(c, architecture, EncoderParts { embeddings, projection: None, layers, schedule, pooler: None, final_norm: None }, head))
}
