//! A bilm-tf weights.hdf5 converted to an ELMo folder (the small release's options.json).
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sesame::models::elmo::convert::{convert_bilm_tf, to_safetensors};
use sesame::models::elmo::ElmoOptions;

fuzz_target!(|data: &[u8]| {
    static OPTIONS: OnceLock<ElmoOptions> = OnceLock::new();
    let options = OPTIONS.get_or_init(|| {
        sesame::limits::set_host_memory_budget(256 << 20);
        ElmoOptions::from_json(&common::read("elmo/small/options.json")).expect("the fixture's options load")
    });
    // The converter reads a path: the input goes to a file of this process's own.
    let path = std::env::temp_dir().join(format!("sesame-fuzz-{}.hdf5", std::process::id()));
    std::fs::write(&path, data).expect("the temporary directory is writable");
    if let Ok(tensors) = convert_bilm_tf(options, &path, 1) {
        let _ = to_safetensors(&tensors);
    }
});
