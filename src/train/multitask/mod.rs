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

use std::path::PathBuf;
use std::str::FromStr;

use super::data::{replay_err, replay_tensors, BatchSource, EpochSampler, ReplayBatches, ReplayTensor};
use super::ernie2::StructureTask;
use crate::error::{arg_err, Result, SesameError};
use crate::models::training::{Batch, Objective};

mod model;

pub use model::{multi_task_checkpoint, task_folder, MultiTaskModel, Task};

const OP: &str = "multi-task model";

/// One entry of tasks.json.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    pub objective: Objective,
    /// The config.json of the task's transformers model.
    pub config: serde_json::Value,
    /// ERNIE 2.0's task id, which every token of the task's batches gets as its
    /// `task_type_ids` (a model with task-type embeddings, `use_task_id`, only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type_id: Option<u32>,
}

impl TaskSpec {
    /// Checks the task id against the model's task-type embeddings.
    fn check_task_type(&self) -> Result<()> {
        let Some(id) = self.task_type_id else { return Ok(()) };
        let config = &self.config;
        // ErnieConfig's default: 3 task types.
        let types = (config["use_task_id"].as_bool() == Some(true)).then(|| config["task_type_vocab_size"].as_u64().unwrap_or(3));
        match types {
            Some(types) if u64::from(id) < types => Ok(()),
            Some(types) => Err(arg_err!(OP, "task `{}` has task id {id}, but its model embeds {types} task types", self.name)),
            None => Err(arg_err!(OP, "task `{}` has task id {id}, but its model has no task-type embeddings (ERNIE's use_task_id)", self.name)),
        }
    }
}

/// A task's data in a multi-task run, `NAME=KIND:TRAIN[,EVAL][@STAGE]` on the command line
/// (`sst2=classify:sst2/train.tsv,sst2/dev.tsv`, `caps=capitalization:wiki.txt@2`): KIND an
/// objective whose data the files hold, or an ERNIE 2.0 task drawn from plain text; STAGE the
/// stage it joins a continual multi-task run at (1, the first, by default).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskData {
    pub name: String,
    pub objective: Objective,
    /// The ERNIE 2.0 task whose batches are drawn from the text, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretraining: Option<StructureTask>,
    pub data: PathBuf,
    pub eval_data: Option<PathBuf>,
    /// The stage it joins at, 0 the first.
    #[serde(default)]
    pub stage: usize,
}

impl FromStr for TaskData {
    type Err = SesameError;

    fn from_str(text: &str) -> Result<TaskData> {
        let form = "NAME=KIND:TRAIN_FILE[,EVAL_FILE][@STAGE]";
        let (name, rest) = text.split_once('=').ok_or_else(|| arg_err!(OP, "task `{text}`: expected {form}"))?;
        let (kind, files) = rest.split_once(':').ok_or_else(|| arg_err!(OP, "task `{text}`: expected {form}"))?;
        // `@` and digits at the end: a stage (a path may hold `@` elsewhere).
        let (files, stage) = match files.rsplit_once('@').filter(|(_, stage)| !stage.is_empty() && stage.bytes().all(|b| b.is_ascii_digit())) {
            Some((files, stage)) => {
                let stage = stage
                    .parse::<usize>()
                    .ok()
                    .filter(|&s| s >= 1)
                    .ok_or_else(|| arg_err!(OP, "task `{text}`: the stage after @ is 1, 2, …, not `{stage}`"))?;
                (files, stage - 1)
            }
            None => (files, 0),
        };
        let (data, eval_data) = match files.split_once(',') {
            Some((data, eval)) => (data, Some(PathBuf::from(eval))),
            None => (files, None),
        };
        if data.is_empty() || eval_data.as_ref().is_some_and(|e| e.as_os_str().is_empty()) {
            return Err(arg_err!(OP, "task `{text}`: expected {form}"));
        }
        let (objective, pretraining) = match kind.parse::<StructureTask>() {
            Ok(task) => (task.objective(), Some(task)),
            Err(_) => (
                kind.parse().map_err(|_| {
                    arg_err!(OP, "task `{text}`: `{kind}` is neither an objective (mlm, classify, token-classify, qa) nor an ERNIE 2.0 task (capitalization, sentence-reordering, sentence-distance)")
                })?,
                None,
            ),
        };
        Ok(TaskData { name: name.to_string(), objective, pretraining, data: data.into(), eval_data, stage })
    }
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
        if !matches!(spec.objective, Objective::Mlm | Objective::Classify | Objective::TokenClassify | Objective::Qa) {
            return Err(arg_err!(OP, "task `{name}`: a multi-task run trains mlm, classify, token-classify and qa tasks, not {}", spec.objective));
        }
        spec.check_task_type()?;
        let kind = |s: &TaskSpec| s.config["model_type"].as_str().unwrap_or_default().to_string();
        if kind(spec) != kind(&specs[0]) {
            return Err(arg_err!(OP, "task `{name}` is a {} and task `{}` a {}: the tasks share one encoder", kind(spec), specs[0].name, kind(&specs[0])));
        }
    }
    Ok(specs)
}

/// `--replay-batches` of a multi-task run: `task_order` `[steps]` (each step's task, an index
/// into tasks.json), and each task's batches in the order they are used, named
/// `<task>.<input>` (`sst2.input_ids` `[its steps, batch, seq]`, …).
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

/// A multi-task run's batches drawn from each task's data as MT-DNN draws them (Liu et al.
/// 2019, Algorithm 1): every epoch, all tasks' batches in one shuffled order, so a task is
/// trained on in proportion to its data. (Held out, each task's data is evaluated on its own:
/// [`HeldOut`](super::evaluate::HeldOut).)
pub struct TaskMixture {
    sources: Vec<Box<dyn BatchSource>>,
    /// Where each task's batches start in an epoch's list of all of them, and its count.
    spans: Vec<(usize, usize)>,
    order: EpochSampler,
}

impl TaskMixture {
    /// Training batches: `sources` (a task's data, sampled epoch after epoch) mixed by a
    /// shuffle seeded with `seed`.
    pub fn new(names: &[&str], sources: Vec<Box<dyn BatchSource>>, seed: u64) -> Result<TaskMixture> {
        let mut spans = Vec::new();
        let mut total = 0;
        for (name, source) in names.iter().zip(&sources) {
            let batches =
                source.batches_per_epoch().ok_or_else(|| arg_err!(OP, "task `{name}`: a multi-task run mixes tasks' epochs, and its data has none"))?;
            spans.push((total, batches));
            total += batches;
        }
        if total == 0 {
            return Err(arg_err!(OP, "the tasks have no batches"));
        }
        Ok(TaskMixture { sources, spans, order: EpochSampler::new(total, Some(seed), 1) })
    }
}

impl BatchSource for TaskMixture {
    fn batches(&self) -> Option<usize> {
        None
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let total = self.order.batches_per_epoch() as u64;
        let item = self.order.pick(index)?[0];
        let task = self.spans.iter().position(|&(start, count)| (start..start + count).contains(&item)).expect("the spans cover every item");
        let (start, count) = self.spans[task];
        let local = (index / total) * count as u64 + (item - start) as u64;
        Ok(Batch { task: Some(task), ..self.sources[task].batch(local)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::training::Trainable;
    use crate::weights::{self, Checkpoint, Weights};

    /// A task's data of `per_epoch` batches whose batch i says i in its labels.
    struct Counting {
        per_epoch: usize,
    }

    impl BatchSource for Counting {
        fn batches(&self) -> Option<usize> {
            None
        }

        fn batch(&self, index: u64) -> Result<Batch> {
            Ok(Batch { labels: vec![index as i64], batch: 1, seq: 1, ..Default::default() })
        }

        fn batches_per_epoch(&self) -> Option<usize> {
            Some(self.per_epoch)
        }
    }

    #[test]
    fn each_epoch_mixes_every_batch_of_every_task_once() {
        let sources: Vec<Box<dyn BatchSource>> = vec![Box::new(Counting { per_epoch: 6 }), Box::new(Counting { per_epoch: 3 })];
        let mixture = TaskMixture::new(&["a", "b"], sources, 4).unwrap();
        for epoch in 0..3u64 {
            let mut seen: Vec<(usize, i64)> = (epoch * 9..(epoch + 1) * 9).map(|i| mixture.batch(i).unwrap()).map(|b| (b.task.unwrap(), b.labels[0])).collect();
            let order = seen.clone();
            seen.sort_unstable();
            let e = epoch as i64;
            let want: Vec<(usize, i64)> = (0..6).map(|i| (0, e * 6 + i)).chain((0..3).map(|i| (1, e * 3 + i))).collect();
            assert_eq!(seen, want, "epoch {epoch}: each task's next epoch of batches, once each");
            assert_ne!(order, want, "epoch {epoch}: shuffled across tasks");
        }
        assert_eq!(mixture.batch(4).unwrap(), mixture.batch(4).unwrap(), "a batch depends on its index only");
        let unbounded: Vec<Box<dyn BatchSource>> = vec![Box::new(crate::train::data::TokenStream::new(vec![1, 2, 3, 4], 0, 1, 2).unwrap())];
        let err = TaskMixture::new(&["lm"], unbounded, 0).err().unwrap().to_string();
        assert!(err.contains("task `lm`") && err.contains("epochs"), "{err}");
    }

    #[test]
    fn a_multi_task_checkpoint_shares_the_encoder_and_keeps_a_pooler_only_for_its_readers() {
        let tensor = |names: &[&str]| {
            let one = [0.5f32; 4];
            let entries: Vec<(&str, safetensors::Dtype, &[usize], &[u8])> =
                names.iter().map(|&n| (n, safetensors::Dtype::F32, &[2usize, 2][..], bytemuck::cast_slice::<f32, u8>(&one))).collect();
            weights::serialize(&entries).unwrap()
        };
        let spec = |name: &str, config: serde_json::Value| TaskSpec { name: name.into(), objective: Objective::Classify, config, task_type_id: None };
        let roberta = serde_json::json!({"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"]});
        let files = tensor(&["roberta.embeddings.word_embeddings.weight", "roberta.pooler.dense.weight", "classifier.out_proj.weight", "lm_head.dense.weight"]);
        let (tasks_json, weights) = multi_task_checkpoint(vec![(spec("a", roberta.clone()), files.clone()), (spec("b", roberta), files)]).unwrap();
        let checkpoint = Checkpoint::from_bytes(weights).unwrap();
        let mut names: Vec<&str> = checkpoint.names().collect();
        names.sort_unstable();
        assert_eq!(names, ["roberta.embeddings.word_embeddings.weight", "tasks.a.classifier.out_proj.weight", "tasks.b.classifier.out_proj.weight"]);
        assert_eq!(parse_tasks(&tasks_json).unwrap().len(), 2);
        // A bare BertModel's names get the base prefix; BERT's sequence classifier keeps the pooler.
        let bert = serde_json::json!({"model_type": "bert", "architectures": ["BertForSequenceClassification"]});
        let (_, weights) =
            multi_task_checkpoint(vec![(spec("a", bert), tensor(&["embeddings.word_embeddings.weight", "pooler.dense.weight", "classifier.weight"]))]).unwrap();
        let mut names: Vec<String> = Checkpoint::from_bytes(weights).unwrap().names().map(String::from).collect();
        names.sort_unstable();
        assert_eq!(names, ["bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight", "tasks.a.classifier.weight"]);
    }

    #[test]
    fn a_masked_lm_task_shares_the_encoder_and_ties_its_decoder_to_the_shared_embeddings() {
        use crate::gpu::testing::gpu;
        use crate::models::registry::testing::tiny;
        use crate::models::registry::with_head;
        use crate::models::training::fresh::default_labels;
        use crate::models::training::StepOptions;
        use crate::train::params::Parameters;

        let (config, weights) = tiny("ernie", 1, 8, 12, 30, 1);
        let spec = |name: &str, objective: Objective, config: &[u8], id: u32| TaskSpec {
            name: name.into(),
            objective,
            config: serde_json::from_slice(config).unwrap(),
            task_type_id: Some(id),
        };
        let (mlm_config, mlm) = with_head(Objective::Mlm, &config, weights.clone(), &[], 2).unwrap();
        let (cls_config, cls) = with_head(Objective::Classify, &config, weights, &default_labels(3), 2).unwrap();
        let (tasks_json, safetensors) =
            multi_task_checkpoint(vec![(spec("mlm", Objective::Mlm, &mlm_config, 0), mlm), (spec("order", Objective::Classify, &cls_config, 1), cls)]).unwrap();
        let checkpoint = Checkpoint::from_bytes(safetensors).unwrap();
        let names: Vec<&str> = checkpoint.names().collect();
        assert!(names.contains(&"tasks.mlm.cls.predictions.bias") && names.contains(&"tasks.order.classifier.weight"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("tasks.order.cls") || n.contains("seq_relationship")), "{names:?}");

        let weights = Weights::new(gpu(), &checkpoint).recording();
        let model = MultiTaskModel::load(&tasks_json, &weights).unwrap();
        let params = Parameters::from_weights(&weights).unwrap();
        let embeddings: Vec<&str> = params.list.iter().map(|p| p.name.as_str()).filter(|n| n.contains("word_embeddings")).collect();
        assert_eq!(embeddings, ["ernie.embeddings.word_embeddings.weight"], "one shared table, also the decoder");
        let grads = params.gradients();
        let step = StepOptions { loss_scale: 1.0, dropout: crate::ops::dropout::DropoutStream { seed: 1, batch_index: 0 }, lm_coef: 0.0 };
        let ids: Vec<u32> = (0..12).map(|i| 2 + i % 20).collect();
        // Target 25, an id no input has: only the tied decoder gives its row a gradient.
        let mut labels = vec![-100i64; 12];
        labels[3] = 25;
        let masked = Batch { input_ids: ids.clone(), labels, batch: 2, seq: 6, task: Some(0), ..Default::default() };
        let classified = Batch { input_ids: ids, labels: vec![0, 2], batch: 2, seq: 6, task: Some(1), ..Default::default() };
        for batch in [masked, classified] {
            let loss = model.loss_backward(Objective::MultiTask, &batch, &grads, &step).unwrap();
            let loss = pollster::block_on(loss.to_vec::<f32>()).unwrap()[0];
            assert!(loss.is_finite() && loss > 0.0, "task {:?}: {loss}", batch.task);
        }
        let table = params.list.iter().find(|p| p.name == "ernie.embeddings.word_embeddings.weight").unwrap();
        let grad = pollster::block_on(table.grad.to_vec::<f32>()).unwrap();
        assert!(grad[25 * 8..26 * 8].iter().any(|&g| g != 0.0), "the masked token's target row gets the decoder's gradient");

        let (config, folder) = task_folder(&tasks_json, &checkpoint, "mlm").unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&config).unwrap()["architectures"][0], "ErnieForMaskedLM");
        let exported = Checkpoint::from_bytes(folder).unwrap();
        assert!(exported.contains("cls.predictions.transform.dense.weight") && !exported.names().any(|n| n.starts_with("tasks.")));
    }

    #[test]
    fn task_flags_and_tasks_json_are_checked() {
        let task: TaskData = "sst2=classify:train.tsv,dev.tsv".parse().unwrap();
        assert_eq!((task.name.as_str(), task.objective, task.eval_data, task.stage), ("sst2", Objective::Classify, Some(PathBuf::from("dev.tsv")), 0));
        assert_eq!("ner=token-classify:a.conll".parse::<TaskData>().unwrap().eval_data, None);
        let caps: TaskData = "caps=capitalization:wiki.txt@2".parse().unwrap();
        assert_eq!(
            (caps.objective, caps.pretraining, caps.data, caps.stage),
            (Objective::TokenClassify, Some(StructureTask::Capitalization), PathBuf::from("wiki.txt"), 1)
        );
        assert_eq!("a=mlm:runs@v2/x.txt".parse::<TaskData>().unwrap().data, PathBuf::from("runs@v2/x.txt"), "an @ inside a path");
        for bad in ["sst2", "sst2=classify", "sst2=nope:x.tsv", "sst2=classify:x.tsv,", "caps=capitalization:x.txt@0"] {
            assert!(bad.parse::<TaskData>().is_err(), "{bad}");
        }
        let config = serde_json::json!({"model_type": "bert"});
        let tasks = |specs: serde_json::Value| parse_tasks(specs.to_string().as_bytes()).err().map(|e| e.to_string()).unwrap_or_default();
        let one = |name: &str, objective: &str| serde_json::json!({"name": name, "objective": objective, "config": config});
        assert!(tasks(serde_json::json!([])).contains("no task"));
        assert!(tasks(serde_json::json!([one("a", "classify"), one("a", "qa")])).contains("two tasks are named `a`"));
        assert!(tasks(serde_json::json!([one("a.b", "classify")])).contains("letters, digits"));
        assert!(tasks(serde_json::json!([one("a", "clm")])).contains("not clm"));
        assert_eq!(tasks(serde_json::json!([one("a", "mlm"), one("b", "classify")])), "", "a masked-LM task beside a classifier");
        let gpt = serde_json::json!({"name": "b", "objective": "classify", "config": {"model_type": "gpt2"}});
        assert!(tasks(serde_json::json!([one("a", "classify"), gpt])).contains("share one encoder"));
    }
}
