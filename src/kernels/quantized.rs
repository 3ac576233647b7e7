//! Params, kernel declarations and host twins of the quantized-weight kernels
//! (`shaders/quantized.wgsl`, `shaders/quantized_gather.wgsl`, sharing
//! `quantized_common.wgsl`; `ops::quantized`): a linear layer's product with W [N, K] in one of
//! the formats of `crate::quantize`, and the lookup of rows of a quantized table. A q8 or q4 W
//! is multiplied code by code with A quantized in blocks: in i8 when A has few rows (`int8`:
//! decoding a token, short inputs), in `integer_gemm`'s tiles when it has hundreds (batches,
//! on x86-64: i8 with AVX-512 VNNI, i16 with AVX2 alone); f16's twin, and q8's and q4's
//! elsewhere, decode W with `quantize::dequantize_row`, a panel of rows at a time, and multiply
//! with the matmul twin's product (gemm natively), so the decoded matrix is never whole in
//! memory.

use super::activation_codes::QuantizedRows;
use super::int8::{self, CodeRows, Target};
#[cfg(integer_tiles)]
use super::integer_gemm;
use super::matmul::{multiply, Output};
use super::simd::dot;
use super::{each_chunk, kernel_params, scratch, Access, HostCall, Kernel, KernelParams};
use crate::error::Result;
use crate::quantize::{dequantize_row, ActivationCodes, QuantFormat};

pub(crate) const MATMUL: Kernel = Kernel {
    shader: "quantized",
    source: concat!(include_str!(concat!(env!("OUT_DIR"), "/quantized_common.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/quantized.wgsl"))),
    entry: "matmul_quantized",
    // weights, scales, a, bias, c
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(matmul_quantized),
};

pub(crate) const GATHER: Kernel = Kernel {
    shader: "quantized_gather",
    source: concat!(include_str!(concat!(env!("OUT_DIR"), "/quantized_common.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/quantized_gather.wgsl"))),
    entry: "gather_quantized",
    // weights, scales, ids, out
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(gather_quantized),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&MATMUL, &GATHER];

kernel_params! {
    pub(crate) struct Params {
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub format: u32,
        pub row_words: u32,
        pub a_rs: u32,
        pub c_rs: u32,
        pub has_bias: u32,
    }
}

/// Values of W decoded at a time (16 MB): as many rows as fit, so that a layer's matrix is
/// usually one panel and one GEMM call (panels of 64 and 256 rows took MiniLM's 1×128 from
/// 78 and 61 ms to 53 with 1024, measured natively on two threads).
/// (Smaller in unit tests, which then cover several panels.)
const PANEL_VALUES: usize = if cfg!(test) { 1 << 12 } else { 1 << 22 };

/// W as the twin reads it: its format and its words and scales, checked against the params.
struct Matrix<'a> {
    format: QuantFormat,
    words: &'a [u32],
    scales: &'a [f32],
    row_words: usize,
    row_scales: usize,
    k: usize,
}

impl<'a> Matrix<'a> {
    fn new(call: &HostCall<'a>, p: &Params) -> Result<Matrix<'a>> {
        let format = QuantFormat::ALL.into_iter().find(|f| f.code() == p.format).ok_or_else(|| call.fault(format!("format code {}", p.format)))?;
        let (n, k, row_words) = (p.n as usize, p.k as usize, p.row_words as usize);
        let row_scales = format.row_scales(k);
        // f16 has no scales (the binding is absent).
        let (words, scales) = (call.read_u32(0)?, call.optional_read(1)?.unwrap_or(&[]));
        if row_words != format.row_words(k) || words.len() < n * row_words || scales.len() < n * row_scales {
            return Err(call.fault(format!("a {} matrix of {n}×{k} ({row_words} words a row) does not fit its bindings", format.name())));
        }
        Ok(Matrix { format, words, scales, row_words, row_scales, k })
    }

    fn decode(&self, row: usize, out: &mut [f32]) {
        dequantize_row(self.format, &self.words[row * self.row_words..][..self.row_words], &self.scales[row * self.row_scales..][..self.row_scales], out);
    }
}

/// Up to this many rows of A, each row of W is decoded once into a small buffer (a few KB,
/// in cache) and multiplied with every row of A at once: W streams through memory a single
/// time, which is what decoding a token (one row) is bound by. Past it, panels of decoded rows
/// go through the matmul twin's product, whose blocks reuse them across rows.
const FUSED_ROWS: usize = 8;

/// How the host device multiplies a q8 or q4 W by `m` rows of A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// In integers, A in i8 codes, a row of A at a time against groups of W's rows (`int8`):
    /// up to `int8::MAX_ROWS` rows, where the CPU has no tiles for so many.
    Rows,
    /// In integers, in `integer_gemm`'s tiles of this CPU: from the route's `min_rows`.
    #[cfg(integer_tiles)]
    Tiles(integer_gemm::Route),
    /// In f32, over decoded panels of W (gemm natively), where no integer route beats it.
    DecodedPanels,
}

impl Route {
    fn for_rows(m: usize) -> Route {
        #[cfg(integer_tiles)]
        if let Some(tiles) = integer_gemm::Route::of_this_cpu().filter(|tiles| m >= tiles.min_rows()) {
            return Route::Tiles(tiles);
        }
        if m <= int8::MAX_ROWS {
            Route::Rows
        } else {
            Route::DecodedPanels
        }
    }
}

/// The codes the host device quantizes A to for a q8 or q4 product of `m` rows; None: it
/// multiplies in f32, over decoded panels of W.
pub(crate) fn activation_codes(m: usize) -> Option<ActivationCodes> {
    match Route::for_rows(m) {
        Route::Rows => Some(ActivationCodes::I8),
        #[cfg(integer_tiles)]
        Route::Tiles(tiles) => Some(tiles.activation_codes()),
        Route::DecodedPanels => None,
    }
}

/// `matmul_quantized`: c [M, c_rs] columns 0..N = a [M, a_rs] columns 0..K · Wᵀ (+ bias).
pub(crate) fn matmul_quantized(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let w = Matrix::new(call, &p)?;
    let (a, bias, c) = (call.read(2)?, call.optional_read(3)?, call.write(4)?);
    let (m, n, k, a_rs, c_rs) = (p.m as usize, p.n as usize, w.k, p.a_rs as usize, p.c_rs as usize);
    let bias = bias.filter(|_| p.has_bias != 0);
    if a.len() < m.saturating_sub(1) * a_rs + k || c.len() < m.saturating_sub(1) * c_rs + n || bias.is_some_and(|b| b.len() < n) {
        return Err(call.fault(format!("{m}×{k} · [{n}, {k}]ᵀ does not fit the bindings")));
    }
    if matches!(w.format, QuantFormat::Q8 | QuantFormat::Q4) {
        let nibbles = w.format == QuantFormat::Q4;
        let codes = CodeRows { codes: bytemuck::cast_slice(w.words), scales: w.scales, rows: n, blocks: w.row_scales, nibbles };
        let target = Target { c, c_rs, bias };
        match Route::for_rows(m) {
            Route::Rows => return int8::product(call.threads(), &QuantizedRows::<i8>::new(call.threads(), a, a_rs, m, k)?, codes, m, target),
            #[cfg(integer_tiles)]
            Route::Tiles(tiles) => return integer_gemm::product(tiles, call.threads(), (a, a_rs, k), codes, m, target),
            Route::DecodedPanels => {}
        }
    }
    if m <= FUSED_ROWS {
        return fused(call, &w, a, a_rs, bias, c, (m, n, c_rs));
    }
    let panel_rows = (PANEL_VALUES / k).clamp(1, n);
    let mut panel = scratch(panel_rows * k)?;
    for first in (0..n).step_by(panel_rows) {
        let rows = panel_rows.min(n - first);
        decode_rows(call, &w, first, &mut panel[..rows * k])?;
        // The panel is rows first..first + rows of W: columns of Wᵀ, written from column `first`.
        let product =
            super::matmul::Params { m: p.m, n: rows as u32, k: p.k, a_rs: p.a_rs, a_cs: 1, b_rs: 1, b_cs: p.k, c_rs: p.c_rs, ..bytemuck::Zeroable::zeroed() };
        let mut out = Output { c: &mut *c, c_rs, c_off: first, bias, accumulate: false };
        multiply(
            call,
            a,
            &panel[..rows * k],
            &product,
            &mut out,
            #[cfg(not(target_arch = "wasm32"))]
            call.native_gemm(),
        )?;
    }
    Ok(())
}

/// Decodes rows first.. of W into `panel` (K values a row), over the device's threads.
fn decode_rows(call: &HostCall<'_>, w: &Matrix<'_>, first: usize, panel: &mut [f32]) -> Result<()> {
    each_chunk(call.threads(), panel, w.k, |r, row| {
        w.decode(first + r, row);
        Ok(())
    })
}

/// C = A·Wᵀ (+ bias) for a few rows of A: each row of W decoded once, then dotted with every
/// row of A (rows of W split over the device's threads).
fn fused(call: &HostCall<'_>, w: &Matrix<'_>, a: &[f32], a_rs: usize, bias: Option<&[f32]>, c: &mut [f32], (m, n, c_rs): (usize, usize, usize)) -> Result<()> {
    let k = w.k;
    // Column-major results, [N, M]: a task owns a range of whole columns.
    let mut columns = scratch(n * m)?;
    let rows_of_a: Vec<&[f32]> = (0..m).map(|i| &a[i * a_rs..][..k]).collect();
    const TASK_ROWS: usize = 64;
    each_chunk(call.threads(), &mut columns, TASK_ROWS * m, |t, out| {
        let mut row = scratch(k)?;
        for (j, column) in out.chunks_exact_mut(m).enumerate() {
            w.decode(t * TASK_ROWS + j, &mut row);
            for (value, x) in column.iter_mut().zip(&rows_of_a) {
                *value = dot(x, &row);
            }
        }
        Ok(())
    })?;
    for (j, column) in columns.chunks_exact(m).enumerate() {
        let b = bias.map_or(0.0, |bias| bias[j]);
        for (i, &value) in column.iter().enumerate() {
            c[i * c_rs + j] = value + b;
        }
    }
    Ok(())
}

/// `gather_quantized`: out [M, K] row i = row ids[i] of W, decoded.
pub(crate) fn gather_quantized(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let w = Matrix::new(call, &p)?;
    let (ids, out) = (call.read_u32(2)?, call.write(3)?);
    let (m, n, k) = (p.m as usize, p.n as usize, w.k);
    if ids.len() < m || out.len() < m * k {
        return Err(call.fault(format!("{m} rows of {k} do not fit the bindings")));
    }
    for (&id, row) in ids.iter().zip(out.chunks_exact_mut(k)).take(m) {
        if id as usize >= n {
            return Err(call.fault(format!("row {id} of a table of {n}")));
        }
        w.decode(id as usize, row);
    }
    Ok(())
}
