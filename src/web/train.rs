//! `TrainingRun`: a [`RunSpec`] trained in the browser, every path it names read from files
//! the page hands over (an object of path → `Uint8Array`, kept in [`MemoryFiles`]) — the run
//! `sesame train` makes of the same spec and files, stepped by the page. Only the training
//! module (built with the `training` feature) has it; the package's `fineTune` drives it.
//!
//! The page calls one method at a time: each takes the run out of its cell while it works, so
//! a second call meanwhile is an error that says so, not a trap.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use js_sys::{Array, Object, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::model::{set, to_json};
use super::{js_error, WebDevice};
use crate::error::{arg_err, Result};
use crate::files::MemoryFiles;
use crate::train::run::{prepare_from, Run, RunSpec};

/// A run and the files it reads.
struct State {
    run: Run,
    files: MemoryFiles,
}

/// A training run in the browser.
#[wasm_bindgen]
pub struct TrainingRun {
    state: Rc<RefCell<Option<State>>>,
    steps: u64,
    batches_per_epoch: usize,
}

/// The files of `object`: each key a path, each value a `Uint8Array` or an array of them (a
/// file's bytes in order).
fn memory_files(object: &Object) -> Result<MemoryFiles> {
    let mut files = MemoryFiles::default();
    for entry in Object::entries(object).iter() {
        let entry: Array = entry.unchecked_into();
        let path = entry.get(0).as_string().unwrap_or_default();
        let value = entry.get(1);
        let must = || arg_err!("train", "files[{path:?}] must be a Uint8Array or an array of Uint8Arrays");
        let chunks: Vec<Uint8Array> = match value.is_instance_of::<Array>() {
            true => Array::from(&value).iter().map(|chunk| chunk.dyn_into::<Uint8Array>().map_err(|_| must())).collect::<Result<_>>()?,
            false => vec![value.dyn_into::<Uint8Array>().map_err(|_| must())?],
        };
        // Each chunk copied once, straight into the file's bytes.
        let mut bytes = vec![0; chunks.iter().map(|c| c.length() as usize).sum()];
        let mut filled = 0;
        for chunk in chunks {
            let len = chunk.length() as usize;
            chunk.copy_to(&mut bytes[filled..filled + len]);
            filled += len;
        }
        files.insert(path, bytes);
    }
    Ok(files)
}

/// `files` as an object of path → `Uint8Array`.
fn js_files(files: &[(String, Vec<u8>)]) -> Result<JsValue> {
    let object = Object::new();
    for (name, bytes) in files {
        set(&object, name, &Uint8Array::from(bytes.as_slice()).into())?;
    }
    Ok(object.into())
}

impl TrainingRun {
    /// Runs `work` on the run, taken out of its cell meanwhile, as a promise of a JS value.
    fn with_state<F>(&self, work: impl FnOnce(State) -> F + 'static) -> Promise
    where
        F: std::future::Future<Output = (State, Result<JsValue>)> + 'static,
    {
        let cell = self.state.clone();
        future_to_promise(async move {
            let taken = cell.borrow_mut().take();
            let Some(state) = taken else {
                return Err(JsError::new("sesame: this training run is busy with another call (await each call before the next) or was freed").into());
            };
            let (state, result) = work(state).await;
            *cell.borrow_mut() = Some(state);
            result.map_err(|e| js_error(e).into())
        })
    }
}

#[wasm_bindgen]
impl TrainingRun {
    /// Prepares the run of `spec` (a `RunSpec` as JSON: `sesame train`'s flags by their long
    /// names, `model_init`, `data`, … naming paths of `files`) on `device`: its model, batches
    /// and checks, as natively. Nothing trains before `step`.
    pub fn prepare(device: &WebDevice, files: &Object, spec: &str) -> std::result::Result<TrainingRun, JsError> {
        let spec: RunSpec = serde_json::from_str(spec).map_err(|e| JsError::new(&format!("sesame: the run's spec: {e}")))?;
        let files = memory_files(files).map_err(js_error)?;
        let run = prepare_from(&device.gpu, &files, &spec).map_err(js_error)?;
        let steps = run.trainer.settings().steps;
        // A source without epochs (text drawn at random): the whole run is one.
        let batches_per_epoch = run.source.batches_per_epoch().unwrap_or(steps as usize).max(1);
        Ok(TrainingRun { state: Rc::new(RefCell::new(Some(State { run, files }))), steps, batches_per_epoch })
    }

    /// The optimizer steps the run takes in all.
    #[wasm_bindgen(getter)]
    pub fn steps(&self) -> f64 {
        self.steps as f64
    }

    /// The batches of one epoch of the training data.
    #[wasm_bindgen(getter = batchesPerEpoch)]
    pub fn batches_per_epoch(&self) -> f64 {
        self.batches_per_epoch as f64
    }

    /// Takes the next optimizer step; resolves to its report as JSON: {step, loss, lr,
    /// grad_norm, tokens_per_s}. A loss that is not finite rejects, the weights kept as they
    /// were after the step before.
    pub fn step(&self) -> Promise {
        self.with_state(|mut state| async move {
            let report = state.run.trainer.step(state.run.source.as_ref()).await;
            let json = report.and_then(|r| {
                let json = serde_json::json!({"step": r.step, "loss": r.loss, "lr": r.lr, "grad_norm": r.grad_norm, "tokens_per_s": r.tokens_per_s});
                to_json(&json)
            });
            (state, json.map(JsValue::from))
        })
    }

    /// The model as trained so far, scored on the examples of `bytes`, a file named `name`
    /// read as the spec's `data` is; resolves to JSON {batches, loss, metrics: {name: value}}.
    pub fn evaluate(&self, name: String, bytes: Vec<u8>) -> Promise {
        self.with_state(move |mut state| async move {
            state.files.insert(&name, bytes);
            let scores = state.run.score(&state.files, Path::new(&name)).await;
            state.files.remove(Path::new(&name));
            let json = scores.and_then(|s| {
                let metrics: serde_json::Map<String, serde_json::Value> = s.metrics.iter().map(|(name, value)| (name.clone(), (*value).into())).collect();
                to_json(&serde_json::json!({"batches": s.batches, "loss": s.loss, "metrics": metrics}))
            });
            (state, json.map(JsValue::from))
        })
    }

    /// The model as trained so far: its folder's files (config.json, model.safetensors, the
    /// tokenizer's), as an object of name → `Uint8Array`.
    pub fn files(&self) -> Promise {
        self.with_state(|state| async move {
            let files = state.run.trainer.model_files().await;
            let object = files.and_then(|files| js_files(&files));
            (state, object)
        })
    }
}
