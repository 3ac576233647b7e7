//! ELECTRA's pretraining (Clark et al. 2020, §2): a small generator (`ElectraForMaskedLM`)
//! learns the masked LM; at each masked position a replacement is sampled from its softmax;
//! the discriminator (`ElectraForPreTraining`) learns to tell which tokens of the corrupted
//! row were replaced. Loss = generator's masked-LM loss + λ · discriminator's loss (λ = 50).
//! The two share their whole embeddings block, and the generator's output layer is tied to the
//! word embeddings, so that table's gradient sums three uses (both models' inputs, the
//! generator's output).
//!
//! Both train from one pretraining folder ([`super::pretraining_folder`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rand::Rng;

use super::pretraining_folder::SHARED_ROOT;
use crate::error::{arg_err, Result};
use crate::models::encoder::fresh::{check_pad, fresh_config, init_layers, init_table, with_keys};
use crate::models::encoder::train::{binary_cross_entropy, replaced_token_targets, MlmBatch};
use crate::models::encoder::{transformer_activation_values, Encoder, EncoderInputs, BERT_LAYER};
use crate::models::training::fresh::{config_bytes, FreshShape, FreshVocabulary, Init, TrainingFolder, INIT_STD};
use crate::models::training::{rng_for, Batch, Objective, StepOptions, Trainable};
use crate::models::{ForwardOptions, ModelOutput};
use crate::nn::Gradients;
use crate::ops::cross_entropy::{cross_entropy, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::DropoutStream;
use crate::ops::elementwise;
use crate::tensor::Tensor;
use crate::weights::Weights;

const OP: &str = "ELECTRA pretraining";

/// The paper's weight λ of the discriminator's loss.
pub const RTD_WEIGHT: f32 = 50.0;

/// The two models' own tensors' prefixes in a pretraining folder.
const MODELS: [(&str, &str); 2] = [("discriminator", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")];

/// The generator and the discriminator, over shared embeddings.
pub struct ElectraPretraining {
    pub generator: Encoder,
    pub discriminator: Encoder,
    /// λ: the discriminator's loss weight.
    pub rtd_weight: f32,
}

/// The losses of one step, each `[1]` on the device: the generator's masked LM, the
/// discriminator's replaced-token detection, and the total, mlm + λ · rtd.
pub struct ElectraLosses {
    pub mlm: Tensor,
    pub rtd: Tensor,
    pub total: Tensor,
}

/// Checks the two configs describe models that can share embeddings.
fn check_configs(discriminator: &serde_json::Value, generator: &serde_json::Value) -> Result<()> {
    for ((role, class), config) in MODELS.iter().zip([discriminator, generator]) {
        let architecture = config["architectures"][0].as_str().unwrap_or_default();
        if config["model_type"].as_str() != Some("electra") || architecture != *class {
            return Err(arg_err!(OP, "the {role} is an {class} (model_type electra), not `{architecture}`"));
        }
    }
    // What the shared embeddings are and how both models apply them (ElectraConfig's
    // defaults where a config omits a key).
    let defaults = serde_json::json!({"vocab_size": 30522, "embedding_size": 128, "max_position_embeddings": 512, "type_vocab_size": 2,
        "pad_token_id": 0, "layer_norm_eps": 1e-12, "position_embedding_type": "absolute"});
    for (key, default) in defaults.as_object().into_iter().flatten() {
        let value = |c: &serde_json::Value| c.get(key).filter(|v| !v.is_null()).unwrap_or(default).clone();
        if value(discriminator) != value(generator) {
            return Err(arg_err!(
                OP,
                "the generator's {key} is {} and the discriminator's {}: they share their embeddings",
                value(generator),
                value(discriminator)
            ));
        }
    }
    Ok(())
}

fn parse(config: &[u8], file: &str) -> Result<serde_json::Value> {
    serde_json::from_slice(config).map_err(|e| arg_err!(OP, "{file}: {e}"))
}

impl ElectraPretraining {
    /// Both models of a pretraining folder's checkpoint (`weights`), sharing the embeddings.
    /// A tensor neither reads is an error.
    pub fn load(discriminator_config: &[u8], generator_config: &[u8], weights: &Weights) -> Result<ElectraPretraining> {
        check_configs(&parse(discriminator_config, "config.json")?, &parse(generator_config, "generator_config.json")?)?;
        let shared: Arc<Mutex<HashMap<String, Tensor>>> = Arc::default();
        let load = |role: &str, config: &[u8]| {
            super::load(config, &weights.sharing(&format!("{role}."), SHARED_ROOT, &shared)).map_err(|e| arg_err!(OP, "the {role}: {e}"))
        };
        let discriminator = load("discriminator", discriminator_config)?;
        let generator = load("generator", generator_config)?;
        weights.check_all_read("the generator and the discriminator", "config.json and generator_config.json", |_| false)?;
        Ok(ElectraPretraining { generator, discriminator, rtd_weight: RTD_WEIGHT })
    }

    /// One step's losses and their backward: the generator's masked LM on `batch` (its
    /// `labels` the original ids at the masked positions, −100 elsewhere), a replacement at
    /// each masked position — `batch.generator_samples` when replayed, else sampled from the
    /// generator's softmax by the step's random stream —, and the discriminator on the
    /// corrupted rows. Gradients are added into `grads` scaled by `step.loss_scale` (the
    /// discriminator's also by λ). The discriminator's dropout masks come from the step's
    /// stream with the seed + 1.
    pub fn losses_backward(&self, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<ElectraLosses> {
        let (generator, discriminator) = (&self.generator, &self.discriminator);
        let mlm = generator.masked_lm_step(&MlmBatch::of(batch, None), grads, step.loss_scale, &step.dropout, batch.generator_samples.is_none())?;
        let masked: Vec<usize> = (0..batch.labels.len()).filter(|&i| batch.labels[i] != DEFAULT_IGNORE_INDEX).collect();
        let samples = match (&batch.generator_samples, mlm.logits) {
            (Some(samples), _) => replayed_samples(samples, &masked)?,
            (None, Some(logits)) => {
                let logits = read_within_step(&logits)?;
                gumbel_max_samples(&logits, masked.len(), &mut replacement_rng(&step.dropout))?
            }
            (None, None) => Vec::new(),
        };
        let (corrupted, replaced) = corrupt(batch, &masked, &samples)?;
        let inputs = EncoderInputs { input_ids: &corrupted, ..EncoderInputs::of(batch) };
        let stream = DropoutStream { seed: step.dropout.seed.wrapping_add(1), ..step.dropout };
        let rtd = discriminator.replaced_token_loss_backward(&inputs, &replaced, grads, step.loss_scale * self.rtd_weight, &stream)?;
        let weighted = elementwise::mul(&rtd, &Tensor::from_slice(rtd.gpu(), &[self.rtd_weight], &[1])?)?;
        Ok(ElectraLosses { total: elementwise::add(&mlm.loss, &weighted)?, mlm: mlm.loss, rtd })
    }

    /// The losses of `batch` without dropout or gradients, as held-out evaluation scores it:
    /// "loss" (mlm + λ · rtd), "mlm_loss", "rtd_loss", and the discriminator's counts over the
    /// real tokens: "tokens_scored", "tokens_replaced", "replaced_correct" (labelled right),
    /// each `[1]`. The replacements are the
    /// replayed ones, else drawn from a stream keyed by the batch's masked ids, so a batch is
    /// always scored alike.
    pub fn evaluate(&self, batch: &Batch) -> Result<ModelOutput> {
        let (generator, discriminator) = (&self.generator, &self.discriminator);
        let inputs = EncoderInputs::of(batch);
        let masked: Vec<usize> = (0..batch.labels.len()).filter(|&i| batch.labels[i] != DEFAULT_IGNORE_INDEX).collect();
        let gpu = generator.gpu();
        let (mlm, samples) = if masked.is_empty() {
            (Tensor::zeros(gpu, &[1], crate::tensor::DType::F32)?, Vec::new())
        } else {
            let rows = generator.last_hidden_rows(&inputs)?.select_rows(&masked)?;
            let logits = generator.masked_lm_logits(&rows)?;
            let targets: Vec<i64> = masked.iter().map(|&i| batch.labels[i]).collect();
            let mlm = cross_entropy(&logits, &targets, DEFAULT_IGNORE_INDEX)?.loss;
            let samples = match &batch.generator_samples {
                Some(samples) => replayed_samples(samples, &masked)?,
                None => {
                    let key = masked.iter().fold(SAMPLING_STREAM, |h, &i| h.rotate_left(5) ^ (i as u64) ^ ((batch.input_ids[i] as u64) << 32));
                    gumbel_max_samples(&read_within_step(&logits)?, masked.len(), &mut rng_for(key, 0))?
                }
            };
            (mlm, samples)
        };
        let (corrupted, replaced) = corrupt(batch, &masked, &samples)?;
        let corrupted_inputs = EncoderInputs { input_ids: &corrupted, ..inputs };
        let out = discriminator.forward(&corrupted_inputs, ForwardOptions::default())?;
        let logits = out.get("logits").ok_or_else(|| arg_err!(OP, "the discriminator returned no logits"))?;
        let targets = replaced_token_targets(&corrupted_inputs, &replaced)?;
        let rtd = binary_cross_entropy(logits, &targets)?.1.loss;
        let scores = read_within_step(logits)?;
        let scored: Vec<(f32, i64)> = scores.iter().zip(&targets).filter(|(_, &t)| t != DEFAULT_IGNORE_INDEX).map(|(&x, &t)| (x, t)).collect();
        let replaced = scored.iter().filter(|&&(_, t)| t == 1).count();
        let right = scored.iter().filter(|&&(x, t)| (x > 0.0) == (t == 1)).count();
        let weighted = elementwise::mul(&rtd, &Tensor::from_slice(gpu, &[self.rtd_weight], &[1])?)?;
        let mut output = ModelOutput::default();
        output.push("loss", elementwise::add(&mlm, &weighted)?);
        output.push("mlm_loss", mlm);
        output.push("rtd_loss", rtd);
        for (name, count) in [("tokens_scored", scored.len()), ("tokens_replaced", replaced), ("replaced_correct", right)] {
            output.push(name, Tensor::from_slice(gpu, &[count as f32], &[1])?);
        }
        Ok(output)
    }
}

/// A pretraining folder trains with objective electra, both models at once.
impl Trainable for ElectraPretraining {
    fn architecture(&self) -> &str {
        "ELECTRA's generator and discriminator"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::Electra]
    }

    /// The longest sequence both take.
    fn max_positions(&self) -> Option<usize> {
        Some(self.generator.config.max_positions().min(self.discriminator.config.max_positions()))
    }

    /// Both models' activations are kept until the step's end.
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        transformer_activation_values(&self.generator, batch, seq).saturating_add(transformer_activation_values(&self.discriminator, batch, seq))
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        Ok(self.losses_backward(batch, grads, step)?.total)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        self.evaluate(batch)
    }
}

/// ELECTRA's generator for a discriminator of `shape`: a quarter of its heads (at least one),
/// each as wide, the same depth.
pub fn generator_shape(shape: &FreshShape) -> FreshShape {
    let heads = (shape.heads / 4).max(1);
    FreshShape { heads, width: heads * (shape.width / shape.heads.max(1)), ..*shape }
}

/// A fresh pretraining folder: the discriminator (`ElectraForPreTraining`, config.json) and a
/// generator (`ElectraForMaskedLM`, generator_config.json; [`generator_shape`]) over shared
/// embeddings min(128, width) wide (the padding row 0), drawn as transformers'
/// `_init_weights` draws them: each model's own tensors under `discriminator.` or
/// `generator.` — the projection from the embeddings when they are narrower, the layers, and
/// the discriminator's per-token head or the generator's masked-LM head (its decoder tied to
/// the word embeddings).
pub fn fresh_pretraining_folder(shape: &FreshShape, vocabulary: &FreshVocabulary, seed: u64) -> Result<TrainingFolder> {
    shape.validate(vocabulary.size)?;
    let (e, v, pad, generator) = (shape.width.min(128), vocabulary.size, vocabulary.pad.unwrap_or(0) as usize, generator_shape(shape));
    check_pad(pad, v)?;
    let config = |shape: &FreshShape, architecture: &str| {
        config_bytes(&with_keys(fresh_config("electra", architecture, shape, v, shape.context, 2, pad), serde_json::json!({ "embedding_size": e })))
    };
    let mut init = Init::new(seed);
    for (name, rows, zero_row) in [("word_embeddings", v, Some(pad)), ("position_embeddings", shape.context, None), ("token_type_embeddings", 2, None)] {
        init_table(&mut init, "electra", name, rows, e, zero_row)?;
    }
    init.layer_norm("electra.embeddings.LayerNorm", e);
    for (role, width) in [("discriminator", shape.width), ("generator", generator.width)] {
        if e != width {
            init.linear(&format!("{role}.electra.embeddings_project"), width, e, INIT_STD)?;
        }
        let layers: Vec<String> = (0..shape.layers).map(|i| format!("{role}.electra.encoder.layer.{i}")).collect();
        init_layers(&mut init, &BERT_LAYER, &layers, width)?;
    }
    init.linear("discriminator.discriminator_predictions.dense", shape.width, shape.width, INIT_STD)?;
    init.linear("discriminator.discriminator_predictions.dense_prediction", 1, shape.width, INIT_STD)?;
    init.linear("generator.generator_predictions.dense", e, generator.width, INIT_STD)?;
    init.layer_norm("generator.generator_predictions.LayerNorm", e);
    init.constant("generator.generator_lm_head.bias".into(), v, 0.0);
    let mut folder = TrainingFolder::new(config(shape, "ElectraForPreTraining")?, init.serialize()?);
    folder.files.push(("generator_config.json", config(&generator, "ElectraForMaskedLM")?));
    Ok(folder)
}

/// Keys the replacement sampler's random stream apart from the masking's and dropout's.
/// A tensor's values read back within a step (`Trainable`'s steps are synchronous): natively
/// by blocking on the read; in a browser only from host memory, as a WebGPU read-back cannot
/// be waited for there.
fn read_within_step(tensor: &Tensor) -> Result<Vec<f32>> {
    #[cfg(not(target_arch = "wasm32"))]
    return pollster::block_on(tensor.to_vec::<f32>());
    #[cfg(target_arch = "wasm32")]
    return tensor.host_values::<f32>().map_err(|_| {
        arg_err!(OP, "the generator's replacements are read back within a step, which WebGPU in a browser cannot wait for: pretrain ELECTRA on the CPU device")
    });
}

const SAMPLING_STREAM: u64 = 0x5A3B_1EE1_EC7A;

/// The random stream a training step samples its replacements from: a function of the run's
/// seed and the micro-batch's index (the step's dropout stream), so a resumed run repeats it.
pub fn replacement_rng(step: &DropoutStream) -> rand::rngs::StdRng {
    rng_for(step.seed ^ SAMPLING_STREAM, step.batch_index)
}

/// The replayed replacements at the masked positions, which must hold token ids.
fn replayed_samples(samples: &[i64], masked: &[usize]) -> Result<Vec<u32>> {
    masked
        .iter()
        .map(|&i| {
            let sample = *samples.get(i).ok_or_else(|| arg_err!(OP, "generator_samples has {} values, fewer than the batch's tokens", samples.len()))?;
            u32::try_from(sample).map_err(|_| arg_err!(OP, "generator_samples holds {sample} at a masked position, not a token id"))
        })
        .collect()
}

/// One token per row of `logits` (`rows` rows of a vocabulary each), drawn from the row's
/// softmax by the Gumbel-max trick: argmax(logit + g), g = −ln(−ln(u + 1e-9) + 1e-9) with u
/// uniform in [0, 1), as ELECTRA's code samples.
pub fn gumbel_max_samples(logits: &[f32], rows: usize, rng: &mut impl Rng) -> Result<Vec<u32>> {
    if rows == 0 {
        return Ok(Vec::new());
    }
    if logits.is_empty() || !logits.len().is_multiple_of(rows) {
        return Err(arg_err!(OP, "{} logits are not {rows} rows over a vocabulary", logits.len()));
    }
    let vocab = logits.len() / rows;
    Ok(logits
        .chunks(vocab)
        .map(|row| {
            let mut best = (0, f32::NEG_INFINITY);
            for (id, &logit) in row.iter().enumerate() {
                let u: f32 = rng.random();
                let score = logit - (-(u + 1e-9).ln() + 1e-9).ln();
                if score > best.1 {
                    best = (id, score);
                }
            }
            best.0 as u32
        })
        .collect())
}

/// The corrupted rows (each masked position's replacement written in) and the
/// discriminator's labels: 1 where the token differs from the original, else 0 (a sample equal
/// to the original counts as original).
fn corrupt(batch: &Batch, masked: &[usize], samples: &[u32]) -> Result<(Vec<u32>, Vec<i64>)> {
    if samples.len() != masked.len() {
        return Err(arg_err!(OP, "{} replacements for {} masked positions", samples.len(), masked.len()));
    }
    let mut corrupted = batch.input_ids.clone();
    let mut replaced = vec![0i64; corrupted.len()];
    for (&i, &sample) in masked.iter().zip(samples) {
        let original = u32::try_from(batch.labels[i]).map_err(|_| arg_err!(OP, "label {} is not a token id", batch.labels[i]))?;
        corrupted[i] = sample;
        replaced[i] = (sample != original) as i64;
    }
    Ok((corrupted, replaced))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gumbel_max_draws_from_the_softmax() {
        // Two rows: probabilities (0.7, 0.2, 0.1) and a row that all but forbids id 0.
        let probabilities = [0.7f32, 0.2, 0.1];
        let mut logits: Vec<f32> = probabilities.iter().map(|p| p.ln()).collect();
        logits.extend([-1e4f32, 0.0, 0.0]);
        let mut rng = rng_for(3, 0);
        let (mut counts, draws) = ([0usize; 3], 20_000);
        for _ in 0..draws {
            let samples = gumbel_max_samples(&logits, 2, &mut rng).unwrap();
            counts[samples[0] as usize] += 1;
            assert_ne!(samples[1], 0, "a logit of -1e4 is never drawn");
        }
        for (count, p) in counts.iter().zip(probabilities) {
            let share = *count as f32 / draws as f32;
            // 5 standard deviations of a binomial share at 20,000 draws is under 0.016.
            assert!((share - p).abs() < 0.016, "drew {share} for p = {p}: {counts:?}");
        }
        assert!(gumbel_max_samples(&logits, 4, &mut rng).is_err(), "6 logits are not 4 rows");
    }

    #[test]
    fn replacements_are_written_in_and_labelled_where_they_differ() {
        let batch = Batch { input_ids: vec![1, 9, 9, 2], labels: vec![-100, 5, 6, -100], batch: 1, seq: 4, ..Default::default() };
        let (corrupted, replaced) = corrupt(&batch, &[1, 2], &[7, 6]).unwrap();
        assert_eq!(corrupted, [1, 7, 6, 2]);
        assert_eq!(replaced, [0, 1, 0, 0], "the sample equal to the original counts as original");
        assert!(corrupt(&batch, &[1, 2], &[7]).is_err());
        let err = replayed_samples(&[-100, -100, -100, 4], &[1]).unwrap_err().to_string();
        assert!(err.contains("-100 at a masked position"), "{err}");
    }

    #[test]
    fn configs_must_share_their_embeddings() {
        let config =
            |class: &str, vocab: u64| serde_json::json!({"model_type": "electra", "architectures": [class], "vocab_size": vocab, "embedding_size": 16});
        assert!(check_configs(&config("ElectraForPreTraining", 99), &config("ElectraForMaskedLM", 99)).is_ok());
        let err = check_configs(&config("ElectraForPreTraining", 99), &config("ElectraForMaskedLM", 98)).unwrap_err().to_string();
        assert!(err.contains("vocab_size is 98 and the discriminator's 99"), "{err}");
        let err = check_configs(&config("ElectraForMaskedLM", 99), &config("ElectraForMaskedLM", 99)).unwrap_err().to_string();
        assert!(err.contains("discriminator is an ElectraForPreTraining"), "{err}");
    }
}
