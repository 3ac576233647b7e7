//! Token-classification data (named entities, parts of speech): CoNLL-style files, one
//! `word … label` line per word (the label is the last whitespace-separated field), a blank
//! line between sentences, `-DOCSTART-` lines skipped. Each sentence becomes its word pieces
//! between the tokenizer's boundaries (`[CLS] … [SEP]`, CVT's `<start> … <end>`); a word's
//! label goes on its first piece and −100 on the others and on the special tokens
//! (transformers' `label_all_tokens=False`), in batches drawn by an [`EpochSampler`]. For a
//! model that reads characters (CVT), each piece comes with a row of them.

use super::data::{BatchSource, Draw, EpochSampler};
use crate::error::{arg_err, Result};
use crate::models::training::formats::conll_sentences;
use crate::models::training::Batch;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tokenize::TextTokenizer;

const OP: &str = "token-classification data";

/// How sentences become batches: the padding id, each token's characters for a model that
/// reads them (0: none), rows per batch and tokens per row.
#[derive(Clone, Copy, Debug)]
pub struct TokenBatches {
    pub pad_id: u32,
    pub chars_per_token: usize,
    pub batch: usize,
    pub seq: usize,
}

/// One sentence as the model reads it.
struct Sentence {
    ids: Vec<u32>,
    /// A label per id (−100 where none).
    labels: Vec<i64>,
    /// A row of character ids per id (empty when the model reads none).
    chars: Vec<u32>,
}

pub struct LabelledTokens {
    /// Each sentence with its boundaries (`[CLS] … [SEP]`, `<start> … <end>`), at most `seq`
    /// tokens.
    sentences: Vec<Sentence>,
    layout: TokenBatches,
    sampler: EpochSampler,
}

/// The special tokens the tokenizer puts before and after a sentence's tokens.
fn boundaries(tokenizer: &TextTokenizer) -> Result<(Vec<u32>, Vec<u32>)> {
    let encoded = tokenizer.encode_detailed("x", None)?;
    let first = encoded.special.iter().position(|&s| !s).ok_or_else(|| arg_err!(OP, "the tokenizer encodes a word as special tokens only"))?;
    let last = encoded.special.iter().rposition(|&s| !s).expect("a word token exists");
    Ok((encoded.ids[..first].to_vec(), encoded.ids[last + 1..].to_vec()))
}

impl LabelledTokens {
    /// The sentences of `text` tokenized word by word; `labels` names the classes by id.
    pub fn from_conll(text: &str, tokenizer: &TextTokenizer, labels: &[String], layout: TokenBatches, draw: impl Into<Draw>) -> Result<LabelledTokens> {
        let mut sentences = Vec::new();
        for words in conll_sentences(text)? {
            let classed = words
                .iter()
                .map(|&(word, label, line)| {
                    let class = labels
                        .iter()
                        .position(|l| l == label)
                        .ok_or_else(|| arg_err!(OP, "line {line}: label {label:?} is not one of the model's {labels:?}"))?;
                    Ok((word, class as i64))
                })
                .collect::<Result<Vec<_>>>()?;
            sentences.push(classed);
        }
        Self::new(&sentences, tokenizer, layout, draw)
    }

    /// Unlabelled text, a sentence a line with its words between spaces (blank lines
    /// skipped): every token labelled −100 (cross-view training's unlabelled batches).
    pub fn from_lines(text: &str, tokenizer: &TextTokenizer, layout: TokenBatches, draw: impl Into<Draw>) -> Result<LabelledTokens> {
        let sentences: Vec<Vec<(&str, i64)>> =
            text.lines().map(|line| line.split_whitespace().map(|w| (w, DEFAULT_IGNORE_INDEX)).collect::<Vec<_>>()).filter(|words| !words.is_empty()).collect();
        if sentences.is_empty() {
            return Err(arg_err!(OP, "no sentences in the unlabelled text"));
        }
        Self::new(&sentences, tokenizer, layout, draw)
    }

    fn new(sentences: &[Vec<(&str, i64)>], tokenizer: &TextTokenizer, layout: TokenBatches, draw: impl Into<Draw>) -> Result<LabelledTokens> {
        let (prefix, suffix) = boundaries(tokenizer)?;
        if layout.batch == 0 || layout.seq <= prefix.len() + suffix.len() {
            return Err(arg_err!(
                OP,
                "need a positive batch size and sequences of at least {} tokens (got {} × {})",
                prefix.len() + suffix.len() + 1,
                layout.batch,
                layout.seq
            ));
        }
        let boundary_chars = || crate::models::cvt::char_ids(&[None], layout.chars_per_token);
        let sentences = sentences
            .iter()
            .map(|words| {
                let mut s = Sentence { ids: prefix.clone(), labels: vec![DEFAULT_IGNORE_INDEX; prefix.len()], chars: Vec::new() };
                if layout.chars_per_token > 0 {
                    s.chars = prefix.iter().flat_map(|_| boundary_chars()).collect();
                }
                for &(word, class) in words {
                    let pieces = match layout.chars_per_token {
                        0 => tokenizer.encode(word, false)?,
                        chars => {
                            // Each piece spelt from the word it covers.
                            let encoded = tokenizer.encode_detailed(word, None)?;
                            let texts: Vec<Option<&str>> =
                                encoded.token_texts([word, ""]).into_iter().zip(&encoded.special).filter(|(_, &special)| !special).map(|(t, _)| t).collect();
                            s.chars.extend(crate::models::cvt::char_ids(&texts, chars));
                            encoded.ids.iter().zip(&encoded.special).filter(|(_, &special)| !special).map(|(&id, _)| id).collect()
                        }
                    };
                    s.labels.extend((0..pieces.len()).map(|i| if i == 0 { class } else { DEFAULT_IGNORE_INDEX }));
                    s.ids.extend(pieces);
                }
                // Cut to seq with the closing boundary last.
                let keep = layout.seq - suffix.len();
                s.ids.truncate(keep);
                s.labels.truncate(keep);
                s.chars.truncate(keep * layout.chars_per_token);
                s.ids.extend(&suffix);
                s.labels.extend(suffix.iter().map(|_| DEFAULT_IGNORE_INDEX));
                if layout.chars_per_token > 0 {
                    s.chars.extend(suffix.iter().flat_map(|_| boundary_chars()));
                }
                Ok(s)
            })
            .collect::<Result<Vec<_>>>()?;
        let sampler = EpochSampler::new(sentences.len(), draw, layout.batch);
        Ok(LabelledTokens { sentences, layout, sampler })
    }

    /// Training batches of sentences of similar length (`EpochSampler::grouped_by_length`).
    pub fn grouped_by_length(self) -> LabelledTokens {
        let lengths = self.sentences.iter().map(|s| s.ids.len()).collect();
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

    /// Rows padded with the padding id (label −100, a padding token's characters) to the
    /// batch's longest.
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let ids: Vec<&[u32]> = picked.iter().map(|&i| self.sentences[i].ids.as_slice()).collect();
        let mut batch = Batch::padded(&ids, self.layout.pad_id);
        for &i in &picked {
            batch.labels.extend(self.sentences[i].labels.iter().copied().chain(std::iter::repeat(DEFAULT_IGNORE_INDEX)).take(batch.seq));
        }
        let width = self.layout.chars_per_token;
        if width > 0 {
            let padding = crate::models::cvt::char_ids(&[None], width);
            let mut chars = Vec::with_capacity(picked.len() * batch.seq * width);
            for &i in &picked {
                let s = &self.sentences[i];
                chars.extend(&s.chars);
                (s.ids.len()..batch.seq).for_each(|_| chars.extend(&padding));
            }
            batch.char_ids = Some(chars);
        }
        Ok(batch)
    }
}

/// Cross-view training's batches: labelled and unlabelled ones in turn (micro-batch 2i from
/// the labelled data, 2i + 1 from the unlabelled), each source walked at its own pace.
pub struct Alternating {
    labelled: Box<dyn BatchSource>,
    unlabelled: Box<dyn BatchSource>,
}

impl Alternating {
    pub fn new(labelled: Box<dyn BatchSource>, unlabelled: Box<dyn BatchSource>) -> Alternating {
        Alternating { labelled, unlabelled }
    }
}

impl BatchSource for Alternating {
    fn batches(&self) -> Option<usize> {
        None
    }

    /// An epoch of the labelled data, with as many unlabelled batches.
    fn batches_per_epoch(&self) -> Option<usize> {
        self.labelled.batches_per_epoch().map(|n| 2 * n)
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        match index % 2 {
            0 => self.labelled.batch(index / 2),
            _ => self.unlabelled.batch(index / 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::training::formats::label_names;

    fn tokenizer() -> TextTokenizer {
        let text = "the cat sat on the mat . a dog ran in the park . cats and dogs\n".repeat(4);
        TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap()
    }

    fn layout(batch: usize, seq: usize) -> TokenBatches {
        TokenBatches { pad_id: 0, chars_per_token: 0, batch, seq }
    }

    const CONLL: &str = "-DOCSTART- O\n\nthe O\ncat B-ANIMAL\nsat O\n\ncatsat B-ANIMAL\nran O\n";

    #[test]
    fn conll_sentences_become_labelled_pieces() {
        let t = tokenizer();
        let labels = label_names(CONLL).unwrap();
        assert_eq!(labels, ["B-ANIMAL", "O"]);
        let data = LabelledTokens::from_conll(CONLL, &t, &labels, layout(2, 16), None).unwrap();
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
        let short = LabelledTokens::from_conll(CONLL, &t, &labels, layout(1, 3), None).unwrap().batch(0).unwrap();
        assert_eq!((short.input_ids[2], short.labels), (t.token_to_id("[SEP]").unwrap(), vec![-100, 1, -100]));
    }

    /// CVT's fixture tokenizer: `<start> … <end>`, words lower-cased with digits 0.
    fn cvt_tokenizer() -> TextTokenizer {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cvt/tiny/tokenizer.json");
        TextTokenizer::from_bytes(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn a_character_reading_model_gets_each_token_s_characters_and_its_boundaries() {
        let t = cvt_tokenizer();
        let layout = TokenBatches { pad_id: 0, chars_per_token: 6, batch: 2, seq: 8 };
        let labels = ["DET".to_string(), "NOUN".into()];
        let data = LabelledTokens::from_conll("The DET\nCat NOUN\n\nA DET\n", &t, &labels, layout, None).unwrap();
        let b = data.batch(0).unwrap();
        let (start, end) = (t.token_to_id("<start>").unwrap(), t.token_to_id("<end>").unwrap());
        assert_eq!(
            (b.seq, &b.input_ids[..4], &b.labels[..4]),
            (4, &[start, t.token_to_id("the").unwrap(), t.token_to_id("cat").unwrap(), end][..], &[-100, 0, 1, -100][..])
        );
        let chars = b.char_ids.unwrap();
        assert_eq!(chars.len(), 2 * 4 * 6);
        let row = |i: usize| chars[i * 6..(i + 1) * 6].to_vec();
        // Boundaries and padding are MISSING; a word is spelt as written (case kept), cut to 2 bytes.
        assert_eq!(row(0), crate::models::cvt::char_row(None, 2));
        assert_eq!(row(1), crate::models::cvt::char_row(Some("Th"), 2));
        assert_eq!(row(2), crate::models::cvt::char_row(Some("Ca"), 2));
        assert_eq!(row(7), crate::models::cvt::char_row(None, 2), "the second sentence's padding");
        assert_eq!(b.labels[4..], [-100, 0, -100, -100]);
    }

    #[test]
    fn unlabelled_lines_carry_no_labels_and_alternate_with_labelled_batches() {
        let t = cvt_tokenizer();
        let layout = TokenBatches { pad_id: 0, chars_per_token: 6, batch: 1, seq: 8 };
        let unlabelled = LabelledTokens::from_lines("a cat sat\n\nthe dog\n", &t, layout, Some(3)).unwrap();
        let b = unlabelled.batch(0).unwrap();
        assert!(b.labels.iter().all(|&l| l == DEFAULT_IGNORE_INDEX));
        assert!(b.char_ids.is_some());
        assert!(LabelledTokens::from_lines("\n \n", &t, layout, None).is_err(), "no sentences");
        let labelled = LabelledTokens::from_conll("the DET\n", &t, &["DET".into()], layout, Some(3)).unwrap();
        let both = Alternating::new(Box::new(labelled), Box::new(unlabelled));
        let kinds: Vec<bool> = (0..4).map(|i| both.batch(i).unwrap().labels.iter().any(|&l| l != DEFAULT_IGNORE_INDEX)).collect();
        assert_eq!(kinds, [true, false, true, false]);
        assert_eq!(both.batches(), None);
    }

    #[test]
    fn bad_conll_is_an_error_naming_the_line() {
        let t = tokenizer();
        let err = LabelledTokens::from_conll("the O\ncat B-PER\n", &t, &["O".into()], layout(2, 8), None).err().unwrap().to_string();
        assert!(err.contains("line 2") && err.contains("B-PER"), "{err}");
        assert!(conll_sentences("lonely\n").is_err(), "a word without a label");
        assert!(conll_sentences("\n\n").is_err());
    }
}
