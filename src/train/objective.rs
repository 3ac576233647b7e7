//! Training objectives: which loss a model's batch is scored with.

use std::str::FromStr;

use super::data::Batch;
use crate::error::{arg_err, Result, SesameError};
use crate::models::auto::{AutoModel, IdsBatch};
use crate::models::bert::{ForwardOptions, MlmBatch};
use crate::models::ModelOutput;
use crate::ops::cross_entropy::{cross_entropy, DEFAULT_IGNORE_INDEX};
use crate::ops::elementwise;
use crate::nn::Gradients;
use crate::ops::dropout::DropoutStream;
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Causal LM: every position predicts the next token (GPT-2).
    Clm,
    /// Masked LM: the selected positions predict their original token (BERT).
    Mlm,
    /// Masked LM plus next-sentence prediction (BERT's pretraining).
    #[serde(rename = "mlm+nsp")]
    MlmNsp,
    /// Sequence classification: one label per sequence (BERT's [CLS] head).
    Classify,
}

impl FromStr for Objective {
    type Err = SesameError;

    fn from_str(s: &str) -> Result<Objective> {
        match s {
            "clm" => Ok(Objective::Clm),
            "mlm" => Ok(Objective::Mlm),
            "mlm+nsp" => Ok(Objective::MlmNsp),
            "classify" => Ok(Objective::Classify),
            "bilm" | "qa" => Err(arg_err!("train", "objective `{s}` is not implemented yet (available: clm, mlm, mlm+nsp, classify)")),
            other => Err(arg_err!("train", "unknown objective `{other}` (clm, mlm, mlm+nsp, bilm, classify, qa)")),
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Objective::Clm => "clm",
            Objective::Mlm => "mlm",
            Objective::MlmNsp => "mlm+nsp",
            Objective::Classify => "classify",
        })
    }
}

impl Objective {
    /// Checks that `model` can be trained with this objective.
    pub fn check(self, model: &AutoModel) -> Result<()> {
        match (self, model) {
            (Objective::Clm, AutoModel::Gpt2(_)) | (Objective::Mlm | Objective::MlmNsp | Objective::Classify, AutoModel::Bert(_)) => Ok(()),
            _ => Err(self.mismatch()),
        }
    }

    fn mismatch(self) -> SesameError {
        let family = if self == Objective::Clm { "GPT-2 checkpoints (model_type gpt2)" } else { "BERT checkpoints (model_type bert)" };
        arg_err!("train", "objective {self} trains {family}")
    }

    /// The loss of `batch` under this objective, its backward adding `loss_scale` × every
    /// parameter's gradient into `grads`, with dropout (at the model config's probabilities)
    /// drawn from `dropout`. Returns the loss [1], not read back.
    pub fn loss_backward(self, model: &AutoModel, batch: &Batch, grads: &Gradients, loss_scale: f32, dropout: &DropoutStream) -> Result<Tensor> {
        match (self, model) {
            (Objective::Clm, AutoModel::Gpt2(m)) => m.lm_loss_backward(&batch.lm(), grads, loss_scale, dropout),
            (Objective::Mlm, AutoModel::Bert(m)) => m.masked_lm_loss_backward(&MlmBatch { next_sentence_label: None, ..batch.mlm() }, grads, loss_scale, dropout),
            (Objective::MlmNsp, AutoModel::Bert(m)) => {
                batch.next_sentence_label.as_ref().ok_or_else(missing_nsp_labels)?;
                m.masked_lm_loss_backward(&batch.mlm(), grads, loss_scale, dropout)
            }
            (Objective::Classify, AutoModel::Bert(m)) => m.sequence_classification_loss_backward(&batch.bert_inputs(), &batch.labels, grads, loss_scale, dropout),
            _ => Err(self.mismatch()),
        }
    }

    /// The inference forward pass of `batch` (no dropout, no gradients): what held-out
    /// evaluation scores.
    pub fn forward(self, model: &AutoModel, batch: &Batch) -> Result<ModelOutput> {
        self.check(model)?;
        let ids = IdsBatch {
            input_ids: batch.input_ids.clone(),
            attention_mask: batch.attention_mask.clone(),
            token_type_ids: batch.token_type_ids.clone().filter(|_| matches!(model, AutoModel::Bert(_))),
            batch: batch.batch,
            seq: batch.seq,
        };
        model.forward(&ids, ForwardOptions::default())
    }

    /// The loss of `batch` under this objective from its forward output `out`: the value
    /// [`Objective::loss_backward`] returns, without dropout.
    pub fn loss_of(self, model: &AutoModel, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        let output = |name: &str| out.get(name).ok_or_else(|| arg_err!("train", "the model returned no `{name}`"));
        let rows = |t: &Tensor| t.reshape(&[t.numel() / t.shape()[t.rank() - 1], t.shape()[t.rank() - 1]]);
        match self {
            Objective::Clm => Ok(cross_entropy(&rows(output("logits")?)?, &batch.lm().shifted_targets(), DEFAULT_IGNORE_INDEX)?.loss),
            Objective::Classify => Ok(cross_entropy(output("logits")?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss),
            Objective::Mlm | Objective::MlmNsp => {
                let name = if let AutoModel::Bert(m) = model { m.masked_lm_logits_name() } else { None };
                let logits = output(name.ok_or_else(|| self.mismatch())?)?;
                let mlm = cross_entropy(&rows(logits)?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss;
                if self == Objective::Mlm {
                    return Ok(mlm);
                }
                let labels = batch.next_sentence_label.as_ref().ok_or_else(missing_nsp_labels)?;
                elementwise::add(&mlm, &cross_entropy(output("seq_relationship_logits")?, labels, DEFAULT_IGNORE_INDEX)?.loss)
            }
        }
    }

    /// The loss of `batch` from the inference forward pass, without gradients.
    pub fn loss(self, model: &AutoModel, batch: &Batch) -> Result<Tensor> {
        self.loss_of(model, &self.forward(model, batch)?, batch)
    }
}

fn missing_nsp_labels() -> SesameError {
    arg_err!("train", "objective mlm+nsp needs next_sentence_label in every batch")
}
