//! Masked-LM pretraining batches from plain text. With next-sentence prediction, BERT's
//! (Devlin et al. 2019, following the original `create_pretraining_data.py`): sequences
//! `[CLS] A [SEP] B [SEP]` where B is A's true continuation or, half of the time, text from
//! another document. Without it, RoBERTa's FULL-SENTENCES (Liu et al. 2019, §4.2): whole
//! sentences read on from a random one, across the ends of documents with an extra separator
//! between two, until the next sentence would not fit: `<s> … </s> … </s>`. Then 15% of the
//! text tokens are selected, 80% of those replaced by the mask token, 10% by a random token
//! and 10% kept — drawn afresh for every batch index, so a sequence seen again is masked
//! anew (RoBERTa's dynamic masking). With whole-word masking (ERNIE's idea, later BERT's
//! `wwm` models) a word's WordPiece pieces are selected together.
//!
//! The special tokens are BERT's (`[CLS] [SEP] [PAD] [MASK]`) or RoBERTa's (`<s> </s> <pad>
//! <mask>`), whichever the tokenizer has. Documents are separated by blank lines; within a
//! document, sentences end at `.`, `!` or `?` followed by white space (or at a line end).

use rand::seq::SliceRandom;
use rand::{rngs::StdRng, Rng};

use super::data::{rng_for, Batch, BatchSource};
use crate::error::{arg_err, Result};
use crate::tokenize::TextTokenizer;

/// What the masked-LM batches hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskingConfig {
    /// Fraction of the tokens selected for prediction (BERT: 0.15).
    pub probability: f64,
    /// Select whole words (all of a word's `##` pieces) rather than single pieces.
    pub whole_word: bool,
    /// Build sentence pairs with their labels; None: one segment per row.
    pub pairs: Option<SentencePairs>,
    /// Select spans of up to this many consecutive words (or pieces), a span of n drawn with
    /// p(n) ∝ 1/n (ALBERT's n-gram masking, Lan et al. 2020, §4.1: 3); 1 selects single ones.
    pub max_ngram: usize,
}

/// How a row's two segments are drawn, and what its pair label says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SentencePairs {
    /// BERT's next-sentence prediction: B follows A in its document, or (half of the time,
    /// label 1) is text from another document.
    NextSentence,
    /// ALBERT's sentence-order prediction: A and B are consecutive segments of one
    /// document, swapped half of the time (label 1).
    SentenceOrder,
}

/// The longest span n-gram masking may select.
pub const MAX_NGRAM: usize = 8;

/// A span length in 1..=`longest` with p(n) ∝ 1/n.
fn draw_ngram(rng: &mut StdRng, longest: usize) -> usize {
    let total: f64 = (1..=longest).map(|n| 1.0 / n as f64).sum();
    let mut r = rng.random::<f64>() * total;
    for n in 1..longest {
        r -= 1.0 / n as f64;
        if r < 0.0 {
            return n;
        }
    }
    longest
}

struct Specials {
    cls: u32,
    sep: u32,
    pad: u32,
    mask: u32,
}

/// Masked-LM (+ next-sentence) batches drawn from a tokenized corpus with a seeded generator.
pub struct MaskedLmCorpus {
    /// Documents → sentences → token ids (no special tokens).
    documents: Vec<Vec<Vec<u32>>>,
    /// Every (document, sentence) a sequence can start at.
    starts: Vec<(usize, usize)>,
    /// Per token id: a `##` piece that continues the previous token's word.
    continues_word: Vec<bool>,
    /// Ids a selected token may be replaced with (the vocabulary less the special tokens).
    replacements: Vec<u32>,
    specials: Specials,
    config: MaskingConfig,
    seed: u64,
    batch: usize,
    seq: usize,
}

/// The original BERT's truncate_seq_pair: trims the longer segment at a random end until the
/// pair fits in `budget` (each keeps at least one token when budget ≥ 2).
fn truncate_pair(a: &mut Vec<u32>, b: &mut Vec<u32>, budget: usize, rng: &mut StdRng) {
    while a.len() + b.len() > budget {
        let longer = if a.len() > b.len() { &mut *a } else { &mut *b };
        if rng.random_bool(0.5) {
            longer.remove(0);
        } else {
            longer.pop();
        }
    }
}

/// Splits a document into sentences: after `.`, `!` or `?` followed by white space, and at
/// line ends.
fn sentences(document: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in document.lines() {
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if matches!(c, '.' | '!' | '?') && chars.peek().is_some_and(|(_, next)| next.is_whitespace()) {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        out.push(&line[start..]);
    }
    out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()
}

impl MaskedLmCorpus {
    /// Tokenizes `text` (documents separated by blank lines) with a WordPiece tokenizer that
    /// has `[CLS]`, `[SEP]`, `[PAD]` and `[MASK]`.
    pub fn new(text: &str, tokenizer: &TextTokenizer, config: MaskingConfig, seed: u64, batch: usize, seq: usize) -> Result<MaskedLmCorpus> {
        let op = "masked-LM data";
        // BERT's names, else RoBERTa's.
        let special = |bert: &str, roberta: &str| {
            tokenizer
                .token_to_id(bert)
                .or_else(|| tokenizer.token_to_id(roberta))
                .ok_or_else(|| arg_err!(op, "the tokenizer has no {bert} (or {roberta}) token"))
        };
        let specials =
            Specials { cls: special("[CLS]", "<s>")?, sep: special("[SEP]", "</s>")?, pad: special("[PAD]", "<pad>")?, mask: special("[MASK]", "<mask>")? };
        if !(config.probability > 0.0 && config.probability < 1.0) {
            return Err(arg_err!(op, "the masking probability must be in (0, 1), got {}", config.probability));
        }
        if !(1..=MAX_NGRAM).contains(&config.max_ngram) {
            return Err(arg_err!(op, "n-gram masking selects spans of 1 to {MAX_NGRAM} words, not up to {}", config.max_ngram));
        }
        let reserved = if config.pairs.is_some() { 3 } else { 2 };
        if seq <= reserved + 1 || batch == 0 {
            return Err(arg_err!(op, "sequences of {seq} tokens leave no room for text after [CLS]/[SEP] (batch {batch})"));
        }
        let vocab = tokenizer.vocab_size() as u32;
        let special_ids: Vec<u32> =
            ["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "<mask>", "<unk>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        let replacements: Vec<u32> = (0..vocab).filter(|id| !special_ids.contains(id)).collect();
        let continues_word: Vec<bool> = (0..vocab).map(|id| tokenizer.id_to_token(id).is_some_and(|t| t.starts_with("##"))).collect();
        if config.whole_word && !continues_word.contains(&true) {
            return Err(arg_err!(op, "whole-word masking needs a WordPiece vocabulary (pieces marked ##)"));
        }
        let mut documents = Vec::new();
        let mut lines = text.lines().peekable();
        while lines.peek().is_some() {
            let block: Vec<&str> = lines.by_ref().take_while(|l| !l.trim().is_empty()).collect();
            let tokenized = sentences(&block.join("\n")).into_iter().map(|s| tokenizer.encode(s, false)).collect::<Result<Vec<_>>>()?;
            let tokenized: Vec<Vec<u32>> = tokenized.into_iter().filter(|s| !s.is_empty()).collect();
            if !tokenized.is_empty() {
                documents.push(tokenized);
            }
        }
        if documents.is_empty() {
            return Err(arg_err!(op, "the corpus holds no text"));
        }
        if config.pairs == Some(SentencePairs::NextSentence) && documents.len() < 2 {
            return Err(arg_err!(
                op,
                "next-sentence prediction draws random segments from other documents, but the corpus has one (separate documents with blank lines)"
            ));
        }
        let mut starts: Vec<(usize, usize)> = documents.iter().enumerate().flat_map(|(d, doc)| (0..doc.len()).map(move |s| (d, s))).collect();
        if config.pairs == Some(SentencePairs::SentenceOrder) {
            // Both segments come from the text after the start.
            starts.retain(|&(d, s)| documents[d][s..].iter().map(Vec::len).sum::<usize>() >= 2);
            if starts.is_empty() {
                return Err(arg_err!(op, "sentence-order prediction splits text of at least two tokens into two segments; the corpus has none"));
            }
        }
        Ok(MaskedLmCorpus { documents, starts, continues_word, replacements, specials, config, seed, batch, seq })
    }

    /// Tokens of `document`'s sentences from `first` on, until `budget` tokens are reached
    /// (at least one sentence), as a list of sentences.
    fn chunk(&self, document: usize, first: usize, budget: usize) -> Vec<&[u32]> {
        let mut chunk = Vec::new();
        let mut len = 0;
        for sentence in &self.documents[document][first..] {
            if len >= budget {
                break;
            }
            chunk.push(sentence.as_slice());
            len += sentence.len();
        }
        chunk
    }

    /// FULL-SENTENCES: the sentences from `first` of `document` on, across the ends of
    /// documents (the corpus read as a ring) with a separator between two, while whole
    /// sentences fit in `budget`; a first sentence longer than that is cut.
    fn full_sentences(&self, document: usize, first: usize, budget: usize) -> Vec<u32> {
        let (mut row, mut d, mut s): (Vec<u32>, usize, usize) = (Vec::new(), document, first);
        loop {
            let sentence = &self.documents[d][s];
            if !row.is_empty() && row.len() + sentence.len() > budget {
                return row;
            }
            row.extend(sentence);
            if row.len() >= budget {
                row.truncate(budget);
                return row;
            }
            s += 1;
            if s == self.documents[d].len() {
                (d, s) = ((d + 1) % self.documents.len(), 0);
                if row.len() + 1 >= budget {
                    return row;
                }
                row.push(self.specials.sep);
            }
        }
    }

    /// One row's segments before masking: (A, B, the pair label is 1).
    fn segments(&self, rng: &mut StdRng) -> (Vec<u32>, Vec<u32>, bool) {
        let budget = self.seq - if self.config.pairs.is_some() { 3 } else { 2 };
        let (document, first) = self.starts[rng.random_range(0..self.starts.len())];
        let Some(pairs) = self.config.pairs else {
            return (self.full_sentences(document, first, budget), Vec::new(), false);
        };
        let chunk = self.chunk(document, first, budget);
        if pairs == SentencePairs::SentenceOrder {
            return self.ordered_segments(&chunk, budget, rng);
        }
        // A takes the chunk's first a_end sentences; B the rest, or another document's text.
        let a_end = if chunk.len() > 1 { rng.random_range(1..chunk.len()) } else { 1 };
        let random_next = chunk.len() == 1 || rng.random_bool(0.5);
        let mut a = chunk[..a_end].concat();
        let mut b = if random_next {
            let mut other = rng.random_range(0..self.documents.len() - 1);
            if other >= document {
                other += 1;
            }
            let start = rng.random_range(0..self.documents[other].len());
            self.chunk(other, start, budget.saturating_sub(a.len()).max(1)).concat()
        } else {
            chunk[a_end..].concat()
        };
        truncate_pair(&mut a, &mut b, budget, rng);
        (a, b, random_next)
    }

    /// Sentence order: A the chunk's first sentences and B the rest (a one-sentence chunk
    /// split inside the sentence), both non-empty; swapped half of the time.
    fn ordered_segments(&self, chunk: &[&[u32]], budget: usize, rng: &mut StdRng) -> (Vec<u32>, Vec<u32>, bool) {
        let (mut a, mut b) = if chunk.len() > 1 {
            let a_end = rng.random_range(1..chunk.len());
            (chunk[..a_end].concat(), chunk[a_end..].concat())
        } else {
            // The start was chosen with at least two tokens after it.
            let tokens = chunk.concat();
            let split = rng.random_range(1..tokens.len());
            (tokens[..split].to_vec(), tokens[split..].to_vec())
        };
        // The budget is at least 2 (seq ≥ 5): both segments keep a token.
        truncate_pair(&mut a, &mut b, budget, rng);
        let swapped = rng.random_bool(0.5);
        if swapped {
            std::mem::swap(&mut a, &mut b);
        }
        (a, b, swapped)
    }

    /// Selects ~probability of the text positions (whole words if asked) and applies
    /// 80% [MASK] / 10% random / 10% kept; returns the labels (−100 where not selected).
    fn mask(&self, ids: &mut [u32], text_positions: &[usize], rng: &mut StdRng) -> Vec<i64> {
        let mut labels = vec![-100i64; ids.len()];
        let mut words: Vec<Vec<usize>> = Vec::new();
        for &p in text_positions {
            match words.last_mut() {
                Some(word) if self.config.whole_word && self.continues_word[ids[p] as usize] && word.last() == Some(&(p - 1)) => word.push(p),
                _ => words.push(vec![p]),
            }
        }
        let wanted = ((text_positions.len() as f64 * self.config.probability).round() as usize).max(1);
        // Spans start at the words in a random order; one of n words (n drawn, and shortened
        // until it fits what is left to select) is taken unless it overlaps one taken before.
        let mut starts: Vec<usize> = (0..words.len()).collect();
        starts.shuffle(rng);
        let mut taken = vec![false; words.len()];
        let mut selected = 0;
        let span_tokens = |start: usize, n: usize| words[start..start + n].iter().map(Vec::len).sum::<usize>();
        for start in starts {
            if selected >= wanted {
                break;
            }
            let longest = self.config.max_ngram.min(words.len() - start);
            let mut n = if longest > 1 { draw_ngram(rng, longest) } else { 1 };
            while n > 1 && selected + span_tokens(start, n) > wanted {
                n -= 1;
            }
            if selected + span_tokens(start, n) > wanted || taken[start..start + n].contains(&true) {
                continue;
            }
            taken[start..start + n].fill(true);
            selected += span_tokens(start, n);
            for &p in words[start..start + n].iter().flatten() {
                labels[p] = ids[p] as i64;
                let r: f64 = rng.random();
                if r < 0.8 {
                    ids[p] = self.specials.mask;
                } else if r >= 0.9 {
                    ids[p] = self.replacements[rng.random_range(0..self.replacements.len())];
                }
            }
        }
        labels
    }
}

impl BatchSource for MaskedLmCorpus {
    fn batches(&self) -> Option<usize> {
        None
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let (batch, seq, s) = (self.batch, self.seq, &self.specials);
        let mut rng = rng_for(self.seed, index);
        let mut out = Batch { batch, seq, ..Default::default() };
        let (mut types, mut mask, mut next) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..batch {
            let (a, b, random_next) = self.segments(&mut rng);
            let mut ids = vec![s.cls];
            ids.extend(&a);
            ids.push(s.sep);
            let a_len = ids.len();
            if self.config.pairs.is_some() {
                ids.extend(&b);
                ids.push(s.sep);
            }
            // Not the separators between documents.
            let text_positions: Vec<usize> = (1..a_len - 1).chain(a_len..a_len + b.len()).filter(|&p| ids[p] != s.sep).collect();
            let real = ids.len();
            let labels = self.mask(&mut ids, &text_positions, &mut rng);
            ids.resize(seq, s.pad);
            out.input_ids.extend(&ids);
            out.labels.extend(labels);
            out.labels.resize(out.input_ids.len(), -100);
            types.extend((0..seq).map(|i| (i >= a_len && i < real) as u32));
            mask.extend((0..seq).map(|i| (i < real) as u32));
            next.push(random_next as i64);
        }
        out.attention_mask = Some(mask);
        match self.config.pairs {
            Some(SentencePairs::NextSentence) => out.next_sentence_label = Some(next),
            Some(SentencePairs::SentenceOrder) => out.sentence_order_label = Some(next),
            None => {}
        }
        if self.config.pairs.is_some() {
            out.token_type_ids = Some(types);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\ndog\nran\nfast\nplay\n##ing\n##ed\nbird\nsang\nloud\n##ly\n.\n";

    fn corpus(config: MaskingConfig, seq: usize) -> MaskedLmCorpus {
        let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
        let documents = [
            "the cat sat on the mat. the dog ran fast. the bird sang loudly.\nthe cat played. the dog played on the mat.",
            "the bird sang. the cat ran fast on the mat. the dog sat.",
            "playing playing playing. the mat sat on the dog.",
        ];
        MaskedLmCorpus::new(&documents.join("\n\n"), &tokenizer, config, 3, 8, seq).unwrap()
    }

    const NSP: MaskingConfig = MaskingConfig { probability: 0.15, whole_word: false, pairs: Some(SentencePairs::NextSentence), max_ngram: 1 };

    #[test]
    fn splits_documents_and_sentences() {
        assert_eq!(sentences("a b. c! d?e f\ng h ."), vec!["a b.", "c!", "d?e f", "g h ."]);
        let c = corpus(NSP, 24);
        assert_eq!(c.documents.len(), 3);
        assert_eq!(c.documents[0].len(), 5);
    }

    #[test]
    fn pairs_are_cls_a_sep_b_sep_with_segments_and_padding() {
        let c = corpus(NSP, 24);
        for index in 0..20 {
            let b = c.batch(index).unwrap();
            assert_eq!(b, c.batch(index).unwrap(), "a batch depends on its index only");
            let types = b.token_type_ids.as_ref().unwrap();
            let mask = b.attention_mask.as_ref().unwrap();
            for row in 0..b.batch {
                let r = row * b.seq..(row + 1) * b.seq;
                let (ids, types, mask) = (&b.input_ids[r.clone()], &types[r.clone()], &mask[r]);
                let real = mask.iter().filter(|&&m| m == 1).count();
                assert!(mask[..real].iter().all(|&m| m == 1) && ids[real..].iter().all(|&t| t == 0), "padding after the text: {ids:?}");
                assert_eq!(ids[0], 2, "[CLS] first");
                let seps: Vec<usize> = (0..real).filter(|&i| ids[i] == 3).collect();
                assert_eq!(seps.len(), 2, "two [SEP]s: {ids:?}");
                assert_eq!(seps[1], real - 1);
                assert!(types[..=seps[0]].iter().all(|&t| t == 0) && types[seps[0] + 1..real].iter().all(|&t| t == 1), "{types:?}");
                assert!(seps[1] > seps[0] + 1, "B is not empty: {ids:?}");
            }
        }
    }

    #[test]
    fn sentence_order_pairs_are_consecutive_segments_swapped_half_of_the_time() {
        // Long rows: no segment is truncated, so A and B are exactly the corpus's text.
        let c = corpus(MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..NSP }, 64);
        let texts: Vec<Vec<u32>> = c.documents.iter().map(|d| d.concat()).collect();
        let (mut rows, mut swapped) = (0, 0);
        for index in 0..50 {
            let b = c.batch(index).unwrap();
            assert!(b.next_sentence_label.is_none());
            let labels = b.sentence_order_label.as_ref().unwrap();
            for (row, &label) in labels.iter().enumerate() {
                let r = row * b.seq..(row + 1) * b.seq;
                // The original tokens: a masked position's label holds it.
                let ids: Vec<u32> = r.clone().map(|i| if b.labels[i] >= 0 { b.labels[i] as u32 } else { b.input_ids[i] }).collect();
                let seps: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] == 3).collect();
                assert_eq!(ids[0], 2);
                assert_eq!(seps.len(), 2, "{ids:?}");
                let (a, second) = (&ids[1..seps[0]], &ids[seps[0] + 1..seps[1]]);
                assert!(!a.is_empty() && !second.is_empty(), "{ids:?}");
                assert!(b.token_type_ids.as_ref().unwrap()[r][seps[0] + 1] == 1);
                let in_order = if label == 1 { [second, a].concat() } else { [a, second].concat() };
                assert!(texts.iter().any(|t| t.windows(in_order.len()).any(|w| w == in_order.as_slice())), "not consecutive text of one document: {ids:?}");
                rows += 1;
                swapped += label as usize;
            }
        }
        let share = swapped as f64 / rows as f64;
        assert!((0.4..0.6).contains(&share), "share swapped: {share}");
        // A single-sentence document still gives two segments, split inside the sentence.
        let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
        let one = MaskedLmCorpus::new("the cat sat", &tokenizer, MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..NSP }, 0, 4, 16).unwrap();
        assert!(one.batch(0).unwrap().sentence_order_label.is_some());
        let err =
            MaskedLmCorpus::new("cat", &tokenizer, MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..NSP }, 0, 4, 16).err().unwrap().to_string();
        assert!(err.contains("at least two tokens"), "{err}");
    }

    #[test]
    fn selects_fifteen_percent_with_80_10_10_replacement() {
        let c = corpus(MaskingConfig { pairs: None, ..NSP }, 16);
        let (mut selected, mut masked, mut kept, mut random_next) = (0, 0, 0, 0);
        for index in 0..400 {
            let b = c.batch(index).unwrap();
            assert!(b.next_sentence_label.is_none() && b.token_type_ids.is_none());
            for row in 0..b.batch {
                let r = row * b.seq..(row + 1) * b.seq;
                // Less [CLS], the final [SEP] and the separators between documents.
                let real = b.attention_mask.as_ref().unwrap()[r.clone()].iter().filter(|&&m| m == 1).count();
                let text = real - 2 - b.input_ids[r.start + 1..r.start + real - 1].iter().filter(|&&t| t == 3).count();
                let labelled: Vec<usize> = r.filter(|&i| b.labels[i] != -100).collect();
                assert_eq!(labelled.len(), ((text as f64 * 0.15).round() as usize).max(1), "row {row} of batch {index}");
                for i in labelled {
                    selected += 1;
                    match b.input_ids[i] {
                        4 => masked += 1,
                        id if id as i64 == b.labels[i] => kept += 1,
                        _ => random_next += 1,
                    }
                }
            }
        }
        let share = |n: usize| n as f64 / selected as f64;
        eprintln!("{selected} selected: {:.3} masked, {:.3} kept, {:.3} random", share(masked), share(kept), share(random_next));
        assert!(selected > 2000);
        assert!((share(masked) - 0.8).abs() < 0.03, "masked share {}", share(masked));
        // A random replacement may draw the original token (1 in 16 here): counted as kept.
        assert!((share(kept) - 0.1).abs() < 0.03 && (share(random_next) - 0.1).abs() < 0.03);
    }

    #[test]
    fn without_nsp_rows_are_full_sentences_across_documents() {
        let c = corpus(MaskingConfig { pairs: None, ..NSP }, 16);
        // Every sentence, and every sentence with a document's end after it, as ids.
        let sentences: Vec<&[u32]> = c.documents.iter().flatten().map(Vec::as_slice).collect();
        let mut crossed = 0;
        for index in 0..100 {
            let b = c.batch(index).unwrap();
            for row in 0..b.batch {
                let r = row * b.seq..(row + 1) * b.seq;
                let real = b.attention_mask.as_ref().unwrap()[r.clone()].iter().filter(|&&m| m == 1).count();
                // The text as it was before masking.
                let ids: Vec<u32> = r.clone().map(|i| if b.labels[i] == -100 { b.input_ids[i] } else { b.labels[i] as u32 }).collect();
                assert_eq!((ids[0], ids[real - 1]), (2, 3), "[CLS] … [SEP]: {ids:?}");
                let pieces: Vec<&[u32]> = ids[1..real - 1].split(|&t| t == 3).collect();
                crossed += pieces.len() - 1;
                for piece in pieces {
                    // Whole sentences, each in the corpus (only a row's single sentence may be cut).
                    let mut rest = piece;
                    while !rest.is_empty() {
                        let whole = sentences
                            .iter()
                            .find(|s| rest.starts_with(s) && (rest.len() == s.len() || sentences.iter().any(|t| rest[s.len()..].starts_with(t))));
                        match whole {
                            Some(s) => rest = &rest[s.len()..],
                            None => {
                                assert!(real == b.seq && sentences.iter().any(|s| s.starts_with(rest)), "not whole sentences: {piece:?}");
                                rest = &[];
                            }
                        }
                    }
                }
            }
        }
        assert!(crossed > 50, "rows run on into the next document: {crossed}");
    }

    #[test]
    fn masks_are_drawn_afresh_each_time_a_sequence_is_seen() {
        // One short sentence: every row holds it whole, so only the masks differ.
        let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
        let config = MaskingConfig { probability: 0.15, whole_word: false, pairs: None, max_ngram: 1 };
        let c = MaskedLmCorpus::new("the cat sat on the mat the dog ran fast", &tokenizer, config, 5, 4, 12).unwrap();
        let mut masks = std::collections::HashSet::new();
        let mut per_position = [0usize; 10];
        let rows = 4 * 500;
        for index in 0..500 {
            let b = c.batch(index).unwrap();
            for row in b.labels.chunks(12) {
                masks.insert(row.iter().map(|&l| l != -100).collect::<Vec<_>>());
                for (count, label) in per_position.iter_mut().zip(&row[1..11]) {
                    *count += (*label != -100) as usize;
                }
            }
        }
        // Two of ten words each time (round(1.5)): 45 possible pairs.
        assert!(masks.len() > 40, "{} distinct masks", masks.len());
        for (position, &count) in per_position.iter().enumerate() {
            let share = count as f64 / rows as f64;
            assert!((share - 0.2).abs() < 0.04, "word {position} selected in {share:.3} of the rows");
        }
    }

    #[test]
    fn roberta_tokens_when_the_tokenizer_has_them() {
        let tokenizer = TextTokenizer::from_bytes(include_bytes!("../../tests/fixtures/roberta/RobertaForMaskedLM/tokenizer.json")).unwrap();
        let id = |t: &str| tokenizer.token_to_id(t).unwrap();
        let config = MaskingConfig { probability: 0.15, whole_word: false, pairs: None, max_ngram: 1 };
        let text = "the cat sat on the mat. the dog ran to the park.\n\nthe bird sang in the morning.";
        let c = MaskedLmCorpus::new(text, &tokenizer, config, 1, 8, 24).unwrap();
        let b = c.batch(0).unwrap();
        for row in b.input_ids.chunks(24) {
            assert_eq!(row[0], id("<s>"));
            let real = row.iter().rposition(|&t| t != id("<pad>")).unwrap() + 1;
            assert_eq!(row[real - 1], id("</s>"), "{row:?}");
            assert!(row[real - 1..].iter().skip(1).all(|&t| t == id("<pad>")));
        }
        assert!(b.input_ids.contains(&id("<mask>")));
        assert!(b.labels.iter().all(|&l| l == -100 || !["<s>", "</s>", "<pad>", "<mask>"].iter().any(|t| l == id(t) as i64)));
    }

    #[test]
    fn ngram_spans_are_drawn_with_probability_inverse_to_their_length() {
        let mut rng = rng_for(9, 0);
        let mut counts = [0usize; 4];
        for _ in 0..33_000 {
            counts[draw_ngram(&mut rng, 3)] += 1;
        }
        for (n, want) in [(1, 6.0 / 11.0), (2, 3.0 / 11.0), (3, 2.0 / 11.0)] {
            let share = counts[n] as f64 / 33_000.0;
            assert!((share - want).abs() < 0.01, "n = {n}: {share:.4}, want {want:.4}");
        }
        // In batches: as many tokens selected as before, in longer runs.
        let mean_run = |max_ngram: usize| {
            let c = corpus(MaskingConfig { pairs: None, probability: 0.3, max_ngram, ..NSP }, 24);
            let (mut selected, mut runs) = (0, 0);
            for index in 0..200 {
                let b = c.batch(index).unwrap();
                for (row, ids) in b.labels.chunks(b.seq).zip(b.input_ids.chunks(b.seq)) {
                    let picked: Vec<bool> = row.iter().map(|&l| l != -100).collect();
                    let real = ids.iter().rposition(|&t| t != 0).unwrap() + 1;
                    let text = real - 2 - ids[1..real - 1].iter().filter(|&&t| t == 3).count();
                    assert_eq!(picked.iter().filter(|&&p| p).count(), ((text as f64 * 0.3).round() as usize).max(1), "spans fill the quota exactly");
                    selected += picked.iter().filter(|&&p| p).count();
                    runs += picked.windows(2).filter(|w| w[1] && !w[0]).count() + picked[0] as usize;
                }
            }
            selected as f64 / runs as f64
        };
        let (single, spans) = (mean_run(1), mean_run(3));
        assert!(spans > single + 0.3, "mean run of selected tokens: {single:.2} one by one, {spans:.2} with spans up to 3");
        let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
        for max_ngram in [0, MAX_NGRAM + 1] {
            let err = MaskedLmCorpus::new("the cat sat", &tokenizer, MaskingConfig { max_ngram, pairs: None, ..NSP }, 0, 2, 16).err().unwrap().to_string();
            assert!(err.contains("n-gram"), "{err}");
        }
    }

    #[test]
    fn whole_word_masking_takes_every_piece_of_a_word() {
        let c = corpus(MaskingConfig { whole_word: true, probability: 0.3, pairs: None, max_ngram: 1 }, 16);
        let mut pieces_seen = 0;
        for index in 0..200 {
            let b = c.batch(index).unwrap();
            for i in 1..b.input_ids.len() {
                let original = |j: usize| if b.labels[j] == -100 { b.input_ids[j] } else { b.labels[j] as u32 };
                if c.continues_word[original(i) as usize] {
                    pieces_seen += 1;
                    assert_eq!(b.labels[i] == -100, b.labels[i - 1] == -100, "a ## piece is selected with the piece before it (batch {index}, position {i})");
                }
            }
        }
        assert!(pieces_seen > 100);
    }

    #[test]
    fn next_sentence_labels_are_balanced_and_bad_corpora_are_refused() {
        let c = corpus(NSP, 24);
        let labels: Vec<i64> = (0..100).flat_map(|i| c.batch(i).unwrap().next_sentence_label.unwrap()).collect();
        let random = labels.iter().filter(|&&l| l == 1).count() as f64 / labels.len() as f64;
        assert!((0.4..0.75).contains(&random), "share of random B: {random}");
        let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
        let err = MaskedLmCorpus::new("the cat sat. the dog ran.", &tokenizer, NSP, 0, 2, 16).err().unwrap().to_string();
        assert!(err.contains("other documents"), "{err}");
        let err = MaskedLmCorpus::new(" \n\n ", &tokenizer, NSP, 0, 2, 16).err().unwrap().to_string();
        assert!(err.contains("no text"), "{err}");
        let err = MaskedLmCorpus::new("the cat", &tokenizer, NSP, 0, 2, 3).err().unwrap().to_string();
        assert!(err.contains("no room"), "{err}");
    }
}
