//! The pooled classifier over CoVe's features (`CoveForSequenceClassification`: [GloVe; CoVe]
//! of each text's words, ULMFiT's concat pooling, a hidden layer, the labels) against the
//! reference written from the paper (`tests/reference/cove_reference.py`, fixtures by
//! `tests/reference/make_cove_classifier_fixtures.py` in tests/fixtures/train/cove-classify/):
//! the logits of inference, the loss and the head's gradients on both devices, 20 AdamW steps
//! through the Trainer and `sesame train --replay-batches` with the encoder fixed, and a run
//! from a TSV on the CoVe encoder whose folder classifies text.

mod common;

use common::train::{compare_prefixed_parameters, dir, replays_the_reference_steps, run_replays_the_reference_steps, scalar, temp_dir};
use common::{devices, read};
use sesame::classify::classify_text;
use sesame::models::auto::{AutoModel, LoadedModel};
use sesame::models::cove::classify::CoveClassifierTraining;
use sesame::models::training::Objective;
use sesame::models::ForwardOptions;
use sesame::ops::dropout::DropoutStream;
use sesame::train::data::ReplayBatches;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

const RUN: &str = "cove-classify";

fn training(gpu: &sesame::Device) -> (CoveClassifierTraining, Parameters) {
    let init = dir(RUN).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = CoveClassifierTraining::load(&read(&init, "config.json"), &weights).unwrap();
    (model, Parameters::from_weights(&weights).unwrap())
}

fn batches() -> ReplayBatches {
    ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap()
}

#[test]
fn logits_loss_and_the_heads_gradients_match_the_reference() {
    let want = Checkpoint::from_bytes(read(&dir(RUN), "gradients.safetensors")).unwrap();
    let want_loss = want.to_f32("loss").unwrap().0[0];
    let (want_logits, _) = want.to_f32("logits").unwrap();
    let batch = batches().batch(0).unwrap();
    let ids = batch.ids(Default::default());
    let init = dir(RUN).join("init");
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        // Inference: the family's model with the head.
        let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
        let model = AutoModel::load(&read(&init, "config.json"), &Weights::new(gpu, &checkpoint)).unwrap();
        let logits = scalar(model.forward(&ids, ForwardOptions::default()).unwrap().get("logits").unwrap());
        let err = logits.iter().zip(&want_logits).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("CoVe classifier logits on {device}: max abs err {err:.2e}");
        assert!(err <= 1e-5, "{device}: logits {logits:?} vs {want_logits:?}");

        let (model, params) = training(gpu);
        let loss =
            scalar(&model.classification_loss_backward(&ids, &batch.labels, &params.gradients(), 1.0, &DropoutStream { seed: 1, batch_index: 0 }).unwrap())[0];
        eprintln!("CoVe classifier loss on {device}: {loss} (reference {want_loss})");
        assert!((loss - want_loss).abs() <= 1e-5 * want_loss, "{device}: {loss} vs {want_loss}");
        compare_prefixed_parameters(&format!("CoVe classifier gradient on {device}"), &params, Part::Grad, &want, "grad.", 1e-4);
    }
}

#[test]
fn twenty_steps_of_the_classifier_match_the_reference() {
    for gpu in devices() {
        let (model, params) = training(gpu);
        let label = format!("CoVe classifier on {}", gpu.adapter_info().name);
        replays_the_reference_steps(&label, gpu, RUN, Objective::Classify, Box::new(model), params);
    }
}

#[test]
fn a_run_replays_the_classifier_and_trains_one_from_tsv() {
    let out = temp_dir("cove-classify");
    let replayed = out.join("replayed");
    run_replays_the_reference_steps(RUN, "classify", &replayed);
    let encoder = |dir: &std::path::Path| Checkpoint::from_bytes(read(dir, "model.safetensors")).unwrap().to_f32("rnn.weight_hh_l1").unwrap().0;
    assert_eq!(encoder(&replayed), encoder(&dir(RUN).join("init")), "CoVe stays fixed");

    // From a TSV on the tiny CoVe encoder: a fresh head learns which word a text holds.
    let data = out.join("train.tsv");
    let rows: String = (0..60).map(|i| if i % 2 == 0 { "the big cat sat\t1\n" } else { "a small dog ran\t0\n" }).collect();
    std::fs::write(&data, rows).unwrap();
    let folder = out.join("tsv");
    let encoder_dir = common::fixture("cove", "tiny");
    #[rustfmt::skip]
    let args = common::train::flags(&["--objective", "classify", "--model-init", encoder_dir.to_str().unwrap(), "--data", data.to_str().unwrap(),
        "--steps", "40", "--batch-size", "8", "--lr", "1e-2", "--out", folder.to_str().unwrap()]);
    common::train::train(&args).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&read(&folder, "config.json")).unwrap();
    assert_eq!((config["architectures"][0].as_str(), config["residual_embeddings"].as_bool()), (Some("CoveForSequenceClassification"), Some(true)));
    let loaded = LoadedModel::load(common::gpu(), &folder, false).unwrap();
    let scores = pollster::block_on(classify_text(&loaded, "the big cat sat", None)).unwrap();
    assert_eq!(scores[0].label, "LABEL_1", "{scores:?}");
    std::fs::remove_dir_all(&out).unwrap();
}
