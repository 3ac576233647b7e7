//! ELMo's input: words as character ids (AllenNLP `ELMoCharacterMapper`), and the word
//! tokenization of raw text.
//!
//! A word is 50 ids: begin-of-word, its first 48 UTF-8 bytes (a multi-byte character may be
//! cut, as in ELMo), end-of-word, then padding; every id is +1 so that 0 can mean "no token".
//! The sentence boundaries `<S>` and `</S>` are begin-of-word, 256 or 257, end-of-word.

/// Character ids per token (the released models' `max_characters_per_token`).
pub const CHARS_PER_TOKEN: usize = 50;
const BOS_CHAR: u32 = 256;
const EOS_CHAR: u32 = 257;
const BOW_CHAR: u32 = 258;
const EOW_CHAR: u32 = 259;
const PAD_CHAR: u32 = 260;
/// The highest id a token can hold (+1 applied): the character embedding needs this + 1 rows.
pub const MAX_CHAR_ID: u32 = PAD_CHAR + 1;

/// The strings ELMo reads as the sentence boundary tokens.
const BOS_WORD: &str = "<S>";
const EOS_WORD: &str = "</S>";

fn boundary(char: u32) -> [u32; CHARS_PER_TOKEN] {
    let mut ids = [PAD_CHAR + 1; CHARS_PER_TOKEN];
    ids[..3].copy_from_slice(&[BOW_CHAR + 1, char + 1, EOW_CHAR + 1]);
    ids
}

/// The sentence-start token's ids.
pub fn bos_ids() -> [u32; CHARS_PER_TOKEN] {
    boundary(BOS_CHAR)
}

/// The sentence-end token's ids.
pub fn eos_ids() -> [u32; CHARS_PER_TOKEN] {
    boundary(EOS_CHAR)
}

/// A word's 50 character ids. `<S>` and `</S>` are the boundary tokens, as in AllenNLP.
pub fn word_ids(word: &str) -> [u32; CHARS_PER_TOKEN] {
    match word {
        BOS_WORD => return bos_ids(),
        EOS_WORD => return eos_ids(),
        _ => {}
    }
    let mut ids = [PAD_CHAR + 1; CHARS_PER_TOKEN];
    let bytes = &word.as_bytes()[..word.len().min(CHARS_PER_TOKEN - 2)];
    ids[0] = BOW_CHAR + 1;
    for (slot, &b) in ids[1..].iter_mut().zip(bytes) {
        *slot = b as u32 + 1;
    }
    ids[bytes.len() + 1] = EOW_CHAR + 1;
    ids
}

/// Punctuation that becomes a token of its own at the edges of a word.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || "“”‘’«»‹›„‚—–…¡¿·•".contains(c)
}

/// Splits raw text into words: at whitespace, and punctuation at the start or end of a word
/// becomes tokens of its own, one character each ("(see, e.g., U.S.)" → `(` `see` `,` `e.g`
/// `.` `,` `U.S` `.` `)`). Punctuation inside a word stays (don't, e-mail, 3.5).
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split_whitespace() {
        let core = chunk.trim_matches(is_punctuation);
        let leading = chunk.find(core).filter(|_| !core.is_empty()).unwrap_or(chunk.len());
        words.extend(chunk[..leading].chars().map(String::from));
        if !core.is_empty() {
            words.push(core.to_string());
            words.extend(chunk[leading + core.len()..].chars().map(String::from));
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_spaces_and_outer_punctuation() {
        let split = |t: &str| split_words(t);
        assert_eq!(split("The cat sat."), ["The", "cat", "sat", "."]);
        assert_eq!(split("  (see, e.g., U.S.)  "), ["(", "see", ",", "e.g", ".", ",", "U.S", ".", ")"]);
        assert_eq!(split("don't re-use 3.5 — «ok»!"), ["don't", "re-use", "3.5", "—", "«", "ok", "»", "!"]);
        assert_eq!(split("...?! café 🙂"), [".", ".", ".", "?", "!", "café", "🙂"]);
        assert!(split(" \t\n").is_empty());
    }

    #[test]
    fn boundaries_and_padding() {
        assert_eq!(bos_ids()[..4], [259, 257, 260, 261]);
        assert_eq!(eos_ids()[..4], [259, 258, 260, 261]);
        assert_eq!(word_ids("<S>"), bos_ids());
        assert_eq!(word_ids("a")[..4], [259, 98, 260, 261]);
        assert_eq!(word_ids("")[..3], [259, 260, 261]);
        assert!(word_ids(&"x".repeat(80)).iter().all(|&id| id <= MAX_CHAR_ID && id > 0));
    }
}
