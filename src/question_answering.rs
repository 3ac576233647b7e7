//! Extractive question answering with a span head (`BertForQuestionAnswering`), answering as
//! transformers' `question-answering` pipeline does: a context longer than one window is read
//! in overlapping windows (`[CLS] question [SEP] part of the context [SEP]`, as the tokenizer's
//! `truncation="only_second"` with a `stride` makes them); in each window a softmax over the
//! start and end logits of the context tokens (and `[CLS]`); the best spans of at most
//! `max_answer_len` tokens over all windows by start·end probability, mapped back to the
//! context's characters.

use std::ops::Range;

use crate::classify::softmax;
use crate::error::{arg_err, Result};
use crate::models::auto::{non_empty, LoadedModel};
use crate::models::{Capability, ForwardOptions, Forwarded};
use crate::tokenize::Encoded;

/// One answer: its probability, its span in the context (characters) and its text.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Answer {
    pub score: f32,
    pub start: usize,
    pub end: usize,
    pub answer: String,
}

/// How [`answer_question`] answers; the defaults are transformers' pipeline's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QaOptions {
    /// How many answers, best first.
    pub top_k: usize,
    /// The longest answer, in tokens.
    pub max_answer_len: usize,
    /// The longest window, in tokens (capped at the model's positions).
    pub max_seq_len: usize,
    /// How many context tokens consecutive windows share; by default half a window, at most
    /// 128. It must leave each window more context than that, unless one window holds all
    /// of it (transformers checks that even then).
    pub doc_stride: Option<usize>,
}

impl Default for QaOptions {
    fn default() -> QaOptions {
        QaOptions { top_k: 1, max_answer_len: 15, max_seq_len: 384, doc_stride: None }
    }
}

/// A question with its context (an encoded pair) cut into windows of at most `seq` tokens:
/// each keeps the tokens before the context (`[CLS] question [SEP]`) and after it (`[SEP]`)
/// and holds a run of the context's tokens, consecutive runs sharing `doc_stride` tokens
/// (which must leave each window more than that, unless one window holds the whole context).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ContextWindows {
    /// How many tokens come before the context: where its tokens start in every window.
    pub prefix: usize,
    /// The encoding's indices of the context tokens.
    pub context: Vec<usize>,
    /// The encoding's indices after the context.
    pub after: Range<usize>,
    /// Each window's run of `context`.
    pub runs: Vec<Range<usize>>,
}

/// Why a pair cannot be cut into windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum WindowError {
    NoContext,
    /// The tokens around the context fill the window.
    NoRoom {
        around: usize,
    },
    /// The tokens around the context leave `room` for it, not more than the stride.
    QuestionTooLong {
        around: usize,
        room: usize,
    },
}

impl ContextWindows {
    pub fn new(encoded: &Encoded, seq: usize, doc_stride: usize) -> Result<ContextWindows, WindowError> {
        let context: Vec<usize> = (0..encoded.ids.len()).filter(|&i| encoded.sequence_ids[i] == Some(1)).collect();
        let (Some(&first), Some(&last)) = (context.first(), context.last()) else {
            return Err(WindowError::NoContext);
        };
        let around = first + encoded.ids.len() - 1 - last;
        let room = seq.saturating_sub(around);
        if room == 0 {
            return Err(WindowError::NoRoom { around });
        }
        if room < context.len() && room <= doc_stride {
            return Err(WindowError::QuestionTooLong { around, room });
        }
        let mut runs = Vec::new();
        let mut from = 0;
        loop {
            let to = (from + room).min(context.len());
            runs.push(from..to);
            if to == context.len() {
                return Ok(ContextWindows { prefix: first, context, after: last + 1..encoded.ids.len(), runs });
            }
            from = to - doc_stride;
        }
    }

    /// The encoding's index of context position `position` of window `w`.
    pub fn encoding_index(&self, w: usize, position: usize) -> usize {
        self.context[self.runs[w].start + position - self.prefix]
    }

    /// Where the encoding's context token `index` sits in window `w` (the inverse of
    /// [`ContextWindows::encoding_index`]). Training's labels use it.
    #[cfg(feature = "training")]
    pub fn window_position(&self, w: usize, index: usize) -> usize {
        index - self.context[self.runs[w].start] + self.prefix
    }

    /// The encoding's indices of window `w`'s tokens, in order.
    pub fn tokens(&self, w: usize) -> Vec<usize> {
        (0..self.prefix).chain(self.context[self.runs[w].clone()].iter().copied()).chain(self.after.clone()).collect()
    }
}

/// How many windows of a long context run through the model at once.
const WINDOWS_PER_BATCH: usize = 16;

/// Spans (score, window, start, end) best first; among equals, the earlier window, then the
/// earlier span.
fn best_first(a: &(f32, usize, usize, usize), b: &(f32, usize, usize, usize)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3)))
}

/// The best answers to `question` in `context`, best first: at most `top_k`, fewer when the
/// context holds fewer spans.
pub async fn answer_question(loaded: &LoadedModel, question: &str, context: &str, options: &QaOptions) -> Result<Vec<Answer>> {
    let op = "question-answering";
    loaded.model.require(Capability::QuestionAnswering, op)?;
    if options.top_k == 0 || options.max_answer_len == 0 {
        return Err(arg_err!(op, "top_k and max_answer_len must be at least 1"));
    }
    non_empty(op, question)?;
    non_empty(op, context)?;
    // Every token, whether or not the model truncates texts: long contexts are read in windows.
    let encoded = loaded.tokenizer()?.encode_detailed_whole(question, Some(context))?;
    let seq = options.max_seq_len.min(loaded.model.max_positions());
    let doc_stride = options.doc_stride.unwrap_or((seq / 2).min(128));
    let windows = ContextWindows::new(&encoded, seq, doc_stride).map_err(|e| match e {
        WindowError::NoContext => arg_err!(op, "the context has no tokens"),
        WindowError::NoRoom { around } => arg_err!(op, "the question and special tokens take {around} tokens, which leaves no room for the context in a {seq}-token window"),
        WindowError::QuestionTooLong { around, room } => {
            arg_err!(op, "the question and special tokens take {around} of a {seq}-token window, which leaves {room} for the context, not more than the doc_stride of {doc_stride} that windows share")
        }
    })?;
    // Windows in groups of WINDOWS_PER_BATCH, each padded to its longest; the spans of each
    // as (score, window, start, end), positions the window's.
    let mut spans = Vec::new();
    for group in (0..windows.runs.len()).collect::<Vec<_>>().chunks(WINDOWS_PER_BATCH) {
        let rows: Vec<(Vec<u32>, Vec<u32>)> = group
            .iter()
            .map(|&w| {
                let tokens = windows.tokens(w);
                (tokens.iter().map(|&i| encoded.ids[i]).collect(), tokens.iter().map(|&i| encoded.type_ids[i]).collect())
            })
            .collect();
        let batch = loaded.batch(&rows);
        let longest = batch.seq;
        let out = Forwarded::run(&*loaded.model, batch, ForwardOptions::default())?;
        let (start_logits, end_logits) = (out.read(op, "start_logits").await?, out.read(op, "end_logits").await?);
        for (row, &w) in group.iter().enumerate() {
            let rows = row * longest..(row + 1) * longest;
            let context_positions = windows.prefix..windows.prefix + windows.runs[w].len();
            let (starts, ends) =
                (window_probabilities(&start_logits[rows.clone()], &context_positions), window_probabilities(&end_logits[rows], &context_positions));
            let mut window_spans = Vec::new();
            for s in context_positions.clone() {
                let last = s.saturating_add(options.max_answer_len).min(context_positions.end);
                for (e, end_probability) in ends.iter().enumerate().take(last).skip(s) {
                    window_spans.push((starts[s] * end_probability, w, s, e));
                }
            }
            // A window's best top_k are all that can make the overall top_k.
            window_spans.sort_by(best_first);
            window_spans.truncate(options.top_k);
            spans.extend(window_spans);
        }
    }
    spans.sort_by(best_first);
    let chars: Vec<char> = context.chars().collect();
    Ok(spans
        .into_iter()
        .take(options.top_k)
        .map(|(score, w, s, e)| {
            let offset = |position: usize| encoded.offsets[windows.encoding_index(w, position)];
            let (start, end) = (offset(s).0, offset(e).1.min(chars.len()));
            Answer { score, start, end, answer: chars[start.min(end)..end].iter().collect() }
        })
        .collect())
}

/// One window's start (or end) probabilities: a softmax over its context tokens and [CLS]
/// (which the pipeline keeps in the softmax but never answers with, its probability being
/// zeroed afterwards); padding and the question get none.
fn window_probabilities(logits: &[f32], context: &Range<usize>) -> Vec<f32> {
    let masked: Vec<f32> = logits.iter().enumerate().map(|(i, &l)| if i == 0 || context.contains(&i) { l } else { -10000.0 }).collect();
    let mut p = softmax(&masked);
    p[0] = 0.0;
    p
}
