//! How a model trains: the interface each family's training implements — [`Trainable`] for a
//! loaded model, [`FamilyTraining`] for its family in the [registry](super::registry) — and
//! what a training step hands it: its [`Batch`], the [`Objective`] that scores it and the
//! step's [`StepOptions`].
//!
//! As transformers' heads compute their own loss and burn's models implement `TrainStep`, a
//! family's `train.rs` says what it trains and computes each objective's loss and its
//! backward; the trainer (`crate::train`) drives any of them without knowing which it is.

mod batch;
pub mod distillation;
pub mod formats;
// With the `training` feature: the training a family's registry entry reaches, which the
// browser's inference module leaves out.
#[cfg(feature = "training")]
mod family;
#[cfg(feature = "training")]
pub mod fresh;
mod objective;

pub use batch::{rng_for, shifted_labels, Batch, SentenceBatch};
#[cfg(feature = "training")]
pub use family::{FamilyTraining, FolderPart, HeadMaker, JointFolder, JointLoader, JointParts, Trains};
pub use objective::Objective;

use self::distillation::{DistillationLoss, TeacherTargets};
use super::{ForwardOptions, Model, ModelOutput};
use crate::error::{arg_err, Result, SesameError};
use crate::nn::Gradients;
use crate::ops::cross_entropy::{cross_entropy, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::DropoutStream;
use crate::tensor::Tensor;

/// One micro-batch's settings besides its data.
#[derive(Clone, Copy, Debug)]
pub struct StepOptions {
    /// The factor on its gradients (1 / the micro-batches of a step).
    pub loss_scale: f32,
    /// Its dropout masks (at the model config's probabilities).
    pub dropout: DropoutStream,
    /// `classify` on GPT-2 or GPT: the weight λ of the auxiliary LM loss (L_task + λ·L_LM).
    pub lm_coef: f32,
}

/// A model as a run trains it. Each method that computes a loss adds `step.loss_scale` ×
/// every parameter's gradient into `grads` and returns the loss `[1]` on the device (not read
/// back, so that steps queue without waiting).
pub trait Trainable {
    /// The transformers class (`BertForPreTraining`), or the model's name, for messages.
    fn architecture(&self) -> &str;

    /// The objectives it trains with as loaded: a classifier's checkpoint `classify`, a
    /// BERT pretraining checkpoint `mlm` and `mlm+nsp`, ….
    fn objectives(&self) -> Vec<Objective>;

    /// Checks that it trains with `objective`; the error says what it trains instead.
    fn check(&self, objective: Objective) -> Result<()> {
        match self.objectives().contains(&objective) {
            true => Ok(()),
            false => Err(not_trained(self.architecture(), &self.objectives(), objective)),
        }
    }

    /// The longest sequence it reads; None when unbounded (the LSTMs).
    fn max_positions(&self) -> Option<usize>;

    /// About how many f32 values one training micro-batch of `batch` × `seq` keeps for its
    /// backward pass (saturating): a bound to refuse absurd sizes with, not a forecast.
    fn activation_values(&self, batch: usize, seq: usize) -> u64;

    /// Each token's characters its batches carry, in rows of this many ids (CVT's); 0 for
    /// none.
    fn chars_per_token(&self) -> usize {
        0
    }

    /// Whether it learns from unlabelled text too (cross-view training): the run gives it
    /// batches whose every label is −100 between its labelled ones.
    fn learns_from_unlabeled_text(&self) -> bool {
        false
    }

    /// The layer group of parameter `name` and the number of groups, bottom (0) to top, for
    /// ULMFiT's discriminative rates and gradual unfreezing; None for a model without groups.
    fn layer_group(&self, _name: &str) -> Option<(usize, usize)> {
        None
    }

    /// A multi-task model's tasks, by the index batches carry in [`Batch::task`]: each one's
    /// name and objective (empty for a model of one task).
    fn tasks(&self) -> Vec<(String, Objective)> {
        Vec::new()
    }

    /// The loss of `batch` under `objective` and its backward.
    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor>;

    /// The inference forward pass of `batch` (no dropout, no gradients): what held-out
    /// evaluation scores. By default the model's own forward pass.
    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        let model = self.as_model().ok_or_else(|| arg_err!("train", "`{}` has no inference forward pass", self.architecture()))?;
        model.forward(&batch.ids(model.inputs()), ForwardOptions::default())
    }

    /// The loss of `batch` from its forward output `out`: the value [`Trainable::loss_backward`]
    /// returns, without dropout (for GPT-2's classify, the task's loss alone, without the
    /// auxiliary LM term).
    fn loss_of(&self, objective: Objective, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        output_loss(objective, out, batch)
    }

    /// The loss of `batch` from the inference forward pass, without gradients.
    fn loss(&self, objective: Objective, batch: &Batch) -> Result<Tensor> {
        self.loss_of(objective, &self.forward(objective, batch)?, batch)
    }

    /// The model as an inference model (the transformers), whose sizes and outputs
    /// distillation and evaluation read.
    fn as_model(&self) -> Option<&dyn Model> {
        None
    }

    /// The objectives it learns from a teacher of its kind, and teaches one (knowledge
    /// distillation); none by default.
    fn distillation_objectives(&self) -> Vec<Objective> {
        Vec::new()
    }

    /// As a distillation teacher: its logits (and, with `with_hidden`, its last hidden
    /// states) for `batch` under `objective`; with `restrict_to_mask`, a masked LM's only at
    /// the labelled positions. By default from its forward pass.
    fn teacher_targets(&self, objective: Objective, batch: &Batch, with_hidden: bool, restrict_to_mask: bool) -> Result<TeacherTargets> {
        let model = self.as_model().ok_or_else(|| arg_err!("distill", "`{}` cannot teach", self.architecture()))?;
        if restrict_to_mask {
            return Err(arg_err!(
                "distill",
                "--restrict-to-mask restricts a masked-LM teacher's soft targets to the masked positions; `{}` is not one",
                self.architecture()
            ));
        }
        self.check(objective)?;
        distillation::forward_targets(model, batch, with_hidden)
    }

    /// As a distillation student: the loss of `batch` against the teacher's `targets` under
    /// `loss`, and its backward.
    fn distillation_loss_backward(
        &self,
        objective: Objective,
        _batch: &Batch,
        _targets: &TeacherTargets,
        _loss: &DistillationLoss,
        _grads: &Gradients,
        _step: &StepOptions,
    ) -> Result<Tensor> {
        Err(distillation::not_distilled(objective))
    }
}

/// The error for a model (`architecture`, training `trains`) asked to train with `objective`.
pub fn not_trained(architecture: &str, trains: &[Objective], objective: Objective) -> SesameError {
    let trains: Vec<String> = trains.iter().map(Objective::to_string).collect();
    let trains = if trains.is_empty() { "nothing (it has no head to train)".to_string() } else { trains.join(", ") };
    arg_err!("train", "objective {objective} does not train `{architecture}`, which trains {trains}")
}

/// The loss of the objectives whose outputs say all there is to score: a language model's
/// next-token logits, a classifier's logits per sequence, token or choice, a translation's per
/// target word, and the losses the biLM and ELECTRA return themselves.
pub fn output_loss(objective: Objective, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
    let output = |name: &str| out.get(name).ok_or_else(|| arg_err!("train", "the model returned no `{name}`"));
    match objective {
        Objective::Clm => Ok(cross_entropy(&rows(output("logits")?)?, &batch.shifted_labels(), DEFAULT_IGNORE_INDEX)?.loss),
        // Multiple choice: logits [examples, choices].
        Objective::Classify | Objective::MultipleChoice => Ok(cross_entropy(output("logits")?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss),
        Objective::TokenClassify | Objective::Translation => Ok(cross_entropy(&rows(output("logits")?)?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss),
        Objective::BiLm | Objective::Electra => Ok(output("loss")?.clone()),
        other => Err(arg_err!("train", "objective {other} is scored by the model that trains it")),
    }
}

/// A tensor's rows: [.., C] as [N, C].
pub fn rows(t: &Tensor) -> Result<Tensor> {
    let width = t.shape()[t.rank() - 1];
    t.reshape(&[t.numel() / width, width])
}
