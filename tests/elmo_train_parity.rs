//! ELMo's biLM objective against PyTorch, on the fixture tests/reference/make_bilm_fixtures.py
//! wrote (tests/fixtures/bilm/): a tiny ELMo (relu character CNN, two highways, two biLSTM
//! layers with skip connections and clips that bind) with a 20-word softmax, on a ragged
//! batch of three sentences: the loss and every parameter's gradient.

mod common;

use std::path::{Path, PathBuf};

use common::train::{compare_prefixed_parameters, scalar};
use common::{gpu, read};
use sesame::models::elmo::train::{BiLmBatch, ElmoBiLm};
use sesame::models::elmo::ElmoOptions;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bilm")
}

#[derive(serde::Deserialize)]
struct Inputs {
    sentences: Vec<Vec<String>>,
    targets: Vec<Vec<u32>>,
}

#[test]
fn bilm_loss_and_gradients_match_pytorch() {
    let dir = dir();
    let vocab = String::from_utf8(read(&dir, "vocab.txt")).unwrap().lines().count();
    let options = ElmoOptions::from_json(&read(&dir, "options.json")).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = ElmoBiLm::load(options, &weights, vocab).unwrap();
    let params = Parameters::new(weights.loaded()).unwrap();
    assert_eq!(params.list.len(), checkpoint.names().count(), "every tensor of the checkpoint is a parameter");

    let inputs: Inputs = serde_json::from_slice(&read(&dir, "inputs.json")).unwrap();
    let batch = BiLmBatch { sentences: &inputs.sentences, targets: &inputs.targets };
    let loss = scalar(&model.loss_backward(&batch, &params.gradients(), 1.0).unwrap())[0];
    let reference = Checkpoint::from_bytes(read(&dir, "reference.safetensors")).unwrap();
    let want = reference.to_f32("loss").unwrap().0[0];
    eprintln!("biLM loss {loss} (PyTorch {want})");
    assert!((loss - want).abs() <= 1e-5 * want, "loss {loss} vs {want}");
    compare_prefixed_parameters("biLM gradient", &params, Part::Grad, &reference, "grad.", 1e-4);
}
