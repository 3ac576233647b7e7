//! Tokenizers for fresh models, built from the training text: one token per character
//! (nanoGPT's `shakespeare_char`), BERT's uncased WordPiece, or GPT-2's byte-level BPE — the
//! last two trained by the Hugging Face `tokenizers` trainers. Each comes out as the
//! tokenizer.json a model folder ships.

use std::collections::BTreeSet;
use std::path::Path;

use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainerBuilder};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{arg_err, Result, SesameError};
use crate::files::Files;

/// BERT's special tokens, in the order they get ids 0..5 (`[PAD]` = 0, BERT's padding id).
pub const WORDPIECE_SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
/// GPT-2's one special token (id 0 here; the 50,256th in OpenAI's vocabulary).
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Which tokenizer a fresh model gets (`--tokenizer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenizerSpec {
    /// `char`: one token per distinct character of the text.
    Char,
    /// `wordpiece:N`: BERT's uncased WordPiece with a vocabulary of at most N.
    WordPiece(usize),
    /// `bpe:N`: GPT-2's byte-level BPE with a vocabulary of at most N.
    ByteLevelBpe(usize),
    /// A tokenizer.json file.
    File(std::path::PathBuf),
}

impl TokenizerSpec {
    /// The spec `s` names: a tokenizer to train, or a tokenizer.json file among `files`.
    pub fn parse(s: &str, files: &dyn Files) -> Result<TokenizerSpec> {
        let size =
            |n: &str| n.parse::<usize>().ok().filter(|&n| n >= 256).ok_or_else(|| arg_err!("tokenizer", "`{s}`: the vocabulary size must be a number ≥ 256"));
        Ok(match s.split_once(':') {
            None if s == "char" => TokenizerSpec::Char,
            Some(("wordpiece", n)) => TokenizerSpec::WordPiece(size(n)?),
            Some(("bpe", n)) => TokenizerSpec::ByteLevelBpe(size(n)?),
            // A spec's name without its size is a mistake, not a file name.
            None if matches!(s, "wordpiece" | "bpe" | "words") => return Err(arg_err!("tokenizer", "`{s}` needs a vocabulary size: `{s}:N`")),
            _ if files.is_file(Path::new(s)) => TokenizerSpec::File(s.into()),
            _ => return Err(arg_err!("tokenizer", "`{s}` is neither a tokenizer (char, wordpiece:N, bpe:N; an ELMo's words:N) nor a tokenizer.json file")),
        })
    }

    /// The tokenizer.json this spec gives: read from `files`, or trained on `text`.
    pub fn build(&self, files: &dyn Files, text: &str) -> Result<Vec<u8>> {
        match self {
            TokenizerSpec::Char => char_tokenizer_json(text),
            TokenizerSpec::WordPiece(n) => wordpiece_tokenizer_json(text, *n),
            TokenizerSpec::ByteLevelBpe(n) => byte_level_bpe_tokenizer_json(text, *n),
            TokenizerSpec::File(path) => files.read(path),
        }
    }
}

/// tokenizer.json of a character-level tokenizer over the characters of `text` (sorted, one
/// id each, as nanoGPT's `shakespeare_char` builds its vocabulary): every character is one
/// token, and decoding joins them back.
pub fn char_tokenizer_json(text: &str) -> Result<Vec<u8>> {
    let chars: BTreeSet<char> = text.chars().collect();
    if chars.is_empty() {
        return Err(arg_err!("tokenizer", "no text to build a character vocabulary from"));
    }
    let vocab: serde_json::Map<String, serde_json::Value> = chars.iter().enumerate().map(|(id, c)| (c.to_string(), id.into())).collect();
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        // `[\s\S]`: any character, newlines included, in every regex engine that reads
        // tokenizer.json (Rust's fancy-regex, Python's Oniguruma, JavaScript), unlike `(?s).`.
        "pre_tokenizer": { "type": "Split", "pattern": { "Regex": "[\\s\\S]" }, "behavior": "Isolated", "invert": false },
        "post_processor": null,
        "decoder": { "type": "Fuse" },
        "model": { "type": "WordLevel", "vocab": vocab, "unk_token": "<unk>" },
    });
    serde_json::to_vec_pretty(&json).map_err(|e| SesameError::Io(format!("tokenizer.json: {e}")))
}

/// tokenizer.json of BERT's uncased WordPiece (lowercasing, accent stripping, splitting on
/// whitespace and punctuation, `##` continuations, `[CLS] A [SEP] B [SEP]` when adding special
/// tokens) with a vocabulary of at most `vocab_size` learnt from `text`.
pub fn wordpiece_tokenizer_json(text: &str, vocab_size: usize) -> Result<Vec<u8>> {
    let special: Vec<AddedToken> = WORDPIECE_SPECIAL_TOKENS.iter().map(|t| AddedToken::from(*t, true)).collect();
    let trainer = WordPieceTrainerBuilder::new().vocab_size(vocab_size).min_frequency(2).special_tokens(special).show_progress(false).build();
    let mut tokenizer = Tokenizer::new(WordPiece::builder().unk_token("[UNK]".into()).build().map_err(tokenizer_err)?);
    tokenizer.with_normalizer(Some(BertNormalizer::default())).map_err(tokenizer_err)?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_decoder(Some(WordPieceDecoder::default()));
    train(&mut tokenizer, trainer.into(), text)?;
    let id = |t: &str| tokenizer.token_to_id(t).ok_or_else(|| arg_err!("tokenizer", "the trained vocabulary lacks {t}"));
    let processor = BertProcessing::new(("[SEP]".into(), id("[SEP]")?), ("[CLS]".into(), id("[CLS]")?));
    tokenizer.with_post_processor(Some(processor));
    to_json(&tokenizer)
}

/// tokenizer.json of GPT-2's byte-level BPE (every byte a base token, so no text is out of
/// vocabulary; no prefix space; <|endoftext|> special) with at most `vocab_size` tokens
/// learnt from `text`.
pub fn byte_level_bpe_tokenizer_json(text: &str, vocab_size: usize) -> Result<Vec<u8>> {
    let alphabet = ByteLevel::alphabet().into_iter().collect();
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .special_tokens(vec![AddedToken::from(END_OF_TEXT, true)])
        .initial_alphabet(alphabet)
        .show_progress(false)
        .build();
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_post_processor(Some(ByteLevel::new(false, true, true)));
    train(&mut tokenizer, trainer.into(), text)?;
    to_json(&tokenizer)
}

/// Trains on the lines of `text` (blank lines skipped).
fn train(tokenizer: &mut Tokenizer, mut trainer: TrainerWrapper, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(arg_err!("tokenizer", "no text to train a vocabulary on"));
    }
    let lines = text.lines().filter(|l| !l.trim().is_empty());
    tokenizer.train(&mut trainer, lines).map_err(tokenizer_err)?;
    Ok(())
}

fn to_json(tokenizer: &Tokenizer) -> Result<Vec<u8>> {
    Ok(tokenizer.to_string(true).map_err(tokenizer_err)?.into_bytes())
}

fn tokenizer_err(e: impl std::fmt::Display) -> SesameError {
    arg_err!("tokenizer", "{e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Disk;
    use crate::tokenize::TextTokenizer;

    const TEXT: &str = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n";

    #[test]
    fn character_tokenizer_round_trips_text() {
        let text = "First Citizen:\nBefore we proceed, hear me speak.\n\nAll: Speak, speak!";
        let tokenizer = TextTokenizer::from_bytes(&char_tokenizer_json(text).unwrap()).unwrap();
        let ids = tokenizer.encode(text, false).unwrap();
        assert_eq!(ids.len(), text.chars().count(), "one token per character");
        assert_eq!(tokenizer.vocab_size(), text.chars().collect::<BTreeSet<_>>().len());
        assert_eq!(tokenizer.token_to_id("\n"), Some(0), "sorted: newline first");
        assert_eq!(tokenizer.decode(&ids, false).unwrap(), text);
        assert!(tokenizer.encode("Z", false).is_err(), "a character outside the vocabulary is an error");
    }

    #[test]
    fn wordpiece_learns_bert_style_vocabulary() {
        let text = TEXT.repeat(3);
        let tokenizer = TextTokenizer::from_bytes(&wordpiece_tokenizer_json(&text, 300).unwrap()).unwrap();
        for (id, token) in WORDPIECE_SPECIAL_TOKENS.iter().enumerate() {
            assert_eq!(tokenizer.token_to_id(token), Some(id as u32), "{token}");
        }
        let ids = tokenizer.encode("Speak, CITIZEN!", true).unwrap();
        let tokens: Vec<String> = ids.iter().map(|&i| tokenizer.id_to_token(i).unwrap()).collect();
        assert_eq!(tokens.first().map(String::as_str), Some("[CLS]"));
        assert_eq!(tokens.last().map(String::as_str), Some("[SEP]"));
        assert!(tokens.contains(&"speak".to_string()) && tokens.contains(&"citizen".to_string()), "lowercased whole words: {tokens:?}");
        assert!(tokenizer.vocab_size() <= 300);
        assert!(!tokenizer.encode("zebra", false).unwrap().is_empty(), "unseen words still encode (pieces or [UNK])");
    }

    #[test]
    fn byte_level_bpe_round_trips_any_text() {
        let text = TEXT.repeat(3);
        let tokenizer = TextTokenizer::from_bytes(&byte_level_bpe_tokenizer_json(&text, 400).unwrap()).unwrap();
        assert_eq!(tokenizer.token_to_id(END_OF_TEXT), Some(0));
        let unseen = "Zebras — ünïcode, too.";
        assert_eq!(tokenizer.decode(&tokenizer.encode(unseen, false).unwrap(), false).unwrap(), unseen, "every byte is in the vocabulary");
        let speak = tokenizer.encode(" speak", false).unwrap();
        assert!(speak.len() < 6, "frequent words are merged: {speak:?}");
    }

    #[test]
    fn specs_parse_and_bad_ones_are_errors() {
        assert_eq!(TokenizerSpec::parse("char", &Disk).unwrap(), TokenizerSpec::Char);
        assert_eq!(TokenizerSpec::parse("wordpiece:8000", &Disk).unwrap(), TokenizerSpec::WordPiece(8000));
        assert_eq!(TokenizerSpec::parse("bpe:4096", &Disk).unwrap(), TokenizerSpec::ByteLevelBpe(4096));
        assert!(TokenizerSpec::parse("wordpiece:ten", &Disk).is_err());
        assert!(TokenizerSpec::parse("bpe:10", &Disk).is_err());
        // A misspelt spec is not read as a path.
        let err = TokenizerSpec::parse("wordpiece", &Disk).unwrap_err().to_string();
        assert!(err.contains("`wordpiece:N`"), "{err}");
        let err = TokenizerSpec::parse("wordpeice:8000", &Disk).unwrap_err().to_string();
        assert!(err.contains("neither a tokenizer (char, wordpiece:N, bpe:N"), "{err}");
        assert!(wordpiece_tokenizer_json(" \n\n", 300).is_err());
    }
}
