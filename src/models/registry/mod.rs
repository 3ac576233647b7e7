//! The families Sesame loads, by config.json's `model_type`: one line each in [`FAMILIES`].
//! A family's entry (its [`Family`], declared in its own file) is everything the rest of
//! Sesame knows of it: how to load its model, which transformers classes it has, where its
//! tokenizer comes from without a tokenizer.json, which checkpoint tensors it may leave
//! unread, its dropout keys, and how it trains (its objectives, base model prefix, heads and
//! fresh models: [`FamilyTraining`](crate::models::training::FamilyTraining)). The registry
//! sits above the family files: they name [`crate::models::family`], not it.

use super::family::{probability_json, Family};
#[cfg(feature = "training")]
use super::training::Objective;
use super::{albert, awd_lstm, bert, cove, cvt, distilbert, electra, ernie, gpt, gpt2, roberta};
use crate::error::{arg_err, Result, SesameError};

/// Every family, by `model_type`.
pub const FAMILIES: &[&Family] = &[
    &bert::FAMILY,
    &roberta::FAMILY,
    &roberta::XLM_FAMILY,
    &roberta::XLM_XL_FAMILY,
    &distilbert::FAMILY,
    &albert::FAMILY,
    &ernie::FAMILY,
    &electra::FAMILY,
    &gpt2::FAMILY,
    &gpt::FAMILY,
    &awd_lstm::FAMILY,
    &cove::FAMILY,
    &cvt::FAMILY,
];

/// The family of `model_type`, or an error listing the supported ones.
pub fn family(model_type: &str) -> Result<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.model_type == model_type).ok_or_else(|| {
        let known: Vec<&str> = FAMILIES.iter().map(|f| f.model_type).collect();
        SesameError::Checkpoint(format!("config.json: unknown model_type `{model_type}` (supported: {})", known.join(", ")))
    })
}

/// The family config.json names.
pub fn family_of(config_json: &[u8]) -> Result<&'static Family> {
    #[derive(serde::Deserialize)]
    struct ModelType {
        model_type: Option<String>,
    }
    let kind: ModelType = serde_json::from_slice(config_json).map_err(|e| SesameError::Checkpoint(format!("config.json: {e}")))?;
    family(kind.model_type.as_deref().ok_or_else(|| SesameError::Checkpoint("config.json has no model_type".into()))?)
}

/// What needs the list of every family.
impl Family {
    /// The checkpoint (config.json, model.safetensors) with the head `objective` trains added
    /// when it has none, for the classes `labels` (by id): see [`FamilyTraining::with_head`](crate::models::training::FamilyTraining::with_head).
    #[cfg(feature = "training")]
    pub fn with_head(&self, objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        self.check_trains(objective)?;
        self.require_training()?.with_head(objective, config_json, safetensors, labels, seed)
    }

    /// An error unless the family's models train with `objective`, naming the families that
    /// do and what this one trains.
    #[cfg(feature = "training")]
    pub fn check_trains(&self, objective: Objective) -> Result<()> {
        if self.trains(objective) {
            return Ok(());
        }
        let own: Vec<String> = self.training.map_or(Vec::new(), |t| t.objectives().iter().map(Objective::to_string).collect());
        let own = if own.is_empty() { "nothing".to_string() } else { own.join(", ") };
        let others = trained_by(objective);
        let others = if others.is_empty() { "no family".to_string() } else { others.join(", ") };
        Err(arg_err!("train", "objective {objective} trains {others}; {} ({}) trains {own}", self.name, self.model_type))
    }
}

/// The family of `config_json` with the head `objective` trains: see [`Family::with_head`].
#[cfg(feature = "training")]
pub fn with_head(objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    family_of(config_json)?.with_head(objective, config_json, safetensors, labels, seed)
}

/// The family `--arch NAME` makes a fresh model of: the one whose `model_type` is `name`
/// (`-` and `_` alike), which must make fresh models.
#[cfg(feature = "training")]
pub fn fresh_family(name: &str) -> Result<&'static Family> {
    let same = |model_type: &str| model_type.replace('_', "-") == name.replace('_', "-");
    let makes_fresh = |f: &&&Family| f.training.is_some_and(|t| t.fresh().is_some());
    FAMILIES.iter().filter(makes_fresh).find(|f| same(f.model_type)).copied().ok_or_else(|| {
        let known: Vec<&str> = FAMILIES.iter().filter(makes_fresh).map(|f| f.model_type).collect();
        arg_err!("model", "unknown architecture `{name}` (fresh models: {})", known.join(", "))
    })
}

/// The families that train with `objective`, as an error message lists them: `ALBERT
/// (albert)`, ….
#[cfg(feature = "training")]
pub fn trained_by(objective: Objective) -> Vec<String> {
    FAMILIES.iter().filter(|f| f.trains(objective)).map(|f| format!("{} ({})", f.name, f.model_type)).collect()
}

/// `config_json` with every dropout probability of its model set to `p` (what `sesame train
/// --dropout` trains with and saves).
pub fn with_dropout(config_json: &[u8], p: f32) -> Result<Vec<u8>> {
    let op = "config";
    if !(0.0..1.0).contains(&p) {
        return Err(arg_err!(op, "dropout must be in [0, 1), got {p}"));
    }
    edit_dropouts(config_json, |_, _| Ok(Some(p)))
}

/// `config_json` with every dropout probability its model states multiplied by `factor`
/// (fastai's `drop_mult`, which ULMFiT tunes for a data set's size; `sesame train --drop-mult`).
/// A probability set to null (one that follows another, as BERT's `classifier_dropout`) stays
/// null; one the config does not state is an error, since its default is the model's.
pub fn with_dropout_scaled(config_json: &[u8], factor: f32) -> Result<Vec<u8>> {
    let op = "config";
    if !(factor >= 0.0 && factor.is_finite()) {
        return Err(arg_err!(op, "a dropout multiplier must be a number ≥ 0, got {factor}"));
    }
    edit_dropouts(config_json, |key, value| match value {
        Some(serde_json::Value::Null) => Ok(None),
        Some(value) => {
            let p = value.as_f64().ok_or_else(|| arg_err!(op, "config.json's `{key}` is not a number: {value}"))? as f32 * factor;
            if !(0.0..1.0).contains(&p) {
                return Err(arg_err!(op, "`{key}` {value} × {factor} = {p} is not a probability below 1"));
            }
            Ok(Some(p))
        }
        None => Err(arg_err!(
            op,
            "config.json does not state `{key}`, so there is nothing to multiply: set the dropouts with --dropout, or write them in config.json"
        )),
    })
}

/// `config_json` with each of its family's dropout keys set to what `edit` returns for the
/// key and its present value (`None`: left as it is).
fn edit_dropouts(config_json: &[u8], mut edit: impl FnMut(&str, Option<&serde_json::Value>) -> Result<Option<f32>>) -> Result<Vec<u8>> {
    let op = "config";
    let keys = family_of(config_json)?.dropout_keys;
    let mut config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!(op, "config.json is not valid JSON: {e}"))?;
    let object = config.as_object_mut().ok_or_else(|| arg_err!(op, "config.json is not a JSON object"))?;
    for key in keys {
        if let Some(p) = edit(key, object.get(*key))? {
            object.insert(key.to_string(), probability_json(p));
        }
    }
    serde_json::to_vec_pretty(&config).map_err(|e| arg_err!(op, "{e}"))
}

/// Fresh models for the crate's unit tests.
#[cfg(all(test, feature = "training", not(target_arch = "wasm32")))]
pub(crate) mod testing {
    use crate::models::training::fresh::{FreshShape, FreshVocabulary};

    /// A fresh model of `model_type` (config.json, model.safetensors): `layers` layers of 2
    /// heads, `width` wide, `context` positions, a vocabulary of `vocab` whose padding id is 0
    /// (an encoder's) and no end-of-text token.
    pub fn tiny(model_type: &str, layers: usize, width: usize, context: usize, vocab: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
        let family = super::family(model_type).unwrap();
        let pad = family.require_training().unwrap().fresh().unwrap().pads().then_some(0);
        let shape = FreshShape { layers, heads: 2, width, context };
        let folder = family.fresh(&shape, &FreshVocabulary { size: vocab, pad, eos: None }, seed).unwrap();
        (folder.file("config.json").unwrap().to_vec(), folder.file("model.safetensors").unwrap().to_vec())
    }
}

#[cfg(all(test, feature = "training", not(target_arch = "wasm32")))]
mod family_tests;

#[cfg(test)]
mod tests {
    #[test]
    fn dropout_is_written_as_its_shortest_decimal() {
        let config = super::with_dropout(br#"{"model_type": "bert", "hidden_dropout_prob": 0.0}"#, 0.1).unwrap();
        let text = String::from_utf8(config).unwrap();
        assert!(text.contains("\"hidden_dropout_prob\": 0.1,") && text.contains("\"classifier_dropout\": 0.1"), "{text}");
        assert!(super::with_dropout(br#"{"model_type": "bert"}"#, 1.0).is_err());
    }

    #[test]
    fn a_dropout_multiplier_scales_what_the_config_states() {
        let config = br#"{"model_type": "bert", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.2, "classifier_dropout": null}"#;
        let scaled: serde_json::Value = serde_json::from_slice(&super::with_dropout_scaled(config, 0.5).unwrap()).unwrap();
        assert_eq!(scaled["hidden_dropout_prob"], 0.05);
        assert_eq!(scaled["attention_probs_dropout_prob"], 0.1);
        assert!(scaled["classifier_dropout"].is_null(), "a null one follows another and stays null");
        let message = |config: &[u8], factor| super::with_dropout_scaled(config, factor).err().unwrap().to_string();
        assert!(message(br#"{"model_type": "bert", "hidden_dropout_prob": 0.1}"#, 0.5).contains("`attention_probs_dropout_prob`"));
        assert!(message(config, 5.0).contains("not a probability below 1"));
        assert!(message(config, -1.0).contains("≥ 0"));
    }

    #[test]
    fn every_family_has_a_distinct_model_type() {
        let mut types: Vec<&str> = super::FAMILIES.iter().map(|f| f.model_type).collect();
        types.sort_unstable();
        types.dedup();
        assert_eq!(types.len(), super::FAMILIES.len());
        let err = super::family("t5").err().unwrap().to_string();
        assert!(err.contains("unknown model_type `t5`") && err.contains("roberta") && err.contains("albert"), "{err}");
    }
}
