//! The `sesame` command line: adapter info, model commands (forward, generate, embed,
//! tokenize, fill-mask, perplexity) and benchmarks, one file each (the library does the
//! work; these parse files and flags and print results).

pub mod bench;
pub mod convert_cove;
pub mod convert_elmo;
pub mod convert_ulmfit;
pub mod distill;
pub mod embed;
pub mod fill_mask;
pub mod forward;
pub mod generate;
pub mod info;
pub mod perplexity;
pub mod quantize;
pub mod tokenize;
pub mod train;
pub mod translate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sesame::error::{Result, SesameError};
pub use sesame::models::auto::{non_empty, LoadedModel};
use sesame::quantize::WeightDtype;
use sesame::{Device, DeviceOptions, KernelVariant};

#[derive(Parser)]
#[command(name = "sesame", version, about = "ELMo / GPT / BERT on the GPU through WebGPU")]
struct Cli {
    /// Use the first adapter whose name contains this (e.g. "llvmpipe", "NVIDIA"), or `host`
    /// for the host device (the kernels' Rust twins on the CPU). Default: the best GPU
    /// adapter, or the host device where there is none or the best is a CPU rasterizer
    /// (llvmpipe, SwiftShader); `sesame info` says which and why.
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// The threads of the host device's kernels (default: every core). Runs side by side
    /// each want fewer.
    #[arg(long, global = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Force a kernel variant instead of choosing from the adapter: tiled | blocked.
    #[arg(long, global = true)]
    kernels: Option<KernelVariant>,
    /// The most host memory one allocation (or all host-device tensors) may take, in bytes or
    /// with a K/M/G/T suffix (default: SESAME_MEMORY_BUDGET, else the machine's memory).
    /// Requests over it (a huge --seq-len, a config's sizes) are errors naming what asked.
    #[arg(long, global = true, value_parser = parse_budget)]
    memory_budget: Option<u64>,
    /// Load checkpoints that hold NaN or infinite weights (refused by default), to inspect
    /// them; non-finite outputs are still an error naming the layer they come from.
    #[arg(long, global = true)]
    allow_non_finite_weights: bool,
    /// The precision models' weight matrices load in: fp32, f16, q8 (int8 in blocks of 32)
    /// or q4 (4-bit blocks of 32); default: as the folder stores them. Layer norms and
    /// biases stay f32; only inference runs quantized (train and distill need fp32).
    #[arg(long, global = true)]
    dtype: Option<WeightDtype>,
    /// The branch, tag or commit of a --model given as a Hugging Face hub id (`org/name`).
    #[arg(long, global = true, default_value = "main")]
    revision: String,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of `train`'s many flags is not worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Print the adapter (name, backend, device type, kernel variant, key limits, features),
    /// or with --model a model folder's family, architecture, tasks, parameters and memory.
    Info(info::InfoArgs),
    /// One forward pass; writes every output (logits, hidden states, …) to a safetensors file.
    Forward(forward::ForwardArgs),
    /// Continue a prompt with GPT-2 / GPT (greedy, or sampled with a seed); streams the text.
    Generate(generate::GenerateArgs),
    /// Sentence embeddings from a BERT encoder (mean or CLS pooling).
    Embed(embed::EmbedArgs),
    /// Token ids of texts, with the model's special tokens (needs only the tokenizer files).
    Tokenize(tokenize::TokenizeArgs),
    /// The most likely tokens for each [MASK] of a text (BERT masked-LM head).
    FillMask(fill_mask::FillMaskArgs),
    /// Perplexity of a text under GPT-2 / GPT (sliding windows for long texts).
    Perplexity(perplexity::PerplexityArgs),
    /// Greedy translations by a CoVe translation model that `train --objective translation` wrote.
    Translate(translate::TranslateArgs),
    /// Write a model folder with its weight matrices in f16, q8 or q4 (--dtype), which every
    /// command and the npm package load as they are.
    Quantize(quantize::QuantizeArgs),
    /// Convert an original ELMo release (options.json + weights.hdf5) to an ELMo folder.
    ConvertElmo(convert_elmo::ConvertElmoArgs),
    /// Convert a fastai AWD-LSTM language model (ULMFiT; its state dict as safetensors and its
    /// vocabulary) to an AWD-LSTM folder.
    ConvertUlmfit(convert_ulmfit::ConvertUlmfitArgs),
    /// Convert the released CoVe MT-LSTM (its state dict as safetensors), a vocabulary and
    /// GloVe's vectors to a CoVe folder.
    ConvertCove(convert_cove::ConvertCoveArgs),
    /// Train GPT-2, GPT, the BERT family (BERT, RoBERTa, DistilBERT, ALBERT, ERNIE, ELECTRA), ELMo, AWD-LSTM / ULMFiT, CVT or CoVe (pretraining objectives, classification, token classification, question answering, cross-view training, translation), fresh or from a checkpoint, and write checkpoints in the Hugging Face layout (ELMo's in AllenNLP's).
    Train(train::TrainArgs),
    /// Distill a teacher into a student (BERT family by masked LM, GPT-2 and GPT by causal LM): the soft-target, hard and cosine losses, with every flag of train (data, replayed batches, log, checkpoints, --resume).
    Distill(distill::DistillArgs),
    /// Benchmarks; prints one JSON object per line.
    Bench {
        #[command(subcommand)]
        what: bench::BenchTarget,
    },
}

fn parse_budget(text: &str) -> std::result::Result<u64, String> {
    sesame::limits::parse_bytes(text).map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<()> {
    if let Some(bytes) = cli.memory_budget {
        sesame::limits::set_host_memory_budget(bytes);
    }
    sesame::weights::allow_non_finite_weights(cli.allow_non_finite_weights);
    let _ = REVISION.set(cli.revision);
    if let (Some(dtype), Command::Train(_) | Command::Distill(_)) = (cli.dtype, &cli.command) {
        if dtype != WeightDtype::Fp32 {
            return Err(SesameError::InvalidArgument { op: "--dtype", message: format!("{}: training needs fp32 weights", dtype.name()) });
        }
    }
    let _ = DTYPE.set(cli.dtype);
    let threads = cli.threads.map(|n| n as usize);
    let (adapter, kernels) = (cli.adapter, cli.kernels);
    let picked = || pick_device(adapter.clone(), kernels, threads);
    let gpu = || picked().map(|(device, _)| device);
    match cli.command {
        Command::Info(args) => {
            let (device, why) = picked()?;
            info::run(&device, &why, args)
        }
        Command::Forward(args) => forward::run(&gpu()?, args),
        Command::Generate(args) => generate::run(&gpu()?, args),
        Command::Embed(args) => embed::run(&gpu()?, args),
        // Tokenizing needs no GPU.
        Command::Tokenize(args) => tokenize::run(&args),
        Command::FillMask(args) => fill_mask::run(&gpu()?, args),
        Command::Translate(args) => translate::run(&gpu()?, args),
        Command::Perplexity(args) => perplexity::run(&gpu()?, args),
        Command::Bench { what } => bench::run(&gpu()?, what, cli.dtype),
        Command::Train(args) => train::run(&gpu()?, args),
        Command::Distill(args) => distill::run(&gpu()?, args),
        // Converting needs no GPU; quantizing runs on the host device.
        Command::ConvertElmo(args) => convert_elmo::run(args),
        Command::ConvertUlmfit(args) => convert_ulmfit::run(args),
        Command::ConvertCove(args) => convert_cove::run(args),
        Command::Quantize(args) => quantize::run(&args, cli.dtype),
    }
}

/// The device a command runs on (`--adapter`, `--threads`, `--kernels`), and why it was picked.
fn pick_device(adapter: Option<String>, kernels: Option<KernelVariant>, threads: Option<usize>) -> Result<(Device, String)> {
    let (device, why) = match adapter.as_deref() {
        Some("host") => {
            let device = match threads {
                Some(threads) => Device::host_with_threads(threads)?,
                None => Device::host(),
            };
            return Ok((device, "--adapter host".into()));
        }
        Some(name) => (pollster::block_on(Device::new(DeviceOptions { adapter_name: adapter.clone(), kernels }))?, format!("--adapter {name}")),
        None => {
            let (device, why) = pollster::block_on(Device::auto(kernels, threads))?;
            (device, format!("{why} (--adapter NAME picks one by name)"))
        }
    };
    if threads.is_some() && device.host_threads().is_none() {
        let message =
            format!("it sets the host device's threads, and the device picked is the adapter {} ({why}): add --adapter host", device.adapter_info().name);
        return Err(SesameError::InvalidArgument { op: "--threads", message });
    }
    Ok((device, why))
}

/// The library's notes (its `log` records: a vocabulary being counted, a setting ignored),
/// printed on stderr as they come; other crates' records are left out.
struct Notes;

impl log::Log for Notes {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target().starts_with("sesame") && metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            match record.level() {
                log::Level::Info => eprintln!("{}", record.args()),
                level => eprintln!("{}: {}", level.as_str().to_lowercase(), record.args()),
            }
        }
    }

    fn flush(&self) {}
}

/// Turns off Mesa's device-select Vulkan layer where there is no display session for it to
/// ask (no XDG_RUNTIME_DIR) and no one asked it to pick (MESA_VK_DEVICE_SELECT): it would
/// try to reach a Wayland display to find the default GPU, and libwayland prints
/// "XDG_RUNTIME_DIR is invalid or not set" twice for every command.
fn quiet_device_select() {
    let unset = |name: &str| std::env::var_os(name).is_none();
    if unset("XDG_RUNTIME_DIR") && unset("MESA_VK_DEVICE_SELECT") && unset("NODEVICE_SELECT") {
        // At the start of main, before any thread exists that could read the environment.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

/// Parses the command line, runs the command, and reports an error on stderr.
pub fn main() -> ExitCode {
    quiet_device_select();
    if log::set_logger(&Notes).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    let args = match train::config::expand(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(Cli::parse_from(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

pub use sesame::files::{io_err, read_file as read_bytes, read_text, write_atomic};

/// An error for `op` when `path` is a PyTorch pickle: the converters read safetensors (their
/// `--help` shows the two lines of torch that save a state dict as one).
pub fn refuse_pickle(op: &'static str, path: &std::path::Path) -> Result<()> {
    match path.extension().is_some_and(|e| e == "pth" || e == "pt" || e == "pkl") {
        true => Err(SesameError::InvalidArgument {
            op,
            message: format!("{} is a PyTorch pickle: save it as safetensors first (see --help for the two lines of torch)", path.display()),
        }),
        false => Ok(()),
    }
}

/// The `--revision` of a hub id.
static REVISION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// `--dtype`, for [`load_model`].
static DTYPE: std::sync::OnceLock<Option<WeightDtype>> = std::sync::OnceLock::new();

/// Loads the model folder `dir` with its weight matrices in `--dtype`.
pub fn load_model(gpu: &Device, dir: &std::path::Path, truncate: bool) -> Result<LoadedModel> {
    LoadedModel::load_as(gpu, dir, truncate, DTYPE.get().copied().flatten())
}

/// A `--model` as a folder: itself when it exists or is no hub id, else the hub model's
/// snapshot folder in the Hugging Face cache, downloaded as needed (sesame::hub: endpoint
/// `HF_ENDPOINT`, token `HF_TOKEN`, `HF_HUB_OFFLINE=1` for the cache alone).
pub fn model_dir(model: &std::path::Path) -> Result<std::path::PathBuf> {
    hub_or_folder(model, sesame::hub::Hub::model_folder)
}

/// As [`model_dir`], for commands that read only the tokenizer: a hub model's weights are not downloaded.
pub fn tokenizer_dir(model: &std::path::Path) -> Result<std::path::PathBuf> {
    hub_or_folder(model, sesame::hub::Hub::tokenizer_folder)
}

fn hub_or_folder(model: &std::path::Path, snapshot: fn(&sesame::hub::Hub, &str, &str) -> Result<std::path::PathBuf>) -> Result<std::path::PathBuf> {
    match model.to_str() {
        Some(id) if !model.exists() && sesame::hub::is_hub_id(id) => snapshot(&sesame::hub::Hub::from_env(), id, REVISION.get().map_or("main", String::as_str)),
        _ => Ok(model.to_path_buf()),
    }
}

/// One line of JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let line = serde_json::to_string(value).map_err(|e| SesameError::Io(format!("writing JSON: {e}")))?;
    println!("{line}");
    Ok(())
}
