//! Weight matrices in fewer bits: the formats, their packing on the host, and the decoder
//! every backend matches. A matrix is W [N, K] with a row per output channel (PyTorch's
//! `nn.Linear` layout; GPT's `Conv1D`, stored [K, N], is transposed before quantizing), and
//! is held as u32 words, row after row, each row padded to whole groups:
//!
//! | format | bits | scales | a row's words |
//! |---|---|---|---|
//! | `f16` | 16, IEEE half | none | 2 elements per word, the lower half first; padded to 8 elements |
//! | `q8`  | 8, signed | one f32 per block of 32 along K: max\|block\| / 127 | 4 per word, element 4w + j in byte j; padded to 32 |
//! | `q4`  | 4 | one f32 per block of 32 along K | 8 per word, element 8w + j in bits 4j..4j + 4; padded to 32 |
//!
//! q8 is symmetric per block of 32 (GGUF's q8_0): q = round(w / s) in −127..=127, w ≈ q·s.
//! Blocks rather than one scale per output channel, because the integer kernels quantize
//! activations in the same blocks and multiply codes by codes: with a scale per row of W,
//! MiniLM's embeddings fell to 0.9978 cosine against f32, with blocks they stay at 0.9990
//! (SST-2 sentences, worst of 256). Checkpoints of the first q8 layout, with one scale a row,
//! still load: each row's scale becomes the scale of each of its blocks. q4 is the
//! layout of GGUF's q4_0 (blocks of 32 with one scale, a 4-bit code per element, no zero
//! point): d = m / −8 with m the block's element of largest magnitude,
//! q = clamp(round(w / d) + 8, 0, 15), w ≈ (q − 8)·d, so the largest element is exact and the
//! codes span all 16 levels. Padding decodes to 0.

use safetensors::tensor::Dtype;

#[cfg(target_endian = "big")]
compile_error!("the quantized formats are little-endian words, as on every target Sesame builds for");

use crate::error::{arg_err, Result, SesameError};

/// Elements in one block of q8 and q4 (one scale each).
pub const BLOCK: usize = 32;

/// How a weight matrix is stored.
/// The codes the host device quantizes activations to for an integer product of q8 or q4
/// weights (symmetric, in the blocks of 32 the weights use): what the CPU's kernels multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationCodes {
    /// −127..=127.
    I8,
    /// −32767..=32767.
    I16,
}

impl ActivationCodes {
    /// The largest code: a block's scale is its largest magnitude over it.
    pub fn max_code(self) -> f32 {
        match self {
            ActivationCodes::I8 => 127.0,
            ActivationCodes::I16 => 32767.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    F16,
    Q8,
    Q4,
}

impl QuantFormat {
    pub const ALL: [QuantFormat; 3] = [QuantFormat::F16, QuantFormat::Q8, QuantFormat::Q4];

    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::F16 => "f16",
            QuantFormat::Q8 => "q8",
            QuantFormat::Q4 => "q4",
        }
    }

    /// The code the kernels' params carry (`FORMAT_*` in `shaders/quantized_common.wgsl`).
    pub(crate) fn code(self) -> u32 {
        match self {
            QuantFormat::F16 => 0,
            QuantFormat::Q8 => 1,
            QuantFormat::Q4 => 2,
        }
    }

    /// Elements a row is padded to a multiple of.
    pub fn group(self) -> usize {
        match self {
            QuantFormat::F16 => 8,
            QuantFormat::Q8 | QuantFormat::Q4 => BLOCK,
        }
    }

    /// Elements per u32 word.
    fn per_word(self) -> usize {
        match self {
            QuantFormat::F16 => 2,
            QuantFormat::Q8 => 4,
            QuantFormat::Q4 => 8,
        }
    }

    /// The words of one row of `cols` elements.
    pub fn row_words(self, cols: usize) -> usize {
        cols.div_ceil(self.group()) * self.group() / self.per_word()
    }

    /// The scales of one row of `cols` elements.
    pub fn row_scales(self, cols: usize) -> usize {
        match self {
            QuantFormat::F16 => 0,
            QuantFormat::Q8 | QuantFormat::Q4 => cols.div_ceil(BLOCK),
        }
    }
}

impl std::str::FromStr for QuantFormat {
    type Err = SesameError;
    fn from_str(s: &str) -> Result<Self> {
        QuantFormat::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| arg_err!("quantize", "unknown weight format `{s}` (expected f16, q8 or q4)"))
    }
}

/// The precision a model's weight matrices load in (`--dtype`, the package's `dtype` option):
/// f32, or one of the [`QuantFormat`]s. Layer norms, biases and the small tables (positions,
/// token types) stay f32 whatever is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightDtype {
    Fp32,
    Quantized(QuantFormat),
}

impl WeightDtype {
    pub fn name(self) -> &'static str {
        match self {
            WeightDtype::Fp32 => "fp32",
            WeightDtype::Quantized(format) => format.name(),
        }
    }

    pub fn format(self) -> Option<QuantFormat> {
        match self {
            WeightDtype::Fp32 => None,
            WeightDtype::Quantized(format) => Some(format),
        }
    }
}

impl std::str::FromStr for WeightDtype {
    type Err = SesameError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fp32" => Ok(WeightDtype::Fp32),
            _ => s.parse().map(WeightDtype::Quantized).map_err(|_| arg_err!("dtype", "unknown dtype `{s}` (expected fp32, f16, q8 or q4)")),
        }
    }
}

/// The checkpoint name of the scales of the quantized matrix `name` (`….weight_scale`).
pub fn scale_name(name: &str) -> String {
    format!("{name}_scale")
}

/// One tensor as a checkpoint stores it: dtype, shape, little-endian bytes.
pub type StoredTensor = (Dtype, Vec<usize>, Vec<u8>);

/// A quantized matrix on the host: `rows` × `cols` elements in `words` (rows of
/// `format.row_words(cols)`), with `format.row_scales(cols)` scales per row.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub format: QuantFormat,
    pub rows: usize,
    pub cols: usize,
    pub words: Vec<u32>,
    pub scales: Vec<f32>,
}

impl Quantized {
    /// Quantizes row-major `values` [rows, cols]. Non-finite values are refused (they have
    /// no scale).
    pub fn quantize(format: QuantFormat, values: &[f32], rows: usize, cols: usize) -> Result<Quantized> {
        if rows.checked_mul(cols) != Some(values.len()) || cols == 0 {
            return Err(arg_err!("quantize", "{} values do not fill a {rows}×{cols} matrix", values.len()));
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(arg_err!("quantize", "element {i} of the {rows}×{cols} matrix is {}: only finite weights can be quantized", values[i]));
        }
        if format == QuantFormat::F16 {
            if let Some(i) = values.iter().position(|v| v.abs() > half::f16::MAX.to_f32()) {
                return Err(arg_err!("quantize", "element {i} of the {rows}×{cols} matrix is {}, past f16's largest value (65504)", values[i]));
            }
        }
        let (row_words, row_scales) = (format.row_words(cols), format.row_scales(cols));
        let mut words = vec![0u32; rows * row_words];
        let mut scales = vec![0f32; rows * row_scales];
        for (r, row) in values.chunks_exact(cols).enumerate() {
            let (words, scales) = (&mut words[r * row_words..][..row_words], &mut scales[r * row_scales..][..row_scales]);
            match format {
                QuantFormat::F16 => pack(words, 2, cols, |i| half::f16::from_f32(row[i]).to_bits() as u32),
                QuantFormat::Q8 => {
                    for (b, block) in row.chunks(BLOCK).enumerate() {
                        scales[b] = block.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                    }
                    // Divided, not multiplied by 1/scale, which overflows for subnormal scales.
                    pack(words, 4, cols, |i| match scales[i / BLOCK] {
                        scale if scale > 0.0 => (row[i] / scale).round().clamp(-127.0, 127.0) as i8 as u8 as u32,
                        _ => 0,
                    });
                }
                QuantFormat::Q4 => {
                    for (b, block) in row.chunks(BLOCK).enumerate() {
                        let largest = block.iter().fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
                        scales[b] = largest / -8.0;
                    }
                    // Padding (i ≥ cols) and blocks of zeros get code 8: zero.
                    pack(words, 8, cols.div_ceil(BLOCK) * BLOCK, |i| match (row.get(i), scales[i / BLOCK]) {
                        (Some(v), d) if d != 0.0 => ((v / d).round() + 8.0).clamp(0.0, 15.0) as u32,
                        _ => 8,
                    });
                }
            }
        }
        Ok(Quantized { format, rows, cols, words, scales })
    }

    /// A matrix from stored words and scales, refused unless their counts are the format's
    /// for `rows` × `cols` and every scale is finite.
    pub fn from_parts(format: QuantFormat, rows: usize, cols: usize, words: Vec<u32>, scales: Vec<f32>) -> Result<Quantized> {
        let expected = (rows.checked_mul(format.row_words(cols)), rows.checked_mul(format.row_scales(cols)));
        if cols == 0 || expected != (Some(words.len()), Some(scales.len())) {
            return Err(SesameError::Checkpoint(format!(
                "a {} matrix of {rows}×{cols} needs {} words and {} scales, got {} and {}",
                format.name(),
                rows.saturating_mul(format.row_words(cols)),
                rows.saturating_mul(format.row_scales(cols)),
                words.len(),
                scales.len()
            )));
        }
        if let Some(i) = scales.iter().position(|s| !s.is_finite()) {
            return Err(SesameError::Checkpoint(format!("scale {i} of a {} matrix is {}", format.name(), scales[i])));
        }
        // −128 has no negation in i8, which the integer kernels' sign trick needs.
        if format == QuantFormat::Q8 {
            let codes: &[i8] = bytemuck::cast_slice(&words);
            if let Some(i) = codes.iter().position(|&c| c == i8::MIN) {
                let row_bytes = 4 * format.row_words(cols);
                return Err(SesameError::Checkpoint(format!("element [{}, {}] of a q8 matrix is −128: q8 codes are −127..=127", i / row_bytes, i % row_bytes)));
            }
        }
        Ok(Quantized { format, rows, cols, words, scales })
    }

    /// Row `row` as f32, into `out` (`cols` long).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let (row_words, row_scales) = (self.format.row_words(self.cols), self.format.row_scales(self.cols));
        dequantize_row(self.format, &self.words[row * row_words..][..row_words], &self.scales[row * row_scales..][..row_scales], out);
    }

    /// The whole matrix as row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut values = vec![0f32; self.rows * self.cols];
        for (r, out) in values.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(r, out);
        }
        values
    }

    /// x [M, K] · Wᵀ (+ bias) as the host device's integer products compute it for q8 and q4,
    /// in plain loops: each row of `x` quantized in blocks of 32 to `activations`' codes (scale = max
    /// |block| / the largest code; codes rounded to even), exact integer sums of A's codes times W's (q4's: nibble − 8) per
    /// block, scaled by the two blocks' scales, added in f64. The reference its kernels are
    /// tested against (the crate's tests and tests/int8_products.rs, natively and in wasm);
    /// None for f16.
    #[doc(hidden)]
    pub fn integer_product_reference(&self, x: &[f32], bias: Option<&[f32]>, activations: ActivationCodes) -> Option<Vec<f32>> {
        let nibbles = match self.format {
            QuantFormat::F16 => return None,
            QuantFormat::Q8 => false,
            QuantFormat::Q4 => true,
        };
        let (n, k, blocks) = (self.rows, self.cols, self.cols.div_ceil(BLOCK));
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        // Element i of row j's codes.
        let w_code = |j: usize, i: usize| -> i64 {
            if nibbles {
                ((bytes[j * blocks * BLOCK / 2 + i / 2] >> (4 * (i % 2))) & 15) as i64 - 8
            } else {
                bytes[j * blocks * BLOCK + i] as i8 as i64
            }
        };
        let mut y = Vec::with_capacity(x.len() / k * n);
        for row in x.chunks_exact(k) {
            let mut codes = vec![0i64; blocks * BLOCK];
            let mut scales = vec![0f32; blocks];
            for (b, block) in row.chunks(BLOCK).enumerate() {
                scales[b] = block.iter().fold(0f32, |m, v| m.max(v.abs())) / activations.max_code();
                for (i, v) in block.iter().enumerate() {
                    codes[b * BLOCK + i] = if scales[b] > 0.0 { (v / scales[b]).round_ties_even() as i64 } else { 0 };
                }
            }
            for j in 0..n {
                let mut sum = bias.map_or(0.0, |b| b[j] as f64);
                for (b, &scale) in scales.iter().enumerate() {
                    let dot: i64 = (0..BLOCK).map(|i| codes[b * BLOCK + i] * w_code(j, b * BLOCK + i)).sum();
                    sum += scale as f64 * self.scales[j * blocks + b] as f64 * dot as f64;
                }
                y.push(sum as f32);
            }
        }
        Some(y)
    }

    /// How a checkpoint stores it: the matrix, and its scales (none for f16). f16 is F16
    /// [N, K] and q8 I8 [N, K], unpadded, as any safetensors reader shows them; q4 is U8
    /// [N, padded K / 2], two codes a byte (the lower nibble first); both have F32 scales
    /// [N, K / 32 rounded up].
    pub fn to_stored(&self) -> (StoredTensor, Option<StoredTensor>) {
        let (rows, cols) = (self.rows, self.cols);
        let row_bytes: Vec<&[u8]> = bytemuck::cast_slice::<u32, u8>(&self.words).chunks_exact(4 * self.format.row_words(cols)).collect();
        let unpadded = |element_bytes: usize| row_bytes.iter().flat_map(|row| row[..cols * element_bytes].iter().copied()).collect::<Vec<u8>>();
        let matrix = match self.format {
            QuantFormat::F16 => (Dtype::F16, vec![rows, cols], unpadded(2)),
            QuantFormat::Q8 => (Dtype::I8, vec![rows, cols], unpadded(1)),
            QuantFormat::Q4 => (Dtype::U8, vec![rows, 4 * self.format.row_words(cols)], row_bytes.concat()),
        };
        let scales = (self.format != QuantFormat::F16)
            .then(|| (Dtype::F32, scale_shape(self.format, rows, cols), bytemuck::cast_slice::<f32, u8>(&self.scales).to_vec()));
        (matrix, scales)
    }

    /// The matrix `name` ([rows, cols]) from how a checkpoint stores it (see
    /// [`Quantized::to_stored`]): the format follows from the matrix's dtype (F16, I8, U8).
    /// Shapes or scales that do not fit are errors naming the tensor.
    pub fn from_stored(name: &str, matrix: &StoredTensor, scales: Option<&StoredTensor>, rows: usize, cols: usize) -> Result<Quantized> {
        let (dtype, shape, bytes) = matrix;
        let format = match dtype {
            Dtype::F16 => QuantFormat::F16,
            Dtype::I8 => QuantFormat::Q8,
            Dtype::U8 => QuantFormat::Q4,
            other => {
                return Err(SesameError::Checkpoint(format!("tensor `{name}` has dtype {other:?}, which is no quantized format (F16, I8 for q8, U8 for q4)")))
            }
        };
        let row_words = format.row_words(cols);
        let stored_cols = match format {
            QuantFormat::F16 | QuantFormat::Q8 => cols,
            QuantFormat::Q4 => 4 * row_words,
        };
        if shape[..] != [rows, stored_cols] || bytes.len() != rows * stored_cols * dtype.bitsize() / 8 {
            return Err(SesameError::Checkpoint(format!(
                "tensor `{name}` ({}) has shape {shape:?}; a {rows}×{cols} matrix is stored as [{rows}, {stored_cols}]",
                format.name()
            )));
        }
        let stored_row = bytes.len() / rows.max(1);
        let mut words = vec![0u32; rows * row_words];
        let word_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for (r, row) in bytes.chunks_exact(stored_row.max(1)).enumerate().take(rows) {
            word_bytes[r * 4 * row_words..][..row.len()].copy_from_slice(row);
        }
        let scale_name = scale_name(name);
        let scales = match (format, scales) {
            (QuantFormat::F16, _) => Vec::new(),
            (_, None) => return Err(SesameError::Checkpoint(format!("tensor `{name}` is {} but the checkpoint has no `{scale_name}`", format.name()))),
            (_, Some((Dtype::F32, shape, bytes))) if *shape == scale_shape(format, rows, cols) && bytes.len() == 4 * rows * format.row_scales(cols) => {
                f32s(bytes).collect()
            }
            // The first q8 layout: a scale a row, which each of the row's blocks takes.
            (QuantFormat::Q8, Some((Dtype::F32, shape, bytes))) if shape[..] == [rows] && bytes.len() == 4 * rows => {
                f32s(bytes).flat_map(|scale| std::iter::repeat_n(scale, format.row_scales(cols))).collect()
            }
            (_, Some((dtype, shape, _))) => {
                return Err(SesameError::Checkpoint(format!(
                    "`{scale_name}` is {dtype:?} {shape:?}; the scales of a {} matrix of {rows}×{cols} are F32 with {} values",
                    format.name(),
                    rows * format.row_scales(cols)
                )))
            }
        };
        Quantized::from_parts(format, rows, cols, words, scales).map_err(|e| SesameError::Checkpoint(format!("tensor `{name}`: {e}")))
    }

    /// The first element that is NaN or infinite (only f16 holds them: the other formats'
    /// codes are finite, and their scales are checked).
    pub fn first_non_finite(&self) -> Option<usize> {
        if self.format != QuantFormat::F16 {
            return None;
        }
        let halves: &[u16] = bytemuck::cast_slice(&self.words);
        let row = 2 * self.format.row_words(self.cols);
        (0..self.rows * self.cols).find(|&i| halves[i / self.cols * row + i % self.cols] & 0x7c00 == 0x7c00)
    }

    /// Bytes of the words and scales.
    pub fn bytes(&self) -> usize {
        4 * (self.words.len() + self.scales.len())
    }
}

/// The shape a checkpoint stores a matrix's scales in: [rows, blocks].
fn scale_shape(format: QuantFormat, rows: usize, cols: usize) -> Vec<usize> {
    vec![rows, format.row_scales(cols)]
}

/// Little-endian f32s.
fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Writes `code(i)` for elements 0..count into `words`, `per_word` codes per word, element
/// i of a word at bits (i mod per_word)·(32 / per_word).
fn pack(words: &mut [u32], per_word: usize, count: usize, code: impl Fn(usize) -> u32) {
    let bits = 32 / per_word;
    for i in 0..count {
        words[i / per_word] |= code(i) << (bits * (i % per_word));
    }
}

/// Decodes one row (`out.len()` elements) from its words and scales: the decoder the WGSL
/// and the host twins match. It reads the words as the little-endian bytes they are (every
/// target Sesame builds for is little-endian), in loops the compiler vectorizes.
pub fn dequantize_row(format: QuantFormat, words: &[u32], scales: &[f32], out: &mut [f32]) {
    match format {
        QuantFormat::F16 => {
            use half::slice::HalfFloatSliceExt;
            let halves: &[half::f16] = bytemuck::cast_slice(words);
            halves[..out.len()].convert_to_f32_slice(out);
        }
        QuantFormat::Q8 => {
            let bytes: &[u8] = bytemuck::cast_slice(words);
            for ((values, codes), &scale) in out.chunks_mut(BLOCK).zip(bytes.chunks_exact(BLOCK)).zip(scales) {
                for (v, &b) in values.iter_mut().zip(codes) {
                    *v = b as i8 as f32 * scale;
                }
            }
        }
        QuantFormat::Q4 => {
            let bytes: &[u8] = bytemuck::cast_slice(words);
            let decode = |values: &mut [f32; BLOCK], codes: &[u8], d: f32| {
                for (pair, &b) in values.chunks_exact_mut(2).zip(codes) {
                    pair[0] = ((b & 15) as f32 - 8.0) * d;
                    pair[1] = ((b >> 4) as f32 - 8.0) * d;
                }
            };
            for ((values, &d), codes) in out.chunks_mut(BLOCK).zip(scales).zip(bytes.chunks_exact(BLOCK / 2)) {
                match <&mut [f32; BLOCK]>::try_from(&mut *values) {
                    Ok(whole) => decode(whole, codes, d),
                    // The row's last, partial block.
                    Err(_) => {
                        let mut block = [0f32; BLOCK];
                        decode(&mut block, codes, d);
                        values.copy_from_slice(&block[..values.len()]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i / cols) as f32)).collect()
    }

    #[test]
    fn each_format_round_trips_within_its_step() {
        for (rows, cols) in [(3, 8), (5, 37), (2, 64), (1, 1)] {
            let values = matrix(rows, cols);
            for format in QuantFormat::ALL {
                let q = Quantized::quantize(format, &values, rows, cols).unwrap();
                assert_eq!(q.words.len(), rows * format.row_words(cols));
                let back = q.dequantize();
                for r in 0..rows {
                    let row = &values[r * cols..][..cols];
                    let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
                    // Half a step: q8's step is max/127; f16 keeps 11 significant bits. q4's
                    // step is |d| = m/8 per block (at most the row's max over 8), and a value
                    // of the opposite sign to m clamps at code 15, a whole step short.
                    let tolerance = match format {
                        QuantFormat::F16 => largest / 2048.0,
                        QuantFormat::Q8 => largest / 127.0 / 2.0 + 1e-7,
                        QuantFormat::Q4 => largest / 8.0 + 1e-7,
                    };
                    for (c, (&want, &got)) in row.iter().zip(&back[r * cols..][..cols]).enumerate() {
                        assert!((want - got).abs() <= tolerance, "{} ({rows}×{cols}) [{r}, {c}]: {got} for {want}", format.name());
                    }
                }
            }
        }
    }

    #[test]
    fn extremes_are_exact_and_zero_rows_stay_zero() {
        let values = [0.5, -1.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0];
        for format in QuantFormat::ALL {
            let q = Quantized::quantize(format, &values, 2, 4).unwrap();
            let back = q.dequantize();
            assert_eq!(back[1], -1.0, "{}: the largest element", format.name());
            assert_eq!(&back[4..], &[0.0; 4], "{}: a zero row", format.name());
        }
    }

    #[test]
    fn stored_tensors_round_trip_and_bad_ones_are_named() {
        let values = matrix(3, 37);
        for format in QuantFormat::ALL {
            let q = Quantized::quantize(format, &values, 3, 37).unwrap();
            let (stored, scales) = q.to_stored();
            assert_eq!(Quantized::from_stored("w", &stored, scales.as_ref(), 3, 37).unwrap(), q, "{}", format.name());
            // q4 pads rows to blocks of 32, so a block more is what it can tell apart.
            let err = Quantized::from_stored("w", &stored, scales.as_ref(), 3, 37 + 32).unwrap_err().to_string();
            assert!(err.contains("tensor `w`") && err.contains("is stored as [3, "), "{err}");
            if let Some(scales) = scales {
                let err = Quantized::from_stored("w", &stored, None, 3, 37).unwrap_err().to_string();
                assert!(err.contains("no `w_scale`"), "{err}");
                let short = (scales.0, vec![2], scales.2[..8].to_vec());
                let err = Quantized::from_stored("w", &stored, Some(&short), 3, 37).unwrap_err().to_string();
                assert!(err.contains("`w_scale` is F32 [2]"), "{err}");
            }
        }
        // The first q8 layout, a scale a row: codes 1, 2, … in row 0 (scale 0.5), −1 in row 1 (2).
        let codes: Vec<u8> = (0..40).map(|i| i as u8 + 1).chain([0xff; 40]).collect();
        let legacy =
            Quantized::from_stored("w", &(Dtype::I8, vec![2, 40], codes), Some(&(Dtype::F32, vec![2], [0.5f32, 2.0].map(f32::to_le_bytes).concat())), 2, 40)
                .unwrap();
        assert_eq!(legacy.scales, [0.5, 0.5, 2.0, 2.0]);
        let back = legacy.dequantize();
        assert_eq!((back[0], back[39], back[40], back[79]), (0.5, 20.0, -2.0, -2.0));
        let err = Quantized::from_stored("w", &(Dtype::I32, vec![1, 1], vec![0; 4]), None, 1, 1).unwrap_err().to_string();
        assert!(err.contains("dtype I32"), "{err}");
        assert_eq!("q4".parse::<WeightDtype>().unwrap(), WeightDtype::Quantized(QuantFormat::Q4));
        assert!("int8".parse::<WeightDtype>().unwrap_err().to_string().contains("unknown dtype `int8` (expected fp32, f16, q8 or q4)"));
    }

    #[test]
    fn tiny_scales_zero_blocks_and_f16_limits() {
        // A subnormal scale must not turn into an infinite inverse (zeros would decode to m).
        let mut values = vec![0f32; 32];
        values[0] = 1e-38;
        for format in [QuantFormat::Q8, QuantFormat::Q4] {
            let back = Quantized::quantize(format, &values, 1, 32).unwrap().dequantize();
            assert!(back[1..].iter().all(|&v| v == 0.0), "{}: {back:?}", format.name());
        }
        let err = Quantized::quantize(QuantFormat::F16, &[1.0, 70000.0], 1, 2).unwrap_err().to_string();
        assert!(err.contains("element 1") && err.contains("65504"), "{err}");
        let mut q = Quantized::quantize(QuantFormat::F16, &[1.0, 2.0, 3.0], 1, 3).unwrap();
        assert_eq!(q.first_non_finite(), None);
        q.words[1] = 0x7c00; // +inf as element 2
        assert_eq!(q.first_non_finite(), Some(2));
    }

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        let err = Quantized::quantize(QuantFormat::Q8, &[1.0, f32::NAN], 1, 2).unwrap_err().to_string();
        assert!(err.contains("element 1") && err.contains("NaN"), "{err}");
        assert!(Quantized::quantize(QuantFormat::Q8, &[1.0; 5], 2, 3).is_err());
        let err = Quantized::from_parts(QuantFormat::Q4, 2, 40, vec![0; 8], vec![1.0; 4]).unwrap_err().to_string();
        assert!(err.contains("needs 16 words and 4 scales, got 8 and 4"), "{err}");
        let err = Quantized::from_parts(QuantFormat::Q8, 1, 8, vec![0; 8], vec![f32::INFINITY]).unwrap_err().to_string();
        assert!(err.contains("inf"), "{err}");
        let err = Quantized::from_parts(QuantFormat::Q8, 1, 8, vec![0, 0x0080_0000, 0, 0, 0, 0, 0, 0], vec![1.0]).unwrap_err().to_string();
        assert!(err.contains("element [0, 6] of a q8 matrix is −128"), "{err}");
        let err = "q5".parse::<QuantFormat>().unwrap_err().to_string();
        assert!(err.contains("unknown weight format `q5`"), "{err}");
    }
}
