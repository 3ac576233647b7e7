//! fastai's AWD-LSTM state dicts (a ULMFiT language model or classifier,
//! `learn.model.state_dict()`) as the folder Sesame loads: config.json (sizes read off the tensors), model.safetensors under
//! fastai's names (so `load_state_dict` takes it back), and tokenizer.json over fastai's
//! vocabulary (`itos`). What the conversion does to the tensors:
//! - `0.encoder_dp.emb.weight` (the embedding dropout's view of `0.encoder.weight`) and
//!   `0.rnns.{l}.module.weight_hh_l0` (the weight-dropped copy of `weight_hh_l0_raw` a training
//!   forward leaves) are checked and dropped: the model reads the originals;
//! - `1.decoder.weight` is dropped when it equals the embeddings (`tie_weights`), kept otherwise;
//! - a classifier's BatchNorm `num_batches_tracked` counters are dropped;
//! - everything else is copied as f32; any tensor not named here is an error.

use serde_json::json;

use super::{write_dropouts, AwdLstmConfig, CLASSIFIER_DROPOUTS, LANGUAGE_MODEL_DROPOUTS};
use crate::error::{Result, SesameError};
use crate::tokenize::{read_word_list, word_level_tokenizer_json, TextRules, WordLevelSpec};
use crate::weights::Checkpoint;

/// fastai's special tokens (`defaults.text_spec_tok`), kept whole by the tokenizer.
pub const SPECIAL_TOKENS: [&str; 9] = ["xxunk", "xxpad", "xxbos", "xxeos", "xxfld", "xxrep", "xxwrep", "xxup", "xxmaj"];

/// The token fastai's `make_vocab` pads its vocabularies with.
const FILLER: &str = "xxfake";

/// The files of a converted folder.
pub struct UlmfitFolder {
    pub config_json: Vec<u8>,
    pub safetensors: Vec<u8>,
    pub tokenizer_json: Vec<u8>,
    /// Turns on fastai's text rules.
    pub tokenizer_config_json: Vec<u8>,
    pub config: AwdLstmConfig,
    /// Values in the tensors written.
    pub parameters: usize,
}

fn convert_err(message: impl std::fmt::Display) -> SesameError {
    SesameError::Checkpoint(format!("fastai AWD-LSTM state dict: {message}"))
}

/// fastai's vocabulary (`itos`): one token a line, or a JSON list of strings. fastai's filler
/// `xxfake`, which pads its vocabularies to a multiple of 8, may repeat.
pub fn read_vocab(bytes: &[u8]) -> Result<Vec<String>> {
    read_word_list(bytes, &[FILLER])
}

/// The state dict's tensors, each read once and checked.
struct StateDict<'a> {
    checkpoint: &'a Checkpoint,
    read: std::collections::BTreeSet<String>,
    out: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl StateDict<'_> {
    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.checkpoint.shape(name).map(<[usize]>::to_vec)
    }

    /// Tensor `name`'s values, which must have `shape`.
    fn values(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let (values, actual) = self.checkpoint.to_f32(name).map_err(|_| convert_err(format!("`{name}` is missing")))?;
        if actual != shape {
            return Err(convert_err(format!("`{name}` has shape {actual:?}, expected {shape:?}")));
        }
        self.read.insert(name.to_string());
        Ok(values)
    }

    /// Copies tensor `name` (of `shape`) into the output.
    fn copy(&mut self, name: &str, shape: &[usize]) -> Result<()> {
        let values = self.values(name, shape)?;
        self.out.push((name.to_string(), shape.to_vec(), values));
        Ok(())
    }

    /// Checks a duplicate's shape if present; it is not written.
    fn drop_copy(&mut self, name: &str, shape: &[usize]) -> Result<()> {
        if self.checkpoint.contains(name) {
            self.values(name, shape)?;
        }
        Ok(())
    }
}

/// What a classifier's state dict does not say: fastai's `get_text_classifier` arguments
/// and the labels (`learn.dls.vocab[1]`).
#[derive(Clone, Debug)]
pub struct ClassifierOptions {
    /// `seq_len`: the chunk length its encoder reads a text in (fastai's default 72).
    pub bptt: usize,
    /// `max_len`: it pools over the chunks within the last this many tokens (default 1440).
    pub max_len: usize,
    /// The class names, in the head's output order; default LABEL_0, LABEL_1, …
    pub labels: Option<Vec<String>>,
}

impl Default for ClassifierOptions {
    fn default() -> Self {
        ClassifierOptions { bptt: 72, max_len: 1440, labels: None }
    }
}

/// The sizes of the converted encoder.
struct EncoderSizes {
    vocab_size: usize,
    emb_sz: usize,
    n_hid: usize,
    n_layers: usize,
    /// The embeddings, for telling a tied decoder.
    embeddings: Vec<f32>,
}

/// Copies fastai's `AWD_LSTM` under `prefix` (`0.` of a language model, `0.module.` of a
/// classifier), its layer sizes read off the tensors and checked.
fn convert_encoder(sd: &mut StateDict, prefix: &str, vocab_size: usize) -> Result<EncoderSizes> {
    let name = |leaf: &str| format!("{prefix}{leaf}");
    let table = sd.shape(&name("encoder.weight")).ok_or_else(|| {
        let names: Vec<&str> = sd.checkpoint.names().take(5).collect();
        convert_err(format!("no `{}` (the embeddings of fastai's AWD-LSTM `learn.model`); its first names are {names:?}", name("encoder.weight")))
    })?;
    let &[rows, emb_sz] = table.as_slice() else {
        return Err(convert_err(format!("`{}` has shape {table:?}, expected [vocab, emb_sz]", name("encoder.weight"))));
    };
    if rows != vocab_size {
        return Err(convert_err(format!("the embeddings have {rows} rows but the vocabulary {vocab_size} tokens")));
    }
    let embeddings = sd.values(&name("encoder.weight"), &table)?;
    sd.out.push((name("encoder.weight"), table.clone(), embeddings.clone()));
    sd.drop_copy(&name("encoder_dp.emb.weight"), &table)?;

    // Layers while any tensor of one is present; sizes chained from the embeddings.
    let mut sizes = Vec::new();
    let mut input = emb_sz;
    loop {
        let l = sizes.len();
        let rnn = name(&format!("rnns.{l}"));
        if !sd.checkpoint.names().any(|n| n.starts_with(&format!("{rnn}."))) {
            break;
        }
        let shape = sd.shape(&format!("{rnn}.weight_hh_l0_raw")).ok_or_else(|| convert_err(format!("`{rnn}.weight_hh_l0_raw` is missing")))?;
        if sd.checkpoint.contains(&format!("{rnn}.weight_hh_l0_raw_reverse")) || sd.checkpoint.contains(&format!("{rnn}.module.weight_ih_l0_reverse")) {
            return Err(convert_err(format!("layer {l} is bidirectional (`{rnn}.…_reverse`): the bidirectional AWD-LSTM is not supported")));
        }
        let hidden = shape.get(1).copied().unwrap_or(0);
        let gates = 4 * hidden;
        sd.copy(&format!("{rnn}.weight_hh_l0_raw"), &[gates, hidden])?;
        sd.copy(&format!("{rnn}.module.weight_ih_l0"), &[gates, input])?;
        sd.copy(&format!("{rnn}.module.bias_ih_l0"), &[gates])?;
        sd.copy(&format!("{rnn}.module.bias_hh_l0"), &[gates])?;
        sd.drop_copy(&format!("{rnn}.module.weight_hh_l0"), &[gates, hidden])?;
        sizes.push(hidden);
        input = hidden;
    }
    let n_layers = sizes.len();
    if n_layers == 0 {
        return Err(convert_err(format!("no LSTM layers (`{}`)", name("rnns.0.weight_hh_l0_raw"))));
    }
    // emb_sz → n_hid → … → n_hid → emb_sz.
    let n_hid = if n_layers > 1 { sizes[0] } else { emb_sz };
    let expected = |l: usize| if l + 1 == n_layers { emb_sz } else { n_hid };
    if let Some(l) = (0..n_layers).find(|&l| sizes[l] != expected(l)) {
        return Err(convert_err(format!("layer {l} has {} hidden units; an AWD-LSTM's are {n_hid} and the last one emb_sz {emb_sz}", sizes[l])));
    }
    Ok(EncoderSizes { vocab_size, emb_sz, n_hid, n_layers, embeddings })
}

/// Copies a language model's `LinearDecoder` (`1.decoder.`), if there is one: (present,
/// tie_weights, out_bias). A decoder weight equal to the embeddings is tied (not written).
fn convert_decoder(sd: &mut StateDict, e: &EncoderSizes) -> Result<(bool, bool, bool)> {
    let present = sd.checkpoint.names().any(|n| n.starts_with("1.decoder."));
    let out_bias = sd.checkpoint.contains("1.decoder.bias");
    if out_bias {
        sd.copy("1.decoder.bias", &[e.vocab_size])?;
    }
    let table = [e.vocab_size, e.emb_sz];
    let tied = match sd.checkpoint.contains("1.decoder.weight") {
        true => {
            let decoder = sd.values("1.decoder.weight", &table)?;
            let tied = decoder == e.embeddings;
            if !tied {
                sd.out.push(("1.decoder.weight".into(), table.to_vec(), decoder));
            }
            tied
        }
        false => true,
    };
    Ok((present, tied, out_bias))
}

/// Copies a classifier's `PoolingLinearClassifier` (`1.layers.{i}`: BatchNorm1d `.0`, the
/// bias-free Linear `.2`, or `.1` when that block's dropout was 0); returns the sizes of its
/// hidden layers (`lin_ftrs`), its classes, and whether each block had a dropout.
/// BatchNorm's `num_batches_tracked` (an integer counter fastai's momentum never reads) is
/// dropped.
fn convert_head(sd: &mut StateDict, input: usize) -> Result<(Vec<usize>, usize, Vec<bool>)> {
    let mut sizes = vec![input];
    let mut dropouts = Vec::new();
    while sd.checkpoint.contains(&format!("1.layers.{}.0.weight", sizes.len() - 1)) {
        let (i, width) = (sizes.len() - 1, *sizes.last().expect("starts with the input"));
        let layer = format!("1.layers.{i}");
        for leaf in ["weight", "bias", "running_mean", "running_var"] {
            sd.copy(&format!("{layer}.0.{leaf}"), &[width])?;
        }
        if sd.checkpoint.contains(&format!("{layer}.0.num_batches_tracked")) {
            sd.read.insert(format!("{layer}.0.num_batches_tracked"));
        }
        let linear = [2, 1].map(|j| format!("{layer}.{j}.weight")).into_iter().find(|n| sd.checkpoint.contains(n));
        let linear = linear.ok_or_else(|| convert_err(format!("`{layer}` has a BatchNorm but no Linear (`{layer}.2.weight`)")))?;
        let shape = sd.shape(&linear).unwrap_or_default();
        let &[out, _] = shape.as_slice() else {
            return Err(convert_err(format!("`{linear}` has shape {shape:?}, expected [out, {width}]")));
        };
        sd.copy(&linear, &[out, width])?;
        dropouts.push(linear.ends_with(".2.weight"));
        sizes.push(out);
    }
    if sizes.len() < 2 {
        return Err(convert_err("a classifier without layers (`1.layers.0.0.weight`)"));
    }
    let classes = sizes.pop().expect("two or more");
    sizes.remove(0);
    Ok((sizes, classes, dropouts))
}

/// Converts a ULMFiT language model's, a bare encoder's, or a classifier's state dict
/// (`0.module.encoder.weight`: `classifier` then says what the state dict does not) and its
/// vocabulary.
pub fn convert_ulmfit(checkpoint: &Checkpoint, itos: &[String], classifier: &ClassifierOptions) -> Result<UlmfitFolder> {
    let mut sd = StateDict { checkpoint, read: Default::default(), out: Vec::new() };
    let is_classifier = checkpoint.contains("0.module.encoder.weight");
    let encoder = convert_encoder(&mut sd, if is_classifier { "0.module." } else { "0." }, itos.len())?;
    let mut config = json!({
        "model_type": "awd_lstm",
        "vocab_size": encoder.vocab_size,
        "emb_sz": encoder.emb_sz,
        "n_hid": encoder.n_hid,
        "n_layers": encoder.n_layers,
        "pad_token": itos.iter().position(|t| t == "xxpad").unwrap_or(1),
    });
    // What batches are padded with (the trainer's and the pipelines' key).
    config["pad_token_id"] = config["pad_token"].clone();
    if is_classifier {
        let (lin_ftrs, classes, dropouts) = convert_head(&mut sd, 3 * encoder.emb_sz)?;
        let labels = match &classifier.labels {
            Some(labels) if labels.len() != classes => {
                return Err(convert_err(format!("the head has {classes} classes but {} labels were given", labels.len())));
            }
            Some(labels) => labels.clone(),
            None => (0..classes).map(|i| format!("LABEL_{i}")).collect(),
        };
        if classifier.bptt == 0 || classifier.max_len == 0 {
            return Err(SesameError::InvalidArgument { op: "convert-ulmfit", message: "bptt and max_len must be positive".into() });
        }
        config["architectures"] = json!(["AwdLstmForSequenceClassification"]);
        config["lin_ftrs"] = json!(lin_ftrs);
        config["bptt"] = json!(classifier.bptt);
        config["max_len"] = json!(classifier.max_len);
        config["id2label"] = labels.iter().enumerate().map(|(i, l)| (i.to_string(), json!(l))).collect();
        config["label2id"] = labels.iter().enumerate().map(|(i, l)| (l.clone(), json!(i))).collect();
        // For further fine-tuning: fastai's classifier dropouts, 0 for a block fastai built
        // without one (its Linear at `.1`); the others' p is not in the state dict (0.1, the default).
        write_dropouts(&mut config, &CLASSIFIER_DROPOUTS);
        let p = |dropout: bool| if dropout { 0.1 } else { 0.0 };
        if !dropouts[0] {
            config["output_p"] = json!(0.0);
        }
        config["ps"] = dropouts[1..].iter().map(|&d| json!(p(d))).collect();
    } else {
        if classifier.labels.is_some() {
            return Err(SesameError::InvalidArgument { op: "convert-ulmfit", message: "labels were given, but this is a language model's state dict".into() });
        }
        let (has_decoder, tie_weights, out_bias) = convert_decoder(&mut sd, &encoder)?;
        config["architectures"] = json!([if has_decoder { "AwdLstmForLanguageModeling" } else { "AwdLstmModel" }]);
        config["tie_weights"] = json!(tie_weights);
        config["out_bias"] = json!(out_bias);
        write_dropouts(&mut config, &LANGUAGE_MODEL_DROPOUTS);
    }
    let unknown: Vec<&str> = checkpoint.names().filter(|n| !sd.read.contains(*n)).collect();
    if !unknown.is_empty() {
        return Err(convert_err(format!("tensors an AWD-LSTM does not have: {}", unknown.join(", "))));
    }
    let config_json = serde_json::to_vec_pretty(&config).map_err(convert_err)?;
    let parameters = sd.out.iter().map(|(_, _, v)| v.len()).sum();
    let safetensors = crate::weights::serialize_f32(&sd.out)?;
    let (tokenizer_json, tokenizer_config_json) = fastai_tokenizer_files(itos)?;
    Ok(UlmfitFolder { config: AwdLstmConfig::from_json(&config_json)?, config_json, safetensors, tokenizer_json, tokenizer_config_json, parameters })
}

/// fastai's `fix_html` replacements that WikiText needs: its `<unk>` is fastai's `xxunk`, and
/// its ` @-@ ` and ` @.@ ` join the parts of hyphenated words and decimals (` @,@ ` stays, as
/// in fastai).
pub const FASTAI_REPLACEMENTS: [(&str, &str); 3] = [("<unk>", "xxunk"), (" @-@ ", "-"), (" @.@ ", ".")];

/// How fastai's spaCy splits English, as one regular expression: words, with the
/// contractions spaCy cuts off (`do` `n't`, `it` `'s`, `we` `'re`), and each punctuation
/// character alone. spaCy's exceptions (abbreviations such as `U.S.`, URLs, emoticons) are
/// not reproduced.
pub const FASTAI_WORDS: &str = r"\w+(?=n't\b)|n't\b|'(?:s|re|ve|ll|d|m)\b|\w+|[^\w\s]";

/// tokenizer.json over fastai's vocabulary: its special tokens kept whole, WikiText's marks
/// replaced as fastai's `fix_html` does, text lower-cased and split as [`FASTAI_WORDS`],
/// `xxbos` before each text (fastai's `lowercase` rule adds it), `xxunk` for words outside the
/// vocabulary. The rest of fastai's rules (`xxmaj`, `xxup`, repeats) run before it in Sesame
/// ([`crate::tokenize::fastai_rules`], named by [`fastai_tokenizer_files`]' tokenizer_config.json).
pub fn fastai_tokenizer_json(itos: &[String]) -> Result<Vec<u8>> {
    let has = |token: &str| itos.iter().any(|t| t == token);
    word_level_tokenizer_json(&WordLevelSpec {
        vocab: itos,
        unk: has("xxunk").then_some("xxunk"),
        special: &SPECIAL_TOKENS,
        lowercase: true,
        replacements: &FASTAI_REPLACEMENTS,
        pattern: Some(FASTAI_WORDS),
        bos: has("xxbos").then_some("xxbos"),
        eos: None,
        digits_to_zero: false,
    })
}

/// tokenizer.json ([`fastai_tokenizer_json`]) and the tokenizer_config.json that turns on
/// fastai's text rules.
pub fn fastai_tokenizer_files(itos: &[String]) -> Result<(Vec<u8>, Vec<u8>)> {
    Ok((fastai_tokenizer_json(itos)?, TextRules::Fastai.tokenizer_config_json()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_are_lines_or_a_json_list_without_empty_or_repeated_tokens() {
        assert_eq!(read_vocab(b"xxunk\nxxpad\nthe\r\n,\n").unwrap(), ["xxunk", "xxpad", "the", ","]);
        assert_eq!(read_vocab(br#"["xxunk", "a b", "\n"]"#).unwrap(), ["xxunk", "a b", "\n"]);
        assert!(read_vocab(b"a\n\nb\n").unwrap_err().to_string().contains("entry 1 is empty"));
        assert!(read_vocab(b"a\nb\na\n").unwrap_err().to_string().contains("`a` twice (entries 0 and 2)"));
        assert_eq!(read_vocab(b"a\nxxfake\nxxfake\n").unwrap().len(), 3, "fastai's filler may repeat");
        assert!(read_vocab(b"[1, 2]").is_err());
        assert!(read_vocab(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn the_tokenizer_lowercases_splits_punctuation_and_starts_with_xxbos() {
        let itos: Vec<String> = SPECIAL_TOKENS.iter().map(|s| s.to_string()).chain(["the", "cat", "sat", "."].map(String::from)).collect();
        let tokenizer = crate::tokenize::TextTokenizer::from_bytes(&fastai_tokenizer_json(&itos).unwrap()).unwrap();
        let ids = tokenizer.encode("The cat sat on xxpad.", true).unwrap();
        // xxbos the cat sat xxunk(on) xxpad .
        assert_eq!(ids, [2, 9, 10, 11, 0, 1, 12]);
        // WikiText's marks: <unk> is xxunk, `cat @-@ cat` one hyphenated word (split at "-").
        let ids = tokenizer.encode("<unk> cat @-@ cat", false).unwrap();
        assert_eq!(ids, [0, 10, 0, 10]);
    }

    #[test]
    fn with_fastai_s_rules_capitals_are_marked_and_contractions_split_as_spacy_does() {
        let itos: Vec<String> = SPECIAL_TOKENS.iter().map(|s| s.to_string()).chain(["it", "'s", "do", "n't", "stop", "!"].map(String::from)).collect();
        let (json, config) = fastai_tokenizer_files(&itos).unwrap();
        let tokenizer = crate::tokenize::TextTokenizer::from_files(&json, Some(&config)).unwrap();
        let tokens = |text: &str| tokenizer.encode(text, true).unwrap().iter().map(|&id| itos[id as usize].as_str()).collect::<Vec<_>>().join(" ");
        assert_eq!(tokens("It's DON'T stop!!!"), "xxbos xxmaj it 's xxup do n't stop xxrep xxunk !");
        // Without the rules (tokenizer.json alone, as Python's tokenizers reads it): no marks;
        // a tokenizer_config.json that is not JSON names none either.
        let plain = crate::tokenize::TextTokenizer::from_bytes(&json).unwrap();
        assert_eq!(plain.encode("It's", true).unwrap(), [2, 9, 10]);
        let garbled = crate::tokenize::TextTokenizer::from_files(&json, Some(b"{not json")).unwrap();
        assert_eq!(garbled.encode("It's", true).unwrap(), [2, 9, 10]);
        assert!(crate::tokenize::TextTokenizer::from_files(&json, Some(br#"{"text_rules": "moses"}"#)).is_err(), "unknown rules");
    }
}
