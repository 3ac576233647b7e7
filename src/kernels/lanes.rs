//! Row reductions for the twins, in independent lanes: summing in lanes is more accurate
//! than one running sum, as the WGSL's workgroup tree sums are, and the native build
//! vectorizes them (the browser build, optimized for size, does not; see simd.rs).

use super::simd::{exp, widest, Lanes, OverLanes, MAX_WIDTH};

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
/// makes every unmasked entry of its row NaN. At the widest lanes the CPU has.
pub(super) fn softmax_in_place(row: &mut [f32], masked: f32) {
    widest(Softmax { row, masked })
}

/// [`softmax_in_place`]'s work, over any lanes.
struct Softmax<'a> {
    row: &'a mut [f32],
    masked: f32,
}

impl OverLanes for Softmax<'_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self) {
        let Softmax { row, masked } = self;
        let m = max_from(masked, row);
        if m <= masked {
            row.fill(0.0);
            return;
        }
        let exp_shifted = |v: f32, e: f32| if v <= masked { 0.0 } else { e };
        // e^(v − m) a vector at a time, the last few padded (a scalar exp was a twentieth of
        // MiniLM's time in the browser); a NaN or +inf maximum takes the scalar exp, whose
        // NaNs the vector one does not keep.
        if m.is_finite() {
            let mut e = [0.0f32; MAX_WIDTH];
            for chunk in row.chunks_mut(L::WIDTH) {
                e[..chunk.len()].copy_from_slice(chunk);
                exp(L::read(&e).sub(L::splat(m))).write(&mut e);
                for (v, &e) in chunk.iter_mut().zip(&e) {
                    *v = exp_shifted(*v, e);
                }
            }
        } else {
            for v in row.iter_mut() {
                *v = exp_shifted(*v, (*v - m).exp());
            }
        }
        let inv = 1.0 / sum_by(row, |v| v);
        for v in row.iter_mut() {
            // Masked entries stay 0 when a NaN in the row makes `inv` NaN, as on the GPU.
            *v = if *v == 0.0 { 0.0 } else { *v * inv };
        }
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

#[cfg(test)]
mod tests {
    use super::super::simd::at_each_width;
    use super::*;

    /// A softmax of a copy of a row, for `at_each_width`.
    struct SoftmaxOfCopy<'a>(&'a [f32], f32);

    impl OverLanes for SoftmaxOfCopy<'_> {
        type Output = Vec<f32>;

        fn run<L: Lanes>(self) -> Vec<f32> {
            let mut row = self.0.to_vec();
            Softmax { row: &mut row, masked: self.1 }.run::<L>();
            row
        }
    }

    #[test]
    fn softmax_matches_f64_at_each_width() {
        // Lengths around both widths' tails; entries masked by −inf and by the softmax kernel's
        // −1e30 (attention and `ops::softmax` mask with each); a row with a NaN.
        for (len, masked) in [1, 3, 8, 13, 33].into_iter().flat_map(|len| [(len, f32::NEG_INFINITY), (len, super::super::softmax::MASKED)]) {
            let row: Vec<f32> = (0..len).map(|i| if i % 5 == 2 { masked } else { (i as f32 * 0.37).sin() * 9.0 }).collect();
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let total: f64 = row.iter().filter(|&&v| v > masked).map(|&v| (v as f64 - max).exp()).sum();
            for (width, got) in at_each_width(|| SoftmaxOfCopy(&row, masked)) {
                for (i, (&v, &got)) in row.iter().zip(&got).enumerate() {
                    let want = if v > masked { (v as f64 - max).exp() / total } else { 0.0 };
                    assert!((got as f64 - want).abs() <= 1e-6, "{width} lanes, len {len}, masked {masked}, [{i}]: {got}, not {want}");
                }
            }
        }
        let with_nan = [1.0, f32::NAN, f32::NEG_INFINITY, 2.0, 0.5, 1.0, 3.0, 4.0, 5.0];
        for (width, got) in at_each_width(|| SoftmaxOfCopy(&with_nan, f32::NEG_INFINITY)) {
            assert!(got.iter().enumerate().all(|(i, v)| if i == 2 { *v == 0.0 } else { v.is_nan() }), "{width} lanes: {got:?}");
        }
    }
}
