//! GPT (Radford et al. 2018, "openai-gpt"), as transformers' `modeling_openai.py`: token +
//! learned position embeddings and post-LayerNorm decoder blocks
//! (n = ln_1(x + attn(x)); x = ln_2(n + mlp(n))), no final LayerNorm, and the LM head tied to
//! the token embeddings.

use super::config::OpenAiGptConfig;
use super::gpt2::{tied_lm_head, CausalSelfAttention, DecoderBlock, DecoderInputs, DecoderStack, ForwardOptions, KvCache, Mlp};
use super::ModelOutput;
use crate::error::{arg_err, Result};
use crate::gpu::Gpu;
use crate::nn::LayerNorm;
use crate::ops::elementwise;
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

impl DecoderBlock for Block {
    fn forward(&self, x: &Tensor, key_mask: Option<&Tensor>, cache: Option<(&Tensor, usize)>, probs: bool) -> Result<(Tensor, Option<Tensor>)> {
        let (attended, probs) = self.attn.forward(x, key_mask, cache, probs)?;
        let n = self.ln_1.forward(&elementwise::add(x, &attended)?)?;
        let h = self.ln_2.forward(&elementwise::add(&n, &self.mlp.forward(&n)?)?)?;
        Ok((h, probs))
    }
}

pub struct OpenAiGptModel {
    pub config: OpenAiGptConfig,
    tokens_embed: Tensor,
    positions_embed: Tensor,
    blocks: Vec<Block>,
    /// `OpenAIGPTLMHeadModel`: logits through the tied token embeddings.
    lm_head: bool,
}

impl OpenAiGptModel {
    pub fn load(config: OpenAiGptConfig, root: &Weights) -> Result<OpenAiGptModel> {
        let w = if root.contains("transformer.tokens_embed.weight") { root.pp("transformer") } else { root.clone() };
        let c = &config;
        let lm_head = match c.head.architecture("OpenAIGPTModel") {
            "OpenAIGPTModel" => false,
            "OpenAIGPTLMHeadModel" => true,
            other => return Err(arg_err!("openai-gpt", "unsupported architecture `{other}`")),
        };
        Ok(OpenAiGptModel {
            tokens_embed: w.pp("tokens_embed").tensor("weight", &[c.vocab_size, c.n_embd])?,
            positions_embed: w.pp("positions_embed").tensor("weight", &[c.n_positions, c.n_embd])?,
            blocks: (0..c.n_layer).map(|i| Block::load(&w.pp("h").pp(i), c)).collect::<Result<_>>()?,
            lm_head,
            config,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        self.tokens_embed.gpu()
    }

    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        KvCache::new(self.tokens_embed.gpu(), self.blocks.len(), batch, capacity.min(self.config.n_positions), self.config.n_embd)
    }

    pub fn forward(&self, inputs: &DecoderInputs, options: ForwardOptions, cache: Option<&mut KvCache>) -> Result<ModelOutput> {
        let stack = DecoderStack { tokens: &self.tokens_embed, positions: &self.positions_embed, final_norm: None, max_positions: self.config.n_positions };
        let (x, mut out) = stack.run(&self.blocks, inputs, options, cache)?;
        if self.lm_head {
            out.push("logits", tied_lm_head(&self.tokens_embed, &x, inputs, options)?);
        } else {
            out.push("last_hidden_state", x);
        }
        Ok(out)
    }
}
