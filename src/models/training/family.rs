//! How a family trains, as its registry entry says: [`FamilyTraining`].

use super::fresh::{Fresh, RunData, TrainingFolder};
use super::{Objective, Trainable};
use crate::error::Result;
use crate::weights::{Checkpoint, Weights};

/// A folder whose models train together, with one objective of their own: ELECTRA's
/// pretraining folder, the generator's config beside the discriminator's config.json and
/// both models' weights in one model.safetensors. A family whose fresh models are made
/// ([`FamilyTraining::fresh`]) makes them as such folders.
pub struct JointFolder {
    /// What it is called in messages (`ELECTRA pretraining folder`).
    pub name: &'static str,
    /// The objective it trains with, and the only one.
    pub objective: Objective,
    /// The config file of its other model, beside config.json.
    pub other_config: &'static str,
    /// Its models, from config.json, the other config and the weights, as one trainable.
    pub load: JointLoader,
    /// Each of its models as a transformers folder of its own, from config.json, the other
    /// config and the weights; its checkpoints hold them too.
    pub parts: JointParts,
}

/// See [`JointFolder::load`].
pub type JointLoader = fn(&[u8], &[u8], &Weights) -> Result<Box<dyn Trainable>>;

/// See [`JointFolder::parts`].
pub type JointParts = fn(&[u8], &[u8], &Checkpoint) -> Result<Vec<FolderPart>>;

/// One model of a joint folder as a transformers folder: `prefix` (`generator/`), its
/// config.json and model.safetensors.
pub struct FolderPart {
    pub prefix: &'static str,
    pub config_json: Vec<u8>,
    pub safetensors: Vec<u8>,
}

/// How a family trains: what its models train with, how a folder of it loads for training,
/// the heads a fine-tuning run adds to a checkpoint without one, and the fresh models it
/// makes. Reached through its [`Family`](crate::models::family::Family) entry.
pub trait FamilyTraining: Sync {
    /// The objectives the family's models train with (each with the head it needs).
    fn objectives(&self) -> Vec<Objective>;

    /// The model of `config_json` from `weights` (a recording view, whose trainable tensors
    /// become the run's parameters) as a run trains it with `objective`.
    fn load(&self, config_json: &[u8], weights: &Weights, objective: Objective) -> Result<Box<dyn Trainable>>;

    /// The checkpoint (config.json, model.safetensors) with the head `objective` trains added
    /// when it has none — a classifier over `labels` (by id), a tagger, a span head, … —
    /// drawn as the family draws a missing head; as it is when it has one, or when the
    /// objective needs no head of its own.
    fn with_head(&self, _objective: Objective, config_json: &[u8], safetensors: Vec<u8>, _labels: &[String], _seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        Ok((config_json.to_vec(), safetensors))
    }

    /// The checkpoint `folder` fitted to the run's data before it trains: as it is, for most
    /// families; an AWD-LSTM language model over the vocabulary of the run's `words:N`, a CoVe
    /// encoder under a translation decoder over the target words of the run's pairs.
    fn fit_to_data(&self, folder: TrainingFolder, _run: &RunData) -> Result<TrainingFolder> {
        Ok(folder)
    }

    /// The folder its models train together in, if it has one: see [`JointFolder`].
    fn joint_folder(&self) -> Option<&JointFolder> {
        None
    }

    /// How it makes fresh models (`sesame train --arch`), if it does.
    fn fresh(&self) -> Option<&Fresh> {
        None
    }

    /// transformers' `base_model_prefix`: where a head class's checkpoint keeps the base
    /// model's weights (`bert` in `bert.encoder.layer.0.…`), what a multi-task model's heads
    /// share. None for the families without a base model to share.
    fn base_model_prefix(&self) -> Option<&'static str> {
        None
    }

    /// The first components of the weight names of the head `objective` trains, in a
    /// multi-task checkpoint (`cls` for BERT's masked LM).
    fn head_roots(&self, _objective: Objective) -> &'static [&'static str] {
        &[]
    }

    /// Whether its class `architecture` reads the base model's pooler.
    fn reads_pooler(&self, _architecture: &str) -> bool {
        false
    }
}

/// Adds the head an objective trains to a checkpoint without it: see
/// [`FamilyTraining::with_head`].
pub type HeadMaker = fn(Objective, &[u8], Vec<u8>, &[String], u64) -> Result<(Vec<u8>, Vec<u8>)>;

/// A family whose models all train as the one type its loader returns (a decoder's `Decoder`,
/// an AWD-LSTM's training model, CVT's tagger).
pub struct Trains<M> {
    pub objectives: &'static [Objective],
    pub load: fn(&[u8], &Weights) -> Result<M>,
    pub with_head: Option<HeadMaker>,
    /// See [`FamilyTraining::fit_to_data`].
    pub fit_to_data: Option<fn(TrainingFolder, &RunData) -> Result<TrainingFolder>>,
    pub fresh: Option<Fresh>,
}

impl<M: Trainable + 'static> FamilyTraining for Trains<M> {
    fn objectives(&self) -> Vec<Objective> {
        self.objectives.to_vec()
    }

    fn load(&self, config_json: &[u8], weights: &Weights, _objective: Objective) -> Result<Box<dyn Trainable>> {
        Ok(Box::new((self.load)(config_json, weights)?))
    }

    fn with_head(&self, objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        match self.with_head {
            Some(make) => make(objective, config_json, safetensors, labels, seed),
            None => Ok((config_json.to_vec(), safetensors)),
        }
    }

    fn fit_to_data(&self, folder: TrainingFolder, run: &RunData) -> Result<TrainingFolder> {
        match self.fit_to_data {
            Some(fit) => fit(folder, run),
            None => Ok(folder),
        }
    }

    fn fresh(&self) -> Option<&Fresh> {
        self.fresh.as_ref()
    }
}
