//! ELMo features for a task (Peters et al. 2018 §3.3): the pretrained biLM stays frozen, the
//! task learns a scalar mix γ·Σⱼ softmax(s)ⱼ·hⱼ of its L+1 layers, and a small classifier
//! reads the mean of each sentence's mixed word vectors: logits = W·meanₜ(mixₜ) + b. The mean
//! over words is taken before the mix (the two commute), so the mix runs on [B, L+1, 2·proj].
//!
//! Trainable tensors: `scalar_mix_0.scalar_parameters.{j}` and `scalar_mix_0.gamma`
//! (AllenNLP's names, so the folder's mix is what `ElmoModel` loads as mix 0) and
//! `classifier.weight` `[labels, 2·proj]`, `classifier.bias` `[labels]`. The biLM's tensors are
//! loaded through a frozen view and saved as they were (a biLM's `softmax.*` is not part of
//! the classifier, and is dropped).

use super::train::elmo_activation_values;
use super::{ElmoModel, ElmoOptions};
use crate::error::{arg_err, shape_err, Result};
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::models::ModelOutput;
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::matmul::{matmul, Matmul};
use crate::ops::rows::copy_rows;
use crate::ops::scalar_mix::{scalar_mix, scalar_mix_backward};
use crate::ops::sum::column_sums_into;
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

pub struct ElmoClassifier {
    elmo: ElmoModel,
    /// `scalar_mix_0.scalar_parameters.{j}`, each [1] (AllenNLP keeps them apart).
    scalar_parameters: Vec<Tensor>,
    gamma: Tensor,
    classifier: Linear,
}

/// A forward pass, kept for the backward.
struct ClassifierForward {
    /// Each sentence's mean of each layer, [B, L+1, 2·proj].
    pooled: Tensor,
    /// The scalar parameters gathered into s [L+1].
    s: Tensor,
    /// The mixed features [B, 2·proj] and the logits [B, labels].
    mixed: Tensor,
    logits: Tensor,
}

impl ElmoClassifier {
    pub fn options(&self) -> &ElmoOptions {
        &self.elmo.options
    }

    /// The biLM of `options` (AllenNLP names; a biLM's `softmax.*` is ignored) loaded frozen,
    /// and the trainable mix and classifier for `num_labels` classes.
    pub fn load(options: ElmoOptions, w: &Weights, num_labels: usize) -> Result<ElmoClassifier> {
        let elmo = ElmoModel::load(options, &w.frozen())?;
        let layers = elmo.options.lstm.n_layers + 1;
        let mix = w.pp("scalar_mix_0");
        let scalar_parameters = (0..layers).map(|j| mix.tensor(&format!("scalar_parameters.{j}"), &[1])).collect::<Result<Vec<_>>>()?;
        let gamma = mix.tensor("gamma", &[1])?;
        let classifier = Linear::load(&w.pp("classifier"), elmo.output_dim(), num_labels)?;
        Ok(ElmoClassifier { elmo, scalar_parameters, gamma, classifier })
    }

    /// The logits [B, labels] of a batch of sentences (words; each needs at least one).
    pub fn logits(&self, sentences: &[Vec<String>]) -> Result<Tensor> {
        Ok(self.forward_pooled(sentences)?.logits)
    }

    /// The mean cross-entropy of a batch against `labels` and its backward: adds
    /// `loss_scale` × the gradients of the mix and the classifier into `grads`. Returns the
    /// loss `[1]` (recorded on the GPU, not read back).
    pub fn classification_loss_backward(&self, sentences: &[Vec<String>], labels: &[i64], grads: &Gradients, loss_scale: f32) -> Result<Tensor> {
        let forward = self.forward_pooled(sentences)?;
        let ce = cross_entropy(&forward.logits, labels, DEFAULT_IGNORE_INDEX)?;
        let d_logits = cross_entropy_backward(forward.logits.clone(), &ce, loss_scale)?;
        let d_mixed = self.classifier.backward(&forward.mixed, &d_logits, grads)?;
        let d_s = Tensor::zeros(d_mixed.gpu(), &[self.scalar_parameters.len()], DType::F32)?;
        scalar_mix_backward(&forward.pooled, &forward.s, &self.gamma, &d_mixed, &d_s, grads.of(&self.gamma)?)?;
        for (j, parameter) in self.scalar_parameters.iter().enumerate() {
            column_sums_into(&d_s.narrow(j, 1)?, grads.of(parameter)?)?;
        }
        Ok(ce.loss)
    }

    fn forward_pooled(&self, sentences: &[Vec<String>]) -> Result<ClassifierForward> {
        let (layers, _) = self.elmo.layers(sentences)?;
        let &[batch, n_layers, longest, width] = layers.shape() else {
            return Err(shape_err!("elmo_classifier", "layers of shape {:?}", layers.shape()));
        };
        // Each (sentence, layer)'s mean over its words: [B·(L+1), 1, T] weights (1/n at the n
        // words, 0 at padding) times [B·(L+1), T, 2·proj].
        let weights: Vec<f32> = sentences
            .iter()
            .flat_map(|s| std::iter::repeat_n((0..longest).map(move |t| if t < s.len() { 1.0 / s.len() as f32 } else { 0.0 }), n_layers).flatten())
            .collect();
        let gpu = layers.gpu();
        let weights = Tensor::from_slice(gpu, &weights, &[batch * n_layers, 1, longest])?;
        let pooled = matmul(&weights, &layers.reshape(&[batch * n_layers, longest, width])?, Matmul::default())?.reshape(&[batch, n_layers, width])?;
        let s = Tensor::zeros(gpu, &[n_layers, 1], DType::F32)?;
        for (j, parameter) in self.scalar_parameters.iter().enumerate() {
            copy_rows(&parameter.reshape(&[1, 1])?, &s, 0, &[(0, j)])?;
        }
        let s = s.reshape(&[n_layers])?;
        let mixed = scalar_mix(&pooled, &s, &self.gamma)?;
        let logits = self.classifier.forward(&mixed)?;
        Ok(ClassifierForward { pooled, s, mixed, logits })
    }
}

/// The words of a training batch.
fn sentences(batch: &Batch) -> Result<&[Vec<String>]> {
    let s = batch.sentences.as_ref().ok_or_else(|| arg_err!("train", "an ELMo needs batches of sentences (it reads words, not token ids)"))?;
    Ok(&s.sentences)
}

/// The task head trains with objective classify, the biLM under it fixed.
impl Trainable for ElmoClassifier {
    fn architecture(&self) -> &str {
        "ELMo's classifier"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::Classify]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        elmo_activation_values(self.options(), crate::limits::saturating_product(&[batch as u64, seq as u64]))
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        self.classification_loss_backward(sentences(batch)?, &batch.labels, grads, step.loss_scale)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        Ok(ModelOutput::logits(self.logits(sentences(batch)?)?))
    }
}
