//! ALBERT (Lan et al. 2020), as transformers' `modeling_albert.py`: BERT with factorized
//! embeddings (E-wide tables, then `embedding_hidden_mapping_in` to the hidden size H) and
//! cross-layer parameter sharing — `num_hidden_groups` groups of `inner_group_num` layers,
//! depth l running group ⌊l / (L / groups)⌋ — so the weights are uploaded once however deep
//! the model runs. Pretrained with masked LM and sentence-order prediction (`sop_classifier`).

use serde::Deserialize;

use super::config::{activation, check_heads, config_err, from_json};
#[cfg(feature = "training")]
use super::encoder::fresh::{
    check_pad, fresh_config, init_layers, init_table, with_keys, EncoderHeads, EncoderTraining, MaskedLmHeadNames, SequenceClassifier,
};
use super::encoder::{
    check_pooler, optional_pooler, Embeddings, Encoder, EncoderConfig, EncoderHead, EncoderLayer, EncoderParts, LayerNames, LmHeadNames, MaskedLmHead, Norm,
    Positions, SentencePairHead, SequenceHead, SpanHead,
};
use super::family::{Family, Unread};
#[cfg(feature = "training")]
use super::training::fresh::{config_bytes, Fresh, FreshShape, FreshVocabulary, Init, TrainingFolder, INIT_STD};
#[cfg(feature = "training")]
use super::training::Objective;
use super::HeadConfig;
use crate::error::Result;
use crate::nn::Linear;
use crate::ops::dropout::LayerSites;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "albert",
    name: "ALBERT",
    architectures: &[
        "AlbertModel",
        "AlbertForPreTraining",
        "AlbertForMaskedLM",
        "AlbertForSequenceClassification",
        "AlbertForTokenClassification",
        "AlbertForQuestionAnswering",
        "AlbertForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::SentencePiece,
    unread: &[Unread::Prefix("predictions."), Unread::Prefix("sop_classifier."), Unread::Prefix("classifier."), Unread::Prefix("qa_outputs.")],
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"],
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

/// ALBERT's training: pretraining (masked LM and sentence order) and every fine-tuning head,
/// its classifiers on `pooler`; a fresh model is an `AlbertForPreTraining`.
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "Albert",
    base: "albert",
    width_key: "hidden_size",
    pretraining: &[Objective::Mlm, Objective::MlmSop],
    load,
    heads: EncoderHeads {
        sequence: SequenceClassifier::Pooled { pooler: "pooler" },
        multiple_choice: Some(SequenceClassifier::Pooled { pooler: "pooler" }),
        masked_lm: Some(MaskedLmHeadNames {
            dense: "predictions.dense",
            layer_norm: "predictions.LayerNorm",
            bias: "predictions.bias",
            roots: &["predictions"],
            pair_head: Some("sop_classifier"),
        }),
    },
    fresh: Some(Fresh::Shaped { pads: true, make: fresh }),
    joint_folder: None,
};

/// A fresh `AlbertForPreTraining`, drawn as transformers' `_init_weights` draws it:
/// embeddings min(128, width) wide (the padding row 0) projected to the width, one layer
/// shared by every depth, the pooler, the masked-LM head (width → embeddings) and the
/// sentence-order head.
#[cfg(feature = "training")]
fn fresh(shape: &FreshShape, vocabulary: &FreshVocabulary, seed: u64) -> Result<TrainingFolder> {
    shape.validate(vocabulary.size)?;
    let (h, e, v, pad) = (shape.width, shape.width.min(128), vocabulary.size, vocabulary.pad.unwrap_or(0) as usize);
    check_pad(pad, v)?;
    let extra = serde_json::json!({
        "embedding_size": e, "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": "gelu_new", "classifier_dropout_prob": 0.0,
    });
    let config = with_keys(fresh_config("albert", "AlbertForPreTraining", shape, v, shape.context, 2, pad), extra);
    let mut init = Init::new(seed);
    init_table(&mut init, "albert", "word_embeddings", v, e, Some(pad))?;
    init_table(&mut init, "albert", "position_embeddings", shape.context, e, None)?;
    init_table(&mut init, "albert", "token_type_embeddings", 2, e, None)?;
    init.layer_norm("albert.embeddings.LayerNorm", e);
    init.linear("albert.encoder.embedding_hidden_mapping_in", h, e, INIT_STD)?;
    init_layers(&mut init, &ALBERT_LAYER, &["albert.encoder.albert_layer_groups.0.albert_layers.0".to_string()], h)?;
    init.linear("albert.pooler", h, h, INIT_STD)?;
    TRAINING.fresh_masked_lm_head(&mut init, h, e, v)?;
    init.linear("sop_classifier.classifier", 2, h, INIT_STD)?;
    Ok(TrainingFolder::new(config_bytes(&config)?, init.serialize()?))
}

/// ALBERT config (`model_type: "albert"`), with transformers' defaults (ALBERT-xxlarge's).
#[derive(Clone, Debug, Deserialize)]
pub struct AlbertConfig {
    pub vocab_size: usize,
    #[serde(default = "default_embedding_size")]
    pub embedding_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    #[serde(default = "one")]
    pub num_hidden_groups: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "one")]
    pub inner_group_num: usize,
    #[serde(default = "default_gelu_new")]
    pub hidden_act: String,
    #[serde(default)]
    pub hidden_dropout_prob: f32,
    #[serde(default)]
    pub attention_probs_dropout_prob: f32,
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_classifier_dropout")]
    pub classifier_dropout_prob: f32,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_embedding_size() -> usize {
    128
}
fn one() -> usize {
    1
}
fn default_gelu_new() -> String {
    "gelu_new".into()
}
fn default_max_positions() -> usize {
    512
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_classifier_dropout() -> f32 {
    0.1
}

impl AlbertConfig {
    pub fn encoder_config(&self) -> Result<EncoderConfig> {
        check_heads("hidden_size", self.hidden_size, "num_attention_heads", self.num_attention_heads)?;
        if self.num_hidden_groups == 0 || self.inner_group_num == 0 || self.num_hidden_groups > self.num_hidden_layers.max(1) {
            return Err(config_err(format!(
                "num_hidden_groups {} must be in 1..=num_hidden_layers {}, and inner_group_num {} at least 1",
                self.num_hidden_groups, self.num_hidden_layers, self.inner_group_num
            )));
        }
        Ok(EncoderConfig {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            embedding_size: self.embedding_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: self.num_attention_heads,
            intermediate_size: self.intermediate_size,
            activation: activation("hidden_act", &self.hidden_act)?,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: self.type_vocab_size,
            positions: Positions::FromZero,
            sinusoidal_positions: false,
            task_type_vocab_size: None,
            norm: Norm::Post,
            layer_norm_eps: self.layer_norm_eps as f32,
            hidden_dropout_prob: self.hidden_dropout_prob,
            attention_probs_dropout_prob: self.attention_probs_dropout_prob,
            classifier_dropout: Some(self.classifier_dropout_prob),
            span_dropout: None,
            // ALBERT's layer drops nothing after its feed-forward block.
            dropout_sites: LayerSites { attention_output: true, feed_forward_output: false },
            head: self.head.clone(),
        })
    }

    /// The shared layer each step runs: depth l runs every inner layer of group
    /// ⌊l / (L / groups)⌋ (transformers' float division), layer `g · inner + i` of the
    /// groups' layers in order.
    fn schedule(&self) -> Vec<usize> {
        let per_group = self.num_hidden_layers as f64 / self.num_hidden_groups as f64;
        (0..self.num_hidden_layers)
            .flat_map(|l| {
                let group = ((l as f64 / per_group) as usize).min(self.num_hidden_groups - 1);
                (0..self.inner_group_num).map(move |i| group * self.inner_group_num + i)
            })
            .collect()
    }
}

/// `encoder.albert_layer_groups.{g}.albert_layers.{i}`.
pub(crate) const ALBERT_LAYER: LayerNames = LayerNames {
    query: "attention.query",
    key: "attention.key",
    value: "attention.value",
    attention_output: "attention.dense",
    attention_norm: "attention.LayerNorm",
    intermediate: "ffn",
    output: "ffn_output",
    output_norm: "full_layer_layer_norm",
};

/// `predictions`: dense H → E, the activation, LayerNorm, the decoder E → V (tied) and bias.
const LM_HEAD: LmHeadNames = LmHeadNames { dense: "dense", layer_norm: "LayerNorm", decoder: "decoder", bias: Some("bias") };

/// Loads an ALBERT checkpoint in the Hugging Face layout (the `albert.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Encoder> {
    let config: AlbertConfig = from_json(config_json)?;
    let c = config.encoder_config()?;
    let w = if root.contains("albert.embeddings.word_embeddings.weight") { root.pp("albert") } else { root.clone() };
    let (e, h) = (c.embedding_size, c.hidden_size);
    let embeddings = Embeddings::load(&w.pp("embeddings"), &c)?;
    let encoder = w.pp("encoder");
    let projection = Linear::load(&encoder.pp("embedding_hidden_mapping_in"), e, h)?;
    let groups = encoder.pp("albert_layer_groups");
    let layers = (0..config.num_hidden_groups)
        .flat_map(|g| (0..config.inner_group_num).map(move |i| (g, i)))
        .map(|(g, i)| EncoderLayer::load(&groups.pp(g).pp("albert_layers").pp(i), &c, &ALBERT_LAYER))
        .collect::<Result<Vec<_>>>()?;
    let pooler_weights = w.pp("pooler");
    let pooler = optional_pooler(&pooler_weights, h)?;

    let architecture = c.head.architecture("AlbertModel").to_string();
    let labels = c.head.num_labels();
    let lm = || MaskedLmHead::load(&root.pp("predictions"), &LM_HEAD, &c, c.activation, &embeddings.word_embeddings);
    let head = match architecture.strip_prefix("Albert") {
        Some("Model") => EncoderHead::Base,
        Some("ForPreTraining") => EncoderHead::PreTraining(lm()?, SentencePairHead::sentence_order(Linear::load(&root.pp("sop_classifier.classifier"), h, 2)?)),
        Some("ForMaskedLM") => EncoderHead::MaskedLm(lm()?),
        Some("ForSequenceClassification") => EncoderHead::SequenceClassification(SequenceHead::Pooled(Linear::load(&root.pp("classifier"), h, labels)?)),
        Some("ForTokenClassification") => EncoderHead::TokenClassification(Linear::load(&root.pp("classifier"), h, labels)?),
        Some("ForQuestionAnswering") => EncoderHead::QuestionAnswering(SpanHead::load(root, h)?),
        Some("ForMultipleChoice") => EncoderHead::MultipleChoice(SequenceHead::Pooled(Linear::load(&root.pp("classifier"), h, 1)?)),
        _ => return Err(FAMILY.unsupported(&architecture)),
    };
    check_pooler(&head, &pooler, &pooler_weights, &architecture)?;
    let parts = EncoderParts { embeddings, projection: Some(projection), layers, schedule: config.schedule(), pooler, final_norm: None };
    Ok(Encoder::new(c, architecture, parts, head))
}

#[cfg(test)]
mod tests {
    #[test]
    fn shared_layers_follow_transformers_group_arithmetic() {
        let config = |layers, groups, inner| super::AlbertConfig {
            num_hidden_layers: layers,
            num_hidden_groups: groups,
            inner_group_num: inner,
            ..serde_json::from_str(r#"{"vocab_size": 5, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4}"#).unwrap()
        };
        assert_eq!(config(3, 1, 1).schedule(), vec![0, 0, 0]);
        // int(l / 1.5): 0, 0, 1.
        assert_eq!(config(3, 2, 1).schedule(), vec![0, 0, 1]);
        assert_eq!(config(3, 2, 2).schedule(), vec![0, 1, 0, 1, 2, 3]);
        assert_eq!(config(4, 4, 1).schedule(), vec![0, 1, 2, 3]);
    }
}
