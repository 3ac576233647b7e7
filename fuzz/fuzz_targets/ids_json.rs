//! `sesame forward --ids` JSON: parsed, then run through a BERT and a GPT-2.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use sesame::models::auto::{LoadedModel, ModelFiles};
use sesame::models::{ForwardOptions, IdsBatch};

thread_local! {
    // Models are not Sync (a model may hold browser handles); libFuzzer runs one thread.
    static MODELS: Vec<LoadedModel> = ["bert/BertForPreTraining", "gpt2/GPT2LMHeadModel", "roberta/RobertaForMaskedLM"]
        .iter()
        .map(|dir| LoadedModel::from_files(common::host(), ModelFiles::read_dir(&common::fixture(dir)).expect("fixture"), false).expect("fixture loads"))
        .collect();
}

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = IdsBatch::from_json(data) else { return };
    MODELS.with(|models| {
        for loaded in models {
            if let Ok(output) = loaded.model.forward(&batch, ForwardOptions::default()) {
                for (_, tensor) in &output.tensors {
                    let _ = pollster::block_on(tensor.to_vec::<f32>());
                }
            }
        }
    });
});
