//! GPT-2 (Radford et al. 2019), as transformers' `modeling_gpt2.py`: token + learned position
//! embeddings, pre-LayerNorm decoder blocks (x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))), a
//! final `ln_f`, and the LM head tied to the token embeddings, on the shared
//! [decoder](super::decoder).

use serde::Deserialize;

use super::config::{config_err, from_json, DecoderDropout};
#[cfg(feature = "training")]
use super::decoder::train::with_decoder_head;
use super::decoder::train::TrainBlock;
use super::decoder::{AttentionSaved, CausalSelfAttention, Decoder, DecoderBlock, DecoderConfig, DecoderParts, Mlp};
use super::family::{Family, Unread};
#[cfg(feature = "training")]
use super::training::fresh::{config_bytes, Fresh, FreshShape, FreshVocabulary, Init, TrainingFolder, INIT_STD};
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
    model_type: "gpt2",
    name: "GPT-2",
    architectures: &["GPT2Model", "GPT2LMHeadModel", "GPT2ForSequenceClassification"],
    load: |config, weights| Ok(Box::new(load(config, weights)?)),
    vocabulary: Vocabulary::ByteLevelBpe,
    // The causal masks older versions saved as buffers, and the other heads.
    unread: &[Unread::Suffix(".attn.bias"), Unread::Suffix(".attn.masked_bias"), Unread::Prefix("score."), Unread::Prefix("lm_head.")],
    dropout_keys: &["resid_pdrop", "embd_pdrop", "attn_pdrop"],
    #[cfg(feature = "training")]
    training: Some(&Trains {
        objectives: &[Objective::Clm, Objective::Classify],
        load,
        with_head: Some(|objective, config, safetensors, labels, seed| with_decoder_head("GPT2", objective, config, safetensors, labels, seed)),
        fit_to_data: None,
        fresh: Some(Fresh::Shaped { pads: false, make: fresh }),
    }),
};

/// A fresh `GPT2LMHeadModel`, drawn as transformers' `_init_weights` draws it: weights and
/// embeddings N(0, 0.02), the residual projections (`c_proj`) N(0, 0.02/√(2L)), biases 0,
/// LayerNorm gains 1, the LM head tied to the token embeddings. Its text begins and ends with
/// the vocabulary's end-of-text token (none for a character vocabulary); no dropout
/// (`sesame train --dropout` sets it).
#[cfg(feature = "training")]
fn fresh(shape: &FreshShape, vocabulary: &FreshVocabulary, seed: u64) -> Result<TrainingFolder> {
    shape.validate(vocabulary.size)?;
    let (c, v, p) = (shape.width, vocabulary.size, shape.context);
    let config = serde_json::json!({
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": v,
        "n_positions": p,
        "n_embd": c,
        "n_layer": shape.layers,
        "n_head": shape.heads,
        "n_inner": null,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "initializer_range": INIT_STD,
        "tie_word_embeddings": true,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "bos_token_id": vocabulary.eos,
        "eos_token_id": vocabulary.eos,
    });
    let residual_std = INIT_STD / (2.0 * shape.layers as f64).sqrt();
    let mut init = Init::new(seed);
    init.normal("transformer.wte.weight".into(), vec![v, c], INIT_STD)?;
    init.normal("transformer.wpe.weight".into(), vec![p, c], INIT_STD)?;
    for i in 0..shape.layers {
        let h = format!("transformer.h.{i}");
        // Conv1D weights are [in, out].
        init.normal(format!("{h}.attn.c_attn.weight"), vec![c, 3 * c], INIT_STD)?;
        init.constant(format!("{h}.attn.c_attn.bias"), 3 * c, 0.0);
        init.normal(format!("{h}.attn.c_proj.weight"), vec![c, c], residual_std)?;
        init.constant(format!("{h}.attn.c_proj.bias"), c, 0.0);
        init.normal(format!("{h}.mlp.c_fc.weight"), vec![c, 4 * c], INIT_STD)?;
        init.constant(format!("{h}.mlp.c_fc.bias"), 4 * c, 0.0);
        init.normal(format!("{h}.mlp.c_proj.weight"), vec![4 * c, c], residual_std)?;
        init.constant(format!("{h}.mlp.c_proj.bias"), c, 0.0);
        init.layer_norm(&format!("{h}.ln_1"), c);
        init.layer_norm(&format!("{h}.ln_2"), c);
    }
    init.layer_norm("transformer.ln_f", c);
    Ok(TrainingFolder::new(config_bytes(&config)?, init.serialize()?))
}

/// GPT-2 config (`model_type: "gpt2"`).
#[derive(Clone, Debug, Deserialize)]
pub struct Gpt2Config {
    pub vocab_size: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_positions: usize,
    /// Width of the MLP; transformers' default 4·n_embd.
    #[serde(default)]
    pub n_inner: Option<usize>,
    #[serde(default = "default_gelu_new")]
    pub activation_function: String,
    #[serde(default = "default_gpt_eps")]
    pub layer_norm_epsilon: f64,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    #[serde(flatten)]
    pub dropout: DecoderDropout,
    #[serde(flatten)]
    pub head: HeadConfig,
}

fn default_gelu_new() -> String {
    "gelu_new".into()
}

/// GPT-2's and GPT's LayerNorm epsilon.
pub(crate) fn default_gpt_eps() -> f64 {
    1e-5
}

impl Gpt2Config {
    pub fn from_json(json: &[u8]) -> Result<Gpt2Config> {
        let c: Gpt2Config = from_json(json)?;
        super::config::check_heads("n_embd", c.n_embd, "n_head", c.n_head)?;
        c.activation()?;
        Ok(c)
    }

    pub fn activation(&self) -> Result<Activation> {
        Activation::from_config(&self.activation_function).ok_or_else(|| config_err(format!("unsupported activation_function `{}`", self.activation_function)))
    }

    pub fn inner(&self) -> usize {
        self.n_inner.unwrap_or(4 * self.n_embd)
    }

    fn decoder_config(&self) -> DecoderConfig {
        DecoderConfig {
            vocab_size: self.vocab_size,
            width: self.n_embd,
            heads: self.n_head,
            max_positions: self.n_positions,
            eos_token_id: self.eos_token_id,
            dropout: self.dropout.probabilities(),
            head: self.head.clone(),
        }
    }
}

/// GPT-2 with the head its config names.
pub type Gpt2Model = Decoder<Gpt2Block>;

/// Loads a GPT-2 checkpoint in the Hugging Face layout (the `transformer.` prefix optional).
pub fn load(config_json: &[u8], root: &Weights) -> Result<Gpt2Model> {
    let c = Gpt2Config::from_json(config_json)?;
    let w = if root.contains("transformer.wte.weight") { root.pp("transformer") } else { root.clone() };
    let parts = DecoderParts {
        tokens: w.pp("wte").matrix("weight", [c.vocab_size, c.n_embd])?,
        positions: w.pp("wpe").tensor("weight", &[c.n_positions, c.n_embd])?,
        blocks: (0..c.n_layer).map(|i| Gpt2Block::load(&w.pp("h").pp(i), &c)).collect::<Result<_>>()?,
        final_norm: Some(LayerNorm::load(&w.pp("ln_f"), c.n_embd, c.layer_norm_epsilon as f32)?),
    };
    Decoder::new(c.decoder_config(), "GPT2", parts, root)
}

/// One pre-LN block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
pub struct Gpt2Block {
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
pub struct BlockSaved {
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
