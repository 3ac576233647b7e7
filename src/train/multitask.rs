//! Multi-task fine-tuning (MT-DNN, Liu et al. 2019): one shared encoder, one head per task,
//! each batch one task's and scored by that task's objective. The model is one transformers
//! model per task over the same encoder tensors, read from a multi-task folder:
//!
//! - `config.json`: the shared encoder's config;
//! - `tasks.json`: `[{"name", "objective", "config"}]`, each task's name, objective
//!   (`classify`, `token-classify`, …) and the config.json of its transformers model
//!   (`BertForSequenceClassification` with its labels, …);
//! - `model.safetensors`: the encoder under its base model's names (`bert.…`), each task's head
//!   under `tasks.<name>.` + its name in its own model (`tasks.sst2.classifier.weight`).
//!
//! [`task_folder`] writes one task's model as a plain transformers folder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::data::{replay_err, replay_tensors, Batch, BatchSource, ReplayBatches, ReplayTensor};
use super::objective::kind::Objective;
use super::task_heads::base_model_prefix;
use crate::error::{arg_err, Result};
use crate::models::auto::AutoModel;
use crate::tensor::Tensor;
use crate::weights::{self, Checkpoint, Weights};

const OP: &str = "multi-task model";

/// One entry of tasks.json.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    pub objective: Objective,
    /// The config.json of the task's transformers model.
    pub config: serde_json::Value,
}

/// A task: its objective and its model, whose encoder tensors every task shares.
pub struct Task {
    pub spec: TaskSpec,
    pub model: AutoModel,
}

pub struct MultiTaskModel {
    pub tasks: Vec<Task>,
}

/// The tasks of a tasks.json, checked: unique names that can prefix tensor names, objectives
/// a multi-task run trains, one encoder family.
pub fn parse_tasks(tasks_json: &[u8]) -> Result<Vec<TaskSpec>> {
    let specs: Vec<TaskSpec> = serde_json::from_slice(tasks_json).map_err(|e| arg_err!(OP, "tasks.json: {e}"))?;
    if specs.is_empty() {
        return Err(arg_err!(OP, "tasks.json lists no task"));
    }
    for (i, spec) in specs.iter().enumerate() {
        let name = &spec.name;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(arg_err!(OP, "task name `{name}` must be letters, digits, `_` or `-` (it prefixes the head's tensor names)"));
        }
        if specs[..i].iter().any(|s| &s.name == name) {
            return Err(arg_err!(OP, "two tasks are named `{name}`"));
        }
        if !matches!(spec.objective, Objective::Classify | Objective::TokenClassify | Objective::Qa | Objective::Mlm) {
            return Err(arg_err!(OP, "task `{name}`: a multi-task run trains classify, token-classify, qa and mlm tasks, not {}", spec.objective));
        }
        let kind = |s: &TaskSpec| s.config["model_type"].as_str().unwrap_or_default().to_string();
        if kind(spec) != kind(&specs[0]) {
            return Err(arg_err!(OP, "task `{name}` is a {} and task `{}` a {}: the tasks share one encoder", kind(spec), specs[0].name, kind(&specs[0])));
        }
    }
    Ok(specs)
}

impl MultiTaskModel {
    /// Loads every task's model from `weights` (a multi-task checkpoint), sharing the encoder.
    /// A tensor no task reads is an error.
    pub fn load(tasks_json: &[u8], weights: &Weights) -> Result<MultiTaskModel> {
        let specs = parse_tasks(tasks_json)?;
        let model_type = specs[0].config["model_type"].as_str().unwrap_or_default();
        let base = base_model_prefix(model_type).ok_or_else(|| arg_err!(OP, "tasks share an encoder (BERT, RoBERTa, …), not a model_type `{model_type}`"))?;
        let shared: Arc<Mutex<HashMap<String, Tensor>>> = Arc::default();
        let mut tasks = Vec::new();
        for spec in specs {
            let config = serde_json::to_vec(&spec.config).map_err(|e| arg_err!(OP, "task `{}`'s config: {e}", spec.name))?;
            let model =
                AutoModel::load(&config, &weights.task(&spec.name, &format!("{base}."), &shared)).map_err(|e| arg_err!(OP, "task `{}`: {e}", spec.name))?;
            tasks.push(Task { spec, model });
        }
        weights.check_all_read("the tasks", "tasks.json", |_| false)?;
        Ok(MultiTaskModel { tasks })
    }

    /// The task `batch` is for.
    pub fn task_of(&self, batch: &Batch) -> Result<&Task> {
        let index = batch.task.ok_or_else(|| arg_err!(OP, "a multi-task model trains on batches that name their task"))?;
        self.tasks.get(index).ok_or_else(|| arg_err!(OP, "a batch is for task {index}, but there are {} tasks", self.tasks.len()))
    }
}

/// Task `name`'s model as a transformers folder's config.json and model.safetensors: the
/// encoder's tensors and the task's head under its own names, out of a multi-task checkpoint.
pub fn task_folder(tasks_json: &[u8], checkpoint: &Checkpoint, name: &str) -> Result<(Vec<u8>, Vec<u8>)> {
    let specs = parse_tasks(tasks_json)?;
    let spec = specs.iter().find(|s| s.name == name).ok_or_else(|| arg_err!(OP, "there is no task `{name}`"))?;
    let head = format!("tasks.{name}.");
    let mut tensors = Vec::new();
    for key in checkpoint.names().filter(|key| checkpoint.is_floating_point(key)) {
        let own = match key.strip_prefix(&head) {
            Some(own) => own.to_string(),
            None if !key.starts_with("tasks.") => key.to_string(),
            None => continue,
        };
        tensors.push((own, key.to_string()));
    }
    let values: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(own, key)| {
            let (values, shape) = checkpoint.to_f32(key)?;
            Ok((own.clone(), shape, bytemuck::cast_slice::<f32, u8>(&values).to_vec()))
        })
        .collect::<Result<_>>()?;
    let entries: Vec<(&str, safetensors::Dtype, &[usize], &[u8])> =
        values.iter().map(|(name, shape, bytes)| (name.as_str(), safetensors::Dtype::F32, shape.as_slice(), bytes.as_slice())).collect();
    let config = serde_json::to_vec_pretty(&spec.config).map_err(|e| arg_err!(OP, "task `{name}`'s config: {e}"))?;
    Ok((config, weights::serialize(&entries)?))
}

/// `--replay-batches` of a multi-task run: `task_order` [steps] (each step's task, an index
/// into tasks.json), and each task's batches in the order they are used, named
/// `<task>.<input>` (`sst2.input_ids` [its steps, batch, seq], …).
pub struct MultiTaskReplay {
    order: Vec<usize>,
    /// Per step: the index of its batch among its task's.
    local: Vec<usize>,
    tasks: Vec<ReplayBatches>,
}

impl MultiTaskReplay {
    pub fn from_bytes(bytes: &[u8], task_names: &[&str]) -> Result<MultiTaskReplay> {
        let mut tensors = replay_tensors(bytes)?;
        let at = tensors.iter().position(|(name, ..)| name == "task_order").ok_or_else(|| replay_err("a multi-task run's batches need `task_order`".into()))?;
        let (_, order, shape) = tensors.remove(at);
        if shape.len() != 1 {
            return Err(replay_err(format!("`task_order` must be [steps], got {shape:?}")));
        }
        let order: Vec<usize> = order
            .iter()
            .map(|&t| {
                usize::try_from(t)
                    .ok()
                    .filter(|&t| t < task_names.len())
                    .ok_or_else(|| replay_err(format!("`task_order` holds {t}, not a task of {}", task_names.len())))
            })
            .collect::<Result<_>>()?;
        let mut tasks = Vec::new();
        for name in task_names {
            let prefix = format!("{name}.");
            let (mine, rest): (Vec<ReplayTensor>, Vec<ReplayTensor>) = tensors.into_iter().partition(|(n, ..)| n.starts_with(&prefix));
            tensors = rest;
            let mine: Vec<ReplayTensor> = mine.into_iter().map(|(n, values, shape)| (n[prefix.len()..].to_string(), values, shape)).collect();
            tasks.push((!mine.is_empty()).then(|| ReplayBatches::from_tensors(mine)).transpose().map_err(|e| replay_err(format!("task `{name}`: {e}")))?);
        }
        if let Some((name, ..)) = tensors.first() {
            return Err(replay_err(format!("`{name}` is no task's (name tensors `<task>.<input>` after tasks.json: {})", task_names.join(", "))));
        }
        let mut used = vec![0; task_names.len()];
        let mut local = Vec::with_capacity(order.len());
        for &task in &order {
            let steps = tasks[task].as_ref().map_or(0, |t| t.steps);
            if used[task] == steps {
                return Err(replay_err(format!("`task_order` takes more batches of task `{}` than its {steps}", task_names[task])));
            }
            local.push(used[task]);
            used[task] += 1;
        }
        let tasks = tasks.into_iter().map(|t| t.unwrap_or_else(ReplayBatches::empty)).collect();
        Ok(MultiTaskReplay { order, local, tasks })
    }
}

impl BatchSource for MultiTaskReplay {
    fn batches(&self) -> Option<usize> {
        Some(self.order.len())
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let step = usize::try_from(index).ok().filter(|&s| s < self.order.len());
        let step = step.ok_or_else(|| arg_err!("replay batches", "step {index} is past the file's {} steps", self.order.len()))?;
        let task = self.order[step];
        Ok(Batch { task: Some(task), ..self.tasks[task].batch(self.local[step])? })
    }
}
