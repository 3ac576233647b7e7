//! Checkpoints written by `sesame train`: the trained models that ship in models/ (for the
//! demo) are trained (each scores held-out text far better than an untrained model of its
//! vocabulary, whose perplexity is the vocabulary size) and generate from their folders; and
//! Python transformers loads them and computes the same logits (the fixtures
//! tests/reference/check_sesame_checkpoints.py wrote in tests/fixtures/roundtrip/).

mod common;

use std::path::{Path, PathBuf};

use common::{gpu, read, sesame};
use sesame::models::auto::{IdsBatch, LoadedModel};
use sesame::models::bert::ForwardOptions;
use sesame::weights::Checkpoint;

fn model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name)
}

/// The perplexity `sesame perplexity --json` reports for `text`.
fn perplexity(dir: &Path, text: &str) -> f64 {
    let (ok, stdout, err) = sesame(&["perplexity", "--model", dir.to_str().unwrap(), "--text", text, "--json"]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    report["perplexity"].as_f64().unwrap_or_else(|| panic!("no perplexity in {report}"))
}

#[test]
fn the_baby_gpt_scores_held_out_shakespeare_and_generates() {
    let dir = model("baby-gpt-shakespeare");
    // The last lines of Tiny Shakespeare: in the held-out 10% the model never trained on.
    let held_out = "SEBASTIAN:\nI do; and surely\nIt is a sleepy language and thou speak'st\nOut of thy sleep. What is it thou didst say?\n\
                    This is a strange repose, to be asleep\nWith eyes wide open; standing, speaking, moving,\nAnd yet so fast asleep.\n";
    let ppl = perplexity(&dir, held_out);
    eprintln!("baby GPT perplexity on held-out Shakespeare: {ppl:.2} (untrained: 65)");
    // Its held-out loss of 1.88 nats is perplexity 6.6; allow for a short passage.
    assert!(ppl < 10.0, "perplexity {ppl}");
    let (ok, stdout, err) = sesame(&["generate", "--model", dir.to_str().unwrap(), "--prompt", "ROMEO:\n", "--max-new-tokens", "40"]);
    assert!(ok, "{err}");
    assert!(stdout.starts_with("ROMEO:\n") && stdout.len() >= "ROMEO:\n".len() + 40, "{stdout}");
}

/// transformers' logits for a Sesame checkpoint equal Sesame's (max abs error ≤ 1e-4), for the
/// same ids, which Sesame's tokenizer gives for `text` too.
fn round_trips_through_transformers(name: &str, folder: &Path, text: &str) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip");
    let bytes = read(&fixtures, &format!("{name}.safetensors"));
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let ids: Vec<u32> = file.tensor("input_ids").unwrap().data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    let reference = Checkpoint::from_bytes(bytes.clone()).unwrap();
    let loaded = LoadedModel::load(gpu(), folder, false).unwrap();
    assert_eq!(loaded.tokenizer().unwrap().encode(text, true).unwrap(), ids, "{name}: transformers' tokenizer and Sesame's give the same ids");
    let batch = IdsBatch { seq: ids.len(), input_ids: ids, batch: 1, ..Default::default() };
    let out = loaded.model.forward(&batch, ForwardOptions::default()).unwrap();
    let mut names: Vec<&str> = reference.names().filter(|n| *n != "input_ids").collect();
    names.sort_unstable();
    assert!(!names.is_empty());
    for output in names {
        let (want, shape) = reference.to_f32(output).unwrap();
        let tensor = out.get(output).unwrap_or_else(|| panic!("{name}: Sesame did not produce `{output}`"));
        assert_eq!(tensor.shape(), &shape[..], "{name} {output}");
        let got = pollster::block_on(tensor.to_vec::<f32>()).unwrap();
        let max_err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
        eprintln!("{name} {output}: max abs err {max_err:.2e} against transformers");
        assert!(max_err <= 1e-4, "{name} {output}: max abs err {max_err:e}");
    }
}

#[test]
fn the_baby_gpt_round_trips_through_transformers() {
    round_trips_through_transformers("baby-gpt-shakespeare", &model("baby-gpt-shakespeare"), "ROMEO:\nWhat light through yonder window breaks?");
}

#[test]
fn a_fresh_bert_trained_by_sesame_round_trips_through_transformers() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip/bert-pretraining");
    round_trips_through_transformers("bert-pretraining", &folder, "the [MASK] of the river is in the north .");
}
