//! What the targets share: the host device, a small memory budget (so that a size read from
//! the input is refused by Sesame's bounds, not by libFuzzer's allocation limit), and the
//! committed model fixtures the fuzzed files are paired with.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use sesame::Device;

/// The host device with a 256 MiB budget, set once.
pub fn host() -> &'static Device {
    static GPU: OnceLock<Device> = OnceLock::new();
    GPU.get_or_init(|| {
        sesame::limits::set_host_memory_budget(256 << 20);
        Device::host()
    })
}

/// `tests/fixtures/<path>`.
pub fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(path)
}

pub fn read(path: &str) -> Vec<u8> {
    std::fs::read(fixture(path)).expect("the fixtures are committed")
}

/// One model folder per family (the bare model and a head or two), whose config.json or
/// model.safetensors the `config` and `weights` targets replace.
pub const MODELS: [&str; 14] = [
    "bert/BertForPreTraining",
    "bert/BertForQuestionAnswering",
    "roberta/RobertaForMaskedLM",
    "xlm-roberta/XLMRobertaForSequenceClassification",
    "xlm-roberta-xl/XLMRobertaXLForMultipleChoice",
    "distilbert/DistilBertForMaskedLM",
    "albert/AlbertForPreTraining",
    "ernie/ErnieForPreTraining",
    "electra/ElectraForPreTraining",
    "electra/ElectraForMaskedLM",
    "gpt2/GPT2LMHeadModel",
    "gpt2/GPT2ForSequenceClassification",
    "openai-gpt/OpenAIGPTLMHeadModel",
    "bert/BertForTokenClassification",
];

/// Each folder's (config.json, model.safetensors, tokenizer.json if any), read once.
pub fn model_files() -> &'static [(Vec<u8>, Vec<u8>, Option<Vec<u8>>)] {
    static FILES: OnceLock<Vec<(Vec<u8>, Vec<u8>, Option<Vec<u8>>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        MODELS
            .iter()
            .map(|dir| {
                let tokenizer = std::fs::read(fixture(dir).join("tokenizer.json")).ok();
                (read(&format!("{dir}/config.json")), read(&format!("{dir}/model.safetensors")), tokenizer)
            })
            .collect()
    })
}

/// Loads a model from these files and, if it loads, runs what users run on it: one forward
/// pass over a short batch (and its pipelines' encode). Errors are fine; panics are not.
pub fn load_and_run(config_json: Vec<u8>, safetensors: Vec<u8>, tokenizer_json: Option<Vec<u8>>) {
    use sesame::models::auto::{LoadedModel, ModelFiles};
    use sesame::models::{Capability, ForwardOptions, IdsBatch};

    let Ok(checkpoint) = sesame::weights::Checkpoint::from_bytes(safetensors) else { return };
    let files = ModelFiles { config_json, checkpoint, tokenizer_json, ..ModelFiles::default() };
    let Ok(loaded) = LoadedModel::from_files(host(), files, true) else { return };
    let _ = loaded.summary();
    let rows = vec![(vec![1, 5, 2], vec![0, 0, 0]), (vec![1, 2], vec![0, 1])];
    let mut batch = loaded.batch(&rows);
    if loaded.model.capabilities().has(Capability::MultipleChoice) {
        batch = IdsBatch { choices: Some(2), batch: 1, ..batch };
    }
    let options = ForwardOptions { hidden_states: true, attentions: true, ..ForwardOptions::default() };
    if let Ok(output) = loaded.model.forward(&batch, options) {
        for (_, tensor) in &output.tensors {
            let _ = pollster::block_on(tensor.to_vec::<f32>());
        }
    }
    if let Ok(encoded) = loaded.encode_detailed("fuzz", "Hello world, the [MASK] <mask>.", None) {
        let _ = loaded.model.forward(&loaded.single(&encoded), ForwardOptions::default());
    }
}
