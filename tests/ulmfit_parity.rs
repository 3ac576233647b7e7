//! AWD-LSTM (ULMFiT's language model) against fastai and against the reference written from
//! the paper: state dicts converted by `convert_ulmfit` then run on each device, every layer
//! and the logits within 1e-4 (tests/reference/make_awd_lstm_fastai_fixtures.py,
//! make_awd_lstm_fixtures.py); bad state dicts and batches as clear errors.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_committed, compare_named, devices, inputs, read, sesame};
use sesame::models::auto::AutoModel;
use sesame::models::awd_lstm::convert::{convert_ulmfit, read_vocab, ClassifierOptions, UlmfitFolder};
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::weights::{serialize_f32, Checkpoint, Weights};
use sesame::Device;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/awd_lstm").join(name)
}

fn convert(dir: &Path) -> UlmfitFolder {
    let checkpoint = Checkpoint::from_bytes(read(dir, "state_dict.safetensors")).unwrap();
    convert_ulmfit(&checkpoint, &read_vocab(&read(dir, "vocab.txt")).unwrap(), &ClassifierOptions::default()).unwrap()
}

fn load(gpu: &Device, folder: &UlmfitFolder) -> AutoModel {
    let checkpoint = Checkpoint::from_bytes(folder.safetensors.clone()).unwrap();
    AutoModel::load(&folder.config_json, &Weights::new(gpu, &checkpoint)).unwrap()
}

#[test]
fn language_models_match_fastai_and_the_paper_reference() {
    for name in ["fastai-lm", "lm", "untied"] {
        let dir = fixture(name);
        let folder = convert(&dir);
        for gpu in devices() {
            eprintln!("{name} on {}:", gpu.adapter_info().name);
            let model = load(gpu, &folder);
            assert_eq!(model.architecture(), "AwdLstmForLanguageModeling");
            let options = ForwardOptions { hidden_states: true, last_hidden_state: true, ..Default::default() };
            let out = model.forward(&inputs(&dir).batch(), options).unwrap();
            let layers = folder.config.n_layers;
            let mut names = vec!["logits".to_string(), "last_hidden_state".to_string()];
            names.extend((0..=layers).map(|i| format!("hidden_states.{i}")));
            compare_named(&dir, &out, &names.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
}

/// The classifier fixture converted with its seq_len, max_len and labels.
fn convert_classifier(labels: Option<Vec<String>>) -> sesame::error::Result<UlmfitFolder> {
    let dir = fixture("fastai-classifier");
    #[derive(serde::Deserialize)]
    struct Options {
        bptt: usize,
        max_len: usize,
    }
    let options: Options = serde_json::from_slice(&read(&dir, "options.json")).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "state_dict.safetensors")).unwrap();
    convert_ulmfit(&checkpoint, &read_vocab(&read(&dir, "vocab.txt")).unwrap(), &ClassifierOptions { bptt: options.bptt, max_len: options.max_len, labels })
}

#[test]
fn the_classifier_matches_fastai_on_each_text_of_a_ragged_batch() {
    // Texts of 6, 3, 14 and 1 tokens; the 14-token one pools over its last chunks only.
    let dir = fixture("fastai-classifier");
    let labels = read_vocab(&read(&dir, "labels.txt")).unwrap();
    let folder = convert_classifier(Some(labels.clone())).unwrap();
    assert_eq!((folder.config.lin_ftrs.as_slice(), folder.config.bptt, folder.config.max_len), (&[10][..], 4, 8));
    for gpu in devices() {
        eprintln!("fastai-classifier on {}:", gpu.adapter_info().name);
        let model = load(gpu, &folder);
        assert_eq!(model.architecture(), "AwdLstmForSequenceClassification");
        assert_eq!((0..3).map(|i| model.head_config().label(i)).collect::<Vec<_>>(), labels);
        let out = model.forward(&inputs(&dir).batch(), ForwardOptions { hidden_states: true, ..Default::default() }).unwrap();
        compare_named(&dir, &out, &["logits"]);
        assert_eq!(out.get("hidden_states.3").unwrap().shape(), &[4, 14, 8]);
    }
    let err = convert_classifier(Some(vec!["yes".into(), "no".into()])).err().unwrap().to_string();
    assert!(err.contains("3 classes but 2 labels"), "{err}");
    // The classifier trains on with fastai's classifier dropouts.
    let c = &folder.config;
    assert_eq!((c.output_p, c.weight_p, c.ps.clone()), (0.4, 0.5, Some(vec![0.1])));
    // A window shorter than a chunk would pool nothing of a long text.
    let dir = fixture("fastai-classifier");
    let checkpoint = Checkpoint::from_bytes(read(&dir, "state_dict.safetensors")).unwrap();
    let short = ClassifierOptions { bptt: 8, max_len: 4, labels: None };
    let err = convert_ulmfit(&checkpoint, &read_vocab(&read(&dir, "vocab.txt")).unwrap(), &short).err().unwrap().to_string();
    assert!(err.contains("max_len 4 is shorter than bptt 8"), "{err}");
}

#[test]
fn the_committed_classifier_folder_is_the_conversion() {
    let labels = read_vocab(&read(&fixture("fastai-classifier"), "labels.txt")).unwrap();
    let folder = convert_classifier(Some(labels)).unwrap();
    let files = [
        ("config.json", &folder.config_json[..]),
        ("model.safetensors", &folder.safetensors),
        ("tokenizer.json", &folder.tokenizer_json),
        ("tokenizer_config.json", &folder.tokenizer_config_json),
    ];
    let d = "tests/fixtures/awd_lstm/fastai-classifier";
    let remake = format!(
        "cargo run -- convert-ulmfit --weights {d}/state_dict.safetensors --vocab {d}/vocab.txt --labels {d}/labels.txt --bptt 4 --max-len 8 --out {d}"
    );
    assert_committed(&fixture("fastai-classifier"), &files, &remake);
}

#[test]
fn the_conversion_reads_sizes_ties_and_drops_fastai_s_duplicates() {
    let lm = convert(&fixture("fastai-lm"));
    let c = &lm.config;
    assert_eq!((c.vocab_size, c.emb_sz, c.n_hid, c.n_layers, c.pad_token, c.tie_weights, c.out_bias), (30, 8, 12, 3, 1, true, true));
    let written = Checkpoint::from_bytes(lm.safetensors).unwrap();
    let names: Vec<&str> = written.names().collect();
    assert_eq!(names.len(), 14, "{names:?}");
    assert!(!written.contains("0.encoder_dp.emb.weight") && !written.contains("1.decoder.weight"), "{names:?}");
    let untied = convert(&fixture("untied")).config;
    assert_eq!((untied.emb_sz, untied.n_hid, untied.n_layers, untied.tie_weights, untied.out_bias), (6, 10, 2, false, false));
}

/// A state dict's tensors: (name, shape, values).
type Tensors = Vec<(String, Vec<usize>, Vec<f32>)>;
/// A change to them.
type Edit = Box<dyn FnOnce(&mut Tensors)>;

/// The fastai-lm state dict with `edit` applied to its tensors, converted.
fn convert_edited(edit: impl FnOnce(&mut Tensors)) -> sesame::error::Result<UlmfitFolder> {
    let dir = fixture("fastai-lm");
    let checkpoint = Checkpoint::from_bytes(read(&dir, "state_dict.safetensors")).unwrap();
    let mut tensors: Tensors = checkpoint
        .names()
        .map(|n| {
            let (values, shape) = checkpoint.to_f32(n).unwrap();
            (n.to_string(), shape, values)
        })
        .collect();
    edit(&mut tensors);
    let edited = Checkpoint::from_bytes(serialize_f32(&tensors).unwrap()).unwrap();
    convert_ulmfit(&edited, &read_vocab(&read(&dir, "vocab.txt")).unwrap(), &ClassifierOptions::default())
}

#[test]
fn state_dicts_that_do_not_fit_are_errors_naming_the_tensor() {
    let cases: Vec<(&str, Edit)> = vec![
        ("`0.rnns.1.module.bias_ih_l0` is missing", Box::new(|t| t.retain(|(n, _, _)| n != "0.rnns.1.module.bias_ih_l0"))),
        // The tensor whose presence once told a layer was there.
        ("`0.rnns.2.weight_hh_l0_raw` is missing", Box::new(|t| t.retain(|(n, _, _)| n != "0.rnns.2.weight_hh_l0_raw"))),
        (
            "`0.rnns.2.module.weight_ih_l0` has shape [32, 11], expected [32, 12]",
            Box::new(|t| {
                let w = t.iter_mut().find(|(n, _, _)| n == "0.rnns.2.module.weight_ih_l0").unwrap();
                w.1 = vec![32, 11];
                w.2.truncate(32 * 11);
            }),
        ),
        ("tensors an AWD-LSTM does not have: 1.extra.weight", Box::new(|t| t.push(("1.extra.weight".into(), vec![2], vec![0.0; 2])))),
        (
            "bidirectional",
            Box::new(|t| {
                let w = t.iter().find(|(n, _, _)| n == "0.rnns.0.weight_hh_l0_raw").unwrap().clone();
                t.push(("0.rnns.0.weight_hh_l0_raw_reverse".into(), w.1, w.2));
            }),
        ),
        ("no `0.encoder.weight`", Box::new(|t| t.retain(|(n, _, _)| !n.starts_with("0.encoder")))),
        ("a classifier without layers", Box::new(|t| t.iter_mut().for_each(|(n, _, _)| *n = n.replacen("0.", "0.module.", 1)))),
    ];
    for (want, edit) in cases {
        let err = convert_edited(edit).err().unwrap_or_else(|| panic!("no error for {want}")).to_string();
        assert!(err.contains(want), "{want}: {err}");
    }
    // A vocabulary of another size.
    let dir = fixture("fastai-lm");
    let checkpoint = Checkpoint::from_bytes(read(&dir, "state_dict.safetensors")).unwrap();
    let short: Vec<String> = read_vocab(&read(&dir, "vocab.txt")).unwrap().into_iter().take(29).collect();
    let err = convert_ulmfit(&checkpoint, &short, &ClassifierOptions::default()).err().unwrap().to_string();
    assert!(err.contains("30 rows but the vocabulary 29 tokens"), "{err}");
}

#[test]
fn left_padded_or_gapped_batches_and_bad_ids_are_errors() {
    let folder = convert(&fixture("untied"));
    for gpu in devices() {
        let model = load(gpu, &folder);
        let batch = |ids: Vec<u32>, mask: Vec<u32>| IdsBatch { input_ids: ids, attention_mask: Some(mask), batch: 2, seq: 3, ..Default::default() };
        let run = |b: IdsBatch| model.forward(&b, ForwardOptions::default()).err().map(|e| e.to_string());
        assert_eq!(run(batch(vec![2, 9, 10, 2, 9, 1], vec![1, 1, 1, 1, 1, 0])), None);
        assert!(run(batch(vec![2, 9, 10, 1, 2, 9], vec![1, 1, 1, 0, 1, 1])).unwrap().contains("left-padded"));
        assert!(run(batch(vec![2, 9, 10, 2, 1, 9], vec![1, 1, 1, 1, 0, 1])).unwrap().contains("gap"));
        assert!(run(batch(vec![2, 9, 30, 2, 9, 1], vec![1, 1, 1, 1, 1, 0])).unwrap().contains("out of range"));
    }
}

#[test]
fn convert_ulmfit_then_forward_on_the_command_line() {
    let dir = fixture("fastai-lm");
    let out = std::env::temp_dir().join(format!("sesame-ulmfit-{}", std::process::id()));
    let weights = dir.join("state_dict.safetensors");
    let (ok, _, err) =
        sesame(&["convert-ulmfit", "--weights", weights.to_str().unwrap(), "--vocab", dir.join("vocab.txt").to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("AwdLstmForLanguageModeling (3 layers, emb_sz 8, n_hid 12, vocabulary 30"), "{err}");
    let outputs = out.join("outputs.safetensors");
    let (ok, _, err) = sesame(&[
        "forward",
        "--model",
        out.to_str().unwrap(),
        "--ids",
        dir.join("inputs.json").to_str().unwrap(),
        "--out",
        outputs.to_str().unwrap(),
        "--hidden-states",
    ]);
    assert!(ok, "{err}");
    let got = Checkpoint::from_bytes(std::fs::read(&outputs).unwrap()).unwrap();
    let want = Checkpoint::from_bytes(read(&dir, "reference.safetensors")).unwrap();
    for name in ["logits", "hidden_states.0", "hidden_states.3"] {
        let ((g, g_shape), (w, w_shape)) = (got.to_f32(name).unwrap(), want.to_f32(name).unwrap());
        assert_eq!(g_shape, w_shape, "{name}");
        let err = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(err <= 1e-4, "{name}: {err}");
    }
    // Text through the folder's tokenizer: fastai's rules (tokenizer_config.json), xxbos, the words.
    let (ok, stdout, err) = sesame(&["tokenize", "--model", out.to_str().unwrap(), "--text", "The cat sat"]);
    assert!(ok, "{err}");
    assert_eq!(stdout.trim(), "xxbos(2) xxmaj(8) the(9) cat(11) sat(13)", "fastai's rules mark the capital");
    let (ok, stdout, err) = sesame(&["info", "--model", out.to_str().unwrap()]);
    assert!(ok && stdout.contains("AWD-LSTM") && stdout.contains("3 (recurrent, hidden size 8)"), "{stdout}{err}");
    let (ok, _, err) = sesame(&["convert-ulmfit", "--weights", "lstm_fwd.pth", "--vocab", "itos.txt", "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("is a PyTorch pickle"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}
