//! `sesame convert-ulmfit`: a fastai AWD-LSTM language model or ULMFiT classifier
//! (`learn.model.state_dict()`, saved as safetensors) and its vocabulary to an AWD-LSTM
//! folder; see `sesame::models::awd_lstm::convert` for what the conversion does.

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::models::awd_lstm::convert::{convert_ulmfit, read_vocab, ClassifierOptions};
use sesame::weights::{Checkpoint, FileBytes};

use super::{io_err, read_bytes, refuse_pickle, write_atomic};

#[derive(clap::Args)]
pub struct ConvertUlmfitArgs {
    /// The state dict as safetensors, under fastai's names (`0.encoder.weight`,
    /// `0.rnns.0.weight_hh_l0_raw`, …, `1.decoder.bias`). From a `.pth`:
    /// `sd = torch.load("lstm_fwd.pth", map_location="cpu"); sd = sd.get("model", sd)` then
    /// `safetensors.torch.save_file({k: v.contiguous() for k, v in sd.items()}, "lm.safetensors")`.
    #[arg(long)]
    weights: PathBuf,
    /// fastai's vocabulary (`itos`): one token a line, or a JSON list
    /// (`json.dump(list(itos), f)` from `itos_wt103.pkl` or `learn.dls.vocab`).
    #[arg(long)]
    vocab: PathBuf,
    /// The folder to write (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// A classifier's class names in its output order (`learn.dls.vocab[1]`): one a line, or a
    /// JSON list. Default LABEL_0, LABEL_1, …
    #[arg(long)]
    labels: Option<PathBuf>,
    /// A classifier's `seq_len` (the chunks its encoder reads a text in), as given to fastai's
    /// `text_classifier_learner`.
    #[arg(long, default_value_t = 72)]
    bptt: usize,
    /// A classifier's `max_len`: it pools over the chunks within a text's last this many tokens.
    #[arg(long, default_value_t = 1440)]
    max_len: usize,
}

pub fn run(args: ConvertUlmfitArgs) -> Result<()> {
    refuse_pickle("convert-ulmfit", &args.weights)?;
    let name = args.weights.display().to_string();
    let checkpoint = Checkpoint::from_file(&name, FileBytes::open(&args.weights)?)?;
    let itos = read_vocab(&read_bytes(&args.vocab)?).map_err(|e| SesameError::Tokenizer(format!("{}: {e}", args.vocab.display())))?;
    let labels = match &args.labels {
        Some(path) => Some(
            read_vocab(&read_bytes(path)?).map_err(|e| SesameError::InvalidArgument { op: "convert-ulmfit", message: format!("{}: {e}", path.display()) })?,
        ),
        None => None,
    };
    let folder = convert_ulmfit(&checkpoint, &itos, &ClassifierOptions { bptt: args.bptt, max_len: args.max_len, labels })?;
    std::fs::create_dir_all(&args.out).map_err(io_err(&args.out))?;
    // Weights first: a folder with config.json but no model is never left behind.
    write_atomic(&args.out.join("model.safetensors"), &folder.safetensors)?;
    write_atomic(&args.out.join("tokenizer.json"), &folder.tokenizer_json)?;
    write_atomic(&args.out.join("tokenizer_config.json"), &folder.tokenizer_config_json)?;
    write_atomic(&args.out.join("config.json"), &folder.config_json)?;
    let c = &folder.config;
    eprintln!(
        "converted an {} ({} layers, emb_sz {}, n_hid {}, vocabulary {}; {} parameters) into {}",
        c.head.architecture("AwdLstmModel"),
        c.n_layers,
        c.emb_sz,
        c.n_hid,
        c.vocab_size,
        folder.parameters,
        args.out.display()
    );
    Ok(())
}
