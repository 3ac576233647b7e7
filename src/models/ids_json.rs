//! A batch of token ids as JSON, as a Hugging Face tokenizer returns it with
//! `return_tensors` lists: `{"input_ids": [[…], …], "attention_mask": …, "token_type_ids": …,
//! "task_type_ids": …}`, each [batch, seq] or, for multiple choice, [batch, choices, seq]
//! (`sesame forward --ids`); `char_ids` [batch, seq, width] for a model that reads characters.

use super::IdsBatch;
use crate::error::{arg_err, Result};
use serde_json::Value;

/// One input: rows of ids, or for multiple choice, examples of rows (one per choice).
enum Ids {
    Rows(Vec<Vec<u32>>),
    Examples(Vec<Vec<Vec<u32>>>),
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

/// How deep `value`'s lists go, following first elements (`[]` is 1, `[[]]` 2).
fn rank(mut value: &Value) -> usize {
    let mut rank = 0;
    while let Some(list) = value.as_array() {
        rank += 1;
        match list.first() {
            Some(first) => value = first,
            None => break,
        }
    }
    rank
}

/// `value` (at `path` in the JSON, for messages) as a list of what `item` makes of each element.
fn list<T>(path: &str, value: &Value, item: impl Fn(&str, &Value) -> Result<T>) -> Result<Vec<T>> {
    let values = value.as_array().ok_or_else(|| arg_err!(OP, "{path} is {value}, not a list"))?;
    values.iter().enumerate().map(|(i, v)| item(&format!("{path}[{i}]"), v)).collect()
}

fn id(path: &str, value: &Value) -> Result<u32> {
    value.as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(|| arg_err!(OP, "{path} is {value}: ids are whole numbers from 0 to {}", u32::MAX))
}

fn rows(path: &str, value: &Value) -> Result<Vec<Vec<u32>>> {
    list(path, value, |path, row| list(path, row, id))
}

fn examples(path: &str, value: &Value) -> Result<Vec<Vec<Vec<u32>>>> {
    list(path, value, rows)
}

/// Input `name` as [batch, seq] or [batch, choices, seq] ids.
fn ids(name: &str, value: &Value) -> Result<Ids> {
    match rank(value) {
        2 => rows(name, value).map(Ids::Rows),
        3 => examples(name, value).map(Ids::Examples),
        rank => {
            let dimensions = if rank == 1 { "dimension" } else { "dimensions" };
            Err(arg_err!(OP, "{name} has {rank} {dimensions}: each input is [batch, seq] or [batch, choices, seq]"))
        }
    }
}

impl IdsBatch {
    /// Parses a batch of ids from JSON. Rows must be of one length (padded); the other inputs
    /// must have input_ids' shape. (Their values are checked by the model that reads them.)
    /// A message names the input and the element that is wrong.
    pub fn from_json(json: &[u8]) -> Result<IdsBatch> {
        let inputs: serde_json::Map<String, Value> = serde_json::from_slice(json)
            .map_err(|e| arg_err!(OP, "{e} (an object of inputs such as {{\"input_ids\": [[101, 2023, 102]], \"attention_mask\": [[1, 1, 1]]}})"))?;
        let input = |name: &str| inputs.get(name).filter(|v| !v.is_null());
        let input_ids = input("input_ids").ok_or_else(|| arg_err!(OP, "no input_ids: the ids of each row's tokens are the input every model reads"))?;
        let (input_ids, shape) = flatten("input_ids", ids("input_ids", input_ids)?, None)?;
        let other = |name: &str| input(name).map(|v| flatten(name, ids(name, v)?, Some(shape)).map(|(flat, _)| flat)).transpose();
        let (batch, choices, seq) = shape;
        Ok(IdsBatch {
            input_ids,
            attention_mask: other("attention_mask")?,
            token_type_ids: other("token_type_ids")?,
            task_type_ids: other("task_type_ids")?,
            char_ids: input("char_ids").map(|v| char_rows(examples("char_ids", v)?, shape)).transpose()?,
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
            (br#"{"input_ids": [[2, -5, 3]]}"#, "input_ids[0][1] is -5: ids are whole numbers"),
            (br#"{"input_ids": [[2, 5]], "attention_mask": [[1, 1.5]]}"#, "attention_mask[0][1] is 1.5"),
            (br#"{"input_ids": [[2, 5]], "token_type_ids": [0, 0]}"#, "token_type_ids has 1 dimension:"),
            (br#"{"input_ids": [[2, 5]], "char_ids": [[[1, 2], "x"]]}"#, "char_ids[0][1] is \"x\", not a list"),
            (br#"{"input_ids": [[[[2]]]]}"#, "input_ids has 4 dimensions"),
            (br#"{"attention_mask": [[1]]}"#, "no input_ids"),
            (br#"{"input_ids": 7"#, "an object of inputs"),
        ] {
            let err = IdsBatch::from_json(json).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
