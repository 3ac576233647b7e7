//! An encoder student's side of knowledge distillation ([`crate::models::training::distillation`]):
//! its training forward, the distillation loss of its logits and last hidden states against
//! the teacher's, and its backward. Two students: a masked LM (general distillation, as
//! DistilBERT was pretrained) and a sequence classifier (task-specific distillation, a
//! fine-tuned teacher's class distribution as the soft targets).

use super::train::MlmBatch;
use super::{Encoder, EncoderHead, EncoderInputs};
use crate::error::{arg_err, shape_err, Result};
use crate::models::training::distillation::{scatter_hidden, student_loss_backward, DistillationLoss, TeacherTargets};
use crate::nn::Gradients;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::ops::dropout::DropoutStream;
use crate::tensor::{DType, Tensor};

impl Encoder {
    /// The distillation loss of a masked-LM student on `batch` against `teacher` and its
    /// backward: the student's masked-LM head on the teacher's logit rows, its hard loss
    /// against `batch.labels` (which must fall on those rows).
    pub fn masked_lm_distillation_loss_backward(
        &self,
        batch: &MlmBatch,
        teacher: &TeacherTargets,
        loss: &DistillationLoss,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let op = "distill";
        let lm = match &self.head {
            EncoderHead::MaskedLm(lm) | EncoderHead::PreTraining(lm, _) => lm,
            _ => return Err(arg_err!(op, "the student needs a masked-LM head (…ForMaskedLM or …ForPreTraining), not `{}`", self.architecture)),
        };
        let inputs = &batch.inputs;
        if batch.labels.len() != inputs.batch * inputs.seq {
            return Err(shape_err!(op, "{} labels for batch {} × sequence {}", batch.labels.len(), inputs.batch, inputs.seq));
        }
        let targets = targets_at_rows(batch.labels, &teacher.logit_rows)?;
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let picked = encoded.rows.select_rows(&teacher.logit_rows)?;
        let hidden = encoded.rows.select_rows(&teacher.hidden_rows)?;
        let (logits, transform, norm) = lm.forward_saved(&picked)?;
        let (total, d) = student_loss_backward(logits, &hidden, &targets, teacher, loss, loss_scale)?;
        let d_picked = lm.backward(&picked, &transform, &norm, &d.logits, grads)?;
        let d_rows = Tensor::zeros(self.gpu(), encoded.rows.shape(), DType::F32)?;
        scatter_hidden(Some(&d_picked), &d, teacher, &d_rows)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(total)
    }

    /// The distillation loss of a sequence-classification student against a fine-tuned
    /// teacher's class logits (`teacher.logits`, one row per sequence) and its backward: the
    /// soft loss over the sequences, the hard loss against `labels` (one per sequence, −100
    /// skips one), the cosine loss over the teacher's hidden rows. Dropout as in
    /// [`Encoder::sequence_classification_loss_backward`].
    #[allow(clippy::too_many_arguments)]
    pub fn classifier_distillation_loss_backward(
        &self,
        inputs: &EncoderInputs,
        labels: &[i64],
        teacher: &TeacherTargets,
        loss: &DistillationLoss,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let head = self.sequence_classifier(inputs, labels)?;
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let hidden = encoded.rows.select_rows(&teacher.hidden_rows)?;
        let (logits, saved) = self.sequence_head_forward_saved(&encoded, inputs, head, self.sequence_head_drops(dropout_keys)?)?;
        let (total, d) = student_loss_backward(logits, &hidden, labels, teacher, loss, loss_scale)?;
        let d_rows = Tensor::zeros(self.gpu(), encoded.rows.shape(), DType::F32)?;
        self.sequence_head_backward(head, &saved, &d.logits, &d_rows, grads)?;
        scatter_hidden(None, &d, teacher, &d_rows)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(total)
    }
}

/// The labels at `rows`, checking that no label falls elsewhere (the distillation losses read
/// only `rows`: a label at a padding position would be silently dropped).
pub(crate) fn targets_at_rows(labels: &[i64], rows: &[usize]) -> Result<Vec<i64>> {
    let mut read = vec![false; labels.len()];
    let mut targets = Vec::with_capacity(rows.len());
    for &r in rows {
        let label = labels.get(r).ok_or_else(|| shape_err!("distill", "row {r} is outside the {} labels", labels.len()))?;
        read[r] = true;
        targets.push(*label);
    }
    if let Some(i) = labels.iter().zip(&read).position(|(&l, &read)| l != DEFAULT_IGNORE_INDEX && !read) {
        return Err(arg_err!("distill", "label {} at position {i} is where the attention mask is 0", labels[i]));
    }
    Ok(targets)
}
