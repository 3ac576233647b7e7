//! ULMFiT's third stage starts from its second's result (Howard & Ruder 2018, §3.3): the
//! fine-tuned AWD-LSTM language model's encoder under a fresh pooling classifier, as fastai's
//! `text_classifier_learner` builds it — the encoder's tensors move under `0.module.`
//! (`SentenceEncoder`), the decoder is dropped, and each head block is a BatchNorm1d (weight 1,
//! bias 10⁻³, running mean 0 and variance 1) and a bias-free Linear drawn as PyTorch's
//! default, U(±1/√in).

use super::init::Init;
use super::task_heads::{parse_config, with_labels};
use crate::error::{arg_err, Result};
use crate::models::awd_lstm::AwdLstmConfig;
use crate::weights;

/// The classifier's architecture.
const CLASSIFIER: &str = "AwdLstmForSequenceClassification";

/// An AWD-LSTM language model's checkpoint (config.json, model.safetensors) as a classifier of
/// `num_labels` classes; a classifier's is returned as it is.
pub fn with_ulmfit_classifier_head(config_json: &[u8], safetensors: Vec<u8>, num_labels: usize, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut config = parse_config(config_json)?;
    match config["architectures"][0].as_str() {
        Some(CLASSIFIER) => return Ok((config_json.to_vec(), safetensors)),
        Some("AwdLstmForLanguageModeling" | "AwdLstmModel") => {}
        other => {
            return Err(arg_err!(
                "model",
                "ULMFiT's classifier starts from an AWD-LSTM language model, not `{}`",
                other.unwrap_or("a config without architectures")
            ))
        }
    }
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    init.tensors.retain(|(name, ..)| name.starts_with("0."));
    for (name, ..) in &mut init.tensors {
        *name = format!("0.module.{}", &name[2..]);
    }
    let pad_token = config["pad_token"].as_u64().unwrap_or(1);
    config["pad_token_id"] = pad_token.into();
    let names: Vec<String> = (0..num_labels).map(|i| format!("LABEL_{i}")).collect();
    let config_json = with_labels(config, CLASSIFIER, &names)?;
    let dims = AwdLstmConfig::from_json(&config_json)?.classifier_dims();
    for (i, io) in dims.windows(2).enumerate() {
        let (input, output) = (io[0], io[1]);
        let block = format!("1.layers.{i}");
        init.constant(format!("{block}.0.weight"), input, 1.0);
        init.constant(format!("{block}.0.bias"), input, 1e-3);
        init.constant(format!("{block}.0.running_mean"), input, 0.0);
        init.constant(format!("{block}.0.running_var"), input, 1.0);
        init.uniform(format!("{block}.2.weight"), vec![output, input], 1.0 / (input as f64).sqrt())?;
    }
    Ok((config_json, init.serialize()?))
}
