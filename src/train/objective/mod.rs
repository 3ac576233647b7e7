//! Training objectives: which loss a model's batch is scored with, and the models they train.

pub mod kind;

pub use kind::Objective;

use super::data::Batch;
use super::electra::ElectraPretraining;
use super::multitask::MultiTaskModel;
use crate::error::{arg_err, Result, SesameError};
use crate::models::auto::AutoModel;
use crate::models::awd_lstm::train::AwdLstmTraining;
use crate::models::cove::classify::CoveClassifierTraining;
use crate::models::cove::translation::{CoveTranslation, TranslationBatch};
use crate::models::cvt::train::CvtTraining;
use crate::models::decoder::train::LmBatch;
use crate::models::elmo::classify::ElmoClassifier;
use crate::models::elmo::train::{BiLmBatch, ElmoBiLm};
use crate::models::encoder::train::{binary_cross_entropy, replaced_token_targets, span_cross_entropies};
use crate::models::encoder::Encoder;
use crate::models::ForwardOptions;
use crate::models::{Model, ModelOutput};
use crate::nn::Gradients;
use crate::ops::cross_entropy::{cross_entropy, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::DropoutStream;
use crate::ops::elementwise;
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

/// A model as a run trains it.
pub enum TrainModel {
    /// A Hugging Face-layout transformer (GPT-2, GPT, BERT).
    Transformer(AutoModel),
    /// ELMo with its biLM softmax.
    BiLm(ElmoBiLm),
    /// A frozen ELMo under a task's scalar mix and classifier.
    ElmoClassifier(ElmoClassifier),
    /// Transformers with one head per task over one encoder (objective multi-task).
    MultiTask(MultiTaskModel),
    /// ELECTRA's generator and discriminator over shared embeddings (objective electra).
    Electra(ElectraPretraining),
    /// An AWD-LSTM language model (ULMFiT's; objective clm).
    AwdLstm(AwdLstmTraining),
    /// CVT's tagger (objective token-classify; cross-view training on unlabelled batches).
    /// Boxed: its layers and modules make it far larger than the other variants.
    Cvt(Box<CvtTraining>),
    /// CoVe's encoder under its attentional decoder (objective translation).
    CoveTranslation(Box<CoveTranslation>),
    /// CoVe's features (fixed) under a pooled classifier (objective classify).
    CoveClassifier(Box<CoveClassifierTraining>),
}

impl TrainModel {
    /// The longest sequence it takes; None when unbounded (ELMo's LSTMs).
    pub fn max_positions(&self) -> Option<usize> {
        match self {
            TrainModel::Transformer(m) => Some(m.max_positions()),
            TrainModel::MultiTask(m) => m.tasks.iter().map(|t| t.model.max_positions()).min(),
            TrainModel::Electra(m) => Some(m.max_positions()),
            TrainModel::BiLm(_)
            | TrainModel::ElmoClassifier(_)
            | TrainModel::AwdLstm(_)
            | TrainModel::Cvt(_)
            | TrainModel::CoveTranslation(_)
            | TrainModel::CoveClassifier(_) => None,
        }
    }

    /// The layer group of parameter `name` and the number of groups, bottom (0) to top, for
    /// ULMFiT's discriminative rates and gradual unfreezing; None for a model without groups.
    pub fn layer_group(&self, name: &str) -> Option<(usize, usize)> {
        match self {
            TrainModel::AwdLstm(m) => m.layer_group(name),
            _ => None,
        }
    }

    /// About how many f32 values one training micro-batch of `batch` × `seq` keeps for its
    /// backward pass (saturating): a transformer layer keeps ~17 values per token and width
    /// and ~3 per attention score (Korthikanti et al. 2022, in f32), plus the logits and their
    /// gradient; an ELMo keeps its gates, cells and states per direction and layer and its
    /// character convolutions. A bound to refuse absurd sizes with, not a forecast.
    pub fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let tokens = product(&[batch as u64, seq as u64]);
        let transformer = |m: &AutoModel| {
            let s = m.sizes();
            let layer = product(&[tokens, 17, s.hidden_size as u64]).saturating_add(product(&[3, batch as u64, s.heads as u64, seq as u64, seq as u64]));
            product(&[s.layers as u64, layer]).saturating_add(product(&[2, tokens, s.vocab_size as u64]))
        };
        match self {
            TrainModel::Transformer(m) => transformer(m),
            // One task's batch at a time.
            TrainModel::MultiTask(m) => m.tasks.iter().map(|t| transformer(&t.model)).max().unwrap_or(0),
            // Both models' activations are kept until the step's end.
            TrainModel::Electra(m) => transformer(&m.generator).saturating_add(transformer(&m.discriminator)),
            TrainModel::BiLm(m) => elmo_activation_values(&m.options, tokens),
            TrainModel::ElmoClassifier(m) => elmo_activation_values(m.options(), tokens),
            TrainModel::AwdLstm(m) => m.activation_values(batch, seq),
            TrainModel::Cvt(m) => m.activation_values(batch, seq),
            // A target about as long as its source.
            TrainModel::CoveTranslation(m) => m.activation_values(batch, seq, seq),
            TrainModel::CoveClassifier(m) => m.activation_values(batch, seq),
        }
    }
}

fn elmo_activation_values(options: &crate::models::elmo::ElmoOptions, tokens: u64) -> u64 {
    use crate::limits::saturating_product as product;
    let (lstm, filters) = (&options.lstm, options.n_filters() as u64);
    let per_token = product(&[2, lstm.n_layers as u64, 6 * lstm.dim as u64 + 2 * lstm.projection_dim as u64])
        .saturating_add(product(&[50, 2, filters]))
        .saturating_add(product(&[2, options.char_cnn.n_highway as u64, filters]));
    product(&[tokens, per_token])
}

impl Objective {
    /// Checks that `model` can be trained with this objective.
    pub fn check(self, model: &TrainModel) -> Result<()> {
        match (self, model) {
            (_, TrainModel::Transformer(m)) => self.check_transformer(m),
            (Objective::MultiTask, TrainModel::MultiTask(m)) => m
                .tasks
                .iter()
                .try_for_each(|task| task.spec.objective.check_transformer(&task.model).map_err(|e| arg_err!("train", "task `{}`: {e}", task.spec.name))),
            (_, TrainModel::MultiTask(_)) => Err(arg_err!("train", "a multi-task model (tasks.json) trains with objective multi-task, not {self}")),
            (Objective::Electra, TrainModel::Electra(_)) => Ok(()),
            (_, TrainModel::Electra(_)) => {
                Err(arg_err!("train", "an ELECTRA pretraining folder (config.json and generator_config.json) trains with objective electra, not {self}"))
            }
            (Objective::BiLm, TrainModel::BiLm(_)) | (Objective::Classify, TrainModel::ElmoClassifier(_)) => Ok(()),
            (Objective::Clm, TrainModel::AwdLstm(m)) if !m.is_classifier() => Ok(()),
            (Objective::Classify, TrainModel::AwdLstm(m)) if m.is_classifier() => Ok(()),
            (Objective::TokenClassify, TrainModel::Cvt(_)) => Ok(()),
            (Objective::Translation, TrainModel::CoveTranslation(_)) | (Objective::Classify, TrainModel::CoveClassifier(_)) => Ok(()),
            _ => Err(self.mismatch()),
        }
    }

    fn check_transformer(self, m: &AutoModel) -> Result<()> {
        match self {
            Objective::Clm | Objective::Classify if m.as_decoder_training().is_some() => Ok(()),
            Objective::Mlm
            | Objective::MlmNsp
            | Objective::MlmSop
            | Objective::Rtd
            | Objective::Classify
            | Objective::TokenClassify
            | Objective::Qa
            | Objective::MultipleChoice => {
                let encoder = m.as_encoder().ok_or_else(|| self.mismatch())?;
                self.check_head(encoder)
            }
            _ => Err(self.mismatch()),
        }
    }

    /// Checks that the pretraining objectives have their head: a sentence-pair objective the
    /// pair head it scores, replaced-token detection the discriminator (the fine-tuning
    /// objectives check theirs when they run).
    fn check_head(self, encoder: &Encoder) -> Result<()> {
        let architecture = encoder.architecture();
        let pair = encoder.sentence_pair_output();
        let wanted = match self {
            Objective::MlmNsp => self.pair_output().map(|o| (o, "a next-sentence head (BertForPreTraining, ErnieForPreTraining)")),
            Objective::MlmSop => self.pair_output().map(|o| (o, "a sentence-order head (AlbertForPreTraining)")),
            _ => None,
        };
        if matches!(self, Objective::Mlm | Objective::MlmNsp | Objective::MlmSop) && encoder.masked_lm_logits_name().is_none() {
            return Err(arg_err!("train", "objective {self} needs a masked-LM head (…ForMaskedLM or …ForPreTraining), not `{architecture}`"));
        }
        if let Some((output, head)) = wanted {
            if pair != Some(output) {
                let has = match pair {
                    Some("sop_logits") => " (its head predicts sentence order: objective mlm+sop)",
                    Some(_) => " (its head predicts the next sentence: objective mlm+nsp)",
                    None => "",
                };
                return Err(arg_err!("train", "objective {self} needs {head}; `{architecture}` has none{has}"));
            }
        }
        if self == Objective::MultipleChoice && !architecture.ends_with("ForMultipleChoice") {
            return Err(arg_err!("train", "objective multiple-choice trains a …ForMultipleChoice head, not `{architecture}`"));
        }
        if self == Objective::Rtd && !encoder.detects_replaced_tokens() {
            return Err(arg_err!("train", "objective rtd trains ELECTRA's discriminator (ElectraForPreTraining), not `{architecture}`"));
        }
        Ok(())
    }

    /// The output of a sentence-pair objective's head, as transformers names it.
    pub(crate) fn pair_output(self) -> Option<&'static str> {
        match self {
            Objective::MlmNsp => Some("seq_relationship_logits"),
            Objective::MlmSop => Some("sop_logits"),
            _ => None,
        }
    }

    /// The sentence-pair labels a pair objective scores, by the name transformers gives them.
    pub(crate) fn pair_labels(self, batch: &Batch) -> Result<&[i64]> {
        let (labels, name) = match self {
            Objective::MlmSop => (&batch.sentence_order_label, "sentence_order_label"),
            _ => (&batch.next_sentence_label, "next_sentence_label"),
        };
        labels.as_deref().ok_or_else(|| arg_err!("train", "objective {self} needs {name} in every batch"))
    }

    fn mismatch(self) -> SesameError {
        let family = match self {
            Objective::Clm => "GPT-2, GPT and AWD-LSTM checkpoints (model_type gpt2, openai-gpt, awd_lstm)",
            Objective::BiLm => "ELMo checkpoints (options.json)",
            Objective::Classify => {
                "BERT, GPT-2 and GPT checkpoints (model_type bert, gpt2, openai-gpt), ELMo features (options.json), ULMFiT's classifier (awd_lstm) and CoVe features (cove)"
            }
            Objective::MlmSop => "ALBERT checkpoints (AlbertForPreTraining)",
            Objective::Rtd => "ELECTRA discriminators (ElectraForPreTraining)",
            Objective::Electra => "an ELECTRA pretraining folder (config.json for the discriminator, generator_config.json for the generator)",
            Objective::MultiTask => "a multi-task folder (tasks.json: one head per task on a shared encoder)",
            Objective::TokenClassify => "the BERT-like encoders (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ALBERT, ERNIE, ELECTRA) and CVT's tagger (cvt)",
            Objective::Translation => "CoVe's translation model (a CoveForTranslation folder, a CoVe encoder that gets a fresh decoder, or --arch cove)",
            _ => "the BERT-like encoders (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ALBERT, ERNIE, ELECTRA)",
        };
        arg_err!("train", "objective {self} trains {family}")
    }

    /// The loss of `batch` under this objective and its backward, adding `step.loss_scale` ×
    /// every parameter's gradient into `grads`. Returns the loss `[1]`, not read back.
    pub fn loss_backward(self, model: &TrainModel, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        let loss_scale = step.loss_scale;
        let model = match model {
            TrainModel::BiLm(m) if self == Objective::BiLm => return m.loss_backward(&bilm_batch(batch)?, grads, loss_scale),
            TrainModel::ElmoClassifier(m) if self == Objective::Classify => return m.loss_backward(sentences(batch)?, &batch.labels, grads, loss_scale),
            TrainModel::MultiTask(m) if self == Objective::MultiTask => {
                let (task, batch) = m.task_of(batch)?;
                return task.spec.objective.transformer_loss_backward(&task.model, &batch, grads, step);
            }
            TrainModel::Electra(m) if self == Objective::Electra => return Ok(m.loss_backward(batch, grads, step)?.total),
            TrainModel::AwdLstm(m) if self == Objective::Clm => return m.lm_loss_backward(&batch.lm(), grads, loss_scale, &step.dropout),
            TrainModel::AwdLstm(m) if self == Objective::Classify => {
                return m.classification_loss_backward(&batch.lm(), &batch.labels, grads, loss_scale, &step.dropout)
            }
            // A batch without labels is unlabelled text: cross-view training's loss.
            TrainModel::Cvt(m) if self == Objective::TokenClassify => {
                let ids = batch.ids(crate::models::InputKinds::default());
                return match batch.labels.iter().all(|&l| l == DEFAULT_IGNORE_INDEX) {
                    true => m.unlabeled_loss_backward(&ids, grads, loss_scale, &step.dropout),
                    false => m.labeled_loss_backward(&ids, &batch.labels, grads, loss_scale, &step.dropout),
                };
            }
            TrainModel::CoveTranslation(m) if self == Objective::Translation => {
                let source = batch.ids(crate::models::InputKinds::default());
                return m.loss_backward(&translation_batch(batch, &source)?, grads, loss_scale, &step.dropout);
            }
            TrainModel::CoveClassifier(m) if self == Objective::Classify => {
                return m.loss_backward(&batch.ids(crate::models::InputKinds::default()), &batch.labels, grads, loss_scale, &step.dropout)
            }
            TrainModel::BiLm(_)
            | TrainModel::ElmoClassifier(_)
            | TrainModel::MultiTask(_)
            | TrainModel::Electra(_)
            | TrainModel::AwdLstm(_)
            | TrainModel::Cvt(_)
            | TrainModel::CoveTranslation(_)
            | TrainModel::CoveClassifier(_) => return Err(self.mismatch()),
            TrainModel::Transformer(m) => m,
        };
        self.transformer_loss_backward(model, batch, grads, step)
    }

    /// [`Objective::loss_backward`] of a transformer.
    fn transformer_loss_backward(self, model: &AutoModel, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        let (loss_scale, dropout) = (step.loss_scale, &step.dropout);
        if let Some(m) = model.as_encoder() {
            return self.encoder_loss_backward(m, batch, grads, step);
        }
        let m = model.as_decoder_training().ok_or_else(|| self.mismatch())?;
        match self {
            Objective::Clm => m.lm_loss_backward(&batch.lm(), grads, loss_scale, dropout),
            Objective::Classify => {
                // The auxiliary LM scores the batch's own tokens.
                let lm_labels = batch.input_lm_labels();
                let lm = LmBatch { labels: &lm_labels, ..batch.lm() };
                m.sequence_classification_loss_backward(&lm, &batch.labels, step.lm_coef, grads, loss_scale, dropout)
            }
            _ => Err(self.mismatch()),
        }
    }

    /// [`Objective::loss_backward`] of an encoder.
    fn encoder_loss_backward(self, m: &Encoder, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        let (loss_scale, dropout) = (step.loss_scale, &step.dropout);
        match self {
            Objective::Mlm => m.masked_lm_loss_backward(&batch.mlm(None), grads, loss_scale, dropout),
            Objective::MlmNsp | Objective::MlmSop => m.masked_lm_loss_backward(&batch.mlm(Some(self.pair_labels(batch)?)), grads, loss_scale, dropout),
            Objective::Rtd => m.replaced_token_loss_backward(&batch.encoder_inputs(), &batch.labels, grads, loss_scale, dropout),
            Objective::Classify => m.sequence_classification_loss_backward(&batch.encoder_inputs(), &batch.labels, grads, loss_scale, dropout),
            Objective::TokenClassify => m.token_classification_loss_backward(&batch.encoder_inputs(), &batch.labels, grads, loss_scale, dropout),
            Objective::Qa => {
                let (starts, ends) = batch.span_positions()?;
                m.question_answering_loss_backward(&batch.encoder_inputs(), starts, ends, grads, loss_scale, dropout)
            }
            Objective::MultipleChoice => {
                m.multiple_choice_loss_backward(&batch.encoder_inputs(), batch.multiple_choices()?, &batch.labels, grads, loss_scale, dropout)
            }
            _ => Err(self.mismatch()),
        }
    }

    /// The inference forward pass of `batch` (no dropout, no gradients): what held-out
    /// evaluation scores.
    pub fn forward(self, model: &TrainModel, batch: &Batch) -> Result<ModelOutput> {
        self.check(model)?;
        let model = match model {
            TrainModel::BiLm(m) => {
                let losses = m.losses(&bilm_batch(batch)?)?;
                let mut out = ModelOutput::default();
                out.push("loss", losses.loss);
                out.push("forward_loss", losses.forward);
                out.push("backward_loss", losses.backward);
                return Ok(out);
            }
            TrainModel::ElmoClassifier(m) => {
                let mut out = ModelOutput::default();
                out.push("logits", m.logits(sentences(batch)?)?);
                return Ok(out);
            }
            TrainModel::Transformer(m) => m,
            TrainModel::MultiTask(m) => {
                let (task, batch) = m.task_of(batch)?;
                return task.model.forward(&batch.ids(task.model.inputs()), ForwardOptions::default());
            }
            TrainModel::Electra(m) => return m.evaluate(batch),
            TrainModel::AwdLstm(m) => {
                let mut out = ModelOutput::default();
                out.push("logits", m.logits(&batch.lm())?);
                return Ok(out);
            }
            TrainModel::Cvt(m) => {
                let mut out = ModelOutput::default();
                out.push("logits", m.logits(&batch.ids(crate::models::InputKinds::default()))?);
                return Ok(out);
            }
            TrainModel::CoveTranslation(m) => {
                let source = batch.ids(crate::models::InputKinds::default());
                let mut out = ModelOutput::default();
                out.push("logits", m.logits(&translation_batch(batch, &source)?)?);
                return Ok(out);
            }
            TrainModel::CoveClassifier(m) => {
                let mut out = ModelOutput::default();
                out.push("logits", m.logits(&batch.ids(crate::models::InputKinds::default()))?);
                return Ok(out);
            }
        };
        model.forward(&batch.ids(model.inputs()), ForwardOptions::default())
    }

    /// The loss of `batch` under this objective from its forward output `out`: the value
    /// [`Objective::loss_backward`] returns, without dropout (for GPT-2's classify, the task's
    /// loss alone, without the auxiliary LM term).
    pub fn loss_of(self, model: &TrainModel, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        match model {
            TrainModel::MultiTask(m) if self == Objective::MultiTask => {
                let (task, batch) = m.task_of(batch)?;
                task.spec.objective.output_loss(Some(&task.model), out, &batch)
            }
            TrainModel::Transformer(m) => self.output_loss(Some(m), out, batch),
            _ => self.output_loss(None, out, batch),
        }
    }

    /// [`Objective::loss_of`] with the transformer that made `out`, if one did.
    fn output_loss(self, transformer: Option<&AutoModel>, out: &ModelOutput, batch: &Batch) -> Result<Tensor> {
        let output = |name: &str| out.get(name).ok_or_else(|| arg_err!("train", "the model returned no `{name}`"));
        let rows = |t: &Tensor| t.reshape(&[t.numel() / t.shape()[t.rank() - 1], t.shape()[t.rank() - 1]]);
        match self {
            Objective::Clm => Ok(cross_entropy(&rows(output("logits")?)?, &batch.lm().shifted_targets(), DEFAULT_IGNORE_INDEX)?.loss),
            // Multiple choice: logits [examples, choices].
            Objective::Classify | Objective::MultipleChoice => Ok(cross_entropy(output("logits")?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss),
            Objective::TokenClassify | Objective::Translation => Ok(cross_entropy(&rows(output("logits")?)?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss),
            Objective::Qa => {
                let (starts, ends) = batch.span_positions()?;
                let (start, end) = span_cross_entropies(output("start_logits")?, output("end_logits")?, starts, ends)?;
                elementwise::mul(&elementwise::add(&start.loss, &end.loss)?, &Tensor::from_slice(start.loss.gpu(), &[0.5f32], &[1])?)
            }
            Objective::BiLm | Objective::Electra => Ok(output("loss")?.clone()),
            Objective::Mlm | Objective::MlmNsp | Objective::MlmSop => {
                let encoder = transformer.and_then(|m| m.as_encoder()).ok_or_else(|| self.mismatch())?;
                let logits = output(encoder.masked_lm_logits_name().ok_or_else(|| self.mismatch())?)?;
                let mlm = cross_entropy(&rows(logits)?, &batch.labels, DEFAULT_IGNORE_INDEX)?.loss;
                let pair = match (self, encoder.sentence_pair_output()) {
                    (Objective::Mlm, _) => return Ok(mlm),
                    (_, Some(pair)) => pair,
                    (_, None) => return Err(self.mismatch()),
                };
                elementwise::add(&mlm, &cross_entropy(output(pair)?, self.pair_labels(batch)?, DEFAULT_IGNORE_INDEX)?.loss)
            }
            Objective::Rtd => {
                let targets = replaced_token_targets(&batch.encoder_inputs(), &batch.labels)?;
                Ok(binary_cross_entropy(output("logits")?, &targets)?.1.loss)
            }
            Objective::MultiTask => Err(self.mismatch()),
        }
    }

    /// The loss of `batch` from the inference forward pass, without gradients.
    pub fn loss(self, model: &TrainModel, batch: &Batch) -> Result<Tensor> {
        self.loss_of(model, &self.forward(model, batch)?, batch)
    }
}

/// The words of an ELMo batch.
fn sentences(batch: &Batch) -> Result<&[Vec<String>]> {
    let s = batch.sentences.as_ref().ok_or_else(|| arg_err!("train", "an ELMo needs batches of sentences (it reads words, not token ids)"))?;
    Ok(&s.sentences)
}

/// The sentences of a biLM batch and their word ids.
fn bilm_batch(batch: &Batch) -> Result<BiLmBatch<'_>> {
    let targets =
        &batch.sentences.as_ref().ok_or_else(|| arg_err!("train", "objective bilm needs batches of sentences (ELMo reads words, not token ids)"))?.targets;
    Ok(BiLmBatch { sentences: sentences(batch)?, targets })
}

/// A translation batch: `source` (the batch's ids) and its targets.
fn translation_batch<'a>(batch: &'a Batch, source: &'a crate::models::IdsBatch) -> Result<TranslationBatch<'a>> {
    let decoder_input_ids =
        batch.decoder_input_ids.as_deref().ok_or_else(|| arg_err!("train", "objective translation needs decoder_input_ids in every batch"))?;
    Ok(TranslationBatch { source, decoder_input_ids, labels: &batch.labels, target_seq: decoder_input_ids.len() / batch.batch.max(1) })
}
