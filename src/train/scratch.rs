//! Models from scratch: a Hugging Face config and initial weights for an architecture and
//! size, initialised as transformers initialises them, and a character-level tokenizer
//! built from a corpus (nanoGPT's `shakespeare_char`).

use std::collections::BTreeSet;

use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal};
use safetensors::Dtype;

use crate::error::{arg_err, Result, SesameError};
use crate::weights;

/// The size of a GPT-2 to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpt2Shape {
    pub layers: usize,
    pub heads: usize,
    pub width: usize,
    /// Positions (`n_positions`).
    pub context: usize,
    pub vocab: usize,
}

/// transformers' `initializer_range`.
const INIT_STD: f64 = 0.02;

impl Gpt2Shape {
    fn validate(&self) -> Result<()> {
        let s = self;
        if [s.layers, s.heads, s.width, s.context, s.vocab].contains(&0) || s.width % s.heads != 0 {
            return Err(arg_err!("model", "a GPT-2 of {} layers, {} heads, width {}, context {}, vocabulary {}: every size must be positive and the width a multiple of the heads", s.layers, s.heads, s.width, s.context, s.vocab));
        }
        Ok(())
    }

    /// config.json of a `GPT2LMHeadModel` of this shape (tied embeddings, tanh GELU).
    pub fn config_json(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let config = serde_json::json!({
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": self.vocab,
            "n_positions": self.context,
            "n_embd": self.width,
            "n_layer": self.layers,
            "n_head": self.heads,
            "n_inner": null,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5,
            "initializer_range": INIT_STD,
            "tie_word_embeddings": true,
            "resid_pdrop": 0.0,
            "embd_pdrop": 0.0,
            "attn_pdrop": 0.0,
        });
        serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))
    }

    /// model.safetensors of a fresh model, as `GPT2PreTrainedModel._init_weights` draws it:
    /// weights and embeddings N(0, 0.02), the residual projections (`c_proj`) N(0, 0.02/√(2L))
    /// (GPT-2's scaling for the residual path), biases 0, LayerNorm gains 1.
    pub fn init_safetensors(&self, seed: u64) -> Result<Vec<u8>> {
        self.validate()?;
        let (c, v, p) = (self.width, self.vocab, self.context);
        let mut rng = StdRng::seed_from_u64(seed);
        let residual_std = INIT_STD / (2.0 * self.layers as f64).sqrt();
        let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
        let mut normal = |name: String, shape: Vec<usize>, std: f64| -> Result<()> {
            let dist = Normal::new(0.0, std).map_err(|e| arg_err!("model", "{e}"))?;
            let values = (0..shape.iter().product()).map(|_| dist.sample(&mut rng) as f32).collect();
            tensors.push((name, shape, values));
            Ok(())
        };
        normal("transformer.wte.weight".into(), vec![v, c], INIT_STD)?;
        normal("transformer.wpe.weight".into(), vec![p, c], INIT_STD)?;
        let mut constant: Vec<(String, Vec<usize>, f32)> = Vec::new();
        for i in 0..self.layers {
            let h = format!("transformer.h.{i}");
            normal(format!("{h}.attn.c_attn.weight"), vec![c, 3 * c], INIT_STD)?;
            normal(format!("{h}.attn.c_proj.weight"), vec![c, c], residual_std)?;
            normal(format!("{h}.mlp.c_fc.weight"), vec![c, 4 * c], INIT_STD)?;
            normal(format!("{h}.mlp.c_proj.weight"), vec![4 * c, c], residual_std)?;
            for (name, size) in [("attn.c_attn.bias", 3 * c), ("attn.c_proj.bias", c), ("mlp.c_fc.bias", 4 * c), ("mlp.c_proj.bias", c), ("ln_1.bias", c), ("ln_2.bias", c)] {
                constant.push((format!("{h}.{name}"), vec![size], 0.0));
            }
            constant.push((format!("{h}.ln_1.weight"), vec![c], 1.0));
            constant.push((format!("{h}.ln_2.weight"), vec![c], 1.0));
        }
        constant.push(("transformer.ln_f.weight".into(), vec![c], 1.0));
        constant.push(("transformer.ln_f.bias".into(), vec![c], 0.0));
        tensors.extend(constant.into_iter().map(|(name, shape, value)| {
            let n = shape.iter().product();
            (name, shape, vec![value; n])
        }));
        let entries: Vec<_> = tensors.iter().map(|(name, shape, values)| (name.as_str(), Dtype::F32, shape.as_slice(), bytemuck::cast_slice::<f32, u8>(values))).collect();
        weights::serialize(&entries)
    }
}

/// tokenizer.json of a character-level tokenizer over the characters of `text` (sorted, one
/// id each, as nanoGPT's `shakespeare_char` builds its vocabulary): every character is one
/// token, and decoding joins them back.
pub fn char_tokenizer_json(text: &str) -> Result<Vec<u8>> {
    let chars: BTreeSet<char> = text.chars().collect();
    if chars.is_empty() {
        return Err(arg_err!("tokenizer", "no text to build a character vocabulary from"));
    }
    let vocab: serde_json::Map<String, serde_json::Value> = chars.iter().enumerate().map(|(id, c)| (c.to_string(), id.into())).collect();
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": { "type": "Split", "pattern": { "Regex": "(?s)." }, "behavior": "Isolated", "invert": false },
        "post_processor": null,
        "decoder": { "type": "Fuse" },
        "model": { "type": "WordLevel", "vocab": vocab, "unk_token": "<unk>" },
    });
    serde_json::to_vec_pretty(&json).map_err(|e| SesameError::Io(format!("tokenizer.json: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::TextTokenizer;
    use crate::weights::Checkpoint;

    #[test]
    fn character_tokenizer_round_trips_text() {
        let text = "First Citizen:\nBefore we proceed, hear me speak.\n\nAll: Speak, speak!";
        let tokenizer = TextTokenizer::from_bytes(&char_tokenizer_json(text).unwrap()).unwrap();
        let ids = tokenizer.encode(text, false).unwrap();
        assert_eq!(ids.len(), text.chars().count(), "one token per character");
        assert_eq!(tokenizer.vocab_size(), text.chars().collect::<BTreeSet<_>>().len());
        assert_eq!(tokenizer.token_to_id("\n"), Some(0), "sorted: newline first");
        assert_eq!(tokenizer.decode(&ids, false).unwrap(), text);
        assert!(tokenizer.encode("Z", false).is_err(), "a character outside the vocabulary is an error");
    }

    #[test]
    fn gpt2_from_scratch_has_every_tensor_with_gpt2_init() {
        let shape = Gpt2Shape { layers: 2, heads: 2, width: 16, context: 8, vocab: 11 };
        let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(3).unwrap()).unwrap();
        assert_eq!(checkpoint.names().count(), 2 + 2 * 12 + 2);
        let std = |name: &str| {
            let (v, _) = checkpoint.to_f32(name).unwrap();
            (v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
        };
        assert!((std("transformer.h.0.mlp.c_fc.weight") - 0.02).abs() < 0.002);
        assert!((std("transformer.h.1.mlp.c_proj.weight") - 0.01).abs() < 0.001, "c_proj scaled by 1/√(2·2)");
        assert_eq!(checkpoint.to_f32("transformer.ln_f.weight").unwrap().0, vec![1.0; 16]);
        assert_eq!(checkpoint.to_f32("transformer.h.0.attn.c_attn.bias").unwrap(), (vec![0.0; 48], vec![48]));
        assert_ne!(shape.init_safetensors(3).unwrap(), shape.init_safetensors(4).unwrap(), "seeded");
        assert!(Gpt2Shape { heads: 3, ..shape }.config_json().is_err());
    }
}
