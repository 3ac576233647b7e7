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
    let reference = Checkpoint::from_bytes(read(&dir, "reference.safetensors")).unwrap();
    let want = |name: &str| reference.to_f32(name).unwrap().0[0];
    let inputs: Inputs = serde_json::from_slice(&read(&dir, "inputs.json")).unwrap();
    let batch = BiLmBatch { sentences: &inputs.sentences, targets: &inputs.targets };
    // The whole softmax at once, and in chunks of 7 rows (which split a direction's rows).
    for chunk_rows in [None, Some(7)] {
        let weights = Weights::new(gpu(), &checkpoint).recording();
        let mut model = ElmoBiLm::load(options.clone(), &weights, vocab).unwrap();
        if let Some(rows) = chunk_rows {
            model.softmax_chunk_rows = rows;
        }
        let params = Parameters::new(weights.loaded()).unwrap();
        assert_eq!(params.list.len(), checkpoint.names().count(), "every tensor of the checkpoint is a parameter");
        let loss = scalar(&model.loss_backward(&batch, &params.gradients(), 1.0).unwrap())[0];
        eprintln!("softmax rows {chunk_rows:?}: biLM loss {loss} (PyTorch {})", want("loss"));
        assert!((loss - want("loss")).abs() <= 1e-5 * want("loss"), "loss {loss} vs {}", want("loss"));
        compare_prefixed_parameters("biLM gradient", &params, Part::Grad, &reference, "grad.", 1e-4);
        let losses = model.losses(&batch).unwrap();
        for (got, name) in [(&losses.loss, "loss"), (&losses.forward, "forward_loss"), (&losses.backward, "backward_loss")] {
            let got = scalar(got)[0];
            assert!((got - want(name)).abs() <= 1e-5 * want(name), "{name}: {got} vs {}", want(name));
        }
    }
}
