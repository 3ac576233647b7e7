//! `sesame generate`: continues a prompt with a GPT-2 / GPT language model, streaming the
//! text as tokens arrive, or printing `{"ids", "text", "new_tokens"}` with `--json` (ids and
//! text include the prompt, as transformers' `generate` and `text-generation` return them).
//! Ctrl-C stops it after the token being made, and what was made is printed as at the end; a
//! second Ctrl-C ends the process at once.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use sesame::error::Result;
use sesame::generate::{generate_text, GenerationConfig};
use sesame::models::Capability;
use sesame::Device;

use super::print_json;

#[derive(clap::Args)]
pub struct GenerateArgs {
    /// A GPT-2 or GPT model folder (or hub id) with a language-model head.
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    prompt: String,
    /// At most 100000.
    #[arg(long, default_value_t = 20)]
    max_new_tokens: usize,
    /// 0: greedy decoding; above 0: sample from softmax(logits / temperature).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Sample among the k most likely tokens only (0: all; at most 256).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample among the most likely tokens covering this probability mass.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Seed of the sampler, for reproducible samples.
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object at the end instead of streaming text.
    #[arg(long)]
    json: bool,
    /// Cut the start of a prompt longer than the model's positions (it is then continued from
    /// its last positions) instead of failing.
    #[arg(long)]
    truncate: bool,
}

/// Set by the first Ctrl-C.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn run(gpu: &Device, args: GenerateArgs) -> Result<()> {
    if let Err(e) = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    }) {
        eprintln!("generate: Ctrl-C will end the process without printing what was made ({e})");
    }
    let loaded = super::load_model(gpu, &super::model_dir(&args.model)?, false)?;
    let (prompt, cut) = loaded.encode_prompt("generate", &args.prompt, args.truncate)?;
    if cut > 0 {
        eprintln!("generate: the prompt's first {cut} tokens were cut, to fit the model's {} positions", prompt.len());
    }
    let config = GenerationConfig {
        max_new_tokens: args.max_new_tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        eos_token_id: None,
    };
    let model = loaded.model.causal_lm(Capability::Generation, "generate")?;
    let tokenizer = loaded.tokenizer()?;
    if !args.json {
        print!("{}", tokenizer.decode(&prompt, true)?);
    }
    eprintln!("generate: up to {} tokens (Ctrl-C stops and keeps what was made)", config.max_new_tokens);
    let generated = pollster::block_on(generate_text(model, tokenizer, &prompt, &config, |piece, _| {
        if !args.json {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }))?;
    if INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!("generate: stopped by Ctrl-C after {} new tokens", generated.new_tokens);
    }
    if args.json {
        print_json(&generated)
    } else {
        println!();
        Ok(())
    }
}
