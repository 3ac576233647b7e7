//! A tokenizer.json: loaded, then texts and pairs encoded and decoded as the pipelines do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sesame::tokenize::TextTokenizer;

fuzz_target!(|data: &[u8]| {
    sesame::limits::set_host_memory_budget(256 << 20);
    let Ok(mut tokenizer) = TextTokenizer::from_bytes(data) else { return };
    for text in ["Hello, world!", "  ", "über 日本語 [MASK] <mask> <s></s>\u{0}\n\t x"] {
        if let Ok(encoded) = tokenizer.encode_detailed(text, Some("a second text")) {
            let _ = tokenizer.decode(&encoded.ids, true);
        }
        if let Ok(ids) = tokenizer.encode(text, true) {
            let _ = tokenizer.decode(&ids, false);
        }
    }
    let _ = tokenizer.mask_token();
    if tokenizer.truncate_to(Some(4)).is_ok() {
        let _ = tokenizer.encode_detailed("one two three four five six", Some("seven eight"));
        let _ = tokenizer.encode_detailed_whole("one two three four five six", None);
    }
    let _ = tokenizer.decode(&[0, 1, 2, u32::MAX], true);
});
