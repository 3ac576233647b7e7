//! The pretrained files scripts/fetch-models.sh downloads into the cache
//! (`$SESAME_CACHE`, default `~/.cache/sesame`), and the shared data sets in `../shared/data`,
//! read natively or, in the wasm tests under node, through node's `fs`.
//!
//! A missing download fails the test with what to run, unless the test command found the
//! download impossible and said so (`SESAME_DOWNLOADS=unavailable`): then the caller skips,
//! printing why.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

#[cfg(target_arch = "wasm32")]
mod node {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(module = "fs")]
    extern "C" {
        #[wasm_bindgen(js_name = readFileSync, catch)]
        pub fn read_file_sync(path: &str) -> Result<Vec<u8>, JsValue>;
    }
}

/// Reads a file: natively from disk, in wasm through node.
pub fn read_path(path: &str) -> Result<Vec<u8>, String> {
    #[cfg(not(target_arch = "wasm32"))]
    return std::fs::read(path).map_err(|e| format!("{path}: {e}"));
    #[cfg(target_arch = "wasm32")]
    return node::read_file_sync(path).map_err(|e| format!("{path}: {e:?}"));
}

/// An environment variable: at run time natively, at build time in wasm.
fn var(name: &str) -> Option<String> {
    #[cfg(not(target_arch = "wasm32"))]
    return std::env::var(name).ok();
    #[cfg(target_arch = "wasm32")]
    return match name {
        "SESAME_CACHE" => option_env!("SESAME_CACHE"),
        "SESAME_DOWNLOADS" => option_env!("SESAME_DOWNLOADS"),
        "HOME" => option_env!("HOME"),
        _ => None,
    }
    .map(str::to_owned);
}

pub fn cache_dir() -> String {
    var("SESAME_CACHE").unwrap_or_else(|| format!("{}/.cache/sesame", var("HOME").unwrap_or_default()))
}

/// `relative` (e.g. "models/all-MiniLM-L6-v2/config.json") from the cache; None, after
/// saying so loudly, when downloads are known to be impossible here.
pub fn downloaded(relative: &str) -> Option<Vec<u8>> {
    let path = format!("{}/{relative}", cache_dir());
    match read_path(&path) {
        Ok(bytes) => Some(bytes),
        Err(_) if var("SESAME_DOWNLOADS").as_deref() == Some("unavailable") => {
            eprintln!("\n!!! SKIPPED: {path} is missing and the downloads failed on this machine (see scripts/fetch-models.sh)\n");
            None
        }
        Err(e) => panic!("{e}: run scripts/fetch-models.sh first (it downloads the pretrained files)"),
    }
}

/// A file of the shared data sets (`../shared/data`, beside the repository).
pub fn shared_data(relative: &str) -> String {
    let path = format!("{}/../shared/data/{relative}", env!("CARGO_MANIFEST_DIR"));
    let bytes = read_path(&path).unwrap_or_else(|e| panic!("{e}: the shared data sets must sit beside the repository"));
    String::from_utf8(bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The tokenizer-parity texts: every sentence of SST-2's test.tsv, the first 2,000 lines of
/// WikiText-2's test.txt (as tests/reference/make_tokenizer_fixtures.py reads them).
pub fn parity_texts() -> Vec<(&'static str, Vec<String>)> {
    let sst2 = shared_data("sst2/test.tsv").lines().skip(1).map(|l| l.split('\t').next().unwrap_or_default().to_owned()).collect();
    let wikitext = shared_data("wikitext-2/test.txt").lines().take(2000).map(str::to_owned).collect();
    vec![("sst2", sst2), ("wikitext", wikitext)]
}

/// FNV-1a 64 of ids as little-endian u32 bytes, in hex (the fixture's digest).
pub fn ids_digest(ids: &[u32]) -> String {
    let hash = ids.iter().flat_map(|id| id.to_le_bytes()).fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

/// Checks `encode` against the fixture tests/fixtures/tokenizers/<name>.json for every text
/// — and, where the fixture has them, every pair of consecutive texts; panics naming the first
/// few that differ.
pub fn check_tokenizer(name: &str, fixture: &[u8], encode: impl Fn(&str, Option<&str>) -> Vec<u32>) {
    let want: std::collections::HashMap<String, Vec<(usize, String)>> = serde_json::from_slice(fixture).expect("fixture JSON");
    for (corpus, texts) in parity_texts() {
        let expected = &want[corpus];
        let mut inputs: Vec<(&str, Option<&str>)> = texts.iter().map(|t| (t.as_str(), None)).collect();
        if expected.len() > texts.len() {
            inputs.extend(texts.windows(2).map(|w| (w[0].as_str(), Some(w[1].as_str()))));
        }
        assert_eq!(expected.len(), inputs.len(), "{name} {corpus}: fixture and data disagree on the number of texts");
        let mut bad = Vec::new();
        for (i, ((text, pair), (len, digest))) in inputs.iter().zip(expected).enumerate() {
            let ids = encode(text, *pair);
            if ids.len() != *len || ids_digest(&ids) != *digest {
                bad.push(format!("  input {i}: {text:?} {pair:?}\n    ids ({}, want {len}): {ids:?}", ids.len()));
            }
        }
        eprintln!("{name} {corpus}: {} inputs, {} differ", inputs.len(), bad.len());
        assert!(
            bad.is_empty(),
            "{name} {corpus}: {} of {} inputs differ from Python tokenizers:\n{}",
            bad.len(),
            inputs.len(),
            bad[..bad.len().min(5)].join("\n")
        );
    }
}
