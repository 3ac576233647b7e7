//! Training against PyTorch, on the fixtures tests/reference/make_train_fixtures.py wrote
//! (tests/fixtures/train/): a tiny GPT-2 (causal LM) and a tiny BERT (masked LM + next
//! sentence): the loss and every parameter's gradient at the initial weights, then 20 AdamW
//! steps (warmup + cosine, weight decay on matrices, clipping at 1.0) on replayed batches:
//! each step's loss and gradient norm, and the final weights.

mod common;

use std::path::{Path, PathBuf};

use common::{gpu, read, sesame};
use sesame::models::auto::AutoModel;
use sesame::models::config::Gpt2Config;
use sesame::models::gpt2::Gpt2Model;
use sesame::train::data::ReplayBatches;
use sesame::train::objective::Objective;
use sesame::train::optim::{AdamWConfig, Decay, Optimizer, Schedule};
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fn dir(model: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/train").join(model)
}

/// A fixture's initial model with its parameters (names as in model.safetensors).
fn initial(family: &str) -> (AutoModel, Parameters) {
    let init = dir(family).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = AutoModel::load(&read(&init, "config.json"), &weights).unwrap();
    let params = Parameters::new(weights.loaded()).unwrap();
    (model, params)
}

/// The objective each fixture was trained with.
fn objective(family: &str) -> Objective {
    if family == "bert" { Objective::MlmNsp } else { Objective::Clm }
}

#[derive(serde::Deserialize)]
struct Trajectory {
    optimizer: OptimizerJson,
    steps: Vec<StepJson>,
}

#[derive(serde::Deserialize)]
struct OptimizerJson {
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    warmup: u64,
    schedule: String,
    steps: u64,
    clip_grad_norm: f32,
}

#[derive(serde::Deserialize)]
struct StepJson {
    loss: f32,
    lr: f32,
    grad_norm: f32,
}

fn trajectory(model: &str) -> Trajectory {
    serde_json::from_slice(&read(&dir(model), "trajectory.json")).unwrap()
}

fn scalar(t: &sesame::Tensor) -> Vec<f32> {
    pollster::block_on(t.to_vec::<f32>()).unwrap()
}

/// Asserts that every tensor of `want` (a safetensors file) matches Sesame's `part` of the
/// parameter of the same name within `rtol` of the tensor's largest magnitude (at least 1e-6).
fn compare_parameters(label: &str, params: &Parameters, part: Part, want: &Checkpoint, rtol: f32) {
    let got = Checkpoint::from_bytes(pollster::block_on(params.to_safetensors(part)).unwrap()).unwrap();
    let mut names: Vec<&str> = want.names().collect();
    names.sort_unstable();
    assert_eq!(names.len(), params.list.len(), "{label}: the fixture and the model have different parameters");
    for name in names {
        let (w, shape) = want.to_f32(name).unwrap();
        let (g, got_shape) = got.to_f32(name).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(shape, got_shape, "{label} {name}");
        // Floored: a gradient that is 0 in exact arithmetic (attention's key bias, since
        // softmax ignores a shift of its row) is rounding noise in both implementations.
        let scale = w.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        let max_err = g.iter().zip(&w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("{label} {name}: max abs err {max_err:.2e}, relative to the largest |value| {:.2e}", max_err / scale);
        assert!(max_err <= rtol * scale, "{label} {name}: max abs err {max_err:e} > {rtol:e} × {scale:e}");
    }
}

fn gradients_match_pytorch(family: &str) {
    let (model, params) = initial(family);
    let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
    let batch = batches.batch(0).unwrap();
    let loss = objective(family).loss_backward(&model, &batch, &params.gradients(), 1.0).unwrap();
    let want_loss = trajectory(family).steps[0].loss;
    let got_loss = scalar(&loss)[0];
    eprintln!("{family} step-0 loss: {got_loss} (PyTorch {want_loss})");
    assert!((got_loss - want_loss).abs() <= 1e-5 * want_loss, "loss {got_loss} vs {want_loss}");
    let grads = Checkpoint::from_bytes(read(&dir(family), "grads.safetensors")).unwrap();
    compare_parameters(&format!("{family} gradient"), &params, Part::Grad, &grads, 1e-4);
}

fn twenty_adamw_steps_match_pytorch(family: &str) {
    let (model, params) = initial(family);
    let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
    let t = trajectory(family);
    let o = &t.optimizer;
    let schedule = Schedule { lr: o.lr, warmup: o.warmup, decay: o.schedule.parse::<Decay>().unwrap(), total_steps: o.steps };
    let config = AdamWConfig { beta1: o.beta1, beta2: o.beta2, eps: o.eps, weight_decay: o.weight_decay, clip_grad_norm: o.clip_grad_norm };
    let mut optimizer = Optimizer::new(gpu(), config, &params).unwrap();
    let grads = params.gradients();
    assert_eq!(batches.steps, t.steps.len());
    for (step, want) in t.steps.iter().enumerate() {
        let lr = schedule.lr_at(step as u64);
        assert!((lr - want.lr).abs() <= 1e-6 * want.lr, "step {step}: lr {lr} vs PyTorch {}", want.lr);
        params.zero_grads();
        let batch = batches.batch(step).unwrap();
        let loss = scalar(&objective(family).loss_backward(&model, &batch, &grads, 1.0).unwrap())[0];
        optimizer.step(&params, lr).unwrap();
        let norm = scalar(&optimizer.norm_scale)[0];
        eprintln!("{family} step {step}: loss {loss:.6} (PyTorch {:.6}), grad norm {norm:.5} (PyTorch {:.5})", want.loss, want.grad_norm);
        assert!((loss - want.loss).abs() <= 1e-3 * want.loss, "step {step}: loss {loss} vs PyTorch {}", want.loss);
        assert!((norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "step {step}: grad norm {norm} vs PyTorch {}", want.grad_norm);
    }
    let last = Checkpoint::from_bytes(read(&dir(family).join("final"), "model.safetensors")).unwrap();
    compare_parameters(&format!("{family} after 20 steps"), &params, Part::Value, &last, 1e-4);
}

#[test]
fn gpt2_gradients_match_pytorch() {
    gradients_match_pytorch("gpt2");
}

#[test]
fn gpt2_twenty_adamw_steps_match_pytorch() {
    twenty_adamw_steps_match_pytorch("gpt2");
}

#[test]
fn bert_gradients_match_pytorch() {
    gradients_match_pytorch("bert");
}

#[test]
fn bert_twenty_adamw_steps_match_pytorch() {
    twenty_adamw_steps_match_pytorch("bert");
}

#[test]
fn train_cli_replays_the_pytorch_run_and_writes_a_loadable_checkpoint() {
    let out = std::env::temp_dir().join(format!("sesame-train-cli-{}", std::process::id()));
    let log = out.join("log.jsonl");
    std::fs::create_dir_all(&out).unwrap();
    let (init, batches) = (dir("gpt2").join("init"), dir("gpt2").join("batches.safetensors"));
    let t = trajectory("gpt2");
    let o = &t.optimizer;
    let (lr, warmup, steps) = (o.lr.to_string(), o.warmup.to_string(), o.steps.to_string());
    let (wd, b1, b2, eps, clip) = (o.weight_decay.to_string(), o.beta1.to_string(), o.beta2.to_string(), o.eps.to_string(), o.clip_grad_norm.to_string());
    #[rustfmt::skip]
    let args = ["train", "--objective", "clm", "--model-init", init.to_str().unwrap(), "--replay-batches", batches.to_str().unwrap(),
        "--steps", &steps, "--lr", &lr, "--warmup", &warmup, "--schedule", &o.schedule, "--weight-decay", &wd, "--beta1", &b1,
        "--beta2", &b2, "--eps", &eps, "--clip-grad-norm", &clip, "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, stderr) = sesame(&args);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("step 20/20"), "progress lines: {stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), t.steps.len());
    for (line, want) in lines.iter().zip(&t.steps) {
        let loss = line["loss"].as_f64().unwrap() as f32;
        assert!((loss - want.loss).abs() <= 1e-3 * want.loss, "{line} vs PyTorch loss {}", want.loss);
        assert!(line["tokens_per_s"].as_f64().unwrap() > 0.0 && line["lr"].as_f64().is_some());
    }
    // The checkpoint is a model folder: it loads and holds PyTorch's final weights.
    let config = Gpt2Config::from_json(&read(&out, "config.json")).unwrap();
    let saved = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &saved).recording();
    Gpt2Model::load(config, &weights).unwrap();
    let params = Parameters::new(weights.loaded()).unwrap();
    let last = Checkpoint::from_bytes(read(&dir("gpt2").join("final"), "model.safetensors")).unwrap();
    compare_parameters("gpt2 saved by `sesame train`", &params, Part::Value, &last, 1e-4);
    assert!(out.join("tokenizer.json").exists() && out.join("optimizer.exp_avg.safetensors").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&out).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains(".tmp-")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn train_cli_rejects_bad_input() {
    let init = dir("gpt2").join("init");
    let out = std::env::temp_dir().join(format!("sesame-train-bad-{}", std::process::id()));
    let empty = std::env::temp_dir().join(format!("sesame-train-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "  \n\n").unwrap();
    let base = ["train", "--model-init", init.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = |extra: &[&str]| sesame(&[&base[..], extra].concat());
    let (ok, _, err) = run(&["--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("holds no text"), "{err}");
    let (ok, _, err) = run(&["--data", "/nonexistent/corpus.txt"]);
    assert!(!ok && err.contains("/nonexistent/corpus.txt"), "{err}");
    let (ok, _, err) = run(&["--objective", "bilm", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("bilm"), "{err}");
    let batches = dir("gpt2").join("batches.safetensors");
    let (ok, _, err) = run(&["--replay-batches", batches.to_str().unwrap(), "--steps", "21"]);
    assert!(!ok && err.contains("21 steps") && err.contains("20"), "{err}");
    std::fs::remove_file(&empty).unwrap();
    let _ = std::fs::remove_dir_all(&out);
}
