//! What `sesame train --resume` reads besides the model: trainer_state.json and, after a 0
//! byte, an optimizer-moments safetensors loaded into a GPT-2's parameters.
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sesame::models::auto::AutoModel;
use sesame::train::checkpoint::TrainerState;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

fuzz_target!(|data: &[u8]| {
    static GPT2: OnceLock<(Vec<u8>, Checkpoint)> = OnceLock::new();
    let (config, weights) = GPT2.get_or_init(|| {
        let dir = "train/gpt2/init";
        (common::read(&format!("{dir}/config.json")), Checkpoint::from_bytes(common::read(&format!("{dir}/model.safetensors"))).expect("fixture"))
    });
    let mut parts = data.splitn(2, |&b| b == 0);
    if let Ok(state) = TrainerState::from_json(parts.next().unwrap_or_default()) {
        let _ = state.settings.differences(&state.settings);
        let _ = state.settings.schedule.validate();
        let _ = state.settings.schedule.lr_at(state.step);
    }
    let Some(moments) = parts.next() else { return };
    let Ok(moments) = Checkpoint::from_bytes(moments.to_vec()) else { return };
    let recording = Weights::new(common::host(), weights).recording();
    let Ok(_model) = AutoModel::load(config, &recording) else { return };
    let Ok(mut params) = Parameters::from_weights(&recording) else { return };
    let _ = params.load_moments(Part::FirstMoment, &moments);
    let _ = params.load_moments(Part::SecondMoment, &moments);
});
