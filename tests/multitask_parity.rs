//! Multi-task training against PyTorch. MT-DNN's fine-tuning: tests/fixtures/train/mtdnn-bert,
//! written by tests/reference/make_multitask_fixtures.py — one BERT encoder shared by a
//! sentence classifier and a token classifier, 20 steps whose batches are drawn from either
//! task. ERNIE 2.0's continual pretraining: tests/fixtures/train/ernie2, written by
//! tests/reference/make_ernie2_fixtures.py — one ERNIE encoder shared by a masked LM (its
//! decoder the shared word embeddings), a capitalization tagger and the sentence-reordering
//! and sentence-distance classifiers, each task with its task id, added in three stages. For
//! each, the step-0 gradient of every parameter (the encoder's and every head's) and the 20
//! losses match PyTorch's, and the final weights too.

mod common;

use common::train::{
    compare_parameters, dir, evaluate, flags, pytorch_run_args, refused, run_replays_the_reference_steps, run_settings, scalar, temp_dir, train, trajectory,
    with,
};
use common::{gpu, read};
use sesame::models::training::{Objective, StepOptions, Trainable};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::BatchSource;
use sesame::train::multitask::{parse_tasks, MultiTaskModel, MultiTaskReplay};
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

const FIXTURE: &str = "mtdnn-bert";

const ERNIE2: &str = "ernie2";

fn model(fixture: &str) -> (MultiTaskModel, Parameters) {
    let init = dir(fixture).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = MultiTaskModel::load(&read(&init, "tasks.json"), &weights).unwrap();
    (model, Parameters::from_weights(&weights).unwrap())
}

fn batches(fixture: &str) -> MultiTaskReplay {
    let tasks = parse_tasks(&read(&dir(fixture).join("init"), "tasks.json")).unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    MultiTaskReplay::from_bytes(&read(&dir(fixture), "batches.safetensors"), &names).unwrap()
}

#[test]
fn the_tasks_share_the_encoder_and_keep_their_heads() {
    let (model, params) = model(FIXTURE);
    let m = &model;
    assert_eq!(m.tasks.iter().map(|t| t.spec.name.as_str()).collect::<Vec<_>>(), ["sentiment", "tags"]);
    // One parameter per tensor of the checkpoint: the encoder's loaded once for both tasks.
    let checkpoint = Checkpoint::from_bytes(read(&dir(FIXTURE).join("init"), "model.safetensors")).unwrap();
    assert_eq!(params.list.len(), checkpoint.names().count());
    assert!(params.list.iter().any(|p| p.name == "tasks.tags.classifier.weight") && params.list.iter().any(|p| p.name == "bert.pooler.dense.weight"));
    model.check(Objective::MultiTask).unwrap();
    let err = model.check(Objective::Classify).unwrap_err().to_string();
    assert!(err.contains("multi-task"), "{err}");
}

/// Step 0's loss and every parameter's gradient against PyTorch's.
fn gradients_match_pytorch(fixture: &str) {
    let (model, params) = model(fixture);
    let batch = batches(fixture).batch(0).unwrap();
    assert_eq!(batch.task, Some(0));
    let options = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: trajectory(fixture).dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
    let loss = model.loss_backward(Objective::MultiTask, &batch, &params.gradients(), &options).unwrap();
    let (got, want) = (scalar(&loss)[0], trajectory(fixture).steps[0].loss);
    assert!((got - want).abs() <= 1e-5 * want, "loss {got} vs PyTorch {want}");
    let grads = Checkpoint::from_bytes(read(&dir(fixture), "grads.safetensors")).unwrap();
    compare_parameters(&format!("{fixture} gradient"), &params, Part::Grad, &grads, 1e-4);
}

/// The 20 replayed steps' losses and grad norms, and the final weights, against PyTorch's.
fn twenty_steps_match_pytorch(fixture: &str) {
    let (model, params) = model(fixture);
    let source = batches(fixture);
    let first = source.batch(0).unwrap();
    let settings = run_settings(fixture, Objective::MultiTask, first.batch, first.seq);
    let mut trainer = Trainer::new(gpu(), Box::new(model), params, ModelFolder { files: Vec::new() }, settings).unwrap();
    for (step, want) in trajectory(fixture).steps.iter().enumerate() {
        let report = pollster::block_on(trainer.step(&source as &dyn BatchSource)).unwrap();
        eprintln!("step {step}: loss {:.6} (PyTorch {:.6})", report.loss, want.loss);
        assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "step {step}: loss {} vs PyTorch {}", report.loss, want.loss);
        assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "step {step}: grad norm {}", report.grad_norm);
    }
    let last = Checkpoint::from_bytes(read(&dir(fixture).join("final"), "model.safetensors")).unwrap();
    compare_parameters(&format!("{fixture} after 20 steps"), trainer.params(), Part::Value, &last, 1e-4);
}

#[test]
fn multi_task_gradients_match_pytorch() {
    gradients_match_pytorch(FIXTURE);
}

#[test]
fn twenty_multi_task_steps_match_pytorch() {
    twenty_steps_match_pytorch(FIXTURE);
}

#[test]
fn ernie_2_gradients_match_pytorch() {
    gradients_match_pytorch(ERNIE2);
}

#[test]
fn twenty_ernie_2_steps_across_three_stages_match_pytorch() {
    twenty_steps_match_pytorch(ERNIE2);
}

#[test]
fn a_run_replays_the_multi_task_run_and_writes_each_tasks_model() {
    let out = temp_dir("mtdnn");
    run_replays_the_reference_steps(FIXTURE, "multi-task", &out);
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
        // BertForTokenClassification has no pooler; BertForSequenceClassification reads it.
        assert_eq!(saved.contains("bert.pooler.dense.weight"), task == "sentiment", "{task}");
        sesame::models::auto::LoadedModel::load(gpu(), &folder, false).unwrap_or_else(|e| panic!("{task}: {e}"));
    }
    // A multi-task folder trains with objective multi-task only, and that objective with one only.
    let mut wrong = flags(&["--objective", "classify", "--out", out.join("bad").to_str().unwrap()]);
    wrong.extend(pytorch_run_args(FIXTURE));
    let err = refused(&wrong);
    assert!(err.contains("multi-task"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_encoder_fine_tunes_on_three_tasks_mixed_and_each_is_evaluated() {
    use common::train::{sentiment_tsv, tagged_conll};
    let out = temp_dir("mtdnn-data");
    // Pairwise: a neutral first sentence, and the second's sentiment as the label.
    let pairs = |rows: usize, seed: u64| {
        let neutral = ["the", "old", "mill", "river", "on", "mat"];
        let mut next = common::train::lcg(seed);
        let rows = sentiment_tsv(rows, seed)
            .lines()
            .skip(1)
            .map(|b| format!("{}\t{b}", (0..3).map(|_| neutral[next(6)]).collect::<Vec<_>>().join(" ")))
            .collect::<Vec<_>>();
        std::iter::once("sentence1\tsentence2\tlabel".to_string()).chain(rows).collect::<Vec<_>>().join("\n")
    };
    let files = [
        ("sst.tsv", sentiment_tsv(320, 1)),
        ("sst-dev.tsv", sentiment_tsv(80, 2)),
        ("tags.conll", tagged_conll(320, 1)),
        ("tags-dev.conll", tagged_conll(40, 2)),
        ("pairs.tsv", pairs(320, 3)),
        ("pairs-dev.tsv", pairs(80, 4)),
    ];
    for (name, text) in &files {
        std::fs::write(out.join(name), text).unwrap();
    }
    let path = |name: &str| out.join(name).to_str().unwrap().to_string();
    let init = common::fixture("bert", "BertModel");
    let run_dir = out.join("run");
    #[rustfmt::skip]
    let args = |extra: &[&str]| {
        let mut args = flags(&["--objective", "multi-task", "--model-init", init.to_str().unwrap(),
            "--task", &format!("sentiment=classify:{},{}", path("sst.tsv"), path("sst-dev.tsv")),
            "--task", &format!("tags=token-classify:{},{}", path("tags.conll"), path("tags-dev.conll")),
            "--task", &format!("pairs=classify:{},{}", path("pairs.tsv"), path("pairs-dev.tsv")),
            "--eval-every", "120", "--eval-batches", "100", "--dropout", "0", "--steps", "240", "--batch-size", "16", "--lr", "3e-3",
            "--warmup", "5", "--seed", "1", "--checkpoint-every", "120", "--out", run_dir.to_str().unwrap()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let whole_run = train(&args(&[])).unwrap();
    assert_eq!(whole_run.steps.len(), 240);
    // Back to step 120: the mixture resumes with the same batches, so the same losses.
    std::fs::remove_dir_all(run_dir.join("checkpoint-000240")).unwrap();
    let resumed = train(&args(&["--resume"])).unwrap();
    assert!(resumed.resumed_from.as_ref().is_some_and(|from| from.ends_with("checkpoint-000120")), "{:?}", resumed.resumed_from);
    assert_eq!(resumed.losses(), whole_run.losses()[120..]);
    let evaluations = resumed.evaluation_lines();
    let last = evaluations.iter().rev().find(|l| l["eval_sentiment_accuracy"].is_number()).unwrap();
    eprintln!("held-out after 240 mixed steps: {last}");
    assert!(last["eval_sentiment_accuracy"].as_f64().unwrap() >= 0.9, "{last}");
    assert!(last["eval_tags_accuracy"].as_f64().unwrap() >= 0.95, "{last}");
    assert!(last["eval_pairs_accuracy"].as_f64().unwrap() >= 0.8, "{last}");
    assert!(last["eval_sentiment_loss"].is_number() && last["eval_tags_loss"].is_number());
    // The multi-task folder and each task's transformers folder.
    let tasks: serde_json::Value = serde_json::from_slice(&read(&run_dir, "tasks.json")).unwrap();
    assert_eq!(tasks[1]["config"]["id2label"], serde_json::json!({"0": "B-ANIMAL", "1": "B-COLOUR", "2": "O"}));
    let tagger = sesame::models::auto::LoadedModel::load(gpu(), &run_dir.join("tasks/tags"), false).unwrap();
    // Six words, as every training sentence has.
    let tags: Vec<String> = pollster::block_on(sesame::classify::classify_tokens(&tagger, "the red dog sat on mat", &[]))
        .unwrap()
        .into_iter()
        .map(|t| format!("{} {}", t.word, t.entity))
        .collect();
    assert_eq!(tags, ["the O", "red B-COLOUR", "dog B-ANIMAL", "sat O", "on O", "mat O"]);
    // Scored alone on each task's file; bad task flags refused before any step.
    let folder = run_dir.to_str().unwrap().to_string();
    #[rustfmt::skip]
    let eval = flags(&["--objective", "multi-task", "--model-init", &folder, "--batch-size", "16",
        "--task", &format!("sentiment=classify:{}", path("sst-dev.tsv")), "--task", &format!("tags=token-classify:{}", path("tags-dev.conll")),
        "--task", &format!("pairs=classify:{}", path("pairs-dev.tsv"))]);
    let scores = evaluate(&eval).unwrap();
    assert!(scores["eval_sentiment_accuracy"].as_f64().unwrap() >= 0.9 && scores["eval_tags_accuracy"].is_number(), "{scores}");
    for (task, says) in [
        (format!("sentiment=qa:{}", path("sst.tsv")), "a classify task in tasks.json, not qa"),
        (format!("other=classify:{}", path("sst.tsv")), "not a task of the model's tasks.json"),
        ("sentiment".to_string(), "NAME=KIND:TRAIN_FILE"),
    ] {
        #[rustfmt::skip]
        let bad = flags(&["--objective", "multi-task", "--model-init", &folder, "--task", &format!("tags=token-classify:{}", path("tags.conll")),
            "--task", &format!("pairs=classify:{}", path("pairs.tsv")), "--task", &task, "--steps", "1", "--out", &path("bad")]);
        let err = refused(&bad);
        assert!(err.contains(says), "{task}: {err}");
    }
    let err = refused(&flags(&[
        "--objective",
        "classify",
        "--model-init",
        init.to_str().unwrap(),
        "--task",
        "a=classify:x.tsv",
        "--data",
        "x.tsv",
        "--out",
        &path("bad"),
    ]));
    assert!(err.contains("--task"), "{err}");
    // Each task names its own files: --data and --eval-data would go unread.
    #[rustfmt::skip]
    let err = refused(&flags(&["--objective", "multi-task", "--model-init", &folder, "--task", &format!("sentiment=classify:{}", path("sst.tsv")),
        "--eval-data", &path("sst-dev.tsv"), "--out", &path("bad")]));
    assert!(err.contains("cannot be used with '--eval-data"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ernie_tasks_get_their_task_ids_in_the_task_type_embeddings() {
    use common::train::{sentiment_tsv, tagged_conll};
    let out = temp_dir("mtdnn-ernie");
    std::fs::write(out.join("sst.tsv"), sentiment_tsv(40, 1)).unwrap();
    std::fs::write(out.join("tags.conll"), tagged_conll(40, 1)).unwrap();
    let path = |name: &str| out.join(name).to_str().unwrap().to_string();
    let init = dir("ernie-nsp").join("init");
    let run = |tasks: &[String]| {
        let mut args =
            flags(&["--objective", "multi-task", "--model-init", init.to_str().unwrap(), "--steps", "2", "--batch-size", "4", "--out", &path("run")]);
        for task in tasks {
            args.extend(["--task".to_string(), task.clone()]);
        }
        args
    };
    let (sst, tags) = (format!("sentiment=classify:{}", path("sst.tsv")), format!("tags=token-classify:{}", path("tags.conll")));
    train(&run(&[sst, tags])).unwrap();
    let tasks_json = read(&out.join("run"), "tasks.json");
    let specs = parse_tasks(&tasks_json).unwrap();
    assert_eq!(specs.iter().map(|s| s.task_type_id).collect::<Vec<_>>(), [Some(0), Some(1)], "ERNIE 2.0: a task id per task");
    // The tags task's batches read task id 1 at every token.
    let checkpoint = Checkpoint::from_bytes(read(&out.join("run"), "model.safetensors")).unwrap();
    let model = MultiTaskModel::load(&tasks_json, &Weights::new(gpu(), &checkpoint)).unwrap();
    let batch = sesame::models::training::Batch { input_ids: vec![2, 5, 6, 3], task: Some(1), batch: 1, seq: 4, ..Default::default() };
    let (task, read_as) = model.task_of(&batch).unwrap();
    assert_eq!((task.spec.name.as_str(), read_as.task_type_ids.as_deref()), ("tags", Some(&[1u32, 1, 1, 1][..])));
    // Exported alone, the tags model reads its task's row as task type 0, the default.
    let exported = Checkpoint::from_bytes(read(&out.join("run/tasks/tags"), "model.safetensors")).unwrap();
    let name = "ernie.embeddings.task_type_embeddings.weight";
    let ((shared, shape), (own, _)) = (checkpoint.to_f32(name).unwrap(), exported.to_f32(name).unwrap());
    let width = shape[1];
    assert_eq!((&own[..width], &own[width..2 * width]), (&shared[width..2 * width], &shared[..width]));
    assert_eq!(&own[2 * width..], &shared[2 * width..]);
    // Three task types: a fourth task has no id to take.
    let more: Vec<String> = (0..4).map(|i| format!("t{i}=classify:{}", path("sst.tsv"))).collect();
    let err = refused(&run(&more));
    assert!(err.contains("task id 3") && err.contains("3 task types"), "{err}");
    // A task id on a model without task-type embeddings is refused.
    let mut bert_tasks: serde_json::Value = serde_json::from_slice(&read(&dir(FIXTURE).join("init"), "tasks.json")).unwrap();
    bert_tasks[0]["task_type_id"] = 0.into();
    let err = parse_tasks(bert_tasks.to_string().as_bytes()).unwrap_err().to_string();
    assert!(err.contains("no task-type embeddings"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// ERNIE 2.0's continual multi-task pretraining from plain text: knowledge-masked LM from the
/// first stage, capitalization prediction and sentence distance joining at the second, each
/// task with its id; every task evaluated on its own held-out draws and exported alone.
#[test]
fn ernie_2_pretrains_in_stages_on_tasks_drawn_from_text() {
    let out = temp_dir("ernie2-stages");
    let words = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "park", "saw", "big", "red", "house", "tree", "bird", "river", "mill", "children"];
    let mut next = common::train::lcg(9);
    let mut sentence = || {
        let mut sentence: Vec<String> = (0..4 + next(4)).map(|_| words[next(words.len())].to_string()).collect();
        for (i, word) in sentence.iter_mut().enumerate() {
            if i == 0 || next(4) == 0 {
                *word = word[..1].to_uppercase() + &word[1..];
            }
        }
        sentence.join(" ") + " ."
    };
    let documents: Vec<String> = (0..40).map(|_| (0..5).map(|_| sentence()).collect::<Vec<_>>().join(" ")).collect();
    std::fs::write(out.join("corpus.txt"), documents.join("\n\n")).unwrap();
    let corpus = out.join("corpus.txt").to_str().unwrap().to_string();
    let run = out.join("run");
    let init = dir("ernie-nsp").join("init");
    #[rustfmt::skip]
    let args = flags(&["--objective", "multi-task", "--model-init", init.to_str().unwrap(),
        "--task", &format!("mlm=mlm:{corpus}"), "--task", &format!("caps=capitalization:{corpus}@2"), "--task", &format!("distance=sentence-distance:{corpus}@2"),
        "--stage-steps", "4", "--steps", "12", "--batch-size", "4", "--seq-len", "32", "--lr", "1e-3", "--eval-every", "12", "--eval-batches", "2",
        "--out", run.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let specs = parse_tasks(&read(&run, "tasks.json")).unwrap();
    let kinds: Vec<(Objective, Option<u32>)> = specs.iter().map(|s| (s.objective, s.task_type_id)).collect();
    assert_eq!(kinds, [(Objective::Mlm, Some(0)), (Objective::TokenClassify, Some(1)), (Objective::Classify, Some(2))]);
    assert_eq!(specs[1].config["id2label"], serde_json::json!({"0": "lowercase", "1": "capitalized"}));
    assert_eq!(specs[2].config["id2label"].as_object().unwrap().len(), 3, "next, same document, other document");
    let losses = trained.losses();
    assert!(losses.len() == 12 && losses.iter().all(|(_, l)| l.is_finite()), "{losses:?}");
    let eval = trained.first_evaluation();
    assert!(eval["eval_mlm_perplexity"].is_number() && eval["eval_distance_accuracy"].is_number(), "{eval}");
    for (task, class) in [("mlm", "ErnieForMaskedLM"), ("caps", "ErnieForTokenClassification"), ("distance", "ErnieForSequenceClassification")] {
        let config: serde_json::Value = serde_json::from_slice(&read(&run.join("tasks").join(task), "config.json")).unwrap();
        assert_eq!(config["architectures"][0], class);
    }
    // Held-out draws from text have no end: --eval-only refuses them rather than run forever.
    #[rustfmt::skip]
    let eval_only = flags(&["--objective", "multi-task", "--model-init", run.to_str().unwrap(), "--batch-size", "4",
        "--task", &format!("mlm=mlm:{corpus}"), "--task", &format!("caps=capitalization:{corpus}"), "--task", &format!("distance=sentence-distance:{corpus}")]);
    let err = evaluate(&eval_only).unwrap_err();
    assert!(err.contains("task `mlm` draws its batches from text"), "{err}");
    // A stage no task joins is refused before any step.
    let err = refused(&with(&args, &["--stage-steps", "4,4"]));
    assert!(err.contains("no task joins at stage 3"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A run replays the ERNIE 2.0 run; each task's exported folder loads on its own,
/// the masked LM's with its head and the decoder tied to the embeddings.
#[test]
fn a_run_replays_the_ernie_2_run_and_writes_each_tasks_model() {
    let out = temp_dir("ernie2-replay");
    run_replays_the_reference_steps(ERNIE2, "multi-task", &out);
    for (task, architecture) in [
        ("mlm", "ErnieForMaskedLM"),
        ("caps", "ErnieForTokenClassification"),
        ("order", "ErnieForSequenceClassification"),
        ("distance", "ErnieForSequenceClassification"),
    ] {
        let folder = out.join("tasks").join(task);
        let config: serde_json::Value = serde_json::from_slice(&read(&folder, "config.json")).unwrap();
        assert_eq!(config["architectures"][0], architecture);
        let saved = Checkpoint::from_bytes(read(&folder, "model.safetensors")).unwrap();
        assert!(!saved.names().any(|n| n.starts_with("tasks.") || n.contains("decoder.weight")), "{task}");
        assert_eq!(saved.contains("cls.predictions.bias"), task == "mlm", "{task}");
        sesame::models::auto::LoadedModel::load(gpu(), &folder, false).unwrap_or_else(|e| panic!("{task}: {e}"));
    }
    let _ = std::fs::remove_dir_all(&out);
}
