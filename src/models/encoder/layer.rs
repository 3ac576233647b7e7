//! The encoder layer the BERT-like families share: multi-head self-attention, then the
//! feed-forward block, each sublayer post-LayerNorm, x = LayerNorm(x + f(x)) (BERT and most
//! families), or pre-LayerNorm, x = x + f(LayerNorm(x)) (XLM-RoBERTa-XL). The families name
//! its parts differently; [`LayerNames`] gives each family's names once.

use super::{EncoderConfig, Norm};
use crate::error::{arg_err, Result};
use crate::nn::{Activation, Gradients, LayerNorm, Linear};
use crate::ops::attention::{attention, attention_backward, Attention};
use crate::ops::dropout::{dropout, Dropout, LayerDropout};
use crate::ops::elementwise;
use crate::ops::layer_norm::LayerNormOutput;
use crate::tensor::Tensor;
use crate::weights::Weights;

/// Where a family keeps each part of a layer, relative to the layer's prefix.
pub struct LayerNames {
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    /// The attention's output projection and the LayerNorm after its residual.
    pub attention_output: &'static str,
    pub attention_norm: &'static str,
    /// The feed-forward block's two projections and the LayerNorm after its residual.
    pub intermediate: &'static str,
    pub output: &'static str,
    pub output_norm: &'static str,
}

impl LayerNames {
    /// Every name, in one order for every family (so two families' names pair up).
    pub fn all(&self) -> [&'static str; 8] {
        [self.query, self.key, self.value, self.attention_output, self.attention_norm, self.intermediate, self.output, self.output_norm]
    }
}

/// BERT's names (`encoder.layer.{i}.…`), which RoBERTa, XLM-RoBERTa, ERNIE and ELECTRA share.
pub const BERT_LAYER: LayerNames = LayerNames {
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
    intermediate: "intermediate.dense",
    output: "output.dense",
    output_norm: "output.LayerNorm",
};

/// Multi-head self-attention with its output projection and its LayerNorm, after the
/// residual (BERT's `attention.self` + `attention.output`) or before the attention.
pub struct SelfAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    output_dense: Linear,
    output_layer_norm: LayerNorm,
    norm: Norm,
    heads: usize,
}

impl SelfAttention {
    fn load(w: &Weights, c: &EncoderConfig, names: &LayerNames) -> Result<Self> {
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        Ok(SelfAttention {
            query: Linear::load(&w.pp(names.query), h, h)?,
            key: Linear::load(&w.pp(names.key), h, h)?,
            value: Linear::load(&w.pp(names.value), h, h)?,
            output_dense: Linear::load(&w.pp(names.attention_output), h, h)?,
            output_layer_norm: LayerNorm::load(&w.pp(names.attention_norm), h, eps)?,
            norm: c.norm,
            heads: c.num_attention_heads,
        })
    }

    /// (LayerNorm(x + Attn(x)), or x + Attn(LayerNorm(x)) pre-LN, with the probabilities if
    /// asked for), Attn(x) = softmax(QKᵀ/√d + mask)·V·W_o.
    fn forward(&self, x: &Tensor, key_mask: &Tensor, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let input = match self.norm {
            Norm::Post => x.clone(),
            Norm::Pre => self.output_layer_norm.forward(x)?,
        };
        let (q, k, v) = (self.query.forward(&input)?, self.key.forward(&input)?, self.value.forward(&input)?);
        let args = Attention { heads: self.heads, key_mask: Some(key_mask), output_probs: probs, ..Default::default() };
        let (context, probs) = attention(&q, &k, &v, &args)?;
        let sum = elementwise::add(&self.output_dense.forward(&context)?, x)?;
        match self.norm {
            Norm::Post => Ok((self.output_layer_norm.forward(&sum)?, probs)),
            Norm::Pre => Ok((sum, probs)),
        }
    }

    fn attention_args<'a>(&self, key_mask: &'a Tensor, dropout: Option<Dropout>) -> Attention<'a> {
        Attention { heads: self.heads, key_mask: Some(key_mask), output_probs: true, dropout, ..Default::default() }
    }

    /// The training forward, with dropout on the probabilities and on the output projection
    /// before the residual (`self.dropout` and `output.dropout` in transformers).
    fn forward_saved(&self, x: &Tensor, key_mask: &Tensor, drop: LayerDropout) -> Result<(Tensor, AttentionSaved)> {
        let pre_norm = (self.norm == Norm::Pre).then(|| self.output_layer_norm.forward_saved(x)).transpose()?;
        let input = pre_norm.as_ref().map_or(x, |n| &n.y);
        let (q, k, v) = (self.query.forward(input)?, self.key.forward(input)?, self.value.forward(input)?);
        let (context, probs) = attention(&q, &k, &v, &self.attention_args(key_mask, drop.probs))?;
        let probs = probs.ok_or_else(|| arg_err!("encoder", "attention returned no probabilities"))?;
        let sum = elementwise::add(&dropout(&self.output_dense.forward(&context)?, drop.attention_output)?, x)?;
        let (y, norm) = match pre_norm {
            Some(norm) => (sum.clone(), norm),
            None => {
                let norm = self.output_layer_norm.forward_saved(&sum)?;
                (norm.y.clone(), norm)
            }
        };
        Ok((y, AttentionSaved { q, k, v, probs, context, sum, norm }))
    }

    /// dx through the residual and through each of the query, key and value projections
    /// (and, pre-LN, the LayerNorm before them).
    fn backward(&self, x: &Tensor, s: &AttentionSaved, key_mask: &Tensor, drop: LayerDropout, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_sum = match self.norm {
            Norm::Post => self.output_layer_norm.backward(&s.sum, &s.norm, dy, grads)?,
            Norm::Pre => dy.clone(),
        };
        let d_context = self.output_dense.backward(&s.context, &dropout(&d_sum, drop.attention_output)?, grads)?;
        let d = attention_backward(&s.q, &s.k, &s.v, &s.probs, &d_context, &self.attention_args(key_mask, drop.probs))?;
        let input = if self.norm == Norm::Pre { &s.norm.y } else { x };
        let mut d_input = self.query.backward(input, &d.dq, grads)?;
        for (projection, d_projected) in [(&self.key, &d.dk), (&self.value, &d.dv)] {
            d_input = elementwise::add(&d_input, &projection.backward(input, d_projected, grads)?)?;
        }
        if self.norm == Norm::Pre {
            d_input = self.output_layer_norm.backward(x, &s.norm, &d_input, grads)?;
        }
        elementwise::add(&d_sum, &d_input)
    }
}

/// What [`SelfAttention`]'s training forward keeps for its backward.
struct AttentionSaved {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    probs: Tensor,
    context: Tensor,
    /// The residual sum, and the LayerNorm's statistics: of the sum (post-LN) or of the
    /// layer's input (pre-LN, whose output `y` the projections read).
    sum: Tensor,
    norm: LayerNormOutput,
}

/// One encoder layer: attention, then the feed-forward block x = LayerNorm(x + W₂·act(W₁·x))
/// (BERT's `intermediate.dense`, `output.dense`, `output.LayerNorm`), or pre-LN
/// x = x + W₂·act(W₁·LayerNorm(x)).
pub struct EncoderLayer {
    attention: SelfAttention,
    intermediate: Linear,
    output: Linear,
    output_layer_norm: LayerNorm,
    activation: Activation,
}

impl EncoderLayer {
    /// The layer under `w`, its parts named by `names`.
    pub fn load(w: &Weights, c: &EncoderConfig, names: &LayerNames) -> Result<Self> {
        Ok(EncoderLayer {
            attention: SelfAttention::load(w, c, names)?,
            intermediate: Linear::load(&w.pp(names.intermediate), c.hidden_size, c.intermediate_size)?,
            output: Linear::load(&w.pp(names.output), c.intermediate_size, c.hidden_size)?,
            output_layer_norm: LayerNorm::load(&w.pp(names.output_norm), c.hidden_size, c.layer_norm_eps)?,
            activation: c.activation,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor, key_mask: &Tensor, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (attended, probs) = self.attention.forward(x, key_mask, probs)?;
        let input = match self.attention.norm {
            Norm::Post => attended.clone(),
            Norm::Pre => self.output_layer_norm.forward(&attended)?,
        };
        let hidden = self.activation.forward(&self.intermediate.forward(&input)?)?;
        let sum = elementwise::add(&self.output.forward(&hidden)?, &attended)?;
        match self.attention.norm {
            Norm::Post => Ok((self.output_layer_norm.forward(&sum)?, probs)),
            Norm::Pre => Ok((sum, probs)),
        }
    }

    pub(crate) fn forward_saved(&self, x: &Tensor, key_mask: &Tensor, drop: LayerDropout) -> Result<(Tensor, LayerSaved)> {
        let pre_ln = self.attention.norm == Norm::Pre;
        let (attended, attention) = self.attention.forward_saved(x, key_mask, drop)?;
        let pre_norm = pre_ln.then(|| self.output_layer_norm.forward_saved(&attended)).transpose()?;
        let pre = self.intermediate.forward(pre_norm.as_ref().map_or(&attended, |n| &n.y))?;
        let act = self.activation.forward(&pre)?;
        let sum = elementwise::add(&dropout(&self.output.forward(&act)?, drop.output)?, &attended)?;
        let (y, norm) = match pre_norm {
            Some(norm) => (sum.clone(), norm),
            None => {
                let norm = self.output_layer_norm.forward_saved(&sum)?;
                (norm.y.clone(), norm)
            }
        };
        Ok((y, LayerSaved { x: x.clone(), dropout: drop, attention, attended, pre, act, sum, norm }))
    }

    pub(crate) fn backward(&self, s: &LayerSaved, key_mask: &Tensor, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let pre_ln = self.attention.norm == Norm::Pre;
        let d_sum = if pre_ln { dy.clone() } else { self.output_layer_norm.backward(&s.sum, &s.norm, dy, grads)? };
        let d_act = self.output.backward(&s.act, &dropout(&d_sum, s.dropout.output)?, grads)?;
        let d_pre = self.activation.backward(&s.pre, &d_act)?;
        let mut d_input = self.intermediate.backward(if pre_ln { &s.norm.y } else { &s.attended }, &d_pre, grads)?;
        if pre_ln {
            d_input = self.output_layer_norm.backward(&s.attended, &s.norm, &d_input, grads)?;
        }
        let d_attended = elementwise::add(&d_sum, &d_input)?;
        self.attention.backward(&s.x, &s.attention, key_mask, s.dropout, &d_attended, grads)
    }
}

/// What an [`EncoderLayer`]'s training forward keeps for its backward.
pub(crate) struct LayerSaved {
    x: Tensor,
    dropout: LayerDropout,
    attention: AttentionSaved,
    /// The attention block's output: the feed-forward block's input.
    attended: Tensor,
    /// The feed-forward block's pre-activation and activation.
    pre: Tensor,
    act: Tensor,
    sum: Tensor,
    /// The statistics of the LayerNorm: of the sum (post-LN) or of `attended` (pre-LN).
    norm: LayerNormOutput,
}
