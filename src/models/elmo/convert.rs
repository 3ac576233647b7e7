//! The original bilm-tf / AllenNLP release weights (`weights.hdf5`) as the `Elmo` state dict
//! Sesame loads — the transforms AllenNLP applies when it reads such a file:
//! - `char_embed` [261, E] gains the padding row 0 → `_char_embedding_weights` [262, E];
//! - `CNN/W_cnn_{i}` [1, width, E, count] → `char_conv_{i}.weight` [count, E, width];
//! - `CNN_high_{k}`: TF computes carry·f(x·W_t + b_t) + (1 − carry)·x with
//!   carry = σ(x·W_c + b_c); AllenNLP's gate multiplies x, so the carry half is negated:
//!   weight = [W_tᵀ; −W_cᵀ], bias = [b_t; −b_c];
//! - `CNN_proj/W_proj` [F, P] → `_projection.weight` [P, F] (transposed);
//! - `RNN_{0 forward | 1 backward}/RNN/MultiRNNCell/Cell{i}/LSTMCell`: `W_0` [in + P, 4C]
//!   transposed and split into `input_linearity` (first `in` columns) and `state_linearity`;
//!   TF's gate blocks (input, cell, forget, output) reordered to (input, forget, cell,
//!   output); TF adds 1 to the forget gate at run time, so `B` gets +1 there; `W_P_0` [C, P]
//!   → `state_projection.weight` [P, C].
//!
//! The scalar mixes are task parameters, not part of the release: `mixes` of them are written
//! with AllenNLP's initial values (γ = 1, every s = 0: the plain average of the layers).

use std::path::Path;

use super::chars::MAX_CHAR_ID;
use super::options::ElmoOptions;
use crate::error::{Result, SesameError};

/// A named f32 tensor of the converted checkpoint.
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

fn hdf5_err(path: &Path, message: impl std::fmt::Display) -> SesameError {
    SesameError::Checkpoint(format!("{}: {message}", path.display()))
}

/// The datasets of one hdf5 file, read as f32 with their expected shapes checked.
struct Release<'a> {
    path: &'a Path,
    file: hdf5_reader::Hdf5File,
}

impl Release<'_> {
    fn read(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let dataset = self.file.dataset(name).map_err(|e| hdf5_err(self.path, format!("dataset `{name}`: {e}")))?;
        let actual: Vec<usize> = dataset.shape().iter().map(|&d| d as usize).collect();
        if actual != shape {
            return Err(hdf5_err(self.path, format!("dataset `{name}` has shape {actual:?}, but options.json implies {shape:?}")));
        }
        let mut data = vec![0f32; shape.iter().product()];
        dataset.read_into(&mut data).map_err(|e| hdf5_err(self.path, format!("reading `{name}`: {e}")))?;
        Ok(data)
    }
}

/// [rows, cols] row-major → [cols, rows].
fn transpose(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols).flat_map(|c| (0..rows).map(move |r| data[r * cols + c])).collect()
}

/// Swaps gate blocks 1 and 2 (TF's cell and forget) of a [4·cell, …] tensor's rows.
fn tf_gate_order_to_allennlp(data: &mut [f32], cell: usize) {
    let block = data.len() / 4;
    debug_assert_eq!(block % cell, 0);
    let (_, rest) = data.split_at_mut(block);
    let (cell_gate, rest) = rest.split_at_mut(block);
    cell_gate.swap_with_slice(&mut rest[..block]);
}

/// The most scalar mixes a conversion adds (AllenNLP's `num_output_representations`; a task
/// reads one to three).
pub const MAX_SCALAR_MIXES: usize = 64;

/// Reads a bilm-tf `weights.hdf5` laid out as `options` describe and returns the `Elmo`
/// state dict (AllenNLP names) with `mixes` scalar mixes.
pub fn convert_bilm_tf(options: &ElmoOptions, hdf5: &Path, mixes: usize) -> Result<Vec<NamedTensor>> {
    if mixes > MAX_SCALAR_MIXES {
        return Err(SesameError::InvalidArgument {
            op: "convert-elmo",
            message: format!("{mixes} scalar mixes asked for; at most {MAX_SCALAR_MIXES} (tasks use one to three)"),
        });
    }
    // A FIFO or a device would block the HDF5 reader's open forever: refused by name first.
    crate::files::open_regular(hdf5)?;
    let file = hdf5_reader::Hdf5File::open(hdf5).map_err(|e| hdf5_err(hdf5, format!("not a readable HDF5 file: {e}")))?;
    let release = Release { path: hdf5, file };
    let (cnn, lstm) = (&options.char_cnn, &options.lstm);
    let (embed, n_filters, proj, cell) = (cnn.embedding.dim, options.n_filters(), lstm.projection_dim, lstm.dim);
    let mut out = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, data: Vec<f32>| out.push(NamedTensor { name, shape, data });
    let embedder = "_elmo_lstm._token_embedder";

    let chars = MAX_CHAR_ID as usize; // 261 rows in the release
    let mut table = vec![0f32; embed];
    table.extend(release.read("char_embed", &[chars, embed])?);
    push(format!("{embedder}._char_embedding_weights"), vec![chars + 1, embed], table);

    for (i, &(width, count)) in cnn.filters.iter().enumerate() {
        let w = release.read(&format!("CNN/W_cnn_{i}"), &[1, width, embed, count])?;
        // [width, E, count] → [count, E, width].
        let conv: Vec<f32> =
            (0..count).flat_map(|c| (0..embed).flat_map(move |e| (0..width).map(move |k| (k, e, c)))).map(|(k, e, c)| w[(k * embed + e) * count + c]).collect();
        push(format!("{embedder}.char_conv_{i}.weight"), vec![count, embed, width], conv);
        push(format!("{embedder}.char_conv_{i}.bias"), vec![count], release.read(&format!("CNN/b_cnn_{i}"), &[count])?);
    }

    for k in 0..cnn.n_highway {
        let read = |leaf: &str, shape: &[usize]| release.read(&format!("CNN_high_{k}/{leaf}"), shape);
        let square = [n_filters, n_filters];
        let mut weight = transpose(&read("W_transform", &square)?, n_filters, n_filters);
        weight.extend(transpose(&read("W_carry", &square)?, n_filters, n_filters).iter().map(|v| -v));
        let mut bias = read("b_transform", &[n_filters])?;
        bias.extend(read("b_carry", &[n_filters])?.iter().map(|v| -v));
        push(format!("{embedder}._highways._layers.{k}.weight"), vec![2 * n_filters, n_filters], weight);
        push(format!("{embedder}._highways._layers.{k}.bias"), vec![2 * n_filters], bias);
    }

    push(format!("{embedder}._projection.weight"), vec![proj, n_filters], transpose(&release.read("CNN_proj/W_proj", &[n_filters, proj])?, n_filters, proj));
    push(format!("{embedder}._projection.bias"), vec![proj], release.read("CNN_proj/b_proj", &[proj])?);

    for (d, direction) in ["forward", "backward"].iter().enumerate() {
        for i in 0..lstm.n_layers {
            let cell_path = format!("RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell");
            let prefix = format!("_elmo_lstm._elmo_lstm.{direction}_layer_{i}");
            // W_0ᵀ: [4C, in + P]; every layer's input is P wide (the token layer or the layer below).
            let w = transpose(&release.read(&format!("{cell_path}/W_0"), &[2 * proj, 4 * cell])?, 2 * proj, 4 * cell);
            let (mut input, mut state): (Vec<f32>, Vec<f32>) = (Vec::new(), Vec::new());
            for row in w.chunks_exact(2 * proj) {
                input.extend_from_slice(&row[..proj]);
                state.extend_from_slice(&row[proj..]);
            }
            tf_gate_order_to_allennlp(&mut input, cell);
            tf_gate_order_to_allennlp(&mut state, cell);
            let mut bias = release.read(&format!("{cell_path}/B"), &[4 * cell])?;
            bias[2 * cell..3 * cell].iter_mut().for_each(|b| *b += 1.0);
            tf_gate_order_to_allennlp(&mut bias, cell);
            push(format!("{prefix}.input_linearity.weight"), vec![4 * cell, proj], input);
            push(format!("{prefix}.state_linearity.weight"), vec![4 * cell, proj], state);
            push(format!("{prefix}.state_linearity.bias"), vec![4 * cell], bias);
            push(
                format!("{prefix}.state_projection.weight"),
                vec![proj, cell],
                transpose(&release.read(&format!("{cell_path}/W_P_0"), &[cell, proj])?, cell, proj),
            );
        }
    }

    for k in 0..mixes {
        push(format!("scalar_mix_{k}.gamma"), vec![1], vec![1.0]);
        for j in 0..=lstm.n_layers {
            push(format!("scalar_mix_{k}.scalar_parameters.{j}"), vec![1], vec![0.0]);
        }
    }
    Ok(out)
}

/// The tensors as one safetensors file.
pub fn to_safetensors(tensors: &[NamedTensor]) -> Result<Vec<u8>> {
    let entries: Vec<_> = tensors.iter().map(|t| (t.name.as_str(), safetensors::Dtype::F32, t.shape.as_slice(), bytemuck::cast_slice(&t.data))).collect();
    crate::weights::serialize(&entries)
}
