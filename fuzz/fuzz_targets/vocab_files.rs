//! Vocabulary files a folder without tokenizer.json is read from: BERT's vocab.txt, and
//! GPT-2's or RoBERTa's vocab.json + merges.txt.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sesame::tokenize::TextTokenizer;

fuzz_target!(|data: &[u8]| {
    sesame::limits::set_host_memory_budget(256 << 20);
    // The first byte picks the format; for BPE a 0 byte separates vocab.json from merges.txt.
    let Some((&pick, rest)) = data.split_first() else { return };
    let tokenizer = match pick % 3 {
        0 => std::str::from_utf8(rest).ok().and_then(|vocab| TextTokenizer::from_wordpiece_vocab(vocab, pick & 4 != 0).ok()),
        kind => {
            let mut parts = rest.splitn(2, |&b| b == 0);
            let (vocab, merges) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            let Ok(merges) = std::str::from_utf8(merges) else { return };
            if kind == 1 { TextTokenizer::from_byte_level_bpe(vocab, merges).ok() } else { TextTokenizer::from_roberta_bpe(vocab, merges).ok() }
        }
    };
    let Some(tokenizer) = tokenizer else { return };
    for text in ["Hello, world!", "über 日本語 [MASK] <mask>"] {
        if let Ok(encoded) = tokenizer.encode_detailed(text, Some("pair")) {
            let _ = tokenizer.decode(&encoded.ids, true);
        }
    }
});
