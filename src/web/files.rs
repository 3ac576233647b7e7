//! A model folder as the page hands it over: an object of file name → `Uint8Array`. A weights
//! file may also be an array of `Uint8Array`s, its bytes in order, so that a checkpoint larger
//! than one `ArrayBuffer` can load; weights stay in JavaScript and are copied into wasm memory
//! a tensor at a time.

use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::JsCast;

use crate::error::{arg_err, Result};
use crate::weights::{Checkpoint, ExternalBytes, FileBytes, INDEX_FILE, SINGLE_FILE};

/// The value of `files[name]`, or None when the page gave no such file.
fn value(files: &Object, name: &str) -> Result<Option<wasm_bindgen::JsValue>> {
    let value = Reflect::get(files, &name.into()).map_err(|_| arg_err!("load", "cannot read files[{name:?}]"))?;
    Ok((!value.is_undefined() && !value.is_null()).then_some(value))
}

/// The bytes of `files[name]`, copied into wasm memory, when the page gave that file.
pub(super) fn file(files: &Object, name: &str) -> Result<Option<Vec<u8>>> {
    let Some(value) = value(files, name)? else { return Ok(None) };
    let bytes = value.dyn_into::<Uint8Array>().map_err(|_| arg_err!("load", "files[{name:?}] must be a Uint8Array"))?;
    Ok(Some(bytes.to_vec()))
}

/// The weights of a model folder: `model.safetensors`, or `model.safetensors.index.json` and
/// the shards it names. `folder` names the folder's kind in errors.
pub(super) fn checkpoint(files: &Object, folder: &str) -> Result<Checkpoint> {
    if let Some(single) = weights_file(files, SINGLE_FILE)? {
        return Checkpoint::from_file(SINGLE_FILE, single);
    }
    let index = file(files, INDEX_FILE)?.ok_or_else(|| arg_err!("load", "the {folder} has no {SINGLE_FILE} (nor a sharded {INDEX_FILE})"))?;
    Checkpoint::from_index(&index, |name| {
        weights_file(files, name)?.ok_or_else(|| arg_err!("load", "the {folder} has no {name}, a shard its {INDEX_FILE} names"))
    })
}

/// `files[name]` as a weights file left in JavaScript: a `Uint8Array` or an array of them.
fn weights_file(files: &Object, name: &str) -> Result<Option<FileBytes>> {
    let Some(value) = value(files, name)? else { return Ok(None) };
    let must = || arg_err!("load", "files[{name:?}] must be a Uint8Array or an array of Uint8Arrays");
    let chunks: Vec<Uint8Array> = if value.is_instance_of::<Array>() {
        Array::from(&value).iter().map(|chunk| chunk.dyn_into::<Uint8Array>().map_err(|_| must())).collect::<Result<_>>()?
    } else {
        vec![value.dyn_into::<Uint8Array>().map_err(|_| must())?]
    };
    let mut starts = Vec::with_capacity(chunks.len());
    let mut len = 0usize;
    for chunk in &chunks {
        starts.push(len);
        len = len.checked_add(chunk.length() as usize).ok_or_else(|| arg_err!("load", "files[{name:?}] is larger than wasm can address"))?;
    }
    Ok(Some(FileBytes::External(Box::new(JsFile { chunks, starts, len }))))
}

/// A file's bytes in JavaScript, in chunks.
struct JsFile {
    chunks: Vec<Uint8Array>,
    /// Where each chunk starts in the file.
    starts: Vec<usize>,
    len: usize,
}

impl ExternalBytes for JsFile {
    fn size(&self) -> usize {
        self.len
    }

    fn read(&self, range: std::ops::Range<usize>) -> Result<Vec<u8>> {
        let mut bytes = vec![0; range.len()];
        let mut filled = 0;
        // The last chunk starting at or before the range (the first starts at 0).
        let mut chunk = self.starts.partition_point(|&start| start <= range.start).saturating_sub(1);
        while filled < bytes.len() {
            let offset = range.start + filled - self.starts[chunk];
            let take = (self.chunks[chunk].length() as usize - offset).min(bytes.len() - filled);
            self.chunks[chunk].subarray(offset as u32, (offset + take) as u32).copy_to(&mut bytes[filled..filled + take]);
            filled += take;
            chunk += 1;
        }
        Ok(bytes)
    }
}
