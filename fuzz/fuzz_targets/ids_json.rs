//! `sesame forward --ids` JSON: parsed, then run through a BERT and a GPT-2.
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sesame::models::auto::{LoadedModel, ModelFiles};
use sesame::models::{ForwardOptions, IdsBatch};

fn models() -> &'static [LoadedModel] {
    static MODELS: OnceLock<Vec<LoadedModel>> = OnceLock::new();
    MODELS.get_or_init(|| {
        ["bert/BertForPreTraining", "gpt2/GPT2LMHeadModel", "roberta/RobertaForMaskedLM"]
            .iter()
            .map(|dir| LoadedModel::from_files(common::host(), ModelFiles::read_dir(&common::fixture(dir)).expect("fixture"), false).expect("fixture loads"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let models = models();
    let Ok(batch) = IdsBatch::from_json(data) else { return };
    for loaded in models {
        if let Ok(output) = loaded.model.forward(&batch, ForwardOptions::default()) {
            for (_, tensor) in &output.tensors {
                let _ = pollster::block_on(tensor.to_vec::<f32>());
            }
        }
    }
});
