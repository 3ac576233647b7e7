//! Word-level vocabularies (fastai's `itos`, GloVe's words, class names) and the tokenizer.json
//! that looks their words up whole.

use tokenizers::models::wordlevel::{WordLevel, WordLevelTrainer};
use tokenizers::{AddedToken, Model, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer, Trainer};

use super::{tokenizer_err, tokenizer_failed, TextTokenizer};
use crate::error::Result;

/// A list of words (a vocabulary, class names): one a line, or a JSON list of strings. Empty
/// and repeated entries are errors (a word-level tokenizer maps each word to one id), except
/// those in `repeatable` (fillers that are never produced).
pub fn read_word_list(bytes: &[u8], repeatable: &[&str]) -> Result<Vec<String>> {
    let text = std::str::from_utf8(bytes).map_err(|e| tokenizer_err("the list", format!("is not UTF-8: {e}")))?;
    let words: Vec<String> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).map_err(|e| tokenizer_err("the list", format!("is not a JSON list of strings: {e}")))?
    } else {
        text.strip_suffix('\n').unwrap_or(text).split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line).to_string()).collect()
    };
    let mut seen = std::collections::HashMap::with_capacity(words.len());
    for (id, word) in words.iter().enumerate() {
        if word.is_empty() {
            return Err(tokenizer_err("the list", format!("entry {id} is empty")));
        }
        if repeatable.contains(&word.as_str()) {
            continue;
        }
        if let Some(first) = seen.insert(word.as_str(), id) {
            return Err(tokenizer_err("the list", format!("has `{word}` twice (entries {first} and {id})")));
        }
    }
    Ok(words)
}

/// What [`word_level_tokenizer_json`] builds (`Default`: no words, no unknown token, nothing
/// special, no normalization, `Whitespace`'s pieces).
#[derive(Default)]
pub struct WordLevelSpec<'a> {
    /// The words by id (a repeated word keeps its first id).
    pub vocab: &'a [String],
    /// The word out-of-vocabulary words become (else they are an error naming them).
    pub unk: Option<&'a str>,
    /// Tokens matched whole before any splitting (those in `vocab`).
    pub special: &'a [&'a str],
    pub lowercase: bool,
    /// Literal replacements made before lower-casing and splitting (fastai's: WikiText's
    /// `<unk>` → `xxunk`, ` @-@ ` → `-`).
    pub replacements: &'a [(&'a str, &'a str)],
    /// The pieces words are (a regular expression matching each); default `Whitespace`'s
    /// `\w+|[^\w\s]+`.
    pub pattern: Option<&'a str>,
    /// A token put before every text.
    pub bos: Option<&'a str>,
    /// A token put after every text.
    pub eos: Option<&'a str>,
    /// Every digit read as 0 (cvt_text's word normalisation), after lower-casing.
    pub digits_to_zero: bool,
}

/// tokenizer.json of a word-level vocabulary (fastai's, GloVe's): text split into words and
/// runs of punctuation (`Whitespace`), each looked up whole. The result loads here and in any
/// Hugging Face `tokenizers`.
pub fn word_level_tokenizer_json<'a>(spec: &WordLevelSpec<'a>) -> Result<Vec<u8>> {
    use serde_json::json;
    let mut vocab = serde_json::Map::with_capacity(spec.vocab.len());
    for (id, word) in spec.vocab.iter().enumerate() {
        vocab.entry(word.clone()).or_insert(json!(id));
    }
    let id = |token: &str| spec.vocab.iter().position(|t| t == token);
    let added_tokens: Vec<serde_json::Value> = spec
        .special
        .iter()
        .filter_map(|&token| id(token).map(|id| (token, id)))
        .map(|(token, id)| json!({"id": id, "content": token, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
        .collect();
    let boundary = |token: Option<&'a str>| -> Result<Option<(&'a str, usize)>> {
        token.map(|t| Ok((t, id(t).ok_or_else(|| tokenizer_err("the vocabulary", format!("has no {t}")))?))).transpose()
    };
    let (bos, eos) = (boundary(spec.bos)?, boundary(spec.eos)?);
    let post_processor = (bos.is_some() || eos.is_some()).then(|| {
        let special = |(token, _): (&str, usize)| json!({"SpecialToken": {"id": token, "type_id": 0}});
        let (a, b) = (json!({"Sequence": {"id": "A", "type_id": 0}}), json!({"Sequence": {"id": "B", "type_id": 1}}));
        let single: Vec<serde_json::Value> = bos.map(special).into_iter().chain([a.clone()]).chain(eos.map(special)).collect();
        let pair: Vec<serde_json::Value> = bos.map(special).into_iter().chain([a, b]).chain(eos.map(special)).collect();
        let tokens: serde_json::Map<String, serde_json::Value> =
            bos.into_iter().chain(eos).map(|(token, id)| (token.to_string(), json!({"id": token, "ids": [id], "tokens": [token]}))).collect();
        json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": tokens})
    });
    // `tokenizers` requires an unknown token; without one, a name the vocabulary lacks, so that
    // a word it lacks is an error (which `encode` turns into one naming the words).
    let unk = match spec.unk {
        Some(unk) => {
            id(unk).ok_or_else(|| tokenizer_err("the vocabulary", format!("has no {unk}")))?;
            unk.to_string()
        }
        None => std::iter::successors(Some("<unk>".to_string()), |name| Some(format!("<{name}>"))).find(|name| id(name).is_none()).unwrap_or_default(),
    };
    let model = json!({"type": "WordLevel", "vocab": vocab, "unk_token": unk});
    let mut normalizers: Vec<serde_json::Value> =
        spec.replacements.iter().map(|(from, to)| json!({"type": "Replace", "pattern": {"String": from}, "content": to})).collect();
    if spec.lowercase {
        normalizers.push(json!({"type": "Lowercase"}));
    }
    if spec.digits_to_zero {
        normalizers.push(json!({"type": "Replace", "pattern": {"Regex": "\\d"}, "content": "0"}));
    }
    let normalizer = match normalizers.len() {
        0 => json!(null),
        1 => normalizers.remove(0),
        _ => json!({"type": "Sequence", "normalizers": normalizers}),
    };
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": match spec.pattern {
            Some(pattern) => json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Removed", "invert": true}),
            None => json!({"type": "Whitespace"}),
        },
        "post_processor": post_processor,
        "decoder": null,
        "model": model,
    });
    let bytes = serde_json::to_vec(&tokenizer).map_err(|e| tokenizer_failed("tokenizer.json", e))?;
    // What a model folder's loader will read must load.
    TextTokenizer::from_bytes(&bytes)?;
    Ok(bytes)
}

/// A vocabulary of at most `size` learnt from `lines` (blank ones skipped): `specials` first,
/// then the most frequent words as `template` (a word-level tokenizer.json) normalises and
/// splits them; the specials are not counted as words where the text holds them.
pub fn learn_vocabulary(template: &[u8], lines: impl Iterator<Item = String>, size: usize, specials: &[&str]) -> Result<Vec<String>> {
    let op = "word vocabulary";
    if size <= specials.len() {
        return Err(tokenizer_err(op, format!("of {size} leaves no room for words beside its {} special tokens", specials.len())));
    }
    let tokenizer = tokenizers::Tokenizer::from_bytes(template).map_err(|e| tokenizer_failed(op, e))?;
    let words_of = |line: &str| -> tokenizers::Result<Vec<String>> {
        let mut pieces = PreTokenizedString::from(line);
        if let Some(normalizer) = tokenizer.get_normalizer() {
            pieces.normalize(|s| normalizer.normalize(s))?;
        }
        if let Some(split) = tokenizer.get_pre_tokenizer() {
            split.pre_tokenize(&mut pieces)?;
        }
        let words = pieces.get_splits(OffsetReferential::Original, OffsetType::Byte).into_iter().map(|(word, _, _)| word.to_string());
        Ok(words.filter(|w| !specials.contains(&w.as_str())).collect())
    };
    let mut trainer = WordLevelTrainer::builder()
        .vocab_size(size)
        .special_tokens(specials.iter().map(|t| AddedToken::from(*t, true)).collect())
        .show_progress(false)
        .build()
        .map_err(|e| tokenizer_failed(op, e))?;
    let lines: Vec<String> = lines.filter(|l| !l.trim().is_empty()).collect();
    trainer.feed(lines.iter().map(String::as_str), words_of).map_err(|e| tokenizer_failed(op, e))?;
    let mut model = WordLevel::default();
    trainer.train(&mut model).map_err(|e| tokenizer_failed(op, e))?;
    let mut by_id: Vec<(String, u32)> = model.get_vocab().into_iter().collect();
    by_id.sort_by_key(|&(_, id)| id);
    if by_id.len() <= specials.len() {
        return Err(tokenizer_err(op, "no words in the text to learn a vocabulary from"));
    }
    Ok(by_id.into_iter().map(|(word, _)| word).collect())
}
