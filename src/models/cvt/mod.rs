//! Cross-view training's sequence tagger (Clark, Luong, Manning & Le 2018, "Semi-Supervised
//! Sequence Modeling with Cross-View Training"), as the authors' cvt_text builds it for
//! tagging, under the names of `tests/reference/cvt_reference.py`:
//!
//! - each word: its embedding (`word_embeddings.weight`, scaled by the learnt `emb_scale`) and
//!   a character CNN over its UTF-8 bytes (`char_embeddings.weight`; per filter width k,
//!   `char_cnn.{k}` — a valid convolution, ReLU, max over the row), concatenated;
//! - two bidirectional LSTM layers with output projection (`encoder.{0,1}.weight_ih`,
//!   `weight_hh`, `bias`, `weight_hr`, and `_reverse`), layer 2 reading [fw1; bw1];
//! - prediction modules, each `hidden` (a Linear) then `output` (a Linear to the tags):
//!   `primary` (ReLU) over [fw1; bw1; fw2; bw2], the tagger's logits; and the auxiliary views
//!   CVT trains on unlabelled text — `full` (no ReLU) over the same, `forwards` and `future`
//!   over fw1, `backwards` and `past` over bw1 (future at t predicts the tag at t + 1, past
//!   the tag at t − 1).
//!
//! A sentence is `<start> words <end>` (the tokenizer adds both); each token comes with a row
//! of character ids ([`char_row`]), in `IdsBatch::char_ids`.

#[cfg(feature = "training")]
pub mod fresh;
#[cfg(feature = "training")]
pub mod train;

use serde::Deserialize;

use super::config::{config_err, from_json};
use super::family::Family;
use super::rnn::{right_padded_lengths, LstmLayer, MAX_SIZE};
#[cfg(feature = "training")]
use super::training::{fresh::Fresh, Objective, Trains};
use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, Result};
use crate::nn::Linear;
use crate::ops::char_cnn::{char_cnn, Activation, ConvFilter};
use crate::ops::elementwise::{unary, Unary};
use crate::ops::embedding::{embedding, EmbeddingIds};
use crate::ops::rows::concat_columns;
use crate::tensor::Tensor;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "cvt",
    name: "CVT",
    architectures: &["CvtForTokenClassification"],
    load: |config, weights| Ok(Box::new(CvtModel::load(config, weights)?)),
    vocabulary: Vocabulary::WordLevel,
    unread: &[],
    // Training's (the tagger runs without dropout at inference).
    dropout_keys: &["labeled_dropout", "unlabeled_dropout"],
    #[cfg(feature = "training")]
    training: Some(&Trains {
        objectives: &[Objective::TokenClassify],
        load: train::CvtTraining::load,
        with_head: None,
        fit_to_data: None,
        fresh: Some(Fresh::Learnt(fresh::fresh_tagger_from_data)),
    }),
};

/// The longest sequence one forward reads (as the other recurrent families').
pub const MAX_STEPS: usize = super::awd_lstm::MAX_STEPS;

/// Character ids: padding, an unknown character (unused: every byte has an id), a word's
/// start and end, and the one "character" of a sentence boundary or padding token; byte b is
/// b + [`FIRST_BYTE`].
pub const PAD: u32 = 0;
pub const START: u32 = 2;
pub const END: u32 = 3;
pub const MISSING: u32 = 4;
pub const FIRST_BYTE: u32 = 5;
/// The character vocabulary: 5 specials and 256 bytes.
pub const CHAR_VOCAB: usize = 256 + FIRST_BYTE as usize;

/// The most bytes of a word the character CNN may read: every token carries a row this long.
pub const MAX_WORD_LENGTH: usize = 256;

/// The auxiliary modules, in the order their logits are written (`logits.{name}`).
pub const AUXILIARY: [&str; 5] = ["full", "forwards", "backwards", "future", "past"];

/// What a prediction module reads: [fw1; bw1; fw2; bw2] (primary, full), fw1 (forwards,
/// future) or bw1 (backwards, past).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleInput {
    Both,
    Forward,
    Backward,
}

impl ModuleInput {
    pub fn of(module: &str) -> ModuleInput {
        match module {
            "primary" | "full" => ModuleInput::Both,
            "forwards" | "future" => ModuleInput::Forward,
            _ => ModuleInput::Backward,
        }
    }

    /// Its width for LSTM outputs `projection` wide.
    pub fn width(self, projection: usize) -> usize {
        match self {
            ModuleInput::Both => 4 * projection,
            _ => projection,
        }
    }
}

/// Whether module `name` has a ReLU after its hidden layer (all but `full`).
pub fn has_relu(module: &str) -> bool {
    module != "full"
}

/// config.json of a CVT tagger (`model_type: "cvt"`); cvt_text's sizes by default.
#[derive(Clone, Debug, Deserialize)]
pub struct CvtConfig {
    pub vocab_size: usize,
    #[serde(default = "default_word_embedding_size")]
    pub word_embedding_size: usize,
    #[serde(default = "default_char_embedding_size")]
    pub char_embedding_size: usize,
    #[serde(default = "default_char_filter_widths")]
    pub char_filter_widths: Vec<usize>,
    /// Filters per width.
    #[serde(default = "default_char_filters")]
    pub char_filters: usize,
    /// Bytes of a word the CNN reads (the rest are cut).
    #[serde(default = "default_max_word_length")]
    pub max_word_length: usize,
    /// The two layers' cell sizes.
    #[serde(default = "default_lstm_sizes")]
    pub lstm_sizes: Vec<usize>,
    /// Every LSTM output's width (TF's num_proj).
    #[serde(default = "default_projection_size")]
    pub projection_size: usize,
    /// The prediction modules' hidden width.
    #[serde(default = "default_projection_size")]
    pub module_size: usize,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_word_embedding_size() -> usize {
    300
}
fn default_char_embedding_size() -> usize {
    50
}
fn default_char_filter_widths() -> Vec<usize> {
    vec![2, 3, 4]
}
fn default_char_filters() -> usize {
    100
}
fn default_max_word_length() -> usize {
    20
}
fn default_lstm_sizes() -> Vec<usize> {
    vec![1024, 512]
}
fn default_projection_size() -> usize {
    512
}

impl CvtConfig {
    pub fn from_json(json: &[u8]) -> Result<CvtConfig> {
        let c: CvtConfig = from_json(json)?;
        if c.lstm_sizes.len() != 2 {
            return Err(config_err(format!("lstm_sizes names {} layers; the CVT tagger has two", c.lstm_sizes.len())));
        }
        if c.char_filter_widths.is_empty() {
            return Err(config_err("char_filter_widths is empty".into()));
        }
        let sizes = [
            ("vocab_size", c.vocab_size),
            ("word_embedding_size", c.word_embedding_size),
            ("char_embedding_size", c.char_embedding_size),
            ("char_filters", c.char_filters),
            ("max_word_length", c.max_word_length),
            ("projection_size", c.projection_size),
            ("module_size", c.module_size),
        ];
        let named = c.lstm_sizes.iter().map(|&s| ("lstm_sizes", s)).chain(c.char_filter_widths.iter().map(|&w| ("char_filter_widths", w)));
        for (name, size) in sizes.into_iter().chain(named) {
            if size == 0 || size > MAX_SIZE {
                return Err(config_err(format!("{name} {size} must be in 1..={MAX_SIZE}")));
            }
        }
        if c.max_word_length > MAX_WORD_LENGTH {
            return Err(config_err(format!("max_word_length {} is over {MAX_WORD_LENGTH} bytes (cvt_text reads 20)", c.max_word_length)));
        }
        if let Some(&wide) = c.char_filter_widths.iter().find(|&&w| w > c.chars_per_token()) {
            return Err(config_err(format!("a filter of width {wide} is wider than a word's {} character ids", c.chars_per_token())));
        }
        Ok(c)
    }

    /// The length of a token's row of character ids: [PAD, START, bytes…, END, PAD…].
    pub fn chars_per_token(&self) -> usize {
        self.max_word_length + 4
    }

    /// Each filter width's `char_cnn.{k}.weight` [filters, char_embedding_size, width] and
    /// bias.
    fn load_char_cnn(&self, w: &Weights) -> Result<Vec<(Tensor, Tensor)>> {
        let filters = |(k, &width): (usize, &usize)| {
            let filter = w.pp(format!("char_cnn.{k}"));
            Ok((filter.tensor("weight", &[self.char_filters, self.char_embedding_size, width])?, filter.tensor("bias", &[self.char_filters])?))
        };
        self.char_filter_widths.iter().enumerate().map(filters).collect()
    }

    /// `batch`'s character ids, checked to be rows of this model's width and in its
    /// character vocabulary.
    fn chars<'b>(&self, batch: &'b IdsBatch) -> Result<&'b [u32]> {
        let op = "cvt";
        let width = self.chars_per_token();
        let chars = batch.char_ids.as_ref().ok_or_else(|| arg_err!(op, "a CVT tagger reads each token's characters: the batch has no char_ids"))?;
        if batch.chars_per_token() != width {
            return Err(arg_err!(op, "char_ids rows have {} ids; this model's are max_word_length + 4 = {width}", batch.chars_per_token()));
        }
        if let Some(at) = chars.iter().position(|&id| id as usize >= CHAR_VOCAB) {
            return Err(arg_err!(op, "char_ids[{at}] is {}, outside the {CHAR_VOCAB} character ids", chars[at]));
        }
        Ok(chars)
    }

    /// A word's representation: its embedding and every CNN width's filters.
    pub fn word_repr_size(&self) -> usize {
        self.word_embedding_size + self.char_filters * self.char_filter_widths.len()
    }
}

/// A token's character ids for a model reading `max_word_length` bytes of a word: `[PAD,
/// START, b₁ + 5, …, END, PAD, …]`, or for `None` (a sentence boundary or padding) `[PAD,
/// START, MISSING, END, PAD, …]`.
pub fn char_row(word: Option<&str>, max_word_length: usize) -> Vec<u32> {
    let mut row = vec![PAD; max_word_length + 4];
    let body: Vec<u32> = match word {
        Some(word) => word.bytes().take(max_word_length).map(|b| b as u32 + FIRST_BYTE).collect(),
        None => vec![MISSING],
    };
    row[1] = START;
    row[2..2 + body.len()].copy_from_slice(&body);
    row[2 + body.len()] = END;
    row
}

/// [`char_row`]s of `words` (None: a special token), `chars_per_token` ids each.
pub fn char_ids(words: &[Option<&str>], chars_per_token: usize) -> Vec<u32> {
    let max_word_length = chars_per_token.saturating_sub(4);
    words.iter().flat_map(|&word| char_row(word, max_word_length)).collect()
}

/// One prediction module: hidden Linear, an optional ReLU, output Linear.
struct PredictionModule {
    hidden: Linear,
    relu: bool,
    output: Linear,
}

impl PredictionModule {
    fn load(w: &Weights, input: usize, size: usize, labels: usize, relu: bool) -> Result<PredictionModule> {
        Ok(PredictionModule { hidden: Linear::load(&w.pp("hidden"), input, size)?, relu, output: Linear::load(&w.pp("output"), size, labels)? })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.hidden.forward(x)?;
        self.output.forward(&if self.relu { unary(&h, Unary::Relu)? } else { h })
    }
}

/// The tagger.
pub struct CvtModel {
    pub config: CvtConfig,
    /// `word_embeddings.weight` × `emb_scale` [vocab, word_embedding_size].
    word_embeddings: Tensor,
    /// `char_embeddings.weight` [CHAR_VOCAB, char_embedding_size].
    char_embeddings: Tensor,
    /// Per width: `char_cnn.{k}.weight` [filters, char_embedding_size, width] and bias.
    char_cnn: Vec<(Tensor, Tensor)>,
    /// Per layer: forward, backward.
    layers: [[LstmLayer; 2]; 2],
    primary: PredictionModule,
    /// In [`AUXILIARY`]'s order.
    auxiliary: Vec<PredictionModule>,
    capabilities: Capabilities,
}

impl CvtModel {
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CvtModel> {
        let config = CvtConfig::from_json(config_json)?;
        let architecture = config.head.architecture("CvtForTokenClassification");
        if architecture != "CvtForTokenClassification" {
            return Err(FAMILY.unsupported(architecture));
        }
        let labels = config.head.num_labels();
        let c = &config;
        // The learnt scale of the word embeddings, folded into the table.
        let scale = w.values("emb_scale", &[1])?[0];
        let table: Vec<f32> = w.values("word_embeddings.weight", &[c.vocab_size, c.word_embedding_size])?.iter().map(|v| v * scale).collect();
        let word_embeddings = Tensor::from_slice(w.gpu(), &table, &[c.vocab_size, c.word_embedding_size])?;
        let char_embeddings = w.tensor("char_embeddings.weight", &[CHAR_VOCAB, c.char_embedding_size])?;
        let char_cnn = c.load_char_cnn(w)?;
        let p = c.projection_size;
        let layer = |k: usize, input: usize| -> Result<[LstmLayer; 2]> {
            let encoder = w.pp(format!("encoder.{k}"));
            Ok([LstmLayer::projected(&encoder, "", input, c.lstm_sizes[k], p)?, LstmLayer::projected(&encoder, "_reverse", input, c.lstm_sizes[k], p)?])
        };
        let layers = [layer(0, c.word_repr_size())?, layer(1, 2 * p)?];
        let module = |name: &str| PredictionModule::load(&w.pp(name), ModuleInput::of(name).width(p), c.module_size, labels, has_relu(name));
        let auxiliary = AUXILIARY.iter().map(|&name| module(name)).collect::<Result<_>>()?;
        Ok(CvtModel {
            primary: module("primary")?,
            auxiliary,
            word_embeddings,
            char_embeddings,
            char_cnn,
            layers,
            capabilities: Capabilities::new(vec![(Capability::TokenClassification, "logits")]),
            config,
        })
    }

    /// The word representations [B·T, word_repr_size]: embeddings and the character CNN.
    fn word_reprs(&self, batch: &IdsBatch) -> Result<Tensor> {
        let c = &self.config;
        let (width, chars) = (c.chars_per_token(), c.chars(batch)?);
        let tokens = batch.batch * batch.seq;
        let words = embedding(&self.word_embeddings, None, None, &EmbeddingIds { tokens: &batch.input_ids, positions: None, segments: None }, &[tokens])?;
        let embedded = embedding(&self.char_embeddings, None, None, &EmbeddingIds { tokens: chars, positions: None, segments: None }, &[tokens * width])?;
        let filters: Vec<ConvFilter> = self.char_cnn.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
        // ReLU then max (cvt_text) is max then ReLU: ReLU keeps order.
        let cnn = char_cnn(&embedded.reshape(&[tokens, width, c.char_embedding_size])?, &filters, Activation::Relu)?;
        concat_columns(&[&words, &cnn])
    }
}

impl Model for CvtModel {
    fn architecture(&self) -> &str {
        "CvtForTokenClassification"
    }
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    fn sizes(&self) -> ModelSizes {
        let c = &self.config;
        ModelSizes { layers: 2, heads: 0, hidden_size: 2 * c.projection_size, vocab_size: c.vocab_size }
    }
    fn max_positions(&self) -> usize {
        MAX_STEPS
    }
    fn head_config(&self) -> &HeadConfig {
        &self.config.head
    }
    fn inputs(&self) -> InputKinds {
        InputKinds { chars_per_token: self.config.chars_per_token(), ..InputKinds::default() }
    }
    /// `logits` (the primary module) and `logits.{module}` of each auxiliary view [B, T,
    /// labels]; with hidden states, the word representations and each layer's [fw; bw].
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        let op = "cvt";
        batch.validate()?;
        if batch.choices.is_some() {
            return Err(arg_err!(op, "a CVT tagger reads one sentence per row, not multiple choices"));
        }
        if batch.seq > MAX_STEPS {
            return Err(arg_err!(op, "{} tokens exceed the {MAX_STEPS} one forward reads", batch.seq));
        }
        if let Some(at) = batch.input_ids.iter().position(|&id| id as usize >= self.config.vocab_size) {
            return Err(arg_err!(op, "input_ids[{at}] is {}, outside the vocabulary of {}", batch.input_ids[at], self.config.vocab_size));
        }
        let lengths = right_padded_lengths(op, batch)?;
        let (b, t) = (batch.batch, batch.seq);
        let mut layers = vec![self.word_reprs(batch)?];
        let mut directions = Vec::with_capacity(2);
        for [forward, backward] in &self.layers {
            let x = layers.last().expect("the word representations are first");
            let (fw, bw) = (forward.forward(x, &lengths, t)?, backward.forward(x, &lengths, t)?);
            layers.push(concat_columns(&[&fw, &bw])?);
            directions.push((fw, bw));
        }
        let (fw1, bw1) = &directions[0];
        let both = concat_columns(&[&layers[1], &layers[2]])?;
        let shaped = |x: Tensor| -> Result<Tensor> {
            let width = x.shape()[1];
            x.reshape(&[b, t, width])
        };
        let mut out = ModelOutput::default();
        out.push("logits", shaped(self.primary.forward(&both)?)?);
        for (name, module) in AUXILIARY.iter().zip(&self.auxiliary) {
            let input = match ModuleInput::of(name) {
                ModuleInput::Both => &both,
                ModuleInput::Forward => fw1,
                ModuleInput::Backward => bw1,
            };
            out.push(format!("logits.{name}"), shaped(module.forward(input)?)?);
        }
        if options.hidden_states {
            for (i, layer) in layers.into_iter().enumerate() {
                out.push(format!("hidden_states.{i}"), shaped(layer)?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_word_s_characters_are_its_bytes_between_start_and_end() {
        assert_eq!(super::char_row(Some("Ab"), 4), [0, 2, 65 + 5, 98 + 5, 3, 0, 0, 0]);
        // Cut to max_word_length bytes; a boundary token is MISSING.
        assert_eq!(super::char_row(Some("é!xyz"), 3), [0, 2, 0xc3 + 5, 0xa9 + 5, 33 + 5, 3, 0]);
        assert_eq!(super::char_row(None, 2), [0, 2, 4, 3, 0, 0]);
    }
}
