//! CoVe's translation model (`CoveForTranslation`: the MT-LSTM under an attentional decoder
//! with input feeding) against the reference written from the paper
//! (`tests/reference/cove_translation_reference.py`, fixtures by
//! `tests/reference/make_cove_translation_fixtures.py` in tests/fixtures/train/cove-translation/):
//! the loss and every gradient of a ragged batch on both devices; 20 AdamW steps through the
//! library's Trainer and `sesame train --replay-batches`, with the word vectors fixed.

mod common;

use common::train::{compare_parameters, compare_prefixed_parameters, dir, run_settings, scalar, trajectory};
use common::{devices, read};
use sesame::models::cove::translation::{CoveTranslation, TranslationBatch};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::ReplayBatches;
use sesame::train::objective::{Objective, TrainModel};
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

const RUN: &str = "cove-translation";

/// The fixture's model with `config` changed by `edit`, and its parameters.
fn training(gpu: &sesame::Gpu, edit: impl FnOnce(&mut serde_json::Value)) -> (CoveTranslation, Parameters) {
    let init = dir(RUN).join("init");
    let mut config: serde_json::Value = serde_json::from_slice(&read(&init, "config.json")).unwrap();
    edit(&mut config);
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = CoveTranslation::load(&serde_json::to_vec(&config).unwrap(), &weights).unwrap();
    (model, Parameters::from_weights(&weights).unwrap())
}

fn batches() -> ReplayBatches {
    ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap()
}

#[test]
fn the_loss_and_every_gradient_match_the_reference() {
    let want = Checkpoint::from_bytes(read(&dir(RUN), "gradients.safetensors")).unwrap();
    let want_loss = want.to_f32("loss").unwrap().0[0];
    let batch = batches().batch(0).unwrap();
    let source = batch.ids(Default::default());
    let decoder_input_ids = batch.decoder_input_ids.as_deref().unwrap();
    let translation = TranslationBatch { source: &source, decoder_input_ids, labels: &batch.labels, target_seq: decoder_input_ids.len() / batch.batch };
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        // The vectors train here, so that their gradient is checked too.
        let (model, params) = training(gpu, |c| c["train_vectors"] = true.into());
        let loss = scalar(&model.loss_backward(&translation, &params.gradients(), 1.0, &DropoutStream { seed: 1, batch_index: 0 }).unwrap())[0];
        eprintln!("CoVe translation loss on {device}: {loss} (reference {want_loss})");
        assert!((loss - want_loss).abs() <= 1e-5 * want_loss, "{device}: {loss} vs {want_loss}");
        compare_prefixed_parameters(&format!("CoVe translation gradient on {device}"), &params, Part::Grad, &want, "grad.", 1e-4);
    }
}

#[test]
fn twenty_steps_of_translation_training_match_the_reference() {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = training(gpu, |_| {});
        let batches = batches();
        let first = batches.batch(0).unwrap();
        let settings = run_settings(RUN, Objective::Translation, first.batch, first.seq);
        let model = TrainModel::CoveTranslation(Box::new(model));
        let mut trainer = Trainer::new(gpu, model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
        for (step, want) in trajectory(RUN).steps.iter().enumerate() {
            let report = trainer.step(&batches).unwrap();
            eprintln!(
                "{device} step {step}: loss {:.6} (reference {:.6}), grad norm {:.5} (reference {:.5})",
                report.loss, want.loss, report.grad_norm, want.grad_norm
            );
            assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "{device} step {step}: loss {} vs {}", report.loss, want.loss);
            assert!((report.grad_norm - want.grad_norm).abs() <= 1e-4 * want.grad_norm, "{device} step {step}: grad norm {}", report.grad_norm);
        }
        let last = Checkpoint::from_bytes(read(&dir(RUN).join("final"), "model.safetensors")).unwrap();
        compare_parameters(&format!("CoVe translation after 20 steps on {device}"), trainer.params(), Part::Value, &last, 1e-4);
    }
}
