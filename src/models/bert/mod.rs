//! BERT (Devlin et al. 2019), as transformers' `modeling_bert.py`: word + position + token
//! type embeddings, a post-LayerNorm encoder (each sublayer: x = LayerNorm(x + f(x))), a
//! tanh pooler over [CLS], and the task heads. MiniLM sentence encoders are this architecture.

mod train;

pub use train::{span_cross_entropies, MlmBatch};

use super::config::BertConfig;
use super::ModelOutput;
use crate::error::{arg_err, shape_err, Result};
use crate::nn::{Activation, Gradients, LayerNorm, Linear};
use crate::ops::attention::{attention, attention_backward, Attention};
use crate::ops::dropout::{dropout, Dropout, LayerDropout};
use crate::ops::elementwise::{self, Unary};
use crate::ops::embedding::{embedding, embedding_backward, embedding_backward_with_padding, EmbeddingIds};
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::matmul::{matmul, Matmul};
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// A batch of token ids, row-major [batch, seq], as a Hugging Face tokenizer returns them.
#[derive(Clone, Copy, Debug)]
pub struct BertInputs<'a> {
    pub input_ids: &'a [u32],
    /// 1 for real tokens, 0 for padding; default all 1.
    pub attention_mask: Option<&'a [u32]>,
    /// Segment A = 0, B = 1; default all 0.
    pub token_type_ids: Option<&'a [u32]>,
    pub batch: usize,
    pub seq: usize,
}

/// What to return besides the head's outputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardOptions {
    /// `hidden_states.{i}`: the embedding output and every layer's output.
    pub hidden_states: bool,
    /// `attentions.{i}`: every layer's attention probabilities [B, heads, T, T].
    pub attentions: bool,
    /// Language-model logits only at each sequence's last position ([B, 1, V]), as generation
    /// needs them; decoders only.
    pub last_position_only: bool,
}

pub struct BertEmbeddings {
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    token_type_embeddings: Tensor,
    layer_norm: LayerNorm,
    /// The word row that gets no gradient (`pad_token_id`, 0 by transformers' default).
    pad_token_id: u32,
}

impl BertEmbeddings {
    fn load(w: &Weights, c: &BertConfig) -> Result<Self> {
        Ok(BertEmbeddings {
            word_embeddings: w.pp("word_embeddings").tensor("weight", &[c.vocab_size, c.hidden_size])?,
            position_embeddings: w.pp("position_embeddings").tensor("weight", &[c.max_position_embeddings, c.hidden_size])?,
            token_type_embeddings: w.pp("token_type_embeddings").tensor("weight", &[c.type_vocab_size, c.hidden_size])?,
            layer_norm: LayerNorm::load(&w.pp("LayerNorm"), c.hidden_size, c.layer_norm_eps as f32)?,
            pad_token_id: c.head.pad_token_id.unwrap_or(0),
        })
    }

    /// LayerNorm(word + position + token type): [B, T, C].
    fn forward(&self, inputs: &BertInputs, token_types: &[u32]) -> Result<Tensor> {
        self.layer_norm.forward(&self.sum(inputs, token_types)?)
    }

    /// word + position + token type, before the LayerNorm.
    fn sum(&self, inputs: &BertInputs, token_types: &[u32]) -> Result<Tensor> {
        let ids = EmbeddingIds { tokens: inputs.input_ids, positions: None, segments: Some(token_types) };
        embedding(&self.word_embeddings, Some(&self.position_embeddings), Some(&self.token_type_embeddings), &ids, &[inputs.batch, inputs.seq])
    }

    /// The output and what the backward needs: the sum and the LayerNorm's statistics.
    fn forward_saved(&self, inputs: &BertInputs, token_types: &[u32]) -> Result<(Tensor, LayerNormOutput)> {
        let sum = self.sum(inputs, token_types)?;
        let norm = self.layer_norm.forward_saved(&sum)?;
        Ok((sum, norm))
    }

    /// Adds the gradients of the three tables (each row by the tokens that looked it up; the
    /// word table's `pad_token_id` row gets none, as transformers' `padding_idx`).
    fn backward(&self, inputs: &BertInputs, token_types: &[u32], sum: &Tensor, norm: &LayerNormOutput, dy: &Tensor, grads: &Gradients) -> Result<()> {
        let d_sum = self.layer_norm.backward(sum, norm, dy, grads)?;
        let positions: Vec<u32> = (0..inputs.batch * inputs.seq).map(|i| (i % inputs.seq) as u32).collect();
        embedding_backward_with_padding(&d_sum, inputs.input_ids, grads.of(&self.word_embeddings)?, self.pad_token_id)?;
        embedding_backward(&d_sum, &positions, grads.of(&self.position_embeddings)?)?;
        embedding_backward(&d_sum, token_types, grads.of(&self.token_type_embeddings)?)
    }
}

/// Multi-head self-attention with its output projection and residual LayerNorm
/// (`attention.self` + `attention.output`).
pub struct BertAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    output_dense: Linear,
    output_layer_norm: LayerNorm,
    heads: usize,
}

impl BertAttention {
    fn load(w: &Weights, c: &BertConfig) -> Result<Self> {
        let (s, o, h) = (w.pp("self"), w.pp("output"), c.hidden_size);
        Ok(BertAttention {
            query: Linear::load(&s.pp("query"), h, h)?,
            key: Linear::load(&s.pp("key"), h, h)?,
            value: Linear::load(&s.pp("value"), h, h)?,
            output_dense: Linear::load(&o.pp("dense"), h, h)?,
            output_layer_norm: LayerNorm::load(&o.pp("LayerNorm"), h, c.layer_norm_eps as f32)?,
            heads: c.num_attention_heads,
        })
    }

    /// (LayerNorm(x + softmax(QKᵀ/√d + mask)·V·W_o), probabilities if asked for).
    fn forward(&self, x: &Tensor, key_mask: &Tensor, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (q, k, v) = (self.query.forward(x)?, self.key.forward(x)?, self.value.forward(x)?);
        let args = Attention { heads: self.heads, key_mask: Some(key_mask), output_probs: probs, ..Default::default() };
        let (context, probs) = attention(&q, &k, &v, &args)?;
        let projected = self.output_dense.forward(&context)?;
        Ok((self.output_layer_norm.forward(&elementwise::add(&projected, x)?)?, probs))
    }

    fn attention_args<'a>(&self, key_mask: &'a Tensor, dropout: Option<Dropout>) -> Attention<'a> {
        Attention { heads: self.heads, key_mask: Some(key_mask), output_probs: true, dropout, ..Default::default() }
    }

    /// The training forward, with dropout on the probabilities and on the output projection
    /// before the residual (`self.dropout` and `output.dropout` in transformers).
    fn forward_saved(&self, x: &Tensor, key_mask: &Tensor, drop: LayerDropout) -> Result<(Tensor, AttentionSaved)> {
        let (q, k, v) = (self.query.forward(x)?, self.key.forward(x)?, self.value.forward(x)?);
        let (context, probs) = attention(&q, &k, &v, &self.attention_args(key_mask, drop.probs))?;
        let probs = probs.ok_or_else(|| arg_err!("bert", "attention returned no probabilities"))?;
        let sum = elementwise::add(&dropout(&self.output_dense.forward(&context)?, drop.attention_output)?, x)?;
        let norm = self.output_layer_norm.forward_saved(&sum)?;
        Ok((norm.y.clone(), AttentionSaved { q, k, v, probs, context, sum, norm }))
    }

    /// dx through the residual and through each of the query, key and value projections.
    fn backward(&self, x: &Tensor, s: &AttentionSaved, key_mask: &Tensor, drop: LayerDropout, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_sum = self.output_layer_norm.backward(&s.sum, &s.norm, dy, grads)?;
        let d_context = self.output_dense.backward(&s.context, &dropout(&d_sum, drop.attention_output)?, grads)?;
        let d = attention_backward(&s.q, &s.k, &s.v, &s.probs, &d_context, &self.attention_args(key_mask, drop.probs))?;
        let mut dx = d_sum;
        for (projection, d_projected) in [(&self.query, &d.dq), (&self.key, &d.dk), (&self.value, &d.dv)] {
            dx = elementwise::add(&dx, &projection.backward(x, d_projected, grads)?)?;
        }
        Ok(dx)
    }
}

/// What [`BertAttention`]'s training forward keeps for its backward.
struct AttentionSaved {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    probs: Tensor,
    context: Tensor,
    /// The residual sum the LayerNorm normalised, and its statistics.
    sum: Tensor,
    norm: LayerNormOutput,
}

/// One encoder layer: attention, then the feed-forward block
/// x = LayerNorm(x + W₂·act(W₁·x)) (`intermediate.dense`, `output.dense`, `output.LayerNorm`).
pub struct BertLayer {
    attention: BertAttention,
    intermediate: Linear,
    output: Linear,
    output_layer_norm: LayerNorm,
    activation: Activation,
}

impl BertLayer {
    fn load(w: &Weights, c: &BertConfig) -> Result<Self> {
        Ok(BertLayer {
            attention: BertAttention::load(&w.pp("attention"), c)?,
            intermediate: Linear::load(&w.pp("intermediate").pp("dense"), c.hidden_size, c.intermediate_size)?,
            output: Linear::load(&w.pp("output").pp("dense"), c.intermediate_size, c.hidden_size)?,
            output_layer_norm: LayerNorm::load(&w.pp("output").pp("LayerNorm"), c.hidden_size, c.layer_norm_eps as f32)?,
            activation: c.activation()?,
        })
    }

    fn forward(&self, x: &Tensor, key_mask: &Tensor, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (attended, probs) = self.attention.forward(x, key_mask, probs)?;
        let hidden = self.activation.forward(&self.intermediate.forward(&attended)?)?;
        let out = self.output.forward(&hidden)?;
        Ok((self.output_layer_norm.forward(&elementwise::add(&out, &attended)?)?, probs))
    }

    fn forward_saved(&self, x: &Tensor, key_mask: &Tensor, drop: LayerDropout) -> Result<(Tensor, LayerSaved)> {
        let (attended, attention) = self.attention.forward_saved(x, key_mask, drop)?;
        let pre = self.intermediate.forward(&attended)?;
        let act = self.activation.forward(&pre)?;
        let sum = elementwise::add(&dropout(&self.output.forward(&act)?, drop.output)?, &attended)?;
        let norm = self.output_layer_norm.forward_saved(&sum)?;
        Ok((norm.y.clone(), LayerSaved { x: x.clone(), dropout: drop, attention, attended, pre, act, sum, norm }))
    }

    fn backward(&self, s: &LayerSaved, key_mask: &Tensor, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_sum = self.output_layer_norm.backward(&s.sum, &s.norm, dy, grads)?;
        let d_act = self.output.backward(&s.act, &dropout(&d_sum, s.dropout.output)?, grads)?;
        let d_pre = self.activation.backward(&s.pre, &d_act)?;
        let d_attended = elementwise::add(&d_sum, &self.intermediate.backward(&s.attended, &d_pre, grads)?)?;
        self.attention.backward(&s.x, &s.attention, key_mask, s.dropout, &d_attended, grads)
    }
}

/// What a [`BertLayer`]'s training forward keeps for its backward.
struct LayerSaved {
    x: Tensor,
    dropout: LayerDropout,
    attention: AttentionSaved,
    /// The attention block's output: the feed-forward block's input.
    attended: Tensor,
    /// The feed-forward block's pre-activation and activation.
    pre: Tensor,
    act: Tensor,
    sum: Tensor,
    norm: LayerNormOutput,
}

/// `cls.predictions`: transform (dense, activation, LayerNorm), then the decoder tied to the
/// word embeddings, plus an output bias.
struct LmHead {
    dense: Linear,
    activation: Activation,
    layer_norm: LayerNorm,
    decoder: Linear,
}

impl LmHead {
    fn load(w: &Weights, c: &BertConfig, word_embeddings: &Tensor) -> Result<Self> {
        let t = w.pp("transform");
        let decoder_weight = if w.pp("decoder").contains("weight") { w.pp("decoder").tensor("weight", &[c.vocab_size, c.hidden_size])? } else { word_embeddings.clone() };
        let bias = if w.contains("bias") { w.tensor("bias", &[c.vocab_size])? } else { w.pp("decoder").tensor("bias", &[c.vocab_size])? };
        Ok(LmHead {
            dense: Linear::load(&t.pp("dense"), c.hidden_size, c.hidden_size)?,
            activation: c.activation()?,
            layer_norm: LayerNorm::load(&t.pp("LayerNorm"), c.hidden_size, c.layer_norm_eps as f32)?,
            decoder: Linear::from_tensors(decoder_weight, Some(bias)),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let transformed = self.layer_norm.forward(&self.activation.forward(&self.dense.forward(x)?)?)?;
        self.decoder.forward(&transformed)
    }

    /// The logits and the transform's pre-activation, activation and LayerNorm output.
    fn forward_saved(&self, x: &Tensor) -> Result<(Tensor, [Tensor; 2], LayerNormOutput)> {
        let pre = self.dense.forward(x)?;
        let act = self.activation.forward(&pre)?;
        let norm = self.layer_norm.forward_saved(&act)?;
        Ok((self.decoder.forward(&norm.y)?, [pre, act], norm))
    }

    fn backward(&self, x: &Tensor, [pre, act]: &[Tensor; 2], norm: &LayerNormOutput, d_logits: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_transformed = self.decoder.backward(&norm.y, d_logits, grads)?;
        let d_act = self.layer_norm.backward(act, norm, &d_transformed, grads)?;
        self.dense.backward(x, &self.activation.backward(pre, &d_act)?, grads)
    }
}

/// The task head, chosen from `architectures` in config.json.
enum Head {
    /// `BertModel`: last_hidden_state and pooler_output.
    Base,
    MaskedLm(LmHead),
    PreTraining(LmHead, Linear),
    NextSentence(Linear),
    SequenceClassification(Linear),
    TokenClassification(Linear),
    QuestionAnswering(SpanHead),
}

pub struct BertModel {
    pub config: BertConfig,
    embeddings: BertEmbeddings,
    layers: Vec<BertLayer>,
    pooler: Option<Linear>,
    head: Head,
}

impl BertModel {
    /// Loads a checkpoint in the Hugging Face layout. The head follows `architectures`
    /// (default `BertModel`); the `bert.` prefix is optional.
    pub fn load(config: BertConfig, root: &Weights) -> Result<BertModel> {
        let w = if root.contains("bert.embeddings.word_embeddings.weight") { root.pp("bert") } else { root.clone() };
        let c = &config;
        let embeddings = BertEmbeddings::load(&w.pp("embeddings"), c)?;
        let layers = (0..c.num_hidden_layers).map(|i| BertLayer::load(&w.pp("encoder.layer").pp(i), c)).collect::<Result<Vec<_>>>()?;
        let pooler = if w.pp("pooler.dense").contains("weight") { Some(Linear::load(&w.pp("pooler.dense"), c.hidden_size, c.hidden_size)?) } else { None };
        let architecture = c.head.architecture("BertModel");
        let labels = c.head.num_labels();
        let cls = root.pp("cls");
        let head = match architecture {
            "BertModel" => Head::Base,
            "BertForMaskedLM" => Head::MaskedLm(LmHead::load(&cls.pp("predictions"), c, &embeddings.word_embeddings)?),
            "BertForPreTraining" => Head::PreTraining(LmHead::load(&cls.pp("predictions"), c, &embeddings.word_embeddings)?, Linear::load(&cls.pp("seq_relationship"), c.hidden_size, 2)?),
            "BertForNextSentencePrediction" => Head::NextSentence(Linear::load(&cls.pp("seq_relationship"), c.hidden_size, 2)?),
            "BertForSequenceClassification" => Head::SequenceClassification(Linear::load(&root.pp("classifier"), c.hidden_size, labels)?),
            "BertForTokenClassification" => Head::TokenClassification(Linear::load(&root.pp("classifier"), c.hidden_size, labels)?),
            "BertForQuestionAnswering" => Head::QuestionAnswering(SpanHead::load(root, c.hidden_size)?),
            other => return Err(arg_err!("bert", "unsupported architecture `{other}`")),
        };
        let needs_pooler = matches!(head, Head::PreTraining(..) | Head::NextSentence(_) | Head::SequenceClassification(_));
        if needs_pooler && pooler.is_none() {
            return Err(crate::SesameError::Checkpoint(format!("{architecture} needs the pooler, but `{}` is missing", w.pp("pooler.dense").name("weight"))));
        }
        Ok(BertModel { config, embeddings, layers, pooler, head })
    }

    /// The output holding masked-LM logits [B, T, V], when the head has them.
    pub fn masked_lm_logits_name(&self) -> Option<&'static str> {
        match self.head {
            Head::MaskedLm(_) => Some("logits"),
            Head::PreTraining(..) => Some("prediction_logits"),
            _ => None,
        }
    }

    fn validate(&self, inputs: &BertInputs) -> Result<()> {
        let op = "bert";
        let n = inputs.batch * inputs.seq;
        if n == 0 {
            return Err(arg_err!(op, "empty input: batch {} × sequence {}", inputs.batch, inputs.seq));
        }
        if inputs.seq > self.config.max_position_embeddings {
            return Err(arg_err!(op, "sequence of {} tokens is longer than max_position_embeddings {}", inputs.seq, self.config.max_position_embeddings));
        }
        for (name, ids) in [("input_ids", Some(inputs.input_ids)), ("attention_mask", inputs.attention_mask), ("token_type_ids", inputs.token_type_ids)] {
            if let Some(ids) = ids {
                if ids.len() != n {
                    return Err(shape_err!(op, "{name} has {} values for batch {} × sequence {}", ids.len(), inputs.batch, inputs.seq));
                }
            }
        }
        Ok(())
    }

    /// The attention mask as f32 [B, T] (all ones by default).
    fn key_mask(&self, inputs: &BertInputs) -> Result<Tensor> {
        let n = inputs.batch * inputs.seq;
        let mask: Vec<f32> = match inputs.attention_mask {
            Some(m) => m.iter().map(|&v| (v != 0) as u32 as f32).collect(),
            None => vec![1.0; n],
        };
        Tensor::from_slice(self.embeddings.word_embeddings.gpu(), &mask, &[inputs.batch, inputs.seq])
    }

    /// Runs the encoder and the head; outputs are named as transformers names them.
    pub fn forward(&self, inputs: &BertInputs, options: ForwardOptions) -> Result<ModelOutput> {
        self.validate(inputs)?;
        let (batch, seq) = (inputs.batch, inputs.seq);
        let zeros = vec![0u32; batch * seq];
        let key_mask = self.key_mask(inputs)?;

        let mut out = ModelOutput::default();
        let mut x = self.embeddings.forward(inputs, inputs.token_type_ids.unwrap_or(&zeros))?;
        if options.hidden_states {
            out.push("hidden_states.0", x.clone());
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let (y, probs) = layer.forward(&x, &key_mask, options.attentions)?;
            x = y;
            if options.hidden_states {
                out.push(format!("hidden_states.{}", i + 1), x.clone());
            }
            if let Some(p) = probs {
                out.push(format!("attentions.{i}"), p);
            }
        }
        let pooled = || -> Result<Tensor> {
            let pooler = self.pooler.as_ref().ok_or_else(|| arg_err!("bert", "this checkpoint has no pooler"))?;
            let cls = x.reshape(&[batch * seq, self.config.hidden_size])?.select_rows(&cls_rows(inputs))?;
            elementwise::unary(&pooler.forward(&cls)?, Unary::Tanh)
        };
        match &self.head {
            Head::Base => {
                out.push("last_hidden_state", x.clone());
                if self.pooler.is_some() {
                    out.push("pooler_output", pooled()?);
                }
            }
            Head::MaskedLm(lm) => out.push("logits", lm.forward(&x)?),
            Head::PreTraining(lm, nsp) => {
                out.push("prediction_logits", lm.forward(&x)?);
                out.push("seq_relationship_logits", nsp.forward(&pooled()?)?);
            }
            Head::NextSentence(nsp) => out.push("logits", nsp.forward(&pooled()?)?),
            Head::SequenceClassification(classifier) => out.push("logits", classifier.forward(&pooled()?)?),
            Head::TokenClassification(classifier) => out.push("logits", classifier.forward(&x)?),
            Head::QuestionAnswering(span) => {
                let (start, end) = span.logits(&x.reshape(&[batch * seq, self.config.hidden_size])?, batch, seq)?;
                out.push("start_logits", start);
                out.push("end_logits", end);
            }
        }
        Ok(out)
    }
}

/// `BertForQuestionAnswering`'s head: `qa_outputs` gives each token a start and an end logit.
/// Its output [B·T, 2] is transposed to [2, B·T] (a product with the 2 × 2 identity, which is
/// exact) so that each logit is one contiguous row.
struct SpanHead {
    qa_outputs: Linear,
    identity: Tensor,
}

impl SpanHead {
    fn load(root: &Weights, hidden_size: usize) -> Result<SpanHead> {
        let qa_outputs = Linear::load(&root.pp("qa_outputs"), hidden_size, 2)?;
        let identity = Tensor::from_slice(root.gpu(), &[1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
        Ok(SpanHead { qa_outputs, identity })
    }

    /// The start and end logits, [B, T] each, of the encoder's rows [B·T, C].
    fn logits(&self, rows: &Tensor, batch: usize, seq: usize) -> Result<(Tensor, Tensor)> {
        let transposed = matmul(&self.identity, &self.qa_outputs.forward(rows)?, Matmul { trans_b: true, ..Default::default() })?;
        Ok((transposed.narrow(0, 1)?.reshape(&[batch, seq])?, transposed.narrow(1, 1)?.reshape(&[batch, seq])?))
    }

    /// Adds the head's weight gradients and returns the rows' gradient [B·T, C], from the
    /// gradients of the start and end logits ([B, T] each).
    fn backward(&self, rows: &Tensor, d_start: &Tensor, d_end: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let n = d_start.numel();
        let d_transposed = Tensor::empty(rows.gpu(), &[2, n], DType::F32)?;
        d_transposed.write_rows(0, &d_start.reshape(&[1, n])?)?;
        d_transposed.write_rows(1, &d_end.reshape(&[1, n])?)?;
        let d_logits = matmul(&d_transposed, &self.identity, Matmul { trans_a: true, ..Default::default() })?;
        self.qa_outputs.backward(rows, &d_logits, grads)
    }
}

/// Row (of the flattened [B·T]) of each sequence's [CLS] token: its first.
fn cls_rows(inputs: &BertInputs) -> Vec<usize> {
    (0..inputs.batch).map(|b| b * inputs.seq).collect()
}

impl BertModel {
    pub fn gpu(&self) -> &crate::Gpu {
        self.embeddings.word_embeddings.gpu()
    }
}
