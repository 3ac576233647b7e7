//! The tokenizer parity of tests/tokenizer_parity.rs in the wasm build, under node
//! (wasm-bindgen-test): the same `tokenizers` code compiled for the browser must give the same
//! ids as Python `tokenizers`. Files are read through node's `fs`; the cache path comes from
//! SESAME_CACHE at build time (scripts/test.sh sets it).
#![cfg(target_arch = "wasm32")]

mod pretrained;

use pretrained::{check_tokenizer, downloaded};
use sesame::tokenize::TextTokenizer;
use wasm_bindgen_test::wasm_bindgen_test;

const BERT_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/bert-wordpiece.json");
const GPT2_FIXTURE: &[u8] = include_bytes!("fixtures/tokenizers/gpt2-bpe.json");

#[wasm_bindgen_test]
fn bert_wordpiece_matches_python_in_wasm() {
    let (Some(vocab), Some(json)) = (downloaded("models/all-MiniLM-L6-v2/vocab.txt"), downloaded("models/all-MiniLM-L6-v2/tokenizer.json")) else { return };
    let from_vocab = TextTokenizer::from_wordpiece_vocab(std::str::from_utf8(&vocab).unwrap(), true).unwrap();
    check_tokenizer("wasm vocab.txt WordPiece", BERT_FIXTURE, |t| from_vocab.encode(t, true).unwrap());
    let from_json = TextTokenizer::from_bytes(&json).unwrap();
    check_tokenizer("wasm MiniLM tokenizer.json", BERT_FIXTURE, |t| from_json.encode(t, true).unwrap());
}

#[wasm_bindgen_test]
fn gpt2_byte_level_bpe_matches_python_in_wasm() {
    let (Some(vocab), Some(merges)) = (downloaded("vocab/gpt2/vocab.json"), downloaded("vocab/gpt2/merges.txt")) else { return };
    let tokenizer = TextTokenizer::from_byte_level_bpe(&vocab, std::str::from_utf8(&merges).unwrap()).unwrap();
    check_tokenizer("wasm GPT-2 BPE", GPT2_FIXTURE, |t| tokenizer.encode(t, true).unwrap());
}
