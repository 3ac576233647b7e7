//! `sesame bench kernels | models | elmo | train`: one JSON object per measurement on stdout.

mod elmo;
mod kernels;
mod models;
mod peak;
mod record;
mod train;

use elmo::ElmoBench;
use kernels::KernelBench;
use models::ModelBench;
use record::BenchRecord;
use sesame::error::Result;
use sesame::models::training::fresh::FreshShape;
use sesame::quantize::WeightDtype;
use sesame::Device;
use train::TrainBench;

use super::print_json;

#[derive(clap::Subcommand)]
pub enum BenchTarget {
    /// Matmul (square and model-shaped), attention, an LSTM step, and on the host device the
    /// CPU's arithmetic peaks.
    Kernels {
        /// Square matmul sizes.
        #[arg(long, value_delimiter = ',', default_values_t = [256, 512, 1024, 2048])]
        sizes: Vec<usize>,
        /// Approximate time spent timing each benchmark, in milliseconds.
        #[arg(long, default_value_t = 1000.0)]
        budget_ms: f64,
        /// Run only the benchmarks whose op contains this (peak: the host CPU's arithmetic peaks;
        /// dispatch, matmul, matmul_q8, matmul_q4, attention, lstm).
        #[arg(long)]
        only: Option<String>,
    },
    /// Whole models with random weights: BERT-base forward (1x128, 8x128), MiniLM sentence
    /// embeddings (1 and 32 sentences of 128 tokens), GPT-2 124M prefill and decode.
    Models {
        /// Approximate time spent timing each benchmark, in milliseconds.
        #[arg(long, default_value_t = 2000.0)]
        budget_ms: f64,
        /// Run only the benchmarks whose op contains this (bert_base_forward, minilm_embeddings, gpt2).
        #[arg(long)]
        only: Option<String>,
        /// Tokens generated when timing GPT-2 decoding.
        #[arg(long, default_value_t = 32)]
        decode_tokens: usize,
    },
    /// ELMo with random weights at the original release's shape (4096 cells, 512 projection,
    /// 2048 filters) and the small one (1024, 128): 20-word sentences, batch 1 and 32;
    /// per_second counts words.
    Elmo {
        /// Approximate time spent timing each benchmark, in milliseconds.
        #[arg(long, default_value_t = 2000.0)]
        budget_ms: f64,
        /// Run only the shapes whose name contains this (elmo_original, elmo_small).
        #[arg(long)]
        only: Option<String>,
    },
    /// GPT-2 training steps (forward, backward, AdamW, loss read back) with random weights,
    /// GPT-2 124M's shape by default; per_second counts tokens. scripts/bench-train-pytorch.py
    /// times PyTorch on the same shape.
    Train {
        #[arg(long, default_value_t = 12)]
        layers: usize,
        #[arg(long, default_value_t = 12)]
        heads: usize,
        #[arg(long, default_value_t = 768)]
        hidden: usize,
        /// Positions, and the length of every sequence.
        #[arg(long, default_value_t = 1024)]
        context: usize,
        #[arg(long, default_value_t = 50257)]
        vocab: usize,
        #[arg(long, default_value_t = 8)]
        batch_size: usize,
        /// Timed steps (after one untimed).
        #[arg(long, default_value_t = 10)]
        steps: usize,
    },
}

pub fn run(gpu: &Device, target: BenchTarget, dtype: Option<WeightDtype>) -> Result<()> {
    let mut emit = |record: BenchRecord| {
        // A record that cannot be printed is not worth aborting the remaining benchmarks.
        let _ = print_json(&record);
    };
    match target {
        BenchTarget::Kernels { sizes, budget_ms, only } => {
            KernelBench { gpu, variant: gpu.kernel_variant(), budget_ms, square_sizes: sizes, only }.run(&mut emit)
        }
        BenchTarget::Models { budget_ms, only, decode_tokens } => ModelBench { gpu, budget_ms, only, decode_tokens, dtype }.run(&mut emit),
        BenchTarget::Elmo { budget_ms, only } => ElmoBench { gpu, budget_ms, only }.run(&mut emit),
        BenchTarget::Train { layers, heads, hidden, context, vocab, batch_size, steps } => {
            let shape = FreshShape { layers, heads, width: hidden, context };
            TrainBench { gpu, shape, vocab, batch: batch_size, steps }.run(&mut emit)
        }
    }
}
