//! A's rows quantized on the fly for the integer products of q8 and q4 weights: symmetric
//! codes in the blocks of 32 the weights use, one f32 scale a block (the block's largest
//! magnitude over the largest code), codes rounded to even. In i8 for the products of a few
//! rows (`int8`), in i16 or i8 for the tiles of many (`integer_gemm`). With AVX2, a block is
//! quantized in four vectors; elsewhere in plain loops — the same numbers bit for bit (the
//! same division, the same clamp, the same rounding).

use super::{each_chunk_pair, scratch, Threads, MIN_SPLIT_VALUES};
use crate::error::Result;
use crate::quantize::BLOCK;

/// A code activations quantize to.
pub(super) trait Code: Copy + Default + Send + Sync {
    /// The largest code: codes are symmetric, −MAX..=MAX.
    const MAX: f32;
    /// `v`, already rounded and within ±MAX, as a code.
    fn from_rounded(v: f32) -> Self;
}

impl Code for i8 {
    const MAX: f32 = 127.0;
    fn from_rounded(v: f32) -> i8 {
        v as i8
    }
}

impl Code for i16 {
    const MAX: f32 = 32767.0;
    fn from_rounded(v: f32) -> i16 {
        v as i16
    }
}

/// Rows of A in blocks of 32 codes: `codes` [rows, blocks · 32] (zeros past K), `scales`
/// [rows, blocks].
pub(super) struct QuantizedRows<C> {
    pub codes: Vec<C>,
    pub scales: Vec<f32>,
    pub blocks: usize,
}

impl<C: Code> QuantizedRows<C> {
    /// Quantizes rows 0..m of `a` (stride `a_rs`), K values each, over `threads`.
    pub fn new(threads: Option<Threads<'_>>, a: &[f32], a_rs: usize, m: usize, k: usize) -> Result<QuantizedRows<C>> {
        let blocks = k.div_ceil(BLOCK);
        let mut codes = crate::limits::zeroed_vec(|| "a host kernel's quantized activations".into(), m * blocks * BLOCK)?;
        let mut scales = scratch(m * blocks)?;
        let band = (MIN_SPLIT_VALUES / (blocks * BLOCK).max(1)).max(1);
        each_chunk_pair(threads, (&mut codes, band * blocks * BLOCK), (&mut scales, band * blocks), |t, codes, scales| {
            quantize_rows(&a[t * band * a_rs..], a_rs, k, codes, scales);
            Ok(())
        })?;
        Ok(QuantizedRows { codes, scales, blocks })
    }
}

/// Quantizes as many rows of `a` (stride `a_rs`, K values each) as `scales` has rows of
/// blocks into `codes` [rows, blocks · 32] and `scales` [rows, blocks], writing every code
/// (zeros past K), so that the buffers may hold anything before. A block holding a NaN or an
/// infinity gets a NaN scale (and zero codes), so that the products it enters are NaN, as in
/// f32.
pub(super) fn quantize_rows<C: Code>(a: &[f32], a_rs: usize, k: usize, codes: &mut [C], scales: &mut [f32]) {
    let blocks = k.div_ceil(BLOCK);
    if blocks == 0 {
        return;
    }
    for (r, (row_codes, row_scales)) in codes.chunks_exact_mut(blocks * BLOCK).zip(scales.chunks_exact_mut(blocks)).enumerate() {
        let row = &a[r * a_rs..][..k];
        for ((block_codes, scale), values) in row_codes.chunks_exact_mut(BLOCK).zip(row_scales).zip(row.chunks(BLOCK)) {
            *scale = quantize_block(values, block_codes);
        }
    }
}

/// Codes of `values` (at most 32) in −MAX..=MAX into the block's 32 `codes`; returns their
/// scale. Whole blocks take AVX2 where the CPU has it.
#[inline]
fn quantize_block<C: Code>(values: &[f32], codes: &mut [C]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let (Ok(values), Ok(codes)) = (<&[f32; BLOCK]>::try_from(values), <&mut [C; BLOCK]>::try_from(&mut *codes)) {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::quantize_block(values, codes) };
        }
    }
    quantize_block_portable(values, codes)
}

/// `quantize_block` in plain loops (the reference the AVX2 path matches). Division (not
/// multiplication by 1/scale, which overflows for subnormal scales) and ties to even, so
/// that every build quantizes alike.
fn quantize_block_portable<C: Code>(values: &[f32], codes: &mut [C]) -> f32 {
    codes.fill(C::default());
    let largest = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    if !largest.is_finite() || values.iter().any(|v| v.is_nan()) {
        return f32::NAN;
    }
    let scale = largest / C::MAX;
    if scale > 0.0 {
        // Adding and taking away 1.5 · 2^23 rounds |x| < 2^22 to the nearest integer, ties to
        // even, as round_ties_even does, in a loop that vectorizes on any x86-64 (which has no
        // rounding instruction before SSE4.1: round_ties_even is a call to rintf there).
        const ROUND: f32 = 12_582_912.0;
        for (code, &v) in codes.iter_mut().zip(values) {
            *code = C::from_rounded((v / scale).clamp(-C::MAX, C::MAX) + ROUND - ROUND);
        }
    }
    scale
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Code, BLOCK};
    use std::arch::x86_64::*;

    /// `quantize_block` on a whole block with AVX2: the 32 values in four vectors, their
    /// largest magnitude by a tree of maxima, codes divided, clamped and converted (rounding
    /// to even, the default mode), packed to i16 or i8 in order.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_block<C: Code>(values: &[f32; BLOCK], codes: &mut [C; BLOCK]) -> f32 {
        // SAFETY: 32 floats; loadu has no alignment requirement.
        let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(values.as_ptr().add(8 * i)) });
        let magnitudes = v.map(|v| _mm256_andnot_ps(_mm256_set1_ps(-0.0), v));
        // NaN or ±∞: a magnitude not ≤ f32::MAX (unordered compares are true for NaN).
        let non_finite = magnitudes.iter().fold(_mm256_setzero_ps(), |any, &m| _mm256_or_ps(any, _mm256_cmp_ps::<_CMP_NLE_UQ>(m, _mm256_set1_ps(f32::MAX))));
        let largest = _mm256_max_ps(_mm256_max_ps(magnitudes[0], magnitudes[1]), _mm256_max_ps(magnitudes[2], magnitudes[3]));
        let largest = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps::<1>(largest));
        let largest = _mm_max_ps(largest, _mm_movehl_ps(largest, largest));
        let largest = _mm_cvtss_f32(_mm_max_ss(largest, _mm_shuffle_ps::<1>(largest, largest)));
        // A NaN scale for a block with a NaN or ±∞; 0 (and zero codes) for one of zeros.
        let scale = if _mm256_movemask_ps(non_finite) != 0 { f32::NAN } else { largest / C::MAX };
        if scale.is_nan() || scale == 0.0 {
            *codes = [C::default(); BLOCK];
            return scale;
        }
        let (divisor, high, low) = (_mm256_set1_ps(scale), _mm256_set1_ps(C::MAX), _mm256_set1_ps(-C::MAX));
        let q = v.map(|v| _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(_mm256_div_ps(v, divisor), high), low)));
        // packs works within 128-bit halves: i32 → i16 leaves 64-bit runs of 4 codes as
        // (q0 0..4, q1 0..4, q0 4..8, q1 4..8), which a permutation puts in order; i16 → i8
        // leaves 32-bit runs (q0, q1, q2, q3 0..4, then 4..8), likewise.
        let (first, second) = (_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        let out = codes.as_mut_ptr().cast::<__m256i>();
        // SAFETY: `codes` is 32 i16s (64 bytes) or 32 i8s (32 bytes), as C's size says;
        // storeu has no alignment requirement.
        unsafe {
            if size_of::<C>() == 2 {
                _mm256_storeu_si256(out, _mm256_permute4x64_epi64::<0b11_01_10_00>(first));
                _mm256_storeu_si256(out.add(1), _mm256_permute4x64_epi64::<0b11_01_10_00>(second));
            } else {
                let bytes = _mm256_packs_epi16(first, second);
                _mm256_storeu_si256(out, _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            }
        }
        scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    #[test]
    fn activations_quantize_in_blocks_and_non_finite_blocks_are_nan() {
        let values: Vec<f32> = (0..40).map(|i| (i as f32 - 20.0) / 8.0).collect();
        let rows = QuantizedRows::<i8>::new(None, &values, 40, 1, 40).unwrap();
        assert_eq!(rows.scales.len(), 2);
        assert_eq!((rows.scales[0], rows.codes[0]), (2.5 / 127.0, -127), "the block's largest magnitude is code ±127");
        assert!(rows.codes[40..].iter().all(|&c| c == 0), "padding past K is zero");
        for (i, (&code, &v)) in rows.codes.iter().zip(&values).enumerate() {
            let back = code as f32 * rows.scales[i / BLOCK];
            assert!((back - v).abs() <= rows.scales[i / BLOCK] / 2.0 + 1e-7, "element {i}: {back} for {v}");
        }
        for bad in [f32::NAN, f32::INFINITY] {
            let mut values = values.clone();
            values[35] = bad;
            let rows = QuantizedRows::<i8>::new(None, &values, 40, 1, 40).unwrap();
            assert!(rows.scales[1].is_nan() && !rows.scales[0].is_nan(), "{bad}");
        }
    }

    /// Blocks of every kind: random magnitudes, exact ties (halves of the scale), zeros,
    /// subnormals, the largest floats, NaN, ±∞.
    fn blocks(rng: &mut StdRng) -> Vec<[f32; BLOCK]> {
        let mut blocks: Vec<[f32; BLOCK]> =
            (0..200).map(|_| std::array::from_fn(|_| rng.random_range(-3.0..3.0) * 10f32.powi(rng.random_range(-6..6)))).collect();
        // Largest 127 (or 32767): k + 0.5 are ties in code units.
        blocks.push(std::array::from_fn(|i| if i == 0 { 127.0 } else { i as f32 + 0.5 }));
        blocks.push(std::array::from_fn(|i| if i == 0 { 32767.0 } else { 1000.0 * i as f32 + 0.5 }));
        blocks.push([0.0; BLOCK]);
        blocks.push(std::array::from_fn(|i| if i % 3 == 0 { f32::from_bits(i as u32 + 1) } else { 0.0 }));
        blocks.push(std::array::from_fn(|i| if i % 2 == 0 { f32::MAX } else { -f32::MAX / (i as f32) }));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            blocks.push(std::array::from_fn(|i| if i == 17 { bad } else { i as f32 }));
        }
        blocks
    }

    fn every_path_quantizes_as_plain_loops<C: Code + PartialEq + std::fmt::Debug>() {
        let mut rng = StdRng::seed_from_u64(3);
        for values in blocks(&mut rng) {
            let (mut want, mut got) = ([C::default(); BLOCK], [C::from_rounded(1.0); BLOCK]);
            let want_scale = quantize_block_portable(&values, &mut want);
            let got_scale = quantize_block(&values, &mut got);
            assert_eq!((got_scale.to_bits(), got), (want_scale.to_bits(), want), "{values:?}");
        }
    }

    #[test]
    fn every_path_quantizes_as_plain_loops_bit_for_bit() {
        every_path_quantizes_as_plain_loops::<i8>();
        every_path_quantizes_as_plain_loops::<i16>();
    }

    #[test]
    fn every_code_is_written_whatever_the_buffer_held() {
        // K = 40: the second block has 8 values and 24 codes of padding.
        let values: Vec<f32> = (0..80).map(|i| if i < 40 { i as f32 } else { f32::NAN }).collect();
        let (mut codes, mut scales) = (vec![99i16; 4 * BLOCK], vec![5f32; 4]);
        quantize_rows(&values, 40, 40, &mut codes, &mut scales);
        let fresh = QuantizedRows::<i16>::new(None, &values, 40, 2, 40).unwrap();
        assert_eq!(codes, fresh.codes);
        let bits = |scales: &[f32]| scales.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&scales), bits(&fresh.scales));
    }
}
