//! Training `CoveForSequenceClassification` (see the family's docs): CoVe's encoder fixed, as
//! the paper keeps it for its tasks, and the pooled classifier trained — dropout
//! (`classifier_dropout`) on the pooled features and on the hidden layer, the mean cross
//! entropy of the labels. The encoder's features carry no gradient, so the backward stops at
//! the pooled features.

use super::{pooled_features, CoveConfig, MtLstm};
use crate::error::{arg_err, Result};
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::models::{IdsBatch, InputKinds, ModelOutput};
use crate::nn::{Gradients, Linear};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::dropout::{dropout, DropoutStream};
use crate::ops::elementwise::{unary, unary_backward, Unary};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// CoVe's classifier as a run trains it.
pub struct CoveClassifierTraining {
    pub config: CoveConfig,
    /// Read through a frozen view: kept as it is.
    encoder: MtLstm,
    pre_classifier: Linear,
    classifier: Linear,
}

impl CoveClassifierTraining {
    /// The encoder (frozen) and the head's parameters, read through a recording view.
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CoveClassifierTraining> {
        let config = CoveConfig::from_json(config_json)?;
        let architecture = config.head.architecture("CoveModel");
        if architecture != "CoveForSequenceClassification" {
            return Err(arg_err!("train", "a CoVe classifier is CoveForSequenceClassification, not `{architecture}`"));
        }
        let (features, hidden) = (3 * config.output_size(), config.classifier_hidden_size);
        Ok(CoveClassifierTraining {
            encoder: MtLstm::load(&config, &w.frozen())?,
            pre_classifier: Linear::load(&w.pp("pre_classifier"), features, hidden)?,
            classifier: Linear::load(&w.pp("classifier"), hidden, config.head.num_labels())?,
            config,
        })
    }

    /// The logits [B, labels] without dropout.
    pub fn logits(&self, batch: &IdsBatch) -> Result<Tensor> {
        let pooled = pooled_features(&self.encoder.forward(batch)?, batch.seq)?.pooled;
        self.classifier.forward(&unary(&self.pre_classifier.forward(&pooled)?, Unary::Relu)?)
    }

    /// The mean cross entropy of `labels` (one per sequence) and its backward, adding
    /// `loss_scale` × the head's gradients into `grads`. Returns the loss `[1]`.
    pub fn classification_loss_backward(&self, batch: &IdsBatch, labels: &[i64], grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let classes = self.config.head.num_labels();
        if labels.len() != batch.batch {
            return Err(arg_err!("cove_classify", "{} labels for {} sequences", labels.len(), batch.batch));
        }
        if let Some(bad) = labels.iter().find(|&&l| l != DEFAULT_IGNORE_INDEX && (l < 0 || l as usize >= classes)) {
            return Err(arg_err!("cove_classify", "label {bad} is not one of the {classes} classes"));
        }
        let p = self.config.classifier_dropout;
        let (drop_pooled, drop_hidden) = (stream.site(p, 0)?, stream.site(p, 1)?);
        let pooled = dropout(&pooled_features(&self.encoder.forward(batch)?, batch.seq)?.pooled, drop_pooled)?;
        let hidden = self.pre_classifier.forward(&pooled)?;
        let activated = dropout(&unary(&hidden, Unary::Relu)?, drop_hidden)?;
        let logits = self.classifier.forward(&activated)?;
        let ce = cross_entropy(&logits, labels, DEFAULT_IGNORE_INDEX)?;
        let loss = ce.loss.clone();
        let d_logits = cross_entropy_backward(logits, &ce, loss_scale)?;
        let d_activated = self.classifier.backward(&activated, &d_logits, grads)?;
        let d_hidden = unary_backward(&hidden, &dropout(&d_activated, drop_hidden)?, Unary::Relu)?;
        self.pre_classifier.backward_weights(&pooled, &d_hidden, grads)?;
        Ok(loss)
    }
}

/// The classifier trains with objective classify, its encoder fixed.
impl Trainable for CoveClassifierTraining {
    fn architecture(&self) -> &str {
        "CoveForSequenceClassification"
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::Classify]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    /// About how many f32 values a batch keeps for its backward: the encoder's layers per
    /// token (none kept past the pooling, but alive while it runs) and the head's rows.
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let c = &self.config;
        let per_token = (c.num_layers as u64 + 1) * (2 * c.hidden_size + c.embedding_dim) as u64;
        product(&[batch as u64, seq as u64, per_token])
            .saturating_add(product(&[batch as u64, 6 * c.output_size() as u64 + 2 * c.classifier_hidden_size as u64]))
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        self.classification_loss_backward(&batch.ids(InputKinds::default()), &batch.labels, grads, step.loss_scale, &step.dropout)
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        Ok(ModelOutput::logits(self.logits(&batch.ids(InputKinds::default()))?))
    }
}

/// A CoVe folder (an encoder, or a translation model whose decoder is dropped) as
/// `CoveForSequenceClassification`: its features [GloVe; CoVe]
/// (`residual_embeddings`), a fresh `pre_classifier` and `classifier` drawn as `nn.Linear`'s
/// defaults (uniform in ±1/√fan_in), over the classes `labels`; a classifier is returned as it is.
#[cfg(feature = "training")]
pub fn with_classifier_head(config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    use super::translation::DECODER_KEYS;
    use crate::models::training::fresh::{with_labels, Init};
    let op = "model";
    let encoder = CoveConfig::from_json(config_json)?;
    match encoder.head.architecture("CoveModel") {
        "CoveForSequenceClassification" => return Ok((config_json.to_vec(), safetensors)),
        "CoveModel" | "CoveForTranslation" => {}
        other => return Err(arg_err!(op, "CoVe's classifier goes on a CoVe encoder, not `{other}`")),
    }
    let mut config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!(op, "config.json: {e}"))?;
    if let Some(keys) = config.as_object_mut() {
        keys.retain(|key, _| !DECODER_KEYS.contains(&key.as_str()));
    }
    config["residual_embeddings"] = true.into();
    config["classifier_hidden_size"] = encoder.classifier_hidden_size.into();
    let config_json = with_labels(config, "CoveForSequenceClassification", labels)?;
    let c = CoveConfig::from_json(&config_json)?;
    let checkpoint = crate::weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    init.tensors.retain(|(name, ..)| name.starts_with("vectors.") || name.starts_with("rnn."));
    let (features, hidden) = (3 * c.output_size(), c.classifier_hidden_size);
    for (name, inputs, outputs) in [("pre_classifier", features, hidden), ("classifier", hidden, c.head.num_labels())] {
        let bound = 1.0 / (inputs as f64).sqrt();
        init.uniform(format!("{name}.weight"), vec![outputs, inputs], bound)?;
        init.uniform(format!("{name}.bias"), vec![outputs], bound)?;
    }
    Ok((config_json, init.serialize()?))
}
