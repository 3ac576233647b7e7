//! Vectors of f32 lanes for the host kernels' hot loops. [`F32x4`]: wasm SIMD128 in the
//! browser (.cargo/config.toml enables it), a plain array elsewhere (which LLVM turns into
//! SSE/NEON at the native build's opt-level 3). Natively on x86-64 with AVX2 and FMA, code
//! written over [`Lanes`] also runs eight lanes wide with fused multiply-adds, and sixteen
//! with AVX-512 ([`widest`]).
//!
//! Explicit, because the browser build is optimized for size (opt-level "s"), at which rustc
//! does not auto-vectorize; and the whole crate at opt-level 3 would put the wasm over its
//! 1 MB budget. The hot loops of the host kernels (matmul blocks and dot products, which
//! attention uses too; exp, the GELUs and softmax) use these types; the rest stay plain loops.

/// A vector of f32 lanes: what `exp`, the GELUs and softmax are written over, so that one
/// text serves [`F32x4`] and, natively with AVX2 + FMA, eight lanes ([`widest`]).
pub(crate) trait Lanes: Copy {
    /// Lanes a vector holds (at most [`MAX_WIDTH`]).
    const WIDTH: usize;
    fn splat(x: f32) -> Self;
    /// The first `WIDTH` of `values` (which has at least that many).
    fn read(values: &[f32]) -> Self;
    /// The lanes into the first `WIDTH` of `out`.
    fn write(self, out: &mut [f32]);
    /// self + a·b (fused where the build or the CPU has it).
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn div(self, other: Self) -> Self;
    fn abs(self) -> Self;
    /// Each lane within [low, high].
    fn clamp(self, low: f32, high: f32) -> Self;
    /// Each lane rounded to the nearest integer (ties to even), for |x| < 2²².
    fn round(self) -> Self;
    /// 2ⁿ for lanes holding integers n in −126..=127.
    fn pow2(self) -> Self;
    /// The magnitude of `self` with the sign bit of `sign`.
    fn with_sign_of(self, sign: Self) -> Self;

    #[inline(always)]
    fn zero() -> Self {
        Self::splat(0.0)
    }
}

/// `make`'s work at each width this machine runs: [`F32x4`], eight lanes where the CPU has
/// AVX2 and FMA, sixteen where it has AVX-512 (for tests holding every path to one reference).
#[cfg(test)]
pub(crate) fn at_each_width<W: OverLanes>(make: impl Fn() -> W) -> Vec<(usize, W::Output)> {
    let mut outputs = vec![(F32x4::WIDTH, make().run::<F32x4>())];
    #[cfg(target_arch = "x86_64")]
    if x86::available() {
        // SAFETY: the CPU has AVX2 and FMA, checked just above.
        outputs.push((8, unsafe { x86::run(make()) }));
    }
    #[cfg(target_arch = "x86_64")]
    if x86::available_512() {
        // SAFETY: the CPU has AVX-512 F, checked just above.
        outputs.push((16, unsafe { x86::run_512(make()) }));
    }
    outputs
}

/// The most lanes of any [`Lanes`], for buffers that hold a vector of any width.
pub(crate) const MAX_WIDTH: usize = 16;

/// Work written over [`Lanes`], for [`widest`] to run at the widest lanes the CPU has.
pub(crate) trait OverLanes {
    type Output;
    /// The work with lanes `L` (`#[inline(always)]`, so that it is compiled inside the wide
    /// path's function, with its instructions).
    fn run<L: Lanes>(self) -> Self::Output;
}

/// `work` with sixteen lanes natively on x86-64 CPUs with AVX-512, eight and FMA on those
/// with AVX2 and FMA, with [`F32x4`] elsewhere. (Sixteen lanes took GELU and softmax from 15%
/// of a profile of MiniLM 32 × 128 in q8 to 10% on an Intel Xeon; BENCHMARKS.md, 2026-12-01.)
#[inline(always)]
pub(crate) fn widest<W: OverLanes>(work: W) -> W::Output {
    #[cfg(target_arch = "x86_64")]
    if x86::available_512() {
        // SAFETY: the CPU has AVX-512 F, checked just above.
        return unsafe { x86::run_512(work) };
    }
    #[cfg(target_arch = "x86_64")]
    if x86::available() {
        // SAFETY: the CPU has AVX2 and FMA, checked just above.
        return unsafe { x86::run(work) };
    }
    work.run::<F32x4>()
}

/// The first `N` of `values`, which has at least that many (a vector's worth, in loops over
/// whole chunks).
#[inline(always)]
fn first<const N: usize>(values: &[f32]) -> &[f32; N] {
    values.first_chunk().expect("a whole vector of values")
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod lanes {
    use super::{first, Lanes};
    use std::arch::wasm32::*;

    #[derive(Clone, Copy)]
    pub struct F32x4(v128);

    impl F32x4 {
        #[inline(always)]
        pub fn load(values: &[f32; 4]) -> Self {
            // SAFETY: `values` is 16 readable bytes; v128_load has no alignment requirement.
            F32x4(unsafe { v128_load(values.as_ptr().cast()) })
        }

        #[inline(always)]
        pub fn to_array(self) -> [f32; 4] {
            [f32x4_extract_lane::<0>(self.0), f32x4_extract_lane::<1>(self.0), f32x4_extract_lane::<2>(self.0), f32x4_extract_lane::<3>(self.0)]
        }
    }

    impl Lanes for F32x4 {
        const WIDTH: usize = 4;

        #[inline(always)]
        fn splat(x: f32) -> Self {
            F32x4(f32x4_splat(x))
        }

        #[inline(always)]
        fn read(values: &[f32]) -> Self {
            F32x4::load(first(values))
        }

        #[inline(always)]
        fn write(self, out: &mut [f32]) {
            out[..4].copy_from_slice(&self.to_array());
        }

        #[inline(always)]
        fn mul_add(self, a: F32x4, b: F32x4) -> Self {
            #[cfg(target_feature = "relaxed-simd")]
            return F32x4(f32x4_relaxed_madd(a.0, b.0, self.0));
            #[cfg(not(target_feature = "relaxed-simd"))]
            F32x4(f32x4_add(self.0, f32x4_mul(a.0, b.0)))
        }

        #[inline(always)]
        fn add(self, other: F32x4) -> Self {
            F32x4(f32x4_add(self.0, other.0))
        }

        #[inline(always)]
        fn sub(self, other: F32x4) -> Self {
            F32x4(f32x4_sub(self.0, other.0))
        }

        #[inline(always)]
        fn mul(self, other: F32x4) -> Self {
            F32x4(f32x4_mul(self.0, other.0))
        }

        #[inline(always)]
        fn div(self, other: F32x4) -> Self {
            F32x4(f32x4_div(self.0, other.0))
        }

        #[inline(always)]
        fn abs(self) -> Self {
            F32x4(f32x4_abs(self.0))
        }

        #[inline(always)]
        fn clamp(self, low: f32, high: f32) -> Self {
            F32x4(f32x4_pmin(f32x4_pmax(self.0, f32x4_splat(low)), f32x4_splat(high)))
        }

        #[inline(always)]
        fn round(self) -> Self {
            F32x4(f32x4_nearest(self.0))
        }

        #[inline(always)]
        fn pow2(self) -> Self {
            F32x4(i32x4_shl(i32x4_add(i32x4_trunc_sat_f32x4(self.0), i32x4_splat(127)), 23))
        }

        #[inline(always)]
        fn with_sign_of(self, sign: F32x4) -> Self {
            F32x4(v128_bitselect(sign.0, self.0, f32x4_splat(-0.0)))
        }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    use super::{first, Lanes};

    #[derive(Clone, Copy)]
    pub struct F32x4([f32; 4]);

    impl F32x4 {
        #[inline(always)]
        pub fn load(values: &[f32; 4]) -> Self {
            F32x4(*values)
        }

        #[inline(always)]
        pub fn to_array(self) -> [f32; 4] {
            self.0
        }

        #[inline(always)]
        fn map(self, f: impl Fn(f32) -> f32) -> Self {
            F32x4(self.0.map(f))
        }

        #[inline(always)]
        fn zip(self, other: F32x4, f: impl Fn(f32, f32) -> f32) -> Self {
            F32x4(std::array::from_fn(|i| f(self.0[i], other.0[i])))
        }
    }

    impl Lanes for F32x4 {
        const WIDTH: usize = 4;

        #[inline(always)]
        fn splat(x: f32) -> Self {
            F32x4([x; 4])
        }

        #[inline(always)]
        fn read(values: &[f32]) -> Self {
            F32x4(*first(values))
        }

        #[inline(always)]
        fn write(self, out: &mut [f32]) {
            out[..4].copy_from_slice(&self.0);
        }

        /// Not fused: `f32::mul_add` would be a libm call per lane on x86-64's baseline.
        #[inline(always)]
        fn mul_add(self, a: F32x4, b: F32x4) -> Self {
            F32x4(std::array::from_fn(|i| self.0[i] + a.0[i] * b.0[i]))
        }

        #[inline(always)]
        fn add(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a + b)
        }

        #[inline(always)]
        fn sub(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a - b)
        }

        #[inline(always)]
        fn mul(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a * b)
        }

        #[inline(always)]
        fn div(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a / b)
        }

        #[inline(always)]
        fn abs(self) -> Self {
            self.map(f32::abs)
        }

        #[inline(always)]
        fn clamp(self, low: f32, high: f32) -> Self {
            self.map(|x| x.max(low).min(high))
        }

        /// Adding and taking away 1.5·2²³ leaves no fraction bits, so the addition rounds as
        /// the FPU does. `f32::round_ties_even` would be a libm call per lane on x86-64's
        /// baseline (no SSE4.1), which was 3% of a training step.
        #[inline(always)]
        fn round(self) -> Self {
            const SHIFT: f32 = 12_582_912.0;
            self.map(|x| (x + SHIFT) - SHIFT)
        }

        #[inline(always)]
        fn pow2(self) -> Self {
            self.map(|n| f32::from_bits(((n as i32 + 127) as u32) << 23))
        }

        #[inline(always)]
        fn with_sign_of(self, sign: F32x4) -> Self {
            self.zip(sign, |m, s| m.copysign(s))
        }
    }
}

pub(crate) use lanes::F32x4;

/// Eight lanes with FMA, natively on x86-64 CPUs with AVX2 and FMA; sixteen with AVX-512.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{first, Lanes, OverLanes};
    use std::arch::x86_64::*;

    /// Eight f32 lanes in an AVX register. Private, and made only by work that [`run`] runs,
    /// whose callers have checked that the CPU has AVX2 and FMA: that is what makes each
    /// method's intrinsics sound. Its `mul_add` is fused, so results differ from `F32x4`'s
    /// natively in the last bit.
    #[derive(Clone, Copy)]
    struct F32x8(__m256);

    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// `work` with [`F32x8`], compiled with AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run<W: OverLanes>(work: W) -> W::Output {
        work.run::<F32x8>()
    }

    // SAFETY (every block below): F32x8 values are made only by work that `run` runs, which
    // requires AVX2 and FMA; loads and stores are unaligned ones of eight values that `first`
    // and the slice's bounds checked.
    impl Lanes for F32x8 {
        const WIDTH: usize = 8;

        #[inline(always)]
        fn splat(x: f32) -> Self {
            F32x8(unsafe { _mm256_set1_ps(x) })
        }

        #[inline(always)]
        fn read(values: &[f32]) -> Self {
            F32x8(unsafe { _mm256_loadu_ps(first::<8>(values).as_ptr()) })
        }

        #[inline(always)]
        fn write(self, out: &mut [f32]) {
            unsafe { _mm256_storeu_ps(out[..8].as_mut_ptr(), self.0) }
        }

        #[inline(always)]
        fn mul_add(self, a: F32x8, b: F32x8) -> Self {
            F32x8(unsafe { _mm256_fmadd_ps(a.0, b.0, self.0) })
        }

        #[inline(always)]
        fn add(self, other: F32x8) -> Self {
            F32x8(unsafe { _mm256_add_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn sub(self, other: F32x8) -> Self {
            F32x8(unsafe { _mm256_sub_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn mul(self, other: F32x8) -> Self {
            F32x8(unsafe { _mm256_mul_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn div(self, other: F32x8) -> Self {
            F32x8(unsafe { _mm256_div_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn abs(self) -> Self {
            F32x8(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
        }

        /// As `F32x4`'s natively: a NaN lane becomes `low`.
        #[inline(always)]
        fn clamp(self, low: f32, high: f32) -> Self {
            F32x8(unsafe { _mm256_min_ps(_mm256_max_ps(self.0, _mm256_set1_ps(low)), _mm256_set1_ps(high)) })
        }

        #[inline(always)]
        fn round(self) -> Self {
            F32x8(unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0) })
        }

        #[inline(always)]
        fn pow2(self) -> Self {
            F32x8(unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvttps_epi32(self.0), _mm256_set1_epi32(127)))) })
        }

        #[inline(always)]
        fn with_sign_of(self, sign: F32x8) -> Self {
            let sign_bit = unsafe { _mm256_set1_ps(-0.0) };
            F32x8(unsafe { _mm256_or_ps(_mm256_andnot_ps(sign_bit, self.0), _mm256_and_ps(sign_bit, sign.0)) })
        }
    }

    /// Sixteen f32 lanes in an AVX-512 register, made only by work that [`run_512`] runs (whose
    /// callers have checked that the CPU has AVX-512 F), as [`F32x8`] is by [`run`].
    #[derive(Clone, Copy)]
    struct F32x16(__m512);

    pub(super) fn available_512() -> bool {
        is_x86_feature_detected!("avx512f")
    }

    /// `work` with [`F32x16`], compiled with AVX-512 F.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run_512<W: OverLanes>(work: W) -> W::Output {
        work.run::<F32x16>()
    }

    // SAFETY (every block below): F32x16 values are made only by work that `run_512` runs,
    // which requires AVX-512 F; loads and stores are unaligned ones of sixteen values that
    // `first` and the slice's bounds checked.
    impl Lanes for F32x16 {
        const WIDTH: usize = 16;

        #[inline(always)]
        fn splat(x: f32) -> Self {
            F32x16(unsafe { _mm512_set1_ps(x) })
        }

        #[inline(always)]
        fn read(values: &[f32]) -> Self {
            F32x16(unsafe { _mm512_loadu_ps(first::<16>(values).as_ptr()) })
        }

        #[inline(always)]
        fn write(self, out: &mut [f32]) {
            unsafe { _mm512_storeu_ps(out[..16].as_mut_ptr(), self.0) }
        }

        #[inline(always)]
        fn mul_add(self, a: F32x16, b: F32x16) -> Self {
            F32x16(unsafe { _mm512_fmadd_ps(a.0, b.0, self.0) })
        }

        #[inline(always)]
        fn add(self, other: F32x16) -> Self {
            F32x16(unsafe { _mm512_add_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn sub(self, other: F32x16) -> Self {
            F32x16(unsafe { _mm512_sub_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn mul(self, other: F32x16) -> Self {
            F32x16(unsafe { _mm512_mul_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn div(self, other: F32x16) -> Self {
            F32x16(unsafe { _mm512_div_ps(self.0, other.0) })
        }

        #[inline(always)]
        fn abs(self) -> Self {
            F32x16(unsafe { _mm512_abs_ps(self.0) })
        }

        /// As `F32x8`'s: a NaN lane becomes `low`.
        #[inline(always)]
        fn clamp(self, low: f32, high: f32) -> Self {
            F32x16(unsafe { _mm512_min_ps(_mm512_max_ps(self.0, _mm512_set1_ps(low)), _mm512_set1_ps(high)) })
        }

        #[inline(always)]
        fn round(self) -> Self {
            F32x16(unsafe { _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0) })
        }

        #[inline(always)]
        fn pow2(self) -> Self {
            F32x16(unsafe { _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_cvttps_epi32(self.0), _mm512_set1_epi32(127)))) })
        }

        /// In integer lanes: AVX-512 F has no f32 `and`/`or` (those are AVX-512 DQ's).
        #[inline(always)]
        fn with_sign_of(self, sign: F32x16) -> Self {
            unsafe {
                let sign_bit = _mm512_set1_epi32(i32::MIN);
                let (magnitude, sign) = (_mm512_castps_si512(self.0), _mm512_castps_si512(sign.0));
                F32x16(_mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign_bit, magnitude), _mm512_and_si512(sign_bit, sign))))
            }
        }
    }
}

impl F32x4 {
    /// Eight values as two vectors.
    #[inline(always)]
    pub fn load_pair(values: &[f32; 8]) -> (F32x4, F32x4) {
        let [low, high] = values.as_chunks::<4>().0 else { unreachable!("8 values are two chunks of 4") };
        (F32x4::load(low), F32x4::load(high))
    }

    /// The sum of the four lanes, pairwise.
    #[inline(always)]
    pub fn sum(self) -> f32 {
        let [a, b, c, d] = self.to_array();
        (a + b) + (c + d)
    }
}

/// Σ a·b over the common length: four independent vector sums over 16 values at a time
/// (one sum would wait on its own previous add each step), then 4, then the tail.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let len = a.len().min(b.len());
    let ((a16, a_rest), (b16, b_rest)) = (a[..len].as_chunks::<16>(), b[..len].as_chunks::<16>());
    let zero = F32x4::zero();
    let (mut s0, mut s1, mut s2, mut s3) = (zero, zero, zero, zero);
    for (x, y) in a16.iter().zip(b16) {
        let ([x0, x1, x2, x3], [y0, y1, y2, y3]) = (quarters(x), quarters(y));
        s0 = s0.mul_add(x0, y0);
        s1 = s1.mul_add(x1, y1);
        s2 = s2.mul_add(x2, y2);
        s3 = s3.mul_add(x3, y3);
    }
    let ((a4, a_tail), (b4, b_tail)) = (a_rest.as_chunks::<4>(), b_rest.as_chunks::<4>());
    for (x, y) in a4.iter().zip(b4) {
        s0 = s0.mul_add(F32x4::load(x), F32x4::load(y));
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    (s0.sum() + s1.sum()) + (s2.sum() + s3.sum()) + tail
}

/// eˣ in each lane, for x clamped to [−87, 88] (where f32's eˣ is a normal number): x =
/// n·ln 2 + r with |r| ≤ ln 2 / 2, then 2ⁿ · a degree-6 Taylor polynomial of eʳ (relative
/// error about 2e-7). A NaN lane gives NaN in the browser (its min/max keep NaN) and e⁻⁸⁷
/// natively (`f32::max` drops it): callers that must keep NaN multiply by x, as the
/// activations do.
#[inline(always)]
pub(crate) fn exp<L: Lanes>(x: L) -> L {
    let x = x.clamp(-87.0, 88.0);
    let n = x.mul(L::splat(std::f32::consts::LOG2_E)).round();
    // ln 2 in two parts, so that n·ln 2 is exact to f32 precision.
    let r = x.sub(n.mul(L::splat(0.693_145_75))).sub(n.mul(L::splat(1.428_606_8e-6)));
    let mut poly = L::splat(1.0 / 720.0);
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        poly = L::splat(c).mul_add(poly, r);
    }
    poly.mul(n.pow2())
}

/// Sixteen values as four vectors.
#[inline(always)]
fn quarters(values: &[f32; 16]) -> [F32x4; 4] {
    let [q0, q1, q2, q3] = values.as_chunks::<4>().0 else { unreachable!("16 values are four chunks of 4") };
    [F32x4::load(q0), F32x4::load(q1), F32x4::load(q2), F32x4::load(q3)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies a lane-wise function to values, a vector at a time.
    struct Map<'a, F> {
        values: &'a [f32],
        f: F,
    }

    /// A function of one vector, for any lanes.
    trait LaneFn {
        fn apply<L: Lanes>(&self, x: L) -> L;
    }

    impl<F: LaneFn> OverLanes for Map<'_, F> {
        type Output = Vec<f32>;

        fn run<L: Lanes>(self) -> Vec<f32> {
            let mut out = vec![0.0; self.values.len()];
            for (out, values) in out.chunks_exact_mut(L::WIDTH).zip(self.values.chunks_exact(L::WIDTH)) {
                self.f.apply(L::read(values)).write(out);
            }
            out
        }
    }

    /// `values` (a multiple of 16 long) through `f` at each width.
    fn each_width(values: &[f32], f: impl LaneFn + Copy) -> Vec<(usize, Vec<f32>)> {
        assert_eq!(values.len() % MAX_WIDTH, 0);
        at_each_width(|| Map { values, f })
    }

    #[derive(Clone, Copy)]
    struct Exp;
    impl LaneFn for Exp {
        fn apply<L: Lanes>(&self, x: L) -> L {
            exp(x)
        }
    }

    #[test]
    fn exp_is_within_its_error_at_each_width() {
        let values: Vec<f32> =
            (0..3992).map(|i| -100.0 + i as f32 * 0.0471).chain([0.0, -0.0, 1e-30, -1e-30, 88.0, -87.0, f32::INFINITY, f32::NEG_INFINITY]).collect();
        let widths = each_width(&values, Exp);
        // Eight lanes too where the CPU has AVX2 and FMA (every machine this project runs on),
        // sixteen where it has AVX-512.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(widths.len(), 1 + usize::from(x86::available()) + usize::from(x86::available_512()));
        for (width, got) in widths {
            for (&x, &got) in values.iter().zip(&got) {
                let want = (x.clamp(-87.0, 88.0) as f64).exp();
                assert!(((got as f64 - want) / want).abs() < 4e-7, "{width} lanes: e^{x} = {got}, not {want}");
            }
        }
    }

    #[derive(Clone, Copy)]
    struct Ops;
    impl LaneFn for Ops {
        /// round, pow2, clamp, abs, with_sign_of and div, composed so that each shows.
        fn apply<L: Lanes>(&self, x: L) -> L {
            let rounded = x.clamp(-20.0, 20.0).round();
            rounded.pow2().div(L::splat(4.0)).with_sign_of(x).add(x.abs().mul(L::splat(1e-3))).sub(L::splat(1.0)).mul_add(x, L::splat(0.5))
        }
    }

    #[test]
    fn lane_operations_agree_at_each_width() {
        let values: Vec<f32> = (0..72).map(|i| (i as f32 - 36.0) * 0.75).chain([2.5, -2.5, 3.5, -0.5, 0.5, f32::NAN, 1e9, -1e9]).collect();
        let scalar = |x: f32| {
            let rounded = if x.is_nan() { -20.0 } else { x.clamp(-20.0, 20.0).round_ties_even() };
            ((2f32.powi(rounded as i32) / 4.0).copysign(x) + x.abs() * 1e-3 - 1.0) + x * 0.5
        };
        for (width, got) in each_width(&values, Ops) {
            for (&x, &got) in values.iter().zip(&got) {
                let want = scalar(x);
                let close = (got - want).abs() <= 1e-6 * want.abs().max(1.0);
                assert!(close || (got.is_nan() && want.is_nan()), "{width} lanes at {x}: {got}, not {want}");
            }
        }
    }
}
