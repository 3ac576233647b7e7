//! `sesame train --replay-batches` for each encoder family's PyTorch run
//! (tests/fixtures/train/, from tests/reference/make_family_train_fixtures.py): the objective
//! named on the command line, the batches' tensors named as transformers names its inputs
//! (`task_type_ids`, `sentence_order_label`, per-token replaced-token `labels`), every logged
//! loss matching PyTorch's; and the objectives a family cannot train refused before any step.

mod common;

use common::train::{logged_losses, pytorch_run_args, run, temp_dir, trajectory};

/// Replays the fixture's run through the CLI with `objective`; the logged losses must be
/// PyTorch's.
fn replays_through_the_cli(family: &str, objective: &str) {
    let out = temp_dir(&format!("train-{family}"));
    let log = out.join("log.jsonl");
    let mut args: Vec<String> = ["train", "--objective", objective].map(String::from).to_vec();
    args.extend(pytorch_run_args(family));
    args.extend(["--seed", &trajectory(family).dropout_seed.to_string(), "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()].map(String::from));
    let (ok, _, stderr) = run(&args);
    assert!(ok, "{family}: {stderr}");
    let t = trajectory(family);
    let losses = logged_losses(&log);
    assert_eq!(losses.len(), t.steps.len(), "{family}: one log line per step");
    for ((step, loss), want) in losses.iter().zip(&t.steps) {
        assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "{family} step {step}: loss {loss} vs PyTorch {}", want.loss);
    }
    assert!(out.join("model.safetensors").is_file() && out.join("config.json").is_file(), "{family}: no checkpoint written");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_encoder_family_replays_its_pytorch_run_through_the_cli() {
    for (family, objective) in [("roberta-mlm", "mlm"), ("distilbert-mlm", "mlm"), ("albert-sop", "mlm+sop"), ("ernie-nsp", "mlm+nsp"), ("electra-rtd", "rtd")]
    {
        replays_through_the_cli(family, objective);
    }
}

#[test]
fn objectives_a_family_cannot_train_are_refused_before_any_step() {
    let out = temp_dir("train-family-refusals");
    let refused = |family: &str, objective: &str, expected: &[&str]| {
        let mut args: Vec<String> = ["train", "--objective", objective].map(String::from).to_vec();
        args.extend(pytorch_run_args(family));
        args.extend(["--out", out.to_str().unwrap()].map(String::from));
        let (ok, _, err) = run(&args);
        assert!(!ok, "{family} trained with {objective}");
        assert!(expected.iter().all(|e| err.contains(e)), "{family} with {objective}: {err}");
        assert!(!err.contains("step 1"), "{family} with {objective} ran a step: {err}");
    };
    refused("albert-sop", "mlm+nsp", &["next-sentence head", "mlm+sop"]);
    refused("ernie-nsp", "mlm+sop", &["sentence-order head", "mlm+nsp"]);
    refused("gpt2", "mlm+sop", &["ALBERT"]);
    refused("roberta-mlm", "rtd", &["ElectraForPreTraining"]);
    refused("electra-rtd", "mlm", &["masked-LM head"]);
    // The pair labels are named as transformers names them.
    refused("roberta-mlm", "mlm+nsp", &["next-sentence head"]);
    let _ = std::fs::remove_dir_all(&out);
}
