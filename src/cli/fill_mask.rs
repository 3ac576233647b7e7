//! `sesame fill-mask`: candidates for each mask token of a text, as transformers' fill-mask
//! pipeline returns them (`--json`: a list of {score, token, token_str, sequence}; a list of
//! such lists when the text has several masks).

use std::path::PathBuf;

use sesame::error::Result;
use sesame::fill_mask::fill_mask;
use sesame::Device;

use super::print_json;

#[derive(clap::Args)]
pub struct FillMaskArgs {
    /// A model folder or hub id with a masked-LM head (BERT, RoBERTa, ALBERT, … ForMaskedLM or ForPreTraining).
    #[arg(long)]
    model: PathBuf,
    /// Text with one or more [MASK] tokens.
    #[arg(long)]
    text: String,
    /// Candidates per mask.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Cut a text longer than the model's positions instead of failing.
    #[arg(long)]
    truncate: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(gpu: &Device, args: FillMaskArgs) -> Result<()> {
    let loaded = super::load_model(gpu, &super::model_dir(&args.model)?, args.truncate)?;
    let masks = pollster::block_on(fill_mask(&loaded, &args.text, args.top_k))?;
    if args.json {
        return match masks.as_slice() {
            [one] => print_json(one),
            several => print_json(&several),
        };
    }
    for (i, candidates) in masks.iter().enumerate() {
        if masks.len() > 1 {
            println!("mask {}:", i + 1);
        }
        for c in candidates {
            println!("  {:.4}  {:<16} {}", c.score, c.token_str, c.sequence);
        }
    }
    Ok(())
}
