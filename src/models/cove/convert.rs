//! The released CoVe MT-LSTM (`wmtlstm-*.pth`: the state dict of `nn.LSTM(300, 300,
//! num_layers=2, bidirectional=True)`, saved as safetensors), a vocabulary and GloVe's text
//! vectors as the folder Sesame loads: config.json (sizes read off the tensors),
//! model.safetensors (`vectors.weight` — the vocabulary's GloVe rows — and the LSTM under
//! `rnn.`, MTLSTM's own names) and tokenizer.json over the vocabulary (GloVe 840B is cased:
//! no lower-casing). Words GloVe lacks get zero vectors (torchtext's default), and are
//! counted in the report.

use std::io::{BufRead, Read};

use serde_json::json;

use super::CoveConfig;
use crate::error::{Result, SesameError};
use crate::tokenize::{word_level_tokenizer_json, WordLevelSpec};
use crate::weights::Checkpoint;

/// The files of a converted folder, and what the GloVe file held.
pub struct CoveFolder {
    pub config_json: Vec<u8>,
    pub safetensors: Vec<u8>,
    pub tokenizer_json: Vec<u8>,
    pub config: CoveConfig,
    /// Vocabulary words GloVe had a vector for.
    pub found: usize,
    /// The first few it lacked.
    pub missing: Vec<String>,
}

/// The longest GloVe line read (a word and 300 numbers take about 3 KB).
const MAX_LINE: usize = 1 << 20;

/// Lines between progress reports while reading GloVe.
pub const PROGRESS_LINES: usize = 200_000;

fn convert_err(message: impl std::fmt::Display) -> SesameError {
    SesameError::Checkpoint(format!("CoVe MT-LSTM state dict: {message}"))
}

/// GloVe vectors of `vocab` words from its text format (a word, then `dim` numbers, spaces
/// between; a few GloVe 840B words contain spaces, so the last `dim` fields are the numbers).
/// Rows of words it lacks stay 0; the first vector of a repeated word wins. Returns the
/// [vocab, dim] rows and which words were found. `progress` hears the lines read so far every
/// [`PROGRESS_LINES`] (GloVe 840B has 2.2 million).
pub fn read_glove(reader: impl BufRead, vocab: &[String], dim: usize, progress: &mut dyn FnMut(usize)) -> Result<(Vec<f32>, Vec<bool>)> {
    let index: std::collections::HashMap<&str, usize> = vocab.iter().enumerate().map(|(i, w)| (w.as_str(), i)).collect();
    let rows = vocab.len().checked_mul(dim).ok_or_else(|| convert_err("the vocabulary's vectors overflow"))?;
    crate::limits::check_host_bytes(|| "the vocabulary's GloVe vectors".into(), rows as u64 * 4)?;
    let (mut vectors, mut found) = (vec![0f32; rows], vec![false; vocab.len()]);
    let mut reader = reader;
    let mut bytes = Vec::new();
    for n in 0.. {
        if n > 0 && n % PROGRESS_LINES == 0 {
            progress(n);
        }
        // One line, read at most MAX_LINE bytes at a time: a file without newlines is refused
        // rather than read whole.
        bytes.clear();
        let read = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut bytes);
        match read.map_err(|e| SesameError::Io(format!("GloVe line {}: {e}", n + 1)))? {
            0 => break,
            len if len > MAX_LINE => {
                return Err(SesameError::InvalidArgument { op: "convert-cove", message: format!("GloVe line {} is longer than {MAX_LINE} bytes", n + 1) })
            }
            _ => {}
        }
        let line = std::str::from_utf8(&bytes)
            .map_err(|e| SesameError::InvalidArgument { op: "convert-cove", message: format!("GloVe line {} is not UTF-8: {e}", n + 1) })?;
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() <= dim {
            return Err(SesameError::InvalidArgument {
                op: "convert-cove",
                message: format!("GloVe line {} has {} fields; a word and {dim} numbers (the LSTM's input size) were expected", n + 1, fields.len()),
            });
        }
        let word = fields[..fields.len() - dim].join(" ");
        let Some(&i) = index.get(word.as_str()) else { continue };
        if found[i] {
            continue;
        }
        for (slot, field) in vectors[i * dim..][..dim].iter_mut().zip(&fields[fields.len() - dim..]) {
            *slot = field
                .parse()
                .map_err(|_| SesameError::InvalidArgument { op: "convert-cove", message: format!("GloVe line {}: `{field}` is not a number", n + 1) })?;
        }
        found[i] = true;
    }
    Ok((vectors, found))
}

/// Converts the MT-LSTM state dict (names with or without `rnn.`), the vocabulary and GloVe.
pub fn convert_cove(
    checkpoint: &Checkpoint,
    vocab: &[String],
    glove: impl BufRead,
    residual_embeddings: bool,
    progress: &mut dyn FnMut(usize),
) -> Result<CoveFolder> {
    let prefix = if checkpoint.contains("rnn.weight_ih_l0") { "rnn." } else { "" };
    let shape = |name: &str| checkpoint.shape(&format!("{prefix}{name}")).map(<[usize]>::to_vec);
    let input = shape("weight_ih_l0").ok_or_else(|| {
        let names: Vec<&str> = checkpoint.names().take(5).collect();
        convert_err(format!("no `weight_ih_l0` (nor `rnn.weight_ih_l0`): is this the MT-LSTM's state dict? Its first names are {names:?}"))
    })?;
    let hh = shape("weight_hh_l0").unwrap_or_default();
    let (Some(&embedding_dim), Some(&hidden_size)) = (input.get(1), hh.get(1)) else {
        return Err(convert_err(format!("`weight_ih_l0` {input:?} and `weight_hh_l0` {hh:?} are not [4H, E] and [4H, H]")));
    };
    let num_layers = (0..).take_while(|k| shape(&format!("weight_ih_l{k}")).is_some()).count();
    let (h, mut out, mut read) = (hidden_size, Vec::new(), std::collections::BTreeSet::new());
    for k in 0..num_layers {
        let layer_input = if k == 0 { embedding_dim } else { 2 * h };
        for suffix in [format!("l{k}"), format!("l{k}_reverse")] {
            for (leaf, want) in [("weight_ih", vec![4 * h, layer_input]), ("weight_hh", vec![4 * h, h]), ("bias_ih", vec![4 * h]), ("bias_hh", vec![4 * h])] {
                let name = format!("{prefix}{leaf}_{suffix}");
                let (values, got) = checkpoint.to_f32(&name).map_err(|_| convert_err(format!("`{name}` is missing (the MT-LSTM is bidirectional)")))?;
                if got != want {
                    return Err(convert_err(format!("`{name}` has shape {got:?}, expected {want:?}")));
                }
                out.push((format!("rnn.{leaf}_{suffix}"), want, values));
                read.insert(name);
            }
        }
    }
    let unknown: Vec<&str> = checkpoint.names().filter(|n| !read.contains(*n)).collect();
    if !unknown.is_empty() {
        return Err(convert_err(format!("tensors an MT-LSTM does not have: {}", unknown.join(", "))));
    }
    let (vectors, found) = read_glove(glove, vocab, embedding_dim, progress)?;
    out.insert(0, ("vectors.weight".into(), vec![vocab.len(), embedding_dim], vectors));
    let config_json = serde_json::to_vec_pretty(&json!({
        "model_type": "cove",
        "architectures": ["CoveModel"],
        "vocab_size": vocab.len(),
        "embedding_dim": embedding_dim,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "residual_embeddings": residual_embeddings,
    }))
    .map_err(convert_err)?;
    let has = |token: &str| vocab.iter().any(|t| t == token);
    let specials: Vec<&str> = ["<unk>", "<pad>", "<s>", "</s>"].into_iter().filter(|t| has(t)).collect();
    let tokenizer_json =
        word_level_tokenizer_json(&WordLevelSpec { vocab, unk: has("<unk>").then_some("<unk>"), special: &specials, ..WordLevelSpec::default() })?;
    let missing = vocab.iter().zip(&found).filter(|(_, &f)| !f).map(|(w, _)| w.clone()).take(10).collect();
    Ok(CoveFolder {
        config: CoveConfig::from_json(&config_json)?,
        config_json,
        safetensors: crate::weights::serialize_f32(&out)?,
        tokenizer_json,
        found: found.iter().filter(|&&f| f).count(),
        missing,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn glove_lines_give_the_vocabulary_s_rows_and_bad_lines_are_errors() {
        let vocab: Vec<String> = ["<unk>", "a", ". . .", "b"].map(String::from).to_vec();
        let text = "a 1 2\nzebra 9 9\n. . . 3 4\na 7 7\n";
        let (rows, found) = super::read_glove(text.as_bytes(), &vocab, 2, &mut |_| {}).unwrap();
        assert_eq!(rows, [0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
        assert_eq!(found, [false, true, true, false]);
        assert!(super::read_glove("a 1\n".as_bytes(), &vocab, 2, &mut |_| {}).unwrap_err().to_string().contains("line 1 has 2 fields"));
        assert!(super::read_glove("a 1 x\n".as_bytes(), &vocab, 2, &mut |_| {}).unwrap_err().to_string().contains("`x` is not a number"));
    }
}
