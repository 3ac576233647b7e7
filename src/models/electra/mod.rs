//! ELECTRA (Clark et al. 2020), as transformers' `modeling_electra.py`: BERT's encoder with
//! E-wide embeddings projected to the hidden size (`embeddings_project`, when E ≠ H), no
//! pooler, pretrained as a discriminator telling replaced tokens from original ones
//! (`discriminator_predictions`: one logit per token) against a small masked-LM generator
//! (`generator_predictions` + `generator_lm_head`). [`train`] pretrains the two together.

pub mod pretraining_folder;
#[cfg(feature = "training")]
pub mod train;

use serde::Deserialize;

use super::bert::BertConfig;
use super::config::{activation, config_err, from_json};
#[cfg(feature = "training")]
use super::encoder::fresh::{EncoderHeads, EncoderTraining, SequenceClassifier};
use super::encoder::{
    Embeddings, Encoder, EncoderConfig, EncoderHead, EncoderLayer, EncoderParts, LmHeadNames, MaskedLmHead, MlpHead, SequenceHead, SpanHead, BERT_LAYER,
};
use super::family::{Family, Unread};
#[cfg(feature = "training")]
use super::training::fresh::Fresh;
#[cfg(feature = "training")]
use super::training::{FolderPart, JointFolder, Objective};
use crate::error::Result;
use crate::nn::{Activation, Linear};
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "electra",
    name: "ELECTRA",
    architectures: &[
        "ElectraModel",
        "ElectraForPreTraining",
        "ElectraForMaskedLM",
        "ElectraForSequenceClassification",
        "ElectraForTokenClassification",
        "ElectraForQuestionAnswering",
        "ElectraForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::WordPiece,
    unread: &[
        Unread::Prefix("discriminator_predictions."),
        Unread::Prefix("generator_predictions."),
        Unread::Prefix("generator_lm_head."),
        Unread::Prefix("classifier."),
        Unread::Prefix("sequence_summary."),
        Unread::Prefix("qa_outputs."),
    ],
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

/// ELECTRA's training: pretraining a generator and discriminator together (objective electra,
/// [`train`]), the discriminator alone (rtd), the generator's masked LM, and the fine-tuning
/// heads, its sequence classifier an MLP on the first token; a fresh model is a pretraining
/// folder. No fresh multiple-choice head (its sequence summary) or masked-LM head (the
/// generator is a model of its own) is made.
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "Electra",
    base: "electra",
    width_key: "hidden_size",
    pretraining: &[Objective::Mlm, Objective::Rtd, Objective::Electra],
    load,
    heads: EncoderHeads {
        sequence: SequenceClassifier::FirstToken { dense: "classifier.dense", out: "classifier.out_proj" },
        multiple_choice: None,
        masked_lm: None,
    },
    fresh: Some(Fresh::Shaped { pads: true, make: train::fresh_pretraining_folder }),
    joint_folder: Some(JointFolder {
        name: "ELECTRA pretraining folder",
        objective: Objective::Electra,
        other_config: "generator_config.json",
        load: |discriminator, generator, weights| Ok(Box::new(train::ElectraPretraining::load(discriminator, generator, weights)?)),
        parts: |discriminator, generator, checkpoint| {
            let [discriminator, generator] = pretraining_folder::model_folders(discriminator, generator, checkpoint)?;
            let part = |prefix, (config_json, safetensors)| FolderPart { prefix, config_json, safetensors };
            Ok(vec![part("discriminator/", discriminator), part("generator/", generator)])
        },
    }),
};

/// ELECTRA config (`model_type: "electra"`): BERT's, the embedding size, and how the
/// multiple-choice head summarizes a sequence.
#[derive(Clone, Debug, Deserialize)]
pub struct ElectraConfig {
    #[serde(flatten)]
    pub bert: BertConfig,
    #[serde(default = "default_embedding_size")]
    pub embedding_size: usize,
    #[serde(default = "default_summary_type")]
    pub summary_type: String,
    #[serde(default = "default_true")]
    pub summary_use_proj: bool,
    #[serde(default = "default_summary_activation")]
    pub summary_activation: Option<String>,
}

fn default_embedding_size() -> usize {
    128
}
fn default_summary_type() -> String {
    "first".into()
}
fn default_true() -> bool {
    true
}
fn default_summary_activation() -> Option<String> {
    Some("gelu".into())
}

impl ElectraConfig {
    pub fn encoder_config(&self) -> Result<EncoderConfig> {
        Ok(EncoderConfig { embedding_size: self.embedding_size, ..self.bert.encoder_config()? })
    }

    /// The multiple-choice head's summary of a choice: its first token through
    /// `sequence_summary.summary` and the activation (the settings transformers' ELECTRA
    /// uses; the others are refused).
    fn summary_activation(&self) -> Result<Activation> {
        match (self.summary_type.as_str(), self.summary_use_proj, self.summary_activation.as_deref()) {
            ("first", true, Some(name)) => activation("summary_activation", name),
            _ => Err(config_err(format!(
                "ElectraForMultipleChoice with summary_type `{}`, summary_use_proj {}, summary_activation {:?} is not supported (only \"first\", true, an activation)",
                self.summary_type, self.summary_use_proj, self.summary_activation
            ))),
        }
    }
}

/// The generator's `generator_predictions` (dense H → E, GELU, LayerNorm) and
/// `generator_lm_head` (E → V, tied, with its bias).
const GENERATOR_HEAD: LmHeadNames =
    LmHeadNames { dense: "generator_predictions.dense", layer_norm: "generator_predictions.LayerNorm", decoder: "generator_lm_head", bias: None };

/// Loads an ELECTRA checkpoint in the Hugging Face layout (the `electra.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Encoder> {
    let config: ElectraConfig = from_json(config_json)?;
    let c = config.encoder_config()?;
    let w = if root.contains("electra.embeddings.word_embeddings.weight") { root.pp("electra") } else { root.clone() };
    let (e, h) = (c.embedding_size, c.hidden_size);
    let embeddings = Embeddings::load(&w.pp("embeddings"), &c)?;
    let projection = (e != h).then(|| Linear::load(&w.pp("embeddings_project"), e, h)).transpose()?;
    let layers = (0..c.num_hidden_layers).map(|i| EncoderLayer::load(&w.pp("encoder.layer").pp(i), &c, &BERT_LAYER)).collect::<Result<Vec<_>>>()?;

    let architecture = c.head.architecture("ElectraModel").to_string();
    let labels = c.head.num_labels();
    let head = match architecture.strip_prefix("Electra") {
        Some("Model") => EncoderHead::Base,
        Some("ForPreTraining") => {
            let d = root.pp("discriminator_predictions");
            EncoderHead::ReplacedTokens(MlpHead::load(&d.pp("dense"), c.activation, &d.pp("dense_prediction"), h, 1)?)
        }
        Some("ForMaskedLM") => EncoderHead::MaskedLm(MaskedLmHead::load(root, &GENERATOR_HEAD, &c, Activation::Gelu, &embeddings.word_embeddings)?),
        Some("ForSequenceClassification") => {
            let classifier = root.pp("classifier");
            EncoderHead::SequenceClassification(SequenceHead::FirstToken(
                MlpHead::load(&classifier.pp("dense"), Activation::Gelu, &classifier.pp("out_proj"), h, labels)?.dropping_input(),
            ))
        }
        Some("ForTokenClassification") => EncoderHead::TokenClassification(Linear::load(&root.pp("classifier"), h, labels)?),
        Some("ForQuestionAnswering") => EncoderHead::QuestionAnswering(SpanHead::load(root, h)?),
        Some("ForMultipleChoice") => EncoderHead::MultipleChoice(SequenceHead::FirstToken(MlpHead::load(
            &root.pp("sequence_summary.summary"),
            config.summary_activation()?,
            &root.pp("classifier"),
            h,
            1,
        )?)),
        _ => return Err(FAMILY.unsupported(&architecture)),
    };
    let schedule = (0..layers.len()).collect();
    Ok(Encoder::new(c, architecture, EncoderParts { embeddings, projection, layers, schedule, pooler: None, final_norm: None }, head))
}
