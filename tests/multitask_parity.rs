//! Multi-task fine-tuning (MT-DNN) against PyTorch: tests/fixtures/train/mtdnn-bert, written by
//! tests/reference/make_multitask_fixtures.py — one BERT encoder shared by a sentence
//! classifier and a token classifier, 20 steps whose batches are drawn from either task. The
//! step-0 gradient of every parameter (the encoder's and both heads') and the 20 losses match
//! PyTorch's, and the final weights too.

mod common;

use common::train::{compare_parameters, dir, run_settings, scalar, trajectory};
use common::{gpu, read};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::BatchSource;
use sesame::train::multitask::{parse_tasks, MultiTaskModel, MultiTaskReplay};
use sesame::train::objective::{Objective, StepOptions, TrainModel};
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

const FIXTURE: &str = "mtdnn-bert";

fn model() -> (TrainModel, Parameters) {
    let init = dir(FIXTURE).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = MultiTaskModel::load(&read(&init, "tasks.json"), &weights).unwrap();
    (TrainModel::MultiTask(model), Parameters::from_weights(&weights).unwrap())
}

fn batches() -> MultiTaskReplay {
    let tasks = parse_tasks(&read(&dir(FIXTURE).join("init"), "tasks.json")).unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    MultiTaskReplay::from_bytes(&read(&dir(FIXTURE), "batches.safetensors"), &names).unwrap()
}

#[test]
fn the_tasks_share_the_encoder_and_keep_their_heads() {
    let (model, params) = model();
    let TrainModel::MultiTask(m) = &model else { unreachable!() };
    assert_eq!(m.tasks.iter().map(|t| t.spec.name.as_str()).collect::<Vec<_>>(), ["sentiment", "tags"]);
    // One parameter per tensor of the checkpoint: the encoder's loaded once for both tasks.
    let checkpoint = Checkpoint::from_bytes(read(&dir(FIXTURE).join("init"), "model.safetensors")).unwrap();
    assert_eq!(params.list.len(), checkpoint.names().count());
    assert!(params.list.iter().any(|p| p.name == "tasks.tags.classifier.weight") && params.list.iter().any(|p| p.name == "bert.pooler.dense.weight"));
    Objective::MultiTask.check(&model).unwrap();
    let err = Objective::Classify.check(&model).unwrap_err().to_string();
    assert!(err.contains("multi-task"), "{err}");
}

#[test]
fn multi_task_gradients_match_pytorch() {
    let (model, params) = model();
    let batch = batches().batch(0).unwrap();
    assert_eq!(batch.task, Some(0));
    let options = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: trajectory(FIXTURE).dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
    let loss = Objective::MultiTask.loss_backward(&model, &batch, &params.gradients(), &options).unwrap();
    let (got, want) = (scalar(&loss)[0], trajectory(FIXTURE).steps[0].loss);
    assert!((got - want).abs() <= 1e-5 * want, "loss {got} vs PyTorch {want}");
    let grads = Checkpoint::from_bytes(read(&dir(FIXTURE), "grads.safetensors")).unwrap();
    compare_parameters("mtdnn gradient", &params, Part::Grad, &grads, 1e-4);
}

#[test]
fn twenty_multi_task_steps_match_pytorch() {
    let (model, params) = model();
    let source = batches();
    let first = source.batch(0).unwrap();
    let settings = run_settings(FIXTURE, Objective::MultiTask, first.batch, first.seq);
    let mut trainer = Trainer::new(gpu(), model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
    for (step, want) in trajectory(FIXTURE).steps.iter().enumerate() {
        let report = trainer.step(&source as &dyn BatchSource).unwrap();
        eprintln!("step {step}: loss {:.6} (PyTorch {:.6})", report.loss, want.loss);
        assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "step {step}: loss {} vs PyTorch {}", report.loss, want.loss);
        assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "step {step}: grad norm {}", report.grad_norm);
    }
    let last = Checkpoint::from_bytes(read(&dir(FIXTURE).join("final"), "model.safetensors")).unwrap();
    compare_parameters("mtdnn after 20 steps", trainer.params(), Part::Value, &last, 1e-4);
}

#[test]
fn sesame_train_replays_the_multi_task_run_and_writes_each_tasks_model() {
    let out = common::train::temp_dir("mtdnn");
    let log = out.join("log.jsonl");
    let mut args: Vec<String> = ["train", "--objective", "multi-task"].map(String::from).to_vec();
    args.extend(common::train::pytorch_run_args(FIXTURE));
    args.extend(["--seed", &trajectory(FIXTURE).dropout_seed.to_string(), "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()].map(String::from));
    let (ok, _, err) = common::train::run(&args);
    assert!(ok, "{err}");
    let losses = common::train::logged_losses(&log);
    for ((step, loss), want) in losses.iter().zip(&trajectory(FIXTURE).steps) {
        assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "step {step}: loss {loss} vs PyTorch {}", want.loss);
    }
    assert_eq!(losses.len(), 20);
    // Each task's model is a transformers folder: the encoder and its head under their own
    // names, the final weights PyTorch reached.
    let last = Checkpoint::from_bytes(read(&dir(FIXTURE).join("final"), "model.safetensors")).unwrap();
    for (task, architecture) in [("sentiment", "BertForSequenceClassification"), ("tags", "BertForTokenClassification")] {
        let folder = out.join("tasks").join(task);
        let config: serde_json::Value = serde_json::from_slice(&read(&folder, "config.json")).unwrap();
        assert_eq!(config["architectures"][0], architecture);
        let saved = Checkpoint::from_bytes(read(&folder, "model.safetensors")).unwrap();
        for name in saved.names() {
            let key = if name.starts_with("bert.") { name.to_string() } else { format!("tasks.{task}.{name}") };
            let (got, want) = (saved.to_f32(name).unwrap().0, last.to_f32(&key).unwrap().0);
            let largest = want.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-4 * largest), "{task}: {name}");
        }
        assert!(saved.contains("classifier.weight") && !saved.names().any(|n| n.starts_with("tasks.")), "{task}");
        sesame::models::auto::LoadedModel::load(gpu(), &folder, false).unwrap_or_else(|e| panic!("{task}: {e}"));
    }
    // A multi-task folder trains with objective multi-task only, and that objective with one only.
    let mut wrong = args.clone();
    wrong[2] = "classify".into();
    let (ok, _, err) = common::train::run(&wrong);
    assert!(!ok && err.contains("multi-task"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}
