//! Row reductions for the twins, in independent lanes: summing in lanes is more accurate
//! than one running sum, as the WGSL's workgroup tree sums are, and the native build
//! vectorizes them (the browser build, optimized for size, does not; see simd.rs).

use super::simd::{exp, F32x4};

/// Lanes of the reductions: two 4-lane vectors.
const LANES: usize = 8;

/// Σ f(v) over `values`.
#[inline(always)]
pub(super) fn sum_by(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a += f(v);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Σ f(i) for i < n, in the lanes of [`sum_by`] (for sums over several rows at once).
#[inline(always)]
pub(super) fn sum_indexed(n: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let full = n - n % LANES;
    for start in (0..full).step_by(LANES) {
        for (lane, a) in acc.iter_mut().enumerate() {
            *a += f(start + lane);
        }
    }
    let tail: f32 = (full..n).map(&f).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// A row's softmax in place: exp(v − max) / Σ over the entries above `masked`; entries at or
/// below it (−inf included) become 0, and a row with every entry masked is all zeros. A NaN
/// makes every unmasked entry of its row NaN.
pub(super) fn softmax_in_place(row: &mut [f32], masked: f32) {
    let m = max_from(masked, row);
    if m <= masked {
        row.fill(0.0);
        return;
    }
    let exp_shifted = |v: f32, e: f32| if v <= masked { 0.0 } else { e };
    // e^(v − m) four at a time (a scalar exp was a twentieth of MiniLM's time in the browser);
    // a NaN or +inf maximum takes the scalar exp, whose NaNs the vector one does not keep.
    let (quads, tail) = if m.is_finite() { row.as_chunks_mut::<4>() } else { (&mut [][..], &mut row[..]) };
    for quad in quads {
        let e = exp(F32x4::load(quad).sub(F32x4::splat(m))).to_array();
        for (v, e) in quad.iter_mut().zip(e) {
            *v = exp_shifted(*v, e);
        }
    }
    for v in tail {
        *v = exp_shifted(*v, (*v - m).exp());
    }
    let inv = 1.0 / sum_by(row, |v| v);
    for v in row.iter_mut() {
        // Masked entries stay 0 when a NaN in the row makes `inv` NaN, as on the GPU.
        *v = if *v == 0.0 { 0.0 } else { *v * inv };
    }
}

/// The largest of `init` and `values`, or NaN when any is NaN (as the WGSL's `max_nan`: a
/// NaN must not be passed over into a finite answer).
#[inline(always)]
pub(super) fn max_from(init: f32, values: &[f32]) -> f32 {
    // A lane holding NaN keeps it: `v > NaN` is false.
    let larger = |m: f32, v: f32| if v > m || v.is_nan() { v } else { m };
    let mut acc = [init; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a = larger(*a, v);
        }
    }
    chunks.remainder().iter().chain(&acc).fold(init, |m, &v| larger(m, v))
}
