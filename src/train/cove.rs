//! CoVe's translation data (McCann et al. 2017): sentence pairs from a TSV (`source<TAB>target`
//! a line) as batches of source ids, decoder inputs and labels. The translation model a run
//! starts from is the family's (`crate::models::cove::fresh`).

use super::data::{BatchSource, Draw, EpochSampler};
use crate::error::{arg_err, Result};
use crate::models::cove::translation::target_ids;
use crate::models::training::formats::tsv_pairs;
use crate::models::training::Batch;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tokenize::TextTokenizer;

/// How translation batches are laid out: the sources' and the decoder inputs' padding ids,
/// the batch size and the longest source (and decoder input) kept.
#[derive(Clone, Copy, Debug)]
pub struct PairBatches {
    pub source_pad: u32,
    pub target_pad: u32,
    pub batch: usize,
    pub seq: usize,
}

/// Sentence pairs as ids: each source as the source tokenizer encodes it, each target as
/// `<s>` y₁ … yₙ `</s>` by the target tokenizer, both cut to `seq` (a cut target keeps its
/// `</s>`).
pub struct TranslationPairs {
    sources: Vec<Vec<u32>>,
    targets: Vec<Vec<u32>>,
    /// How many pairs were cut to `seq` tokens on either side.
    pub truncated: usize,
    layout: PairBatches,
    sampler: EpochSampler,
}

impl TranslationPairs {
    /// The pairs of `text` (see [`tsv_pairs`]); training batches are shuffled by
    /// `draw` says (a seed: shuffled epoch after epoch; None: held out, the file once in order).
    pub fn from_tsv(text: &str, source: &TextTokenizer, target: &TextTokenizer, layout: PairBatches, draw: impl Into<Draw>) -> Result<TranslationPairs> {
        let op = "translation data";
        if layout.batch == 0 || layout.seq < 2 {
            return Err(arg_err!(op, "need a positive batch size and sequences of at least 2 tokens (got {} × {})", layout.batch, layout.seq));
        }
        let (start, eos) = target_ids(target)?;
        let pairs = tsv_pairs(text)?;
        let (mut sources, mut targets) = (Vec::with_capacity(pairs.len()), Vec::with_capacity(pairs.len()));
        let mut truncated = 0;
        for (i, (s, t)) in pairs.iter().enumerate() {
            let mut source_ids = source.encode(s, true)?;
            let mut target_ids = target.encode(t, true)?;
            if source_ids.is_empty() {
                return Err(arg_err!(op, "pair {}'s source `{s}` has no tokens", i + 1));
            }
            if target_ids.len() < 3 || target_ids[0] != start || target_ids[target_ids.len() - 1] != eos {
                return Err(arg_err!(op, "pair {}'s target `{t}` is not read as <s> words </s> by the target tokenizer", i + 1));
            }
            truncated += (source_ids.len() > layout.seq || target_ids.len() > layout.seq + 1) as usize;
            source_ids.truncate(layout.seq);
            if target_ids.len() > layout.seq + 1 {
                target_ids.truncate(layout.seq);
                target_ids.push(eos);
            }
            sources.push(source_ids);
            targets.push(target_ids);
        }
        let sampler = EpochSampler::new(sources.len(), draw, layout.batch);
        Ok(TranslationPairs { sources, targets, truncated, layout, sampler })
    }
}

impl BatchSource for TranslationPairs {
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    /// The sources padded to the batch's longest (attention mask), the targets as decoder
    /// inputs (all but `</s>`) and labels (all but `<s>`, −100 past the end).
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let sources: Vec<&[u32]> = picked.iter().map(|&i| self.sources[i].as_slice()).collect();
        let padded = Batch::padded(&sources, self.layout.source_pad);
        let target_seq = picked.iter().map(|&i| self.targets[i].len() - 1).max().unwrap_or(1);
        let (mut decoder_input_ids, mut labels) = (Vec::with_capacity(picked.len() * target_seq), Vec::with_capacity(picked.len() * target_seq));
        for &i in &picked {
            let target = &self.targets[i];
            let n = target.len() - 1;
            decoder_input_ids.extend(target[..n].iter().copied().chain(std::iter::repeat(self.layout.target_pad)).take(target_seq));
            labels.extend(target[1..].iter().map(|&id| id as i64).chain(std::iter::repeat(DEFAULT_IGNORE_INDEX)).take(target_seq));
        }
        Ok(Batch { labels, decoder_input_ids: Some(decoder_input_ids), token_type_ids: None, ..padded })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::cove::fresh::{side_vocabulary, source_tokenizer_json, target_tokenizer_json, TARGET_SPECIALS};
    use crate::models::training::formats::tsv_pairs;

    #[test]
    fn batches_pad_sources_and_shift_targets() {
        let text = "the cat sat\tdie katze saß\na dog\thund\n";
        let pairs = tsv_pairs(text).unwrap();
        let source_vocab = side_vocabulary(&pairs, false, 20).unwrap();
        let target_vocab = side_vocabulary(&pairs, true, 20).unwrap();
        assert_eq!(&target_vocab[..4], TARGET_SPECIALS);
        let source = TextTokenizer::from_bytes(&source_tokenizer_json(&source_vocab).unwrap()).unwrap();
        let target = TextTokenizer::from_bytes(&target_tokenizer_json(&target_vocab).unwrap()).unwrap();
        let layout = PairBatches { source_pad: 0, target_pad: 0, batch: 2, seq: 8 };
        let data = TranslationPairs::from_tsv(text, &source, &target, layout, None).unwrap();
        let b = data.batch(0).unwrap();
        let (s, t) = (|w: &str| source.token_to_id(w).unwrap(), |w: &str| target.token_to_id(w).unwrap() as i64);
        assert_eq!((b.batch, b.seq), (2, 3));
        assert_eq!(b.input_ids, [s("the"), s("cat"), s("sat"), s("a"), s("dog"), 0]);
        assert_eq!(b.attention_mask.unwrap(), [1, 1, 1, 1, 1, 0]);
        let start = t("<s>") as u32;
        assert_eq!(b.decoder_input_ids.unwrap(), [start, t("die") as u32, t("katze") as u32, t("saß") as u32, start, t("hund") as u32, 0, 0]);
        assert_eq!(b.labels, [t("die"), t("katze"), t("saß"), t("</s>"), t("hund"), t("</s>"), -100, -100]);
        // A target longer than the batch's sequences keeps its </s>.
        let short = TranslationPairs::from_tsv(text, &source, &target, PairBatches { seq: 2, ..layout }, None).unwrap();
        assert_eq!(short.truncated, 1);
        let short = short.batch(0).unwrap();
        assert_eq!(short.labels[..2], [t("die"), t("</s>")]);
    }
}
