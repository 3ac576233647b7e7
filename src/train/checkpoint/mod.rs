//! Training checkpoints: the model's folder in the Hugging Face layout (config.json,
//! model.safetensors, tokenizer.json; ELMo's options.json, model.safetensors, vocab.txt) plus
//! the optimizer moments and trainer_state.json, kept by a [`CheckpointStore`] — natively a
//! directory ([`directory`]) — and read back through [`Files`] to resume. The run's settings
//! are here so that a checkpoint can be read without the command line.

use std::path::{Path, PathBuf};

use super::distill::Distillation;
use super::masking::MaskSchedule;
use super::multitask::TaskData;
use super::multitask::{parse_tasks, task_folder};
use super::optim::{AdamWConfig, Freeze, OptimizerKind, Schedule};
#[cfg(not(target_arch = "wasm32"))]
pub mod directory;

mod memory;

#[cfg(not(target_arch = "wasm32"))]
pub use directory::save;
pub use memory::MemoryCheckpoints;

use crate::error::{arg_err, Result, SesameError};
use crate::files::Files;
use crate::models::registry::family_of;
use crate::models::training::Objective;
use crate::train::params::{Parameters, Part};
use crate::weights::Checkpoint;

/// A checkpoint folder's name before its step: `checkpoint-000200`.
const PREFIX: &str = "checkpoint-";

/// The folder in `out` of the checkpoint of step `step`.
fn checkpoint_dir(out: &Path, step: u64) -> PathBuf {
    out.join(format!("{PREFIX}{step:06}"))
}

/// The step of the checkpoint folder called `name`, if it is one.
fn checkpoint_step(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX).and_then(|n| n.parse::<u64>().ok())
}

/// Where and how often a run checkpoints: `out/checkpoint-NNNNNN` every `every` steps (0: only
/// at the end), the newest `keep` kept, and the final model in `out` itself. Natively it is
/// the [`CheckpointStore`] of a directory.
#[derive(Clone, Debug)]
pub struct Checkpointing {
    pub out: PathBuf,
    pub every: u64,
    pub keep: usize,
}

/// The complete checkpoint folders in `out`, by step.
fn checkpoints(files: &dyn Files, out: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut found: Vec<(u64, PathBuf)> = files.entries(out)?.iter().filter_map(|name| Some((checkpoint_step(name)?, out.join(name)))).collect();
    found.sort();
    Ok(found)
}

/// The newest complete checkpoint in `out`, whose trainer state must be at the step its
/// folder is named after.
pub fn latest(files: &dyn Files, out: &Path) -> Result<(PathBuf, TrainerState)> {
    let (step, dir) =
        checkpoints(files, out).ok().and_then(|mut all| all.pop()).ok_or_else(|| arg_err!("train", "--resume: no checkpoint-* folder in {}", out.display()))?;
    let path = dir.join("trainer_state.json");
    let state = TrainerState::from_json(&files.read(&path)?).map_err(|e| SesameError::Checkpoint(format!("{}: {e}", path.display())))?;
    if state.step != step {
        return Err(SesameError::Checkpoint(format!("{}: step {} in the folder of step {step}", path.display(), state.step)));
    }
    Ok((dir, state))
}

/// An error when `out` holds an earlier run's checkpoints: a new run there would mix its
/// checkpoints with them and prune theirs.
pub fn refuse_earlier_run(files: &dyn Files, out: &Path) -> Result<()> {
    if !files.is_dir(out) {
        return Ok(());
    }
    if let Some((_, dir)) = checkpoints(files, out)?.pop() {
        return Err(arg_err!(
            "train",
            "--out {} holds the checkpoints of an earlier run ({}): --resume continues it; for a new run choose another --out or remove them",
            out.display(),
            dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
    }
    Ok(())
}

/// Loads the optimizer moments saved in checkpoint folder `dir`.
pub fn load_moments(files: &dyn Files, dir: &Path, params: &mut Parameters) -> Result<()> {
    for (file, part) in [("optimizer.exp_avg.safetensors", Part::FirstMoment), ("optimizer.exp_avg_sq.safetensors", Part::SecondMoment)] {
        let path = dir.join(file);
        let checkpoint = Checkpoint::from_bytes(files.read(&path)?).map_err(|e| SesameError::Checkpoint(format!("{}: {e}", path.display())))?;
        params.load_moments(part, &checkpoint)?;
    }
    Ok(())
}

/// GPT's auxiliary LM weight in fine-tuning (Radford et al. 2018, §3.2).
pub const DEFAULT_LM_COEF: f32 = 0.5;

fn default_lm_coef() -> f32 {
    DEFAULT_LM_COEF
}

fn shuffled() -> bool {
    true
}

fn one() -> usize {
    1
}

/// What defines a run: a resumed run must repeat it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub objective: Objective,
    pub arch: Option<String>,
    /// The shape and tokenizer of a fresh model (--arch); a resume loads the checkpoint's
    /// model, so different flags would otherwise be ignored without a word.
    #[serde(default)]
    pub fresh_model: Option<FreshModel>,
    pub data: Option<PathBuf>,
    pub replay_batches: Option<PathBuf>,
    pub steps: u64,
    pub batch_size: usize,
    pub seq_len: usize,
    pub grad_accum: u64,
    pub seed: u64,
    #[serde(default)]
    pub dropout: Option<f32>,
    /// Every dropout of the model's config multiplied by this (fastai's drop_mult).
    #[serde(default)]
    pub drop_mult: Option<f32>,
    pub mask_probability: f64,
    pub whole_word_mask: bool,
    /// Masked LM: the longest span n-gram masking selects (1: single words or pieces).
    #[serde(default = "one")]
    pub max_ngram: usize,
    /// Masked LM: the masking units by stage (ERNIE's knowledge masking).
    #[serde(default)]
    pub mask_level: MaskSchedule,
    /// Masked LM: the entity names found in documents without entity annotations.
    #[serde(default)]
    pub gazetteer: Option<PathBuf>,
    /// Objective multi-task: each task's data.
    #[serde(default)]
    pub tasks: Vec<TaskData>,
    /// Continual multi-task learning: the steps of each stage but the last.
    #[serde(default)]
    pub stage_steps: Vec<u64>,
    #[serde(default)]
    pub pretokenized: bool,
    /// Training examples drawn in a seeded shuffle per epoch (false: in the data's order).
    #[serde(default = "shuffled")]
    pub shuffle: bool,
    #[serde(default)]
    pub group_by_length: bool,
    #[serde(default)]
    pub doc_stride: Option<usize>,
    #[serde(default = "default_lm_coef")]
    pub lm_coef: f32,
    pub eval_every: u64,
    pub eval_batches: u64,
    pub eval_data: Option<PathBuf>,
    pub schedule: Schedule,
    /// AdamW (a run saved before LAMB existed), or LAMB.
    #[serde(default)]
    pub optimizer: OptimizerKind,
    /// The optimizer's hyperparameters (AdamW's, which LAMB shares).
    pub adamw: AdamWConfig,
    /// A distillation run's teacher and loss (`sesame distill`); None for `sesame train`.
    #[serde(default)]
    pub distillation: Option<Distillation>,
    /// ULMFiT's discriminative fine-tuning: each layer group below the top learns at the rate
    /// of the group above divided by this (the paper: 2.6).
    #[serde(default)]
    pub discriminative_lr: Option<f32>,
    /// ULMFiT's gradual unfreezing: the top layer group trains first, and every this many
    /// steps the next group below joins.
    #[serde(default)]
    pub unfreeze_every: Option<u64>,
    /// The weights that stay as they are (`--freeze`).
    #[serde(default)]
    pub freeze: Option<Freeze>,
}

/// The flags that shape a fresh model.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FreshModel {
    pub layers: usize,
    pub heads: usize,
    pub hidden: usize,
    pub context: Option<usize>,
    pub tokenizer: String,
    pub elmo_options: Option<PathBuf>,
    /// A fresh AWD-LSTM's embedding width.
    #[serde(default)]
    pub embedding_size: Option<usize>,
}

impl Settings {
    /// A run of `steps` optimizer steps of `objective` on micro-batches of `batch_size` ×
    /// `seq_len`, one per step, without held-out evaluation; everything else as `sesame
    /// train` defaults it (change fields to differ).
    pub fn new(objective: Objective, steps: u64, batch_size: usize, seq_len: usize, schedule: Schedule, adamw: AdamWConfig) -> Settings {
        Settings {
            objective,
            arch: None,
            fresh_model: None,
            data: None,
            replay_batches: None,
            steps,
            batch_size,
            seq_len,
            grad_accum: 1,
            seed: 0,
            dropout: None,
            drop_mult: None,
            mask_probability: 0.15,
            whole_word_mask: false,
            max_ngram: 1,
            mask_level: MaskSchedule::default(),
            gazetteer: None,
            tasks: Vec::new(),
            stage_steps: Vec::new(),
            pretokenized: false,
            shuffle: true,
            group_by_length: false,
            doc_stride: None,
            lm_coef: DEFAULT_LM_COEF,
            eval_every: 0,
            eval_batches: 20,
            eval_data: None,
            schedule,
            optimizer: OptimizerKind::AdamW,
            adamw,
            distillation: None,
            discriminative_lr: None,
            unfreeze_every: None,
            freeze: None,
        }
    }

    /// The settings that differ from `saved`, by name.
    pub fn differences(&self, saved: &Settings) -> Vec<String> {
        let (a, b) = (serde_json::to_value(self).unwrap_or_default(), serde_json::to_value(saved).unwrap_or_default());
        let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return Vec::new() };
        a.iter()
            .filter(|(k, v)| b.get(*k) != Some(v))
            .map(|(k, v)| format!("{k}: {v} now, {} in the checkpoint", b.get(k).cloned().unwrap_or_default()))
            .collect()
    }
}

/// What trainer_state.json records: the optimizer steps taken and the run's settings, which
/// a resumed run must repeat.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TrainerState {
    pub step: u64,
    pub settings: Settings,
}

impl TrainerState {
    /// Parses trainer_state.json; the error names the field at fault.
    pub fn from_json(json: &[u8]) -> Result<TrainerState, String> {
        crate::error::from_json_named(json)
    }
}

/// The model's files besides model.safetensors, copied into every checkpoint: (name, bytes),
/// e.g. config.json and tokenizer.json, or ELMo's options.json and vocab.txt.
pub struct ModelFolder {
    pub files: Vec<(&'static str, Vec<u8>)>,
}

impl ModelFolder {
    /// The bytes of file `name`.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files.iter().find(|(n, _)| *n == name).map(|(_, bytes)| bytes.as_slice())
    }

    /// The model's files by their path in its folder, its weights `safetensors`: model.safetensors
    /// and the files it copies; a multi-task model's also each task's model as a transformers
    /// folder, `tasks/<name>/`, and a family's joint folder each of its models' (ELECTRA's
    /// `discriminator/` and `generator/`).
    pub fn saved_files(&self, safetensors: Vec<u8>) -> Result<Vec<(String, Vec<u8>)>> {
        let mut files = Vec::new();
        if let Some(tasks_json) = self.file("tasks.json") {
            let checkpoint = Checkpoint::from_bytes(safetensors.clone())?;
            for task in parse_tasks(tasks_json)? {
                self.add_part(&mut files, &format!("tasks/{}/", task.name), task_folder(tasks_json, &checkpoint, &task.name)?, &["config.json", "tasks.json"]);
            }
        }
        if let Some(config) = self.file("config.json") {
            let joint = family_of(config)?.training.and_then(|training| training.joint_folder());
            if let Some((joint, other_config)) = joint.and_then(|joint| Some((joint, self.file(joint.other_config)?))) {
                for part in (joint.parts)(config, other_config, &Checkpoint::from_bytes(safetensors.clone())?)? {
                    self.add_part(&mut files, part.prefix, (part.config_json, part.safetensors), &["config.json", joint.other_config]);
                }
            }
        }
        files.push(("model.safetensors".into(), safetensors));
        files.extend(self.files.iter().map(|(name, bytes)| (name.to_string(), bytes.clone())));
        Ok(files)
    }

    /// One model of a folder that holds several, as a transformers folder under `prefix`: its
    /// config.json and model.safetensors, and the shared files (the tokenizer's), not the
    /// whole folder's `configs`.
    fn add_part(&self, files: &mut Vec<(String, Vec<u8>)>, prefix: &str, (config, weights): (Vec<u8>, Vec<u8>), configs: &[&str]) {
        files.push((format!("{prefix}config.json"), config));
        files.push((format!("{prefix}model.safetensors"), weights));
        for (name, bytes) in self.files.iter().filter(|(name, _)| !configs.contains(name)) {
            files.push((format!("{prefix}{name}"), bytes.clone()));
        }
    }
}

/// Where a run keeps its checkpoints and its final model, given as files by their path in a
/// model folder (`model.safetensors`, `tasks/ner/config.json`, …): a directory natively
/// ([`Checkpointing`]); in memory ([`MemoryCheckpoints`]); whatever a page keeps them in.
pub trait CheckpointStore {
    /// How often the run keeps a checkpoint: every this many steps (0: only at the end).
    fn every(&self) -> u64;
    /// Keeps the checkpoint of step `step` (the model's files, the optimizer's moments and
    /// trainer_state.json), pruning older ones as the store does.
    fn save_checkpoint(&mut self, step: u64, files: &[(String, Vec<u8>)]) -> Result<()>;
    /// Keeps the trained model's files.
    fn save_model(&mut self, files: &[(String, Vec<u8>)]) -> Result<()>;
}
