//! The tasks' batches, drawn from plain documents (see the module's documentation).

use rand::seq::{index, SliceRandom};
use rand::{rngs::StdRng, Rng};

use super::task::{order_class_offset, StructureTask, MAX_SEGMENTS};
use crate::error::{arg_err, Result};
use crate::models::training::{rng_for, Batch};
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tokenize::TextTokenizer;
use crate::train::data::BatchSource;
use crate::train::masking::knowledge::Document;
use crate::train::masking::{sentences, Specials};

/// The class of showing n = `order.len()` segments in `order` (position j shows segment
/// `order[j]`): [`order_class_offset`] + the order's lexicographic rank among the n!.
fn order_class(order: &[usize]) -> usize {
    let n = order.len();
    let rank = (0..n).fold(0, |rank, j| {
        // The Lehmer code: how many later segments come before order[j].
        let smaller = order[j + 1..].iter().filter(|&&o| o < order[j]).count();
        rank * (n - j) + smaller
    });
    order_class_offset(n) + rank
}

/// A sentence's token ids and, for capitalization, each token's label.
struct Sentence {
    ids: Vec<u32>,
    capitals: Vec<i64>,
}

/// Each token's capitalization label: 1 or 0 where the token starts a word with a capital or
/// small letter (its first character a letter after none, or after a character that is not a
/// letter or digit), −100 elsewhere. `offsets` are the tokens' character spans in `chars`.
fn capital_labels(chars: &[char], offsets: &[(usize, usize)]) -> Vec<i64> {
    offsets
        .iter()
        .map(|&(start, _)| {
            let first = chars.get(start).copied().filter(|c| c.is_alphabetic());
            let starts_word = start == 0 || !chars[start - 1].is_alphanumeric();
            match first {
                Some(c) if starts_word => c.is_uppercase() as i64,
                _ => DEFAULT_IGNORE_INDEX,
            }
        })
        .collect()
}

/// One ERNIE 2.0 task's batches from a corpus.
pub struct StructureTaskData {
    task: StructureTask,
    /// Documents → sentences.
    documents: Vec<Vec<Sentence>>,
    /// Every (document, sentence).
    all: Vec<(usize, usize)>,
    specials: Specials,
    seed: u64,
    batch: usize,
    seq: usize,
}

impl StructureTaskData {
    pub fn new(task: StructureTask, documents: &[Document], tokenizer: &TextTokenizer, seed: u64, batch: usize, seq: usize) -> Result<StructureTaskData> {
        let op = "ERNIE 2.0 task data";
        let specials = Specials::find(tokenizer, op)?;
        // [CLS], one [SEP] per segment and a token of each.
        let least = match task {
            StructureTask::Capitalization => 3,
            StructureTask::SentenceReordering => 1 + 2 * MAX_SEGMENTS,
            StructureTask::SentenceDistance => 5,
        };
        if batch == 0 || seq < least {
            return Err(arg_err!(op, "{task} needs a positive batch size and sequences of at least {least} tokens (got {batch} × {seq})"));
        }
        if task == StructureTask::Capitalization && tokenizer.encode("The", false)? != tokenizer.encode("the", false)? {
            return Err(arg_err!(
                op,
                "capitalization prediction needs a tokenizer that lowercases (an uncased vocabulary): this one keeps case, so the input would show the answer"
            ));
        }
        let mut tokenized = Vec::new();
        for document in documents {
            let mut sentences_of = Vec::new();
            for range in sentences(&document.text, &[]) {
                let text = &document.text[range];
                let encoded = tokenizer.encode_detailed(text, None)?;
                let text_tokens: Vec<usize> = (0..encoded.ids.len()).filter(|&i| !encoded.special[i]).collect();
                if text_tokens.is_empty() {
                    continue;
                }
                let ids = text_tokens.iter().map(|&i| encoded.ids[i]).collect();
                let capitals = if task == StructureTask::Capitalization {
                    let chars: Vec<char> = text.chars().collect();
                    let offsets: Vec<(usize, usize)> = text_tokens.iter().map(|&i| encoded.offsets[i]).collect();
                    capital_labels(&chars, &offsets)
                } else {
                    Vec::new()
                };
                sentences_of.push(Sentence { ids, capitals });
            }
            if !sentences_of.is_empty() {
                tokenized.push(sentences_of);
            }
        }
        let documents = tokenized;
        if documents.is_empty() {
            return Err(arg_err!(op, "{task}: the corpus holds no text"));
        }
        let all: Vec<(usize, usize)> = documents.iter().enumerate().flat_map(|(d, doc)| (0..doc.len()).map(move |s| (d, s))).collect();
        match task {
            StructureTask::Capitalization if documents.iter().flatten().all(|s| s.capitals.iter().all(|&l| l == DEFAULT_IGNORE_INDEX)) => {
                return Err(arg_err!(op, "{task}: the corpus has no word that starts with a letter"));
            }
            StructureTask::SentenceReordering if documents.iter().all(|d| d.len() < 2) => {
                return Err(arg_err!(op, "{task} splits paragraphs at sentence ends, and no document has two sentences"));
            }
            StructureTask::SentenceDistance if documents.len() < 2 || documents.iter().all(|d| d.len() < 3) => {
                return Err(arg_err!(
                    op,
                    "sentence distance pairs sentences of one document and of two: it needs two or more documents (separated by blank lines), one of three or more sentences"
                ));
            }
            _ => {}
        }
        Ok(StructureTaskData { task, documents, all, specials, seed, batch, seq })
    }

    /// Sentences of `document` from `first` on while they fit in `budget` tokens (the first
    /// always, however long: the caller cuts the row).
    fn paragraph(&self, document: usize, first: usize, budget: usize) -> Vec<&Sentence> {
        let mut out: Vec<&Sentence> = Vec::new();
        let mut len = 0;
        for sentence in &self.documents[document][first..] {
            if !out.is_empty() && len + sentence.ids.len() > budget {
                break;
            }
            len += sentence.ids.len();
            out.push(sentence);
        }
        out
    }

    /// A random sentence of `among`.
    fn start(&self, among: &[(usize, usize)], rng: &mut StdRng) -> (usize, usize) {
        among[rng.random_range(0..among.len())]
    }

    /// Capitalization: a paragraph's ids and labels, `[CLS] … [SEP]`.
    fn capitalization_row(&self, rng: &mut StdRng) -> (Vec<u32>, Vec<i64>) {
        let (document, first) = self.start(&self.all, rng);
        let budget = self.seq - 2;
        let (mut ids, mut labels) = (vec![self.specials.cls], vec![DEFAULT_IGNORE_INDEX]);
        for sentence in self.paragraph(document, first, budget) {
            ids.extend(&sentence.ids);
            labels.extend(&sentence.capitals);
        }
        ids.truncate(budget + 1);
        labels.truncate(budget + 1);
        ids.push(self.specials.sep);
        labels.push(DEFAULT_IGNORE_INDEX);
        (ids, labels)
    }

    /// Sentence reordering: a paragraph's segments in a random order, and its class.
    fn reordering_row(&self, rng: &mut StdRng) -> (Vec<u32>, i64) {
        let wanted = rng.random_range(1..=MAX_SEGMENTS);
        let (document, first) = self.start(&self.all, rng);
        let budget = self.seq - 1 - wanted;
        let paragraph = self.paragraph(document, first, budget);
        let n = wanted.min(paragraph.len());
        // Segment k holds sentences cuts[k]..cuts[k + 1]: n − 1 distinct cuts among the
        // paragraph's inner sentence ends.
        let mut cuts: Vec<usize> = index::sample(rng, paragraph.len() - 1, n - 1).into_iter().map(|c| c + 1).collect();
        cuts.sort_unstable();
        cuts.insert(0, 0);
        cuts.push(paragraph.len());
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(rng);
        let mut ids = vec![self.specials.cls];
        for &segment in &order {
            for sentence in &paragraph[cuts[segment]..cuts[segment + 1]] {
                ids.extend(&sentence.ids);
            }
            ids.push(self.specials.sep);
        }
        if ids.len() > self.seq {
            // One sentence longer than the budget (n = 1): cut before its [SEP].
            ids.truncate(self.seq - 1);
            ids.push(self.specials.sep);
        }
        (ids, order_class(&order) as i64)
    }

    /// Sentence distance: `[CLS] A [SEP] B [SEP]`, its token types and its class.
    fn distance_row(&self, rng: &mut StdRng) -> (Vec<u32>, Vec<u32>, i64) {
        let (document, a) = self.start(&self.all, rng);
        let sentences = self.documents[document].len();
        let far: Vec<usize> = (0..sentences).filter(|&t| t.abs_diff(a) >= 2).collect();
        // Another document is always possible (the corpus has two or more).
        let classes: Vec<i64> = [(a + 1 < sentences).then_some(0), (!far.is_empty()).then_some(1), Some(2)].into_iter().flatten().collect();
        let class = classes[rng.random_range(0..classes.len())];
        let (other, b) = match class {
            0 => (document, a + 1),
            1 => (document, far[rng.random_range(0..far.len())]),
            _ => {
                let mut o = rng.random_range(0..self.documents.len() - 1);
                if o >= document {
                    o += 1;
                }
                (o, rng.random_range(0..self.documents[o].len()))
            }
        };
        let mut first = self.documents[document][a].ids.clone();
        let mut second = self.documents[other][b].ids.clone();
        // The longer loses tokens from its end until the pair fits.
        while first.len() + second.len() > self.seq - 3 {
            let longer = if first.len() >= second.len() { &mut first } else { &mut second };
            longer.pop();
        }
        let (cls, sep) = (self.specials.cls, self.specials.sep);
        let types = std::iter::repeat_n(0, first.len() + 2).chain(std::iter::repeat_n(1, second.len() + 1)).collect();
        let ids = [&[cls][..], &first, &[sep], &second, &[sep]].concat();
        (ids, types, class)
    }
}

impl BatchSource for StructureTaskData {
    fn batches(&self) -> Option<usize> {
        None
    }

    /// Rows padded to the batch's longest (label −100 at the padding of capitalization).
    fn batch(&self, index: u64) -> Result<Batch> {
        let mut rng = rng_for(self.seed, index);
        let (mut rows, mut labels, mut types) = (Vec::with_capacity(self.batch), Vec::new(), Vec::new());
        for _ in 0..self.batch {
            match self.task {
                StructureTask::Capitalization => {
                    let (ids, row_labels) = self.capitalization_row(&mut rng);
                    rows.push(ids);
                    labels.push(row_labels);
                }
                StructureTask::SentenceReordering => {
                    let (ids, class) = self.reordering_row(&mut rng);
                    rows.push(ids);
                    labels.push(vec![class]);
                }
                StructureTask::SentenceDistance => {
                    let (ids, row_types, class) = self.distance_row(&mut rng);
                    rows.push(ids);
                    types.push(row_types);
                    labels.push(vec![class]);
                }
            }
        }
        let views: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
        let mut out = Batch::padded(&views, self.specials.pad);
        let seq = out.seq;
        out.labels = match self.task {
            StructureTask::Capitalization => labels.iter().flat_map(|l| l.iter().copied().chain(std::iter::repeat(DEFAULT_IGNORE_INDEX)).take(seq)).collect(),
            _ => labels.concat(),
        };
        if !types.is_empty() {
            out.token_type_ids = Some(types.iter().flat_map(|t| t.iter().copied().chain(std::iter::repeat(0)).take(seq)).collect());
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
