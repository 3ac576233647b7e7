//! Text generation with GPT-2 / GPT: a KV cache, greedy decoding or sampling (temperature,
//! top-k, top-p) from a seeded generator, stopping at end-of-text or a token budget, a
//! callback per token for streaming, and batches of prompts of different lengths.
//!
//! A batch is left-padded to its longest prompt; padding is masked out of attention and each
//! sequence's positions count its own tokens only, so every sequence gets exactly the tokens
//! it would get alone.

use std::ops::ControlFlow;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{arg_err, Result, SesameError};
use crate::models::decoder::{CausalLm, DecoderInputs};
use crate::models::ForwardOptions;
use crate::ops::cross_entropy::cross_entropy;
use crate::ops::topk;
use crate::tokenize::TextTokenizer;

/// The most tokens a call generates after a prompt: a bound on what the tokens made so far
/// hold (the KV cache is bounded by the model's positions, the context sliding past them), and
/// more than a CPU makes in hours (GPT-2 124M: about 20 ms a token).
pub const MAX_NEW_TOKENS: usize = 100_000;

/// How to pick tokens. `Default` is greedy decoding of up to 20 tokens, stopping at the
/// model's end-of-text token.
#[derive(Clone, Debug)]
pub struct GenerationConfig {
    /// At most [`MAX_NEW_TOKENS`].
    pub max_new_tokens: usize,
    /// 0 for greedy decoding; otherwise logits are divided by it before sampling.
    pub temperature: f32,
    /// Sample among the k most likely tokens only (0: no limit; at most 256).
    pub top_k: usize,
    /// Sample among the most likely tokens whose probabilities add up to top_p (1: no limit).
    pub top_p: f32,
    /// Seed of the sampler; the same seed gives the same tokens. Default: from the clock.
    pub seed: Option<u64>,
    /// Stop a sequence at this token (default: the model's end-of-text token, if any).
    pub eos_token_id: Option<u32>,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig { max_new_tokens: 20, temperature: 0.0, top_k: 0, top_p: 1.0, seed: None, eos_token_id: None }
    }
}

fn clock_seed() -> u64 {
    #[cfg(target_arch = "wasm32")]
    let now = js_sys::Date::now() as u64;
    #[cfg(not(target_arch = "wasm32"))]
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    now
}

impl GenerationConfig {
    fn validate(&self) -> Result<()> {
        let op = "generate";
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(arg_err!(op, "temperature must be ≥ 0, got {}", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(arg_err!(op, "top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.top_k > topk::MAX_K {
            return Err(arg_err!(op, "top_k {} exceeds the supported {}", self.top_k, topk::MAX_K));
        }
        if self.max_new_tokens > MAX_NEW_TOKENS {
            return Err(arg_err!(
                op,
                "max_new_tokens {} exceeds the supported {MAX_NEW_TOKENS} (a longer text: generate again from its end)",
                self.max_new_tokens
            ));
        }
        Ok(())
    }
}

/// Samples one token from (logit, token) candidates after temperature and top-p.
fn sample(rng: &mut StdRng, mut candidates: Vec<(f32, u32)>, cfg: &GenerationConfig) -> u32 {
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let max = candidates[0].0;
    let weights: Vec<f64> = candidates.iter().map(|&(l, _)| (((l - max) / cfg.temperature) as f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    // Top-p: the shortest prefix whose probability reaches top_p (at least one token).
    let mut kept = 0;
    let mut mass = 0.0;
    while kept < weights.len() && (kept == 0 || mass < cfg.top_p as f64 * total) {
        mass += weights[kept];
        kept += 1;
    }
    let mut draw = rng.random::<f64>() * mass;
    for (i, w) in weights[..kept].iter().enumerate() {
        if draw < *w {
            return candidates[i].1;
        }
        draw -= w;
    }
    candidates[kept - 1].1
}

/// Generates up to `cfg.max_new_tokens` tokens after each prompt, calling `on_token(sequence,
/// token)` as each is chosen; returns the new tokens of every sequence (ending with the
/// end-of-text token where one stopped it). `on_token` returning `Break` stops every sequence
/// after the token it was given (a user's Stop button).
///
/// Past the model's positions the context slides: a prompt longer than them keeps its last
/// tokens, and when the cache is full it is rebuilt from the last half of each sequence (its
/// positions restarting at 0, as the model saw text in training).
pub async fn generate<M: CausalLm + ?Sized>(
    model: &M,
    prompts: &[Vec<u32>],
    cfg: &GenerationConfig,
    mut on_token: impl FnMut(usize, u32) -> ControlFlow<()>,
) -> Result<Vec<Vec<u32>>> {
    let op = "generate";
    cfg.validate()?;
    if prompts.is_empty() || prompts.iter().any(Vec::is_empty) {
        return Err(arg_err!(op, "every prompt needs at least one token"));
    }
    let batch = prompts.len();
    let window = model.max_positions();
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let eos = cfg.eos_token_id.or(model.eos_token_id());
    let mut rng = StdRng::seed_from_u64(cfg.seed.unwrap_or_else(clock_seed));
    let mut cache = model.new_cache(batch, (longest + cfg.max_new_tokens).min(window))?;
    let options = ForwardOptions { last_position_only: true, ..Default::default() };

    // Every sequence so far (prompt and new tokens), for rebuilding the cache.
    let mut history: Vec<Vec<u32>> = prompts.to_vec();
    let mut context = LeftPadded::last(&history, window);
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); batch];
    let mut done = vec![false; batch];
    for step in 0..cfg.max_new_tokens {
        if cache.len + context.seq > cache.capacity {
            context = LeftPadded::last(&history, (window / 2).max(1));
            cache.len = 0;
        }
        let mask: Vec<u32> = context.mask_rows.concat();
        let inputs = DecoderInputs { input_ids: &context.ids, attention_mask: Some(&mask), position_ids: Some(&context.positions), batch, seq: context.seq };
        let logits = model.forward(&inputs, options, Some(&mut cache))?;
        let logits = logits.get("logits").ok_or_else(|| arg_err!(op, "the model has no language-model head"))?;
        let vocab = logits.shape()[2];
        let rows = logits.reshape(&[batch, vocab])?;
        // A row's log-sum-exp (its cross-entropy against any token) is finite only when every
        // logit is: one row reduction, so that NaN logits are an error, not arbitrary tokens.
        let log_sum_exp = cross_entropy(&rows, &vec![0; batch], -1)?.losses;
        let next: Vec<u32> = if cfg.temperature == 0.0 {
            topk::argmax(&rows)?.to_vec::<u32>().await?
        } else if cfg.top_k > 0 {
            let (values, indices) = topk::topk(&rows, cfg.top_k.min(vocab))?;
            let (values, indices) = (values.to_vec::<f32>().await?, indices.to_vec::<u32>().await?);
            let k = cfg.top_k.min(vocab);
            (0..batch)
                .map(|b| sample(&mut rng, values[b * k..(b + 1) * k].iter().copied().zip(indices[b * k..(b + 1) * k].iter().copied()).collect(), cfg))
                .collect()
        } else {
            let all = rows.to_vec::<f32>().await?;
            (0..batch).map(|b| sample(&mut rng, all[b * vocab..(b + 1) * vocab].iter().copied().zip(0..vocab as u32).collect(), cfg)).collect()
        };
        if log_sum_exp.to_vec::<f32>().await?.iter().any(|v| !v.is_finite()) {
            return Err(SesameError::NonFinite {
                output: "logits".into(),
                location: format!("generation step {step} (`sesame forward --hidden-states` on the text so far names the layer)"),
            });
        }
        let mut stop = false;
        for (b, &token) in next.iter().enumerate() {
            history[b].push(token);
            if !done[b] {
                out[b].push(token);
                stop |= on_token(b, token).is_break();
                done[b] = Some(token) == eos;
            }
        }
        if stop || done.iter().all(|&d| d) {
            break;
        }
        context.advance(next);
    }
    Ok(out)
}

/// The decoder input of a step: [batch, seq] ids, each row left-padded (masked) to the
/// longest, with its positions and the key mask of everything cached so far.
struct LeftPadded {
    ids: Vec<u32>,
    positions: Vec<u32>,
    mask_rows: Vec<Vec<u32>>,
    seq: usize,
}

impl LeftPadded {
    /// The last `keep` tokens (at most) of each sequence, at positions 0.. .
    fn last(sequences: &[Vec<u32>], keep: usize) -> LeftPadded {
        let rows: Vec<&[u32]> = sequences.iter().map(|s| &s[s.len().saturating_sub(keep)..]).collect();
        let seq = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let pad: Vec<usize> = rows.iter().map(|r| seq - r.len()).collect();
        LeftPadded {
            ids: rows.iter().zip(&pad).flat_map(|(r, &n)| std::iter::repeat_n(0, n).chain(r.iter().copied())).collect(),
            positions: pad.iter().flat_map(|&n| (0..seq).map(move |t| t.saturating_sub(n) as u32)).collect(),
            mask_rows: pad.iter().map(|&n| (0..seq).map(|t| (t >= n) as u32).collect()).collect(),
            seq,
        }
    }

    /// The next step feeds each sequence its new token at its next position.
    fn advance(&mut self, next: Vec<u32>) {
        self.positions = self.mask_rows.iter().map(|row| row.iter().sum()).collect();
        for row in &mut self.mask_rows {
            row.push(1);
        }
        self.ids = next;
        self.seq = 1;
    }
}

/// The text of a sequence as it grows, handed out piece by piece for streaming. A trailing
/// partial character is held back (byte-level BPE can split one character over tokens).
pub struct TextStream<'a> {
    tokenizer: &'a TextTokenizer,
    ids: Vec<u32>,
    /// Bytes of the decoded text already handed out.
    emitted: usize,
}

impl<'a> TextStream<'a> {
    /// Starts after `prompt`, whose text counts as handed out.
    pub fn new(tokenizer: &'a TextTokenizer, prompt: &[u32]) -> Result<Self> {
        let mut stream = TextStream { tokenizer, ids: prompt.to_vec(), emitted: 0 };
        stream.emitted = stream.text()?.len();
        Ok(stream)
    }

    /// The whole text so far, special tokens skipped.
    pub fn text(&self) -> Result<String> {
        self.tokenizer.decode(&self.ids, true)
    }

    /// Appends `token`; returns the text it completes, if any.
    pub fn push(&mut self, token: u32) -> Option<String> {
        self.ids.push(token);
        let text = self.text().ok()?;
        if text.ends_with('\u{FFFD}') || text.len() <= self.emitted || !text.is_char_boundary(self.emitted) {
            return None;
        }
        let piece = text[self.emitted..].to_string();
        self.emitted = text.len();
        Some(piece)
    }
}

/// What [`generate_text`] made: the prompt and continuation (ids and text), and how many
/// tokens were new — as transformers' `generate` and `text-generation` return them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GeneratedText {
    pub ids: Vec<u32>,
    pub text: String,
    pub new_tokens: usize,
}

/// Continues `prompt` (token ids), calling `on_piece(text, token)` with each new piece of
/// text as tokens complete it; `Break` from it ends the generation there.
pub async fn generate_text<M: CausalLm + ?Sized>(
    model: &M,
    tokenizer: &TextTokenizer,
    prompt: &[u32],
    cfg: &GenerationConfig,
    mut on_piece: impl FnMut(&str, u32) -> ControlFlow<()>,
) -> Result<GeneratedText> {
    let mut stream = TextStream::new(tokenizer, prompt)?;
    let new = generate(model, &[prompt.to_vec()], cfg, |_, token| match stream.push(token) {
        Some(piece) => on_piece(&piece, token),
        None => ControlFlow::Continue(()),
    })
    .await?
    .concat();
    let ids = [prompt, &new].concat();
    Ok(GeneratedText { text: tokenizer.decode(&ids, true)?, ids, new_tokens: new.len() })
}
