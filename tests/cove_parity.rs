//! CoVe (the MT-LSTM encoder) against salesforce/cove's forward in PyTorch
//! (tests/reference/make_cove_fixtures.py): a release-layout state dict, a vocabulary and
//! GloVe text converted by `convert_cove`, then every layer of a ragged batch within 1e-4 on
//! each device; bad state dicts and GloVe files as clear errors.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_committed, compare_named, devices, inputs, read, sesame};
use sesame::models::auto::AutoModel;
use sesame::models::cove::convert::{convert_cove, CoveFolder};
use sesame::models::ForwardOptions;
use sesame::tokenize::read_word_list;
use sesame::weights::{serialize_f32, Checkpoint, Weights};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cove/tiny")
}

fn convert(checkpoint: &Checkpoint, residual: bool) -> sesame::error::Result<CoveFolder> {
    let dir = fixture();
    let vocab = read_word_list(&read(&dir, "vocab.txt"), &[]).unwrap();
    convert_cove(checkpoint, &vocab, &read(&dir, "glove.txt")[..], residual, &mut |_| {})
}

/// A state dict's tensors: (name, shape, values).
type Tensors = Vec<(String, Vec<usize>, Vec<f32>)>;

fn release() -> Checkpoint {
    Checkpoint::from_bytes(read(&fixture(), "state_dict.safetensors")).unwrap()
}

#[test]
fn every_layer_matches_the_mt_lstm_on_a_ragged_batch() {
    let dir = fixture();
    let folder = convert(&release(), false).unwrap();
    assert_eq!((folder.found, folder.missing.clone()), (21, vec!["<pad>".to_string(), "dog".into(), "park".into()]));
    let c = &folder.config;
    assert_eq!((c.vocab_size, c.embedding_dim, c.hidden_size, c.num_layers), (24, 6, 5, 2));
    for gpu in devices() {
        eprintln!("on {}:", gpu.adapter_info().name);
        let checkpoint = Checkpoint::from_bytes(folder.safetensors.clone()).unwrap();
        let model = AutoModel::load(&folder.config_json, &Weights::new(gpu, &checkpoint)).unwrap();
        let out = model.forward(&inputs(&dir).batch(), ForwardOptions { hidden_states: true, ..Default::default() }).unwrap();
        compare_named(&dir, &out, &["last_hidden_state", "hidden_states.0", "hidden_states.1", "hidden_states.2"]);
    }
}

#[test]
fn the_committed_folder_is_the_conversion() {
    let folder = convert(&release(), false).unwrap();
    let files = [("config.json", &folder.config_json[..]), ("model.safetensors", &folder.safetensors), ("tokenizer.json", &folder.tokenizer_json)];
    let remake = "cargo run -- convert-cove --weights tests/fixtures/cove/tiny/state_dict.safetensors --vocab tests/fixtures/cove/tiny/vocab.txt --embeddings tests/fixtures/cove/tiny/glove.txt --out tests/fixtures/cove/tiny";
    assert_committed(&fixture(), &files, remake);
}

#[test]
fn residual_embeddings_put_the_vectors_before_cove() {
    let folder = convert(&release(), true).unwrap();
    for gpu in devices() {
        let checkpoint = Checkpoint::from_bytes(folder.safetensors.clone()).unwrap();
        let model = AutoModel::load(&folder.config_json, &Weights::new(gpu, &checkpoint)).unwrap();
        let out = model.forward(&inputs(&fixture()).batch(), ForwardOptions { hidden_states: true, ..Default::default() }).unwrap();
        let get = |name: &str| pollster::block_on(out.get(name).unwrap().to_vec::<f32>()).unwrap();
        let (last, vectors, top) = (get("last_hidden_state"), get("hidden_states.0"), get("hidden_states.2"));
        let expected: Vec<f32> = vectors.chunks(6).zip(top.chunks(10)).flat_map(|(v, t)| v.iter().chain(t).copied()).collect();
        assert_eq!(last, expected);
    }
}

#[test]
fn state_dicts_that_do_not_fit_are_errors_naming_the_tensor() {
    let checkpoint = release();
    let tensors: Tensors = checkpoint
        .names()
        .map(|n| {
            let (values, shape) = checkpoint.to_f32(n).unwrap();
            (n.to_string(), shape, values)
        })
        .collect();
    let edited = |edit: &dyn Fn(&mut Tensors)| {
        let mut t = tensors.clone();
        edit(&mut t);
        convert(&Checkpoint::from_bytes(serialize_f32(&t).unwrap()).unwrap(), false).err().map(|e| e.to_string()).unwrap_or_default()
    };
    // The `rnn.` prefix of MTLSTM's own state dict is read too.
    let prefixed: Vec<_> = tensors.iter().map(|(n, s, v)| (format!("rnn.{n}"), s.clone(), v.clone())).collect();
    assert!(convert(&Checkpoint::from_bytes(serialize_f32(&prefixed).unwrap()).unwrap(), false).is_ok());
    let err = edited(&|t| t.retain(|(n, _, _)| n != "bias_hh_l1_reverse"));
    assert!(err.contains("`bias_hh_l1_reverse` is missing"), "{err}");
    let err = edited(&|t| t.push(("extra".into(), vec![1], vec![0.0])));
    assert!(err.contains("does not have: extra"), "{err}");
    let err = edited(&|t| t.retain(|(n, _, _)| n != "weight_ih_l0"));
    assert!(err.contains("no `weight_ih_l0`"), "{err}");
    // GloVe vectors of another width.
    let vocab = read_word_list(&read(&fixture(), "vocab.txt"), &[]).unwrap();
    let err = convert_cove(&checkpoint, &vocab, &b"the 1 2 3\n"[..], false, &mut |_| {}).err().unwrap().to_string();
    assert!(err.contains("GloVe line 1 has 4 fields; a word and 6 numbers"), "{err}");
    // A vocabulary without `<unk>` makes a tokenizer that loads, and that names a word it lacks.
    let without_unk: Vec<String> = vocab.iter().map(|w| if w == "<unk>" { "<none>".into() } else { w.clone() }).collect();
    let folder = convert_cove(&checkpoint, &without_unk, &read(&fixture(), "glove.txt")[..], false, &mut |_| {}).unwrap();
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&folder.tokenizer_json).unwrap();
    assert_eq!(tokenizer.encode("the cat", false).unwrap().len(), 2);
    let err = tokenizer.encode("the zebra", false).unwrap_err().to_string();
    assert!(err.contains(r#"the text holds "zebra""#), "{err}");
}

#[test]
fn convert_cove_then_forward_on_the_command_line() {
    let dir = fixture();
    let out = std::env::temp_dir().join(format!("sesame-cove-{}", std::process::id()));
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (ok, _, err) = sesame(&[
        "convert-cove",
        "--weights",
        &path("state_dict.safetensors"),
        "--vocab",
        &path("vocab.txt"),
        "--embeddings",
        &path("glove.txt"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("GloVe had 21 of the 24 words (zero vectors for <pad>, dog, park)"), "{err}");
    let outputs = out.join("outputs.safetensors");
    let (ok, _, err) = sesame(&["forward", "--model", out.to_str().unwrap(), "--text", "the cat sat on the mat", "--out", outputs.to_str().unwrap()]);
    assert!(ok, "{err}");
    let got = Checkpoint::from_bytes(std::fs::read(&outputs).unwrap()).unwrap();
    assert_eq!(got.shape("last_hidden_state").unwrap(), &[1, 6, 10]);
    std::fs::remove_dir_all(&out).unwrap();
}
