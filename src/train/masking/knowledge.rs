//! Where ERNIE's knowledge masking (Sun et al. 2019, §3.2) finds the phrases and entities it
//! masks whole: span annotations in the data, or — when a document has none — a built-in
//! chunker for phrases and a gazetteer file for entities. Chinese text is cut into words by a
//! segmenter (jieba), which both whole-word masking and the phrase level use over BERT's
//! character tokens.
//!
//! Annotated data is JSON lines, one document per line:
//! `{"text": "Barack Obama visited Paris.", "entities": [[0, 12], [21, 26]], "phrases": [[0, 12]]}`.
//! Spans are `[start, end)` in characters (Unicode scalar values — what Python's `str` indexes),
//! both lists optional; spans of one kind must not overlap.

use std::ops::Range;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::error::{arg_err, Result};

const OP: &str = "knowledge masking";

/// One document of the corpus, with the spans that were annotated in it (byte ranges of
/// `text`, sorted, none overlapping another of its kind). None: not annotated, so found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document {
    pub text: String,
    pub phrases: Option<Vec<Range<usize>>>,
    pub entities: Option<Vec<Range<usize>>>,
}

/// Plain text: documents separated by blank lines, no annotations.
pub fn plain_documents(text: &str) -> Vec<Document> {
    let mut documents = Vec::new();
    let mut lines = text.lines().peekable();
    while lines.peek().is_some() {
        let block: Vec<&str> = lines.by_ref().take_while(|l| !l.trim().is_empty()).collect();
        if !block.is_empty() {
            documents.push(Document { text: block.join("\n"), ..Default::default() });
        }
    }
    documents
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AnnotatedLine {
    text: String,
    #[serde(default)]
    phrases: Option<Vec<[usize; 2]>>,
    #[serde(default)]
    entities: Option<Vec<[usize; 2]>>,
}

/// Documents from JSON lines (see the module's doc); blank lines are skipped. A span outside
/// its text, empty, or overlapping another of its kind is refused, naming the line.
pub fn annotated_documents(jsonl: &str) -> Result<Vec<Document>> {
    let mut documents = Vec::new();
    for (number, line) in jsonl.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: AnnotatedLine = serde_json::from_str(line).map_err(|e| arg_err!(OP, "line {number} of the annotated data: {e}"))?;
        // Byte offset of every character boundary: chars[i] is where character i starts.
        let chars: Vec<usize> = parsed.text.char_indices().map(|(b, _)| b).chain([parsed.text.len()]).collect();
        let spans = |kind: &str, spans: Option<Vec<[usize; 2]>>| -> Result<Option<Vec<Range<usize>>>> {
            let Some(mut spans) = spans else { return Ok(None) };
            spans.sort_unstable();
            let count = chars.len() - 1;
            for (i, &[start, end]) in spans.iter().enumerate() {
                if start >= end || end > count {
                    return Err(arg_err!(OP, "line {number}: the {kind} span [{start}, {end}] is not within the text's {count} characters"));
                }
                if let Some(&[previous_start, previous_end]) = i.checked_sub(1).map(|j| &spans[j]) {
                    if previous_end > start {
                        return Err(arg_err!(OP, "line {number}: the {kind} spans [{previous_start}, {previous_end}] and [{start}, {end}] overlap"));
                    }
                }
            }
            Ok(Some(spans.iter().map(|&[start, end]| chars[start]..chars[end]).collect()))
        };
        let phrases = spans("phrase", parsed.phrases)?;
        let entities = spans("entity", parsed.entities)?;
        if !parsed.text.trim().is_empty() {
            documents.push(Document { text: parsed.text, phrases, entities });
        }
    }
    Ok(documents)
}

/// Entity names, one per line (blank lines and lines starting with `#` skipped), found in text
/// case-sensitively, longest first, as whole words.
pub struct Gazetteer {
    matcher: AhoCorasick,
    entries: usize,
}

impl Gazetteer {
    pub fn new(text: &str) -> Result<Gazetteer> {
        let names: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
        if names.is_empty() {
            return Err(arg_err!(OP, "the gazetteer holds no entity names (one per line)"));
        }
        let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&names).map_err(|e| arg_err!(OP, "the gazetteer: {e}"))?;
        Ok(Gazetteer { matcher, entries: names.len() })
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The byte ranges of `text` that name an entry, sorted and apart.
    pub fn find(&self, text: &str) -> Vec<Range<usize>> {
        self.matcher.find_iter(text).map(|m| m.range()).filter(|r| whole_words(text, r)).collect()
    }
}

/// Han characters, which Chinese writes without spaces between words (the ranges BERT's
/// tokenizer splits into single-character tokens).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// `range` of `text` neither starts nor ends inside a word (Han characters are words of their own).
fn whole_words(text: &str, range: &Range<usize>) -> bool {
    let joined = |a: Option<char>, b: Option<char>| match (a, b) {
        (Some(a), Some(b)) => a.is_alphanumeric() && b.is_alphanumeric() && !is_cjk(a) && !is_cjk(b),
        _ => false,
    };
    !joined(text[..range.start].chars().next_back(), text[range.clone()].chars().next())
        && !joined(text[range.clone()].chars().next_back(), text[range.end..].chars().next())
}

/// The words jieba cuts Chinese runs of `text` into, as byte ranges — words of two or more
/// characters only (a single character is a token already). In a browser, jieba (whose
/// dictionary does not build for wasm32) is not there: text with Chinese in it is an error.
#[cfg(target_arch = "wasm32")]
pub fn chinese_words(text: &str) -> Result<Vec<Range<usize>>> {
    match text.chars().any(is_cjk) {
        true => Err(arg_err!(
            "masked LM",
            "Chinese words are cut by jieba, which the browser build leaves out: mask Chinese text by characters (no --whole-word-mask, no phrase level), or train natively"
        )),
        false => Ok(Vec::new()),
    }
}

/// The words jieba cuts Chinese runs of `text` into, as byte ranges — words of two or more
/// characters only (a single character is a token already).
#[cfg(not(target_arch = "wasm32"))]
pub fn chinese_words(text: &str) -> Result<Vec<Range<usize>>> {
    static JIEBA: OnceLock<jieba_rs::Jieba> = OnceLock::new();
    let mut words = Vec::new();
    let mut rest = text.char_indices().peekable();
    while let Some((start, c)) = rest.next() {
        if !is_cjk(c) {
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(b, c)) = rest.peek().filter(|(_, c)| is_cjk(*c)) {
            end = b + c.len_utf8();
            rest.next();
        }
        let run = &text[start..end];
        let jieba = JIEBA.get_or_init(jieba_rs::Jieba::new);
        for token in jieba.cut(run, true) {
            if token.word.chars().nth(1).is_some() {
                let at = start + (token.word.as_ptr() as usize - run.as_ptr() as usize);
                words.push(at..at + token.word.len());
            }
        }
    }
    Ok(words)
}

/// Function words the chunker breaks phrases at.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "either",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "neither",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "upon",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// The longest phrase the chunker forms; longer runs are cut into phrases of this many words.
pub const MAX_PHRASE_WORDS: usize = 4;

/// A stop-word chunker (RAKE's candidate phrases, Rose et al. 2010): phrases are runs of two
/// or more words (letters and digits, with inner `'` or `-`) that no function word, punctuation
/// or Han character interrupts, cut at [`MAX_PHRASE_WORDS`]. Byte ranges, sorted and apart.
pub fn chunk_phrases(text: &str) -> Vec<Range<usize>> {
    let mut phrases = Vec::new();
    let mut run: Vec<Range<usize>> = Vec::new();
    let mut close = |run: &mut Vec<Range<usize>>| {
        for words in run.chunks(MAX_PHRASE_WORDS).filter(|w| w.len() >= 2) {
            phrases.push(words[0].start..words[words.len() - 1].end);
        }
        run.clear();
    };
    let mut chars = text.char_indices().peekable();
    let word_char = |c: char| c.is_alphanumeric() && !is_cjk(c);
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if !word_char(c) {
            close(&mut run);
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(b, c)) = chars.peek() {
            let inner = matches!(c, '\'' | '-') && text[b + 1..].chars().next().is_some_and(word_char);
            if !(word_char(c) || inner) {
                break;
            }
            end = b + c.len_utf8();
            chars.next();
        }
        let word = &text[start..end];
        if STOP_WORDS.iter().any(|s| s.eq_ignore_ascii_case(word)) {
            close(&mut run);
        } else {
            run.push(start..end);
        }
    }
    close(&mut run);
    phrases
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(text: &'a str, ranges: &[Range<usize>]) -> Vec<&'a str> {
        ranges.iter().map(|r| &text[r.clone()]).collect()
    }

    #[test]
    fn plain_documents_are_separated_by_blank_lines() {
        let documents = plain_documents("a b.\nc d.\n\n\n  \ne f.\n");
        assert_eq!(documents.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(), vec!["a b.\nc d.", "e f."]);
        assert!(documents.iter().all(|d| d.phrases.is_none() && d.entities.is_none()));
    }

    #[test]
    fn annotations_are_character_spans_turned_into_byte_ranges() {
        let jsonl = "{\"text\": \"Zoë met Barack Obama in Paris.\", \"entities\": [[24, 29], [8, 20]], \"phrases\": [[0, 3]]}\n\n{\"text\": \"no spans\"}\n";
        let documents = annotated_documents(jsonl).unwrap();
        assert_eq!(documents.len(), 2);
        let first = &documents[0];
        assert_eq!(texts(&first.text, first.entities.as_ref().unwrap()), vec!["Barack Obama", "Paris"]);
        assert_eq!(texts(&first.text, first.phrases.as_ref().unwrap()), vec!["Zoë"]);
        assert_eq!((&documents[1].phrases, &documents[1].entities), (&None, &None));
    }

    #[test]
    fn bad_annotations_are_refused_naming_the_line_and_span() {
        let refused = |jsonl: &str| annotated_documents(jsonl).err().unwrap().to_string();
        let err = refused("{\"text\": \"abc\"}\n{\"text\": \"abc\", \"entities\": [[1, 4]]}");
        assert!(err.contains("line 2") && err.contains("[1, 4]") && err.contains("3 characters"), "{err}");
        let err = refused("{\"text\": \"abcdef\", \"phrases\": [[0, 3], [2, 5]]}");
        assert!(err.contains("[0, 3] and [2, 5] overlap"), "{err}");
        let err = refused("{\"text\": \"abc\", \"entities\": [[2, 2]]}");
        assert!(err.contains("[2, 2]"), "{err}");
        let err = refused("{\"text\": \"abc\", \"entites\": []}");
        assert!(err.contains("line 1") && err.contains("entites"), "{err}");
        let err = refused("not json");
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn the_gazetteer_finds_whole_names_longest_first() {
        let gazetteer = Gazetteer::new("# places\nParis\nNew York\nNew York City\n\nYork\n北京\n").unwrap();
        assert_eq!(gazetteer.len(), 5);
        let text = "From New York City to Paris, not Parisian York-ish places; 我爱北京。";
        assert_eq!(texts(text, &gazetteer.find(text)), vec!["New York City", "Paris", "York", "北京"]);
        let err = Gazetteer::new("\n# nothing\n").err().unwrap().to_string();
        assert!(err.contains("no entity names"), "{err}");
    }

    #[test]
    fn the_chunker_takes_runs_of_content_words() {
        let text = "The quick brown fox jumped over the lazy dog, and the state-of-the-art model's big new shiny red car.";
        assert_eq!(texts(text, &chunk_phrases(text)), vec!["quick brown fox jumped", "lazy dog", "state-of-the-art model's big new", "shiny red car"]);
        assert!(chunk_phrases("a cat. the dog").is_empty(), "single words are not phrases");
    }

    #[test]
    fn chinese_runs_are_cut_into_words() {
        let text = "我们在北京大学学习 machine learning。";
        let words = texts(text, &chinese_words(text).unwrap());
        assert!(words.contains(&"北京大学") || words.contains(&"北京"), "{words:?}");
        assert!(words.iter().all(|w| w.chars().count() >= 2 && w.chars().all(is_cjk)), "{words:?}");
        assert!(chinese_words("no han here").unwrap().is_empty());
    }
}
