//! `sesame quantize --model DIR --dtype f16|q8|q4 --out DIR2`: the model folder with its weight
//! matrices quantized (see `sesame::models::quantize_folder`), which every command and the
//! npm package then load as they are.

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::models::quantize_folder::quantize_folder;
use sesame::quantize::WeightDtype;

use super::print_json;

#[derive(clap::Args)]
pub struct QuantizeArgs {
    /// The model folder (or hub id) to quantize.
    #[arg(long)]
    model: PathBuf,
    /// Where to write the quantized folder (new, or empty).
    #[arg(long)]
    out: PathBuf,
}

/// Quantizes to `dtype` (the global `--dtype`), printing what was written as one JSON line.
pub fn run(args: &QuantizeArgs, dtype: Option<WeightDtype>) -> Result<()> {
    let format = match dtype {
        Some(WeightDtype::Quantized(format)) => format,
        _ => return Err(SesameError::InvalidArgument { op: "quantize", message: "give --dtype f16, q8 or q4".into() }),
    };
    eprintln!("quantizing {} to {} ...", args.model.display(), format.name());
    let report = quantize_folder(&super::model_dir(&args.model)?, format, &args.out)?;
    eprintln!(
        "{}: {} matrices quantized, {} tensors copied; weights {} → {} ({:.1}%)",
        args.out.display(),
        report.matrices,
        report.copied,
        sesame::limits::describe_bytes(report.bytes_before),
        sesame::limits::describe_bytes(report.bytes_after),
        100.0 * report.bytes_after as f64 / report.bytes_before.max(1) as f64
    );
    print_json(&report)
}
