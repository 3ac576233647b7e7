//! ELMo's biLM pretraining (bilm-tf): the word vocabulary, written as bilm-tf's vocab.txt
//! (`<S>`, `</S>`, `<UNK>`, then the words by falling frequency); the sentences of a text as
//! ELMo's words, in batches; and a fresh model's options.json and weights.

use std::collections::HashMap;

use tokenizers::models::wordlevel::{WordLevel, WordLevelTrainer};
use tokenizers::{AddedToken, Model, Trainer};

use super::data::{BatchSource, Draw, EpochSampler};
use crate::error::{arg_err, Result};
use crate::models::elmo::chars::split_words;
use crate::models::training::{Batch, SentenceBatch};

/// The special words, with ids 0, 1 and 2 as bilm-tf numbers them.
pub const SPECIAL_WORDS: [&str; 3] = ["<S>", "</S>", "<UNK>"];
const UNKNOWN_ID: u32 = 2;

/// How a line of text becomes words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WordSplit {
    /// ELMo's split of raw text ([`split_words`]: whitespace, and punctuation at the edges of
    /// a word), as its inference splits a visitor's text.
    #[default]
    Raw,
    /// Whitespace only: text already split into words (WikiText, whose `<unk>` and `@-@` stay
    /// single words).
    Pretokenized,
}

impl WordSplit {
    pub fn words(self, line: &str) -> Vec<String> {
        match self {
            WordSplit::Raw => split_words(line),
            WordSplit::Pretokenized => line.split_whitespace().map(String::from).collect(),
        }
    }
}

/// A word vocabulary: the biLM softmax's classes.
#[derive(Clone, Debug, PartialEq)]
pub struct WordVocab {
    words: Vec<String>,
    ids: HashMap<String, u32>,
}

impl WordVocab {
    /// At most `size` words learnt from `text` by the `tokenizers` WordLevel trainer: the
    /// special words, then the most frequent words of `split` (ties by spelling).
    pub fn train(text: &str, split: WordSplit, size: usize) -> Result<WordVocab> {
        let op = "word vocabulary";
        if size <= SPECIAL_WORDS.len() {
            return Err(arg_err!(op, "a vocabulary of {size} leaves no room for words beside {SPECIAL_WORDS:?}"));
        }
        let special = SPECIAL_WORDS.iter().map(|w| AddedToken::from(*w, true)).collect();
        let mut trainer = WordLevelTrainer::builder().vocab_size(size).special_tokens(special).show_progress(false).build().map_err(|e| arg_err!(op, "{e}"))?;
        let lines = text.lines().filter(|l| !l.trim().is_empty());
        trainer
            .feed(lines, |line| Ok(split.words(line).into_iter().filter(|w| !SPECIAL_WORDS.contains(&w.as_str())).collect()))
            .map_err(|e| arg_err!(op, "{e}"))?;
        let mut model = WordLevel::default();
        trainer.train(&mut model).map_err(|e| arg_err!(op, "{e}"))?;
        let mut by_id: Vec<(String, u32)> = model.get_vocab().into_iter().collect();
        by_id.sort_by_key(|&(_, id)| id);
        if by_id.len() == SPECIAL_WORDS.len() {
            return Err(arg_err!(op, "no words in the text to learn a vocabulary from"));
        }
        WordVocab::from_words(by_id.into_iter().map(|(word, _)| word).collect())
    }

    /// Reads bilm-tf's vocab.txt: one word per line (line i is id i), the special words first.
    pub fn from_vocab_txt(text: &str) -> Result<WordVocab> {
        let mut words: Vec<String> = text.lines().map(|l| l.trim().to_string()).collect();
        // Blank lines at the end number no word.
        while words.last().is_some_and(String::is_empty) {
            words.pop();
        }
        if let Some(line) = words.iter().position(String::is_empty) {
            return Err(arg_err!("vocab.txt", "line {} is blank; every line is one word (its id is the line number)", line + 1));
        }
        WordVocab::from_words(words)
    }

    fn from_words(words: Vec<String>) -> Result<WordVocab> {
        let op = "vocab.txt";
        if words.len() < SPECIAL_WORDS.len() || words[..SPECIAL_WORDS.len()] != SPECIAL_WORDS {
            return Err(arg_err!(op, "the first words must be {SPECIAL_WORDS:?} (bilm-tf's order), got {:?}", &words[..words.len().min(3)]));
        }
        let mut ids = HashMap::with_capacity(words.len());
        for (id, word) in words.iter().enumerate() {
            if ids.insert(word.clone(), id as u32).is_some() {
                return Err(arg_err!(op, "`{word}` appears twice"));
            }
        }
        Ok(WordVocab { words, ids })
    }

    /// The vocabulary as vocab.txt.
    pub fn to_vocab_txt(&self) -> String {
        self.words.iter().map(|w| format!("{w}\n")).collect()
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The id of `word`; `<UNK>`'s for a word outside the vocabulary.
    pub fn id(&self, word: &str) -> u32 {
        self.ids.get(word).copied().unwrap_or(UNKNOWN_ID)
    }

    /// The ids of `<S>` `words` `</S>`.
    pub fn targets(&self, words: &[String]) -> Vec<u32> {
        std::iter::once(0).chain(words.iter().map(|w| self.id(w))).chain(std::iter::once(1)).collect()
    }
}

/// Sentence-final words: a sentence is cut after them.
const SENTENCE_ENDS: [&str; 3] = [".", "!", "?"];

/// The sentences of `text`: every line split into words by `split`, cut after
/// sentence-final punctuation, and pieces longer than `max_words` cut into pieces of at most
/// that many.
pub fn sentences(text: &str, split: WordSplit, max_words: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut sentence = Vec::new();
        for word in split.words(line) {
            let ends = SENTENCE_ENDS.contains(&word.as_str());
            sentence.push(word);
            if ends || sentence.len() == max_words {
                out.push(std::mem::take(&mut sentence));
            }
        }
        if !sentence.is_empty() {
            out.push(sentence);
        }
    }
    out
}

/// The biLM's batches: sentences of a text with their word ids, drawn by an [`EpochSampler`].
pub struct SentenceCorpus {
    sentences: Vec<Vec<String>>,
    targets: Vec<Vec<u32>>,
    sampler: EpochSampler,
}

impl SentenceCorpus {
    /// The sentences of `text` (words by `split`, at most `max_words` each) in batches of
    /// `batch`, drawn as `draw` says.
    pub fn new(text: &str, split: WordSplit, vocab: &WordVocab, draw: impl Into<Draw>, batch: usize, max_words: usize) -> Result<SentenceCorpus> {
        if batch == 0 || max_words == 0 {
            return Err(arg_err!("data", "batch size and words per sentence must be positive (got {batch} × {max_words})"));
        }
        let sentences = sentences(text, split, max_words);
        if sentences.is_empty() {
            return Err(arg_err!("data", "the text holds no words"));
        }
        let targets = sentences.iter().map(|s| vocab.targets(s)).collect();
        let sampler = EpochSampler::new(sentences.len(), draw, batch);
        Ok(SentenceCorpus { sentences, targets, sampler })
    }

    /// How many sentences the text gave.
    pub fn sentence_count(&self) -> usize {
        self.sentences.len()
    }
}

impl BatchSource for SentenceCorpus {
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let sentences = SentenceBatch {
            sentences: picked.iter().map(|&i| self.sentences[i].clone()).collect(),
            targets: picked.iter().map(|&i| self.targets[i].clone()).collect(),
        };
        let seq = sentences.targets.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Batch { batch: picked.len(), seq, sentences: Some(sentences), ..Default::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "The cat sat on the mat . The dog sat !\n\nA cat ran , the dog ran ? the end\n";

    #[test]
    fn the_vocabulary_is_bilm_tf_ordered_and_round_trips_through_vocab_txt() {
        let vocab = WordVocab::train(TEXT, WordSplit::Raw, 100).unwrap();
        let txt = vocab.to_vocab_txt();
        let lines: Vec<&str> = txt.lines().collect();
        assert_eq!(lines[..6], ["<S>", "</S>", "<UNK>", "the", "The", "cat"], "special words, then by count (the: 3; The, cat, dog, ran, sat: 2) and bytes");
        assert_eq!(WordVocab::from_vocab_txt(&txt).unwrap(), vocab);
        assert_eq!(vocab.targets(&["the".into(), "zebra".into()]), vec![0, 3, 2, 1], "<S> the <UNK> </S>");
        let small = WordVocab::train(TEXT, WordSplit::Raw, 5).unwrap();
        assert_eq!(small.len(), 5);
        assert!(WordVocab::train(" \n", WordSplit::Raw, 10).is_err());
        assert!(WordVocab::train(TEXT, WordSplit::Raw, 3).is_err());
        assert!(WordVocab::from_vocab_txt("the\n<S>\n</S>\n").is_err(), "special words first");
        assert!(WordVocab::from_vocab_txt("<S>\n</S>\n<UNK>\nthe\nthe\n").is_err(), "duplicates");
        assert!(WordVocab::from_vocab_txt("<S>\n</S>\n<UNK>\n\nthe\n").is_err(), "a blank line would shift the ids");
        assert_eq!(WordVocab::from_vocab_txt(&format!("{txt}\n\n")).unwrap(), vocab, "blank lines at the end are no words");
    }

    #[test]
    fn text_becomes_sentences_cut_at_final_punctuation_and_length() {
        let s = sentences(TEXT, WordSplit::Raw, 4);
        let joined: Vec<String> = s.iter().map(|s| s.join(" ")).collect();
        assert_eq!(joined, ["The cat sat on", "the mat .", "The dog sat !", "A cat ran ,", "the dog ran ?", "the end"]);
        // WikiText's markup stays whole when the text is already split into words.
        let wiki = "In 1 @.@ 5 <unk> , it rose .";
        assert_eq!(sentences(wiki, WordSplit::Pretokenized, 40), [vec!["In", "1", "@.@", "5", "<unk>", ",", "it", "rose", "."]]);
        assert_eq!(sentences(wiki, WordSplit::Raw, 40)[0][..4], ["In", "1", "@", "."], "raw text: punctuation splits off");
    }

    #[test]
    fn sentence_batches_carry_words_and_boundary_wrapped_ids() {
        let vocab = WordVocab::train(TEXT, WordSplit::Raw, 100).unwrap();
        let train = SentenceCorpus::new(TEXT, WordSplit::Raw, &vocab, Some(7), 4, 10).unwrap();
        assert_eq!((train.sentence_count(), train.batches()), (4, None));
        let b = train.batch(3).unwrap();
        assert_eq!(b, SentenceCorpus::new(TEXT, WordSplit::Raw, &vocab, Some(7), 4, 10).unwrap().batch(3).unwrap(), "a function of (seed, index)");
        let s = b.sentences.as_ref().unwrap();
        assert_eq!(s.sentences.len(), 4);
        for (words, ids) in s.sentences.iter().zip(&s.targets) {
            assert_eq!(*ids, vocab.targets(words));
        }
        assert_eq!(b.tokens(), s.sentences.iter().map(|w| w.len() + 2).sum::<usize>());
        let held_out = SentenceCorpus::new(TEXT, WordSplit::Raw, &vocab, None, 3, 10).unwrap();
        assert_eq!(held_out.batches(), Some(2));
        assert_eq!(held_out.batch(1).unwrap().sentences.unwrap().sentences, vec![vec!["the".to_string(), "end".into()]], "the last of the 4 sentences");
        assert!(held_out.batch(2).is_err());
        assert!(SentenceCorpus::new(" \n", WordSplit::Raw, &vocab, None, 3, 10).is_err());
    }
}
