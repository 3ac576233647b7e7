//! Models from scratch: a Hugging Face config and initial weights for an architecture and
//! size, initialised as transformers initialises them. Their tokenizers come from
//! [`super::tokenizer`].

use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal, Uniform};
use safetensors::Dtype;

use crate::error::{arg_err, Result, SesameError};
use crate::weights;

/// The architectures a fresh model can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `GPT2LMHeadModel`: pre-LN decoder, tied LM head, tanh GELU.
    Gpt2,
    /// `BertForPreTraining`: post-LN encoder with the masked-LM and next-sentence heads.
    Bert,
}

impl std::str::FromStr for Arch {
    type Err = SesameError;
    fn from_str(s: &str) -> Result<Arch> {
        match s {
            "gpt2" => Ok(Arch::Gpt2),
            "bert" => Ok(Arch::Bert),
            other => Err(arg_err!("model", "unknown architecture `{other}` (gpt2, bert or elmo)")),
        }
    }
}

/// The size of a fresh model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelShape {
    pub arch: Arch,
    pub layers: usize,
    pub heads: usize,
    pub width: usize,
    /// Positions (`n_positions`, `max_position_embeddings`).
    pub context: usize,
    pub vocab: usize,
}

/// transformers' `initializer_range`.
pub(crate) const INIT_STD: f64 = 0.02;

/// Tensors (name, shape, values) of a checkpoint being built, drawn from one seeded stream.
pub(crate) struct Init {
    rng: StdRng,
    pub tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl Init {
    pub fn new(seed: u64) -> Init {
        Init { rng: StdRng::seed_from_u64(seed), tensors: Vec::new() }
    }

    /// Every weight of `checkpoint` (as f32, by name), to add fresh ones to. Integer buffers
    /// (`embeddings.position_ids` in sentence-transformers' MiniLM) are left out: no model
    /// reads them, and transformers rebuilds them when it loads.
    pub fn from_checkpoint(checkpoint: &weights::Checkpoint, seed: u64) -> Result<Init> {
        let mut init = Init::new(seed);
        let mut names: Vec<&str> = checkpoint.names().filter(|name| checkpoint.is_floating_point(name)).collect();
        names.sort_unstable();
        for name in names {
            let (values, shape) = checkpoint.to_f32(name)?;
            init.tensors.push((name.to_string(), shape, values));
        }
        Ok(init)
    }

    pub fn normal(&mut self, name: String, shape: Vec<usize>, std: f64) -> Result<()> {
        let dist = Normal::new(0.0, std).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    /// Values drawn U(−bound, bound).
    pub fn uniform(&mut self, name: String, shape: Vec<usize>, bound: f64) -> Result<()> {
        let dist = Uniform::new_inclusive(-bound, bound).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    pub fn constant(&mut self, name: String, size: usize, value: f32) {
        self.tensors.push((name, vec![size], vec![value; size]));
    }

    /// A Linear's weight [out, inp] drawn N(0, std) and its bias 0 (`{name}.weight`, `.bias`).
    pub fn linear(&mut self, name: &str, out: usize, inp: usize, std: f64) -> Result<()> {
        self.normal(format!("{name}.weight"), vec![out, inp], std)?;
        self.constant(format!("{name}.bias"), out, 0.0);
        Ok(())
    }

    fn layer_norm(&mut self, name: &str, width: usize) {
        self.constant(format!("{name}.weight"), width, 1.0);
        self.constant(format!("{name}.bias"), width, 0.0);
    }

    pub fn serialize(&self) -> Result<Vec<u8>> {
        let entries: Vec<_> =
            self.tensors.iter().map(|(name, shape, values)| (name.as_str(), Dtype::F32, shape.as_slice(), bytemuck::cast_slice::<f32, u8>(values))).collect();
        weights::serialize(&entries)
    }
}

impl ModelShape {
    /// About how many weights the model has (saturating): per layer 12·width² (attention and
    /// MLP), plus the token and position tables.
    pub fn parameter_count(&self) -> u64 {
        use crate::limits::saturating_product as product;
        let [layers, width, context, vocab] = [self.layers, self.width, self.context, self.vocab].map(|v| v as u64);
        product(&[layers, 12, width, width]).saturating_add(product(&[vocab.saturating_add(context), width]))
    }

    /// An error unless every size is positive, the width a multiple of the heads, and the
    /// weights with their gradients and AdamW's two moments fit the host memory budget.
    pub fn validate(&self) -> Result<()> {
        let s = self;
        if [s.layers, s.heads, s.width, s.context, s.vocab].contains(&0) || !s.width.is_multiple_of(s.heads) {
            return Err(arg_err!(
                "model",
                "a model of {} layers, {} heads, width {}, context {}, vocabulary {}: every size must be positive and the width a multiple of the heads",
                s.layers,
                s.heads,
                s.width,
                s.context,
                s.vocab
            ));
        }
        crate::limits::check_elements(
            || format!("a fresh model of {} layers of width {} and {} positions (weights, gradients and AdamW's two moments)", s.layers, s.width, s.context),
            self.parameter_count(),
            16,
        )
    }

    /// config.json of this shape, without dropout (`sesame train --dropout` sets it). A BERT
    /// pads with id `pad_token_id`; a GPT-2's text begins and ends with `eos_token_id` (none
    /// for a character vocabulary).
    pub fn config_json(&self, pad_token_id: Option<u32>, eos_token_id: Option<u32>) -> Result<Vec<u8>> {
        self.validate()?;
        let config = match self.arch {
            Arch::Gpt2 => serde_json::json!({
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
                "bos_token_id": eos_token_id,
                "eos_token_id": eos_token_id,
            }),
            Arch::Bert => serde_json::json!({
                "model_type": "bert",
                "architectures": ["BertForPreTraining"],
                "vocab_size": self.vocab,
                "max_position_embeddings": self.context,
                "hidden_size": self.width,
                "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads,
                "intermediate_size": 4 * self.width,
                "hidden_act": "gelu",
                "type_vocab_size": 2,
                "layer_norm_eps": 1e-12,
                "initializer_range": INIT_STD,
                "pad_token_id": pad_token_id.unwrap_or(0),
                "tie_word_embeddings": true,
                "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0,
            }),
        };
        serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))
    }

    /// model.safetensors of a fresh model, drawn as transformers' `_init_weights` draws it:
    /// weights and embeddings N(0, 0.02), biases 0, LayerNorm gains 1; GPT-2's residual
    /// projections (`c_proj`) N(0, 0.02/√(2L)); BERT's padding row of the word embeddings 0.
    pub fn init_safetensors(&self, seed: u64, pad_token_id: Option<u32>) -> Result<Vec<u8>> {
        self.validate()?;
        let mut init = Init::new(seed);
        match self.arch {
            Arch::Gpt2 => self.init_gpt2(&mut init)?,
            Arch::Bert => self.init_bert(&mut init, pad_token_id.unwrap_or(0) as usize)?,
        }
        init.serialize()
    }

    fn init_gpt2(&self, init: &mut Init) -> Result<()> {
        let (c, v, p) = (self.width, self.vocab, self.context);
        let residual_std = INIT_STD / (2.0 * self.layers as f64).sqrt();
        init.normal("transformer.wte.weight".into(), vec![v, c], INIT_STD)?;
        init.normal("transformer.wpe.weight".into(), vec![p, c], INIT_STD)?;
        for i in 0..self.layers {
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
        Ok(())
    }

    fn init_bert(&self, init: &mut Init, pad: usize) -> Result<()> {
        let (c, v, p) = (self.width, self.vocab, self.context);
        if pad >= v {
            return Err(arg_err!("model", "pad_token_id {pad} is outside the vocabulary of {v}"));
        }
        init.normal("bert.embeddings.word_embeddings.weight".into(), vec![v, c], INIT_STD)?;
        if let Some((_, _, table)) = init.tensors.last_mut() {
            table[pad * c..(pad + 1) * c].fill(0.0);
        }
        init.normal("bert.embeddings.position_embeddings.weight".into(), vec![p, c], INIT_STD)?;
        init.normal("bert.embeddings.token_type_embeddings.weight".into(), vec![2, c], INIT_STD)?;
        init.layer_norm("bert.embeddings.LayerNorm", c);
        for i in 0..self.layers {
            let l = format!("bert.encoder.layer.{i}");
            for projection in ["query", "key", "value"] {
                init.linear(&format!("{l}.attention.self.{projection}"), c, c, INIT_STD)?;
            }
            init.linear(&format!("{l}.attention.output.dense"), c, c, INIT_STD)?;
            init.layer_norm(&format!("{l}.attention.output.LayerNorm"), c);
            init.linear(&format!("{l}.intermediate.dense"), 4 * c, c, INIT_STD)?;
            init.linear(&format!("{l}.output.dense"), c, 4 * c, INIT_STD)?;
            init.layer_norm(&format!("{l}.output.LayerNorm"), c);
        }
        init.linear("bert.pooler.dense", c, c, INIT_STD)?;
        init.linear("cls.predictions.transform.dense", c, c, INIT_STD)?;
        init.layer_norm("cls.predictions.transform.LayerNorm", c);
        // The decoder is tied to the word embeddings; only its bias is stored.
        init.constant("cls.predictions.bias".into(), v, 0.0);
        init.linear("cls.seq_relationship", 2, c, INIT_STD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::Checkpoint;

    fn rms(checkpoint: &Checkpoint, name: &str) -> f64 {
        let (v, _) = checkpoint.to_f32(name).unwrap();
        (v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
    }

    #[test]
    fn gpt2_from_scratch_has_every_tensor_with_gpt2_init() {
        let shape = ModelShape { arch: Arch::Gpt2, layers: 2, heads: 2, width: 16, context: 8, vocab: 11 };
        let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(3, None).unwrap()).unwrap();
        assert_eq!(checkpoint.names().count(), 2 + 2 * 12 + 2);
        assert!((rms(&checkpoint, "transformer.h.0.mlp.c_fc.weight") - 0.02).abs() < 0.002);
        assert!((rms(&checkpoint, "transformer.h.1.mlp.c_proj.weight") - 0.01).abs() < 0.001, "c_proj scaled by 1/√(2·2)");
        assert_eq!(checkpoint.to_f32("transformer.ln_f.weight").unwrap().0, vec![1.0; 16]);
        assert_eq!(checkpoint.to_f32("transformer.h.0.attn.c_attn.bias").unwrap(), (vec![0.0; 48], vec![48]));
        assert_ne!(shape.init_safetensors(3, None).unwrap(), shape.init_safetensors(4, None).unwrap(), "seeded");
        assert!(ModelShape { heads: 3, ..shape }.config_json(None, None).is_err());
    }

    #[test]
    fn bert_from_scratch_has_the_pretraining_heads_and_a_zero_padding_row() {
        let shape = ModelShape { arch: Arch::Bert, layers: 2, heads: 2, width: 16, context: 12, vocab: 30 };
        let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(1, Some(3)).unwrap()).unwrap();
        // Embeddings 5, 16 per layer, pooler 2, prediction head 5, NSP head 2.
        assert_eq!(checkpoint.names().count(), 5 + 2 * 16 + 2 + 5 + 2);
        let (words, dims) = checkpoint.to_f32("bert.embeddings.word_embeddings.weight").unwrap();
        assert_eq!(dims, vec![30, 16]);
        assert!(words[3 * 16..4 * 16].iter().all(|&x| x == 0.0) && words[..16].iter().any(|&x| x != 0.0), "row 3 (padding) is 0");
        assert!((rms(&checkpoint, "bert.encoder.layer.1.intermediate.dense.weight") - 0.02).abs() < 0.002);
        assert_eq!(checkpoint.to_f32("cls.seq_relationship.weight").unwrap().1, vec![2, 16]);
        let config: serde_json::Value = serde_json::from_slice(&shape.config_json(Some(3), None).unwrap()).unwrap();
        assert_eq!((config["pad_token_id"].as_u64(), config["intermediate_size"].as_u64()), (Some(3), Some(64)));
        assert!(shape.init_safetensors(1, Some(30)).is_err(), "padding id outside the vocabulary");
    }
}
