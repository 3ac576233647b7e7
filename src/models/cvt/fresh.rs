//! CVT's tagger as a fresh run starts it (`--arch cvt`): a word vocabulary learnt from the
//! run's labelled and unlabelled text (cvt_text's special words first: `<pad>`, `<unk>`, `<start>`, `<end>`,
//! `<missing>`; words lower-cased with every digit 0), the tagger sized from one width, and
//! TensorFlow's initialisation as cvt_text gets it — Glorot-uniform matrices (each LSTM
//! direction's [input; state] kernel as one), zero biases but the forget gates' 1
//! (`LSTMCell`'s `forget_bias`), `emb_scale` 1.

use super::train::{LABELED_DROPOUT, UNLABELED_DROPOUT};
use super::{CvtConfig, ModuleInput, AUXILIARY, CHAR_VOCAB};
use crate::error::{arg_err, Result};
use crate::models::family::probability_json;
use crate::models::training::formats::{conll_sentences, label_names};
use crate::models::training::fresh::{with_labels, Init, RunData, TrainingFolder};
use crate::models::training::Objective;
use crate::tokenize::{learn_vocabulary, word_level_tokenizer_json, WordLevelSpec};

/// cvt_text's special words, in its order.
pub const SPECIAL_WORDS: [&str; 5] = ["<pad>", "<unk>", "<start>", "<end>", "<missing>"];

/// tokenizer.json of a CVT vocabulary: words split as `Whitespace` splits them, lower-cased,
/// digits read as 0, each sentence between `<start>` and `<end>`.
pub fn cvt_tokenizer_json(vocab: &[String]) -> Result<Vec<u8>> {
    word_level_tokenizer_json(&WordLevelSpec {
        vocab,
        unk: Some("<unk>"),
        special: &SPECIAL_WORDS,
        lowercase: true,
        replacements: &[],
        pattern: None,
        bos: Some("<start>"),
        eos: Some("<end>"),
        digits_to_zero: true,
    })
}

/// A CVT vocabulary of at most `size` learnt from `lines`.
pub fn cvt_vocabulary(lines: impl Iterator<Item = String>, size: usize) -> Result<Vec<String>> {
    let specials: Vec<String> = SPECIAL_WORDS.iter().map(|w| w.to_string()).collect();
    learn_vocabulary(&cvt_tokenizer_json(&specials)?, lines, size, &SPECIAL_WORDS)
}

/// A fresh tagger's files: config.json, model.safetensors and tokenizer.json.
pub struct FreshTagger {
    pub config_json: Vec<u8>,
    pub safetensors: Vec<u8>,
    pub tokenizer_json: Vec<u8>,
}

/// A fresh tagger over `vocab` for the tags `labels`: word embeddings `word_embedding_size`
/// wide, LSTM cells 2·`width` then `width`, projections and modules `width` wide (cvt_text's
/// 1024 / 512 at width 512), the character CNN cvt_text's (50-wide characters, 100 filters
/// of widths 2, 3 and 4, words cut at 20 bytes).
pub fn fresh_tagger(vocab: &[String], labels: &[String], word_embedding_size: usize, width: usize, seed: u64) -> Result<FreshTagger> {
    if labels.is_empty() {
        return Err(arg_err!("model", "a tagger needs tags"));
    }
    let config = serde_json::json!({
        "model_type": "cvt",
        "vocab_size": vocab.len(),
        "word_embedding_size": word_embedding_size,
        "lstm_sizes": [2 * width, width],
        "projection_size": width,
        "module_size": width,
        "pad_token_id": 0,
        // Stated, so that --drop-mult has them to multiply.
        "labeled_dropout": probability_json(LABELED_DROPOUT),
        "unlabeled_dropout": probability_json(UNLABELED_DROPOUT),
    });
    let config_json = with_labels(config, "CvtForTokenClassification", labels)?;
    let c = CvtConfig::from_json(&config_json)?;
    let mut init = Init::new(seed);
    let glorot = |fan_in: usize, fan_out: usize| (6.0 / (fan_in + fan_out) as f64).sqrt();
    init.uniform("word_embeddings.weight".into(), vec![c.vocab_size, c.word_embedding_size], glorot(c.vocab_size, c.word_embedding_size))?;
    init.constant("emb_scale".into(), 1, 1.0);
    init.uniform("char_embeddings.weight".into(), vec![CHAR_VOCAB, c.char_embedding_size], glorot(CHAR_VOCAB, c.char_embedding_size))?;
    for (k, &w) in c.char_filter_widths.iter().enumerate() {
        init.uniform(format!("char_cnn.{k}.weight"), vec![c.char_filters, c.char_embedding_size, w], glorot(w * c.char_embedding_size, w * c.char_filters))?;
        init.constant(format!("char_cnn.{k}.bias"), c.char_filters, 0.0);
    }
    let p = c.projection_size;
    let mut input = c.word_repr_size();
    for (k, &cell) in c.lstm_sizes.iter().enumerate() {
        for suffix in ["", "_reverse"] {
            let name = |part: &str| format!("encoder.{k}.{part}{suffix}");
            // TF's kernel is [input + proj, 4·cell], initialised as one matrix.
            let bound = glorot(input + p, 4 * cell);
            init.uniform(name("weight_ih"), vec![4 * cell, input], bound)?;
            init.uniform(name("weight_hh"), vec![4 * cell, p], bound)?;
            let bias: Vec<f32> = (0..4 * cell).map(|i| if (cell..2 * cell).contains(&i) { 1.0 } else { 0.0 }).collect();
            init.tensors.push((name("bias"), vec![4 * cell], bias));
            init.uniform(name("weight_hr"), vec![p, cell], glorot(cell, p))?;
        }
        input = 2 * p;
    }
    let labels = c.head.num_labels();
    for module in std::iter::once("primary").chain(AUXILIARY) {
        let input = ModuleInput::of(module).width(p);
        init.uniform(format!("{module}.hidden.weight"), vec![c.module_size, input], glorot(input, c.module_size))?;
        init.constant(format!("{module}.hidden.bias"), c.module_size, 0.0);
        init.uniform(format!("{module}.output.weight"), vec![labels, c.module_size], glorot(c.module_size, labels))?;
        init.constant(format!("{module}.output.bias"), labels, 0.0);
    }
    Ok(FreshTagger { config_json, safetensors: init.serialize()?, tokenizer_json: cvt_tokenizer_json(vocab)? })
}

/// A fresh tagger for the run's tags (of its training and held-out parts: a held-out tag the
/// training part lacks is a class the model never learns, as cvt_text maps them, not an
/// error), over a vocabulary of the words of its CoNLL sentences and its unlabelled text;
/// word embeddings `embedding_size` wide (default the width).
pub fn fresh_tagger_from_data(data: &RunData) -> Result<TrainingFolder> {
    data.fixed_layers(2, "cvt")?;
    data.require(Objective::TokenClassify, "a fresh CVT tagger")?;
    let size = data.vocab_size()?;
    let train = data.text.train()?;
    let mut lines: Vec<String> = conll_sentences(train)?.iter().map(|words| words.iter().map(|(word, ..)| *word).collect::<Vec<_>>().join(" ")).collect();
    lines.extend(data.text.unlabeled()?.into_iter().flat_map(str::lines).map(String::from));
    let vocab = cvt_vocabulary(lines.into_iter(), size)?;
    let mut tags = label_names(train)?;
    if let Some(held_out) = data.text.held_out()? {
        tags.extend(label_names(held_out)?);
        tags.sort_unstable();
        tags.dedup();
    }
    let fresh = fresh_tagger(&vocab, &tags, data.embedding_size.unwrap_or(data.width), data.width, data.seed)?;
    let mut folder = TrainingFolder::new(fresh.config_json, fresh.safetensors);
    folder.files.push(("tokenizer.json", fresh.tokenizer_json));
    Ok(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_tagger_loads_and_reads_its_vocabulary() {
        let lines = ["The cat sat in 2019 .", "the dog sat"].map(String::from);
        let vocab = cvt_vocabulary(lines.into_iter(), 20).unwrap();
        assert_eq!(&vocab[..5], SPECIAL_WORDS);
        // Lower-cased, digits 0, the most frequent first.
        assert_eq!(&vocab[5..7], ["sat", "the"]);
        assert!(vocab.contains(&"0000".to_string()));
        let labels = ["DET".to_string(), "NOUN".into()];
        let fresh = fresh_tagger(&vocab, &labels, 8, 6, 1).unwrap();
        let gpu = crate::gpu::testing::devices()[0];
        let checkpoint = crate::weights::Checkpoint::from_bytes(fresh.safetensors).unwrap();
        let model = crate::models::cvt::CvtModel::load(&fresh.config_json, &crate::weights::Weights::new(gpu, &checkpoint)).unwrap();
        assert_eq!(model.config.lstm_sizes, [12, 6]);
        // The forget gates start at 1.
        let (bias, _) = checkpoint.to_f32("encoder.1.bias_reverse").unwrap();
        assert_eq!((bias[0], bias[6], bias[11], bias[12]), (0.0, 1.0, 1.0, 0.0));
        let tokenizer = crate::tokenize::TextTokenizer::from_bytes(&fresh.tokenizer_json).unwrap();
        let ids = tokenizer.encode("The CAT on 1999", true).unwrap();
        let id = |w: &str| tokenizer.token_to_id(w).unwrap();
        assert_eq!(ids, [id("<start>"), id("the"), id("cat"), id("<unk>"), id("0000"), id("<end>")]);
        assert!(fresh_tagger(&vocab, &[], 8, 6, 1).is_err());
    }
}
