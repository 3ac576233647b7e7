//! An ELMo options.json, loaded with the small ELMo's weights and run on sentences.
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sesame::models::elmo::ElmoModel;

fuzz_target!(|data: &[u8]| {
    static WEIGHTS: OnceLock<Vec<u8>> = OnceLock::new();
    let weights = WEIGHTS.get_or_init(|| common::read("elmo/small/model.safetensors"));
    let Ok(model) = ElmoModel::from_bytes(common::host(), data, weights.clone()) else { return };
    let sentences = vec![vec!["Hello".to_string(), "world".into(), "!".into()], vec!["ünïcode".into()]];
    if let Ok(output) = model.forward(&sentences) {
        let _ = pollster::block_on(output.layers.to_vec::<f32>());
    }
});
