//! Four f32 lanes: wasm SIMD128 in the browser (.cargo/config.toml enables it), a plain
//! array elsewhere (which LLVM turns into SSE/NEON at the native build's opt-level 3).
//!
//! Explicit, because the browser build is optimized for size (opt-level "s"), at which rustc
//! does not auto-vectorize; and the whole crate at opt-level 3 would put the wasm over its
//! 1 MB budget. The hot loops of the host kernels (matmul blocks and dot products, which
//! attention uses too) use this type; the rest stay plain loops.

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod lanes {
    use std::arch::wasm32::*;

    #[derive(Clone, Copy)]
    pub struct F32x4(v128);

    impl F32x4 {
        #[inline(always)]
        pub fn zero() -> Self {
            F32x4(f32x4_splat(0.0))
        }

        #[inline(always)]
        pub fn splat(x: f32) -> Self {
            F32x4(f32x4_splat(x))
        }

        #[inline(always)]
        pub fn load(values: &[f32; 4]) -> Self {
            // SAFETY: `values` is 16 readable bytes; v128_load has no alignment requirement.
            F32x4(unsafe { v128_load(values.as_ptr().cast()) })
        }

        /// self + a·b (fused where the build has relaxed SIMD).
        #[inline(always)]
        pub fn mul_add(self, a: F32x4, b: F32x4) -> Self {
            #[cfg(target_feature = "relaxed-simd")]
            return F32x4(f32x4_relaxed_madd(a.0, b.0, self.0));
            #[cfg(not(target_feature = "relaxed-simd"))]
            F32x4(f32x4_add(self.0, f32x4_mul(a.0, b.0)))
        }

        #[inline(always)]
        pub fn to_array(self) -> [f32; 4] {
            [f32x4_extract_lane::<0>(self.0), f32x4_extract_lane::<1>(self.0), f32x4_extract_lane::<2>(self.0), f32x4_extract_lane::<3>(self.0)]
        }

        #[inline(always)]
        pub fn add(self, other: F32x4) -> Self {
            F32x4(f32x4_add(self.0, other.0))
        }

        #[inline(always)]
        pub fn sub(self, other: F32x4) -> Self {
            F32x4(f32x4_sub(self.0, other.0))
        }

        #[inline(always)]
        pub fn mul(self, other: F32x4) -> Self {
            F32x4(f32x4_mul(self.0, other.0))
        }

        #[inline(always)]
        pub fn div(self, other: F32x4) -> Self {
            F32x4(f32x4_div(self.0, other.0))
        }

        #[inline(always)]
        pub fn abs(self) -> Self {
            F32x4(f32x4_abs(self.0))
        }

        #[inline(always)]
        pub fn clamp(self, low: f32, high: f32) -> Self {
            F32x4(f32x4_pmin(f32x4_pmax(self.0, f32x4_splat(low)), f32x4_splat(high)))
        }

        /// Each lane rounded to the nearest integer (ties to even).
        #[inline(always)]
        pub fn round(self) -> Self {
            F32x4(f32x4_nearest(self.0))
        }

        /// 2ⁿ for lanes holding integers n in −126..=127.
        #[inline(always)]
        pub fn pow2(self) -> Self {
            F32x4(i32x4_shl(i32x4_add(i32x4_trunc_sat_f32x4(self.0), i32x4_splat(127)), 23))
        }

        /// The magnitude of `self` with the sign bit of `sign`.
        #[inline(always)]
        pub fn with_sign_of(self, sign: F32x4) -> Self {
            F32x4(v128_bitselect(sign.0, self.0, f32x4_splat(-0.0)))
        }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    #[derive(Clone, Copy)]
    pub struct F32x4([f32; 4]);

    impl F32x4 {
        #[inline(always)]
        pub fn zero() -> Self {
            F32x4([0.0; 4])
        }

        #[inline(always)]
        pub fn splat(x: f32) -> Self {
            F32x4([x; 4])
        }

        #[inline(always)]
        pub fn load(values: &[f32; 4]) -> Self {
            F32x4(*values)
        }

        /// self + a·b.
        #[inline(always)]
        pub fn mul_add(self, a: F32x4, b: F32x4) -> Self {
            F32x4(std::array::from_fn(|i| self.0[i] + a.0[i] * b.0[i]))
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

        #[inline(always)]
        pub fn add(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a + b)
        }

        #[inline(always)]
        pub fn sub(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a - b)
        }

        #[inline(always)]
        pub fn mul(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a * b)
        }

        #[inline(always)]
        pub fn div(self, other: F32x4) -> Self {
            self.zip(other, |a, b| a / b)
        }

        #[inline(always)]
        pub fn abs(self) -> Self {
            self.map(f32::abs)
        }

        #[inline(always)]
        pub fn clamp(self, low: f32, high: f32) -> Self {
            self.map(|x| x.max(low).min(high))
        }

        /// Each lane rounded to the nearest integer (ties to even), for |x| < 2²² (what
        /// `exp` needs): adding and taking away 1.5·2²³ leaves no fraction bits, so the
        /// addition rounds as the FPU does. `f32::round_ties_even` would be a libm call per
        /// lane on x86-64's baseline (no SSE4.1), which was 3% of a training step.
        #[inline(always)]
        pub fn round(self) -> Self {
            const SHIFT: f32 = 12_582_912.0;
            self.map(|x| (x + SHIFT) - SHIFT)
        }

        /// 2ⁿ for lanes holding integers n in −126..=127.
        #[inline(always)]
        pub fn pow2(self) -> Self {
            self.map(|n| f32::from_bits(((n as i32 + 127) as u32) << 23))
        }

        /// The magnitude of `self` with the sign bit of `sign`.
        #[inline(always)]
        pub fn with_sign_of(self, sign: F32x4) -> Self {
            self.zip(sign, |m, s| m.copysign(s))
        }
    }
}

pub(crate) use lanes::F32x4;

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

/// eˣ in four lanes, for x clamped to [−87, 88] (where f32's eˣ is a normal number): x =
/// n·ln 2 + r with |r| ≤ ln 2 / 2, then 2ⁿ · a degree-6 Taylor polynomial of eʳ (relative
/// error about 2e-7). A NaN lane gives NaN in the browser (its min/max keep NaN) and e⁻⁸⁷
/// natively (`f32::max` drops it): callers that must keep NaN multiply by x, as the
/// activations do.
#[inline(always)]
pub(crate) fn exp(x: F32x4) -> F32x4 {
    let x = x.clamp(-87.0, 88.0);
    let n = x.mul(F32x4::splat(std::f32::consts::LOG2_E)).round();
    // ln 2 in two parts, so that n·ln 2 is exact to f32 precision.
    let r = x.sub(n.mul(F32x4::splat(0.693_145_75))).sub(n.mul(F32x4::splat(1.428_606_8e-6)));
    let mut poly = F32x4::splat(1.0 / 720.0);
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        poly = F32x4::splat(c).mul_add(poly, r);
    }
    poly.mul(n.pow2())
}

/// Sixteen values as four vectors.
#[inline(always)]
fn quarters(values: &[f32; 16]) -> [F32x4; 4] {
    let [q0, q1, q2, q3] = values.as_chunks::<4>().0 else { unreachable!("16 values are four chunks of 4") };
    [F32x4::load(q0), F32x4::load(q1), F32x4::load(q2), F32x4::load(q3)]
}
