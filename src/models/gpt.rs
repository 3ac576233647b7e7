//! GPT (Radford et al. 2018, "openai-gpt"), as transformers' `modeling_openai.py`: token +
//! learned position embeddings and post-LayerNorm decoder blocks
//! (n = ln_1(x + attn(x)); x = ln_2(n + mlp(n))), no final LayerNorm, and the LM head tied to
//! the token embeddings. Trained with the causal-LM objective, and fine-tuned as a sequence
//! classifier with the paper's auxiliary LM loss, as GPT-2 is ([`super::causal_lm::CausalLm`]),
//! through this block's backward.

use super::config::OpenAiGptConfig;
use super::causal_lm::{CausalLm, LmBatch, SequenceClassifier, TrainBlock};
use super::gpt2::{last_token_head, tied_lm_head, AttentionSaved, CausalSelfAttention, DecoderBlock, DecoderInputs, DecoderStack, ForwardOptions, KvCache, Mlp};
use super::ModelOutput;
use crate::error::{arg_err, Result};
use crate::gpu::Gpu;
use crate::nn::{Gradients, LayerNorm, Linear};
use crate::ops::dropout::{dropout, DropoutStream, LayerDropout};
use crate::ops::elementwise;
use crate::ops::layer_norm::LayerNormOutput;
use crate::tensor::Tensor;
use crate::weights::Weights;

struct Block {
    attn: CausalSelfAttention,
    ln_1: LayerNorm,
    mlp: Mlp,
    ln_2: LayerNorm,
}

impl Block {
    fn load(w: &Weights, c: &OpenAiGptConfig) -> Result<Self> {
        let eps = c.layer_norm_epsilon as f32;
        Ok(Block {
            attn: CausalSelfAttention::load(&w.pp("attn"), c.n_embd, c.n_head)?,
            ln_1: LayerNorm::load(&w.pp("ln_1"), c.n_embd, eps)?,
            mlp: Mlp::load(&w.pp("mlp"), c.n_embd, 4 * c.n_embd, c.activation()?)?,
            ln_2: LayerNorm::load(&w.pp("ln_2"), c.n_embd, eps)?,
        })
    }
}

/// What a [`Block`]'s training forward keeps for its backward.
struct BlockSaved {
    x: Tensor,
    dropout: LayerDropout,
    attn: AttentionSaved,
    /// x + attention: ln_1's input; then ln_1's output n, the MLP's input.
    pre_1: Tensor,
    ln_1: LayerNormOutput,
    mlp: [Tensor; 2],
    /// n + MLP: ln_2's input.
    pre_2: Tensor,
    ln_2: LayerNormOutput,
}

impl TrainBlock for Block {
    type Saved = BlockSaved;

    /// The training forward, with dropout where transformers' `Block` has it: the attention
    /// probabilities, the attention's output projection and the MLP's output.
    fn forward_saved(&self, x: &Tensor, key_mask: Option<&Tensor>, drop: LayerDropout) -> Result<(Tensor, BlockSaved)> {
        let (attended, attn) = self.attn.forward_saved(x, key_mask, drop.probs)?;
        let pre_1 = elementwise::add(x, &dropout(&attended, drop.attention_output)?)?;
        let ln_1 = self.ln_1.forward_saved(&pre_1)?;
        let (mlp_out, mlp) = self.mlp.forward_saved(&ln_1.y)?;
        let pre_2 = elementwise::add(&ln_1.y, &dropout(&mlp_out, drop.output)?)?;
        let ln_2 = self.ln_2.forward_saved(&pre_2)?;
        Ok((ln_2.y.clone(), BlockSaved { x: x.clone(), dropout: drop, attn, pre_1, ln_1, mlp, pre_2, ln_2 }))
    }

    /// The forward's equations in reverse: through ln_2, the MLP's residual, ln_1, the
    /// attention's residual.
    fn backward(&self, s: &BlockSaved, key_mask: Option<&Tensor>, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_pre_2 = self.ln_2.backward(&s.pre_2, &s.ln_2, dy, grads)?;
        let d_n = elementwise::add(&d_pre_2, &self.mlp.backward(&s.ln_1.y, &s.mlp, &dropout(&d_pre_2, s.dropout.output)?, grads)?)?;
        let d_pre_1 = self.ln_1.backward(&s.pre_1, &s.ln_1, &d_n, grads)?;
        let d_attended = dropout(&d_pre_1, s.dropout.attention_output)?;
        elementwise::add(&d_pre_1, &self.attn.backward(&s.x, &s.attn, key_mask, s.dropout.probs, &d_attended, grads)?)
    }
}

impl DecoderBlock for Block {
    fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (attended, probs) = self.attn.forward(x, key_mask, cache, probs)?;
        let n = self.ln_1.forward(&elementwise::add(x, &attended)?)?;
        let h = self.ln_2.forward(&elementwise::add(&n, &self.mlp.forward(&n)?)?)?;
        Ok((h, probs))
    }
}

enum Head {
    /// `OpenAIGPTModel`: last_hidden_state.
    Base,
    /// `OpenAIGPTLMHeadModel`: logits through the tied token embeddings.
    LanguageModel,
    /// `OpenAIGPTForSequenceClassification`: `score` (no bias) at each sequence's last
    /// non-pad token.
    SequenceClassification(Linear),
}

pub struct OpenAiGptModel {
    pub config: OpenAiGptConfig,
    tokens_embed: Tensor,
    positions_embed: Tensor,
    blocks: Vec<Block>,
    head: Head,
}

impl OpenAiGptModel {
    pub fn load(config: OpenAiGptConfig, root: &Weights) -> Result<OpenAiGptModel> {
        let w = if root.contains("transformer.tokens_embed.weight") { root.pp("transformer") } else { root.clone() };
        let c = &config;
        let head = match c.head.architecture("OpenAIGPTModel") {
            "OpenAIGPTModel" => Head::Base,
            "OpenAIGPTLMHeadModel" => Head::LanguageModel,
            "OpenAIGPTForSequenceClassification" => Head::SequenceClassification(Linear::load(&root.pp("score"), c.n_embd, c.head.num_labels())?),
            other => return Err(arg_err!("openai-gpt", "unsupported architecture `{other}`")),
        };
        Ok(OpenAiGptModel {
            tokens_embed: w.pp("tokens_embed").tensor("weight", &[c.vocab_size, c.n_embd])?,
            positions_embed: w.pp("positions_embed").tensor("weight", &[c.n_positions, c.n_embd])?,
            blocks: (0..c.n_layer).map(|i| Block::load(&w.pp("h").pp(i), c)).collect::<Result<_>>()?,
            head,
            config,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        self.tokens_embed.gpu()
    }

    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        KvCache::new(self.tokens_embed.gpu(), self.blocks.len(), batch, capacity.min(self.config.n_positions), self.config.n_embd)
    }

    /// The causal-LM loss of `batch` (`OpenAIGPTLMHeadModel`'s, with its shift) and its
    /// backward: adds `loss_scale` × every parameter's gradient into `grads`. Returns the loss
    /// [1]. Dropout at the config's probabilities draws its masks from `dropout_keys`.
    pub fn lm_loss_backward(&self, batch: &LmBatch, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        if !matches!(self.head, Head::LanguageModel) {
            return Err(arg_err!("openai-gpt", "causal-LM training needs the OpenAIGPTLMHeadModel architecture"));
        }
        self.causal_lm().loss_backward(batch, grads, loss_scale, dropout_keys)
    }

    /// The paper's fine-tuning loss (`OpenAIGPTForSequenceClassification`'s cross-entropy
    /// against one label per sequence, plus `lm_coef` × the causal-LM loss of `batch.labels`
    /// through the LM head tied to `tokens_embed`) and its backward, as
    /// [`OpenAiGptModel::lm_loss_backward`].
    pub fn sequence_classification_loss_backward(&self, batch: &LmBatch, labels: &[i64], lm_coef: f32, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        let Head::SequenceClassification(score) = &self.head else {
            return Err(arg_err!("openai-gpt", "sequence classification needs the OpenAIGPTForSequenceClassification architecture"));
        };
        let head = SequenceClassifier { score, pad_token_id: self.config.head.pad_token_id, lm_coef };
        self.causal_lm().classification_loss_backward(batch, labels, &head, grads, loss_scale, dropout_keys)
    }

    fn causal_lm(&self) -> CausalLm<'_, Block> {
        let c = &self.config;
        CausalLm { tokens: &self.tokens_embed, positions: &self.positions_embed, blocks: &self.blocks, final_norm: None, vocab: c.vocab_size, max_positions: c.n_positions, width: c.n_embd, dropout: c.dropout.probabilities() }
    }

    pub fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput> {
        let stack = DecoderStack { tokens: &self.tokens_embed, positions: &self.positions_embed, final_norm: None, max_positions: self.config.n_positions };
        let (x, mut out) = stack.run(&self.blocks, inputs, options, cache)?;
        match &self.head {
            Head::Base => out.push("last_hidden_state", x),
            Head::LanguageModel => out.push("logits", tied_lm_head(&self.tokens_embed, &x, inputs, options)?),
            Head::SequenceClassification(score) => out.push("logits", last_token_head(score, &x, inputs, self.config.head.pad_token_id)?),
        }
        Ok(out)
    }
}
