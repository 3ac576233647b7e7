//! What a model family is: [`Family`], the descriptor each family's file declares (its
//! `FAMILY` constant) and the registry lists. Everything here needs only the family itself;
//! what needs the list of every family (lookup by `model_type`, messages naming the others)
//! is the registry's.

#[cfg(feature = "training")]
use super::training::fresh::{Fresh, FreshShape, FreshVocabulary, TrainingFolder};
#[cfg(feature = "training")]
use super::training::{FamilyTraining, Objective, Trainable};
use super::Model;
use crate::error::{arg_err, Result, SesameError};
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

/// Loads the model a config.json describes from a checkpoint's weights.
pub type Loader = fn(&[u8], &Weights) -> Result<Box<dyn Model>>;

/// A model family.
pub struct Family {
    /// config.json's `model_type`.
    pub model_type: &'static str,
    /// The family's name as its paper writes it.
    pub name: &'static str,
    /// The transformers classes it loads (config.json's `architectures`).
    pub architectures: &'static [&'static str],
    /// Loads the model config.json describes from the checkpoint's weights.
    pub load: Loader,
    /// The vocabulary files its tokenizer is built from when there is no tokenizer.json.
    pub vocabulary: Vocabulary,
    /// Checkpoint tensors its model may leave unread: other heads' (which transformers also
    /// drops when it loads this head) and buffers of older versions. Any other unread tensor is
    /// an error: it means the config and the weights disagree.
    pub unread: &'static [Unread],
    /// The config.json keys of its dropout probabilities (what `--dropout` sets).
    pub dropout_keys: &'static [&'static str],
    /// How it trains (None: inference only). With the `training` feature only: the browser's
    /// inference module leaves the training code out (its size budget).
    #[cfg(feature = "training")]
    pub training: Option<&'static dyn FamilyTraining>,
}

/// A pattern of tensor names.
pub enum Unread {
    /// Names that start with this.
    Prefix(&'static str),
    /// Names that end with this.
    Suffix(&'static str),
}

impl Unread {
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Unread::Prefix(prefix) => name.starts_with(prefix),
            Unread::Suffix(suffix) => name.ends_with(suffix),
        }
    }
}

impl Family {
    /// An error for an `architecture` the family does not have, listing those it has.
    pub fn unsupported(&self, architecture: &str) -> SesameError {
        arg_err!("model", "unsupported architecture `{architecture}` for {} (supported: {})", self.name, self.architectures.join(", "))
    }

    /// Loads the model of `config_json` from `weights`; tensors of the checkpoint that it does
    /// not read, outside [`Family::unread`], are an error naming them.
    pub fn load_checked(&self, config_json: &[u8], weights: &Weights) -> Result<Box<dyn Model>> {
        let model = (self.load)(config_json, weights)?;
        self.check_loaded(model.as_ref(), weights)?;
        Ok(model)
    }

    /// Loads the model of `config_json` from `weights` (a recording view) as a run trains it
    /// with `objective`, checked as [`Family::load_checked`] checks a model.
    #[cfg(feature = "training")]
    pub fn load_trainable(&self, config_json: &[u8], weights: &Weights, objective: Objective) -> Result<Box<dyn Trainable>> {
        let model = self.require_training()?.load(config_json, weights, objective)?;
        match model.as_model() {
            Some(inference) => self.check_loaded(inference, weights)?,
            None => weights.check_all_read(model.architecture(), "config.json", |name| self.unread.iter().any(|u| u.matches(name)))?,
        }
        Ok(model)
    }

    /// An error for a model of zero sizes, or for a tensor of the checkpoint it left unread
    /// outside [`Family::unread`].
    fn check_loaded(&self, model: &dyn Model, weights: &Weights) -> Result<()> {
        let sizes = model.sizes();
        // (Recurrent models have no attention heads.)
        for (name, size) in [("vocabulary", sizes.vocab_size), ("hidden size", sizes.hidden_size), ("positions", model.max_positions())] {
            if size == 0 {
                return Err(SesameError::Checkpoint(format!("config.json: `{}` has a {name} of 0", model.architecture())));
            }
        }
        weights.check_all_read(model.architecture(), "config.json", |name| self.unread.iter().any(|u| u.matches(name)))
    }

    /// How it trains, or an error saying it does not.
    #[cfg(feature = "training")]
    pub fn require_training(&self) -> Result<&'static dyn FamilyTraining> {
        self.training.ok_or_else(|| arg_err!("train", "{} models do not train in Sesame", self.name))
    }

    /// A fresh model of `shape` over `vocabulary`, drawn from `seed` as the family initialises
    /// one; an error for a family that makes none of a shape.
    #[cfg(feature = "training")]
    pub fn fresh(&self, shape: &FreshShape, vocabulary: &FreshVocabulary, seed: u64) -> Result<TrainingFolder> {
        match self.require_training()?.fresh() {
            Some(Fresh::Shaped { make, .. }) => make(shape, vocabulary, seed),
            Some(Fresh::Learnt(_)) => Err(arg_err!("model", "a fresh {} model learns its vocabulary from a run's data (sesame train --arch)", self.name)),
            None => Err(arg_err!("model", "no fresh {} model is made (start from a checkpoint)", self.name)),
        }
    }

    /// Whether the family's models train with `objective`.
    #[cfg(feature = "training")]
    pub fn trains(&self, objective: Objective) -> bool {
        self.training.is_some_and(|t| t.objectives().contains(&objective))
    }
}

/// A dropout probability as config.json holds it: the f32's shortest decimal (0.1, not the
/// f64 widening 0.10000000149011612), as a user or transformers writes it.
pub fn probability_json(p: f32) -> serde_json::Value {
    serde_json::json!(p.to_string().parse::<f64>().unwrap_or(p as f64))
}
