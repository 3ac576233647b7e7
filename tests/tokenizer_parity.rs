//! Tokenizer parity with Python `tokenizers` on real vocabularies: BERT WordPiece
//! (all-MiniLM-L6-v2's vocab.txt, and its tokenizer.json) and GPT-2 byte-level BPE (vocab.json +
//! merges.txt), over SST-2's test sentences and 2,000 lines of WikiText-2.
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

#[test]
fn bert_wordpiece_from_vocab_txt_and_tokenizer_json_match_python() {
    let (Some(vocab), Some(json)) = (downloaded("models/all-MiniLM-L6-v2/vocab.txt"), downloaded("models/all-MiniLM-L6-v2/tokenizer.json")) else { return };
    let from_vocab = TextTokenizer::from_wordpiece_vocab(std::str::from_utf8(&vocab).unwrap(), true).unwrap();
    check_tokenizer("vocab.txt WordPiece", BERT_FIXTURE, |t| from_vocab.encode(t, true).unwrap());
    let from_json = TextTokenizer::from_bytes(&json).unwrap();
    check_tokenizer("MiniLM tokenizer.json", BERT_FIXTURE, |t| from_json.encode(t, true).unwrap());
}

#[test]
fn gpt2_byte_level_bpe_matches_python() {
    let (Some(vocab), Some(merges)) = (downloaded("vocab/gpt2/vocab.json"), downloaded("vocab/gpt2/merges.txt")) else { return };
    let tokenizer = TextTokenizer::from_byte_level_bpe(&vocab, std::str::from_utf8(&merges).unwrap()).unwrap();
    check_tokenizer("GPT-2 BPE", GPT2_FIXTURE, |t| tokenizer.encode(t, true).unwrap());
}
