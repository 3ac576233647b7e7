//! The multi-task model: every task's transformers model over the shared encoder tensors,
//! its checkpoint made from single-task ones, and one task's model as a folder of its own.
//! (Natively only: it reaches the families' trainings through the registry.)

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{parse_tasks, TaskSpec, OP};
use crate::error::{arg_err, Result};
use crate::models::registry::{family, family_of};
use crate::models::training::{not_trained, Batch, FamilyTraining, Objective, StepOptions, Trainable};
use crate::models::ModelOutput;
use crate::nn::Gradients;
use crate::tensor::Tensor;
use crate::weights::{self, Checkpoint, Weights};

/// A task: its objective and its model, whose encoder tensors every task shares.
pub struct Task {
    pub spec: TaskSpec,
    pub model: Box<dyn Trainable>,
}

pub struct MultiTaskModel {
    pub tasks: Vec<Task>,
}

/// The training of the encoder family of `model_type`, whose encoder a multi-task model's
/// tasks share, and its base model's prefix (`bert`).
fn shared_encoder(model_type: &str) -> Result<(&'static dyn FamilyTraining, &'static str)> {
    let training = family(model_type).ok().and_then(|f| f.training).filter(|t| t.objectives().contains(&Objective::MultiTask));
    training
        .and_then(|t| Some((t, t.base_model_prefix()?)))
        .ok_or_else(|| arg_err!(OP, "tasks share an encoder (BERT, RoBERTa, …), not a model_type `{model_type}`"))
}

impl MultiTaskModel {
    /// Loads every task's model from `weights` (a multi-task checkpoint), sharing the encoder.
    /// A tensor no task reads is an error.
    pub fn load(tasks_json: &[u8], weights: &Weights) -> Result<MultiTaskModel> {
        let specs = parse_tasks(tasks_json)?;
        let model_type = specs[0].config["model_type"].as_str().unwrap_or_default();
        let (_, base) = shared_encoder(model_type)?;
        let shared: Arc<Mutex<HashMap<String, Tensor>>> = Arc::default();
        let mut tasks = Vec::new();
        for spec in specs {
            let config = serde_json::to_vec(&spec.config).map_err(|e| arg_err!(OP, "task `{}`'s config: {e}", spec.name))?;
            let model = family_of(&config)
                .and_then(|family| {
                    family.load_trainable(&config, &weights.sharing(&format!("tasks.{}.", spec.name), &format!("{base}."), &shared), spec.objective)
                })
                .map_err(|e| arg_err!(OP, "task `{}`: {e}", spec.name))?;
            tasks.push(Task { spec, model });
        }
        weights.check_all_read("the tasks", "tasks.json", |_| false)?;
        Ok(MultiTaskModel { tasks })
    }

    /// The task `batch` is for, and the batch as its model reads it: with the task's id as
    /// every token's `task_type_ids` when the task has one (and the batch none).
    pub fn task_of<'b>(&self, batch: &'b Batch) -> Result<(&Task, Cow<'b, Batch>)> {
        let index = batch.task.ok_or_else(|| arg_err!(OP, "a multi-task model trains on batches that name their task"))?;
        let task = self.tasks.get(index).ok_or_else(|| arg_err!(OP, "a batch is for task {index}, but there are {} tasks", self.tasks.len()))?;
        Ok(match task.spec.task_type_id {
            Some(id) if batch.task_type_ids.is_none() => (task, Cow::Owned(Batch { task_type_ids: Some(vec![id; batch.input_ids.len()]), ..batch.clone() })),
            _ => (task, Cow::Borrowed(batch)),
        })
    }
}

/// A multi-task model trains with objective multi-task: each batch by its task's objective,
/// through its task's head.
impl Trainable for MultiTaskModel {
    fn architecture(&self) -> &str {
        "a multi-task model (tasks.json)"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::MultiTask]
    }

    /// Each task's model must train with its task's objective.
    fn check(&self, objective: Objective) -> Result<()> {
        if objective != Objective::MultiTask {
            return Err(arg_err!("train", "a multi-task model (tasks.json) trains with objective multi-task, not {objective}"));
        }
        self.tasks.iter().try_for_each(|task| task.model.check(task.spec.objective).map_err(|e| arg_err!("train", "task `{}`: {e}", task.spec.name)))
    }

    fn max_positions(&self) -> Option<usize> {
        self.tasks.iter().filter_map(|t| t.model.max_positions()).min()
    }

    /// One task's batch at a time.
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        self.tasks.iter().map(|t| t.model.activation_values(batch, seq)).max().unwrap_or(0)
    }

    fn tasks(&self) -> Vec<(String, Objective)> {
        self.tasks.iter().map(|t| (t.spec.name.clone(), t.spec.objective)).collect()
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        if objective != Objective::MultiTask {
            return Err(not_trained(self.architecture(), &self.objectives(), objective));
        }
        let (task, batch) = self.task_of(batch)?;
        task.model.loss_backward(task.spec.objective, &batch, grads, step)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        let (task, batch) = self.task_of(batch)?;
        task.model.forward(task.spec.objective, &batch)
    }

    fn loss_of(&self, objective: Objective, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        if objective != Objective::MultiTask {
            return Err(not_trained(self.architecture(), &self.objectives(), objective));
        }
        let (task, batch) = self.task_of(batch)?;
        task.model.loss_of(task.spec.objective, out, &batch)
    }
}

/// Task `name`'s model as a transformers folder's config.json and model.safetensors: the
/// encoder's tensors and the task's head under its own names, out of a multi-task checkpoint.
pub fn task_folder(tasks_json: &[u8], checkpoint: &Checkpoint, name: &str) -> Result<(Vec<u8>, Vec<u8>)> {
    let specs = parse_tasks(tasks_json)?;
    let spec = specs.iter().find(|s| s.name == name).ok_or_else(|| arg_err!(OP, "there is no task `{name}`"))?;
    let head = format!("tasks.{name}.");
    // The shared pooler goes only where the task's transformers class has one.
    let model_type = spec.config["model_type"].as_str().unwrap_or_default();
    let (training, base) = shared_encoder(model_type)?;
    let pooler = format!("{base}.pooler");
    let keeps_pooler = training.reads_pooler(spec.config["architectures"][0].as_str().unwrap_or_default());
    let mut tensors = Vec::new();
    for key in checkpoint.names().filter(|key| checkpoint.is_floating_point(key)) {
        let own = match key.strip_prefix(&head) {
            Some(own) => own.to_string(),
            None if key.starts_with(&pooler) && !keeps_pooler => continue,
            None if !key.starts_with("tasks.") => key.to_string(),
            None => continue,
        };
        tensors.push((own, key.to_string()));
    }
    // A task trained with task id k reads row k of the task-type embeddings; a single-task
    // model is run with id 0 (transformers' default), so row k moves to row 0 (and row 0 to k).
    let task_types = format!("{base}.embeddings.task_type_embeddings.weight");
    let values: Vec<(String, Vec<usize>, Vec<f32>)> = tensors
        .iter()
        .map(|(own, key)| {
            let (mut values, shape) = checkpoint.to_f32(key)?;
            if let (Some(id), true) = (spec.task_type_id.filter(|&id| id > 0), task_types == *key) {
                let (width, id) = (shape[1], id as usize);
                if id < shape[0] {
                    let (first, rest) = values.split_at_mut(id * width);
                    first[..width].swap_with_slice(&mut rest[..width]);
                }
            }
            Ok((own.clone(), shape, values))
        })
        .collect::<Result<_>>()?;
    let config = serde_json::to_vec_pretty(&spec.config).map_err(|e| arg_err!(OP, "task `{name}`'s config: {e}"))?;
    Ok((config, weights::serialize_f32(&values)?))
}

/// A multi-task folder's tasks.json and model.safetensors made from one checkpoint with a
/// head per task: `tasks` holds each task's spec (its `config` the task model's config.json)
/// and the checkpoint with its head (what the family's `with_head` makes of the same encoder). The
/// encoder is taken from the first task's (a pooler one adds is kept), each head's tensors go
/// under `tasks.<name>.`; other heads of the checkpoint (a masked-LM head a classify task's
/// checkpoint carries) are dropped.
pub fn multi_task_checkpoint(tasks: Vec<(TaskSpec, Vec<u8>)>) -> Result<(Vec<u8>, Vec<u8>)> {
    let specs: Vec<TaskSpec> = tasks.iter().map(|(spec, _)| spec.clone()).collect();
    let tasks_json = serde_json::to_vec_pretty(&specs).map_err(|e| arg_err!(OP, "tasks.json: {e}"))?;
    parse_tasks(&tasks_json)?;
    let model_type = specs[0].config["model_type"].as_str().unwrap_or_default();
    let (training, base) = shared_encoder(model_type)?;
    // The pooler only when a task's class reads it (RoBERTa's heads, for one, never do).
    let pooled = specs.iter().any(|s| training.reads_pooler(s.config["architectures"][0].as_str().unwrap_or_default()));
    let mut entries: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    for (spec, safetensors) in tasks {
        let checkpoint = Checkpoint::from_bytes(safetensors)?;
        // A bare base model (BertModel's save_pretrained) names its tensors without the prefix.
        let prefixed = checkpoint.contains(&format!("{base}.embeddings.word_embeddings.weight"));
        for name in checkpoint.names().filter(|n| checkpoint.is_floating_point(n)) {
            let root = name.split('.').next().unwrap_or_default();
            let key = if training.head_roots(spec.objective).contains(&root) {
                format!("tasks.{}.{name}", spec.name)
            } else if name.starts_with(&format!("{base}.")) {
                name.to_string()
            } else if !prefixed {
                format!("{base}.{name}")
            } else {
                continue;
            };
            let shared_again = key.starts_with(&format!("{base}.")) && entries.iter().any(|(n, ..)| *n == key);
            if shared_again || (!pooled && key.starts_with(&format!("{base}.pooler"))) {
                continue;
            }
            let (values, shape) = checkpoint.to_f32(name)?;
            entries.push((key, shape, values));
        }
    }
    Ok((tasks_json, weights::serialize_f32(&entries)?))
}
