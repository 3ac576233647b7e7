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
use crate::models::auto::AutoModel;
use crate::models::distillation::{DistillationLoss, TeacherTargets};
use crate::models::{ForwardOptions, Model};
use crate::nn::Gradients;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tensor::Tensor;
use crate::train::data::Batch;
use crate::train::objective::{Objective, StepOptions, TrainModel};

/// A distillation run's settings, which a resumed run repeats.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Distillation {
    /// The teacher's folder.
    pub teacher: PathBuf,
    pub loss: DistillationLoss,
    /// The student's depth when it was made from the teacher (None: a student of its own).
    pub student_layers: Option<usize>,
    /// The student's architecture when it was made as another family's (`distilbert` from a
    /// BERT teacher); None: the teacher's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub student_arch: Option<String>,
    /// A masked LM's soft targets at its labelled (masked) positions only, not every position
    /// the attention mask keeps (DistilBERT's `restrict_ce_to_mask`): the vocabulary-wide
    /// logits of teacher and student then cost a sixth as much.
    #[serde(default)]
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
/// encoders with a masked-LM head (objective mlm) or both decoders with an LM head (clm), one
/// vocabulary, and for the cosine loss one hidden size.
pub fn check_pair(teacher: &AutoModel, student_model: &TrainModel, objective: Objective, loss: &DistillationLoss) -> Result<()> {
    let op = "distill";
    loss.validate()?;
    let TrainModel::Transformer(student) = student_model else {
        return Err(arg_err!(op, "distillation trains a transformer student (the BERT family, GPT-2, GPT), not an ELMo"));
    };
    match (teacher.as_encoder(), student.as_encoder(), objective) {
        (Some(t), Some(_), Objective::Mlm) => {
            t.masked_lm_logits_name().ok_or_else(|| arg_err!(op, "the teacher `{}` has no masked-LM head to learn from", t.architecture()))?;
        }
        (Some(_), Some(_), Objective::Classify) => {
            if !teacher.architecture().ends_with("ForSequenceClassification") {
                return Err(arg_err!(op, "objective classify distills a fine-tuned …ForSequenceClassification teacher, not `{}`", teacher.architecture()));
            }
            let (t, s) = (teacher.summary().labels.len(), student.summary().labels.len());
            if t != s {
                return Err(arg_err!(op, "the teacher classifies into {t} labels and the student into {s}: they must be the same classes"));
            }
        }
        (None, None, Objective::Clm) if teacher.as_decoder_training().is_some() => {}
        _ => {
            return Err(arg_err!(
                op,
                "the teacher `{}` and the student `{}` must both be encoders with a masked-LM head (objective mlm) or a sequence classifier (classify), or both decoders with an LM head (clm), not objective {objective}",
                teacher.architecture(),
                student.architecture()
            ))
        }
    }
    let (t, s) = (teacher.sizes(), student.sizes());
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
    objective.check(student_model)
}

/// The teacher's logits and, for the cosine loss, its last hidden states, from its inference
/// forward: a language model's logits at the rows of `batch` the attention mask keeps (with
/// `restrict_to_mask`, a masked LM's at its labelled rows only), a classifier's one row per
/// sequence; the hidden states at the rows the attention mask keeps.
pub fn teacher_targets(teacher: &AutoModel, batch: &Batch, with_hidden: bool, restrict_to_mask: bool) -> Result<TeacherTargets> {
    let op = "distill";
    let hidden_rows: Vec<usize> = match &batch.attention_mask {
        Some(mask) => (0..batch.input_ids.len()).filter(|&i| mask[i] != 0).collect(),
        None => (0..batch.input_ids.len()).collect(),
    };
    if hidden_rows.is_empty() {
        return Err(arg_err!(op, "a batch whose attention mask is 0 everywhere has nothing to distill"));
    }
    let select = |t: &Tensor, rows: &[usize]| -> Result<Tensor> {
        let width = t.shape()[t.rank() - 1];
        t.reshape(&[t.numel() / width, width])?.select_rows(rows)
    };
    if let Some(encoder) = teacher.as_encoder().filter(|e| e.masked_lm_logits_name().is_some()) {
        // Its head runs on the rows the soft loss reads, not on every position.
        let logit_rows = match restrict_to_mask {
            true => (0..batch.labels.len()).filter(|&i| batch.labels[i] != DEFAULT_IGNORE_INDEX).collect(),
            false => hidden_rows.clone(),
        };
        let rows = encoder.last_hidden_rows(&batch.encoder_inputs())?;
        let logits = encoder.masked_lm_logits(&rows.select_rows(&logit_rows)?)?;
        let hidden = with_hidden.then(|| rows.select_rows(&hidden_rows)).transpose()?;
        return Ok(TeacherTargets { logit_rows, logits, hidden_rows, hidden });
    }
    if restrict_to_mask {
        return Err(arg_err!(
            op,
            "--restrict-to-mask restricts a masked-LM teacher's soft targets to the masked positions; `{}` is not one",
            teacher.architecture()
        ));
    }
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

/// The distillation loss of `batch` for `student` learning from `teacher`, and its backward
/// into `grads` (the teacher gets none). Returns the loss `[1]`, not read back.
#[allow(clippy::too_many_arguments)]
pub fn loss_backward(
    teacher: &AutoModel,
    student: &TrainModel,
    objective: Objective,
    loss: &DistillationLoss,
    restrict_to_mask: bool,
    batch: &Batch,
    grads: &Gradients,
    step: &StepOptions,
) -> Result<Tensor> {
    let targets = teacher_targets(teacher, batch, loss.alpha_cos > 0.0, restrict_to_mask)?;
    let TrainModel::Transformer(student) = student else {
        return Err(arg_err!("distill", "distillation trains a transformer student"));
    };
    match (student.as_encoder(), student.as_decoder_training(), objective) {
        (Some(s), _, Objective::Mlm) => s.distillation_loss_backward(&batch.mlm(None), &targets, loss, grads, step.loss_scale, &step.dropout),
        (Some(s), _, Objective::Classify) => {
            s.classifier_distillation_loss_backward(&batch.encoder_inputs(), &batch.labels, &targets, loss, grads, step.loss_scale, &step.dropout)
        }
        (None, Some(s), Objective::Clm) => s.distillation_loss_backward(&batch.lm(), &targets, loss, grads, step.loss_scale, &step.dropout),
        _ => Err(arg_err!(
            "distill",
            "distillation trains masked-LM encoders (objective mlm), encoder classifiers (classify) and causal-LM decoders (clm), not objective {objective}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::testing::gpu;
    use crate::train::scratch::{Arch, ModelShape};
    use crate::train::task_heads::with_classifier_head;
    use crate::weights::{Checkpoint, Weights};

    const LOSS: DistillationLoss = DistillationLoss { temperature: 2.0, alpha_soft: 5.0, alpha_hard: 2.0, alpha_cos: 1.0 };

    fn shape(arch: Arch, layers: usize, width: usize, vocab: usize) -> ModelShape {
        ModelShape { arch, layers, heads: 2, width, context: 8, vocab }
    }

    fn model(shape: ModelShape) -> AutoModel {
        let checkpoint = Checkpoint::from_bytes(shape.init_safetensors(1, None).unwrap()).unwrap();
        AutoModel::load(&shape.config_json(None, None).unwrap(), &Weights::new(gpu(), &checkpoint)).unwrap()
    }

    fn pair_error(teacher: ModelShape, student: ModelShape, objective: Objective, loss: &DistillationLoss) -> String {
        check_pair(&model(teacher), &TrainModel::Transformer(model(student)), objective, loss).unwrap_err().to_string()
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
        let teacher = shape(Arch::Albert, 4, 8, 11);
        let safetensors = teacher.init_safetensors(1, None).unwrap();
        let (config, student) = student_from_teacher(&teacher.config_json(None, None).unwrap(), &safetensors, 2).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["num_hidden_layers"], 2);
        let (a, b) = (Checkpoint::from_bytes(safetensors).unwrap(), Checkpoint::from_bytes(student).unwrap());
        assert_eq!(a.names().count(), b.names().count(), "every tensor is shared or a head");
        let err = student_from_teacher(br#"{"model_type": "bert"}"#, &[], 2).unwrap_err().to_string();
        assert!(err.contains("names no depth"), "{err}");
    }

    #[test]
    fn pairs_that_cannot_distill_are_refused() {
        let bert = |layers, width, vocab| shape(Arch::Bert, layers, width, vocab);
        let gpt2 = |layers, width, vocab| shape(Arch::Gpt2, layers, width, vocab);
        check_pair(&model(bert(2, 8, 11)), &TrainModel::Transformer(model(bert(1, 8, 11))), Objective::Mlm, &LOSS).unwrap();
        check_pair(&model(gpt2(2, 8, 11)), &TrainModel::Transformer(model(gpt2(1, 8, 11))), Objective::Clm, &LOSS).unwrap();
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
        check_pair(&model(bert(2, 8, 11)), &TrainModel::Transformer(model(bert(1, 16, 11))), Objective::Mlm, &without_cos).unwrap();
        // Classifiers: a fine-tuned teacher of the student's classes.
        let classifier = |layers, labels| {
            let shape = bert(layers, 8, 11);
            let (config, safetensors) =
                with_classifier_head(&shape.config_json(None, None).unwrap(), shape.init_safetensors(1, None).unwrap(), labels, 1).unwrap();
            AutoModel::load(&config, &Weights::new(gpu(), &Checkpoint::from_bytes(safetensors).unwrap())).unwrap()
        };
        check_pair(&classifier(2, 3), &TrainModel::Transformer(classifier(1, 3)), Objective::Classify, &LOSS).unwrap();
        let err = check_pair(&classifier(2, 3), &TrainModel::Transformer(classifier(1, 2)), Objective::Classify, &LOSS).unwrap_err().to_string();
        assert!(err.contains("the teacher classifies into 3 labels and the student into 2"), "{err}");
        let err = check_pair(&model(bert(2, 8, 11)), &TrainModel::Transformer(classifier(1, 3)), Objective::Classify, &LOSS).unwrap_err().to_string();
        assert!(err.contains("distills a fine-tuned …ForSequenceClassification teacher, not `BertForPreTraining`"), "{err}");
        let err = pair_error(bert(2, 8, 11), bert(1, 8, 11), Objective::MlmNsp, &LOSS);
        assert!(err.contains("not objective mlm+nsp"), "{err}");
        let err = pair_error(bert(2, 8, 11), bert(1, 8, 11), Objective::Mlm, &DistillationLoss { temperature: f32::NAN, ..LOSS });
        assert!(err.contains("--temperature must be a positive number"), "{err}");
    }
}
