//! ELMo (Peters et al. 2018) as AllenNLP's `Elmo` module runs it, with its parameter names:
//! words → character ids → character CNN (per width: conv, max-pool, activation) → highway
//! layers → projection = the token layer; then an L-layer biLSTM with projections whose two
//! directions run independently; the L+1 layers (token layer doubled to 2·proj) and any number
//! of task-specific scalar mixes γ·Σ softmax(s)ⱼ·hⱼ.
//!
//! Layouts: every sentence gets `<S>` and `</S>` around it, so a batch of B sentences of at
//! most T words runs the LSTMs over [B, T+2] positions; the outputs drop the boundaries again
//! ([B, T]) and are 0 at padded positions. The character CNN runs only on real tokens.

pub mod chars;
#[cfg(feature = "training")]
pub mod classify;
#[cfg(not(target_arch = "wasm32"))]
pub mod convert;
pub mod encoder;
#[cfg(feature = "training")]
pub mod fresh;
pub mod options;
#[cfg(feature = "training")]
pub mod train;

use self::encoder::{sentence_char_ids, TokenEncoder};
pub use self::options::ElmoOptions;
use super::ModelOutput;
use crate::error::{arg_err, shape_err, Result, SesameError};
use crate::gpu::Device;
use crate::nn::Linear;
use crate::ops::elementwise::add;
use crate::ops::lstm::{lstm_sequence, LstmConfig, LstmWeights};
use crate::ops::rows::copy_rows;
use crate::ops::scalar_mix::scalar_mix;
use crate::tensor::{DType, Tensor};
use crate::weights::{Checkpoint, Weights};

/// One direction of one biLSTM layer (`{forward,backward}_layer_{i}`).
struct LstmLayer {
    /// `input_linearity`: x·W_inputᵀ for all time steps at once (no bias).
    input_linearity: Linear,
    weights: LstmWeights,
}

/// A task's mix of the L+1 layers (`scalar_mix_{k}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarMix {
    pub gamma: f32,
    pub scalar_parameters: Vec<f32>,
}

pub struct ElmoModel {
    pub options: ElmoOptions,
    pub mixes: Vec<ScalarMix>,
    encoder: TokenEncoder,
    /// Per layer: forward, backward.
    lstm: Vec<[LstmLayer; 2]>,
    /// Per mix: its scalar parameters s [L+1] and γ [1] on the GPU.
    mix_tensors: Vec<(Tensor, Tensor)>,
}

/// The token layer, the LSTM layers and the mixes of a batch; the layers are 0 at padded
/// positions.
pub struct ElmoOutput {
    /// [B, L+1, T, 2·proj].
    pub layers: Tensor,
    /// [B, T]: 1 at words, 0 at padding.
    pub mask: Tensor,
    /// One [B, T, 2·proj] per scalar mix.
    pub representations: Vec<Tensor>,
}

impl ElmoOutput {
    /// The outputs under the names `sesame forward` writes: `elmo_layers`, `mask`,
    /// `elmo_representations.{k}`.
    pub fn into_model_output(self) -> ModelOutput {
        let mut out = ModelOutput::default();
        out.push("elmo_layers", self.layers);
        out.push("mask", self.mask);
        for (k, r) in self.representations.into_iter().enumerate() {
            out.push(format!("elmo_representations.{k}"), r);
        }
        out
    }
}

impl ElmoModel {
    /// Loads the weights of AllenNLP's `Elmo` (names from the root of its state dict).
    /// Every tensor's shape is checked against the options; the scalar mixes present
    /// (`scalar_mix_0`, `scalar_mix_1`, …) are all loaded (random weights get one random mix;
    /// a checkpoint without any gets one that averages the layers). Other tensors (a biLM's
    /// `softmax.*`) are ignored.
    pub fn load(options: ElmoOptions, w: &Weights) -> Result<ElmoModel> {
        let encoder = TokenEncoder::load(&options, w)?;
        let lstm = &options.lstm;
        let (cell, proj) = (lstm.dim, lstm.projection_dim);
        let lstm_layer = |direction: &str, i: usize| -> Result<LstmLayer> {
            let layer = w.pp(format!("_elmo_lstm._elmo_lstm.{direction}_layer_{i}"));
            let input = layer.pp("input_linearity");
            Ok(LstmLayer {
                input_linearity: Linear::from_tensors(input.tensor("weight", &[4 * cell, proj])?, None),
                weights: LstmWeights::new(
                    w.gpu(),
                    &layer.values("state_linearity.weight", &[4 * cell, proj])?,
                    &layer.values("state_linearity.bias", &[4 * cell])?,
                    Some(&layer.values("state_projection.weight", &[proj, cell])?),
                    cell,
                    proj,
                )?,
            })
        };
        let lstm_layers = (0..lstm.n_layers).map(|i| Ok([lstm_layer("forward", i)?, lstm_layer("backward", i)?])).collect::<Result<Vec<_>>>()?;
        let mixes = load_mixes(w, lstm.n_layers + 1)?;
        let mix_tensors = mixes
            .iter()
            .map(|m| Ok((Tensor::from_slice(w.gpu(), &m.scalar_parameters, &[lstm.n_layers + 1])?, Tensor::from_slice(w.gpu(), &[m.gamma], &[1])?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ElmoModel { encoder, lstm: lstm_layers, mixes, mix_tensors, options })
    }

    /// A model from the bytes of its folder's options.json and model.safetensors.
    pub fn from_bytes(gpu: &Device, options_json: &[u8], safetensors: Vec<u8>) -> Result<ElmoModel> {
        let options = ElmoOptions::from_json(options_json)?;
        ElmoModel::from_checkpoint(gpu, options, &Checkpoint::from_bytes(safetensors)?)
    }

    /// A model of `options` with the weights of `checkpoint`.
    pub fn from_checkpoint(gpu: &Device, options: ElmoOptions, checkpoint: &Checkpoint) -> Result<ElmoModel> {
        let weights = Weights::new(gpu, checkpoint);
        let model = ElmoModel::load(options, &weights)?;
        // A biLM's softmax is for training and a feature classifier's head is its task's (sesame
        // train writes both); anything else unread is weights options.json does not describe
        // (highway layers beyond n_highway, say).
        weights.check_all_read("ELMo", "options.json", |name| name.starts_with("softmax.") || name.starts_with("classifier."))?;
        Ok(model)
    }

    /// Reads an ELMo folder: options.json and model.safetensors (or a sharded index and its
    /// shards), the weights a tensor at a time.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir(gpu: &Device, dir: &std::path::Path) -> Result<ElmoModel> {
        let options = ElmoOptions::from_json(&crate::files::read_file(&dir.join("options.json"))?)?;
        ElmoModel::from_checkpoint(gpu, options, &Checkpoint::open_dir(dir)?)
    }

    /// Width of every output layer: 2·proj.
    pub fn output_dim(&self) -> usize {
        2 * self.options.lstm.projection_dim
    }

    /// Runs a batch of sentences (words, see [`chars::split_words`]); each needs at least one.
    pub fn forward(&self, sentences: &[Vec<String>]) -> Result<ElmoOutput> {
        let (layers, mask) = self.layers(sentences)?;
        let &[batch, n_layers, longest, width] = layers.shape() else {
            return Err(shape_err!("elmo", "layers of shape {:?}", layers.shape()));
        };
        let per_layer = layers.reshape(&[batch, n_layers, longest * width])?;
        let representations =
            self.mix_tensors.iter().map(|(s, gamma)| scalar_mix(&per_layer, s, gamma)?.reshape(&[batch, longest, width])).collect::<Result<Vec<_>>>()?;
        Ok(ElmoOutput { layers, mask, representations })
    }

    /// The L+1 layers of a batch of sentences, [B, L+1, T, 2·proj] with 0 at padding, and
    /// the mask [B, T].
    pub fn layers(&self, sentences: &[Vec<String>]) -> Result<(Tensor, Tensor)> {
        let op = "elmo";
        if sentences.is_empty() {
            return Err(arg_err!(op, "no sentences given"));
        }
        if let Some(i) = sentences.iter().position(Vec::is_empty) {
            return Err(arg_err!(op, "sentence {i} has no words"));
        }
        let gpu = self.encoder.char_embedding.gpu();
        let batch = sentences.len();
        let longest = sentences.iter().map(Vec::len).max().unwrap_or(0);
        // Positions per sentence with the boundaries; the LSTMs run over [B, steps].
        let steps = longest + 2;
        let lengths: Vec<usize> = sentences.iter().map(|s| s.len() + 2).collect();

        // Token layer over the real tokens only (Σ lengths rows), then laid out [B·steps, proj]
        // with zero rows at padding.
        let compact = self.encoder.forward(&sentence_char_ids(sentences))?;
        let proj = self.options.lstm.projection_dim;
        let token_layer = Tensor::zeros(gpu, &[batch * steps, proj], DType::F32)?;
        copy_rows(&compact, &token_layer, 0, &token_rows(&lengths, steps))?;

        // The biLSTM: each direction reads its own previous layer.
        let cfg = |reverse| LstmConfig { cell_clip: self.options.lstm.cell_clip, proj_clip: self.options.lstm.proj_clip, reverse };
        let mut inputs = [token_layer.clone(), token_layer.clone()];
        let mut lstm_outputs = Vec::with_capacity(self.lstm.len());
        for (i, layer) in self.lstm.iter().enumerate() {
            for (direction, lstm) in layer.iter().enumerate() {
                let gates = lstm.input_linearity.forward(&inputs[direction])?.reshape(&[batch, steps, 4 * self.options.lstm.dim])?;
                let mut out = lstm_sequence(&gates, &lengths, &lstm.weights, &cfg(direction == 1))?.outputs.reshape(&[batch * steps, proj])?;
                if i > 0 && self.options.lstm.use_skip_connections {
                    out = add(&out, &inputs[direction])?;
                }
                inputs[direction] = out;
            }
            lstm_outputs.push(inputs.clone());
        }

        // [B, L+1, T, 2·proj], boundaries dropped: layer 0 is the token layer twice.
        let n_layers = self.lstm.len() + 1;
        let layers = Tensor::zeros(gpu, &[batch * n_layers * longest, 2 * proj], DType::F32)?;
        let sources = std::iter::once([token_layer.clone(), token_layer]).chain(lstm_outputs);
        for (l, [forward, backward]) in sources.enumerate() {
            let pairs: Vec<(usize, usize)> =
                sentences.iter().enumerate().flat_map(|(b, s)| (0..s.len()).map(move |t| (b * steps + t + 1, (b * n_layers + l) * longest + t))).collect();
            copy_rows(&forward, &layers, 0, &pairs)?;
            copy_rows(&backward, &layers, proj, &pairs)?;
        }
        let mask: Vec<f32> = sentences.iter().flat_map(|s| (0..longest).map(move |t| (t < s.len()) as u32 as f32)).collect();
        let mask = Tensor::from_slice(gpu, &mask, &[batch, longest])?;
        Ok((layers.reshape(&[batch, n_layers, longest, 2 * proj])?, mask))
    }
}

/// (row of the encoder's output, row of the [B·steps] LSTM layout) of every real token, for
/// sentences of `lengths` tokens (boundaries included).
fn token_rows(lengths: &[usize], steps: usize) -> Vec<(usize, usize)> {
    lengths.iter().enumerate().flat_map(|(b, &len)| (0..len).map(move |t| b * steps + t)).enumerate().collect()
}

/// `scalar_mix_{k}` for k = 0, 1, … while present; each must mix exactly `layers` layers. A
/// checkpoint without any (a pretrained biLM: the mixes are task parameters) gets one as
/// AllenNLP initialises it, γ = 1 and equal weights: the mean of the layers.
fn load_mixes(w: &Weights, layers: usize) -> Result<Vec<ScalarMix>> {
    let count = if w.is_random() { 1 } else { (0..).take_while(|k| w.contains(&format!("scalar_mix_{k}.gamma"))).count() };
    if count == 0 {
        return Ok(vec![ScalarMix { gamma: 1.0, scalar_parameters: vec![0.0; layers] }]);
    }
    (0..count)
        .map(|k| {
            let mix = w.pp(format!("scalar_mix_{k}"));
            if !w.is_random() && mix.contains(&format!("scalar_parameters.{layers}")) {
                return Err(SesameError::Checkpoint(format!("`{}` mixes more than the model's {layers} layers", mix.name("scalar_parameters"))));
            }
            let scalar_parameters = (0..layers).map(|j| Ok(mix.values(&format!("scalar_parameters.{j}"), &[1])?[0])).collect::<Result<Vec<_>>>()?;
            Ok(ScalarMix { gamma: mix.values("gamma", &[1])?[0], scalar_parameters })
        })
        .collect()
}
