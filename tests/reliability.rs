//! The defects of issue 24, each as a user met it: bad input gets an error that says what is
//! wrong — never a panic, an allocation sized by the input, a read that never ends, or a
//! silently wrong answer. (Unit tests in the library cover the parsers' own cases; fuzzing,
//! scripts/fuzz.sh, looks for the ones nobody listed.)

mod common;

use std::path::{Path, PathBuf};

use common::{fixture, sesame};
use sesame::weights::{serialize, Checkpoint};

/// A fresh temporary folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sesame-reliability-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of model folder `from` in a fresh temporary folder.
fn copy_model(from: &Path, name: &str) -> PathBuf {
    let dir = temp_dir(name);
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

/// Rewrites `dir`'s JSON file `name` through `edit`.
fn edit_json(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(dir.join(name), serde_json::to_vec(&value).unwrap()).unwrap();
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `sesame` with every argument; the error must contain each of `expected`.
fn fails_with(args: &[&str], expected: &[&str]) {
    let (ok, _, err) = sesame(args);
    assert!(!ok, "sesame {args:?} should fail");
    for part in expected {
        assert!(err.contains(part), "sesame {args:?}: expected `{part}` in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sizes_a_config_or_flag_asks_for_are_refused_before_allocating() {
    let dir = temp_dir("sizes");
    let text = dir.join("text.txt");
    std::fs::write(&text, "To be, or not to be, that is the question.\n".repeat(20)).unwrap();
    let out = dir.join("out");
    let train = |extra: &[&str], expected: &[&str]| {
        let mut args = vec!["train", "--data", arg(&text), "--out", arg(&out), "--steps", "1"];
        args.extend_from_slice(extra);
        fails_with(&args, expected);
    };
    train(&["--arch", "gpt2", "--seq-len", "1000000000"], &["1000000000 positions", "host memory budget"]);
    train(&["--arch", "gpt2", "--hidden", "100000", "--heads", "4"], &["width 100000", "host memory budget"]);
    train(&["--arch", "bert", "--objective", "mlm", "--layers", "1000000", "--tokenizer", "wordpiece:300"], &["1000000 layers", "host memory budget"]);
    train(&["--arch", "elmo", "--objective", "bilm", "--layers", "1000000", "--tokenizer", "words:50"], &["options.json", "host memory budget"]);
    let init = fixture("train/gpt2", "init");
    train(&["--model-init", arg(&init), "--batch-size", "1000000000"], &["--batch-size 1000000000", "host memory budget", "fits (with --grad-accum"]);
    // The budget itself is a flag.
    train(&["--model-init", arg(&init), "--batch-size", "64", "--memory-budget", "1M"], &["--batch-size 64", "1048576"]);
    let elmo = fixture("elmo", "small");
    let (options, weights) = (elmo.join("options.json"), elmo.join("weights.hdf5"));
    let convert = ["convert-elmo", "--options", arg(&options), "--weights", arg(&weights), "--out", arg(&out), "--mixes", "1000000000"];
    fails_with(&convert, &["1000000000 scalar mixes", "at most 64"]);
    assert!(!out.exists(), "nothing is written");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_zero_size_in_a_config_is_refused_at_load() {
    use sesame::models::registry::family_of;
    use sesame::weights::Weights;
    for (json, expected) in [
        (r#"{"model_type": "gpt2", "vocab_size": 0, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 8}"#, "a vocabulary of 0"),
        (r#"{"model_type": "gpt2", "vocab_size": 5, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 0}"#, "positions of 0"),
        (r#"{"model_type": "gpt2", "vocab_size": 5, "n_embd": 0, "n_layer": 1, "n_head": 2, "n_positions": 8}"#, "n_embd 0"),
    ] {
        let family = family_of(json.as_bytes()).unwrap();
        let err = family.load_checked(json.as_bytes(), &Weights::random(common::host())).err().expect(json).to_string();
        assert!(err.contains(expected), "{json}: {err}");
    }
}

#[test]
fn model_files_must_be_regular_files() {
    let dir = copy_model(&fixture("gpt2", "GPT2LMHeadModel"), "special-files");
    let out = dir.join("out.safetensors");
    let forward = ["--adapter", "host", "forward", "--model", arg(&dir), "--text", "Hello", "--out", arg(&out)];
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("model.safetensors")).unwrap();
    fails_with(&forward, &["model.safetensors: not a regular file"]);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let fifo = std::process::Command::new("mkfifo").arg(dir.join("model.safetensors")).status().unwrap();
    assert!(fifo.success());
    fails_with(&forward, &["model.safetensors: not a regular file"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `dir`'s model.safetensors with value `index` of tensor `name` set to `value`.
fn poison(dir: &Path, name: &str, index: usize, value: f32) {
    let checkpoint = Checkpoint::from_bytes(std::fs::read(dir.join("model.safetensors")).unwrap()).unwrap();
    let mut names: Vec<String> = checkpoint.names().map(String::from).collect();
    names.sort();
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = names
        .iter()
        .map(|n| {
            let (mut values, shape) = checkpoint.to_f32(n).unwrap();
            if n == name {
                values[index] = value;
            }
            (n.clone(), shape, values.iter().flat_map(|v| v.to_le_bytes()).collect())
        })
        .collect();
    let entries: Vec<_> = tensors.iter().map(|(n, s, b)| (n.as_str(), safetensors::Dtype::F32, s.as_slice(), b.as_slice())).collect();
    std::fs::write(dir.join("model.safetensors"), serialize(&entries).unwrap()).unwrap();
}

#[test]
fn non_finite_weights_are_refused_naming_the_tensor() {
    let dir = copy_model(&fixture("bert", "BertModel"), "nan-weights");
    poison(&dir, "encoder.layer.1.attention.self.query.weight", 3, f32::NAN);
    let out = dir.join("out.safetensors");
    let forward = ["--adapter", "host", "forward", "--model", arg(&dir), "--text", "Hello world", "--out", arg(&out)];
    fails_with(&forward, &["tensor `encoder.layer.1.attention.self.query.weight` holds NaN at index 3", "--allow-non-finite-weights"]);
    // Loaded on purpose, the NaN reaches the outputs: an error naming the layer it first
    // appears in, the same on the host device and the GPU (whose softmax once turned it into
    // zeros on one and NaN on the other).
    for adapter in ["host", "llvmpipe"] {
        let forward = ["--adapter", adapter, "--allow-non-finite-weights", "forward", "--model", arg(&dir), "--text", "Hello world", "--out", arg(&out)];
        fails_with(&forward, &["holds NaN or infinite values, which first appear in the output of layer 2 (hidden_states.2)"]);
        assert!(!out.exists(), "no output is written");
        let fill = ["--adapter", adapter, "--allow-non-finite-weights", "embed", "--model", arg(&dir), "--text", "Hello world"];
        fails_with(&fill, &["first appear in the output of layer 2"]);
    }
    let gpt2 = copy_model(&fixture("gpt2", "GPT2LMHeadModel"), "nan-gpt2");
    poison(&gpt2, "transformer.h.0.mlp.c_fc.weight", 0, f32::INFINITY);
    for command in [&["generate", "--prompt", "Hello world"][..], &["perplexity", "--text", "Hello world, how are you"]] {
        let mut args = vec!["--adapter", "host", "--allow-non-finite-weights"];
        args.extend_from_slice(&command[..1]);
        args.extend_from_slice(&["--model", arg(&gpt2)]);
        args.extend_from_slice(&command[1..]);
        fails_with(&args, &["`logits` holds NaN or infinite values"]);
    }
    std::fs::remove_dir_all(&gpt2).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn attention_masks_hold_zeros_and_ones() {
    let dir = temp_dir("masks");
    let ids = dir.join("ids.json");
    std::fs::write(&ids, r#"{"input_ids": [[1, 5, 2]], "attention_mask": [[1, 2, 1]]}"#).unwrap();
    for model in [fixture("gpt2", "GPT2LMHeadModel"), fixture("bert", "BertModel")] {
        let out = dir.join("out.safetensors");
        fails_with(&["--adapter", "host", "forward", "--model", arg(&model), "--ids", arg(&ids), "--out", arg(&out)], &["attention_mask holds 2 at index 1"]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weights_a_config_does_not_describe_are_an_error() {
    // ELMo: highway layers beyond n_highway.
    let elmo = copy_model(&fixture("elmo", "small"), "elmo-highway");
    edit_json(&elmo, "options.json", |o| o["char_cnn"]["n_highway"] = 0.into());
    let out = elmo.join("out.safetensors");
    fails_with(
        &["--adapter", "host", "forward", "--model", arg(&elmo), "--text", "Hello", "--out", arg(&out)],
        &["read by no module of `ELMo`", "_highways", "options.json"],
    );
    // A transformer: layers beyond num_hidden_layers.
    let bert = copy_model(&fixture("bert", "BertModel"), "bert-layers");
    edit_json(&bert, "config.json", |c| c["num_hidden_layers"] = 1.into());
    fails_with(&["--adapter", "host", "forward", "--model", arg(&bert), "--text", "Hello", "--out", arg(&out)], &["encoder.layer.1.", "config.json"]);
    std::fs::remove_dir_all(&elmo).unwrap();
    std::fs::remove_dir_all(&bert).unwrap();
}

#[test]
fn convert_elmo_refuses_options_it_could_not_load() {
    let elmo = copy_model(&fixture("elmo", "small"), "elmo-clip");
    edit_json(&elmo, "options.json", |o| o["lstm"]["cell_clip"] = (-1).into());
    let out = elmo.join("converted");
    fails_with(
        &["convert-elmo", "--options", arg(&elmo.join("options.json")), "--weights", arg(&elmo.join("weights.hdf5")), "--out", arg(&out)],
        &["lstm.cell_clip is -1: a clip must be a positive number"],
    );
    assert!(!out.exists(), "no unloadable folder is written");
    std::fs::remove_dir_all(&elmo).unwrap();
}

#[test]
fn runs_keep_to_their_own_out_folder_and_settings() {
    let dir = temp_dir("runs");
    let text = dir.join("text.txt");
    std::fs::write(&text, "To be, or not to be, that is the question.\n".repeat(40)).unwrap();
    let out = dir.join("out");
    let fresh = |extra: &[&str]| {
        let mut args = vec!["train", "--arch", "gpt2", "--layers", "1", "--heads", "2", "--hidden", "8", "--seq-len", "16", "--batch-size", "2"];
        args.extend_from_slice(&["--steps", "2", "--data", arg(&text), "--out", arg(&out)]);
        args.extend_from_slice(extra);
        sesame(&args)
    };
    let (ok, _, err) = fresh(&[]);
    assert!(ok, "{err}");
    // A second run into the same --out would mix its checkpoints with the first's.
    let (ok, _, err) = fresh(&[]);
    assert!(!ok && err.contains("holds the checkpoints of an earlier run (checkpoint-000002)") && err.contains("--resume"), "{err}");
    // A resume with another shape would train the checkpoint's model under the new flags.
    let (ok, _, err) = fresh(&["--resume", "--layers", "2"]);
    assert!(!ok && err.contains("fresh_model") && err.contains("\"layers\":2"), "{err}");
    // A trainer state no run could have written.
    let state = out.join("checkpoint-000002");
    edit_json(&state, "trainer_state.json", |s| s["step"] = u64::MAX.into());
    let (ok, _, err) = fresh(&["--resume"]);
    assert!(!ok && err.contains("step 18446744073709551615 in the folder of step 2"), "{err}");
    edit_json(&state, "trainer_state.json", |s| s["settings"]["steps"] = "two".into());
    let (ok, _, err) = fresh(&["--resume"]);
    assert!(!ok && err.contains("settings.steps: invalid type"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_name_what_is_wrong() {
    // A config field of the wrong type is named.
    let bert = copy_model(&fixture("bert", "BertModel"), "field-type");
    edit_json(&bert, "config.json", |c| c["hidden_size"] = "big".into());
    let out = bert.join("out.safetensors");
    fails_with(
        &["--adapter", "host", "forward", "--model", arg(&bert), "--text", "Hello", "--out", arg(&out)],
        &["config.json: hidden_size: invalid type: string \"big\""],
    );
    std::fs::remove_dir_all(&bert).unwrap();

    // A prompt over the model's positions: an error naming --truncate, which cuts its start.
    let gpt2 = fixture("gpt2", "GPT2LMHeadModel");
    let prompt = "word ".repeat(2000);
    let (ok, _, err) = sesame(&["--adapter", "host", "generate", "--model", arg(&gpt2), "--prompt", &prompt]);
    assert!(!ok && err.contains("longer than the model's") && err.contains("shorten it, or have its start cut (--truncate"), "{err}");
    let (ok, out, err) =
        sesame(&["--adapter", "host", "generate", "--model", arg(&gpt2), "--prompt", &prompt, "--truncate", "--json", "--max-new-tokens", "3"]);
    assert!(ok && err.contains("the prompt's first") && err.contains("tokens were cut"), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["new_tokens"], 3);

    // An ELMo folder without its options.json is not reported as lacking config.json.
    let empty = copy_model(&fixture("elmo", "small"), "no-options");
    std::fs::remove_file(empty.join("options.json")).unwrap();
    fails_with(
        &["--adapter", "host", "forward", "--model", arg(&empty), "--text", "Hello", "--out", arg(&empty.join("out.safetensors"))],
        &["holds neither config.json (a Hugging Face-layout model) nor options.json (an ELMo)"],
    );
    let text = empty.join("text.txt");
    std::fs::write(&text, "a b c\n").unwrap();
    // A misspelt tokenizer spec is not looked up as a file.
    fails_with(
        &["train", "--arch", "gpt2", "--tokenizer", "bpe", "--data", arg(&text), "--out", arg(&empty.join("out"))],
        &["`bpe` needs a vocabulary size: `bpe:N`"],
    );
    std::fs::remove_dir_all(&empty).unwrap();
}
