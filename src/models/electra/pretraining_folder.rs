//! An ELECTRA pretraining folder holds both models:
//! - `config.json`: the discriminator's; `generator_config.json`: the generator's;
//! - `model.safetensors`: the shared embeddings under their names (`electra.embeddings.…`),
//!   each model's other tensors under `discriminator.` or `generator.` + their names.
//!
//! [`model_folders`] splits it into the two plain transformers folders.

use crate::error::Result;
use crate::weights::{self, Checkpoint};

/// The weight names the two models share.
pub const SHARED_ROOT: &str = "electra.embeddings.";

/// The two plain transformers folders of a pretraining folder's checkpoint: the
/// discriminator's and the generator's (config.json, model.safetensors), each with the shared
/// embeddings.
pub fn model_folders(discriminator_config: &[u8], generator_config: &[u8], checkpoint: &Checkpoint) -> Result<[(Vec<u8>, Vec<u8>); 2]> {
    let split = |role: &str, config: &[u8]| -> Result<(Vec<u8>, Vec<u8>)> {
        let own = format!("{role}.");
        let values = checkpoint
            .names()
            .filter(|name| checkpoint.is_floating_point(name))
            .filter_map(|name| match name.strip_prefix(&own) {
                Some(rest) => Some((rest.to_string(), name)),
                None if name.starts_with(SHARED_ROOT) => Some((name.to_string(), name)),
                None => None,
            })
            .map(|(own_name, key)| {
                let (values, shape) = checkpoint.to_f32(key)?;
                Ok((own_name, shape, values))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((config.to_vec(), weights::serialize_f32(&values)?))
    };
    Ok([split("discriminator", discriminator_config)?, split("generator", generator_config)?])
}
