//! Word-level vocabularies (fastai's `itos`, GloVe's words, class names) and the tokenizer.json
//! that looks their words up whole.

use super::{tokenizer_err, TextTokenizer};
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

/// What [`word_level_tokenizer_json`] builds.
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
}

/// tokenizer.json of a word-level vocabulary (fastai's, GloVe's): text split into words and
/// runs of punctuation (`Whitespace`), each looked up whole. The result loads here and in any
/// Hugging Face `tokenizers`.
pub fn word_level_tokenizer_json(spec: &WordLevelSpec) -> Result<Vec<u8>> {
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
    let bos = match spec.bos {
        Some(bos) => Some((bos, id(bos).ok_or_else(|| tokenizer_err("the vocabulary", format!("has no {bos}")))?)),
        None => None,
    };
    let post_processor = bos.map(|(bos, bos_id)| {
        let special = json!({"SpecialToken": {"id": bos, "type_id": 0}});
        json!({
            "type": "TemplateProcessing",
            "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [special, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        })
    });
    let mut model = json!({"type": "WordLevel", "vocab": vocab});
    if let Some(unk) = spec.unk {
        id(unk).ok_or_else(|| tokenizer_err("the vocabulary", format!("has no {unk}")))?;
        model["unk_token"] = json!(unk);
    }
    let mut normalizers: Vec<serde_json::Value> =
        spec.replacements.iter().map(|(from, to)| json!({"type": "Replace", "pattern": {"String": from}, "content": to})).collect();
    if spec.lowercase {
        normalizers.push(json!({"type": "Lowercase"}));
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
    let bytes = serde_json::to_vec(&tokenizer).map_err(|e| tokenizer_err("tokenizer.json", e))?;
    // What a model folder's loader will read must load.
    TextTokenizer::from_bytes(&bytes)?;
    Ok(bytes)
}
