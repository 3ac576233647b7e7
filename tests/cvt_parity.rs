//! The CVT tagger (`cvt`) against the reference written from the paper
//! (`tests/reference/cvt_reference.py`): every prediction module's logits and each layer on
//! both devices, the text path (the tokenizer's word ids and the characters Sesame spells
//! from the text, as the reference encodes them), the token-classification pipeline, the
//! command line, and bad input; and training: both losses (labelled, and CVT's on unlabelled
//! text) and every gradient, without dropout.

mod common;

use std::path::{Path, PathBuf};

use common::train::{compare_parameters, scalar};
use common::{compare_named, devices, read, sesame};
use sesame::classify::classify_tokens;
use sesame::models::auto::{AutoModel, LoadedModel};
use sesame::models::cvt::train::CvtTraining;
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::ops::dropout::DropoutStream;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cvt/tiny")
}

fn load(gpu: &sesame::Gpu) -> AutoModel {
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
fn training(gpu: &sesame::Gpu) -> (CvtTraining, Parameters) {
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
