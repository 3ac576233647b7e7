//! `sesame info`: the adapter, or with `--model` what a model folder holds — its family,
//! architecture, the tasks it serves, its sizes, parameter count and the memory its weights
//! take.

use std::path::PathBuf;

use sesame::error::Result;
use sesame::info::AdapterReport;
use sesame::models::auto::ModelSummary;
use sesame::Device;

use super::print_json;

#[derive(clap::Args)]
pub struct InfoArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// A model folder (config.json, model.safetensors, tokenizer files) to describe instead of
    /// the adapter.
    #[arg(long)]
    model: Option<PathBuf>,
}

/// `why`: why the device was picked (the adapter's report says it).
pub fn run(gpu: &Device, why: &str, args: InfoArgs) -> Result<()> {
    let Some(dir) = args.model else {
        let report = AdapterReport { picked: Some(why.to_string()), ..AdapterReport::of(gpu) };
        println!("{}", if args.json { report.to_json() } else { report.to_text() });
        return Ok(());
    };
    let summary = super::load_model(gpu, &super::model_dir(&dir)?, false)?.summary();
    if args.json {
        return print_json(&summary);
    }
    print!("{}", to_text(&summary));
    Ok(())
}

/// One fact per line.
fn to_text(s: &ModelSummary) -> String {
    let mib = s.weight_bytes as f64 / (1 << 20) as f64;
    // Recurrent models have no attention heads.
    let kind = if s.heads == 0 { "recurrent".to_string() } else { format!("{} attention heads", s.heads) };
    let mut text = format!(
        "family        {} (model_type {})\narchitecture  {}\ntasks         {}\nlayers        {} ({kind}, hidden size {})\nvocabulary    {}\npositions     {}\nparameters    {} ({mib:.1} MiB as f32)\n",
        s.family,
        s.model_type,
        s.architecture,
        if s.tasks.is_empty() { "(forward passes only)".to_string() } else { s.tasks.join(", ") },
        s.layers,
        s.hidden_size,
        s.vocab_size,
        s.max_positions,
        s.parameters,
    );
    if !s.labels.is_empty() {
        text += &format!("labels        {}\n", s.labels.join(", "));
    }
    if let Some(mask) = &s.mask_token {
        text += &format!("mask token    {mask}\n");
    }
    text
}
