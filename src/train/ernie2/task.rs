//! ERNIE 2.0's structure tasks as a run names them, and their classes.

use std::str::FromStr;

use crate::error::{arg_err, Result, SesameError};
use crate::models::training::Objective;

/// Capitalization prediction's classes, by id (its tagger's id2label).
pub const CAPITALIZATION_LABELS: [&str; 2] = ["lowercase", "capitalized"];

/// Sentence reordering splits a paragraph into at most this many segments.
pub const MAX_SEGMENTS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StructureTask {
    Capitalization,
    SentenceReordering,
    SentenceDistance,
}

impl StructureTask {
    /// The objective its batches are scored with.
    pub fn objective(self) -> Objective {
        match self {
            StructureTask::Capitalization => Objective::TokenClassify,
            StructureTask::SentenceReordering | StructureTask::SentenceDistance => Objective::Classify,
        }
    }

    /// The classes its head predicts.
    pub fn num_labels(self) -> usize {
        match self {
            StructureTask::Capitalization => CAPITALIZATION_LABELS.len(),
            StructureTask::SentenceReordering => order_class_offset(MAX_SEGMENTS + 1),
            StructureTask::SentenceDistance => 3,
        }
    }
}

impl FromStr for StructureTask {
    type Err = SesameError;

    fn from_str(s: &str) -> Result<StructureTask> {
        match s {
            "capitalization" => Ok(StructureTask::Capitalization),
            "sentence-reordering" => Ok(StructureTask::SentenceReordering),
            "sentence-distance" => Ok(StructureTask::SentenceDistance),
            other => Err(arg_err!("train", "unknown ERNIE 2.0 task `{other}` (capitalization, sentence-reordering, sentence-distance)")),
        }
    }
}

impl std::fmt::Display for StructureTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StructureTask::Capitalization => "capitalization",
            StructureTask::SentenceReordering => "sentence-reordering",
            StructureTask::SentenceDistance => "sentence-distance",
        })
    }
}

/// The first class of the orders of n segments: Σ_{k<n} k!.
pub(super) fn order_class_offset(n: usize) -> usize {
    (1..n).map(|k| (1..=k).product::<usize>()).sum()
}
