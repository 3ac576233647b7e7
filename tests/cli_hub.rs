//! `--model org/name`: the CLI reads a Hugging Face hub model through huggingface_hub's cache
//! (src/hub.rs), against the mock hub (tests/shared/mock-hub-server.mjs, run by node): a
//! sharded checkpoint downloaded and run as the local folder runs, the
//! cache alone with HF_HUB_OFFLINE=1, errors naming a missing model or revision, and
//! `tokenize` fetching the tokenizer without the weights.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::fixture;

/// The mock hub's process; ended when dropped.
struct MockHub {
    child: Child,
    url: String,
}

impl Drop for MockHub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mock_hub(repos: &[(&str, PathBuf)]) -> MockHub {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shared/mock-hub-server.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .args(repos.iter().map(|(id, dir)| format!("{id}={}", dir.display())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs the mock hub");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<serde_json::Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    MockHub { child, url }
}

/// Runs `sesame forward` on `model` with the hub's environment; (success, stderr, outputs).
fn forward(model: &str, hub: &MockHub, cache: &Path, offline: bool, out: &Path) -> (bool, String) {
    let ids = cache.parent().unwrap().join("ids.json");
    std::fs::write(&ids, r#"{"input_ids": [[5, 17, 45, 98, 3, 60, 4]]}"#).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sesame"));
    command.args(["--adapter", "host", "forward", "--model", model, "--ids", ids.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    command.env("HF_ENDPOINT", &hub.url).env("HF_HUB_CACHE", cache).env_remove("HF_TOKEN").env_remove("HF_HOME");
    if offline {
        command.env("HF_HUB_OFFLINE", "1");
    } else {
        command.env_remove("HF_HUB_OFFLINE");
    }
    let output = command.output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_hub_id_is_downloaded_into_the_hub_cache_and_read_from_it_offline() {
    let hub = mock_hub(&[("tiny/gpt2-sharded", fixture("gpt2", "GPT2LMHeadModel-sharded"))]);
    let dir = std::env::temp_dir().join(format!("sesame-cli-hub-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("hub");
    std::fs::create_dir_all(&cache).unwrap();

    let local = dir.join("local.safetensors");
    let (ok, err) = forward(fixture("gpt2", "GPT2LMHeadModel").to_str().unwrap(), &hub, &cache, false, &local);
    assert!(ok, "{err}");
    let fetched = dir.join("hub.safetensors");
    let (ok, err) = forward("tiny/gpt2-sharded", &hub, &cache, false, &fetched);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&fetched).unwrap(), std::fs::read(&local).unwrap(), "the sharded hub model computes as the local one");

    // huggingface_hub's layout: refs/main, links in the snapshot, and the missing model.safetensors remembered.
    let repo = cache.join("models--tiny--gpt2-sharded");
    let commit = std::fs::read_to_string(repo.join("refs/main")).unwrap();
    let snapshot = repo.join("snapshots").join(&commit);
    for file in ["config.json", "model.safetensors.index.json", "model-00002-of-00003.safetensors", "tokenizer.json"] {
        assert!(std::fs::symlink_metadata(snapshot.join(file)).unwrap().file_type().is_symlink(), "{file}");
    }
    assert!(repo.join(".no_exist").join(&commit).join("model.safetensors").exists());

    // Offline, the cache answers alone; a model it lacks is an error saying so.
    let offline = dir.join("offline.safetensors");
    let (ok, err) = forward("tiny/gpt2-sharded", &hub, &cache, true, &offline);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&offline).unwrap(), std::fs::read(&local).unwrap());
    let (ok, err) = forward("tiny/other", &hub, &cache, true, &offline);
    assert!(!ok && err.contains("is not in the hub cache") && err.contains("HF_HUB_OFFLINE"), "{err}");

    // A model the hub lacks, and a revision it lacks.
    let (ok, err) = forward("tiny/missing", &hub, &cache, false, &offline);
    assert!(!ok && err.contains("the hub has no model \"tiny/missing\" that can be read (HTTP 401)"), "{err}");
    let output = Command::new(env!("CARGO_BIN_EXE_sesame"))
        .args(["--adapter", "host", "--revision", "v9", "tokenize", "--model", "tiny/gpt2-sharded", "--text", "the dog"])
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HUB_CACHE", &cache)
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && err.contains("has no revision \"v9\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tokenize_downloads_the_tokenizer_of_a_hub_id_and_not_its_weights() {
    let hub = mock_hub(&[("tiny/gpt2-sharded", fixture("gpt2", "GPT2LMHeadModel-sharded"))]);
    let dir = std::env::temp_dir().join(format!("sesame-cli-hub-tokenize-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_sesame"))
        .args(["tokenize", "--model", "tiny/gpt2-sharded", "--text", "the dog", "--json"])
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HUB_CACHE", &dir)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let local = Command::new(env!("CARGO_BIN_EXE_sesame"))
        .args(["tokenize", "--model", fixture("gpt2", "GPT2LMHeadModel-sharded").to_str().unwrap(), "--text", "the dog", "--json"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&local.stdout));
    let repo = dir.join("models--tiny--gpt2-sharded");
    let snapshot = repo.join("snapshots").join(std::fs::read_to_string(repo.join("refs/main")).unwrap());
    let mut files: Vec<String> = std::fs::read_dir(&snapshot).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["config.json", "tokenizer.json"], "only what tokenizing reads");
    std::fs::remove_dir_all(&dir).unwrap();
}
