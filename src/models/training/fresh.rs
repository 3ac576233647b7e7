//! Fresh models and heads: tensors drawn from one seeded stream as each family initialises
//! them (transformers' `_init_weights`), to build a checkpoint with or add a head to one, and
//! the config.json edits that go with them. A family's training says what it makes
//! ([`Fresh`], `FamilyTraining::with_head`); this is the toolkit.

use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal, Uniform};

use super::Objective;
use crate::error::{arg_err, Result, SesameError};
use crate::weights;

/// transformers' `initializer_range`.
pub const INIT_STD: f64 = 0.02;

/// The size of a fresh model (`sesame train --arch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreshShape {
    pub layers: usize,
    pub heads: usize,
    pub width: usize,
    /// Positions (`n_positions`, `max_position_embeddings`).
    pub context: usize,
}

/// The vocabulary a fresh model is made for: its size, the id an encoder pads with, and the
/// end-of-text id a decoder's text begins and ends with (none for a character vocabulary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreshVocabulary {
    pub size: usize,
    pub pad: Option<u32>,
    pub eos: Option<u32>,
}

/// A model folder's files as a run starts from them: config.json, model.safetensors, the
/// tokenizer files (tokenizer.json, tokenizer_config.json, a translation model's
/// target_tokenizer.json) and those its family adds (ELECTRA's generator_config.json).
pub struct TrainingFolder {
    pub files: Vec<(&'static str, Vec<u8>)>,
}

impl TrainingFolder {
    /// A folder of config.json and model.safetensors.
    pub fn new(config_json: Vec<u8>, safetensors: Vec<u8>) -> TrainingFolder {
        TrainingFolder { files: vec![("config.json", config_json), ("model.safetensors", safetensors)] }
    }

    /// File `name`, if the folder has it.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files.iter().find(|(n, _)| *n == name).map(|(_, bytes)| bytes.as_slice())
    }

    /// File `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<&[u8]> {
        self.file(name).ok_or_else(|| arg_err!("model", "the model folder has no {name}"))
    }

    /// Sets file `name` (adding it when the folder has none).
    pub fn set(&mut self, name: &'static str, bytes: Vec<u8>) {
        match self.files.iter_mut().find(|(n, _)| *n == name) {
            Some((_, old)) => *old = bytes,
            None => self.files.push((name, bytes)),
        }
    }

    /// Takes file `name` out of the folder.
    pub fn take(&mut self, name: &str) -> Option<Vec<u8>> {
        let i = self.files.iter().position(|(n, _)| *n == name)?;
        Some(self.files.remove(i).1)
    }

    /// Takes file `name` out of the folder, or an error naming it.
    pub fn take_required(&mut self, name: &str) -> Result<Vec<u8>> {
        self.take(name).ok_or_else(|| arg_err!("model", "the model folder has no {name}"))
    }
}

/// How a family makes fresh models (`sesame train --arch`).
pub enum Fresh {
    /// A transformer of a [`FreshShape`] over the run's subword vocabulary (a tokenizer
    /// trained on its data, or given).
    Shaped {
        /// Whether its batches pad with a padding token (the encoders), which its vocabulary
        /// must then have.
        pads: bool,
        make: fn(&FreshShape, &FreshVocabulary, u64) -> Result<TrainingFolder>,
    },
    /// A word-level model that learns its vocabularies (and its tags) from the run's data: its
    /// folder carries its tokenizer files.
    Learnt(fn(&RunData) -> Result<TrainingFolder>),
}

impl Fresh {
    /// Whether it makes models of a shape whose batches pad (an encoder's).
    pub fn pads(&self) -> bool {
        matches!(self, Fresh::Shaped { pads: true, .. })
    }
}

/// The layers of a fresh model when the run does not say (`--layers`).
pub const DEFAULT_LAYERS: usize = 4;

/// What a family reads of a run to make a [`Fresh::Learnt`] model or fit a checkpoint to the
/// run's data ([`FamilyTraining::fit_to_data`](super::FamilyTraining::fit_to_data)): its
/// objective, its sizes and its text.
#[derive(Clone, Copy)]
pub struct RunData<'a> {
    pub objective: Objective,
    /// The run's `--tokenizer`: `words:N` keeps the N most frequent words.
    pub tokenizer: &'a str,
    /// `--layers`, when given.
    pub layers: Option<usize>,
    /// The recurrent width (`--hidden`).
    pub width: usize,
    /// The word embeddings' width (`--embedding-size`), when given.
    pub embedding_size: Option<usize>,
    /// `--dropout`, when given.
    pub dropout: Option<f32>,
    /// Whether the run only evaluates (its model must be trained already).
    pub eval_only: bool,
    pub seed: u64,
    /// The run's text, read when first asked for (a run that replays its batches has none).
    pub text: &'a dyn RunText,
}

/// A run's text.
pub trait RunText {
    /// The training part of its data (what it does not hold out for evaluation).
    fn train(&self) -> Result<&str>;
    /// The held-out part, when the run evaluates on one (its tags are classes too).
    fn held_out(&self) -> Result<Option<&str>>;
    /// Unlabelled text (cross-view training's).
    fn unlabeled(&self) -> Result<Option<&str>>;
}

/// A run's text in memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct Texts<'a> {
    pub train: &'a str,
    pub held_out: Option<&'a str>,
    pub unlabeled: Option<&'a str>,
}

impl RunText for Texts<'_> {
    fn train(&self) -> Result<&str> {
        Ok(self.train)
    }

    fn held_out(&self) -> Result<Option<&str>> {
        Ok(self.held_out)
    }

    fn unlabeled(&self) -> Result<Option<&str>> {
        Ok(self.unlabeled)
    }
}

impl RunData<'_> {
    /// The most words a vocabulary keeps: see [`word_vocab_size`].
    pub fn vocab_size(&self) -> Result<usize> {
        word_vocab_size(self.tokenizer)
    }

    /// An error unless the run trains with `objective`, naming the fresh model `what`.
    pub fn require(&self, objective: Objective, what: &str) -> Result<()> {
        match self.objective == objective {
            true => Ok(()),
            false => Err(arg_err!("train", "{what} trains with --objective {objective}, not {}", self.objective)),
        }
    }

    /// An error if `--layers` asks a model of its paper's fixed depth (`what`) for another.
    pub fn fixed_layers(&self, layers: usize, what: &str) -> Result<()> {
        match self.layers.filter(|&n| n != layers) {
            Some(n) => Err(arg_err!("train", "--layers {n}: --arch {what} has its paper's {layers} biLSTM layers")),
            None => Ok(()),
        }
    }
}

/// `--tokenizer words:N`: the vocabulary size N.
pub fn word_vocab_size(spec: &str) -> Result<usize> {
    spec.strip_prefix("words:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            arg_err!("tokenizer", "the word-level vocabularies (ELMo's, AWD-LSTM's, CVT's, CoVe's translation model's) are `words:N` (the N most frequent words of --data), not `{spec}`")
        })
}

impl FreshShape {
    /// About how many weights a transformer of this shape and vocabulary has (saturating): per
    /// layer 12·width² (attention and MLP), plus the token and position tables.
    pub fn parameter_count(&self, vocab: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let [layers, width, context, vocab] = [self.layers, self.width, self.context, vocab].map(|v| v as u64);
        product(&[layers, 12, width, width]).saturating_add(product(&[vocab.saturating_add(context), width]))
    }

    /// An error unless every size is positive, the width a multiple of the heads, and the
    /// weights with their gradients and AdamW's two moments fit the host memory budget.
    pub fn validate(&self, vocab: usize) -> Result<()> {
        let s = self;
        if [s.layers, s.heads, s.width, s.context, vocab].contains(&0) || !s.width.is_multiple_of(s.heads) {
            return Err(arg_err!(
                "model",
                "a model of {} layers, {} heads, width {}, context {}, vocabulary {vocab}: every size must be positive and the width a multiple of the heads",
                s.layers,
                s.heads,
                s.width,
                s.context,
            ));
        }
        crate::limits::check_elements(
            || format!("a fresh model of {} layers of width {} and {} positions (weights, gradients and AdamW's two moments)", s.layers, s.width, s.context),
            self.parameter_count(vocab),
            16,
        )
    }
}

/// config.json's object.
pub fn parse_config(config_json: &[u8]) -> Result<serde_json::Value> {
    serde_json::from_slice(config_json).map_err(|e| arg_err!("model", "config.json is not valid JSON: {e}"))
}

/// A config as config.json's bytes.
pub fn config_bytes(config: &serde_json::Value) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(config).map_err(|e| SesameError::Io(format!("config.json: {e}")))
}

/// The size config.json gives under `key`.
pub fn config_size(config: &serde_json::Value, key: &str) -> Result<usize> {
    Ok(config[key].as_u64().ok_or_else(|| arg_err!("model", "config.json has no {key}"))? as usize)
}

/// transformers' names for `count` classes a config does not name: `LABEL_0`, `LABEL_1`, ….
pub fn default_labels(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("LABEL_{i}")).collect()
}

/// config.json of a classifier `architecture` over the classes `names` (by id).
pub fn with_labels(mut config: serde_json::Value, architecture: &str, names: &[String]) -> Result<Vec<u8>> {
    config["architectures"] = serde_json::json!([architecture]);
    config["id2label"] =
        names.iter().enumerate().map(|(i, name)| (i.to_string(), serde_json::Value::from(name.as_str()))).collect::<serde_json::Map<_, _>>().into();
    config["label2id"] = names.iter().enumerate().map(|(i, name)| (name.clone(), serde_json::Value::from(i))).collect::<serde_json::Map<_, _>>().into();
    config_bytes(&config)
}

/// Tensors (name, shape, values) of a checkpoint being built, drawn from one seeded stream.
pub struct Init {
    rng: StdRng,
    pub tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl Init {
    pub fn new(seed: u64) -> Init {
        Init { rng: StdRng::seed_from_u64(seed), tensors: Vec::new() }
    }

    /// Every weight of `checkpoint` (as f32, by name), to add fresh ones to. Integer buffers
    /// (`embeddings.position_ids` in sentence-transformers' MiniLM) are left out: no model
    /// reads them, and transformers rebuilds them when it loads.
    pub fn from_checkpoint(checkpoint: &weights::Checkpoint, seed: u64) -> Result<Init> {
        let mut init = Init::new(seed);
        let mut names: Vec<&str> = checkpoint.names().filter(|name| checkpoint.is_floating_point(name)).collect();
        names.sort_unstable();
        for name in names {
            let (values, shape) = checkpoint.to_f32(name)?;
            init.tensors.push((name.to_string(), shape, values));
        }
        Ok(init)
    }

    pub fn normal(&mut self, name: String, shape: Vec<usize>, std: f64) -> Result<()> {
        let dist = Normal::new(0.0, std).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    /// Values drawn U(−bound, bound).
    pub fn uniform(&mut self, name: String, shape: Vec<usize>, bound: f64) -> Result<()> {
        let dist = Uniform::new_inclusive(-bound, bound).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    pub fn constant(&mut self, name: String, size: usize, value: f32) {
        self.tensors.push((name, vec![size], vec![value; size]));
    }

    /// A Linear's weight [out, inp] drawn N(0, std) and its bias 0 (`{name}.weight`, `.bias`).
    pub fn linear(&mut self, name: &str, out: usize, inp: usize, std: f64) -> Result<()> {
        self.normal(format!("{name}.weight"), vec![out, inp], std)?;
        self.constant(format!("{name}.bias"), out, 0.0);
        Ok(())
    }

    /// A LayerNorm's weight 1 and bias 0.
    pub fn layer_norm(&mut self, name: &str, width: usize) {
        self.constant(format!("{name}.weight"), width, 1.0);
        self.constant(format!("{name}.bias"), width, 0.0);
    }

    pub fn serialize(&self) -> Result<Vec<u8>> {
        weights::serialize_f32(&self.tensors)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_folder_s_files_are_set_taken_and_required_by_name() {
        let mut folder = super::TrainingFolder::new(b"{}".to_vec(), vec![1, 2]);
        folder.set("tokenizer.json", b"a".to_vec());
        folder.set("tokenizer.json", b"b".to_vec());
        assert_eq!(folder.file("tokenizer.json"), Some(&b"b"[..]));
        assert_eq!(folder.files.len(), 3);
        assert_eq!(folder.take_required("model.safetensors").unwrap(), [1, 2]);
        assert!(folder.take("model.safetensors").is_none());
        assert!(folder.require("model.safetensors").unwrap_err().to_string().contains("no model.safetensors"));
    }

    #[test]
    fn a_word_level_vocabulary_s_size_is_words_n() {
        assert_eq!(super::word_vocab_size("words:500").unwrap(), 500);
        assert!(super::word_vocab_size("wordpiece:500").unwrap_err().to_string().contains("`words:N`"));
    }
}
