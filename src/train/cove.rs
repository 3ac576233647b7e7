//! CoVe's training (McCann et al. 2017). Translation: sentence pairs from a TSV
//! (`source<TAB>target` a line), their batches, and the translation model as a run starts it
//! — a fresh decoder over a CoVe encoder (a converted MT-LSTM keeps its GloVe vectors fixed),
//! or a fresh model whose vocabularies are learnt from the pairs (`--arch cove`).
//!
//! The translation model's fresh tensors are drawn uniformly from ±0.1, as OpenNMT-py (which
//! trained the release) initialises every parameter.

use super::data::{BatchSource, EpochSampler};
use crate::error::{arg_err, Result};
use crate::models::cove::translation::DecoderConfig;
use crate::models::cove::CoveConfig;
use crate::models::training::fresh::Init;
use crate::models::training::Batch;
use crate::ops::cross_entropy::DEFAULT_IGNORE_INDEX;
use crate::tokenize::{learn_vocabulary, word_level_tokenizer_json, TextTokenizer, WordLevelSpec};
use crate::weights;

/// A translation model's target vocabulary, beside the source's tokenizer.json.
pub const TARGET_TOKENIZER: &str = "target_tokenizer.json";

/// A fresh source vocabulary's special words, in id order.
pub const SOURCE_SPECIALS: [&str; 2] = ["<pad>", "<unk>"];
/// A target vocabulary's special words, in id order: each target is read as `<s>` … `</s>`.
pub const TARGET_SPECIALS: [&str; 4] = ["<pad>", "<unk>", "<s>", "</s>"];
/// OpenNMT-py's `param_init`: every fresh tensor uniform in ±this.
const PARAM_INIT: f64 = 0.1;
/// The pairs of a TSV, one `source<TAB>target` a line (blank lines and a `source<TAB>target`
/// header skipped); a line without exactly one tab, or with an empty side, is an error
/// naming it.
pub fn tsv_pairs(text: &str) -> Result<Vec<(&str, &str)>> {
    let op = "translation data";
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || (i == 0 && line.trim().eq_ignore_ascii_case("source\ttarget")) {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [source, target] = fields[..] else {
            return Err(arg_err!(op, "line {} has {} tab-separated fields; each line is source<TAB>target", i + 1, fields.len()));
        };
        for (side, words) in [("source", source), ("target", target)] {
            if words.trim().is_empty() {
                return Err(arg_err!(op, "line {} has an empty {side} sentence", i + 1));
            }
        }
        pairs.push((source, target));
    }
    if pairs.is_empty() {
        return Err(arg_err!(op, "no sentence pairs (each line is source<TAB>target)"));
    }
    Ok(pairs)
}

fn tokenizer_json(vocab: &[String], special: &[&str], target: bool) -> Result<Vec<u8>> {
    word_level_tokenizer_json(&WordLevelSpec {
        vocab,
        unk: Some("<unk>"),
        special,
        lowercase: true,
        replacements: &[],
        pattern: None,
        bos: target.then_some("<s>"),
        eos: target.then_some("</s>"),
        digits_to_zero: false,
    })
}

/// tokenizer.json of a fresh source vocabulary: words split as `Whitespace` splits them,
/// lower-cased.
pub fn source_tokenizer_json(vocab: &[String]) -> Result<Vec<u8>> {
    tokenizer_json(vocab, &SOURCE_SPECIALS, false)
}

/// target_tokenizer.json: as the source's, each sentence between `<s>` and `</s>`.
pub fn target_tokenizer_json(vocab: &[String]) -> Result<Vec<u8>> {
    tokenizer_json(vocab, &TARGET_SPECIALS, true)
}

/// A vocabulary of at most `size` words learnt from one side of `pairs` (`target`: the
/// second), its special words first.
pub fn side_vocabulary(pairs: &[(&str, &str)], target: bool, size: usize) -> Result<Vec<String>> {
    let specials: &[&str] = if target { &TARGET_SPECIALS } else { &SOURCE_SPECIALS };
    let template: Vec<String> = specials.iter().map(|w| w.to_string()).collect();
    let lines = pairs.iter().map(|&(source, target_words)| if target { target_words } else { source }.to_string());
    learn_vocabulary(&tokenizer_json(&template, specials, target)?, lines, size, specials)
}

/// The ids a translation model's config names in its target vocabulary: `<s>`, `</s>`.
fn target_ids(target: &TextTokenizer) -> Result<(u32, u32)> {
    let id = |word: &str| target.token_to_id(word).ok_or_else(|| arg_err!("model", "the target vocabulary has no {word}: each target is read as <s> … </s>"));
    Ok((id("<s>")?, id("</s>")?))
}

/// A CoVe encoder's files with a fresh decoder over `target` (target_tokenizer.json's
/// vocabulary) `target_embedding_dim` wide: `CoveForTranslation`, with `dropout`; a folder
/// that already translates is returned as it is.
pub fn with_translation_decoder(
    config_json: &[u8],
    safetensors: Vec<u8>,
    target: &TextTokenizer,
    target_embedding_dim: usize,
    dropout: f32,
    seed: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let op = "model";
    let encoder = CoveConfig::from_json(config_json)?;
    let mut config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!(op, "config.json: {e}"))?;
    match encoder.head.architecture("CoveModel") {
        "CoveForTranslation" => return Ok((config_json.to_vec(), safetensors)),
        "CoveModel" => {}
        other => return Err(arg_err!(op, "a translation decoder goes on a CoVe encoder (CoveModel), not `{other}`")),
    }
    if encoder.residual_embeddings {
        return Err(arg_err!(op, "the decoder attends over the MT-LSTM's output; this encoder's config adds the word vectors to it (residual_embeddings)"));
    }
    let (start, eos) = target_ids(target)?;
    config["architectures"] = serde_json::json!(["CoveForTranslation"]);
    config["target_vocab_size"] = target.vocab_size().into();
    config["target_embedding_dim"] = target_embedding_dim.into();
    config["decoder_layers"] = 2.into();
    config["decoder_start_token_id"] = start.into();
    config["eos_token_id"] = eos.into();
    config["dropout"] = dropout.into();
    if config.get("train_vectors").is_none() {
        config["train_vectors"] = false.into();
    }
    let config_json = serde_json::to_vec_pretty(&config).map_err(|e| arg_err!(op, "config.json: {e}"))?;
    let decoder = DecoderConfig::from_json(&config_json)?;
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    let (d, v, e) = (2 * encoder.hidden_size, decoder.target_vocab_size, decoder.target_embedding_dim);
    init.uniform("decoder.embeddings.weight".into(), vec![v, e], PARAM_INIT)?;
    for k in 0..decoder.decoder_layers {
        let input = if k == 0 { e + d } else { d };
        init.uniform(format!("decoder.rnn.weight_ih_l{k}"), vec![4 * d, input], PARAM_INIT)?;
        init.uniform(format!("decoder.rnn.weight_hh_l{k}"), vec![4 * d, d], PARAM_INIT)?;
        init.uniform(format!("decoder.rnn.bias_ih_l{k}"), vec![4 * d], PARAM_INIT)?;
        init.uniform(format!("decoder.rnn.bias_hh_l{k}"), vec![4 * d], PARAM_INIT)?;
    }
    for (name, inputs) in [("linear_in", d), ("linear_out", 2 * d)] {
        init.uniform(format!("decoder.attention.{name}.weight"), vec![d, inputs], PARAM_INIT)?;
        init.uniform(format!("decoder.attention.{name}.bias"), vec![d], PARAM_INIT)?;
    }
    init.uniform("generator.weight".into(), vec![v, d], PARAM_INIT)?;
    init.uniform("generator.bias".into(), vec![v], PARAM_INIT)?;
    Ok((config_json, init.serialize()?))
}

/// A fresh MT-LSTM encoder (`CoveModel`) over a source vocabulary of `source_vocab` words:
/// vectors `embedding_dim` wide that train (they are not GloVe's), two biLSTM layers of
/// `hidden` per direction.
pub fn fresh_encoder(source: &TextTokenizer, embedding_dim: usize, hidden: usize, seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let pad = source.token_to_id("<pad>").ok_or_else(|| arg_err!("model", "the source vocabulary has no <pad> to pad batches with"))?;
    let config = serde_json::json!({
        "model_type": "cove",
        "architectures": ["CoveModel"],
        "vocab_size": source.vocab_size(),
        "embedding_dim": embedding_dim,
        "hidden_size": hidden,
        "num_layers": 2,
        "residual_embeddings": false,
        "pad_token_id": pad,
        "train_vectors": true,
    });
    let config_json = serde_json::to_vec_pretty(&config).map_err(|e| arg_err!("model", "config.json: {e}"))?;
    let c = CoveConfig::from_json(&config_json)?;
    // Its own stream, apart from the decoder's.
    let mut init = Init::new(seed ^ 0xC0FE);
    init.uniform("vectors.weight".into(), vec![c.vocab_size, c.embedding_dim], PARAM_INIT)?;
    for k in 0..c.num_layers {
        let input = if k == 0 { c.embedding_dim } else { 2 * c.hidden_size };
        for suffix in ["", "_reverse"] {
            init.uniform(format!("rnn.weight_ih_l{k}{suffix}"), vec![4 * c.hidden_size, input], PARAM_INIT)?;
            init.uniform(format!("rnn.weight_hh_l{k}{suffix}"), vec![4 * c.hidden_size, c.hidden_size], PARAM_INIT)?;
            init.uniform(format!("rnn.bias_ih_l{k}{suffix}"), vec![4 * c.hidden_size], PARAM_INIT)?;
            init.uniform(format!("rnn.bias_hh_l{k}{suffix}"), vec![4 * c.hidden_size], PARAM_INIT)?;
        }
    }
    Ok((config_json, init.serialize()?))
}

/// How translation batches are laid out: the sources' and the decoder inputs' padding ids,
/// the batch size and the longest source (and decoder input) kept.
#[derive(Clone, Copy, Debug)]
pub struct PairBatches {
    pub source_pad: u32,
    pub target_pad: u32,
    pub batch: usize,
    pub seq: usize,
}

/// Sentence pairs as ids: each source as the source tokenizer encodes it, each target as
/// `<s>` y₁ … yₙ `</s>` by the target tokenizer, both cut to `seq` (a cut target keeps its
/// `</s>`).
pub struct TranslationPairs {
    sources: Vec<Vec<u32>>,
    targets: Vec<Vec<u32>>,
    /// How many pairs were cut to `seq` tokens on either side.
    pub truncated: usize,
    layout: PairBatches,
    sampler: EpochSampler,
}

impl TranslationPairs {
    /// The pairs of `text` (see [`tsv_pairs`]); training batches are shuffled by
    /// `shuffle_seed` epoch after epoch, held-out ones (None) cover the file once in order.
    pub fn from_tsv(text: &str, source: &TextTokenizer, target: &TextTokenizer, layout: PairBatches, shuffle_seed: Option<u64>) -> Result<TranslationPairs> {
        let op = "translation data";
        if layout.batch == 0 || layout.seq < 2 {
            return Err(arg_err!(op, "need a positive batch size and sequences of at least 2 tokens (got {} × {})", layout.batch, layout.seq));
        }
        let (start, eos) = target_ids(target)?;
        let pairs = tsv_pairs(text)?;
        let (mut sources, mut targets) = (Vec::with_capacity(pairs.len()), Vec::with_capacity(pairs.len()));
        let mut truncated = 0;
        for (i, (s, t)) in pairs.iter().enumerate() {
            let mut source_ids = source.encode(s, true)?;
            let mut target_ids = target.encode(t, true)?;
            if source_ids.is_empty() {
                return Err(arg_err!(op, "pair {}'s source `{s}` has no tokens", i + 1));
            }
            if target_ids.len() < 3 || target_ids[0] != start || target_ids[target_ids.len() - 1] != eos {
                return Err(arg_err!(op, "pair {}'s target `{t}` is not read as <s> words </s> by the target tokenizer", i + 1));
            }
            truncated += (source_ids.len() > layout.seq || target_ids.len() > layout.seq + 1) as usize;
            source_ids.truncate(layout.seq);
            if target_ids.len() > layout.seq + 1 {
                target_ids.truncate(layout.seq);
                target_ids.push(eos);
            }
            sources.push(source_ids);
            targets.push(target_ids);
        }
        let sampler = EpochSampler::new(sources.len(), shuffle_seed, layout.batch);
        Ok(TranslationPairs { sources, targets, truncated, layout, sampler })
    }
}

impl BatchSource for TranslationPairs {
    fn batches(&self) -> Option<usize> {
        self.sampler.batches()
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.sampler.batches_per_epoch())
    }

    /// The sources padded to the batch's longest (attention mask), the targets as decoder
    /// inputs (all but `</s>`) and labels (all but `<s>`, −100 past the end).
    fn batch(&self, index: u64) -> Result<Batch> {
        let picked = self.sampler.pick(index)?;
        let sources: Vec<&[u32]> = picked.iter().map(|&i| self.sources[i].as_slice()).collect();
        let padded = Batch::padded(&sources, self.layout.source_pad);
        let target_seq = picked.iter().map(|&i| self.targets[i].len() - 1).max().unwrap_or(1);
        let (mut decoder_input_ids, mut labels) = (Vec::with_capacity(picked.len() * target_seq), Vec::with_capacity(picked.len() * target_seq));
        for &i in &picked {
            let target = &self.targets[i];
            let n = target.len() - 1;
            decoder_input_ids.extend(target[..n].iter().copied().chain(std::iter::repeat(self.layout.target_pad)).take(target_seq));
            labels.extend(target[1..].iter().map(|&id| id as i64).chain(std::iter::repeat(DEFAULT_IGNORE_INDEX)).take(target_seq));
        }
        Ok(Batch { labels, decoder_input_ids: Some(decoder_input_ids), token_type_ids: None, ..padded })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_and_bad_lines_named() {
        assert_eq!(tsv_pairs("a b\tx y\n\nc\tz\n").unwrap(), [("a b", "x y"), ("c", "z")]);
        assert_eq!(tsv_pairs("Source\tTarget\na\tb\n").unwrap(), [("a", "b")]);
        let err = |text: &str| tsv_pairs(text).unwrap_err().to_string();
        assert!(err("a\tb\nc d\n").contains("line 2 has 1 tab-separated fields"), "{}", err("a\tb\nc d\n"));
        assert!(err("a\tb\tc\n").contains("line 1 has 3"));
        assert!(err("a\t \n").contains("line 1 has an empty target"));
        assert!(err("\n\n").contains("no sentence pairs"));
    }

    #[test]
    fn batches_pad_sources_and_shift_targets() {
        let text = "the cat sat\tdie katze saß\na dog\thund\n";
        let pairs = tsv_pairs(text).unwrap();
        let source_vocab = side_vocabulary(&pairs, false, 20).unwrap();
        let target_vocab = side_vocabulary(&pairs, true, 20).unwrap();
        assert_eq!(&target_vocab[..4], TARGET_SPECIALS);
        let source = TextTokenizer::from_bytes(&source_tokenizer_json(&source_vocab).unwrap()).unwrap();
        let target = TextTokenizer::from_bytes(&target_tokenizer_json(&target_vocab).unwrap()).unwrap();
        let layout = PairBatches { source_pad: 0, target_pad: 0, batch: 2, seq: 8 };
        let data = TranslationPairs::from_tsv(text, &source, &target, layout, None).unwrap();
        let b = data.batch(0).unwrap();
        let (s, t) = (|w: &str| source.token_to_id(w).unwrap(), |w: &str| target.token_to_id(w).unwrap() as i64);
        assert_eq!((b.batch, b.seq), (2, 3));
        assert_eq!(b.input_ids, [s("the"), s("cat"), s("sat"), s("a"), s("dog"), 0]);
        assert_eq!(b.attention_mask.unwrap(), [1, 1, 1, 1, 1, 0]);
        let start = t("<s>") as u32;
        assert_eq!(b.decoder_input_ids.unwrap(), [start, t("die") as u32, t("katze") as u32, t("saß") as u32, start, t("hund") as u32, 0, 0]);
        assert_eq!(b.labels, [t("die"), t("katze"), t("saß"), t("</s>"), t("hund"), t("</s>"), -100, -100]);
        // A target longer than the batch's sequences keeps its </s>.
        let short = TranslationPairs::from_tsv(text, &source, &target, PairBatches { seq: 2, ..layout }, None).unwrap();
        assert_eq!(short.truncated, 1);
        let short = short.batch(0).unwrap();
        assert_eq!(short.labels[..2], [t("die"), t("</s>")]);
    }
}
