//! Question answering scored as SQuAD's official evaluation scores it: each question's answer
//! is the best span over all of its windows (transformers' run_qa.py post-processing), read
//! from the context's characters, and compared with every reference answer after
//! normalization (lower case, no ASCII punctuation, no articles, single spaces): exact match
//! and the F1 of the words, the best over the references.

use super::QaWindows;
use crate::error::{arg_err, shape_err, Result};
use crate::models::training::Batch;
use crate::train::data::Metrics;
use std::collections::HashMap;

const OP: &str = "question-answering evaluation";

/// The longest answer considered, in tokens (run_qa.py's `max_answer_length`).
pub const MAX_ANSWER_TOKENS: usize = 30;

/// The scores over the questions whose windows were all seen, as fractions (SQuAD's script
/// prints them ×100).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SquadScores {
    pub exact_match: f32,
    pub f1: f32,
    pub questions: usize,
}

/// What is known of one question's answer so far.
#[derive(Clone, Debug)]
struct Question {
    /// The best span's start + end logit and its characters in the context.
    best: Option<(f32, (usize, usize))>,
    /// The smallest "no answer" score ([CLS] start + end logit) of its windows.
    no_answer: f32,
    windows_left: usize,
}

/// Each question's best answer so far, fed one window's logits at a time.
pub struct SquadPredictions<'a> {
    windows: &'a QaWindows,
    questions: Vec<Question>,
    window_seen: Vec<bool>,
    /// Whether "no answer" may be predicted: only when the data has unanswerable questions
    /// (SQuAD 2.0; run_qa.py's `--version_2_with_negative`).
    allow_no_answer: bool,
}

impl<'a> SquadPredictions<'a> {
    pub fn new(windows: &'a QaWindows) -> SquadPredictions<'a> {
        let mut questions = vec![Question { best: None, no_answer: f32::INFINITY, windows_left: 0 }; windows.examples.len()];
        for window in &windows.windows {
            questions[window.example].windows_left += 1;
        }
        SquadPredictions {
            windows,
            questions,
            window_seen: vec![false; windows.windows.len()],
            allow_no_answer: windows.examples.iter().any(|e| e.answer.is_none()),
        }
    }

    /// The start and end logits ([batch, seq] each) of batch `index` of the windows.
    pub fn add_batch(&mut self, index: u64, seq: usize, start_logits: &[f32], end_logits: &[f32]) -> Result<()> {
        let windows = self.windows.batch_windows(index)?;
        if start_logits.len() != windows.len() * seq || end_logits.len() != windows.len() * seq {
            return Err(shape_err!(
                OP,
                "{} start and {} end logits for a batch of {} windows × {seq} tokens",
                start_logits.len(),
                end_logits.len(),
                windows.len()
            ));
        }
        for (row, window) in windows.into_iter().enumerate() {
            let rows = row * seq..(row + 1) * seq;
            self.add(window, &start_logits[rows.clone()], &end_logits[rows])?;
        }
        Ok(())
    }

    /// One window's start and end logits (rows of at least its length; padding after it is
    /// ignored). Spans start and end in the context, are at most [`MAX_ANSWER_TOKENS`] long
    /// and not empty text, and score the sum of their start and end logits; the first of
    /// equals wins.
    pub fn add(&mut self, index: usize, start_logits: &[f32], end_logits: &[f32]) -> Result<()> {
        let window = self.windows.windows.get(index).ok_or_else(|| arg_err!(OP, "no window {index}"))?;
        let length = window.context_position + window.context.len() + 1;
        if start_logits.len() < length || end_logits.len() < length {
            return Err(shape_err!(OP, "{} logits for a window of {length} tokens", start_logits.len().min(end_logits.len())));
        }
        if std::mem::replace(&mut self.window_seen[index], true) {
            return Err(arg_err!(OP, "window {index} was scored twice"));
        }
        let question = &mut self.questions[window.example];
        question.no_answer = question.no_answer.min(start_logits[0] + end_logits[0]);
        question.windows_left -= 1;
        // Window positions from `context_position` on hold the context tokens in `offsets`.
        let offsets = &self.windows.context_offsets[window.example][window.context.clone()];
        for (start, &(first, _)) in offsets.iter().enumerate() {
            for (end, &(_, last)) in offsets.iter().enumerate().skip(start).take(MAX_ANSWER_TOKENS) {
                let score = start_logits[window.context_position + start] + end_logits[window.context_position + end];
                if last > first && question.best.is_none_or(|(top, _)| score > top) {
                    question.best = Some((score, (first as usize, last as usize)));
                }
            }
        }
        Ok(())
    }

    /// Each fully seen question's predicted answer text ("" for no answer), in the examples'
    /// order, with its index there.
    pub fn answers(&self) -> Vec<(usize, String)> {
        let examples = &self.windows.examples;
        let whole = self.questions.iter().enumerate().filter(|(_, q)| q.windows_left == 0);
        whole
            .map(|(index, question)| {
                let text = match question.best {
                    Some((score, _)) if self.allow_no_answer && question.no_answer > score => String::new(),
                    Some((_, (first, last))) => examples[index].context.chars().skip(first).take(last - first).collect(),
                    None => String::new(),
                };
                (index, text)
            })
            .collect()
    }

    /// Exact match and F1 over the fully seen questions.
    pub fn scores(&self) -> SquadScores {
        let answers = self.answers();
        let (mut exact, mut f1) = (0.0, 0.0);
        for (index, predicted) in &answers {
            let (e, f) = score_answer(predicted, &self.windows.examples[*index].answers);
            exact += e;
            f1 += f;
        }
        let questions = answers.len();
        SquadScores { exact_match: exact / questions.max(1) as f32, f1: f1 / questions.max(1) as f32, questions }
    }
}

/// SQuAD's normalization: lower case, ASCII punctuation removed, the words "a", "an" and
/// "the" removed, whitespace collapsed to single spaces.
pub fn normalize_answer(text: &str) -> String {
    let unpunctuated: String = text.to_lowercase().chars().filter(|c| !c.is_ascii_punctuation()).collect();
    // Articles are whole words: runs of word characters (Python's \w) between non-word ones.
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut without_articles = String::new();
    let mut rest = unpunctuated.as_str();
    while let Some(c) = rest.chars().next() {
        let run = rest.find(|d: char| is_word(d) != is_word(c)).unwrap_or(rest.len());
        let (piece, after) = rest.split_at(run);
        without_articles.push_str(if matches!(piece, "a" | "an" | "the") { " " } else { piece });
        rest = after;
    }
    without_articles.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Exact match and word F1 of one answer against one reference.
fn compare(predicted: &str, reference: &str) -> (f32, f32) {
    let (predicted, reference) = (normalize_answer(predicted), normalize_answer(reference));
    let exact = (predicted == reference) as u8 as f32;
    let (predicted, reference): (Vec<&str>, Vec<&str>) = (predicted.split_whitespace().collect(), reference.split_whitespace().collect());
    if predicted.is_empty() || reference.is_empty() {
        return (exact, (predicted == reference) as u8 as f32);
    }
    let mut reference_counts: HashMap<&str, usize> = HashMap::new();
    for word in &reference {
        *reference_counts.entry(word).or_default() += 1;
    }
    let mut common = 0;
    for word in &predicted {
        if let Some(count) = reference_counts.get_mut(word).filter(|c| **c > 0) {
            *count -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return (exact, 0.0);
    }
    let (precision, recall) = (common as f32 / predicted.len() as f32, common as f32 / reference.len() as f32);
    (exact, 2.0 * precision * recall / (precision + recall))
}

/// The best exact match and F1 of an answer over the references. As SQuAD 2.0's script does,
/// references that normalize to nothing are dropped, and a question without any is answered
/// correctly only by "".
pub fn score_answer(predicted: &str, references: &[String]) -> (f32, f32) {
    let mut kept: Vec<&str> = references.iter().map(String::as_str).filter(|r| !normalize_answer(r).is_empty()).collect();
    if kept.is_empty() {
        kept.push("");
    }
    kept.iter().map(|r| compare(predicted, r)).fold((0.0, 0.0), |(e, f), (e2, f2)| (e.max(e2), f.max(f2)))
}

/// Held-out question answering scores each question's answer as SQuAD's evaluation does.
impl Metrics for SquadPredictions<'_> {
    fn outputs(&self) -> &'static [&'static str] {
        &["start_logits", "end_logits"]
    }

    fn add(&mut self, index: u64, batch: &Batch, outputs: &[Vec<f32>]) -> Result<()> {
        let [start, end] = outputs else { return Err(arg_err!(OP, "{} outputs given for the start and end logits", outputs.len())) };
        self.add_batch(index, batch.seq, start, end)
    }

    fn metrics(&self) -> Result<Vec<(&'static str, f32)>> {
        let scores = Some(self.scores())
            .filter(|s| s.questions > 0)
            .ok_or_else(|| arg_err!("train", "no question had all its windows evaluated: raise --eval-batches"))?;
        Ok(vec![("eval_exact_match", scores.exact_match), ("eval_f1", scores.f1)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::question_answering::squad_examples;
    use crate::train::question_answering::tests::tokenizer;

    #[test]
    fn answers_are_normalized_as_squad_normalizes_them() {
        assert_eq!(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
        assert_eq!(normalize_answer("a theory, an idea"), "theory idea", "articles go, words containing them stay");
        assert_eq!(normalize_answer("Denver Broncos."), "denver broncos");
        assert_eq!(normalize_answer("the’s"), "’s", "’ is not ASCII punctuation and ends a word, as Python's \\b sees it");
        assert_eq!(normalize_answer("1,000"), "1000");
        assert_eq!(normalize_answer(" The "), "");
        assert_eq!(normalize_answer("an apple, the1"), "apple the1");
    }

    #[test]
    fn exact_match_and_f1_take_the_best_reference() {
        let references = ["Denver Broncos".to_string(), "the Denver Broncos".to_string(), "Broncos".to_string()];
        assert_eq!(score_answer("denver broncos!", &references), (1.0, 1.0));
        // "Broncos team": against "Broncos" precision 1/2, recall 1 → F1 2/3.
        let (exact, f1) = score_answer("Broncos team", &references);
        assert_eq!(exact, 0.0);
        assert!((f1 - 2.0 / 3.0).abs() < 1e-6, "{f1}");
        // Repeated words count once per occurrence in the reference.
        let (_, f1) = score_answer("the cat cat cat", &["cat sat".to_string()]);
        assert!((f1 - 2.0 * (1.0 / 3.0) * 0.5 / (1.0 / 3.0 + 0.5)).abs() < 1e-6, "{f1}");
        assert_eq!(score_answer("", &[]), (1.0, 1.0), "unanswerable, and no answer given");
        assert_eq!(score_answer("Broncos", &[]), (0.0, 0.0));
        assert_eq!(score_answer("", &references), (0.0, 0.0));
        assert_eq!(score_answer("", &["the".to_string()]), (1.0, 1.0), "a reference that normalizes to nothing is dropped");
    }

    /// Logits of a window that favour `start` and `end` by 5 and are 0 elsewhere.
    fn peaked(length: usize, start: usize, end: usize) -> (Vec<f32>, Vec<f32>) {
        let row = |at: usize| (0..length).map(|i| if i == at { 5.0 } else { 0.0 }).collect();
        (row(start), row(end))
    }

    fn answer(predictions: &SquadPredictions, index: usize) -> Option<String> {
        predictions.answers().into_iter().find(|(i, _)| *i == index).map(|(_, text)| text)
    }

    const TWO_QUESTIONS: &str = r#"{"id": "q1", "question": "who ran ?", "context": "the cat sits on the mat . a dog ran in the park .", "answers": {"text": ["a dog", "dog"], "answer_start": [26, 28]}}
{"id": "q1", "question": "where does the cat sit ?", "context": "the cat sits on the mat .", "answers": {"text": ["the mat"], "answer_start": [16]}}"#;

    #[test]
    fn each_question_answers_with_its_best_span_over_its_windows() {
        let examples = squad_examples(TWO_QUESTIONS).unwrap();
        assert_eq!(examples[0].answers, ["a dog", "dog"]);
        // The first question in windows of 6 context tokens sharing 2: context tokens 0..6,
        // 4..10 and 8..14 after its 5 question tokens; the second question after them, in
        // windows of 3 after its 8 question tokens.
        let windows = QaWindows::new(examples, &tokenizer(), 0, None, 8, 5 + 6 + 1, 2).unwrap();
        assert_eq!(windows.windows[..4].iter().map(|w| (w.example, w.context.clone())).collect::<Vec<_>>(), [(0, 0..6), (0, 4..10), (0, 8..14), (1, 0..3)]);
        assert_eq!((windows.questions_within(2), windows.questions_within(3), windows.questions_within(4)), (0, 1, 1));
        let mut predictions = SquadPredictions::new(&windows);
        // Window 0 offers "on the" (context tokens 3 and 4, at 8 and 9) at 10; window 1 "dog"
        // (context token 8, at 9) at 12, the better.
        let (starts, ends) = peaked(12, 8, 9);
        predictions.add(0, &starts, &ends).unwrap();
        let (mut starts, mut ends) = peaked(12, 9, 9);
        (starts[9], ends[9]) = (6.0, 6.0);
        predictions.add(1, &starts, &ends).unwrap();
        assert_eq!(answer(&predictions, 0), None, "not complete until its last window");
        // [CLS] at 20 in the last window: still a span, there being no unanswerable question.
        let (starts, ends) = peaked(12, 0, 0);
        let (starts, ends) = (starts.iter().map(|l| l * 2.0).collect::<Vec<_>>(), ends.iter().map(|l| l * 2.0).collect::<Vec<_>>());
        predictions.add(2, &starts, &ends).unwrap();
        assert_eq!(answer(&predictions, 0).as_deref(), Some("dog"));
        assert!(predictions.add(2, &starts, &ends).is_err(), "a window scored twice");
        // The second question (the same id: questions are told apart by position) is not
        // complete, so it is not scored.
        assert_eq!(predictions.scores(), SquadScores { exact_match: 1.0, f1: 1.0, questions: 1 }, "\"dog\" is one of the references");
        assert!(predictions.add(windows.windows(), &starts, &ends).is_err(), "no such window");
        assert!(predictions.add(3, &starts[..3], &ends).is_err(), "logits shorter than the window");
    }

    #[test]
    fn spans_lie_in_the_context_and_are_at_most_30_tokens() {
        // [CLS] where does the cat sit ? [SEP] (0..8), then the(8) cat sits on the(12) mat(13)
        // .(14) [SEP](15), then padding; in batches of two windows of 20 positions.
        let examples = squad_examples(TWO_QUESTIONS).unwrap()[1..].to_vec();
        let windows = QaWindows::new(vec![examples[0].clone(), examples[0].clone()], &tokenizer(), 0, None, 2, 32, 4).unwrap();
        let mut predictions = SquadPredictions::new(&windows);
        let (mut starts, mut ends) = peaked(20, 12, 13);
        // Higher logits outside the context (the question, [SEP], padding) are not spans.
        (starts[3], starts[15], starts[17], ends[15], ends[17]) = (9.0, 9.0, 20.0, 9.0, 20.0);
        let (second_starts, second_ends) = peaked(20, 8, 9);
        assert!(predictions.add_batch(0, 20, &starts, &ends).is_err(), "one window's logits for a batch of two");
        predictions.add_batch(0, 20, &[starts, second_starts].concat(), &[ends, second_ends].concat()).unwrap();
        assert_eq!(predictions.answers(), [(0, "the mat".to_string()), (1, "the cat".to_string())]);

        // A context of 40 words: spans of 30 tokens are candidates, of 31 not.
        let context = "the cat sits on the mat . ".repeat(6) + "a dog ran in the park";
        let long = format!(
            r#"{{"question": "who ran ?", "context": "{context}", "answers": {{"text": ["a dog"], "answer_start": [{}]}}}}"#,
            context.find("a dog").unwrap()
        );
        let windows = QaWindows::new(squad_examples(&long).unwrap(), &tokenizer(), 0, None, 1, 64, 8).unwrap();
        assert_eq!(windows.windows(), 1);
        let length = 5 + 48 + 1;
        for (end, expected) in [(5 + 29, 0..30), (5 + 30, 1..31)] {
            let mut predictions = SquadPredictions::new(&windows);
            let (mut starts, ends) = peaked(length, 5, end);
            starts[6] = 4.0;
            predictions.add(0, &starts, &ends).unwrap();
            let offsets = &windows.context_offsets[0];
            let want: String =
                context.chars().skip(offsets[expected.start].0 as usize).take((offsets[expected.end - 1].1 - offsets[expected.start].0) as usize).collect();
            assert_eq!(predictions.answers()[0].1, want, "the end {} tokens after the start", end - 5);
        }
    }

    #[test]
    fn no_answer_is_predicted_only_for_squad_2_data() {
        let squad = r#"{"id": "q1", "question": "who ran ?", "context": "a dog ran .", "answers": {"text": [], "answer_start": []}}
{"id": "q2", "question": "who ran ?", "context": "a dog ran .", "answers": {"text": ["a dog"], "answer_start": [0]}}"#;
        let examples = squad_examples(squad).unwrap();
        let windows = QaWindows::new(examples.clone(), &tokenizer(), 0, None, 8, 32, 4).unwrap();
        let mut predictions = SquadPredictions::new(&windows);
        let (starts, ends) = peaked(10, 0, 0);
        predictions.add(0, &starts, &ends).unwrap();
        predictions.add(1, &starts, &ends).unwrap();
        assert_eq!(predictions.answers(), [(0, String::new()), (1, String::new())]);
        assert_eq!(predictions.scores(), SquadScores { exact_match: 0.5, f1: 0.5, questions: 2 });
        // The same logits without the unanswerable question: the best span instead.
        let windows = QaWindows::new(examples[1..].to_vec(), &tokenizer(), 0, None, 8, 32, 4).unwrap();
        let mut predictions = SquadPredictions::new(&windows);
        predictions.add(0, &starts, &ends).unwrap();
        assert_eq!(predictions.answers(), [(0, "a".to_string())], "the first of equal spans");
    }

    #[test]
    fn no_answer_scores_the_smallest_cls_score_of_the_windows() {
        // An unanswerable question over two windows (context tokens 0..6 and 4..10 after 5
        // question tokens): [CLS] scores 20 in the first and 2 in the second, the best span 10.
        let squad = r#"{"question": "who ran ?", "context": "the cat sits on the mat . a dog", "answers": {"text": [], "answer_start": []}}"#;
        let windows = QaWindows::new(squad_examples(squad).unwrap(), &tokenizer(), 0, None, 8, 5 + 6 + 1, 2).unwrap();
        assert_eq!(windows.windows(), 2);
        let score = |cls: f32| {
            let mut predictions = SquadPredictions::new(&windows);
            let (mut starts, mut ends) = peaked(12, 6, 6);
            (starts[0], ends[0]) = (10.0, 10.0);
            predictions.add(0, &starts, &ends).unwrap();
            let (mut starts, mut ends) = (vec![0.0; 12], vec![0.0; 12]);
            (starts[0], ends[0]) = (cls / 2.0, cls / 2.0);
            predictions.add(1, &starts, &ends).unwrap();
            predictions.answers()[0].1.clone()
        };
        assert_eq!(score(2.0), "cat", "min(20, 2) < 10");
        assert_eq!(score(12.0), "", "min(20, 12) > 10");
    }
}
