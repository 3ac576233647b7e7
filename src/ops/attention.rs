//! Fused multi-head scaled dot-product attention (`shaders/attention.wgsl`) with causal and
//! key-padding masks, optional attention probabilities, and cached keys/values for decoding.
//!
//! q is [B, Tq, Wq], k and v are [B, Tk', Wkv] (Tk' ≥ the `kv_len` attended to); head h of an
//! operand is columns `col + h·D .. col + (h+1)·D` of its rows, so a fused QKV projection
//! [B, T, 3C] is passed three times with columns 0, C and 2C. The output is [B, Tq, H·D] and
//! the probabilities, when asked for, [B, H, Tq, Tk]. [`attention_backward`]
//! (`shaders/attention_backward.wgsl`) differentiates it from those probabilities.

use super::dropout::Dropout;
use super::{as_u32, expect_f32, expect_shape};
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::KernelVariant;
use crate::kernels::attention::{Params, INVOCATION_PER_ROW, WORKGROUP_PER_ROW};
use crate::kernels::attention_backward::{BACKWARD_KEY, BACKWARD_QUERY, BACKWARD_VALUE};
use crate::tensor::{DType, Tensor};

const ROWS_MAX_HEAD_DIM: usize = 64;

/// The largest head size the kernel holds (4 dims per invocation × 64).
pub const MAX_HEAD_DIM: usize = 256;

/// Options of [`attention`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Attention<'a> {
    pub heads: usize,
    /// Width of the attended part of q, k and v rows: heads × head_dim. Default: q's row width.
    pub width: Option<usize>,
    /// Column where the heads start in q, k and v rows (for fused QKV tensors).
    pub q_col: usize,
    pub k_col: usize,
    pub v_col: usize,
    /// Query i may attend to keys 0..=query_offset + i.
    pub causal: bool,
    /// Absolute position of the first query; default `kv_len − Tq` (queries are the last
    /// positions, as when decoding against a cache).
    pub query_offset: Option<usize>,
    /// Keys attended to: rows 0..kv_len of k and v. Default: all rows.
    pub kv_len: Option<usize>,
    /// [B, ≥kv_len]: 1 where a key may be attended to, 0 where it is padding.
    pub key_mask: Option<&'a Tensor>,
    /// Score scale; default 1/√head_dim.
    pub scale: Option<f32>,
    /// Also return the attention probabilities (undropped).
    pub output_probs: bool,
    /// Dropout on the probabilities (training): the output is Σ_j P_ij·M_ij·V_j with M_ij the
    /// mask factor of element ij of [B, H, Tq, Tk]. The backward must get the same.
    pub dropout: Option<Dropout>,
    /// Overrides the device's kernel variant (for tests and benchmarks).
    pub variant: Option<KernelVariant>,
}

/// The resolved geometry shared by the kernel call and the CPU reference.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub batch: usize,
    pub tq: usize,
    pub tk: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub q_stride: usize,
    pub kv_stride: usize,
    /// Rows per batch item in k and v (≥ tk).
    pub kv_rows: usize,
    pub query_offset: usize,
    pub scale: f32,
    pub dropout: Option<Dropout>,
}

fn geometry(q: &[usize], k: &[usize], v: &[usize], mask: Option<&[usize]>, args: &Attention) -> Result<Geometry> {
    let op = "attention";
    let (batch, tq, q_stride) = (q[0], q[1], q[2]);
    let (kv_rows, kv_stride) = (k[1], k[2]);
    if k != v || k[0] != batch {
        return Err(shape_err!(op, "k {k:?} and v {v:?} must have the same shape, with q's batch {batch}"));
    }
    if args.heads == 0 {
        return Err(arg_err!(op, "heads must be at least 1"));
    }
    let width = args.width.unwrap_or(q_stride);
    if !width.is_multiple_of(args.heads) {
        return Err(shape_err!(op, "width {width} is not divisible by {} heads", args.heads));
    }
    let head_dim = width / args.heads;
    if head_dim == 0 {
        return Err(shape_err!(op, "heads of width {width}: nothing to attend with"));
    }
    if head_dim > MAX_HEAD_DIM {
        return Err(shape_err!(op, "head size {head_dim} exceeds the supported {MAX_HEAD_DIM}"));
    }
    if args.q_col + width > q_stride || args.k_col + width > kv_stride || args.v_col + width > kv_stride {
        return Err(shape_err!(
            op,
            "heads of width {width} at columns q {}, k {}, v {} do not fit rows of q {q:?} and k/v {k:?}",
            args.q_col,
            args.k_col,
            args.v_col
        ));
    }
    let tk = args.kv_len.unwrap_or(kv_rows);
    if tk == 0 || tk > kv_rows {
        return Err(shape_err!(op, "kv_len {tk} must be in 1..={kv_rows} (rows of k {k:?})"));
    }
    let query_offset = match args.query_offset {
        Some(o) => o,
        None => tk.checked_sub(tq).ok_or_else(|| shape_err!(op, "{tq} queries but only {tk} keys; give query_offset"))?,
    };
    if let Some(mask) = mask {
        if mask.len() != 2 || mask[0] != batch || mask[1] < tk {
            return Err(shape_err!(op, "key_mask {mask:?} must be [{batch}, ≥{tk}]"));
        }
    }
    let scale = args.scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    if args.output_probs || args.dropout.is_some() {
        // Probabilities (and their dropout mask) are indexed in u32.
        as_u32(op, "probabilities", batch * args.heads * tq * tk)?;
    }
    Ok(Geometry { batch, tq, tk, heads: args.heads, head_dim, q_stride, kv_stride, kv_rows, query_offset, scale, dropout: args.dropout })
}

/// Attention output [B, Tq, H·D] and, if asked for, the probabilities [B, H, Tq, Tk].
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, args: &Attention) -> Result<(Tensor, Option<Tensor>)> {
    let op = "attention";
    expect_f32(op, "q", q, 3)?;
    expect_f32(op, "k", k, 3)?;
    expect_f32(op, "v", v, 3)?;
    if let Some(mask) = args.key_mask {
        expect_f32(op, "key_mask", mask, 2)?;
    }
    let g = geometry(q.shape(), k.shape(), v.shape(), args.key_mask.map(Tensor::shape), args)?;
    let gpu = q.gpu();
    let width = g.heads * g.head_dim;
    let out = Tensor::empty(gpu, &[g.batch, g.tq, width], DType::F32)?;
    let probs = if args.output_probs { Some(Tensor::empty(gpu, &[g.batch, g.heads, g.tq, g.tk], DType::F32)?) } else { None };
    let params = params(&g, args)?;
    let bindings = [q.into(), k.into(), v.into(), args.key_mask.into(), (&out).into(), probs.as_ref().into()];
    let batch = as_u32(op, "batch", g.batch)?;
    let per_invocation = args.variant.unwrap_or(gpu.kernel_variant()) == KernelVariant::Blocked && g.head_dim % 4 == 0 && g.head_dim <= ROWS_MAX_HEAD_DIM;
    if per_invocation {
        gpu.dispatch(&INVOCATION_PER_ROW, &[], &params, &bindings, [params.tq.div_ceil(64), params.heads, batch])?;
    } else {
        gpu.dispatch(&WORKGROUP_PER_ROW, &[], &params, &bindings, [params.tq, params.heads, batch])?;
    }
    Ok((out, probs))
}

/// The kernels' params for a geometry and its options.
fn params(g: &Geometry, args: &Attention) -> Result<Params> {
    let u = |what: &str, n: usize| as_u32("attention", what, n);
    let width = g.heads * g.head_dim;
    Ok(Params {
        tq: u("Tq", g.tq)?,
        tk: u("Tk", g.tk)?,
        heads: u("heads", g.heads)?,
        head_dim: u("head_dim", g.head_dim)?,
        q_stride: u("q row", g.q_stride)?,
        kv_stride: u("kv row", g.kv_stride)?,
        q_off: u("q_col", args.q_col)?,
        k_off: u("k_col", args.k_col)?,
        v_off: u("v_col", args.v_col)?,
        causal: args.causal as u32,
        query_offset: u("query_offset", g.query_offset)?,
        has_mask: args.key_mask.is_some() as u32,
        scale: g.scale,
        write_probs: args.output_probs as u32,
        mask_stride: args.key_mask.map_or(0, |m| m.shape()[1]) as u32,
        out_stride: u("output row", width)?,
        q_batch_stride: u("q batch", g.tq * g.q_stride)?,
        kv_batch_stride: u("kv batch", g.kv_rows * g.kv_stride)?,
        has_dropout: args.dropout.is_some() as u32,
        _pad: 0,
        drop: args.dropout.map(|d| d.mask_params()).unwrap_or_default(),
    })
}

/// Gradients of [`attention`]'s q, k and v, each laid out like its operand (the same tensor
/// when the operands are one fused tensor); columns outside the heads are 0.
pub struct AttentionGrads {
    pub dq: Tensor,
    pub dk: Tensor,
    pub dv: Tensor,
}

/// The backward of [`attention`] given the probabilities it returned (`output_probs`) and
/// the gradient `d_out` [B, Tq, H·D] of its output; `args` as in the forward call.
pub fn attention_backward(q: &Tensor, k: &Tensor, v: &Tensor, probs: &Tensor, d_out: &Tensor, args: &Attention) -> Result<AttentionGrads> {
    let op = "attention_backward";
    for (name, t) in [("q", q), ("k", k), ("v", v), ("d_out", d_out)] {
        expect_f32(op, name, t, 3)?;
    }
    let g = geometry(q.shape(), k.shape(), v.shape(), args.key_mask.map(Tensor::shape), args)?;
    expect_f32(op, "probs", probs, 4)?;
    expect_shape(op, "probs", probs, &[g.batch, g.heads, g.tq, g.tk])?;
    expect_shape(op, "d_out", d_out, &[g.batch, g.tq, g.heads * g.head_dim])?;
    let gpu = q.gpu();
    // Zeroed: columns outside the heads (and cache rows past kv_len) get no gradient.
    let dq = Tensor::zeros(gpu, q.shape(), DType::F32)?;
    let dk = if k.same_view(q) { dq.clone() } else { Tensor::zeros(gpu, k.shape(), DType::F32)? };
    let dv = if v.same_view(k) {
        dk.clone()
    } else if v.same_view(q) {
        dq.clone()
    } else {
        Tensor::zeros(gpu, v.shape(), DType::F32)?
    };
    let ds = Tensor::empty(gpu, probs.shape(), DType::F32)?;
    let params = params(&g, args)?;
    let (batch, heads) = (as_u32(op, "batch", g.batch)?, params.heads);
    for (kernel, grad, rows) in [(&BACKWARD_QUERY, &dq, params.tq), (&BACKWARD_KEY, &dk, params.tk), (&BACKWARD_VALUE, &dv, params.tk)] {
        let bindings = [q.into(), k.into(), v.into(), probs.into(), d_out.into(), (&ds).into(), grad.into()];
        gpu.dispatch(kernel, &[], &params, &bindings, [rows.div_ceil(64), heads, batch])?;
    }
    Ok(AttentionGrads { dq, dk, dv })
}

#[cfg(test)]
/// CPU reference of [`attention_backward`] in f64: (dq, dk, dv) laid out like q, k and v
/// (summed into one vector each; for fused operands, add the three).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    probs: &[f32],
    d_out: &[f32],
    g: &Geometry,
    cols: [usize; 3],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (d, width) = (g.head_dim, g.heads * g.head_dim);
    let (mut dq, mut dk, mut dv) = (vec![0f64; q.len()], vec![0f64; k.len()], vec![0f64; v.len()]);
    let q_at = |b: usize, i: usize, h: usize| (b * g.tq + i) * g.q_stride + cols[0] + h * d;
    let kv_at = |b: usize, j: usize, col: usize, h: usize| (b * g.kv_rows + j) * g.kv_stride + col + h * d;
    for b in 0..g.batch {
        for h in 0..g.heads {
            for i in 0..g.tq {
                let row = &probs[((b * g.heads + h) * g.tq + i) * g.tk..][..g.tk];
                let d_o = &d_out[(b * g.tq + i) * width + h * d..][..d];
                let row_index = ((b * g.heads + h) * g.tq + i) * g.tk;
                let factor = |j: usize| g.dropout.map_or(1.0, |m| m.factor((row_index + j) as u32) as f64);
                let dp: Vec<f64> = (0..g.tk)
                    .map(|j| factor(j) * d_o.iter().zip(&v[kv_at(b, j, cols[2], h)..][..d]).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>())
                    .collect();
                let weighted: f64 = row.iter().zip(&dp).map(|(&pj, &dpj)| pj as f64 * dpj).sum();
                for j in 0..g.tk {
                    let ds = row[j] as f64 * (dp[j] - weighted) * g.scale as f64;
                    for e in 0..d {
                        dq[q_at(b, i, h) + e] += ds * k[kv_at(b, j, cols[1], h) + e] as f64;
                        dk[kv_at(b, j, cols[1], h) + e] += ds * q[q_at(b, i, h) + e] as f64;
                        dv[kv_at(b, j, cols[2], h) + e] += row[j] as f64 * factor(j) * d_o[e] as f64;
                    }
                }
            }
        }
    }
    let f32s = |x: Vec<f64>| x.into_iter().map(|v| v as f32).collect();
    (f32s(dq), f32s(dk), f32s(dv))
}

#[cfg(test)]
/// CPU reference of [`attention`]: (output, probabilities), same layouts.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mask: Option<&[f32]>,
    mask_stride: usize,
    g: &Geometry,
    cols: [usize; 3],
    causal: bool,
) -> (Vec<f32>, Vec<f32>) {
    let (d, width) = (g.head_dim, g.heads * g.head_dim);
    let mut out = vec![0f32; g.batch * g.tq * width];
    let mut probs = vec![0f32; g.batch * g.heads * g.tq * g.tk];
    for b in 0..g.batch {
        for h in 0..g.heads {
            for i in 0..g.tq {
                let qrow = &q[(b * g.tq + i) * g.q_stride + cols[0] + h * d..][..d];
                let visible = |j: usize| (!causal || j <= g.query_offset + i) && mask.is_none_or(|m| m[b * mask_stride + j] != 0.0);
                let scores: Vec<Option<f64>> = (0..g.tk)
                    .map(|j| {
                        let krow = &k[(b * g.kv_rows + j) * g.kv_stride + cols[1] + h * d..][..d];
                        visible(j).then(|| qrow.iter().zip(krow).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>() * g.scale as f64)
                    })
                    .collect();
                let max = scores.iter().flatten().cloned().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().flatten().map(|s| (s - max).exp()).sum();
                for (j, s) in scores.iter().enumerate() {
                    let pj = s.map_or(0.0, |s| (s - max).exp() / total);
                    let index = ((b * g.heads + h) * g.tq + i) * g.tk + j;
                    probs[index] = pj as f32;
                    let kept = pj * g.dropout.map_or(1.0, |m| m.factor(index as u32) as f64);
                    let vrow = &v[(b * g.kv_rows + j) * g.kv_stride + cols[2] + h * d..][..d];
                    for (o, &vv) in out[(b * g.tq + i) * width + h * d..][..d].iter_mut().zip(vrow) {
                        *o += (kept * vv as f64) as f32;
                    }
                }
            }
        }
    }
    (out, probs)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::{every_device, gpu, host, portable_host, portable_one_thread};
    use crate::gpu::Device;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    // Tolerances: outputs 1e-5 (sums of ≤ 130 products of values ≤ 1), probabilities 1e-6.
    const OUT_TOL: f32 = 1e-5;
    const PROB_TOL: f32 = 1e-6;

    #[derive(Clone, Copy)]
    struct Case {
        batch: usize,
        tq: usize,
        kv_rows: usize,
        heads: usize,
        head_dim: usize,
        causal: bool,
        padded: bool,
        fused: bool,
        kv_len: Option<usize>,
        /// Probability of attention-probability dropout.
        dropout: Option<f32>,
    }

    fn dropout_of(c: &Case) -> Option<Dropout> {
        c.dropout.and_then(|p| Dropout::new(p, 0x5eed).unwrap())
    }

    /// On the GPU adapter's two kernel families, and the host twin natively (gemm) and as the
    /// browser's two builds run it (the matmul twin's blocked kernels, on one thread and on several).
    fn check(c: Case, seed: u64) {
        let hosts = [host(), portable_host(), portable_one_thread()].map(|host| (host, KernelVariant::Host));
        for (gpu, variant) in [(gpu(), KernelVariant::Tiled), (gpu(), KernelVariant::Blocked)].into_iter().chain(hosts) {
            check_variant(gpu, &c, seed, variant);
        }
    }

    fn check_variant(gpu: &Device, c: &Case, seed: u64, variant: KernelVariant) {
        let mut rng = rng(seed);
        let width = c.heads * c.head_dim;
        // Fused: q, k and v are column blocks of one [B, T, 3·width] tensor (self-attention).
        let (q_shape, kv_shape, cols) = if c.fused {
            (vec![c.batch, c.tq, 3 * width], vec![c.batch, c.kv_rows, 3 * width], [0, width, 2 * width])
        } else {
            (vec![c.batch, c.tq, width], vec![c.batch, c.kv_rows, width], [0, 0, 0])
        };
        let qv = random_vec(&mut rng, q_shape.iter().product(), 1.0);
        let kv = if c.fused { qv.clone() } else { random_vec(&mut rng, kv_shape.iter().product(), 1.0) };
        let vv = if c.fused { qv.clone() } else { random_vec(&mut rng, kv_shape.iter().product(), 1.0) };
        // Padding: batch item b has its last b keys masked.
        let maskv: Vec<f32> = (0..c.batch * c.kv_rows).map(|i| if (i % c.kv_rows) + (i / c.kv_rows) < c.kv_rows { 1.0 } else { 0.0 }).collect();
        let q = Tensor::from_slice(gpu, &qv, &q_shape).unwrap();
        let k = Tensor::from_slice(gpu, &kv, &kv_shape).unwrap();
        let v = Tensor::from_slice(gpu, &vv, &kv_shape).unwrap();
        let mask = Tensor::from_slice(gpu, &maskv, &[c.batch, c.kv_rows]).unwrap();
        let args = Attention {
            heads: c.heads,
            width: Some(width),
            q_col: cols[0],
            k_col: cols[1],
            v_col: cols[2],
            causal: c.causal,
            kv_len: c.kv_len,
            key_mask: c.padded.then_some(&mask),
            output_probs: true,
            variant: Some(variant),
            dropout: dropout_of(c),
            ..Default::default()
        };
        let (out, probs) = attention(&q, &k, &v, &args).unwrap();
        let got_out = block_on(out.to_vec::<f32>()).unwrap();
        // Without probabilities (and so with two absent operands when unpadded): same output.
        let (out_only, none) = attention(&q, &k, &v, &Attention { output_probs: false, ..args }).unwrap();
        assert!(none.is_none());
        assert_eq!(block_on(out_only.to_vec::<f32>()).unwrap(), got_out);
        let got_probs = block_on(probs.unwrap().to_vec::<f32>()).unwrap();
        let g = geometry(&q_shape, &kv_shape, &kv_shape, None, &args).unwrap();
        let (want_out, want_probs) = attention_reference(&qv, &kv, &vv, c.padded.then_some(&maskv[..]), c.kv_rows, &g, cols, c.causal);
        let name = format!(
            "attention {variant:?} B{} Tq{} Tk{} H{} D{} causal={} padded={} fused={}",
            c.batch, c.tq, g.tk, c.heads, c.head_dim, c.causal, c.padded, c.fused
        );
        assert_close(&format!("{name} output"), &got_out, &want_out, OUT_TOL, OUT_TOL);
        assert_close(&format!("{name} probs"), &got_probs, &want_probs, PROB_TOL, PROB_TOL);
    }

    #[test]
    fn self_attention_matches_reference() {
        let base = Case { batch: 2, tq: 7, kv_rows: 7, heads: 3, head_dim: 8, causal: false, padded: false, fused: false, kv_len: None, dropout: None };
        check(Case { ..base }, 1);
        check(Case { padded: true, ..base }, 2);
        check(Case { causal: true, ..base }, 3);
        check(Case { causal: true, padded: true, fused: true, ..base }, 4);
        // Longer than one chunk of 64 keys, head sizes that are not multiples of anything.
        check(Case { batch: 1, tq: 130, kv_rows: 130, heads: 2, head_dim: 13, causal: true, padded: true, fused: false, kv_len: None, dropout: None }, 5);
        check(Case { batch: 3, tq: 65, kv_rows: 65, heads: 1, head_dim: 100, causal: false, padded: true, fused: true, kv_len: None, dropout: None }, 6);
        // Dropout on the probabilities: the probabilities come back undropped, the output
        // sums the kept ones scaled by 1/(1 − p).
        check(Case { causal: true, padded: true, fused: true, dropout: Some(0.3), ..base }, 7);
        check(Case { batch: 1, tq: 130, kv_rows: 130, heads: 2, head_dim: 16, causal: false, padded: true, fused: false, kv_len: None, dropout: Some(0.1) }, 8);
    }

    /// A NaN in a query makes that query's output NaN on every device and variant (not the
    /// zeros an all-NaN softmax row gave on the host), and leaves the other queries alone.
    #[test]
    fn a_nan_score_gives_a_nan_output_on_every_device() {
        for (gpu, variant) in [(gpu(), KernelVariant::Tiled), (gpu(), KernelVariant::Blocked), (host(), KernelVariant::Host)] {
            let (tq, width) = (3, 4);
            let mut qv: Vec<f32> = (0..tq * width).map(|i| (i as f32 * 0.37).sin()).collect();
            qv[width + 1] = f32::NAN;
            let kv: Vec<f32> = (0..tq * width).map(|i| (i as f32 * 0.11).cos()).collect();
            let q = Tensor::from_slice(gpu, &qv, &[1, tq, width]).unwrap();
            let k = Tensor::from_slice(gpu, &kv, &[1, tq, width]).unwrap();
            let args = Attention { heads: 1, variant: Some(variant), ..Default::default() };
            let out = block_on(attention(&q, &k, &k, &args).unwrap().0.to_vec::<f32>()).unwrap();
            let rows: Vec<&[f32]> = out.chunks(width).collect();
            assert!(rows[1].iter().all(|v| v.is_nan()), "{variant:?}: query 1 reads a NaN score: {:?}", rows[1]);
            assert!(rows[0].iter().chain(rows[2]).all(|v| v.is_finite()), "{variant:?}: the other queries are untouched: {out:?}");
        }
    }

    #[test]
    fn decoding_against_a_cache_matches_reference() {
        // One query at position kv_len − 1 against the first kv_len rows of a longer cache.
        for (kv_len, head_dim) in [(1, 16), (5, 64), (70, 32), (129, 256)] {
            check(
                Case { batch: 2, tq: 1, kv_rows: 140, heads: 2, head_dim, causal: true, padded: false, fused: false, kv_len: Some(kv_len), dropout: None },
                kv_len as u64,
            );
        }
        // A few queries appended after a cached prefix (chunked prefill).
        check(Case { batch: 1, tq: 3, kv_rows: 20, heads: 4, head_dim: 8, causal: true, padded: false, fused: false, kv_len: Some(12), dropout: None }, 9);
    }

    /// q, k, v values, their shape, the head columns of each, the key mask.
    type SelfAttentionInputs = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<usize>, [usize; 3], Vec<f32>);

    /// The inputs of a random self-attention case.
    fn self_attention_inputs(c: &Case, rng: &mut rand::rngs::SmallRng) -> SelfAttentionInputs {
        let width = c.heads * c.head_dim;
        let (shape, cols) = if c.fused { (vec![c.batch, c.tq, 3 * width], [0, width, 2 * width]) } else { (vec![c.batch, c.tq, width], [0, 0, 0]) };
        let n = shape.iter().product();
        let qv = random_vec(rng, n, 1.0);
        let (kv, vv) = if c.fused { (qv.clone(), qv.clone()) } else { (random_vec(rng, n, 1.0), random_vec(rng, n, 1.0)) };
        let maskv: Vec<f32> = (0..c.batch * c.tq).map(|i| if (i % c.tq) + (i / c.tq) < c.tq { 1.0 } else { 0.0 }).collect();
        (qv, kv, vv, shape, cols, maskv)
    }

    fn args_of<'a>(c: &Case, cols: [usize; 3], mask: Option<&'a Tensor>) -> Attention<'a> {
        Attention {
            heads: c.heads,
            width: Some(c.heads * c.head_dim),
            q_col: cols[0],
            k_col: cols[1],
            v_col: cols[2],
            causal: c.causal,
            key_mask: mask,
            output_probs: true,
            dropout: dropout_of(c),
            ..Default::default()
        }
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        // With dropout the loss is a smooth function of q, k, v for a fixed mask.
        let c = Case { batch: 2, tq: 4, kv_rows: 4, heads: 2, head_dim: 3, causal: true, padded: true, fused: false, kv_len: None, dropout: Some(0.25) };
        let mut rng = rng(40);
        let (qv, kv, vv, shape, cols, maskv) = self_attention_inputs(&c, &mut rng);
        let g = geometry(&shape, &shape, &shape, None, &args_of(&c, cols, None)).unwrap();
        let weights = random_vec(&mut rng, c.batch * c.tq * c.heads * c.head_dim, 1.0);
        let loss = |q: &[f32], k: &[f32], v: &[f32]| {
            let (out, _) = attention_reference(q, k, v, Some(&maskv), c.tq, &g, cols, c.causal);
            out.iter().zip(&weights).map(|(&o, &w)| o as f64 * w as f64).sum::<f64>()
        };
        let (_, probs) = attention_reference(&qv, &kv, &vv, Some(&maskv), c.tq, &g, cols, c.causal);
        let (dq, dk, dv) = attention_backward_reference(&qv, &kv, &vv, &probs, &weights, &g, cols);
        let h = 1e-3;
        assert_close("dq vs finite differences", &dq, &numeric_gradient(&qv, h, |q| loss(q, &kv, &vv)), 1e-3, 1e-3);
        assert_close("dk vs finite differences", &dk, &numeric_gradient(&kv, h, |k| loss(&qv, k, &vv)), 1e-3, 1e-3);
        assert_close("dv vs finite differences", &dv, &numeric_gradient(&vv, h, |v| loss(&qv, &kv, v)), 1e-3, 1e-3);
    }

    #[test]
    fn backward_matches_reference() {
        let base = Case { batch: 2, tq: 7, kv_rows: 7, heads: 3, head_dim: 8, causal: false, padded: false, fused: false, kv_len: None, dropout: None };
        let cases = [
            base,
            Case { padded: true, ..base },
            Case { causal: true, fused: true, ..base },
            Case { batch: 1, tq: 70, kv_rows: 70, heads: 2, head_dim: 13, causal: true, padded: true, fused: true, kv_len: None, dropout: None },
            Case { padded: true, dropout: Some(0.2), ..base },
            Case { batch: 1, tq: 70, kv_rows: 70, heads: 2, head_dim: 13, causal: true, padded: true, fused: true, kv_len: None, dropout: Some(0.5) },
        ];
        for (seed, c) in cases.iter().enumerate() {
            let mut rng = rng(50 + seed as u64);
            let (qv, kv, vv, shape, cols, maskv) = self_attention_inputs(c, &mut rng);
            let dov = random_vec(&mut rng, c.batch * c.tq * c.heads * c.head_dim, 1.0);
            let case =
                format!("attention backward B{} T{} H{} D{} causal={} padded={} fused={}", c.batch, c.tq, c.heads, c.head_dim, c.causal, c.padded, c.fused);
            for gpu in every_device() {
                let (q, k, v) = if c.fused {
                    let t = Tensor::from_slice(gpu, &qv, &shape).unwrap();
                    (t.clone(), t.clone(), t)
                } else {
                    let up = |x: &[f32]| Tensor::from_slice(gpu, x, &shape).unwrap();
                    (up(&qv), up(&kv), up(&vv))
                };
                let mask = Tensor::from_slice(gpu, &maskv, &[c.batch, c.tq]).unwrap();
                let args = args_of(c, cols, c.padded.then_some(&mask));
                let (_, probs) = attention(&q, &k, &v, &args).unwrap();
                let probs = probs.unwrap();
                let d_out = Tensor::from_slice(gpu, &dov, &[c.batch, c.tq, c.heads * c.head_dim]).unwrap();
                let grads = attention_backward(&q, &k, &v, &probs, &d_out, &args).unwrap();
                let g = geometry(&shape, &shape, &shape, None, &args).unwrap();
                let (dq, dk, dv) = attention_backward_reference(&qv, &kv, &vv, &block_on(probs.to_vec::<f32>()).unwrap(), &dov, &g, cols);
                let name = format!("{case} on {}", gpu.adapter_info().name);
                let got = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
                if c.fused {
                    assert!(grads.dq.same_view(&grads.dk) && grads.dk.same_view(&grads.dv), "{name}: one fused gradient");
                    let want: Vec<f32> = dq.iter().zip(&dk).zip(&dv).map(|((a, b), c)| a + b + c).collect();
                    assert_close(&format!("{name} dqkv"), &got(&grads.dq), &want, OUT_TOL, OUT_TOL);
                } else {
                    assert_close(&format!("{name} dq"), &got(&grads.dq), &dq, OUT_TOL, OUT_TOL);
                    assert_close(&format!("{name} dk"), &got(&grads.dk), &dk, OUT_TOL, OUT_TOL);
                    assert_close(&format!("{name} dv"), &got(&grads.dv), &dv, OUT_TOL, OUT_TOL);
                }
            }
        }
    }

    #[test]
    fn bad_geometry_is_an_error() {
        let gpu = gpu();
        let q = Tensor::zeros(gpu, &[1, 4, 12], DType::F32).unwrap();
        let kv = Tensor::zeros(gpu, &[1, 4, 12], DType::F32).unwrap();
        assert!(attention(&q, &kv, &kv, &Attention { heads: 5, ..Default::default() }).is_err(), "12 not divisible by 5");
        assert!(attention(&q, &kv, &kv, &Attention { heads: 2, kv_len: Some(9), ..Default::default() }).is_err(), "kv_len past the rows");
        let other = Tensor::zeros(gpu, &[2, 4, 12], DType::F32).unwrap();
        assert!(attention(&q, &other, &other, &Attention { heads: 2, ..Default::default() }).is_err(), "batch mismatch");
        let wide = Tensor::zeros(gpu, &[1, 4, 1024], DType::F32).unwrap();
        assert!(attention(&wide, &wide, &wide, &Attention { heads: 2, ..Default::default() }).is_err(), "head size 512");
    }
}
