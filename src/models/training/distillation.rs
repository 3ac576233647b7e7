//! Knowledge distillation from the student's side (Hinton et al. 2015; Sanh et al. 2019,
//! DistilBERT): what a teacher hands its student for one batch, and the student's loss at
//! the rows the teacher scored, α_soft·T²·KL(teacher_T ‖ student_T) + α_hard·(the student's own
//! LM loss) + α_cos·(1 − cos(student hidden, teacher hidden)), with its gradients. The
//! encoder and decoder run their own forward and backward around it.

use super::{Batch, Objective};
use crate::error::{arg_err, Result, SesameError};
use crate::models::{ForwardOptions, Model};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::distillation::{cosine_loss_backward, soft_target_loss, soft_target_loss_backward};
use crate::ops::elementwise;
use crate::ops::embedding::embedding_backward;
use crate::tensor::{DType, Tensor};

/// The distillation loss's temperature and weights (with the `cli` feature, `sesame
/// distill`'s flags; their defaults are DistilBERT's).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), derive(clap::Args))]
pub struct DistillationLoss {
    /// T: both distributions are softmax(logits / T); the soft loss is scaled by T².
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, allow_hyphen_values = true, default_value_t = 2.0))]
    pub temperature: f32,
    /// α_soft: the weight of the soft-target loss T²·KL(teacher_T ‖ student_T), at every
    /// position the attention mask keeps (DistilBERT's 5).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, allow_hyphen_values = true, default_value_t = 5.0))]
    pub alpha_soft: f32,
    /// α_hard: the weight of the student's own masked- or causal-LM loss (DistilBERT's 2).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, allow_hyphen_values = true, default_value_t = 2.0))]
    pub alpha_hard: f32,
    /// α_cos: the weight of the cosine loss between the student's and the teacher's last
    /// hidden states, which must be equally wide (DistilBERT's 1; 0 turns it off).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, allow_hyphen_values = true, default_value_t = 1.0))]
    pub alpha_cos: f32,
}

impl DistillationLoss {
    /// Checks the temperature and weights: finite, T > 0, weights ≥ 0, not all 0.
    pub fn validate(&self) -> Result<()> {
        let op = "distill";
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(arg_err!(op, "--temperature must be a positive number, not {}", self.temperature));
        }
        for (flag, alpha) in [("--alpha-soft", self.alpha_soft), ("--alpha-hard", self.alpha_hard), ("--alpha-cos", self.alpha_cos)] {
            if !(alpha.is_finite() && alpha >= 0.0) {
                return Err(arg_err!(op, "{flag} must be a number ≥ 0, not {alpha}"));
            }
        }
        if self.alpha_soft + self.alpha_hard + self.alpha_cos == 0.0 {
            return Err(arg_err!(op, "--alpha-soft, --alpha-hard and --alpha-cos are all 0: there is nothing to learn from"));
        }
        Ok(())
    }
}

/// What the teacher computed for one batch (without gradients), at the rows (b·seq + t) the
/// losses read: by default every position the attention mask keeps, as DistilBERT's distiller
/// selects them.
pub struct TeacherTargets {
    /// Where a language model's logits were taken (empty for a classifier).
    pub logit_rows: Vec<usize>,
    /// The teacher's logits: a language model's [logit_rows, V], a classifier's [batch, C].
    pub logits: Tensor,
    /// Where the hidden states were taken.
    pub hidden_rows: Vec<usize>,
    /// [hidden_rows, H]: the teacher's last hidden states, when the cosine loss is on.
    pub hidden: Option<Tensor>,
}

/// The error for a student that does not learn `objective` from a teacher.
pub fn not_distilled(objective: Objective) -> SesameError {
    arg_err!(
        "distill",
        "distillation trains masked-LM encoders (objective mlm), encoder classifiers (classify) and causal-LM decoders (clm), not objective {objective}"
    )
}

/// The rows of `batch` (b·seq + t) its attention mask keeps; an error when it keeps none.
pub fn kept_rows(batch: &Batch) -> Result<Vec<usize>> {
    let rows: Vec<usize> = match &batch.attention_mask {
        Some(mask) => (0..batch.input_ids.len()).filter(|&i| mask[i] != 0).collect(),
        None => (0..batch.input_ids.len()).collect(),
    };
    match rows.is_empty() {
        true => Err(arg_err!("distill", "a batch whose attention mask is 0 everywhere has nothing to distill")),
        false => Ok(rows),
    }
}

/// A teacher's targets from its inference forward pass: a language model's logits at the rows
/// of `batch` the attention mask keeps, a classifier's one row per sequence; with
/// `with_hidden`, its last hidden states at the kept rows.
pub fn forward_targets(teacher: &dyn Model, batch: &Batch, with_hidden: bool) -> Result<TeacherTargets> {
    let op = "distill";
    let hidden_rows = kept_rows(batch)?;
    let select = |t: &Tensor, rows: &[usize]| -> Result<Tensor> { super::rows(t)?.select_rows(rows) };
    let out = teacher.forward(&batch.ids(teacher.inputs()), ForwardOptions { last_hidden_state: with_hidden, ..ForwardOptions::default() })?;
    let output = |name: &str| out.get(name).ok_or_else(|| arg_err!(op, "the teacher returned no `{name}`"));
    let logits = output("logits")?;
    let (logits, logit_rows) = match logits.rank() {
        // A classifier's, one row per sequence.
        2 => (logits.clone(), Vec::new()),
        _ => (select(logits, &hidden_rows)?, hidden_rows.clone()),
    };
    let hidden = with_hidden.then(|| select(output("last_hidden_state")?, &hidden_rows)).transpose()?;
    Ok(TeacherTargets { logit_rows, logits, hidden_rows, hidden })
}

/// `rows` as a kernel's row ids.
fn row_ids(rows: &[usize]) -> Vec<u32> {
    rows.iter().map(|&r| r as u32).collect()
}

/// Adds the gradients of the student's hidden states into `d_rows` [batch·seq, H]: `d_head`
/// (its LM head's, at the logit rows, when it has one there) and the cosine loss's (at the
/// hidden rows).
pub(crate) fn scatter_hidden(d_head: Option<&Tensor>, d: &StudentGradients, teacher: &TeacherTargets, d_rows: &Tensor) -> Result<()> {
    if let Some(d_head) = d_head {
        embedding_backward(d_head, &row_ids(&teacher.logit_rows), d_rows)?;
    }
    match &d.hidden {
        Some(d_hidden) => embedding_backward(d_hidden, &row_ids(&teacher.hidden_rows), d_rows),
        None => Ok(()),
    }
}

/// The gradients `student_loss_backward` returns: of the student's logits at the teacher's
/// rows, and of its hidden states there (the cosine loss's; None when it is off).
pub struct StudentGradients {
    pub logits: Tensor,
    pub hidden: Option<Tensor>,
}

/// The distillation loss of the student's `logits` (as the teacher's) and last hidden states
/// `hidden` [hidden_rows, H], against `teacher` and the hard `targets` (one per logit row,
/// −100 where none), with the gradients of `loss_scale` × it. Terms weighted 0 are skipped.
pub(crate) fn student_loss_backward(
    logits: Tensor,
    hidden: &Tensor,
    targets: &[i64],
    teacher: &TeacherTargets,
    loss: &DistillationLoss,
    loss_scale: f32,
) -> Result<(Tensor, StudentGradients)> {
    let gpu = logits.gpu().clone();
    let mut total = Tensor::zeros(&gpu, &[1], DType::F32)?;
    let mut add_weighted = |term: &Tensor, alpha: f32| -> Result<()> {
        let weighted = elementwise::mul(term, &Tensor::from_slice(&gpu, &[alpha], &[1])?)?;
        total = elementwise::add(&total, &weighted)?;
        Ok(())
    };
    // Both logit gradients need the logits, and the hard loss's backward overwrites them.
    let d_soft = match loss.alpha_soft > 0.0 {
        true => {
            let soft = soft_target_loss(&logits, &teacher.logits, loss.temperature)?;
            add_weighted(&soft.loss, loss.alpha_soft)?;
            Some(soft_target_loss_backward(&logits, &teacher.logits, &soft, loss.alpha_soft * loss_scale)?)
        }
        false => None,
    };
    let d_logits = match (loss.alpha_hard > 0.0, d_soft) {
        (true, d_soft) => {
            let hard = cross_entropy(&logits, targets, DEFAULT_IGNORE_INDEX)?;
            add_weighted(&hard.loss, loss.alpha_hard)?;
            let d_hard = cross_entropy_backward(logits, &hard, loss.alpha_hard * loss_scale)?;
            match d_soft {
                Some(d_soft) => elementwise::add(&d_soft, &d_hard)?,
                None => d_hard,
            }
        }
        (false, Some(d_soft)) => d_soft,
        (false, None) => Tensor::zeros(&gpu, logits.shape(), DType::F32)?,
    };
    let d_hidden = match (&teacher.hidden, loss.alpha_cos > 0.0) {
        (Some(teacher_hidden), true) => {
            let (cos, d_hidden) = cosine_loss_backward(hidden, teacher_hidden, loss.alpha_cos * loss_scale)?;
            add_weighted(&cos, loss.alpha_cos)?;
            Some(d_hidden)
        }
        (None, true) => return Err(arg_err!("distill", "the cosine loss needs the teacher's hidden states")),
        (_, false) => None,
    };
    Ok((total, StudentGradients { logits: d_logits, hidden: d_hidden }))
}
