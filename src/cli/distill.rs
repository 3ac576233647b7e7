//! `sesame distill`: trains a student on a teacher's softened distribution (knowledge
//! distillation, as DistilBERT and distilgpt2 were trained): every flag of `sesame train`
//! (its data, replayed batches, log, checkpoints and --resume), plus the teacher, the
//! temperature and the weights of the three losses. The student is --model-init, or is made
//! from the teacher with --student-layers (every other teacher layer for half its depth), as a
//! DistilBERT with --student-arch distilbert.

use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::models::auto::ModelFiles;
use sesame::models::distilbert;
use sesame::models::registry::family_of;
use sesame::models::training::distillation::DistillationLoss;
use sesame::models::training::Objective;
use sesame::tokenize::TextTokenizer;
use sesame::train::distill::{student_from_teacher, Distillation};
use sesame::weights::Weights;
use sesame::Gpu;

use super::read_bytes;
use super::train::{self, DistillRun, StudentFiles, TrainArgs};

macro_rules! distill_err {
    ($($t:tt)*) => { SesameError::InvalidArgument { op: "distill", message: format!($($t)*) } };
}

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

/// The first token id the two tokenizers map differently, if any.
fn first_difference(a: &TextTokenizer, b: &TextTokenizer) -> Option<(u32, Option<String>, Option<String>)> {
    let ids = a.vocab_size().max(b.vocab_size()) as u32;
    (0..ids).map(|id| (id, a.id_to_token(id), b.id_to_token(id))).find(|(_, x, y)| x != y)
}

pub fn run(gpu: &Gpu, args: DistillArgs) -> Result<()> {
    let DistillArgs { teacher: dir, student_layers, student_arch, temperature, alpha_soft, alpha_hard, alpha_cos, restrict_to_mask, mut train } = args;
    let loss = DistillationLoss { temperature, alpha_soft, alpha_hard, alpha_cos };
    // Before the teacher is read: a bad weight is reported as such.
    loss.validate()?;
    if student_arch.is_some() && student_layers.is_none() {
        return Err(distill_err!("--student-arch makes the student from the teacher: give its depth with --student-layers N (not --model-init)"));
    }
    let mut files = ModelFiles::read_dir(&dir)?;
    let family = family_of(&files.config_json)?;
    // An encoder teaches its masked LM or its classifier, a decoder its language model.
    train.objective = match (family.trains(Objective::Mlm), train.objective) {
        (true, Objective::Clm | Objective::Mlm) => Objective::Mlm,
        (true, Objective::Classify) => Objective::Classify,
        (false, Objective::Clm) => Objective::Clm,
        (encoder, other) => {
            let wanted = if encoder { "mlm or classify (the teacher is an encoder)" } else { "clm (the teacher is a decoder)" };
            return Err(distill_err!("distillation trains objective {wanted}, not {other}"));
        }
    };
    let checkpoint = files.take_checkpoint();
    let teacher = family.load_trainable(&files.config_json, &Weights::new(gpu, &checkpoint), train.objective)?;
    drop(checkpoint);
    if let (Ok(theirs), Some(student_dir)) = (files.tokenizer(family.vocabulary), &train.model_init) {
        let files = ModelFiles::read_tokenizer_files(student_dir)?;
        if let Some(json) = &files.tokenizer_json {
            if let Some((id, t, s)) = first_difference(&theirs, &TextTokenizer::from_bytes(json)?) {
                return Err(distill_err!(
                    "the teacher's and the student's vocabularies differ at token id {id} (`{}` and `{}`): they must share one",
                    t.unwrap_or_default(),
                    s.unwrap_or_default()
                ));
            }
        }
    }
    let student = match (student_layers, train.resume) {
        (Some(layers), false) => {
            let read = |name: &str| read_bytes(&dir.join(name));
            let (mut config_json, mut safetensors) = student_from_teacher(&read("config.json")?, &read("model.safetensors")?, layers)?;
            if student_arch.is_some() {
                (config_json, safetensors) = distilbert::from_bert(&config_json, &safetensors)?;
            }
            let tokenizer_json = dir.join("tokenizer.json").is_file().then(|| read("tokenizer.json")).transpose()?;
            Some(StudentFiles { config_json, safetensors, tokenizer_json })
        }
        _ => None,
    };
    let settings = Distillation { teacher: dir, loss, student_layers, student_arch, restrict_to_mask };
    train::run_with(gpu, train, Some(DistillRun { teacher, settings, student }))
}
