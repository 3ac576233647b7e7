//! The decoder toolkit GPT-2 and GPT (openai-gpt) are built from: a decoder batch, the KV
//! cache, masked self-attention with a fused q|k|v projection, the MLP, the block stack with
//! its hidden states, the LM and classification heads, and [`CausalLm`], what generation and
//! perplexity run on. The families differ only in where their blocks put the LayerNorms.
//! Training a decoder is in [`train`].

pub mod train;

use super::{Capabilities, Capability, ForwardOptions, HeadConfig, IdsBatch, InputKinds, Model, ModelOutput, ModelSizes};
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::Device;
use crate::nn::{Activation, Gradients, LayerNorm, Linear};
use crate::ops::attention::{attention, attention_backward, Attention};
use crate::ops::dropout::Dropout;
use crate::ops::embedding::{lookup, EmbeddingIds};
use crate::ops::quantized::Matrix;
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// A decoder with a language-model head: what generation and perplexity need.
pub trait CausalLm {
    fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput>;
    /// A cache for `batch` sequences of up to `capacity` positions (capped at the model's).
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache>;
    fn max_positions(&self) -> usize;
    fn vocab_size(&self) -> usize;
    /// The end-of-text token, when the config names one.
    fn eos_token_id(&self) -> Option<u32>;
    fn gpu(&self) -> &Device;
}

/// A batch of token ids for a decoder, row-major [batch, seq].
#[derive(Clone, Copy, Debug)]
pub struct DecoderInputs<'a> {
    pub input_ids: &'a [u32],
    /// [batch, past + seq]: 1 for real tokens, 0 for padding (cached positions included);
    /// default all 1.
    pub attention_mask: Option<&'a [u32]>,
    /// Default past, past + 1, … (transformers' default, padding or not).
    pub position_ids: Option<&'a [u32]>,
    pub batch: usize,
    pub seq: usize,
}

/// Every layer's fused q|k|v rows for the positions seen so far: [B, capacity, 3C] each. The
/// query third is never read back; keeping whole rows makes appending one copy per sequence.
pub struct KvCache {
    pub(crate) layers: Vec<Tensor>,
    /// Positions cached so far.
    pub len: usize,
    pub capacity: usize,
}

impl KvCache {
    pub fn new(gpu: &Device, layers: usize, batch: usize, capacity: usize, width: usize) -> Result<KvCache> {
        let layers = (0..layers).map(|_| Tensor::empty(gpu, &[batch, capacity, 3 * width], DType::F32)).collect::<Result<_>>()?;
        Ok(KvCache { layers, len: 0, capacity })
    }
}

/// Checks a decoder batch against the model's limits; returns the number of cached positions.
pub(crate) fn check_inputs(inputs: &DecoderInputs, vocab: usize, max_positions: usize, cache: Option<&KvCache>) -> Result<usize> {
    let op = "decoder";
    let n = inputs.batch * inputs.seq;
    if n == 0 {
        return Err(arg_err!(op, "empty input: batch {} × sequence {}", inputs.batch, inputs.seq));
    }
    if inputs.input_ids.len() != n {
        return Err(shape_err!(op, "input_ids has {} values for batch {} × sequence {}", inputs.input_ids.len(), inputs.batch, inputs.seq));
    }
    let past = cache.map_or(0, |c| c.len);
    let total = past + inputs.seq;
    if total > max_positions {
        return Err(arg_err!(op, "{total} positions exceed n_positions {max_positions}"));
    }
    if let Some(cache) = cache {
        if total > cache.capacity {
            return Err(arg_err!(op, "{total} positions exceed the KV cache's capacity {}", cache.capacity));
        }
    }
    if let Some(mask) = inputs.attention_mask {
        if mask.len() != inputs.batch * total {
            return Err(shape_err!(op, "attention_mask has {} values for batch {} × {total} positions", mask.len(), inputs.batch));
        }
        super::check_mask_values(op, mask)?;
    }
    if let Some(p) = inputs.position_ids {
        if p.len() != n {
            return Err(shape_err!(op, "position_ids has {} values for batch {} × sequence {}", p.len(), inputs.batch, inputs.seq));
        }
    }
    if let Some(bad) = inputs.input_ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(arg_err!(op, "token id {bad} is out of range for a vocabulary of {vocab}"));
    }
    Ok(past)
}

/// Token + position embeddings of a decoder batch, positions defaulting to past.. .
pub(crate) fn embed(tokens: &Matrix, positions: &Tensor, inputs: &DecoderInputs, past: usize) -> Result<Tensor> {
    let default: Vec<u32>;
    let position_ids = match inputs.position_ids {
        Some(p) => p,
        None => {
            default = (0..inputs.batch).flat_map(|_| (past..past + inputs.seq).map(|p| p as u32)).collect();
            &default
        }
    };
    let ids = EmbeddingIds { tokens: inputs.input_ids, positions: Some(position_ids), segments: None };
    lookup(tokens, Some(positions), None, &ids, &[inputs.batch, inputs.seq])
}

/// The [batch, past + seq] key mask as f32, or None when nothing is masked.
pub(crate) fn key_mask(gpu: &Device, inputs: &DecoderInputs, past: usize) -> Result<Option<Tensor>> {
    match inputs.attention_mask {
        Some(m) if m.contains(&0) => {
            let values: Vec<f32> = m.iter().map(|&v| (v != 0) as u32 as f32).collect();
            Ok(Some(Tensor::from_slice(gpu, &values, &[inputs.batch, past + inputs.seq])?))
        }
        _ => Ok(None),
    }
}

/// Masked multi-head self-attention with a fused q|k|v projection (`attn.c_attn`, `attn.c_proj`).
pub struct CausalSelfAttention {
    c_attn: Linear,
    c_proj: Linear,
    heads: usize,
    width: usize,
}

impl CausalSelfAttention {
    pub fn load(w: &Weights, width: usize, heads: usize) -> Result<Self> {
        Ok(CausalSelfAttention {
            c_attn: Linear::load_conv1d(&w.pp("c_attn"), width, 3 * width)?,
            c_proj: Linear::load_conv1d(&w.pp("c_proj"), width, width)?,
            heads,
            width,
        })
    }

    /// x [B, T, C] at positions past.. → (y [B, T, C], probabilities if asked for). With a
    /// cache layer, this step's q|k|v rows are appended to it and attention reads all of it.
    pub fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let qkv = self.c_attn.forward(x)?;
        let (batch, seq, c) = (x.shape()[0], x.shape()[1], self.width);
        let args = Attention { output_probs: probs, ..self.attention_args(key_mask, None) };
        let (context, probs) = match cache {
            None => attention(&qkv, &qkv, &qkv, &args)?,
            Some((layer, past)) => {
                let capacity = layer.shape()[1];
                let rows = layer.reshape(&[batch * capacity, 3 * c])?;
                for b in 0..batch {
                    rows.write_rows(b * capacity + past, &qkv.narrow(b, 1)?)?;
                }
                let args = Attention { kv_len: Some(past + seq), query_offset: Some(past), ..args };
                attention(&qkv, layer, layer, &args)?
            }
        };
        Ok((self.c_proj.forward(&context)?, probs))
    }

    fn attention_args<'a>(&self, key_mask: Option<&'a Tensor>, dropout: Option<Dropout>) -> Attention<'a> {
        let c = self.width;
        Attention {
            heads: self.heads,
            width: Some(c),
            q_col: 0,
            k_col: c,
            v_col: 2 * c,
            causal: true,
            key_mask,
            output_probs: true,
            dropout,
            ..Default::default()
        }
    }

    /// [`CausalSelfAttention::forward`] without a cache and with `probs_dropout` on the
    /// attention probabilities, saving what the backward needs.
    pub(crate) fn forward_saved(&self, x: &Tensor, key_mask: Option<&Tensor>, probs_dropout: Option<Dropout>) -> Result<(Tensor, AttentionSaved)> {
        let qkv = self.c_attn.forward(x)?;
        let (context, probs) = attention(&qkv, &qkv, &qkv, &self.attention_args(key_mask, probs_dropout))?;
        let probs = probs.ok_or_else(|| arg_err!("gpt2", "attention returned no probabilities"))?;
        Ok((self.c_proj.forward(&context)?, AttentionSaved { qkv, probs, context }))
    }

    pub(crate) fn backward(
        &self,
        x: &Tensor,
        saved: &AttentionSaved,
        key_mask: Option<&Tensor>,
        probs_dropout: Option<Dropout>,
        dy: &Tensor,
        grads: &Gradients,
    ) -> Result<Tensor> {
        let d_context = self.c_proj.backward(&saved.context, dy, grads)?;
        let qkv = &saved.qkv;
        let d_qkv = attention_backward(qkv, qkv, qkv, &saved.probs, &d_context, &self.attention_args(key_mask, probs_dropout))?.dq;
        self.c_attn.backward(x, &d_qkv, grads)
    }
}

/// What [`CausalSelfAttention`]'s training forward keeps: the fused q|k|v, the attention
/// probabilities and the heads' concatenated output.
pub(crate) struct AttentionSaved {
    qkv: Tensor,
    probs: Tensor,
    context: Tensor,
}

/// The position-wise feed-forward block (`mlp.c_fc`, activation, `mlp.c_proj`).
pub struct Mlp {
    c_fc: Linear,
    c_proj: Linear,
    activation: Activation,
}

impl Mlp {
    pub fn load(w: &Weights, width: usize, inner: usize, activation: Activation) -> Result<Self> {
        Ok(Mlp { c_fc: Linear::load_conv1d(&w.pp("c_fc"), width, inner)?, c_proj: Linear::load_conv1d(&w.pp("c_proj"), inner, width)?, activation })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.c_proj.forward(&self.activation.forward(&self.c_fc.forward(x)?)?)
    }

    /// The output, the pre-activation and the activation.
    pub(crate) fn forward_saved(&self, x: &Tensor) -> Result<(Tensor, [Tensor; 2])> {
        let pre = self.c_fc.forward(x)?;
        let act = self.activation.forward(&pre)?;
        Ok((self.c_proj.forward(&act)?, [pre, act]))
    }

    pub(crate) fn backward(&self, x: &Tensor, [pre, act]: &[Tensor; 2], dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_act = self.c_proj.backward(act, dy, grads)?;
        self.c_fc.backward(x, &self.activation.backward(pre, &d_act)?, grads)
    }
}

/// A decoder block: x [B, T, C] → (x', attention probabilities if asked for).
pub trait DecoderBlock {
    fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)>;
}

/// What a decoder family's config gives the shared stack.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub vocab_size: usize,
    /// `n_embd`.
    pub width: usize,
    pub heads: usize,
    /// `n_positions`.
    pub max_positions: usize,
    pub eos_token_id: Option<u32>,
    /// Dropout on [the embeddings, the attention probabilities, the block outputs] (training).
    pub dropout: [f32; 3],
    pub head: HeadConfig,
}

/// The task head, chosen by the suffix of the class named in `architectures`.
pub(crate) enum DecoderHead {
    /// `…Model`: last_hidden_state.
    Base,
    /// `…LMHeadModel`: logits through the token embeddings, or through `lm_head.weight` when
    /// the config unties them (`tie_word_embeddings: false`).
    LanguageModel(Option<Matrix>),
    /// `…ForSequenceClassification`: `score` (no bias) at each sequence's last non-pad token.
    SequenceClassification(Linear),
}

/// A decoder of blocks `B`: token and position embeddings, the blocks, an optional final
/// LayerNorm (GPT-2's `ln_f`) and the head. GPT-2 and GPT are this with their own blocks.
pub struct Decoder<B> {
    pub config: DecoderConfig,
    architecture: String,
    pub(crate) tokens: Matrix,
    pub(crate) positions: Tensor,
    pub(crate) blocks: Vec<B>,
    pub(crate) final_norm: Option<LayerNorm>,
    pub(crate) head: DecoderHead,
    capabilities: Capabilities,
}

/// A decoder's parts as its family's file loads them.
pub struct DecoderParts<B> {
    pub tokens: Matrix,
    pub positions: Tensor,
    pub blocks: Vec<B>,
    pub final_norm: Option<LayerNorm>,
}

impl<B> Decoder<B> {
    /// The decoder of `parts` with the head that `config.head.architectures` names: `class`
    /// (the family's class prefix, `GPT2`) + `Model`, `LMHeadModel` or
    /// `ForSequenceClassification` (whose `score` is read from `root`).
    pub fn new(config: DecoderConfig, class: &str, parts: DecoderParts<B>, root: &Weights) -> Result<Decoder<B>> {
        let base = format!("{class}Model");
        let architecture = config.head.architecture(&base).to_string();
        let (head, mut capabilities) = match architecture.strip_prefix(class) {
            Some("Model") => (DecoderHead::Base, vec![]),
            Some("LMHeadModel") => {
                let weight = root.pp("lm_head").untied_matrix("weight", [config.vocab_size, config.width], config.head.tie_word_embeddings)?;
                (DecoderHead::LanguageModel(weight), vec![(Capability::Generation, "logits"), (Capability::Perplexity, "logits")])
            }
            Some("ForSequenceClassification") => {
                let score = Linear::load(&root.pp("score"), config.width, config.head.num_labels())?;
                (DecoderHead::SequenceClassification(score), vec![(Capability::SequenceClassification, "logits")])
            }
            _ => {
                return Err(arg_err!(
                    "model",
                    "unsupported architecture `{architecture}` (supported: {base}, {class}LMHeadModel, {class}ForSequenceClassification)"
                ))
            }
        };
        capabilities.push((Capability::Embeddings, "last_hidden_state"));
        let DecoderParts { tokens, positions, blocks, final_norm } = parts;
        Ok(Decoder { config, architecture, tokens, positions, blocks, final_norm, head, capabilities: Capabilities::new(capabilities) })
    }

    pub fn gpu(&self) -> &Device {
        self.tokens.gpu()
    }
}

impl<B: DecoderBlock> Decoder<B> {
    /// Embeds the batch and runs the blocks (block i on cache layer i, the cache then
    /// advanced), recording `hidden_states.{i}` (each block's input, then the final output)
    /// and `attentions.{i}` as asked, then the head.
    pub fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput> {
        let c = &self.config;
        let past = check_inputs(inputs, c.vocab_size, c.max_positions, cache.as_deref())?;
        let mask = key_mask(self.gpu(), inputs, past)?;
        let mut out = ModelOutput::default();
        let mut x = embed(&self.tokens, &self.positions, inputs, past)?;
        for (i, block) in self.blocks.iter().enumerate() {
            if options.hidden_states {
                out.push(format!("hidden_states.{i}"), x.clone());
            }
            let layer = cache.as_deref().map(|c| (&c.layers[i], past));
            let (y, probs) = block.forward(&x, mask.as_ref(), layer, options.attentions)?;
            x = y;
            if let Some(p) = probs {
                out.push(format!("attentions.{i}"), p);
            }
        }
        if let Some(norm) = &self.final_norm {
            x = norm.forward(&x)?;
        }
        if options.hidden_states {
            out.push(format!("hidden_states.{}", self.blocks.len()), x.clone());
        }
        if let Some(cache) = cache {
            cache.len = past + inputs.seq;
        }
        match &self.head {
            DecoderHead::Base => {}
            DecoderHead::LanguageModel(lm_head) => out.push("logits", lm_head_logits(lm_head.as_ref().unwrap_or(&self.tokens), &x, inputs, options)?),
            DecoderHead::SequenceClassification(score) => out.push("logits", last_token_head(score, &x, inputs, c.head.pad_token_id)?),
        }
        if matches!(self.head, DecoderHead::Base) || options.last_hidden_state {
            out.push("last_hidden_state", x);
        }
        Ok(out)
    }
}

impl<B: DecoderBlock> CausalLm for Decoder<B> {
    fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput> {
        Decoder::forward(self, inputs, options, cache)
    }
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        KvCache::new(self.gpu(), self.blocks.len(), batch, capacity.min(self.config.max_positions), self.config.width)
    }
    fn max_positions(&self) -> usize {
        self.config.max_positions
    }
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }
    fn eos_token_id(&self) -> Option<u32> {
        self.config.eos_token_id
    }
    fn gpu(&self) -> &Device {
        Decoder::gpu(self)
    }
}

impl<B: DecoderBlock> Model for Decoder<B> {
    fn architecture(&self) -> &str {
        &self.architecture
    }
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    fn sizes(&self) -> ModelSizes {
        let c = &self.config;
        ModelSizes { layers: self.blocks.len(), heads: c.heads, hidden_size: c.width, vocab_size: c.vocab_size }
    }
    fn max_positions(&self) -> usize {
        self.config.max_positions
    }
    fn head_config(&self) -> &HeadConfig {
        &self.config.head
    }
    fn inputs(&self) -> InputKinds {
        InputKinds::default()
    }
    fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        let op = "forward";
        batch.validate()?;
        if batch.task_type_ids.is_some() {
            return Err(arg_err!(op, "task_type_ids given, but `{}` has no task type embeddings (ERNIE with use_task_id has)", self.architecture));
        }
        if batch.choices.is_some() {
            return Err(arg_err!(op, "[batch, choices, seq] ids are for multiple-choice models; `{}` reads [batch, seq]", self.architecture));
        }
        let inputs = DecoderInputs {
            input_ids: &batch.input_ids,
            attention_mask: batch.attention_mask.as_deref(),
            position_ids: None,
            batch: batch.batch,
            seq: batch.seq,
        };
        Decoder::forward(self, &inputs, options, None)
    }
    fn as_causal_lm(&self) -> Option<&dyn CausalLm> {
        matches!(self.head, DecoderHead::LanguageModel(_)).then_some(self as &dyn CausalLm)
    }
}

/// A sequence classifier's logits [B, labels]: `score` at each sequence's last non-pad token
/// of the final hidden states `x` [B, T, C].
fn last_token_head(score: &Linear, x: &Tensor, inputs: &DecoderInputs, pad_token_id: Option<u32>) -> Result<Tensor> {
    let rows = last_token_rows(inputs, pad_token_id)?;
    let width = x.shape()[x.rank() - 1];
    score.forward(&x.reshape(&[inputs.batch * inputs.seq, width])?.select_rows(&rows)?)
}

/// Logits through the LM head's weight `table` [V, C]: [B, T, V], or [B, 1, V] at the last
/// positions only.
fn lm_head_logits(table: &Matrix, x: &Tensor, inputs: &DecoderInputs, options: ForwardOptions) -> Result<Tensor> {
    let head = Linear::from_matrix(table.clone(), None);
    if !options.last_position_only {
        return head.forward(x);
    }
    let (batch, seq, width) = (inputs.batch, inputs.seq, x.shape()[2]);
    let last_rows: Vec<usize> = (0..batch).map(|b| b * seq + seq - 1).collect();
    let last = x.reshape(&[batch * seq, width])?.select_rows(&last_rows)?;
    head.forward(&last)?.reshape(&[batch, 1, table.shape()[0]])
}

/// Row (of the flattened [B·T]) of each sequence's last token that is not `pad`, as
/// transformers picks it (the rightmost non-pad position; without a pad id, the last).
pub(crate) fn last_token_rows(inputs: &DecoderInputs, pad: Option<u32>) -> Result<Vec<usize>> {
    let seq = inputs.seq;
    match pad {
        None if inputs.batch > 1 => Err(arg_err!("gpt2", "sequence classification of a batch needs pad_token_id in config.json")),
        None => Ok(vec![seq - 1]),
        Some(pad) => Ok((0..inputs.batch)
            .map(|b| {
                let row = &inputs.input_ids[b * seq..(b + 1) * seq];
                b * seq + row.iter().rposition(|&id| id != pad).unwrap_or(0)
            })
            .collect()),
    }
}
