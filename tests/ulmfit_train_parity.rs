//! Training an AWD-LSTM against fastai itself, every dropout at 0.2 — words out of the
//! embedding table, locked dropout on the input, between the layers and on the output,
//! DropConnect on the recurrent matrices — with fastai drawing Sesame's masks:
//! - the language model (tests/reference/make_awd_lstm_train_fixtures.py,
//!   tests/fixtures/train/awd-lstm/): the step-0 loss and every gradient, then 20 AdamW steps
//!   (warmup + cosine) through the library's Trainer and a run of `--replay-batches`;
//! - ULMFiT's classifier (make_ulmfit_classifier_fixtures.py, train/ulmfit-classifier/):
//!   the whole backward through BatchNorm and concat pooling, then the paper's recipe over
//!   20 steps — discriminative rates (÷ 2.6 a layer group), gradual unfreezing (a group every
//!   4 steps), slanted triangular rates — to the final weights and running statistics.

mod common;

use common::train::{
    compare_parameters, dir, flags, pytorch_run_args, refused, run_replays_the_reference_steps, run_settings, scalar, temp_dir, train, trajectory,
};
use common::{devices, read};
use sesame::models::awd_lstm::train::AwdLstmTraining;
use sesame::models::training::Batch;
use sesame::models::training::{Objective, StepOptions, Trainable};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::ReplayBatches;
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};
use sesame::Device;

const RUN: &str = "awd-lstm";
const CLASSIFIER: &str = "ulmfit-classifier";

fn initial(gpu: &Device) -> (Box<dyn Trainable>, Parameters) {
    initial_of(gpu, RUN)
}

fn initial_of(gpu: &Device, run: &str) -> (Box<dyn Trainable>, Parameters) {
    let init = dir(run).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = AwdLstmTraining::load(&read(&init, "config.json"), &weights).unwrap();
    (Box::new(model), Parameters::from_weights(&weights).unwrap())
}

fn batches() -> ReplayBatches {
    batches_of(RUN)
}

fn batches_of(run: &str) -> ReplayBatches {
    ReplayBatches::from_bytes(&read(&dir(run), "batches.safetensors")).unwrap()
}

#[test]
fn step_zero_loss_and_gradients_match_fastai() {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = initial(gpu);
        let batch: Batch = batches().batch(0).unwrap();
        let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: trajectory(RUN).dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
        let loss = scalar(&model.loss_backward(Objective::Clm, &batch, &params.gradients(), &step).unwrap())[0];
        let want = trajectory(RUN).steps[0].loss;
        eprintln!("AWD-LSTM on {device}: step-0 loss {loss} (fastai {want})");
        assert!((loss - want).abs() <= 1e-5 * want, "{device}: loss {loss} vs {want}");
        // Without dropout (held-out evaluation) the loss differs: the masks were in effect.
        let eval = scalar(&model.loss(Objective::Clm, &batch).unwrap())[0];
        assert!((eval - want).abs() > 1e-3 * want, "{device}: the evaluation loss {eval} drops nothing, yet equals the training loss");
        let grads = Checkpoint::from_bytes(read(&dir(RUN), "grads.safetensors")).unwrap();
        compare_parameters(&format!("AWD-LSTM gradient on {device}"), &params, Part::Grad, &grads, 1e-4);
    }
}

#[test]
fn twenty_adamw_steps_match_fastai() {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = initial(gpu);
        let batches = batches();
        let first = batches.batch(0).unwrap();
        let settings = run_settings(RUN, Objective::Clm, first.batch, first.seq);
        let mut trainer = Trainer::new(gpu, model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
        for (step, want) in trajectory(RUN).steps.iter().enumerate() {
            let report = pollster::block_on(trainer.step(&batches)).unwrap();
            eprintln!(
                "{device} step {step}: loss {:.6} (fastai {:.6}), grad norm {:.5} (fastai {:.5})",
                report.loss, want.loss, report.grad_norm, want.grad_norm
            );
            assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "{device} step {step}: loss {} vs {}", report.loss, want.loss);
            assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "{device} step {step}: grad norm {}", report.grad_norm);
        }
        let last = Checkpoint::from_bytes(read(&dir(RUN).join("final"), "model.safetensors")).unwrap();
        compare_parameters(&format!("AWD-LSTM after 20 steps on {device}"), trainer.params(), Part::Value, &last, 1e-4);
    }
}

/// A run of `--objective clm --replay-batches` on the folder `convert-ulmfit` writes: the
/// same losses, and a final folder that loads for inference with fastai's final weights.
#[test]
fn a_run_replays_the_reference_and_writes_a_loadable_folder() {
    let out = temp_dir("awd-lstm-replay");
    run_replays_the_reference_steps(RUN, "clm", &out);
    let written = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    let want = Checkpoint::from_bytes(read(&dir(RUN).join("final"), "model.safetensors")).unwrap();
    let mut names: Vec<&str> = want.names().collect();
    names.sort_unstable();
    assert_eq!(written.names().count(), names.len());
    for name in names {
        let ((g, _), (w, _)) = (written.to_f32(name).unwrap(), want.to_f32(name).unwrap());
        let scale = w.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        let err = g.iter().zip(&w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(err <= 1e-4 * scale, "{name}: {err} > 1e-4 × {scale}");
    }
    sesame::models::auto::LoadedModel::load(common::gpu(), &out, false).unwrap();
    // Other objectives are refused with what an AWD-LSTM trains.
    let init = dir(RUN).join("init");
    let err = refused(&flags(&["--objective", "mlm", "--model-init", init.to_str().unwrap(), "--data", "x.txt", "--out", out.join("bad").to_str().unwrap()]));
    assert!(err.contains("AWD-LSTM (awd_lstm) trains clm, classify"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn the_classifier_s_whole_backward_matches_fastai() {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = initial_of(gpu, CLASSIFIER);
        let batch: Batch = batches_of(CLASSIFIER).batch(0).unwrap();
        let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: trajectory(CLASSIFIER).dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
        let loss = scalar(&model.loss_backward(Objective::Classify, &batch, &params.gradients(), &step).unwrap())[0];
        let want = trajectory(CLASSIFIER).steps[0].loss;
        eprintln!("ULMFiT classifier on {device}: step-0 loss {loss} (fastai {want})");
        assert!((loss - want).abs() <= 1e-5 * want, "{device}: loss {loss} vs {want}");
        let grads = Checkpoint::from_bytes(read(&dir(CLASSIFIER), "grads.safetensors")).unwrap();
        compare_parameters(&format!("ULMFiT classifier gradient on {device}"), &params, Part::Grad, &grads, 1e-4);
    }
}

#[test]
fn ulmfit_s_recipe_matches_fastai_over_twenty_steps() {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = initial_of(gpu, CLASSIFIER);
        let batches = batches_of(CLASSIFIER);
        let first = batches.batch(0).unwrap();
        let settings = run_settings(CLASSIFIER, Objective::Classify, first.batch, first.seq);
        assert_eq!((settings.discriminative_lr, settings.unfreeze_every), (Some(2.6), Some(4)));
        let mut trainer = Trainer::new(gpu, model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
        let before = pollster::block_on(trainer.params().to_safetensors(Part::Value)).unwrap();
        for (step, want) in trajectory(CLASSIFIER).steps.iter().enumerate() {
            let report = pollster::block_on(trainer.step(&batches)).unwrap();
            eprintln!(
                "{device} step {step}: loss {:.6} (fastai {:.6}), lr {:.3e}, grad norm {:.5} (fastai {:.5})",
                report.loss, want.loss, report.lr, report.grad_norm, want.grad_norm
            );
            assert!((report.lr - want.lr).abs() <= 1e-6 * want.lr, "{device} step {step}: lr {} vs {}", report.lr, want.lr);
            assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "{device} step {step}: loss {} vs {}", report.loss, want.loss);
            assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "{device} step {step}: grad norm {}", report.grad_norm);
            if step == 3 {
                // Only the head has trained: the encoder is as it started.
                let now = Checkpoint::from_bytes(pollster::block_on(trainer.params().to_safetensors(Part::Value)).unwrap()).unwrap();
                let start = Checkpoint::from_bytes(before.clone()).unwrap();
                for name in start.names().filter(|n| n.starts_with("0.")) {
                    assert_eq!(now.to_f32(name).unwrap().0, start.to_f32(name).unwrap().0, "{name} moved while frozen");
                }
            }
        }
        let last = Checkpoint::from_bytes(read(&dir(CLASSIFIER).join("final"), "model.safetensors")).unwrap();
        compare_parameters(&format!("ULMFiT classifier after 20 steps on {device}"), trainer.params(), Part::Value, &last, 1e-4);
    }
}

/// A run of `--objective classify` with the recipe's flags (--discriminative-lr,
/// --unfreeze-every, --schedule slanted-triangular) replays fastai's run, and the classifier
/// it writes loads for inference.
#[test]
fn a_run_replays_ulmfit_s_recipe() {
    let out = temp_dir("ulmfit-recipe");
    let recipe = pytorch_run_args(CLASSIFIER);
    assert!(recipe.iter().any(|a| a == "--discriminative-lr") && recipe.iter().any(|a| a == "slanted-triangular"), "{recipe:?}");
    run_replays_the_reference_steps(CLASSIFIER, "classify", &out);
    let loaded = sesame::models::auto::LoadedModel::load(common::gpu(), &out, false).unwrap();
    assert_eq!(loaded.model.architecture(), "AwdLstmForSequenceClassification");
    // The recipe's flags on a model without layer groups are refused.
    let gpt2 = dir("gpt2");
    let (init, batches) = (gpt2.join("init"), gpt2.join("batches.safetensors"));
    #[rustfmt::skip]
    let err = refused(&flags(&["--model-init", init.to_str().unwrap(), "--replay-batches", batches.to_str().unwrap(), "--steps", "1",
        "--discriminative-lr", "2.6", "--out", out.join("bad").to_str().unwrap()]));
    assert!(err.contains("layer groups"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// ULMFiT's three stages as runs, from nothing: a fresh AWD-LSTM language model
/// over a vocabulary of the corpus (`--arch awd-lstm --tokenizer words:N`), fine-tuned
/// further as a language model over a vocabulary re-learnt from its data, then a classifier
/// with the recipe and fastai's dropouts halved (`--drop-mult 0.5`); each folder loads for
/// inference, and the classifier's held-out accuracy is reported.
#[test]
fn ulmfit_s_three_stages_run_from_a_fresh_model() {
    let out = temp_dir("ulmfit-stages");
    let tsv = common::train::sentiment_tsv(48, 3);
    let text: String = tsv.lines().skip(1).map(|l| format!("{}\n", l.split('\t').next().unwrap())).collect();
    let (corpus, data) = (out.join("corpus.txt"), out.join("train.tsv"));
    std::fs::write(&corpus, &text).unwrap();
    std::fs::write(&data, &tsv).unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let stage = |name: &str, args: &[&str]| {
        let dir = out.join(name);
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["--batch-size", "4", "--steps", "6", "--out", &path(&dir)].map(String::from));
        let trained = train(&all).unwrap_or_else(|e| panic!("{name}: {e}"));
        (dir, trained)
    };
    let (pretrained, _) = stage(
        "pretrained",
        &[
            "--arch",
            "awd-lstm",
            "--objective",
            "clm",
            "--tokenizer",
            "words:20",
            "--layers",
            "2",
            "--hidden",
            "16",
            "--embedding-size",
            "8",
            "--data",
            &path(&corpus),
            "--seq-len",
            "8",
        ],
    );
    let config: serde_json::Value = serde_json::from_slice(&read(&pretrained, "config.json")).unwrap();
    assert_eq!((config["n_layers"].as_u64(), config["n_hid"].as_u64(), config["emb_sz"].as_u64()), (Some(2), Some(16), Some(8)));
    assert_eq!((config["output_p"].as_f64(), config["weight_p"].as_f64()), (Some(0.1), Some(0.2)), "fastai's language-model dropouts, stated");
    let (fine_tuned, _) = stage(
        "fine-tuned",
        &[
            "--model-init",
            &path(&pretrained),
            "--objective",
            "clm",
            "--tokenizer",
            "words:40",
            "--data",
            &path(&corpus),
            "--seq-len",
            "8",
            "--discriminative-lr",
            "2.6",
            "--schedule",
            "slanted-triangular",
            "--warmup",
            "1",
            "--min-lr",
            "3e-5",
        ],
    );
    // Stage 2 re-learnt the vocabulary from its data (fastai's match_embeds), a larger one here.
    let vocab_size = |dir: &std::path::Path| serde_json::from_slice::<serde_json::Value>(&read(dir, "config.json")).unwrap()["vocab_size"].as_u64().unwrap();
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&read(&fine_tuned, "tokenizer.json")).unwrap();
    assert_eq!((vocab_size(&pretrained), vocab_size(&fine_tuned)), (20, tokenizer.vocab_size() as u64));
    assert!(vocab_size(&fine_tuned) > 20, "{}", vocab_size(&fine_tuned));
    let fine_tuned_path = path(&fine_tuned);
    let (data_path, checkpoints) = (path(&data), "3");
    let classifier_args = [
        "--model-init",
        &fine_tuned_path,
        "--objective",
        "classify",
        "--data",
        &data_path,
        "--seq-len",
        "12",
        "--unfreeze-every",
        "2",
        "--discriminative-lr",
        "2.6",
        "--eval-every",
        "6",
        "--drop-mult",
        "0.5",
        "--checkpoint-every",
        checkpoints,
    ];
    let (classifier, trained) = stage("classifier", &classifier_args);
    for dir in [&pretrained, &fine_tuned, &classifier] {
        sesame::models::auto::LoadedModel::load(common::gpu(), dir, false).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let evaluation = trained.first_evaluation();
    assert!(evaluation.get("eval_accuracy").is_some(), "{evaluation}");
    let config: serde_json::Value = serde_json::from_slice(&read(&classifier, "config.json")).unwrap();
    assert_eq!(config["architectures"][0], "AwdLstmForSequenceClassification");
    // fastai's classifier dropouts, each halved by --drop-mult 0.5.
    let dropouts = ["output_p", "hidden_p", "input_p", "embed_p", "weight_p"].map(|k| config[k].as_f64().unwrap());
    assert_eq!(dropouts, [0.2, 0.15, 0.2, 0.025, 0.25]);
    // A resumed run keeps them (its checkpoint's config holds them multiplied already) and
    // ends as the uninterrupted run.
    let finished = read(&classifier, "model.safetensors");
    std::fs::remove_dir_all(classifier.join("checkpoint-000006")).unwrap();
    let (_, resumed_run) = stage("classifier", &[&classifier_args[..], &["--resume"]].concat());
    assert!(resumed_run.resumed_from.as_ref().is_some_and(|from| from.ends_with("checkpoint-000003")), "{:?}", resumed_run.resumed_from);
    let resumed: serde_json::Value = serde_json::from_slice(&read(&classifier, "config.json")).unwrap();
    assert_eq!(["output_p", "hidden_p", "input_p", "embed_p", "weight_p"].map(|k| resumed[k].as_f64().unwrap()), dropouts);
    assert!(read(&classifier, "model.safetensors") == finished, "the resumed run ends as the uninterrupted one");
    std::fs::remove_dir_all(&out).unwrap();
}
