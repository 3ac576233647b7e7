//! The batch a training step consumes, whatever its source (sampled from text, replayed from
//! a file, drawn from labelled examples): the inputs under the names transformers gives them,
//! and what each objective scores.

use rand::{rngs::StdRng, SeedableRng};

use crate::error::{arg_err, Result};
use crate::models::{IdsBatch, InputKinds};
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;

/// One step's batch, row-major [batch, seq], named as transformers names them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    pub input_ids: Vec<u32>,
    pub attention_mask: Option<Vec<u32>>,
    pub token_type_ids: Option<Vec<u32>>,
    /// ERNIE's task ids, per token.
    pub task_type_ids: Option<Vec<u32>>,
    /// Per token `[batch, seq]` for language models, −100 where nothing is scored; per
    /// sequence `[batch]` for classification.
    pub labels: Vec<i64>,
    /// Per sequence: 0 when segment B follows A, 1 when B is random (BERT's NSP).
    pub next_sentence_label: Option<Vec<i64>>,
    /// Per sequence: 0 when the segments are in order, 1 when swapped (ALBERT's SOP).
    pub sentence_order_label: Option<Vec<i64>>,
    /// Question answering: each sequence's answer span, as token indices `[batch]` (0, the
    /// `[CLS]` token, when the answer is not in the sequence).
    pub start_positions: Option<Vec<i64>>,
    pub end_positions: Option<Vec<i64>>,
    /// ELMo's biLM reads words, not token ids: the sentences and their word ids.
    pub sentences: Option<SentenceBatch>,
    /// Multi-task training: the task the batch is for, by its index in tasks.json.
    pub task: Option<usize>,
    /// Multiple choice: the choices of each example. The rows are then examples × choices
    /// (`batch` rows, each example's choices consecutive) and `labels` [batch / choices].
    pub choices: Option<usize>,
    /// ELECTRA's pretraining replayed: the generator's replacement at each masked position
    /// (−100 elsewhere), used instead of sampling.
    pub generator_samples: Option<Vec<i64>>,
    /// Each token's characters `[batch, seq, width]`, for a model that reads them (CVT's).
    pub char_ids: Option<Vec<u32>>,
    /// Translation: the target's words the decoder reads under teacher forcing `[batch,
    /// target_seq]` (`<s>` y₁ … yₙ, padded), `labels` then being the words it predicts (y₁ …
    /// yₙ `</s>`, −100 past the end) of the same shape.
    pub decoder_input_ids: Option<Vec<u32>>,
    pub batch: usize,
    pub seq: usize,
}

/// Sentences (words, without boundaries) and, for the biLM, each one's word ids with the
/// boundaries: `targets[i]` is `<S>` w₁ … wₙ `</S>` as ids, n + 2 of them (none for
/// classification).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SentenceBatch {
    pub sentences: Vec<Vec<String>>,
    pub targets: Vec<Vec<u32>>,
}

impl Batch {
    /// The tokens the batch runs through the model: its positions with the boundaries for
    /// sentences, else batch × seq.
    pub fn tokens(&self) -> usize {
        self.sentences.as_ref().map_or(self.batch * self.seq, |s| s.sentences.iter().map(|words| words.len() + 2).sum())
    }

    /// The labels a causal LM scores at each position ([batch, seq]), shifted: see [`shifted_labels`].
    pub fn shifted_labels(&self) -> Vec<i64> {
        shifted_labels(&self.labels, self.batch, self.seq)
    }

    /// A decoder's LM labels for its own inputs: each token's id, −100 at padding.
    pub fn input_lm_labels(&self) -> Vec<i64> {
        let mask = self.attention_mask.as_deref();
        self.input_ids.iter().enumerate().map(|(i, &id)| if mask.is_none_or(|m| m[i] != 0) { id as i64 } else { DEFAULT_IGNORE_INDEX }).collect()
    }

    /// An encoder batch of id rows (each already cut to length), padded with `pad_id` to the
    /// longest: the attention mask marks the real tokens, every token is in segment 0.
    pub fn padded(rows: &[&[u32]], pad_id: u32) -> Batch {
        let seq = rows.iter().map(|r| r.len()).max().unwrap_or(1);
        let (mut input_ids, mut mask) = (Vec::with_capacity(rows.len() * seq), Vec::with_capacity(rows.len() * seq));
        for row in rows {
            input_ids.extend(row.iter().copied().chain(std::iter::repeat(pad_id)).take(seq));
            mask.extend((0..seq).map(|t| (t < row.len()) as u32));
        }
        Batch { batch: rows.len(), seq, input_ids, attention_mask: Some(mask), token_type_ids: Some(vec![0; rows.len() * seq]), ..Default::default() }
    }

    /// A multiple-choice batch's choices per example.
    pub fn multiple_choices(&self) -> Result<usize> {
        self.choices.ok_or_else(|| arg_err!("train", "objective multiple-choice needs batches of [batch, choices, seq] ids"))
    }

    /// A question-answering batch's start and end positions.
    pub fn span_positions(&self) -> Result<(&[i64], &[i64])> {
        match (&self.start_positions, &self.end_positions) {
            (Some(starts), Some(ends)) => Ok((starts, ends)),
            _ => Err(arg_err!("train", "objective qa needs start_positions and end_positions in every batch")),
        }
    }

    /// The batch as an inference forward pass reads it (token types only for a model that
    /// reads them; multiple choice as [examples, choices, seq]).
    pub fn ids(&self, reads: InputKinds) -> IdsBatch {
        IdsBatch {
            input_ids: self.input_ids.clone(),
            attention_mask: self.attention_mask.clone(),
            token_type_ids: self.token_type_ids.clone().filter(|_| reads.token_types),
            task_type_ids: self.task_type_ids.clone(),
            char_ids: self.char_ids.clone(),
            batch: self.choices.map_or(self.batch, |c| self.batch / c.max(1)),
            choices: self.choices,
            seq: self.seq,
        }
    }
}

/// Each position's target under a causal LM: the next position's label, −100 at the end of
/// each row of `labels` ([batch, seq]; transformers' shift inside `…LMHeadModel`).
pub fn shifted_labels(labels: &[i64], batch: usize, seq: usize) -> Vec<i64> {
    (0..batch * seq).map(|i| if i % seq + 1 < seq { labels[i + 1] } else { DEFAULT_IGNORE_INDEX }).collect()
}

/// The generator of micro-batch `index` of a run seeded with `seed`: what a batch draws
/// (samples, masks, replacements) is a function of the two, so a resumed run draws the same.
pub fn rng_for(seed: u64, index: u64) -> StdRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&index.to_le_bytes());
    StdRng::from_seed(key)
}
