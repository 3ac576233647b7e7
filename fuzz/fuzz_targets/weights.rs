//! A model.safetensors loaded under each family's config.json, then run.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the family (a folder of common::MODELS); the rest is the file.
    let Some((&pick, safetensors)) = data.split_first() else { return };
    let (config, _, tokenizer) = &common::model_files()[pick as usize % common::MODELS.len()];
    common::load_and_run(config.clone(), safetensors.to_vec(), tokenizer.clone());
});
