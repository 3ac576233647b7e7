//! The models, one file per family, named after the Hugging Face classes; a model's module
//! tree mirrors its checkpoint's key tree.
//!
//! - [`registry`]: `model_type` → the family's loader. Adding a family is its file and one
//!   line there.
//! - [`Model`]: what every loaded model offers — a forward pass with transformers' output
//!   names, and its [`Capability`]s, which decide the tasks it serves.
//! - [`encoder`]: the BERT-like stack the encoder families share (embeddings with their
//!   options, post-LN layers, pooler and heads); [`decoder`]: the GPT toolkit (KV cache,
//!   blocks, LM head).
//!
//! Deviations from "key = module path", listed once:
//! - GPT-2 / GPT `Conv1D` weights are stored [in, out] (`nn::Linear::load_conv1d`).
//! - Tied output embeddings have no tensor of their own: the LM head reuses the word
//!   embedding table (`cls.predictions.decoder.weight`, `lm_head.weight`, … are absent).
//! - Checkpoints saved from a bare base model (MiniLM sentence encoders) have no family
//!   prefix (`bert.`).
//! - The encoder families name the same layer parts differently (`attention.self.query`,
//!   `attention.q_lin`, `attention.query`): each family's file gives its names once
//!   ([`encoder::LayerNames`]).

pub mod albert;
pub mod auto;
pub mod awd_lstm;
pub mod bert;
pub mod config;
pub mod cove;
pub mod cvt;
pub mod decoder;
pub mod distilbert;
pub mod electra;
pub mod elmo;
pub mod encoder;
pub mod ernie;
pub mod family;
pub mod gpt;
pub mod gpt2;
mod ids_json;
#[cfg(not(target_arch = "wasm32"))]
pub mod quantize_folder;
pub mod registry;
pub mod rnn;
pub mod roberta;
pub mod training;

use crate::error::{arg_err, shape_err, Result};
use crate::tensor::{DType, Tensor};

pub use config::HeadConfig;

/// What a model can do. Tasks ask for a capability, not a family: any model that has it will
/// do, and one that lacks it says what it can do instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Sentence embeddings pooled from the final hidden states (every transformer).
    Embeddings,
    /// Masked-token logits [B, T, V].
    FillMask,
    /// One label per sequence (or pair).
    SequenceClassification,
    /// One label per token.
    TokenClassification,
    /// Answer-span start and end logits.
    QuestionAnswering,
    /// One score per choice of a [batch, choices, seq] input.
    MultipleChoice,
    /// Whether sentence B follows sentence A: BERT's next-sentence or ALBERT's sentence-order
    /// head (index 0 = "B follows A", in both).
    NextSentence,
    /// ELECTRA's discriminator: per token, the logit that it was replaced.
    ReplacedTokens,
    /// Next-token logits with a KV cache.
    Generation,
    /// The likelihood of a text under a left-to-right language model.
    Perplexity,
}

impl Capability {
    /// The pipeline (task name of the npm package and transformers) that serves it.
    pub fn task(self) -> &'static str {
        match self {
            Capability::Embeddings => "feature-extraction",
            Capability::FillMask => "fill-mask",
            Capability::SequenceClassification => "text-classification",
            Capability::TokenClassification => "token-classification",
            Capability::QuestionAnswering => "question-answering",
            Capability::MultipleChoice => "multiple-choice",
            Capability::NextSentence => "next-sentence-prediction",
            Capability::ReplacedTokens => "replaced-token-detection",
            Capability::Generation => "text-generation",
            Capability::Perplexity => "perplexity",
        }
    }

    /// How an error message says what a model with this capability does.
    pub fn describe(self) -> &'static str {
        match self {
            Capability::Embeddings => "compute sentence embeddings (feature-extraction)",
            Capability::FillMask => "fill masks (fill-mask)",
            Capability::SequenceClassification => "classify texts (text-classification)",
            Capability::TokenClassification => "label tokens (token-classification)",
            Capability::QuestionAnswering => "answer questions (question-answering)",
            Capability::MultipleChoice => "pick among choices (multiple-choice)",
            Capability::NextSentence => "tell whether a sentence follows another (next-sentence-prediction)",
            Capability::ReplacedTokens => "find replaced tokens (replaced-token-detection)",
            Capability::Generation => "generate text (text-generation)",
            Capability::Perplexity => "score text (perplexity)",
        }
    }
}

/// A model's capabilities, each with the output that holds its result.
#[derive(Clone, Debug, Default)]
pub struct Capabilities(Vec<(Capability, &'static str)>);

impl Capabilities {
    pub fn new(entries: Vec<(Capability, &'static str)>) -> Capabilities {
        Capabilities(entries)
    }

    pub fn list(&self) -> Vec<Capability> {
        self.0.iter().map(|&(c, _)| c).collect()
    }

    pub fn has(&self, capability: Capability) -> bool {
        self.0.iter().any(|&(c, _)| c == capability)
    }

    /// The output holding `capability`'s result, or an error for `op` that says what the
    /// model (`architecture`) can do instead.
    pub fn output(&self, capability: Capability, op: &'static str, architecture: &str) -> Result<&'static str> {
        if let Some(&(_, name)) = self.0.iter().find(|&&(c, _)| c == capability) {
            return Ok(name);
        }
        let can: Vec<&str> = self.0.iter().map(|&(c, _)| c.describe()).collect();
        Err(arg_err!(
            op,
            "needs a model that can {}; `{architecture}` can {}",
            capability.describe(),
            if can.is_empty() { "only run forward passes".to_string() } else { can.join(", ") }
        ))
    }
}

/// What to return besides the head's outputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardOptions {
    /// `hidden_states.{i}`: the embedding output and every layer's output.
    pub hidden_states: bool,
    /// `attentions.{i}`: every layer's attention probabilities [B, heads, T, T].
    pub attentions: bool,
    /// `last_hidden_state` even when the model has a head (sentence embeddings of any model).
    pub last_hidden_state: bool,
    /// Language-model logits only at each sequence's last position ([B, 1, V]), as generation
    /// needs them; decoders only.
    pub last_position_only: bool,
}

/// A loaded model of any family: a forward pass over token ids, and what it can do.
pub trait Model {
    /// The transformers class (`BertForMaskedLM`, `RobertaModel`, …).
    fn architecture(&self) -> &str;
    fn capabilities(&self) -> &Capabilities;
    /// Sizes and labels, as [`ModelSummary`](auto::ModelSummary) reports them.
    fn sizes(&self) -> ModelSizes;
    /// The longest text it reads, in tokens (its positions).
    fn max_positions(&self) -> usize;
    fn head_config(&self) -> &HeadConfig;
    /// The inputs it reads besides token ids.
    fn inputs(&self) -> InputKinds;
    /// One forward pass over a batch of ids; outputs are named as transformers names them.
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput>;
    /// The model as a left-to-right language model (generation, perplexity), if it is one.
    fn as_causal_lm(&self) -> Option<&dyn decoder::CausalLm> {
        None
    }
}

/// Sizes of a model, for reports.
#[derive(Clone, Copy, Debug)]
pub struct ModelSizes {
    pub layers: usize,
    pub heads: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
}

/// The inputs a model reads besides token ids (and the attention mask every model reads).
#[derive(Clone, Copy, Debug, Default)]
pub struct InputKinds {
    /// Segment (token type) ids: BERT's sentence A/B, where a family has more than one (with
    /// none or one, as in DistilBERT and RoBERTa, ids given are ignored or must be 0).
    pub token_types: bool,
    /// ERNIE's task type ids.
    pub task_types: bool,
    /// It reads a text pair as one sequence (encoders); decoders read one text.
    pub pairs: bool,
    /// Each token's characters, in rows of this many ids (`IdsBatch::char_ids`); 0 for none.
    pub chars_per_token: usize,
}

/// A batch of token ids, row-major [batch, seq] (or [batch, choices, seq] for multiple
/// choice), as a tokenizer returns them.
#[derive(Clone, Debug, Default)]
pub struct IdsBatch {
    pub input_ids: Vec<u32>,
    /// 1 for real tokens, 0 for padding; default all 1.
    pub attention_mask: Option<Vec<u32>>,
    /// Segment ids; default all 0. A family without token types ignores them.
    pub token_type_ids: Option<Vec<u32>>,
    /// ERNIE's task type ids; default all 0.
    pub task_type_ids: Option<Vec<u32>>,
    /// Each token's characters, for a model that reads them (CVT's character CNN):
    /// `[batch, seq, width]`, the width the model's config names.
    pub char_ids: Option<Vec<u32>>,
    pub batch: usize,
    /// Multiple choice: the number of choices of each of the `batch` examples.
    pub choices: Option<usize>,
    pub seq: usize,
}

impl IdsBatch {
    /// (ids, token types) rows right-padded to the longest with `pad_id` (attention mask 0,
    /// token type 0 on padding).
    pub fn padded(rows: &[(Vec<u32>, Vec<u32>)], pad_id: u32) -> IdsBatch {
        let seq = rows.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        let (mut input_ids, mut attention_mask, mut token_type_ids) = (Vec::new(), Vec::new(), Vec::new());
        for (ids, types) in rows {
            let pad = seq - ids.len();
            input_ids.extend(ids.iter().copied().chain(std::iter::repeat_n(pad_id, pad)));
            attention_mask.extend(std::iter::repeat_n(1, ids.len()).chain(std::iter::repeat_n(0, pad)));
            token_type_ids.extend(types.iter().copied().chain(std::iter::repeat_n(0, pad)));
        }
        IdsBatch { input_ids, attention_mask: Some(attention_mask), token_type_ids: Some(token_type_ids), batch: rows.len(), seq, ..IdsBatch::default() }
    }

    /// The sequences the model reads: every choice of every example.
    pub fn rows(&self) -> usize {
        self.batch * self.choices.unwrap_or(1)
    }

    /// Checks that every input has one value per token.
    pub fn validate(&self) -> Result<()> {
        let expected = self.rows() * self.seq;
        if expected == 0 {
            return Err(arg_err!("forward", "the batch is empty (batch {}, choices {}, seq {})", self.batch, self.choices.unwrap_or(1), self.seq));
        }
        for (name, ids) in [
            ("input_ids", Some(&self.input_ids)),
            ("attention_mask", self.attention_mask.as_ref()),
            ("token_type_ids", self.token_type_ids.as_ref()),
            ("task_type_ids", self.task_type_ids.as_ref()),
        ] {
            if let Some(ids) = ids {
                if ids.len() != expected {
                    let shape = match self.choices {
                        Some(c) => format!("batch {} × choices {c} × seq {}", self.batch, self.seq),
                        None => format!("batch {} × seq {}", self.batch, self.seq),
                    };
                    return Err(shape_err!("forward", "{name} has {} ids, but {shape} is {expected}", ids.len()));
                }
            }
        }
        if let Some(chars) = &self.char_ids {
            if chars.is_empty() || chars.len() % expected != 0 {
                return Err(shape_err!("forward", "char_ids has {} ids, not a whole row of characters for each of the {expected} tokens", chars.len()));
            }
        }
        Ok(())
    }

    /// Characters per token in `char_ids` (0 without them).
    pub fn chars_per_token(&self) -> usize {
        self.char_ids.as_ref().map_or(0, |chars| chars.len() / (self.rows() * self.seq).max(1))
    }
}

/// An error unless every value of an attention mask is 0 (padding) or 1 (a token).
pub(crate) fn check_mask_values(op: &'static str, mask: &[u32]) -> Result<()> {
    match mask.iter().position(|&v| v > 1) {
        Some(at) => Err(arg_err!(op, "attention_mask holds {} at index {at}; masks are 1 (a token) or 0 (padding)", mask[at])),
        None => Ok(()),
    }
}

/// A forward pass kept with its inputs, so that an output holding NaN or ±Inf is an error
/// naming the layer where they first appear rather than a number passed on.
pub struct Forwarded<'a> {
    pub model: &'a dyn Model,
    pub batch: IdsBatch,
    pub output: ModelOutput,
}

impl<'a> Forwarded<'a> {
    pub fn run(model: &'a dyn Model, batch: IdsBatch, options: ForwardOptions) -> Result<Forwarded<'a>> {
        let output = model.forward(&batch, options)?;
        Ok(Forwarded { model, batch, output })
    }

    /// Output `name`, downloaded and checked with [`Forwarded::check`].
    pub async fn read(&self, op: &'static str, name: &str) -> Result<Vec<f32>> {
        let values = self.output.get(name).ok_or_else(|| arg_err!(op, "the model has no `{name}` output"))?.to_vec::<f32>().await?;
        self.check(name, &values).await?;
        Ok(values)
    }

    /// Every f32 output downloaded and checked, by name.
    pub async fn read_all(&self) -> Result<Vec<(String, Vec<f32>)>> {
        let mut read = Vec::new();
        for (name, tensor) in self.output.tensors.iter().filter(|(_, t)| t.dtype() == DType::F32) {
            let values = tensor.to_vec::<f32>().await?;
            self.check(name, &values).await?;
            read.push((name.clone(), values));
        }
        Ok(read)
    }

    /// An error when `values` (read from output `name`, or computed from it) hold NaN or
    /// ±Inf, naming the first hidden state that does (found by a second pass, only then).
    pub async fn check(&self, name: &str, values: &[f32]) -> Result<()> {
        if values.iter().all(|v| v.is_finite()) {
            return Ok(());
        }
        let traced = self.model.forward(&self.batch, ForwardOptions { hidden_states: true, ..ForwardOptions::default() })?;
        let mut location = format!("`{}`'s head, after its last layer", self.model.architecture());
        for layer in 0.. {
            let Some(hidden) = traced.get(&format!("hidden_states.{layer}")) else { break };
            if hidden.to_vec::<f32>().await?.iter().any(|v| !v.is_finite()) {
                location = match layer {
                    0 => "the embeddings (hidden_states.0)".to_string(),
                    layer => format!("the output of layer {layer} (hidden_states.{layer})"),
                };
                break;
            }
        }
        Err(crate::error::SesameError::NonFinite { output: name.to_string(), location })
    }
}

/// A model's outputs under the attribute names of the transformers output object
/// (`logits`, `last_hidden_state`, `hidden_states.{i}`, `attentions.{i}`, …).
#[derive(Default)]
pub struct ModelOutput {
    pub tensors: Vec<(String, Tensor)>,
}

impl ModelOutput {
    /// An output of one tensor, `logits`: what a classifier's or a language model's training
    /// forward gives held-out evaluation.
    pub fn logits(logits: Tensor) -> ModelOutput {
        ModelOutput { tensors: vec![("logits".into(), logits)] }
    }

    pub fn push(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.push((name.into(), t));
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// Downloads every tensor and serializes them as one safetensors file (f32, ids as u32).
    pub async fn to_safetensors(&self) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.tensors.len());
        for (name, t) in &self.tensors {
            let (dtype, bytes) = match t.dtype() {
                DType::U32 => (safetensors::Dtype::U32, bytemuck::cast_slice(&t.to_vec::<u32>().await?).to_vec()),
                _ => (safetensors::Dtype::F32, bytemuck::cast_slice(&t.to_vec::<f32>().await?).to_vec()),
            };
            data.push((name.clone(), dtype, t.shape().to_vec(), bytes));
        }
        let entries: Vec<_> = data.iter().map(|(name, dtype, shape, bytes)| (name.as_str(), *dtype, shape.as_slice(), bytes.as_slice())).collect();
        crate::weights::serialize(&entries)
    }
}
