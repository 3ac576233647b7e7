//! `sesame convert-elmo`: an original bilm-tf / AllenNLP ELMo release (options.json +
//! weights.hdf5) to a Sesame ELMo folder (options.json + model.safetensors with AllenNLP's
//! `Elmo` parameter names); see `sesame::models::elmo::convert` for the transforms.

use std::path::PathBuf;

use sesame::error::Result;
use sesame::models::elmo::convert::{convert_bilm_tf, to_safetensors};
use sesame::models::elmo::ElmoOptions;

use super::{io_err, read_bytes, write_atomic};

#[derive(clap::Args)]
pub struct ConvertElmoArgs {
    /// The release's options.json.
    #[arg(long)]
    options: PathBuf,
    /// The release's weights.hdf5.
    #[arg(long)]
    weights: PathBuf,
    /// The folder to write (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Scalar mixes to add, at AllenNLP's initial values (the average of the layers).
    #[arg(long, default_value_t = 1)]
    mixes: usize,
}

pub fn run(args: ConvertElmoArgs) -> Result<()> {
    let options_json = read_bytes(&args.options)?;
    let options = ElmoOptions::from_json(&options_json)?;
    let tensors = convert_bilm_tf(&options, &args.weights, args.mixes)?;
    std::fs::create_dir_all(&args.out).map_err(io_err(&args.out))?;
    // Weights first: a folder with options.json but no model is never left behind.
    write_atomic(&args.out.join("model.safetensors"), &to_safetensors(&tensors)?)?;
    write_atomic(&args.out.join("options.json"), &options_json)?;
    let parameters: usize = tensors.iter().map(|t| t.data.len()).sum();
    eprintln!("converted {} tensors ({parameters} parameters) into {}", tensors.len(), args.out.display());
    Ok(())
}
