//! Text → ids through Hugging Face `tokenizers` (the same code natively and in wasm).

use crate::error::{Result, SesameError};

/// A Hugging Face tokenizer loaded from `tokenizer.json`.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
}

fn tokenizer_err(what: &str, e: impl std::fmt::Display) -> SesameError {
    SesameError::Tokenizer(format!("{what}: {e}"))
}

impl TextTokenizer {
    /// Parses the contents of a `tokenizer.json`.
    pub fn from_bytes(json: &[u8]) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_bytes(json).map_err(|e| tokenizer_err("invalid tokenizer.json", e))?;
        Ok(TextTokenizer { inner })
    }

    /// Ids of `text`, with the model's special tokens ([CLS] … [SEP]) when asked for.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, add_special_tokens).map_err(|e| tokenizer_err("encoding failed", e))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(|e| tokenizer_err("decoding failed", e))
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal WordLevel tokenizer.json with whitespace pre-tokenization.
    const WORD_LEVEL: &str = r#"{
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "!": 3}, "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn encodes_and_decodes_with_a_tokenizer_json() {
        let tok = TextTokenizer::from_bytes(WORD_LEVEL.as_bytes()).unwrap();
        assert_eq!(tok.encode("hello world !", false).unwrap(), vec![1, 2, 3]);
        assert_eq!(tok.encode("hello moon", false).unwrap(), vec![1, 0]);
        assert_eq!(tok.decode(&[1, 2], false).unwrap(), "hello world");
        assert_eq!(tok.vocab_size(), 4);
    }

    #[test]
    fn malformed_json_is_an_error() {
        let err = TextTokenizer::from_bytes(b"{\"model\": 5").err().unwrap().to_string();
        assert!(err.contains("invalid tokenizer.json"), "{err}");
    }
}
