//! Four f32 lanes: wasm SIMD128 in the browser, a plain array elsewhere (which LLVM turns
//! into SSE/NEON at the native build's opt-level 3).
//!
//! Explicit, because the browser build is optimized for size (opt-level "s"), at which rustc
//! does not auto-vectorize; and the whole crate at opt-level 3 would put the wasm over its
//! 1 MB budget. The hot loops of the host kernels (matmul blocks and dot products, which
//! attention uses too) use this type; the rest stay plain loops.

#[cfg(target_arch = "wasm32")]
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

        /// self + a·b.
        #[inline(always)]
        pub fn mul_add(self, a: F32x4, b: F32x4) -> Self {
            F32x4(f32x4_add(self.0, f32x4_mul(a.0, b.0)))
        }

        #[inline(always)]
        pub fn to_array(self) -> [f32; 4] {
            [f32x4_extract_lane::<0>(self.0), f32x4_extract_lane::<1>(self.0), f32x4_extract_lane::<2>(self.0), f32x4_extract_lane::<3>(self.0)]
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
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

/// Σ a·b over the common length, four lanes at a time.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let len = a.len().min(b.len());
    let ((a4, a_tail), (b4, b_tail)) = (a[..len].as_chunks::<4>(), b[..len].as_chunks::<4>());
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    let acc = a4.iter().zip(b4).fold(F32x4::zero(), |acc, (x, y)| acc.mul_add(F32x4::load(x), F32x4::load(y)));
    acc.sum() + tail
}
