//! The encoder as a run trains it: the objectives its head trains (BERT's and ERNIE's
//! pretraining with the next-sentence head, ALBERT's with the sentence-order head, masked LM
//! alone, ELECTRA's replaced-token detection, and the fine-tuning heads), each one's loss and
//! backward from `train.rs`, and its side of distillation.

use super::train::{binary_cross_entropy, replaced_token_targets, span_cross_entropies, MlmBatch};
use super::{Encoder, EncoderHead, EncoderInputs};
use crate::error::{arg_err, Result};
use crate::models::training::distillation::{forward_targets, kept_rows, not_distilled, DistillationLoss, TeacherTargets};
use crate::models::training::{not_trained, output_loss, rows, Batch, Objective, StepOptions, Trainable};
use crate::models::{Model, ModelOutput};
use crate::nn::Gradients;
use crate::ops::cross_entropy::{cross_entropy, DEFAULT_IGNORE_INDEX};
use crate::ops::elementwise;
use crate::tensor::Tensor;

impl<'a> EncoderInputs<'a> {
    /// A training batch's inputs.
    pub fn of(batch: &'a Batch) -> EncoderInputs<'a> {
        EncoderInputs {
            attention_mask: batch.attention_mask.as_deref(),
            token_type_ids: batch.token_type_ids.as_deref(),
            task_type_ids: batch.task_type_ids.as_deref(),
            ..EncoderInputs::ids(&batch.input_ids, batch.batch, batch.seq)
        }
    }
}

impl<'a> MlmBatch<'a> {
    /// A training batch as a masked-LM batch, with the sentence-pair labels `pair_labels`.
    pub fn of(batch: &'a Batch, pair_labels: Option<&'a [i64]>) -> MlmBatch<'a> {
        MlmBatch { inputs: EncoderInputs::of(batch), labels: &batch.labels, pair_labels }
    }
}

/// About how many f32 values a transformer's training micro-batch keeps (saturating): a layer
/// keeps ~17 values per token and width and ~3 per attention score (Korthikanti et al. 2022,
/// in f32), plus the logits and their gradient.
pub fn transformer_activation_values(model: &dyn Model, batch: usize, seq: usize) -> u64 {
    use crate::limits::saturating_product as product;
    let tokens = product(&[batch as u64, seq as u64]);
    let s = model.sizes();
    let layer = product(&[tokens, 17, s.hidden_size as u64]).saturating_add(product(&[3, batch as u64, s.heads as u64, seq as u64, seq as u64]));
    product(&[s.layers as u64, layer]).saturating_add(product(&[2, tokens, s.vocab_size as u64]))
}

impl Trainable for Encoder {
    fn architecture(&self) -> &str {
        &self.architecture
    }

    fn objectives(&self) -> Vec<Objective> {
        match &self.head {
            EncoderHead::Base | EncoderHead::NextSentence(_) => vec![],
            EncoderHead::MaskedLm(_) => vec![Objective::Mlm],
            EncoderHead::PreTraining(_, pair) => {
                let pair = [Objective::MlmNsp, Objective::MlmSop].into_iter().find(|o| o.pair_output() == Some(pair.output));
                [Objective::Mlm].into_iter().chain(pair).collect()
            }
            EncoderHead::SequenceClassification(_) => vec![Objective::Classify],
            EncoderHead::TokenClassification(_) => vec![Objective::TokenClassify],
            EncoderHead::QuestionAnswering(_) => vec![Objective::Qa],
            EncoderHead::MultipleChoice(_) => vec![Objective::MultipleChoice],
            EncoderHead::ReplacedTokens(_) => vec![Objective::Rtd],
        }
    }

    /// The pretraining objectives name the head they need (and the one the model has).
    fn check(&self, objective: Objective) -> Result<()> {
        let architecture = &self.architecture;
        if objective.is_masked_lm() && self.masked_lm_logits_name().is_none() {
            return Err(arg_err!("train", "objective {objective} needs a masked-LM head (…ForMaskedLM or …ForPreTraining), not `{architecture}`"));
        }
        let wanted = match objective {
            Objective::MlmNsp => Some("a next-sentence head (BertForPreTraining, ErnieForPreTraining)"),
            Objective::MlmSop => Some("a sentence-order head (AlbertForPreTraining)"),
            _ => None,
        };
        let pair = self.sentence_pair_output();
        if let Some(head) = wanted.filter(|_| pair != objective.pair_output()) {
            let has = match pair {
                Some("sop_logits") => " (its head predicts sentence order: objective mlm+sop)",
                Some(_) => " (its head predicts the next sentence: objective mlm+nsp)",
                None => "",
            };
            return Err(arg_err!("train", "objective {objective} needs {head}; `{architecture}` has none{has}"));
        }
        let named = match objective {
            Objective::MultipleChoice => Some("objective multiple-choice trains a …ForMultipleChoice head"),
            Objective::Rtd => Some("objective rtd trains ELECTRA's discriminator (ElectraForPreTraining)"),
            _ => None,
        };
        match (self.objectives().contains(&objective), named) {
            (true, _) => Ok(()),
            (false, Some(named)) => Err(arg_err!("train", "{named}, not `{architecture}`")),
            (false, None) => Err(not_trained(architecture, &self.objectives(), objective)),
        }
    }

    fn max_positions(&self) -> Option<usize> {
        Some(self.config.max_positions())
    }

    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        transformer_activation_values(self, batch, seq)
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        let (loss_scale, dropout) = (step.loss_scale, &step.dropout);
        let inputs = EncoderInputs::of(batch);
        match objective {
            Objective::Mlm => self.masked_lm_loss_backward(&MlmBatch::of(batch, None), grads, loss_scale, dropout),
            Objective::MlmNsp | Objective::MlmSop => {
                self.masked_lm_loss_backward(&MlmBatch::of(batch, Some(objective.pair_labels(batch)?)), grads, loss_scale, dropout)
            }
            Objective::Rtd => self.replaced_token_loss_backward(&inputs, &batch.labels, grads, loss_scale, dropout),
            Objective::Classify => self.sequence_classification_loss_backward(&inputs, &batch.labels, grads, loss_scale, dropout),
            Objective::TokenClassify => self.token_classification_loss_backward(&inputs, &batch.labels, grads, loss_scale, dropout),
            Objective::Qa => {
                let (starts, ends) = batch.span_positions()?;
                self.question_answering_loss_backward(&inputs, starts, ends, grads, loss_scale, dropout)
            }
            Objective::MultipleChoice => self.multiple_choice_loss_backward(&inputs, batch.multiple_choices()?, &batch.labels, grads, loss_scale, dropout),
            other => Err(not_trained(&self.architecture, &self.objectives(), other)),
        }
    }

    fn loss_of(&self, objective: Objective, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        let output = |name: &str| out.get(name).ok_or_else(|| arg_err!("train", "the model returned no `{name}`"));
        match objective {
            Objective::Qa => {
                let (starts, ends) = batch.span_positions()?;
                let (start, end) = span_cross_entropies(output("start_logits")?, output("end_logits")?, starts, ends)?;
                elementwise::mul(&elementwise::add(&start.loss, &end.loss)?, &Tensor::from_slice(start.loss.gpu(), &[0.5f32], &[1])?)
            }
            Objective::Rtd => {
                let targets = replaced_token_targets(&EncoderInputs::of(batch), &batch.labels)?;
                Ok(binary_cross_entropy(output("logits")?, &targets)?.1.loss)
            }
            Objective::Mlm | Objective::MlmNsp | Objective::MlmSop => {
                let name = self.masked_lm_logits_name().ok_or_else(|| not_trained(&self.architecture, &self.objectives(), objective))?;
                let mlm = cross_entropy(&rows(output(name)?)?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss;
                let pair = match (objective, self.sentence_pair_output()) {
                    (Objective::Mlm, _) => return Ok(mlm),
                    (_, Some(pair)) => pair,
                    (_, None) => return Err(not_trained(&self.architecture, &self.objectives(), objective)),
                };
                elementwise::add(&mlm, &cross_entropy(output(pair)?, objective.pair_labels(batch)?, DEFAULT_IGNORE_INDEX)?.loss)
            }
            _ => output_loss(objective, out, batch),
        }
    }

    fn as_model(&self) -> Option<&dyn Model> {
        Some(self)
    }

    /// A masked LM learns a teacher's distribution over the vocabulary (DistilBERT's general
    /// distillation), a sequence classifier a fine-tuned teacher's over its classes.
    fn distillation_objectives(&self) -> Vec<Objective> {
        self.objectives().into_iter().filter(|o| matches!(o, Objective::Mlm | Objective::Classify)).collect()
    }

    /// A masked-LM teacher runs its head only on the rows the soft loss reads (every kept row,
    /// or with `restrict_to_mask` the labelled ones), not on every position.
    fn teacher_targets(&self, objective: Objective, batch: &Batch, with_hidden: bool, restrict_to_mask: bool) -> Result<TeacherTargets> {
        self.check(objective)?;
        if !objective.is_masked_lm() {
            if restrict_to_mask {
                return Err(arg_err!(
                    "distill",
                    "--restrict-to-mask restricts a masked-LM teacher's soft targets to the masked positions; `{}` is not one",
                    self.architecture
                ));
            }
            return forward_targets(self, batch, with_hidden);
        }
        let hidden_rows = kept_rows(batch)?;
        let logit_rows = match restrict_to_mask {
            true => (0..batch.labels.len()).filter(|&i| batch.labels[i] != DEFAULT_IGNORE_INDEX).collect(),
            false => hidden_rows.clone(),
        };
        let rows = self.last_hidden_rows(&EncoderInputs::of(batch))?;
        let logits = self.masked_lm_logits(&rows.select_rows(&logit_rows)?)?;
        let hidden = with_hidden.then(|| rows.select_rows(&hidden_rows)).transpose()?;
        Ok(TeacherTargets { logit_rows, logits, hidden_rows, hidden })
    }

    fn distillation_loss_backward(
        &self,
        objective: Objective,
        batch: &Batch,
        targets: &TeacherTargets,
        loss: &DistillationLoss,
        grads: &Gradients,
        step: &StepOptions,
    ) -> Result<Tensor> {
        let (loss_scale, dropout) = (step.loss_scale, &step.dropout);
        match objective {
            Objective::Mlm => self.masked_lm_distillation_loss_backward(&MlmBatch::of(batch, None), targets, loss, grads, loss_scale, dropout),
            Objective::Classify => {
                self.classifier_distillation_loss_backward(&EncoderInputs::of(batch), &batch.labels, targets, loss, grads, loss_scale, dropout)
            }
            other => Err(not_distilled(other)),
        }
    }
}
