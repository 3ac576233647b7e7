//! Extractive question answering with a span head (`BertForQuestionAnswering`), answering as
//! transformers' `question-answering` pipeline does: softmax over start and end logits of the
//! context tokens, the best spans of at most `max_answer_len` tokens by start·end probability,
//! mapped back to the context's characters. The question and context must fit one window.

use crate::classify::{read_output, run_one, softmax};
use crate::error::{arg_err, Result};
use crate::models::auto::LoadedModel;

/// One answer: its probability, its span in the context (characters) and its text.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Answer {
    pub score: f32,
    pub start: usize,
    pub end: usize,
    pub answer: String,
}

/// The `top_k` best answers to `question` in `context`, best first.
pub async fn answer_question(loaded: &LoadedModel, question: &str, context: &str, top_k: usize, max_answer_len: usize) -> Result<Vec<Answer>> {
    let op = "question-answering";
    if loaded.model.head_config().architecture("") != "BertForQuestionAnswering" {
        return Err(arg_err!(op, "needs a BertForQuestionAnswering model, this one is `{}`", loaded.model.head_config().architecture("a bare encoder")));
    }
    if top_k == 0 || max_answer_len == 0 {
        return Err(arg_err!(op, "top_k and max_answer_len must be at least 1"));
    }
    let (encoded, out) = run_one(loaded, op, question, Some(context))?;
    let (start_logits, end_logits) = (read_output(&out, op, "start_logits").await?, read_output(&out, op, "end_logits").await?);
    // Candidate tokens: the context's, and [CLS] (which the pipeline keeps in the softmax but
    // never answers with, its probability being zeroed afterwards).
    let candidate: Vec<bool> = encoded.sequence_ids.iter().enumerate().map(|(i, s)| *s == Some(1) || i == 0).collect();
    let probabilities = |logits: &[f32]| {
        let masked: Vec<f32> = logits.iter().zip(&candidate).map(|(&l, &keep)| if keep { l } else { -10000.0 }).collect();
        let mut p = softmax(&masked);
        p[0] = 0.0;
        p
    };
    let (starts, ends) = (probabilities(&start_logits), probabilities(&end_logits));
    let mut spans = Vec::new();
    for s in (0..starts.len()).filter(|&s| candidate[s]) {
        for e in (s..(s + max_answer_len).min(ends.len())).filter(|&e| candidate[e]) {
            spans.push((starts[s] * ends[e], s, e));
        }
    }
    // Best first; among equals, the earlier span (the order of transformers' argmax).
    spans.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let chars: Vec<char> = context.chars().collect();
    Ok(spans
        .into_iter()
        .take(top_k)
        .map(|(score, s, e)| {
            let (start, end) = (encoded.offsets[s].0, encoded.offsets[e].1.min(chars.len()));
            Answer { score, start, end, answer: chars[start.min(end)..end].iter().collect() }
        })
        .collect())
}
