//! Shared by the parity tests: the device, fixture paths and the comparison against the
//! outputs transformers wrote.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub mod train;

use sesame::models::auto::{AutoModel, LoadedModel};
use sesame::models::{ForwardOptions, IdsBatch, ModelOutput};
use sesame::weights::{Checkpoint, Weights};
use sesame::{Device, DeviceOptions};

/// Runs the `sesame` binary: (success, stdout, stderr).
pub fn sesame(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sesame")).args(args).output().expect("run sesame");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

pub fn gpu() -> &'static Device {
    static GPU: OnceLock<Device> = OnceLock::new();
    GPU.get_or_init(|| pollster::block_on(Device::new(DeviceOptions::default())).expect("a GPU adapter (lavapipe in CI)"))
}

/// The host device (the kernels' Rust twins), shared like [`gpu`].
pub fn host() -> &'static Device {
    static HOST: OnceLock<Device> = OnceLock::new();
    HOST.get_or_init(Device::host)
}

/// Both devices: model parity runs on each, so the host twins answer to the same fixtures.
pub fn devices() -> [&'static Device; 2] {
    [gpu(), host()]
}

pub fn fixture(family: &str, arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(family).join(arch)
}

pub fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

/// The batch in inputs.json, flattened row-major: [batch, seq], or [batch, choices, seq] for
/// multiple choice (`choices` set).
pub struct Inputs {
    pub input_ids: Vec<u32>,
    pub attention_mask: Vec<u32>,
    pub token_type_ids: Option<Vec<u32>>,
    pub task_type_ids: Option<Vec<u32>>,
    pub batch: usize,
    pub choices: Option<usize>,
    pub seq: usize,
}

impl Inputs {
    /// The batch as a model takes it.
    pub fn batch(&self) -> IdsBatch {
        IdsBatch {
            input_ids: self.input_ids.clone(),
            attention_mask: Some(self.attention_mask.clone()),
            token_type_ids: self.token_type_ids.clone(),
            task_type_ids: self.task_type_ids.clone(),
            char_ids: None,
            batch: self.batch,
            choices: self.choices,
            seq: self.seq,
        }
    }
}

/// Asserts that `dir` holds exactly `files` (a converted folder the browser and Node tests
/// load as committed); `remake` is the command that rewrites them.
pub fn assert_committed(dir: &Path, files: &[(&str, &[u8])], remake: &str) {
    for (name, bytes) in files {
        assert!(read(dir, name) == *bytes, "{}/{name} is not what the converter writes now: {remake}", dir.display());
    }
}

pub fn inputs(dir: &Path) -> Inputs {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Ids {
        Rows(Vec<Vec<u32>>),
        Examples(Vec<Vec<Vec<u32>>>),
    }
    impl Ids {
        /// (flat ids, batch, choices, seq)
        fn flat(self) -> (Vec<u32>, usize, Option<usize>, usize) {
            let (batch, choices, rows) = match self {
                Ids::Rows(rows) => (rows.len(), None, rows),
                Ids::Examples(examples) => (examples.len(), Some(examples[0].len()), examples.concat()),
            };
            let seq = rows[0].len();
            (rows.concat(), batch, choices, seq)
        }
    }
    #[derive(serde::Deserialize)]
    struct Json {
        input_ids: Ids,
        attention_mask: Ids,
        token_type_ids: Option<Ids>,
        task_type_ids: Option<Ids>,
    }
    let j: Json = serde_json::from_slice(&read(dir, "inputs.json")).unwrap();
    let (input_ids, batch, choices, seq) = j.input_ids.flat();
    Inputs {
        input_ids,
        attention_mask: j.attention_mask.flat().0,
        token_type_ids: j.token_type_ids.map(|t| t.flat().0),
        task_type_ids: j.task_type_ids.map(|t| t.flat().0),
        batch,
        choices,
        seq,
    }
}

/// The fixture model `family/arch` loaded on the GPU adapter, with the pipeline answers
/// transformers gave on it (its pipeline.json).
pub fn pipeline_fixture(family: &str, arch: &str) -> (LoadedModel, serde_json::Value) {
    let dir = fixture(family, arch);
    let cases = serde_json::from_slice(&read(&dir, "pipeline.json")).unwrap();
    (LoadedModel::load(gpu(), &dir, false).unwrap(), cases)
}

/// Answers one question-answering case of a pipeline.json (its options: `top_k`, and
/// `max_seq_len`, `doc_stride` when given) and checks them against transformers': the same
/// spans in the same order, scores within 1e-4.
pub fn check_qa_case(loaded: &LoadedModel, case: &serde_json::Value, label: &str) {
    use sesame::question_answering::{answer_question, QaOptions};
    let number = |name: &str| case[name].as_u64().map(|n| n as usize);
    let defaults = QaOptions::default();
    let options = QaOptions {
        top_k: number("top_k").unwrap(),
        max_seq_len: number("max_seq_len").unwrap_or(defaults.max_seq_len),
        doc_stride: number("doc_stride"),
        ..defaults
    };
    let (question, context) = (case["question"].as_str().unwrap(), case["context"].as_str().unwrap());
    let got = pollster::block_on(answer_question(loaded, question, context, &options)).unwrap();
    let want = case["result"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{label} {case}");
    for (g, w) in got.iter().zip(want) {
        let span = (w["answer"].as_str().unwrap(), w["start"].as_u64().unwrap() as usize, w["end"].as_u64().unwrap() as usize);
        assert_eq!((g.answer.as_str(), g.start, g.end), span, "{label} {question}");
        let score = w["score"].as_f64().unwrap() as f32;
        assert!((g.score - score).abs() <= 1e-4, "{label} {question}: score {} vs transformers {score}", g.score);
    }
}

/// Loads the model folder `dir` through the registry on the GPU adapter and on the host
/// device, runs its inputs.json with every hidden state and attention map, and compares all
/// of reference.safetensors (which must hold `expected`).
pub fn check_fixture(dir: &Path, expected: &[&str]) {
    for gpu in devices() {
        let checkpoint = Checkpoint::from_bytes(read(dir, "model.safetensors")).unwrap();
        let model = AutoModel::load(&read(dir, "config.json"), &Weights::new(gpu, &checkpoint)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let out = model.forward(&inputs(dir).batch(), ForwardOptions { hidden_states: true, attentions: true, ..Default::default() }).unwrap();
        eprintln!("on {}:", gpu.adapter_info().name);
        compare(dir, &out, expected);
    }
}

/// Compares every tensor of reference.safetensors with Sesame's output of the same name:
/// max abs error ≤ 1e-4 (≤ 1e-5 for attention probabilities), printing each error.
pub fn compare(dir: &Path, out: &ModelOutput, expected: &[&str]) {
    let reference = Checkpoint::from_bytes(read(dir, "reference.safetensors")).unwrap();
    let mut names: Vec<&str> = reference.names().collect();
    names.sort_unstable();
    for name in expected {
        assert!(names.contains(name), "{}: the fixture lacks {name}", dir.display());
    }
    compare_named(dir, out, &names);
}

/// Compares the tensors `names` of reference.safetensors with Sesame's, as [`compare`] does.
pub fn compare_named(dir: &Path, out: &ModelOutput, names: &[&str]) {
    let label = dir.file_name().unwrap().to_string_lossy().into_owned();
    let reference = Checkpoint::from_bytes(read(dir, "reference.safetensors")).unwrap();
    for &name in names {
        let (want, shape) = reference.to_f32(name).unwrap();
        let tensor = out.get(name).unwrap_or_else(|| panic!("{label}: Sesame did not produce `{name}`"));
        assert_eq!(tensor.shape(), &shape[..], "{label}: shape of {name}");
        let got = pollster::block_on(tensor.to_vec::<f32>()).unwrap();
        let max_err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
        let tolerance = if name.starts_with("attentions") { 1e-5 } else { 1e-4 };
        eprintln!("{label} {name}: max abs err {max_err:.2e} (tolerance {tolerance:.0e})");
        assert!(max_err <= tolerance, "{label} {name}: max abs err {max_err:e} > {tolerance:e}");
    }
}
