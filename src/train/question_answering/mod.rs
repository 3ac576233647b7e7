//! Question-answering data: SQuAD's JSON (v1.1, or v2.0 with unanswerable questions), or JSON
//! lines as Hugging Face datasets write SQuAD (`{"question", "context", "answers": {"text":
//! [...], "answer_start": [...]}}`). Each question with its context becomes one or more
//! windows `[CLS] question [SEP] part of the context [SEP]` of at most `seq` tokens,
//! consecutive windows sharing `doc_stride` context tokens (the features of transformers'
//! run_qa.py). A window's labels are the tokens where the first answer starts and ends, or
//! the `[CLS]` token (0) for both when the answer is not wholly inside it.

pub mod squad;

use self::squad::SquadPredictions;
use super::data::{BatchSource, Draw, EpochSampler, Metrics};
use crate::error::{arg_err, Result};
use crate::models::training::Batch;
use crate::question_answering::{ContextWindows, WindowError};
use crate::tokenize::TextTokenizer;
use std::ops::Range;

const OP: &str = "question-answering data";

/// A question about a context and its answer (None: unanswerable).
#[derive(Clone, Debug, PartialEq)]
pub struct QaExample {
    pub id: String,
    pub question: String,
    pub context: String,
    /// The first answer's span in the context, in characters (start, end): the training label.
    pub answer: Option<(usize, usize)>,
    /// Every reference answer's text (SQuAD's dev set gives several), for scoring; empty
    /// when unanswerable.
    pub answers: Vec<String>,
}

/// The examples of a SQuAD JSON file or of JSON lines.
pub fn squad_examples(text: &str) -> Result<Vec<QaExample>> {
    let examples = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(squad) if squad.get("data").is_some() => squad_json(&squad)?,
        _ => text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()).map(|(n, line)| json_line(line, n + 1)).collect::<Result<Vec<_>>>()?,
    };
    if examples.is_empty() {
        return Err(arg_err!(OP, "no questions"));
    }
    Ok(examples)
}

/// SQuAD's layout: data → paragraphs (context) → qas (id, question, answers, is_impossible).
fn squad_json(squad: &serde_json::Value) -> Result<Vec<QaExample>> {
    let articles = squad["data"].as_array().ok_or_else(|| arg_err!(OP, "`data` is not a list of articles"))?;
    let mut examples = Vec::new();
    for paragraph in articles.iter().flat_map(|a| a["paragraphs"].as_array().into_iter().flatten()) {
        let context = paragraph["context"].as_str().ok_or_else(|| arg_err!(OP, "a paragraph has no `context` text"))?;
        for qa in paragraph["qas"].as_array().ok_or_else(|| arg_err!(OP, "a paragraph has no `qas` list"))? {
            let id = qa["id"].as_str().map_or_else(|| format!("question {}", examples.len() + 1), String::from);
            let (answer, answers) = question_answers(qa, &id)?;
            examples.push(example(id, qa["question"].as_str(), context, answer, answers)?);
        }
    }
    Ok(examples)
}

/// One JSON line of a Hugging Face datasets export.
fn json_line(line: &str, number: usize) -> Result<QaExample> {
    let row: serde_json::Value = serde_json::from_str(line).map_err(|e| arg_err!(OP, "line {number} is neither SQuAD's JSON nor a JSON line: {e}"))?;
    let id = row["id"].as_str().map_or_else(|| format!("line {number}"), String::from);
    let context = row["context"].as_str().ok_or_else(|| arg_err!(OP, "{id}: no `context` text"))?;
    let (answer, answers) = question_answers(&row, &id)?;
    example(id, row["question"].as_str(), context, answer, answers)
}

/// A question's first answer as its text and `answer_start`, if any.
type FirstAnswer<'a> = Option<(&'a str, Option<u64>)>;

/// A question's answers: the first as (text, answer_start), the training label, and every
/// answer's text, for scoring. Read from SQuAD's list of `{"text", "answer_start"}` or from
/// datasets' `{"text": [...], "answer_start": [...]}`. No answer when the list is empty or
/// `is_impossible` is true (SQuAD 2.0's unanswerable questions); an error when `answers` is
/// missing or has another shape, so that a file is never read as unanswerable by mistake.
fn question_answers<'a>(question: &'a serde_json::Value, id: &str) -> Result<(FirstAnswer<'a>, Vec<String>)> {
    if question["is_impossible"] == true {
        return Ok((None, Vec::new()));
    }
    let answers = &question["answers"];
    let (texts, starts): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) = match answers {
        serde_json::Value::Array(list) => list.iter().map(|answer| (&answer["text"], &answer["answer_start"])).unzip(),
        serde_json::Value::Object(_) => {
            let texts = answers["text"].as_array().ok_or_else(|| arg_err!(OP, "{id}: `answers` has no `text` list"))?;
            (texts.iter().collect(), answers["answer_start"].as_array().map(|starts| starts.iter().collect()).unwrap_or_default())
        }
        _ => {
            return Err(arg_err!(
                OP,
                "{id}: no `answers` (a list of {{\"text\", \"answer_start\"}}, or {{\"text\": [...], \"answer_start\": [...]}}; empty when unanswerable)"
            ))
        }
    };
    let texts = texts.iter().map(|text| text.as_str().ok_or_else(|| arg_err!(OP, "{id}: an answer has no `text`"))).collect::<Result<Vec<&str>>>()?;
    let first = texts.first().map(|&text| (text, starts.first().and_then(|start| start.as_u64())));
    Ok((first, texts.into_iter().map(String::from).collect()))
}

/// An example whose first answer (text, start character) is checked against its context.
fn example(id: String, question: Option<&str>, context: &str, answer: FirstAnswer, answers: Vec<String>) -> Result<QaExample> {
    let question = question.filter(|q| !q.trim().is_empty()).ok_or_else(|| arg_err!(OP, "{id}: no `question` text"))?;
    let answer = match answer {
        None => None,
        Some((text, start)) => {
            let start =
                start.and_then(|s| usize::try_from(s).ok()).ok_or_else(|| arg_err!(OP, "{id}: the answer has no `answer_start` (a character index)"))?;
            let found: String = context.chars().skip(start).take(text.chars().count()).collect();
            if text.is_empty() || found != text {
                return Err(arg_err!(OP, "{id}: the answer {text:?} is not at character {start} of the context (found {found:?})"));
            }
            Some((start, start + text.chars().count()))
        }
    };
    Ok(QaExample { id, question: question.trim_start().to_string(), context: context.to_string(), answer, answers })
}

/// One window of a question's context as the model reads it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Window {
    ids: Vec<u32>,
    token_type_ids: Vec<u32>,
    start: i64,
    end: i64,
    /// Which example (question) the window belongs to.
    pub(super) example: usize,
    /// The example's context tokens it holds (indices into its [`QaWindows::context_offsets`]),
    /// from position `context_position` on.
    pub(super) context: Range<usize>,
    pub(super) context_position: usize,
}

/// The windows of every example, in batches drawn by an [`EpochSampler`].
#[derive(Debug)]
pub struct QaWindows {
    pub(super) examples: Vec<QaExample>,
    /// Per example, each context token's span in the context, in characters.
    pub(super) context_offsets: Vec<CharSpans>,
    pub(super) windows: Vec<Window>,
    pad_id: u32,
    sampler: EpochSampler,
}

impl QaWindows {
    /// The windows of `examples` of at most `seq` tokens, `doc_stride` context tokens shared
    /// between consecutive windows of one context.
    pub fn new(
        examples: Vec<QaExample>,
        tokenizer: &TextTokenizer,
        pad_id: u32,
        draw: impl Into<Draw>,
        batch: usize,
        seq: usize,
        doc_stride: usize,
    ) -> Result<QaWindows> {
        if batch == 0 {
            return Err(arg_err!(OP, "need a positive batch size"));
        }
        let (mut windows, mut context_offsets) = (Vec::new(), Vec::new());
        for (index, example) in examples.iter().enumerate() {
            let (example_windows, offsets) = example_windows(example, index, tokenizer, seq, doc_stride)?;
            windows.extend(example_windows);
            context_offsets.push(offsets);
        }
        let sampler = EpochSampler::new(windows.len(), draw, batch);
        Ok(QaWindows { examples, context_offsets, windows, pad_id, sampler })
    }

    /// How many questions have all their windows among the first `windows` (held-out data
    /// is read in order).
    pub fn questions_within(&self, windows: usize) -> usize {
        let seen = &self.windows[..windows.min(self.windows.len())];
        let last_whole = seen.last().filter(|w| w.context.end == self.context_offsets[w.example].len()).map(|w| w.example + 1);
        last_whole.unwrap_or(seen.last().map_or(0, |w| w.example))
    }

    /// How many windows the examples gave.
    pub fn windows(&self) -> usize {
        self.windows.len()
    }

    /// Which windows batch `index` holds, in its row order.
    pub fn batch_windows(&self, index: u64) -> Result<Vec<usize>> {
        self.sampler.pick(index)
    }
}

/// Each context token's span in the context, in characters.
type CharSpans = Vec<(u32, u32)>;

/// `[CLS] question [SEP] context[a..b] [SEP]` for each window [a, b) of the context's tokens,
/// and the character spans of the context's tokens.
fn example_windows(example: &QaExample, index: usize, tokenizer: &TextTokenizer, seq: usize, doc_stride: usize) -> Result<(Vec<Window>, CharSpans)> {
    let encoded = tokenizer.encode_detailed(&example.question, Some(&example.context))?;
    let split = ContextWindows::new(&encoded, seq, doc_stride).map_err(|e| match e {
        WindowError::NoContext => arg_err!(OP, "{}: the context has no tokens", example.id),
        WindowError::NoRoom { around } => arg_err!(OP, "{}: the question and special tokens take {around} tokens, which leaves no room for the context in {seq} (--seq-len)", example.id),
        WindowError::QuestionTooLong { around, room } => {
            arg_err!(OP, "{}: the question and special tokens take {around} of the {seq} tokens (--seq-len), which leaves {room} for the context, not more than the {doc_stride} that windows share (--doc-stride)", example.id)
        }
    })?;
    let windows = split.runs.iter().enumerate().map(|(w, run)| {
        let tokens = split.tokens(w);
        let position = |i: usize| split.window_position(w, i) as i64;
        let (start, end) = match example.answer {
            Some(answer) => answer_tokens(&encoded.offsets, &split.context[run.clone()], answer).map_or((0, 0), |(s, e)| (position(s), position(e))),
            None => (0, 0),
        };
        Window {
            ids: tokens.iter().map(|&i| encoded.ids[i]).collect(),
            token_type_ids: tokens.iter().map(|&i| encoded.type_ids[i]).collect(),
            start,
            end,
            example: index,
            context: run.clone(),
            context_position: split.prefix,
        }
    });
    let windows: Vec<Window> = windows.collect();
    let offsets = split.context.iter().map(|&i| (encoded.offsets[i].0 as u32, encoded.offsets[i].1 as u32)).collect();
    Ok((windows, offsets))
}

/// The first and last of `tokens` (indices into the encoding, consecutive) that cover the
/// answer's characters [start, end), when all of it is inside them: the last token starting
/// at or before `start`, and the first ending at or after `end`. (run_qa.py's start search
/// can run past the context into [SEP] when the answer starts in the window's last token;
/// this one stays within the context.)
fn answer_tokens(offsets: &[(usize, usize)], tokens: &[usize], (start, end): (usize, usize)) -> Option<(usize, usize)> {
    let (&first, &last) = (tokens.first()?, tokens.last()?);
    if offsets[first].0 > start || offsets[last].1 < end {
        return None;
    }
    let start_token = tokens.iter().copied().take_while(|&t| offsets[t].0 <= start).last()?;
    let end_token = tokens.iter().copied().find(|&t| offsets[t].1 >= end)?;
    Some((start_token, end_token))
}

impl BatchSource for QaWindows {
    /// Held out: the batches that cover the windows once; training: without end.
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    fn metrics(&self) -> Option<Box<dyn Metrics + '_>> {
        Some(Box::new(SquadPredictions::new(self)))
    }

    /// Windows padded with the padding id (segment 0) to the batch's longest.
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked: Vec<&Window> = self.sampler.pick(index)?.into_iter().map(|i| &self.windows[i]).collect();
        let ids: Vec<&[u32]> = picked.iter().map(|w| w.ids.as_slice()).collect();
        let mut batch = Batch::padded(&ids, self.pad_id);
        batch.token_type_ids = Some(picked.iter().flat_map(|w| w.token_type_ids.iter().copied().chain(std::iter::repeat(0)).take(batch.seq)).collect());
        batch.start_positions = Some(picked.iter().map(|w| w.start).collect());
        batch.end_positions = Some(picked.iter().map(|w| w.end).collect());
        Ok(batch)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A WordPiece tokenizer whose words are those of the questions and contexts here.
    pub(in crate::train) fn tokenizer() -> TextTokenizer {
        let text = "where does the cat sit ? the cat sits on the mat . a dog ran in the park . who ran\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    const SQUAD: &str = r#"{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "the cat sits on the mat . a dog ran in the park .",
        "qas": [{"id": "q1", "question": "where does the cat sit ?", "answers": [{"text": "the mat", "answer_start": 16}]},
                {"id": "q2", "question": "who ran ?", "answers": [{"text": "a dog", "answer_start": 26}]}]}]}]}"#;

    #[test]
    fn squad_json_and_json_lines_give_the_same_examples() {
        let examples = squad_examples(SQUAD).unwrap();
        assert_eq!(examples.len(), 2);
        assert_eq!((examples[0].id.as_str(), examples[0].answer), ("q1", Some((16, 23))));
        let lines = r#"{"id": "q1", "question": "where does the cat sit ?", "context": "the cat sits on the mat . a dog ran in the park .", "answers": {"text": ["the mat"], "answer_start": [16]}}
{"id": "q2", "question": "who ran ?", "context": "the cat sits on the mat . a dog ran in the park .", "answers": {"text": ["a dog"], "answer_start": [26]}}
"#;
        assert_eq!(squad_examples(lines).unwrap(), examples);
        let unanswerable = r#"{"question": "who sat ?", "context": "a dog ran .", "answers": {"text": [], "answer_start": []}}"#;
        assert_eq!(squad_examples(unanswerable).unwrap()[0].answer, None);
        let listed = r#"{"question": "who ran ?", "context": "a dog ran .", "answers": [{"text": "a dog", "answer_start": 0}]}"#;
        assert_eq!(squad_examples(listed).unwrap()[0].answer, Some((0, 5)), "SQuAD's list of answers in a JSON line");
        // Characters, not bytes: "é" is one character (two bytes) before the answer.
        let accented = r#"{"question": "who ran ?", "context": "café : a dog ran .", "answers": {"text": ["a dog"], "answer_start": [7]}}"#;
        assert_eq!(squad_examples(accented).unwrap()[0].answer, Some((7, 12)));
    }

    #[test]
    fn a_window_labels_the_answer_tokens_or_cls() {
        let tokenizer = tokenizer();
        let examples = squad_examples(SQUAD).unwrap();
        let windows = QaWindows::new(examples.clone(), &tokenizer, 0, None, 2, 64, 8).unwrap();
        assert_eq!(windows.windows(), 2, "one window each");
        let batch = windows.batch(0).unwrap();
        let (starts, ends) = batch.span_positions().unwrap();
        let row = |b: usize| &batch.input_ids[b * batch.seq..(b + 1) * batch.seq];
        assert_eq!(tokenizer.decode(&row(0)[starts[0] as usize..=ends[0] as usize], true).unwrap(), "the mat");
        assert_eq!(tokenizer.decode(&row(1)[starts[1] as usize..=ends[1] as usize], true).unwrap(), "a dog");
        let types = batch.token_type_ids.as_ref().unwrap();
        assert_eq!(types[starts[0] as usize], 1, "the context is segment 1");
        assert_eq!(types[0], 0);
        // Offsets count characters: a two-byte "é" before the answer moves nothing.
        let accented =
            squad_examples(r#"{"question": "who ran ?", "context": "é é a dog ran .", "answers": {"text": ["a dog"], "answer_start": [4]}}"#).unwrap();
        let batch = QaWindows::new(accented, &tokenizer, 0, None, 1, 64, 8).unwrap().batch(0).unwrap();
        let (starts, ends) = batch.span_positions().unwrap();
        assert_eq!(tokenizer.decode(&batch.input_ids[starts[0] as usize..=ends[0] as usize], true).unwrap(), "a dog");

        // Windows of 6 context tokens sharing 2: the answer "a dog" (context tokens 7 and 8)
        // lies wholly in the window of tokens 4..10 and in 8..14 only in part.
        let windows = QaWindows::new(examples[1..].to_vec(), &tokenizer, 0, None, 8, 5 + 6 + 1, 2).unwrap();
        let batch = windows.batch(0).unwrap();
        let (starts, ends) = batch.span_positions().unwrap();
        assert_eq!(windows.windows(), 3, "context tokens 0..6, 4..10 and 8..14");
        assert_eq!((starts, ends), (&[0, 8, 0][..], &[0, 9, 0][..]), "the answer only where it is whole; the question takes 5 tokens");
    }

    #[test]
    fn bad_question_answering_data_is_an_error_naming_the_question() {
        let moved = SQUAD.replace("\"answer_start\": 16", "\"answer_start\": 17");
        let err = squad_examples(&moved).unwrap_err().to_string();
        assert!(err.contains("q1") && err.contains("\"the mat\""), "{err}");
        let err = squad_examples("{\"question\": \"who?\"}").unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("context"), "{err}");
        let err = squad_examples(r#"{"question": "who?", "context": "a dog", "answer": {"text": ["dog"]}}"#).unwrap_err().to_string();
        assert!(err.contains("no `answers`"), "a misspelled key is not an unanswerable question: {err}");
        let past = r#"{"id": "far", "question": "who?", "context": "a dog", "answers": {"text": ["dog"], "answer_start": [18446744073709551615]}}"#;
        assert!(squad_examples(past).unwrap_err().to_string().contains("far"));
        assert!(squad_examples("not json").unwrap_err().to_string().contains("line 1"));
        let err = QaWindows::new(squad_examples(SQUAD).unwrap(), &tokenizer(), 0, None, 2, 12, 8).unwrap_err().to_string();
        assert!(err.contains("q1") && err.contains("--doc-stride"), "{err}");
    }
}
