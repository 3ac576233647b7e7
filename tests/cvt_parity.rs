//! The CVT tagger (`cvt`) against the reference written from the paper
//! (`tests/reference/cvt_reference.py`): every prediction module's logits and each layer on
//! both devices, the text path (the tokenizer's word ids and the characters Sesame spells
//! from the text, as the reference encodes them), the token-classification pipeline, the
//! command line, and bad input; and training: both losses (labelled, and CVT's on unlabelled
//! text) and every gradient, without dropout and with cvt_text's (0.5 labelled, 0.2
//! unlabelled, the reference drawing Sesame's masks at Sesame's sites); 20 AdamW steps
//! alternating the two, without dropout and with it (tests/reference/
//! make_cvt_train_fixtures.py, tests/fixtures/train/cvt/ and cvt-dropout/), through the
//! library's Trainer and `sesame train --replay-batches`; and a run from CoNLL and raw text.

mod common;

use std::path::{Path, PathBuf};

use common::train::{
    compare_parameters, dir, flags, refused, replays_the_reference_steps, run_replays_the_reference_steps, scalar, temp_dir, train, trajectory, with,
};
use common::{compare_named, devices, read, sesame};
use sesame::classify::classify_tokens;
use sesame::models::auto::{AutoModel, LoadedModel};
use sesame::models::cvt::train::CvtTraining;
use sesame::models::training::{Objective, StepOptions, Trainable};
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::ops::dropout::DropoutStream;
use sesame::train::data::ReplayBatches;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cvt/tiny")
}

fn load(gpu: &sesame::Device) -> AutoModel {
    let dir = fixture();
    AutoModel::load(&read(&dir, "config.json"), &Weights::new(gpu, &Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap())).unwrap()
}

fn inputs() -> IdsBatch {
    IdsBatch::from_json(&read(&fixture(), "inputs.json")).unwrap()
}

#[derive(serde::Deserialize)]
struct Sentences {
    sentences: Vec<Vec<String>>,
    input_ids: Vec<Vec<u32>>,
    char_ids: Vec<Vec<Vec<u32>>>,
}

#[test]
fn every_module_and_layer_matches_the_reference_on_a_ragged_batch() {
    let names = [
        "logits",
        "logits.full",
        "logits.forwards",
        "logits.backwards",
        "logits.future",
        "logits.past",
        "hidden_states.0",
        "hidden_states.1",
        "hidden_states.2",
    ];
    for gpu in devices() {
        eprintln!("on {}:", gpu.adapter_info().name);
        let out = load(gpu).forward(&inputs(), ForwardOptions { hidden_states: true, ..Default::default() }).unwrap();
        compare_named(&fixture(), &out, &names);
    }
}

#[test]
fn text_is_encoded_as_the_reference_encodes_it_and_tagged() {
    let loaded = LoadedModel::load(common::gpu(), &fixture(), false).unwrap();
    let expected: Sentences = serde_json::from_slice(&read(&fixture(), "inputs.json")).unwrap();
    let reference = Checkpoint::from_bytes(read(&fixture(), "reference.safetensors")).unwrap();
    let (logits, shape) = reference.to_f32("logits").unwrap();
    let (seq, labels) = (shape[1], shape[2]);
    for (n, words) in expected.sentences.iter().enumerate() {
        let text = words.join(" ");
        let encoded = loaded.encode_detailed("test", &text, None).unwrap();
        let len = words.len() + 2;
        assert_eq!(encoded.ids, expected.input_ids[n][..len], "{text}");
        assert_eq!(encoded.char_ids.as_deref().unwrap(), expected.char_ids[n][..len].concat(), "{text}");
        // The pipeline's tags are the primary module's argmax at each word.
        let tags = pollster::block_on(classify_tokens(&loaded, &text, &[])).unwrap();
        let want: Vec<String> = (1..len - 1)
            .map(|t| {
                let row = &logits[(n * seq + t) * labels..(n * seq + t + 1) * labels];
                let best = (0..labels).fold(0, |b, i| if row[i] > row[b] { i } else { b });
                loaded.model.head_config().label(best)
            })
            .collect();
        assert_eq!(tags.iter().map(|t| t.entity.clone()).collect::<Vec<_>>(), want, "{text}");
        // Spans count characters.
        let span = |t: &sesame::classify::TokenLabel| text.chars().skip(t.start).take(t.end - t.start).collect::<String>();
        assert_eq!(tags.iter().map(span).collect::<Vec<_>>(), *words, "{text}");
    }
}

#[test]
fn missing_or_malformed_characters_are_errors() {
    let model = load(common::gpu());
    let forward = |batch: IdsBatch| model.forward(&batch, ForwardOptions::default()).err().map(|e| e.to_string()).unwrap_or_default();
    let err = forward(IdsBatch { char_ids: None, ..inputs() });
    assert!(err.contains("reads each token's characters: the batch has no char_ids"), "{err}");
    let batch = inputs();
    let short: Vec<u32> = batch.char_ids.as_ref().unwrap().chunks(10).flat_map(|row| row[..5].to_vec()).collect();
    let err = forward(IdsBatch { char_ids: Some(short), ..inputs() });
    assert!(err.contains("char_ids rows have 5 ids; this model's are max_word_length + 4 = 10"), "{err}");
    let mut wild = batch.char_ids.clone().unwrap();
    wild[7] = 261;
    let err = forward(IdsBatch { char_ids: Some(wild), ..inputs() });
    assert!(err.contains("char_ids[7] is 261, outside the 261 character ids"), "{err}");
    let mut ids = batch.input_ids.clone();
    ids[3] = 26;
    let err = forward(IdsBatch { input_ids: ids, ..inputs() });
    assert!(err.contains("input_ids[3] is 26, outside the vocabulary of 26"), "{err}");
    // A config whose rows would be absurdly long.
    let mut config: serde_json::Value = serde_json::from_slice(&read(&fixture(), "config.json")).unwrap();
    config["max_word_length"] = 100_000.into();
    let err = sesame::models::cvt::CvtConfig::from_json(&serde_json::to_vec(&config).unwrap()).err().unwrap().to_string();
    assert!(err.contains("max_word_length 100000 is over 256 bytes"), "{err}");
    let err = IdsBatch::from_json(br#"{"input_ids": [[2, 3]], "char_ids": [[[0, 2, 4, 3]]]}"#).err().unwrap().to_string();
    assert!(err.contains("char_ids must hold a row of characters for each of input_ids' [1, 2] tokens"), "{err}");
    let err = IdsBatch::from_json(br#"{"input_ids": [[2, 3]], "char_ids": [[[0, 2, 4, 3], [0, 2]]]}"#).err().unwrap().to_string();
    assert!(err.contains("every token's char_ids row must have the same length"), "{err}");
}

#[test]
fn forward_on_the_command_line_from_ids_and_from_text() {
    let out = std::env::temp_dir().join(format!("sesame-cvt-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let model = fixture().to_str().unwrap().to_string();
    let ids = fixture().join("inputs.json");
    let outputs = out.join("ids.safetensors");
    let (ok, _, err) = sesame(&["forward", "--model", &model, "--ids", ids.to_str().unwrap(), "--hidden-states", "--out", outputs.to_str().unwrap()]);
    assert!(ok, "{err}");
    let got = Checkpoint::from_bytes(std::fs::read(&outputs).unwrap()).unwrap();
    assert_eq!(got.shape("logits").unwrap(), &[4, 8, 3]);
    assert_eq!(got.shape("logits.past").unwrap(), &[4, 8, 3]);
    assert_eq!(got.shape("hidden_states.2").unwrap(), &[4, 8, 8]);
    let outputs = out.join("text.safetensors");
    let (ok, _, err) = sesame(&["forward", "--model", &model, "--text", "The cat sat", "--out", outputs.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(Checkpoint::from_bytes(std::fs::read(&outputs).unwrap()).unwrap().shape("logits").unwrap(), &[1, 5, 3]);
    std::fs::remove_dir_all(&out).unwrap();
}

/// The tagger as a run trains it, without dropout (label smoothing 0.1, the reference's).
fn training(gpu: &sesame::Device) -> (CvtTraining, Parameters) {
    let mut config: serde_json::Value = serde_json::from_slice(&read(&fixture(), "config.json")).unwrap();
    config["labeled_dropout"] = 0.0.into();
    config["unlabeled_dropout"] = 0.0.into();
    let checkpoint = Checkpoint::from_bytes(read(&fixture(), "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = CvtTraining::load(&serde_json::to_vec(&config).unwrap(), &weights).unwrap();
    (model, Parameters::from_weights(&weights).unwrap())
}

#[test]
fn both_losses_and_every_gradient_match_the_reference() {
    #[derive(serde::Deserialize)]
    struct Losses {
        labeled: f32,
        unlabeled: f32,
    }
    #[derive(serde::Deserialize)]
    struct Labels {
        labels: Vec<Vec<i64>>,
    }
    let want: Losses = serde_json::from_slice(&read(&fixture(), "losses.json")).unwrap();
    let labels: Vec<i64> = serde_json::from_slice::<Labels>(&read(&fixture(), "inputs.json")).unwrap().labels.concat();
    let stream = DropoutStream { seed: 1, batch_index: 0 };
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = training(gpu);
        let loss = scalar(&model.labeled_loss_backward(&inputs(), &labels, &params.gradients(), 1.0, &stream).unwrap())[0];
        eprintln!("CVT labelled loss on {device}: {loss} (reference {})", want.labeled);
        assert!((loss - want.labeled).abs() <= 1e-5 * want.labeled, "{device}: {loss} vs {}", want.labeled);
        let grads = Checkpoint::from_bytes(read(&fixture(), "grads-labeled.safetensors")).unwrap();
        compare_parameters(&format!("CVT labelled gradient on {device}"), &params, Part::Grad, &grads, 1e-4);

        let (model, params) = training(gpu);
        let loss = scalar(&model.unlabeled_loss_backward(&inputs(), &params.gradients(), 1.0, &stream).unwrap())[0];
        eprintln!("CVT unlabelled loss on {device}: {loss} (reference {})", want.unlabeled);
        assert!((loss - want.unlabeled).abs() <= 1e-5 * want.unlabeled, "{device}: {loss} vs {}", want.unlabeled);
        let grads = Checkpoint::from_bytes(read(&fixture(), "grads-unlabeled.safetensors")).unwrap();
        compare_parameters(&format!("CVT unlabelled gradient on {device}"), &params, Part::Grad, &grads, 1e-4);
    }
}

const RUN: &str = "cvt";
/// The same run under cvt_text's dropout, 0.5 on labelled batches and 0.2 on unlabelled ones.
const DROPOUT_RUN: &str = "cvt-dropout";

/// The tagger of training fixture `run`'s init/ (its config's dropouts), as a run trains it.
fn initial(gpu: &sesame::Device, run: &str) -> (Box<dyn Trainable>, Parameters) {
    let init = dir(run).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model: Box<dyn Trainable> = Box::new(CvtTraining::load(&read(&init, "config.json"), &weights).unwrap());
    (model, Parameters::from_weights(&weights).unwrap())
}

#[test]
fn under_dropout_both_losses_and_every_gradient_match_the_reference_drawing_sesame_s_masks() {
    #[derive(serde::Deserialize)]
    struct Loss {
        /// The replayed batch, and the step whose masks it draws.
        batch: usize,
        loss: f32,
        loss_without_dropout: f32,
    }
    #[derive(serde::Deserialize)]
    struct Losses {
        labeled: Loss,
        unlabeled: Loss,
    }
    let want: Losses = serde_json::from_slice(&read(&dir(DROPOUT_RUN), "losses.json")).unwrap();
    let batches = ReplayBatches::from_bytes(&read(&dir(DROPOUT_RUN), "batches.safetensors")).unwrap();
    let seed = trajectory(DROPOUT_RUN).dropout_seed;
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        for (name, want) in [("labeled", &want.labeled), ("unlabeled", &want.unlabeled)] {
            let (model, params) = initial(gpu, DROPOUT_RUN);
            let batch = batches.batch(want.batch).unwrap();
            // The masks the Trainer draws at step `batch`.
            let step = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed, batch_index: want.batch as u64 }, lm_coef: 0.0 };
            let loss = scalar(&model.loss_backward(Objective::TokenClassify, &batch, &params.gradients(), &step).unwrap())[0];
            eprintln!("CVT {name} loss under dropout on {device}: {loss} (reference {}, without dropout {})", want.loss, want.loss_without_dropout);
            assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "{device} {name}: {loss} vs {}", want.loss);
            // The masks are in effect: without them the loss is another.
            assert!((loss - want.loss_without_dropout).abs() > 1e-3 * want.loss, "{device} {name}: {loss} is the loss without dropout");
            let grads = Checkpoint::from_bytes(read(&dir(DROPOUT_RUN), &format!("grads-{name}.safetensors"))).unwrap();
            compare_parameters(&format!("CVT {name} gradient under dropout on {device}"), &params, Part::Grad, &grads, 1e-4);
        }
    }
}

#[test]
fn twenty_steps_of_cross_view_training_match_the_reference() {
    for gpu in devices() {
        let (model, params) = initial(gpu, RUN);
        replays_the_reference_steps(&format!("CVT on {}", gpu.adapter_info().name), gpu, RUN, Objective::TokenClassify, model, params);
    }
}

#[test]
fn twenty_steps_of_cross_view_training_under_dropout_match_the_reference() {
    for gpu in devices() {
        let (model, params) = initial(gpu, DROPOUT_RUN);
        replays_the_reference_steps(&format!("CVT under dropout on {}", gpu.adapter_info().name), gpu, DROPOUT_RUN, Objective::TokenClassify, model, params);
    }
}

#[test]
fn a_run_replays_cross_view_training() {
    let dir_out = temp_dir("cvt-replay");
    let out = dir_out.join("run");
    run_replays_the_reference_steps(RUN, "token-classify", &out);
    LoadedModel::load(common::gpu(), &out, false).unwrap();
    run_replays_the_reference_steps(DROPOUT_RUN, "token-classify", &dir_out.join("dropout"));
    std::fs::remove_dir_all(&dir_out).unwrap();
}

/// CoNLL with the fixture's tags, and raw sentences of the same words.
fn tagging_data(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let words = [("the", "DET"), ("a", "DET"), ("cat", "NOUN"), ("dog", "NOUN"), ("mat", "NOUN"), ("sat", "OTHER"), ("on", "OTHER"), ("big", "OTHER")];
    // A fixed walk over the words (an LCG: the data stays the same).
    let mut state = 7u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize % n
    };
    let mut sentence = || (0..3 + next(4)).map(|_| words[next(words.len())]).collect::<Vec<_>>();
    let conll = |n: usize, sentence: &mut dyn FnMut() -> Vec<(&'static str, &'static str)>| {
        (0..n).map(|_| sentence().iter().map(|(w, t)| format!("{w} {t}\n")).collect::<String>() + "\n").collect::<String>()
    };
    let (train, dev, raw) = (dir.join("train.conll"), dir.join("dev.conll"), dir.join("raw.txt"));
    std::fs::write(&train, conll(40, &mut sentence)).unwrap();
    std::fs::write(&dev, conll(10, &mut sentence)).unwrap();
    let lines: String = (0..40).map(|_| sentence().iter().map(|(w, _)| *w).collect::<Vec<_>>().join(" ") + "\n").collect();
    std::fs::write(&raw, lines).unwrap();
    (train, dev, raw)
}

#[test]
fn a_run_tags_from_conll_with_and_without_unlabelled_text() {
    let out = temp_dir("cvt-conll");
    let (train_data, dev, raw) = tagging_data(&out);
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let fixture = path(&fixture());
    let from_fixture = ["--model-init", fixture.as_str()];
    let train_with = |name: &str, model: &[&str], extra: &[&str]| {
        let folder = out.join(name);
        let mut args = flags(model);
        args.extend(flags(&["--objective", "token-classify", "--data", &path(&train_data), "--eval-data", &path(&dev)]));
        args.extend(flags(&["--steps", "40", "--batch-size", "4", "--seq-len", "16", "--lr", "1e-2", "--eval-every", "40", "--out", &path(&folder)]));
        args.extend(extra.iter().map(|s| s.to_string()));
        (folder, train(&args).unwrap_or_else(|e| panic!("{name}: {e}")))
    };
    let (supervised, trained) = train_with("supervised", &from_fixture, &[]);
    assert!(trained.first_evaluation()["eval_accuracy"].is_f64());
    let (cross_view, trained) = train_with("cvt", &from_fixture, &["--unlabeled-data", &path(&raw)]);
    assert!(trained.first_evaluation()["eval_accuracy"].is_f64());
    // A fresh tagger: its tags from the CoNLL file, its vocabulary from both files.
    let fresh_model = ["--arch", "cvt", "--tokenizer", "words:40", "--hidden", "8", "--embedding-size", "8"];
    // A tag only the held-out file has is a class the tagger knows (and never learns).
    std::fs::write(&dev, std::fs::read_to_string(&dev).unwrap() + "cat ANIMAL\n\n").unwrap();
    let (fresh, _) = train_with("fresh", &fresh_model, &["--unlabeled-data", &path(&raw), "--drop-mult", "0.5"]);
    let config: serde_json::Value = serde_json::from_slice(&read(&fresh, "config.json")).unwrap();
    assert_eq!((config["lstm_sizes"].clone(), config["id2label"]["2"].clone()), (serde_json::json!([16, 8]), serde_json::json!("NOUN")));
    assert_eq!(config["id2label"]["0"], "ANIMAL");
    // cvt_text's dropouts, stated and halved by --drop-mult 0.5.
    assert_eq!((config["labeled_dropout"].as_f64(), config["unlabeled_dropout"].as_f64()), (Some(0.25), Some(0.1)));
    // Each folder tags text.
    for folder in [&supervised, &cross_view, &fresh] {
        let loaded = LoadedModel::load(common::gpu(), folder, false).unwrap();
        assert_eq!(pollster::block_on(classify_tokens(&loaded, "the cat sat", &[])).unwrap().len(), 3);
    }
    // What a CVT tagger does not train with, and unlabelled text for another model.
    let refused = |args: &[&str]| {
        let bad = out.join("bad");
        refused(&with(&with(&flags(&["--data", train_data.to_str().unwrap()]), args), &["--out", bad.to_str().unwrap()]))
    };
    let err = refused(&["--arch", "cvt", "--layers", "3", "--objective", "token-classify"]);
    assert!(err.contains("--layers 3: --arch cvt has its paper's 2 biLSTM layers"), "{err}");
    let err = refused(&["--model-init", &fixture, "--objective", "token-classify", "--dropout", "0", "--drop-mult", "0.5"]);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = refused(&["--model-init", &fixture, "--objective", "classify"]);
    assert!(err.contains("objective classify trains BERT (bert)") && err.contains("CVT (cvt) trains token-classify"), "{err}");
    let bert = path(&common::fixture("bert", "BertForTokenClassification"));
    let raw = path(&raw);
    let err = refused(&["--model-init", &bert, "--objective", "token-classify", "--unlabeled-data", &raw]);
    assert!(err.contains("--unlabeled-data is cross-view training's unlabelled text"), "{err}");
    let err = refused(&["--model-init", &fixture, "--objective", "token-classify", "--unlabeled-data", &raw, "--grad-accum", "2"]);
    assert!(err.contains("--grad-accum 2 would mix them in one step"), "{err}");
    std::fs::write(out.join("empty.txt"), "\n\n").unwrap();
    let empty = path(&out.join("empty.txt"));
    let err = refused(&["--model-init", &fixture, "--objective", "token-classify", "--unlabeled-data", &empty]);
    assert!(err.contains("no sentences in the unlabelled text"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}
