//! Sequence-classification data: `sentence<TAB>label` lines (GLUE's TSV, e.g. SST-2; a header
//! line is skipped), each tokenized as `[CLS] sentence [SEP]` (for a transformer) or split into
//! words (for ELMo) and cut to the sequence length, in batches drawn by an [`EpochSampler`].
//! Pairwise classification (GLUE's MRPC, RTE, MNLI) reads `sentence1<TAB>sentence2<TAB>label`
//! lines, encoded as the model's pair (`[CLS] A [SEP] B [SEP]` with B's token type 1).

use super::data::{BatchSource, Draw, EpochSampler};
use super::elmo::WordSplit;
use crate::error::{arg_err, Result};
use crate::models::training::{Batch, SentenceBatch};
use crate::tokenize::TextTokenizer;

/// The sentences as a model reads them.
enum Encoded {
    /// Each sentence's ids, [CLS] … [SEP], at most `seq` long, and the padding id; for
    /// sentence pairs, each pair's token type ids.
    Ids { sentences: Vec<Vec<u32>>, types: Option<Vec<Vec<u32>>>, pad_id: u32 },
    /// Each sentence's words, at most `seq` of them.
    Words(Vec<Vec<String>>),
}

pub struct LabelledSentences {
    sentences: Encoded,
    labels: Vec<i64>,
    sampler: EpochSampler,
}

impl LabelledSentences {
    /// The rows of a TSV as the tokenizer encodes them with its special tokens (BERT's
    /// `[CLS]` … `[SEP]`; none for GPT-2), cut to `seq` tokens and padded with `pad_id`.
    pub fn from_tsv(text: &str, tokenizer: &TextTokenizer, pad_id: u32, draw: impl Into<Draw>, batch: usize, seq: usize) -> Result<LabelledSentences> {
        let op = "classification data";
        if batch == 0 || seq < 3 {
            return Err(arg_err!(op, "need a positive batch size and sequences of at least 3 tokens (got {batch} × {seq})"));
        }
        let sep = tokenizer.token_to_id("[SEP]");
        let (texts, labels): (Vec<&str>, Vec<i64>) = tsv_rows(text)?.into_iter().unzip();
        let pairs = sentence_pairs(&texts)?;
        if pairs.is_some() && sep.or_else(|| tokenizer.token_to_id("</s>")).is_none() {
            return Err(arg_err!(op, "sentence pairs are classified by an encoder, whose tokenizer separates them ([SEP] or </s>)"));
        }
        if let Some(pairs) = pairs {
            // Longest first: the longer text of a pair loses tokens until the pair fits.
            let mut tokenizer = tokenizer.clone();
            tokenizer.truncate_to(Some(seq))?;
            let (sentences, types) = pairs.iter().map(|&(a, b)| tokenizer.encode_with_types(a, Some(b))).collect::<Result<Vec<_>>>()?.into_iter().unzip();
            let sampler = EpochSampler::new(labels.len(), draw, batch);
            return Ok(LabelledSentences { sentences: Encoded::Ids { sentences, types: Some(types), pad_id }, labels, sampler });
        }
        let mut sentences = Vec::with_capacity(texts.len());
        for (row, text) in texts.iter().enumerate() {
            let mut ids = tokenizer.encode(text, true)?;
            if ids.is_empty() {
                return Err(arg_err!(op, "labelled sentence {} ({text:?}) has no tokens", row + 1));
            }
            if ids.len() > seq {
                // Keep the first words; a final [SEP] that was cut off ends the sequence again.
                let last = ids[ids.len() - 1];
                ids.truncate(seq);
                if sep == Some(last) {
                    ids[seq - 1] = last;
                }
            }
            sentences.push(ids);
        }
        let sampler = EpochSampler::new(labels.len(), draw, batch);
        Ok(LabelledSentences { sentences: Encoded::Ids { sentences, types: None, pad_id }, labels, sampler })
    }

    /// The rows of a TSV as words split by `split` (ELMo's input), each cut to `max_words`.
    pub fn from_tsv_words(text: &str, split: WordSplit, draw: impl Into<Draw>, batch: usize, max_words: usize) -> Result<LabelledSentences> {
        let op = "classification data";
        if batch == 0 || max_words == 0 {
            return Err(arg_err!(op, "need a positive batch size and words per sentence (got {batch} × {max_words})"));
        }
        let (texts, labels): (Vec<&str>, Vec<i64>) = tsv_rows(text)?.into_iter().unzip();
        if sentence_pairs(&texts)?.is_some() {
            return Err(arg_err!(op, "ELMo's classifier reads single sentences, not sentence pairs"));
        }
        let mut sentences = Vec::with_capacity(texts.len());
        for (row, text) in texts.iter().enumerate() {
            let mut words = split.words(text);
            if words.is_empty() {
                return Err(arg_err!(op, "labelled sentence {} ({text:?}) has no words", row + 1));
            }
            words.truncate(max_words);
            sentences.push(words);
        }
        let sampler = EpochSampler::new(labels.len(), draw, batch);
        Ok(LabelledSentences { sentences: Encoded::Words(sentences), labels, sampler })
    }

    /// The number of classes the labels name: the largest label + 1.
    pub fn num_labels(&self) -> usize {
        num_labels(&self.labels)
    }

    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// Training batches of sentences of similar length (`EpochSampler::grouped_by_length`).
    pub fn grouped_by_length(self) -> LabelledSentences {
        let lengths = match &self.sentences {
            Encoded::Ids { sentences, .. } => sentences.iter().map(Vec::len).collect(),
            Encoded::Words(sentences) => sentences.iter().map(Vec::len).collect(),
        };
        LabelledSentences { sampler: self.sampler.grouped_by_length(lengths), ..self }
    }
}

/// A TSV's texts split into sentence pairs when they are (`sentence1<TAB>sentence2`); None
/// when every row holds one sentence. Rows of both kinds, or of more columns, are an error.
fn sentence_pairs<'a>(texts: &[&'a str]) -> Result<Option<Vec<(&'a str, &'a str)>>> {
    let op = "classification data";
    let pairs: Vec<Option<(&str, &str)>> = texts.iter().map(|t| t.split_once('\t')).collect();
    if pairs.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (row, pair) in pairs.into_iter().enumerate() {
        match pair {
            Some((a, b)) if !b.contains('\t') && !a.trim().is_empty() && !b.trim().is_empty() => out.push((a, b)),
            _ => return Err(arg_err!(op, "labelled row {}: expected `sentence1<TAB>sentence2<TAB>label` as the other rows ({:?})", row + 1, texts[row])),
        }
    }
    Ok(Some(out))
}

/// The (sentence, label) rows of a `sentence<TAB>label` file (the sentence part holds both
/// sentences of a `sentence1<TAB>sentence2<TAB>label` row); a first line whose label is not a
/// number is a header.
pub fn tsv_rows(text: &str) -> Result<Vec<(&str, i64)>> {
    let op = "classification data";
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (sentence, label) = line.rsplit_once('\t').ok_or_else(|| arg_err!(op, "line {}: expected `sentence<TAB>label`, got {line:?}", number + 1))?;
        match label.trim().parse::<i64>() {
            Ok(label) if label >= 0 => rows.push((sentence, label)),
            _ if number == 0 => {} // a header such as `sentence<TAB>label`
            _ => return Err(arg_err!(op, "line {}: the label {label:?} is not a class number (0, 1, …)", number + 1)),
        }
    }
    if rows.is_empty() {
        return Err(arg_err!(op, "no labelled sentences"));
    }
    Ok(rows)
}

/// The number of classes `labels` name: the largest + 1.
pub fn num_labels(labels: &[i64]) -> usize {
    labels.iter().max().map_or(0, |&m| m as usize + 1)
}

impl BatchSource for LabelledSentences {
    /// Held out: the batches that cover the file once; training: without end.
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    /// Ids: rows padded with `[PAD]` to the batch's longest; words: the sentences. In file
    /// order, the last batch may be smaller.
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let rows = picked.len();
        let labels = picked.iter().map(|&i| self.labels[i]).collect();
        let sentences = match &self.sentences {
            Encoded::Words(words) => {
                let sentences: Vec<Vec<String>> = picked.iter().map(|&i| words[i].clone()).collect();
                let seq = sentences.iter().map(Vec::len).max().unwrap_or(1);
                return Ok(Batch { batch: rows, seq, labels, sentences: Some(SentenceBatch { sentences, targets: Vec::new() }), ..Default::default() });
            }
            Encoded::Ids { sentences, types, pad_id } => (sentences, types, *pad_id),
        };
        let (sentences, types, pad_id) = sentences;
        let ids: Vec<&[u32]> = picked.iter().map(|&i| sentences[i].as_slice()).collect();
        let padded = Batch::padded(&ids, pad_id);
        let token_type_ids =
            types.as_ref().map(|types| picked.iter().flat_map(|&i| types[i].iter().copied().chain(std::iter::repeat(0)).take(padded.seq)).collect());
        Ok(Batch { labels, token_type_ids, ..padded })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> TextTokenizer {
        let text = "a good film . a bad film . good good bad bad film film a a .\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    #[test]
    fn tsv_sentences_become_padded_batches_in_a_seeded_shuffle() {
        let tsv = "sentence\tlabel\na good film\t1\na bad film\t0\ngood\t1\nbad bad bad bad bad bad bad bad\t0\n";
        let t = tokenizer();
        let pad = t.token_to_id("[PAD]").unwrap();
        let data = LabelledSentences::from_tsv(tsv, &t, pad, Some(3), 2, 6).unwrap();
        assert_eq!((data.labels(), data.num_labels()), (&[1, 0, 1, 0][..], 2));
        let b = data.batch(0).unwrap();
        assert_eq!((b.batch, b.labels.len(), b.input_ids.len()), (2, 2, 2 * b.seq));
        // An epoch (two batches) visits every sentence once; the next epoch in another order.
        let epoch = |i: u64| -> Vec<i64> {
            [data.batch(i).unwrap(), data.batch(i + 1).unwrap()]
                .iter()
                .flat_map(|b| b.input_ids.chunks(b.seq).map(|r| r.iter().map(|&x| x as i64).sum::<i64>()).collect::<Vec<_>>())
                .collect()
        };
        let (mut first, mut second) = (epoch(0), epoch(2));
        first.sort_unstable();
        second.sort_unstable();
        assert_eq!(first, second);
        assert_eq!(data.batch(5).unwrap(), LabelledSentences::from_tsv(tsv, &t, pad, Some(3), 2, 6).unwrap().batch(5).unwrap(), "a function of (seed, index)");
        // The long sentence is cut to 6 tokens, still ending with [SEP].
        let held_out = LabelledSentences::from_tsv(tsv, &t, pad, None, 3, 6).unwrap();
        assert_eq!(held_out.batches(), Some(2));
        let last = held_out.batch(1).unwrap();
        assert_eq!((last.batch, last.seq), (1, 6));
        assert_eq!(last.input_ids[5], t.token_to_id("[SEP]").unwrap());
        assert!(held_out.batch(2).is_err());
    }

    #[test]
    fn tsv_rows_become_word_batches_for_elmo() {
        let tsv = "sentence\tlabel\nA good film.\t1\nbad\t0\none two three four five six\t2\n";
        let data = LabelledSentences::from_tsv_words(tsv, WordSplit::Raw, None, 2, 4).unwrap();
        assert_eq!((data.num_labels(), data.batches()), (3, Some(2)));
        let first = data.batch(0).unwrap();
        let words = first.sentences.unwrap().sentences;
        assert_eq!(words, [vec!["A", "good", "film", "."], vec!["bad"]], "ELMo's split, in file order");
        assert_eq!((first.labels, first.seq), (vec![1, 0], 4));
        assert_eq!(data.batch(1).unwrap().sentences.unwrap().sentences, [vec!["one", "two", "three", "four"]], "cut to 4 words");
        let err = LabelledSentences::from_tsv_words("good\t1\n  \t0\n", WordSplit::Raw, None, 2, 4).err().unwrap().to_string();
        assert!(err.contains("sentence 2"), "{err}");
    }

    #[test]
    fn sentence_pairs_become_segments_a_and_b_cut_longest_first() {
        let tsv = "sentence1\tsentence2\tlabel\na good film\tgood\t1\nbad\ta bad bad bad bad bad film\t0\n";
        let t = tokenizer();
        let (cls, sep, pad) = (t.token_to_id("[CLS]").unwrap(), t.token_to_id("[SEP]").unwrap(), t.token_to_id("[PAD]").unwrap());
        let id = |w: &str| t.token_to_id(w).unwrap();
        let data = LabelledSentences::from_tsv(tsv, &t, pad, None, 2, 8).unwrap();
        let b = data.batch(0).unwrap();
        assert_eq!((b.batch, b.seq, &b.labels[..]), (2, 8, &[1, 0][..]));
        let types = b.token_type_ids.as_ref().expect("pairs have token types");
        assert_eq!(&b.input_ids[..8], &[cls, id("a"), id("good"), id("film"), sep, id("good"), sep, pad]);
        assert_eq!(&types[..8], &[0, 0, 0, 0, 0, 1, 1, 0]);
        // Cut to 8: the longer text (B) loses its end, both separators stay.
        assert_eq!(&b.input_ids[8..], &[cls, id("bad"), sep, id("a"), id("bad"), id("bad"), id("bad"), sep]);
        assert_eq!(&types[8..], &[0, 0, 0, 1, 1, 1, 1, 1]);
        assert!(LabelledSentences::from_tsv("a good film\t1\n", &t, pad, None, 2, 8).unwrap().batch(0).unwrap().token_type_ids.is_none());
        for (bad, row) in [("a\tgood\t1\nbad film\t0\n", "row 2"), ("a\tb\tc\t1\n", "row 1"), ("a\t \t1\n", "row 1")] {
            let err = LabelledSentences::from_tsv(bad, &t, pad, None, 2, 8).err().unwrap().to_string();
            assert!(err.contains(row) && err.contains("sentence1<TAB>sentence2<TAB>label"), "{bad:?}: {err}");
        }
        let err = LabelledSentences::from_tsv_words("a\tgood\t1\n", WordSplit::Raw, None, 2, 4).err().unwrap().to_string();
        assert!(err.contains("pairs"), "{err}");
    }

    #[test]
    fn bad_tsv_is_an_error_naming_the_line() {
        let t = tokenizer();
        let err = LabelledSentences::from_tsv("a good film\t1\na bad film\tnegative\n", &t, 0, None, 2, 8).err().unwrap().to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(LabelledSentences::from_tsv("no tab here\n", &t, 0, None, 2, 8).is_err());
        assert!(LabelledSentences::from_tsv("sentence\tlabel\n", &t, 0, None, 2, 8).is_err(), "no sentences");
    }
}
