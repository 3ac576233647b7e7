//! Knowledge distillation (Hinton et al. 2015), as DistilBERT and distilgpt2 were trained
//! (Sanh et al. 2019): a student learns from a teacher's softened distribution at every
//! position the attention mask keeps, from its own masked- or causal-LM loss, and — for the
//! cosine term — from the direction of the teacher's last hidden states. A fine-tuned
//! classifier teaches the same way, its class distribution per sequence the soft targets. The teacher runs its
//! inference forward (no dropout, no gradients); the student is initialised from every other
//! teacher layer ([`student_from_teacher`]).

use std::path::PathBuf;

use safetensors::SafeTensors;

use crate::error::{arg_err, Result};
use crate::models::training::distillation::DistillationLoss;
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::nn::Gradients;
use crate::tensor::Tensor;

/// A distillation run's settings, which a resumed run repeats (with the `cli` feature,
/// `sesame distill`'s own flags).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), derive(clap::Args))]
pub struct Distillation {
    /// The teacher: a Hugging Face-layout folder of a masked-LM encoder (…ForMaskedLM or
    /// …ForPreTraining; the student then trains objective mlm), of a fine-tuned encoder
    /// classifier (…ForSequenceClassification, with --objective classify and its
    /// `sentence<TAB>label` data), or of a GPT-2 / GPT language model (objective clm). It runs
    /// without dropout or gradients.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub teacher: PathBuf,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), command(flatten))]
    pub loss: DistillationLoss,
    /// Make the student from the teacher instead of --model-init: the teacher's config with
    /// this many layers, its embeddings and heads, and student layer i from teacher layer
    /// i·L/N — every other layer (0, 2, 4, …) for half the depth. (None: a student of its own.)
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with_all = ["model_init", "arch"]))]
    pub student_layers: Option<usize>,
    /// With --student-layers, make the student a DistilBERT (DistilBERT's recipe) from a BERT
    /// teacher: a DistilBertForMaskedLM from a masked LM, a DistilBertForSequenceClassification
    /// from a fine-tuned classifier (its pooler the pre_classifier), the layers renamed and
    /// token type 0 folded into the position embeddings. (None: the teacher's family.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, value_parser = ["distilbert"]))]
    pub student_arch: Option<String>,
    /// A masked LM's soft targets at the masked positions only, not every position the
    /// attention mask keeps (DistilBERT's restrict_ce_to_mask): the vocabulary-wide logits of
    /// teacher and student then cost about a sixth as much.
    #[serde(default)]
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub restrict_to_mask: bool,
}

/// The config keys of a model's depth, by family.
const DEPTH_KEYS: [&str; 3] = ["num_hidden_layers", "n_layers", "n_layer"];

/// The layers a student of depth `layers` takes from a teacher of depth `teacher_layers`:
/// every other one for half the depth (0, 2, 4, …), evenly spaced otherwise.
pub fn student_layer_sources(teacher_layers: usize, layers: usize) -> Result<Vec<usize>> {
    if layers == 0 || layers > teacher_layers {
        return Err(arg_err!("distill", "--student-layers must be 1 to the teacher's {teacher_layers} layers, not {layers}"));
    }
    Ok((0..layers).map(|i| i * teacher_layers / layers).collect())
}

/// The depth index in a layer tensor's name (`bert.encoder.layer.3.…`, `transformer.h.3.…`,
/// `distilbert.transformer.layer.3.…`) and where it sits in the name's parts; None for a
/// tensor outside the per-depth layers (ALBERT's shared layer groups included).
fn depth_of(name: &str) -> Option<(usize, usize)> {
    let parts: Vec<&str> = name.split('.').collect();
    (1..parts.len()).find_map(|i| match (parts[i - 1], parts[i].parse::<usize>()) {
        ("layer" | "h", Ok(depth)) => Some((i, depth)),
        _ => None,
    })
}

/// A student made from a teacher checkpoint (config.json, model.safetensors): the teacher's
/// config with depth `layers`, its embeddings and heads, and layer i taken from teacher layer
/// [`student_layer_sources`]`[i]` (an ALBERT's one shared layer simply runs fewer times).
/// Returns the student's (config.json, model.safetensors).
pub fn student_from_teacher(config_json: &[u8], safetensors: &[u8], layers: usize) -> Result<(Vec<u8>, Vec<u8>)> {
    let op = "distill";
    let mut config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!(op, "the teacher's config.json: {e}"))?;
    let key = DEPTH_KEYS
        .into_iter()
        .find(|k| config[*k].is_u64())
        .ok_or_else(|| arg_err!(op, "the teacher's config.json names no depth ({}), so no student can be made from it", DEPTH_KEYS.join(", ")))?;
    let teacher_layers = config[key].as_u64().unwrap_or(0) as usize;
    let sources = student_layer_sources(teacher_layers, layers)?;
    config[key] = layers.into();
    let tensors = SafeTensors::deserialize(safetensors).map_err(|e| arg_err!(op, "the teacher's model.safetensors: {e}"))?;
    let mut kept = Vec::new();
    for (name, view) in tensors.tensors() {
        let renamed = match depth_of(&name) {
            None => Some(name),
            Some((at, depth)) => sources.iter().position(|&s| s == depth).map(|student_depth| {
                let mut parts: Vec<String> = name.split('.').map(String::from).collect();
                parts[at] = student_depth.to_string();
                parts.join(".")
            }),
        };
        if let Some(name) = renamed {
            kept.push((name, view));
        }
    }
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    let config_json = serde_json::to_vec_pretty(&config).map_err(|e| arg_err!(op, "writing the student's config.json: {e}"))?;
    let safetensors = safetensors::serialize(kept, None).map_err(|e| arg_err!(op, "writing the student's model.safetensors: {e}"))?;
    Ok((config_json, safetensors))
}

/// Checks that `student` can learn from `teacher` under `loss`, before any step runs: both
/// encoders with a masked-LM head (objective mlm) or a sequence classifier (classify), or both
/// decoders with an LM head (clm), one vocabulary, and for the cosine loss one hidden size.
pub fn check_pair(teacher: &dyn Trainable, student: &dyn Trainable, objective: Objective, loss: &DistillationLoss) -> Result<()> {
    let op = "distill";
    loss.validate()?;
    let (Some(t), Some(s)) = (teacher.as_model(), student.as_model()) else {
        return Err(arg_err!(op, "distillation trains a transformer student from a transformer teacher (the BERT family, GPT-2, GPT)"));
    };
    let mismatch = || {
        arg_err!(
            op,
            "the teacher `{}` and the student `{}` must both be encoders with a masked-LM head (objective mlm) or a sequence classifier (classify), or both decoders with an LM head (clm), not objective {objective}",
            t.architecture(),
            s.architecture()
        )
    };
    if !teacher.distillation_objectives().contains(&objective) {
        return Err(match objective {
            Objective::Mlm if t.inputs().pairs => arg_err!(op, "the teacher `{}` has no masked-LM head to learn from", t.architecture()),
            Objective::Classify if t.inputs().pairs => {
                arg_err!(op, "objective classify distills a fine-tuned …ForSequenceClassification teacher, not `{}`", t.architecture())
            }
            _ => mismatch(),
        });
    }
    if !student.distillation_objectives().contains(&objective) {
        return Err(mismatch());
    }
    let (labels, student_labels) = (t.head_config().num_labels(), s.head_config().num_labels());
    if objective == Objective::Classify && labels != student_labels {
        return Err(arg_err!(op, "the teacher classifies into {labels} labels and the student into {student_labels}: they must be the same classes"));
    }
    let (t, s) = (t.sizes(), s.sizes());
    if t.vocab_size != s.vocab_size {
        return Err(arg_err!(op, "the teacher's vocabulary has {} tokens and the student's {}: they must share one", t.vocab_size, s.vocab_size));
    }
    if loss.alpha_cos > 0.0 && t.hidden_size != s.hidden_size {
        return Err(arg_err!(
            op,
            "the cosine loss compares hidden states, and the student's are {} wide, the teacher's {} (a projection between them is not supported; --alpha-cos 0 distills without it)",
            s.hidden_size,
            t.hidden_size
        ));
    }
    student.check(objective)
}

/// The distillation loss of `batch` for `student` learning from `teacher`, and its backward
/// into `grads` (the teacher gets none). Returns the loss `[1]`, not read back.
#[allow(clippy::too_many_arguments)]
pub fn loss_backward(
    teacher: &dyn Trainable,
    student: &dyn Trainable,
    objective: Objective,
    loss: &DistillationLoss,
    restrict_to_mask: bool,
    batch: &Batch,
    grads: &Gradients,
    step: &StepOptions,
) -> Result<Tensor> {
    let targets = teacher.teacher_targets(objective, batch, loss.alpha_cos > 0.0, restrict_to_mask)?;
    student.distillation_loss_backward(objective, batch, &targets, loss, grads, step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::testing::gpu;
    use crate::models::registry::testing::tiny;
    use crate::models::registry::{family_of, with_head};
    use crate::models::training::fresh::default_labels;
    use crate::weights::{Checkpoint, Weights};

    const LOSS: DistillationLoss = DistillationLoss { temperature: 2.0, alpha_soft: 5.0, alpha_hard: 2.0, alpha_cos: 1.0 };

    /// A fresh model of `model_type`: `layers` layers `width` wide over `vocab` tokens.
    type Shape = (&'static str, usize, usize, usize);

    fn shape(model_type: &'static str, layers: usize, width: usize, vocab: usize) -> Shape {
        (model_type, layers, width, vocab)
    }

    fn files((model_type, layers, width, vocab): Shape) -> (Vec<u8>, Vec<u8>) {
        tiny(model_type, layers, width, 8, vocab, 1)
    }

    /// The model of `config` (its objective by its head) with the weights of `safetensors`.
    fn loaded(config: &[u8], safetensors: Vec<u8>) -> Box<dyn Trainable> {
        let checkpoint = Checkpoint::from_bytes(safetensors).unwrap();
        let family = family_of(config).unwrap();
        let objective = if family.trains(Objective::Mlm) { Objective::Mlm } else { Objective::Clm };
        family.load_trainable(config, &Weights::new(gpu(), &checkpoint), objective).unwrap()
    }

    fn model(shape: Shape) -> Box<dyn Trainable> {
        let (config, safetensors) = files(shape);
        loaded(&config, safetensors)
    }

    fn pair_error(teacher: Shape, student: Shape, objective: Objective, loss: &DistillationLoss) -> String {
        check_pair(model(teacher).as_ref(), model(student).as_ref(), objective, loss).unwrap_err().to_string()
    }

    #[test]
    fn students_take_every_other_layer_for_half_the_depth() {
        assert_eq!(student_layer_sources(12, 6).unwrap(), [0, 2, 4, 6, 8, 10]);
        assert_eq!(student_layer_sources(4, 2).unwrap(), [0, 2]);
        assert_eq!(student_layer_sources(12, 4).unwrap(), [0, 3, 6, 9]);
        assert_eq!(student_layer_sources(3, 3).unwrap(), [0, 1, 2]);
        for bad in [0, 13] {
            assert!(student_layer_sources(12, bad).unwrap_err().to_string().contains("--student-layers must be 1 to the teacher's 12 layers"));
        }
        assert_eq!(depth_of("bert.encoder.layer.3.attention.self.query.weight"), Some((3, 3)));
        assert_eq!(depth_of("transformer.h.11.mlp.c_fc.weight"), Some((2, 11)));
        assert_eq!(depth_of("h.0.ln_1.bias"), Some((1, 0)));
        assert_eq!(depth_of("distilbert.transformer.layer.5.ffn.lin1.weight"), Some((3, 5)));
        assert_eq!(depth_of("albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"), None);
        assert_eq!(depth_of("cls.predictions.bias"), None);
    }

    #[test]
    fn an_albert_student_keeps_its_shared_layer_and_runs_it_fewer_times() {
        let (config, safetensors) = files(shape("albert", 4, 8, 11));
        let (config, student) = student_from_teacher(&config, &safetensors, 2).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["num_hidden_layers"], 2);
        let (a, b) = (Checkpoint::from_bytes(safetensors).unwrap(), Checkpoint::from_bytes(student).unwrap());
        assert_eq!(a.names().count(), b.names().count(), "every tensor is shared or a head");
        let err = student_from_teacher(br#"{"model_type": "bert"}"#, &[], 2).unwrap_err().to_string();
        assert!(err.contains("names no depth"), "{err}");
    }

    #[test]
    fn pairs_that_cannot_distill_are_refused() {
        let bert = |layers, width, vocab| shape("bert", layers, width, vocab);
        let gpt2 = |layers, width, vocab| shape("gpt2", layers, width, vocab);
        check_pair(model(bert(2, 8, 11)).as_ref(), model(bert(1, 8, 11)).as_ref(), Objective::Mlm, &LOSS).unwrap();
        check_pair(model(gpt2(2, 8, 11)).as_ref(), model(gpt2(1, 8, 11)).as_ref(), Objective::Clm, &LOSS).unwrap();
        let err = pair_error(bert(2, 8, 11), gpt2(1, 8, 11), Objective::Mlm, &LOSS);
        assert!(err.contains("must both be encoders with a masked-LM head (objective mlm) or a sequence classifier (classify), or both decoders"), "{err}");
        let err = pair_error(gpt2(2, 8, 11), bert(1, 8, 11), Objective::Clm, &LOSS);
        assert!(err.contains("must both be encoders"), "{err}");
        let err = pair_error(bert(2, 8, 11), bert(1, 8, 13), Objective::Mlm, &LOSS);
        assert!(err.contains("the teacher's vocabulary has 11 tokens and the student's 13"), "{err}");
        // A student wider (or narrower) than its teacher has no cosine loss without a projection.
        let err = pair_error(bert(2, 8, 11), bert(1, 16, 11), Objective::Mlm, &LOSS);
        assert!(err.contains("the student's are 16 wide, the teacher's 8") && err.contains("--alpha-cos 0"), "{err}");
        let without_cos = DistillationLoss { alpha_cos: 0.0, ..LOSS };
        check_pair(model(bert(2, 8, 11)).as_ref(), model(bert(1, 16, 11)).as_ref(), Objective::Mlm, &without_cos).unwrap();
        // Classifiers: a fine-tuned teacher of the student's classes.
        let classifier = |layers, labels| {
            let (config, safetensors) = files(bert(layers, 8, 11));
            let (config, safetensors) = with_head(Objective::Classify, &config, safetensors, &default_labels(labels), 1).unwrap();
            loaded(&config, safetensors)
        };
        check_pair(classifier(2, 3).as_ref(), classifier(1, 3).as_ref(), Objective::Classify, &LOSS).unwrap();
        let err = check_pair(classifier(2, 3).as_ref(), classifier(1, 2).as_ref(), Objective::Classify, &LOSS).unwrap_err().to_string();
        assert!(err.contains("the teacher classifies into 3 labels and the student into 2"), "{err}");
        let err = check_pair(model(bert(2, 8, 11)).as_ref(), classifier(1, 3).as_ref(), Objective::Classify, &LOSS).unwrap_err().to_string();
        assert!(err.contains("distills a fine-tuned …ForSequenceClassification teacher, not `BertForPreTraining`"), "{err}");
        let err = pair_error(bert(2, 8, 11), bert(1, 8, 11), Objective::MlmNsp, &LOSS);
        assert!(err.contains("not objective mlm+nsp"), "{err}");
        let err = pair_error(bert(2, 8, 11), bert(1, 8, 11), Objective::Mlm, &DistillationLoss { temperature: f32::NAN, ..LOSS });
        assert!(err.contains("--temperature must be a positive number"), "{err}");
    }
}
