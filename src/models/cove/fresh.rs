//! CoVe's translation model as a run starts it (McCann et al. 2017): a fresh decoder over a
//! CoVe encoder (a converted MT-LSTM keeps its GloVe vectors fixed), or a fresh model whose
//! source and target vocabularies are learnt from the run's sentence pairs (`--arch cove`).
//!
//! The fresh tensors are drawn uniformly from ±0.1, as OpenNMT-py (which trained the release)
//! initialises every parameter.

use super::translation::{target_ids, DecoderConfig, TARGET_TOKENIZER};
use super::CoveConfig;
use crate::error::{arg_err, Result};
use crate::models::training::formats::tsv_pairs;
use crate::models::training::fresh::{Init, RunData, TrainingFolder};
use crate::models::training::Objective;
use crate::tokenize::{learn_vocabulary, word_level_tokenizer_json, TextTokenizer, WordLevelSpec};
use crate::weights;

/// A fresh source vocabulary's special words, in id order.
pub const SOURCE_SPECIALS: [&str; 2] = ["<pad>", "<unk>"];
/// A target vocabulary's special words, in id order: each target is read as `<s>` … `</s>`.
pub const TARGET_SPECIALS: [&str; 4] = ["<pad>", "<unk>", "<s>", "</s>"];
/// OpenNMT-py's `param_init`: every fresh tensor uniform in ±this.
const PARAM_INIT: f64 = 0.1;
/// A fresh decoder's dropout when the run does not say (OpenNMT-py's 0.3).
pub const DECODER_DROPOUT: f32 = 0.3;
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

/// A fresh translation model (`--arch cove`): source and target vocabularies of at most
/// `--tokenizer words:N` words learnt from the two sides of the run's pairs, vectors (which train) and
/// target embeddings `embedding_size` wide (default the width), the MT-LSTM `width` per
/// direction, the decoder's dropout `dropout` (default 0.3, OpenNMT-py's).
pub fn fresh_translation_model(data: &RunData) -> Result<TrainingFolder> {
    data.fixed_layers(2, "cove")?;
    data.require(Objective::Translation, "--arch cove (CoVe's translation model)")?;
    let size = data.vocab_size()?;
    let pairs = tsv_pairs(data.text.train()?)?;
    let source_json = source_tokenizer_json(&side_vocabulary(&pairs, false, size)?)?;
    let target_json = target_tokenizer_json(&side_vocabulary(&pairs, true, size)?)?;
    let source = TextTokenizer::from_bytes(&source_json)?;
    let width = data.embedding_size.unwrap_or(data.width);
    let (config_json, safetensors) = fresh_encoder(&source, width, data.width, data.seed)?;
    let target = TextTokenizer::from_bytes(&target_json)?;
    let (config_json, safetensors) = with_translation_decoder(&config_json, safetensors, &target, width, data.dropout.unwrap_or(DECODER_DROPOUT), data.seed)?;
    let mut folder = TrainingFolder::new(config_json, safetensors);
    folder.files.extend([("tokenizer.json", source_json), (TARGET_TOKENIZER, target_json)]);
    Ok(folder)
}

/// A CoVe folder as a run on its data trains it. Translation: a translation model as it is;
/// an encoder (`CoveModel`, a converted MT-LSTM) under a fresh decoder over the target words
/// of the run's pairs (`--tokenizer words:N`; target embeddings `--embedding-size` wide,
/// default the encoder's vectors'). A classifier made from a translation model reads no
/// target words: its folder drops them.
pub fn fit_to_data(mut folder: TrainingFolder, run: &RunData) -> Result<TrainingFolder> {
    match run.objective {
        Objective::Translation => {}
        Objective::Classify => {
            folder.take(TARGET_TOKENIZER);
            return Ok(folder);
        }
        _ => return Ok(folder),
    }
    let config_json = folder.require("config.json")?;
    let encoder = CoveConfig::from_json(config_json)?;
    if encoder.head.architecture("CoveModel") == "CoveForTranslation" {
        // Its decoder reads the ids of its own target vocabulary.
        let target = folder
            .file(TARGET_TOKENIZER)
            .ok_or_else(|| arg_err!("train", "the translation model has no {TARGET_TOKENIZER}: its decoder's target vocabulary"))?;
        let (size, want) = (TextTokenizer::from_bytes(target)?.vocab_size(), DecoderConfig::from_json(config_json)?.target_vocab_size);
        if size != want {
            return Err(arg_err!("train", "{TARGET_TOKENIZER} has {size} words, and the decoder's config.json target_vocab_size {want}"));
        }
        return Ok(folder);
    }
    if run.eval_only {
        return Err(arg_err!("train", "--eval-only scores a trained translation model, and this CoVe encoder has no decoder (CoveForTranslation)"));
    }
    if folder.file(TARGET_TOKENIZER).is_none() {
        let size = run.vocab_size()?;
        let pairs = tsv_pairs(run.text.train()?)?;
        folder.set(TARGET_TOKENIZER, target_tokenizer_json(&side_vocabulary(&pairs, true, size)?)?);
    }
    let target = TextTokenizer::from_bytes(folder.require(TARGET_TOKENIZER)?)?;
    let width = run.embedding_size.unwrap_or(encoder.embedding_dim);
    let safetensors = folder.take_required("model.safetensors")?;
    let (config_json, safetensors) =
        with_translation_decoder(folder.require("config.json")?, safetensors, &target, width, run.dropout.unwrap_or(DECODER_DROPOUT), run.seed)?;
    folder.set("config.json", config_json);
    folder.set("model.safetensors", safetensors);
    Ok(folder)
}
