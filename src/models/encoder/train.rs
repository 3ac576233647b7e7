//! An encoder's training losses and their backward: the saved forward and its reverse, masked
//! LM + next-sentence prediction (pretraining), and the fine-tuning heads: sequence
//! classification, token classification and question answering (answer spans). The
//! per-layer forward/backward pairs are beside the layers (`layer.rs`).
//!
//! The backward covers the families' parts, each proven against PyTorch: BERT's, RoBERTa's
//! positions, XLM-RoBERTa-XL's pre-LN layers, DistilBERT's layers, ALBERT's E → H projection
//! and shared layers (whose gradients sum over their uses), ERNIE's task types, ELECTRA's
//! replaced-token head, the classifiers on the pooler or the first token, and DistilBERT's
//! token and span heads with their own dropout rates. A head it does not cover yet (multiple
//! choice) is refused with an error naming it.

use super::heads::{MlpHead, MlpSaved};
use super::layer::LayerSaved;
use super::{first_rows, Encoder, EncoderHead, EncoderInputs, SequenceHead};
use crate::error::{arg_err, shape_err, Result};
use crate::nn::{Activation, Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, CrossEntropyOutput, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout, Dropout, DropoutStream};
use crate::ops::elementwise;
use crate::ops::embedding::embedding_backward;
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::matmul::{matmul, Matmul};
use crate::tensor::{DType, Tensor};

/// A masked-LM training batch: the inputs, the original token at each selected position
/// (−100 elsewhere) — transformers' `labels` — and, for the sentence-pair head, one label per
/// sequence: `next_sentence_label` (0: B follows A, 1: B is random) for BERT's and ERNIE's
/// head, `sentence_order_label` (0: in order, 1: swapped) for ALBERT's.
#[derive(Clone, Copy, Debug)]
pub struct MlmBatch<'a> {
    pub inputs: EncoderInputs<'a>,
    pub labels: &'a [i64],
    pub pair_labels: Option<&'a [i64]>,
}

/// What the encoder's training forward keeps for its backward, and its output rows [B·T, C].
pub(super) struct EncoderSaved {
    key_mask: Tensor,
    embedded: Tensor,
    /// The embeddings' LayerNorm statistics (none in a pre-LN stack).
    embedded_norm: Option<LayerNormOutput>,
    embedding_dropout: Option<Dropout>,
    /// The input of the E → H projection, when there is one.
    projected_from: Option<Tensor>,
    layers: Vec<LayerSaved>,
    /// A pre-LN stack's final LayerNorm: the last layer's output and the statistics.
    final_norm: Option<(Tensor, LayerNormOutput)>,
    pub(super) rows: Tensor,
}

/// A sequence classifier, by reference: `classifier` on the pooler (BERT, ALBERT, ERNIE, and
/// the sentence-pair heads) or an MLP on the first token (RoBERTa, ELECTRA, DistilBERT).
#[derive(Clone, Copy)]
pub(super) enum ClassifierRef<'a> {
    Pooled(&'a Linear),
    FirstToken(&'a MlpHead),
}

impl<'a> ClassifierRef<'a> {
    fn of(head: &'a SequenceHead) -> ClassifierRef<'a> {
        match head {
            SequenceHead::Pooled(classifier) => ClassifierRef::Pooled(classifier),
            SequenceHead::FirstToken(mlp) => ClassifierRef::FirstToken(mlp),
        }
    }

    fn outputs(self) -> usize {
        match self {
            ClassifierRef::Pooled(classifier) => classifier.weight.shape()[0],
            ClassifierRef::FirstToken(mlp) => mlp.outputs(),
        }
    }
}

/// What a sequence head's training forward keeps for its backward: the first rows it read
/// (their indices and values) and the head's own activations.
pub(super) struct SequenceHeadSaved {
    rows: Vec<u32>,
    cls: Tensor,
    head: HeadSaved,
}

enum HeadSaved {
    Pooled { pre: Tensor, pooled: Tensor, drop: Option<Dropout> },
    FirstToken(MlpSaved),
}

impl Encoder {
    /// The embeddings and layers with dropout (sites 0 .. 3L), saving what the backward needs.
    pub(super) fn encode_saved(&self, inputs: &EncoderInputs, dropout_keys: &DropoutStream) -> Result<EncoderSaved> {
        self.validate(inputs)?;
        let c = &self.config;
        let n = inputs.batch * inputs.seq;
        let key_mask = self.key_mask(inputs)?;
        let (embedded, embedded_norm) = self.embeddings.forward_saved(inputs)?;
        let embedding_dropout = dropout_keys.embedding(c.hidden_dropout_prob)?;
        let mut x = dropout(embedded_norm.as_ref().map_or(&embedded, |n| &n.y), embedding_dropout)?;
        let mut projected_from = None;
        if let Some(projection) = &self.projection {
            let projected = projection.forward(&x)?;
            projected_from = Some(std::mem::replace(&mut x, projected));
        }
        let mut layers = Vec::with_capacity(self.schedule.len());
        for (i, layer) in self.layer_stack().enumerate() {
            let drop = dropout_keys.layer(i, c.dropout_sites, c.attention_probs_dropout_prob, c.hidden_dropout_prob)?;
            let (y, s) = layer.forward_saved(&x, &key_mask, drop)?;
            layers.push(s);
            x = y;
        }
        let mut final_norm = None;
        if let Some(norm) = &self.final_norm {
            let out = norm.forward_saved(&x)?;
            let last_layer = std::mem::replace(&mut x, out.y.clone());
            final_norm = Some((last_layer, out));
        }
        let rows = x.reshape(&[n, c.hidden_size])?;
        Ok(EncoderSaved { key_mask, embedded, embedded_norm, embedding_dropout, projected_from, layers, final_norm, rows })
    }

    /// A task head's dropout call `call` (0 for its first), at `classifier_dropout` (else
    /// `hidden_dropout_prob`), numbered on from the layers' sites.
    fn head_dropout(&self, dropout_keys: &DropoutStream, call: u32) -> Result<Option<Dropout>> {
        let c = &self.config;
        let site = DropoutStream::after_layers(self.schedule.len(), c.dropout_sites) + call;
        dropout_keys.site(c.classifier_dropout.unwrap_or(c.hidden_dropout_prob), site)
    }

    /// The encoder's backward from the gradient of its output rows.
    pub(super) fn encode_backward(&self, inputs: &EncoderInputs, saved: &EncoderSaved, d_rows: &Tensor, grads: &Gradients) -> Result<()> {
        let mut dx = d_rows.reshape(&[inputs.batch, inputs.seq, self.config.hidden_size])?;
        if let (Some(norm), Some((x, out))) = (&self.final_norm, &saved.final_norm) {
            dx = norm.backward(x, out, &dx, grads)?;
        }
        // A layer that runs at several depths adds its gradient at each.
        for (layer, s) in self.layer_stack().zip(&saved.layers).rev() {
            dx = layer.backward(s, &saved.key_mask, &dx, grads)?;
        }
        if let (Some(projection), Some(from)) = (&self.projection, &saved.projected_from) {
            dx = projection.backward(from, &dx, grads)?;
        }
        let dx = dropout(&dx, saved.embedding_dropout)?;
        self.embeddings.backward(inputs, &saved.embedded, saved.embedded_norm.as_ref(), &dx, grads)
    }

    /// The `…ForSequenceClassification` head, checking `labels` (one per sequence, in range
    /// or −100) against it.
    pub(super) fn sequence_classifier(&self, inputs: &EncoderInputs, labels: &[i64]) -> Result<ClassifierRef<'_>> {
        let op = "train";
        let EncoderHead::SequenceClassification(head) = &self.head else {
            return Err(arg_err!(op, "sequence classification needs a …ForSequenceClassification architecture, not `{}`", self.architecture));
        };
        let head = ClassifierRef::of(head);
        let num_labels = head.outputs();
        if labels.len() != inputs.batch {
            return Err(shape_err!(op, "{} labels for a batch of {} sequences", labels.len(), inputs.batch));
        }
        if let Some(bad) = labels.iter().find(|&&l| l != DEFAULT_IGNORE_INDEX && !(0..num_labels as i64).contains(&l)) {
            return Err(arg_err!(op, "label {bad} is out of range for {num_labels} labels"));
        }
        Ok(head)
    }

    /// A sequence classifier's dropout calls, in order, at the sites after the layers'.
    pub(super) fn sequence_head_drops(&self, dropout_keys: &DropoutStream) -> Result<[Option<Dropout>; 2]> {
        Ok([self.head_dropout(dropout_keys, 0)?, self.head_dropout(dropout_keys, 1)?])
    }

    /// A sequence head's training forward on each sequence's first row: its logits [B, C] and
    /// what its backward keeps. `drops`: the head's dropout calls in order (a pooled head
    /// drops out the pooled output with the first; an [`MlpHead`] as its own rule says).
    pub(super) fn sequence_head_forward_saved(
        &self,
        encoded: &EncoderSaved,
        inputs: &EncoderInputs,
        head: ClassifierRef,
        drops: [Option<Dropout>; 2],
    ) -> Result<(Tensor, SequenceHeadSaved)> {
        let cls_rows = first_rows(inputs.batch, inputs.seq);
        let cls = encoded.rows.select_rows(&cls_rows)?;
        let rows: Vec<u32> = cls_rows.iter().map(|&r| r as u32).collect();
        match head {
            ClassifierRef::Pooled(classifier) => {
                let pooler = self.pooler.as_ref().ok_or_else(|| arg_err!("train", "this checkpoint has no pooler"))?;
                let pre = pooler.forward(&cls)?;
                let pooled = dropout(&Activation::Tanh.forward(&pre)?, drops[0])?;
                let logits = classifier.forward(&pooled)?;
                Ok((logits, SequenceHeadSaved { rows, cls, head: HeadSaved::Pooled { pre, pooled, drop: drops[0] } }))
            }
            ClassifierRef::FirstToken(mlp) => {
                let (logits, saved) = mlp.forward_saved(&cls, drops)?;
                Ok((logits, SequenceHeadSaved { rows, cls, head: HeadSaved::FirstToken(saved) }))
            }
        }
    }

    /// The backward of [`Encoder::sequence_head_forward_saved`] from the gradient of its
    /// logits: adds the head's gradients and scatters those of the rows it read into `d_rows`.
    pub(super) fn sequence_head_backward(
        &self,
        head: ClassifierRef,
        saved: &SequenceHeadSaved,
        d_logits: &Tensor,
        d_rows: &Tensor,
        grads: &Gradients,
    ) -> Result<()> {
        let d_cls = match (head, &saved.head) {
            (ClassifierRef::Pooled(classifier), HeadSaved::Pooled { pre, pooled, drop }) => {
                let pooler = self.pooler.as_ref().ok_or_else(|| arg_err!("train", "this checkpoint has no pooler"))?;
                let d_pooled = dropout(&classifier.backward(pooled, d_logits, grads)?, *drop)?;
                pooler.backward(&saved.cls, &Activation::Tanh.backward(pre, &d_pooled)?, grads)?
            }
            (ClassifierRef::FirstToken(mlp), HeadSaved::FirstToken(s)) => mlp.backward(s, d_logits, grads)?,
            _ => return Err(arg_err!("train", "a sequence head's backward was given another head's forward")),
        };
        embedding_backward(&d_cls, &saved.rows, d_rows)
    }

    /// A sequence head scored by cross entropy: its loss, and its backward into `d_rows`.
    /// Without `choices`, a row's logits against its label; with them, the rows are examples ×
    /// `choices` of one score each, and an example's scores are its logits against its label.
    #[allow(clippy::too_many_arguments)]
    fn sequence_head_loss_backward(
        &self,
        encoded: &EncoderSaved,
        inputs: &EncoderInputs,
        head: ClassifierRef,
        labels: &[i64],
        choices: Option<usize>,
        drops: [Option<Dropout>; 2],
        d_rows: &Tensor,
        grads: &Gradients,
        loss_scale: f32,
    ) -> Result<Tensor> {
        let (scores, saved) = self.sequence_head_forward_saved(encoded, inputs, head, drops)?;
        let logits = match choices {
            Some(choices) => scores.reshape(&[inputs.batch / choices, choices])?,
            None => scores,
        };
        // Labels outside the classes (the choices) are an error there.
        let ce = cross_entropy(&logits, labels, DEFAULT_IGNORE_INDEX)?;
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        let d_scores = if choices.is_some() { d_logits.reshape(&[inputs.batch, 1])? } else { d_logits };
        self.sequence_head_backward(head, &saved, &d_scores, d_rows, grads)?;
        Ok(ce.loss)
    }

    /// The pretraining loss of `batch` and its backward: the masked-LM loss (mean over the
    /// labelled positions), plus the sentence-pair loss (mean over the batch) when the batch
    /// has pair labels, as `BertForPreTraining` and `AlbertForPreTraining` sum them. Adds `loss_scale` × every
    /// parameter's gradient into `grads`; returns the loss `[1]`, not read back. Dropout at the
    /// config's probabilities draws its masks from `dropout_keys`.
    ///
    /// The prediction head runs on the labelled rows only: the other rows add nothing to
    /// the loss, and the vocabulary-wide logits are the largest tensor of the step.
    pub fn masked_lm_loss_backward(&self, batch: &MlmBatch, grads: &Gradients, loss_scale: f32, dropout_keys: &DropoutStream) -> Result<Tensor> {
        Ok(self.masked_lm_step(batch, grads, loss_scale, dropout_keys, false)?.loss)
    }

    /// [`Encoder::masked_lm_loss_backward`], keeping a copy of the labelled positions' logits
    /// when `keep_logits` (ELECTRA's generator samples its replacements from them).
    pub fn masked_lm_step(
        &self,
        batch: &MlmBatch,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
        keep_logits: bool,
    ) -> Result<MaskedLmStep> {
        let op = "train";
        let (lm, pair) = match &self.head {
            EncoderHead::MaskedLm(lm) => (lm, None),
            EncoderHead::PreTraining(lm, pair) => (lm, Some(pair)),
            _ => return Err(arg_err!(op, "masked-LM training needs a …ForMaskedLM or …ForPreTraining architecture, not `{}`", self.architecture)),
        };
        let inputs = &batch.inputs;
        let n = inputs.batch * inputs.seq;
        if batch.labels.len() != n {
            return Err(shape_err!(op, "{} labels for batch {} × sequence {}", batch.labels.len(), inputs.batch, inputs.seq));
        }
        let pair = match (pair, batch.pair_labels) {
            (Some(head), Some(labels)) if labels.len() == inputs.batch => Some((head, labels)),
            (_, Some(labels)) if labels.len() != inputs.batch => {
                return Err(shape_err!(op, "{} sentence-pair labels for a batch of {}", labels.len(), inputs.batch))
            }
            (None, Some(_)) => {
                return Err(arg_err!(
                    op,
                    "sentence-pair labels need a …ForPreTraining architecture (this checkpoint has no next-sentence or sentence-order head)"
                ))
            }
            _ => None,
        };
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        // d rows: the heads' gradients, scattered back to the rows they read.
        let d_rows = Tensor::zeros(self.gpu(), encoded.rows.shape(), DType::F32)?;
        let masked: Vec<u32> = (0..n as u32).filter(|&i| batch.labels[i as usize] != DEFAULT_IGNORE_INDEX).collect();
        let mut loss = Tensor::zeros(self.gpu(), &[1], DType::F32)?;
        let mut kept = None;
        if !masked.is_empty() {
            let picked = encoded.rows.select_rows(&masked.iter().map(|&i| i as usize).collect::<Vec<_>>())?;
            let (logits, transform, norm) = lm.forward_saved(&picked)?;
            if keep_logits {
                // A copy: the backward overwrites the logits with their gradient.
                let copy = Tensor::empty(self.gpu(), logits.shape(), DType::F32)?;
                copy.write_rows(0, &logits)?;
                kept = Some(copy);
            }
            let targets: Vec<i64> = masked.iter().map(|&i| batch.labels[i as usize]).collect();
            let ce = cross_entropy(&logits, &targets, DEFAULT_IGNORE_INDEX)?;
            let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
            embedding_backward(&lm.backward(&picked, &transform, &norm, &d_logits, grads)?, &masked, &d_rows)?;
            loss = ce.loss;
        }
        if let Some((head, labels)) = pair {
            let drop = if head.dropout { self.head_dropout(dropout_keys, 0)? } else { None };
            let classifier = ClassifierRef::Pooled(&head.classifier);
            let pair_loss = self.sequence_head_loss_backward(&encoded, inputs, classifier, labels, None, [drop, None], &d_rows, grads, loss_scale)?;
            loss = elementwise::add(&loss, &pair_loss)?;
        }
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(MaskedLmStep { loss, logits: kept })
    }

    /// `…ForSequenceClassification`'s loss (cross entropy, mean over the batch; −100 skips a
    /// sequence) and its backward. BERT's, ALBERT's and ERNIE's head is a classifier on the
    /// pooler, with `classifier_dropout` (else `hidden_dropout_prob`) on the pooled output;
    /// RoBERTa's, ELECTRA's and DistilBERT's an MLP on the first token with its own dropout
    /// calls at that probability; either at the sites after the last layer's.
    pub fn sequence_classification_loss_backward(
        &self,
        inputs: &EncoderInputs,
        labels: &[i64],
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let head = self.sequence_classifier(inputs, labels)?;
        self.sequence_loss_backward(inputs, head, labels, None, grads, loss_scale, dropout_keys)
    }

    /// The encoder and a sequence head ([`Encoder::sequence_head_loss_backward`]): the loss,
    /// every gradient added into `grads`.
    #[allow(clippy::too_many_arguments)]
    fn sequence_loss_backward(
        &self,
        inputs: &EncoderInputs,
        head: ClassifierRef,
        labels: &[i64],
        choices: Option<usize>,
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let d_rows = Tensor::zeros(self.gpu(), encoded.rows.shape(), DType::F32)?;
        let drops = self.sequence_head_drops(dropout_keys)?;
        let loss = self.sequence_head_loss_backward(&encoded, inputs, head, labels, choices, drops, &d_rows, grads, loss_scale)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(loss)
    }

    /// `…ForMultipleChoice`'s loss and its backward: the sequence classifier's one score per
    /// row (the rows are examples × `choices`, each example's choices consecutive), the scores
    /// of an example's choices as its logits [examples, choices], cross entropy with its label
    /// (the right choice), mean over the examples; dropout as the sequence classifier's.
    pub fn multiple_choice_loss_backward(
        &self,
        inputs: &EncoderInputs,
        choices: usize,
        labels: &[i64],
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let op = "train";
        let EncoderHead::MultipleChoice(head) = &self.head else {
            return Err(arg_err!(op, "multiple choice needs a …ForMultipleChoice architecture, not `{}`", self.architecture));
        };
        if choices == 0 || !inputs.batch.is_multiple_of(choices) || labels.len() != inputs.batch / choices {
            return Err(shape_err!(op, "{} rows of {choices} choices with {} labels", inputs.batch, labels.len()));
        }
        self.sequence_loss_backward(inputs, ClassifierRef::of(head), labels, Some(choices), grads, loss_scale, dropout_keys)
    }

    /// `BertForTokenClassification`'s loss (cross entropy of the classifier on every token,
    /// mean over the labelled ones; −100 skips a token: padding, special tokens, word
    /// continuations) and its backward, with `classifier_dropout` (else
    /// `hidden_dropout_prob`; DistilBERT's `dropout`) on the encoder's output at the site after
    /// the last layer's.
    pub fn token_classification_loss_backward(
        &self,
        inputs: &EncoderInputs,
        labels: &[i64],
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let op = "train";
        let EncoderHead::TokenClassification(classifier) = &self.head else {
            return Err(arg_err!(op, "token classification needs a …ForTokenClassification architecture, not `{}`", self.architecture));
        };
        if labels.len() != inputs.batch * inputs.seq {
            return Err(shape_err!(op, "{} labels for batch {} × sequence {}", labels.len(), inputs.batch, inputs.seq));
        }
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let drop = self.head_dropout(dropout_keys, 0)?;
        let x = dropout(&encoded.rows, drop)?;
        let logits = classifier.forward(&x)?;
        // Labels outside the classes are an error there.
        let ce = cross_entropy(&logits, labels, DEFAULT_IGNORE_INDEX)?;
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        let d_rows = dropout(&classifier.backward(&x, &d_logits, grads)?, drop)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(ce.loss)
    }

    /// `ElectraForPreTraining`'s loss (the discriminator's binary cross entropy with logits,
    /// mean over the tokens whose attention mask is 1, as transformers scores it) and its
    /// backward. `labels`: per token, 1 where the token was replaced, 0 where it is the
    /// original. The discriminator reads the last layer's output directly (no dropout).
    pub fn replaced_token_loss_backward(
        &self,
        inputs: &EncoderInputs,
        labels: &[i64],
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let EncoderHead::ReplacedTokens(discriminator) = &self.head else {
            return Err(arg_err!("train", "replaced-token detection needs ELECTRA's discriminator (ElectraForPreTraining), not `{}`", self.architecture));
        };
        let targets = replaced_token_targets(inputs, labels)?;
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let (logits, saved) = discriminator.forward_saved(&encoded.rows, [None, None])?;
        let (pair, ce) = binary_cross_entropy(&logits, &targets)?;
        let d_logits = binary_cross_entropy_backward(pair, &ce, loss_scale)?;
        let d_rows = discriminator.backward(&saved, &d_logits, grads)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        Ok(ce.loss)
    }

    /// `BertForQuestionAnswering`'s loss and its backward: the mean of the cross entropies of
    /// the start logits against `start_positions` and of the end logits against
    /// `end_positions` (one token index per sequence; as transformers does, positions are
    /// clamped to 0..=T and T is ignored). BERT's head reads the last layer's output directly;
    /// DistilBERT's after a dropout at `qa_dropout` (`span_dropout`), at the site after the
    /// layers'.
    #[allow(clippy::too_many_arguments)]
    pub fn question_answering_loss_backward(
        &self,
        inputs: &EncoderInputs,
        start_positions: &[i64],
        end_positions: &[i64],
        grads: &Gradients,
        loss_scale: f32,
        dropout_keys: &DropoutStream,
    ) -> Result<Tensor> {
        let op = "train";
        let EncoderHead::QuestionAnswering(span) = &self.head else {
            return Err(arg_err!(op, "question answering needs a …ForQuestionAnswering architecture, not `{}`", self.architecture));
        };
        let (batch, seq) = (inputs.batch, inputs.seq);
        let encoded = self.encode_saved(inputs, dropout_keys)?;
        let c = &self.config;
        let drop = match c.span_dropout {
            Some(p) => dropout_keys.site(p, DropoutStream::after_layers(self.schedule.len(), c.dropout_sites))?,
            None => None,
        };
        let rows = dropout(&encoded.rows, drop)?;
        let (start, end) = span.logits(&rows, batch, seq)?;
        let (start_ce, end_ce) = span_cross_entropies(&start, &end, start_positions, end_positions)?;
        let loss = elementwise::add(&start_ce.loss, &end_ce.loss)?;
        // Each loss weighs ½.
        let (d_start, d_end) = (cross_entropy_backward(start, &start_ce, 0.5 * loss_scale)?, cross_entropy_backward(end, &end_ce, 0.5 * loss_scale)?);
        let d_rows = dropout(&span.backward(&rows, &d_start, &d_end, grads)?, drop)?;
        self.encode_backward(inputs, &encoded, &d_rows, grads)?;
        elementwise::mul(&loss, &Tensor::from_slice(self.gpu(), &[0.5f32], &[1])?)
    }
}

/// What [`Encoder::masked_lm_step`] computed: the loss `[1]` and, when kept, the logits
/// `[labelled positions, vocab]` at the labelled positions in row-major order.
pub struct MaskedLmStep {
    pub loss: Tensor,
    pub logits: Option<Tensor>,
}

/// The cross entropies of start logits and end logits [B, T] against one position each per
/// sequence, as `BertForQuestionAnswering` scores them: positions clamped to 0..=T, and T
/// (an answer outside the sequence) ignored.
pub fn span_cross_entropies(
    start_logits: &Tensor,
    end_logits: &Tensor,
    start_positions: &[i64],
    end_positions: &[i64],
) -> Result<(CrossEntropyOutput, CrossEntropyOutput)> {
    let (batch, seq) = (start_logits.shape()[0], start_logits.shape()[1]);
    for (name, positions) in [("start_positions", start_positions), ("end_positions", end_positions)] {
        if positions.len() != batch {
            return Err(shape_err!("train", "{} {name} for a batch of {batch} sequences", positions.len()));
        }
    }
    let clamped = |positions: &[i64]| -> Vec<i64> { positions.iter().map(|&p| p.clamp(0, seq as i64)).collect() };
    let start = cross_entropy(start_logits, &clamped(start_positions), seq as i64)?;
    let end = cross_entropy(end_logits, &clamped(end_positions), seq as i64)?;
    Ok((start, end))
}

/// The targets of replaced-token detection: each token's label (0 or 1), −100 where the
/// attention mask is 0.
pub fn replaced_token_targets(inputs: &EncoderInputs, labels: &[i64]) -> Result<Vec<i64>> {
    let n = inputs.batch * inputs.seq;
    if labels.len() != n {
        return Err(shape_err!("train", "{} labels for batch {} × sequence {}", labels.len(), inputs.batch, inputs.seq));
    }
    if let Some(bad) = labels.iter().find(|&&l| l != 0 && l != 1) {
        return Err(arg_err!("train", "replaced-token label {bad}: labels are 1 (replaced) or 0 (original)"));
    }
    let active = |i: usize| inputs.attention_mask.is_none_or(|m| m[i] != 0);
    Ok(labels.iter().enumerate().map(|(i, &l)| if active(i) { l } else { DEFAULT_IGNORE_INDEX }).collect())
}

/// The binary cross entropy with logits of `logits` `[N, 1]` (or `[N]`) against 0/1 `targets`
/// (−100 ignored; the mean runs over the rest), as a two-way softmax cross entropy over
/// (0, x): its probability of class 1 is σ(x). Returns the two-way logits `[N, 2]`, kept for
/// the backward, and the cross entropy.
pub fn binary_cross_entropy(logits: &Tensor, targets: &[i64]) -> Result<(Tensor, CrossEntropyOutput)> {
    let n = logits.numel();
    // x · [0, 1] = (0, x), exactly.
    let pair = matmul(&logits.reshape(&[n, 1])?, &lift(logits.gpu())?, Matmul::default())?;
    let ce = cross_entropy(&pair, targets, DEFAULT_IGNORE_INDEX)?;
    Ok((pair, ce))
}

/// The gradient of `loss_scale` × [`binary_cross_entropy`]'s loss with respect to the logits,
/// [N, 1]: the second column of the two-way logits' gradient (σ(x) − y, over the count).
pub fn binary_cross_entropy_backward(pair: Tensor, ce: &CrossEntropyOutput, loss_scale: f32) -> Result<Tensor> {
    let lift = lift(pair.gpu())?;
    let d_pair = cross_entropy_backward(pair, ce, loss_scale)?;
    matmul(&d_pair, &lift, Matmul { trans_b: true, ..Default::default() })
}

/// [0, 1] as a [1, 2] matrix.
fn lift(gpu: &crate::Device) -> Result<Tensor> {
    Tensor::from_slice(gpu, &[0.0f32, 1.0], &[1, 2])
}
