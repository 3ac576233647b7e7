//! `sesame forward`: one forward pass of a model folder on text or on token ids, every output
//! written to a safetensors file under the names transformers uses. An ELMo folder
//! (options.json) takes one or more sentences and writes `elmo_layers`, `mask` and
//! `elmo_representations.{k}`.

use std::path::{Path, PathBuf};

use sesame::error::{Result, SesameError};
use sesame::models::auto::{folder_kind, FolderKind};
use sesame::models::elmo::chars::split_words;
use sesame::models::elmo::ElmoModel;
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::Gpu;

use super::{read_bytes, write_atomic, LoadedModel};

#[derive(clap::Args)]
pub struct ForwardArgs {
    /// A model folder: config.json, model.safetensors, tokenizer files; or an ELMo folder:
    /// options.json, model.safetensors.
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

/// One input of a batch as a Hugging Face tokenizer returns it: rows of ids, or for multiple
/// choice, examples of rows (one per choice).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Ids {
    Rows(Vec<Vec<u32>>),
    Examples(Vec<Vec<Vec<u32>>>),
}

/// A batch as a Hugging Face tokenizer returns it (`return_tensors` lists).
#[derive(serde::Deserialize)]
struct IdsJson {
    input_ids: Ids,
    attention_mask: Option<Ids>,
    token_type_ids: Option<Ids>,
    task_type_ids: Option<Ids>,
}

fn forward_err(message: String) -> SesameError {
    SesameError::InvalidArgument { op: "forward", message }
}

/// A batch's shape: examples, choices of each (multiple choice), tokens of each row.
type Shape = (usize, Option<usize>, usize);

/// `ids` flattened row-major with its shape, which must be `like` when given.
fn flatten(name: &str, ids: Ids, like: Option<Shape>) -> Result<(Vec<u32>, Shape)> {
    let (rows, batch, choices) = match ids {
        Ids::Rows(rows) => (rows.len(), rows, None),
        Ids::Examples(examples) => {
            let choices = examples.first().map_or(0, Vec::len);
            if let Some(bad) = examples.iter().position(|e| e.len() != choices) {
                return Err(forward_err(format!("{name} example {bad} has {} choices, example 0 has {choices}", examples[bad].len())));
            }
            (examples.len(), examples.concat(), Some(choices))
        }
    };
    let seq = batch.first().map_or(0, Vec::len);
    if let Some(bad) = batch.iter().position(|r| r.len() != seq) {
        return Err(forward_err(format!("{name} row {bad} has {} ids, row 0 has {seq}: pad the batch", batch[bad].len())));
    }
    let shape = (rows, choices, seq);
    if let Some(want) = like.filter(|&want| want != shape) {
        let show = |(b, c, t): Shape| c.map_or(format!("[{b}, {t}]"), |c| format!("[{b}, {c}, {t}]"));
        return Err(forward_err(format!("{name} is {}, input_ids is {}", show(shape), show(want))));
    }
    Ok((batch.concat(), shape))
}

fn read_ids_json(path: &Path) -> Result<IdsBatch> {
    let bytes = read_bytes(path)?;
    let j: IdsJson = serde_json::from_slice(&bytes)
        .map_err(|e| forward_err(format!("{}: {e} (each input is [batch, seq] or [batch, choices, seq] non-negative ids)", path.display())))?;
    let (input_ids, shape) = flatten("input_ids", j.input_ids, None)?;
    let other = |name: &str, ids: Option<Ids>| ids.map(|ids| flatten(name, ids, Some(shape)).map(|(flat, _)| flat)).transpose();
    let (batch, choices, seq) = shape;
    Ok(IdsBatch {
        input_ids,
        attention_mask: other("attention_mask", j.attention_mask)?,
        token_type_ids: other("token_type_ids", j.token_type_ids)?,
        task_type_ids: other("task_type_ids", j.task_type_ids)?,
        batch,
        choices,
        seq,
    })
}

/// ELMo on the sentences of `--text`.
fn run_elmo(gpu: &Gpu, args: &ForwardArgs) -> Result<()> {
    if args.text.is_empty() {
        return Err(SesameError::InvalidArgument { op: "forward", message: "an ELMo model takes sentences: give --text".into() });
    }
    let model = ElmoModel::load_dir(gpu, &args.model)?;
    let sentences: Vec<Vec<String>> =
        args.text.iter().map(|t| if args.pretokenized { t.split_whitespace().map(String::from).collect() } else { split_words(t) }).collect();
    let output = model.forward(&sentences)?.into_model_output();
    write_atomic(&args.out, &pollster::block_on(output.to_safetensors())?)
}

pub fn run(gpu: &Gpu, args: ForwardArgs) -> Result<()> {
    if folder_kind(&args.model)? == FolderKind::Elmo {
        return run_elmo(gpu, &args);
    }
    let loaded = LoadedModel::load(gpu, &args.model, args.truncate)?;
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
    let output = loaded.model.forward(&batch, options)?;
    write_atomic(&args.out, &pollster::block_on(output.to_safetensors())?)
}
