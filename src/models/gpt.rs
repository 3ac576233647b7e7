//! GPT (Radford et al. 2018, "openai-gpt"), as transformers' `modeling_openai.py`: token +
//! learned position embeddings and post-LayerNorm decoder blocks
//! (n = ln_1(x + attn(x)); x = ln_2(n + mlp(n))), no final LayerNorm, and the LM head tied to
//! the token embeddings, on the shared [decoder](super::decoder). Trained with the causal-LM
//! objective, and fine-tuned as a sequence classifier with the paper's auxiliary LM loss, as
//! GPT-2 is ([`super::decoder::train`]), through this block's backward.

use serde::Deserialize;

use super::config::{config_err, from_json, DecoderDropout};
#[cfg(feature = "training")]
use super::decoder::train::with_decoder_head;
use super::decoder::train::TrainBlock;
use super::decoder::{AttentionSaved, CausalSelfAttention, Decoder, DecoderBlock, DecoderConfig, DecoderParts, Mlp};
use super::family::{Family, Unread};
use super::gpt2::default_gpt_eps;
#[cfg(feature = "training")]
use super::training::{Objective, Trains};
use super::HeadConfig;
use crate::error::Result;
use crate::nn::{Activation, Gradients, LayerNorm};
use crate::ops::dropout::{dropout, LayerDropout};
use crate::ops::elementwise;
use crate::ops::layer_norm::LayerNormOutput;
use crate::tensor::Tensor;
use crate::tokenize::Vocabulary;
use crate::weights::Weights;

pub const FAMILY: Family = Family {
    model_type: "openai-gpt",
    name: "GPT",
    architectures: &["OpenAIGPTModel", "OpenAIGPTLMHeadModel", "OpenAIGPTForSequenceClassification"],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::ByteLevelBpe,
    unread: &[Unread::Prefix("score."), Unread::Prefix("lm_head.")],
    dropout_keys: &["resid_pdrop", "embd_pdrop", "attn_pdrop"],
    #[cfg(feature = "training")]
    training: Some(&Trains {
        objectives: &[Objective::Clm, Objective::Classify],
        load,
        with_head: Some(|objective, config, safetensors, labels, seed| with_decoder_head("OpenAIGPT", objective, config, safetensors, labels, seed)),
        fit_to_data: None,
        fresh: None,
    }),
};

/// GPT config (`model_type: "openai-gpt"`).
#[derive(Clone, Debug, Deserialize)]
pub struct OpenAiGptConfig {
    pub vocab_size: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_positions: usize,
    /// The activation: transformers maps `gelu` to the tanh form for this model.
    #[serde(default = "default_afn")]
    pub afn: String,
    #[serde(default = "default_gpt_eps")]
    pub layer_norm_epsilon: f64,
    #[serde(flatten)]
    pub dropout: DecoderDropout,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_afn() -> String {
    "gelu".into()
}

impl OpenAiGptConfig {
    pub fn from_json(json: &[u8]) -> Result<OpenAiGptConfig> {
        let c: OpenAiGptConfig = from_json(json)?;
        super::config::check_heads("n_embd", c.n_embd, "n_head", c.n_head)?;
        c.activation()?;
        Ok(c)
    }

    /// transformers' `ACT_FNS` for openai-gpt maps "gelu" to `gelu_new` (the tanh form).
    pub fn activation(&self) -> Result<Activation> {
        match self.afn.as_str() {
            "gelu" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(config_err(format!("unsupported afn `{other}`"))),
        }
    }
}

/// GPT with the head its config names.
pub type OpenAiGptModel = Decoder<Block>;

/// Loads a GPT checkpoint in the Hugging Face layout (the `transformer.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<OpenAiGptModel> {
    let c = OpenAiGptConfig::from_json(config_json)?;
    let w = if root.contains("transformer.tokens_embed.weight") { root.pp("transformer") } else { root.clone() };
    let parts = DecoderParts {
        tokens: w.pp("tokens_embed").matrix("weight", [c.vocab_size, c.n_embd])?,
        positions: w.pp("positions_embed").tensor("weight", &[c.n_positions, c.n_embd])?,
        blocks: (0..c.n_layer).map(|i| Block::load(&w.pp("h").pp(i), &c)).collect::<Result<_>>()?,
        final_norm: None,
    };
    let config = DecoderConfig {
        vocab_size: c.vocab_size,
        width: c.n_embd,
        heads: c.n_head,
        max_positions: c.n_positions,
        eos_token_id: None,
        dropout: c.dropout.probabilities(),
        head: c.head.clone(),
    };
    Decoder::new(config, "OpenAIGPT", parts, root)
}

/// One post-LN block.
pub struct Block {
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
pub struct BlockSaved {
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
