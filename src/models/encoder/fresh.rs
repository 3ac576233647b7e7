//! How an encoder family trains ([`EncoderTraining`], in its registry entry): its objectives,
//! the heads a fine-tuning run adds to a checkpoint without one — under the names the family's
//! `…For<Task>` classes give them ([`EncoderHeads`]), drawn as transformers' `from_pretrained`
//! draws missing ones (weights N(0, 0.02), biases 0) — and the parts a fresh model of the
//! family is built from (BERT's config keys, embeddings with a zero padding row, layers).

use super::{Encoder, LayerNames};
use crate::error::{arg_err, Result};
use crate::models::training::fresh::{config_bytes, config_size, parse_config, with_labels, Fresh, FreshShape, Init, INIT_STD};
use crate::models::training::{FamilyTraining, JointFolder, Objective, Trainable};
use crate::weights::{Checkpoint, Weights};

/// An encoder family's training, as its registry entry holds it.
pub struct EncoderTraining {
    /// The classes' prefix (`Bert` in `BertForSequenceClassification`).
    pub class: &'static str,
    /// transformers' `base_model_prefix` (`bert`).
    pub base: &'static str,
    /// The config key of the hidden size (`hidden_size`, DistilBERT's `dim`).
    pub width_key: &'static str,
    /// Its pretraining objectives; it fine-tunes with every one of [`FINE_TUNING`].
    pub pretraining: &'static [Objective],
    pub load: fn(&[u8], &Weights) -> Result<Encoder>,
    pub heads: EncoderHeads,
    pub fresh: Option<Fresh>,
    /// Where its models pretrain together (ELECTRA's generator and discriminator).
    pub joint_folder: Option<JointFolder>,
}

/// Where an encoder family's classes keep their heads.
pub struct EncoderHeads {
    /// `…ForSequenceClassification`'s.
    pub sequence: SequenceClassifier,
    /// `…ForMultipleChoice`'s (one score per choice); None when no fresh one is made (ELECTRA's
    /// sequence summary: a trained one loads).
    pub multiple_choice: Option<SequenceClassifier>,
    /// `…ForMaskedLM`'s; None when the family's masked LM is a model of its own (ELECTRA's
    /// generator).
    pub masked_lm: Option<MaskedLmHeadNames>,
}

/// A family's sequence classifier.
pub enum SequenceClassifier {
    /// `classifier` on the pooler (named under the base model), which is added when the
    /// checkpoint has none (a masked-LM checkpoint's encoder often has not).
    Pooled { pooler: &'static str },
    /// `dense` (H → H), then `out` (H → labels), on the first token.
    FirstToken { dense: &'static str, out: &'static str },
}

/// BERT's sequence classifier: `classifier` on `pooler.dense`.
pub const POOLED_BERT: SequenceClassifier = SequenceClassifier::Pooled { pooler: "pooler.dense" };

/// A family's masked-LM head: the transform's dense layer (H → E) and LayerNorm and the
/// output bias (the decoder is tied to the word embeddings), the first components of all its
/// weight names, and the sentence-pair head its `…ForPreTraining` adds.
pub struct MaskedLmHeadNames {
    pub dense: &'static str,
    pub layer_norm: &'static str,
    pub bias: &'static str,
    pub roots: &'static [&'static str],
    pub pair_head: Option<&'static str>,
}

/// BERT's and ERNIE's `cls.predictions`, with the next-sentence head `cls.seq_relationship`.
pub const BERT_MASKED_LM: MaskedLmHeadNames = MaskedLmHeadNames {
    dense: "cls.predictions.transform.dense",
    layer_norm: "cls.predictions.transform.LayerNorm",
    bias: "cls.predictions.bias",
    roots: &["cls"],
    pair_head: Some("cls.seq_relationship"),
};

/// The fine-tuning objectives every encoder family trains, each with a head its classes have.
pub const FINE_TUNING: [Objective; 5] = [Objective::Classify, Objective::TokenClassify, Objective::Qa, Objective::MultipleChoice, Objective::MultiTask];

/// The heads of the fine-tuning objectives, whose weights a multi-task checkpoint keeps per task.
const FINE_TUNING_ROOTS: &[&str] = &["classifier", "pre_classifier", "qa_outputs"];

impl FamilyTraining for EncoderTraining {
    fn objectives(&self) -> Vec<Objective> {
        self.pretraining.iter().chain(&FINE_TUNING).copied().collect()
    }

    fn load(&self, config_json: &[u8], weights: &Weights, _objective: Objective) -> Result<Box<dyn Trainable>> {
        Ok(Box::new((self.load)(config_json, weights)?))
    }

    fn joint_folder(&self) -> Option<&JointFolder> {
        self.joint_folder.as_ref()
    }

    /// classify: BERT's, ERNIE's and ALBERT's `classifier` on the pooler (a pooler added when
    /// there is none); RoBERTa's, XLM-RoBERTa's and ELECTRA's `classifier.dense` and
    /// `classifier.out_proj` on the first token; DistilBERT's `pre_classifier` and
    /// `classifier`. token-classify: `classifier` on every token; qa: the span head
    /// `qa_outputs`; multiple-choice: one score per choice; mlm: the masked-LM head a
    /// `…ForPreTraining` has kept (its pair head dropped), else a fresh one.
    fn with_head(&self, objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        let suffix = match objective {
            Objective::Classify => "ForSequenceClassification",
            Objective::TokenClassify => "ForTokenClassification",
            Objective::Qa => "ForQuestionAnswering",
            Objective::MultipleChoice => "ForMultipleChoice",
            Objective::Mlm => "ForMaskedLM",
            _ => return Ok((config_json.to_vec(), safetensors)),
        };
        let mut config = parse_config(config_json)?;
        let current = config["architectures"][0].as_str().unwrap_or_default().to_string();
        if current.ends_with(suffix) {
            return Ok((config_json.to_vec(), safetensors));
        }
        let architecture = format!("{}{suffix}", self.class);
        let hidden = config_size(&config, self.width_key)?;
        if objective == Objective::MultipleChoice
            && ["ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering"].iter().any(|h| current.ends_with(h))
        {
            return Err(arg_err!(
                "model",
                "multiple choice trains a …ForMultipleChoice head; `{current}` is fine-tuned for another task: start from its encoder or pretraining checkpoint"
            ));
        }
        let checkpoint = Checkpoint::from_bytes(safetensors)?;
        let mut init = Init::from_checkpoint(&checkpoint, seed)?;
        match objective {
            Objective::Classify => self.init_sequence_head(&mut init, &checkpoint, &self.heads.sequence, labels.len(), hidden)?,
            Objective::TokenClassify => init.linear("classifier", labels.len(), hidden, INIT_STD)?,
            Objective::Qa => init.linear("qa_outputs", 2, hidden, INIT_STD)?,
            Objective::MultipleChoice => {
                let head = self.heads.multiple_choice.as_ref().ok_or_else(|| {
                    arg_err!("model", "no fresh {} multiple-choice head (a sequence summary) is made: start from an …ForMultipleChoice checkpoint", self.base)
                })?;
                self.init_sequence_head(&mut init, &checkpoint, head, 1, hidden)?;
            }
            _ => {
                let names = self.heads.masked_lm.as_ref().ok_or_else(|| {
                    arg_err!("model", "{}'s masked LM is its generator, a model of its own: train it from the generator's checkpoint", self.base)
                })?;
                if !checkpoint.contains(&format!("{}.weight", names.dense)) {
                    let (embedding, vocab) = (config["embedding_size"].as_u64().map_or(hidden, |e| e as usize), config_size(&config, "vocab_size")?);
                    init_masked_lm_head(&mut init, names, hidden, embedding, vocab)?;
                }
                if let Some(pair) = names.pair_head {
                    init.tensors.retain(|(name, ..)| !name.starts_with(&format!("{pair}.")));
                }
            }
        }
        let config_json = match objective {
            Objective::Classify | Objective::TokenClassify => with_labels(config, &architecture, labels)?,
            _ => {
                config["architectures"] = serde_json::json!([architecture]);
                config_bytes(&config)?
            }
        };
        Ok((config_json, init.serialize()?))
    }

    fn fresh(&self) -> Option<&Fresh> {
        self.fresh.as_ref()
    }

    fn base_model_prefix(&self) -> Option<&'static str> {
        Some(self.base)
    }

    fn head_roots(&self, objective: Objective) -> &'static [&'static str] {
        match objective {
            Objective::Mlm => self.heads.masked_lm.as_ref().map_or(&[], |m| m.roots),
            _ => FINE_TUNING_ROOTS,
        }
    }

    /// A sequence classifier or multiple-choice head that scores the pooled first token
    /// (BERT's, ERNIE's, ALBERT's; RoBERTa's multiple choice); transformers builds the other
    /// heads' base model without a pooler.
    fn reads_pooler(&self, architecture: &str) -> bool {
        let pooled = |head: Option<&SequenceClassifier>| matches!(head, Some(SequenceClassifier::Pooled { .. }));
        (architecture.ends_with("ForSequenceClassification") && pooled(Some(&self.heads.sequence)))
            || (architecture.ends_with("ForMultipleChoice") && pooled(self.heads.multiple_choice.as_ref()))
    }
}

impl EncoderTraining {
    /// A fresh `head` of `num_labels` outputs: `classifier` on the pooler (under the base
    /// model's prefix when the checkpoint's weights have it; added when there is none), or
    /// `dense` and `out` on the first token.
    fn init_sequence_head(&self, init: &mut Init, checkpoint: &Checkpoint, head: &SequenceClassifier, num_labels: usize, hidden: usize) -> Result<()> {
        match *head {
            SequenceClassifier::Pooled { pooler } => {
                let prefixed = checkpoint.contains(&format!("{}.embeddings.word_embeddings.weight", self.base));
                let pooler = if prefixed { format!("{}.{pooler}", self.base) } else { pooler.to_string() };
                if !checkpoint.contains(&format!("{pooler}.weight")) {
                    init.linear(&pooler, hidden, hidden, INIT_STD)?;
                }
                init.linear("classifier", num_labels, hidden, INIT_STD)
            }
            SequenceClassifier::FirstToken { dense, out } => {
                init.linear(dense, hidden, hidden, INIT_STD)?;
                init.linear(out, num_labels, hidden, INIT_STD)
            }
        }
    }

    /// A fresh model's masked-LM head (the family's names, `hidden` → `embedding` wide, over
    /// `vocab`), its decoder tied to the word embeddings.
    pub fn fresh_masked_lm_head(&self, init: &mut Init, hidden: usize, embedding: usize, vocab: usize) -> Result<()> {
        let names = self.heads.masked_lm.as_ref().ok_or_else(|| arg_err!("model", "{} has no masked-LM head", self.base))?;
        init_masked_lm_head(init, names, hidden, embedding, vocab)
    }
}

/// A fresh masked-LM head named as `names` says: the transform's dense layer from the hidden
/// size to the embedding size, its LayerNorm and the output bias (0) over the vocabulary.
fn init_masked_lm_head(init: &mut Init, names: &MaskedLmHeadNames, hidden: usize, embedding: usize, vocab: usize) -> Result<()> {
    init.linear(names.dense, embedding, hidden, INIT_STD)?;
    init.layer_norm(names.layer_norm, embedding);
    init.constant(names.bias.to_string(), vocab, 0.0);
    Ok(())
}

/// The config.json keys of a fresh encoder, as BERT names them: `model_type`, its class
/// `architecture`, and its sizes (4·width feed-forward, no dropout: `sesame train --dropout`
/// sets it), padding with `pad` and `type_vocab_size` token types.
pub fn fresh_config(
    model_type: &str,
    architecture: &str,
    shape: &FreshShape,
    vocab: usize,
    positions: usize,
    type_vocab_size: usize,
    pad: usize,
) -> serde_json::Value {
    serde_json::json!({
        "model_type": model_type,
        "architectures": [architecture],
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "hidden_size": shape.width,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "intermediate_size": 4 * shape.width,
        "hidden_act": "gelu",
        "type_vocab_size": type_vocab_size,
        "layer_norm_eps": 1e-12,
        "initializer_range": INIT_STD,
        "pad_token_id": pad,
        "tie_word_embeddings": true,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    })
}

/// config.json with `extra`'s keys added (a family's own beside BERT's).
pub fn with_keys(mut config: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config
}

/// A fresh embedding table `{base}.embeddings.{name}.weight` [rows, width] drawn N(0, 0.02),
/// row `zero_row` (the padding's) 0.
pub fn init_table(init: &mut Init, base: &str, name: &str, rows: usize, width: usize, zero_row: Option<usize>) -> Result<()> {
    init.normal(format!("{base}.embeddings.{name}.weight"), vec![rows, width], INIT_STD)?;
    if let (Some(row), Some((_, _, values))) = (zero_row, init.tensors.last_mut()) {
        values[row * width..(row + 1) * width].fill(0.0);
    }
    Ok(())
}

/// Post-LN transformer layers of width `h` (a 4·h feed-forward) under each of `layers`.
pub fn init_layers(init: &mut Init, names: &LayerNames, layers: &[String], h: usize) -> Result<()> {
    for l in layers {
        for projection in [names.query, names.key, names.value, names.attention_output] {
            init.linear(&format!("{l}.{projection}"), h, h, INIT_STD)?;
        }
        init.layer_norm(&format!("{l}.{}", names.attention_norm), h);
        init.linear(&format!("{l}.{}", names.intermediate), 4 * h, h, INIT_STD)?;
        init.linear(&format!("{l}.{}", names.output), h, 4 * h, INIT_STD)?;
        init.layer_norm(&format!("{l}.{}", names.output_norm), h);
    }
    Ok(())
}

/// An error unless `pad` is an id of a vocabulary of `vocab`.
pub fn check_pad(pad: usize, vocab: usize) -> Result<()> {
    match pad < vocab {
        true => Ok(()),
        false => Err(arg_err!("model", "pad_token_id {pad} is outside the vocabulary of {vocab}")),
    }
}
