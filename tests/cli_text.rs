//! The text commands of the `sesame` CLI on the fixtures (tiny random-weight models with
//! word-level tokenizers): fill-mask and perplexity against transformers' numbers, generate
//! against transformers' greedy ids, and the JSON contract of embed and tokenize.

mod common;

use common::{fixture, read, sesame};
use serde_json::Value;

fn path(family: &str, arch: &str) -> String {
    fixture(family, arch).to_string_lossy().into_owned()
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

/// Candidates of one mask against the pipeline's: same tokens, strings and sequences, scores to 1e-5.
fn compare_candidates(label: &str, got: &Value, want: &Value) {
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len(), "{label}");
    for (g, w) in got.iter().zip(want) {
        for field in ["token", "token_str", "sequence"] {
            assert_eq!(g[field], w[field], "{label}: {field}");
        }
        let err = (g["score"].as_f64().unwrap() - w["score"].as_f64().unwrap()).abs();
        eprintln!("{label} token {}: score err {err:.1e}", w["token"]);
        assert!(err <= 1e-5, "{label}: score {} vs {}", g["score"], w["score"]);
    }
}

#[test]
fn fill_mask_matches_the_transformers_pipeline() {
    let dir = fixture("bert", "BertForMaskedLM");
    let cases: Vec<Value> = serde_json::from_slice(&read(&dir, "fill_mask.json")).unwrap();
    for case in cases {
        let (text, k) = (case["text"].as_str().unwrap(), case["top_k"].to_string());
        let (ok, out, err) = sesame(&["fill-mask", "--model", dir.to_str().unwrap(), "--text", text, "--top-k", &k, "--json"]);
        assert!(ok, "{err}");
        let got: Value = serde_json::from_str(out.trim()).unwrap();
        let want = &case["result"];
        if want[0].is_array() {
            for (i, (g, w)) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()).enumerate() {
                compare_candidates(&format!("{text} mask {i}"), g, w);
            }
        } else {
            compare_candidates(text, &got, want);
        }
    }
    // RoBERTa's mask token is its tokenizer's own: <mask>.
    let roberta = fixture("roberta", "RobertaForMaskedLM");
    let case = &serde_json::from_slice::<Value>(&read(&roberta, "pipeline.json")).unwrap()["fill-mask"][0];
    let (ok, out, err) = sesame(&["fill-mask", "--model", roberta.to_str().unwrap(), "--text", case["text"].as_str().unwrap(), "--top-k", "3", "--json"]);
    assert!(ok, "{err}");
    compare_candidates("RoBERTa <mask>", &serde_json::from_str::<Value>(out.trim()).unwrap(), &case["result"]);
    // A model without a masked-LM head, a text without a mask.
    let (ok, _, err) = sesame(&["fill-mask", "--model", &path("bert", "BertModel"), "--text", "the [MASK] sat"]);
    assert!(!ok && err.contains("needs a model that can fill masks") && err.contains("`BertModel` can compute sentence embeddings"), "{err}");
    let (ok, _, err) = sesame(&["fill-mask", "--model", dir.to_str().unwrap(), "--text", "the cat sat"]);
    assert!(!ok && err.contains("no [MASK]"), "{err}");
}

#[test]
fn perplexity_matches_transformers_in_one_window_and_sliding_windows() {
    for (family, arch) in [("gpt2", "GPT2LMHeadModel"), ("openai-gpt", "OpenAIGPTLMHeadModel")] {
        let dir = fixture(family, arch);
        let cases: Vec<Value> = serde_json::from_slice(&read(&dir, "perplexity.json")).unwrap();
        for case in cases {
            let mut args = vec!["perplexity", "--model", dir.to_str().unwrap(), "--text", case["text"].as_str().unwrap(), "--json"];
            let (window, stride) = (case["window"].to_string(), case["stride"].to_string());
            if !case["window"].is_null() {
                args.extend(["--window", &window, "--stride", &stride]);
            }
            let (ok, out, err) = sesame(&args);
            assert!(ok, "{err}");
            let got: Value = serde_json::from_str(out.trim()).unwrap();
            let (g, w) = (got["perplexity"].as_f64().unwrap(), case["perplexity"].as_f64().unwrap());
            eprintln!("{arch} window {window}: perplexity {g} vs {w}");
            assert!((g - w).abs() <= 1e-4 * w, "{arch} window {window}: {g} vs {w}");
            assert_eq!(got["scored_tokens"], case["scored_tokens"], "{arch}");
        }
    }
    let dir = path("gpt2", "GPT2LMHeadModel");
    let (ok, _, err) = sesame(&["perplexity", "--model", &dir, "--text", "the"]);
    assert!(!ok && err.contains("at least two tokens"), "{err}");
    let (ok, _, err) = sesame(&["perplexity", "--model", &dir, "--text", "the cat sat", "--window", "500"]);
    assert!(!ok && err.contains("window 500"), "{err}");
    let (ok, _, err) = sesame(&["perplexity", "--model", &path("bert", "BertForMaskedLM"), "--text", "the cat sat"]);
    assert!(!ok && err.contains("needs a model that can score text") && err.contains("can fill masks"), "{err}");
}

#[test]
fn generate_continues_a_text_prompt_as_transformers_does() {
    for (family, arch) in [("gpt2", "GPT2LMHeadModel"), ("openai-gpt", "OpenAIGPTLMHeadModel")] {
        let dir = fixture(family, arch);
        let want: Value = serde_json::from_slice(&read(&dir, "generation.json")).unwrap();
        let (ok, out, err) =
            sesame(&["generate", "--model", dir.to_str().unwrap(), "--prompt", want["text"].as_str().unwrap(), "--max-new-tokens", "8", "--json"]);
        assert!(ok, "{err}");
        let got: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(got["ids"], want["text_ids"], "{arch}");
        assert_eq!(got["new_tokens"], 8);
        assert!(got["text"].as_str().unwrap().starts_with("the old dog sat by the river"), "{}", got["text"]);
        // Streaming text: the prompt, then the continuation on the same line.
        let (ok, out, err) = sesame(&[
            "generate",
            "--model",
            dir.to_str().unwrap(),
            "--prompt",
            "the old dog",
            "--max-new-tokens",
            "4",
            "--temperature",
            "0.8",
            "--top-k",
            "5",
            "--seed",
            "3",
        ]);
        assert!(ok, "{err}");
        assert!(out.starts_with("the old dog") && out.trim().split(' ').count() == 7, "{out}");
    }
    let (ok, _, err) = sesame(&["generate", "--model", &path("bert", "BertModel"), "--prompt", "the cat"]);
    assert!(!ok && err.contains("needs a model that can generate text"), "{err}");
    let (ok, _, err) = sesame(&["generate", "--model", &path("gpt2", "GPT2LMHeadModel"), "--prompt", " "]);
    assert!(!ok && err.contains("empty"), "{err}");
    // Past the model's 48 positions the context slides.
    let (ok, out, err) = sesame(&["generate", "--model", &path("gpt2", "GPT2LMHeadModel"), "--prompt", "the cat", "--max-new-tokens", "100", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(serde_json::from_str::<Value>(out.trim()).unwrap()["new_tokens"], 100);
}

/// Ctrl-C (SIGINT) during a long generation stops it after the token being made and prints
/// what was made, as JSON with `--json`; a budget past the bound is refused at once.
#[cfg(unix)]
#[test]
fn generate_stops_at_ctrl_c_and_keeps_what_it_made() {
    use std::io::{BufRead, BufReader, Read};
    let (ok, _, err) = sesame(&["generate", "--model", &path("gpt2", "GPT2LMHeadModel"), "--prompt", "the cat", "--max-new-tokens", "4294967295"]);
    assert!(!ok && err.contains("max_new_tokens 4294967295 exceeds the supported 100000"), "{err}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sesame"))
        .args(["--adapter", "host", "generate", "--model", &path("gpt2", "GPT2LMHeadModel"), "--prompt", "the cat", "--max-new-tokens", "100000", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The handler is in place before this line; then let a few tokens be made.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("generate: up to") {
        line.clear();
    }
    assert!(line.contains("up to 100000 tokens"), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    let (mut out, mut rest) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("stopped by Ctrl-C after"), "{rest}");
    let made = serde_json::from_str::<Value>(out.trim()).unwrap()["new_tokens"].as_u64().unwrap();
    assert!((1..100_000).contains(&made), "{made} new tokens");
}

#[test]
fn embed_prints_one_vector_per_text() {
    let dir = path("bert", "BertModel");
    let (ok, out, err) = sesame(&["embed", "--model", &dir, "--text", "the cat sat on the mat .", "the dog ran", "--normalize", "--json"]);
    assert!(ok, "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    for v in &lines {
        let v: Vec<f64> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(v.len(), 32);
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    // A text alone gets the same vector as in a padded batch.
    let (ok, alone, err) = sesame(&["embed", "--model", &dir, "--text", "the dog ran", "--normalize", "--json"]);
    assert!(ok, "{err}");
    let (a, b) = (&json_lines(&alone)[0], &lines[1]);
    let diff = a.as_array().unwrap().iter().zip(b.as_array().unwrap()).map(|(x, y)| (x.as_f64().unwrap() - y.as_f64().unwrap()).abs()).fold(0.0, f64::max);
    assert!(diff < 1e-5, "alone vs batched: {diff}");
    let (ok, text, err) = sesame(&["embed", "--model", &dir, "--text", "the cat", "the dog", "--pooling", "cls"]);
    assert!(ok && text.contains("cosine similarity"), "{err}");
    let (ok, _, err) = sesame(&["embed", "--model", &dir, "--text", "the cat", "--pooling", "max"]);
    assert!(!ok && err.contains("max"), "{err}");
}

#[test]
fn tokenize_prints_ids_per_text_and_truncation_is_explicit() {
    let bert = path("bert", "BertModel");
    let (ok, out, err) = sesame(&["tokenize", "--model", &bert, "--text", "The cat sat.", "a dog", "--json"]);
    assert!(ok, "{err}");
    // [CLS] the cat sat . [SEP] / [CLS] a dog [SEP] in the fixture's vocab.txt.
    assert_eq!(json_lines(&out), vec![serde_json::json!([2, 5, 7, 9, 76, 3]), serde_json::json!([2, 6, 8, 3])]);
    let file = std::env::temp_dir().join(format!("sesame-texts-{}.txt", std::process::id()));
    std::fs::write(&file, "the cat\nthe dog\n").unwrap();
    let (ok, out, err) = sesame(&["tokenize", "--model", &bert, "--file", file.to_str().unwrap(), "--json", "--no-special-tokens"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["[5,7]", "[5,8]"]);
    std::fs::remove_file(&file).unwrap();

    // BertModel's positions are 40: a 60-word text fails, unless truncated.
    let long = vec!["the cat"; 30].join(" ");
    let out_file = std::env::temp_dir().join(format!("sesame-truncated-{}.safetensors", std::process::id()));
    let args = ["forward", "--model", &bert, "--text", &long, "--out", out_file.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(!ok && err.contains("longer than the model's 40 positions") && err.contains("--truncate"), "{err}");
    let (ok, _, err) = sesame(&[&args[..], &["--truncate"]].concat());
    assert!(ok, "{err}");
    let out = sesame::weights::Checkpoint::from_bytes(std::fs::read(&out_file).unwrap()).unwrap();
    assert_eq!(out.shape("last_hidden_state"), Some(&[1, 40, 32][..]));
    std::fs::remove_file(&out_file).unwrap();
    let (ok, _, err) = sesame(&["forward", "--model", &path("gpt2", "GPT2Model"), "--text", "the cat", "--pair", "a dog", "--out", "/tmp/never.safetensors"]);
    assert!(!ok && err.contains("reads one text, not a pair"), "{err}");
}
