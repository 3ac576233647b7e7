//! The wasm-bindgen surface for the browser; the npm package's JS layer (js/) wraps it.
//! Structured results cross as JSON strings, tensors as `Float32Array`s. Errors become JS
//! `Error`s with the library's message; nothing here can trap.

mod elmo;
mod files;
mod model;
#[cfg(feature = "training")]
mod train;

use wasm_bindgen::prelude::*;

use crate::error::SesameError;
use crate::gpu::{Device, DeviceOptions};
use crate::tokenize::TextTokenizer;

fn js_error(e: SesameError) -> JsError {
    JsError::new(&e.to_string())
}

/// The device models run on: WebGPU with Sesame's WGSL kernels, or the host device (the
/// kernels' Rust twins, compiled to wasm SIMD128). JavaScript's `Device`.
#[wasm_bindgen(js_name = Device)]
pub struct WebDevice {
    gpu: Device,
}

#[wasm_bindgen(js_class = Device)]
impl WebDevice {
    /// `device`: `"webgpu"` (an error where there is no adapter), `"wasm"` (the host device),
    /// or `"auto"` (the default): WebGPU on a GPU, the host device where WebGPU is missing or
    /// is itself a CPU rasterizer such as SwiftShader, whose WGSL runs several times slower
    /// than wasm SIMD. `kernels` forces a WGSL kernel variant (`"tiled"` or `"blocked"`) and
    /// with it WebGPU under `"auto"`.
    pub async fn create(device: Option<String>, kernels: Option<String>) -> Result<WebDevice, JsError> {
        let kernels = kernels.map(|k| k.parse()).transpose().map_err(js_error)?;
        let webgpu = || Device::new(DeviceOptions { kernels, ..Default::default() });
        let gpu = match device.as_deref().unwrap_or("auto") {
            "webgpu" => webgpu().await.map_err(js_error)?,
            "wasm" => Device::host(),
            "auto" => Device::auto(kernels, None).await.map_err(js_error)?.0,
            other => return Err(JsError::new(&format!("device must be \"auto\", \"webgpu\" or \"wasm\", got {other:?}"))),
        };
        Ok(WebDevice { gpu })
    }

    /// The adapter, its kernel variant, key limits and features, as a JSON string.
    #[wasm_bindgen(js_name = info)]
    pub fn info(&self) -> String {
        crate::info::AdapterReport::of(&self.gpu).to_json()
    }

    /// Live and pooled GPU buffers and bytes, as a JSON string.
    pub fn stats(&self) -> String {
        serde_json::to_string(&self.gpu.stats()).unwrap_or_default()
    }

    /// Why the WebGPU device was lost (destroyed, or its GPU reset or removed), if it was.
    pub fn lost(&self) -> Option<String> {
        self.gpu.lost()
    }

    /// Frees the pooled buffers that no tensor uses.
    #[wasm_bindgen(js_name = trimPool)]
    pub fn trim_pool(&self) {
        self.gpu.trim_pool();
    }
}

/// A Hugging Face tokenizer (`tokenizer.json`).
#[wasm_bindgen]
pub struct Tokenizer {
    inner: TextTokenizer,
}

#[wasm_bindgen]
impl Tokenizer {
    /// A tokenizer from a folder's tokenizer.json, with the text rules its
    /// tokenizer_config.json names when given (fastai's).
    #[wasm_bindgen(constructor)]
    pub fn new(tokenizer_json: &[u8], tokenizer_config_json: Option<Vec<u8>>) -> Result<Tokenizer, JsError> {
        Ok(Tokenizer { inner: TextTokenizer::from_files(tokenizer_json, tokenizer_config_json.as_deref()).map_err(js_error)? })
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, JsError> {
        self.inner.encode(text, add_special_tokens).map_err(js_error)
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, JsError> {
        self.inner.decode(ids, skip_special_tokens).map_err(js_error)
    }
}
