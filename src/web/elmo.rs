//! The wasm ELMo: an ELMo folder (options.json + model.safetensors) on the device, giving
//! each word of a batch of sentences its layers and scalar mixes.

use std::rc::Rc;

use js_sys::{Array, Object, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::files::{checkpoint, file};
use super::model::{js_tensor, set, to_json};
use super::{js_error, WebDevice};
use crate::error::{arg_err, SesameError};
use crate::models::elmo::chars::split_words;
use crate::models::elmo::{ElmoModel, ElmoOptions};

#[wasm_bindgen]
pub struct Elmo {
    model: Rc<ElmoModel>,
}

/// Sentences as JSON: raw texts `["…", …]` (split into words here) or words `[["…", …], …]`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Sentences {
    Texts(Vec<String>),
    Words(Vec<Vec<String>>),
}

#[wasm_bindgen]
impl Elmo {
    /// Loads `files`: an object with `options.json` and `model.safetensors` (or a sharded
    /// index and its shards) as `Uint8Array`s (see `Model.load`).
    pub fn load(device: &WebDevice, files: &Object) -> std::result::Result<Elmo, JsError> {
        let required = |name: &str| file(files, name)?.ok_or_else(|| arg_err!("load", "the ELMo folder has no {name}"));
        let model = (|| ElmoModel::from_checkpoint(&device.gpu, ElmoOptions::from_json(&required("options.json")?)?, &checkpoint(files, "ELMo folder")?))()
            .map_err(js_error)?;
        Ok(Elmo { model: Rc::new(model) })
    }

    /// Sizes as JSON: `{cells, projection_dim, layers, filters, mixes, output_dim}`.
    pub fn info(&self) -> std::result::Result<String, JsError> {
        let o = &self.model.options;
        let info = serde_json::json!({
            "cells": o.lstm.dim, "projection_dim": o.lstm.projection_dim, "layers": o.lstm.n_layers + 1,
            "filters": o.n_filters(), "mixes": self.model.mixes.len(), "output_dim": self.model.output_dim(),
        });
        to_json(&info).map_err(js_error)
    }

    /// Runs a batch (JSON, see [`Sentences`]); resolves to `{words: string[][], layers,
    /// representations: [...]}` with tensors `{data, dims}` as `sesame forward` writes them
    /// (no mask: the words give each sentence's length).
    pub fn embed(&self, sentences_json: &str) -> Promise {
        let model = self.model.clone();
        let parsed =
            serde_json::from_str::<Sentences>(sentences_json).map_err(|e| arg_err!("elmo-embeddings", "sentences must be string[] or string[][]: {e}"));
        future_to_promise(async move {
            let run = async {
                let words = match parsed? {
                    Sentences::Texts(texts) => texts.iter().map(|t| split_words(t)).collect(),
                    Sentences::Words(words) => words,
                };
                let out = model.forward(&words)?;
                let result = Object::new();
                let js_words: Array = words.iter().map(|s| s.iter().map(|w| JsValue::from_str(w)).collect::<Array>()).collect();
                set(&result, "words", &js_words.into())?;
                set(&result, "layers", &js_tensor(&out.layers.to_vec::<f32>().await?, out.layers.shape())?)?;
                let mixes = Array::new();
                for r in &out.representations {
                    mixes.push(&js_tensor(&r.to_vec::<f32>().await?, r.shape())?);
                }
                set(&result, "representations", &mixes.into())?;
                Ok::<JsValue, SesameError>(result.into())
            };
            run.await.map_err(|e| js_error(e).into())
        })
    }
}
