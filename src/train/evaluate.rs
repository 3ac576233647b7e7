//! Held-out evaluation during a run: the mean loss and each objective's metrics.

use crate::error::{arg_err, Result};
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::ops::elementwise;
use crate::tensor::Tensor;
use crate::train::data::{Batch, BatchSource};
use crate::train::objective::{Objective, TrainModel};
use crate::train::squad_evaluation::SquadPredictions;

/// The index of the largest value (the first of equals).
fn argmax(row: &[f32]) -> usize {
    row.iter().enumerate().fold(0, |best, (i, &v)| if v > row[best] { i } else { best })
}

/// Counts the rows of `values` (`classes` logits each) whose largest logit is their label;
/// −100 labels are not scored.
fn score_rows(values: &[f32], classes: usize, labels: &[i64], correct: &mut usize, scored: &mut usize) {
    for (row, &label) in values.chunks(classes).zip(labels).filter(|(_, &label)| label != DEFAULT_IGNORE_INDEX) {
        *correct += (argmax(row) as i64 == label) as usize;
        *scored += 1;
    }
}

/// The mean held-out loss over `batches` batches (at most the held-out set's), and the metrics
/// that go with it, named as the log names them: for classify the accuracy, for qa the
/// exact match and F1 of each question's answer as SQuAD's evaluation computes them (over the
/// questions whose windows all fall within the batches evaluated), else the
/// perplexity of the language-model part (for mlm+nsp and mlm+sop, of the masked-LM loss
/// alone, with the sentence-pair head's accuracy; for bilm, also each direction's; for
/// electra, the generator's, with the discriminator's loss and accuracy).
///
/// A multi-task model is evaluated task by task on each task's held-out data (`batches` of
/// each): its loss and metrics are logged as `eval_<task>_loss`, `eval_<task>_accuracy`, …,
/// and the loss returned is the mean of the tasks'.
pub fn evaluate(model: &TrainModel, objective: Objective, held_out: &dyn BatchSource, batches: u64) -> Result<(f32, Vec<(String, f32)>)> {
    if objective != Objective::MultiTask {
        let (loss, metrics) = evaluate_one(model, objective, objective, None, held_out, batches)?;
        return Ok((loss, metrics.into_iter().map(|(name, value)| (name.to_string(), value)).collect()));
    }
    let TrainModel::MultiTask(m) = model else { return Err(arg_err!("train", "objective multi-task evaluates a multi-task model")) };
    let sources = held_out.tasks().ok_or_else(|| arg_err!("train", "a multi-task model is evaluated on each task's held-out data"))?;
    let (mut losses, mut metrics) = (Vec::new(), Vec::new());
    for (index, (task, source)) in m.tasks.iter().zip(sources).enumerate() {
        let Some(source) = source else { continue };
        let name = &task.spec.name;
        let (loss, task_metrics) = evaluate_one(model, objective, task.spec.objective, Some(index), source.as_ref(), batches)?;
        metrics.push((format!("eval_{name}_loss"), loss));
        metrics.extend(task_metrics.into_iter().map(|(metric, value)| (format!("eval_{name}_{}", metric.trim_start_matches("eval_")), value)));
        losses.push(loss);
    }
    if losses.is_empty() {
        return Err(arg_err!("train", "no task has held-out data"));
    }
    Ok((losses.iter().sum::<f32>() / losses.len() as f32, metrics))
}

/// The held-out loss of `held_out` scored by `scoring` (a multi-task model's batches for
/// task `task`), and the metrics of `objective` (the task's).
fn evaluate_one(
    model: &TrainModel,
    scoring: Objective,
    objective: Objective,
    task: Option<usize>,
    held_out: &dyn BatchSource,
    batches: u64,
) -> Result<(f32, Vec<(&'static str, f32)>)> {
    let batches = held_out.batches().map_or(batches, |n| batches.min(n as u64));
    let (mut total, mut lm_total) = (None::<Tensor>, None::<Tensor>);
    let mut directions = [None::<Tensor>, None::<Tensor>];
    let (mut correct, mut scored) = (0usize, 0usize);
    // ELECTRA's discriminator: real tokens scored, replaced, labelled right.
    let mut replaced_counts = [0f32; 3];
    let mut predictions = match objective {
        Objective::Qa => {
            Some(SquadPredictions::new(held_out.question_answering().ok_or_else(|| arg_err!("train", "question answering is evaluated on SQuAD-style data"))?))
        }
        _ => None,
    };
    let sum = |acc: Option<Tensor>, t: Tensor| -> Result<Option<Tensor>> {
        Ok(Some(match acc {
            None => t,
            Some(a) => elementwise::add(&a, &t)?,
        }))
    };
    for index in 0..batches {
        let batch = held_out.batch(index)?;
        let batch = Batch { task: task.or(batch.task), ..batch };
        let out = scoring.forward(model, &batch)?;
        total = sum(total, scoring.loss_of(model, &out, &batch)?)?;
        match objective {
            Objective::MlmNsp | Objective::MlmSop => {
                lm_total = sum(lm_total, Objective::Mlm.loss_of(model, &out, &batch)?)?;
                let output = objective.pair_output().ok_or_else(|| arg_err!("train", "objective {objective} has no sentence-pair head"))?;
                let logits = out.get(output).ok_or_else(|| arg_err!("train", "the model returned no {output}"))?;
                let values = pollster::block_on(logits.to_vec::<f32>())?;
                score_rows(&values, 2, objective.pair_labels(&batch)?, &mut correct, &mut scored);
            }
            // Two parts of the loss each: the biLM's directions; ELECTRA's generator and
            // discriminator (with the latter's accuracy).
            Objective::BiLm | Objective::Electra => {
                let parts = if objective == Objective::BiLm { ["forward_loss", "backward_loss"] } else { ["mlm_loss", "rtd_loss"] };
                for (acc, name) in directions.iter_mut().zip(parts) {
                    let loss = out.get(name).ok_or_else(|| arg_err!("train", "the model returned no {name}"))?;
                    *acc = sum(acc.take(), loss.clone())?;
                }
                for (count, name) in replaced_counts.iter_mut().zip(["tokens_scored", "tokens_replaced", "replaced_correct"]) {
                    if let Some(value) = out.get(name) {
                        *count += pollster::block_on(value.to_vec::<f32>())?[0];
                    }
                }
            }
            Objective::Classify | Objective::TokenClassify | Objective::MultipleChoice | Objective::Translation => {
                // A row of logits per sequence, per token (per target word), or per example
                // over its choices; −100 labels are not scored.
                let logits = out.get("logits").ok_or_else(|| arg_err!("train", "the model returned no logits"))?;
                let classes = logits.shape()[logits.rank() - 1];
                let values = pollster::block_on(logits.to_vec::<f32>())?;
                score_rows(&values, classes, &batch.labels, &mut correct, &mut scored);
            }
            Objective::Qa => {
                let logits = |name: &str| -> Result<Vec<f32>> {
                    pollster::block_on(out.get(name).ok_or_else(|| arg_err!("train", "the model returned no {name}"))?.to_vec::<f32>())
                };
                if let Some(predictions) = predictions.as_mut() {
                    predictions.add_batch(index, batch.seq, &logits("start_logits")?, &logits("end_logits")?)?;
                }
            }
            _ => {}
        }
    }
    let mean = |t: Option<Tensor>| -> Result<f32> {
        Ok(pollster::block_on(t.ok_or_else(|| arg_err!("train", "no held-out batches"))?.to_vec::<f32>())?[0] / batches as f32)
    };
    let loss = mean(total)?;
    let metrics = match objective {
        Objective::Classify | Objective::TokenClassify | Objective::MultipleChoice => vec![("eval_accuracy", correct as f32 / scored.max(1) as f32)],
        // The target words under teacher forcing: exp of the mean batch loss, and the share
        // predicted right (OpenNMT-py weights its perplexity by each batch's words).
        Objective::Translation => vec![("eval_perplexity", loss.exp()), ("eval_accuracy", correct as f32 / scored.max(1) as f32)],
        Objective::Qa => {
            let scores = predictions
                .map(|p| p.scores())
                .filter(|s| s.questions > 0)
                .ok_or_else(|| arg_err!("train", "no question had all its windows evaluated: raise --eval-batches"))?;
            vec![("eval_exact_match", scores.exact_match), ("eval_f1", scores.f1)]
        }
        Objective::MlmNsp => vec![("eval_perplexity", mean(lm_total)?.exp()), ("eval_next_sentence_accuracy", correct as f32 / scored.max(1) as f32)],
        Objective::MlmSop => vec![("eval_perplexity", mean(lm_total)?.exp()), ("eval_sentence_order_accuracy", correct as f32 / scored.max(1) as f32)],
        Objective::BiLm => {
            let [forward, backward] = directions;
            vec![("eval_perplexity", loss.exp()), ("eval_forward_perplexity", mean(forward)?.exp()), ("eval_backward_perplexity", mean(backward)?.exp())]
        }
        Objective::Electra => {
            let [mlm, rtd] = directions;
            let [scored, replaced, right] = replaced_counts;
            let share = |n: f32| n / scored.max(1.0);
            vec![
                ("eval_perplexity", mean(mlm)?.exp()),
                ("eval_rtd_loss", mean(rtd)?),
                ("eval_replaced_accuracy", share(right)),
                ("eval_replaced_share", share(replaced)),
            ]
        }
        _ => vec![("eval_perplexity", loss.exp())],
    };
    Ok((loss, metrics))
}
