//! Perplexity of a text under a causal language model: exp of the mean negative
//! log-likelihood of every token given the ones before it (the first token has no context
//! and is not scored), as transformers computes `model(ids, labels=ids).loss`.
//!
//! A text longer than one window is scored with overlapping windows: each window starts
//! `stride` tokens after the previous one and scores only the tokens the previous window did
//! not, so every token is scored once, with at least `window - stride` tokens of context
//! (the sliding-window recipe of transformers' perplexity guide).

use crate::error::{arg_err, Result, SesameError};
use crate::models::auto::{non_empty, LoadedModel};
use crate::models::decoder::{CausalLm, DecoderInputs};
use crate::models::{Capability, ForwardOptions};
use crate::ops::cross_entropy::cross_entropy;

/// What [`perplexity`] measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Perplexity {
    pub perplexity: f64,
    /// Mean negative log-likelihood per scored token, in nats.
    pub mean_nll: f64,
    /// Tokens scored: all but the first.
    pub scored_tokens: usize,
    pub windows: usize,
}

/// Window settings of [`perplexity`]; `None` picks the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerplexityOptions {
    /// Tokens per forward pass. Default: the model's positions, capped so that the window's
    /// logits [window, vocab] fit one storage binding of the device.
    pub window: Option<usize>,
    /// Tokens between window starts. Default: half the window.
    pub stride: Option<usize>,
}

/// Scores `ids` (already tokenized, at least two tokens) under `model`'s language-model head.
pub async fn perplexity<M: CausalLm + ?Sized>(model: &M, ids: &[u32], options: PerplexityOptions) -> Result<Perplexity> {
    let op = "perplexity";
    if ids.len() < 2 {
        return Err(arg_err!(op, "a text needs at least two tokens to be scored, got {}", ids.len()));
    }
    let logits_row_bytes = model.vocab_size().max(1) as u64 * 4;
    let binding_rows = (model.gpu().limits().max_storage_buffer_binding_size / logits_row_bytes).max(1) as usize;
    let window = options.window.unwrap_or_else(|| model.max_positions().min(binding_rows));
    if window < 2 || window > model.max_positions() {
        return Err(arg_err!(op, "window {window} must be in 2..={} (the model's positions)", model.max_positions()));
    }
    let stride = options.stride.unwrap_or(window / 2).max(1);
    if stride > window {
        return Err(arg_err!(op, "stride {stride} is longer than the window {window}: tokens would go unscored"));
    }

    let mut total_nll = 0f64;
    let mut scored = 0usize;
    let mut windows = 0usize;
    // Tokens before `scored_until` have been scored by an earlier window.
    let mut scored_until = 1usize;
    let mut begin = 0usize;
    while scored_until < ids.len() {
        let end = (begin + window).min(ids.len());
        let chunk = &ids[begin..end];
        let inputs = DecoderInputs { input_ids: chunk, attention_mask: None, position_ids: None, batch: 1, seq: chunk.len() };
        let output = model.forward(&inputs, ForwardOptions::default(), None)?;
        let logits = output.get("logits").ok_or_else(|| arg_err!(op, "the model has no language-model head (architectures: …LMHeadModel)"))?;
        let vocab = logits.shape()[2];
        // Row i predicts token begin + i + 1; rows whose target was scored before are ignored.
        let targets: Vec<i64> = (0..chunk.len()).map(|i| begin + i + 1).map(|t| if t >= scored_until && t < end { ids[t] as i64 } else { -1 }).collect();
        let losses = cross_entropy(&logits.reshape(&[chunk.len(), vocab])?, &targets, -1)?.losses.to_vec::<f32>().await?;
        if losses.iter().any(|l| !l.is_finite()) {
            return Err(SesameError::NonFinite { output: "logits".into(), location: format!("the window of tokens {begin}..{end}") });
        }
        total_nll += losses.iter().map(|&l| l as f64).sum::<f64>();
        scored += end - scored_until;
        scored_until = end;
        windows += 1;
        begin += stride;
    }
    let mean_nll = total_nll / scored as f64;
    Ok(Perplexity { perplexity: mean_nll.exp(), mean_nll, scored_tokens: scored, windows })
}

/// Perplexity of `text` (tokenized with special tokens, no length limit: long texts slide).
pub async fn text_perplexity(loaded: &LoadedModel, text: &str, options: PerplexityOptions) -> Result<Perplexity> {
    let op = "perplexity";
    let model = loaded.model.causal_lm(Capability::Perplexity, op)?;
    non_empty(op, text)?;
    let ids = loaded.tokenizer()?.encode(text, true)?;
    perplexity(model, &ids, options).await
}
