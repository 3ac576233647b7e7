//! Masked-LM pretraining batches from plain text. With next-sentence prediction, BERT's
//! (Devlin et al. 2019, following the original `create_pretraining_data.py`): sequences
//! `[CLS] A [SEP] B [SEP]` where B is A's true continuation or, half of the time, text from
//! another document. Without it, RoBERTa's FULL-SENTENCES (Liu et al. 2019, §4.2): whole
//! sentences read on from a random one, across the ends of documents with an extra separator
//! between two, until the next sentence would not fit: `<s> … </s> … </s>`. Then 15% of the
//! text tokens are selected (`select`) — drawn afresh for every batch index, so a sequence
//! seen again is masked anew (RoBERTa's dynamic masking) — by masking units: single tokens,
//! whole words (all of a word's WordPiece pieces; a Chinese word's characters), or, with
//! ERNIE's knowledge masking, whole phrases and entities ([`knowledge`] finds them), in stages
//! a [`MaskSchedule`] sets.
//!
//! The special tokens are BERT's (`[CLS] [SEP] [PAD] [MASK]`) or RoBERTa's (`<s> </s> <pad>
//! <mask>`), whichever the tokenizer has. Documents are separated by blank lines (or are JSON
//! lines with their annotations); within a document, sentences end at `.`, `!` or `?` followed
//! by white space (or at a line end), but never inside a phrase or entity.

mod corpus;
pub mod knowledge;
mod schedule;
mod select;

pub use corpus::*;
pub(crate) use corpus::{sentences, Specials};
pub use schedule::{MaskLevel, MaskSchedule, MaskStage};
