//! ULMFiT's models as its stages start them (Howard & Ruder 2018):
//! - stage 1, a fresh AWD-LSTM language model ([`fresh_language_model`]) over a vocabulary
//!   learnt from the corpus ([`fastai_vocabulary`]), initialised as fastai does: embeddings
//!   U(±0.1), each LSTM PyTorch's U(±1/√H), the tied decoder's bias 0;
//! - stage 2, that model over the target corpus's own vocabulary ([`with_target_vocabulary`],
//!   fastai's `match_embeds`): a word both vocabularies have keeps its embedding and decoder
//!   bias, a new word gets their means;
//! - stage 3, the fine-tuned language model's encoder under a fresh pooling classifier, as
//!   fastai's `text_classifier_learner` builds it — the encoder's tensors move under
//!   `0.module.` (`SentenceEncoder`), the decoder is dropped, the dropouts are fastai's
//!   classifier's (`awd_lstm_clas_config`), and each head block is a
//!   BatchNorm1d (weight 1, bias 10⁻³, running mean 0 and variance 1) and a bias-free Linear
//!   drawn as PyTorch's default, U(±1/√in).

use super::convert::{fastai_tokenizer_files, fastai_tokenizer_json, UlmfitFolder, SPECIAL_TOKENS};
use super::{write_dropouts, AwdLstmConfig, CLASSIFIER_DROPOUTS, LANGUAGE_MODEL_DROPOUTS};
use crate::error::{arg_err, Result};
use crate::models::training::fresh::{parse_config, with_labels, Init, RunData, TrainingFolder, DEFAULT_LAYERS};
use crate::models::training::Objective;
use crate::tokenize::{fastai_rules, learn_vocabulary, TextTokenizer};
use crate::weights;

/// fastai's vocabulary of at most `size` tokens learnt from `text` (blank lines skipped): its
/// nine special tokens, then the most frequent words of the lines after fastai's text rules,
/// as [`fastai_tokenizer_json`] splits them.
pub fn fastai_vocabulary(text: &str, size: usize) -> Result<Vec<String>> {
    // Words as the folder's tokenizer will see them: after fastai's rules, its tokenizer.json's
    // normalizer and split; the special tokens the rules write keep their own ids, first.
    let specials: Vec<String> = SPECIAL_TOKENS.iter().map(|t| t.to_string()).collect();
    learn_vocabulary(&fastai_tokenizer_json(&specials)?, text.lines().map(fastai_rules::apply), size, &SPECIAL_TOKENS)
}

/// A fresh AWD-LSTM language model over `itos`: config.json (fastai's language-model
/// dropouts), model.safetensors, and tokenizer.json with the tokenizer_config.json that turns
/// on fastai's text rules.
pub fn fresh_language_model(itos: &[String], n_layers: usize, n_hid: usize, emb_sz: usize, seed: u64) -> Result<UlmfitFolder> {
    let pad = itos.iter().position(|t| t == "xxpad").unwrap_or(1);
    let mut config = serde_json::json!({
        "model_type": "awd_lstm",
        "architectures": ["AwdLstmForLanguageModeling"],
        "vocab_size": itos.len(),
        "emb_sz": emb_sz,
        "n_hid": n_hid,
        "n_layers": n_layers,
        "pad_token": pad,
        "pad_token_id": pad,
    });
    write_dropouts(&mut config, &LANGUAGE_MODEL_DROPOUTS);
    let config_json = serde_json::to_vec_pretty(&config).map_err(|e| arg_err!("model", "{e}"))?;
    let config = AwdLstmConfig::from_json(&config_json)?;
    let mut init = Init::new(seed);
    init.uniform("0.encoder.weight".into(), vec![itos.len(), emb_sz], 0.1)?;
    for l in 0..n_layers {
        let (input, hidden) = config.layer_sizes(l);
        let bound = 1.0 / (hidden as f64).sqrt();
        let rnn = format!("0.rnns.{l}");
        init.uniform(format!("{rnn}.weight_hh_l0_raw"), vec![4 * hidden, hidden], bound)?;
        init.uniform(format!("{rnn}.module.weight_ih_l0"), vec![4 * hidden, input], bound)?;
        init.uniform(format!("{rnn}.module.bias_ih_l0"), vec![4 * hidden], bound)?;
        init.uniform(format!("{rnn}.module.bias_hh_l0"), vec![4 * hidden], bound)?;
    }
    init.constant("1.decoder.bias".into(), itos.len(), 0.0);
    let (tokenizer_json, tokenizer_config_json) = fastai_tokenizer_files(itos)?;
    let parameters = init.tensors.iter().map(|(_, _, values)| values.len()).sum();
    Ok(UlmfitFolder { config_json, safetensors: init.serialize()?, tokenizer_json, tokenizer_config_json, config, parameters })
}

/// Stage 1 as a run starts it (`--arch awd-lstm`): a fresh language model over fastai's
/// vocabulary of the run's training text, `layers` LSTMs `width` wide, embeddings
/// `embedding_size` wide (default the width).
pub fn fresh_language_model_from_data(data: &RunData) -> Result<TrainingFolder> {
    let size = data.vocab_size()?;
    let itos = fastai_vocabulary(data.text.train()?, size)?;
    let width = data.width;
    let fresh = fresh_language_model(&itos, data.layers.unwrap_or(DEFAULT_LAYERS), width, data.embedding_size.unwrap_or(width), data.seed)?;
    let mut folder = TrainingFolder::new(fresh.config_json, fresh.safetensors);
    folder.files.extend([("tokenizer.json", fresh.tokenizer_json), ("tokenizer_config.json", fresh.tokenizer_config_json)]);
    Ok(folder)
}

/// Stage 2 as a run starts it: with `--tokenizer words:N`, the language model over fastai's
/// vocabulary of the run's training text ([`with_target_vocabulary`]); as it is otherwise.
pub fn fit_to_data(mut folder: TrainingFolder, run: &RunData) -> Result<TrainingFolder> {
    if !run.tokenizer.starts_with("words:") {
        return Ok(folder);
    }
    let json = folder
        .file("tokenizer.json")
        .ok_or_else(|| arg_err!("train", "--tokenizer {} matches the model's vocabulary to --data's, but the folder has no tokenizer.json", run.tokenizer))?;
    let old = TextTokenizer::from_bytes(json)?;
    let old_itos = (0..old.vocab_size() as u32)
        .map(|id| {
            old.id_to_token(id).ok_or_else(|| arg_err!("train", "the folder's tokenizer.json has no token of id {id} below its size {}", old.vocab_size()))
        })
        .collect::<Result<Vec<String>>>()?;
    let size = run.vocab_size()?;
    let new_itos = fastai_vocabulary(run.text.train()?, size)?;
    let safetensors = folder.take_required("model.safetensors")?;
    let (fitted, known) = with_target_vocabulary(folder.require("config.json")?, safetensors, &old_itos, &new_itos)?;
    log::info!(
        "vocabulary of {} tokens from --data: {known} known to the model keep their embeddings, {} new ones start from the mean",
        new_itos.len(),
        new_itos.len() - known
    );
    folder.set("config.json", fitted.config_json);
    folder.set("model.safetensors", fitted.safetensors);
    folder.set("tokenizer.json", fitted.tokenizer_json);
    folder.set("tokenizer_config.json", fitted.tokenizer_config_json);
    Ok(folder)
}

/// An AWD-LSTM language model's checkpoint over `new_itos` instead of `old_itos`, its own
/// vocabulary (ULMFiT's stage 2 as fastai's `language_model_learner` starts it): each
/// vocabulary-sized tensor (the embeddings; an untied decoder's weight; the decoder's bias)
/// gets, for each new token, the row of the same token in the old vocabulary, or the mean of
/// the old rows when it had none. Returns the folder's files and the number of new tokens the
/// old vocabulary had.
pub fn with_target_vocabulary(config_json: &[u8], safetensors: Vec<u8>, old_itos: &[String], new_itos: &[String]) -> Result<(UlmfitFolder, usize)> {
    let op = "vocabulary";
    let mut config = parse_config(config_json)?;
    if config["architectures"][0].as_str() != Some("AwdLstmForLanguageModeling") {
        return Err(arg_err!(op, "a new vocabulary is matched into an AWD-LSTM language model (fastai's stage 2), not into `{}`", config["architectures"][0]));
    }
    let old_vocab = AwdLstmConfig::from_json(config_json)?.vocab_size;
    if old_itos.len() != old_vocab {
        return Err(arg_err!(op, "the checkpoint's tokenizer has {} tokens and its config.json a vocab_size of {old_vocab}", old_itos.len()));
    }
    let old_id: std::collections::HashMap<&str, usize> = old_itos.iter().enumerate().map(|(i, w)| (w.as_str(), i)).collect();
    let source: Vec<Option<usize>> = new_itos.iter().map(|w| old_id.get(w.as_str()).copied()).collect();
    let mut init = Init::from_checkpoint(&weights::Checkpoint::from_bytes(safetensors)?, 0)?;
    for (name, shape, values) in &mut init.tensors {
        if !["0.encoder.weight", "1.decoder.weight", "1.decoder.bias"].contains(&name.as_str()) {
            continue;
        }
        if shape[0] != old_vocab {
            return Err(arg_err!(op, "{name} has {} rows for a vocabulary of {old_vocab}", shape[0]));
        }
        let width = shape[1..].iter().product::<usize>();
        let mut mean = vec![0.0f64; width];
        for row in values.chunks_exact(width) {
            mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v as f64 / old_vocab as f64);
        }
        let mean: Vec<f32> = mean.into_iter().map(|m| m as f32).collect();
        let mut matched = Vec::with_capacity(new_itos.len() * width);
        for old in &source {
            matched.extend_from_slice(old.map_or(&mean[..], |i| &values[i * width..(i + 1) * width]));
        }
        *values = matched;
        shape[0] = new_itos.len();
    }
    let pad = new_itos.iter().position(|t| t == "xxpad").unwrap_or(1);
    config["vocab_size"] = new_itos.len().into();
    config["pad_token"] = pad.into();
    config["pad_token_id"] = pad.into();
    let config_json = serde_json::to_vec_pretty(&config).map_err(|e| arg_err!(op, "{e}"))?;
    let (tokenizer_json, tokenizer_config_json) = fastai_tokenizer_files(new_itos)?;
    let parameters = init.tensors.iter().map(|(_, _, values)| values.len()).sum();
    let folder = UlmfitFolder {
        config: AwdLstmConfig::from_json(&config_json)?,
        config_json,
        safetensors: init.serialize()?,
        tokenizer_json,
        tokenizer_config_json,
        parameters,
    };
    Ok((folder, source.iter().filter(|s| s.is_some()).count()))
}

/// The classifier's architecture.
const CLASSIFIER: &str = "AwdLstmForSequenceClassification";

/// An AWD-LSTM language model's checkpoint (config.json, model.safetensors) as ULMFiT's
/// classifier over the classes `labels` when objective classify trains it; a classifier's is
/// returned as it is, and objective clm needs no head of its own.
pub fn with_classifier_head(objective: Objective, config_json: &[u8], safetensors: Vec<u8>, labels: &[String], seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    if objective != Objective::Classify {
        return Ok((config_json.to_vec(), safetensors));
    }
    let mut config = parse_config(config_json)?;
    match config["architectures"][0].as_str() {
        Some(CLASSIFIER) => return Ok((config_json.to_vec(), safetensors)),
        Some("AwdLstmForLanguageModeling" | "AwdLstmModel") => {}
        other => {
            return Err(arg_err!(
                "model",
                "ULMFiT's classifier starts from an AWD-LSTM language model, not `{}`",
                other.unwrap_or("a config without architectures")
            ))
        }
    }
    let checkpoint = weights::Checkpoint::from_bytes(safetensors)?;
    let mut init = Init::from_checkpoint(&checkpoint, seed)?;
    init.tensors.retain(|(name, ..)| name.starts_with("0."));
    for (name, ..) in &mut init.tensors {
        *name = format!("0.module.{}", &name[2..]);
    }
    let pad_token = config["pad_token"].as_u64().unwrap_or(1);
    config["pad_token_id"] = pad_token.into();
    // fastai's classifier trains with its own (higher) dropouts, not its language model's.
    write_dropouts(&mut config, &CLASSIFIER_DROPOUTS);
    let config_json = with_labels(config, CLASSIFIER, labels)?;
    let dims = AwdLstmConfig::from_json(&config_json)?.classifier_dims();
    for (i, io) in dims.windows(2).enumerate() {
        let (input, output) = (io[0], io[1]);
        let block = format!("1.layers.{i}");
        init.constant(format!("{block}.0.weight"), input, 1.0);
        init.constant(format!("{block}.0.bias"), input, 1e-3);
        init.constant(format!("{block}.0.running_mean"), input, 0.0);
        init.constant(format!("{block}.0.running_var"), input, 1.0);
        init.uniform(format!("{block}.2.weight"), vec![output, input], 1.0 / (input as f64).sqrt())?;
    }
    Ok((config_json, init.serialize()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fastai_vocabulary_is_its_special_tokens_then_words_by_frequency() {
        // The rules write special tokens (xxmaj, xxunk from <unk>) often: they keep their ids.
        let itos = super::fastai_vocabulary("The cat sat .\nThe dog sat on the <unk> mat\n<unk> <unk> The\n\n", 13).unwrap();
        assert_eq!(&itos[..9], super::SPECIAL_TOKENS);
        // Lower-cased, <unk> is xxunk (a special token already), the most frequent first.
        assert_eq!(&itos[9..11], ["the", "sat"]);
        assert_eq!(itos.len(), 13);
        assert!(super::fastai_vocabulary("", 100).is_err());
        assert!(super::fastai_vocabulary("a b", 9).is_err());
    }

    #[test]
    fn a_target_vocabulary_keeps_known_words_rows_and_gives_new_ones_the_mean() {
        let words = |ws: &[&str]| -> Vec<String> { super::SPECIAL_TOKENS.iter().chain(ws).map(|w| w.to_string()).collect() };
        let old_itos = words(&["the", "cat"]);
        let fresh = super::fresh_language_model(&old_itos, 1, 3, 2, 7).unwrap();
        let old = crate::weights::Checkpoint::from_bytes(fresh.safetensors.clone()).unwrap();
        let (old_embeddings, _) = old.to_f32("0.encoder.weight").unwrap();
        let new_itos = words(&["dog", "the"]);
        let (folder, known) = super::with_target_vocabulary(&fresh.config_json, fresh.safetensors, &old_itos, &new_itos).unwrap();
        assert_eq!(known, 10);
        let new = crate::weights::Checkpoint::from_bytes(folder.safetensors).unwrap();
        let (embeddings, shape) = new.to_f32("0.encoder.weight").unwrap();
        assert_eq!(shape, [11, 2]);
        let row = |table: &[f32], i: usize| table[2 * i..2 * i + 2].to_vec();
        assert_eq!(row(&embeddings, 10), row(&old_embeddings, 9), "`the` keeps its row");
        assert_eq!(row(&embeddings, 0), row(&old_embeddings, 0), "special tokens keep theirs");
        let mean: Vec<f32> = (0..2).map(|c| (0..11).map(|i| old_embeddings[2 * i + c]).sum::<f32>() / 11.0).collect();
        let dog = row(&embeddings, 9);
        assert!(dog.iter().zip(&mean).all(|(a, b)| (a - b).abs() < 1e-6), "`dog` is new: {dog:?} vs the mean {mean:?}");
        assert_eq!(new.to_f32("1.decoder.bias").unwrap().1, [11]);
        assert_eq!(folder.config.vocab_size, 11);
        // The vocabulary must be the checkpoint's own.
        assert!(super::with_target_vocabulary(&fresh.config_json, new.into_bytes().unwrap(), &old_itos[..10], &new_itos).is_err());
    }
}
