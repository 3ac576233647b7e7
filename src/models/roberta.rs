//! RoBERTa (Liu et al. 2019) and XLM-RoBERTa (Conneau et al. 2020), as transformers'
//! `modeling_roberta.py` / `modeling_xlm_roberta.py`: BERT's encoder, with positions counted
//! after the padding id (the first real token sits at pad + 1), one token type, and its own
//! heads — `lm_head` (dense, erf GELU, `layer_norm`, tied decoder + bias) and a classifier
//! (`classifier.dense`, tanh, `classifier.out_proj` on `<s>`). XLM-RoBERTa is the same
//! module tree under other names. XLM-RoBERTa-XL and -XXL (Goyal et al. 2021,
//! `modeling_xlm_roberta_xl.py`) are that tree pre-LayerNorm: no LayerNorm on the embeddings,
//! each sublayer's before it (`attention.self_attn_layer_norm`, `LayerNorm`), and one after
//! the last layer (`encoder.LayerNorm`).

use super::bert::BertConfig;
use super::config::from_json;
#[cfg(feature = "training")]
use super::encoder::fresh::{
    check_pad, fresh_config, init_layers, init_table, EncoderHeads, EncoderTraining, MaskedLmHeadNames, SequenceClassifier, POOLED_BERT,
};
use super::encoder::{
    check_pooler, optional_pooler, Embeddings, Encoder, EncoderHead, EncoderLayer, EncoderParts, LayerNames, LmHeadNames, MaskedLmHead, MlpHead, Norm,
    Positions, SequenceHead, SpanHead, BERT_LAYER,
};
use super::family::{Family, Unread};
#[cfg(feature = "training")]
use super::training::fresh::{config_bytes, Fresh, FreshShape, FreshVocabulary, Init, TrainingFolder};
#[cfg(feature = "training")]
use super::training::Objective;
use crate::error::Result;
use crate::nn::{Activation, LayerNorm, Linear};
use crate::ops::dropout::LayerSites;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

const ARCHITECTURES: &[&str] = &[
    "RobertaModel",
    "RobertaForMaskedLM",
    "RobertaForSequenceClassification",
    "RobertaForTokenClassification",
    "RobertaForQuestionAnswering",
    "RobertaForMultipleChoice",
];

pub const FAMILY: Family = Family {
    model_type: "roberta",
    name: "RoBERTa",
    architectures: ARCHITECTURES,
    load: |config, weights| Ok(Box::new(load(config, weights, "Roberta", &FAMILY, Norm::Post)?)),
    vocabulary: Vocabulary::RobertaBpe,
    unread: OTHER_HEADS,
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

pub const XLM_FAMILY: Family = Family {
    model_type: "xlm-roberta",
    name: "XLM-RoBERTa",
    architectures: &[
        "XLMRobertaModel",
        "XLMRobertaForMaskedLM",
        "XLMRobertaForSequenceClassification",
        "XLMRobertaForTokenClassification",
        "XLMRobertaForQuestionAnswering",
        "XLMRobertaForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights, "XLMRoberta", &XLM_FAMILY, Norm::Post)?)),
    vocabulary: Vocabulary::SentencePiece,
    unread: OTHER_HEADS,
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&XLM_TRAINING),
};

pub const XLM_XL_FAMILY: Family = Family {
    model_type: "xlm-roberta-xl",
    name: "XLM-RoBERTa-XL",
    architectures: &[
        "XLMRobertaXLModel",
        "XLMRobertaXLForMaskedLM",
        "XLMRobertaXLForSequenceClassification",
        "XLMRobertaXLForTokenClassification",
        "XLMRobertaXLForQuestionAnswering",
        "XLMRobertaXLForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights, "XLMRobertaXL", &XLM_XL_FAMILY, Norm::Pre)?)),
    vocabulary: Vocabulary::SentencePiece,
    unread: OTHER_HEADS,
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&XLM_XL_TRAINING),
};

/// RoBERTa's training: masked LM (no next-sentence head) and every fine-tuning head, its
/// sequence classifier an MLP on `<s>` and its multiple choice on the pooler; a fresh model
/// is a `RobertaForMaskedLM`.
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "Roberta",
    base: "roberta",
    width_key: "hidden_size",
    pretraining: &[Objective::Mlm],
    load: |config, weights| load(config, weights, "Roberta", &FAMILY, Norm::Post),
    heads: EncoderHeads {
        sequence: SequenceClassifier::FirstToken { dense: "classifier.dense", out: "classifier.out_proj" },
        multiple_choice: Some(POOLED_BERT),
        masked_lm: Some(MaskedLmHeadNames {
            dense: "lm_head.dense",
            layer_norm: "lm_head.layer_norm",
            bias: "lm_head.bias",
            roots: &["lm_head"],
            pair_head: None,
        }),
    },
    fresh: Some(Fresh::Shaped { pads: true, make: fresh }),
    joint_folder: None,
};

/// XLM-RoBERTa trains as RoBERTa does (no fresh model: its tokenizer is SentencePiece's).
#[cfg(feature = "training")]
pub const XLM_TRAINING: EncoderTraining =
    EncoderTraining { class: "XLMRoberta", load: |config, weights| load(config, weights, "XLMRoberta", &XLM_FAMILY, Norm::Post), fresh: None, ..TRAINING };

/// XLM-RoBERTa-XL trains as RoBERTa does, its layers pre-LN.
#[cfg(feature = "training")]
pub const XLM_XL_TRAINING: EncoderTraining = EncoderTraining {
    class: "XLMRobertaXL",
    load: |config, weights| load(config, weights, "XLMRobertaXL", &XLM_XL_FAMILY, Norm::Pre),
    fresh: None,
    joint_folder: None,
    ..TRAINING
};

/// A fresh `RobertaForMaskedLM`, drawn as transformers' `_init_weights` draws it: BERT's
/// encoder with one token type, positions counted after the padding id (its row and the
/// padding word's 0), and the masked-LM head `lm_head`.
#[cfg(feature = "training")]
fn fresh(shape: &FreshShape, vocabulary: &FreshVocabulary, seed: u64) -> Result<TrainingFolder> {
    shape.validate(vocabulary.size)?;
    let (h, v, pad) = (shape.width, vocabulary.size, vocabulary.pad.unwrap_or(0) as usize);
    check_pad(pad, v)?;
    let positions = shape.context + pad + 1;
    let config = fresh_config("roberta", "RobertaForMaskedLM", shape, v, positions, 1, pad);
    let mut init = Init::new(seed);
    init_table(&mut init, "roberta", "word_embeddings", v, h, Some(pad))?;
    init_table(&mut init, "roberta", "position_embeddings", positions, h, Some(pad))?;
    init_table(&mut init, "roberta", "token_type_embeddings", 1, h, None)?;
    init.layer_norm("roberta.embeddings.LayerNorm", h);
    let layers: Vec<String> = (0..shape.layers).map(|i| format!("roberta.encoder.layer.{i}")).collect();
    init_layers(&mut init, &BERT_LAYER, &layers, h)?;
    TRAINING.fresh_masked_lm_head(&mut init, h, h, v)?;
    Ok(TrainingFolder::new(config_bytes(&config)?, init.serialize()?))
}

/// XLM-RoBERTa-XL's pre-LN layer: each LayerNorm before its sublayer.
const PRE_LN_LAYER: LayerNames = LayerNames { attention_norm: "attention.self_attn_layer_norm", output_norm: "LayerNorm", ..BERT_LAYER };

/// The tensors of the other heads, and the pooler, which only the base model and multiple
/// choice read (transformers builds the others without it).
const OTHER_HEADS: &[Unread] =
    &[Unread::Prefix("lm_head."), Unread::Prefix("classifier."), Unread::Prefix("qa_outputs."), Unread::Prefix("roberta.pooler."), Unread::Prefix("pooler.")];

/// `lm_head`: dense, GELU, `layer_norm`, and the decoder (tied) with `lm_head.bias`.
const LM_HEAD: LmHeadNames = LmHeadNames { dense: "dense", layer_norm: "layer_norm", decoder: "decoder", bias: Some("bias") };

/// Loads a RoBERTa-architecture checkpoint whose classes are `class`… (`Roberta`,
/// `XLMRoberta`, `XLMRobertaXL`), its layers post- or pre-LN; the `roberta.` prefix is optional.
pub fn load(config_json: &[u8], root: &Weights, class: &str, family: &Family, norm: Norm) -> Result<Encoder> {
    let mut config: BertConfig = from_json(config_json)?;
    // RoBERTa's default padding id is 1, and its positions count from there.
    let pad = *config.head.pad_token_id.get_or_insert(1);
    // XLM-RoBERTa-XL's feed-forward block drops nothing before its residual.
    let dropout_sites = match norm {
        Norm::Post => LayerSites::ALL,
        Norm::Pre => LayerSites { attention_output: true, feed_forward_output: false },
    };
    let c = super::encoder::EncoderConfig { positions: Positions::AfterPadding(pad), norm, dropout_sites, ..config.encoder_config()? };
    let layer_names = match norm {
        Norm::Post => &BERT_LAYER,
        Norm::Pre => &PRE_LN_LAYER,
    };
    let w = if root.contains("roberta.embeddings.word_embeddings.weight") { root.pp("roberta") } else { root.clone() };
    let h = c.hidden_size;
    let embeddings = Embeddings::load(&w.pp("embeddings"), &c)?;
    let layers = (0..c.num_hidden_layers).map(|i| EncoderLayer::load(&w.pp("encoder.layer").pp(i), &c, layer_names)).collect::<Result<Vec<_>>>()?;
    let final_norm = (norm == Norm::Pre).then(|| LayerNorm::load(&w.pp("encoder.LayerNorm"), c.hidden_size, c.layer_norm_eps)).transpose()?;
    let architecture = c.head.architecture(&format!("{class}Model")).to_string();
    let suffix = architecture.strip_prefix(class);
    // Only the base model and multiple choice have the pooler.
    let pooler_weights = w.pp("pooler.dense");
    let pooler = match suffix {
        Some("Model" | "ForMultipleChoice") => optional_pooler(&pooler_weights, h)?,
        _ => None,
    };
    let labels = c.head.num_labels();
    let head = match suffix {
        Some("Model") => EncoderHead::Base,
        Some("ForMaskedLM") => EncoderHead::MaskedLm(MaskedLmHead::load(&root.pp("lm_head"), &LM_HEAD, &c, Activation::Gelu, &embeddings.word_embeddings)?),
        Some("ForSequenceClassification") => {
            let classifier = root.pp("classifier");
            EncoderHead::SequenceClassification(SequenceHead::FirstToken(
                MlpHead::load(&classifier.pp("dense"), Activation::Tanh, &classifier.pp("out_proj"), h, labels)?.dropping_input(),
            ))
        }
        Some("ForTokenClassification") => EncoderHead::TokenClassification(Linear::load(&root.pp("classifier"), h, labels)?),
        Some("ForQuestionAnswering") => EncoderHead::QuestionAnswering(SpanHead::load(root, h)?),
        Some("ForMultipleChoice") => EncoderHead::MultipleChoice(SequenceHead::Pooled(Linear::load(&root.pp("classifier"), h, 1)?)),
        _ => return Err(family.unsupported(&architecture)),
    };
    check_pooler(&head, &pooler, &pooler_weights, &architecture)?;
    let schedule = (0..layers.len()).collect();
    Ok(Encoder::new(c, architecture, EncoderParts { embeddings, projection: None, layers, schedule, pooler, final_norm }, head))
}
