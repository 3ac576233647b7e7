//! Held-out evaluation during a run: the mean loss and each objective's metrics.

use crate::error::{arg_err, Result};
use crate::models::training::{Batch, Objective, Trainable};
use crate::models::ModelOutput;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::ops::elementwise;
use crate::tensor::Tensor;
use crate::train::data::BatchSource;

/// A run's held-out data: one set per task of the model (a model of one task has one), None
/// for a task without.
pub struct HeldOut {
    pub sets: Vec<Option<Box<dyn BatchSource>>>,
}

impl HeldOut {
    /// The held-out data of a model of one task.
    pub fn one(set: Box<dyn BatchSource>) -> HeldOut {
        HeldOut { sets: vec![Some(set)] }
    }
}

/// The index of the largest value (the first of equals).
fn argmax(row: &[f32]) -> usize {
    row.iter().enumerate().fold(0, |best, (i, &v)| if v > row[best] { i } else { best })
}

/// Each class's predictions tallied: [right, predicted, labelled].
type ClassCounts = Vec<[usize; 3]>;

/// Counts the rows of `values` (`classes` logits each) whose largest logit is their label,
/// and each class's predictions in `counts`; −100 labels are not scored.
fn score_rows(values: &[f32], classes: usize, labels: &[i64], correct: &mut usize, scored: &mut usize, counts: &mut ClassCounts) {
    counts.resize(counts.len().max(classes), [0; 3]);
    for (row, &label) in values.chunks(classes).zip(labels).filter(|(_, &label)| label != DEFAULT_IGNORE_INDEX) {
        let predicted = argmax(row);
        *correct += (predicted as i64 == label) as usize;
        *scored += 1;
        counts[predicted][1] += 1;
        if let Some(class) = usize::try_from(label).ok().and_then(|l| counts.get_mut(l)) {
            class[0] += (predicted as i64 == label) as usize;
            class[2] += 1;
        }
    }
}

/// The macro-averaged F1 over the classes predicted or labelled (scikit-learn's
/// `f1_score(average="macro")`): each class's 2·right / (predicted + labelled), averaged.
fn macro_f1(counts: &ClassCounts) -> f32 {
    let seen: Vec<f32> = counts.iter().filter(|[_, p, l]| p + l > 0).map(|&[right, p, l]| 2.0 * right as f32 / (p + l) as f32).collect();
    seen.iter().sum::<f32>() / seen.len().max(1) as f32
}

/// The mean held-out loss over `batches` batches (at most the held-out set's), and the metrics
/// that go with it, named as the log names them: for classify the accuracy and the macro F1,
/// for token-classify and multiple-choice the accuracy, for qa the
/// exact match and F1 of each question's answer as SQuAD's evaluation computes them (over the
/// questions whose windows all fall within the batches evaluated), else the
/// perplexity of the language-model part (for mlm+nsp and mlm+sop, of the masked-LM loss
/// alone, with the sentence-pair head's accuracy; for bilm, also each direction's; for
/// electra, the generator's, with the discriminator's loss and accuracy).
///
/// A multi-task model is evaluated task by task on each task's held-out set (`batches` of
/// each): its loss and metrics are logged as `eval_<task>_loss`, `eval_<task>_accuracy`, …,
/// and the loss returned is the mean of the tasks'.
pub async fn evaluate(model: &dyn Trainable, objective: Objective, held_out: &HeldOut, batches: u64) -> Result<(f32, Vec<(String, f32)>)> {
    let tasks = model.tasks();
    if tasks.is_empty() {
        let set = match held_out.sets.as_slice() {
            [Some(set)] => set.as_ref(),
            _ => return Err(arg_err!("train", "a model of one task is evaluated on one held-out set")),
        };
        let (loss, metrics) = evaluate_one(model, objective, objective, None, set, batches).await?;
        return Ok((loss, metrics.into_iter().map(|(name, value)| (name.to_string(), value)).collect()));
    }
    if held_out.sets.len() != tasks.len() {
        return Err(arg_err!("train", "{} held-out sets for the model's {} tasks", held_out.sets.len(), tasks.len()));
    }
    let (mut losses, mut metrics) = (Vec::new(), Vec::new());
    for (index, ((name, task_objective), set)) in tasks.iter().zip(&held_out.sets).enumerate() {
        let Some(set) = set else { continue };
        let (loss, task_metrics) = evaluate_one(model, objective, *task_objective, Some(index), set.as_ref(), batches).await?;
        metrics.push((format!("eval_{name}_loss"), loss));
        metrics.extend(task_metrics.into_iter().map(|(metric, value)| (format!("eval_{name}_{}", metric.trim_start_matches("eval_")), value)));
        losses.push(loss);
    }
    if losses.is_empty() {
        return Err(arg_err!("train", "no task has held-out data"));
    }
    Ok((losses.iter().sum::<f32>() / losses.len() as f32, metrics))
}

/// What an evaluation adds up over its batches, beside the loss.
#[derive(Default)]
struct Tally {
    /// The masked-LM part of a pretraining loss.
    lm_total: Option<Tensor>,
    /// The two parts of the loss: the biLM's directions; ELECTRA's generator and discriminator.
    parts: [Option<Tensor>; 2],
    correct: usize,
    scored: usize,
    classes: ClassCounts,
    /// ELECTRA's discriminator: real tokens scored, replaced, labelled right.
    replaced_counts: [f32; 3],
}

/// `t` added to the running sum `acc`.
fn sum(acc: Option<Tensor>, t: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match acc {
        None => t,
        Some(a) => elementwise::add(&a, &t)?,
    }))
}

async fn read(t: &Tensor) -> Result<Vec<f32>> {
    t.to_vec::<f32>().await
}

impl Tally {
    /// What batch `batch`'s output `out` adds to the metrics of `objective`.
    async fn add(&mut self, model: &dyn Trainable, objective: Objective, out: &ModelOutput, batch: &Batch) -> Result<()> {
        let output = |name: &str| out.get(name).ok_or_else(|| arg_err!("train", "the model returned no {name}"));
        match objective {
            Objective::MlmNsp | Objective::MlmSop => {
                self.lm_total = sum(self.lm_total.take(), model.loss_of(Objective::Mlm, out, batch)?)?;
                let name = objective.pair_output().ok_or_else(|| arg_err!("train", "objective {objective} has no sentence-pair head"))?;
                score_rows(&read(output(name)?).await?, 2, objective.pair_labels(batch)?, &mut self.correct, &mut self.scored, &mut self.classes);
            }
            Objective::BiLm | Objective::Electra => {
                let names = if objective == Objective::BiLm { ["forward_loss", "backward_loss"] } else { ["mlm_loss", "rtd_loss"] };
                for (acc, name) in self.parts.iter_mut().zip(names) {
                    *acc = sum(acc.take(), output(name)?.clone())?;
                }
                for (count, name) in self.replaced_counts.iter_mut().zip(["tokens_scored", "tokens_replaced", "replaced_correct"]) {
                    if let Some(value) = out.get(name) {
                        *count += read(value).await?[0];
                    }
                }
            }
            Objective::Classify | Objective::TokenClassify | Objective::MultipleChoice | Objective::Translation => {
                // A row of logits per sequence, per token (per target word), or per example
                // over its choices; −100 labels are not scored.
                let logits = output("logits")?;
                let classes = logits.shape()[logits.rank() - 1];
                score_rows(&read(logits).await?, classes, &batch.labels, &mut self.correct, &mut self.scored, &mut self.classes);
            }
            _ => {}
        }
        Ok(())
    }

    /// The metrics of `objective` over `batches` batches of mean loss `loss`.
    async fn metrics(self, objective: Objective, loss: f32, batches: u64) -> Result<Vec<(&'static str, f32)>> {
        let [first, second] = self.parts;
        let accuracy = self.correct as f32 / self.scored.max(1) as f32;
        Ok(match objective {
            Objective::Classify => vec![("eval_accuracy", accuracy), ("eval_f1", macro_f1(&self.classes))],
            Objective::TokenClassify | Objective::MultipleChoice => vec![("eval_accuracy", accuracy)],
            // The target words under teacher forcing: exp of the mean batch loss, and the share
            // predicted right (OpenNMT-py weights its perplexity by each batch's words).
            Objective::Translation => vec![("eval_perplexity", loss.exp()), ("eval_accuracy", accuracy)],
            Objective::MlmNsp => vec![("eval_perplexity", batch_mean(self.lm_total, batches).await?.exp()), ("eval_next_sentence_accuracy", accuracy)],
            Objective::MlmSop => vec![("eval_perplexity", batch_mean(self.lm_total, batches).await?.exp()), ("eval_sentence_order_accuracy", accuracy)],
            Objective::BiLm => vec![
                ("eval_perplexity", loss.exp()),
                ("eval_forward_perplexity", batch_mean(first, batches).await?.exp()),
                ("eval_backward_perplexity", batch_mean(second, batches).await?.exp()),
            ],
            Objective::Electra => {
                let [scored, replaced, right] = self.replaced_counts;
                let share = |n: f32| n / scored.max(1.0);
                vec![
                    ("eval_perplexity", batch_mean(first, batches).await?.exp()),
                    ("eval_rtd_loss", batch_mean(second, batches).await?),
                    ("eval_replaced_accuracy", share(right)),
                    ("eval_replaced_share", share(replaced)),
                ]
            }
            _ => vec![("eval_perplexity", loss.exp())],
        })
    }
}

/// The mean over `batches` batches of a running sum kept by a [`Tally`].
async fn batch_mean(total: Option<Tensor>, batches: u64) -> Result<f32> {
    let total = total.ok_or_else(|| arg_err!("train", "no held-out batches"))?;
    Ok(read(&total).await?[0] / batches as f32)
}

/// The held-out loss of `held_out` scored by `scoring` (a multi-task model's batches for
/// task `task`), and the metrics of `objective` (the task's), or the set's own.
async fn evaluate_one(
    model: &dyn Trainable,
    scoring: Objective,
    objective: Objective,
    task: Option<usize>,
    held_out: &dyn BatchSource,
    batches: u64,
) -> Result<(f32, Vec<(&'static str, f32)>)> {
    let batches = held_out.batches().map_or(batches, |n| batches.min(n as u64));
    let mut total = None::<Tensor>;
    let mut tally = Tally::default();
    let mut own_metrics = held_out.metrics();
    if objective == Objective::Qa && own_metrics.is_none() {
        return Err(arg_err!("train", "question answering is evaluated on SQuAD-style data"));
    }
    for index in 0..batches {
        let batch = held_out.batch(index)?;
        let batch = Batch { task: task.or(batch.task), ..batch };
        let out = model.forward(scoring, &batch)?;
        total = sum(total, model.loss_of(scoring, &out, &batch)?)?;
        match own_metrics.as_mut() {
            Some(metrics) => {
                let mut outputs = Vec::new();
                for name in metrics.outputs() {
                    outputs.push(read(out.get(name).ok_or_else(|| arg_err!("train", "the model returned no {name}"))?).await?);
                }
                metrics.add(index, &batch, &outputs)?
            }
            None => tally.add(model, objective, &out, &batch).await?,
        }
    }
    let loss = read(&total.ok_or_else(|| arg_err!("train", "no held-out batches"))?).await?[0] / batches as f32;
    let metrics = match own_metrics {
        Some(metrics) => metrics.metrics()?,
        None => tally.metrics(objective, loss, batches).await?,
    };
    Ok((loss, metrics))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macro_f1_averages_each_seen_class_as_scikit_learn_does() {
        // Labels [0, 0, 1, 2] predicted as [0, 1, 1, 1]: F1 of class 0 = 2/3, class 1 = 2/4,
        // class 2 = 0; sklearn.metrics.f1_score(average="macro") = 0.3889. Class 3 is never
        // seen and does not count; the −100 row is not scored.
        let logits = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]];
        let (mut correct, mut scored, mut counts) = (0, 0, ClassCounts::new());
        score_rows(logits.as_flattened(), 4, &[0, 0, 1, 2, DEFAULT_IGNORE_INDEX], &mut correct, &mut scored, &mut counts);
        assert_eq!((correct, scored), (2, 4));
        assert!((macro_f1(&counts) - 0.388_889).abs() < 1e-5, "{}", macro_f1(&counts));
    }
}
