//! `sesame embed`: sentence embeddings of texts from a BERT encoder, batched with padding.
//! `--json` prints one JSON array of floats per text; otherwise a short summary and, for
//! several texts, their cosine similarities.

use std::path::PathBuf;

use sesame::embed::{embed_texts, Pooling};
use sesame::error::Result;
use sesame::Device;

use super::print_json;

#[derive(clap::Args)]
pub struct EmbedArgs {
    /// A model folder or hub id (any encoder or decoder; its final hidden states are pooled), e.g. sentence-transformers/all-MiniLM-L6-v2.
    #[arg(long)]
    model: PathBuf,
    /// One or more texts.
    #[arg(long, num_args = 1.., required = true)]
    text: Vec<String>,
    /// mean: average of the token vectors (sentence-transformers); cls: the [CLS] vector.
    #[arg(long, default_value = "mean")]
    pooling: Pooling,
    /// Scale each embedding to unit length.
    #[arg(long)]
    normalize: bool,
    /// Cut texts longer than the model's positions instead of failing.
    #[arg(long)]
    truncate: bool,
    /// One JSON array per text.
    #[arg(long)]
    json: bool,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    dot / (norm(a) * norm(b))
}

pub fn run(gpu: &Device, args: EmbedArgs) -> Result<()> {
    let loaded = super::load_model(gpu, &super::model_dir(&args.model)?, args.truncate)?;
    let embeddings = pollster::block_on(embed_texts(&loaded, &args.text, args.pooling, args.normalize))?;
    if args.json {
        return embeddings.iter().try_for_each(print_json);
    }
    for (text, e) in args.text.iter().zip(&embeddings) {
        let head: Vec<String> = e.iter().take(6).map(|v| format!("{v:+.4}")).collect();
        println!("{text:?}: [{} …] ({} dims)", head.join(", "), e.len());
    }
    if embeddings.len() > 1 {
        println!("cosine similarity:");
        for (i, a) in embeddings.iter().enumerate() {
            let row: Vec<String> = embeddings.iter().map(|b| format!("{:.4}", cosine(a, b))).collect();
            println!("  {i}: {}", row.join("  "));
        }
    }
    Ok(())
}
