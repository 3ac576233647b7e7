//! ERNIE 2.0's pretraining tasks besides knowledge-masked LM (Sun et al. 2020, §4.2), drawn
//! with a seeded generator from plain documents (sentences as masked LM splits them):
//!
//! - **capitalization prediction** (word-aware): `[CLS] sentences [SEP]`, each word's first
//!   piece labelled 1 when the word starts with a capital letter and 0 when with a small one
//!   (−100 elsewhere): token classification, 2 classes. The tokenizer must lowercase, else the
//!   input would show the answer.
//! - **sentence reordering** (structure-aware): whole sentences read on from a random one,
//!   split at sentence ends into n ∈ 1..=3 segments (n uniform, but no more than the
//!   sentences that fit), shown in a uniformly random order as `[CLS] s₁ [SEP] s₂ [SEP] …`
//!   (all in segment 0). The class names n and the order:
//!   Σ_{k<n} k! + the order's lexicographic rank among the n! — 1 + 2 + 6 = 9 classes.
//! - **sentence distance** (structure-aware): `[CLS] A [SEP] B [SEP]` where B is the sentence
//!   after A (class 0), another sentence of A's document not next to it (1), or a sentence of
//!   another document (2): A drawn uniformly, then the class uniformly among those A allows
//!   (so which sentences are A does not give the class away).
//!
//! Batch i depends on (seed, i) alone, so a resumed run draws the same batches.

mod task;
mod tasks_data;

pub use task::{StructureTask, CAPITALIZATION_LABELS, MAX_SEGMENTS};
pub use tasks_data::*;
