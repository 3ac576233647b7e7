//! The trained models that ship in models/ (for the demo) are trained: each scores held-out
//! text far better than an untrained model of its vocabulary would (perplexity = vocabulary
//! size), and generates from its folder.

mod common;

use std::path::{Path, PathBuf};

use common::sesame;

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
