//! DistilBERT (Sanh et al. 2019), as transformers' `modeling_distilbert.py`: BERT's encoder
//! at half the depth, distilled from BERT — word + position embeddings (no token types; the
//! positions learned or sinusoidal), layers named `q_lin`, `sa_layer_norm`, `ffn.lin1`, …, no
//! pooler, and heads on the first token's hidden state.

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use super::bert::{BertConfig, BERT_LM_HEAD};
use super::config::{activation, check_heads, default_dropout, from_json};
#[cfg(feature = "training")]
use super::encoder::fresh::{EncoderHeads, EncoderTraining, MaskedLmHeadNames, SequenceClassifier};
use super::encoder::{
    Embeddings, Encoder, EncoderConfig, EncoderHead, EncoderLayer, EncoderParts, LayerNames, LmHeadNames, MaskedLmHead, MlpHead, Norm, Positions, SequenceHead,
    SpanHead, BERT_LAYER,
};
use super::family::{Family, Unread};
#[cfg(feature = "training")]
use super::training::Objective;
use super::HeadConfig;
use crate::error::{Result, SesameError};
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
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

/// DistilBERT's training: masked LM and every fine-tuning head, its classifiers
/// `pre_classifier` and `classifier` on the first token (no pooler).
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "DistilBert",
    base: "distilbert",
    width_key: "dim",
    pretraining: &[Objective::Mlm],
    load,
    heads: EncoderHeads {
        sequence: SequenceClassifier::FirstToken { dense: "pre_classifier", out: "classifier" },
        multiple_choice: Some(SequenceClassifier::FirstToken { dense: "pre_classifier", out: "classifier" }),
        masked_lm: Some(MaskedLmHeadNames {
            dense: "vocab_transform",
            layer_norm: "vocab_layer_norm",
            bias: "vocab_projector.bias",
            roots: &["vocab_transform", "vocab_layer_norm", "vocab_projector"],
            pair_head: None,
        }),
    },
    fresh: None,
    joint_folder: None,
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

/// A DistilBERT made from a BERT checkpoint (config.json, model.safetensors, f32), as
/// DistilBERT's students were made from their teacher: the same embeddings, layers, masked-LM
/// head (a `BertForPreTraining` / `BertForMaskedLM` becomes a `DistilBertForMaskedLM`) or
/// classifier (a `BertForSequenceClassification` becomes a `DistilBertForSequenceClassification`
/// whose `pre_classifier` is the pooler, now followed by ReLU instead of tanh), renamed. DistilBERT
/// has no token types: token type 0's embedding is added to every position's (exact for
/// single-segment input, which is all a DistilBERT sees); the next-sentence head is dropped;
/// an untied output layer stays untied. A BERT whose layer_norm_eps is not DistilBERT's fixed
/// 1e-12 is refused (it would compute another function).
/// Returns the DistilBERT's (config.json, model.safetensors).
pub fn from_bert(config_json: &[u8], safetensors: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let err = |message: String| SesameError::InvalidArgument { op: "distilbert", message };
    let bert: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| err(format!("the BERT's config.json: {e}")))?;
    let model_type = bert["model_type"].as_str().unwrap_or("");
    if model_type != "bert" {
        return Err(err(format!("a DistilBERT is made from a BERT (model_type bert), not model_type `{model_type}`")));
    }
    let config = BertConfig::from_json(config_json)?;
    // DistilBERT's LayerNorms have eps 1e-12 whatever its config says (transformers' too).
    if config.layer_norm_eps != 1e-12 {
        return Err(err(format!("the BERT's layer_norm_eps is {}, and a DistilBERT's is always 1e-12", config.layer_norm_eps)));
    }
    let tied = config.head.tie_word_embeddings;
    let architecture = match config.head.architecture("BertModel") {
        "BertForPreTraining" | "BertForMaskedLM" => "DistilBertForMaskedLM",
        "BertForSequenceClassification" => "DistilBertForSequenceClassification",
        other => {
            return Err(err(format!(
                "a DistilBERT is made from a BERT masked LM (BertForPreTraining, BertForMaskedLM) or a BertForSequenceClassification, not {other}"
            )))
        }
    };
    let mut distil = serde_json::json!({
        "model_type": "distilbert",
        "architectures": [architecture],
        "vocab_size": config.vocab_size,
        "dim": config.hidden_size,
        "n_layers": config.num_hidden_layers,
        "n_heads": config.num_attention_heads,
        "hidden_dim": config.intermediate_size,
        "max_position_embeddings": config.max_position_embeddings,
        "sinusoidal_pos_embds": false,
        "activation": config.hidden_act,
        "dropout": config.hidden_dropout_prob,
        "attention_dropout": config.attention_probs_dropout_prob,
        "seq_classif_dropout": config.classifier_dropout.unwrap_or(config.hidden_dropout_prob),
        "qa_dropout": config.hidden_dropout_prob,
        "tie_word_embeddings": tied,
    });
    for key in ["id2label", "label2id", "pad_token_id", "initializer_range", "problem_type"] {
        if !bert[key].is_null() {
            distil[key] = bert[key].clone();
        }
    }

    let tensors = SafeTensors::deserialize(safetensors).map_err(|e| err(format!("the BERT's model.safetensors: {e}")))?;
    let prefix = if tensors.names().iter().any(|n| n.starts_with("bert.")) { "bert." } else { "" };
    let read = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
        let view = tensors.tensor(name).map_err(|_| err(format!("the BERT's model.safetensors has no `{name}`")))?;
        if view.dtype() != Dtype::F32 {
            return Err(err(format!("`{name}` is {:?}; a DistilBERT is made from f32 weights", view.dtype())));
        }
        Ok((view.shape().to_vec(), bytemuck::pod_collect_to_vec(view.data())))
    };
    // (DistilBERT's name, BERT's name) for every tensor copied as it is.
    let mut renames: Vec<(String, String)> = ["word_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias"]
        .iter()
        .map(|t| (format!("distilbert.embeddings.{t}"), format!("{prefix}embeddings.{t}")))
        .collect();
    for i in 0..config.num_hidden_layers {
        for (distil_name, bert_name) in LAYER.all().into_iter().zip(BERT_LAYER.all()) {
            for t in ["weight", "bias"] {
                renames.push((format!("distilbert.transformer.layer.{i}.{distil_name}.{t}"), format!("{prefix}encoder.layer.{i}.{bert_name}.{t}")));
            }
        }
    }
    // The masked-LM head sits beside the model (`cls.predictions.…`); the pooler inside it.
    let head = match architecture {
        "DistilBertForMaskedLM" => {
            [(LM_HEAD.dense, format!("cls.predictions.{}", BERT_LM_HEAD.dense)), (LM_HEAD.layer_norm, format!("cls.predictions.{}", BERT_LM_HEAD.layer_norm))]
        }
        _ => [("pre_classifier", format!("{prefix}pooler.dense")), ("classifier", "classifier".to_string())],
    };
    for (distil_name, bert_name) in head {
        for t in ["weight", "bias"] {
            renames.push((format!("{distil_name}.{t}"), format!("{bert_name}.{t}")));
        }
    }
    if architecture == "DistilBertForMaskedLM" {
        renames.push((format!("{}.bias", LM_HEAD.decoder), "cls.predictions.bias".to_string()));
        // An untied BERT keeps its output layer (tied, it is the word embeddings).
        if !tied {
            renames.push((format!("{}.weight", LM_HEAD.decoder), format!("cls.predictions.{}.weight", BERT_LM_HEAD.decoder)));
        }
    }

    let mut out: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::with_capacity(renames.len() + 1);
    for (distil_name, bert_name) in renames {
        let (shape, data) = read(&bert_name)?;
        out.push((distil_name, shape, data));
    }
    let (shape, mut positions) = read(&format!("{prefix}embeddings.position_embeddings.weight"))?;
    let (_, token_types) = read(&format!("{prefix}embeddings.token_type_embeddings.weight"))?;
    let h = config.hidden_size;
    if token_types.len() < h || shape.last() != Some(&h) {
        return Err(err(format!("the BERT's position and token type embeddings are not {h} wide")));
    }
    for row in positions.chunks_exact_mut(h) {
        row.iter_mut().zip(&token_types[..h]).for_each(|(p, t)| *p += t);
    }
    out.push(("distilbert.embeddings.position_embeddings.weight".to_string(), shape, positions));
    out.sort_by(|a, b| a.0.cmp(&b.0));

    let views = out
        .iter()
        .map(|(name, shape, data)| {
            Ok((name.as_str(), TensorView::new(Dtype::F32, shape.clone(), bytemuck::cast_slice(data)).map_err(|e| err(format!("`{name}`: {e}")))?))
        })
        .collect::<Result<Vec<_>>>()?;
    let safetensors = safetensors::serialize(views, None).map_err(|e| err(format!("writing the DistilBERT's model.safetensors: {e}")))?;
    let config_json = serde_json::to_vec_pretty(&distil).map_err(|e| err(format!("writing the DistilBERT's config.json: {e}")))?;
    Ok((config_json, safetensors))
}
