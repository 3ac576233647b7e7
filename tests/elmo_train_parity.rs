//! ELMo training against PyTorch, on a tiny ELMo (relu character CNN, two highways, two biLSTM
//! layers with skip connections and clips that bind):
//! - the biLM objective (tests/reference/make_bilm_fixtures.py → tests/fixtures/bilm/) with a
//!   20-word softmax, on a ragged batch of three sentences: the loss and every parameter's
//!   gradient;
//! - ELMo features under a task's scalar mix and a 3-class classifier
//!   (tests/reference/make_elmo_classify_fixtures.py → tests/fixtures/elmo-classify/), the
//!   biLM frozen: the logits, the loss, the mix's and classifier's gradients, and five AdamW
//!   steps.

mod common;

use std::path::{Path, PathBuf};

use common::train::{compare_prefixed_parameters, scalar};
use common::{gpu, read};
use sesame::models::elmo::classify::ElmoClassifier;
use sesame::models::elmo::train::{BiLmBatch, ElmoBiLm};
use sesame::models::elmo::ElmoOptions;
use sesame::train::optim::{AdamWConfig, Optimizer, OptimizerKind};
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[derive(serde::Deserialize)]
struct Inputs {
    sentences: Vec<Vec<String>>,
    targets: Vec<Vec<u32>>,
}

#[test]
fn bilm_loss_and_gradients_match_pytorch() {
    let dir = fixture_dir("bilm");
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
        let params = Parameters::from_weights(&weights).unwrap();
        assert_eq!(params.list.len(), checkpoint.names().count(), "every tensor of the checkpoint is a parameter");
        let loss = scalar(&model.bilm_loss_backward(&batch, &params.gradients(), 1.0).unwrap())[0];
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

#[derive(serde::Deserialize)]
struct LabelledInputs {
    sentences: Vec<Vec<String>>,
    labels: Vec<i64>,
}

#[test]
fn elmo_feature_classifier_matches_pytorch_and_keeps_the_bilm_frozen() {
    let dir = fixture_dir("elmo-classify");
    let options = ElmoOptions::from_json(&read(&dir, "options.json")).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let reference = Checkpoint::from_bytes(read(&dir, "reference.safetensors")).unwrap();
    let want = |name: &str| reference.to_f32(name).unwrap().0;
    let inputs: LabelledInputs = serde_json::from_slice(&read(&dir, "inputs.json")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = ElmoClassifier::load(options, &weights, 3).unwrap();
    let params = Parameters::from_weights(&weights).unwrap();
    let mut trainable: Vec<&str> = params.list.iter().map(|p| p.name.as_str()).collect();
    trainable.sort_unstable();
    assert_eq!(
        trainable,
        [
            "classifier.bias",
            "classifier.weight",
            "scalar_mix_0.gamma",
            "scalar_mix_0.scalar_parameters.0",
            "scalar_mix_0.scalar_parameters.1",
            "scalar_mix_0.scalar_parameters.2"
        ]
    );
    // The frozen biLM is saved with the head: every tensor of the folder, as it was.
    let saved = Checkpoint::from_bytes(pollster::block_on(params.to_safetensors(Part::Value)).unwrap()).unwrap();
    assert_eq!(saved.names().count(), checkpoint.names().count());
    for name in checkpoint.names() {
        assert_eq!(saved.to_f32(name).unwrap(), checkpoint.to_f32(name).unwrap(), "{name}");
    }

    let logits = scalar(&model.logits(&inputs.sentences).unwrap());
    let max_err = logits.iter().zip(want("logits")).fold(0f32, |m, (g, w)| m.max((g - w).abs()));
    eprintln!("ELMo classifier logits: max abs err {max_err:.2e}");
    assert!(max_err <= 1e-5, "logits {logits:?} vs {:?}", want("logits"));

    let mut optimizer =
        Optimizer::new(gpu(), OptimizerKind::AdamW, AdamWConfig { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, clip_grad_norm: 0.0 }, &params)
            .unwrap();
    for (step, want_loss) in want("steps.loss").into_iter().enumerate() {
        params.zero_grads();
        let loss = scalar(&model.classification_loss_backward(&inputs.sentences, &inputs.labels, &params.gradients(), 1.0).unwrap())[0];
        eprintln!("step {step}: loss {loss} (PyTorch {want_loss})");
        assert!((loss - want_loss).abs() <= 1e-5 * want_loss, "step {step}: loss {loss} vs {want_loss}");
        if step == 0 {
            compare_prefixed_parameters("ELMo classifier gradient", &params, Part::Grad, &reference, "grad.", 1e-5);
        }
        optimizer.step(&params, 0.05).unwrap();
    }
    compare_prefixed_parameters("ELMo classifier after 5 AdamW steps", &params, Part::Value, &reference, "final.", 2e-5);
    assert!(model.logits(&[vec![]]).is_err(), "an empty sentence is an error");
    assert!(model.classification_loss_backward(&inputs.sentences, &[0, 1, 2, 3], &params.gradients(), 1.0).is_err(), "label 3 of 3 classes");
}
