//! Params, kernel declarations and host twins of `shaders/attention_backward.wgsl` (`ops::attention::attention_backward`):
//! attention's gradients from its saved probabilities P [B, H, Tq, Tk], in three dispatches
//! on the forward's params (`kernels::attention::Params`). With dO the output's gradient and M_ij
//! the dropout factor of probability ij (1 without dropout):
//!   dP_ij = M_ij·(dO_i · V_j),  dS_ij = P_ij·(dP_ij − Σ_j' P_ij'·dP_ij')   [`query`] writes dS
//!   dQ_i = scale·Σ_j dS_ij K_j                                            [`query`]
//!   dK_j = scale·Σ_i dS_ij Q_i                                            [`key`], reads dS
//!   dV_j = Σ_i P_ij·M_ij dO_i                                             [`value`]
//! The causal and key-padding masks are not consulted: they are the zeros of P. Each twin
//! overwrites the head columns (off + h·D) of its operand's rows in the gradient, laid out
//! like the operand, and leaves other columns alone, so that a fused q|k|v input gets one
//! fused gradient. The products (dO·Vᵀ, dS·K, dSᵀ·Q, (P∘M)ᵀ·dO) run per head through gemm
//! natively (the hand-written product in the browser and on the portable host device), so
//! their sums are not in the WGSL's order; the parity tests hold both to the same float64
//! reference.
//!
//! Bindings: q, k, v, probs, d_out (read), ds, grad (written).

use super::attention::Params;
use super::{Access, Kernel, KernelParams};

const BACKWARD_SOURCE: &str = concat!(
    include_str!(concat!(env!("OUT_DIR"), "/dropout_mask.wgsl")),
    include_str!(concat!(env!("OUT_DIR"), "/attention_params.wgsl")),
    include_str!(concat!(env!("OUT_DIR"), "/attention_backward.wgsl"))
);

const BACKWARD_BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite];

pub(crate) const BACKWARD_QUERY: Kernel = Kernel {
    shader: "attention_backward",
    source: BACKWARD_SOURCE,
    entry: "attention_backward_query",
    bindings: BACKWARD_BINDINGS,
    params: Params::LAYOUT,
    twin: Some(twins::query),
};

pub(crate) const BACKWARD_KEY: Kernel = Kernel {
    shader: "attention_backward",
    source: BACKWARD_SOURCE,
    entry: "attention_backward_key",
    bindings: BACKWARD_BINDINGS,
    params: Params::LAYOUT,
    twin: Some(twins::key),
};

pub(crate) const BACKWARD_VALUE: Kernel = Kernel {
    shader: "attention_backward",
    source: BACKWARD_SOURCE,
    entry: "attention_backward_value",
    bindings: BACKWARD_BINDINGS,
    params: Params::LAYOUT,
    twin: Some(twins::value),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&BACKWARD_QUERY, &BACKWARD_KEY, &BACKWARD_VALUE];

/// The twins: their products go through `matmul::strided_product` (gemm
/// natively, the hand-written product in the browser).
mod twins {
    use super::Params;
    use crate::error::Result;
    use crate::kernels::matmul::strided_product;
    use crate::kernels::{each_chunk, each_chunk_pair, pieces, scratch, HostCall, Threads, MIN_SPLIT_WORK};

    /// `attention_backward_query`: probs, d_out, k, v → ds = dS (every element of [B, H, Tq, Tk])
    /// and dQ into grad (laid out like q).
    pub(crate) fn query(call: &mut HostCall<'_>) -> Result<()> {
        let p: Params = call.params()?;
        let (k, v, probs, d_out) = (call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
        let (ds, grad) = (call.write(5)?, call.write(6)?);
        let g = Heads::new(call, p, probs.len())?;
        g.check(
            call,
            &[
                ("k", k.len(), g.kv_end(p.k_off)),
                ("v", v.len(), g.kv_end(p.v_off)),
                ("d_out", d_out.len(), g.out_end()),
                ("ds", ds.len(), Some(probs.len())),
                ("grad", grad.len(), g.q_end()),
            ],
        )?;
        let (tq, tk, dim) = (g.tq, g.tk, g.dim);
        let (kv_stride, out_stride) = (p.kv_stride as usize, p.out_stride as usize);
        if dim == 0 {
            // dP = dO·Vᵀ over no dimensions: dS is 0, and dQ has no columns.
            ds[..probs.len()].fill(0.0);
            return Ok(());
        }
        let threads = call.threads();
        let per_piece = g.pairs_per_piece(threads);
        // Each pair's dS is its own stretch of ds; its dQ goes to a slot of scratch.
        let mut dq = scratch(g.pairs() * tq * dim)?;
        let (ds_pieces, dq_pieces) = ((&mut ds[..probs.len()], per_piece * tq * tk), (&mut dq[..], per_piece * tq * dim));
        each_chunk_pair(threads, ds_pieces, dq_pieces, |piece, ds, dq| {
            for (i, (ds, dq)) in ds.chunks_exact_mut(tq * tk).zip(dq.chunks_exact_mut(tq * dim)).enumerate() {
                let (b, h) = g.pair(piece * per_piece + i);
                let head = g.prob_row(b, h, 0);
                // dO·Vᵀ into ds, then dP and dS row by row.
                let v_head = &v[g.kv_at(b, 0, h, p.v_off)..];
                strided_product(call, &d_out[g.out_at(b, 0, h)..], (out_stride, 1), v_head, (1, kv_stride), ds, tk, (tq, tk, dim))?;
                for (row, (ds_row, p_row)) in ds.chunks_exact_mut(tk).zip(probs[head..].chunks_exact(tk)).enumerate() {
                    // A key without probability (masked) has dP 0, whatever its V row holds (a
                    // non-finite value there cannot leak in); Σ_j P_ij·dP_ij.
                    let mut weighted = 0.0f32;
                    for (j, (ds, &pj)) in ds_row.iter_mut().zip(p_row).enumerate() {
                        *ds = if pj != 0.0 { *ds * g.dropout(head + row * tk + j) } else { 0.0 };
                        weighted += pj * *ds;
                    }
                    for (ds, &pj) in ds_row.iter_mut().zip(p_row) {
                        *ds = pj * (*ds - weighted);
                    }
                }
                // dQ = scale·dS·K.
                strided_product(call, ds, (tk, 1), &k[g.kv_at(b, 0, h, p.k_off)..], (kv_stride, 1), dq, dim, (tq, dim, tk))?;
                dq.iter_mut().for_each(|x| *x *= p.scale);
            }
            Ok(())
        })?;
        g.store(&dq, grad, tq, p.q_stride as usize, |b, h| g.q_at(b, 0, h));
        Ok(())
    }

    /// `attention_backward_key`: ds (as [`query`] wrote it, read only), q → dK = scale·dSᵀ·Q into
    /// grad (laid out like k).
    pub(crate) fn key(call: &mut HostCall<'_>) -> Result<()> {
        let p: Params = call.params()?;
        let q = call.read(0)?;
        let ds: &[f32] = call.write(5)?;
        let grad = call.write(6)?;
        let g = Heads::new(call, p, ds.len())?;
        g.check(call, &[("q", q.len(), g.q_end()), ("grad", grad.len(), g.kv_end(p.k_off))])?;
        let (tq, tk, dim) = (g.tq, g.tk, g.dim);
        let dk = g.per_head(call, |(b, h), dk, _| {
            strided_product(call, &ds[g.prob_row(b, h, 0)..], (1, tk), &q[g.q_at(b, 0, h)..], (p.q_stride as usize, 1), dk, dim, (tk, dim, tq))?;
            dk.iter_mut().for_each(|x| *x *= p.scale);
            Ok(())
        })?;
        g.store(&dk, grad, tk, p.kv_stride as usize, |b, h| g.kv_at(b, 0, h, p.k_off));
        Ok(())
    }

    /// `attention_backward_value`: probs, d_out → dV = (P∘M)ᵀ·dO into grad (laid out like v), the
    /// probabilities dropped as the forward dropped them (and not scaled).
    pub(crate) fn value(call: &mut HostCall<'_>) -> Result<()> {
        let p: Params = call.params()?;
        let (probs, d_out) = (call.read(3)?, call.read(4)?);
        let grad = call.write(6)?;
        let g = Heads::new(call, p, probs.len())?;
        g.check(call, &[("d_out", d_out.len(), g.out_end()), ("grad", grad.len(), g.kv_end(p.v_off))])?;
        let (tq, tk, dim) = (g.tq, g.tk, g.dim);
        let dv = g.per_head(call, |(b, h), dv, dropped| {
            let head = g.prob_row(b, h, 0);
            let weights = if p.has_dropout != 0 {
                for (index, (w, &pj)) in dropped.iter_mut().zip(&probs[head..][..tq * tk]).enumerate() {
                    *w = pj * g.dropout(head + index);
                }
                &dropped[..]
            } else {
                &probs[head..]
            };
            strided_product(call, weights, (1, tk), &d_out[g.out_at(b, 0, h)..], (p.out_stride as usize, 1), dv, dim, (tk, dim, tq))
        })?;
        g.store(&dv, grad, tk, p.kv_stride as usize, |b, h| g.kv_at(b, 0, h, p.v_off));
        Ok(())
    }

    /// One dispatch's geometry in words. The batch count is the dispatch's z, which a twin does
    /// not see: it is taken from the length of a [B, H, Tq, Tk] binding (probs or ds).
    struct Heads {
        p: Params,
        batches: usize,
        tq: usize,
        tk: usize,
        heads: usize,
        dim: usize,
    }

    impl Heads {
        fn new(call: &HostCall<'_>, p: Params, len: usize) -> Result<Heads> {
            let (tq, tk, heads, dim) = (p.tq as usize, p.tk as usize, p.heads as usize, p.head_dim as usize);
            let per_batch = heads
                .checked_mul(tq)
                .and_then(|n| n.checked_mul(tk))
                .filter(|&n| n > 0 && len > 0 && len.is_multiple_of(n))
                .ok_or_else(|| call.fault(format!("probabilities of {len} words are not whole batches of {heads} heads × {tq} queries × {tk} keys")))?;
            Ok(Heads { p, batches: len / per_batch, tq, tk, heads, dim })
        }

        /// Faults unless each binding (name, words) holds the words the dispatch touches of it
        /// (None: more than usize can count).
        fn check(&self, call: &HostCall<'_>, needs: &[(&str, usize, Option<usize>)]) -> Result<()> {
            for &(name, len, end) in needs {
                if end.is_none_or(|end| end > len) {
                    let (b, h, d, tq, tk) = (self.batches, self.heads, self.dim, self.tq, self.tk);
                    return Err(call.fault(format!("{name} of {len} words does not hold {b} batches of {h} heads of {d} (Tq {tq}, Tk {tk})")));
                }
            }
            Ok(())
        }

        /// The (batch, head) pairs of the dispatch.
        fn pairs(&self) -> usize {
            self.batches * self.heads
        }

        /// Pair `pair`'s (batch, head).
        fn pair(&self, pair: usize) -> (usize, usize) {
            (pair / self.heads, pair % self.heads)
        }

        /// Pairs a piece of the work takes over `threads`: each does at least `MIN_SPLIT_WORK`
        /// multiply-adds (a pair's products do Tq·Tk·D each).
        fn pairs_per_piece(&self, threads: Option<Threads<'_>>) -> usize {
            let pair_work = (self.tq * self.tk * self.dim).max(1);
            self.pairs().div_ceil(pieces(threads, self.pairs(), MIN_SPLIT_WORK.div_ceil(pair_work)))
        }

        /// Runs `head((b, h), slot, weights)` for every pair over the call's threads, each
        /// writing its head's gradient [Tk, D] into a slot of the returned scratch (`weights`:
        /// Tq·Tk words of scratch for the dropped probabilities, empty without dropout).
        fn per_head(&self, call: &HostCall<'_>, head: impl Fn((usize, usize), &mut [f32], &mut [f32]) -> Result<()> + Sync + Send) -> Result<Vec<f32>> {
            let threads = call.threads();
            let per_piece = self.pairs_per_piece(threads);
            let slot = self.tk * self.dim;
            let mut slots = scratch(self.pairs() * slot)?;
            each_chunk(threads, &mut slots, per_piece * slot, |piece, chunk| {
                let mut weights = if self.p.has_dropout != 0 { scratch(self.tq * self.tk)? } else { Vec::new() };
                for (i, slot) in chunk.chunks_exact_mut(slot.max(1)).enumerate() {
                    head(self.pair(piece * per_piece + i), slot, &mut weights)?;
                }
                Ok(())
            })?;
            Ok(slots)
        }

        /// Stores each pair's slot of `rows` × D words (pairs in order) over its head's columns
        /// of `grad`: row i at `at(b, h)` + i·`stride`.
        fn store(&self, slots: &[f32], grad: &mut [f32], rows: usize, stride: usize, at: impl Fn(usize, usize) -> usize) {
            if rows * self.dim == 0 {
                return;
            }
            for (pair, slot) in slots.chunks_exact(rows * self.dim).enumerate() {
                let (b, h) = self.pair(pair);
                for (i, row) in slot.chunks_exact(self.dim).enumerate() {
                    grad[at(b, h) + i * stride..][..self.dim].copy_from_slice(row);
                }
            }
        }

        /// One past the last word of an operand of `rows` rows per batch (strides `batch_stride`
        /// and `row_stride`) whose heads are columns off .. off + H·D; None on overflow. Every
        /// index the loops compute is below it, so once checked none can overflow either.
        fn end(&self, batch_stride: usize, rows: usize, row_stride: usize, off: u32) -> Option<usize> {
            let last_row = (self.batches - 1).checked_mul(batch_stride)?.checked_add((rows - 1).checked_mul(row_stride)?)?;
            last_row.checked_add(off as usize)?.checked_add(self.heads.checked_mul(self.dim)?)
        }

        /// q and dQ: [B, Tq, q_stride] (batch stride q_batch_stride), heads from column q_off.
        fn q_end(&self) -> Option<usize> {
            self.end(self.p.q_batch_stride as usize, self.tq, self.p.q_stride as usize, self.p.q_off)
        }

        /// k, v and their gradients: [B, ≥Tk, kv_stride] (batch stride kv_batch_stride).
        fn kv_end(&self, off: u32) -> Option<usize> {
            self.end(self.p.kv_batch_stride as usize, self.tk, self.p.kv_stride as usize, off)
        }

        /// d_out: [B, Tq, out_stride], heads from column 0.
        fn out_end(&self) -> Option<usize> {
            let stride = self.p.out_stride as usize;
            self.end(self.tq.checked_mul(stride)?, self.tq, stride, 0)
        }

        /// Row (b, h, i) of probs and ds.
        fn prob_row(&self, b: usize, h: usize, i: usize) -> usize {
            ((b * self.heads + h) * self.tq + i) * self.tk
        }

        /// Head h of query i in q (and dQ).
        fn q_at(&self, b: usize, i: usize, h: usize) -> usize {
            b * self.p.q_batch_stride as usize + i * self.p.q_stride as usize + self.p.q_off as usize + h * self.dim
        }

        /// Head h of key j in k or v (and their gradients), the operand's heads at column `off`.
        fn kv_at(&self, b: usize, j: usize, h: usize, off: u32) -> usize {
            b * self.p.kv_batch_stride as usize + j * self.p.kv_stride as usize + off as usize + h * self.dim
        }

        /// Head h of query i in d_out.
        fn out_at(&self, b: usize, i: usize, h: usize) -> usize {
            (b * self.tq + i) * self.p.out_stride as usize + h * self.dim
        }

        /// The dropout factor of probability `index` (the WGSL's `prob_dropout`): 0 or 1/(1 − p),
        /// 1 without dropout. Probabilities are indexed in u32, as the op checks.
        fn dropout(&self, index: usize) -> f32 {
            if self.p.has_dropout != 0 {
                self.p.drop.factor(index as u32)
            } else {
                1.0
            }
        }
    }
}
