//! Models from scratch: a Hugging Face config and initial weights for an architecture and
//! size, initialised as transformers initialises them. Their tokenizers come from
//! [`super::tokenizer`].

use super::init::{Init, INIT_STD};
use super::task_heads::fresh_masked_lm_head;
use crate::error::{arg_err, Result, SesameError};
use crate::models::albert::ALBERT_LAYER;
use crate::models::encoder::BERT_LAYER;

/// The architectures a fresh model can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `GPT2LMHeadModel`: pre-LN decoder, tied LM head, tanh GELU.
    Gpt2,
    /// `BertForPreTraining`: post-LN encoder with the masked-LM and next-sentence heads.
    Bert,
    /// `RobertaForMaskedLM`: BERT's encoder, one token type, positions counted after the
    /// padding id, the masked-LM head alone.
    Roberta,
    /// `AlbertForPreTraining`: embeddings min(128, width) wide projected to the width, one
    /// layer shared by every depth, the masked-LM and sentence-order heads.
    Albert,
    /// `ErnieForPreTraining`: BERT with three task type embeddings.
    Ernie,
    /// ELECTRA's pretraining folder: the discriminator (`ElectraForPreTraining`) and a
    /// generator (`ElectraForMaskedLM`) with a quarter of its heads (at least one, as wide),
    /// over embeddings min(128, width) wide that both share.
    Electra,
}

impl std::str::FromStr for Arch {
    type Err = SesameError;
    fn from_str(s: &str) -> Result<Arch> {
        match s {
            "gpt2" => Ok(Arch::Gpt2),
            "bert" => Ok(Arch::Bert),
            "roberta" => Ok(Arch::Roberta),
            "albert" => Ok(Arch::Albert),
            "ernie" => Ok(Arch::Ernie),
            "electra" => Ok(Arch::Electra),
            other => Err(arg_err!("model", "unknown architecture `{other}` (gpt2, bert, roberta, albert, ernie, electra, elmo, awd-lstm or cvt)")),
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

impl Arch {
    /// Whether it is one of the BERT-like encoders (which pad with a padding token).
    pub fn is_encoder(self) -> bool {
        self != Arch::Gpt2
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

    /// config.json of this shape, without dropout (`sesame train --dropout` sets it). An
    /// encoder pads with id `pad_token_id`; a GPT-2's text begins and ends with `eos_token_id` (none
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
            _ => self.encoder_config(pad_token_id.unwrap_or(0) as usize),
        };
        serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(format!("config.json: {e}")))
    }

    /// model.safetensors of a fresh model, drawn as transformers' `_init_weights` draws it:
    /// weights and embeddings N(0, 0.02), biases 0, LayerNorm gains 1; GPT-2's residual
    /// projections (`c_proj`) N(0, 0.02/√(2L)); an encoder's padding row of the word
    /// embeddings (and RoBERTa's of the positions) 0.
    pub fn init_safetensors(&self, seed: u64, pad_token_id: Option<u32>) -> Result<Vec<u8>> {
        self.validate()?;
        let mut init = Init::new(seed);
        match self.arch {
            Arch::Gpt2 => self.init_gpt2(&mut init)?,
            _ => self.init_encoder(&mut init, pad_token_id.unwrap_or(0) as usize)?,
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

    /// ELECTRA's generator: a quarter of the discriminator's heads (at least one), each as
    /// wide, the same depth.
    pub fn generator_shape(&self) -> ModelShape {
        let heads = (self.heads / 4).max(1);
        ModelShape { heads, width: heads * (self.width / self.heads.max(1)), ..*self }
    }

    /// ELECTRA's generator_config.json (None for the other architectures).
    pub fn generator_config_json(&self, pad_token_id: Option<u32>) -> Result<Option<Vec<u8>>> {
        if self.arch != Arch::Electra {
            return Ok(None);
        }
        let generator = self.generator_shape();
        let mut config = generator.encoder_config(pad_token_id.unwrap_or(0) as usize);
        config["architectures"] = serde_json::json!(["ElectraForMaskedLM"]);
        config["embedding_size"] = self.embedding_size().into();
        serde_json::to_vec_pretty(&config).map(Some).map_err(|e| SesameError::Io(format!("generator_config.json: {e}")))
    }

    /// The embedding tables' width: ALBERT's and ELECTRA's factorized min(128, width), else
    /// the width.
    fn embedding_size(&self) -> usize {
        if matches!(self.arch, Arch::Albert | Arch::Electra) {
            self.width.min(128)
        } else {
            self.width
        }
    }

    /// The rows of the position table: RoBERTa's numbering starts after the padding id.
    fn position_rows(&self, pad: usize) -> usize {
        if self.arch == Arch::Roberta {
            self.context + pad + 1
        } else {
            self.context
        }
    }

    /// An encoder family's config.json (BERT's keys, plus each family's own).
    fn encoder_config(&self, pad: usize) -> serde_json::Value {
        let (model_type, architecture) = match self.arch {
            Arch::Roberta => ("roberta", "RobertaForMaskedLM"),
            Arch::Albert => ("albert", "AlbertForPreTraining"),
            Arch::Ernie => ("ernie", "ErnieForPreTraining"),
            Arch::Electra => ("electra", "ElectraForPreTraining"),
            _ => ("bert", "BertForPreTraining"),
        };
        let mut config = serde_json::json!({
            "model_type": model_type,
            "architectures": [architecture],
            "vocab_size": self.vocab,
            "max_position_embeddings": self.position_rows(pad),
            "hidden_size": self.width,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "intermediate_size": 4 * self.width,
            "hidden_act": "gelu",
            "type_vocab_size": if self.arch == Arch::Roberta { 1 } else { 2 },
            "layer_norm_eps": 1e-12,
            "initializer_range": INIT_STD,
            "pad_token_id": pad,
            "tie_word_embeddings": true,
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        });
        let extra = match self.arch {
            Arch::Albert => serde_json::json!({
                "embedding_size": self.embedding_size(), "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": "gelu_new", "classifier_dropout_prob": 0.0,
            }),
            Arch::Ernie => serde_json::json!({ "use_task_id": true, "task_type_vocab_size": 3 }),
            Arch::Electra => serde_json::json!({ "embedding_size": self.embedding_size() }),
            _ => serde_json::json!({}),
        };
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// An encoder family's weights under its own names: embeddings (the padding rows 0),
    /// layers (ALBERT's one shared layer), pooler and pretraining heads, the masked-LM
    /// decoder tied to the word embeddings (only its bias stored).
    fn init_encoder(&self, init: &mut Init, pad: usize) -> Result<()> {
        let (h, e, v) = (self.width, self.embedding_size(), self.vocab);
        if pad >= v {
            return Err(arg_err!("model", "pad_token_id {pad} is outside the vocabulary of {v}"));
        }
        let base = match self.arch {
            Arch::Roberta => "roberta",
            Arch::Albert => "albert",
            Arch::Ernie => "ernie",
            Arch::Electra => "electra",
            _ => "bert",
        };
        let table = |init: &mut Init, name: &str, rows: usize, zero_row: Option<usize>| -> Result<()> {
            init.normal(format!("{base}.embeddings.{name}.weight"), vec![rows, e], INIT_STD)?;
            if let (Some(row), Some((_, _, values))) = (zero_row, init.tensors.last_mut()) {
                values[row * e..(row + 1) * e].fill(0.0);
            }
            Ok(())
        };
        table(init, "word_embeddings", v, Some(pad))?;
        table(init, "position_embeddings", self.position_rows(pad), (self.arch == Arch::Roberta).then_some(pad))?;
        table(init, "token_type_embeddings", if self.arch == Arch::Roberta { 1 } else { 2 }, None)?;
        if self.arch == Arch::Ernie {
            table(init, "task_type_embeddings", 3, None)?;
        }
        init.layer_norm(&format!("{base}.embeddings.LayerNorm"), e);
        if self.arch == Arch::Electra {
            return self.init_electra_models(init);
        }
        let (names, layers) = match self.arch {
            Arch::Albert => {
                init.linear("albert.encoder.embedding_hidden_mapping_in", h, e, INIT_STD)?;
                (&ALBERT_LAYER, vec!["albert.encoder.albert_layer_groups.0.albert_layers.0".to_string()])
            }
            _ => (&BERT_LAYER, (0..self.layers).map(|i| format!("{base}.encoder.layer.{i}")).collect()),
        };
        init_layers(init, names, &layers, h)?;
        match self.arch {
            Arch::Roberta => fresh_masked_lm_head(init, base, h, e, v),
            Arch::Albert => {
                init.linear("albert.pooler", h, h, INIT_STD)?;
                fresh_masked_lm_head(init, base, h, e, v)?;
                init.linear("sop_classifier.classifier", 2, h, INIT_STD)
            }
            _ => {
                init.linear(&format!("{base}.pooler.dense"), h, h, INIT_STD)?;
                fresh_masked_lm_head(init, base, h, e, v)?;
                init.linear("cls.seq_relationship", 2, h, INIT_STD)
            }
        }
    }
}

impl ModelShape {
    /// ELECTRA's two models around the shared embeddings (already drawn under
    /// `electra.embeddings`), each's own tensors under `discriminator.` or `generator.`: the
    /// projection from the embeddings when they are narrower, the layers, and the
    /// discriminator's per-token head or the generator's masked-LM head (its decoder tied to
    /// the word embeddings).
    fn init_electra_models(&self, init: &mut Init) -> Result<()> {
        let (e, v, generator) = (self.embedding_size(), self.vocab, self.generator_shape());
        for (role, width) in [("discriminator", self.width), ("generator", generator.width)] {
            if e != width {
                init.linear(&format!("{role}.electra.embeddings_project"), width, e, INIT_STD)?;
            }
            let layers: Vec<String> = (0..self.layers).map(|i| format!("{role}.electra.encoder.layer.{i}")).collect();
            init_layers(init, &BERT_LAYER, &layers, width)?;
        }
        init.linear("discriminator.discriminator_predictions.dense", self.width, self.width, INIT_STD)?;
        init.linear("discriminator.discriminator_predictions.dense_prediction", 1, self.width, INIT_STD)?;
        init.linear("generator.generator_predictions.dense", e, generator.width, INIT_STD)?;
        init.layer_norm("generator.generator_predictions.LayerNorm", e);
        init.constant("generator.generator_lm_head.bias".into(), v, 0.0);
        Ok(())
    }
}

/// Post-LN transformer layers of width `h` (a 4·h feed-forward) under each of `layers`.
fn init_layers(init: &mut Init, names: &crate::models::encoder::LayerNames, layers: &[String], h: usize) -> Result<()> {
    for l in layers {
        for projection in [names.query, names.key, names.value, names.attention_output] {
            init.linear(&format!("{l}.{projection}"), h, h, INIT_STD)?;
        }
        init.layer_norm(&format!("{l}.{}", names.attention_norm), h);
        init.linear(&format!("{l}.{}", names.intermediate), 4 * h, h, INIT_STD)?;
        init.linear(&format!("{l}.{}", names.output), h, 4 * h, INIT_STD)?;
        init.layer_norm(&format!("{l}.{}", names.output_norm), h);
    }
    Ok(())
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

    #[test]
    fn a_fresh_electra_is_a_discriminator_and_a_quarter_width_generator_over_shared_embeddings() {
        use crate::train::electra::ElectraPretraining;
        use crate::weights::Weights;
        let shape = ModelShape { arch: Arch::Electra, layers: 2, heads: 4, width: 32, context: 12, vocab: 30 };
        assert_eq!((shape.generator_shape().heads, shape.generator_shape().width), (1, 8));
        let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(1, Some(0)).unwrap()).unwrap();
        let generator_config = shape.generator_config_json(Some(0)).unwrap().unwrap();
        let weights = Weights::new(crate::gpu::testing::gpu(), &checkpoint).recording();
        let model = ElectraPretraining::load(&shape.config_json(Some(0), None).unwrap(), &generator_config, &weights).unwrap();
        assert_eq!(model.max_positions(), 12);
        assert_eq!(checkpoint.shape("electra.embeddings.word_embeddings.weight"), Some(&[30, 32][..]), "min(128, width) wide");
        assert_eq!(checkpoint.shape("generator.electra.embeddings_project.weight"), Some(&[8, 32][..]));
        assert!(!checkpoint.contains("discriminator.electra.embeddings_project.weight"), "as wide as the embeddings: no projection");
        assert_eq!(checkpoint.shape("generator.generator_lm_head.bias"), Some(&[30][..]));
        assert!(ModelShape { arch: Arch::Bert, ..shape }.generator_config_json(None).unwrap().is_none());
    }

    #[test]
    fn fresh_encoders_of_each_family_load_with_every_tensor_read() {
        use crate::models::auto::AutoModel;
        use crate::weights::{Recorded, Weights};
        let gpu = crate::gpu::testing::gpu();
        for arch in [Arch::Bert, Arch::Roberta, Arch::Albert, Arch::Ernie] {
            let shape = ModelShape { arch, layers: 3, heads: 2, width: 16, context: 12, vocab: 30 };
            let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(1, Some(3)).unwrap()).unwrap();
            let weights = Weights::new(gpu, &checkpoint).recording();
            let model = AutoModel::load(&shape.config_json(Some(3), None).unwrap(), &weights).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
            let loaded: Vec<String> = weights
                .take_loaded()
                .into_iter()
                .map(|r| match r {
                    Recorded::Trainable { name, .. } | Recorded::Frozen { name, .. } | Recorded::Buffer { name, .. } => name,
                })
                .collect();
            for name in checkpoint.names() {
                assert!(loaded.iter().any(|l| l == name), "{arch:?}: {name} is stored but not read");
            }
            let base = format!("{arch:?}").to_lowercase();
            let (words, _) = checkpoint.to_f32(&format!("{base}.embeddings.word_embeddings.weight")).unwrap();
            assert!(words[3 * 16..4 * 16].iter().all(|&x| x == 0.0) && words.iter().any(|&x| x != 0.0), "{arch:?}: only the padding row is 0");
            let encoder = model.as_encoder().unwrap();
            assert_eq!(encoder.schedule.len(), 3, "{arch:?}: three layers deep");
        }
        // ALBERT's layer is shared: its weights do not grow with depth.
        let albert = |layers| {
            Checkpoint::from_bytes(ModelShape { arch: Arch::Albert, layers, heads: 2, width: 16, context: 12, vocab: 30 }.init_safetensors(1, Some(0)).unwrap())
                .unwrap()
                .names()
                .count()
        };
        assert_eq!(albert(2), albert(6));
        let config: serde_json::Value = serde_json::from_slice(
            &ModelShape { arch: Arch::Roberta, layers: 1, heads: 2, width: 16, context: 12, vocab: 30 }.config_json(Some(1), None).unwrap(),
        )
        .unwrap();
        assert_eq!(config["max_position_embeddings"], 14, "RoBERTa's positions start after the padding id");
    }
}
