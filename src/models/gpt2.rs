//! GPT-2 (Radford et al. 2019), as transformers' `modeling_gpt2.py`: token + learned position
//! embeddings, pre-LayerNorm decoder blocks (x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))), a
//! final `ln_f`, and the LM head tied to the token embeddings. The block pieces here
//! (`CausalSelfAttention`, `Mlp`, `KvCache`) serve GPT (openai-gpt) too: same keys, other order.

use super::causal_lm::{last_token_rows, CausalLm, LmBatch, SequenceClassifier, TrainBlock};
use super::config::Gpt2Config;
use super::ModelOutput;
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::Gpu;
use crate::nn::{Activation, Gradients, LayerNorm, Linear};
use crate::ops::attention::{attention, attention_backward, Attention};
use crate::ops::dropout::{dropout, Dropout, DropoutStream, LayerDropout};
use crate::ops::elementwise;
use crate::ops::embedding::{embedding, EmbeddingIds};
use crate::ops::layer_norm::LayerNormOutput;
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

pub use super::bert::ForwardOptions;

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
    pub fn new(gpu: &Gpu, layers: usize, batch: usize, capacity: usize, width: usize) -> Result<KvCache> {
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
pub(crate) fn embed(tokens: &Tensor, positions: &Tensor, inputs: &DecoderInputs, past: usize) -> Result<Tensor> {
    let default: Vec<u32>;
    let position_ids = match inputs.position_ids {
        Some(p) => p,
        None => {
            default = (0..inputs.batch).flat_map(|_| (past..past + inputs.seq).map(|p| p as u32)).collect();
            &default
        }
    };
    let ids = EmbeddingIds { tokens: inputs.input_ids, positions: Some(position_ids), segments: None };
    embedding(tokens, Some(positions), None, &ids, &[inputs.batch, inputs.seq])
}

/// The [batch, past + seq] key mask as f32, or None when nothing is masked.
pub(crate) fn key_mask(gpu: &Gpu, inputs: &DecoderInputs, past: usize) -> Result<Option<Tensor>> {
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
        let args = Attention { heads: self.heads, width: Some(c), q_col: 0, k_col: c, v_col: 2 * c, causal: true, key_mask, output_probs: probs, ..Default::default() };
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
        Attention { heads: self.heads, width: Some(c), q_col: 0, k_col: c, v_col: 2 * c, causal: true, key_mask, output_probs: true, dropout, ..Default::default() }
    }

    /// [`CausalSelfAttention::forward`] without a cache and with `probs_dropout` on the
    /// attention probabilities, saving what the backward needs.
    pub(crate) fn forward_saved(&self, x: &Tensor, key_mask: Option<&Tensor>, probs_dropout: Option<Dropout>) -> Result<(Tensor, AttentionSaved)> {
        let qkv = self.c_attn.forward(x)?;
        let (context, probs) = attention(&qkv, &qkv, &qkv, &self.attention_args(key_mask, probs_dropout))?;
        let probs = probs.ok_or_else(|| arg_err!("gpt2", "attention returned no probabilities"))?;
        Ok((self.c_proj.forward(&context)?, AttentionSaved { qkv, probs, context }))
    }

    pub(crate) fn backward(&self, x: &Tensor, saved: &AttentionSaved, key_mask: Option<&Tensor>, probs_dropout: Option<Dropout>, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
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
pub(crate) trait DecoderBlock {
    fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)>;
}

/// What GPT-2 and GPT share around their blocks: the embedding tables, an optional final
/// LayerNorm (GPT-2's `ln_f`) and the position limit.
pub(crate) struct DecoderStack<'a> {
    pub tokens: &'a Tensor,
    pub positions: &'a Tensor,
    pub final_norm: Option<&'a LayerNorm>,
    pub max_positions: usize,
}

impl DecoderStack<'_> {
    /// Embeds the batch and runs the blocks (block i on cache layer i, the cache then
    /// advanced), recording `hidden_states.{i}` (each block's input, then the final output)
    /// and `attentions.{i}` as asked. Returns the final hidden states for the head.
    pub fn run(&self, blocks: &[impl DecoderBlock], inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<(Tensor, ModelOutput)> {
        let past = check_inputs(inputs, self.tokens.shape()[0], self.max_positions, cache.as_deref())?;
        let mask = key_mask(self.tokens.gpu(), inputs, past)?;
        let mut out = ModelOutput::default();
        let mut x = embed(self.tokens, self.positions, inputs, past)?;
        for (i, block) in blocks.iter().enumerate() {
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
        if let Some(norm) = self.final_norm {
            x = norm.forward(&x)?;
        }
        if options.hidden_states {
            out.push(format!("hidden_states.{}", blocks.len()), x.clone());
        }
        if let Some(cache) = cache {
            cache.len = past + inputs.seq;
        }
        Ok((x, out))
    }
}

/// One pre-LN block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
struct Gpt2Block {
    ln_1: LayerNorm,
    attn: CausalSelfAttention,
    ln_2: LayerNorm,
    mlp: Mlp,
}

impl Gpt2Block {
    fn load(w: &Weights, c: &Gpt2Config) -> Result<Self> {
        let eps = c.layer_norm_epsilon as f32;
        Ok(Gpt2Block {
            ln_1: LayerNorm::load(&w.pp("ln_1"), c.n_embd, eps)?,
            attn: CausalSelfAttention::load(&w.pp("attn"), c.n_embd, c.n_head)?,
            ln_2: LayerNorm::load(&w.pp("ln_2"), c.n_embd, eps)?,
            mlp: Mlp::load(&w.pp("mlp"), c.n_embd, c.inner(), c.activation()?)?,
        })
    }
}

/// What a [`Gpt2Block`]'s training forward keeps for its backward.
struct BlockSaved {
    x: Tensor,
    dropout: LayerDropout,
    ln_1: LayerNormOutput,
    attn: AttentionSaved,
    /// x after the attention's residual: the MLP half's input.
    mid: Tensor,
    ln_2: LayerNormOutput,
    mlp: [Tensor; 2],
}

impl TrainBlock for Gpt2Block {
    type Saved = BlockSaved;

    /// The training forward, with dropout on the attention probabilities and on both
    /// branches before their residuals (transformers' attn_dropout, resid_dropout, mlp.dropout).
    fn forward_saved(&self, x: &Tensor, key_mask: Option<&Tensor>, drop: LayerDropout) -> Result<(Tensor, BlockSaved)> {
        let ln_1 = self.ln_1.forward_saved(x)?;
        let (attended, attn) = self.attn.forward_saved(&ln_1.y, key_mask, drop.probs)?;
        let mid = elementwise::add(x, &dropout(&attended, drop.attention_output)?)?;
        let ln_2 = self.ln_2.forward_saved(&mid)?;
        let (mlp_out, mlp) = self.mlp.forward_saved(&ln_2.y)?;
        let y = elementwise::add(&mid, &dropout(&mlp_out, drop.output)?)?;
        Ok((y, BlockSaved { x: x.clone(), dropout: drop, ln_1, attn, mid, ln_2, mlp }))
    }

    /// The forward's equations in reverse; each residual passes dy through and adds its branch
    /// (a dropout's backward is the same mask on the gradient).
    fn backward(&self, s: &BlockSaved, key_mask: Option<&Tensor>, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_ln_2 = self.mlp.backward(&s.ln_2.y, &s.mlp, &dropout(dy, s.dropout.output)?, grads)?;
        let d_mid = elementwise::add(dy, &self.ln_2.backward(&s.mid, &s.ln_2, &d_ln_2, grads)?)?;
        let d_attended = dropout(&d_mid, s.dropout.attention_output)?;
        let d_ln_1 = self.attn.backward(&s.ln_1.y, &s.attn, key_mask, s.dropout.probs, &d_attended, grads)?;
        elementwise::add(&d_mid, &self.ln_1.backward(&s.x, &s.ln_1, &d_ln_1, grads)?)
    }
}

impl DecoderBlock for Gpt2Block {
    fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (attended, probs) = self.attn.forward(&self.ln_1.forward(x)?, key_mask, cache, probs)?;
        let x = elementwise::add(x, &attended)?;
        let x = elementwise::add(&x, &self.mlp.forward(&self.ln_2.forward(&x)?)?)?;
        Ok((x, probs))
    }
}

enum Head {
    /// `GPT2Model`: last_hidden_state.
    Base,
    /// `GPT2LMHeadModel`: logits through the tied token embeddings.
    LanguageModel,
    /// `GPT2ForSequenceClassification`: `score` (no bias) at each sequence's last non-pad token.
    SequenceClassification(Linear),
}

pub struct Gpt2Model {
    pub config: Gpt2Config,
    wte: Tensor,
    wpe: Tensor,
    blocks: Vec<Gpt2Block>,
    ln_f: LayerNorm,
    head: Head,
}

impl Gpt2Model {
    pub fn load(config: Gpt2Config, root: &Weights) -> Result<Gpt2Model> {
        let w = if root.contains("transformer.wte.weight") { root.pp("transformer") } else { root.clone() };
        let c = &config;
        let head = match c.head.architecture("GPT2Model") {
            "GPT2Model" => Head::Base,
            "GPT2LMHeadModel" => Head::LanguageModel,
            "GPT2ForSequenceClassification" => Head::SequenceClassification(Linear::load(&root.pp("score"), c.n_embd, c.head.num_labels())?),
            other => return Err(arg_err!("gpt2", "unsupported architecture `{other}`")),
        };
        Ok(Gpt2Model {
            wte: w.pp("wte").tensor("weight", &[c.vocab_size, c.n_embd])?,
            wpe: w.pp("wpe").tensor("weight", &[c.n_positions, c.n_embd])?,
            blocks: (0..c.n_layer).map(|i| Gpt2Block::load(&w.pp("h").pp(i), c)).collect::<Result<_>>()?,
            ln_f: LayerNorm::load(&w.pp("ln_f"), c.n_embd, c.layer_norm_epsilon as f32)?,
            head,
            config,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        self.wte.gpu()
    }

    /// A cache for `batch` sequences of up to `capacity` positions.
    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        KvCache::new(self.wte.gpu(), self.blocks.len(), batch, capacity.min(self.config.n_positions), self.config.n_embd)
    }

    /// Runs the decoder (appending to `cache` when given) and the head.
    pub fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput> {
        let c = &self.config;
        let stack = DecoderStack { tokens: &self.wte, positions: &self.wpe, final_norm: Some(&self.ln_f), max_positions: c.n_positions };
        let (x, mut out) = stack.run(&self.blocks, inputs, options, cache)?;
        match &self.head {
            Head::Base => out.push("last_hidden_state", x),
            Head::LanguageModel => out.push("logits", tied_lm_head(&self.wte, &x, inputs, options)?),
            Head::SequenceClassification(score) => out.push("logits", last_token_head(score, &x, inputs, c.head.pad_token_id)?),
        }
        Ok(out)
    }
}

impl Gpt2Model {
    fn causal_lm(&self) -> CausalLm<'_, Gpt2Block> {
        let c = &self.config;
        CausalLm { tokens: &self.wte, positions: &self.wpe, blocks: &self.blocks, final_norm: Some(&self.ln_f), vocab: c.vocab_size, max_positions: c.n_positions, width: c.n_embd, dropout: c.dropout.probabilities() }
    }

    /// The causal-LM loss of `batch` (`GPT2LMHeadModel`'s, with its shift) and its backward:
    /// adds `loss_scale` × the gradient of every parameter into `grads`. Returns the loss [1]
    /// (recorded on the GPU, not read back). Dropout at the config's probabilities draws its
    /// masks from `dropout_keys`.
    pub fn lm_loss_backward(&self, batch: &LmBatch, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        if !matches!(self.head, Head::LanguageModel) {
            return Err(arg_err!("gpt2", "causal-LM training needs the GPT2LMHeadModel architecture"));
        }
        self.causal_lm().loss_backward(batch, grads, loss_scale, dropout_keys)
    }

    /// GPT's fine-tuning loss (`GPT2ForSequenceClassification`'s cross-entropy against one
    /// label per sequence, plus `lm_coef` × the causal-LM loss of `batch.labels` through the
    /// LM head tied to `wte`) and its backward, as [`Gpt2Model::lm_loss_backward`].
    pub fn sequence_classification_loss_backward(&self, batch: &LmBatch, labels: &[i64], lm_coef: f32, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        let Head::SequenceClassification(score) = &self.head else {
            return Err(arg_err!("gpt2", "sequence classification needs the GPT2ForSequenceClassification architecture"));
        };
        let head = SequenceClassifier { score, pad_token_id: self.config.head.pad_token_id, lm_coef };
        self.causal_lm().classification_loss_backward(batch, labels, &head, grads, loss_scale, dropout_keys)
    }
}

/// A sequence classifier's logits [B, labels]: `score` at each sequence's last non-pad token
/// of the final hidden states `x` [B, T, C].
pub(crate) fn last_token_head(score: &Linear, x: &Tensor, inputs: &DecoderInputs, pad_token_id: Option<u32>) -> Result<Tensor> {
    let rows = last_token_rows(inputs, pad_token_id)?;
    let width = x.shape()[x.rank() - 1];
    score.forward(&x.reshape(&[inputs.batch * inputs.seq, width])?.select_rows(&rows)?)
}

/// Logits through the tied token embeddings `table`: [B, T, V], or [B, 1, V] at the last
/// positions only.
pub(crate) fn tied_lm_head(table: &Tensor, x: &Tensor, inputs: &DecoderInputs, options: ForwardOptions) -> Result<Tensor> {
    let head = Linear::from_tensors(table.clone(), None);
    if !options.last_position_only {
        return head.forward(x);
    }
    let (batch, seq, width) = (inputs.batch, inputs.seq, x.shape()[2]);
    let last_rows: Vec<usize> = (0..batch).map(|b| b * seq + seq - 1).collect();
    let last = x.reshape(&[batch * seq, width])?.select_rows(&last_rows)?;
    head.forward(&last)?.reshape(&[batch, 1, table.shape()[0]])
}
