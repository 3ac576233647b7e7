//! Token-classification data (named entities, parts of speech): CoNLL-style files, one
//! `word … label` line per word (the label is the last whitespace-separated field), a blank
//! line between sentences, `-DOCSTART-` lines skipped. Each sentence becomes
//! `[CLS] word pieces [SEP]`; a word's label goes on its first piece and −100 on the others and
//! on the special tokens (transformers' `label_all_tokens=False`), in batches drawn by an
//! [`EpochSampler`].

use super::data::{Batch, BatchSource, EpochSampler};
use crate::error::{arg_err, Result};
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tokenize::TextTokenizer;

const OP: &str = "token-classification data";

/// A word of a CoNLL-style file: (word, label, line number).
pub type ConllWord<'a> = (&'a str, &'a str, usize);

/// The sentences of a CoNLL-style file: for each, its words.
pub fn conll_sentences(text: &str) -> Result<Vec<Vec<ConllWord<'_>>>> {
    let mut sentences = Vec::new();
    let mut sentence = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] => sentences.extend((!sentence.is_empty()).then(|| std::mem::take(&mut sentence))),
            [first, ..] if *first == "-DOCSTART-" => {}
            [word, .., label] => sentence.push((*word, *label, number + 1)),
            [_] => return Err(arg_err!(OP, "line {}: expected `word … label`, got {line:?}", number + 1)),
        }
    }
    sentences.extend((!sentence.is_empty()).then_some(sentence));
    if sentences.is_empty() {
        return Err(arg_err!(OP, "no labelled words"));
    }
    Ok(sentences)
}

/// The labels a file uses, sorted: the classes of a fresh token classifier.
pub fn label_names(text: &str) -> Result<Vec<String>> {
    let mut names: Vec<String> = conll_sentences(text)?.iter().flatten().map(|(_, label, _)| label.to_string()).collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

pub struct LabelledTokens {
    /// Each sentence's ids, [CLS] … [SEP], at most `seq` long, and a label per id.
    sentences: Vec<(Vec<u32>, Vec<i64>)>,
    pad_id: u32,
    sampler: EpochSampler,
}

impl LabelledTokens {
    /// The sentences of `text` tokenized word by word; `labels` names the classes by id.
    pub fn from_conll(
        text: &str,
        tokenizer: &TextTokenizer,
        labels: &[String],
        pad_id: u32,
        shuffle_seed: Option<u64>,
        batch: usize,
        seq: usize,
    ) -> Result<LabelledTokens> {
        if batch == 0 || seq < 3 {
            return Err(arg_err!(OP, "need a positive batch size and sequences of at least 3 tokens (got {batch} × {seq})"));
        }
        let special = |name: &str| tokenizer.token_to_id(name).ok_or_else(|| arg_err!(OP, "the tokenizer has no {name} token"));
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let mut sentences = Vec::new();
        for words in conll_sentences(text)? {
            let (mut ids, mut targets) = (vec![cls], vec![DEFAULT_IGNORE_INDEX]);
            for (word, label, line) in words {
                let class =
                    labels.iter().position(|l| l == label).ok_or_else(|| arg_err!(OP, "line {line}: label {label:?} is not one of the model's {labels:?}"))?;
                let pieces = tokenizer.encode(word, false)?;
                targets.extend((0..pieces.len()).map(|i| if i == 0 { class as i64 } else { DEFAULT_IGNORE_INDEX }));
                ids.extend(pieces);
            }
            // Cut to seq with [SEP] last.
            ids.truncate(seq - 1);
            targets.truncate(seq - 1);
            ids.push(sep);
            targets.push(DEFAULT_IGNORE_INDEX);
            sentences.push((ids, targets));
        }
        let sampler = EpochSampler::new(sentences.len(), shuffle_seed, batch);
        Ok(LabelledTokens { sentences, pad_id, sampler })
    }

    /// Training batches of sentences of similar length (`EpochSampler::grouped_by_length`).
    pub fn grouped_by_length(self) -> LabelledTokens {
        let lengths = self.sentences.iter().map(|(ids, _)| ids.len()).collect();
        LabelledTokens { sampler: self.sampler.grouped_by_length(lengths), ..self }
    }
}

impl BatchSource for LabelledTokens {
    /// Held out: the batches that cover the file once; training: without end.
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    /// Rows padded with the padding id (label −100) to the batch's longest.
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let ids: Vec<&[u32]> = picked.iter().map(|&i| self.sentences[i].0.as_slice()).collect();
        let mut batch = Batch::padded(&ids, self.pad_id);
        for &i in &picked {
            batch.labels.extend(self.sentences[i].1.iter().copied().chain(std::iter::repeat(DEFAULT_IGNORE_INDEX)).take(batch.seq));
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> TextTokenizer {
        let text = "the cat sat on the mat . a dog ran in the park . cats and dogs\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    const CONLL: &str = "-DOCSTART- O\n\nthe O\ncat B-ANIMAL\nsat O\n\ncatsat B-ANIMAL\nran O\n";

    #[test]
    fn conll_sentences_become_labelled_pieces() {
        let t = tokenizer();
        let labels = label_names(CONLL).unwrap();
        assert_eq!(labels, ["B-ANIMAL", "O"]);
        let data = LabelledTokens::from_conll(CONLL, &t, &labels, 0, None, 2, 16).unwrap();
        let b = data.batch(0).unwrap();
        assert_eq!(b.batch, 2);
        let first: Vec<i64> = b.labels[..5].to_vec();
        assert_eq!(first, [-100, 1, 0, 1, -100], "[CLS] the cat sat [SEP]");
        // An unknown word splits into pieces: the label on the first only.
        let second = &b.labels[b.seq..];
        let pieces = t.encode("catsat", false).unwrap().len();
        assert!(pieces > 1);
        assert_eq!(second[1], 0);
        assert!(second[2..1 + pieces].iter().all(|&l| l == -100));
        assert_eq!(second[1 + pieces], 1, "ran");
        assert_eq!(b.attention_mask.as_ref().unwrap()[..b.seq].iter().sum::<u32>(), 5);
        // Cut to 3: [CLS] the [SEP].
        let short = LabelledTokens::from_conll(CONLL, &t, &labels, 0, None, 1, 3).unwrap().batch(0).unwrap();
        assert_eq!((short.input_ids[2], short.labels), (t.token_to_id("[SEP]").unwrap(), vec![-100, 1, -100]));
    }

    #[test]
    fn bad_conll_is_an_error_naming_the_line() {
        let t = tokenizer();
        let err = LabelledTokens::from_conll("the O\ncat B-PER\n", &t, &["O".into()], 0, None, 2, 8).err().unwrap().to_string();
        assert!(err.contains("line 2") && err.contains("B-PER"), "{err}");
        assert!(conll_sentences("lonely\n").is_err(), "a word without a label");
        assert!(conll_sentences("\n\n").is_err());
    }
}
