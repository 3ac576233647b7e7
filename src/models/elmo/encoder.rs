//! ELMo's context-independent token layer (AllenNLP `_ElmoCharacterEncoder`): character
//! embeddings → character CNN (per width: conv, max-pool, activation) → highway layers →
//! projection, over the real tokens of a batch (sentence boundaries included); and its
//! backward for training.

use super::chars::{bos_ids, eos_ids, word_ids, CHARS_PER_TOKEN, MAX_CHAR_ID};
use super::ElmoOptions;
use crate::error::{Result, SesameError};
use crate::nn::{Gradients, Linear};
use crate::ops::char_cnn::{char_cnn, char_cnn_backward, char_cnn_saved, Activation, CharCnnOutput, ConvFilter};
use crate::ops::embedding::{embedding, embedding_backward, EmbeddingIds};
use crate::ops::highway::{highway, highway_backward, highway_saved, HighwayOutput};
use crate::tensor::Tensor;
use crate::weights::Weights;

pub struct TokenEncoder {
    activation: Activation,
    /// `_char_embedding_weights`: [rows ≥ 262, char dim], row 0 the padding.
    pub(super) char_embedding: Tensor,
    /// `char_conv_{i}`: weight [count, char dim, width], bias [count].
    convolutions: Vec<(Tensor, Tensor)>,
    /// `_highways._layers.{k}`: weight [2F, F], bias [2F].
    highways: Vec<(Tensor, Tensor)>,
    /// `_projection`: F → proj.
    projection: Linear,
}

/// The character ids of every sentence with its boundaries, `<S>` words `</S>`, token after
/// token ([Σ (words + 2), 50] flattened).
pub fn sentence_char_ids(sentences: &[Vec<String>]) -> Vec<u32> {
    let tokens: usize = sentences.iter().map(|s| s.len() + 2).sum();
    let mut ids = Vec::with_capacity(tokens * CHARS_PER_TOKEN);
    for sentence in sentences {
        ids.extend(bos_ids());
        for word in sentence {
            ids.extend(word_ids(word));
        }
        ids.extend(eos_ids());
    }
    ids
}

/// What [`TokenEncoder::forward_saved`] keeps for the backward.
pub struct EncoderSaved {
    chars: Tensor,
    cnn: CharCnnOutput,
    /// The input of each highway layer and its saved forward, then the projection's input.
    highways: Vec<(Tensor, HighwayOutput)>,
    projected_from: Tensor,
}

impl TokenEncoder {
    /// Loads `_elmo_lstm._token_embedder` (AllenNLP names), checking shapes against `options`.
    pub fn load(options: &ElmoOptions, w: &Weights) -> Result<TokenEncoder> {
        let activation = options.activation()?;
        let cnn = &options.char_cnn;
        let embedder = w.pp("_elmo_lstm._token_embedder");
        let table = "_char_embedding_weights";
        // The releases' options say 262 (with AllenNLP's padding row) or 261 (without).
        let rows = embedder.shape(table).map_or(MAX_CHAR_ID as usize + 1, |s| s[0]);
        if let Some(n) = cnn.n_characters.filter(|&n| rows != n && rows != n + 1) {
            return Err(SesameError::Checkpoint(format!("`{}` has {rows} rows, but options.json says n_characters {n}", embedder.name(table))));
        }
        if rows <= MAX_CHAR_ID as usize {
            return Err(SesameError::Checkpoint(format!("`{}` has {rows} rows; ELMo's character ids need {}", embedder.name(table), MAX_CHAR_ID + 1)));
        }
        let char_embedding = embedder.tensor(table, &[rows, cnn.embedding.dim])?;
        let convolutions = cnn
            .filters
            .iter()
            .enumerate()
            .map(|(i, &(width, count))| {
                let conv = embedder.pp(format!("char_conv_{i}"));
                Ok((conv.tensor("weight", &[count, cnn.embedding.dim, width])?, conv.tensor("bias", &[count])?))
            })
            .collect::<Result<Vec<_>>>()?;
        let n_filters = options.n_filters();
        let highways = (0..cnn.n_highway)
            .map(|k| {
                let layer = embedder.pp(format!("_highways._layers.{k}"));
                Ok((layer.tensor("weight", &[2 * n_filters, n_filters])?, layer.tensor("bias", &[2 * n_filters])?))
            })
            .collect::<Result<Vec<_>>>()?;
        let projection = Linear::load(&embedder.pp("_projection"), n_filters, options.lstm.projection_dim)?;
        Ok(TokenEncoder { activation, char_embedding, convolutions, highways, projection })
    }

    fn filters(&self) -> Vec<ConvFilter<'_>> {
        self.convolutions.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect()
    }

    fn chars(&self, ids: &[u32]) -> Result<Tensor> {
        let tokens = ids.len() / CHARS_PER_TOKEN;
        embedding(&self.char_embedding, None, None, &EmbeddingIds { tokens: ids, ..Default::default() }, &[tokens, CHARS_PER_TOKEN])
    }

    /// [tokens, proj] for `ids` ([tokens, 50] flattened, see [`sentence_char_ids`]).
    pub fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        let mut x = char_cnn(&self.chars(ids)?, &self.filters(), self.activation)?;
        for (weight, bias) in &self.highways {
            x = highway(&x, weight, bias, Activation::Relu)?;
        }
        self.projection.forward(&x)
    }

    /// [`TokenEncoder::forward`] for training: the output and what the backward needs.
    pub fn forward_saved(&self, ids: &[u32]) -> Result<(Tensor, EncoderSaved)> {
        let chars = self.chars(ids)?;
        let cnn = char_cnn_saved(&chars, &self.filters(), self.activation)?;
        let mut x = cnn.out.clone();
        let mut highways = Vec::with_capacity(self.highways.len());
        for (weight, bias) in &self.highways {
            let saved = highway_saved(&x, weight, bias, Activation::Relu)?;
            let next = saved.out.clone();
            highways.push((x, saved));
            x = next;
        }
        Ok((self.projection.forward(&x)?, EncoderSaved { chars, cnn, highways, projected_from: x }))
    }

    /// Backward of [`TokenEncoder::forward_saved`] for d_out [tokens, proj]: adds every
    /// parameter's gradient into `grads`.
    pub fn backward(&self, ids: &[u32], saved: &EncoderSaved, d_out: &Tensor, grads: &Gradients) -> Result<()> {
        let mut dx = self.projection.backward(&saved.projected_from, d_out, grads)?;
        for ((weight, bias), (x, forward)) in self.highways.iter().zip(&saved.highways).rev() {
            dx = highway_backward(x, weight, forward, &dx, Activation::Relu, grads.of(weight)?, grads.of(bias)?)?;
        }
        let grad_tensors =
            self.convolutions.iter().map(|(weight, bias)| Ok((grads.of(weight)?.clone(), grads.of(bias)?.clone()))).collect::<Result<Vec<_>>>()?;
        let conv_grads: Vec<ConvFilter> = grad_tensors.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
        let d_chars = char_cnn_backward(&saved.chars, &self.filters(), self.activation, &saved.cnn, &dx, &conv_grads)?;
        embedding_backward(&d_chars, ids, grads.of(&self.char_embedding)?)
    }
}
