//! A safetensors file: its header (JSON, offsets, shapes, dtypes) and every tensor's values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sesame::weights::Checkpoint;

fuzz_target!(|data: &[u8]| {
    sesame::limits::set_host_memory_budget(256 << 20);
    let Ok(checkpoint) = Checkpoint::from_bytes(data.to_vec()) else { return };
    let names: Vec<String> = checkpoint.names().map(String::from).collect();
    for name in names {
        let _ = checkpoint.shape(&name);
        let _ = checkpoint.to_f32(&name);
    }
});
