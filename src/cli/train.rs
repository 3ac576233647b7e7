//! `sesame train`: trains a model from an initial checkpoint and writes Hugging Face-layout
//! checkpoints (config.json, model.safetensors, tokenizer.json) plus the optimizer state.
//!
//! This first version trains GPT-2 with the causal-LM objective (`--objective clm`) on a
//! text file tokenized by the model's tokenizer, or on exact batches replayed from a
//! safetensors file (`--replay-batches`) to compare a run step by step with PyTorch.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sesame::error::{Result, SesameError};
use sesame::models::config::Gpt2Config;
use sesame::models::gpt2::Gpt2Model;
use sesame::tokenize::TextTokenizer;
use sesame::train::data::{Batch, ReplayBatches, TokenStream};
use sesame::train::optim::{AdamWConfig, Decay, Optimizer, Schedule};
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};
use sesame::Gpu;

use super::{io_err, read_bytes, read_text, write_atomic};

/// A bad-argument error of `sesame train`.
macro_rules! train_err {
    ($($t:tt)*) => { SesameError::InvalidArgument { op: "train", message: format!($($t)*) } };
}

#[derive(clap::Args)]
pub struct TrainArgs {
    /// The training objective; this version implements `clm` (causal LM, GPT-2).
    #[arg(long, default_value = "clm")]
    objective: String,
    /// The checkpoint to start from: a Hugging Face-layout folder (config.json,
    /// model.safetensors, tokenizer.json).
    #[arg(long)]
    model_init: PathBuf,
    /// A text file, tokenized with the model's tokenizer and sampled in windows.
    #[arg(long, required_unless_present = "replay_batches")]
    data: Option<PathBuf>,
    /// Exact batches, one per step: input_ids / attention_mask / labels [steps, batch, seq].
    #[arg(long, conflicts_with = "data")]
    replay_batches: Option<PathBuf>,
    /// Optimizer steps (default: every replayed batch, else 1000).
    #[arg(long)]
    steps: Option<u64>,
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Tokens per sequence (default: the model's positions, at most 128).
    #[arg(long)]
    seq_len: Option<usize>,
    #[arg(long, default_value_t = 1e-3)]
    lr: f32,
    /// Steps of linear warmup.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// constant, linear or cosine decay after the warmup.
    #[arg(long, default_value = "cosine")]
    schedule: Decay,
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f32,
    #[arg(long, default_value_t = 0.9)]
    beta1: f32,
    #[arg(long, default_value_t = 0.999)]
    beta2: f32,
    #[arg(long, default_value_t = 1e-8)]
    eps: f32,
    /// Clip the global gradient norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0)]
    clip_grad_norm: f32,
    /// Seeds the batch sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write a checkpoint every this many steps (and always at the end); 0: only at the end.
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// Where checkpoints go.
    #[arg(long)]
    out: PathBuf,
    /// One JSON line per step: {"step", "loss", "lr", "grad_norm", "tokens_per_s"}.
    #[arg(long)]
    log: Option<PathBuf>,
}

enum Source {
    Replay(ReplayBatches),
    Stream(TokenStream),
}

pub fn run(gpu: &Gpu, args: TrainArgs) -> Result<()> {
    if args.objective != "clm" {
        return Err(train_err!("objective `{}` is not implemented yet; this version trains `clm` (GPT-2)", args.objective));
    }
    let read = |name: &str| read_bytes(&args.model_init.join(name));
    let config_json = read("config.json")?;
    let config = Gpt2Config::from_json(&config_json)?;
    let checkpoint = Checkpoint::from_bytes(read("model.safetensors")?)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = Gpt2Model::load(config.clone(), &weights)?;
    let params = Parameters::new(weights.loaded())?;
    let tokenizer_json = read("tokenizer.json").ok();

    let seq = args.seq_len.unwrap_or(config.n_positions.min(128));
    let mut source = match (&args.replay_batches, &args.data) {
        (Some(path), _) => Source::Replay(ReplayBatches::from_bytes(&read_bytes(path)?)?),
        (None, Some(path)) => {
            let json = tokenizer_json.as_deref().ok_or_else(|| train_err!("{} has no tokenizer.json to tokenize --data", args.model_init.display()))?;
            let text = read_text(path)?;
            if text.trim().is_empty() {
                return Err(train_err!("{} holds no text", path.display()));
            }
            let tokens = TextTokenizer::from_bytes(json)?.encode(&text, false)?;
            Source::Stream(TokenStream::new(tokens, args.seed, seq)?)
        }
        (None, None) => return Err(train_err!("give --data or --replay-batches")),
    };
    let steps = match (&source, args.steps) {
        (Source::Replay(r), Some(s)) if s as usize > r.steps => return Err(train_err!("{s} steps asked for, but the replay file holds {}", r.steps)),
        (Source::Replay(r), None) => r.steps as u64,
        (_, s) => s.unwrap_or(1000),
    };
    let schedule = Schedule { lr: args.lr, warmup: args.warmup, decay: args.schedule, total_steps: steps };
    let adamw = AdamWConfig { beta1: args.beta1, beta2: args.beta2, eps: args.eps, weight_decay: args.weight_decay, clip_grad_norm: args.clip_grad_norm };
    let mut optimizer = Optimizer::new(gpu, adamw, &params)?;
    std::fs::create_dir_all(&args.out).map_err(io_err(&args.out))?;
    let mut log = match &args.log {
        Some(path) => Some(std::fs::File::create(path).map_err(io_err(path))?),
        None => None,
    };
    eprintln!("training {} parameters for {steps} steps", params.numel());
    let grads = params.gradients();
    let started = Instant::now();
    for step in 0..steps {
        let step_started = Instant::now();
        let batch: Batch = match &mut source {
            Source::Replay(r) => r.batch(step as usize)?,
            Source::Stream(s) => s.sample(args.batch_size, seq),
        };
        let lr = schedule.lr_at(step);
        params.zero_grads();
        let loss = model.lm_loss_backward(&batch.lm(), &grads, 1.0)?;
        optimizer.step(&params, lr)?;
        let loss = pollster::block_on(loss.to_vec::<f32>())?[0];
        let grad_norm = pollster::block_on(optimizer.norm_scale.to_vec::<f32>())?[0];
        if !loss.is_finite() {
            return Err(train_err!("the loss became {loss} at step {step}; the last checkpoint in {} is kept", args.out.display()));
        }
        let tokens_per_s = (batch.batch * batch.seq) as f64 / step_started.elapsed().as_secs_f64();
        if let Some(file) = &mut log {
            let line = serde_json::json!({ "step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, "tokens_per_s": tokens_per_s });
            writeln!(file, "{line}").map_err(|e| SesameError::Io(format!("log: {e}")))?;
        }
        if step % 10 == 0 || step + 1 == steps {
            let elapsed = started.elapsed().as_secs_f64();
            let eta = elapsed / (step + 1) as f64 * (steps - step - 1) as f64;
            eprintln!("step {}/{steps}  loss {loss:.4}  lr {lr:.2e}  {tokens_per_s:.0} tokens/s  ETA {eta:.0} s", step + 1);
        }
        if (args.checkpoint_every > 0 && (step + 1) % args.checkpoint_every == 0) || step + 1 == steps {
            save_checkpoint(&args.out, &params, &optimizer, &schedule, &config_json, tokenizer_json.as_deref())?;
        }
    }
    Ok(())
}

/// Writes the model (HF layout) and the optimizer state, each file atomically.
fn save_checkpoint(out: &Path, params: &Parameters, optimizer: &Optimizer, schedule: &Schedule, config_json: &[u8], tokenizer_json: Option<&[u8]>) -> Result<()> {
    write_atomic(&out.join("model.safetensors"), &pollster::block_on(params.to_safetensors(Part::Value))?)?;
    write_atomic(&out.join("optimizer.exp_avg.safetensors"), &pollster::block_on(params.to_safetensors(Part::FirstMoment))?)?;
    write_atomic(&out.join("optimizer.exp_avg_sq.safetensors"), &pollster::block_on(params.to_safetensors(Part::SecondMoment))?)?;
    let state = serde_json::json!({ "step": optimizer.steps, "adamw": optimizer.config, "schedule": schedule });
    write_atomic(&out.join("trainer_state.json"), state.to_string().as_bytes())?;
    write_atomic(&out.join("config.json"), config_json)?;
    if let Some(json) = tokenizer_json {
        write_atomic(&out.join("tokenizer.json"), json)?;
    }
    Ok(())
}
