//! `sesame distill`: trains a student on a teacher's softened distribution (knowledge
//! distillation, as DistilBERT and distilgpt2 were trained): every flag of `sesame train`
//! (its data, replayed batches, log, checkpoints and --resume), plus the teacher, the
//! temperature and the weights of the three losses. The student is --model-init, or is made
//! from the teacher with --student-layers (every other teacher layer for half its depth), as a
//! DistilBERT with --student-arch distilbert.

use std::path::PathBuf;

use sesame::error::Result;
use sesame::models::training::distillation::DistillationLoss;
use sesame::train::distill::Distillation;
use sesame::Device;

use super::train::{self, TrainArgs};

#[derive(clap::Args)]
pub struct DistillArgs {
    /// The teacher: a Hugging Face-layout folder of a masked-LM encoder (…ForMaskedLM or
    /// …ForPreTraining; the student then trains objective mlm), of a fine-tuned encoder
    /// classifier (…ForSequenceClassification, with --objective classify and its
    /// `sentence<TAB>label` data), or of a GPT-2 / GPT language model (objective clm). It runs
    /// without dropout or gradients.
    #[arg(long)]
    teacher: PathBuf,
    /// Make the student from the teacher instead of --model-init: the teacher's config with
    /// this many layers, its embeddings and heads, and student layer i from teacher layer
    /// i·L/N — every other layer (0, 2, 4, …) for half the depth.
    #[arg(long, conflicts_with_all = ["model_init", "arch"])]
    student_layers: Option<usize>,
    /// With --student-layers, make the student a DistilBERT (DistilBERT's recipe) from a BERT
    /// teacher: a DistilBertForMaskedLM from a masked LM, a DistilBertForSequenceClassification
    /// from a fine-tuned classifier (its pooler the pre_classifier), the layers renamed and
    /// token type 0 folded into the position embeddings.
    #[arg(long, value_parser = ["distilbert"])]
    student_arch: Option<String>,
    /// T: both distributions are softmax(logits / T); the soft loss is scaled by T².
    #[arg(long, allow_hyphen_values = true, default_value_t = 2.0)]
    temperature: f32,
    /// The weight of the soft-target loss T²·KL(teacher_T ‖ student_T), at every position the
    /// attention mask keeps (DistilBERT's 5).
    #[arg(long, allow_hyphen_values = true, default_value_t = 5.0)]
    alpha_soft: f32,
    /// The weight of the student's own masked- or causal-LM loss (DistilBERT's 2).
    #[arg(long, allow_hyphen_values = true, default_value_t = 2.0)]
    alpha_hard: f32,
    /// The weight of the cosine loss between the student's and the teacher's last hidden
    /// states, which must be equally wide (DistilBERT's 1; 0 turns it off).
    #[arg(long, allow_hyphen_values = true, default_value_t = 1.0)]
    alpha_cos: f32,
    /// A masked LM's soft targets at the masked positions only, not every position the
    /// attention mask keeps (DistilBERT's restrict_ce_to_mask): the vocabulary-wide logits of
    /// teacher and student then cost about a sixth as much.
    #[arg(long)]
    restrict_to_mask: bool,
    #[command(flatten)]
    train: TrainArgs,
}

pub fn run(gpu: &Device, args: DistillArgs) -> Result<()> {
    let DistillArgs { teacher, student_layers, student_arch, temperature, alpha_soft, alpha_hard, alpha_cos, restrict_to_mask, mut train } = args;
    let loss = DistillationLoss { temperature, alpha_soft, alpha_hard, alpha_cos };
    train.spec.distillation = Some(Distillation { teacher, loss, student_layers, student_arch, restrict_to_mask });
    train::run(gpu, train)
}
