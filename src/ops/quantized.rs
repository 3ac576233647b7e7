//! Linear layers and table lookups with quantized weights (`shaders/quantized*.wgsl`; the
//! formats are `crate::quantize`'s): a [`QuantizedMatrix`] is W [N, K] on a device, decoded
//! inside the kernels, so a layer's weights stay in their 16, 8 or 4 bits in memory.

use super::{as_u32, expect_dtype, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::Device;
use crate::kernels::quantized::{Params, GATHER, MATMUL};
use crate::quantize::{ActivationCodes, QuantFormat, Quantized};
use crate::tensor::{DType, Tensor};

/// A quantized weight matrix W [N, K] (a row per output channel) on a device.
#[derive(Clone, Debug)]
pub struct QuantizedMatrix {
    format: QuantFormat,
    rows: usize,
    cols: usize,
    /// u32 [N, row_words].
    words: Tensor,
    /// f32 [N · row_scales]; none for f16.
    scales: Option<Tensor>,
}

impl QuantizedMatrix {
    /// Uploads a matrix quantized on the host.
    pub fn upload(gpu: &Device, q: &Quantized) -> Result<QuantizedMatrix> {
        // The kernels index words and scales by row from the shape alone.
        let (words, scales) = (q.rows.saturating_mul(q.format.row_words(q.cols)), q.rows.saturating_mul(q.format.row_scales(q.cols)));
        if q.cols == 0 || words != q.words.len() || scales != q.scales.len() {
            return Err(arg_err!(
                "quantized matrix",
                "a {} matrix of {}×{} holds {} words and {} scales where its shape needs {words} and {scales}",
                q.format.name(),
                q.rows,
                q.cols,
                q.words.len(),
                q.scales.len()
            ));
        }
        let words = Tensor::from_slice(gpu, &q.words, &[q.rows, q.format.row_words(q.cols)])?;
        let scales = if q.scales.is_empty() { None } else { Some(Tensor::from_slice(gpu, &q.scales, &[q.scales.len()])?) };
        Ok(QuantizedMatrix { format: q.format, rows: q.rows, cols: q.cols, words, scales })
    }

    pub fn format(&self) -> QuantFormat {
        self.format
    }

    /// [N, K].
    pub fn shape(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }

    pub fn gpu(&self) -> &Device {
        self.words.gpu()
    }

    fn params(&self, op: &'static str, m: usize, has_bias: bool) -> Result<Params> {
        Ok(Params {
            m: as_u32(op, "rows", m)?,
            n: as_u32(op, "N", self.rows)?,
            k: as_u32(op, "K", self.cols)?,
            format: self.format.code(),
            row_words: as_u32(op, "row words", self.format.row_words(self.cols))?,
            a_rs: as_u32(op, "K", self.cols)?,
            c_rs: as_u32(op, "N", self.rows)?,
            has_bias: has_bias as u32,
        })
    }
}

/// A weight matrix as a layer holds it: f32 (trainable, in the layout its checkpoint has), or
/// quantized (inference only; always [out, in]).
#[derive(Clone, Debug)]
pub enum Matrix {
    F32(Tensor),
    Quantized(QuantizedMatrix),
}

impl Matrix {
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Matrix::F32(t) => t.shape().to_vec(),
            Matrix::Quantized(q) => q.shape().to_vec(),
        }
    }

    pub fn gpu(&self) -> &Device {
        match self {
            Matrix::F32(t) => t.gpu(),
            Matrix::Quantized(q) => q.gpu(),
        }
    }

    /// The f32 tensor (what training updates); a quantized matrix is an error saying so.
    pub fn f32(&self) -> Result<&Tensor> {
        match self {
            Matrix::F32(t) => Ok(t),
            Matrix::Quantized(q) => {
                Err(arg_err!("train", "a {} weight of shape {:?} cannot be trained: train from the fp32 model", q.format().name(), q.shape()))
            }
        }
    }
}

/// x \[.., K\] · Wᵀ (+ bias \[N\]) → \[.., N\]: `nn.Linear`'s forward with a quantized weight.
pub fn matmul_quantized(x: &Tensor, w: &QuantizedMatrix, bias: Option<&Tensor>) -> Result<Tensor> {
    let op = "matmul_quantized";
    expect_dtype(op, "x", x, DType::F32)?;
    let [n, k] = w.shape();
    if x.shape().last() != Some(&k) || x.numel() == 0 {
        return Err(shape_err!(op, "x {:?} must be [.., {k}] for a {} weight of shape [{n}, {k}]", x.shape(), w.format.name()));
    }
    if let Some(bias) = bias {
        expect_dtype(op, "bias", bias, DType::F32)?;
        if bias.shape() != [n] {
            return Err(shape_err!(op, "bias {:?} must be [{n}]", bias.shape()));
        }
    }
    let m = x.numel() / k;
    let mut shape = x.shape().to_vec();
    *shape.last_mut().expect("x has rank ≥ 1") = n;
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, &shape, DType::F32)?;
    let params = w.params(op, m, bias.is_some())?;
    // Tiles of 4 rows over y, and z past the per-dimension limit.
    let tiles = m.div_ceil(4) as u64;
    let max = gpu.limits().max_compute_workgroups_per_dimension as u64;
    let workgroups = [n.div_ceil(64) as u32, tiles.min(max) as u32, tiles.div_ceil(max) as u32];
    gpu.dispatch(&MATMUL, &[], &params, &[(&w.words).into(), w.scales.as_ref().into(), x.into(), bias.into(), (&y).into()], workgroups)?;
    Ok(y)
}

/// How the host device quantizes A for a q8 or q4 product of `m` rows, as this CPU (and
/// engine) chooses; None: not at all (f32 over decoded W). For tests that compare with
/// `Quantized::integer_product_reference`.
#[doc(hidden)]
pub fn host_activation_codes(m: usize) -> Option<ActivationCodes> {
    crate::kernels::quantized::activation_codes(m)
}

/// Rows `ids` of W, decoded: [ids.len(), K] (an embedding lookup in a quantized table).
pub fn gather_quantized(w: &QuantizedMatrix, ids: &[u32]) -> Result<Tensor> {
    let op = "gather_quantized";
    let [n, k] = w.shape();
    if let Some(i) = ids.iter().position(|&id| id as usize >= n) {
        return Err(arg_err!(op, "id {} at index {i} is out of range for a table of {n} rows", ids[i]));
    }
    if ids.is_empty() {
        return Err(arg_err!(op, "no ids to look up"));
    }
    let gpu = w.gpu();
    let ids_tensor = Tensor::from_slice(gpu, ids, &[ids.len()])?;
    let out = Tensor::empty(gpu, &[ids.len(), k], DType::F32)?;
    let params = w.params(op, ids.len(), false)?;
    let items = ids.len() * k.div_ceil(8);
    gpu.dispatch(&GATHER, &[], &params, &[(&w.words).into(), w.scales.as_ref().into(), (&ids_tensor).into(), (&out).into()], grid_1d(gpu, items, 64))?;
    Ok(out)
}

#[cfg(test)]
/// CPU reference of [`matmul_quantized`] in f64: x [M, K] · dequant(W)ᵀ (+ bias).
pub(crate) fn matmul_quantized_reference(x: &[f32], w: &Quantized, bias: Option<&[f32]>) -> Vec<f32> {
    let (n, k) = (w.rows, w.cols);
    let weights = w.dequantize();
    let mut y = Vec::with_capacity(x.len() / k * n);
    for row in x.chunks_exact(k) {
        for j in 0..n {
            let sum: f64 = row.iter().zip(&weights[j * k..][..k]).map(|(&a, &b)| a as f64 * b as f64).sum();
            y.push((sum + bias.map_or(0.0, |b| b[j] as f64)) as f32);
        }
    }
    y
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::{every_device, gpu, host};
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn every_format_matches_the_reference_on_every_device() {
        // One row and many; K short of a group, across q4 blocks, and whole; N past the twin's
        // panel of 256 rows and past a workgroup of 64 columns.
        // 40 rows: past the host's product of few rows in int8, to its tiles (x86-64 with AVX-512
        // VNNI, A in i8; with AVX2 and without AVX-512, in i16; else f32 over decoded panels, as
        // f16 always); 520: bands of rows over threads.
        for (seed, (m, n, k, with_bias)) in
            [(1, 5, 7, true), (6, 70, 40, false), (9, 300, 64, true), (4, 3, 100, true), (40, 9, 50, true), (520, 9, 50, true)].into_iter().enumerate()
        {
            let mut r = rng(seed as u64);
            let x = random_vec(&mut r, m * k, 1.0);
            let weights = random_vec(&mut r, n * k, 0.5);
            let bias = random_vec(&mut r, n, 0.5);
            for format in QuantFormat::ALL {
                let q = Quantized::quantize(format, &weights, n, k).unwrap();
                let decoded = matmul_quantized_reference(&x, &q, with_bias.then_some(&bias[..]));
                let integer = host_activation_codes(m).and_then(|codes| q.integer_product_reference(&x, with_bias.then_some(&bias[..]), codes));
                for gpu in every_device() {
                    // The host device multiplies q8 and q4 codes by codes (A in i8 for few
                    // rows, in i8 or i16 for many); the WGSL decodes W to f32.
                    let want = integer.as_ref().filter(|_| gpu.is_host()).unwrap_or(&decoded);
                    let w = QuantizedMatrix::upload(gpu, &q).unwrap();
                    let xt = Tensor::from_slice(gpu, &x, &[m, k]).unwrap();
                    let bt = Tensor::from_slice(gpu, &bias, &[n]).unwrap();
                    let y = matmul_quantized(&xt, &w, with_bias.then_some(&bt)).unwrap();
                    assert_eq!(y.shape(), [m, n]);
                    let got = block_on(y.to_vec::<f32>()).unwrap();
                    let what = format!("{} {m}×{k}·[{n}, {k}]ᵀ on {}", format.name(), gpu.adapter_info().name);
                    assert_close(&what, &got, want, 1e-4, 1e-4);
                }
            }
        }
    }

    #[test]
    fn quantized_products_stay_close_to_the_f32_ones() {
        // What the formats cost: relative error of the product against unquantized weights.
        let (m, n, k) = (8, 64, 256);
        let mut r = rng(7);
        let (x, weights) = (random_vec(&mut r, m * k, 1.0), random_vec(&mut r, n * k, 0.1));
        let f32_product: Vec<f32> = x
            .chunks_exact(k)
            .flat_map(|row| (0..n).map(|j| row.iter().zip(&weights[j * k..][..k]).map(|(a, b)| a * b).sum::<f32>()).collect::<Vec<_>>())
            .collect();
        let norm = f32_product.iter().map(|v| v * v).sum::<f32>().sqrt();
        for (format, bound) in [(QuantFormat::F16, 1e-3), (QuantFormat::Q8, 1e-2), (QuantFormat::Q4, 0.15)] {
            let q = Quantized::quantize(format, &weights, n, k).unwrap();
            let got = matmul_quantized_reference(&x, &q, None);
            if format == QuantFormat::Q8 {
                let both = q.integer_product_reference(&x, None, ActivationCodes::I8).unwrap();
                let err = both.iter().zip(&f32_product).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt() / norm;
                eprintln!("q8, activations in int8 blocks too: relative error {err:.2e}");
                assert!(err < 2e-2, "q8 × int8 activations: relative error {err}");
            }
            let err = got.iter().zip(&f32_product).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt() / norm;
            eprintln!("{}: relative error {err:.2e}", format.name());
            assert!(err < bound, "{}: relative error {err}", format.name());
        }
    }

    #[test]
    fn gathered_rows_are_the_decoded_rows() {
        let (n, k) = (10, 37);
        let weights = random_vec(&mut rng(3), n * k, 1.0);
        let ids = [3u32, 0, 9, 3];
        for format in QuantFormat::ALL {
            let q = Quantized::quantize(format, &weights, n, k).unwrap();
            let decoded = q.dequantize();
            let want: Vec<f32> = ids.iter().flat_map(|&id| decoded[id as usize * k..][..k].to_vec()).collect();
            for gpu in every_device() {
                let w = QuantizedMatrix::upload(gpu, &q).unwrap();
                let got = block_on(gather_quantized(&w, &ids).unwrap().to_vec::<f32>()).unwrap();
                assert_close(&format!("{} gather on {}", format.name(), gpu.adapter_info().name), &got, &want, 0.0, 0.0);
            }
        }
    }

    #[test]
    fn bad_operands_are_errors_naming_them() {
        let q = Quantized::quantize(QuantFormat::Q8, &[0.5; 12], 3, 4).unwrap();
        for gpu in [gpu(), host()] {
            let w = QuantizedMatrix::upload(gpu, &q).unwrap();
            let x = Tensor::from_slice(gpu, &[1.0f32; 10], &[2, 5]).unwrap();
            let err = matmul_quantized(&x, &w, None).unwrap_err().to_string();
            assert!(err.contains("[.., 4]"), "{err}");
            let x = Tensor::from_slice(gpu, &[1.0f32; 8], &[2, 4]).unwrap();
            let bias = Tensor::from_slice(gpu, &[1.0f32; 4], &[4]).unwrap();
            let err = matmul_quantized(&x, &w, Some(&bias)).unwrap_err().to_string();
            assert!(err.contains("bias [4] must be [3]"), "{err}");
            let err = gather_quantized(&w, &[1, 3]).unwrap_err().to_string();
            assert!(err.contains("id 3 at index 1 is out of range for a table of 3 rows"), "{err}");
        }
        let w = QuantizedMatrix::upload(host(), &q).unwrap();
        let x = Tensor::from_slice(gpu(), &[1.0f32; 8], &[2, 4]).unwrap();
        assert!(matmul_quantized(&x, &w, None).unwrap_err().to_string().contains("on another device"));
        // A matrix whose words or scales do not fit its shape is refused before any kernel reads it.
        let short_scales = Quantized { scales: vec![1.0; 2], ..q.clone() };
        let err = QuantizedMatrix::upload(host(), &short_scales).err().unwrap().to_string();
        assert!(err.contains("a q8 matrix of 3×4 holds 24 words and 2 scales where its shape needs 24 and 3"), "{err}");
        let short_words = Quantized { words: vec![0; 2], ..q };
        assert!(QuantizedMatrix::upload(host(), &short_words).is_err());
    }
}
