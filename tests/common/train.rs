//! The training fixtures (tests/fixtures/train/, written by
//! tests/reference/make_train_fixtures.py and make_family_train_fixtures.py), the comparison
//! of parameters with them, and runs on them through the library as `sesame train` makes them.

use std::path::{Path, PathBuf};

use sesame::models::registry::family_of;
use sesame::models::training::{Objective, Trainable};
use sesame::train::checkpoint::{ModelFolder, Settings};
use sesame::train::data::ReplayBatches;
use sesame::train::optim::{AdamWConfig, Decay, Schedule};
use sesame::train::params::{Parameters, Part};
use sesame::train::run::RunSpec;
use sesame::train::trainer::Trainer;
use sesame::train::trainer::{Evaluation, RunObserver, StepReport};
use sesame::weights::{Checkpoint, Weights};

use super::{read, sesame};

/// The model of `config_json` from `weights` as a run trains it with `objective`, through its
/// family's training.
pub fn trainable(config_json: &[u8], weights: &Weights, objective: Objective) -> Box<dyn Trainable> {
    family_of(config_json).unwrap().load_trainable(config_json, weights, objective).unwrap()
}

pub fn dir(model: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/train").join(model)
}

#[derive(serde::Deserialize)]
pub struct Trajectory {
    pub optimizer: OptimizerJson,
    /// The seed of the run's dropout masks (its probabilities are in the model's config).
    pub dropout_seed: u64,
    /// GPT's fine-tuning: the weight of the auxiliary LM loss (0 for other runs).
    #[serde(default)]
    pub lm_coef: f32,
    pub steps: Vec<StepJson>,
}

#[derive(serde::Deserialize)]
pub struct OptimizerJson {
    /// adamw (the fixtures written before LAMB name none) or lamb.
    #[serde(default = "adamw")]
    pub name: String,
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub warmup: u64,
    pub schedule: String,
    pub steps: u64,
    pub clip_grad_norm: f32,
    /// The floor of the decay (the start of ULMFiT's slanted triangle); 0 when not given.
    #[serde(default)]
    pub min_lr: f32,
    /// ULMFiT's discriminative factor and gradual unfreezing, when the run used them.
    #[serde(default)]
    pub discriminative_lr: Option<f32>,
    #[serde(default)]
    pub unfreeze_every: Option<u64>,
}

#[derive(serde::Deserialize)]
pub struct StepJson {
    pub loss: f32,
    pub lr: f32,
    pub grad_norm: f32,
}

fn adamw() -> String {
    "adamw".into()
}

pub fn trajectory(model: &str) -> Trajectory {
    serde_json::from_slice(&read(&dir(model), "trajectory.json")).unwrap()
}

/// The Trainer settings of the fixture's PyTorch run: its optimizer, schedule, dropout seed and
/// GPT's LM coefficient, for `objective` on batches of `batch` × `seq`.
pub fn run_settings(family: &str, objective: Objective, batch: usize, seq: usize) -> Settings {
    let t = trajectory(family);
    let o = &t.optimizer;
    let schedule = Schedule { lr: o.lr, warmup: o.warmup, decay: o.schedule.parse::<Decay>().unwrap(), total_steps: o.steps, min_lr: o.min_lr };
    let adamw = AdamWConfig { beta1: o.beta1, beta2: o.beta2, eps: o.eps, weight_decay: o.weight_decay, clip_grad_norm: o.clip_grad_norm };
    Settings {
        seed: t.dropout_seed,
        lm_coef: t.lm_coef,
        optimizer: o.name.parse().unwrap(),
        discriminative_lr: o.discriminative_lr,
        unfreeze_every: o.unfreeze_every,
        ..Settings::new(objective, o.steps, batch, seq, schedule, adamw)
    }
}

/// Trains `model` with `objective` on fixture `run`'s replayed batches (batches.safetensors)
/// under its PyTorch run's settings, checking each step's loss (within 1e-5 relative) and
/// gradient norm (1e-4) against trajectory.json, then the weights against
/// final/model.safetensors (1e-4). `label` names the model and device in messages.
pub fn replays_the_reference_steps(label: &str, gpu: &sesame::Device, run: &str, objective: Objective, model: Box<dyn Trainable>, params: Parameters) {
    let batches = ReplayBatches::from_bytes(&read(&dir(run), "batches.safetensors")).unwrap();
    let first = batches.batch(0).unwrap();
    let settings = run_settings(run, objective, first.batch, first.seq);
    let mut trainer = Trainer::new(gpu, model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
    for (step, want) in trajectory(run).steps.iter().enumerate() {
        let report = pollster::block_on(trainer.step(&batches)).unwrap();
        eprintln!(
            "{label} step {step}: loss {:.6} (reference {:.6}), grad norm {:.5} (reference {:.5})",
            report.loss, want.loss, report.grad_norm, want.grad_norm
        );
        assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "{label} step {step}: loss {} vs {}", report.loss, want.loss);
        assert!((report.grad_norm - want.grad_norm).abs() <= 1e-4 * want.grad_norm, "{label} step {step}: grad norm {}", report.grad_norm);
    }
    let last = Checkpoint::from_bytes(read(&dir(run).join("final"), "model.safetensors")).unwrap();
    compare_parameters(&format!("{label} after {} steps", trajectory(run).steps.len()), trainer.params(), Part::Value, &last, 1e-4);
}

/// A run of objective `objective` on fixture `run`'s replayed batches under its PyTorch run's
/// flags, through the library's run as `sesame train` makes it, writing the folder `out`:
/// each step's loss is within 1e-5 relative of trajectory.json's.
pub fn run_replays_the_reference_steps(run: &str, objective: &str, out: &Path) {
    let mut args: Vec<String> = ["--objective", objective].map(String::from).to_vec();
    args.extend(pytorch_run_args(run));
    args.extend(["--out", out.to_str().unwrap()].map(String::from));
    let (losses, want) = (train(&args).unwrap_or_else(|e| panic!("{run}: {e}")).losses(), trajectory(run).steps);
    assert_eq!(losses.len(), want.len());
    for ((step, loss), want) in losses.iter().zip(&want) {
        assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "step {step}: loss {loss} vs the reference's {}", want.loss);
    }
}

pub fn scalar(t: &sesame::Tensor) -> Vec<f32> {
    pollster::block_on(t.to_vec::<f32>()).unwrap()
}

/// Asserts that every tensor of `want` (a safetensors file) matches Sesame's `part` of the
/// parameter of the same name within `rtol` of the tensor's largest magnitude (at least 1e-6);
/// values include the buffers (BatchNorm's running statistics).
pub fn compare_parameters(label: &str, params: &Parameters, part: Part, want: &Checkpoint, rtol: f32) {
    compare_parameters_except(label, params, part, want, rtol, &[]);
}

/// [`compare_parameters`], but for `loss_invariant`: parameters the loss does not depend on
/// (each softmax ignores the shift they add), whose gradient is 0 in exact arithmetic and so
/// rounding noise on both sides, checked to be below 1e-6. AdamW scales that noise up to
/// steps of about the learning rate, different in each implementation, so their values are
/// not compared; nothing else depends on them.
pub fn compare_parameters_except(label: &str, params: &Parameters, part: Part, want: &Checkpoint, rtol: f32, loss_invariant: &[&str]) {
    let got = Checkpoint::from_bytes(pollster::block_on(params.to_safetensors(part)).unwrap()).unwrap();
    for &name in loss_invariant {
        assert!(want.contains(name), "{label}: no parameter {name}");
        if let Part::Grad = part {
            let largest = |c: &Checkpoint| c.to_f32(name).unwrap().0.iter().fold(0f32, |m, v| m.max(v.abs()));
            let (g, w) = (largest(&got), largest(want));
            eprintln!("{label} {name}: a gradient that is 0 in exact arithmetic: largest |value| {g:.2e} (PyTorch {w:.2e})");
            assert!(g <= 1e-6 && w <= 1e-6, "{label} {name}: largest |gradient| {g:e} (PyTorch {w:e}), expected rounding noise");
        }
    }
    let mut rest: Vec<&str> = want.names().filter(|n| !loss_invariant.contains(n)).collect();
    rest.sort_unstable();
    let buffers = if part == Part::Value { params.buffers.len() } else { 0 };
    assert_eq!(rest.len() + loss_invariant.len(), params.list.len() + buffers, "{label}: the fixture and the model have different parameters");
    for name in rest {
        let (w, shape) = want.to_f32(name).unwrap();
        check_tensor(label, &got, name, &shape, &w, rtol);
    }
}

/// [`compare_parameters`] against the tensors of `want` named `prefix` + a parameter's name
/// (its other tensors are ignored).
pub fn compare_prefixed_parameters(label: &str, params: &Parameters, part: Part, want: &Checkpoint, prefix: &str, rtol: f32) {
    let got = Checkpoint::from_bytes(pollster::block_on(params.to_safetensors(part)).unwrap()).unwrap();
    let mut names: Vec<&str> = want.names().filter_map(|n| n.strip_prefix(prefix)).collect();
    names.sort_unstable();
    assert_eq!(names.len(), params.list.len(), "{label}: the fixture and the model have different parameters");
    for name in names {
        let (w, shape) = want.to_f32(&format!("{prefix}{name}")).unwrap();
        check_tensor(label, &got, name, &shape, &w, rtol);
    }
}

/// Sesame's tensor `name` of `got` against the values `w` of shape `shape`.
fn check_tensor(label: &str, got: &Checkpoint, name: &str, shape: &[usize], w: &[f32], rtol: f32) {
    let (g, got_shape) = got.to_f32(name).unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(shape, got_shape, "{label} {name}");
    // Floored: a gradient that is 0 in exact arithmetic (attention's key bias, since
    // softmax ignores a shift of its row) is rounding noise in both implementations.
    let scale = w.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    let max_err = g.iter().zip(w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    eprintln!("{label} {name}: max abs err {max_err:.2e}, relative to the largest |value| {:.2e}", max_err / scale);
    assert!(max_err <= rtol * scale, "{label} {name}: max abs err {max_err:e} > {rtol:e} × {scale:e}");
}

/// The CLI flags of the fixture's PyTorch run (tests/fixtures/train/<family>/trajectory.json).
pub fn pytorch_run_args(family: &str) -> Vec<String> {
    let o = trajectory(family).optimizer;
    let (init, batches) = (dir(family).join("init"), dir(family).join("batches.safetensors"));
    #[rustfmt::skip]
    let args = ["--model-init", init.to_str().unwrap(), "--replay-batches", batches.to_str().unwrap(), "--steps", &o.steps.to_string(),
        "--lr", &o.lr.to_string(), "--warmup", &o.warmup.to_string(), "--schedule", &o.schedule, "--weight-decay", &o.weight_decay.to_string(),
        "--beta1", &o.beta1.to_string(), "--beta2", &o.beta2.to_string(), "--eps", &o.eps.to_string(), "--clip-grad-norm", &o.clip_grad_norm.to_string(), "--optimizer", &o.name,
        "--min-lr", &o.min_lr.to_string(), "--seed", &trajectory(family).dropout_seed.to_string()];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let ulmfit = [("--discriminative-lr", o.discriminative_lr.map(|f| f.to_string())), ("--unfreeze-every", o.unfreeze_every.map(|n| n.to_string()))];
    args.extend(ulmfit.into_iter().filter_map(|(flag, value)| Some([flag.to_string(), value?])).flatten());
    args
}

pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sesame-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sesame` with owned arguments.
pub fn run(args: &[String]) -> (bool, String, String) {
    sesame(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// What a run through the library did: each step's report and each held-out evaluation, and
/// the checkpoint it resumed from.
#[derive(Default)]
pub struct Trained {
    pub steps: Vec<StepReport>,
    pub evaluations: Vec<Evaluation>,
    pub resumed_from: Option<PathBuf>,
}

impl Trained {
    /// Each step's loss, by step.
    pub fn losses(&self) -> Vec<(u64, f32)> {
        self.steps.iter().map(|r| (r.step, r.loss)).collect()
    }

    /// The mean training loss of the first and the last five steps.
    pub fn first_and_last_losses(&self) -> (f32, f32) {
        let losses: Vec<f32> = self.steps.iter().map(|r| r.loss).collect();
        let mean = |part: &[f32]| part.iter().sum::<f32>() / part.len() as f32;
        (mean(&losses[..5]), mean(&losses[losses.len() - 5..]))
    }

    /// Each evaluation as `sesame train --log` writes it: {"step", "eval_loss", metrics…}.
    pub fn evaluation_lines(&self) -> Vec<serde_json::Value> {
        self.evaluations.iter().map(evaluation_line).collect()
    }

    /// The first evaluation, as [`Trained::evaluation_lines`] writes it.
    pub fn first_evaluation(&self) -> serde_json::Value {
        self.evaluation_lines().into_iter().next().expect("the run evaluated")
    }
}

fn evaluation_line(e: &Evaluation) -> serde_json::Value {
    let mut line = serde_json::json!({ "step": e.step, "eval_loss": e.loss });
    for (name, value) in &e.metrics {
        line[name.as_str()] = (*value).into();
    }
    line
}

impl RunObserver for Trained {
    fn stepped(&mut self, report: &StepReport) -> sesame::Result<()> {
        self.steps.push(report.clone());
        Ok(())
    }
    fn evaluated(&mut self, evaluation: &Evaluation) -> sesame::Result<()> {
        self.evaluations.push(evaluation.clone());
        Ok(())
    }
}

/// The run spec of `sesame train`'s flags (`args`, without `train`), as the command line
/// parses them.
pub fn spec_of(args: &[String]) -> Result<RunSpec, String> {
    RunSpec::from_flags(args).map_err(|e| e.to_string())
}

/// `sesame train ARGS` through the library on the GPU adapter: the flags parsed as the
/// command line parses them, the run prepared and trained (an --eval-only spec evaluated),
/// or the error that stopped it, as a message.
pub fn train(args: &[String]) -> Result<Trained, String> {
    run_spec(spec_of(args)?)
}

/// The run spec of `sesame distill`'s flags (`args`, without `distill`).
pub fn distill_spec_of(args: &[String]) -> Result<RunSpec, String> {
    RunSpec::from_distill_flags(args).map_err(|e| e.to_string())
}

/// `sesame distill ARGS` through the library, as [`train`] runs `sesame train`.
pub fn distill(args: &[String]) -> Result<Trained, String> {
    run_spec(distill_spec_of(args)?)
}

fn run_spec(spec: RunSpec) -> Result<Trained, String> {
    let gpu = super::gpu();
    if spec.eval_only {
        sesame::train::run::evaluate(gpu, &spec).map_err(|e| e.to_string())?;
        return Ok(Trained::default());
    }
    let mut run = sesame::train::run::prepare(gpu, &spec).map_err(|e| e.to_string())?;
    let mut trained = Trained { resumed_from: run.resumed_from.clone(), ..Trained::default() };
    run.run(&mut trained).map_err(|e| e.to_string())?;
    Ok(trained)
}

/// `sesame train ARGS --eval-only` through the library: {"batches", "eval_loss", metrics…},
/// as the command prints it, or the error.
pub fn evaluate(args: &[String]) -> Result<serde_json::Value, String> {
    let spec = spec_of(&[args, &["--eval-only".to_string()]].concat())?;
    let scores = sesame::train::run::evaluate(super::gpu(), &spec).map_err(|e| e.to_string())?;
    let mut line = serde_json::json!({ "batches": scores.batches, "eval_loss": scores.loss });
    for (name, value) in scores.metrics {
        line[name] = value.into();
    }
    Ok(line)
}

/// The error `sesame train ARGS` stops with before any step: its flags refused, or its run
/// refused as it is prepared (a run that prepares fails the test).
pub fn refused(args: &[String]) -> String {
    refused_spec(args, spec_of(args))
}

/// [`refused`] for `sesame distill ARGS`.
pub fn distill_refused(args: &[String]) -> String {
    refused_spec(args, distill_spec_of(args))
}

fn refused_spec(args: &[String], spec: Result<RunSpec, String>) -> String {
    let spec = match spec {
        Ok(spec) => spec,
        Err(e) => return e,
    };
    match sesame::train::run::prepare(super::gpu(), &spec) {
        Ok(_) => panic!("{args:?} was not refused"),
        Err(e) => e.to_string(),
    }
}

/// Flags as owned arguments.
pub fn flags(flags: &[&str]) -> Vec<String> {
    flags.iter().map(|s| s.to_string()).collect()
}

/// `args` with `extra` flags after them (which win where they repeat one).
pub fn with(args: &[String], extra: &[&str]) -> Vec<String> {
    args.iter().cloned().chain(extra.iter().map(|s| s.to_string())).collect()
}

/// The (step, loss) of each training step in a JSONL log (evaluation lines skipped).
pub fn logged_losses(path: &std::path::Path) -> Vec<(u64, f32)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Some((v["step"].as_u64().unwrap(), v.get("loss")?.as_f64().unwrap() as f32))
        })
        .collect()
}

/// A seeded draw of 0..n (a linear congruential generator: the test data stays fixed).
pub fn lcg(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |n| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize % n
    }
}

/// `sentence<TAB>label` lines over the tiny BERT's vocabulary: label 1 when the sentence has a
/// bright word, 0 when it has a dark one, among neutral words.
pub fn sentiment_tsv(rows: usize, seed: u64) -> String {
    let (neutral, bright, dark) =
        (["the", "cat", "dog", "sat", "on", "mat", "river", "old", "mill"], ["warm", "happy", "light", "sang"], ["cold", "dark", "fell", "slept"]);
    let mut next = lcg(seed);
    let mut tsv = String::from("sentence\tlabel\n");
    for _ in 0..rows {
        let label = next(2);
        let mut words: Vec<&str> = (0..4).map(|_| neutral[next(neutral.len())]).collect();
        words.insert(next(5), if label == 1 { bright[next(4)] } else { dark[next(4)] });
        tsv += &format!("{}\t{label}\n", words.join(" "));
    }
    tsv
}

/// CoNLL-style sentences over the tiny BERT's words: animals are B-ANIMAL, colours B-COLOUR,
/// the rest O.
pub fn tagged_conll(sentences: usize, seed: u64) -> String {
    let words = ["the", "cat", "dog", "bird", "sat", "on", "red", "blue", "green", "mat", "ran", "to", "park", "big", "small"];
    let tag = |w: &str| match w {
        "cat" | "dog" | "bird" => "B-ANIMAL",
        "red" | "blue" | "green" => "B-COLOUR",
        _ => "O",
    };
    let mut next = lcg(seed);
    let mut text = String::from("-DOCSTART- O\n\n");
    for _ in 0..sentences {
        for _ in 0..6 {
            let w = words[next(words.len())];
            text += &format!("{w} {}\n", tag(w));
        }
        text += "\n";
    }
    text
}
