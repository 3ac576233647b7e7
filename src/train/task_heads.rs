//! Fresh task heads: a checkpoint (config.json, model.safetensors) turned into the classifier a
//! fine-tuning run trains when it is not one already, its tensors kept and the head's added as
//! transformers' `from_pretrained` initialises missing ones (weights N(0, 0.02), biases 0),
//! under the names and in the shape each family's `…For<Task>` class has.

use super::init::{Init, INIT_STD};
use super::objective::kind::Objective;
use crate::error::{arg_err, Result, SesameError};
use crate::weights;

/// Where an encoder family keeps what a fresh head needs.
struct EncoderFamily {
    model_type: &'static str,
    /// The classes' prefix (`Bert` in `BertForSequenceClassification`).
    class_prefix: &'static str,
    /// The base model's weight prefix, when the checkpoint has it (`bert.`).
    base: &'static str,
    /// The config key of the hidden size.
    width_key: &'static str,
    sequence: SequenceClassifier,
    /// Its `…ForMultipleChoice` head (one score per choice); None for ELECTRA, whose sequence
    /// summary head Sesame does not make fresh (a trained one loads).
    multiple_choice: Option<SequenceClassifier>,
    /// Its masked-LM head (`…ForMaskedLM`); None for ELECTRA, whose masked LM is the
    /// generator, a model of its own.
    masked_lm: Option<MaskedLmHeadNames>,
}

/// A family's masked-LM head: the transform's dense layer (H → E) and LayerNorm and the
/// output bias (the decoder is tied to the word embeddings), the first components of all its
/// weight names, and the sentence-pair head its `…ForPreTraining` adds.
struct MaskedLmHeadNames {
    dense: &'static str,
    layer_norm: &'static str,
    bias: &'static str,
    roots: &'static [&'static str],
    pair_head: Option<&'static str>,
}

const BERT_MLM: MaskedLmHeadNames = MaskedLmHeadNames {
    dense: "cls.predictions.transform.dense",
    layer_norm: "cls.predictions.transform.LayerNorm",
    bias: "cls.predictions.bias",
    roots: &["cls"],
    pair_head: Some("cls.seq_relationship"),
};
const ROBERTA_MLM: MaskedLmHeadNames =
    MaskedLmHeadNames { dense: "lm_head.dense", layer_norm: "lm_head.layer_norm", bias: "lm_head.bias", roots: &["lm_head"], pair_head: None };

/// A family's sequence classifier.
enum SequenceClassifier {
    /// `classifier` on the pooler (named under the base model), which is added when the
    /// checkpoint has none (a masked-LM checkpoint's encoder often has not).
    Pooled { pooler: &'static str },
    /// `dense` (H → H), then `out` (H → labels), on the first token.
    FirstToken { dense: &'static str, out: &'static str },
}

const POOLED_BERT: SequenceClassifier = SequenceClassifier::Pooled { pooler: "pooler.dense" };
const ROBERTA_CLASSIFIER: SequenceClassifier = SequenceClassifier::FirstToken { dense: "classifier.dense", out: "classifier.out_proj" };

const ENCODERS: [EncoderFamily; 7] = [
    EncoderFamily {
        model_type: "bert",
        class_prefix: "Bert",
        base: "bert",
        width_key: "hidden_size",
        sequence: POOLED_BERT,
        multiple_choice: Some(POOLED_BERT),
        masked_lm: Some(BERT_MLM),
    },
    EncoderFamily {
        model_type: "ernie",
        class_prefix: "Ernie",
        base: "ernie",
        width_key: "hidden_size",
        sequence: POOLED_BERT,
        multiple_choice: Some(POOLED_BERT),
        masked_lm: Some(BERT_MLM),
    },
    EncoderFamily {
        model_type: "albert",
        class_prefix: "Albert",
        base: "albert",
        width_key: "hidden_size",
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
    EncoderFamily {
        model_type: "roberta",
        class_prefix: "Roberta",
        base: "roberta",
        width_key: "hidden_size",
        sequence: ROBERTA_CLASSIFIER,
        multiple_choice: Some(POOLED_BERT),
        masked_lm: Some(ROBERTA_MLM),
    },
    EncoderFamily {
        model_type: "xlm-roberta",
        class_prefix: "XLMRoberta",
        base: "roberta",
        width_key: "hidden_size",
        sequence: ROBERTA_CLASSIFIER,
        multiple_choice: Some(POOLED_BERT),
        masked_lm: Some(ROBERTA_MLM),
    },
    EncoderFamily {
        model_type: "electra",
        class_prefix: "Electra",
        base: "electra",
        width_key: "hidden_size",
        sequence: ROBERTA_CLASSIFIER,
        multiple_choice: None,
        masked_lm: None,
    },
    EncoderFamily {
        model_type: "distilbert",
        class_prefix: "DistilBert",
        base: "distilbert",
        width_key: "dim",
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
];

/// The head weights' first components of an encoder family's `…For<Task>` class trained with
/// `objective`, in a multi-task checkpoint (BERT's pooler is the encoder's, under its prefix).
pub fn head_roots(model_type: &str, objective: Objective) -> &'static [&'static str] {
    match objective {
        Objective::Mlm => masked_lm_names(model_type).map_or(&[], |m| m.roots),
        _ => &["classifier", "pre_classifier", "qa_outputs"],
    }
}

/// An encoder family's masked-LM head, when it has one.
fn masked_lm_names(model_type: &str) -> Option<&'static MaskedLmHeadNames> {
    ENCODERS.iter().find(|f| f.model_type == model_type).and_then(|f| f.masked_lm.as_ref())
}

/// The weight prefix of an encoder family's base model (`bert` for model_type bert): the
/// shared part of a multi-task checkpoint.
pub fn base_model_prefix(model_type: &str) -> Option<&'static str> {
    ENCODERS.iter().find(|f| f.model_type == model_type).map(|f| f.base)
}

/// Whether transformers' `architecture` of an encoder family reads the pooler: a sequence
/// classifier or multiple-choice head that scores the pooled first token (BERT's, ERNIE's,
/// ALBERT's; RoBERTa's multiple choice); the other heads build the base model without one.
pub fn reads_pooler(model_type: &str, architecture: &str) -> bool {
    let pooled = |head: Option<&SequenceClassifier>| matches!(head, Some(SequenceClassifier::Pooled { .. }));
    ENCODERS.iter().filter(|f| f.model_type == model_type).any(|f| {
        (architecture.ends_with("ForSequenceClassification") && pooled(Some(&f.sequence)))
            || (architecture.ends_with("ForMultipleChoice") && pooled(f.multiple_choice.as_ref()))
    })
}

pub(crate) fn parse_config(config_json: &[u8]) -> Result<serde_json::Value> {
    serde_json::from_slice(config_json).map_err(|e| arg_err!("model", "config.json is not valid JSON: {e}"))
}

fn width(config: &serde_json::Value, key: &str) -> Result<usize> {
    Ok(config[key].as_u64().ok_or_else(|| arg_err!("model", "config.json has no {key}"))? as usize)
}

/// A checkpoint turned into a sequence classifier of `num_labels` classes when it is not one:
/// an encoder family's `…ForSequenceClassification` (BERT's, ERNIE's and ALBERT's
/// `classifier` on the pooler, a pooler added when there is none; RoBERTa's, XLM-RoBERTa's and
/// ELECTRA's `classifier.dense` and `classifier.out_proj` on the first token; DistilBERT's
/// `pre_classifier` and `classifier`), or GPT-2's and GPT's `GPT2ForSequenceClassification` /
/// `OpenAIGPTForSequenceClassification` (`score`, no bias, at the last non-pad token; the
/// padding id is `pad_token_id`, else the end-of-text `eos_token_id`).
pub fn with_classifier_head(config_json: &[u8], safetensors: Vec<u8>, num_labels: usize, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let op = "model";
    let mut config = parse_config(config_json)?;
    if config["architectures"][0].as_str().is_some_and(|a| a.ends_with("ForSequenceClassification")) {
        return Ok((config_json.to_vec(), safetensors));
    }
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    let model_type = config["model_type"].as_str().unwrap_or_default().to_string();
    let architecture = match model_type.as_str() {
        kind @ ("gpt2" | "openai-gpt") => {
            let width = width(&config, "n_embd")?;
            if config["pad_token_id"].is_null() {
                config["pad_token_id"] = config["eos_token_id"].clone();
            }
            if config["pad_token_id"].is_null() {
                return Err(arg_err!(op, "a {kind} classifier pads batches with pad_token_id, and config.json has neither it nor an eos_token_id"));
            }
            init.normal("score.weight".into(), vec![num_labels, width], INIT_STD)?;
            if kind == "gpt2" { "GPT2ForSequenceClassification" } else { "OpenAIGPTForSequenceClassification" }.to_string()
        }
        kind => {
            let family = ENCODERS.iter().find(|f| f.model_type == kind).ok_or_else(|| {
                let kind = if kind.is_empty() { "a config without model_type" } else { kind };
                let families: Vec<&str> = ENCODERS.iter().map(|f| f.model_type).chain(["gpt2", "openai-gpt"]).collect();
                arg_err!(op, "sequence classification trains model_type {}, not {kind}", families.join(", "))
            })?;
            let hidden = width(&config, family.width_key)?;
            init_sequence_head(&mut init, &checkpoint, family.base, &family.sequence, num_labels, hidden)?;
            format!("{}ForSequenceClassification", family.class_prefix)
        }
    };
    let names: Vec<String> = (0..num_labels).map(|i| format!("LABEL_{i}")).collect();
    Ok((with_labels(config, &architecture, &names)?, init.serialize()?))
}

/// A fresh `head` of `num_labels` outputs: `classifier` on the pooler (under the base model's
/// prefix `base` when the checkpoint's weights have it; added when there is none), or
/// `dense` and `out` on the first token.
fn init_sequence_head(
    init: &mut Init,
    checkpoint: &weights::Checkpoint,
    base: &str,
    head: &SequenceClassifier,
    num_labels: usize,
    hidden: usize,
) -> Result<()> {
    match *head {
        SequenceClassifier::Pooled { pooler } => {
            let prefixed = checkpoint.contains(&format!("{base}.embeddings.word_embeddings.weight"));
            let pooler = if prefixed { format!("{base}.{pooler}") } else { pooler.to_string() };
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

/// A checkpoint of an encoder family turned into its `…ForMultipleChoice` when it is not one:
/// a fresh head giving one score per choice (`classifier` on the pooler for BERT, ERNIE,
/// ALBERT, RoBERTa and XLM-RoBERTa, a pooler added when there is none; DistilBERT's
/// `pre_classifier` and `classifier`). A model fine-tuned for another task is refused, its
/// head being no start for this one; so is ELECTRA, whose multiple-choice head Sesame lacks.
pub fn with_multiple_choice_head(config_json: &[u8], safetensors: Vec<u8>, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let Some(NewHead { mut config, hidden, architecture, family }) = encoder_without(config_json, "ForMultipleChoice", "multiple choice")? else {
        return Ok((config_json.to_vec(), safetensors));
    };
    let current = config["architectures"][0].as_str().unwrap_or_default();
    if ["ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering"].iter().any(|h| current.ends_with(h)) {
        return Err(arg_err!(
            "model",
            "multiple choice trains a …ForMultipleChoice head; `{current}` is fine-tuned for another task: start from its encoder or pretraining checkpoint"
        ));
    }
    let head = family.multiple_choice.as_ref().ok_or_else(|| {
        arg_err!("model", "no fresh {} multiple-choice head (a sequence summary) is made: start from an …ForMultipleChoice checkpoint", family.model_type)
    })?;
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    init_sequence_head(&mut init, &checkpoint, family.base, head, 1, hidden)?;
    config["architectures"] = serde_json::json!([architecture]);
    Ok((serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))?, init.serialize()?))
}

/// A checkpoint of an encoder family turned into its `…ForTokenClassification` over the
/// classes `labels` (by id; written as config.json's id2label) when it is not one: a fresh
/// `classifier` on every token (every family names it so).
pub fn with_token_classifier_head(config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let Some(NewHead { config, hidden, architecture, .. }) = encoder_without(config_json, "ForTokenClassification", "token classification")? else {
        return Ok((config_json.to_vec(), safetensors));
    };
    let mut init = Init::from_checkpoint(&weights::Checkpoint::from_bytes(safetensors)?, seed)?;
    init.linear("classifier", labels.len(), hidden, INIT_STD)?;
    Ok((with_labels(config, &architecture, labels)?, init.serialize()?))
}

/// A checkpoint of an encoder family turned into its `…ForQuestionAnswering` when it is not
/// one: a fresh span head `qa_outputs` (a start and an end logit per token; every family
/// names it so).
pub fn with_question_answering_head(config_json: &[u8], safetensors: Vec<u8>, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let Some(NewHead { mut config, hidden, architecture, .. }) = encoder_without(config_json, "ForQuestionAnswering", "question answering")? else {
        return Ok((config_json.to_vec(), safetensors));
    };
    let mut init = Init::from_checkpoint(&weights::Checkpoint::from_bytes(safetensors)?, seed)?;
    init.linear("qa_outputs", 2, hidden, INIT_STD)?;
    config["architectures"] = serde_json::json!([architecture]);
    Ok((serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))?, init.serialize()?))
}

/// A checkpoint of an encoder family turned into its `…ForMaskedLM` when it is not one: a
/// masked-LM head the checkpoint has (a `…ForPreTraining`'s) kept and a sentence-pair head
/// dropped, else a fresh head (BERT's and ERNIE's `cls.predictions`, RoBERTa's `lm_head`, ALBERT's `predictions`,
/// DistilBERT's `vocab_transform`…), its decoder tied to the word embeddings.
pub fn with_masked_lm_head(config_json: &[u8], safetensors: Vec<u8>, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let Some(NewHead { mut config, hidden, architecture, .. }) = encoder_without(config_json, "ForMaskedLM", "masked-LM training")? else {
        return Ok((config_json.to_vec(), safetensors));
    };
    let kind = config["model_type"].as_str().unwrap_or_default();
    let names = masked_lm_names(kind)
        .ok_or_else(|| arg_err!("model", "{kind}'s masked LM is its generator, a model of its own: train it from the generator's checkpoint"))?;
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let has_head = checkpoint.contains(&format!("{}.weight", names.dense));
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    if !has_head {
        let (embedding, vocab) = (config["embedding_size"].as_u64().map_or(hidden, |e| e as usize), width(&config, "vocab_size")?);
        init_masked_lm_head(&mut init, names, hidden, embedding, vocab)?;
    }
    if let Some(pair) = names.pair_head {
        init.tensors.retain(|(name, ..)| !name.starts_with(&format!("{pair}.")));
    }
    config["architectures"] = serde_json::json!([architecture]);
    Ok((serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))?, init.serialize()?))
}

/// A fresh masked-LM head named as `names` says: the transform's dense layer from the hidden
/// size to the embedding size, its LayerNorm and the output bias (0) over the vocabulary.
fn init_masked_lm_head(init: &mut Init, names: &MaskedLmHeadNames, hidden: usize, embedding: usize, vocab: usize) -> Result<()> {
    init.linear(names.dense, embedding, hidden, INIT_STD)?;
    init.layer_norm(names.layer_norm, embedding);
    init.constant(names.bias.to_string(), vocab, 0.0);
    Ok(())
}

/// An encoder family's fresh masked-LM head ([`with_masked_lm_head`]'s) on a model being
/// built from scratch.
pub(super) fn fresh_masked_lm_head(init: &mut Init, model_type: &str, hidden: usize, embedding: usize, vocab: usize) -> Result<()> {
    let names = masked_lm_names(model_type).ok_or_else(|| arg_err!("model", "{model_type} has no masked-LM head"))?;
    init_masked_lm_head(init, names, hidden, embedding, vocab)
}

/// An encoder's config.json, hidden size and `…{head}` class, when it has no head of that
/// task yet (None when it has: it trains as it is); an error for other models.
fn encoder_without(config_json: &[u8], head: &str, task: &str) -> Result<Option<NewHead>> {
    let config = parse_config(config_json)?;
    if config["architectures"][0].as_str().is_some_and(|a| a.ends_with(head)) {
        return Ok(None);
    }
    let kind = config["model_type"].as_str().unwrap_or_default();
    let family = ENCODERS.iter().find(|f| f.model_type == kind).ok_or_else(|| {
        let families: Vec<&str> = ENCODERS.iter().map(|f| f.model_type).collect();
        arg_err!("model", "{task} trains the encoders (model_type {}), not {kind:?}", families.join(", "))
    })?;
    let hidden = width(&config, family.width_key)?;
    Ok(Some(NewHead { hidden, architecture: format!("{}{head}", family.class_prefix), family, config }))
}

/// An encoder checkpoint that gets a head: its config, hidden size, family, and the class it
/// becomes.
struct NewHead {
    config: serde_json::Value,
    hidden: usize,
    family: &'static EncoderFamily,
    architecture: String,
}

/// config.json of a classifier `architecture` over the classes `names` (by id).
pub(crate) fn with_labels(mut config: serde_json::Value, architecture: &str, names: &[String]) -> Result<Vec<u8>> {
    config["architectures"] = serde_json::json!([architecture]);
    config["id2label"] =
        names.iter().enumerate().map(|(i, name)| (i.to_string(), serde_json::Value::from(name.as_str()))).collect::<serde_json::Map<_, _>>().into();
    config["label2id"] = names.iter().enumerate().map(|(i, name)| (name.clone(), serde_json::Value::from(i))).collect::<serde_json::Map<_, _>>().into();
    serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))
}

#[cfg(test)]
mod tests {
    use safetensors::Dtype;

    use super::*;
    use crate::train::scratch::{Arch, ModelShape};
    use crate::weights::Checkpoint;

    #[test]
    fn token_and_span_heads_are_added_to_every_encoder_family_and_kept() {
        let shape = ModelShape { arch: Arch::Bert, layers: 1, heads: 2, width: 8, context: 12, vocab: 30 };
        let (config, weights) = (shape.config_json(None, None).unwrap(), shape.init_safetensors(1, None).unwrap());
        let (qa_config, qa) = with_question_answering_head(&config, weights.clone(), 1).unwrap();
        assert!(Checkpoint::from_bytes(qa).unwrap().contains("qa_outputs.weight"));
        assert_eq!(parse_config(&qa_config).unwrap()["architectures"][0], "BertForQuestionAnswering");
        // A DistilBERT that has its span head keeps it as it is.
        let distilbert = br#"{"model_type": "distilbert", "architectures": ["DistilBertForQuestionAnswering"]}"#;
        let (kept, bytes) = with_question_answering_head(distilbert, vec![1, 2, 3], 1).unwrap();
        assert_eq!((kept.as_slice(), bytes.as_slice()), (&distilbert[..], &[1u8, 2, 3][..]));
        // Every encoder family gets its own class with the same head names.
        for (arch, class) in
            [(Arch::Roberta, "RobertaForTokenClassification"), (Arch::Albert, "AlbertForTokenClassification"), (Arch::Ernie, "ErnieForTokenClassification")]
        {
            let family = ModelShape { arch, ..shape };
            let (config, weights) =
                with_token_classifier_head(&family.config_json(None, None).unwrap(), family.init_safetensors(1, None).unwrap(), &["A".into(), "B".into()], 1)
                    .unwrap();
            assert_eq!(parse_config(&config).unwrap()["architectures"][0], class);
            assert_eq!(Checkpoint::from_bytes(weights).unwrap().shape("classifier.weight"), Some(&[2, 8][..]), "{class}");
            let (config, weights) =
                with_question_answering_head(&family.config_json(None, None).unwrap(), family.init_safetensors(1, None).unwrap(), 1).unwrap();
            assert!(parse_config(&config).unwrap()["architectures"][0].as_str().unwrap().ends_with("ForQuestionAnswering"));
            assert_eq!(Checkpoint::from_bytes(weights).unwrap().shape("qa_outputs.weight"), Some(&[2, 8][..]), "{class}");
        }
        let gpt2 = ModelShape { arch: Arch::Gpt2, ..shape };
        let err = with_token_classifier_head(&gpt2.config_json(None, None).unwrap(), gpt2.init_safetensors(1, None).unwrap(), &["A".into()], 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("token classification trains the encoders") && err.contains("gpt2"), "{err}");
    }

    #[test]
    fn a_masked_lm_head_is_kept_from_pretraining_or_added_fresh_and_tied() {
        let names = |weights: Vec<u8>| {
            let checkpoint = Checkpoint::from_bytes(weights).unwrap();
            let mut names: Vec<String> = checkpoint.names().map(String::from).collect();
            names.sort();
            (names, checkpoint)
        };
        let architecture = |config: &[u8]| parse_config(config).unwrap()["architectures"][0].as_str().unwrap().to_string();
        // A pretraining checkpoint keeps its head as it was, without the next-sentence head.
        let shape = ModelShape { arch: Arch::Ernie, layers: 1, heads: 2, width: 8, context: 12, vocab: 30 };
        let pretrained = shape.init_safetensors(1, None).unwrap();
        let (config, weights) = with_masked_lm_head(&shape.config_json(None, None).unwrap(), pretrained.clone(), 1).unwrap();
        assert_eq!(architecture(&config), "ErnieForMaskedLM");
        let (kept, checkpoint) = names(weights);
        assert!(!kept.iter().any(|n| n.starts_with("cls.seq_relationship")), "{kept:?}");
        let before = Checkpoint::from_bytes(pretrained).unwrap();
        assert_eq!(checkpoint.to_f32("cls.predictions.transform.dense.weight").unwrap(), before.to_f32("cls.predictions.transform.dense.weight").unwrap());
        // A bare ALBERT gets a fresh head from the hidden size to its embedding size; the
        // decoder is the word embeddings (no weight of its own).
        let albert = ModelShape { arch: Arch::Albert, ..shape };
        let bare: Vec<(String, Vec<usize>, Vec<f32>)> = {
            let checkpoint = Checkpoint::from_bytes(albert.init_safetensors(1, None).unwrap()).unwrap();
            checkpoint
                .names()
                .filter(|n| n.starts_with("albert."))
                .map(|n| (n.to_string(), checkpoint.to_f32(n).unwrap().1, checkpoint.to_f32(n).unwrap().0))
                .collect()
        };

        let mut config = parse_config(&albert.config_json(None, None).unwrap()).unwrap();
        config["architectures"] = serde_json::json!(["AlbertModel"]);
        let embedding = config["embedding_size"].as_u64().unwrap() as usize;
        let (config, weights) = with_masked_lm_head(config.to_string().as_bytes(), weights::serialize_f32(&bare).unwrap(), 1).unwrap();
        assert_eq!(architecture(&config), "AlbertForMaskedLM");
        let (added, checkpoint) = names(weights);
        let head: Vec<&String> = added.iter().filter(|n| !n.starts_with("albert.")).collect();
        assert_eq!(
            head,
            ["predictions.LayerNorm.bias", "predictions.LayerNorm.weight", "predictions.bias", "predictions.dense.bias", "predictions.dense.weight"]
        );
        assert_eq!(checkpoint.shape("predictions.dense.weight"), Some(&[embedding, 8][..]));
        assert_eq!(checkpoint.shape("predictions.bias"), Some(&[30][..]));
        let electra = br#"{"model_type": "electra", "hidden_size": 8, "architectures": ["ElectraModel"]}"#;
        let err = with_masked_lm_head(electra, checkpoint_bytes(), 1).unwrap_err().to_string();
        assert!(err.contains("generator"), "{err}");
        assert_eq!(head_roots("distilbert", Objective::Mlm), ["vocab_transform", "vocab_layer_norm", "vocab_projector"]);
        assert!(head_roots("electra", Objective::Mlm).is_empty());
    }

    #[test]
    fn a_classifier_head_is_added_to_an_encoder() {
        let shape = ModelShape { arch: Arch::Bert, layers: 1, heads: 2, width: 8, context: 12, vocab: 30 };
        let (config, weights) = (shape.config_json(None, None).unwrap(), shape.init_safetensors(1, None).unwrap());
        let (config, weights) = with_classifier_head(&config, weights, 3, 5).unwrap();
        let checkpoint = Checkpoint::from_bytes(weights.clone()).unwrap();
        assert_eq!(checkpoint.to_f32("classifier.weight").unwrap().1, vec![3, 8]);
        assert_eq!(checkpoint.to_f32("classifier.bias").unwrap().0, vec![0.0; 3]);
        assert!(checkpoint.contains("bert.pooler.dense.weight"), "the encoder is kept");
        let value: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!((value["architectures"][0].as_str(), value["id2label"]["2"].as_str()), (Some("BertForSequenceClassification"), Some("LABEL_2")));
        let (again, same) = with_classifier_head(&config, weights.clone(), 3, 5).unwrap();
        assert_eq!((again, same), (config, weights), "a classifier stays as it is");
    }

    #[test]
    fn a_head_is_added_to_a_sentence_encoder_with_an_integer_position_ids_buffer() {
        // sentence-transformers' all-MiniLM-L6-v2 keeps `embeddings.position_ids` as I64.
        let weight = [0.5f32; 8];
        let positions: Vec<u8> = (0..4i64).flat_map(i64::to_le_bytes).collect();
        let weights = weights::serialize(&[
            ("embeddings.position_ids", Dtype::I64, &[1, 4], &positions),
            ("pooler.dense.weight", Dtype::F32, &[8], bytemuck::cast_slice(&weight)),
        ])
        .unwrap();
        let config = br#"{"model_type": "bert", "hidden_size": 8}"#;
        let (_, weights) = with_classifier_head(config, weights, 2, 5).unwrap();
        let checkpoint = Checkpoint::from_bytes(weights).unwrap();
        assert!(!checkpoint.contains("embeddings.position_ids"), "the buffer is dropped");
        assert_eq!(checkpoint.to_f32("pooler.dense.weight").unwrap().0, weight.to_vec());
        assert_eq!(checkpoint.shape("classifier.weight"), Some(&[2, 8][..]));
    }

    #[test]
    fn a_score_head_is_added_to_a_gpt2_that_pads_with_its_end_of_text() {
        let shape = ModelShape { arch: Arch::Gpt2, layers: 1, heads: 2, width: 8, context: 12, vocab: 30 };
        let weights = shape.init_safetensors(1, None).unwrap();
        let (config, weights) = with_classifier_head(&shape.config_json(None, Some(29)).unwrap(), weights, 2, 5).unwrap();
        assert_eq!(Checkpoint::from_bytes(weights).unwrap().shape("score.weight"), Some(&[2, 8][..]));
        let value: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!((value["architectures"][0].as_str(), value["pad_token_id"].as_u64()), (Some("GPT2ForSequenceClassification"), Some(29)));
        let err = with_classifier_head(&shape.config_json(None, None).unwrap(), shape.init_safetensors(1, None).unwrap(), 2, 5).unwrap_err().to_string();
        assert!(err.contains("pad_token_id"), "{err}");
        let err = with_classifier_head(br#"{"model_type": "t5", "d_model": 8}"#, shape.init_safetensors(1, None).unwrap(), 2, 5).unwrap_err().to_string();
        assert!(err.contains("not t5"), "{err}");
        let (config, _) =
            with_classifier_head(br#"{"model_type": "openai-gpt", "n_embd": 8, "pad_token_id": 1}"#, shape.init_safetensors(1, None).unwrap(), 2, 5).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&config).unwrap()["architectures"][0], "OpenAIGPTForSequenceClassification");
    }

    #[test]
    fn each_encoder_family_gets_its_own_classifier_and_a_missing_pooler() {
        let one = [0.5f32; 4];
        let checkpoint = |name: &str| weights::serialize(&[(name, Dtype::F32, &[2, 2], bytemuck::cast_slice(&one))]).unwrap();
        let head = |config: &str, tensor: &str| {
            let (config, weights) = with_classifier_head(config.as_bytes(), checkpoint(tensor), 3, 5).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&config).unwrap();
            let checkpoint = Checkpoint::from_bytes(weights).unwrap();
            let mut names: Vec<String> = checkpoint.names().map(String::from).collect();
            names.sort();
            (value["architectures"][0].as_str().unwrap().to_string(), names, checkpoint)
        };
        let (architecture, names, checkpoint) = head(r#"{"model_type": "roberta", "hidden_size": 8}"#, "roberta.embeddings.word_embeddings.weight");
        assert_eq!(architecture, "RobertaForSequenceClassification");
        assert_eq!(
            names,
            [
                "classifier.dense.bias",
                "classifier.dense.weight",
                "classifier.out_proj.bias",
                "classifier.out_proj.weight",
                "roberta.embeddings.word_embeddings.weight"
            ]
        );
        assert_eq!(checkpoint.shape("classifier.out_proj.weight"), Some(&[3, 8][..]));
        let (architecture, names, checkpoint) = head(r#"{"model_type": "distilbert", "dim": 6}"#, "distilbert.embeddings.word_embeddings.weight");
        assert_eq!(architecture, "DistilBertForSequenceClassification");
        assert!(names.contains(&"pre_classifier.weight".to_string()) && checkpoint.shape("classifier.weight") == Some(&[3, 6][..]), "{names:?}");
        // An ALBERT masked-LM checkpoint has no pooler: a fresh one is added under the base.
        let (architecture, names, _) = head(r#"{"model_type": "albert", "hidden_size": 8}"#, "albert.embeddings.word_embeddings.weight");
        assert_eq!(architecture, "AlbertForSequenceClassification");
        assert!(names.contains(&"albert.pooler.weight".to_string()) && names.contains(&"classifier.weight".to_string()), "{names:?}");
        // A pooler the checkpoint has is kept as it is.
        let (_, names, checkpoint) = head(r#"{"model_type": "ernie", "hidden_size": 2}"#, "pooler.dense.weight");
        assert_eq!(names, ["classifier.bias", "classifier.weight", "pooler.dense.weight"]);
        assert_eq!(checkpoint.to_f32("pooler.dense.weight").unwrap().0, one.to_vec());
        let err = with_classifier_head(br#"{"model_type": "distilbert", "hidden_size": 8}"#, checkpoint_bytes(), 3, 5).unwrap_err().to_string();
        assert!(err.contains("no dim"), "{err}");
    }

    #[test]
    fn each_encoder_family_gets_its_multiple_choice_head() {
        let head = |config: &str, tensor: &str| {
            let weights = weights::serialize(&[(tensor, Dtype::F32, &[1], bytemuck::cast_slice(&[1f32]))]).unwrap();
            with_multiple_choice_head(config.as_bytes(), weights, 5).map(|(config, weights)| {
                let mut names: Vec<String> = Checkpoint::from_bytes(weights).unwrap().names().map(String::from).collect();
                names.sort();
                (parse_config(&config).unwrap()["architectures"][0].as_str().unwrap().to_string(), names)
            })
        };
        // RoBERTa scores choices on the pooler (not its sequence classifier's first-token head).
        let (architecture, names) = head(r#"{"model_type": "roberta", "hidden_size": 8}"#, "roberta.embeddings.word_embeddings.weight").unwrap();
        assert_eq!(architecture, "RobertaForMultipleChoice");
        assert_eq!(
            names,
            ["classifier.bias", "classifier.weight", "roberta.embeddings.word_embeddings.weight", "roberta.pooler.dense.bias", "roberta.pooler.dense.weight"]
        );
        let (architecture, names) =
            head(r#"{"model_type": "bert", "architectures": ["BertForPreTraining"], "hidden_size": 8}"#, "pooler.dense.weight").unwrap();
        assert_eq!((architecture.as_str(), names.len()), ("BertForMultipleChoice", 3), "the pooler kept: {names:?}");
        let (architecture, names) = head(r#"{"model_type": "distilbert", "dim": 8}"#, "distilbert.embeddings.word_embeddings.weight").unwrap();
        assert_eq!(architecture, "DistilBertForMultipleChoice");
        assert!(names.contains(&"pre_classifier.weight".to_string()), "{names:?}");
        let (architecture, names) = head(r#"{"model_type": "albert", "hidden_size": 8}"#, "albert.embeddings.word_embeddings.weight").unwrap();
        assert_eq!(architecture, "AlbertForMultipleChoice");
        assert!(names.contains(&"albert.pooler.weight".to_string()), "{names:?}");
        // One score per choice.
        let (config, weights) = with_multiple_choice_head(br#"{"model_type": "ernie", "hidden_size": 4}"#, checkpoint_bytes(), 5).unwrap();
        assert_eq!(parse_config(&config).unwrap()["architectures"][0], "ErnieForMultipleChoice");
        assert_eq!(Checkpoint::from_bytes(weights).unwrap().shape("classifier.weight"), Some(&[1, 4][..]));
        // Refused: ELECTRA, and a model fine-tuned for another task.
        let err = head(r#"{"model_type": "electra", "hidden_size": 8}"#, "w").unwrap_err().to_string();
        assert!(err.contains("no fresh electra multiple-choice head"), "{err}");
        let err = head(r#"{"model_type": "bert", "architectures": ["BertForSequenceClassification"], "hidden_size": 8}"#, "w").unwrap_err().to_string();
        assert!(err.contains("…ForMultipleChoice head") && err.contains("BertForSequenceClassification"), "{err}");
        let kept = br#"{"model_type": "bert", "architectures": ["BertForMultipleChoice"]}"#;
        assert_eq!(with_multiple_choice_head(kept, vec![7], 5).unwrap(), (kept.to_vec(), vec![7]));
    }

    fn checkpoint_bytes() -> Vec<u8> {
        weights::serialize(&[("w", Dtype::F32, &[1], bytemuck::cast_slice(&[1f32]))]).unwrap()
    }
}
