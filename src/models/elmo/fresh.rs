//! A fresh ELMo (`sesame train --arch elmo`) and the heads a run adds to one: its options.json,
//! a biLM drawn as bilm-tf draws it, the biLM softmax a converted ELMo lacks, and a
//! classifier's scalar mix and layer.

use super::chars::MAX_CHAR_ID;
use super::ElmoOptions;
use crate::error::{arg_err, Result, SesameError};
use crate::models::training::fresh::{Init, INIT_STD};

/// options.json of a fresh ELMo with `layers` biLSTM layers projecting to `projection`: cells
/// 4× as wide (bilm-tf's release: 8×, 4096 → 512), cell and projection clips of 3 and skip
/// connections as bilm-tf's; ELMo-small's character CNN scaled to the width: 16-wide
/// character embeddings, filters of widths 1–5 with projection × ¼, ¼, ½, 1, 2 maps, relu,
/// one highway layer.
pub fn fresh_options_json(layers: usize, projection: usize) -> Result<Vec<u8>> {
    if layers == 0 || projection < 4 {
        return Err(arg_err!("model", "an ELMo needs at least one layer and a projection of at least 4 (got {layers} layers, {projection})"));
    }
    let counts = [projection / 4, projection / 4, projection / 2, projection, 2 * projection];
    let filters: Vec<[usize; 2]> = counts.iter().enumerate().map(|(i, &count)| [i + 1, count]).collect();
    let options = serde_json::json!({
        "char_cnn": {
            "activation": "relu",
            "embedding": { "dim": 16 },
            "filters": filters,
            "max_characters_per_token": 50,
            "n_characters": MAX_CHAR_ID + 1,
            "n_highway": 1,
        },
        "lstm": {
            "cell_clip": 3,
            "dim": 4 * projection,
            "n_layers": layers,
            "proj_clip": 3,
            "projection_dim": projection,
            "use_skip_connections": true,
        },
    });
    serde_json::to_vec_pretty(&options).map_err(|e| SesameError::Io(format!("options.json: {e}")))
}

/// model.safetensors of a fresh biLM of `options` over `vocab` words (AllenNLP names plus
/// `softmax.*`), drawn as bilm-tf draws it: character embeddings U(−1, 1) (AllenNLP's padding
/// row 0), relu convolutions N(0, 1/(width·dim)) (tanh ones U(−0.05, 0.05)), highway and projection N(0, 1/F) with the
/// highway leaning to carrying its input (bilm-tf's carry bias −2), LSTM weights Glorot-uniform
/// with forget-gate bias 1, the softmax N(0, 1/proj).
pub fn init_bilm_safetensors(options: &ElmoOptions, vocab: usize, seed: u64) -> Result<Vec<u8>> {
    let mut init = Init::new(seed);
    let (cnn, lstm) = (&options.char_cnn, &options.lstm);
    let (dim, filters, cell, proj) = (cnn.embedding.dim, options.n_filters(), lstm.dim, lstm.projection_dim);
    let embedder = "_elmo_lstm._token_embedder";
    let rows = cnn.n_characters.map_or(MAX_CHAR_ID as usize + 1, |n| n.max(MAX_CHAR_ID as usize + 1));
    init.uniform(format!("{embedder}._char_embedding_weights"), vec![rows, dim], 1.0)?;
    if let Some((_, _, table)) = init.tensors.last_mut() {
        table[..dim].fill(0.0);
    }
    for (i, &(width, count)) in cnn.filters.iter().enumerate() {
        let name = format!("{embedder}.char_conv_{i}.weight");
        match cnn.activation.as_str() {
            "relu" => init.normal(name, vec![count, dim, width], (1.0 / (width * dim) as f64).sqrt())?,
            _ => init.uniform(name, vec![count, dim, width], 0.05)?,
        }
        init.constant(format!("{embedder}.char_conv_{i}.bias"), count, 0.0);
    }
    for k in 0..cnn.n_highway {
        let layer = format!("{embedder}._highways._layers.{k}");
        init.normal(format!("{layer}.weight"), vec![2 * filters, filters], (1.0 / filters as f64).sqrt())?;
        // [transform bias 0 | carry-gate bias +2]: AllenNLP's gate carries x.
        init.tensors.push((format!("{layer}.bias"), vec![2 * filters], [vec![0.0; filters], vec![2.0; filters]].concat()));
    }
    init.linear(&format!("{embedder}._projection"), proj, filters, (1.0 / filters as f64).sqrt())?;
    let glorot = |fan_in: usize, fan_out: usize| (6.0 / (fan_in + fan_out) as f64).sqrt();
    for direction in ["forward", "backward"] {
        for i in 0..lstm.n_layers {
            let layer = format!("_elmo_lstm._elmo_lstm.{direction}_layer_{i}");
            // bilm-tf's one matrix [input + state, 4C] is split in two here.
            let gates_bound = glorot(2 * proj, 4 * cell);
            init.uniform(format!("{layer}.input_linearity.weight"), vec![4 * cell, proj], gates_bound)?;
            init.uniform(format!("{layer}.state_linearity.weight"), vec![4 * cell, proj], gates_bound)?;
            // AllenNLP's gate order: input, forget, memory, output.
            let mut bias = vec![0.0; 4 * cell];
            bias[cell..2 * cell].fill(1.0);
            init.tensors.push((format!("{layer}.state_linearity.bias"), vec![4 * cell], bias));
            init.uniform(format!("{layer}.state_projection.weight"), vec![proj, cell], glorot(cell, proj))?;
        }
    }
    add_softmax(&mut init, proj, vocab)?;
    init.serialize()
}

/// `softmax.weight` N(0, 1/proj) [vocab, proj] and `softmax.bias` 0.
fn add_softmax(init: &mut Init, proj: usize, vocab: usize) -> Result<()> {
    if vocab == 0 {
        return Err(arg_err!("model", "the biLM softmax needs a vocabulary"));
    }
    init.linear("softmax", vocab, proj, 1.0 / (proj as f64).sqrt())
}

/// An ELMo checkpoint with a fresh biLM softmax over `vocab` words added when it has none
/// (AllenNLP's `Elmo` keeps no softmax; a Sesame biLM checkpoint does).
pub fn with_softmax(safetensors: Vec<u8>, proj: usize, vocab: usize, seed: u64) -> Result<Vec<u8>> {
    let checkpoint = crate::weights::Checkpoint::from_bytes(safetensors)?;
    if checkpoint.contains("softmax.weight") {
        return checkpoint.into_bytes();
    }
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    add_softmax(&mut init, proj, vocab)?;
    init.serialize()
}

/// An ELMo checkpoint with a task head for `num_labels` classes added where it has none: the
/// scalar mix `scalar_mix_0` over `layers` layers as AllenNLP initialises it (γ = 1, s = 0:
/// the mean of the layers), and `classifier` [num_labels, width] drawn N(0, 0.02) with bias 0.
pub fn with_task_head(safetensors: Vec<u8>, layers: usize, width: usize, num_labels: usize, seed: u64) -> Result<Vec<u8>> {
    if num_labels == 0 {
        return Err(arg_err!("model", "a classifier needs at least one class"));
    }
    let checkpoint = crate::weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    if !checkpoint.contains("scalar_mix_0.gamma") {
        init.constant("scalar_mix_0.gamma".into(), 1, 1.0);
        for j in 0..layers {
            init.constant(format!("scalar_mix_0.scalar_parameters.{j}"), 1, 0.0);
        }
    }
    if !checkpoint.contains("classifier.weight") {
        init.linear("classifier", num_labels, width, INIT_STD)?;
    }
    init.serialize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_bilm_has_every_tensor_elmo_loads() {
        let options = ElmoOptions::from_json(&fresh_options_json(2, 16).unwrap()).unwrap();
        assert_eq!((options.lstm.dim, options.n_filters()), (64, 4 + 4 + 8 + 16 + 32));
        let checkpoint = crate::weights::Checkpoint::from_bytes(init_bilm_safetensors(&options, 30, 1).unwrap()).unwrap();
        // Embedding, 5 convolutions, 1 highway, projection; 2 × 2 LSTMs of 4; the softmax.
        assert_eq!(checkpoint.names().count(), 1 + 5 * 2 + 2 + 2 + 16 + 2);
        let (table, shape) = checkpoint.to_f32("_elmo_lstm._token_embedder._char_embedding_weights").unwrap();
        assert_eq!(shape, vec![262, 16]);
        assert!(table[..16].iter().all(|&x| x == 0.0) && table[16..].iter().all(|x| x.abs() <= 1.0));
        let (bias, _) = checkpoint.to_f32("_elmo_lstm._elmo_lstm.backward_layer_1.state_linearity.bias").unwrap();
        assert_eq!((bias[63], bias[64], bias[127], bias[128]), (0.0, 1.0, 1.0, 0.0), "forget gate biased to 1");
        assert_eq!(checkpoint.shape("softmax.weight"), Some(&[30, 16][..]));
        let without: Vec<(&str, Vec<usize>, Vec<f32>)> = checkpoint
            .names()
            .filter(|n| !n.starts_with("softmax"))
            .map(|n| {
                let (values, shape) = checkpoint.to_f32(n).unwrap();
                (n, shape, values)
            })
            .collect();
        let added = crate::weights::Checkpoint::from_bytes(with_softmax(crate::weights::serialize_f32(&without).unwrap(), 16, 40, 2).unwrap()).unwrap();
        assert_eq!((added.shape("softmax.weight"), added.names().count()), (Some(&[40, 16][..]), checkpoint.names().count()));
        assert!(fresh_options_json(0, 16).is_err());
    }
}
