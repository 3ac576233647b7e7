//! `sesame translate`: greedy translations by a CoVe translation model (a `CoveForTranslation`
//! folder that `sesame train --objective translation` wrote: its source tokenizer.json and
//! target_tokenizer.json), one line a text.

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::models::cove::translation::CoveTranslation;
use sesame::models::IdsBatch;
use sesame::tokenize::TextTokenizer;
use sesame::weights::{Checkpoint, Weights};
use sesame::Device;

use super::read_bytes;

#[derive(clap::Args)]
pub struct TranslateArgs {
    /// A translation model's folder (config.json with CoveForTranslation, model.safetensors,
    /// tokenizer.json, target_tokenizer.json).
    #[arg(long)]
    model: PathBuf,
    /// A text to translate (give it again for more: they run as one batch).
    #[arg(long, required = true)]
    text: Vec<String>,
    /// The most words of a translation (it stops at </s> before).
    #[arg(long, default_value_t = 50)]
    max_words: usize,
}

pub fn run(gpu: &Device, args: TranslateArgs) -> Result<()> {
    let op = "translate";
    let read = |name: &str| read_bytes(&args.model.join(name));
    let config_json = read("config.json")?;
    let checkpoint = Checkpoint::from_bytes(read("model.safetensors")?)?;
    let invalid = |message: String| SesameError::InvalidArgument { op, message };
    let model = CoveTranslation::load(&config_json, &Weights::new(gpu, &checkpoint)).map_err(|e| invalid(format!("{}: {e}", args.model.display())))?;
    let source = TextTokenizer::from_bytes(&read("tokenizer.json")?)?;
    let target = TextTokenizer::from_bytes(&read("target_tokenizer.json")?)?;
    let pad = model.config.head.pad_token_id.or_else(|| source.token_to_id("<pad>")).unwrap_or(0);
    let rows = args.text.iter().map(|t| source.encode(t, true)).collect::<Result<Vec<_>>>()?;
    if let Some(i) = rows.iter().position(Vec::is_empty) {
        return Err(invalid(format!("text {} has no words", i + 1)));
    }
    let seq = rows.iter().map(Vec::len).max().unwrap_or(1);
    let batch = IdsBatch {
        input_ids: rows.iter().flat_map(|r| r.iter().copied().chain(std::iter::repeat(pad)).take(seq)).collect(),
        attention_mask: Some(rows.iter().flat_map(|r| (0..seq).map(move |i| (i < r.len()) as u32)).collect()),
        batch: rows.len(),
        seq,
        ..IdsBatch::default()
    };
    let translations: Vec<Vec<u32>> = pollster::block_on(model.translate_greedy(&batch, args.max_words))?;
    for words in &translations {
        println!("{}", target.decode(words, true)?);
    }
    Ok(())
}
