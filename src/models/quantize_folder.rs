//! `sesame quantize`: a model folder rewritten with its weight matrices in f16, q8 or q4.
//!
//! The model is loaded once on the host device with its matrices quantized as they load (the
//! model's own loader knows which tensors are matrices, and that GPT's `Conv1D` stores them
//! transposed); the folder written holds those matrices in the layout `crate::quantize`
//! documents, every other tensor as it was, config.json with a `sesame_quantization` entry
//! ([`QUANTIZATION_KEY`]), and every other file of the folder (tokenizer, sentence-transformers
//! pooling) copied. An f16 folder stores its matrices as a Hugging Face fp16 checkpoint does
//! (`Conv1D`s as [in, out]), so transformers loads it too; q8 and q4 folders are Sesame's.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::Dtype;

use super::auto::{folder_kind, stored_quantization, AutoModel, FolderKind, ModelFiles, QUANTIZATION_KEY, QUANTIZATION_VERSION};
use crate::error::{arg_err, Result, SesameError};
use crate::files::{io_err, write_atomic};
use crate::gpu::Device;
use crate::quantize::{scale_name, QuantFormat, Quantized, StoredTensor, WeightDtype};
use crate::weights::{serialize, QuantizedTensor, Weights, INDEX_FILE, SINGLE_FILE};

/// What [`quantize_folder`] wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QuantizeReport {
    pub format: &'static str,
    /// Matrices quantized.
    pub matrices: usize,
    /// Tensors copied as they were (layer norms, biases, small tables).
    pub copied: usize,
    /// The weights' bytes before (every safetensors file) and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Writes the model folder `dir` with its weight matrices in `format` to `out` (a new or
/// empty directory; never `dir` itself).
pub fn quantize_folder(dir: &Path, format: QuantFormat, out: &Path) -> Result<QuantizeReport> {
    if folder_kind(&crate::files::Disk, dir)? == FolderKind::Elmo {
        return Err(arg_err!("quantize", "{}: an ELMo folder stays f32 (its LSTM and character CNN weights are not matrices Sesame quantizes)", dir.display()));
    }
    let mut files = ModelFiles::read_dir(dir)?;
    if let Some(stored) = stored_quantization(&files.config_json)? {
        return Err(arg_err!("quantize", "{}: already {}; quantize the fp32 folder instead", dir.display(), stored.name()));
    }
    check_output(dir, out)?;
    let checkpoint = files.take_checkpoint();
    let gpu = Device::host();
    let weights = Weights::new(&gpu, &checkpoint).with_dtype(Some(WeightDtype::Quantized(format))).logging_quantized();
    AutoModel::load(&files.config_json, &weights)?;
    let quantized: HashMap<String, QuantizedTensor> = weights.take_quantized().into_iter().map(|q| (q.name.clone(), q)).collect();

    let mut names: Vec<&str> = checkpoint.names().collect();
    names.sort_unstable();
    let mut stored: Vec<(String, StoredTensor)> = Vec::with_capacity(names.len() + quantized.len());
    let mut copied = 0;
    for name in names {
        match quantized.get(name) {
            Some(q) => {
                let (matrix, scales) = if q.conv1d && format == QuantFormat::F16 { conv1d_f16(&q.matrix) } else { q.matrix.to_stored() };
                stored.push((name.to_string(), matrix));
                stored.extend(scales.map(|scales| (scale_name(name), scales)));
            }
            None => {
                copied += 1;
                stored.push((name.to_string(), checkpoint.stored(name)?));
            }
        }
    }
    let entries: Vec<(&str, Dtype, &[usize], &[u8])> =
        stored.iter().map(|(name, (dtype, shape, bytes))| (name.as_str(), *dtype, &shape[..], &bytes[..])).collect();
    let safetensors = serialize(&entries)?;

    copy_other_files(dir, out, true)?;
    write_atomic(&out.join("config.json"), &quantized_config(&files.config_json, format)?)?;
    write_atomic(&out.join(SINGLE_FILE), &safetensors)?;
    Ok(QuantizeReport {
        format: format.name(),
        matrices: quantized.len(),
        copied,
        bytes_before: safetensors_bytes(dir)?,
        bytes_after: safetensors.len() as u64,
    })
}

/// An f16 `Conv1D` matrix as transformers stores it: F16 [in, out].
fn conv1d_f16(matrix: &Quantized) -> (StoredTensor, Option<StoredTensor>) {
    let (rows, cols) = (matrix.rows, matrix.cols);
    let values = matrix.dequantize();
    let values = &values;
    let bytes = (0..cols).flat_map(|c| (0..rows).flat_map(move |r| half::f16::from_f32(values[r * cols + c]).to_le_bytes())).collect::<Vec<u8>>();
    ((Dtype::F16, vec![cols, rows], bytes), None)
}

/// `config_json` with the `sesame_quantization` entry (and, for f16, transformers'
/// `torch_dtype`).
fn quantized_config(config_json: &[u8], format: QuantFormat) -> Result<Vec<u8>> {
    let mut config: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(config_json).map_err(|e| SesameError::Checkpoint(format!("config.json: {e}")))?;
    config.insert(QUANTIZATION_KEY.into(), serde_json::json!({ "format": format.name(), "version": QUANTIZATION_VERSION }));
    if format == QuantFormat::F16 {
        config.insert("torch_dtype".into(), "float16".into());
    }
    let mut text = serde_json::to_vec_pretty(&config).map_err(|e| SesameError::Io(e.to_string()))?;
    text.push(b'\n');
    Ok(text)
}

/// Refuses an output that is the input folder, lies inside it, or is a non-empty directory,
/// and creates it.
fn check_output(dir: &Path, out: &Path) -> Result<()> {
    if out.exists() && std::fs::read_dir(out).map_err(io_err(out))?.next().is_some() {
        return Err(arg_err!("quantize", "{} exists and is not empty: give a new folder", out.display()));
    }
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let (input, output) = (dir.canonicalize().map_err(io_err(dir))?, out.canonicalize().map_err(io_err(out))?);
    if output.starts_with(&input) {
        // Left behind empty: it was created above, and copying into it would copy it too.
        let _ = std::fs::remove_dir(out);
        return Err(arg_err!("quantize", "--out must be a new folder outside the model's own ({})", dir.display()));
    }
    Ok(())
}

/// The weights' files: model.safetensors, or the index and its shards.
fn is_weights_file(name: &str) -> bool {
    name == SINGLE_FILE || name == INDEX_FILE || (name.starts_with("model-") && name.ends_with(".safetensors"))
}

/// Other frameworks' copies of the weights, which a quantized folder has no use for.
fn is_other_weights(name: &str) -> bool {
    const EXTENSIONS: [&str; 8] = [".safetensors", ".bin", ".h5", ".msgpack", ".onnx", ".ot", ".pt", ".gguf"];
    const FOLDERS: [&str; 3] = ["onnx", "openvino", "coreml"];
    EXTENSIONS.iter().any(|e| name.ends_with(e)) || FOLDERS.contains(&name)
}

/// Copies every file of `dir` but weights (and, at the `top` level, config.json) into `out`,
/// subfolders too (sentence-transformers' `1_Pooling/`).
fn copy_other_files(dir: &Path, out: &Path, top: bool) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if (top && name == "config.json") || is_other_weights(&name) || name.starts_with('.') {
            continue;
        }
        let target = out.join(&name);
        if path.is_dir() {
            std::fs::create_dir_all(&target).map_err(io_err(&target))?;
            copy_other_files(&path, &target, false)?;
        } else if path.is_file() {
            std::fs::copy(&path, &target).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

/// The bytes of `dir`'s weights (model.safetensors, or the index's shards).
fn safetensors_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        if entry.file_name().to_str().is_some_and(|name| is_weights_file(name) && name != INDEX_FILE) {
            total += entry.metadata().map_err(io_err(&entry.path()))?.len();
        }
    }
    Ok(total)
}
