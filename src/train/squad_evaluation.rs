//! Question answering scored as SQuAD's official evaluation scores it: each question's answer
//! is the best span over all of its windows (transformers' run_qa.py post-processing), read
//! from the context's characters, and compared with every reference answer after
//! normalization (lower case, no ASCII punctuation, no articles, single spaces): exact match
//! and the F1 of the words, the best over the references.

use super::question_answering::QaWindows;
use crate::error::{arg_err, shape_err, Result};
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

/// Each question's best answer so far, fed one window's logits at a time.
pub struct SquadPredictions<'a> {
    windows: &'a QaWindows,
    /// Per question: the best span's start + end logit and its characters in the context.
    best: Vec<Option<(f32, (usize, usize))>>,
    /// Per question: the smallest "no answer" score ([CLS] start + end logit) of its windows.
    null: Vec<f32>,
    windows_seen: Vec<usize>,
    windows_total: Vec<usize>,
    /// Whether "no answer" may be predicted: only when the data has unanswerable questions
    /// (SQuAD 2.0; run_qa.py's `--version_2_with_negative`).
    allow_no_answer: bool,
}

impl<'a> SquadPredictions<'a> {
    pub fn new(windows: &'a QaWindows) -> SquadPredictions<'a> {
        let questions = windows.examples.len();
        let mut windows_total = vec![0; questions];
        for window in &windows.windows {
            windows_total[window.example] += 1;
        }
        SquadPredictions {
            windows,
            best: vec![None; questions],
            null: vec![f32::INFINITY; questions],
            windows_seen: vec![0; questions],
            windows_total,
            allow_no_answer: windows.examples.iter().any(|e| e.answer.is_none()),
        }
    }

    /// The start and end logits ([batch, seq] each) of batch `index` of the windows.
    pub fn add_batch(&mut self, index: u64, seq: usize, start_logits: &[f32], end_logits: &[f32]) -> Result<()> {
        for (row, window) in self.windows.batch_windows(index)?.into_iter().enumerate() {
            let rows = row * seq..(row + 1) * seq;
            let (Some(starts), Some(ends)) = (start_logits.get(rows.clone()), end_logits.get(rows)) else {
                return Err(shape_err!(OP, "{} logits for a batch of {} windows × {seq} tokens", start_logits.len().min(end_logits.len()), row + 1));
            };
            self.add(window, starts, ends)?;
        }
        Ok(())
    }

    /// One window's start and end logits (rows of at least its length; padding after it is
    /// ignored). Spans start and end in the context, at most [`MAX_ANSWER_TOKENS`] long, and
    /// score the sum of their start and end logits; the first of equals wins.
    pub fn add(&mut self, window: usize, start_logits: &[f32], end_logits: &[f32]) -> Result<()> {
        let window = self.windows.windows.get(window).ok_or_else(|| arg_err!(OP, "no window {window}"))?;
        let offsets = &window.context_offsets;
        if start_logits.len() < offsets.len() || end_logits.len() < offsets.len() {
            return Err(shape_err!(OP, "{} logits for a window of {} tokens", start_logits.len().min(end_logits.len()), offsets.len()));
        }
        let question = window.example;
        self.null[question] = self.null[question].min(start_logits[0] + end_logits[0]);
        let best = &mut self.best[question];
        for (start, &(first, _)) in offsets.iter().enumerate().filter_map(|(i, o)| Some((i, o.as_ref()?))) {
            // Context tokens are consecutive: the first token outside ends the candidates.
            for end in start..(start + MAX_ANSWER_TOKENS).min(offsets.len()) {
                let Some((_, last)) = offsets[end] else { break };
                let score = start_logits[start] + end_logits[end];
                if best.is_none_or(|(top, _)| score > top) {
                    *best = Some((score, (first, last)));
                }
            }
        }
        self.windows_seen[question] += 1;
        Ok(())
    }

    /// Each fully seen question's predicted answer text ("" for no answer), by id.
    pub fn answers(&self) -> HashMap<&'a str, String> {
        let examples = &self.windows.examples;
        (0..examples.len())
            .filter(|&q| self.windows_seen[q] == self.windows_total[q])
            .map(|q| {
                let text = match self.best[q] {
                    Some((score, _)) if self.allow_no_answer && self.null[q] > score => String::new(),
                    Some((_, (first, last))) => examples[q].context.chars().skip(first).take(last.saturating_sub(first)).collect(),
                    None => String::new(),
                };
                (examples[q].id.as_str(), text)
            })
            .collect()
    }

    /// Exact match and F1 over the fully seen questions.
    pub fn scores(&self) -> SquadScores {
        let answers = self.answers();
        let (mut exact, mut f1) = (0.0, 0.0);
        for example in self.windows.examples.iter().filter(|e| answers.contains_key(e.id.as_str())) {
            let predicted = &answers[example.id.as_str()];
            let (e, f) = score_answer(predicted, &example.answers);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::TextTokenizer;
    use crate::train::question_answering::squad_examples;

    #[test]
    fn answers_are_normalized_as_squad_normalizes_them() {
        assert_eq!(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
        assert_eq!(normalize_answer("a theory, an idea"), "theory idea", "articles go, words containing them stay");
        assert_eq!(normalize_answer("Denver Broncos."), "denver broncos");
        assert_eq!(normalize_answer("the’s"), "’s", "’ is not ASCII punctuation and ends a word, as Python's \\b sees it");
        assert_eq!(normalize_answer("1,000"), "1000");
        assert_eq!(normalize_answer(" The "), "");
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

    fn tokenizer() -> TextTokenizer {
        let text = "where does the cat sit ? the cat sits on the mat . a dog ran in the park . who ran\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    /// Logits of a window that favour `start` and `end` by 5 and are 0 elsewhere.
    fn peaked(length: usize, start: usize, end: usize) -> (Vec<f32>, Vec<f32>) {
        let row = |at: usize| (0..length).map(|i| if i == at { 5.0 } else { 0.0 }).collect();
        (row(start), row(end))
    }

    #[test]
    fn each_question_answers_with_its_best_span_over_its_windows() {
        let squad = r#"{"id": "q1", "question": "who ran ?", "context": "the cat sits on the mat . a dog ran in the park .", "answers": {"text": ["a dog", "dog"], "answer_start": [26, 28]}}
{"id": "q2", "question": "where does the cat sit ?", "context": "the cat sits on the mat .", "answers": {"text": ["the mat"], "answer_start": [16]}}"#;
        let examples = squad_examples(squad).unwrap();
        assert_eq!(examples[0].answers, ["a dog", "dog"]);
        // q1 in windows of 6 context tokens sharing 2: context tokens 0..6, 4..10 and 8..14
        // after its 5 question tokens.
        let windows = QaWindows::new(&examples[..1], &tokenizer(), 0, None, 8, 5 + 6 + 1, 2).unwrap();
        assert_eq!(windows.windows(), 3);
        let mut predictions = SquadPredictions::new(&windows);
        // Window 0 offers "on the" (context tokens 3 and 4, at 8 and 9) at 10; window 1 "dog"
        // (context token 8, at 9) at 12, the better.
        let (starts, ends) = peaked(12, 8, 9);
        predictions.add(0, &starts, &ends).unwrap();
        let (mut starts, mut ends) = peaked(12, 9, 9);
        starts[9] = 6.0;
        ends[9] = 6.0;
        predictions.add(1, &starts, &ends).unwrap();
        assert!(predictions.answers().is_empty(), "q1 is not complete until its last window");
        let (starts, ends) = peaked(12, 0, 0);
        predictions.add(2, &starts, &ends).unwrap();
        assert_eq!(predictions.answers()["q1"], "dog", "[CLS] is never the answer when every question has one");
        assert_eq!(predictions.scores(), SquadScores { exact_match: 1.0, f1: 1.0, questions: 1 }, "\"dog\" is one of the references");

        // q2 alone, one window: [CLS] where does the cat sit ? [SEP] (0..8), then the(8) cat
        // sits on the(12) mat(13) .(14) [SEP](15), then padding.
        let windows = QaWindows::new(&examples[1..], &tokenizer(), 0, None, 8, 32, 4).unwrap();
        assert_eq!(windows.windows[0].context_offsets.len(), 16);
        let mut predictions = SquadPredictions::new(&windows);
        let (mut starts, mut ends) = peaked(20, 12, 13);
        // Higher logits outside the context (the question, [SEP], padding) are not spans.
        (starts[3], starts[15], starts[17], ends[15], ends[17]) = (9.0, 9.0, 20.0, 9.0, 20.0);
        predictions.add(0, &starts, &ends).unwrap();
        assert_eq!(predictions.answers()["q2"], "the mat");
        assert_eq!(predictions.scores().questions, 1);
        assert!(predictions.add(1, &starts, &ends).is_err(), "no such window");
        assert!(predictions.add(0, &starts[..3], &ends).is_err(), "logits shorter than the window");
    }
    #[test]
    fn no_answer_is_predicted_only_for_squad_2_data() {
        let squad = r#"{"id": "q1", "question": "who ran ?", "context": "a dog ran .", "answers": {"text": [], "answer_start": []}}
{"id": "q2", "question": "who ran ?", "context": "a dog ran .", "answers": {"text": ["a dog"], "answer_start": [0]}}"#;
        let examples = squad_examples(squad).unwrap();
        let windows = QaWindows::new(&examples, &tokenizer(), 0, None, 8, 32, 4).unwrap();
        let mut predictions = SquadPredictions::new(&windows);
        let (starts, ends) = peaked(windows.windows[0].context_offsets.len(), 0, 0);
        predictions.add(0, &starts, &ends).unwrap();
        predictions.add(1, &starts, &ends).unwrap();
        assert_eq!((predictions.answers()["q1"].as_str(), predictions.answers()["q2"].as_str()), ("", ""));
        assert_eq!(predictions.scores(), SquadScores { exact_match: 0.5, f1: 0.5, questions: 2 });
        // The same logits without the unanswerable question: the best span instead.
        let windows = QaWindows::new(&examples[1..], &tokenizer(), 0, None, 8, 32, 4).unwrap();
        let mut predictions = SquadPredictions::new(&windows);
        predictions.add(0, &starts, &ends).unwrap();
        assert_ne!(predictions.answers()["q2"], "");
    }
}
