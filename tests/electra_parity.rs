//! ELECTRA's pretraining against PyTorch: tests/fixtures/train/electra-pretraining, written by
//! tests/reference/make_electra_fixtures.py — a generator (ElectraForMaskedLM) and a
//! discriminator (ElectraForPreTraining) over one embeddings block, trained on the masked
//! LM + 50 · replaced-token detection, the generator's samples replayed.

mod common;

use common::train::{compare_parameters_except, dir, scalar, trajectory};
use common::{gpu, read};
use sesame::ops::dropout::DropoutStream;
use sesame::train::data::ReplayBatches;
use sesame::train::electra::ElectraPretraining;
use sesame::train::objective::StepOptions;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

const RUN: &str = "electra-pretraining";

/// The attention keys' biases add the same score to every key a query sees, which softmax
/// ignores: their gradients are 0 in exact arithmetic (checked as rounding noise).
const KEY_BIASES: [&str; 4] = [
    "discriminator.electra.encoder.layer.0.attention.self.key.bias",
    "discriminator.electra.encoder.layer.1.attention.self.key.bias",
    "generator.electra.encoder.layer.0.attention.self.key.bias",
    "generator.electra.encoder.layer.1.attention.self.key.bias",
];

#[derive(serde::Deserialize)]
struct Losses {
    mlm_loss: f32,
    rtd_loss: f32,
}

#[test]
fn electra_pretraining_gradients_match_pytorch() {
    let init = dir(RUN).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = ElectraPretraining::load(&read(&init, "config.json"), &read(&init, "generator_config.json"), &weights).unwrap();
    let params = Parameters::from_weights(&weights).unwrap();
    let batches = ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap();
    let t = trajectory(RUN);
    let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: t.dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
    let losses = model.loss_backward(&batches.batch(0).unwrap(), &params.gradients(), &step).unwrap();
    let steps: Vec<Losses> =
        serde_json::from_value(serde_json::from_slice::<serde_json::Value>(&read(&dir(RUN), "trajectory.json")).unwrap()["steps"].clone()).unwrap();
    for (name, got, want) in [
        ("masked LM", scalar(&losses.mlm)[0], steps[0].mlm_loss),
        ("replaced-token detection", scalar(&losses.rtd)[0], steps[0].rtd_loss),
        ("total", scalar(&losses.total)[0], t.steps[0].loss),
    ] {
        eprintln!("step-0 {name} loss: {got} (PyTorch {want})");
        assert!((got - want).abs() <= 1e-5 * want, "{name}: {got} vs {want}");
    }
    let grads = Checkpoint::from_bytes(read(&dir(RUN), "grads.safetensors")).unwrap();
    compare_parameters_except("ELECTRA pretraining gradient", &params, Part::Grad, &grads, 1e-4, &KEY_BIASES);
}

/// A pretraining folder splits into the discriminator's and the generator's transformers
/// folders, each with the shared embeddings (and the generator's output layer tied to them).
#[test]
fn a_pretraining_folder_splits_into_the_two_models() {
    let init = dir(RUN).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let [discriminator, generator] =
        sesame::train::electra::model_folders(&read(&init, "config.json"), &read(&init, "generator_config.json"), &checkpoint).unwrap();
    for ((config, safetensors), own) in [(discriminator, "discriminator_predictions.dense.weight"), (generator, "generator_predictions.dense.weight")] {
        let split = Checkpoint::from_bytes(safetensors).unwrap();
        assert!(split.contains(own) && split.contains("electra.embeddings.word_embeddings.weight"), "{own}");
        assert!(!split.names().any(|n| n.starts_with("generator.") || n.starts_with("discriminator.")));
        let weights = Weights::new(gpu(), &split);
        sesame::models::auto::AutoModel::load(&config, &weights).unwrap_or_else(|e| panic!("{own}: {e}"));
        weights.check_all_read("the split model", "config.json", |_| false).unwrap();
    }
}
