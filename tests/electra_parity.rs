//! ELECTRA's pretraining against PyTorch: tests/fixtures/train/electra-pretraining, written by
//! tests/reference/make_electra_fixtures.py — a generator (ElectraForMaskedLM) and a
//! discriminator (ElectraForPreTraining) over one embeddings block, trained on the masked
//! LM + 50 · replaced-token detection, the generator's samples replayed.

mod common;

use common::train::{compare_parameters_except, dir, flags, refused, run_replays_the_reference_steps, run_settings, scalar, temp_dir, train, trajectory};
use common::{gpu, read};
use sesame::models::electra::train::ElectraPretraining;
use sesame::models::training::{Objective, StepOptions};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::ReplayBatches;
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

const RUN: &str = "electra-pretraining";

/// The attention keys' biases add the same score to every key a query sees, which softmax
/// ignores: their gradients are 0 in exact arithmetic (checked as rounding noise).
const KEY_BIASES: [&str; 4] = [
    "discriminator.electra.encoder.layer.0.attention.self.key.bias",
    "discriminator.electra.encoder.layer.1.attention.self.key.bias",
    "generator.electra.encoder.layer.0.attention.self.key.bias",
    "generator.electra.encoder.layer.1.attention.self.key.bias",
];

#[derive(serde::Deserialize)]
struct Losses {
    mlm_loss: f32,
    rtd_loss: f32,
}

fn initial() -> (ElectraPretraining, Parameters) {
    let init = dir(RUN).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &checkpoint).recording();
    let model = ElectraPretraining::load(&read(&init, "config.json"), &read(&init, "generator_config.json"), &weights).unwrap();
    (model, Parameters::from_weights(&weights).unwrap())
}

#[test]
fn electra_pretraining_gradients_match_pytorch() {
    let (model, params) = initial();
    let batches = ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap();
    let t = trajectory(RUN);
    let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: t.dropout_seed, batch_index: 0 }, lm_coef: 0.0 };
    let losses = model.losses_backward(&batches.batch(0).unwrap(), &params.gradients(), &step).unwrap();
    let steps: Vec<Losses> =
        serde_json::from_value(serde_json::from_slice::<serde_json::Value>(&read(&dir(RUN), "trajectory.json")).unwrap()["steps"].clone()).unwrap();
    for (name, got, want) in [
        ("masked LM", scalar(&losses.mlm)[0], steps[0].mlm_loss),
        ("replaced-token detection", scalar(&losses.rtd)[0], steps[0].rtd_loss),
        ("total", scalar(&losses.total)[0], t.steps[0].loss),
    ] {
        eprintln!("step-0 {name} loss: {got} (PyTorch {want})");
        assert!((got - want).abs() <= 1e-5 * want, "{name}: {got} vs {want}");
    }
    let grads = Checkpoint::from_bytes(read(&dir(RUN), "grads.safetensors")).unwrap();
    compare_parameters_except("ELECTRA pretraining gradient", &params, Part::Grad, &grads, 1e-4, &KEY_BIASES);
}

/// A pretraining folder splits into the discriminator's and the generator's transformers
/// folders, each with the shared embeddings (and the generator's output layer tied to them).
#[test]
fn a_pretraining_folder_splits_into_the_two_models() {
    let init = dir(RUN).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let [discriminator, generator] =
        sesame::models::electra::pretraining_folder::model_folders(&read(&init, "config.json"), &read(&init, "generator_config.json"), &checkpoint).unwrap();
    for ((config, safetensors), own) in [(discriminator, "discriminator_predictions.dense.weight"), (generator, "generator_predictions.dense.weight")] {
        let split = Checkpoint::from_bytes(safetensors).unwrap();
        assert!(split.contains(own) && split.contains("electra.embeddings.word_embeddings.weight"), "{own}");
        assert!(!split.names().any(|n| n.starts_with("generator.") || n.starts_with("discriminator.")));
        let weights = Weights::new(gpu(), &split);
        sesame::models::auto::AutoModel::load(&config, &weights).unwrap_or_else(|e| panic!("{own}: {e}"));
        weights.check_all_read("the split model", "config.json", |_| false).unwrap();
    }
}

/// The 20 steps through the library's Trainer: losses, gradient norms and final weights.
#[test]
fn electra_pretraining_twenty_steps_match_pytorch() {
    let (model, params) = initial();
    let batches = ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap();
    let first = batches.batch(0).unwrap();
    let settings = run_settings(RUN, Objective::Electra, first.batch, first.seq);
    let mut trainer = Trainer::new(gpu(), Box::new(model), params, ModelFolder { files: Vec::new() }, settings).unwrap();
    for (step, want) in trajectory(RUN).steps.iter().enumerate() {
        let report = pollster::block_on(trainer.step(&batches)).unwrap();
        eprintln!("step {step}: loss {:.6} (PyTorch {:.6})", report.loss, want.loss);
        assert!((report.loss - want.loss).abs() <= 1e-5 * want.loss, "step {step}: loss {} vs PyTorch {}", report.loss, want.loss);
        assert!((report.grad_norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "step {step}: grad norm {}", report.grad_norm);
    }
    let last = Checkpoint::from_bytes(read(&dir(RUN).join("final"), "model.safetensors")).unwrap();
    compare_parameters_except("ELECTRA pretraining after 20 steps", trainer.params(), Part::Value, &last, 1e-4, &[]);
}

/// A run of `--objective electra` replays the run and writes the pretraining folder with
/// the discriminator's and the generator's transformers folders beside it.
#[test]
fn a_run_replays_electra_pretraining_and_writes_both_models() {
    let out = temp_dir("electra-replay");
    run_replays_the_reference_steps(RUN, "electra", &out);
    for (folder, class) in [("discriminator", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")] {
        let config: serde_json::Value = serde_json::from_slice(&read(&out.join(folder), "config.json")).unwrap();
        assert_eq!(config["architectures"][0], class);
        sesame::models::auto::LoadedModel::load(gpu(), &out.join(folder), false).unwrap_or_else(|e| panic!("{folder}: {e}"));
    }
    // The pretraining folder is no model to run (its parts are), and trains on only as ELECTRA.
    let err = sesame::models::auto::LoadedModel::load(gpu(), &out, false).err().unwrap().to_string();
    assert!(err.contains("holds several models") && err.contains("discriminator/ or generator/"), "{err}");
    let bad = out.join("bad");
    let err = refused(&flags(&["--objective", "mlm", "--model-init", out.to_str().unwrap(), "--data", "x.txt", "--out", bad.to_str().unwrap()]));
    assert!(err.contains("ELECTRA pretraining folder") && err.contains("--objective electra"), "{err}");
    let discriminator = out.join("discriminator");
    let err = refused(&flags(&["--objective", "electra", "--model-init", discriminator.to_str().unwrap(), "--data", "x.txt", "--out", bad.to_str().unwrap()]));
    assert!(err.contains("generator_config.json"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// From plain text: ELECTRA's masking (85% [MASK], the rest kept), the generator's samples,
/// and held-out scores of both models.
#[test]
fn electra_pretrains_from_text() {
    let words = "the a cat dog sat on mat ran to park and saw big small red blue house tree bird sang".split(' ').collect::<Vec<_>>();
    let mut next = common::train::lcg(11);
    let documents: Vec<String> = (0..40)
        .map(|_| (0..5).map(|_| (0..4 + next(5)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" ") + " .").collect::<Vec<_>>().join(" "))
        .collect();
    let out = temp_dir("electra-text");
    let (data, run_dir) = (out.join("corpus.txt"), out.join("run"));
    std::fs::write(&data, documents.join("\n\n")).unwrap();
    let init = dir(RUN).join("init");
    #[rustfmt::skip]
    let args = flags(&["--objective", "electra", "--model-init", init.to_str().unwrap(), "--data", data.to_str().unwrap(),
        "--eval-data", data.to_str().unwrap(), "--seq-len", "32", "--batch-size", "8", "--steps", "40", "--lr", "2e-3", "--warmup", "5",
        "--eval-every", "40", "--eval-batches", "2", "--out", run_dir.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let (first, last) = trained.first_and_last_losses();
    assert!(last < 0.8 * first, "the loss falls from {first} to {last}");
    let eval = trained.first_evaluation();
    let (perplexity, accuracy) = (eval["eval_perplexity"].as_f64().unwrap(), eval["eval_replaced_accuracy"].as_f64().unwrap());
    // Better than calling every token original.
    let replaced = eval["eval_replaced_share"].as_f64().unwrap();
    assert!(perplexity > 1.0 && perplexity < 99.0 && replaced > 0.02 && accuracy > 1.0 - replaced + 0.01, "{eval}");
    let rtd = eval["eval_rtd_loss"].as_f64().unwrap();
    assert!((eval["eval_loss"].as_f64().unwrap() - (perplexity.ln() + 50.0 * rtd)).abs() < 1e-3 * eval["eval_loss"].as_f64().unwrap(), "{eval}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `--arch electra` builds both models (the generator a quarter of the heads) and pretrains
/// them from text; the written folders load.
#[test]
fn a_fresh_electra_pretrains_from_text() {
    let out = temp_dir("electra-fresh");
    let (data, run_dir) = (out.join("corpus.txt"), out.join("run"));
    let text = "the cat sat on the mat. the dog ran to the park.\n\nthe bird sang in the tree. a big red house stood by the river.\n".repeat(20);
    std::fs::write(&data, text).unwrap();
    #[rustfmt::skip]
    let args = flags(&["--arch", "electra", "--objective", "electra", "--tokenizer", "wordpiece:256", "--layers", "2", "--heads", "4", "--hidden", "32",
        "--data", data.to_str().unwrap(), "--seq-len", "24", "--batch-size", "4", "--steps", "6", "--out", run_dir.to_str().unwrap()]);
    train(&args).unwrap();
    let generator: serde_json::Value = serde_json::from_slice(&read(&run_dir, "generator_config.json")).unwrap();
    assert_eq!((generator["hidden_size"].as_u64(), generator["num_attention_heads"].as_u64()), (Some(8), Some(1)));
    for folder in ["discriminator", "generator"] {
        sesame::models::auto::LoadedModel::load(gpu(), &run_dir.join(folder), false).unwrap_or_else(|e| panic!("{folder}: {e}"));
    }
    // Training goes on from the pretraining folder.
    let again = out.join("again");
    #[rustfmt::skip]
    let args = flags(&["--objective", "electra", "--model-init", run_dir.to_str().unwrap(), "--data", data.to_str().unwrap(), "--seq-len", "24",
        "--batch-size", "4", "--steps", "2", "--out", again.to_str().unwrap()]);
    train(&args).unwrap();
    let _ = std::fs::remove_dir_all(&out);
}

/// Without replayed samples a step draws its replacements from the generator's softmax at the
/// masked positions, by the step's own random stream: the same loss as replaying exactly the
/// samples Gumbel-max draws from the generator's logits with that stream (dropout off, so the
/// forward logits are the training step's).
#[test]
fn a_step_samples_its_replacements_from_the_generators_softmax() {
    use sesame::models::electra::train::{gumbel_max_samples, replacement_rng};
    use sesame::models::encoder::EncoderInputs;
    let init = dir(RUN).join("init");
    let without_dropout = |file: &str| {
        let mut config: serde_json::Value = serde_json::from_slice(&read(&init, file)).unwrap();
        config["hidden_dropout_prob"] = 0.0.into();
        config["attention_probs_dropout_prob"] = 0.0.into();
        serde_json::to_vec(&config).unwrap()
    };
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let load = || {
        let weights = Weights::new(gpu(), &checkpoint).recording();
        let model = ElectraPretraining::load(&without_dropout("config.json"), &without_dropout("generator_config.json"), &weights).unwrap();
        (model, Parameters::from_weights(&weights).unwrap())
    };
    let batches = ReplayBatches::from_bytes(&read(&dir(RUN), "batches.safetensors")).unwrap();
    let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: 3, batch_index: 5 }, lm_coef: 0.0 };
    let batch = sesame::models::training::Batch { generator_samples: None, ..batches.batch(5).unwrap() };
    let (model, params) = load();
    let sampled = scalar(&model.losses_backward(&batch, &params.gradients(), &step).unwrap().rtd)[0];
    // The same draw by hand.
    let generator = &model.generator;
    let masked: Vec<usize> = (0..batch.labels.len()).filter(|&i| batch.labels[i] != -100).collect();
    let inputs = EncoderInputs { attention_mask: batch.attention_mask.as_deref(), ..EncoderInputs::ids(&batch.input_ids, batch.batch, batch.seq) };
    let logits = generator.masked_lm_logits(&generator.last_hidden_rows(&inputs).unwrap().select_rows(&masked).unwrap()).unwrap();
    let drawn = gumbel_max_samples(&pollster::block_on(logits.to_vec::<f32>()).unwrap(), masked.len(), &mut replacement_rng(&step.dropout)).unwrap();
    let mut samples = vec![-100i64; batch.labels.len()];
    for (&i, &id) in masked.iter().zip(&drawn) {
        samples[i] = id as i64;
    }
    let (model, params) = load();
    let replayed = sesame::models::training::Batch { generator_samples: Some(samples), ..batch };
    let by_hand = scalar(&model.losses_backward(&replayed, &params.gradients(), &step).unwrap().rtd)[0];
    eprintln!("discriminator loss with the step's own samples {sampled}, with the samples drawn by hand {by_hand}");
    assert_eq!(sampled, by_hand);
    // Another stream draws other replacements.
    let other = StepOptions { dropout: DropoutStream { seed: 4, batch_index: 5 }, ..step };
    let redrawn = gumbel_max_samples(&pollster::block_on(logits.to_vec::<f32>()).unwrap(), masked.len(), &mut replacement_rng(&other.dropout)).unwrap();
    assert_ne!(drawn, redrawn);
}
