//! Where a run's batches come from ([`BatchSource`]): replayed from a safetensors file (exact
//! batches, to compare a run step by step with PyTorch), sampled from a token stream with a
//! seeded generator, or drawn epoch by epoch from labelled examples ([`EpochSampler`]).

use rand::seq::SliceRandom;
use rand::Rng;
use safetensors::{Dtype, SafeTensors};

use crate::error::{arg_err, Result, SesameError};
use crate::models::training::{rng_for, Batch};

/// `--replay-batches FILE.safetensors`: tensors named as transformers names its inputs, each
/// with a leading step dimension ([steps, batch, seq]; `next_sentence_label`,
/// `sentence_order_label`, `start_positions`, `end_positions`, and `labels` of sequence
/// classification, [steps, batch]; multiple choice's inputs [steps, batch, choices, seq] and
/// labels [steps, batch]; a character-reading model's `char_ids` [steps, batch, seq,
/// width]; translation's `decoder_input_ids` [steps, batch, target_seq] and `labels` of that
/// shape); integer dtypes.
pub struct ReplayBatches {
    pub steps: usize,
    /// Rows per step (examples × choices for multiple choice).
    batch: usize,
    seq: usize,
    choices: Option<usize>,
    tensors: Vec<ReplayTensor>,
}

pub(super) fn replay_err(message: String) -> SesameError {
    SesameError::Checkpoint(format!("replay batches: {message}"))
}

/// A replayed tensor: its name, its values and its shape.
pub type ReplayTensor = (String, Vec<i64>, Vec<usize>);

/// The integer tensors of a safetensors file.
pub fn replay_tensors(bytes: &[u8]) -> Result<Vec<ReplayTensor>> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| replay_err(format!("not a safetensors file: {e}")))?;
    let mut tensors = Vec::new();
    for (name, view) in st.tensors() {
        let data = view.data();
        let values: Vec<i64> = match view.dtype() {
            Dtype::I64 => data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect(),
            Dtype::I32 => data.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64).collect(),
            Dtype::U32 => data.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as i64).collect(),
            other => return Err(replay_err(format!("`{name}` has dtype {other:?}; batches hold integers"))),
        };
        tensors.push((name, values, view.shape().to_vec()));
    }
    Ok(tensors)
}

/// The replayed tensors with one value per token (`labels` may also be per sequence).
const PER_TOKEN: [&str; 6] = ["input_ids", "attention_mask", "token_type_ids", "task_type_ids", "labels", "generator_samples"];

/// The replayed tensors with one value per sequence.
const PER_SEQUENCE: [&str; 4] = ["next_sentence_label", "sentence_order_label", "start_positions", "end_positions"];

impl ReplayBatches {
    pub fn from_bytes(bytes: &[u8]) -> Result<ReplayBatches> {
        Self::from_tensors(replay_tensors(bytes)?)
    }

    /// The batches of `tensors` (name, values, shape).
    pub fn from_tensors(tensors: Vec<ReplayTensor>) -> Result<ReplayBatches> {
        let ids = tensors.iter().find(|(n, ..)| n == "input_ids").ok_or_else(|| replay_err("no `input_ids` tensor".into()))?;
        let (steps, examples, choices, seq) = match ids.2[..] {
            [steps, batch, seq] => (steps, batch, None, seq),
            [steps, batch, choices, seq] => (steps, batch, Some(choices), seq),
            _ => return Err(replay_err(format!("`input_ids` must be [steps, batch, seq] (or [steps, batch, choices, seq]), got {:?}", ids.2))),
        };
        let decoder = tensors.iter().find(|(n, ..)| n == "decoder_input_ids").map(|(_, _, shape)| shape.clone());
        if decoder.is_some() && !tensors.iter().any(|(n, ..)| n == "labels") {
            return Err(replay_err("`decoder_input_ids` without `labels`: a translation batch needs the words its decoder predicts".into()));
        }
        if let Some(shape) = &decoder {
            if choices.is_some() || shape.len() != 3 || shape[..2] != ids.2[..2] || shape[2] == 0 {
                return Err(replay_err(format!("`decoder_input_ids` has shape {shape:?}, expected [steps, batch, target_seq] over input_ids' {:?}", ids.2)));
            }
        }
        for (name, _, shape) in &tensors {
            if name == "decoder_input_ids" {
                continue;
            }
            if let (Some(decoder), "labels") = (&decoder, name.as_str()) {
                if shape != decoder {
                    return Err(replay_err(format!("`labels` has shape {shape:?}, expected decoder_input_ids' {decoder:?}")));
                }
                continue;
            }
            if name == "char_ids" {
                if choices.is_some() || shape.len() != 4 || shape[..3] != ids.2[..] || shape[3] == 0 {
                    return Err(replay_err(format!("`char_ids` has shape {shape:?}, expected [steps, batch, seq, width] over input_ids' {:?}", ids.2)));
                }
                continue;
            }
            if !PER_TOKEN.contains(&name.as_str()) && !PER_SEQUENCE.contains(&name.as_str()) {
                return Err(replay_err(format!(
                    "unknown tensor `{name}` (batches hold {})",
                    PER_TOKEN.iter().chain(&PER_SEQUENCE).chain(&["char_ids", "decoder_input_ids"]).cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            let per_sequence = PER_SEQUENCE.contains(&name.as_str()) || (name == "labels" && shape.len() == 2);
            let want = if per_sequence { vec![steps, examples] } else { ids.2.clone() };
            if *shape != want {
                return Err(replay_err(format!("`{name}` has shape {shape:?}, expected {want:?} like input_ids")));
            }
        }
        let batch = examples * choices.unwrap_or(1);
        Ok(ReplayBatches { steps, batch, seq, choices, tensors })
    }

    /// No batches (a task that `task_order` never picks).
    pub fn empty() -> ReplayBatches {
        ReplayBatches { steps: 0, batch: 0, seq: 0, choices: None, tensors: Vec::new() }
    }

    fn part(&self, name: &str, step: usize) -> Option<&[i64]> {
        let (_, values, shape) = self.tensors.iter().find(|(n, ..)| n == name)?;
        let per_step: usize = shape[1..].iter().product();
        Some(&values[step * per_step..(step + 1) * per_step])
    }

    /// The batch of step `step` (labels default to the input ids, as for a causal LM).
    pub fn batch(&self, step: usize) -> Result<Batch> {
        if step >= self.steps {
            return Err(arg_err!("replay batches", "step {step} is past the file's {} steps", self.steps));
        }
        let ids = |name: &str| -> Result<Option<Vec<u32>>> {
            self.part(name, step)
                .map(|v| v.iter().map(|&x| u32::try_from(x).map_err(|_| replay_err(format!("`{name}` holds {x}, not a token id")))).collect())
                .transpose()
        };
        let input_ids = ids("input_ids")?.expect("checked in from_bytes");
        Ok(Batch {
            batch: self.batch,
            seq: self.seq,
            labels: self.part("labels", step).map_or_else(|| input_ids.iter().map(|&x| x as i64).collect(), <[i64]>::to_vec),
            attention_mask: ids("attention_mask")?,
            token_type_ids: ids("token_type_ids")?,
            task_type_ids: ids("task_type_ids")?,
            next_sentence_label: self.part("next_sentence_label", step).map(<[i64]>::to_vec),
            sentence_order_label: self.part("sentence_order_label", step).map(<[i64]>::to_vec),
            start_positions: self.part("start_positions", step).map(<[i64]>::to_vec),
            end_positions: self.part("end_positions", step).map(<[i64]>::to_vec),
            generator_samples: self.part("generator_samples", step).map(<[i64]>::to_vec),
            char_ids: ids("char_ids")?,
            decoder_input_ids: ids("decoder_input_ids")?,
            input_ids,
            sentences: None,
            task: None,
            choices: self.choices,
        })
    }
}

/// Where a run's batches come from. Every micro-batch is a pure function of its index (step
/// × accumulation + micro-step), so a resumed run sees exactly the batches it would have.
/// Generic over what it yields: the trainer's sources yield [`Batch`]es.
pub trait BatchSource<B = Batch> {
    /// How many micro-batches there are; None when they are sampled without end.
    fn batches(&self) -> Option<usize>;
    fn batch(&self, index: u64) -> Result<B>;

    /// The model's rows per example: a multiple-choice example's choices, else 1 (what a
    /// batch's activations scale with besides its size).
    fn rows_per_example(&self) -> usize {
        1
    }

    /// How many batches one pass over the data takes (training sources sample without end,
    /// epoch after epoch); None when the data has no epochs (text sampled at random).
    fn batches_per_epoch(&self) -> Option<usize> {
        self.batches()
    }

    /// As held-out data: what it scores besides the loss, when it scores more than the
    /// objective does (SQuAD's answers); None for the objective's own metrics.
    fn metrics(&self) -> Option<Box<dyn Metrics + '_>> {
        None
    }
}

/// What a held-out set scores of a model's predictions besides the loss (SQuAD's exact match
/// and F1 of each question's best answer), fed each batch with the model's output for it.
pub trait Metrics {
    /// The model outputs it scores (`start_logits`, `end_logits`), which the evaluation reads
    /// back for it.
    fn outputs(&self) -> &'static [&'static str];
    /// Batch `index` of the set and the model's outputs for it: those [`Metrics::outputs`]
    /// names, in its order.
    fn add(&mut self, index: u64, batch: &Batch, outputs: &[Vec<f32>]) -> Result<()>;
    /// The metrics, named as the log names them (`eval_f1`).
    fn metrics(&self) -> Result<Vec<(&'static str, f32)>>;
}

impl BatchSource for ReplayBatches {
    fn batches(&self) -> Option<usize> {
        Some(self.steps)
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        ReplayBatches::batch(self, index as usize)
    }
}

/// How a corpus's batches draw its items.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Draw {
    /// Held out: the items once, in order, the last batch possibly smaller.
    HeldOut,
    /// Training: a seeded shuffle, a new permutation each epoch, without end.
    Shuffled(u64),
    /// Training: the items in order, epoch after epoch, without end.
    InOrder,
}

impl From<Option<u64>> for Draw {
    /// A shuffle seed: training; none: held out.
    fn from(shuffle_seed: Option<u64>) -> Draw {
        shuffle_seed.map_or(Draw::HeldOut, Draw::Shuffled)
    }
}

/// Which items (sentences) each batch of a corpus holds, as its [`Draw`] says. Training walks
/// the items epoch after epoch in full batches (one may span two epochs), so batch i is a
/// function of (seed, i) and never ends; held-out batches cover the items once.
#[derive(Clone, Debug)]
pub struct EpochSampler {
    items: usize,
    draw: Draw,
    batch: usize,
    /// With [`EpochSampler::grouped_by_length`]: each item's length.
    lengths: Option<Vec<usize>>,
}

/// Batches per window that length grouping sorts (transformers' LengthGroupedSampler's
/// mega-batch).
const LENGTH_GROUP_BATCHES: usize = 50;

impl EpochSampler {
    pub fn new(items: usize, draw: impl Into<Draw>, batch: usize) -> EpochSampler {
        EpochSampler { items, draw: draw.into(), batch, lengths: None }
    }

    /// The same sampler drawing batches of similar lengths when training: each epoch's
    /// permutation is cut into windows of [`LENGTH_GROUP_BATCHES`] batches, each window is
    /// sorted by length and cut into batches, and the batches are shuffled within it. Every
    /// item is still seen once per epoch (whose last batch may be smaller), but a batch pads
    /// far less (SST-2's sentences run from 1 to about 50 tokens). `lengths`: each item's.
    pub(crate) fn grouped_by_length(self, lengths: Vec<usize>) -> EpochSampler {
        assert_eq!(lengths.len(), self.items, "a length per item");
        EpochSampler { lengths: Some(lengths), ..self }
    }

    /// The number of batches: None for training (without end).
    pub fn batches(&self) -> Option<usize> {
        (self.draw == Draw::HeldOut).then(|| self.batches_per_epoch())
    }

    /// The batches of one pass over the items.
    pub fn batches_per_epoch(&self) -> usize {
        self.items.div_ceil(self.batch.max(1))
    }

    /// The items of batch `index`.
    pub fn pick(&self, index: u64) -> Result<Vec<usize>> {
        let first = index * self.batch as u64;
        let rows = match self.draw {
            Draw::HeldOut => self.batch.min((self.items as u64).saturating_sub(first) as usize),
            Draw::Shuffled(_) | Draw::InOrder => self.batch,
        };
        if rows == 0 || self.items == 0 || self.batch == 0 {
            return Err(arg_err!("data", "batch {index} is past the {} held-out items", self.items));
        }
        let n = self.items as u64;
        let shuffle_seed = match self.draw {
            Draw::Shuffled(seed) => Some(seed),
            Draw::HeldOut | Draw::InOrder => None,
        };
        if let (Some(seed), Some(lengths)) = (shuffle_seed, &self.lengths) {
            // Whole batches per epoch, so that each one stays a sorted group.
            let per_epoch = n.div_ceil(self.batch as u64);
            return Ok(self.grouped_batches(seed, index / per_epoch, lengths).swap_remove((index % per_epoch) as usize));
        }
        let mut order: Option<(u64, Vec<usize>)> = None;
        Ok((first..first + rows as u64)
            .map(|slot| {
                let (epoch, within) = (slot / n, (slot % n) as usize);
                let Some(seed) = shuffle_seed else { return within };
                if order.as_ref().is_none_or(|(e, _)| *e != epoch) {
                    let mut permutation: Vec<usize> = (0..self.items).collect();
                    permutation.shuffle(&mut rng_for(seed, epoch));
                    order = Some((epoch, permutation));
                }
                order.as_ref().map_or(within, |(_, p)| p[within])
            })
            .collect())
    }

    /// The batches of training epoch `epoch` grouped by length (see
    /// [`EpochSampler::grouped_by_length`]); the epoch's smaller last batch stays last.
    fn grouped_batches(&self, seed: u64, epoch: u64, lengths: &[usize]) -> Vec<Vec<usize>> {
        let mut rng = rng_for(seed, epoch);
        let mut permutation: Vec<usize> = (0..self.items).collect();
        permutation.shuffle(&mut rng);
        let mut batches = Vec::with_capacity(self.items.div_ceil(self.batch));
        let mut smaller = None;
        for window in permutation.chunks_mut(self.batch * LENGTH_GROUP_BATCHES) {
            window.sort_by_key(|&item| std::cmp::Reverse(lengths[item]));
            let mut group: Vec<Vec<usize>> = window.chunks(self.batch).map(<[usize]>::to_vec).collect();
            if group.last().is_some_and(|b| b.len() < self.batch) {
                smaller = group.pop();
            }
            group.shuffle(&mut rng);
            batches.extend(group);
        }
        batches.extend(smaller);
        batches
    }
}

/// Causal-LM batches cut from one long token stream at offsets drawn by a seeded generator
/// (nanoGPT's sampling): each row is `seq` consecutive tokens, its labels the same tokens.
pub struct TokenStream {
    pub tokens: Vec<u32>,
    seed: u64,
    batch: usize,
    seq: usize,
}

impl TokenStream {
    pub fn new(tokens: Vec<u32>, seed: u64, batch: usize, seq: usize) -> Result<TokenStream> {
        if tokens.len() <= seq {
            return Err(arg_err!("data", "{} tokens are too few for sequences of {seq}", tokens.len()));
        }
        if batch == 0 || seq == 0 {
            return Err(arg_err!("data", "batch size and sequence length must be positive (got {batch} × {seq})"));
        }
        Ok(TokenStream { tokens, seed, batch, seq })
    }
}

impl BatchSource for TokenStream {
    fn batches(&self) -> Option<usize> {
        None
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let (batch, seq) = (self.batch, self.seq);
        let mut rng = rng_for(self.seed, index);
        let mut input_ids = Vec::with_capacity(batch * seq);
        for _ in 0..batch {
            let start = rng.random_range(0..=self.tokens.len() - seq);
            input_ids.extend_from_slice(&self.tokens[start..start + seq]);
        }
        Ok(Batch { labels: input_ids.iter().map(|&x| x as i64).collect(), input_ids, batch, seq, ..Default::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_batches_depend_on_seed_and_index_only() {
        let tokens: Vec<u32> = (0..1000).collect();
        let stream = TokenStream::new(tokens.clone(), 7, 3, 16).unwrap();
        let again = TokenStream::new(tokens.clone(), 7, 3, 16).unwrap();
        assert_eq!(stream.batch(5).unwrap(), again.batch(5).unwrap());
        assert_ne!(stream.batch(5).unwrap(), stream.batch(6).unwrap());
        assert_ne!(stream.batch(5).unwrap(), TokenStream::new(tokens, 8, 3, 16).unwrap().batch(5).unwrap());
        let b = stream.batch(0).unwrap();
        for row in b.input_ids.chunks(16) {
            assert!(row.windows(2).all(|w| w[1] == w[0] + 1), "rows are consecutive windows: {row:?}");
        }
    }

    #[test]
    fn an_in_order_draw_repeats_the_items_in_order_without_end() {
        let sampler = EpochSampler::new(5, Draw::InOrder, 2);
        assert_eq!((sampler.batches(), sampler.batches_per_epoch()), (None, 3));
        let picks: Vec<Vec<usize>> = (0..4).map(|b| sampler.pick(b).unwrap()).collect();
        assert_eq!(picks, [vec![0, 1], vec![2, 3], vec![4, 0], vec![1, 2]], "full batches, one spanning two epochs");
        let held_out = EpochSampler::new(5, None, 2);
        assert_eq!((held_out.batches(), held_out.pick(2).unwrap()), (Some(3), vec![4]));
    }

    #[test]
    fn length_grouping_keeps_epochs_whole_and_pads_less() {
        // 1005 items in batches of 10: epochs of 101 batches, the last of 5 items.
        let lengths: Vec<usize> = (0..1005).map(|i| 1 + (i * 37) % 50).collect();
        let plain = EpochSampler::new(1005, Some(3), 10);
        let grouped = plain.clone().grouped_by_length(lengths.clone());
        let padding = |sampler: &EpochSampler, batches: std::ops::Range<u64>| -> usize {
            let rows = batches.map(|b| sampler.pick(b).unwrap().iter().map(|&i| lengths[i]).collect::<Vec<_>>());
            rows.map(|row| row.iter().map(|len| row.iter().max().unwrap() - len).sum::<usize>()).sum()
        };
        // A random batch of 10 pads a row by about 20 tokens; a grouped one by about 1, in
        // every epoch.
        for epoch in 0..3 {
            let batches = epoch * 101..(epoch + 1) * 101;
            let (grouped_padding, plain_padding) = (padding(&grouped, batches.clone()), padding(&plain, batches.clone()));
            assert!(grouped_padding * 10 < plain_padding, "epoch {epoch}: {grouped_padding} vs {plain_padding}");
            let mut items: Vec<usize> = batches.clone().flat_map(|b| grouped.pick(b).unwrap()).collect();
            items.sort_unstable();
            assert_eq!(items, (0..1005).collect::<Vec<_>>(), "epoch {epoch}: each item once");
            assert_eq!(grouped.pick(batches.end - 1).unwrap().len(), 5, "the smaller batch ends the epoch");
        }
        assert_eq!(grouped.pick(7).unwrap(), grouped.clone().pick(7).unwrap(), "a function of the index");
        assert_ne!(grouped.pick(101).unwrap(), grouped.pick(0).unwrap(), "a new order each epoch");
        let held_out = EpochSampler::new(25, None, 10).grouped_by_length(lengths[..25].to_vec());
        assert_eq!(held_out.pick(2).unwrap(), (20..25).collect::<Vec<_>>(), "held-out batches stay in file order");
    }
}
