//! `sesame convert-cove`: the released CoVe MT-LSTM (its state dict as safetensors), a
//! vocabulary and GloVe's vectors to a CoVe folder; see `sesame::models::cove::convert`.

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::models::cove::convert::convert_cove;
use sesame::tokenize::read_word_list;
use sesame::weights::{Checkpoint, FileBytes};

use super::{io_err, read_bytes, refuse_pickle, write_atomic};

#[derive(clap::Args)]
pub struct ConvertCoveArgs {
    /// The MT-LSTM's state dict as safetensors (`weight_ih_l0`, …, `bias_hh_l1_reverse`, with or
    /// without `rnn.`). From the release: `sd = torch.load("wmtlstm-b142a7f2.pth",
    /// map_location="cpu")` then `safetensors.torch.save_file({k: v.contiguous() for k, v in
    /// sd.items()}, "cove.safetensors")`.
    #[arg(long)]
    weights: PathBuf,
    /// The words the model reads, one a line or a JSON list (your task's vocabulary; `<unk>`
    /// in it becomes the tokenizer's unknown word).
    #[arg(long)]
    vocab: PathBuf,
    /// GloVe's vectors in its text format (glove.840B.300d.txt for the release), read once for
    /// the vocabulary's rows.
    #[arg(long)]
    embeddings: PathBuf,
    /// The folder to write (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Output [GloVe(w); CoVe(w)] (the paper's task input) instead of CoVe(w) alone.
    #[arg(long)]
    residual_embeddings: bool,
}

pub fn run(args: ConvertCoveArgs) -> Result<()> {
    refuse_pickle("convert-cove", &args.weights)?;
    let checkpoint = Checkpoint::from_file(&args.weights.display().to_string(), FileBytes::open(&args.weights)?)?;
    let vocab = read_word_list(&read_bytes(&args.vocab)?, &[]).map_err(|e| SesameError::Tokenizer(format!("{}: {e}", args.vocab.display())))?;
    let (glove, _) = sesame::files::open_regular(&args.embeddings)?;
    eprintln!("reading {} for {} words …", args.embeddings.display(), vocab.len());
    let mut progress = |lines: usize| eprintln!("  {lines} lines");
    let folder = convert_cove(&checkpoint, &vocab, std::io::BufReader::new(glove), args.residual_embeddings, &mut progress)?;
    std::fs::create_dir_all(&args.out).map_err(io_err(&args.out))?;
    // Weights first: a folder with config.json but no model is never left behind.
    write_atomic(&args.out.join("model.safetensors"), &folder.safetensors)?;
    write_atomic(&args.out.join("tokenizer.json"), &folder.tokenizer_json)?;
    write_atomic(&args.out.join("config.json"), &folder.config_json)?;
    let c = &folder.config;
    eprintln!(
        "converted a CoVe MT-LSTM ({} layers, vectors {}, hidden {} a direction) into {}; GloVe had {} of the {} words{}",
        c.num_layers,
        c.embedding_dim,
        c.hidden_size,
        args.out.display(),
        folder.found,
        c.vocab_size,
        if folder.missing.is_empty() {
            String::new()
        } else {
            format!(" (zero vectors for {}{})", folder.missing.join(", "), if c.vocab_size - folder.found > folder.missing.len() { ", …" } else { "" })
        }
    );
    Ok(())
}
