//! ELMo's `options.json`, in the schema of the bilm-tf / AllenNLP releases:
//! `{"char_cnn": {"embedding": {"dim"}, "filters": [[width, count], …], "n_highway",
//! "activation", "max_characters_per_token", "n_characters"}, "lstm": {"dim" (cell size),
//! "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"}}`.

use serde::Deserialize;

use super::chars::CHARS_PER_TOKEN;
use crate::error::{Result, SesameError};
use crate::limits::saturating_product;
use crate::ops::char_cnn::Activation;

fn options_err(message: String) -> SesameError {
    SesameError::Checkpoint(format!("options.json: {message}"))
}

#[derive(Clone, Debug, Deserialize)]
pub struct ElmoOptions {
    pub char_cnn: CharCnnOptions,
    pub lstm: LstmOptions,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CharCnnOptions {
    pub embedding: EmbeddingOptions,
    /// (width, count) per convolution.
    pub filters: Vec<(usize, usize)>,
    pub n_highway: usize,
    /// After each convolution's max-pool: "relu" (the released models) or "tanh".
    pub activation: String,
    #[serde(default = "default_chars")]
    pub max_characters_per_token: usize,
    /// Rows of the character embedding (the releases say 262 or 261; see `ElmoModel::load`).
    pub n_characters: Option<usize>,
}

fn default_chars() -> usize {
    CHARS_PER_TOKEN
}

#[derive(Clone, Debug, Deserialize)]
pub struct EmbeddingOptions {
    pub dim: usize,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LstmOptions {
    /// The cell size.
    pub dim: usize,
    pub projection_dim: usize,
    pub n_layers: usize,
    /// Absent: no clipping (bilm-tf's behaviour).
    pub cell_clip: Option<f32>,
    pub proj_clip: Option<f32>,
    /// Add each layer's input to its output from the second layer on.
    #[serde(default)]
    pub use_skip_connections: bool,
}

impl ElmoOptions {
    /// Parses and checks the options.
    pub fn from_json(json: &[u8]) -> Result<ElmoOptions> {
        let o: ElmoOptions = crate::error::from_json_named(json).map_err(options_err)?;
        o.validate()?;
        Ok(o)
    }

    fn validate(&self) -> Result<()> {
        let (cnn, lstm) = (&self.char_cnn, &self.lstm);
        self.activation()?;
        if cnn.max_characters_per_token != CHARS_PER_TOKEN {
            return Err(options_err(format!(
                "max_characters_per_token is {}; ELMo's character ids are {CHARS_PER_TOKEN} per token",
                cnn.max_characters_per_token
            )));
        }
        if cnn.filters.is_empty() {
            return Err(options_err("char_cnn.filters is empty".into()));
        }
        if let Some(&(width, count)) = cnn.filters.iter().find(|&&(w, c)| w == 0 || w > CHARS_PER_TOKEN || c == 0) {
            return Err(options_err(format!("filter [{width}, {count}]: widths must be 1..={CHARS_PER_TOKEN} and counts positive")));
        }
        for (name, value) in [
            ("char_cnn.embedding.dim", cnn.embedding.dim),
            ("lstm.dim", lstm.dim),
            ("lstm.projection_dim", lstm.projection_dim),
            ("lstm.n_layers", lstm.n_layers),
        ] {
            if value == 0 {
                return Err(options_err(format!("{name} must be positive")));
            }
        }
        crate::limits::check_elements(|| "the weights options.json describes".into(), self.parameter_count(), 4)?;
        for (name, clip) in [("lstm.cell_clip", lstm.cell_clip), ("lstm.proj_clip", lstm.proj_clip)] {
            if let Some(clip) = clip.filter(|c| !(c.is_finite() && *c > 0.0)) {
                return Err(options_err(format!("{name} is {clip}: a clip must be a positive number (leave it out for none)")));
            }
        }
        Ok(())
    }

    /// The number of weights these options describe (saturating): char embeddings, filters,
    /// highway layers, projection and both directions' LSTM layers.
    pub fn parameter_count(&self) -> u64 {
        let (cnn, lstm) = (&self.char_cnn, &self.lstm);
        let [embed, n_filters, highway, cell, proj, layers] =
            [cnn.embedding.dim, self.n_filters(), cnn.n_highway, lstm.dim, lstm.projection_dim, lstm.n_layers].map(|v| v as u64);
        let filters = cnn.filters.iter().fold(0u64, |acc, &(width, count)| acc.saturating_add(saturating_product(&[width as u64, embed, count as u64])));
        let lstm_layer = saturating_product(&[4, cell, proj]).saturating_mul(2).saturating_add(saturating_product(&[proj, cell]));
        [
            saturating_product(&[crate::models::elmo::chars::MAX_CHAR_ID as u64 + 1, embed]),
            filters,
            saturating_product(&[highway, 2, n_filters, n_filters]),
            saturating_product(&[n_filters, proj]),
            saturating_product(&[layers, 2, lstm_layer]),
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }

    /// The activation after the convolutions' max-pool.
    pub fn activation(&self) -> Result<Activation> {
        match self.char_cnn.activation.as_str() {
            "relu" => Ok(Activation::Relu),
            "tanh" => Ok(Activation::Tanh),
            other => Err(options_err(format!("unsupported char_cnn.activation `{other}` (relu or tanh)"))),
        }
    }

    /// Σ filter counts: the width of the convolutions' output and of the highway layers.
    pub fn n_filters(&self) -> usize {
        self.char_cnn.filters.iter().map(|&(_, count)| count).sum()
    }
}
