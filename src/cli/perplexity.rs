//! `sesame perplexity`: perplexity of a text under a GPT-2 / GPT language model
//! (`--json`: {"perplexity", "mean_nll", "scored_tokens", "windows"}).

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::perplexity::{text_perplexity, PerplexityOptions};
use sesame::Device;

use super::{print_json, read_text};

#[derive(clap::Args)]
pub struct PerplexityArgs {
    /// A GPT-2 or GPT folder (or hub id) with a language-model head.
    #[arg(long)]
    model: PathBuf,
    /// The text to score.
    #[arg(long, required_unless_present = "file", conflicts_with = "file")]
    text: Option<String>,
    /// A file scored as one text.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Tokens per forward pass (default: the model's positions, capped by the device).
    #[arg(long)]
    window: Option<usize>,
    /// Tokens between window starts (default: half the window).
    #[arg(long)]
    stride: Option<usize>,
    #[arg(long)]
    json: bool,
}

pub fn run(gpu: &Device, args: PerplexityArgs) -> Result<()> {
    let text = match (&args.text, &args.file) {
        (Some(text), _) => text.clone(),
        (None, Some(path)) => read_text(path)?,
        (None, None) => return Err(SesameError::InvalidArgument { op: "perplexity", message: "give --text or --file".into() }),
    };
    let loaded = super::load_model(gpu, &super::model_dir(&args.model)?, false)?;
    let options = PerplexityOptions { window: args.window, stride: args.stride };
    let result = pollster::block_on(text_perplexity(&loaded, &text, options))?;
    if args.json {
        return print_json(&result);
    }
    println!("perplexity {:.4} (mean NLL {:.4} nats over {} tokens, {} windows)", result.perplexity, result.mean_nll, result.scored_tokens, result.windows);
    Ok(())
}
