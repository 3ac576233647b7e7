//! Host twin of `attention` / `attention_rows` (attention.wgsl; `ops::attention::Params`):
//! per (batch, head), the scores Q·Kᵀ, a softmax over each query's unmasked keys, and the
//! weighted sum P·V. Both products go through gemm natively and the matmul twin's blocked
//! kernels in the browser (one query's dot products at a time would run several times
//! slower); the scores of a head fit in memory on the host, where the GPU kernels keep an
//! online softmax instead.

use super::lanes::softmax_in_place;
#[cfg(not(target_arch = "wasm32"))]
use super::matmul::strided_product;
use super::matmul::{product, Layout, Output};
use crate::error::Result;
use crate::host::{HostCall, HostMemory};
use crate::ops::attention::Params;

pub(crate) fn attention(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (q, k, v, key_mask) = (call.read(0)?, call.read(1)?, call.read(2)?, call.optional_read(3)?);
    let out = call.write(4)?;
    let mut probs = if p.write_probs != 0 { call.optional_write(5)? } else { None };
    let (tq, tk, heads, dim) = (p.tq as usize, p.tk as usize, p.heads as usize, p.head_dim as usize);
    let (q_stride, kv_stride, out_stride) = (p.q_stride as usize, p.kv_stride as usize, p.out_stride as usize);
    let batches = out.len() / (tq * out_stride).max(1);
    let key_mask = key_mask.filter(|_| p.has_mask != 0);
    // Scores, then the weights P·V multiplies (dropped where dropout drops them).
    let mut scores = HostMemory::scratch(tq * tk)?;
    let mut weights = HostMemory::scratch(tq * tk)?;
    for b in 0..batches {
        let attends = |j: usize| key_mask.is_none_or(|mask| mask[b * p.mask_stride as usize + j] != 0.0);
        for h in 0..heads {
            let q_head = &q[b * p.q_batch_stride as usize + p.q_off as usize + h * dim..];
            let k_head = &k[b * p.kv_batch_stride as usize + p.k_off as usize + h * dim..];
            let v_head = &v[b * p.kv_batch_stride as usize + p.v_off as usize + h * dim..];
            head_product(call, q_head, q_stride, k_head, Layout::Columns(kv_stride), (tq, tk, dim), &mut scores, tk)?;
            for i in 0..tq {
                let key_end = if p.causal != 0 { tk.min(p.query_offset as usize + i + 1) } else { tk };
                let row = &mut scores[i * tk..][..tk];
                for (j, s) in row.iter_mut().enumerate() {
                    *s = if j < key_end && attends(j) { *s * p.scale } else { f32::NEG_INFINITY };
                }
                softmax_in_place(row, f32::NEG_INFINITY);
                // The probabilities are the undropped ones; the output sums the kept weights.
                let prob_row = ((b * heads + h) * tq + i) * tk;
                for (j, (w, &s)) in weights[i * tk..][..tk].iter_mut().zip(row.iter()).enumerate() {
                    *w = if p.has_dropout != 0 { s * p.drop.factor((prob_row + j) as u32) } else { s };
                }
                if let Some(probs) = probs.as_deref_mut() {
                    probs[prob_row..][..tk].copy_from_slice(row);
                }
            }
            head_product(call, &weights, tk, v_head, Layout::Rows(kv_stride), (tq, dim, tk), &mut out[b * tq * out_stride + h * dim..], out_stride)?;
        }
    }
    Ok(())
}

/// C (rows of stride `c_rs`) = A·B for one head, A row-major (rows of stride `a_rs`): through
/// gemm natively, through the matmul twin's blocked kernels in the browser and on the
/// portable host device (which keeps them tested natively).
#[allow(clippy::too_many_arguments)]
fn head_product(
    call: &HostCall<'_>,
    a: &[f32],
    a_rs: usize,
    b: &[f32],
    layout: Layout,
    (m, n, k): (usize, usize, usize),
    c: &mut [f32],
    c_rs: usize,
) -> Result<()> {
    #[cfg(not(target_arch = "wasm32"))]
    if !call.portable() {
        let b_strides = match layout {
            Layout::Rows(rs) => (rs, 1),
            Layout::Columns(rs) => (1, rs),
        };
        return strided_product(a, (a_rs, 1), b, b_strides, c, c_rs, (m, n, k)).map_err(|message| call.fault(message));
    }
    let _ = call; // the browser build reads nothing else of it here
    product(a, a_rs, b, layout, m, n, k, &mut Output { c, c_rs, c_off: 0, bias: None, accumulate: false })
}
