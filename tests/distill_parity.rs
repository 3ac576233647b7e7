//! Knowledge distillation against PyTorch, on the fixtures tests/reference/make_distill_fixtures.py
//! wrote (tests/fixtures/train/distil-bert-mlm, distil-gpt2-clm, distil-bert-classify): a
//! 4-layer teacher (BERT's masked LM, GPT-2's causal LM, a BERT sequence classifier) and a
//! 2-layer student made from its layers 0 and 2 (distil-bert-mlm-masked: the masked LM's soft
//! loss at the masked positions only, `--restrict-to-mask`), trained
//! on α_soft·T²·KL(teacher_T ‖ student_T) + α_hard·(its own LM loss) + α_cos·(1 − cos of the
//! last hidden states) with dropout 0.2: the student made here equals the fixture's, the
//! step-0 loss and every gradient match, and 20 AdamW steps through the library's Trainer and
//! through `sesame distill` and the library's run of its flags (from --model-init, and from
//! --student-layers, stopped and resumed)
//! match PyTorch's losses; bad input is refused before any step.

mod common;

use common::train::{
    compare_parameters_except, dir, distill, distill_refused, logged_losses, pytorch_run_args, run, run_settings, scalar, temp_dir, trainable, trajectory, with,
};
use common::{gpu, read};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use sesame::models::auto::AutoModel;
use sesame::models::distilbert;
use sesame::models::training::distillation::DistillationLoss;
use sesame::models::training::{Objective, StepOptions, Trainable};
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::{ModelFolder, Settings};
use sesame::train::data::{BatchSource, ReplayBatches};
use sesame::train::distill::{self, student_from_teacher, Distillation};
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

const FAMILIES: [(&str, Objective); 4] = [
    ("distil-bert-mlm", Objective::Mlm),
    ("distil-gpt2-clm", Objective::Clm),
    ("distil-bert-classify", Objective::Classify),
    ("distil-bert-mlm-masked", Objective::Mlm),
];

/// The objective fixture `family` distills.
fn objective(family: &str) -> Objective {
    FAMILIES.iter().find(|(f, _)| *f == family).map(|&(_, o)| o).unwrap()
}

/// Whether the fixture's soft loss reads the masked positions only (`--restrict-to-mask`).
fn restricted(family: &str) -> bool {
    family.ends_with("-masked")
}

fn teacher(family: &str) -> Box<dyn Trainable> {
    let folder = dir(family).join("teacher");
    let checkpoint = Checkpoint::from_bytes(read(&folder, "model.safetensors")).unwrap();
    trainable(&read(&folder, "config.json"), &Weights::new(gpu(), &checkpoint), objective(family))
}

fn student(family: &str) -> (Box<dyn Trainable>, Parameters) {
    let init = dir(family).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = trainable(&read(&init, "config.json"), &weights, objective(family));
    (model, Parameters::from_weights(&weights).unwrap())
}

/// The parameters whose `part` is not compared (see
/// [`common::train::compare_parameters_except`]): attention's key bias shifts every score of a
/// query's softmax alike, so the loss does not depend on it. GPT-2's sits inside
/// `c_attn.bias` beside the query's and value's: its gradient is compared whole (the noise is
/// small beside theirs), its values after 20 steps by [`assert_query_and_value_biases`].
fn loss_invariant(family: &str, part: Part) -> &'static [&'static str] {
    match (family, part) {
        ("distil-bert-mlm" | "distil-bert-classify" | "distil-bert-mlm-masked", _) => {
            &["bert.encoder.layer.0.attention.self.key.bias", "bert.encoder.layer.1.attention.self.key.bias"]
        }
        ("distil-gpt2-clm", Part::Value) => &["transformer.h.0.attn.c_attn.bias", "transformer.h.1.attn.c_attn.bias"],
        _ => &[],
    }
}

/// GPT-2's fused `c_attn.bias` [3·width] after 20 steps: the query and value thirds within
/// 1e-4 of PyTorch's (the key's third is rounding noise that AdamW scales up, see above).
fn assert_query_and_value_biases(family: &str, got: &Checkpoint, want: &Checkpoint) {
    for &name in loss_invariant(family, Part::Value).iter().filter(|n| n.ends_with("c_attn.bias")) {
        let (g, w) = (got.to_f32(name).unwrap().0, want.to_f32(name).unwrap().0);
        let width = w.len() / 3;
        for third in [0..width, 2 * width..3 * width] {
            let scale = w[third.clone()].iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            let err = third.clone().map(|i| (g[i] - w[i]).abs()).fold(0f32, f32::max);
            assert!(err <= 1e-4 * scale, "{family} {name}[{third:?}]: max abs err {err:e} > 1e-4 × {scale:e}");
        }
    }
}

/// The fixture's temperature and weights (trajectory.json's "distillation").
fn loss_of(family: &str) -> DistillationLoss {
    let t: serde_json::Value = serde_json::from_slice(&read(&dir(family), "trajectory.json")).unwrap();
    serde_json::from_value(t["distillation"].clone()).unwrap()
}

#[test]
fn a_student_made_from_every_other_teacher_layer_is_the_fixtures_student() {
    for (family, _) in FAMILIES {
        let teacher = dir(family).join("teacher");
        let (config, safetensors) = student_from_teacher(&read(&teacher, "config.json"), &read(&teacher, "model.safetensors"), 2).unwrap();
        let made = Checkpoint::from_bytes(safetensors).unwrap();
        let want = Checkpoint::from_bytes(read(&dir(family).join("init"), "model.safetensors")).unwrap();
        let mut names: Vec<&str> = made.names().collect();
        let mut want_names: Vec<&str> = want.names().collect();
        names.sort();
        want_names.sort();
        assert_eq!(names, want_names, "{family}: the student's tensors");
        for name in names {
            assert!(made.to_f32(name).unwrap() == want.to_f32(name).unwrap(), "{family}: {name} differs");
        }
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        let key = if family.contains("gpt2") { "n_layer" } else { "num_hidden_layers" };
        assert_eq!(config[key], 2, "{family}: {config}");
    }
}

#[test]
fn distillation_gradients_match_pytorch() {
    for (family, objective) in FAMILIES {
        let (teacher, (model, params)) = (teacher(family), student(family));
        let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
        let options = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: trajectory(family).dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
        let batch = batches.batch(0).unwrap();
        let loss =
            distill::loss_backward(teacher.as_ref(), model.as_ref(), objective, &loss_of(family), restricted(family), &batch, &params.gradients(), &options)
                .unwrap();
        let (got, want) = (scalar(&loss)[0], trajectory(family).steps[0].loss);
        eprintln!("{family} step-0 loss: {got} (PyTorch {want})");
        assert!((got - want).abs() <= 1e-5 * want, "{family}: loss {got} vs {want}");
        let grads = Checkpoint::from_bytes(read(&dir(family), "grads.safetensors")).unwrap();
        compare_parameters_except(&format!("{family} gradient"), &params, Part::Grad, &grads, 1e-4, loss_invariant(family, Part::Grad));
    }
}

#[test]
fn twenty_distillation_steps_match_pytorch() {
    for (family, objective) in FAMILIES {
        let (model, params) = student(family);
        let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
        let t = trajectory(family);
        let first = batches.batch(0).unwrap();
        let distillation = Some(Distillation {
            teacher: dir(family).join("teacher"),
            loss: loss_of(family),
            student_layers: None,
            student_arch: None,
            restrict_to_mask: restricted(family),
        });
        let settings = Settings { distillation, ..run_settings(family, objective, first.batch, first.seq) };
        let trainer = Trainer::new(gpu(), model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
        let mut trainer = trainer.with_teacher(teacher(family)).unwrap();
        for (step, want) in t.steps.iter().enumerate() {
            let report = pollster::block_on(trainer.step(&batches as &dyn BatchSource)).unwrap();
            eprintln!("{family} step {step}: loss {:.6} (PyTorch {:.6})", report.loss, want.loss);
            assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "{family} step {step}: loss {} vs PyTorch {}", report.loss, want.loss);
            assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "{family} step {step}: grad norm {}", report.grad_norm);
        }
        let last = Checkpoint::from_bytes(read(&dir(family).join("final"), "model.safetensors")).unwrap();
        compare_parameters_except(&format!("{family} after 20 steps"), trainer.params(), Part::Value, &last, 1e-4, loss_invariant(family, Part::Value));
        let got = Checkpoint::from_bytes(pollster::block_on(trainer.params().to_safetensors(Part::Value)).unwrap()).unwrap();
        assert_query_and_value_biases(family, &got, &last);
    }
}

/// `sesame distill`'s flags for the fixture's teacher, weights, optimizer and batches, and `extra`.
fn distill_args(family: &str, extra: &[&str]) -> Vec<String> {
    let d = loss_of(family);
    let mut args: Vec<String> = vec!["--teacher".into(), dir(family).join("teacher").to_str().unwrap().into()];
    #[rustfmt::skip]
    args.extend(["--temperature", &d.temperature.to_string(), "--alpha-soft", &d.alpha_soft.to_string(), "--alpha-hard", &d.alpha_hard.to_string(),
        "--alpha-cos", &d.alpha_cos.to_string()].map(String::from));
    args.extend(pytorch_run_args(family));
    if family.ends_with("-classify") {
        args.extend(["--objective", "classify"].map(String::from));
    }
    if restricted(family) {
        args.push("--restrict-to-mask".into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Each (step, loss) against the PyTorch run's loss at that step.
fn assert_pytorch_losses(family: &str, losses: &[(u64, f32)]) {
    let t = trajectory(family);
    for (step, loss) in losses {
        let want = t.steps[*step as usize].loss;
        assert!((loss - want).abs() <= 1e-5 * want, "{family} step {step}: loss {loss} vs PyTorch {want}");
    }
}

/// The command itself, end to end: its flags, its progress line and its step log.
#[test]
fn sesame_distill_replays_pytorchs_runs() {
    for (family, _) in FAMILIES {
        let out = temp_dir(&format!("distill-{family}"));
        let log = out.join("log.jsonl");
        let args = [&["distill".to_string()][..], &distill_args(family, &["--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()])].concat();
        let (ok, _, err) = run(&args);
        assert!(ok, "{family}: {err}");
        assert!(err.contains("distilled from"), "{err}");
        let losses = logged_losses(&log);
        assert_eq!(losses.len(), trajectory(family).steps.len(), "{family}: one log line per step");
        assert_pytorch_losses(family, &losses);
        let last = Checkpoint::from_bytes(read(&dir(family).join("final"), "model.safetensors")).unwrap();
        let written = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
        assert_query_and_value_biases(family, &written, &last);
        for name in last.names().filter(|n| !loss_invariant(family, Part::Value).contains(n)) {
            let (a, b) = (written.to_f32(name).unwrap().0, last.to_f32(name).unwrap().0);
            let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / y.abs().max(1e-2)).fold(0.0f32, f32::max);
            assert!(worst <= 1e-3, "{family}: {name} after 20 steps differs by {worst}");
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_student_made_with_student_layers_stops_and_resumes_on_pytorchs_losses() {
    let family = "distil-bert-mlm";
    let out = temp_dir("distill-resumed");
    // The student from the teacher, not --model-init: the same model as the fixture's init.
    let mut args: Vec<String> = distill_args(family, &["--out", out.to_str().unwrap(), "--checkpoint-every", "10"]);
    let init = args.iter().position(|a| a == "--model-init").unwrap();
    // The teacher drops nothing; the fixture's student drops at 0.2.
    args.splice(init..init + 2, ["--student-layers", "2", "--dropout", "0.2"].map(String::from));
    let whole = distill(&args).unwrap();
    assert_eq!(whole.steps.len(), trajectory(family).steps.len());
    assert_pytorch_losses(family, &whole.losses());
    // Back to step 10: the last checkpoint and the final model go; --resume ends where the
    // uninterrupted run did.
    std::fs::remove_dir_all(out.join("checkpoint-000020")).unwrap();
    std::fs::remove_file(out.join("model.safetensors")).unwrap();
    let resumed = with(&args, &["--resume"]);
    let rest = distill(&resumed).unwrap();
    assert!(rest.resumed_from.as_ref().is_some_and(|from| from.ends_with("checkpoint-000010")), "{:?}", rest.resumed_from);
    assert_eq!(rest.losses(), whole.losses()[10..]);
    // Another temperature is another run.
    let err = distill_refused(&with(&resumed, &["--temperature", "3"]));
    assert!(err.contains("--resume needs the settings of the run") && err.contains("distillation"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_distillations_are_refused_before_any_step() {
    let out = temp_dir("distill-refused");
    let out_flag = ["--out", out.to_str().unwrap()];
    let refused = |args: Vec<String>, wanted: &[&str]| {
        let err = distill_refused(&args);
        for w in wanted {
            assert!(err.contains(w), "{args:?}: {err}");
        }
        assert!(!out.join("model.safetensors").exists(), "{args:?} wrote a model");
    };
    let with = |family: &str, replace: &[(&str, &str)]| {
        let mut args = distill_args(family, &out_flag);
        for (flag, value) in replace {
            let at = args.iter().position(|a| a == flag).unwrap();
            args[at + 1] = value.to_string();
        }
        args
    };
    refused(with("distil-bert-mlm", &[("--temperature", "0")]), &["--temperature must be a positive number"]);
    refused(with("distil-bert-mlm", &[("--alpha-soft", "0"), ("--alpha-hard", "0"), ("--alpha-cos", "0")]), &["nothing to learn from"]);
    refused(with("distil-bert-mlm", &[("--alpha-hard", "-1")]), &["--alpha-hard must be a number ≥ 0"]);
    // Teacher and student of other vocabularies (an encoder and a decoder; the pairing of
    // kinds and widths is checked in the library's unit tests, on fresh models of one vocabulary).
    let gpt2_init = dir("distil-gpt2-clm").join("init");
    refused(with("distil-bert-mlm", &[("--model-init", gpt2_init.to_str().unwrap())]), &["vocabularies differ at token id"]);
    let bert_teacher = dir("distil-bert-mlm").join("teacher");
    refused(with("distil-gpt2-clm", &[("--teacher", bert_teacher.to_str().unwrap())]), &["vocabularies differ"]);
    let objective = |family: &str, objective: &str| with(family, &[]).into_iter().chain(["--objective", objective].map(String::from)).collect();
    refused(objective("distil-bert-mlm", "qa"), &["distillation trains objective mlm or classify (the teacher is an encoder), not qa"]);
    refused(objective("distil-gpt2-clm", "classify"), &["distillation trains objective clm (the teacher is a decoder)"]);
    refused(objective("distil-bert-mlm", "classify"), &["objective classify distills a fine-tuned …ForSequenceClassification teacher, not `BertForMaskedLM`"]);
    refused(
        with("distil-gpt2-clm", &[]).into_iter().chain(["--restrict-to-mask".to_string()]).collect(),
        &["--restrict-to-mask restricts a masked LM's soft targets", "not a setting of objective clm"],
    );
    let mut from_teacher = with("distil-bert-mlm", &[]);
    let init = from_teacher.iter().position(|a| a == "--model-init").unwrap();
    from_teacher.splice(init..init + 2, ["--student-layers".to_string(), "5".to_string()]);
    refused(from_teacher, &["--student-layers must be 1 to the teacher's 4 layers, not 5"]);
    let _ = std::fs::remove_dir_all(&out);
}

/// The architecture and masked-LM logits of a model (its config.json and model.safetensors)
/// for two rows, the second padded.
fn masked_lm_logits(config: &[u8], safetensors: Vec<u8>) -> (String, Vec<f32>) {
    let checkpoint = Checkpoint::from_bytes(safetensors).unwrap();
    let model = AutoModel::load(config, &Weights::new(gpu(), &checkpoint)).unwrap();
    let rows = [vec![2u32, 17, 40, 3, 9, 55, 3], vec![2, 60, 4, 3, 0, 0, 0]];
    let attention_mask = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0];
    let batch = IdsBatch { input_ids: rows.concat(), attention_mask: Some(attention_mask), batch: 2, seq: 7, ..IdsBatch::default() };
    let out = model.forward(&batch, ForwardOptions::default()).unwrap();
    let name = model.require(sesame::models::Capability::FillMask, "test").unwrap();
    (model.architecture().to_string(), pollster::block_on(out.get(name).unwrap().to_vec::<f32>()).unwrap())
}

#[test]
fn a_distilbert_made_from_a_bert_computes_what_the_bert_does() {
    // DistilBERT's student layout (`--student-arch distilbert`): on single-segment input the
    // renamed model, token type 0 folded into the positions, is the BERT it came from.
    let teacher = dir("distil-bert-mlm").join("teacher");
    let (config, safetensors) = (read(&teacher, "config.json"), read(&teacher, "model.safetensors"));
    let (distil_config, distil_safetensors) = distilbert::from_bert(&config, &safetensors).unwrap();
    let (bert_arch, want) = masked_lm_logits(&config, safetensors.clone());
    let (arch, got) = masked_lm_logits(&distil_config, distil_safetensors);
    assert_eq!((bert_arch.as_str(), arch.as_str()), ("BertForMaskedLM", "DistilBertForMaskedLM"));
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(err <= 1e-5 * scale.max(1.0), "the DistilBERT's logits differ from the BERT's by {err:e}");

    // An untied output layer stays untied (here 1.5 times the word embeddings, so that it
    // differs from them).
    let tensors = safetensors::SafeTensors::deserialize(&safetensors).unwrap();
    let embeddings = tensors.tensor("bert.embeddings.word_embeddings.weight").unwrap();
    let decoder: Vec<f32> = bytemuck::pod_collect_to_vec::<u8, f32>(embeddings.data()).iter().map(|x| x * 1.5).collect();
    let mut views = tensors.tensors();
    views.push(("cls.predictions.decoder.weight".into(), TensorView::new(Dtype::F32, embeddings.shape().to_vec(), bytemuck::cast_slice(&decoder)).unwrap()));
    let untied_safetensors = safetensors::serialize(views, None).unwrap();
    let mut untied: serde_json::Value = serde_json::from_slice(&config).unwrap();
    untied["tie_word_embeddings"] = false.into();
    let untied = serde_json::to_vec(&untied).unwrap();
    let (distil_config, distil_safetensors) = distilbert::from_bert(&untied, &untied_safetensors).unwrap();
    let (_, want_untied) = masked_lm_logits(&untied, untied_safetensors);
    let (_, got) = masked_lm_logits(&distil_config, distil_safetensors);
    let err = got.iter().zip(&want_untied).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(err <= 1e-5 * scale.max(1.0) * 1.5 && want_untied != want, "the untied DistilBERT's logits differ from the BERT's by {err:e}");
    // DistilBERT's LayerNorms always take eps 1e-12.
    let mut other_eps: serde_json::Value = serde_json::from_slice(&config).unwrap();
    other_eps["layer_norm_eps"] = 1e-5.into();
    let err = distilbert::from_bert(&serde_json::to_vec(&other_eps).unwrap(), &read(&teacher, "model.safetensors")).unwrap_err().to_string();
    assert!(err.contains("layer_norm_eps is 0.00001, and a DistilBERT's is always 1e-12"), "{err}");

    // A fine-tuned classifier becomes a DistilBertForSequenceClassification of its labels,
    // the pooler its pre_classifier.
    let classifier = dir("distil-bert-classify").join("teacher");
    let (config, safetensors) = distilbert::from_bert(&read(&classifier, "config.json"), &read(&classifier, "model.safetensors")).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["architectures"][0], "DistilBertForSequenceClassification");
    let bert: serde_json::Value = serde_json::from_slice(&read(&classifier, "config.json")).unwrap();
    assert_eq!(config["id2label"], bert["id2label"]);
    let (made, bert) = (Checkpoint::from_bytes(safetensors).unwrap(), Checkpoint::from_bytes(read(&classifier, "model.safetensors")).unwrap());
    assert!(made.to_f32("pre_classifier.weight").unwrap() == bert.to_f32("bert.pooler.dense.weight").unwrap());
    assert!(made.to_f32("classifier.bias").unwrap() == bert.to_f32("classifier.bias").unwrap());

    // Not from a GPT-2, nor from a BERT head DistilBERT has no counterpart of.
    let gpt2 = dir("distil-gpt2-clm").join("teacher");
    let err = distilbert::from_bert(&read(&gpt2, "config.json"), &read(&gpt2, "model.safetensors")).unwrap_err().to_string();
    assert!(err.contains("a DistilBERT is made from a BERT (model_type bert), not model_type `gpt2`"), "{err}");
    let mut next_sentence: serde_json::Value = serde_json::from_slice(&read(&teacher, "config.json")).unwrap();
    next_sentence["architectures"] = serde_json::json!(["BertForNextSentencePrediction"]);
    let err = distilbert::from_bert(&serde_json::to_vec(&next_sentence).unwrap(), &read(&teacher, "model.safetensors")).unwrap_err().to_string();
    assert!(err.contains("not BertForNextSentencePrediction"), "{err}");
}

#[test]
fn distill_makes_a_distilbert_student_from_a_bert_teacher() {
    let family = "distil-bert-mlm";
    let out = temp_dir("distill-distilbert");
    let mut args = distill_args(family, &["--out", out.to_str().unwrap(), "--steps", "3"]);
    let init = args.iter().position(|a| a == "--model-init").unwrap();
    args.splice(init..init + 2, ["--student-layers", "2", "--student-arch", "distilbert"].map(String::from));
    let trained = distill(&args).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!((config["architectures"][0].as_str(), config["n_layers"].as_u64()), (Some("DistilBertForMaskedLM"), Some(2)), "{config}");
    let losses = trained.losses();
    assert!(losses.len() == 3 && losses.iter().all(|(_, l)| l.is_finite() && *l > 0.0), "{losses:?}");
    // The student the run wrote computes as a DistilBERT does after training steps: it differs
    // from the student it started as.
    let (_, after) = masked_lm_logits(&read(&out, "config.json"), read(&out, "model.safetensors"));
    let teacher = dir(family).join("teacher");
    let (config, safetensors) = student_from_teacher(&read(&teacher, "config.json"), &read(&teacher, "model.safetensors"), 2).unwrap();
    let (config, safetensors) = distilbert::from_bert(&config, &safetensors).unwrap();
    let (_, start) = masked_lm_logits(&config, safetensors);
    assert!(after.iter().zip(&start).any(|(a, b)| (a - b).abs() > 1e-3), "three steps changed nothing");

    // Only with --student-layers, only from a BERT.
    let _ = std::fs::remove_dir_all(&out);
    let mut without_layers = distill_args(family, &["--out", out.to_str().unwrap()]);
    without_layers.extend(["--student-arch", "distilbert"].map(String::from));
    let err = distill_refused(&without_layers);
    assert!(err.contains("--student-layers"), "{err}");
    let mut gpt2 = distill_args("distil-gpt2-clm", &["--out", out.to_str().unwrap()]);
    let init = gpt2.iter().position(|a| a == "--model-init").unwrap();
    gpt2.splice(init..init + 2, ["--student-layers", "2", "--student-arch", "distilbert"].map(String::from));
    let err = distill_refused(&gpt2);
    assert!(err.contains("a DistilBERT is made from a BERT (model_type bert), not model_type `gpt2`"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}
