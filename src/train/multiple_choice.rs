//! Multiple-choice data: SWAG's CSV files (Zellers et al. 2018; the `regular` split's columns,
//! as transformers' run_swag.py reads them). An example is a context `sent1`, the start of
//! the next sentence `sent2`, its possible endings `ending0`, `ending1`, … and the `label` of
//! the right one; choice i is the pair (`sent1`, `sent2` + " " + `ending{i}`), encoded as the
//! model's pair and cut longest first to the sequence length. A batch is examples × choices
//! rows, each example's choices consecutive, padded to the longest row.

use super::data::{BatchSource, Draw, EpochSampler};
use crate::error::{arg_err, Result};
use crate::models::training::Batch;
use crate::tokenize::TextTokenizer;

const OP: &str = "multiple-choice data";

/// The most choices an example may have (SWAG, HellaSwag and RACE have 4, COPA 2): each is a
/// row of its own, the context encoded again.
pub const MAX_CHOICES: usize = 16;

/// The examples of a multiple-choice file, encoded.
pub struct MultipleChoiceExamples {
    /// Every example's choices: ids and token types, `choices` rows per example.
    rows: Vec<Vec<u32>>,
    types: Vec<Vec<u32>>,
    labels: Vec<i64>,
    choices: usize,
    pad_id: u32,
    sampler: EpochSampler,
}

/// One example's texts, before encoding.
#[derive(Debug, PartialEq)]
struct Example {
    context: String,
    endings: Vec<String>,
    label: i64,
}

/// The examples of a SWAG-style CSV: a header naming `sent1`, `sent2`, `ending0` … (at least
/// two, numbered from 0 without gaps) and `label`; other columns are ignored.
fn csv_examples(text: &str) -> Result<Vec<Example>> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| arg_err!(OP, "the CSV header: {e}"))?.clone();
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    let required =
        |name: &str| column(name).ok_or_else(|| arg_err!(OP, "the CSV has no `{name}` column (SWAG's columns: sent1, sent2, ending0, ending1, …, label)"));
    let (sent1, sent2, label) = (required("sent1")?, required("sent2")?, required("label")?);
    let endings: Vec<usize> = (0..=MAX_CHOICES).map_while(|i| column(&format!("ending{i}"))).collect();
    if endings.len() < 2 {
        return Err(arg_err!(OP, "the CSV names {} ending columns; a choice needs at least ending0 and ending1", endings.len()));
    }
    if endings.len() > MAX_CHOICES {
        return Err(arg_err!(OP, "the CSV names more than {MAX_CHOICES} ending columns: an example's choices are rows of its batch, at most {MAX_CHOICES}"));
    }
    let mut examples = Vec::new();
    for (index, record) in reader.records().enumerate() {
        // Line numbers count the header as line 1 (a quoted field may span lines; the
        // record's own position says where it starts).
        let record = record.map_err(|e| arg_err!(OP, "example {}: {e}", index + 1))?;
        let line = record.position().map_or(index as u64 + 2, |p| p.line());
        let field = |at: usize| record.get(at).map(str::trim).ok_or_else(|| arg_err!(OP, "line {line}: the row has no column {}", at + 1));
        let label_text = field(label)?;
        let label = match label_text.parse::<i64>() {
            Ok(l) if (0..endings.len() as i64).contains(&l) => l,
            _ => return Err(arg_err!(OP, "line {line}: the label {label_text:?} is not a choice (0 to {})", endings.len() - 1)),
        };
        let (context, start) = (field(sent1)?, field(sent2)?);
        if context.is_empty() {
            return Err(arg_err!(OP, "line {line}: sent1 (the context) is empty"));
        }
        let endings = endings
            .iter()
            .map(|&at| Ok([start, field(at)?].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(" ")))
            .collect::<Result<Vec<_>>>()?;
        if let Some(i) = endings.iter().position(String::is_empty) {
            return Err(arg_err!(OP, "line {line}: choice {i} is empty (sent2 and ending{i} both are)"));
        }
        examples.push(Example { context: context.to_string(), endings, label });
    }
    if examples.is_empty() {
        return Err(arg_err!(OP, "the CSV holds no examples"));
    }
    Ok(examples)
}

impl MultipleChoiceExamples {
    /// The examples of a SWAG-style CSV (`csv_examples`), each choice encoded as the pair
    /// (context, choice) with the tokenizer's special tokens and cut longest first to `seq`.
    pub fn from_csv(text: &str, tokenizer: &TextTokenizer, pad_id: u32, draw: impl Into<Draw>, batch: usize, seq: usize) -> Result<MultipleChoiceExamples> {
        if batch == 0 || seq < 4 {
            return Err(arg_err!(OP, "need a positive batch size and sequences of at least 4 tokens (got {batch} × {seq})"));
        }
        let examples = csv_examples(text)?;
        let choices = examples[0].endings.len();
        let mut tokenizer = tokenizer.clone();
        tokenizer.truncate_to(Some(seq))?;
        let (mut rows, mut types) = (Vec::with_capacity(examples.len() * choices), Vec::with_capacity(examples.len() * choices));
        for example in &examples {
            for ending in &example.endings {
                let (ids, row_types) = tokenizer.encode_with_types(&example.context, Some(ending))?;
                rows.push(ids);
                types.push(row_types);
            }
        }
        let labels = examples.iter().map(|e| e.label).collect();
        let sampler = EpochSampler::new(examples.len(), draw, batch);
        Ok(MultipleChoiceExamples { rows, types, labels, choices, pad_id, sampler })
    }

    /// The choices each example has.
    pub fn choices(&self) -> usize {
        self.choices
    }
}

impl BatchSource for MultipleChoiceExamples {
    fn rows_per_example(&self) -> usize {
        self.choices
    }

    /// Held out: the batches that cover the file once; training: without end.
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    /// The picked examples' choices, padded to the longest; in file order when held out (the
    /// last batch may be smaller).
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let rows: Vec<usize> = picked.iter().flat_map(|&e| e * self.choices..(e + 1) * self.choices).collect();
        let ids: Vec<&[u32]> = rows.iter().map(|&r| self.rows[r].as_slice()).collect();
        let padded = Batch::padded(&ids, self.pad_id);
        let token_type_ids = rows.iter().flat_map(|&r| self.types[r].iter().copied().chain(std::iter::repeat(0)).take(padded.seq)).collect();
        let labels = picked.iter().map(|&e| self.labels[e]).collect();
        Ok(Batch { labels, token_type_ids: Some(token_type_ids), choices: Some(self.choices), ..padded })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> TextTokenizer {
        let text = "she opened the door . he sat down . then walked out , slowly and smiled at the dog\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    const SWAG: &str = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n\
        0,anetv_1,5,x,she opened the door .,then,gold,walked out .,\"sat down, slowly\",smiled .,he sat down .,0\n\
        1,anetv_2,6,x,he sat down .,,gen,smiled at the dog .,walked out,opened the door,sat down,3\n";

    #[test]
    fn swag_rows_become_examples_of_context_and_choice_pairs() {
        let examples = csv_examples(SWAG).unwrap();
        assert_eq!(
            examples[0],
            Example {
                context: "she opened the door .".into(),
                endings: vec!["then walked out .".into(), "then sat down, slowly".into(), "then smiled .".into(), "then he sat down .".into()],
                label: 0
            },
            "a quoted comma stays in its field; sent2 starts each choice"
        );
        assert_eq!((examples[1].endings[0].as_str(), examples[1].label), ("smiled at the dog .", 3), "an empty sent2 adds no space");
    }

    #[test]
    fn a_batch_is_examples_times_choices_rows_of_pairs() {
        let t = tokenizer();
        let (cls, sep, pad) = (t.token_to_id("[CLS]").unwrap(), t.token_to_id("[SEP]").unwrap(), t.token_to_id("[PAD]").unwrap());
        let data = MultipleChoiceExamples::from_csv(SWAG, &t, pad, None, 2, 9).unwrap();
        assert_eq!((data.choices(), data.batches()), (4, Some(1)));
        let b = data.batch(0).unwrap();
        assert_eq!((b.batch, b.choices, &b.labels[..]), (8, Some(4), &[0, 3][..]));
        let id = |w: &str| t.token_to_id(w).unwrap();
        // Choice 1 of example 0, cut to 9 tokens: the longer text (the choice) loses its end.
        let row = &b.input_ids[b.seq..2 * b.seq];
        assert_eq!(row[..9], [cls, id("she"), id("opened"), id("the"), sep, id("then"), id("sat"), id("down"), sep]);
        let types = &b.token_type_ids.as_ref().unwrap()[b.seq..2 * b.seq];
        assert_eq!(types[..9], [0, 0, 0, 0, 0, 1, 1, 1, 1]);
        // Rows shorter than the longest are padded, and masked: "he sat down ." + "walked
        // out" is 9 tokens of 12.
        let b = MultipleChoiceExamples::from_csv(SWAG, &t, pad, None, 2, 12).unwrap().batch(0).unwrap();
        let (row, mask) = (&b.input_ids[5 * b.seq..6 * b.seq], &b.attention_mask.as_ref().unwrap()[5 * b.seq..6 * b.seq]);
        assert_eq!((b.seq, mask.iter().filter(|&&m| m == 1).count()), (12, 9));
        assert!(row[9..].iter().all(|&x| x == pad) && row[8] == sep);
        // Training batches draw examples whole, in a seeded order.
        let shuffled = MultipleChoiceExamples::from_csv(SWAG, &t, pad, Some(5), 1, 9).unwrap();
        let first = shuffled.batch(0).unwrap();
        assert_eq!((first.batch, first.labels.len()), (4, 1));
    }

    #[test]
    fn bad_files_are_errors_naming_the_problem() {
        let header = "sent1,sent2,ending0,ending1,label\n";
        for (text, expected) in [
            ("sent1,ending0,ending1,label\na,b,c,0\n", "no `sent2` column"),
            ("sent1,sent2,ending0,label\na,b,c,0\n", "at least ending0 and ending1"),
            ("sent1,sent2,ending0,ending2,label\na,b,c,d,0\n", "at least ending0 and ending1"),
            (&format!("{header}a,b,c,d,2\n"), "line 2: the label \"2\" is not a choice (0 to 1)"),
            (&format!("{header}a,b,c,d,x\n"), "line 2"),
            (&format!("{header}a,b,c,d,0\n,b,c,d,1\n"), "line 3: sent1"),
            (&format!("{header}a,,c,,1\n"), "choice 1 is empty"),
            (&format!("{header}a,b,c\n"), "example 1"),
            (header, "no examples"),
            (&format!("sent1,sent2,{},label\n", (0..17).map(|i| format!("ending{i}")).collect::<Vec<_>>().join(",")), "more than 16 ending columns"),
        ] {
            let err = csv_examples(text).err().unwrap_or_else(|| panic!("{text:?} was accepted")).to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let t = tokenizer();
        assert!(MultipleChoiceExamples::from_csv(SWAG, &t, 0, None, 0, 9).is_err());
    }
}
