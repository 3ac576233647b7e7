//! ERNIE (Sun et al. 2019; ERNIE 2.0 and 3.0), as transformers' `modeling_ernie.py`: BERT's
//! module tree and heads under `ernie.`, plus task type embeddings when `use_task_id` (the
//! task of ERNIE 2.0's continual multi-task pre-training; task type ids default to 0 and are
//! added even then, as transformers does).

use serde::Deserialize;

#[cfg(feature = "training")]
use super::bert::{self, fresh_pretraining};
use super::bert::{load_bert_like, BertConfig, BERT_OTHER_HEADS};
use super::config::from_json;
#[cfg(feature = "training")]
use super::encoder::fresh::EncoderTraining;
use super::encoder::{Encoder, EncoderConfig};
use super::family::Family;
#[cfg(feature = "training")]
use super::training::fresh::Fresh;
use crate::error::Result;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "ernie",
    name: "ERNIE",
    architectures: &[
        "ErnieModel",
        "ErnieForMaskedLM",
        "ErnieForPreTraining",
        "ErnieForNextSentencePrediction",
        "ErnieForSequenceClassification",
        "ErnieForTokenClassification",
        "ErnieForQuestionAnswering",
        "ErnieForMultipleChoice",
    ],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::WordPiece,
    unread: BERT_OTHER_HEADS,
    dropout_keys: &["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"],
    #[cfg(feature = "training")]
    training: Some(&TRAINING),
};

/// ERNIE trains as BERT does, its heads under BERT's names; a fresh model is an
/// `ErnieForPreTraining` with three task type embeddings (ERNIE 2.0's tasks).
#[cfg(feature = "training")]
pub const TRAINING: EncoderTraining = EncoderTraining {
    class: "Ernie",
    base: "ernie",
    fresh: Some(Fresh::Shaped { pads: true, make: |shape, vocabulary, seed| fresh_pretraining(&TRAINING, "ernie", shape, vocabulary, seed, Some(3)) }),
    joint_folder: None,
    load,
    ..bert::TRAINING
};

/// ERNIE config (`model_type: "ernie"`): BERT's, and the task types.
#[derive(Clone, Debug, Deserialize)]
pub struct ErnieConfig {
    #[serde(flatten)]
    pub bert: BertConfig,
    #[serde(default)]
    pub use_task_id: bool,
    #[serde(default = "default_task_types")]
    pub task_type_vocab_size: usize,
}

fn default_task_types() -> usize {
    3
}

impl ErnieConfig {
    pub fn encoder_config(&self) -> Result<EncoderConfig> {
        Ok(EncoderConfig { task_type_vocab_size: self.use_task_id.then_some(self.task_type_vocab_size), ..self.bert.encoder_config()? })
    }
}

/// Loads an ERNIE checkpoint in the Hugging Face layout (the `ernie.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Encoder> {
    let config: ErnieConfig = from_json(config_json)?;
    load_bert_like(config.encoder_config()?, root, "ernie", "Ernie", &FAMILY)
}
