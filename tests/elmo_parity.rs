//! ELMo against the PyTorch reference (tests/reference/elmo_reference.py, AllenNLP's
//! architecture and names): every layer and mix of a ragged batch within 1e-4, the character
//! ids exactly, and bad checkpoints and inputs as clear errors.

mod common;

use std::path::{Path, PathBuf};

use common::{compare_named, devices, gpu, read};
use sesame::models::elmo::chars::{word_ids, CHARS_PER_TOKEN};
use sesame::models::elmo::ElmoModel;

fn elmo_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/elmo").join(name)
}

#[derive(serde::Deserialize)]
struct Inputs {
    sentences: Vec<Vec<String>>,
    /// [B][T][50], padded tokens all 0.
    char_ids: Vec<Vec<Vec<u32>>>,
}

fn inputs(dir: &Path) -> Inputs {
    serde_json::from_slice(&read(dir, "inputs.json")).unwrap()
}

#[test]
fn layers_and_mixes_match_the_reference_on_a_ragged_batch() {
    for (gpu, (name, mixes)) in devices().into_iter().flat_map(|gpu| [(gpu, ("small", 2)), (gpu, ("tanh", 1))]) {
        eprintln!("on {}:", gpu.adapter_info().name);
        let dir = elmo_fixture(name);
        let model = ElmoModel::load_dir(gpu, &dir).unwrap();
        assert_eq!(model.mixes.len(), mixes, "{name}: scalar mixes found");
        let out = model.forward(&inputs(&dir).sentences).unwrap().into_model_output();
        let mut names = vec!["elmo_layers".to_string(), "mask".to_string()];
        names.extend((0..mixes).map(|k| format!("elmo_representations.{k}")));
        compare_named(&dir, &out, &names.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

#[test]
fn character_ids_are_elmo_s() {
    #[derive(serde::Deserialize)]
    struct Case {
        word: String,
        ids: Vec<u32>,
    }
    let cases: Vec<Case> = serde_json::from_slice(&read(&elmo_fixture(""), "char_ids.json")).unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        assert_eq!(word_ids(&case.word).to_vec(), case.ids, "{:?}", case.word);
    }
    let batch = inputs(&elmo_fixture("small"));
    for (sentence, rows) in batch.sentences.iter().zip(&batch.char_ids) {
        for (t, row) in rows.iter().enumerate() {
            let want: Vec<u32> = sentence.get(t).map_or(vec![0; CHARS_PER_TOKEN], |w| word_ids(w).to_vec());
            assert_eq!(row, &want, "{sentence:?} token {t}");
        }
    }
}

#[test]
fn bad_input_and_checkpoints_are_clear_errors() {
    let dir = elmo_fixture("small");
    let model = ElmoModel::load_dir(gpu(), &dir).unwrap();
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let err = |r: sesame::Result<_>| r.err().map(|e: sesame::SesameError| e.to_string()).unwrap_or_default();
    assert!(err(model.forward(&[words(&["a"]), vec![]]).map(|_| ())).contains("sentence 1 has no words"));
    assert!(err(model.forward(&[]).map(|_| ())).contains("no sentences"));
    // A word longer than 50 bytes is cut, as in ELMo.
    assert!(model.forward(&[words(&[&"x".repeat(500)])]).is_ok());

    let options = String::from_utf8(read(&dir, "options.json")).unwrap();
    let weights = || read(&dir, "model.safetensors");
    let load = |options: &str| err(ElmoModel::from_bytes(gpu(), options.as_bytes(), weights()).map(|_| ()));
    assert!(load(&options.replace("\"projection_dim\": 8", "\"projection_dim\": 16")).contains("but the config implies"), "projection width");
    assert!(load(&options.replace("\"n_highway\": 2", "\"n_highway\": 3")).contains("_highways._layers.2"), "a missing highway layer");
    assert!(load(&options.replace("\"relu\"", "\"gelu\"")).contains("unsupported char_cnn.activation `gelu`"));
    assert!(load(&options.replace("\"max_characters_per_token\": 50", "\"max_characters_per_token\": 30")).contains("50 per token"));
    assert!(load(&options.replace("\"n_characters\": 262", "\"n_characters\": 300")).contains("n_characters 300"));
    assert!(load("{\"lstm\": {}}").contains("options.json"));
    let truncated = weights()[..1000].to_vec();
    assert!(err(ElmoModel::from_bytes(gpu(), options.as_bytes(), truncated).map(|_| ())).contains("safetensors"));
}

/// `sesame forward` on an ELMo folder: the sentences as text give the reference's outputs.
#[test]
fn the_cli_writes_the_layers_mask_and_mixes() {
    let dir = elmo_fixture("small");
    let sentences: Vec<String> = inputs(&dir).sentences.iter().map(|s| s.join(" ")).collect();
    let out = std::env::temp_dir().join(format!("sesame-elmo-{}.safetensors", std::process::id()));
    let mut args = vec!["forward", "--model", dir.to_str().unwrap(), "--out", out.to_str().unwrap(), "--pretokenized", "--text"];
    args.extend(sentences.iter().map(String::as_str));
    let (ok, _, err) = common::sesame(&args);
    assert!(ok, "{err}");
    let got = sesame::weights::Checkpoint::from_bytes(std::fs::read(&out).unwrap()).unwrap();
    let reference = sesame::weights::Checkpoint::from_bytes(read(&dir, "reference.safetensors")).unwrap();
    let mut names: Vec<&str> = got.names().collect();
    names.sort_unstable();
    assert_eq!(names, ["elmo_layers", "elmo_representations.0", "elmo_representations.1", "mask"]);
    for name in names {
        let ((g, gs), (w, ws)) = (got.to_f32(name).unwrap(), reference.to_f32(name).unwrap());
        assert_eq!(gs, ws, "{name}");
        assert!(g.iter().zip(&w).all(|(a, b)| (a - b).abs() <= 1e-4), "{name}");
    }
    std::fs::remove_file(&out).ok();
    // Raw text is split into words; an empty sentence is refused.
    let (ok, _, err) = common::sesame(&["forward", "--model", dir.to_str().unwrap(), "--out", out.to_str().unwrap(), "--text", "A river bank!", ""]);
    assert!(!ok && err.contains("sentence 1 has no words"), "{err}");
}

/// `sesame convert-elmo` on the bilm-tf layout the reference script writes gives the fixture's
/// weights bit for bit, and the converted folder runs.
#[test]
fn the_converter_round_trips_the_release_layout() {
    for name in ["small", "tanh"] {
        let dir = elmo_fixture(name);
        let out = std::env::temp_dir().join(format!("sesame-convert-elmo-{name}-{}", std::process::id()));
        let (options, weights) = (dir.join("options.json"), dir.join("weights.hdf5"));
        let (ok, _, err) = common::sesame(&[
            "convert-elmo",
            "--options",
            options.to_str().unwrap(),
            "--weights",
            weights.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--mixes",
            "3",
        ]);
        assert!(ok, "{err}");
        let got = sesame::weights::Checkpoint::from_bytes(std::fs::read(out.join("model.safetensors")).unwrap()).unwrap();
        let want = sesame::weights::Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
        let mut compared = 0;
        for tensor in want.names().filter(|n| !n.starts_with("scalar_mix_")) {
            assert_eq!(got.to_f32(tensor).unwrap(), want.to_f32(tensor).unwrap(), "{name}: {tensor}");
            compared += 1;
        }
        assert!(compared > 20, "{name}: {compared} tensors");
        let model = ElmoModel::load_dir(gpu(), &out).unwrap();
        assert_eq!(model.mixes.len(), 3);
        assert!(model.mixes.iter().all(|m| m.gamma == 1.0 && m.scalar_parameters.iter().all(|&s| s == 0.0)), "AllenNLP's initial mix");
        let out_tensors = model.forward(&inputs(&dir).sentences).unwrap().into_model_output();
        compare_named(&dir, &out_tensors, &["elmo_layers", "mask"]);
        std::fs::remove_dir_all(&out).ok();
    }
    // Options that disagree with the file, and a file that is not HDF5.
    let dir = elmo_fixture("small");
    let out = std::env::temp_dir().join(format!("sesame-convert-elmo-bad-{}", std::process::id()));
    let wrong = out.with_extension("json");
    let options = String::from_utf8(read(&dir, "options.json")).unwrap();
    std::fs::write(&wrong, options.replace("\"projection_dim\": 8", "\"projection_dim\": 9")).unwrap();
    let weights = dir.join("weights.hdf5");
    let (ok, _, err) =
        common::sesame(&["convert-elmo", "--options", wrong.to_str().unwrap(), "--weights", weights.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("CNN_proj/W_proj") && err.contains("options.json implies"), "{err}");
    let not_hdf5 = dir.join("options.json");
    let (ok, _, err) =
        common::sesame(&["convert-elmo", "--options", not_hdf5.to_str().unwrap(), "--weights", not_hdf5.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("not a readable HDF5 file"), "{err}");
    // A FIFO as the weights: refused by name, not a read that waits forever.
    let fifo = out.with_extension("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (ok, _, err) =
        common::sesame(&["convert-elmo", "--options", not_hdf5.to_str().unwrap(), "--weights", fifo.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("not a regular file (a device, FIFO or socket)"), "{err}");
    assert!(!out.join("model.safetensors").exists(), "nothing written on failure");
    std::fs::remove_file(&wrong).ok();
    std::fs::remove_file(&fifo).ok();
}
