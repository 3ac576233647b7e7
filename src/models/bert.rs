//! BERT (Devlin et al. 2019), as transformers' `modeling_bert.py`: word + position + token
//! type embeddings, a post-LayerNorm encoder, a tanh pooler over `[CLS]`, and the task heads,
//! on the shared [encoder](super::encoder). MiniLM sentence encoders are this architecture;
//! ERNIE is this with task type embeddings (`load_bert_like`).

use serde::Deserialize;

use super::config::{activation, check_heads, default_dropout, from_json};
#[cfg(feature = "training")]
use super::encoder::fresh::{check_pad, fresh_config, init_layers, init_table, with_keys, EncoderHeads, EncoderTraining, BERT_MASKED_LM, POOLED_BERT};
use super::encoder::{
    check_pooler, optional_pooler, Embeddings, Encoder, EncoderConfig, EncoderHead, EncoderLayer, EncoderParts, LmHeadNames, MaskedLmHead, Norm, Positions,
    SentencePairHead, SequenceHead, SpanHead, BERT_LAYER,
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
    model_type: "bert",
    name: "BERT",
    architectures: &[
        "BertModel",
        "BertForMaskedLM",
        "BertForPreTraining",
        "BertForNextSentencePrediction",
        "BertForSequenceClassification",
        "BertForTokenClassification",
        "BertForQuestionAnswering",
        "BertForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::WordPiece,
    unread: BERT_OTHER_HEADS,
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

/// BERT's training: pretraining (masked LM and next sentence) and every fine-tuning head; a
/// fresh model is a `BertForPreTraining`.
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "Bert",
    base: "bert",
    width_key: "hidden_size",
    pretraining: &[Objective::Mlm, Objective::MlmNsp],
    load,
    heads: EncoderHeads { sequence: POOLED_BERT, multiple_choice: Some(POOLED_BERT), masked_lm: Some(BERT_MASKED_LM) },
    fresh: Some(Fresh::Shaped { pads: true, make: |shape, vocabulary, seed| fresh_pretraining(&TRAINING, "bert", shape, vocabulary, seed, None) }),
    joint_folder: None,
};

/// A fresh `…ForPreTraining` of BERT's layout, drawn as transformers' `_init_weights` draws
/// it (weights and embeddings N(0, 0.02), biases 0, LayerNorm gains 1, the padding row of the
/// word embeddings 0): embeddings (with `task_types` task type embeddings: ERNIE's), post-LN
/// layers, the pooler, the masked-LM head and the next-sentence head.
#[cfg(feature = "training")]
pub(crate) fn fresh_pretraining(
    training: &EncoderTraining,
    model_type: &str,
    shape: &FreshShape,
    vocabulary: &FreshVocabulary,
    seed: u64,
    task_types: Option<usize>,
) -> Result<TrainingFolder> {
    shape.validate(vocabulary.size)?;
    let (h, v, base, pad) = (shape.width, vocabulary.size, training.base, vocabulary.pad.unwrap_or(0) as usize);
    check_pad(pad, v)?;
    let mut config = fresh_config(model_type, &format!("{}ForPreTraining", training.class), shape, v, shape.context, 2, pad);
    if let Some(types) = task_types {
        config = with_keys(config, serde_json::json!({ "use_task_id": true, "task_type_vocab_size": types }));
    }
    let mut init = Init::new(seed);
    init_table(&mut init, base, "word_embeddings", v, h, Some(pad))?;
    init_table(&mut init, base, "position_embeddings", shape.context, h, None)?;
    init_table(&mut init, base, "token_type_embeddings", 2, h, None)?;
    if let Some(types) = task_types {
        init_table(&mut init, base, "task_type_embeddings", types, h, None)?;
    }
    init.layer_norm(&format!("{base}.embeddings.LayerNorm"), h);
    let layers: Vec<String> = (0..shape.layers).map(|i| format!("{base}.encoder.layer.{i}")).collect();
    init_layers(&mut init, &BERT_LAYER, &layers, h)?;
    init.linear(&format!("{base}.pooler.dense"), h, h, INIT_STD)?;
    training.fresh_masked_lm_head(&mut init, h, h, v)?;
    init.linear("cls.seq_relationship", 2, h, INIT_STD)?;
    Ok(TrainingFolder::new(config_bytes(&config)?, init.serialize()?))
}

/// The tensors of BERT's heads, which a checkpoint of another head may hold.
pub(crate) const BERT_OTHER_HEADS: &[Unread] = &[Unread::Prefix("cls."), Unread::Prefix("classifier."), Unread::Prefix("qa_outputs.")];

/// BERT config (`model_type: "bert"`); ERNIE's adds task types.
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
    #[serde(default = "default_eps")]
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
    /// Only "absolute" (learned positions) is supported.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    #[serde(flatten)]
    pub head: HeadConfig,
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
fn default_eps() -> f64 {
    1e-12
}

impl BertConfig {
    pub fn from_json(json: &[u8]) -> Result<BertConfig> {
        let c: BertConfig = from_json(json)?;
        c.encoder_config()?;
        Ok(c)
    }

    /// The shared encoder's view of this config.
    pub fn encoder_config(&self) -> Result<EncoderConfig> {
        check_heads("hidden_size", self.hidden_size, "num_attention_heads", self.num_attention_heads)?;
        if let Some(other) = self.position_embedding_type.as_deref().filter(|&t| t != "absolute") {
            return Err(super::config::config_err(format!("position_embedding_type `{other}` is not supported (only \"absolute\")")));
        }
        Ok(EncoderConfig {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            embedding_size: self.hidden_size,
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
            classifier_dropout: self.classifier_dropout,
            span_dropout: None,
            dropout_sites: LayerSites::ALL,
            head: self.head.clone(),
        })
    }
}

/// `cls.predictions`: transform (dense, activation, LayerNorm), the decoder tied to the word
/// embeddings, and the output bias.
pub(crate) const BERT_LM_HEAD: LmHeadNames =
    LmHeadNames { dense: "transform.dense", layer_norm: "transform.LayerNorm", decoder: "decoder", bias: Some("bias") };

/// Loads a BERT checkpoint in the Hugging Face layout. The head follows `architectures`
/// (default `BertModel`); the `bert.` prefix is optional (MiniLM sentence encoders lack it).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Encoder> {
    load_bert_like(BertConfig::from_json(config_json)?.encoder_config()?, root, "bert", "Bert", &FAMILY)
}

/// BERT's module tree under `prefix` (optional in the checkpoint) with the heads of `class`
/// (`BertForMaskedLM`, …): BERT's and ERNIE's.
pub(crate) fn load_bert_like(c: EncoderConfig, root: &Weights, prefix: &str, class: &str, family: &Family) -> Result<Encoder> {
    let w = if root.contains(&format!("{prefix}.embeddings.word_embeddings.weight")) { root.pp(prefix) } else { root.clone() };
    let h = c.hidden_size;
    let embeddings = Embeddings::load(&w.pp("embeddings"), &c)?;
    let layers = (0..c.num_hidden_layers).map(|i| EncoderLayer::load(&w.pp("encoder.layer").pp(i), &c, &BERT_LAYER)).collect::<Result<Vec<_>>>()?;
    let pooler_weights = w.pp("pooler.dense");
    let pooler = optional_pooler(&pooler_weights, h)?;

    let architecture = c.head.architecture(&format!("{class}Model")).to_string();
    let (cls, labels) = (root.pp("cls"), c.head.num_labels());
    let lm = || MaskedLmHead::load(&cls.pp("predictions"), &BERT_LM_HEAD, &c, c.activation, &embeddings.word_embeddings);
    let head = match architecture.strip_prefix(class) {
        Some("Model") => EncoderHead::Base,
        Some("ForMaskedLM") => EncoderHead::MaskedLm(lm()?),
        Some("ForPreTraining") => EncoderHead::PreTraining(lm()?, SentencePairHead::next_sentence(Linear::load(&cls.pp("seq_relationship"), h, 2)?)),
        Some("ForNextSentencePrediction") => EncoderHead::NextSentence(Linear::load(&cls.pp("seq_relationship"), h, 2)?),
        Some("ForSequenceClassification") => EncoderHead::SequenceClassification(SequenceHead::Pooled(Linear::load(&root.pp("classifier"), h, labels)?)),
        Some("ForTokenClassification") => EncoderHead::TokenClassification(Linear::load(&root.pp("classifier"), h, labels)?),
        Some("ForQuestionAnswering") => EncoderHead::QuestionAnswering(SpanHead::load(root, h)?),
        Some("ForMultipleChoice") => EncoderHead::MultipleChoice(SequenceHead::Pooled(Linear::load(&root.pp("classifier"), h, 1)?)),
        _ => return Err(family.unsupported(&architecture)),
    };
    check_pooler(&head, &pooler, &pooler_weights, &architecture)?;
    let schedule = (0..layers.len()).collect();
    Ok(Encoder::new(c, architecture, EncoderParts { embeddings, projection: None, layers, schedule, pooler, final_norm: None }, head))
}
