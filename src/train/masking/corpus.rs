//! The masked-LM corpus: documents and their masking units as batches (see the module's
//! documentation).

use std::ops::Range;

use rand::{rngs::StdRng, Rng};

use super::knowledge::{chinese_words, chunk_phrases, plain_documents, Document, Gazetteer};
use super::select::Selection;
pub use super::select::{Replacement, MAX_NGRAM};
use super::{MaskLevel, MaskSchedule};
use crate::error::{arg_err, Result};
use crate::models::training::{rng_for, Batch};
use crate::tokenize::TextTokenizer;
use crate::train::data::BatchSource;

/// What the masked-LM batches hold.
#[derive(Clone, Debug, PartialEq)]
pub struct MaskingConfig {
    /// Fraction of the tokens selected for prediction (BERT: 0.15).
    pub probability: f64,
    /// Select whole words (all of a word's `##` pieces; a Chinese word's characters, as jieba
    /// segments them) rather than single pieces.
    pub whole_word: bool,
    /// Build sentence pairs with their labels; None: one segment per row.
    pub pairs: Option<SentencePairs>,
    /// Select spans of up to this many consecutive units, a span of n drawn with p(n) ∝ 1/n
    /// (ALBERT's n-gram masking, Lan et al. 2020, §4.1: 3); 1 selects single ones.
    pub max_ngram: usize,
    /// The masking units, by stage (ERNIE's knowledge masking); one token-level stage for BERT.
    pub schedule: MaskSchedule,
    /// Micro-batches per optimizer step (gradient accumulation): the schedule counts steps.
    pub batches_per_step: u64,
    /// What a selected token becomes (BERT's 80/10/10 by default).
    pub replacement: Replacement,
}

impl MaskingConfig {
    /// BERT's masking: 15% of single pieces, one token-level stage; no pairs.
    pub fn new(pairs: Option<SentencePairs>) -> MaskingConfig {
        MaskingConfig {
            probability: 0.15,
            whole_word: false,
            pairs,
            max_ngram: 1,
            schedule: MaskSchedule::default(),
            batches_per_step: 1,
            replacement: Replacement::Bert,
        }
    }

    /// What held-out batches mask: single tokens at the token level, whatever the run's spans
    /// (--max-ngram) and stages (--mask-level), so that every recipe's held-out loss measures
    /// what a BERT's does. `--whole-word-mask` is kept: it says what the run's token is (a
    /// whole word), and a BERT trained with it is scored the same way.
    pub fn held_out(self) -> MaskingConfig {
        MaskingConfig { max_ngram: 1, schedule: MaskSchedule::default(), ..self }
    }
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

/// The bit of [`Piece::joins`] that says a token continues its unit at `level`.
fn level_bit(level: MaskLevel) -> u8 {
    1 << level as u8
}

/// A token of the corpus and, per [`MaskLevel`] bit, whether it continues the masking unit
/// of the token before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    id: u32,
    joins: u8,
}

impl Piece {
    fn alone(id: u32) -> Piece {
        Piece { id, joins: 0 }
    }
}

fn ids(pieces: &[Piece]) -> Vec<u32> {
    pieces.iter().map(|p| p.id).collect()
}

/// The special tokens of a tokenizer: BERT's, else RoBERTa's.
pub(crate) struct Specials {
    pub cls: u32,
    pub sep: u32,
    pub pad: u32,
    pub mask: u32,
}

impl Specials {
    pub(crate) fn find(tokenizer: &TextTokenizer, op: &'static str) -> Result<Specials> {
        let special = |bert: &str, roberta: &str| {
            tokenizer
                .token_to_id(bert)
                .or_else(|| tokenizer.token_to_id(roberta))
                .ok_or_else(|| arg_err!(op, "the tokenizer has no {bert} (or {roberta}) token"))
        };
        Ok(Specials { cls: special("[CLS]", "<s>")?, sep: special("[SEP]", "</s>")?, pad: special("[PAD]", "<pad>")?, mask: special("[MASK]", "<mask>")? })
    }
}

/// Masked-LM (+ next-sentence) batches drawn from a tokenized corpus with a seeded generator.
pub struct MaskedLmCorpus {
    /// Documents → sentences → tokens (no special tokens).
    documents: Vec<Vec<Vec<Piece>>>,
    /// Every (document, sentence) a sequence can start at.
    starts: Vec<(usize, usize)>,
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
fn truncate_pair<T>(a: &mut Vec<T>, b: &mut Vec<T>, budget: usize, rng: &mut StdRng) {
    while a.len() + b.len() > budget {
        let longer = if a.len() > b.len() { &mut *a } else { &mut *b };
        if rng.random_bool(0.5) {
            longer.remove(0);
        } else {
            longer.pop();
        }
    }
}

/// A document's sentences as byte ranges (trimmed, not empty): they end after `.`, `!` or `?`
/// followed by white space, and at line ends — unless that falls inside a span of
/// `keep_together`.
pub(crate) fn sentences(document: &str, keep_together: &[Range<usize>]) -> Vec<Range<usize>> {
    // Sorted by start, with the furthest end so far: a cut is inside a span iff a span that
    // starts before it ends after it (a binary search, not a scan: documents can hold
    // millions of spans).
    let mut spans = keep_together.to_vec();
    spans.sort_unstable_by_key(|s| s.start);
    let furthest: Vec<usize> = spans
        .iter()
        .scan(0, |end, s| {
            *end = s.end.max(*end);
            Some(*end)
        })
        .collect();
    let inside = |at: usize| spans.partition_point(|s| s.start < at).checked_sub(1).is_some_and(|k| furthest[k] > at);
    let mut cuts = vec![0];
    for (i, c) in document.char_indices() {
        let after = i + c.len_utf8();
        let ends = c == '\n' || (matches!(c, '.' | '!' | '?') && document[after..].chars().next().is_some_and(char::is_whitespace));
        if ends && !inside(after) {
            cuts.push(after);
        }
    }
    cuts.push(document.len());
    cuts.windows(2)
        .filter_map(|w| {
            let text = &document[w[0]..w[1]];
            let start = w[0] + (text.len() - text.trim_start().len());
            let end = w[0] + text.trim_end().len();
            (start < end).then_some(start..end)
        })
        .collect()
}

/// For each token (byte range), the index of the first span it overlaps; both sorted.
fn span_of_each(tokens: &[Range<usize>], spans: &[Range<usize>]) -> Vec<Option<usize>> {
    // The first span that ends after the first token starts (the spans are apart, so their
    // ends are sorted too).
    let mut next = tokens.first().map_or(0, |first| spans.partition_point(|s| s.end <= first.start));
    tokens
        .iter()
        .map(|token| {
            while next < spans.len() && spans[next].end <= token.start {
                next += 1;
            }
            (next < spans.len() && spans[next].start < token.end).then_some(next)
        })
        .collect()
}

/// The spans a document's units come from, byte ranges sorted and apart (empty when unused).
struct DocumentUnits {
    words: Vec<Range<usize>>,
    phrases: Vec<Range<usize>>,
    entities: Vec<Range<usize>>,
}

impl MaskedLmCorpus {
    /// Tokenizes `text` (documents separated by blank lines) with a tokenizer that has BERT's
    /// or RoBERTa's special tokens; phrases come from the built-in chunker (see
    /// [`MaskedLmCorpus::from_documents`]).
    pub fn new(text: &str, tokenizer: &TextTokenizer, config: MaskingConfig, seed: u64, batch: usize, seq: usize) -> Result<MaskedLmCorpus> {
        Self::from_documents(plain_documents(text), None, tokenizer, config, seed, batch, seq)
    }

    /// Tokenizes `documents`. Where the schedule masks phrases, a document's annotated
    /// phrases are the units, else the chunker's phrases and jieba's Chinese words; where it
    /// masks entities, its annotated entities, else the `gazetteer`'s names found in it.
    pub fn from_documents(
        documents: Vec<Document>,
        gazetteer: Option<&Gazetteer>,
        tokenizer: &TextTokenizer,
        config: MaskingConfig,
        seed: u64,
        batch: usize,
        seq: usize,
    ) -> Result<MaskedLmCorpus> {
        let op = "masked-LM data";
        let specials = Specials::find(tokenizer, op)?;
        if !(config.probability > 0.0 && config.probability < 1.0) {
            return Err(arg_err!(op, "the masking probability must be in (0, 1), got {}", config.probability));
        }
        if !(1..=MAX_NGRAM).contains(&config.max_ngram) {
            return Err(arg_err!(op, "n-gram masking selects spans of 1 to {MAX_NGRAM} words, not up to {}", config.max_ngram));
        }
        if config.batches_per_step == 0 {
            return Err(arg_err!(op, "an optimizer step takes at least one batch"));
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
        if config.schedule.uses(MaskLevel::Entity) && gazetteer.is_none() {
            if let Some(line) = documents.iter().position(|d| d.entities.is_none()) {
                return Err(arg_err!(
                    op,
                    "entity-level masking needs the entities of every document: document {} has no \"entities\" annotation, and no gazetteer was given",
                    line + 1
                ));
            }
        }
        let mut tokenized = Vec::new();
        for document in &documents {
            let units = DocumentUnits {
                words: if config.whole_word { chinese_words(&document.text)? } else { Vec::new() },
                phrases: match (&document.phrases, config.schedule.uses(MaskLevel::Phrase)) {
                    (_, false) => Vec::new(),
                    (Some(phrases), true) => phrases.clone(),
                    (None, true) => {
                        let mut found = chunk_phrases(&document.text);
                        found.extend(chinese_words(&document.text)?);
                        found.sort_unstable_by_key(|r| r.start);
                        found
                    }
                },
                entities: match (&document.entities, gazetteer, config.schedule.uses(MaskLevel::Entity)) {
                    (Some(entities), _, true) => entities.clone(),
                    (None, Some(gazetteer), true) => gazetteer.find(&document.text),
                    _ => Vec::new(),
                },
            };
            let sentences = Self::tokenize_document(&document.text, &units, tokenizer, &continues_word, config.whole_word)?;
            if !sentences.is_empty() {
                tokenized.push(sentences);
            }
        }
        let documents = tokenized;
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
        Ok(MaskedLmCorpus { documents, starts, replacements, specials, config, seed, batch, seq })
    }

    /// A document's sentences as tokens, each with the units it continues at every level.
    fn tokenize_document(text: &str, units: &DocumentUnits, tokenizer: &TextTokenizer, continues_word: &[bool], whole_word: bool) -> Result<Vec<Vec<Piece>>> {
        let keep_together: Vec<Range<usize>> = units.phrases.iter().chain(&units.entities).cloned().collect();
        let mut out = Vec::new();
        for sentence in sentences(text, &keep_together) {
            let encoded = tokenizer.encode_detailed(&text[sentence.clone()], None)?;
            // Character offsets within the sentence → byte ranges of the document.
            let bytes: Vec<usize> = text[sentence.clone()].char_indices().map(|(b, _)| sentence.start + b).chain([sentence.end]).collect();
            let (ids, ranges): (Vec<u32>, Vec<Range<usize>>) = (0..encoded.ids.len())
                .filter(|&i| !encoded.special[i])
                .map(|i| (encoded.ids[i], bytes[encoded.offsets[i].0.min(bytes.len() - 1)]..bytes[encoded.offsets[i].1.min(bytes.len() - 1)]))
                .unzip();
            if ids.is_empty() {
                continue;
            }
            let [words, phrases, entities] = [&units.words, &units.phrases, &units.entities].map(|spans| span_of_each(&ranges, spans));
            let pieces = (0..ids.len())
                .map(|i| {
                    if i == 0 {
                        return Piece::alone(ids[0]);
                    }
                    let word = whole_word && (continues_word[ids[i] as usize] || (words[i].is_some() && words[i] == words[i - 1]));
                    // Inside spans, one span's tokens; outside, the token level's units.
                    let within = |spans: &[Option<usize>]| match (spans[i - 1], spans[i]) {
                        (None, None) => word,
                        (a, b) => a == b,
                    };
                    let joins = [word, within(&phrases), within(&entities)];
                    Piece { id: ids[i], joins: MaskLevel::ALL.iter().zip(joins).filter(|(_, j)| *j).map(|(l, _)| level_bit(*l)).sum() }
                })
                .collect();
            out.push(pieces);
        }
        Ok(out)
    }

    /// Tokens of `document`'s sentences from `first` on, until `budget` tokens are reached
    /// (at least one sentence), as a list of sentences.
    fn chunk(&self, document: usize, first: usize, budget: usize) -> Vec<&[Piece]> {
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
    fn full_sentences(&self, document: usize, first: usize, budget: usize) -> Vec<Piece> {
        let (mut row, mut d, mut s): (Vec<Piece>, usize, usize) = (Vec::new(), document, first);
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
                row.push(Piece::alone(self.specials.sep));
            }
        }
    }

    /// One row's segments before masking: (A, B, the pair label is 1).
    fn segments(&self, rng: &mut StdRng) -> (Vec<Piece>, Vec<Piece>, bool) {
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
    fn ordered_segments(&self, chunk: &[&[Piece]], budget: usize, rng: &mut StdRng) -> (Vec<Piece>, Vec<Piece>, bool) {
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
}

impl BatchSource for MaskedLmCorpus {
    fn batches(&self) -> Option<usize> {
        None
    }

    /// Rows start at random sentences, so an epoch is a count, not a pass: the batches of
    /// full rows that hold as many tokens as the corpus.
    fn batches_per_epoch(&self) -> Option<usize> {
        let tokens: usize = self.documents.iter().flatten().map(Vec::len).sum();
        let per_row = self.seq.saturating_sub(if self.config.pairs.is_some() { 3 } else { 2 }).max(1);
        Some(tokens.div_ceil(per_row).div_ceil(self.batch.max(1)).max(1))
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let (batch, seq, s) = (self.batch, self.seq, &self.specials);
        let mut rng = rng_for(self.seed, index);
        let level = self.config.schedule.level_at(index / self.config.batches_per_step);
        let selection = Selection {
            probability: self.config.probability,
            max_ngram: self.config.max_ngram,
            mask: s.mask,
            replacements: &self.replacements,
            replacement: self.config.replacement,
        };
        let mut out = Batch { batch, seq, ..Default::default() };
        let (mut types, mut mask, mut next) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..batch {
            let (a, b, random_next) = self.segments(&mut rng);
            let mut row = vec![Piece::alone(s.cls)];
            row.extend(&a);
            row.push(Piece::alone(s.sep));
            let a_len = row.len();
            if self.config.pairs.is_some() {
                row.extend(&b);
                row.push(Piece::alone(s.sep));
            }
            let mut ids = ids(&row);
            let joins: Vec<bool> = row.iter().map(|p| p.joins & level_bit(level) != 0).collect();
            // Not the separators between documents.
            let text_positions: Vec<usize> = (1..a_len - 1).chain(a_len..a_len + b.len()).filter(|&p| ids[p] != s.sep).collect();
            let real = ids.len();
            let labels = selection.apply(&mut ids, &joins, &text_positions, &mut rng);
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
#[path = "tests.rs"]
mod tests;
