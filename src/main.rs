//! The `sesame` command line: adapter info, model commands (forward, generate, embed,
//! tokenize, fill-mask, perplexity) and benchmarks.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sesame::info::AdapterReport;
use sesame::{Gpu, GpuOptions, KernelVariant, Result};

#[derive(Parser)]
#[command(name = "sesame", version, about = "ELMo / GPT / BERT on the GPU through WebGPU")]
struct Cli {
    /// Use the first adapter whose name contains this (e.g. "llvmpipe", "NVIDIA").
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// Force a kernel variant instead of choosing from the adapter: tiled | blocked.
    #[arg(long, global = true)]
    kernels: Option<KernelVariant>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the adapter: name, backend, device type, kernel variant, key limits, features.
    Info {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One forward pass; writes every output (logits, hidden states, …) to a safetensors file.
    Forward(cli::forward::ForwardArgs),
    /// Continue a prompt with GPT-2 / GPT (greedy, or sampled with a seed); streams the text.
    Generate(cli::generate::GenerateArgs),
    /// Sentence embeddings from a BERT encoder (mean or CLS pooling).
    Embed(cli::embed::EmbedArgs),
    /// Token ids of texts, with the model's special tokens (needs only the tokenizer files).
    Tokenize(cli::tokenize::TokenizeArgs),
    /// The most likely tokens for each [MASK] of a text (BERT masked-LM head).
    FillMask(cli::fill_mask::FillMaskArgs),
    /// Perplexity of a text under GPT-2 / GPT (sliding windows for long texts).
    Perplexity(cli::perplexity::PerplexityArgs),
    /// Benchmarks; prints one JSON object per line.
    Bench {
        #[command(subcommand)]
        what: cli::bench::BenchTarget,
    },
}

fn run(cli: Cli) -> Result<()> {
    let options = GpuOptions { adapter_name: cli.adapter, kernels: cli.kernels };
    let gpu = || pollster::block_on(Gpu::new(options.clone()));
    match cli.command {
        Command::Info { json } => {
            let report = AdapterReport::of(&gpu()?);
            println!("{}", if json { report.to_json() } else { report.to_text() });
            Ok(())
        }
        Command::Forward(args) => cli::forward::run(&gpu()?, args),
        Command::Generate(args) => cli::generate::run(&gpu()?, args),
        Command::Embed(args) => cli::embed::run(&gpu()?, args),
        // Tokenizing needs no GPU.
        Command::Tokenize(args) => cli::tokenize::run(&args),
        Command::FillMask(args) => cli::fill_mask::run(&gpu()?, args),
        Command::Perplexity(args) => cli::perplexity::run(&gpu()?, args),
        Command::Bench { what } => cli::bench::run(&gpu()?, what),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
