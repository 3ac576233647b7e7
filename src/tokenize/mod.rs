//! Text → ids through Hugging Face `tokenizers` (the same code natively and in wasm), after
//! a family's text rules where it has them (fastai's: [`fastai_rules`]).

pub mod fastai_rules;
mod word_level;

use std::borrow::Cow;

use crate::error::{Result, SesameError};
pub use word_level::{learn_vocabulary, read_word_list, word_level_tokenizer_json, WordLevelSpec};

/// Rules applied to a text before its tokenizer.json splits it, named by the folder's
/// tokenizer_config.json (`"text_rules"`), which tokenizer.json cannot express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextRules {
    /// fastai's `text_proc_rules` (`"fastai"`): `xxmaj`, `xxup`, `xxrep`, `xxwrep`, HTML fixes.
    Fastai,
}

impl TextRules {
    /// The rules a tokenizer_config.json names, if any; an unknown name is an error. A file
    /// that is not JSON names none (as every other reader of it takes it).
    pub fn from_tokenizer_config(json: &[u8]) -> Result<Option<TextRules>> {
        let Ok(config) = serde_json::from_slice::<serde_json::Value>(json) else { return Ok(None) };
        match &config["text_rules"] {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(name) if name == "fastai" => Ok(Some(TextRules::Fastai)),
            other => Err(tokenizer_err("tokenizer_config.json", format!("unknown text_rules {other} (Sesame knows \"fastai\")"))),
        }
    }

    /// The tokenizer_config.json that names these rules.
    pub fn tokenizer_config_json(self) -> Vec<u8> {
        match self {
            TextRules::Fastai => br#"{"text_rules": "fastai"}"#.to_vec(),
        }
    }

    pub fn apply(self, text: &str) -> String {
        match self {
            TextRules::Fastai => fastai_rules::apply(text),
        }
    }
}

/// The vocabulary files a family's tokenizer is built from when a model folder has no
/// tokenizer.json.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vocabulary {
    /// BERT's WordPiece `vocab.txt`, `[CLS]` … `[SEP]` around each text.
    WordPiece,
    /// GPT-2's byte-level BPE (`vocab.json` + `merges.txt`), no special tokens around texts.
    ByteLevelBpe,
    /// RoBERTa's byte-level BPE (`vocab.json` + `merges.txt`), `<s> A </s>` and
    /// `<s> A </s></s> B </s>`.
    RobertaBpe,
    /// A SentencePiece model (XLM-RoBERTa's `sentencepiece.bpe.model`, ALBERT's
    /// `spiece.model`), which Sesame reads only as tokenizer.json.
    SentencePiece,
    /// A word-level vocabulary (fastai's `itos`: AWD-LSTM; GloVe's words: CoVe), read only as
    /// tokenizer.json (`sesame convert-ulmfit` and `convert-cove` write one).
    WordLevel,
}

/// A Hugging Face tokenizer loaded from `tokenizer.json`.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    /// The same without truncation, kept while `inner` truncates: question answering reads
    /// every token of a long context, in windows.
    whole: Option<Box<tokenizers::Tokenizer>>,
    /// Applied to every text first (offsets then refer to the text after them).
    rules: Option<TextRules>,
}

/// A tokenizer error of Sesame's own: `message` about `what`.
pub(crate) fn tokenizer_err(what: &str, message: impl std::fmt::Display) -> SesameError {
    SesameError::Tokenizer(format!("{what}: {message}"))
}

/// The tokenizers library's error (or serde_json's) as it failed at `what`, kept as the source.
pub(crate) fn tokenizer_failed(what: &str, source: impl Into<tokenizers::Error>) -> SesameError {
    SesameError::TokenizerLibrary { what: what.to_string(), source: source.into() }
}

/// An encoding failure as a user should read it. A WordLevel vocabulary whose unknown token is
/// missing cannot encode a piece it lacks, and `tokenizers` says only "Missing [UNK] token":
/// the pieces of `texts` the vocabulary lacks are named instead.
fn encode_err(tokenizer: &tokenizers::Tokenizer, e: tokenizers::Error, texts: &[&str]) -> SesameError {
    if e.to_string().contains("Missing [UNK] token") {
        let unknown = pieces_not_in_vocab(tokenizer, texts);
        if !unknown.is_empty() {
            let listed = unknown.iter().map(|piece| format!("{piece:?}")).collect::<Vec<_>>().join(", ");
            let size = tokenizer.get_vocab_size(true);
            return SesameError::Tokenizer(format!(
                "the text holds {listed}, which this model's vocabulary of {size} lacks (it has no unknown token to stand for them): use only what it knows"
            ));
        }
    }
    tokenizer_failed("encoding failed", e)
}

/// The first (up to 10) distinct pieces of `texts`, as the normalizer and pre-tokenizer cut
/// them, that are not in the vocabulary.
fn pieces_not_in_vocab(tokenizer: &tokenizers::Tokenizer, texts: &[&str]) -> Vec<String> {
    use tokenizers::{NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
    let mut unknown: Vec<String> = Vec::new();
    for text in texts {
        let mut normalized = NormalizedString::from(*text);
        if tokenizer.get_normalizer().is_some_and(|n| n.normalize(&mut normalized).is_err()) {
            continue;
        }
        let mut pieces = PreTokenizedString::from(normalized);
        if tokenizer.get_pre_tokenizer().is_some_and(|p| p.pre_tokenize(&mut pieces).is_err()) {
            continue;
        }
        for (piece, _, _) in pieces.get_splits(OffsetReferential::Original, OffsetType::Char) {
            if unknown.len() < 10 && tokenizer.token_to_id(piece).is_none() && !unknown.iter().any(|u| u == piece) {
                unknown.push(piece.to_string());
            }
        }
    }
    unknown
}

/// A byte-level BPE model from `vocab.json` and `merges.txt` with GPT-2's pre-tokenizer and
/// decoder (no post-processor yet).
fn byte_level_bpe(vocab_json: &[u8], merges_txt: &str) -> Result<tokenizers::Tokenizer> {
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;

    let vocab: std::collections::HashMap<String, u32> = serde_json::from_slice(vocab_json).map_err(|e| tokenizer_failed("vocab.json", e))?;
    let vocab: tokenizers::models::bpe::Vocab = vocab.into_iter().collect();
    let merges: Vec<(String, String)> = merges_txt
        .lines()
        .filter(|l| !l.starts_with("#version") && !l.trim().is_empty())
        .map(|l| l.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| tokenizer_err("merges.txt", format!("bad line `{l}`"))))
        .collect::<Result<_>>()?;
    check_bpe_merges(|token| vocab.contains_key(token), merges.iter().map(|(a, b)| (a.as_str(), b.as_str())), None, "merges.txt")?;
    let model = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| tokenizer_failed("vocab.json + merges.txt", e))?;
    let mut inner = tokenizers::Tokenizer::new(model);
    inner.with_pre_tokenizer(Some(ByteLevel::new(false, true, true))).with_decoder(Some(ByteLevel::default()));
    Ok(inner)
}

/// Marks those of `tokens` that the vocabulary has as special: matched whole in the text
/// (so "[MASK]" is one token) and dropped when decoding with `skip_special_tokens`, as
/// transformers' tokenizers treat them.
fn add_special_tokens(inner: &mut tokenizers::Tokenizer, tokens: &[&str]) -> Result<()> {
    let present: Vec<tokenizers::AddedToken> =
        tokens.iter().filter(|t| inner.token_to_id(t).is_some()).map(|t| tokenizers::AddedToken::from(*t, true)).collect();
    inner.add_special_tokens(present).map_err(|e| tokenizer_failed("special tokens", e))?;
    Ok(())
}

/// Refuses BPE merges that `tokenizers` panics on while building its model (a slice out of
/// range, found by fuzzing): each merge's second token must be at least the continuing-subword
/// prefix long (on a character boundary), and the token the merge makes must be in the
/// vocabulary (which also keeps it within the longest vocabulary entry, the buffer it is built in).
fn check_bpe_merges<'a>(in_vocab: impl Fn(&str) -> bool, merges: impl Iterator<Item = (&'a str, &'a str)>, prefix: Option<&str>, file: &str) -> Result<()> {
    let prefix_len = prefix.map_or(0, str::len);
    for (line, (a, b)) in merges.enumerate() {
        let merged = b.get(prefix_len..).map(|rest| format!("{a}{rest}"));
        if !merged.as_deref().is_some_and(&in_vocab) {
            return Err(tokenizer_err(file, format!("merge {line} (`{a}` `{b}`) makes a token that is not in the vocabulary")));
        }
    }
    Ok(())
}

/// The BPE merges of a tokenizer.json model (`["a", "b"]` pairs, or `"a b"` strings as older
/// files write them) checked by [`check_bpe_merges`]; `tokenizers` reads a model by its shape,
/// so any model with a vocabulary and merges is checked.
fn check_bpe_model(model: &serde_json::Value) -> Result<()> {
    use serde_json::Value;
    let (Some(vocab), Some(merges)) = (model.get("vocab").and_then(Value::as_object), model.get("merges").and_then(Value::as_array)) else {
        return Ok(());
    };
    let pairs: Vec<(&str, &str)> = merges
        .iter()
        .filter_map(|m| match m {
            Value::String(s) => s.split_once(' '),
            Value::Array(pair) => match pair.as_slice() {
                [Value::String(a), Value::String(b)] => Some((a.as_str(), b.as_str())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let prefix = model.get("continuing_subword_prefix").and_then(Value::as_str);
    check_bpe_merges(|token| vocab.contains_key(token), pairs.into_iter(), prefix, "tokenizer.json's model")
}

/// Refuses a post-processor that `tokenizers` accepts but panics on when it encodes (a wasm
/// trap in the browser): a template naming a special token its `special_tokens` lack, a
/// single-text template reading the second text (`$B`), or a special token whose ids and
/// tokens differ in number. `tokenizers` reads a post-processor by its shape, whatever its
/// `type` says, so every object of that shape is checked, nested ones (a `Sequence`'s) too.
fn check_post_processor(value: &serde_json::Value) -> Result<()> {
    use serde_json::Value;
    let bad = |message: String| tokenizer_err("tokenizer.json's post_processor", message);
    match value {
        Value::Array(items) => items.iter().try_for_each(check_post_processor),
        Value::Object(object) => {
            if let Some(special) = object.get("special_tokens").and_then(Value::as_object) {
                for (name, token) in special {
                    let count = |field: &str| token.get(field).and_then(Value::as_array).map_or(0, Vec::len);
                    if count("ids") != count("tokens") {
                        return Err(bad(format!("special token `{name}` has {} ids but {} tokens", count("ids"), count("tokens"))));
                    }
                }
            }
            let special = object.get("special_tokens").and_then(Value::as_object);
            for which in ["single", "pair"] {
                for piece in object.get(which).and_then(Value::as_array).into_iter().flatten() {
                    if let Some(id) = piece.pointer("/SpecialToken/id").and_then(Value::as_str) {
                        if !special.is_some_and(|s| s.contains_key(id)) {
                            return Err(bad(format!("the {which} template names special token `{id}`, which its special_tokens lack")));
                        }
                    }
                    if which == "single" && piece.pointer("/Sequence/id").and_then(Value::as_str) == Some("B") {
                        return Err(bad("the single-text template reads a second text ($B)".into()));
                    }
                }
            }
            object.values().try_for_each(check_post_processor)
        }
        _ => Ok(()),
    }
}

impl TextTokenizer {
    /// BERT's WordPiece tokenizer from a `vocab.txt` (one token per line, id = line number),
    /// as transformers' `BertTokenizerFast` builds it: clean text, split CJK characters,
    /// lowercase (and strip accents) when `lowercase`, `[CLS]` … `[SEP]` around each input.
    pub fn from_wordpiece_vocab(vocab_txt: &str, lowercase: bool) -> Result<Self> {
        use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
        use tokenizers::models::wordpiece::WordPiece;
        use tokenizers::normalizers::BertNormalizer;
        use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
        use tokenizers::processors::bert::BertProcessing;

        let vocab: tokenizers::models::bpe::Vocab = vocab_txt.lines().enumerate().map(|(i, t)| (t.trim_end_matches('\r').to_string(), i as u32)).collect();
        let id = |token: &str| vocab.get(token).copied().ok_or_else(|| tokenizer_err("vocab.txt", format!("has no {token} token")));
        let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
        id("[UNK]")?;
        let model = WordPiece::builder().vocab(vocab).unk_token("[UNK]".into()).build().map_err(|e| tokenizer_failed("vocab.txt", e))?;
        let mut inner = tokenizers::Tokenizer::new(model);
        inner
            .with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
            .map_err(|e| tokenizer_failed("normalizer", e))?
            .with_pre_tokenizer(Some(BertPreTokenizer))
            .with_post_processor(Some(BertProcessing::new(("[SEP]".into(), sep), ("[CLS]".into(), cls))))
            .with_decoder(Some(WordPieceDecoder::default()));
        add_special_tokens(&mut inner, &["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])?;
        Ok(TextTokenizer { inner, whole: None, rules: None })
    }

    /// GPT-2's byte-level BPE from `vocab.json` and `merges.txt`.
    pub fn from_byte_level_bpe(vocab_json: &[u8], merges_txt: &str) -> Result<Self> {
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;

        let mut inner = byte_level_bpe(vocab_json, merges_txt)?;
        inner.with_post_processor(Some(ByteLevel::new(false, false, true)));
        add_special_tokens(&mut inner, &["<|endoftext|>"])?;
        Ok(TextTokenizer { inner, whole: None, rules: None })
    }

    /// RoBERTa's byte-level BPE from `vocab.json` and `merges.txt`, as transformers'
    /// `RobertaTokenizerFast` builds it: `<s> A </s>` (`<s> A </s></s> B </s>` for a pair),
    /// and `<mask>` matched with the space before it.
    pub fn from_roberta_bpe(vocab_json: &[u8], merges_txt: &str) -> Result<Self> {
        use tokenizers::processors::roberta::RobertaProcessing;

        let mut inner = byte_level_bpe(vocab_json, merges_txt)?;
        let id = |token: &str| inner.token_to_id(token).ok_or_else(|| tokenizer_err("vocab.json", format!("has no {token} token")));
        let (cls, sep) = (id("<s>")?, id("</s>")?);
        inner.with_post_processor(Some(RobertaProcessing::new(("</s>".into(), sep), ("<s>".into(), cls)).trim_offsets(true).add_prefix_space(false)));
        add_special_tokens(&mut inner, &["<s>", "<pad>", "</s>", "<unk>"])?;
        if inner.token_to_id("<mask>").is_some() {
            inner.add_special_tokens([tokenizers::AddedToken::from("<mask>", true).lstrip(true)]).map_err(|e| tokenizer_failed("special tokens", e))?;
        }
        Ok(TextTokenizer { inner, whole: None, rules: None })
    }

    /// Parses the contents of a `tokenizer.json`. Padding and truncation settings stored in
    /// the file are dropped: callers pad batches themselves (with an attention mask) and ask
    /// for truncation explicitly ([`TextTokenizer::truncate_to`]).
    pub fn from_bytes(json: &[u8]) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| tokenizer_failed("invalid tokenizer.json", e))?;
        if let Some(processor) = value.get("post_processor") {
            check_post_processor(processor)?;
        }
        if let Some(model) = value.get("model") {
            check_bpe_model(model)?;
        }
        let mut inner = tokenizers::Tokenizer::from_bytes(json).map_err(|e| tokenizer_failed("invalid tokenizer.json", e))?;
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| tokenizer_failed("tokenizer.json", e))?;
        Ok(TextTokenizer { inner, whole: None, rules: None })
    }

    /// Cut every encoding to at most `max_length` ids, special tokens included (they are
    /// kept; a pair loses tokens from its longer text first). `None`: never truncate.
    pub fn truncate_to(&mut self, max_length: Option<usize>) -> Result<()> {
        let params = max_length.map(|max_length| tokenizers::TruncationParams { max_length, ..Default::default() });
        match (&params, &self.whole) {
            (Some(_), None) => self.whole = Some(Box::new(self.inner.clone())),
            (None, Some(_)) => self.whole = None,
            _ => {}
        }
        self.inner.with_truncation(params).map_err(|e| tokenizer_failed("truncation", e))?;
        Ok(())
    }

    fn encode_err(&self, e: tokenizers::Error, texts: &[&str]) -> SesameError {
        encode_err(&self.inner, e, texts)
    }

    /// Ids of `text`, with the model's special tokens (`[CLS]` … `[SEP]`) when asked for.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let text = &*self.ruled(text);
        let encoding = self.inner.encode(text, add_special_tokens).map_err(|e| self.encode_err(e, &[text]))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// [`TextTokenizer::encode`] never truncated, whatever [`TextTokenizer::truncate_to`] asked.
    pub fn encode_whole(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let text = &*self.ruled(text);
        let tokenizer = self.whole.as_deref().unwrap_or(&self.inner);
        let encoding = tokenizer.encode(text, add_special_tokens).map_err(|e| encode_err(tokenizer, e, &[text]))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Ids and token type ids of a text, or of a text pair (segment B gets type 1), with the
    /// model's special tokens.
    pub fn encode_with_types(&self, text: &str, pair: Option<&str>) -> Result<(Vec<u32>, Vec<u32>)> {
        let (text, pair) = (&*self.ruled(text), pair.map(|p| self.ruled(p)));
        let pair = pair.as_deref();
        let encoding = match pair {
            Some(pair) => self.inner.encode((text, pair), true),
            None => self.inner.encode(text, true),
        }
        .map_err(|e| self.encode_err(e, &[text, pair.unwrap_or_default()]))?;
        Ok((encoding.get_ids().to_vec(), encoding.get_type_ids().to_vec()))
    }

    /// A text (or pair) encoded with the model's special tokens, with what pipelines need to
    /// map tokens back onto the text.
    pub fn encode_detailed(&self, text: &str, pair: Option<&str>) -> Result<Encoded> {
        let pair = pair.map(|p| self.ruled(p));
        Self::detailed(&self.inner, &self.ruled(text), pair.as_deref())
    }

    /// [`TextTokenizer::encode_detailed`] never truncated, whatever [`TextTokenizer::truncate_to`] asked.
    pub fn encode_detailed_whole(&self, text: &str, pair: Option<&str>) -> Result<Encoded> {
        let pair = pair.map(|p| self.ruled(p));
        Self::detailed(self.whole.as_deref().unwrap_or(&self.inner), &self.ruled(text), pair.as_deref())
    }

    /// `text` after the rules, if any.
    fn ruled<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.rules {
            Some(rules) => Cow::Owned(rules.apply(text)),
            None => Cow::Borrowed(text),
        }
    }

    /// A folder's tokenizer: its tokenizer.json, with the text rules its tokenizer_config.json
    /// names (if it has one).
    pub fn from_files(tokenizer_json: &[u8], tokenizer_config_json: Option<&[u8]>) -> Result<Self> {
        let rules = tokenizer_config_json.map(TextRules::from_tokenizer_config).transpose()?.flatten();
        Ok(TextTokenizer { rules, ..TextTokenizer::from_bytes(tokenizer_json)? })
    }

    fn detailed(tokenizer: &tokenizers::Tokenizer, text: &str, pair: Option<&str>) -> Result<Encoded> {
        let encoding = match pair {
            Some(pair) => tokenizer.encode_char_offsets((text, pair), true),
            None => tokenizer.encode_char_offsets(text, true),
        }
        .map_err(|e| encode_err(tokenizer, e, &[text, pair.unwrap_or_default()]))?;
        Ok(Encoded {
            ids: encoding.get_ids().to_vec(),
            type_ids: encoding.get_type_ids().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
            special: encoding.get_special_tokens_mask().iter().map(|&m| m == 1).collect(),
            sequence_ids: encoding.get_sequence_ids(),
            char_ids: None,
        })
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(|e| tokenizer_failed("decoding failed", e))
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The mask token of a masked language model's vocabulary: BERT's `[MASK]` or RoBERTa-style
    /// `<mask>`.
    pub fn mask_token(&self) -> Option<(&'static str, u32)> {
        ["[MASK]", "<mask>"].into_iter().find_map(|t| self.token_to_id(t).map(|id| (t, id)))
    }
}

/// One encoded text or pair, token by token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// Each token's span in its own text, in characters (Unicode scalar values, as Python
    /// counts them); (0, 0) for special tokens.
    pub offsets: Vec<(usize, usize)>,
    /// Whether each token is a special token (`[CLS]`, `[SEP]`, …).
    pub special: Vec<bool>,
    /// Which text each token came from (0 or 1); `None` for special tokens.
    pub sequence_ids: Vec<Option<usize>>,
    /// Each token's row of character ids, for a model that reads them (`IdsBatch::char_ids`).
    pub char_ids: Option<Vec<u32>>,
}

impl Encoded {
    /// The text each token covers in `texts` (the text and its pair), `None` for a special
    /// token: the words a character-reading model spells.
    pub fn token_texts<'a>(&self, texts: [&'a str; 2]) -> Vec<Option<&'a str>> {
        // Offsets count characters; slices need bytes.
        let bytes: Vec<Vec<usize>> = texts.iter().map(|t| t.char_indices().map(|(b, _)| b).chain([t.len()]).collect()).collect();
        self.offsets
            .iter()
            .zip(&self.special)
            .zip(&self.sequence_ids)
            .map(|((&(start, end), &special), sequence)| {
                let which = sequence.unwrap_or(0).min(1);
                let at = |c: usize| bytes[which].get(c).copied();
                match (special, at(start), at(end)) {
                    (false, Some(from), Some(to)) if from < to => Some(&texts[which][from..to]),
                    _ => None,
                }
            })
            .collect()
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
    fn pieces_a_vocabulary_without_its_unknown_token_lacks_are_named() {
        // As the baby GPT's character vocabulary: its unknown token is not in it.
        let json = WORD_LEVEL.replace(r#""unk_token": "[UNK]""#, r#""unk_token": "<unk>""#);
        let tok = TextTokenizer::from_bytes(json.as_bytes()).unwrap();
        assert_eq!(tok.encode("hello world", false).unwrap(), vec![1, 2]);
        let err = tok.encode("hello moon, hello sun moon", false).unwrap_err().to_string();
        assert!(err.contains(r#"the text holds "moon", ",", "sun", which this model's vocabulary of 4 lacks"#), "{err}");
        let err = tok.encode_detailed("hello", Some("héllo")).unwrap_err().to_string();
        assert!(err.contains(r#"holds "héllo""#), "{err}");
    }

    #[test]
    fn a_word_vocabulary_without_an_unknown_token_loads_and_names_what_it_lacks() {
        // As convert-cove writes for a vocabulary without `<unk>` (and one holding `<unk>` as
        // a word, not as the unknown token).
        for vocab in [vec!["hello", "world"], vec!["hello", "world", "<unk>"]] {
            let vocab: Vec<String> = vocab.into_iter().map(String::from).collect();
            let spec = WordLevelSpec { vocab: &vocab, ..WordLevelSpec::default() };
            let tok = TextTokenizer::from_bytes(&word_level_tokenizer_json(&spec).unwrap()).unwrap();
            assert_eq!(tok.encode("hello world", false).unwrap(), vec![0, 1]);
            let err = tok.encode("hello moon", false).unwrap_err().to_string();
            assert!(err.contains(r#"the text holds "moon""#), "{err}");
        }
    }

    #[test]
    fn builds_bert_wordpiece_from_vocab_txt() {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n##s\n.\n";
        let tok = TextTokenizer::from_wordpiece_vocab(vocab, true).unwrap();
        assert_eq!(tok.encode("The cats sat.", true).unwrap(), vec![2, 5, 6, 8, 7, 9, 3]);
        assert_eq!(tok.encode("dog", false).unwrap(), vec![1]);
        assert_eq!(tok.encode("the [MASK].", false).unwrap(), vec![5, 4, 9], "special tokens are matched whole");
        assert_eq!(tok.mask_token(), Some(("[MASK]", 4)));
        assert_eq!(tok.decode(&[5, 6, 8], true).unwrap(), "the cats");
        assert!(TextTokenizer::from_wordpiece_vocab("a\nb\n", true).is_err(), "no [CLS]/[SEP]/[UNK]");
    }

    #[test]
    fn builds_gpt2_byte_level_bpe_from_vocab_and_merges() {
        // Byte-level symbols: "Ġ" is the space byte.
        let vocab = r#"{"h": 0, "i": 1, "Ġ": 2, "t": 3, "hi": 4, "Ġt": 5, "Ġth": 6}"#;
        let merges = "#version: 0.2\nh i\nĠ t\nĠt h\n";
        let tok = TextTokenizer::from_byte_level_bpe(vocab.as_bytes(), merges).unwrap();
        assert_eq!(tok.encode("hi th", false).unwrap(), vec![4, 6]);
        assert_eq!(tok.decode(&[4, 6], false).unwrap(), "hi th");
        assert!(TextTokenizer::from_byte_level_bpe(b"{", merges).is_err());
    }

    #[test]
    fn builds_roberta_byte_level_bpe_with_its_template_and_mask() {
        let vocab = r#"{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "i": 5, "Ġ": 6, "t": 7, "hi": 8, "Ġt": 9, "Ġth": 10, "<mask>": 11}"#;
        let merges = "#version: 0.2\nh i\nĠ t\nĠt h\n";
        let tok = TextTokenizer::from_roberta_bpe(vocab.as_bytes(), merges).unwrap();
        assert_eq!(tok.encode("hi th", true).unwrap(), vec![0, 8, 10, 2]);
        assert_eq!(tok.encode_with_types("hi", Some("hi")).unwrap().0, vec![0, 8, 2, 2, 8, 2], "<s> A </s></s> B </s>");
        // <mask> takes the space before it, as RobertaTokenizer's lstrip mask does.
        assert_eq!(tok.encode("hi <mask>", true).unwrap(), vec![0, 8, 11, 2]);
        assert_eq!(tok.mask_token(), Some(("<mask>", 11)));
        assert_eq!(tok.decode(&[0, 8, 10, 2], true).unwrap(), "hi th");
        let err = TextTokenizer::from_roberta_bpe(br#"{"h": 0}"#, "").err().unwrap().to_string();
        assert!(err.contains("no <s> token"), "{err}");
        // Merges whose token is not in the vocabulary panicked inside tokenizers (fuzzing).
        let err = TextTokenizer::from_byte_level_bpe(br#"{"h": 4, "i": 11}"#, "#version: 0.2\nh i\n").err().unwrap().to_string();
        assert!(err.contains("merge 0 (`h` `i`) makes a token that is not in the vocabulary"), "{err}");
        let json =
            r###"{"model": {"type": "BPE", "vocab": {"a": 0, "##b": 1, "ab": 2}, "merges": [["a", "##b"], ["a", "#"]], "continuing_subword_prefix": "##"}}"###;
        let err = TextTokenizer::from_bytes(json.as_bytes()).err().unwrap().to_string();
        assert!(err.contains("merge 1 (`a` `#`)"), "{err}");
    }

    #[test]
    fn ignores_stored_padding_and_truncates_only_when_asked() {
        let json = WORD_LEVEL.replace(
            r#""truncation": null, "padding": null"#,
            r#""truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0},
               "padding": {"strategy": {"Fixed": 6}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"}"#,
        );
        let mut tok = TextTokenizer::from_bytes(json.as_bytes()).unwrap();
        assert_eq!(tok.encode("hello world !", false).unwrap(), vec![1, 2, 3]);
        tok.truncate_to(Some(2)).unwrap();
        assert_eq!(tok.encode("hello world !", false).unwrap(), vec![1, 2]);
        assert_eq!(tok.encode_detailed("hello world !", None).unwrap().ids, vec![1, 2]);
        assert_eq!(tok.encode_detailed_whole("hello world !", None).unwrap().ids, vec![1, 2, 3], "never truncated");
        tok.truncate_to(None).unwrap();
        assert_eq!(tok.encode_detailed("hello world !", None).unwrap().ids, vec![1, 2, 3]);
        assert_eq!(tok.token_to_id("world"), Some(2));
        assert_eq!(tok.id_to_token(3).as_deref(), Some("!"));
        assert_eq!(tok.mask_token(), None);
    }

    /// Post-processors that `tokenizers` loads but panics on when encoding are refused at load.
    #[test]
    fn templates_tokenizers_would_panic_on_are_refused() {
        let with = |processor: &str| WORD_LEVEL.replace(r#""post_processor": null"#, &format!(r#""post_processor": {processor}"#));
        let template = |single: &str, special: &str| {
            format!(
                r#"{{"type": "TemplateProcessing", "single": [{single}], "pair": [{{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"Sequence": {{"id": "B", "type_id": 1}}}}], "special_tokens": {{{special}}}}}"#
            )
        };
        let cls = r#"{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}"#;
        let good = with(&template(cls, r#""[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[UNK]"]}"#));
        assert_eq!(TextTokenizer::from_bytes(good.as_bytes()).unwrap().encode("hello", true).unwrap(), vec![0, 1]);
        for (processor, expected) in [
            (template(cls, ""), "names special token `[CLS]`, which its special_tokens lack"),
            (template(cls, r#""[CLS]": {"id": "[CLS]", "ids": [0, 1], "tokens": ["[UNK]"]}"#), "has 2 ids but 1 tokens"),
            (template(r#"{"Sequence": {"id": "B", "type_id": 0}}"#, ""), "reads a second text"),
            (format!(r#"{{"type": "Sequence", "processors": [{}]}}"#, template(cls, "")), "which its special_tokens lack"),
            // tokenizers reads a processor by its shape: a misspelt type is still a template.
            (template(cls, "").replace("TemplateProcessing", "TemplatePr0cessing"), "which its special_tokens lack"),
        ] {
            let json = with(&processor);
            let err = TextTokenizer::from_bytes(json.as_bytes()).err().unwrap().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn malformed_json_is_an_error() {
        let err = TextTokenizer::from_bytes(b"{\"model\": 5").err().unwrap().to_string();
        assert!(err.contains("invalid tokenizer.json"), "{err}");
    }
}
