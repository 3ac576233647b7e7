//! The text formats training data comes in, parsed: CoNLL-style tagged words (token
//! classification, CVT) and tab-separated sentence pairs (translation). Both the trainer's
//! batch sources and the families that learn a fresh model's vocabulary from the data read them.

use crate::error::{arg_err, Result};

const CONLL: &str = "token-classification data";
const TSV_PAIRS: &str = "translation data";

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
            [_] => return Err(arg_err!(CONLL, "line {}: expected `word … label`, got {line:?}", number + 1)),
        }
    }
    sentences.extend((!sentence.is_empty()).then_some(sentence));
    if sentences.is_empty() {
        return Err(arg_err!(CONLL, "no labelled words"));
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

/// The pairs of a TSV, one `source<TAB>target` a line (blank lines and a `source<TAB>target`
/// header skipped); a line without exactly one tab, or with an empty side, is an error
/// naming it.
pub fn tsv_pairs(text: &str) -> Result<Vec<(&str, &str)>> {
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || (i == 0 && line.trim().eq_ignore_ascii_case("source\ttarget")) {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [source, target] = fields[..] else {
            return Err(arg_err!(TSV_PAIRS, "line {} has {} tab-separated fields; each line is source<TAB>target", i + 1, fields.len()));
        };
        for (side, words) in [("source", source), ("target", target)] {
            if words.trim().is_empty() {
                return Err(arg_err!(TSV_PAIRS, "line {} has an empty {side} sentence", i + 1));
            }
        }
        pairs.push((source, target));
    }
    if pairs.is_empty() {
        return Err(arg_err!(TSV_PAIRS, "no sentence pairs (each line is source<TAB>target)"));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_and_bad_lines_named() {
        assert_eq!(tsv_pairs("a b\tx y\n\nc\tz\n").unwrap(), [("a b", "x y"), ("c", "z")]);
        assert_eq!(tsv_pairs("Source\tTarget\na\tb\n").unwrap(), [("a", "b")]);
        let err = |text: &str| tsv_pairs(text).unwrap_err().to_string();
        assert!(err("a\tb\nc d\n").contains("line 2 has 1 tab-separated fields"), "{}", err("a\tb\nc d\n"));
        assert!(err("a\tb\tc\n").contains("line 1 has 3"));
        assert!(err("a\t \n").contains("line 1 has an empty target"));
        assert!(err("\n\n").contains("no sentence pairs"));
    }
}
