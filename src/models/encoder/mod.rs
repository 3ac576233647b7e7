//! The encoder stack the BERT-like families share (BERT, RoBERTa, XLM-RoBERTa, DistilBERT,
//! ALBERT, ERNIE, ELECTRA): [`Embeddings`], an optional E → H projection, post-LN
//! [`EncoderLayer`]s (ALBERT runs shared ones several times), a pooler, and one of the
//! [`heads`]. A family's file reads its config into an [`EncoderConfig`], loads these parts
//! under its own key names and picks the head its config names.

pub mod distill;
mod embeddings;
#[cfg(feature = "training")]
pub mod fresh;
pub mod heads;
mod layer;
pub mod train;
mod trainable;

pub use embeddings::{sinusoidal_table, Embeddings};
pub use heads::{EncoderHead, LmHeadNames, MaskedLmHead, MlpHead, SentencePairHead, SequenceHead, SpanHead};
pub use layer::{EncoderLayer, LayerNames, BERT_LAYER};
pub use trainable::transformer_activation_values;

use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, shape_err, Result, SesameError};
use crate::nn::{Activation, LayerNorm, Linear};
use crate::ops::dropout::LayerSites;
use crate::ops::elementwise::{self, Unary};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// How token positions are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// 0, 1, … along each sequence (BERT).
    FromZero,
    /// RoBERTa's: the running count of non-padding tokens after the padding id (so the
    /// first real token sits at pad + 1), padding at the padding id.
    AfterPadding(u32),
}

/// Where each sublayer's LayerNorm sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    /// x = LayerNorm(x + f(x)), and a LayerNorm on the embeddings (BERT and most families).
    Post,
    /// x = x + f(LayerNorm(x)), no LayerNorm on the embeddings, one after the last layer
    /// (XLM-RoBERTa-XL).
    Pre,
}

/// What the encoder needs of a family's config.
#[derive(Clone, Debug)]
pub struct EncoderConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    /// The embedding tables' width E: ALBERT's and ELECTRA's `embedding_size`, else the
    /// hidden size.
    pub embedding_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub activation: Activation,
    pub max_position_embeddings: usize,
    /// 0 when the family has no token types (DistilBERT).
    pub type_vocab_size: usize,
    pub positions: Positions,
    /// A position table missing from the checkpoint is DistilBERT's sinusoidal one.
    pub sinusoidal_positions: bool,
    /// ERNIE's task type embeddings (with `use_task_id`).
    pub task_type_vocab_size: Option<usize>,
    pub norm: Norm,
    pub layer_norm_eps: f32,
    /// Dropout on the embeddings' and each block's output (training only).
    pub hidden_dropout_prob: f32,
    /// Dropout on the attention probabilities (training only).
    pub attention_probs_dropout_prob: f32,
    /// Dropout before a classification head; default hidden_dropout_prob.
    pub classifier_dropout: Option<f32>,
    /// Dropout before a span head (DistilBERT's `qa_dropout`); None: none (BERT's head reads
    /// the last layer's output directly).
    pub span_dropout: Option<f32>,
    /// The dropout calls of each layer (which sets the numbering of the sites after them).
    pub dropout_sites: LayerSites,
    pub head: HeadConfig,
}

impl EncoderConfig {
    /// The longest sequence: the position table's rows, less those RoBERTa's numbering skips.
    pub fn max_positions(&self) -> usize {
        match self.positions {
            Positions::FromZero => self.max_position_embeddings,
            Positions::AfterPadding(pad) => self.max_position_embeddings.saturating_sub(pad as usize + 1),
        }
    }
}

/// A batch of token ids for an encoder, row-major [batch, seq] (multiple choice: every
/// choice of every question is a row).
#[derive(Clone, Copy, Debug)]
pub struct EncoderInputs<'a> {
    pub input_ids: &'a [u32],
    /// 1 for real tokens, 0 for padding; default all 1.
    pub attention_mask: Option<&'a [u32]>,
    /// Segment A = 0, B = 1; default all 0. Ignored by a family without token types.
    pub token_type_ids: Option<&'a [u32]>,
    /// ERNIE's task ids; default 0.
    pub task_type_ids: Option<&'a [u32]>,
    pub batch: usize,
    pub seq: usize,
}

impl<'a> EncoderInputs<'a> {
    /// Token ids alone, every other input at its default.
    pub fn ids(input_ids: &'a [u32], batch: usize, seq: usize) -> EncoderInputs<'a> {
        EncoderInputs { input_ids, attention_mask: None, token_type_ids: None, task_type_ids: None, batch, seq }
    }
}

/// The parts a family loads, before the head.
pub struct EncoderParts {
    pub embeddings: Embeddings,
    /// ALBERT's `embedding_hidden_mapping_in`, ELECTRA's `embeddings_project`: E → H.
    pub projection: Option<Linear>,
    /// The distinct layers.
    pub layers: Vec<EncoderLayer>,
    /// Which of `layers` runs at each depth: each once in order, except in ALBERT, whose
    /// groups of layers are shared across depths.
    pub schedule: Vec<usize>,
    /// Dense + tanh on the first token (`pooler.dense`, ALBERT's `pooler`).
    pub pooler: Option<Linear>,
    /// The LayerNorm after the last layer of a pre-LN stack (`encoder.LayerNorm`).
    pub final_norm: Option<LayerNorm>,
}

/// An encoder family's model: its parts and head.
pub struct Encoder {
    pub config: EncoderConfig,
    architecture: String,
    pub(crate) embeddings: Embeddings,
    pub(crate) projection: Option<Linear>,
    pub(crate) layers: Vec<EncoderLayer>,
    pub(crate) schedule: Vec<usize>,
    pub(crate) pooler: Option<Linear>,
    pub(crate) final_norm: Option<LayerNorm>,
    pub(crate) head: EncoderHead,
    capabilities: Capabilities,
}

impl EncoderHead {
    /// Whether the head reads the pooler.
    pub fn needs_pooler(&self) -> bool {
        matches!(
            self,
            EncoderHead::PreTraining(..)
                | EncoderHead::NextSentence(_)
                | EncoderHead::SequenceClassification(SequenceHead::Pooled(_))
                | EncoderHead::MultipleChoice(SequenceHead::Pooled(_))
        )
    }

    /// What the head can do, with the output holding each result.
    fn capabilities(&self) -> Capabilities {
        let mut capabilities = match self {
            EncoderHead::Base => vec![],
            EncoderHead::ReplacedTokens(_) => vec![(Capability::ReplacedTokens, "logits")],
            EncoderHead::MaskedLm(_) => vec![(Capability::FillMask, "logits")],
            EncoderHead::PreTraining(_, pair) => vec![(Capability::FillMask, "prediction_logits"), (Capability::NextSentence, pair.output)],
            EncoderHead::NextSentence(_) => vec![(Capability::NextSentence, "logits")],
            EncoderHead::SequenceClassification(_) => vec![(Capability::SequenceClassification, "logits")],
            EncoderHead::TokenClassification(_) => vec![(Capability::TokenClassification, "logits")],
            EncoderHead::QuestionAnswering(_) => vec![(Capability::QuestionAnswering, "start_logits")],
            EncoderHead::MultipleChoice(_) => vec![(Capability::MultipleChoice, "logits")],
        };
        capabilities.push((Capability::Embeddings, "last_hidden_state"));
        Capabilities::new(capabilities)
    }
}

/// The pooler under `w` (dense + tanh, H → H), when the checkpoint has one.
pub fn optional_pooler(w: &Weights, hidden_size: usize) -> Result<Option<Linear>> {
    w.contains("weight").then(|| Linear::load(w, hidden_size, hidden_size)).transpose()
}

/// An error naming the pooler's weight under `w` when `head` reads a pooler the checkpoint
/// lacks.
pub fn check_pooler(head: &EncoderHead, pooler: &Option<Linear>, w: &Weights, architecture: &str) -> Result<()> {
    if head.needs_pooler() && pooler.is_none() {
        return Err(SesameError::Checkpoint(format!("`{architecture}` needs the pooler, but `{}` is missing", w.name("weight"))));
    }
    Ok(())
}

/// Row (of the flattened [B·T]) of each sequence's first token ([CLS], `<s>`).
pub(crate) fn first_rows(batch: usize, seq: usize) -> Vec<usize> {
    (0..batch).map(|b| b * seq).collect()
}

impl Encoder {
    pub fn new(config: EncoderConfig, architecture: String, parts: EncoderParts, head: EncoderHead) -> Encoder {
        let EncoderParts { embeddings, projection, layers, schedule, pooler, final_norm } = parts;
        let capabilities = head.capabilities();
        Encoder { config, architecture, embeddings, projection, layers, schedule, pooler, final_norm, head, capabilities }
    }

    pub fn gpu(&self) -> &crate::Device {
        self.embeddings.word_embeddings.gpu()
    }

    /// The output holding masked-LM logits [B, T, V], when the head has them.
    pub fn masked_lm_logits_name(&self) -> Option<&'static str> {
        match self.head {
            EncoderHead::MaskedLm(_) => Some("logits"),
            EncoderHead::PreTraining(..) => Some("prediction_logits"),
            _ => None,
        }
    }

    /// The output holding the sentence-pair logits, when the head is a `…ForPreTraining`
    /// with a next-sentence or sentence-order head.
    pub fn sentence_pair_output(&self) -> Option<&'static str> {
        match &self.head {
            EncoderHead::PreTraining(_, pair) => Some(pair.output),
            _ => None,
        }
    }

    /// Whether the head is ELECTRA's discriminator.
    pub fn detects_replaced_tokens(&self) -> bool {
        matches!(self.head, EncoderHead::ReplacedTokens(_))
    }

    /// The layers in the order they run.
    pub(crate) fn layer_stack(&self) -> impl DoubleEndedIterator<Item = &EncoderLayer> + ExactSizeIterator {
        self.schedule.iter().map(|&i| &self.layers[i])
    }

    fn validate(&self, inputs: &EncoderInputs) -> Result<()> {
        let op = "forward";
        let n = inputs.batch * inputs.seq;
        if n == 0 {
            return Err(arg_err!(op, "empty input: batch {} × sequence {}", inputs.batch, inputs.seq));
        }
        let max = self.config.max_positions();
        if inputs.seq > max {
            return Err(arg_err!(
                op,
                "a sequence of {} tokens is longer than the model's {max} positions (max_position_embeddings {})",
                inputs.seq,
                self.config.max_position_embeddings
            ));
        }
        for (name, ids) in [
            ("input_ids", Some(inputs.input_ids)),
            ("attention_mask", inputs.attention_mask),
            ("token_type_ids", inputs.token_type_ids),
            ("task_type_ids", inputs.task_type_ids),
        ] {
            if let Some(ids) = ids {
                if ids.len() != n {
                    return Err(shape_err!(op, "{name} has {} values for batch {} × sequence {}", ids.len(), inputs.batch, inputs.seq));
                }
            }
        }
        if let Some(mask) = inputs.attention_mask {
            super::check_mask_values(op, mask)?;
        }
        Ok(())
    }

    /// The attention mask as f32 [B, T] (all ones by default).
    pub(crate) fn key_mask(&self, inputs: &EncoderInputs) -> Result<Tensor> {
        let mask: Vec<f32> = match inputs.attention_mask {
            Some(m) => m.iter().map(|&v| v as f32).collect(),
            None => vec![1.0; inputs.batch * inputs.seq],
        };
        Tensor::from_slice(self.gpu(), &mask, &[inputs.batch, inputs.seq])
    }

    /// The family's inputs without those it does not read (token types).
    fn own_inputs<'a>(&self, inputs: &EncoderInputs<'a>) -> EncoderInputs<'a> {
        EncoderInputs { token_type_ids: inputs.token_type_ids.filter(|_| self.config.type_vocab_size > 0), ..*inputs }
    }

    /// The embeddings and the layers (and a pre-LN stack's final LayerNorm): the last hidden
    /// states [B, T, H], pushing the hidden states and attentions `options` asks for to `out`.
    fn encode(&self, inputs: &EncoderInputs, key_mask: &Tensor, options: ForwardOptions, out: &mut ModelOutput) -> Result<Tensor> {
        let mut x = self.embeddings.forward(inputs)?;
        if let Some(projection) = &self.projection {
            x = projection.forward(&x)?;
        }
        if options.hidden_states {
            out.push("hidden_states.0", x.clone());
        }
        let depth = self.schedule.len();
        for (i, layer) in self.layer_stack().enumerate() {
            let (y, probs) = layer.forward(&x, key_mask, options.attentions)?;
            x = y;
            if i + 1 == depth {
                // A pre-LN stack's last hidden state is after its final LayerNorm.
                if let Some(norm) = &self.final_norm {
                    x = norm.forward(&x)?;
                }
            }
            if options.hidden_states {
                out.push(format!("hidden_states.{}", i + 1), x.clone());
            }
            if let Some(p) = probs {
                out.push(format!("attentions.{i}"), p);
            }
        }
        Ok(x)
    }

    /// The last hidden states as rows [B·T, H], without running the head (a distillation
    /// teacher applies its masked-LM head to the rows it needs).
    pub fn last_hidden_rows(&self, inputs: &EncoderInputs) -> Result<Tensor> {
        let inputs = &self.own_inputs(inputs);
        self.validate(inputs)?;
        let x = self.encode(inputs, &self.key_mask(inputs)?, ForwardOptions::default(), &mut ModelOutput::default())?;
        x.reshape(&[inputs.batch * inputs.seq, self.config.hidden_size])
    }

    /// The masked-LM head's logits [N, V] of hidden-state rows [N, H].
    pub fn masked_lm_logits(&self, rows: &Tensor) -> Result<Tensor> {
        match &self.head {
            EncoderHead::MaskedLm(lm) | EncoderHead::PreTraining(lm, _) => lm.forward(rows),
            _ => Err(arg_err!("forward", "`{}` has no masked-LM head", self.architecture)),
        }
    }

    /// Runs the embeddings, the layers and the head; outputs are named as transformers names
    /// them (a multiple-choice head's logits are [rows, 1] here).
    pub fn forward(&self, inputs: &EncoderInputs, options: ForwardOptions) -> Result<ModelOutput> {
        let inputs = &self.own_inputs(inputs);
        self.validate(inputs)?;
        let (batch, seq, width) = (inputs.batch, inputs.seq, self.config.hidden_size);
        let key_mask = self.key_mask(inputs)?;

        let mut out = ModelOutput::default();
        let x = self.encode(inputs, &key_mask, options, &mut out)?;
        let rows = x.reshape(&[batch * seq, width])?;
        let first = || rows.select_rows(&first_rows(batch, seq));
        let pooled = || -> Result<Tensor> {
            let pooler = self.pooler.as_ref().ok_or_else(|| arg_err!("forward", "this checkpoint has no pooler"))?;
            elementwise::unary(&pooler.forward(&first()?)?, Unary::Tanh)
        };
        let classify = |head: &SequenceHead| match head {
            SequenceHead::Pooled(classifier) => classifier.forward(&pooled()?),
            SequenceHead::FirstToken(mlp) => mlp.forward(&first()?),
        };
        match &self.head {
            EncoderHead::Base => {
                if self.pooler.is_some() {
                    out.push("pooler_output", pooled()?);
                }
            }
            EncoderHead::MaskedLm(lm) => out.push("logits", lm.forward(&x)?),
            EncoderHead::PreTraining(lm, pair) => {
                out.push("prediction_logits", lm.forward(&x)?);
                out.push(pair.output, pair.classifier.forward(&pooled()?)?);
            }
            EncoderHead::NextSentence(next) => out.push("logits", next.forward(&pooled()?)?),
            EncoderHead::SequenceClassification(head) | EncoderHead::MultipleChoice(head) => out.push("logits", classify(head)?),
            EncoderHead::TokenClassification(classifier) => out.push("logits", classifier.forward(&x)?),
            EncoderHead::QuestionAnswering(span) => {
                let (start, end) = span.logits(&rows, batch, seq)?;
                out.push("start_logits", start);
                out.push("end_logits", end);
            }
            EncoderHead::ReplacedTokens(discriminator) => out.push("logits", discriminator.forward(&rows)?.reshape(&[batch, seq])?),
        }
        if matches!(self.head, EncoderHead::Base) || options.last_hidden_state {
            out.push("last_hidden_state", x);
        }
        Ok(out)
    }
}

impl Model for Encoder {
    fn architecture(&self) -> &str {
        &self.architecture
    }
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    fn sizes(&self) -> ModelSizes {
        let c = &self.config;
        ModelSizes { layers: c.num_hidden_layers, heads: c.num_attention_heads, hidden_size: c.hidden_size, vocab_size: c.vocab_size }
    }
    fn max_positions(&self) -> usize {
        self.config.max_positions()
    }
    fn head_config(&self) -> &HeadConfig {
        &self.config.head
    }
    fn inputs(&self) -> InputKinds {
        // One token type (RoBERTa) reads nothing from them: their tokenizers return none.
        InputKinds { token_types: self.config.type_vocab_size > 1, task_types: self.config.task_type_vocab_size.is_some(), pairs: true, chars_per_token: 0 }
    }

    /// A multiple-choice head takes [batch, choices, seq] ids and returns logits [batch,
    /// choices]; other heads take [batch, seq].
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        let op = "forward";
        batch.validate()?;
        let multiple_choice = matches!(self.head, EncoderHead::MultipleChoice(_));
        match batch.choices {
            None if multiple_choice => return Err(arg_err!(op, "`{}` scores choices: give ids as [batch, choices, seq]", self.architecture)),
            Some(_) if !multiple_choice => {
                return Err(arg_err!(op, "[batch, choices, seq] ids are for multiple-choice models; `{}` reads [batch, seq]", self.architecture))
            }
            _ => {}
        }
        let inputs = EncoderInputs {
            input_ids: &batch.input_ids,
            attention_mask: batch.attention_mask.as_deref(),
            token_type_ids: batch.token_type_ids.as_deref(),
            task_type_ids: batch.task_type_ids.as_deref(),
            batch: batch.rows(),
            seq: batch.seq,
        };
        let mut out = Encoder::forward(self, &inputs, options)?;
        if let Some(choices) = batch.choices {
            for (name, tensor) in &mut out.tensors {
                if name == "logits" {
                    *tensor = tensor.reshape(&[batch.batch, choices])?;
                }
            }
        }
        Ok(out)
    }
}
