//! A run from files held in memory, as a browser page holds them: `prepare_from` over
//! `MemoryFiles` and `Run::train` into `MemoryCheckpoints` fine-tune a classifier on a BERT
//! encoder, and the saved folder loads. The same test runs natively and in the wasm build
//! under node (wasm-bindgen-test; scripts/test.sh runs both): the run's preparation and the
//! trainer, compiled for the browser, train there on the CPU device.

use std::path::Path;

use sesame::files::MemoryFiles;
use sesame::models::training::Objective;
use sesame::train::checkpoint::{Checkpointing, MemoryCheckpoints};
use sesame::train::run::{prepare_from, RunSpec};
use sesame::train::trainer::{Evaluation, RunObserver, StepReport};
use sesame::weights::{Checkpoint, Weights};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const BERT: [(&str, &[u8]); 3] = [
    ("config.json", include_bytes!("fixtures/bert/BertModel/config.json")),
    ("model.safetensors", include_bytes!("fixtures/bert/BertModel/model.safetensors")),
    ("tokenizer.json", include_bytes!("fixtures/bert/BertModel/tokenizer.json")),
];

/// Sentences whose label one cue word decides: `warm`/`cold` among neutral words.
fn sentiment_tsv(rows: usize) -> String {
    let neutral = ["the", "cat", "dog", "sat", "on", "mat", "river", "old", "mill"];
    let mut tsv = String::from("sentence\tlabel\n");
    for row in 0..rows {
        let (cue, label) = if row % 2 == 0 { ("warm", 1) } else { ("cold", 0) };
        let words: Vec<&str> = (0..4).map(|i| neutral[(row * 7 + i * 3) % neutral.len()]).collect();
        tsv += &format!("{} {cue} {}\t{label}\n", words[..2].join(" "), words[2..].join(" "));
    }
    tsv
}

#[derive(Default)]
struct Losses(Vec<f32>);

impl RunObserver for Losses {
    fn stepped(&mut self, report: &StepReport) -> sesame::Result<()> {
        self.0.push(report.loss);
        Ok(())
    }
    fn evaluated(&mut self, _: &Evaluation) -> sesame::Result<()> {
        Ok(())
    }
}

async fn fine_tune_in_memory() {
    let mut files = MemoryFiles::default();
    for (name, bytes) in BERT {
        files.insert(Path::new("bert").join(name), bytes.to_vec());
    }
    files.insert("train.tsv", sentiment_tsv(64).into_bytes());
    let spec = RunSpec {
        model_init: Some("bert".into()),
        objective: Objective::Classify,
        data: Some("train.tsv".into()),
        steps: Some(40),
        batch_size: 16,
        lr: 1e-2,
        warmup: 2,
        dropout: Some(0.0),
        checkpoint_every: 20,
        out: Some("run".into()),
        ..RunSpec::default()
    };
    let device = sesame::Device::host();
    let mut run = prepare_from(&device, &files, &spec).unwrap();
    let mut store = MemoryCheckpoints { plan: Checkpointing { out: "run".into(), every: 20, keep: 1 }, files: MemoryFiles::default() };
    let mut losses = Losses::default();
    run.train(&mut store, &mut losses).await.unwrap();

    let losses = losses.0;
    assert_eq!(losses.len(), 40);
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    eprintln!("mean loss over the first 10 steps {:.3}, the last 10 {:.3}", mean(&losses[..10]), mean(&losses[30..]));
    assert!(mean(&losses[30..]) < mean(&losses[..10]) - 0.3, "the loss falls: {losses:?}");
    let saved: Vec<String> = store.files.iter().map(|(path, _)| path.display().to_string()).collect();
    for file in ["run/config.json", "run/model.safetensors", "run/tokenizer.json", "run/checkpoint-000040/trainer_state.json"] {
        assert!(saved.iter().any(|s| s == file), "{file} in {saved:?}");
    }
    assert!(!saved.iter().any(|s| s.starts_with("run/checkpoint-000020")), "one checkpoint kept: {saved:?}");
    let read = |path: &str| store.files.iter().find(|(p, _)| *p == Path::new(path)).unwrap().1.to_vec();
    let config = read("run/config.json");
    let checkpoint = Checkpoint::from_bytes(read("run/model.safetensors")).unwrap();
    let weights = Weights::new(&device, &checkpoint);
    let model = sesame::models::auto::AutoModel::load(&config, &weights).unwrap();
    assert_eq!(model.architecture(), "BertForSequenceClassification");
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_classifier_fine_tunes_from_files_in_memory() {
    pollster::block_on(fine_tune_in_memory());
}

#[cfg(target_arch = "wasm32")]
#[test]
async fn a_classifier_fine_tunes_from_files_in_memory() {
    fine_tune_in_memory().await;
}
