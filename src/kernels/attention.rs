//! Params, kernel declarations and host twin of `attention` / `attention_rows` (attention.wgsl; [`Params`]):
//! per (batch, head), the scores Q·Kᵀ, a softmax over each query's unmasked keys, and the
//! weighted sum P·V. Both products go through gemm natively and the matmul twin's blocked
//! kernels in the browser (one query's dot products at a time would run several times
//! slower); the scores of a head fit in memory on the host, where the GPU kernels keep an
//! online softmax instead.

use super::dropout::MaskParams;
use super::lanes::softmax_in_place;
#[cfg(not(target_arch = "wasm32"))]
use super::matmul::strided_product;
use super::matmul::{product, Layout, Output};
use super::{kernel_params, Access, Kernel, KernelParams};
use super::{scratch, HostCall, MIN_SPLIT_WORK};
use crate::error::Result;

const SOURCE: &str = concat!(
    include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")),
    include_str!(concat!(env!("OUT_DIR"), "/dropout_mask.wgsl")),
    include_str!(concat!(env!("OUT_DIR"), "/attention_params.wgsl")),
    include_str!(concat!(env!("OUT_DIR"), "/attention.wgsl"))
);

const BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite];

/// A workgroup per query row, parallel over keys and head dims: for GPUs.
pub(crate) const WORKGROUP_PER_ROW: Kernel =
    Kernel { shader: "attention", source: SOURCE, entry: "attention", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(attention) };

/// An invocation per query row, barrier-free: for CPU adapters, head sizes ≤ 64 in vec4s.
pub(crate) const INVOCATION_PER_ROW: Kernel =
    Kernel { shader: "attention", source: SOURCE, entry: "attention_rows", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(attention) };

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&WORKGROUP_PER_ROW, &INVOCATION_PER_ROW];

kernel_params! {
    pub(crate) struct Params {
        pub tq: u32,
        pub tk: u32,
        pub heads: u32,
        pub head_dim: u32,
        pub q_stride: u32,
        pub kv_stride: u32,
        pub q_off: u32,
        pub k_off: u32,
        pub v_off: u32,
        pub causal: u32,
        pub query_offset: u32,
        pub has_mask: u32,
        pub scale: f32,
        pub write_probs: u32,
        pub mask_stride: u32,
        pub out_stride: u32,
        pub q_batch_stride: u32,
        pub kv_batch_stride: u32,
        pub has_dropout: u32,
        pub _pad: u32,
        pub drop: MaskParams,
    }
}

pub(crate) fn attention(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (q, k, v, key_mask) = (call.read(0)?, call.read(1)?, call.read(2)?, call.optional_read(3)?);
    let out = call.write(4)?;
    let mut probs = if p.write_probs != 0 { call.optional_write(5)? } else { None };
    let (tq, tk, heads, dim) = (p.tq as usize, p.tk as usize, p.heads as usize, p.head_dim as usize);
    let out_stride = p.out_stride as usize;
    let batches = out.len() / (tq * out_stride).max(1);
    let key_mask = key_mask.filter(|_| p.has_mask != 0);
    let pairs = batches * heads;
    check_bounds(&p, batches, (q, k, v, key_mask), out.len(), probs.as_deref().map(<[f32]>::len)).map_err(|message| call.fault(message))?;
    // Each (batch, head) pair computes its head's output [tq, dim] (and its probabilities
    // [tq, tk], when asked for) into its own slot of scratch memory, over the device's
    // threads; the slots are then stored where the heads interleave in `out`.
    let slot = tq * dim + if probs.is_some() { tq * tk } else { 0 };
    if slot == 0 {
        return Ok(());
    }
    let mut slots = scratch(pairs * slot)?;
    let threads = call.threads();
    let pair_work = (tq * tk * dim).max(1);
    let per_piece = pairs.div_ceil(super::pieces(threads, pairs, MIN_SPLIT_WORK.div_ceil(pair_work)));
    super::each_chunk(threads, &mut slots, per_piece * slot, |piece, chunk| {
        let mut scores = scratch(tq * tk)?;
        let mut weights = if p.has_dropout != 0 { scratch(tq * tk)? } else { Vec::new() };
        for (i, slot) in chunk.chunks_exact_mut(slot).enumerate() {
            let pair = piece * per_piece + i;
            let (head_out, head_probs) = slot.split_at_mut(tq * dim);
            let head_probs = (!head_probs.is_empty()).then_some(head_probs);
            head_attention(call, &p, (q, k, v, key_mask), (pair / heads, pair % heads), (&mut scores, &mut weights), head_out, head_probs)?;
        }
        Ok(())
    })?;
    for (pair, slot) in slots.chunks_exact(slot).enumerate() {
        let (b, h) = (pair / heads, pair % heads);
        let (head_out, head_probs) = slot.split_at(tq * dim);
        for (i, row) in head_out.chunks_exact(dim.max(1)).enumerate().take(tq) {
            out[(b * tq + i) * out_stride + h * dim..][..dim].copy_from_slice(row);
        }
        if let Some(probs) = probs.as_deref_mut() {
            probs[pair * tq * tk..][..tq * tk].copy_from_slice(head_probs);
        }
    }
    Ok(())
}

/// An error unless every element the heads read (Q, K, V, the key mask) and write (the
/// output, the probabilities) lies within its binding: the heads index them directly, on
/// the device's threads, where a panic would not come back as an error.
fn check_bounds(p: &Params, batches: usize, (q, k, v, key_mask): Operands<'_>, out_len: usize, probs_len: Option<usize>) -> std::result::Result<(), String> {
    let (tq, tk, heads, dim) = (p.tq as usize, p.tk as usize, p.heads as usize, p.head_dim as usize);
    if batches == 0 || tq == 0 || heads == 0 {
        return Ok(());
    }
    let last = |b_stride: u32, offset: u32, rows: usize, stride: u32| -> Option<usize> {
        let head_end = (heads - 1).checked_mul(dim)?.checked_add(dim)?;
        let row_start = (batches - 1).checked_mul(b_stride as usize)?.checked_add(offset as usize)?;
        row_start.checked_add(rows.saturating_sub(1).checked_mul(stride as usize)?)?.checked_add(head_end)
    };
    let fits = |end: Option<usize>, len: usize| end.is_some_and(|end| end <= len);
    let keys = tk > 0;
    let ok = fits(last(p.q_batch_stride, p.q_off, tq, p.q_stride), q.len())
        && (!keys || fits(last(p.kv_batch_stride, p.k_off, tk, p.kv_stride), k.len()))
        && (!keys || fits(last(p.kv_batch_stride, p.v_off, tk, p.kv_stride), v.len()))
        && key_mask.is_none_or(|mask| fits((batches - 1).checked_mul(p.mask_stride as usize).and_then(|s| s.checked_add(tk)), mask.len()))
        && heads.checked_mul(dim).is_some_and(|width| width <= p.out_stride as usize)
        && fits(batches.checked_mul(tq).and_then(|rows| rows.checked_mul(p.out_stride as usize)), out_len)
        && probs_len.is_none_or(|len| fits(batches.checked_mul(heads * tq).and_then(|r| r.checked_mul(tk)), len));
    match ok {
        true => Ok(()),
        false => Err(format!("{batches} batch(es) of {heads} heads of {dim}, {tq} queries × {tk} keys do not fit the bindings")),
    }
}

/// The operands every head reads: Q, K, V and the optional key mask.
type Operands<'a> = (&'a [f32], &'a [f32], &'a [f32], Option<&'a [f32]>);

/// One (batch, head) pair: scores, masked softmax, dropout, P·V into `head_out` [tq, dim];
/// the undropped probabilities into `head_probs` [tq, tk] when given.
#[allow(clippy::too_many_arguments)]
fn head_attention(
    call: &HostCall<'_>,
    p: &Params,
    (q, k, v, key_mask): Operands<'_>,
    (b, h): (usize, usize),
    (scores, weights): (&mut [f32], &mut [f32]),
    head_out: &mut [f32],
    mut head_probs: Option<&mut [f32]>,
) -> Result<()> {
    let (tq, tk, heads, dim) = (p.tq as usize, p.tk as usize, p.heads as usize, p.head_dim as usize);
    let (q_stride, kv_stride) = (p.q_stride as usize, p.kv_stride as usize);
    let attends = |j: usize| key_mask.is_none_or(|mask| mask[b * p.mask_stride as usize + j] != 0.0);
    let q_head = &q[b * p.q_batch_stride as usize + p.q_off as usize + h * dim..];
    let k_head = &k[b * p.kv_batch_stride as usize + p.k_off as usize + h * dim..];
    let v_head = &v[b * p.kv_batch_stride as usize + p.v_off as usize + h * dim..];
    head_product(call, q_head, q_stride, k_head, Layout::Columns(kv_stride), (tq, tk, dim), scores, tk)?;
    for i in 0..tq {
        let key_end = if p.causal != 0 { tk.min(p.query_offset as usize + i + 1) } else { tk };
        let row = &mut scores[i * tk..][..tk];
        let (visible, future) = row.split_at_mut(key_end);
        match key_mask {
            // Without a mask the loop is a plain scaling, which vectorizes.
            None => visible.iter_mut().for_each(|s| *s *= p.scale),
            Some(_) => visible.iter_mut().enumerate().for_each(|(j, s)| *s = if attends(j) { *s * p.scale } else { f32::NEG_INFINITY }),
        }
        future.fill(f32::NEG_INFINITY);
        softmax_in_place(row, f32::NEG_INFINITY);
        if let Some(probs) = head_probs.as_deref_mut() {
            probs[i * tk..][..tk].copy_from_slice(row);
        }
        // The probabilities are the undropped ones; the output sums the kept weights.
        if p.has_dropout != 0 {
            let prob_row = ((b * heads + h) * tq + i) * tk;
            for (j, (w, &s)) in weights[i * tk..][..tk].iter_mut().zip(row.iter()).enumerate() {
                *w = s * p.drop.factor((prob_row + j) as u32);
            }
        }
    }
    // Without dropout the weights are the probabilities themselves.
    let weights = if p.has_dropout != 0 { weights } else { scores };
    head_product(call, weights, tk, v_head, Layout::Rows(kv_stride), (tq, dim, tk), head_out, dim)
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
        return strided_product(call, a, (a_rs, 1), b, b_strides, c, c_rs, (m, n, k));
    }
    let _ = call; // the browser build reads nothing else of it here
    product(a, a_rs, b, layout, m, n, k, &mut Output { c, c_rs, c_off: 0, bias: None, accumulate: false })
}
