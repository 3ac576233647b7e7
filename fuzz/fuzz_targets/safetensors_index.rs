//! A model.safetensors.index.json over the sharded GPT-2 fixture's three shards: the index
//! checked against them, then every tensor read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sesame::weights::{Checkpoint, FileBytes};

macro_rules! shard {
    ($name:literal) => {
        ($name, include_bytes!(concat!("../../tests/fixtures/gpt2/GPT2LMHeadModel-sharded/", $name)) as &[u8])
    };
}

const SHARDS: [(&str, &[u8]); 3] =
    [shard!("model-00001-of-00003.safetensors"), shard!("model-00002-of-00003.safetensors"), shard!("model-00003-of-00003.safetensors")];

fuzz_target!(|data: &[u8]| {
    sesame::limits::set_host_memory_budget(256 << 20);
    let open = |name: &str| {
        let (_, bytes) = SHARDS.iter().find(|(shard, _)| *shard == name).ok_or_else(|| sesame::SesameError::Io(format!("no shard {name}")))?;
        Ok(FileBytes::from(bytes.to_vec()))
    };
    let Ok(checkpoint) = Checkpoint::from_index(data, open) else { return };
    let names: Vec<String> = checkpoint.names().map(String::from).collect();
    for name in names {
        let _ = checkpoint.to_f32(&name);
    }
});
