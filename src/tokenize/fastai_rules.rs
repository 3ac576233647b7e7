//! fastai's text rules (`fastai.text.core.defaults.text_proc_rules`), applied to a text before
//! its word-level tokenizer splits it, as fastai applies them before spaCy: `fix_html`,
//! `replace_rep`, `replace_wrep`, `spec_add_spaces`, `rm_useless_spaces`, `replace_all_caps`,
//! `replace_maj`, then `lowercase` — whose `xxbos` the tokenizer.json's template adds instead,
//! only when special tokens are asked for.
//!
//! Each rule is fastai's regular expression written out as a scan, with Python's semantics:
//! `\s` and `\w` are Unicode's, `[A-Z]` and `[a-z]` ASCII, matches leftmost and
//! non-overlapping. `html.unescape` is covered for numeric references and the named ones
//! text corpora carry (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;`); other named
//! references stay as written, and numeric ones Python maps specially (`&#0;`, surrogates,
//! Windows-1252's 128–159) are left as written or decoded as the code point.

const TK_REP: &str = "xxrep";
const TK_WREP: &str = "xxwrep";
const TK_UP: &str = "xxup";
const TK_MAJ: &str = "xxmaj";

/// The text after fastai's rules, without the leading `xxbos`.
pub fn apply(text: &str) -> String {
    let t = fix_html(text);
    let t = replace_rep(&t);
    let t = replace_wrep(&t);
    let t = spec_add_spaces(&t);
    let t = rm_useless_spaces(&t);
    let t = replace_all_caps(&t);
    let t = replace_maj(&t);
    t.to_lowercase().trim().to_string()
}

/// fastai's `fix_html`: its literal replacements in order, then HTML character references.
fn fix_html(text: &str) -> String {
    const REPLACEMENTS: [(&str, &str); 13] = [
        ("#39;", "'"),
        ("amp;", "&"),
        ("#146;", "'"),
        ("nbsp;", " "),
        ("#36;", "$"),
        ("\\n", "\n"),
        ("quot;", "'"),
        ("<br />", "\n"),
        ("\\\"", "\""),
        ("<unk>", "xxunk"),
        (" @.@ ", "."),
        (" @-@ ", "-"),
        ("...", " …"),
    ];
    let replaced = REPLACEMENTS.iter().fold(text.to_string(), |t, (from, to)| t.replace(from, to));
    unescape_html(&replaced)
}

/// HTML character references: `&#NN;`, `&#xHH;` and the common named ones (see the module).
fn unescape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // A reference is short: look for its `;` among the next few bytes only (a text of
        // many `&` and no `;` stays linear).
        let reference = rest.as_bytes().iter().take(11).position(|&b| b == b';').map(|end| (&rest[1..end], end));
        let decoded = reference.and_then(|(name, end)| {
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => match name.strip_prefix('#') {
                    Some(hex) if hex.starts_with(['x', 'X']) => u32::from_str_radix(&hex[1..], 16).ok().and_then(char::from_u32),
                    Some(decimal) => decimal.parse().ok().and_then(char::from_u32),
                    None => None,
                },
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `(\S)(\1{2,})` → ` xxrep n c `: a character repeated three times or more.
fn replace_rep(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        if !c.is_whitespace() && run >= 3 {
            out.push_str(&format!(" {TK_REP} {run} {c} "));
        } else {
            out.extend(std::iter::repeat_n(c, run));
        }
        i += run;
    }
    out
}

/// Python's `\w`: a Unicode letter, digit or connector (underscore).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `(?:\s|^)(\w+)\s+((?:\1\s+)+)\1(\s|\W|$)` → ` xxwrep n w e`: a word repeated three times or
/// more, separated by whitespace only (the whitespace before it is consumed, the character
/// after it kept).
fn replace_wrep(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        // A match starts at the text's start or at a whitespace character (consumed).
        let word_start = if i == 0 && is_word(chars[0]) { Some(0) } else { chars[i].is_whitespace().then_some(i + 1) };
        if let Some((count, end)) = word_start.and_then(|start| repeated_word(&chars, start)) {
            let word: String = chars[word_start.unwrap_or(0)..].iter().take_while(|&&c| is_word(c)).collect();
            out.push_str(&format!(" {TK_WREP} {count} {word} "));
            // `e`: the character after the last repetition, kept as it was.
            if let Some(&e) = chars.get(end) {
                out.push(e);
            }
            i = end + 1;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// At `start`, a word (\w+, all of it) repeated at least three times with only whitespace
/// between: (repetitions, index just past the last one).
fn repeated_word(chars: &[char], start: usize) -> Option<(usize, usize)> {
    let len = chars[start..].iter().take_while(|&&c| is_word(c)).count();
    if len == 0 {
        return None;
    }
    let word = &chars[start..start + len];
    let (mut count, mut end) = (1, start + len);
    loop {
        let gap = chars[end..].iter().take_while(|c| c.is_whitespace()).count();
        let next = end + gap;
        let same = gap > 0 && chars.get(next..next + len) == Some(word) && chars.get(next + len).is_none_or(|&c| !is_word(c));
        if !same {
            break;
        }
        count += 1;
        end = next + len;
    }
    (count >= 3).then_some((count, end))
}

/// `([/#\\])` → ` \1 `.
fn spec_add_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '/' | '#' | '\\') {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// ` {2,}` → ` `.
fn rm_useless_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

/// Each whitespace-delimited token `tok` that `accepts` is replaced by `mark tok.lower()` (or
/// just `tok.lower()` for a single character), as fastai's `(\s|^)(…)(?=(\s|$))` rules do.
fn mark_tokens(text: &str, accepts: impl Fn(&str) -> bool, mark: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if accepts(token) {
            if token.chars().count() > 1 {
                out.push_str(mark);
                out.push(' ');
            }
            out.push_str(&token.to_lowercase());
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut token, &mut out);
            out.push(c);
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// `(\s|^)([A-Z]+[^a-z\s]*)(?=(\s|$))` → `xxup` before a whole token in capitals.
fn replace_all_caps(text: &str) -> String {
    let all_caps = |t: &str| t.starts_with(|c: char| c.is_ascii_uppercase()) && !t.chars().any(|c| c.is_ascii_lowercase());
    mark_tokens(text, all_caps, TK_UP)
}

/// `(\s|^)([A-Z][^A-Z\s]*)(?=(\s|$))` → `xxmaj` before a whole capitalised token.
fn replace_maj(text: &str) -> String {
    let capitalised = |t: &str| {
        let mut chars = t.chars();
        chars.next().is_some_and(|c| c.is_ascii_uppercase()) && !chars.any(|c| c.is_ascii_uppercase())
    };
    mark_tokens(text, capitalised, TK_MAJ)
}

#[cfg(test)]
mod tests {
    /// Texts and fastai 2.7.18's rules applied to them (tests/reference/make_fastai_rules_fixtures.py).
    #[test]
    fn the_rules_match_fastai_s_on_edge_cases() {
        #[derive(serde::Deserialize)]
        struct Case {
            text: String,
            ruled: String,
        }
        let cases: Vec<Case> = serde_json::from_str(include_str!("../../tests/fixtures/tokenizers/fastai_rules.json")).unwrap();
        assert!(cases.len() >= 15);
        for case in cases {
            assert_eq!(super::apply(&case.text), case.ruled, "{:?}", case.text);
        }
    }
}
