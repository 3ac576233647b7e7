//! Held-out evaluation during a run: the mean loss and each objective's metrics.

use sesame::error::{Result, SesameError};
use sesame::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use sesame::ops::elementwise;
use sesame::tensor::Tensor;
use sesame::train::data::BatchSource;
use sesame::train::objective::{Objective, TrainModel};

/// The index of the largest value (the first of equals).
fn argmax(row: &[f32]) -> usize {
    row.iter().enumerate().fold(0, |best, (i, &v)| if v > row[best] { i } else { best })
}

/// The F1 of a predicted answer span against the true one, over their tokens (both
/// inclusive; a span that ends before it starts is empty). (0, 0), the [CLS] token, is "no
/// answer here": it scores 1 against itself and 0 against any span.
fn span_f1(predicted: (usize, usize), gold: (usize, usize)) -> f32 {
    if predicted == (0, 0) || gold == (0, 0) {
        return (predicted == gold) as u8 as f32;
    }
    let ((start, end), (true_start, true_end)) = (predicted, gold);
    let length = |s: usize, e: usize| (e + 1).saturating_sub(s);
    let overlap = length(start.max(true_start), end.min(true_end));
    if overlap == 0 {
        return 0.0;
    }
    let (precision, recall) = (overlap as f32 / length(start, end) as f32, overlap as f32 / length(true_start, true_end) as f32);
    2.0 * precision * recall / (precision + recall)
}

/// The mean held-out loss over `batches` batches (at most the held-out set's), and the metrics
/// that go with it, named as the log names them: for classify the accuracy, for qa the
/// exact-match rate and F1 of the predicted spans (the argmax start and end tokens of each
/// window, scored in tokens against its labels, [CLS] meaning no answer in the window; not
/// SQuAD's per-question scores of normalized answer text), else the
/// perplexity of the language-model part (for mlm+nsp, of the masked-LM loss alone; for bilm,
/// also each direction's).
pub(super) fn evaluate(model: &TrainModel, objective: Objective, held_out: &dyn BatchSource, batches: u64) -> Result<(f32, Vec<(&'static str, f32)>)> {
    let batches = held_out.len().map_or(batches, |n| batches.min(n as u64));
    let (mut total, mut lm_total) = (None::<Tensor>, None::<Tensor>);
    let mut directions = [None::<Tensor>, None::<Tensor>];
    let (mut correct, mut scored, mut f1_sum) = (0usize, 0usize, 0.0f32);
    let sum = |acc: Option<Tensor>, t: Tensor| -> Result<Option<Tensor>> { Ok(Some(match acc { None => t, Some(a) => elementwise::add(&a, &t)? })) };
    for index in 0..batches {
        let batch = held_out.batch(index)?;
        let out = objective.forward(model, &batch)?;
        total = sum(total, objective.loss_of(model, &out, &batch)?)?;
        match objective {
            Objective::MlmNsp => lm_total = sum(lm_total, Objective::Mlm.loss_of(model, &out, &batch)?)?,
            Objective::BiLm => {
                for (acc, name) in directions.iter_mut().zip(["forward_loss", "backward_loss"]) {
                    let loss = out.get(name).ok_or_else(|| train_err!("the biLM returned no {name}"))?;
                    *acc = sum(acc.take(), loss.clone())?;
                }
            }
            Objective::Classify | Objective::TokenClassify => {
                // A row of logits per sequence, or per token; −100 labels are not scored.
                let logits = out.get("logits").ok_or_else(|| train_err!("the model returned no logits"))?;
                let classes = logits.shape()[logits.rank() - 1];
                let values = pollster::block_on(logits.to_vec::<f32>())?;
                for (row, &label) in values.chunks(classes).zip(&batch.labels).filter(|(_, &label)| label != DEFAULT_IGNORE_INDEX) {
                    correct += (argmax(row) as i64 == label) as usize;
                    scored += 1;
                }
            }
            Objective::Qa => {
                let (starts, ends) = batch.span_positions()?;
                let logits = |name: &str| -> Result<Vec<f32>> { pollster::block_on(out.get(name).ok_or_else(|| train_err!("the model returned no {name}"))?.to_vec::<f32>()) };
                let (start_logits, end_logits) = (logits("start_logits")?, logits("end_logits")?);
                for (b, (&start, &end)) in starts.iter().zip(ends).enumerate() {
                    let row = |values: &[f32]| -> usize { argmax(&values[b * batch.seq..(b + 1) * batch.seq]) };
                    let (predicted, gold) = ((row(&start_logits), row(&end_logits)), (start.max(0) as usize, end.max(0) as usize));
                    correct += (predicted == gold) as usize;
                    f1_sum += span_f1(predicted, gold);
                    scored += 1;
                }
            }
            _ => {}
        }
    }
    let mean = |t: Option<Tensor>| -> Result<f32> { Ok(pollster::block_on(t.ok_or_else(|| train_err!("no held-out batches"))?.to_vec::<f32>())?[0] / batches as f32) };
    let loss = mean(total)?;
    let metrics = match objective {
        Objective::Classify | Objective::TokenClassify => vec![("eval_accuracy", correct as f32 / scored.max(1) as f32)],
        Objective::Qa => vec![("eval_exact_match", correct as f32 / scored.max(1) as f32), ("eval_f1", f1_sum / scored.max(1) as f32)],
        Objective::MlmNsp => vec![("eval_perplexity", mean(lm_total)?.exp())],
        Objective::BiLm => {
            let [forward, backward] = directions;
            vec![("eval_perplexity", loss.exp()), ("eval_forward_perplexity", mean(forward)?.exp()), ("eval_backward_perplexity", mean(backward)?.exp())]
        }
        _ => vec![("eval_perplexity", loss.exp())],
    };
    Ok((loss, metrics))
}

#[cfg(test)]
mod tests {
    use super::span_f1;

    #[test]
    fn span_f1_scores_token_overlap_and_no_answer() {
        assert_eq!(span_f1((3, 5), (3, 5)), 1.0);
        assert!((span_f1((3, 4), (4, 6)) - 0.4).abs() < 1e-6, "1 of 2 predicted, 1 of 3 true");
        assert_eq!(span_f1((5, 3), (3, 5)), 0.0, "an empty span");
        assert_eq!((span_f1((0, 0), (0, 0)), span_f1((0, 3), (0, 0)), span_f1((0, 0), (2, 3))), (1.0, 0.0, 0.0));
    }
}
