//! `sesame bench models`: whole models at their published shapes with random weights —
//! BERT-base, DistilBERT-base and ALBERT-base forwards, MiniLM (all-MiniLM-L6-v2-shaped)
//! sentence embeddings, and GPT-2 124M generation after a 128-token prompt (prefill and
//! per-token decode timed separately).

use std::ops::ControlFlow;
use std::time::Instant;

use super::record::{time_ms, BenchRecord};
use sesame::embed::{sentence_embeddings, Pooling};
use sesame::error::{Result, SesameError};
use sesame::generate::{generate, GenerationConfig};
use sesame::gpu::Device;
use sesame::models::auto::AutoModel;
use sesame::models::decoder::{CausalLm, DecoderInputs, KvCache};
use sesame::models::gpt2::{self, Gpt2Model};
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::ops::topk;
use sesame::quantize::WeightDtype;
use sesame::weights::Weights;

const BERT_BASE: &str = r#"{"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512}"#;
const MINILM_L6: &str = r#"{"model_type": "bert", "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
    "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512}"#;
const DISTILBERT_BASE: &str = r#"{"model_type": "distilbert", "vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12,
    "hidden_dim": 3072, "max_position_embeddings": 512}"#;
const ALBERT_BASE: &str = r#"{"model_type": "albert", "vocab_size": 30000, "embedding_size": 128, "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512}"#;
const GPT2_124M: &str = r#"{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_embd": 768,
    "n_layer": 12, "n_head": 12, "n_positions": 1024}"#;

pub struct ModelBench<'a> {
    pub gpu: &'a Device,
    pub budget_ms: f64,
    /// Run only the benchmarks whose op name contains this.
    pub only: Option<String>,
    /// Tokens generated when timing GPT-2 decoding.
    pub decode_tokens: usize,
    /// The weight matrices' precision (None: f32), named in each record's shape.
    pub dtype: Option<WeightDtype>,
}

/// Token ids that cycle through the vocabulary (values do not matter for timing).
fn ids(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

/// Feeds `input_ids` (one sequence) through the cache and reads back the argmax of the last
/// position's logits, as greedy generation does per token.
fn greedy_step(model: &Gpt2Model, input_ids: &[u32], cache: &mut KvCache) -> Result<u32> {
    let inputs = DecoderInputs { input_ids, attention_mask: None, position_ids: None, batch: 1, seq: input_ids.len() };
    let output = model.forward(&inputs, ForwardOptions { last_position_only: true, ..Default::default() }, Some(cache))?;
    let logits = output.get("logits").ok_or_else(|| SesameError::InvalidArgument { op: "bench", message: "GPT2LMHeadModel produced no logits".into() })?;
    let token = pollster::block_on(topk::argmax(&logits.reshape(&[1, model.vocab_size()])?)?.to_vec::<u32>())?;
    Ok(token[0])
}

impl ModelBench<'_> {
    fn record(&self, op: &str, shape: String, ms: f64, per_call: usize) -> BenchRecord {
        let shape = match self.dtype {
            Some(dtype) => format!("{shape}, {}", dtype.name()),
            None => shape,
        };
        BenchRecord { per_second: Some(per_call as f64 * 1e3 / ms), ..BenchRecord::new(self.gpu, self.gpu.kernel_variant(), op, shape, ms) }
    }

    /// A model of `config` (any family) with random weights.
    fn model(&self, config: &str) -> Result<AutoModel> {
        AutoModel::load(config.as_bytes(), &self.weights())
    }

    /// Random weights, in the benchmark's dtype.
    fn weights(&self) -> Weights<'_> {
        Weights::random(self.gpu).with_dtype(self.dtype)
    }

    /// One forward pass of `model` (per second: tokens), recorded as `op`.
    fn forward(&self, op: &str, model: &AutoModel, batch: usize, seq: usize) -> Result<BenchRecord> {
        let inputs = IdsBatch { input_ids: ids(batch * seq, model.sizes().vocab_size), batch, seq, ..IdsBatch::default() };
        let ms = time_ms(self.gpu, self.budget_ms, || model.forward(&inputs, ForwardOptions::default()).map(drop))?;
        Ok(self.record(op, format!("{batch}x{seq} tokens"), ms, batch * seq))
    }

    /// Mean-pooled, normalised embeddings read back to the CPU (per second: sentences).
    fn embeddings(&self, model: &AutoModel, batch: usize, seq: usize) -> Result<BenchRecord> {
        let inputs = IdsBatch {
            input_ids: ids(batch * seq, model.sizes().vocab_size),
            attention_mask: Some(vec![1u32; batch * seq]),
            batch,
            seq,
            ..IdsBatch::default()
        };
        let ms = time_ms(self.gpu, self.budget_ms, || pollster::block_on(sentence_embeddings(&**model, &inputs, Pooling::Mean, true)).map(drop))?;
        Ok(self.record("minilm_embeddings", format!("{batch} sentences x {seq} tokens"), ms, batch))
    }

    /// Prefill of a `prompt`-token prompt, then `decode_tokens` greedy steps, each one token
    /// through the KV cache and its argmax read back (what generation waits for per token).
    fn gpt2_generation(&self, prompt: usize) -> Result<[BenchRecord; 3]> {
        let model = gpt2::load(GPT2_124M.as_bytes(), &self.weights())?;
        let prompt_ids = ids(prompt, model.config.vocab_size);
        let capacity = prompt + self.decode_tokens + 1;
        let prefill_ms = time_ms(self.gpu, self.budget_ms, || greedy_step(&model, &prompt_ids, &mut model.new_cache(1, capacity)?).map(drop))?;

        let mut cache = model.new_cache(1, capacity)?;
        let mut token = greedy_step(&model, &prompt_ids, &mut cache)?;
        let start = Instant::now();
        for _ in 0..self.decode_tokens {
            token = greedy_step(&model, &[token], &mut cache)?;
        }
        let decode_ms = start.elapsed().as_secs_f64() * 1e3 / self.decode_tokens.max(1) as f64;
        Ok([
            self.record("gpt2_prefill", format!("124M, prompt {prompt} tokens"), prefill_ms, prompt),
            self.record("gpt2_decode", format!("124M, per token after {prompt}, {} tokens", self.decode_tokens), decode_ms, 1),
            self.gpt2_generate(&model, &prompt_ids)?,
        ])
    }

    /// The same decode through the library's `generate`, which users call: beside the model's
    /// step it builds each step's mask and positions and checks the logits are finite.
    fn gpt2_generate(&self, model: &Gpt2Model, prompt_ids: &[u32]) -> Result<BenchRecord> {
        // An end-of-text id outside the vocabulary, so random weights cannot stop it early.
        let cfg = GenerationConfig { max_new_tokens: self.decode_tokens + 1, eos_token_id: Some(u32::MAX), ..Default::default() };
        let mut token_times = Vec::with_capacity(cfg.max_new_tokens);
        pollster::block_on(generate(model, &[prompt_ids.to_vec()], &cfg, |_, _| {
            token_times.push(Instant::now());
            ControlFlow::Continue(())
        }))?;
        let (first, last) = (token_times[0], token_times[token_times.len() - 1]);
        let decode_ms = (last - first).as_secs_f64() * 1e3 / self.decode_tokens.max(1) as f64;
        let shape = format!("124M, per token after {}, {} tokens, through generate()", prompt_ids.len(), self.decode_tokens);
        Ok(self.record("gpt2_generate_decode", shape, decode_ms, 1))
    }

    /// Runs the benchmarks (those named like `only`), handing each record to `emit` as soon
    /// as it is measured.
    pub fn run(&self, mut emit: impl FnMut(BenchRecord)) -> Result<()> {
        let wanted = |op: &str| self.only.as_deref().is_none_or(|only| op.contains(only));
        for (op, config) in [("bert_base_forward", BERT_BASE), ("distilbert_base_forward", DISTILBERT_BASE), ("albert_base_forward", ALBERT_BASE)] {
            if wanted(op) {
                let model = self.model(config)?;
                emit(self.forward(op, &model, 1, 128)?);
                emit(self.forward(op, &model, 8, 128)?);
            }
        }
        if wanted("minilm_embeddings") {
            let model = self.model(MINILM_L6)?;
            emit(self.embeddings(&model, 1, 128)?);
            emit(self.embeddings(&model, 32, 128)?);
        }
        if wanted("gpt2") {
            for record in self.gpt2_generation(128)? {
                emit(record);
            }
        }
        Ok(())
    }
}
