//! Tokenizer parity with Python `tokenizers` on real vocabularies: BERT WordPiece
//! (all-MiniLM-L6-v2's vocab.txt, and its tokenizer.json), GPT-2 byte-level BPE (vocab.json +
//! merges.txt), RoBERTa's byte-level BPE (GPT-2's merges in RoBERTa's vocabulary layout, with
//! `<s> … </s>`, texts and pairs) and a Unigram tokenizer.json in XLM-RoBERTa's pipeline
//! (trained on WikiText-2's validation text by tests/reference/make_tokenizer_fixtures.py),
//! over SST-2's test sentences and 2,000 lines of WikiText-2.
//!
//! The same tests run natively and in the wasm build under node (wasm-bindgen-test; scripts/
//! test.sh runs both): the `tokenizers` code compiled for the browser must give the same ids.
//! In wasm, files are read through node's `fs` and the cache path is SESAME_CACHE at build time.

mod pretrained;

use pretrained::{check_tokenizer, downloaded};
use sesame::tokenize::TextTokenizer;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const BERT_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/bert-wordpiece.json");
const GPT2_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/gpt2-bpe.json");
const ROBERTA_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/roberta-bpe.json");
const UNIGRAM_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/unigram.json");
const UNIGRAM_TOKENIZER: &[u8] = include_bytes!("fixtures/tokenizers/unigram-tokenizer.json");

#[test]
fn bert_wordpiece_from_vocab_txt_and_tokenizer_json_match_python() {
    let (Some(vocab), Some(json)) = (downloaded("models/all-MiniLM-L6-v2/vocab.txt"), downloaded("models/all-MiniLM-L6-v2/tokenizer.json")) else { return };
    let from_vocab = TextTokenizer::from_wordpiece_vocab(std::str::from_utf8(&vocab).unwrap(), true).unwrap();
    check_tokenizer("vocab.txt WordPiece", BERT_FIXTURE, |t, _| from_vocab.encode(t, true).unwrap());
    let from_json = TextTokenizer::from_bytes(&json).unwrap();
    check_tokenizer("MiniLM tokenizer.json", BERT_FIXTURE, |t, _| from_json.encode(t, true).unwrap());
}

#[test]
fn gpt2_byte_level_bpe_matches_python() {
    let (Some(vocab), Some(merges)) = (downloaded("vocab/gpt2/vocab.json"), downloaded("vocab/gpt2/merges.txt")) else { return };
    let tokenizer = TextTokenizer::from_byte_level_bpe(&vocab, std::str::from_utf8(&merges).unwrap()).unwrap();
    check_tokenizer("GPT-2 BPE", GPT2_FIXTURE, |t, _| tokenizer.encode(t, true).unwrap());
}

/// GPT-2's vocab.json re-laid as RoBERTa's (make_tokenizer_fixtures.py's roberta_vocab()):
/// `<s> <pad> </s> <unk>`, GPT-2's tokens in id order, `<mask>`.
fn roberta_vocab(gpt2_vocab: &[u8]) -> Vec<u8> {
    let gpt2: std::collections::HashMap<String, u32> = serde_json::from_slice(gpt2_vocab).unwrap();
    let mut tokens: Vec<(&String, &u32)> = gpt2.iter().collect();
    tokens.sort_by_key(|&(_, id)| *id);
    let specials = ["<s>", "<pad>", "</s>", "<unk>"].map(String::from);
    let all: Vec<&String> = specials.iter().chain(tokens.into_iter().map(|(t, _)| t)).collect();
    let mut vocab: serde_json::Map<String, serde_json::Value> = all.iter().enumerate().map(|(i, t)| (t.to_string(), i.into())).collect();
    vocab.insert("<mask>".into(), all.len().into());
    serde_json::to_vec(&vocab).unwrap()
}

#[test]
fn roberta_byte_level_bpe_matches_python_for_texts_and_pairs() {
    let (Some(vocab), Some(merges)) = (downloaded("vocab/gpt2/vocab.json"), downloaded("vocab/gpt2/merges.txt")) else { return };
    let tokenizer = TextTokenizer::from_roberta_bpe(&roberta_vocab(&vocab), std::str::from_utf8(&merges).unwrap()).unwrap();
    check_tokenizer("RoBERTa BPE", ROBERTA_FIXTURE, |t, pair| tokenizer.encode_with_types(t, pair).unwrap().0);
    assert_eq!(tokenizer.mask_token().map(|(t, _)| t), Some("<mask>"));
}

#[test]
fn unigram_tokenizer_json_matches_python_for_texts_and_pairs() {
    let tokenizer = TextTokenizer::from_bytes(UNIGRAM_TOKENIZER).unwrap();
    check_tokenizer("Unigram", UNIGRAM_FIXTURE, |t, pair| tokenizer.encode_with_types(t, pair).unwrap().0);
}
