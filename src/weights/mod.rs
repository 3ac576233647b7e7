//! Checkpoint weights: safetensors files (one, or the shards of an index), read into GPU
//! tensors by their Hugging Face names.
//!
//! Models load through [`Weights`], which carries a name prefix: `weights.pp("encoder")
//! .pp("layer.0")` reads `encoder.layer.0.*`, so a model's module tree mirrors the checkpoint's
//! key tree and needs no rename table.

mod checkpoint;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use safetensors::tensor::Dtype;

#[cfg(target_arch = "wasm32")]
pub use checkpoint::ExternalBytes;
pub use checkpoint::{allow_non_finite_weights, Checkpoint, CheckpointIndex, FileBytes, INDEX_FILE, SINGLE_FILE};

use crate::error::{Result, SesameError};
use crate::gpu::Device;
use crate::ops::quantized::{Matrix, QuantizedMatrix};
use crate::quantize::{self, QuantFormat, Quantized, WeightDtype};
use crate::sync::lock;
use crate::tensor::Tensor;

fn checkpoint_err(message: String) -> SesameError {
    SesameError::Checkpoint(message)
}

/// A tensor a [`Weights::recording`] view loaded.
#[derive(Clone)]
pub enum Recorded {
    /// Loaded onto the GPU through [`Weights::tensor`]: a parameter training updates.
    Trainable { name: String, value: Tensor },
    /// Loaded through a [`Weights::frozen`] view: kept as it is.
    Frozen { name: String, shape: Vec<usize>, values: Vec<f32> },
    /// Loaded through [`Weights::buffer`]: state the model's training forward updates itself
    /// (BatchNorm's running statistics), saved with the parameters, never optimized.
    Buffer { name: String, value: Tensor },
}

/// A checkpoint tensor a [`Weights::logging_quantized`] view quantized as it loaded.
#[derive(Clone, Debug)]
pub struct QuantizedTensor {
    pub name: String,
    /// [out, in].
    pub matrix: Quantized,
    /// GPT's `Conv1D`, which a checkpoint of floats stores as [in, out].
    pub conv1d: bool,
}

/// What one tensor read contributes to a model: its values, and the bytes they take on the
/// device (4 a value in f32, fewer quantized).
#[derive(Clone, Copy, Debug, Default)]
struct Contribution {
    values: usize,
    bytes: usize,
}

impl Contribution {
    fn f32(values: usize) -> Contribution {
        Contribution { values, bytes: values * std::mem::size_of::<f32>() }
    }
}

/// A view of a checkpoint under a name prefix, loading tensors onto one device.
#[derive(Clone)]
pub struct Weights<'a> {
    gpu: &'a Device,
    /// None: random weights (see [`Weights::random`]).
    checkpoint: Option<&'a Checkpoint>,
    prefix: String,
    /// With [`Weights::recording`]: every tensor loaded, under its full name (training
    /// optimizes the trainable ones and saves all).
    loaded: Option<Arc<Mutex<Vec<Recorded>>>>,
    /// Tensors loaded through this view are recorded as frozen ([`Weights::frozen`]).
    frozen: bool,
    /// The full names of the tensors read so far, through this view or any made from it,
    /// with what each contributes (nothing for a tied copy).
    read: Arc<Mutex<HashMap<String, Contribution>>>,
    /// With [`Weights::sharing`]: one model's view of a checkpoint several models share.
    task: Option<Arc<TaskView>>,
    /// The precision weight matrices load in ([`Weights::with_dtype`]); None: as stored.
    dtype: Option<WeightDtype>,
    /// With [`Weights::logging_quantized`]: each matrix quantized as it loaded.
    quantized: Option<Arc<Mutex<Vec<QuantizedTensor>>>>,
}

/// How one of the models of a checkpoint several share reads it: the shared tensors (names
/// under `shared_root`) as they are, loaded once for every model; the rest, its own, under
/// `head_prefix` (a multi-task model's task heads under `tasks.<task>.`; ELECTRA's generator
/// and discriminator under `generator.` and `discriminator.` around shared embeddings).
struct TaskView {
    head_prefix: String,
    shared_root: String,
    /// The shared tensors loaded so far, by name: every task's model holds the same ones.
    shared: Arc<Mutex<HashMap<String, Tensor>>>,
}

impl<'a> Weights<'a> {
    pub fn new(gpu: &'a Device, checkpoint: &'a Checkpoint) -> Self {
        Weights { gpu, checkpoint: Some(checkpoint), ..Weights::random(gpu) }
    }

    /// A checkpoint that holds every tensor a model asks for, filled with small
    /// pseudo-random values (deterministic per name): model-shaped benchmarks without weights.
    pub fn random(gpu: &'a Device) -> Self {
        Weights { gpu, checkpoint: None, prefix: String::new(), loaded: None, frozen: false, read: Arc::default(), task: None, dtype: None, quantized: None }
    }

    pub fn gpu(&self) -> &'a Device {
        self.gpu
    }

    /// The same weights, remembering every tensor loaded through them (and their prefixes).
    pub fn recording(self) -> Self {
        Weights { loaded: Some(Arc::default()), ..self }
    }

    /// The same weights, loading weight matrices ([`Weights::matrix`]) in `dtype` (None: as
    /// the checkpoint stores them, f32 for a checkpoint of floats).
    pub fn with_dtype(self, dtype: Option<WeightDtype>) -> Self {
        Weights { dtype, ..self }
    }

    /// The same weights, keeping a host copy of each matrix quantized as it loads (for
    /// [`Weights::take_quantized`]: what `sesame quantize` writes).
    pub fn logging_quantized(self) -> Self {
        Weights { quantized: Some(Arc::default()), ..self }
    }

    /// The matrices quantized so far, in load order.
    pub fn take_quantized(&self) -> Vec<QuantizedTensor> {
        self.quantized.as_ref().map_or_else(Vec::new, |q| std::mem::take(&mut *lock(q)))
    }

    /// The same view, whose tensors a recording remembers as frozen (their values on the
    /// host, as loaded): a model part that a run keeps fixed, such as ELMo's biLM under a
    /// task's scalar mix.
    pub fn frozen(&self) -> Self {
        Weights { frozen: true, ..self.clone() }
    }

    /// What a [`Weights::recording`] view has loaded so far, in load order, taken out of the
    /// record (frozen tensors' host values are not copied).
    pub fn take_loaded(&self) -> Vec<Recorded> {
        self.loaded.as_ref().map_or_else(Vec::new, |l| std::mem::take(&mut *lock(l)))
    }

    /// One model's view of a checkpoint several models share (see `TaskView`): its own tensors
    /// under `head_prefix`; the views made from the same `shared` map share the tensors
    /// under `shared_root` (`bert.`).
    pub fn sharing(&self, head_prefix: &str, shared_root: &str, shared: &Arc<Mutex<HashMap<String, Tensor>>>) -> Weights<'a> {
        let view = TaskView { head_prefix: head_prefix.to_string(), shared_root: shared_root.to_string(), shared: shared.clone() };
        Weights { task: Some(Arc::new(view)), ..self.clone() }
    }

    /// The checkpoint's key of `leaf`: its full name, or in a task's view, a head's name
    /// under the task's prefix.
    fn key(&self, leaf: &str) -> String {
        let name = self.name(leaf);
        match &self.task {
            Some(view) if !name.starts_with(&view.shared_root) => format!("{}{name}", view.head_prefix),
            _ => name,
        }
    }

    /// The same checkpoint under `prefix.part`.
    pub fn pp(&self, part: impl std::fmt::Display) -> Weights<'a> {
        Weights { prefix: self.name(&part.to_string()), ..self.clone() }
    }

    /// The full key of `leaf` under this prefix.
    pub fn name(&self, leaf: &str) -> String {
        if self.prefix.is_empty() {
            leaf.to_string()
        } else {
            format!("{}.{leaf}", self.prefix)
        }
    }

    pub fn contains(&self, leaf: &str) -> bool {
        self.checkpoint.is_none_or(|c| c.contains(&self.key(leaf)))
    }

    /// Whether this is [`Weights::random`] (which holds every name).
    pub fn is_random(&self) -> bool {
        self.checkpoint.is_none()
    }

    /// The values of tensor `leaf` on the host as f32, which must have `shape`.
    pub fn values(&self, leaf: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let name = self.key(leaf);
        let values = match self.checkpoint {
            None => random_values(&name, shape.iter().product()),
            Some(checkpoint) => {
                self.check_shape(&name, shape)?;
                checkpoint.to_f32(&name)?.0
            }
        };
        lock(&self.read).insert(name.clone(), Contribution::f32(values.len()));
        if let (Some(loaded), true) = (&self.loaded, self.frozen) {
            lock(loaded).push(Recorded::Frozen { name, shape: shape.to_vec(), values: values.clone() });
        }
        Ok(values)
    }

    /// Tensor `leaf` on the GPU as f32, which must have `shape`.
    pub fn tensor(&self, leaf: &str, shape: &[usize]) -> Result<Tensor> {
        let key = self.key(leaf);
        let shared = self.task.as_ref().filter(|view| key.starts_with(&view.shared_root)).map(|view| &view.shared);
        if let Some(t) = shared.and_then(|shared| lock(shared).get(&key).cloned()) {
            // Loaded by another task: the same tensor (so their gradients add up).
            self.check_shape(&key, shape)?;
            return Ok(t);
        }
        let t = Tensor::from_slice(self.gpu, &self.values(leaf, shape)?, shape)?;
        if let Some(shared) = shared {
            lock(shared).insert(key.clone(), t.clone());
        }
        if let (Some(loaded), false) = (&self.loaded, self.frozen) {
            lock(loaded).push(Recorded::Trainable { name: key, value: t.clone() });
        }
        Ok(t)
    }

    /// Buffer `leaf` on the GPU as f32 (a running statistic), which must have `shape`: as
    /// [`Weights::tensor`], but a recording view records it as a buffer, not a parameter.
    pub fn buffer(&self, leaf: &str, shape: &[usize]) -> Result<Tensor> {
        let t = Tensor::from_slice(self.gpu, &self.values(leaf, shape)?, shape)?;
        if let (Some(loaded), false) = (&self.loaded, self.frozen) {
            lock(loaded).push(Recorded::Buffer { name: self.key(leaf), value: t.clone() });
        }
        Ok(t)
    }

    /// Weight matrix `leaf` [rows, cols] (a row per output channel: `nn.Linear`'s weight, an
    /// embedding table) in the view's dtype: f32 as [`Weights::tensor`] loads it, or quantized
    /// — as the checkpoint stores it, or at load from its floats.
    pub fn matrix(&self, leaf: &str, [rows, cols]: [usize; 2]) -> Result<Matrix> {
        self.matrix_stored(leaf, [rows, cols], false).map(|(matrix, _)| matrix)
    }

    /// GPT's `Conv1D` weight `leaf`, W [cols, rows] as floats (whose transpose is the
    /// [rows, cols] matrix), or [rows, cols] when quantized. Also says whether the matrix
    /// returned is the transposed one.
    pub fn conv1d_matrix(&self, leaf: &str, [rows, cols]: [usize; 2]) -> Result<(Matrix, bool)> {
        self.matrix_stored(leaf, [rows, cols], true)
    }

    fn matrix_stored(&self, leaf: &str, [rows, cols]: [usize; 2], transposed: bool) -> Result<(Matrix, bool)> {
        let key = self.key(leaf);
        let float_shape = if transposed { [cols, rows] } else { [rows, cols] };
        let stored = match self.checkpoint {
            Some(checkpoint) if checkpoint.dtype(&key).is_some_and(|d| matches!(d, Dtype::I8 | Dtype::U8)) => {
                let scales = quantize::scale_name(&key);
                let scale_tensor = if checkpoint.contains(&scales) { Some(checkpoint.stored(&scales)?) } else { None };
                let q = Quantized::from_stored(&key, &checkpoint.stored(&key)?, scale_tensor.as_ref(), rows, cols)?;
                lock(&self.read).insert(key.clone(), Contribution { values: rows * cols, bytes: q.bytes() });
                lock(&self.read).entry(scales).or_default();
                Some(q)
            }
            Some(checkpoint) if checkpoint.dtype(&key) == Some(Dtype::F16) && self.dtype == Some(WeightDtype::Quantized(QuantFormat::F16)) && !transposed => {
                let q = Quantized::from_stored(&key, &checkpoint.stored(&key)?, None, rows, cols)?;
                if let (Some(at), false) = (q.first_non_finite(), checkpoint::non_finite_allowed()) {
                    return Err(checkpoint_err(format!(
                        "tensor `{key}` holds a NaN or infinite value at index {at}: NaN or infinite weights give meaningless outputs (`--allow-non-finite-weights` loads them anyway)"
                    )));
                }
                lock(&self.read).insert(key.clone(), Contribution { values: rows * cols, bytes: q.bytes() });
                Some(q)
            }
            _ => None,
        };
        let wanted = self.dtype.and_then(WeightDtype::format);
        let q = match (stored, wanted) {
            (Some(q), _) if self.dtype == Some(WeightDtype::Fp32) => {
                // Decoded to f32: a parameter like any other (recorded for training).
                let t = Tensor::from_slice(self.gpu, &q.dequantize(), &[rows, cols])?;
                lock(&self.read).insert(key.clone(), Contribution::f32(rows * cols));
                if let (Some(loaded), false) = (&self.loaded, self.frozen) {
                    lock(loaded).push(Recorded::Trainable { name: key, value: t.clone() });
                }
                return Ok((Matrix::F32(t), false));
            }
            // As stored (no dtype asked for), or stored as asked.
            (Some(q), None) => q,
            (Some(q), Some(format)) if q.format == format => q,
            (Some(q), Some(format)) => {
                return Err(checkpoint_err(format!(
                    "tensor `{key}` is stored {}; it does not load as {} (quantize the fp32 model to {} instead)",
                    q.format.name(),
                    format.name(),
                    format.name()
                )))
            }
            (None, None) => return Ok((Matrix::F32(self.tensor(leaf, &float_shape)?), transposed)),
            (None, Some(format)) => {
                let values = self.values(leaf, &float_shape)?;
                let values = if transposed { transpose(&values, cols, rows) } else { values };
                Quantized::quantize(format, &values, rows, cols).map_err(|e| checkpoint_err(format!("tensor `{key}`: {e}")))?
            }
        };
        if self.loaded.is_some() {
            return Err(checkpoint_err(format!("tensor `{key}` is {}: training needs fp32 weights (train from the fp32 model)", q.format.name())));
        }
        // The device holds the words and scales (quantized at load: not the floats read).
        lock(&self.read).insert(key.clone(), Contribution { values: rows * cols, bytes: q.bytes() });
        if let Some(log) = &self.quantized {
            lock(log).push(QuantizedTensor { name: key, matrix: q.clone(), conv1d: transposed });
        }
        Ok((Matrix::Quantized(QuantizedMatrix::upload(self.gpu, &q)?), false))
    }

    /// [`Weights::untied`] for an output layer's weight matrix, loaded as [`Weights::matrix`].
    pub fn untied_matrix(&self, leaf: &str, shape: [usize; 2], tied: bool) -> Result<Option<Matrix>> {
        if !tied {
            return self.matrix(leaf, shape).map(Some);
        }
        self.untied(leaf, &shape, true).map(|_| None)
    }

    /// Marks tensor `leaf`, a checkpoint's copy of a tensor the model ties to another (read
    /// elsewhere), as read, after checking its shape.
    pub fn tied_copy(&self, leaf: &str, shape: &[usize]) -> Result<()> {
        let name = self.key(leaf);
        if self.checkpoint.is_some() {
            self.check_shape(&name, shape)?;
        }
        lock(&self.read).entry(name).or_default();
        Ok(())
    }

    /// Tensor `leaf` of an output layer that transformers ties to an input table unless
    /// `tied` is false: None when tied (a copy the checkpoint may hold is only checked and
    /// marked as read), else the tensor, which must then be there.
    pub fn untied(&self, leaf: &str, shape: &[usize], tied: bool) -> Result<Option<Tensor>> {
        if !tied {
            return self.tensor(leaf, shape).map(Some);
        }
        if self.contains(leaf) {
            self.tied_copy(leaf, shape)?;
        }
        Ok(None)
    }

    /// An error unless the checkpoint's tensor `name` exists with `shape`.
    fn check_shape(&self, name: &str, shape: &[usize]) -> Result<()> {
        let Some(checkpoint) = self.checkpoint else { return Ok(()) };
        match checkpoint.shape(name) {
            None => Err(checkpoint.missing(name)),
            Some(actual) if actual != shape => Err(checkpoint_err(format!("tensor `{name}` has shape {actual:?}, but the config implies {shape:?}"))),
            Some(_) => Ok(()),
        }
    }

    /// The checkpoint's floating-point tensors that nothing has read through these weights
    /// (integer buffers, such as `embeddings.position_ids`, are no model's to read).
    pub fn unread(&self) -> Vec<String> {
        let Some(checkpoint) = self.checkpoint else { return Vec::new() };
        let read = lock(&self.read);
        checkpoint.names().filter(|name| checkpoint.is_floating_point(name) && !read.contains_key(*name)).map(str::to_string).collect()
    }

    /// An error naming the checkpoint's floating-point tensors that `model` read none of
    /// (but those `ignored` accepts, such as other heads'): weights a config (`config_file`)
    /// does not describe, e.g. more layers than it says.
    /// In a task's view, only the task's own head is checked: the shared tensors may be
    /// another task's to read (the multi-task model checks them once all are loaded).
    pub fn check_all_read(&self, model: &str, config_file: &str, ignored: impl Fn(&str) -> bool) -> Result<()> {
        let mine = |name: &str| self.task.as_ref().is_none_or(|view| name.starts_with(&view.head_prefix));
        let mut unread: Vec<String> = self.unread().into_iter().filter(|name| mine(name) && !ignored(name)).collect();
        if unread.is_empty() {
            return Ok(());
        }
        unread.sort_unstable();
        let count = unread.len();
        unread.truncate(5);
        Err(checkpoint_err(format!(
            "{count} tensor(s) in the checkpoint are read by no module of `{model}`: {}{} (does {config_file}, e.g. its number of layers, match the weights?)",
            unread.join(", "),
            if count > 5 { ", …" } else { "" }
        )))
    }

    /// The number of values in the tensors read so far (a tensor shared by several modules
    /// counts once).
    pub fn parameter_count(&self) -> usize {
        lock(&self.read).values().map(|c| c.values).sum()
    }

    /// The bytes the tensors read so far take on the device (quantized matrices as their
    /// words and scales), each counted once.
    pub fn weight_bytes(&self) -> usize {
        lock(&self.read).values().map(|c| c.bytes).sum()
    }

    /// The shape of tensor `leaf` in the checkpoint (None for random weights or a missing tensor).
    pub fn shape(&self, leaf: &str) -> Option<Vec<usize>> {
        self.checkpoint.and_then(|c| c.shape(&self.key(leaf))).map(<[usize]>::to_vec)
    }
}

/// Serializes `(name, dtype, shape, little-endian bytes)` entries as one safetensors file.
pub fn serialize(entries: &[(&str, Dtype, &[usize], &[u8])]) -> Result<Vec<u8>> {
    let views = entries
        .iter()
        .map(|&(name, dtype, shape, bytes)| {
            let view = safetensors::tensor::TensorView::new(dtype, shape.to_vec(), bytes).map_err(|e| SesameError::Io(format!("{name}: {e}")))?;
            Ok((name, view))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize(views, None).map_err(|e| SesameError::Io(format!("serializing safetensors: {e}")))
}

/// Serializes f32 tensors, `(name, shape, values)`, as one safetensors file.
pub fn serialize_f32<N: AsRef<str>, S: AsRef<[usize]>, V: AsRef<[f32]>>(tensors: &[(N, S, V)]) -> Result<Vec<u8>> {
    let entries: Vec<(&str, Dtype, &[usize], &[u8])> =
        tensors.iter().map(|(name, shape, values)| (name.as_ref(), Dtype::F32, shape.as_ref(), bytemuck::cast_slice::<f32, u8>(values.as_ref()))).collect();
    serialize(&entries)
}

/// The transpose of row-major `values` [rows, cols].
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols).flat_map(|c| (0..rows).map(move |r| values[r * cols + c])).collect()
}

/// `n` values in [-0.05, 0.05) from a generator seeded by `name` (FNV-1a, then xorshift).
fn random_values(name: &str, n: usize) -> Vec<f32> {
    let mut state = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
        })
        .collect()
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::gpu;
    use pollster::block_on;
    use safetensors::tensor::TensorView;

    fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views: Vec<(&str, TensorView)> = tensors.iter().map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap())).collect();
        safetensors::serialize(views, None).unwrap()
    }

    /// A safetensors file whose JSON header `edit` rewrites (the length prefix follows).
    fn bytes_of(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)], edit: impl Fn(String) -> String) -> Vec<u8> {
        let bytes = file(tensors);
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = edit(String::from_utf8(bytes[8..8 + header_len].to_vec()).unwrap());
        [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), &bytes[8 + header_len..]].concat()
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn loads_tensors_by_prefixed_name_and_converts_half_precision() {
        let halves: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
        let bf: Vec<u8> = [0.25f32].iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect();
        let bytes = file(&[
            ("encoder.layer.0.dense.weight", Dtype::F32, vec![2, 3], f32_bytes(&[1., 2., 3., 4., 5., 6.])),
            ("encoder.layer.0.dense.bias", Dtype::F16, vec![2], halves),
            ("pooler.scale", Dtype::BF16, vec![1], bf),
        ]);
        let ckpt = Checkpoint::from_bytes(bytes).unwrap();
        let w = Weights::new(gpu(), &ckpt);
        let layer = w.pp("encoder").pp("layer.0").pp("dense");
        assert_eq!(layer.name("weight"), "encoder.layer.0.dense.weight");
        let weight = layer.tensor("weight", &[2, 3]).unwrap();
        assert_eq!(block_on(weight.to_vec::<f32>()).unwrap(), vec![1., 2., 3., 4., 5., 6.]);
        assert_eq!(block_on(layer.tensor("bias", &[2]).unwrap().to_vec::<f32>()).unwrap(), vec![1.5, -2.0]);
        assert_eq!(ckpt.to_f32("pooler.scale").unwrap().0, vec![0.25]);
        assert!(layer.contains("bias") && !layer.contains("gamma"));
    }

    #[test]
    fn bad_checkpoints_and_requests_are_clear_errors() {
        let bytes = file(&[("a.weight", Dtype::F32, vec![2, 2], f32_bytes(&[1., 2., 3., 4.])), ("a.ids", Dtype::I64, vec![1], vec![0; 8])]);
        let truncated = Checkpoint::from_bytes(bytes[..bytes.len() - 3].to_vec()).err().unwrap().to_string();
        assert!(truncated.contains("not a valid safetensors file"), "{truncated}");
        assert!(Checkpoint::from_bytes(b"garbage".to_vec()).is_err());
        assert!(Checkpoint::from_bytes(Vec::new()).is_err());

        let ckpt = Checkpoint::from_bytes(bytes).unwrap();
        let w = Weights::new(gpu(), &ckpt).pp("a");
        let missing = w.tensor("bias", &[2]).unwrap_err().to_string();
        assert!(missing.contains("`a.bias` is missing") && missing.contains("a.weight"), "{missing}");
        let shape = w.tensor("weight", &[4]).unwrap_err().to_string();
        assert!(shape.contains("[2, 2]") && shape.contains("[4]"), "{shape}");
        let dtype = w.tensor("ids", &[1]).unwrap_err().to_string();
        assert!(dtype.contains("I64"), "{dtype}");

        // Header errors name the tensor.
        let truncated = Checkpoint::from_bytes(bytes_of(&[("b.weight", Dtype::F32, vec![2], f32_bytes(&[1., 2.]))], |h| h)[..30].to_vec());
        assert!(truncated.is_err());
        let wrong_shape = bytes_of(&[("b.weight", Dtype::F32, vec![2], f32_bytes(&[1., 2.]))], |h| h.replace("[2]", "[3]"));
        let err = Checkpoint::from_bytes(wrong_shape).err().unwrap().to_string();
        assert!(err.contains("tensor `b.weight` has shape [3] of F32, but data_offsets [0, 8] span 8 bytes"), "{err}");
        // And the metadata entry that is not a string.
        let metadata =
            bytes_of(&[("b.weight", Dtype::F32, vec![2], f32_bytes(&[1., 2.]))], |h| h.replacen('{', r#"{"__metadata__":{"format":"pt","epoch":5},"#, 1));
        let err = Checkpoint::from_bytes(metadata).err().unwrap().to_string();
        assert!(err.contains("`__metadata__` entry `epoch` is 5, not a string"), "{err}");

        // NaN and infinite weights are refused, naming the tensor.
        let nan = Checkpoint::from_bytes(file(&[("c.weight", Dtype::F32, vec![3], f32_bytes(&[1., f32::NAN, 2.]))])).unwrap();
        let err = nan.to_f32("c.weight").unwrap_err().to_string();
        assert!(err.contains("tensor `c.weight` holds NaN at index 1") && err.contains("--allow-non-finite-weights"), "{err}");
        let inf = Checkpoint::from_bytes(file(&[("d", Dtype::F16, vec![1], half::f16::INFINITY.to_le_bytes().to_vec())])).unwrap();
        assert!(inf.to_f32("d").unwrap_err().to_string().contains("holds inf"));
    }
}
