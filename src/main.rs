//! The `sesame` command line: adapter info, forward passes and kernel benchmarks (more
//! commands arrive with the models and the trainer).

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sesame::bench::KernelBench;
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
    Forward {
        /// A model folder: config.json, model.safetensors, tokenizer files.
        #[arg(long)]
        model: PathBuf,
        /// Text to tokenize (with the model's special tokens).
        #[arg(long, conflicts_with = "ids")]
        text: Option<String>,
        /// A second segment (BERT's sentence B).
        #[arg(long, requires = "text")]
        pair: Option<String>,
        /// Token ids as a tokenizer returns them: {"input_ids": [[…]], "attention_mask": [[…]], "token_type_ids": [[…]]}.
        #[arg(long)]
        ids: Option<PathBuf>,
        /// Where to write the outputs (.safetensors).
        #[arg(long)]
        out: PathBuf,
        /// Also write hidden_states.{i} (0 = the embedding output).
        #[arg(long)]
        hidden_states: bool,
        /// Also write attentions.{i} ([batch, heads, seq, seq]).
        #[arg(long)]
        attentions: bool,
    },
    /// Benchmarks; prints one JSON object per line.
    Bench {
        #[command(subcommand)]
        what: BenchTarget,
    },
}

#[derive(Subcommand)]
enum BenchTarget {
    /// Matmul (square and model-shaped), attention, and an LSTM step.
    Kernels {
        /// Square matmul sizes.
        #[arg(long, value_delimiter = ',', default_values_t = [256, 512, 1024, 2048])]
        sizes: Vec<usize>,
        /// Approximate time spent timing each benchmark, in milliseconds.
        #[arg(long, default_value_t = 1000.0)]
        budget_ms: f64,
        /// Run only the benchmarks whose op contains this (dispatch, matmul, attention, lstm).
        #[arg(long)]
        only: Option<String>,
    },
}

fn run(cli: Cli) -> Result<()> {
    let gpu = pollster::block_on(Gpu::new(GpuOptions { adapter_name: cli.adapter, kernels: cli.kernels }))?;
    match cli.command {
        Command::Info { json } => {
            let report = AdapterReport::of(&gpu);
            println!("{}", if json { report.to_json() } else { report.to_text() });
        }
        Command::Forward { model, text, pair, ids, out, hidden_states, attentions } => {
            let options = sesame::models::bert::ForwardOptions { hidden_states, attentions, last_position_only: false };
            cli::forward::run(&gpu, cli::forward::ForwardArgs { model, text, pair, ids, out, options })?;
        }
        Command::Bench { what: BenchTarget::Kernels { sizes, budget_ms, only } } => {
            let bench = KernelBench { gpu: &gpu, variant: gpu.kernel_variant(), budget_ms, square_sizes: sizes, only };
            bench.run(|record| println!("{}", serde_json::to_string(&record).unwrap_or_default()))?;
        }
    }
    Ok(())
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
