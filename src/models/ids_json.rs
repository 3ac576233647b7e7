//! A batch of token ids as JSON, as a Hugging Face tokenizer returns it with
//! `return_tensors` lists: `{"input_ids": [[…], …], "attention_mask": …, "token_type_ids": …,
//! "task_type_ids": …}`, each [batch, seq] or, for multiple choice, [batch, choices, seq]
//! (`sesame forward --ids`); `char_ids` [batch, seq, width] for a model that reads characters.

use super::IdsBatch;
use crate::error::{arg_err, Result};

/// One input: rows of ids, or for multiple choice, examples of rows (one per choice).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Ids {
    Rows(Vec<Vec<u32>>),
    Examples(Vec<Vec<Vec<u32>>>),
}

#[derive(serde::Deserialize)]
struct IdsJson {
    input_ids: Ids,
    attention_mask: Option<Ids>,
    token_type_ids: Option<Ids>,
    task_type_ids: Option<Ids>,
    /// [batch, seq, characters per token].
    char_ids: Option<Vec<Vec<Vec<u32>>>>,
}

const OP: &str = "ids";

/// A batch's shape: examples, choices of each (multiple choice), tokens of each row.
type Shape = (usize, Option<usize>, usize);

/// `ids` flattened row-major with its shape, which must be `like` when given.
fn flatten(name: &str, ids: Ids, like: Option<Shape>) -> Result<(Vec<u32>, Shape)> {
    let (rows, batch, choices) = match ids {
        Ids::Rows(rows) => (rows.len(), rows, None),
        Ids::Examples(examples) => {
            let choices = examples.first().map_or(0, Vec::len);
            if let Some(bad) = examples.iter().position(|e| e.len() != choices) {
                return Err(arg_err!(OP, "{name} example {bad} has {} choices, example 0 has {choices}", examples[bad].len()));
            }
            (examples.len(), examples.concat(), Some(choices))
        }
    };
    let seq = batch.first().map_or(0, Vec::len);
    if let Some(bad) = batch.iter().position(|r| r.len() != seq) {
        return Err(arg_err!(OP, "{name} row {bad} has {} ids, row 0 has {seq}: pad the batch", batch[bad].len()));
    }
    let shape = (rows, choices, seq);
    if let Some(want) = like.filter(|&want| want != shape) {
        let show = |(b, c, t): Shape| c.map_or(format!("[{b}, {t}]"), |c| format!("[{b}, {c}, {t}]"));
        return Err(arg_err!(OP, "{name} is {}, input_ids is {}", show(shape), show(want)));
    }
    Ok((batch.concat(), shape))
}

/// `char_ids` [batch, seq, width] flattened, for input_ids of `shape` (one row per token, all
/// of one width).
fn char_rows(chars: Vec<Vec<Vec<u32>>>, shape: Shape) -> Result<Vec<u32>> {
    let (batch, choices, seq) = shape;
    if choices.is_some() {
        return Err(arg_err!(OP, "char_ids are for one sequence per row, not multiple choices"));
    }
    let width = chars.first().and_then(|s| s.first()).map_or(0, Vec::len);
    if chars.len() != batch || chars.iter().any(|s| s.len() != seq) {
        return Err(arg_err!(OP, "char_ids must hold a row of characters for each of input_ids' [{batch}, {seq}] tokens"));
    }
    if width == 0 || chars.iter().flatten().any(|row| row.len() != width) {
        return Err(arg_err!(OP, "every token's char_ids row must have the same length (the first has {width}), and not 0"));
    }
    Ok(chars.into_iter().flatten().flatten().collect())
}

impl IdsBatch {
    /// Parses a batch of ids from JSON. Rows must be of one length (padded); the other inputs
    /// must have input_ids' shape. (Their values are checked by the model that reads them.)
    pub fn from_json(json: &[u8]) -> Result<IdsBatch> {
        let j: IdsJson =
            serde_json::from_slice(json).map_err(|e| arg_err!(OP, "{e} (each input is [batch, seq] or [batch, choices, seq] non-negative ids)"))?;
        let (input_ids, shape) = flatten("input_ids", j.input_ids, None)?;
        let other = |name: &str, ids: Option<Ids>| ids.map(|ids| flatten(name, ids, Some(shape)).map(|(flat, _)| flat)).transpose();
        let (batch, choices, seq) = shape;
        Ok(IdsBatch {
            input_ids,
            attention_mask: other("attention_mask", j.attention_mask)?,
            token_type_ids: other("token_type_ids", j.token_type_ids)?,
            task_type_ids: other("task_type_ids", j.task_type_ids)?,
            char_ids: j.char_ids.map(|chars| char_rows(chars, shape)).transpose()?,
            batch,
            choices,
            seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_choices_and_refuses_ragged_or_mismatched_inputs() {
        let batch = IdsBatch::from_json(br#"{"input_ids": [[2, 5, 3], [2, 6, 3]], "attention_mask": [[1, 1, 1], [1, 1, 0]]}"#).unwrap();
        assert_eq!((batch.batch, batch.choices, batch.seq), (2, None, 3));
        assert_eq!(batch.attention_mask.as_deref(), Some(&[1, 1, 1, 1, 1, 0][..]));
        let choices = IdsBatch::from_json(br#"{"input_ids": [[[0, 5], [0, 6]]]}"#).unwrap();
        assert_eq!((choices.batch, choices.choices, choices.seq), (1, Some(2), 2));
        for (json, expected) in [
            (&br#"{"input_ids": [[2, 5, 3], [2, 3]]}"#[..], "row 1 has 2 ids"),
            (br#"{"input_ids": [[2, 5, 3]], "attention_mask": [[1, 1]]}"#, "attention_mask is [1, 2], input_ids is [1, 3]"),
            (br#"{"input_ids": [[[0, 5], [0, 6]], [[0, 5]]]}"#, "example 1 has 1 choices"),
            (br#"{"input_ids": [[2, -5, 3]]}"#, "non-negative ids"),
            (br#"{"input_ids": 7"#, "non-negative ids"),
        ] {
            let err = IdsBatch::from_json(json).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
