//! A checkpoint's safetensors files: one `model.safetensors`, or the shards that a
//! `model.safetensors.index.json` names. Only the headers are parsed up front; each tensor's
//! bytes are read when a model asks for it — from memory, from disk (natively) or from the
//! page's JavaScript arrays (src/web) — so loading never holds a second copy of the checkpoint.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use safetensors::tensor::{Dtype, Metadata, TensorInfo};

use super::checkpoint_err;
use crate::error::{Result, SesameError};

/// The weights of an unsharded checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";
/// The index of a sharded checkpoint: `{"weight_map": {tensor: shard file}}`.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// The most shards an index may name (the largest checkpoints on the hub have hundreds).
const MAX_SHARDS: usize = 10_000;
/// safetensors' own bound on a file's JSON header.
const MAX_HEADER_BYTES: usize = 100_000_000;

/// Whether weights may be NaN or ±Inf (off: such a tensor is an error naming it).
static ALLOW_NON_FINITE: AtomicBool = AtomicBool::new(false);

/// Lets checkpoints with NaN or infinite weights load from now on in this process (`sesame
/// --allow-non-finite-weights`, the package's `allowNonFiniteWeights`): for inspecting a
/// broken checkpoint. Their outputs are then checked instead (see `models::check_finite`).
pub fn allow_non_finite_weights(allow: bool) {
    ALLOW_NON_FINITE.store(allow, Ordering::Relaxed);
}

/// Whether [`allow_non_finite_weights`] is on.
pub(crate) fn non_finite_allowed() -> bool {
    ALLOW_NON_FINITE.load(Ordering::Relaxed)
}

/// Bytes kept outside wasm memory — the page's JavaScript arrays — copied in a range at a time.
#[cfg(target_arch = "wasm32")]
pub trait ExternalBytes {
    /// The file's length in bytes.
    fn size(&self) -> usize;
    /// The bytes in `range`, which lies within `size()`.
    fn read(&self, range: Range<usize>) -> Result<Vec<u8>>;
}

/// One safetensors file's bytes.
pub enum FileBytes {
    /// The whole file in memory.
    Memory(Vec<u8>),
    /// A regular file on disk, read a tensor at a time.
    #[cfg(not(target_arch = "wasm32"))]
    Disk { file: std::sync::Mutex<std::fs::File>, len: usize, path: std::path::PathBuf },
    /// Bytes held in JavaScript (see [`ExternalBytes`]).
    #[cfg(target_arch = "wasm32")]
    External(Box<dyn ExternalBytes>),
}

impl From<Vec<u8>> for FileBytes {
    fn from(bytes: Vec<u8>) -> Self {
        FileBytes::Memory(bytes)
    }
}

impl FileBytes {
    /// A file on disk, which must be a regular file (links are followed to one).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path) -> Result<FileBytes> {
        let (file, len) = crate::files::open_regular(path)?;
        let len = usize::try_from(len).map_err(|_| SesameError::Io(format!("{}: {len} bytes is too large to address", path.display())))?;
        Ok(FileBytes::Disk { file: std::sync::Mutex::new(file), len, path: path.to_owned() })
    }

    pub fn len(&self) -> usize {
        match self {
            FileBytes::Memory(bytes) => bytes.len(),
            #[cfg(not(target_arch = "wasm32"))]
            FileBytes::Disk { len, .. } => *len,
            #[cfg(target_arch = "wasm32")]
            FileBytes::External(external) => external.size(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in `range`, which the caller has checked lies within `len()`.
    fn read(&self, range: Range<usize>) -> Result<Cow<'_, [u8]>> {
        match self {
            FileBytes::Memory(bytes) => Ok(Cow::Borrowed(&bytes[range])),
            #[cfg(not(target_arch = "wasm32"))]
            FileBytes::Disk { file, path, .. } => {
                use std::io::{Read, Seek, SeekFrom};
                let mut bytes = vec![0; range.len()];
                let mut file = crate::sync::lock(file);
                file.seek(SeekFrom::Start(range.start as u64)).and_then(|_| file.read_exact(&mut bytes)).map_err(crate::files::io_err(path))?;
                Ok(Cow::Owned(bytes))
            }
            #[cfg(target_arch = "wasm32")]
            FileBytes::External(external) => external.read(range).map(Cow::Owned),
        }
    }
}

/// A sharded checkpoint's index (model.safetensors.index.json), checked.
pub struct CheckpointIndex {
    /// Each tensor's shard file.
    pub weight_map: BTreeMap<String, String>,
    /// The shard files, each once: plain file names beside the index.
    pub shards: Vec<String>,
}

impl CheckpointIndex {
    /// Parses an index; a shard named by a path elsewhere (or no shard, or too many) is an
    /// error before anything is opened or fetched.
    pub fn parse(index_json: &[u8]) -> Result<CheckpointIndex> {
        #[derive(serde::Deserialize)]
        struct Index {
            weight_map: BTreeMap<String, String>,
        }
        let Index { weight_map } = serde_json::from_slice(index_json)
            .map_err(|e| checkpoint_err(format!("{INDEX_FILE} is not a checkpoint index ({{\"weight_map\": {{tensor: file}}}}): {e}")))?;
        let mut shards: Vec<String> = weight_map.values().cloned().collect();
        shards.sort_unstable();
        shards.dedup();
        if shards.is_empty() {
            return Err(checkpoint_err(format!("{INDEX_FILE} names no tensors")));
        }
        if shards.len() > MAX_SHARDS {
            return Err(checkpoint_err(format!("{INDEX_FILE} names {} shard files; at most {MAX_SHARDS} are read", shards.len())));
        }
        if let Some(bad) = shards.iter().find(|f| f.is_empty() || f.contains(['/', '\\']) || *f == "." || *f == "..") {
            return Err(checkpoint_err(format!("{INDEX_FILE} names the shard {bad:?}; expected a file name beside the index")));
        }
        Ok(CheckpointIndex { weight_map, shards })
    }
}

/// One safetensors file of a checkpoint.
struct Shard {
    /// Its file name, for errors.
    name: String,
    bytes: FileBytes,
    /// Where its tensor data starts (after the 8-byte length and the JSON header).
    data_start: usize,
}

/// A checkpoint's tensors by name, over one or more safetensors files.
#[derive(Default)]
pub struct Checkpoint {
    shards: Vec<Shard>,
    /// Each tensor's shard (an index into `shards`) and place in it.
    tensors: HashMap<String, (usize, TensorInfo)>,
}

impl Checkpoint {
    /// Parses a whole `model.safetensors` in memory; malformed or truncated files are errors.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Checkpoint> {
        Checkpoint::from_file(SINGLE_FILE, bytes.into())
    }

    /// A checkpoint in one safetensors file, `name` (for errors).
    pub fn from_file(name: &str, bytes: FileBytes) -> Result<Checkpoint> {
        let mut checkpoint = Checkpoint::default();
        checkpoint.add_shard(name, bytes)?;
        Ok(checkpoint)
    }

    /// A sharded checkpoint: `index_json` (model.safetensors.index.json) puts each tensor in a
    /// shard file beside it, whose bytes `open` gives by file name. The shards must hold the
    /// tensors where the index says, and no tensor twice.
    pub fn from_index(index_json: &[u8], mut open: impl FnMut(&str) -> Result<FileBytes>) -> Result<Checkpoint> {
        let index = CheckpointIndex::parse(index_json)?;
        let mut checkpoint = Checkpoint::default();
        for file in &index.shards {
            checkpoint.add_shard(file, open(file)?)?;
        }
        for (tensor, file) in &index.weight_map {
            match checkpoint.tensors.get(tensor) {
                Some((shard, _)) if checkpoint.shards[*shard].name == *file => {}
                Some((shard, _)) => {
                    return Err(checkpoint_err(format!("{INDEX_FILE} puts tensor `{tensor}` in {file}, but it is in {}", checkpoint.shards[*shard].name)));
                }
                None => return Err(checkpoint_err(format!("{INDEX_FILE} puts tensor `{tensor}` in {file}, which does not hold it"))),
            }
        }
        Ok(checkpoint)
    }

    /// A checkpoint folder's weights through `files`: from this machine's disk a tensor at a
    /// time ([`Checkpoint::open_dir`]), else model.safetensors read whole.
    pub fn read_dir(files: &dyn crate::files::Files, dir: &std::path::Path) -> Result<Checkpoint> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(dir) = files.local_path(dir) {
            return Checkpoint::open_dir(&dir);
        }
        let single = dir.join(SINGLE_FILE);
        Checkpoint::from_bytes(files.read(&single)?).map_err(|e| in_file(&single.display().to_string(), e))
    }

    /// A checkpoint folder's weights, read from disk a tensor at a time: model.safetensors, or
    /// else model.safetensors.index.json and its shards.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(dir: &std::path::Path) -> Result<Checkpoint> {
        let single = dir.join(SINGLE_FILE);
        if single.exists() || !dir.join(INDEX_FILE).exists() {
            return Checkpoint::from_file(SINGLE_FILE, FileBytes::open(&single)?).map_err(|e| in_file(&single.display().to_string(), e));
        }
        let index = crate::files::read_file(&dir.join(INDEX_FILE))?;
        Checkpoint::from_index(&index, |name| FileBytes::open(&dir.join(name)))
    }

    fn add_shard(&mut self, name: &str, bytes: FileBytes) -> Result<()> {
        // A shard's errors name it; a lone model.safetensors's are as they always were.
        let (data_start, metadata) = read_header(&bytes).map_err(|e| if name == SINGLE_FILE { e } else { in_file(name, e) })?;
        let shard = self.shards.len();
        for (tensor, info) in metadata.tensors() {
            if let Some((other, _)) = self.tensors.get(&tensor) {
                return Err(checkpoint_err(format!("tensor `{tensor}` is in both {} and {name}", self.shards[*other].name)));
            }
            self.tensors.insert(tensor, (shard, info.clone()));
        }
        self.shards.push(Shard { name: name.to_owned(), bytes, data_start });
        Ok(())
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The bytes of a checkpoint in one file (a sharded one is not one file).
    pub fn into_bytes(mut self) -> Result<Vec<u8>> {
        match (self.shards.pop(), self.shards.is_empty()) {
            (Some(Shard { bytes: FileBytes::Memory(bytes), .. }), true) => Ok(bytes),
            (Some(shard), true) => Ok(shard.bytes.read(0..shard.bytes.len())?.into_owned()),
            _ => Err(checkpoint_err("a sharded checkpoint is not one file".into())),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|(_, info)| info.shape.as_slice())
    }

    /// Whether tensor `name` holds floating-point values (weights), rather than integers such
    /// as the `embeddings.position_ids` buffer older transformers versions saved.
    pub fn is_floating_point(&self, name: &str) -> bool {
        self.tensors.get(name).is_some_and(|(_, info)| matches!(info.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::F64))
    }

    /// The values of tensor `name` as f32 (f16, bf16 and f64 are converted), with its shape.
    pub fn to_f32(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let (shard, info) = self.tensors.get(name).ok_or_else(|| self.missing(name))?;
        let shard = &self.shards[*shard];
        let (start, end) = info.data_offsets;
        let element_bytes = (info.dtype.bitsize() / 8).max(1) as u64;
        // The stored bytes (unless already in memory) and the f32 values.
        crate::limits::check_host_bytes(|| format!("reading tensor `{name}`"), (end - start) as u64 / element_bytes * 4 + (end - start) as u64)?;
        let data = shard.bytes.read(shard.data_start + start..shard.data_start + end)?;
        let values: Vec<f32> = match info.dtype {
            Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::F64 => data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()) as f32).collect(),
            other => return Err(checkpoint_err(format!("tensor `{name}` has dtype {other:?}; expected a floating-point type"))),
        };
        if !ALLOW_NON_FINITE.load(Ordering::Relaxed) {
            if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                return Err(checkpoint_err(format!(
                    "tensor `{name}` holds {} at index {at}: NaN or infinite weights give meaningless outputs (`--allow-non-finite-weights` loads them anyway)",
                    values[at]
                )));
            }
        }
        Ok((values, info.shape.clone()))
    }

    /// Tensor `name` as stored: its dtype, shape and bytes (for quantized matrices, which
    /// `crate::quantize` decodes).
    pub fn stored(&self, name: &str) -> Result<crate::quantize::StoredTensor> {
        let (shard, info) = self.tensors.get(name).ok_or_else(|| self.missing(name))?;
        let shard = &self.shards[*shard];
        let (start, end) = info.data_offsets;
        crate::limits::check_host_bytes(|| format!("reading tensor `{name}`"), (end - start) as u64)?;
        let data = shard.bytes.read(shard.data_start + start..shard.data_start + end)?;
        Ok((info.dtype, info.shape.clone(), data.into_owned()))
    }

    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        self.tensors.get(name).map(|(_, info)| info.dtype)
    }

    pub(super) fn missing(&self, name: &str) -> SesameError {
        // Name a few keys that share the longest prefix, to show what the checkpoint holds.
        let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
        let mut near: Vec<&str> = self.names().filter(|n| n.starts_with(stem)).collect();
        near.sort_unstable();
        near.truncate(4);
        let hint = if near.is_empty() { format!("{} tensors, none under `{stem}`", self.tensors.len()) } else { format!("it has {}", near.join(", ")) };
        checkpoint_err(format!("tensor `{name}` is missing from the checkpoint ({hint})"))
    }
}

/// A checkpoint error `e` about the file `name`, saying so.
fn in_file(name: &str, e: SesameError) -> SesameError {
    match e {
        SesameError::Checkpoint(message) => checkpoint_err(format!("{name}: {message}")),
        other => other,
    }
}

/// A safetensors file's header: where its data starts, and its tensors, which must tile the
/// data exactly. Only the header is read.
fn read_header(bytes: &FileBytes) -> Result<(usize, Metadata)> {
    let len = bytes.len();
    let invalid = |detail: String| checkpoint_err(format!("not a valid safetensors file ({len} bytes): {detail}"));
    if len < 8 {
        return Err(invalid("shorter than the 8-byte length of its header".into()));
    }
    let prefix: [u8; 8] = bytes.read(0..8)?.as_ref().try_into().unwrap_or_default();
    let header_len = u64::from_le_bytes(prefix);
    let header_len = usize::try_from(header_len)
        .ok()
        .filter(|&n| n <= MAX_HEADER_BYTES && n <= len - 8)
        .ok_or_else(|| invalid(format!("a header of {header_len} bytes does not fit the file (or safetensors' 100 MB bound)")))?;
    let header = bytes.read(8..8 + header_len)?;
    let data_len = len - 8 - header_len;
    // Names the tensor at fault where it can (the safetensors crate's errors name none).
    let named = |fallback: String| {
        let tensor = || inconsistent_tensor(&header, data_len as u64).map(|(name, why)| format!("tensor `{name}` {why}"));
        invalid(bad_metadata(&header).or_else(tensor).unwrap_or(fallback))
    };
    let metadata: Metadata = serde_json::from_slice(&header).map_err(|e| named(e.to_string()))?;
    if metadata.data_len() != data_len {
        return Err(named(format!("its tensors take {} bytes of data, but the file holds {data_len}", metadata.data_len())));
    }
    Ok((8 + header_len, metadata))
}

/// What is wrong with a safetensors header's `__metadata__`, which must map names to strings.
fn bad_metadata(header: &[u8]) -> Option<String> {
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    // A null `__metadata__` is no metadata, as the safetensors crate reads it.
    let metadata = header.get("__metadata__").filter(|metadata| !metadata.is_null())?;
    let Some(entries) = metadata.as_object() else { return Some(format!("`__metadata__` is {metadata}, not an object of strings")) };
    entries.iter().find(|(_, value)| !value.is_string()).map(|(key, value)| format!("`__metadata__` entry `{key}` is {value}, not a string"))
}

/// The first tensor of a safetensors header whose shape, dtype and data offsets disagree, or
/// whose data lies past the end of the data, and what is wrong with it.
fn inconsistent_tensor(header: &[u8], data_len: u64) -> Option<(String, String)> {
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    let mut tensors: Vec<(&String, &serde_json::Value)> = header.iter().filter(|(name, _)| *name != "__metadata__").collect();
    tensors.sort_by_key(|(_, info)| info.pointer("/data_offsets/0").and_then(serde_json::Value::as_u64));
    tensors.into_iter().find_map(|(name, info)| {
        let offsets: Vec<u64> = info.get("data_offsets")?.as_array()?.iter().filter_map(serde_json::Value::as_u64).collect();
        let &[start, end] = offsets.as_slice() else { return Some((name.clone(), "has no [start, end] data_offsets".into())) };
        let shape: Vec<u64> = info.get("shape")?.as_array()?.iter().filter_map(serde_json::Value::as_u64).collect();
        let dtype = info.get("dtype")?.as_str()?;
        let element_bits: u64 = match dtype {
            "F64" | "I64" | "U64" => 64,
            "F32" | "I32" | "U32" => 32,
            "F16" | "BF16" | "I16" | "U16" => 16,
            "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => 8,
            _ => return Some((name.clone(), format!("has dtype `{dtype}`, which Sesame cannot read"))),
        };
        let bytes = shape.iter().try_fold(element_bits, |acc, &d| acc.checked_mul(d)).map(|bits| bits / 8);
        if end < start || bytes != Some(end - start) {
            return Some((name.clone(), format!("has shape {shape:?} of {dtype}, but data_offsets [{start}, {end}] span {} bytes", end.saturating_sub(start))));
        }
        (end > data_len).then(|| (name.clone(), format!("ends at byte {end} of the data, but the file holds {data_len} bytes of data (truncated?)")))
    })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::weights::serialize;

    /// A safetensors file of one-value F32 tensors.
    fn shard(tensors: &[(&str, f32)]) -> Vec<u8> {
        let bytes: Vec<[u8; 4]> = tensors.iter().map(|(_, v)| v.to_le_bytes()).collect();
        let entries: Vec<(&str, Dtype, &[usize], &[u8])> =
            tensors.iter().zip(&bytes).map(|((name, _), b)| (*name, Dtype::F32, &[1usize][..], &b[..])).collect();
        serialize(&entries).unwrap()
    }

    fn index(map: &[(&str, &str)]) -> Vec<u8> {
        let weight_map: BTreeMap<&str, &str> = map.iter().copied().collect();
        serde_json::to_vec(&serde_json::json!({ "metadata": { "total_size": 12 }, "weight_map": weight_map })).unwrap()
    }

    #[test]
    fn shards_load_as_their_index_says_and_disagreements_are_named() {
        let files: HashMap<&str, Vec<u8>> = HashMap::from([
            ("a.safetensors", shard(&[("x", 1.0), ("y", 2.0)])),
            ("b.safetensors", shard(&[("z", 3.0)])),
            ("x-again.safetensors", shard(&[("x", 4.0), ("w", 5.0)])),
            ("broken.safetensors", b"not safetensors".to_vec()),
        ]);
        let open = |name: &str| files.get(name).cloned().map(FileBytes::from).ok_or_else(|| SesameError::Io(format!("there is no {name}")));
        let checkpoint = Checkpoint::from_index(&index(&[("x", "a.safetensors"), ("y", "a.safetensors"), ("z", "b.safetensors")]), open).unwrap();
        assert_eq!((checkpoint.to_f32("x").unwrap().0, checkpoint.to_f32("z").unwrap().0), (vec![1.0], vec![3.0]));
        assert!(checkpoint.into_bytes().unwrap_err().to_string().contains("not one file"));

        let index_of_two = CheckpointIndex::parse(&index(&[("x", "a.safetensors"), ("y", "a.safetensors"), ("z", "b.safetensors")])).unwrap();
        assert_eq!(index_of_two.shards, ["a.safetensors", "b.safetensors"]);
        let err = |index_json: &[u8]| Checkpoint::from_index(index_json, open).err().unwrap().to_string();
        let cases = [
            (index(&[("x", "a.safetensors"), ("z", "a.safetensors")]), "puts tensor `z` in a.safetensors, which does not hold it"),
            (index(&[("x", "b.safetensors"), ("y", "a.safetensors")]), "puts tensor `x` in b.safetensors, but it is in a.safetensors"),
            (index(&[("y", "a.safetensors"), ("w", "x-again.safetensors")]), "tensor `x` is in both a.safetensors and x-again.safetensors"),
            (index(&[("x", "../a.safetensors")]), "names the shard \"../a.safetensors\"; expected a file name beside the index"),
            (index(&[("x", "c.safetensors")]), "there is no c.safetensors"),
            (index(&[("x", "broken.safetensors")]), "broken.safetensors: not a valid safetensors file (15 bytes)"),
            (index(&[]), "names no tensors"),
            (b"{\"weight_map\": []}".to_vec(), "is not a checkpoint index"),
        ];
        for (index_json, expected) in cases {
            let message = err(&index_json);
            assert!(message.contains(expected), "{message}\nexpected: {expected}");
        }
    }

    #[test]
    fn a_folder_on_disk_is_read_a_tensor_at_a_time() {
        let dir = std::env::temp_dir().join(format!("sesame-checkpoint-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.safetensors"), shard(&[("x", 1.5)])).unwrap();
        std::fs::write(dir.join("b.safetensors"), shard(&[("y", -2.0)])).unwrap();
        std::fs::write(dir.join(INDEX_FILE), index(&[("x", "a.safetensors"), ("y", "b.safetensors")])).unwrap();
        let sharded = Checkpoint::open_dir(&dir).unwrap();
        assert_eq!((sharded.to_f32("x").unwrap().0, sharded.to_f32("y").unwrap().0), (vec![1.5], vec![-2.0]));

        // model.safetensors comes first; a truncated one is an error naming its path.
        let whole = shard(&[("x", 1.5), ("y", -2.0)]);
        std::fs::write(dir.join(SINGLE_FILE), &whole).unwrap();
        let single = Checkpoint::open_dir(&dir).unwrap();
        assert_eq!(single.to_f32("y").unwrap().0, vec![-2.0]);
        assert_eq!(single.into_bytes().unwrap(), whole);
        std::fs::write(dir.join(SINGLE_FILE), &whole[..whole.len() - 2]).unwrap();
        let err = Checkpoint::open_dir(&dir).err().unwrap().to_string();
        assert!(err.contains(&format!("{}: not a valid safetensors file", dir.join(SINGLE_FILE).display())) && err.contains("truncated?"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
