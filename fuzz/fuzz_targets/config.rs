//! A config.json of any family, loaded with a family's weights, then run.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the weights (a folder of common::MODELS); the rest is config.json.
    let Some((&pick, config)) = data.split_first() else { return };
    let (_, safetensors, tokenizer) = &common::model_files()[pick as usize % common::MODELS.len()];
    common::load_and_run(config.to_vec(), safetensors.clone(), tokenizer.clone());
});
