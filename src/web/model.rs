//! `Model`: a model folder on the GPU, with every task the browser library offers. Methods
//! that read results back from the GPU return promises; the model lives in an `Rc` so that a
//! call in flight keeps it alive even if the page frees the JS object.

use std::ops::ControlFlow;
use std::rc::Rc;

use js_sys::{Array, Float32Array, Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::files::{checkpoint, file};
use super::{js_error, WebDevice};
use crate::classify::{choose, classify_text, classify_tokens, detect_replaced_tokens, next_sentence_probability, zero_shot};
use crate::embed::embed_texts;
use crate::error::{arg_err, Result, SesameError};
use crate::fill_mask::fill_mask;
use crate::generate::{generate_text, GeneratedText, GenerationConfig};
use crate::models::auto::{LoadedModel, ModelFiles, SENTENCEPIECE_FILES};
use crate::models::{Capability, ForwardOptions, Forwarded, IdsBatch};
use crate::perplexity::{text_perplexity, PerplexityOptions};
use crate::question_answering::{answer_question, QaOptions};
use crate::tensor::Tensor;

/// A model folder loaded onto the device.
#[wasm_bindgen]
pub struct Model {
    loaded: Rc<LoadedModel>,
}

pub(super) fn to_json(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| SesameError::Io(format!("serializing a result: {e}")))
}

/// Runs `work` on the model as a promise of a JS value.
fn promise<F>(loaded: &Rc<LoadedModel>, work: impl FnOnce(Rc<LoadedModel>) -> F) -> Promise
where
    F: std::future::Future<Output = Result<JsValue>> + 'static,
{
    let future = work(loaded.clone());
    future_to_promise(async move { future.await.map_err(|e| js_error(e).into()) })
}

/// `{data: Float32Array, dims: number[]}`.
pub(super) fn js_tensor(data: &[f32], dims: &[usize]) -> Result<JsValue> {
    let tensor = Object::new();
    let dims: Array = dims.iter().map(|&d| JsValue::from(d as u32)).collect();
    set(&tensor, "data", &Float32Array::from(data).into())?;
    set(&tensor, "dims", &dims.into())?;
    Ok(tensor.into())
}

pub(super) fn set(object: &Object, key: &str, value: &JsValue) -> Result<()> {
    Reflect::set(object, &key.into(), value).map(|_| ()).map_err(|_| SesameError::Io(format!("setting `{key}` on a result")))
}

#[wasm_bindgen]
impl Model {
    /// Loads a model from its files: an object of file name → `Uint8Array` with
    /// `config.json`, `model.safetensors` (or `model.safetensors.index.json` and its shards;
    /// a weights file may be an array of `Uint8Array`s, its bytes in order), and
    /// `tokenizer.json` (or `vocab.txt`, or `vocab.json` + `merges.txt`). With `truncation`,
    /// over-long texts are cut to fit. `dtype` (`fp32`, `f16`, `q8`, `q4`) is the precision
    /// of the weight matrices; absent, as the folder stores them.
    pub fn load(device: &WebDevice, files: &Object, truncation: bool, dtype: Option<String>) -> std::result::Result<Model, JsError> {
        let required = |name: &str| file(files, name)?.ok_or_else(|| arg_err!("load", "the model folder has no {name}"));
        let model_files = (|| -> Result<ModelFiles> {
            Ok(ModelFiles {
                config_json: required("config.json")?,
                checkpoint: checkpoint(files, "model folder")?,
                tokenizer_json: file(files, "tokenizer.json")?,
                vocab_txt: file(files, "vocab.txt")?,
                vocab_json: file(files, "vocab.json")?,
                merges_txt: file(files, "merges.txt")?,
                tokenizer_config_json: file(files, "tokenizer_config.json")?,
                sentencepiece_model: SENTENCEPIECE_FILES.into_iter().find(|name| file(files, name).is_ok_and(|f| f.is_some())),
                dtype: dtype.as_deref().map(str::parse).transpose()?,
            })
        })()
        .map_err(js_error)?;
        let loaded = LoadedModel::from_files(&device.gpu, model_files, truncation).map_err(js_error)?;
        Ok(Model { loaded: Rc::new(loaded) })
    }

    /// Family, architecture, sizes, capabilities and the pipelines it serves (`tasks`), as a
    /// JSON string.
    pub fn info(&self) -> std::result::Result<String, JsError> {
        to_json(&self.loaded.summary()).map_err(js_error)
    }

    /// A text (or pair) tokenized with special tokens: JSON `{input_ids, token_type_ids,
    /// tokens}`, checked against the model's positions.
    pub fn encode(&self, text: &str, pair: Option<String>) -> std::result::Result<String, JsError> {
        let run = || -> Result<String> {
            let encoded = self.loaded.encode_detailed("encode", text, pair.as_deref())?;
            let tokenizer = self.loaded.tokenizer()?;
            let tokens: Vec<String> = encoded.ids.iter().map(|&id| tokenizer.id_to_token(id).unwrap_or_default()).collect();
            to_json(&serde_json::json!({ "input_ids": encoded.ids, "token_type_ids": encoded.type_ids, "tokens": tokens }))
        };
        run().map_err(js_error)
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> std::result::Result<String, JsError> {
        self.loaded.tokenizer().and_then(|t| t.decode(ids, skip_special_tokens)).map_err(js_error)
    }

    /// One forward pass over a row-major [batch, seq] batch ([batch, choices, seq] when
    /// `choices` is given); resolves to an object of named tensors `{data, dims}` (`logits`,
    /// `last_hidden_state`, `hidden_states.{i}`, …).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        input_ids: Vec<u32>,
        attention_mask: Option<Vec<u32>>,
        token_type_ids: Option<Vec<u32>>,
        task_type_ids: Option<Vec<u32>>,
        char_ids: Option<Vec<u32>>,
        batch: usize,
        choices: Option<usize>,
        seq: usize,
        hidden_states: bool,
        attentions: bool,
    ) -> Promise {
        let ids = IdsBatch { input_ids, attention_mask, token_type_ids, task_type_ids, char_ids, batch, choices, seq };
        promise(&self.loaded, |loaded| async move {
            let options = ForwardOptions { hidden_states, attentions, ..Default::default() };
            let forwarded = Forwarded::run(&*loaded.model, ids, options)?;
            let tensors = Object::new();
            for (name, values) in forwarded.read_all().await? {
                let shape = forwarded.output.get(&name).map_or(&[][..], Tensor::shape);
                set(&tensors, &name, &js_tensor(&values, shape)?)?;
            }
            Ok(tensors.into())
        })
    }

    /// The `top_k` candidates for every mask of `text` (JSON, as transformers' fill-mask).
    #[wasm_bindgen(js_name = fillMask)]
    pub fn fill_mask(&self, text: String, top_k: usize) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let candidates = fill_mask(&loaded, &text, top_k).await?;
            Ok(to_json(&candidates)?.into())
        })
    }

    /// Sentence embeddings of `texts`, batched: `{data, dims: [texts, hidden]}`.
    pub fn embed(&self, texts: Vec<String>, pooling: String, normalize: bool) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let rows = embed_texts(&loaded, &texts, pooling.parse()?, normalize).await?;
            js_tensor(&rows.concat(), &[rows.len(), loaded.model.summary().hidden_size])
        })
    }

    /// Continues `prompt`; calls `on_token(text_piece, token_id)` as each token is chosen
    /// (returning `false` from it stops generation after that token) and resolves to JSON
    /// `{ids, text, new_tokens, prompt_tokens_cut}` (ids and text include the prompt, less
    /// what `truncate` cut from the start of one longer than the model's positions).
    #[allow(clippy::too_many_arguments)]
    pub fn generate(
        &self,
        prompt: String,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        seed: Option<f64>,
        truncate: bool,
        on_token: Option<Function>,
    ) -> Promise {
        let config = GenerationConfig { max_new_tokens, temperature, top_k, top_p, seed: seed.map(|s| s as u64), eos_token_id: None };
        promise(&self.loaded, |loaded| async move {
            let op = "text-generation";
            let model = loaded.model.causal_lm(Capability::Generation, op)?;
            let (prompt, cut) = loaded.encode_prompt(op, &prompt, truncate)?;
            let mut callback_error = None;
            let generated = generate_text(model, loaded.tokenizer()?, &prompt, &config, |piece, token| {
                let Some(f) = &on_token else { return ControlFlow::Continue(()) };
                match f.call2(&JsValue::NULL, &piece.into(), &token.into()) {
                    Ok(answer) if answer == JsValue::FALSE => ControlFlow::Break(()),
                    Ok(_) => ControlFlow::Continue(()),
                    Err(e) => {
                        callback_error = Some(e.as_string().unwrap_or_else(|| "onToken threw".into()));
                        ControlFlow::Break(())
                    }
                }
            })
            .await?;
            if let Some(e) = callback_error {
                return Err(arg_err!(op, "onToken failed: {e}"));
            }
            #[derive(serde::Serialize)]
            struct Answer {
                #[serde(flatten)]
                generated: GeneratedText,
                prompt_tokens_cut: usize,
            }
            Ok(to_json(&Answer { generated, prompt_tokens_cut: cut })?.into())
        })
    }

    /// Perplexity of `text` (JSON `{perplexity, mean_nll, scored_tokens, windows}`).
    pub fn perplexity(&self, text: String, window: Option<usize>, stride: Option<usize>) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let result = text_perplexity(&loaded, &text, PerplexityOptions { window, stride }).await?;
            Ok(to_json(&result)?.into())
        })
    }

    /// Every label of a sequence-classification head with its probability, best first (JSON).
    #[wasm_bindgen(js_name = classifyText)]
    pub fn classify_text(&self, text: String, pair: Option<String>) -> Promise {
        promise(&self.loaded, |loaded| async move { Ok(to_json(&classify_text(&loaded, &text, pair.as_deref()).await?)?.into()) })
    }

    /// The probability that `second` follows `first` (BERT's NSP head).
    #[wasm_bindgen(js_name = nextSentence)]
    pub fn next_sentence(&self, first: String, second: String) -> Promise {
        promise(&self.loaded, |loaded| async move { Ok(JsValue::from(next_sentence_probability(&loaded, &first, &second).await?)) })
    }

    /// A label per token (JSON, as the token-classification pipeline), skipping `ignore`.
    #[wasm_bindgen(js_name = classifyTokens)]
    pub fn classify_tokens(&self, text: String, ignore: Vec<String>) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
            Ok(to_json(&classify_tokens(&loaded, &text, &ignore).await?)?.into())
        })
    }

    /// For each token that is not special, the probability that it was replaced (JSON,
    /// ELECTRA's discriminator).
    #[wasm_bindgen(js_name = replacedTokens)]
    pub fn replaced_tokens(&self, text: String) -> Promise {
        promise(&self.loaded, |loaded| async move { Ok(to_json(&detect_replaced_tokens(&loaded, &text).await?)?.into()) })
    }

    /// Candidate labels scored by an NLI head, best first (JSON `[{label, score}]`).
    #[wasm_bindgen(js_name = zeroShot)]
    pub fn zero_shot(&self, text: String, labels: Vec<String>, template: String, multi_label: bool) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            Ok(to_json(&zero_shot(&loaded, &text, &labels, &template, multi_label).await?)?.into())
        })
    }

    /// The choices for `prompt`, best first (JSON `[{index, choice, score}]`).
    pub fn choose(&self, prompt: String, choices: Vec<String>) -> Promise {
        promise(&self.loaded, |loaded| async move {
            let choices: Vec<&str> = choices.iter().map(String::as_str).collect();
            Ok(to_json(&choose(&loaded, &prompt, &choices).await?)?.into())
        })
    }

    /// The best answers to `question` in `context` (JSON `[{score, start, end, answer}]`).
    #[wasm_bindgen(js_name = answerQuestion)]
    pub fn answer_question(
        &self,
        question: String,
        context: String,
        top_k: usize,
        max_answer_len: usize,
        max_seq_len: usize,
        doc_stride: Option<usize>,
    ) -> Promise {
        let options = QaOptions { top_k, max_answer_len, max_seq_len, doc_stride };
        promise(&self.loaded, |loaded| async move { Ok(to_json(&answer_question(&loaded, &question, &context, &options).await?)?.into()) })
    }
}
