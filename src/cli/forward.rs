//! `sesame forward`: one forward pass of a model folder on text or on token ids, every output
//! written to a safetensors file under the names transformers uses. An ELMo folder
//! (options.json) takes one or more sentences and writes `elmo_layers`, `mask` and
//! `elmo_representations.{k}`.

use std::path::{Path, PathBuf};

use sesame::error::{Result, SesameError};
use sesame::models::auto::{AutoModel, IdsBatch};
use sesame::models::bert::ForwardOptions;
use sesame::models::elmo::chars::split_words;
use sesame::models::elmo::ElmoModel;
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
    /// A second segment (BERT's sentence B).
    #[arg(long, requires = "text")]
    pair: Option<String>,
    /// Token ids as a tokenizer returns them: {"input_ids": [[…]], "attention_mask": [[…]], "token_type_ids": [[…]]}.
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

/// A batch as a Hugging Face tokenizer returns it (`return_tensors` lists of rows).
#[derive(serde::Deserialize)]
struct IdsJson {
    input_ids: Vec<Vec<u32>>,
    attention_mask: Option<Vec<Vec<u32>>>,
    token_type_ids: Option<Vec<Vec<u32>>>,
}

fn flatten(name: &str, rows: Vec<Vec<u32>>, seq: usize) -> Result<Vec<u32>> {
    if let Some(bad) = rows.iter().position(|r| r.len() != seq) {
        return Err(SesameError::InvalidArgument { op: "forward", message: format!("{name} row {bad} has {} ids, row 0 has {seq}: pad the batch", rows[bad].len()) });
    }
    Ok(rows.concat())
}

fn read_ids_json(path: &Path) -> Result<IdsBatch> {
    let bytes = read_bytes(path)?;
    let j: IdsJson = serde_json::from_slice(&bytes).map_err(|e| SesameError::InvalidArgument { op: "forward", message: format!("{}: {e}", path.display()) })?;
    let (batch, seq) = (j.input_ids.len(), j.input_ids.first().map_or(0, Vec::len));
    Ok(IdsBatch {
        input_ids: flatten("input_ids", j.input_ids, seq)?,
        attention_mask: j.attention_mask.map(|m| flatten("attention_mask", m, seq)).transpose()?,
        token_type_ids: j.token_type_ids.map(|t| flatten("token_type_ids", t, seq)).transpose()?,
        batch,
        seq,
    })
}

/// ELMo on the sentences of `--text`.
fn run_elmo(gpu: &Gpu, args: &ForwardArgs) -> Result<()> {
    if args.text.is_empty() {
        return Err(SesameError::InvalidArgument { op: "forward", message: "an ELMo model takes sentences: give --text".into() });
    }
    let model = ElmoModel::load_dir(gpu, &args.model)?;
    let sentences: Vec<Vec<String>> = args
        .text
        .iter()
        .map(|t| if args.pretokenized { t.split_whitespace().map(String::from).collect() } else { split_words(t) })
        .collect();
    let output = model.forward(&sentences)?.into_model_output();
    write_atomic(&args.out, &pollster::block_on(output.to_safetensors())?)
}

pub fn run(gpu: &Gpu, args: ForwardArgs) -> Result<()> {
    if args.model.join("options.json").is_file() && !args.model.join("config.json").exists() {
        return run_elmo(gpu, &args);
    }
    let loaded = LoadedModel::load(gpu, &args.model, args.truncate)?;
    let is_bert = matches!(loaded.model, AutoModel::Bert(_));
    let text = match args.text.as_slice() {
        [] => None,
        [one] => Some(one),
        _ => return Err(SesameError::InvalidArgument { op: "forward", message: "give one --text (batches of token ids go in --ids)".into() }),
    };
    let batch = match (text, &args.ids) {
        (Some(text), None) => {
            if args.pair.is_some() && !is_bert {
                return Err(SesameError::InvalidArgument { op: "forward", message: "--pair needs a model with token types (BERT)".into() });
            }
            let (ids, types) = loaded.encode("forward", text, args.pair.as_deref())?;
            let seq = ids.len();
            IdsBatch { input_ids: ids, attention_mask: None, token_type_ids: is_bert.then_some(types), batch: 1, seq }
        }
        (None, Some(path)) => read_ids_json(path)?,
        _ => return Err(SesameError::InvalidArgument { op: "forward", message: "give either --text or --ids".into() }),
    };
    let options = ForwardOptions { hidden_states: args.hidden_states, attentions: args.attentions, last_position_only: false };
    let output = loaded.model.forward(&batch, options)?;
    write_atomic(&args.out, &pollster::block_on(output.to_safetensors())?)
}
