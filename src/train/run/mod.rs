//! A run as a library call: [`prepare`] turns a [`RunSpec`] into a [`Run`] — the model (a
//! checkpoint with the head its objective trains added, or a fresh one), its batches and
//! held-out data, its checks (family × objective, sizes against the memory budget, steps
//! against the replayed batches), its distillation teacher, and a resumed run's state — and
//! [`Run::run`] trains it, telling a [`RunObserver`] what happens. `sesame train` and `sesame
//! distill` are this with a progress display; [`evaluate`] is `--eval-only`. Anywhere (a
//! browser too), [`prepare_from`] reads the spec's paths through [`Files`] — a page's
//! [`MemoryFiles`](crate::files::MemoryFiles) — and [`Run::train`] keeps the checkpoints in any
//! [`CheckpointStore`] (in memory: [`MemoryCheckpoints`](crate::train::checkpoint::MemoryCheckpoints)).
//!
//! Notes on long preparations (a vocabulary being counted, a tokenizer being trained) go to
//! the `log` crate at info level, for a front end to show.
//!
//! ```no_run
//! use sesame::models::training::Objective;
//! use sesame::train::run::{prepare, RunSpec};
//! use sesame::train::trainer::{Evaluation, RunObserver, StepReport};
//!
//! struct Print;
//! impl RunObserver for Print {
//!     fn stepped(&mut self, r: &StepReport) -> sesame::Result<()> {
//!         println!("step {}: loss {:.4}", r.step, r.loss);
//!         Ok(())
//!     }
//!     fn evaluated(&mut self, e: &Evaluation) -> sesame::Result<()> {
//!         println!("held out after step {}: {:.4} {:?}", e.step, e.loss, e.metrics);
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> sesame::Result<()> {
//! let device = sesame::Device::host();
//! let spec = RunSpec {
//!     model_init: Some("models/bert-tiny".into()),
//!     objective: Objective::Classify,
//!     data: Some("train.tsv".into()),
//!     steps: Some(200),
//!     out: Some("runs/classifier".into()),
//!     ..RunSpec::default()
//! };
//! prepare(&device, &spec)?.run(&mut Print)
//! # }
//! ```

mod data;
mod model;
mod spec;

use std::path::{Path, PathBuf};

pub use crate::models::training::fresh::DEFAULT_LAYERS;
pub use spec::RunSpec;

use self::data::batch_sources;
use self::model::{check_family, from_scratch, load, load_files, Loaded, TokenizerFiles};
use crate::error::{arg_err, Result};
use crate::files::Files;
use crate::gpu::Device;
use crate::models::auto::ModelFiles;
use crate::models::distilbert;
use crate::models::registry::family_of;
use crate::models::training::{Objective, Trainable};
use crate::tokenize::TextTokenizer;
use crate::train::checkpoint::{self, CheckpointStore, Checkpointing, FreshModel, Settings};
use crate::train::data::BatchSource;
use crate::train::distill::{student_from_teacher, Distillation};
use crate::train::evaluate::{evaluate as evaluate_model, HeldOut};
use crate::train::optim::{AdamWConfig, Schedule};
use crate::train::trainer::{RunObserver, Trainer};
use crate::weights::Weights;

/// An ELMo's default `seq_len`: words per sentence.
const DEFAULT_SENTENCE_WORDS: usize = 50;

/// A run ready to train: its trainer (model, parameters, optimizer, settings), its batches
/// and held-out data, and where its checkpoints go.
pub struct Run {
    pub trainer: Trainer,
    pub source: Box<dyn BatchSource>,
    pub held_out: Option<HeldOut>,
    pub checkpoints: Checkpointing,
    /// The checkpoint a resumed run continues from.
    pub resumed_from: Option<PathBuf>,
    /// What it trains, as a line says it: its objective, or the teacher it is distilled from.
    pub what: String,
    /// The spec as prepared (a distillation's objective settled), and its tokens per sequence.
    spec: RunSpec,
    seq: usize,
}

impl Run {
    /// Trains the remaining steps, evaluating and checkpointing on the spec's schedule, and
    /// writes the final model into the spec's `out`, a directory.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(&mut self, observer: &mut dyn RunObserver) -> Result<()> {
        std::fs::create_dir_all(&self.checkpoints.out).map_err(crate::files::io_err(&self.checkpoints.out))?;
        let mut store = self.checkpoints.clone();
        pollster::block_on(self.train(&mut store, observer))
    }

    /// Trains the remaining steps, evaluating on the spec's schedule, and gives `store` the
    /// checkpoints (every `checkpoints.every` steps) and the final model.
    pub async fn train(&mut self, store: &mut dyn CheckpointStore, observer: &mut dyn RunObserver) -> Result<()> {
        self.trainer.run(self.source.as_ref(), self.held_out.as_ref(), store, observer).await
    }

    /// The model as trained so far, scored on the examples of `data` (read from `files` as
    /// the spec's --data is read) as held-out evaluation scores them: each example once (text
    /// a language model reads: `eval_batches` draws).
    pub async fn score(&self, files: &dyn Files, data: &Path) -> Result<Scores> {
        let model = self.trainer.model();
        let set = data::held_out_source(files, &self.spec, self.trainer.folder(), model, self.seq, data)?;
        let batches = set.batches().map_or(self.spec.eval_batches, |examples| examples as u64);
        let (loss, metrics) = evaluate_model(model, self.spec.objective, &HeldOut::one(set), batches).await?;
        Ok(Scores { batches, loss, metrics })
    }
}

/// What a distillation run's teacher gives its student: the teacher, and the student made
/// from it when the spec makes one (`student_layers`).
struct Teaching {
    teacher: Box<dyn Trainable>,
    student: Option<StudentFiles>,
}

/// The files of a student made from its teacher.
struct StudentFiles {
    config_json: Vec<u8>,
    safetensors: Vec<u8>,
    tokenizer_json: Option<Vec<u8>>,
}

/// The objective a distillation trains its student with: an encoder teacher's masked LM (the
/// default) or classifier, a decoder's language model.
fn distilled_objective(spec: &RunSpec, teacher_config: &[u8]) -> Result<Objective> {
    let encoder = family_of(teacher_config)?.trains(Objective::Mlm);
    match (encoder, spec.objective) {
        (true, Objective::Clm | Objective::Mlm) => Ok(Objective::Mlm),
        (true, Objective::Classify) => Ok(Objective::Classify),
        (false, Objective::Clm) => Ok(Objective::Clm),
        (encoder, other) => {
            let wanted = if encoder { "mlm or classify (the teacher is an encoder)" } else { "clm (the teacher is a decoder)" };
            Err(arg_err!("distill", "distillation trains objective {wanted}, not {other}"))
        }
    }
}

/// The first token id two tokenizers map differently, if any.
fn first_difference(a: &TextTokenizer, b: &TextTokenizer) -> Option<(u32, Option<String>, Option<String>)> {
    let ids = a.vocab_size().max(b.vocab_size()) as u32;
    (0..ids).map(|id| (id, a.id_to_token(id), b.id_to_token(id))).find(|(_, x, y)| x != y)
}

/// A distillation's teacher (loaded without gradients) and, with `student_layers`, the
/// student made from it; the spec's student must share its vocabulary.
fn teaching(gpu: &Device, files: &dyn Files, spec: &RunSpec, d: &Distillation) -> Result<Teaching> {
    let dir = &d.teacher;
    let mut teacher_files = ModelFiles::read_from(files, dir)?;
    let family = family_of(&teacher_files.config_json)?;
    let checkpoint = teacher_files.take_checkpoint();
    let teacher = family.load_trainable(&teacher_files.config_json, &Weights::new(gpu, &checkpoint), spec.objective)?;
    drop(checkpoint);
    if let (Ok(theirs), Some(student_dir)) = (teacher_files.tokenizer(family.vocabulary), &spec.model_init) {
        if let Some(json) = &ModelFiles::read_tokenizer_files_from(files, student_dir)?.tokenizer_json {
            if let Some((id, t, s)) = first_difference(&theirs, &TextTokenizer::from_bytes(json)?) {
                return Err(arg_err!(
                    "distill",
                    "the teacher's and the student's vocabularies differ at token id {id} (`{}` and `{}`): they must share one",
                    t.unwrap_or_default(),
                    s.unwrap_or_default()
                ));
            }
        }
    }
    let student = match (d.student_layers, spec.resume) {
        (Some(layers), false) => {
            let read = |name: &str| files.read(&dir.join(name));
            let (mut config_json, mut safetensors) = student_from_teacher(&read("config.json")?, &read("model.safetensors")?, layers)?;
            if d.student_arch.is_some() {
                (config_json, safetensors) = distilbert::from_bert(&config_json, &safetensors)?;
            }
            let tokenizer_json = files.is_file(&dir.join("tokenizer.json")).then(|| read("tokenizer.json")).transpose()?;
            Some(StudentFiles { config_json, safetensors, tokenizer_json })
        }
        _ => None,
    };
    Ok(Teaching { teacher, student })
}

/// The model a run trains: a resumed run's checkpoint, `model_init`, a fresh `arch`, or a
/// distillation's student made from its teacher.
fn run_model(gpu: &Device, files: &dyn Files, spec: &RunSpec, resumed: Option<&PathBuf>, student: Option<StudentFiles>) -> Result<Loaded> {
    match (resumed, &spec.model_init, &spec.arch, student) {
        // The checkpoint's config.json holds the run's dropouts already multiplied.
        (Some(dir), ..) => load(gpu, files, dir, &RunSpec { drop_mult: None, ..spec.clone() }),
        (None, Some(dir), ..) => load(gpu, files, dir, spec),
        (None, None, Some(arch), _) => from_scratch(gpu, files, spec, arch),
        (None, None, None, Some(student)) => {
            let tokenizer = TokenizerFiles { json: student.tokenizer_json, ..TokenizerFiles::default() };
            load_files(gpu, files, student.config_json, student.safetensors, tokenizer, spec)
        }
        (None, None, None, None) if spec.distillation.is_some() => {
            Err(arg_err!("train", "give the student: --model-init STUDENT_DIR, or --student-layers N to make it from the teacher (or --resume)"))
        }
        (None, None, None, None) => Err(arg_err!("train", "give --model-init or --arch (or --resume)")),
    }
}

/// The settings a spec's run repeats when it resumes, for `steps` steps of `seq` tokens.
fn settings(spec: &RunSpec, steps: u64, seq: usize) -> Settings {
    Settings {
        objective: spec.objective,
        arch: spec.arch.clone(),
        fresh_model: spec.arch.as_ref().map(|_| FreshModel {
            layers: spec.layers(),
            heads: spec.heads,
            hidden: spec.hidden,
            context: spec.context,
            tokenizer: spec.tokenizer.clone(),
            elmo_options: spec.elmo_options.clone(),
            embedding_size: spec.embedding_size,
        }),
        data: spec.data.clone(),
        replay_batches: spec.replay_batches.clone(),
        steps,
        batch_size: spec.batch_size,
        seq_len: seq,
        grad_accum: spec.grad_accum,
        seed: spec.seed,
        dropout: spec.dropout,
        drop_mult: spec.drop_mult,
        mask_probability: spec.mask_probability,
        whole_word_mask: spec.whole_word_mask,
        max_ngram: spec.max_ngram,
        mask_level: spec.mask_level.clone(),
        gazetteer: spec.gazetteer.clone(),
        tasks: spec.tasks.clone(),
        stage_steps: spec.stage_steps.clone(),
        pretokenized: spec.pretokenized,
        shuffle: spec.shuffle,
        group_by_length: spec.group_by_length,
        doc_stride: spec.doc_stride,
        lm_coef: spec.lm_coef,
        eval_every: spec.eval_every,
        eval_batches: spec.eval_batches,
        eval_data: spec.eval_data.clone(),
        schedule: Schedule { lr: spec.lr, warmup: spec.warmup_steps(steps), decay: spec.schedule, total_steps: steps, min_lr: spec.min_lr },
        optimizer: spec.optimizer,
        adamw: AdamWConfig { beta1: spec.beta1, beta2: spec.beta2, eps: spec.eps, weight_decay: spec.weight_decay, clip_grad_norm: spec.clip_grad_norm },
        distillation: spec.distillation.clone(),
        discriminative_lr: spec.discriminative_lr,
        unfreeze_every: spec.unfreeze_every,
        freeze: spec.freeze,
    }
}

/// Refuses micro-batches of `batch` examples (`rows_per_example` rows each: a multiple-choice
/// example's choices) × `seq` tokens whose activations, kept for the backward pass, exceed the
/// host memory budget; the error names the batch size that fits.
fn check_activations(model: &dyn Trainable, batch: usize, rows_per_example: usize, seq: usize) -> Result<()> {
    let bytes = |examples: usize| model.activation_values(examples.saturating_mul(rows_per_example), seq).saturating_mul(4);
    let (needed, limit) = (bytes(batch), crate::limits::host_memory_budget());
    if needed <= limit {
        return Ok(());
    }
    let choices = if rows_per_example > 1 { format!(" × {rows_per_example} choices") } else { String::new() };
    // The largest batch that fits, by bisection (the bytes grow with the batch).
    let (mut fits, mut over) = (0, batch);
    while over - fits > 1 {
        let middle = fits + (over - fits) / 2;
        if bytes(middle) <= limit {
            fits = middle;
        } else {
            over = middle;
        }
    }
    let way_out = match fits {
        0 => format!("not even one example of {seq} tokens fits: lower --seq-len"),
        n => format!("--batch-size {n} fits (with --grad-accum {} for as large a batch)", batch.div_ceil(n)),
    };
    Err(arg_err!(
        "train",
        "micro-batches of --batch-size {batch}{choices} × --seq-len {seq} keep {} of activations for the backward pass, over the {} of {}: {way_out}",
        crate::limits::describe_bytes(needed),
        crate::limits::BUDGET_NAME,
        crate::limits::describe_bytes(limit)
    ))
}

/// The model, batches and held-out data of `spec` checked against each other: what
/// [`prepare`] and [`evaluate`] share.
struct Prepared {
    spec: RunSpec,
    model: Loaded,
    seq: usize,
    source: Option<Box<dyn BatchSource>>,
    held_out: Option<HeldOut>,
    teacher: Option<Box<dyn Trainable>>,
    resumed: Option<(PathBuf, checkpoint::TrainerState)>,
}

fn prepare_parts(gpu: &Device, files: &dyn Files, spec: &RunSpec) -> Result<Prepared> {
    if spec.grad_accum == 0 || spec.eval_batches == 0 {
        // Before any model or data is read (the Trainer checks it again).
        return Err(arg_err!("train", "--grad-accum and --eval-batches must be at least 1"));
    }
    if !(spec.lm_coef.is_finite() && spec.lm_coef >= 0.0) {
        return Err(arg_err!("train", "--lm-coef must be a finite weight ≥ 0, got {}", spec.lm_coef));
    }
    let mut spec = spec.clone();
    let teaching = match spec.distillation.clone() {
        Some(d) => {
            // Before the teacher is read: a bad weight is reported as such.
            d.loss.validate()?;
            if d.student_arch.is_some() && d.student_layers.is_none() {
                return Err(arg_err!(
                    "distill",
                    "--student-arch makes the student from the teacher: give its depth with --student-layers N (not --model-init)"
                ));
            }
            spec.objective = distilled_objective(&spec, &files.read(&d.teacher.join("config.json"))?)?;
            Some(teaching(gpu, files, &spec, &d)?)
        }
        None => None,
    };
    check_family(files, &spec)?;
    let resumed = match (&spec.out, spec.resume) {
        (Some(out), true) => Some(checkpoint::latest(files, out)?),
        _ => None,
    };
    let (teacher, student) = match teaching {
        Some(t) => (Some(t.teacher), t.student),
        None => (None, None),
    };
    let model = run_model(gpu, files, &spec, resumed.as_ref().map(|(dir, _)| dir), student)?;
    // A distillation checks its pair, the teacher first (Trainer::with_teacher).
    if teacher.is_none() {
        model.model.check(spec.objective)?;
    }
    let positions = model.model.max_positions();
    let seq = spec.seq_len.unwrap_or(positions.map_or(DEFAULT_SENTENCE_WORDS, |p| p.min(128)));
    if let Some(positions) = positions.filter(|&p| seq > p) {
        return Err(arg_err!("train", "--seq-len {seq} exceeds the model's {positions} positions"));
    }
    check_activations(model.model.as_ref(), spec.batch_size, 1, seq)?;
    let (source, held_out) = batch_sources(files, &spec, &model.folder, &*model.model, seq)?;
    let first_set = held_out.as_ref().and_then(|h| h.sets.iter().flatten().next().map(|s| s.as_ref()));
    let rows_per_example = source.as_deref().or(first_set).map_or(1, |s| s.rows_per_example());
    if rows_per_example > 1 {
        check_activations(model.model.as_ref(), spec.batch_size, rows_per_example, seq)?;
    }
    Ok(Prepared { spec, model, seq, source, held_out, teacher, resumed })
}

/// A run of `spec` ready to train on `gpu`: its model, batches and held-out data read and
/// checked (the objective against the family and the model's head, the sizes against the
/// memory budget, the steps against the replayed batches), a resumed run's optimizer state
/// restored, a distillation's teacher loaded. Nothing is written before [`Run::run`].
#[cfg(not(target_arch = "wasm32"))]
pub fn prepare(gpu: &Device, spec: &RunSpec) -> Result<Run> {
    prepare_from(gpu, &crate::files::Disk, spec)
}

/// [`prepare`] with the spec's paths read from `files` (a browser's: [`crate::files::MemoryFiles`]).
pub fn prepare_from(gpu: &Device, files: &dyn Files, spec: &RunSpec) -> Result<Run> {
    if spec.eval_only {
        return Err(arg_err!("train", "an --eval-only spec trains nothing: evaluate it (train::run::evaluate)"));
    }
    let Prepared { spec, model, seq, source, held_out, teacher, resumed } = prepare_parts(gpu, files, spec)?;
    let source = source.ok_or_else(|| arg_err!("train", "give --data or --replay-batches"))?;
    let out = spec.out.clone().ok_or_else(|| arg_err!("train", "give --out, where the run writes its checkpoints"))?;
    let steps = match (source.batches(), spec.steps, spec.epochs) {
        (Some(n), Some(s), _) if s.saturating_mul(spec.grad_accum) > n as u64 => {
            return Err(arg_err!("train", "{s} steps × {} micro-batches asked for, but the replay file holds {n}", spec.grad_accum))
        }
        (Some(_), _, Some(_)) => return Err(arg_err!("train", "--epochs passes over --data; replayed batches are taken once each (--steps)")),
        (Some(n), None, None) => n as u64 / spec.grad_accum,
        (None, None, Some(epochs)) => epoch_steps(epochs, source.batches_per_epoch(), &spec)?,
        (_, s, _) => s.unwrap_or(1000),
    };
    let warmup_ratio = spec.warmup_ratio.unwrap_or(0.0);
    if !(warmup_ratio.is_finite() && (0.0..=1.0).contains(&warmup_ratio)) {
        return Err(arg_err!("train", "--warmup-ratio must be a share of the steps from 0 to 1, got {warmup_ratio}"));
    }
    if steps.checked_mul(spec.grad_accum).is_none_or(|micro| micro > i64::MAX as u64) {
        return Err(arg_err!("train", "--steps {steps} × --grad-accum {} micro-batches is more than a run can count", spec.grad_accum));
    }
    let Loaded { model, params, folder } = model;
    let trainer = Trainer::new(gpu, model, params, folder, settings(&spec, steps, seq))?;
    let (mut trainer, what) = match (teacher, &spec.distillation) {
        (Some(teacher), Some(d)) => (trainer.with_teacher(teacher)?, format!("distilled from {}", d.teacher.display())),
        _ => (trainer, spec.objective.to_string()),
    };
    let resumed_from = match resumed {
        Some((dir, state)) => {
            trainer.resume(files, &dir, &state)?;
            Some(dir)
        }
        // Checked last, after the settings: a bad setting is reported as such.
        None => {
            checkpoint::refuse_earlier_run(files, &out)?;
            None
        }
    };
    let checkpoints = Checkpointing { out, every: spec.checkpoint_every, keep: spec.save_total_limit };
    Ok(Run { trainer, source, held_out, checkpoints, resumed_from, what, spec, seq })
}

/// The steps of `epochs` passes over data of `per_epoch` batches (None: data without epochs).
fn epoch_steps(epochs: f64, per_epoch: Option<usize>, spec: &RunSpec) -> Result<u64> {
    let per_epoch = per_epoch.ok_or_else(|| arg_err!("train", "objective {}'s data has no epochs (it is drawn without end): give --steps", spec.objective))?;
    if !(epochs.is_finite() && epochs > 0.0) {
        return Err(arg_err!("train", "--epochs must be a positive number of passes over the data, got {epochs}"));
    }
    let steps = (epochs * per_epoch as f64 / spec.grad_accum as f64).ceil();
    if steps > u32::MAX as f64 {
        return Err(arg_err!("train", "--epochs {epochs} of {per_epoch} batches is more steps than a run takes"));
    }
    Ok(steps as u64)
}

/// What [`evaluate`] found: the mean held-out loss and metrics over `batches` batches.
#[derive(Clone, Debug)]
pub struct Scores {
    pub batches: u64,
    pub loss: f32,
    pub metrics: Vec<(String, f32)>,
}

/// `--eval-only`: the model of `spec` (its `model_init`, with the objective's trained head)
/// scored on all of its data, each example once, as held-out evaluation scores it. Text a
/// language model reads has no end: it is scored on `eval_batches` draws.
#[cfg(not(target_arch = "wasm32"))]
pub fn evaluate(gpu: &Device, spec: &RunSpec) -> Result<Scores> {
    pollster::block_on(evaluate_from(gpu, &crate::files::Disk, spec))
}

/// [`evaluate`] with the spec's paths read from `files`.
pub async fn evaluate_from(gpu: &Device, files: &dyn Files, spec: &RunSpec) -> Result<Scores> {
    let spec = RunSpec { eval_only: true, ..spec.clone() };
    let Prepared { spec, model, held_out, .. } = prepare_parts(gpu, files, &spec)?;
    let data = held_out.ok_or_else(|| arg_err!("train", "--eval-only scores --data, and there is none"))?;
    let model = model.model;
    let tasks = model.tasks();
    // A multi-task model's: all of each task's examples (a task drawn from text has no end).
    if let Some(((name, _), _)) = tasks.iter().zip(&data.sets).find(|(_, set)| set.as_ref().is_some_and(|s| s.batches().is_none())) {
        return Err(arg_err!(
            "train",
            "--eval-only scores files of examples, and task `{name}` draws its batches from text: evaluate it while training (--eval-every)"
        ));
    }
    let batches = match (tasks.is_empty(), data.sets.first().and_then(|set| set.as_ref().and_then(|s| s.batches()))) {
        (false, _) => u64::MAX,
        (true, Some(examples)) => examples as u64,
        // A language model's text: --eval-batches draws, as an evaluation while training.
        (true, None) => spec.eval_batches,
    };
    let (loss, metrics) = evaluate_model(model.as_ref(), spec.objective, &data, batches).await?;
    Ok(Scores { batches, loss, metrics })
}
