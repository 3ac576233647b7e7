//! Training a decoder (GPT-2, GPT) on its own kernels: the causal-LM objective, and GPT's
//! fine-tuning objective (Radford et al. 2018, §3.2), a sequence classifier trained together
//! with the language model of the same text, L = L_task + λ·L_LM. Both run one training
//! forward of the decoder, score its final hidden states, and send the gradient of those back
//! through each block's backward ([`TrainBlock`]).

use super::{check_inputs, embed, key_mask, last_token_rows, Decoder, DecoderBlock, DecoderHead, DecoderInputs};
use crate::error::{arg_err, shape_err, Result};
use crate::models::encoder::transformer_activation_values;
use crate::models::training::distillation::{not_distilled, scatter_hidden, student_loss_backward, DistillationLoss, TeacherTargets};
use crate::models::training::{not_trained, shifted_labels, Batch, Objective, StepOptions, Trainable};
use crate::models::Model;
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout, Dropout, DropoutStream, LayerDropout, LayerSites};
use crate::ops::elementwise;
use crate::ops::embedding::embedding_backward;
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::rows::copy_rows;
use crate::tensor::{DType, Tensor};

/// A causal-LM training batch, row-major [batch, seq], with transformers' label convention:
/// position t predicts labels[t + 1] (the model shifts), and −100 is not scored.
#[derive(Clone, Copy, Debug)]
pub struct LmBatch<'a> {
    pub input_ids: &'a [u32],
    pub attention_mask: Option<&'a [u32]>,
    pub labels: &'a [i64],
    pub batch: usize,
    pub seq: usize,
}

impl<'a> LmBatch<'a> {
    /// A training batch as a causal-LM batch.
    pub fn of(batch: &'a Batch) -> LmBatch<'a> {
        LmBatch { input_ids: &batch.input_ids, attention_mask: batch.attention_mask.as_deref(), labels: &batch.labels, batch: batch.batch, seq: batch.seq }
    }

    /// Each position's target: the next position's label, −100 at the end of each row.
    pub fn shifted_targets(&self) -> Vec<i64> {
        shifted_labels(self.labels, self.batch, self.seq)
    }

    fn inputs(&self) -> DecoderInputs<'_> {
        DecoderInputs { input_ids: self.input_ids, attention_mask: self.attention_mask, position_ids: None, batch: self.batch, seq: self.seq }
    }
}

/// A decoder block's training forward (keeping what its backward needs) and backward.
pub trait TrainBlock {
    type Saved;
    fn forward_saved(&self, x: &Tensor, key_mask: Option<&Tensor>, drop: LayerDropout) -> Result<(Tensor, Self::Saved)>;
    fn backward(&self, saved: &Self::Saved, key_mask: Option<&Tensor>, dy: &Tensor, grads: &Gradients) -> Result<Tensor>;
}

/// A decoder's training losses and their backward; each adds `loss_scale` × every parameter's
/// gradient into `grads` and returns the loss `[1]` (recorded, not read back). Dropout at the
/// config's probabilities draws its masks from `dropout_keys`.
impl<B: TrainBlock> Decoder<B> {
    /// The causal-LM loss of `batch` (`…LMHeadModel`'s, with its shift).
    pub fn lm_loss_backward(&self, batch: &LmBatch, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        self.check_lm_head()?;
        let forward = self.forward_saved(&batch.inputs(), dropout_keys)?;
        let (loss, d_hidden) = self.lm_loss_backward_of(&forward.hidden, batch, loss_scale, grads)?;
        self.backward(forward, batch, d_hidden, grads)?;
        Ok(loss)
    }

    /// The distillation loss of `batch` against `teacher` (the student's side of
    /// [`crate::models::training::distillation`]): the tied LM head on the teacher's logit
    /// rows, its hard loss the causal-LM loss of `batch.labels` there (distilgpt2's recipe).
    pub fn lm_distillation_loss_backward(
        &self,
        batch: &LmBatch,
        teacher: &TeacherTargets,
        loss: &DistillationLoss,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        self.check_lm_head()?;
        if batch.labels.len() != batch.batch * batch.seq {
            return Err(shape_err!("distill", "{} labels for batch {} × sequence {}", batch.labels.len(), batch.batch, batch.seq));
        }
        let shifted = batch.shifted_targets();
        let targets: Vec<i64> = teacher.logit_rows.iter().map(|&r| shifted.get(r).copied().unwrap_or(DEFAULT_IGNORE_INDEX)).collect();
        let forward = self.forward_saved(&batch.inputs(), dropout_keys)?;
        let picked = forward.hidden.select_rows(&teacher.logit_rows)?;
        let hidden = forward.hidden.select_rows(&teacher.hidden_rows)?;
        let head = Linear::from_tensors(self.tokens.f32()?.clone(), None);
        let (total, d) = student_loss_backward(head.forward(&picked)?, &hidden, &targets, teacher, loss, loss_scale)?;
        let d_picked = head.backward(&picked, &d.logits, grads)?;
        let d_hidden = Tensor::zeros(picked.gpu(), forward.hidden.shape(), DType::F32)?;
        scatter_hidden(Some(&d_picked), &d, teacher, &d_hidden)?;
        self.backward(forward, batch, d_hidden, grads)?;
        Ok(total)
    }

    /// GPT's fine-tuning loss: `…ForSequenceClassification`'s cross-entropy against one label
    /// per sequence, plus `lm_coef` × the causal-LM loss of `batch.labels` through the LM head
    /// tied to the token embeddings (L = L_task + λ·L_LM, one training forward for both).
    pub fn sequence_classification_loss_backward(
        &self,
        batch: &LmBatch,
        labels: &[i64],
        lm_coef: f32,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let DecoderHead::SequenceClassification(score) = &self.head else {
            return Err(arg_err!(
                "train",
                "sequence classification needs a sequence-classification head, and this model is `{}`",
                self.config.head.architecture("a base model")
            ));
        };
        if labels.len() != batch.batch {
            return Err(shape_err!("sequence_classification", "{} labels for a batch of {}", labels.len(), batch.batch));
        }
        let inputs = batch.inputs();
        let forward = self.forward_saved(&inputs, dropout_keys)?;
        let rows = last_token_rows(&inputs, self.config.head.pad_token_id)?;
        let last = forward.hidden.select_rows(&rows)?;
        let logits = score.forward(&last)?;
        let task = cross_entropy(&logits, labels, DEFAULT_IGNORE_INDEX)?;
        let d_last = score.backward(&last, &cross_entropy_backward(logits, &task, loss_scale)?, grads)?;
        // The classifier's gradient lands on each sequence's last row (one row each).
        let d_hidden = Tensor::zeros(last.gpu(), forward.hidden.shape(), DType::F32)?;
        copy_rows(&d_last, &d_hidden, 0, &rows.iter().copied().enumerate().collect::<Vec<_>>())?;
        let (loss, d_hidden) = if lm_coef > 0.0 {
            let (lm, d_lm) = self.lm_loss_backward_of(&forward.hidden, batch, loss_scale * lm_coef, grads)?;
            let coef = Tensor::from_slice(lm.gpu(), &[lm_coef], &[1])?;
            (elementwise::add(&task.loss, &elementwise::mul(&lm, &coef)?)?, elementwise::add(&d_hidden, &d_lm)?)
        } else {
            (task.loss, d_hidden)
        };
        self.backward(forward, batch, d_hidden, grads)?;
        Ok(loss)
    }
}

/// The training forward of a batch, kept for the backward.
struct DecoderForward<S> {
    mask: Option<Tensor>,
    embedding_dropout: Option<Dropout>,
    saved: Vec<S>,
    /// The last block's output, and the final LayerNorm's when there is one.
    x: Tensor,
    final_norm: Option<LayerNormOutput>,
    /// The final hidden states, [batch·seq, width].
    hidden: Tensor,
}

impl<B: TrainBlock> Decoder<B> {
    /// Fails unless the model's head is the LM head tied to its token embeddings.
    fn check_lm_head(&self) -> Result<()> {
        match &self.head {
            DecoderHead::LanguageModel(None) => Ok(()),
            DecoderHead::LanguageModel(Some(_)) => {
                Err(arg_err!("train", "training a language-model head of its own (`lm_head.weight`, untied from the token embeddings) is not supported yet"))
            }
            _ => {
                Err(arg_err!("train", "causal-LM training needs a language-model head, and this model is `{}`", self.config.head.architecture("a base model")))
            }
        }
    }

    /// Embeddings, blocks and final LayerNorm, with dropout drawn from `dropout_keys`.
    fn forward_saved(&self, inputs: &DecoderInputs, dropout_keys: &DropoutStream) -> Result<DecoderForward<B::Saved>> {
        let c = &self.config;
        check_inputs(inputs, c.vocab_size, c.max_positions, None)?;
        let [embedding_p, attention_p, hidden_p] = c.dropout;
        let mask = key_mask(self.tokens.gpu(), inputs, 0)?;
        let embedding_dropout = dropout_keys.embedding(embedding_p)?;
        let mut x = dropout(&embed(&self.tokens, &self.positions, inputs, 0)?, embedding_dropout)?;
        let mut saved = Vec::with_capacity(self.blocks.len());
        for (i, block) in self.blocks.iter().enumerate() {
            let (y, s) = block.forward_saved(&x, mask.as_ref(), dropout_keys.layer(i, LayerSites::ALL, attention_p, hidden_p)?)?;
            saved.push(s);
            x = y;
        }
        let final_norm = self.final_norm.as_ref().map(|norm| norm.forward_saved(&x)).transpose()?;
        let hidden = final_norm.as_ref().map_or(&x, |out| &out.y).reshape(&[inputs.batch * inputs.seq, c.width])?;
        Ok(DecoderForward { mask, embedding_dropout, saved, x, final_norm, hidden })
    }

    /// The LM loss of `hidden` [n, width] through the tied head against `batch`'s shifted
    /// labels: (the loss [1], the gradient of `loss_scale` × it with respect to `hidden`).
    fn lm_loss_backward_of(&self, hidden: &Tensor, batch: &LmBatch, loss_scale: f32, grads: &Gradients) -> Result<(Tensor, Tensor)> {
        if batch.labels.len() != batch.batch * batch.seq {
            return Err(shape_err!("causal_lm", "{} labels for batch {} × sequence {}", batch.labels.len(), batch.batch, batch.seq));
        }
        let head = Linear::from_tensors(self.tokens.f32()?.clone(), None);
        let logits = head.forward(hidden)?;
        let ce = cross_entropy(&logits, &batch.shifted_targets(), DEFAULT_IGNORE_INDEX)?;
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        Ok((ce.loss, head.backward(hidden, &d_logits, grads)?))
    }

    /// The backward of [`Decoder::forward_saved`] from the gradient of the final hidden
    /// states, [n, width].
    fn backward(&self, forward: DecoderForward<B::Saved>, batch: &LmBatch, d_hidden: Tensor, grads: &Gradients) -> Result<()> {
        let d_hidden = d_hidden.reshape(&[batch.batch, batch.seq, self.config.width])?;
        let mut dx = match (&self.final_norm, &forward.final_norm) {
            (Some(norm), Some(out)) => norm.backward(&forward.x, out, &d_hidden, grads)?,
            _ => d_hidden,
        };
        for (block, s) in self.blocks.iter().zip(&forward.saved).rev() {
            dx = block.backward(s, forward.mask.as_ref(), &dx, grads)?;
        }
        let dx = dropout(&dx, forward.embedding_dropout)?;
        let positions: Vec<u32> = (0..batch.batch * batch.seq).map(|i| (i % batch.seq) as u32).collect();
        embedding_backward(&dx, batch.input_ids, grads.of(self.tokens.f32()?)?)?;
        embedding_backward(&dx, &positions, grads.of(&self.positions)?)
    }
}

/// GPT-2 and GPT train as language models (`…LMHeadModel`) and, with GPT's auxiliary LM loss,
/// as sequence classifiers.
impl<B: DecoderBlock + TrainBlock> Trainable for Decoder<B> {
    fn architecture(&self) -> &str {
        &self.architecture
    }

    fn objectives(&self) -> Vec<Objective> {
        match self.head {
            DecoderHead::LanguageModel(None) => vec![Objective::Clm],
            DecoderHead::SequenceClassification(_) => vec![Objective::Classify],
            DecoderHead::LanguageModel(Some(_)) | DecoderHead::Base => vec![],
        }
    }

    fn check(&self, objective: Objective) -> Result<()> {
        match objective {
            Objective::Clm => self.check_lm_head(),
            _ if self.objectives().contains(&objective) => Ok(()),
            _ => Err(not_trained(&self.architecture, &self.objectives(), objective)),
        }
    }

    fn max_positions(&self) -> Option<usize> {
        Some(self.config.max_positions)
    }

    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        transformer_activation_values(self, batch, seq)
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        let (loss_scale, dropout) = (step.loss_scale, &step.dropout);
        match objective {
            Objective::Clm => self.lm_loss_backward(&LmBatch::of(batch), grads, loss_scale, dropout),
            Objective::Classify => {
                // The auxiliary LM scores the batch's own tokens.
                let lm_labels = batch.input_lm_labels();
                let lm = LmBatch { labels: &lm_labels, ..LmBatch::of(batch) };
                self.sequence_classification_loss_backward(&lm, &batch.labels, step.lm_coef, grads, loss_scale, dropout)
            }
            other => Err(not_trained(&self.architecture, &self.objectives(), other)),
        }
    }

    fn as_model(&self) -> Option<&dyn Model> {
        Some(self)
    }

    /// A language model learns a teacher's next-token distribution (distilgpt2's recipe).
    fn distillation_objectives(&self) -> Vec<Objective> {
        self.objectives().into_iter().filter(|&o| o == Objective::Clm).collect()
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
        match objective {
            Objective::Clm => self.lm_distillation_loss_backward(&LmBatch::of(batch), targets, loss, grads, step.loss_scale, &step.dropout),
            other => Err(not_distilled(other)),
        }
    }
}

/// A decoder checkpoint of the family whose classes are `class`… (`GPT2`, `OpenAIGPT`) with
/// the head `objective` trains: for clm a base model (`…Model`) becomes its `…LMHeadModel`
/// (the head is the token embeddings: no tensor of its own); for classify a checkpoint becomes
/// its `…ForSequenceClassification` over the classes `labels` — `score` (no bias) at the last
/// non-pad token, drawn N(0, 0.02); the padding id is `pad_token_id`, else the end-of-text
/// `eos_token_id`.
#[cfg(feature = "training")]
pub fn with_decoder_head(
    class: &str,
    objective: Objective,
    config_json: &[u8],
    safetensors: Vec<u8>,
    labels: &[String],
    seed: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    use crate::models::training::fresh::{config_bytes, config_size, parse_config, with_labels, Init, INIT_STD};
    let mut config = parse_config(config_json)?;
    let current = config["architectures"][0].as_str().map_or(format!("{class}Model"), String::from);
    match objective {
        Objective::Clm if current == format!("{class}Model") => {
            config["architectures"] = serde_json::json!([format!("{class}LMHeadModel")]);
            return Ok((config_bytes(&config)?, safetensors));
        }
        Objective::Classify if current != format!("{class}ForSequenceClassification") => {}
        _ => return Ok((config_json.to_vec(), safetensors)),
    }
    if config["pad_token_id"].is_null() {
        config["pad_token_id"] = config["eos_token_id"].clone();
    }
    if config["pad_token_id"].is_null() {
        let kind = config["model_type"].as_str().unwrap_or_default().to_string();
        return Err(arg_err!("model", "a {kind} classifier pads batches with pad_token_id, and config.json has neither it nor an eos_token_id"));
    }
    let width = config_size(&config, "n_embd")?;
    let mut init = Init::from_checkpoint(&crate::weights::Checkpoint::from_bytes(safetensors)?, seed)?;
    init.normal("score.weight".into(), vec![labels.len(), width], INIT_STD)?;
    Ok((with_labels(config, &format!("{class}ForSequenceClassification"), labels)?, init.serialize()?))
}
