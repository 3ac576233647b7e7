//! `sesame forward`: one forward pass of a model folder on text or on token ids, every output
//! written to a safetensors file under the names transformers uses. An ELMo folder
//! (options.json) takes one or more sentences and writes `elmo_layers`, `mask` and
//! `elmo_representations.{k}`.

use std::path::{Path, PathBuf};

use sesame::error::{Result, SesameError};
use sesame::models::auto::{folder_kind, FolderKind};
use sesame::models::elmo::chars::split_words;
use sesame::models::elmo::ElmoModel;
use sesame::models::{ForwardOptions, Forwarded, IdsBatch};
use sesame::Device;

use super::{read_bytes, write_atomic};

#[derive(clap::Args)]
pub struct ForwardArgs {
    /// A model folder: config.json, model.safetensors (or a sharded index and its shards),
    /// tokenizer files; or an ELMo folder: options.json, model.safetensors. Or a Hugging Face
    /// hub id (`org/name`, see --revision), downloaded into the hub cache.
    #[arg(long)]
    model: PathBuf,
    /// Text to tokenize (with the model's special tokens). ELMo: one or more sentences, a batch.
    #[arg(long, num_args = 1.., conflicts_with = "ids")]
    text: Vec<String>,
    /// ELMo: the sentences are already words separated by spaces (no punctuation splitting).
    #[arg(long)]
    pretokenized: bool,
    /// A second segment (sentence B; encoders).
    #[arg(long, requires = "text")]
    pair: Option<String>,
    /// Token ids as a tokenizer returns them: {"input_ids": [[…]], "attention_mask": [[…]],
    /// "token_type_ids": [[…]], "task_type_ids": [[…]]} ([batch, seq]; [batch, choices, seq] for
    /// a multiple-choice model). token_type_ids are ignored by a family without token types.
    #[arg(long)]
    ids: Option<PathBuf>,
    /// Where to write the outputs (.safetensors).
    #[arg(long)]
    out: PathBuf,
    /// Also write hidden_states.{i} (0 = the embedding output).
    #[arg(long)]
    hidden_states: bool,
    /// Also write attentions.{i} ([batch, heads, seq, seq]).
    #[arg(long)]
    attentions: bool,
    /// Cut a text longer than the model's positions instead of failing.
    #[arg(long)]
    truncate: bool,
}

fn read_ids_json(path: &Path) -> Result<IdsBatch> {
    IdsBatch::from_json(&read_bytes(path)?).map_err(|e| SesameError::InvalidArgument { op: "forward", message: format!("{}: {e}", path.display()) })
}

/// ELMo on the sentences of `--text`.
fn run_elmo(gpu: &Device, args: &ForwardArgs) -> Result<()> {
    if args.text.is_empty() {
        return Err(SesameError::InvalidArgument { op: "forward", message: "an ELMo model takes sentences: give --text".into() });
    }
    let model = ElmoModel::load_dir(gpu, &args.model)?;
    let sentences: Vec<Vec<String>> =
        args.text.iter().map(|t| if args.pretokenized { t.split_whitespace().map(String::from).collect() } else { split_words(t) }).collect();
    let output = model.forward(&sentences)?.into_model_output();
    write_atomic(&args.out, &pollster::block_on(output.to_safetensors())?)
}

pub fn run(gpu: &Device, args: ForwardArgs) -> Result<()> {
    let args = ForwardArgs { model: super::model_dir(&args.model)?, ..args };
    if folder_kind(&sesame::files::Disk, &args.model)? == FolderKind::Elmo {
        return run_elmo(gpu, &args);
    }
    let loaded = super::load_model(gpu, &args.model, args.truncate)?;
    let text = match args.text.as_slice() {
        [] => None,
        [one] => Some(one),
        _ => return Err(SesameError::InvalidArgument { op: "forward", message: "give one --text (batches of token ids go in --ids)".into() }),
    };
    let batch = match (text, &args.ids) {
        (Some(text), None) => loaded.single(&loaded.encode_detailed("forward", text, args.pair.as_deref())?),
        (None, Some(path)) => read_ids_json(path)?,
        _ => return Err(SesameError::InvalidArgument { op: "forward", message: "give either --text or --ids".into() }),
    };
    let options = ForwardOptions { hidden_states: args.hidden_states, attentions: args.attentions, ..Default::default() };
    let forwarded = Forwarded::run(&*loaded.model, batch, options)?;
    pollster::block_on(forwarded.read_all())?;
    write_atomic(&args.out, &pollster::block_on(forwarded.output.to_safetensors())?)
}
